//! Source documents (table `source_documents`): the document each stored object was translated
//! from, kept so that a build whose derivation of a kind changed re-derives it from the volume
//! alone, without the source (ARCHITECTURE.md, `storage`: upgrades keep
//! serving).
//!
//! | key | value |
//! |---|---|
//! | `kind u8 · Key(namespace, name)` (the `sources` key) | the document's compact JSON, compressed ([`Dictionaries::encode`]): a zstd frame, or `0x01 · dictionary id u32 LE ·` a zstd frame made with that dictionary of its kind |
//!
//! **Dictionaries** (table `document_dictionaries`: `kind u8` → postcard `(id, bytes)`). Documents
//! of one kind share their structure, which a small document compresses badly alone: a
//! dictionary is trained from the first [`TRAIN_SAMPLES`] documents of a kind the sources encode
//! with the store's dictionaries (by the encode of the last of them, or on a thread it starts:
//! [`Dictionaries::encode`]), and every later document of the kind is compressed with it (about
//! four times smaller). The dictionary is stored by the first commit that follows, the one of
//! the first document compressed with it at the latest ([`crate::Store::write`]). A store that
//! holds [`TRAIN_AFTER`] documents of a kind without a dictionary (written by a build before
//! dictionaries, or by processes none of which read enough of the kind) trains one from them
//! (off the writer: [`crate::Store::train_dictionaries`]).
//! A kind has one dictionary for good; the documents written before it are recompressed with
//! it, a short transaction at a time, once per store ([`crate::Store::recompress_documents`]).
//! Snapshots carry the dictionaries with the documents.
//!
//! **What is kept.** The document as the source handed it to translation, without what no
//! translation reads and Kubernetes adds in bulk: `metadata.managedFields` and the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation ([`document_json`]). JSON is
//! the form every build reads: a document written by one build is translated by any later one.
//!
//! **When.** The write path stores an object's document with its source entry (a new or changed
//! source version) and removes both together, so a store written by this build holds a document
//! for every source entry of a kind once every object of it was written by it
//! ([`crate::ReadView::documents_complete`]); stores written before documents were kept hold
//! none. Documents are not read-model data: no revision moves for them alone.

use crate::StorageError;
use redb::{ReadableDatabase, TableDefinition};
use schema::KindId;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// `source_documents`: the source document of each source entry.
pub const DOCUMENTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("source_documents");

/// The largest document decoded, in bytes: far above what a source hands over
/// (`source.maxDocumentBytes` defaults to 1.5 MiB), it bounds what a damaged or hostile value may
/// expand to.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;

/// zstd level of stored documents: the fastest, since documents are compressed on the sources'
/// threads for every object written.
const LEVEL: i32 = 1;

/// The compact JSON of `doc` as kept ([`document_json`]), compressed without a dictionary.
pub fn encode(doc: &Value) -> Vec<u8> {
    compress(&document_json(doc))
}

fn compress(json: &[u8]) -> Vec<u8> {
    // Compressing bytes in memory does not fail; if it did, the JSON is kept as it is.
    compress_frame(json, None, Vec::new()).unwrap_or_else(|_| json.to_vec())
}

std::thread_local! {
    /// A compression context per thread, made once: making one per document (zstd allocates
    /// and clears its tables each time) cost a tenth of a load's scan.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::zstd_safe::CCtx<'static>>> = const { std::cell::RefCell::new(None) };
}

/// Appends to `out` one zstd frame of `json` at [`LEVEL`] (with the prepared dictionary `cdict`,
/// if any), compressed on this thread's context. The frame states its content size, as
/// [`decompress`] requires.
fn compress_frame(json: &[u8], cdict: Option<&zstd::zstd_safe::CDict<'_>>, mut out: Vec<u8>) -> Result<Vec<u8>, String> {
    let start = out.len();
    out.resize(start + zstd::zstd_safe::compress_bound(json.len()), 0);
    let written = COMPRESSOR
        .with(|cell| {
            let mut cell = cell.borrow_mut();
            let context = cell.get_or_insert_with(zstd::zstd_safe::CCtx::create);
            let frame = &mut out[start..];
            match cdict {
                Some(cdict) => context.compress_using_cdict(frame, json, cdict),
                None => context.compress(frame, json, LEVEL),
            }
        })
        .map_err(|code| zstd::zstd_safe::get_error_name(code).to_string())?;
    out.truncate(start + written);
    Ok(out)
}

/// `json` compressed with the dictionary `d` (tagged with its id).
fn compress_with(d: &Dictionary, json: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.push(WITH_DICTIONARY);
    out.extend_from_slice(&d.id.to_le_bytes());
    compress_frame(json, Some(d.encoder.as_cdict()), out).unwrap_or_else(|_| compress(json))
}

/// The `meta` key marking that `kind`'s documents were all recompressed with its dictionary.
fn recompressed_key(kind: KindId) -> String {
    format!("documents_recompressed:{}", kind.name())
}

/// The tag of a document compressed with its kind's dictionary.
const WITH_DICTIONARY: u8 = 0x01;

/// Once the store holds this many documents of a kind without a dictionary, its dictionary is
/// trained from them ([`crate::Store::train_dictionaries`]).
pub const TRAIN_AFTER: u64 = 500;

/// Documents a dictionary is trained from: the first the sources encode, or the first stored in
/// key order. Twice as many train a dictionary that compresses 1–5 % smaller, in twice the
/// time, on the scan's thread (BENCHMARKS.md, "Dictionaries from 1,000 documents" and "A load
/// compresses each document once").
pub const TRAIN_SAMPLES: usize = TRAIN_AFTER as usize;

/// The largest document taken as a sample, in bytes: a larger one is not kept as one.
pub const MAX_SAMPLE_BYTES: usize = 64 << 10;

/// The most bytes of samples kept for one kind: a kind is trained once it has [`TRAIN_SAMPLES`]
/// samples or this many bytes of them (a hundred times the dictionary's size is what zstd asks).
pub const MAX_SAMPLES_BYTES: usize = 4 << 20;

/// The stored documents of a kind the store's own training looks at, at most, for its samples
/// ([`crate::Store::train_dictionaries`]).
const STORED_LOOKED_AT: usize = 10 * TRAIN_SAMPLES;

/// The most bytes of samples kept for every kind together, those being trained included: a
/// document that would pass it is not kept (a kind that never has enough documents keeps its
/// samples for the life of the process).
pub const MAX_ALL_SAMPLES_BYTES: usize = 32 << 20;

/// The size of a trained dictionary, in bytes.
const DICTIONARY_BYTES: usize = 32 << 10;

/// The first bytes of a trained zstd dictionary.
const DICTIONARY_MAGIC: [u8; 4] = 0xEC30_A437u32.to_le_bytes();

/// Documents recompressed per write transaction by [`crate::Store::recompress_documents`] (a
/// few milliseconds of the writer's time).
const RECOMPRESS_CHUNK: usize = 500;

/// Documents [`crate::Store::recompress_documents`] looks at per call, at most.
const RECOMPRESS_SCAN: usize = 20 * RECOMPRESS_CHUNK;

/// The largest dictionary a store or a snapshot may hold, in bytes.
pub const MAX_DICTIONARY_BYTES: usize = 1 << 20;

/// The id of the dictionary a stored document was compressed with (`None`: alone).
pub(crate) fn dictionary_of(stored: &[u8]) -> Option<u32> {
    match stored {
        [WITH_DICTIONARY, a, b, c, d, ..] => Some(u32::from_le_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// The length of the JSON of the stored document `stored`, as its frame states it (`None`: a
/// frame that does not).
fn json_len(stored: &[u8]) -> Option<u64> {
    let frame = match stored {
        [WITH_DICTIONARY, _, _, _, _, frame @ ..] => frame,
        [b'{', ..] => return Some(stored.len() as u64),
        frame => frame,
    };
    zstd::zstd_safe::get_frame_content_size(frame).ok().flatten()
}

/// `document_dictionaries`: per kind, its dictionary's id and bytes.
pub const DICTIONARIES: TableDefinition<u8, &[u8]> = TableDefinition::new("document_dictionaries");

/// One kind's dictionary, prepared for both directions.
struct Dictionary {
    id: u32,
    bytes: Vec<u8>,
    encoder: zstd::dict::EncoderDictionary<'static>,
    decoder: zstd::dict::DecoderDictionary<'static>,
    /// Whether a commit has written it to `document_dictionaries` (a dictionary trained from
    /// the sources' documents is not, until the next commit).
    stored: AtomicBool,
}

/// The document dictionaries of a store, per kind (see the module docs). Cheap to clone: the
/// sources encode documents with it on their own threads, and see a dictionary once trained.
#[derive(Clone, Default)]
pub struct Dictionaries {
    trained: Arc<RwLock<HashMap<KindId, Arc<Dictionary>>>>,
    /// The samples of the kinds without a dictionary, as the sources encode their documents:
    /// the store's own dictionaries only ([`Dictionaries::sampling`]); a copy made elsewhere
    /// (`Dictionaries::default()`) compresses documents alone until it is given one.
    samples: Option<Arc<Sampling>>,
    /// Whether a dictionary is trained on a thread of its own rather than by the encode that
    /// completes its samples ([`Dictionaries::training_in_background`]).
    background: bool,
}

/// The samples of a store's dictionaries ([`Dictionaries::encode`]).
struct Sampling {
    /// Per kind code: whether no more samples of it are kept (taken to train, or the kind has a
    /// dictionary): read without the lock for every document encoded.
    done: Vec<AtomicBool>,
    state: Mutex<SamplingState>,
}

#[derive(Default)]
struct SamplingState {
    kinds: HashMap<KindId, Samples>,
    /// Bytes of every sample kept or being trained from (at most [`MAX_ALL_SAMPLES_BYTES`]).
    bytes: usize,
    /// The threads training a dictionary ([`Dictionaries::wait_for_training`]).
    training: Vec<std::thread::JoinHandle<()>>,
}

/// One kind's samples: what the sources encode ([`Dictionaries::encode`]) or the store holds
/// ([`crate::Store::train_dictionaries`]), bounded alike.
#[derive(Default)]
struct Samples {
    documents: Vec<Vec<u8>>,
    bytes: usize,
}

impl Samples {
    /// Whether a document of `len` bytes may be a sample (at most [`MAX_SAMPLE_BYTES`]).
    fn takes(len: u64) -> bool {
        len <= MAX_SAMPLE_BYTES as u64
    }

    fn push(&mut self, json: Vec<u8>) {
        self.bytes += json.len();
        self.documents.push(json);
    }

    /// Whether they are enough to train from: [`TRAIN_SAMPLES`] of them, or
    /// [`MAX_SAMPLES_BYTES`].
    fn complete(&self) -> bool {
        self.documents.len() >= TRAIN_SAMPLES || self.bytes >= MAX_SAMPLES_BYTES
    }
}

impl Dictionaries {
    /// Dictionaries that train a kind's from the first documents encoded with them: the
    /// store's own.
    pub(crate) fn sampling() -> Dictionaries {
        let done = (0..=u8::MAX).map(|_| AtomicBool::new(false)).collect();
        Dictionaries { samples: Some(Arc::new(Sampling { done, state: Mutex::default() })), ..Dictionaries::default() }
    }

    /// These dictionaries, training a kind's on a thread of its own: for callers that must not
    /// wait for a training (the kube source encodes on the async runtime's threads). Documents
    /// encoded meanwhile are compressed alone.
    pub fn training_in_background(mut self) -> Dictionaries {
        self.background = true;
        self
    }

    /// Blocks until every dictionary being trained on a thread of its own
    /// ([`Dictionaries::training_in_background`]) is trained (or failed to); a training by an
    /// encode on another thread is not waited for. A barrier for tests.
    pub fn wait_for_training(&self) {
        let Some(sampling) = &self.samples else { return };
        let threads = std::mem::take(&mut sampling.state.lock().unwrap_or_else(|e| e.into_inner()).training);
        for thread in threads {
            let _ = thread.join();
        }
    }

    /// Keeps no more samples of `kind`, and drops those kept: it has a dictionary.
    fn stop_sampling(&self, kind: KindId) {
        let Some(sampling) = &self.samples else { return };
        sampling.done[usize::from(kind.code())].store(true, Ordering::Release);
        let mut state = sampling.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dropped) = state.kinds.remove(&kind) {
            state.bytes -= dropped.bytes;
        }
    }

    fn get(&self, kind: KindId) -> Option<Arc<Dictionary>> {
        self.trained.read().unwrap_or_else(|e| e.into_inner()).get(&kind).cloned()
    }

    /// Whether `kind` has a dictionary.
    pub fn has(&self, kind: KindId) -> bool {
        self.get(kind).is_some()
    }

    /// The kinds with a dictionary, with its id and bytes (for snapshots).
    pub(crate) fn all(&self) -> Vec<(KindId, u32, Vec<u8>)> {
        let map = self.trained.read().unwrap_or_else(|e| e.into_inner());
        KindId::ALL.iter().filter_map(|k| map.get(k).map(|d| (*k, d.id, d.bytes.clone()))).collect()
    }

    /// Adds `kind`'s dictionary, read from a store or a snapshot (stored).
    ///
    /// # Errors
    /// [`StorageError::Corrupt`] when zstd cannot prepare it.
    pub(crate) fn insert(&self, kind: KindId, id: u32, bytes: Vec<u8>) -> Result<(), StorageError> {
        let d = Self::prepare(kind, id, bytes, true)?;
        {
            let mut map = self.trained.write().unwrap_or_else(|e| e.into_inner());
            // Documents may be compressed with one not stored yet: it is never replaced.
            if map.get(&kind).is_some_and(|old| !old.stored.load(Ordering::Acquire) && (old.id, &old.bytes) != (d.id, &d.bytes)) {
                return Err(StorageError::Corrupt(format!("{} document dictionary: another is in use and not stored yet", kind.name())));
            }
            map.insert(kind, d);
        }
        self.stop_sampling(kind);
        Ok(())
    }

    /// Adds `kind`'s dictionary, just trained and not stored yet, unless the kind has one
    /// already (trained meanwhile by another thread); returns whether it was added. The next
    /// commit stores it ([`Dictionaries::store_new`]).
    ///
    /// # Errors
    /// [`StorageError::Corrupt`] when zstd cannot prepare it.
    pub(crate) fn insert_trained(&self, kind: KindId, bytes: Vec<u8>) -> Result<bool, StorageError> {
        let d = Self::prepare(kind, 1, bytes, false)?;
        let added = match self.trained.write().unwrap_or_else(|e| e.into_inner()).entry(kind) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(d);
                true
            }
        };
        self.stop_sampling(kind);
        Ok(added)
    }

    /// Writes to `document_dictionaries` of `txn` every dictionary not stored yet; returns
    /// their kinds, to pass to [`Dictionaries::mark_stored`] once `txn` is committed. Every write
    /// transaction that stores documents calls it after its last one, so a dictionary is
    /// committed with the first document compressed with it. A kind's recompression pass is
    /// due again with a new dictionary ([`crate::Store::documents_recompressed`] is per
    /// dictionary: one trained anew for a damaged one finds documents compressed alone).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub(crate) fn store_new(&self, txn: &redb::WriteTransaction) -> Result<Vec<KindId>, StorageError> {
        let new: Vec<(KindId, Arc<Dictionary>)> = {
            let map = self.trained.read().unwrap_or_else(|e| e.into_inner());
            map.iter().filter(|(_, d)| !d.stored.load(Ordering::Acquire)).map(|(k, d)| (*k, d.clone())).collect()
        };
        if new.is_empty() {
            return Ok(Vec::new());
        }
        let mut table = txn.open_table(DICTIONARIES)?;
        let mut meta = txn.open_table(crate::tables::META)?;
        for (kind, d) in &new {
            table.insert(kind.code(), crate::codec::encode(&(d.id, &d.bytes)).as_slice())?;
            meta.remove(recompressed_key(*kind).as_str())?;
        }
        Ok(new.into_iter().map(|(k, _)| k).collect())
    }

    /// Marks the dictionaries of `kinds` as stored: the transaction [`Dictionaries::store_new`]
    /// wrote them in is committed.
    pub(crate) fn mark_stored(&self, kinds: &[KindId]) {
        let map = self.trained.read().unwrap_or_else(|e| e.into_inner());
        for kind in kinds {
            if let Some(d) = map.get(kind) {
                d.stored.store(true, Ordering::Release);
            }
        }
    }

    fn prepare(kind: KindId, id: u32, bytes: Vec<u8>, stored: bool) -> Result<Arc<Dictionary>, StorageError> {
        let bad = |e: std::io::Error| StorageError::Corrupt(format!("{} document dictionary: {e}", kind.name()));
        if bytes.len() > MAX_DICTIONARY_BYTES {
            return Err(StorageError::Corrupt(format!(
                "{} document dictionary of {} bytes, larger than {MAX_DICTIONARY_BYTES}",
                kind.name(),
                bytes.len()
            )));
        }
        // zstd would take any bytes as a raw-content dictionary; a trained one starts with its magic.
        if !bytes.starts_with(&DICTIONARY_MAGIC) {
            return Err(StorageError::Corrupt(format!("{} document dictionary: not a trained zstd dictionary", kind.name())));
        }
        let encoder = zstd::dict::EncoderDictionary::try_copy(&bytes, LEVEL).map_err(bad)?;
        let decoder = zstd::dict::DecoderDictionary::try_copy(&bytes).map_err(bad)?;
        Ok(Arc::new(Dictionary { id, bytes, encoder, decoder, stored: AtomicBool::new(stored) }))
    }

    /// Reads every dictionary of `t` (a damaged one is logged and left out).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub(crate) fn read(t: &impl redb::ReadableTable<u8, &'static [u8]>) -> Result<Dictionaries, StorageError> {
        let out = Dictionaries::default();
        for item in t.iter()? {
            let (k, v) = item?;
            let Some(kind) = KindId::from_code(k.value()) else { continue };
            // A damaged dictionary leaves its documents unreadable (each then a damaged document),
            // never the store.
            match crate::codec::decode::<(u32, Vec<u8>)>(v.value(), "document dictionary").and_then(|(id, b)| out.insert(kind, id, b)) {
                Ok(()) => {}
                Err(e) => {
                    tracing::error!(kind = kind.name(), error = %e, "a stored document dictionary is damaged; the documents written with it cannot be read")
                }
            }
        }
        Ok(out)
    }

    /// The compact JSON of `doc` of `kind` as kept ([`document_json`]), compressed with the
    /// kind's dictionary when it has one.
    ///
    /// The store's own dictionaries ([`crate::Store::dictionaries`]) keep a copy of the first
    /// [`TRAIN_SAMPLES`] documents of a kind without a dictionary that they encode (at most
    /// [`MAX_SAMPLES_BYTES`] of a kind and [`MAX_ALL_SAMPLES_BYTES`] in all, none above
    /// [`MAX_SAMPLE_BYTES`]); the call that completes a kind's trains its dictionary from them
    /// (25–45 ms for 500 documents of 1–2 KiB, up to 0.4 s for 4 MiB), once per kind and
    /// process, and compresses with it; with [`Dictionaries::training_in_background`], a thread
    /// started then trains it, and documents encoded meanwhile are compressed alone (compressed
    /// again with the dictionary by the writer, `Dictionaries::with_dictionary`, or during a
    /// load by the recompression pass after it, [`crate::Store::set_loading`]). Samples
    /// that train none are logged; the kind's documents are then compressed alone unless the
    /// store trains one from those it holds ([`crate::Store::train_dictionaries`]).
    pub fn encode(&self, kind: KindId, doc: &Value) -> Vec<u8> {
        self.encode_json(kind, &document_json(doc))
    }

    /// [`Dictionaries::encode`] of a document whose JSON as kept ([`document_json`]) is `json`.
    pub fn encode_json(&self, kind: KindId, json: &[u8]) -> Vec<u8> {
        if let Some(d) = self.get(kind) {
            return compress_with(&d, json);
        }
        self.sample(kind, json);
        self.compress(kind, json)
    }

    /// Keeps `json` as a sample of `kind`, and trains the kind's dictionary (or starts a thread
    /// that does) when it completes them ([`Dictionaries::encode`]).
    fn sample(&self, kind: KindId, json: &[u8]) {
        let Some(sampling) = &self.samples else { return };
        let done = &sampling.done[usize::from(kind.code())];
        if done.load(Ordering::Acquire) || !Samples::takes(json.len() as u64) {
            return;
        }
        let mut state = sampling.state.lock().unwrap_or_else(|e| e.into_inner());
        if done.load(Ordering::Acquire) || state.bytes + json.len() > MAX_ALL_SAMPLES_BYTES {
            return;
        }
        state.bytes += json.len();
        let s = state.kinds.entry(kind).or_default();
        s.push(json.to_vec());
        if !s.complete() {
            return;
        }
        done.store(true, Ordering::Release);
        let Some(due) = state.kinds.remove(&kind) else { return };
        if !self.background {
            drop(state);
            return self.train(kind, due);
        }
        let (this, bytes) = (self.clone(), due.bytes);
        let spawned = std::thread::Builder::new().name("cp-dictionary-training".into()).spawn(move || this.train(kind, due));
        state.training.retain(|t| !t.is_finished());
        match spawned {
            Ok(thread) => state.training.push(thread),
            Err(e) => {
                state.bytes -= bytes;
                tracing::warn!(kind = kind.name(), error = %e, documents = TRAIN_AFTER, "no thread to train a document dictionary; the store trains one once it holds this many of the kind's documents")
            }
        }
    }

    /// Trains `kind`'s dictionary from `samples` and makes it the kind's, unless it has one;
    /// returns whether it did.
    ///
    /// # Errors
    /// zstd's message when the samples train none, or the dictionary cannot be prepared.
    fn train_from(&self, kind: KindId, samples: &Samples) -> Result<bool, String> {
        let bytes = zstd::dict::from_samples(&samples.documents, DICTIONARY_BYTES).map_err(|e| e.to_string())?;
        self.insert_trained(kind, bytes).map_err(|e| e.to_string())
    }

    /// [`Dictionaries::train_from`] the sources' samples, logged; frees their bytes.
    fn train(&self, kind: KindId, samples: Samples) {
        match self.train_from(kind, &samples) {
            Ok(true) => tracing::info!(
                kind = kind.name(),
                samples = samples.documents.len(),
                "document dictionary trained from the first documents read: the kind's documents are stored smaller"
            ),
            Ok(false) => {}
            Err(e) => tracing::warn!(kind = kind.name(), error = %e, "no document dictionary trained; its documents are compressed alone"),
        }
        if let Some(sampling) = &self.samples {
            sampling.state.lock().unwrap_or_else(|e| e.into_inner()).bytes -= samples.bytes;
        }
    }

    /// The kinds with a dictionary.
    pub fn kinds(&self) -> Vec<KindId> {
        let map = self.trained.read().unwrap_or_else(|e| e.into_inner());
        KindId::ALL.iter().copied().filter(|k| map.contains_key(k)).collect()
    }

    /// `stored` (a stored document of `kind`) compressed with the kind's dictionary: as it is
    /// when it already is, when the kind has none, or when it does not decode (a document
    /// prepared before the dictionary was trained, stored after).
    pub(crate) fn with_dictionary<'a>(&self, kind: KindId, stored: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        if dictionary_of(stored).is_some() || !self.has(kind) {
            return std::borrow::Cow::Borrowed(stored);
        }
        match self.decode(kind, stored) {
            Ok(json) => std::borrow::Cow::Owned(self.compress(kind, &json)),
            Err(_) => std::borrow::Cow::Borrowed(stored),
        }
    }

    /// `json` (a document's JSON text) compressed with `kind`'s dictionary when it has one.
    fn compress(&self, kind: KindId, json: &[u8]) -> Vec<u8> {
        match self.get(kind) {
            Some(d) => compress_with(&d, json),
            None => compress(json),
        }
    }

    /// The JSON text of a stored document of `kind`.
    ///
    /// # Errors
    /// [`StorageError::Corrupt`] when it does not decompress within [`MAX_DOCUMENT_BYTES`], or
    /// names a dictionary the kind does not have.
    pub fn decode(&self, kind: KindId, bytes: &[u8]) -> Result<Vec<u8>, StorageError> {
        let corrupt = |e: String| StorageError::Corrupt(format!("source document: {e}"));
        match bytes {
            [WITH_DICTIONARY, a, b, c, d, frame @ ..] => {
                let id = u32::from_le_bytes([*a, *b, *c, *d]);
                let dict =
                    self.get(kind).filter(|dict| dict.id == id).ok_or_else(|| corrupt(format!("no dictionary {id} of {}", kind.name())))?;
                decompress(frame, Some(dict.decoder.as_ddict())).map_err(corrupt)
            }
            [b'{', ..] => Ok(bytes.to_vec()),
            _ => decompress(bytes, None).map_err(corrupt),
        }
    }
}

std::thread_local! {
    /// A decompression context per thread, made once: making one per document cost as much
    /// as the decompression (histories decompress a document per revision they show).
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::zstd_safe::DCtx<'static>>> = const { std::cell::RefCell::new(None) };
}

/// Decompresses one zstd `frame` (with the prepared dictionary `ddict`, if any) on this thread's
/// context; at most [`MAX_DOCUMENT_BYTES`], which a frame must state.
fn decompress(frame: &[u8], ddict: Option<&zstd::zstd_safe::DDict<'_>>) -> Result<Vec<u8>, String> {
    let size = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(size)) => size,
        Ok(None) => return Err("the frame does not state its size".into()),
        Err(_) => return Err("not a zstd frame".into()),
    };
    if size > MAX_DOCUMENT_BYTES as u64 {
        return Err(format!("{size} bytes, more than {MAX_DOCUMENT_BYTES}"));
    }
    let mut out = Vec::with_capacity(size as usize);
    DECOMPRESSOR
        .with(|cell| {
            let mut cell = cell.borrow_mut();
            let context = cell.get_or_insert_with(zstd::zstd_safe::DCtx::create);
            match ddict {
                Some(ddict) => context.decompress_using_ddict(&mut out, frame, ddict),
                None => context.decompress(&mut out, frame),
            }
        })
        .map_err(|code| zstd::zstd_safe::get_error_name(code).to_string())?;
    Ok(out)
}

/// The compact JSON of `doc` without `metadata.managedFields` and the
/// `kubectl.kubernetes.io/last-applied-configuration` annotation.
pub fn document_json(doc: &Value) -> Vec<u8> {
    serde_json::to_vec(&Kept(doc, Level::Document)).unwrap_or_default()
}

/// The key of `metadata` a kept document leaves out.
const MANAGED_FIELDS: &str = "managedFields";

/// The key of `metadata.annotations` a kept document leaves out.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Whether [`document_json`] of `doc` is its whole compact JSON (`serde_json::to_vec(doc)`):
/// it has neither `metadata.managedFields` nor the
/// `kubectl.kubernetes.io/last-applied-configuration` annotation.
pub fn keeps_whole(doc: &Value) -> bool {
    let Some(metadata) = doc.get("metadata").and_then(Value::as_object) else { return true };
    let last_applied = metadata.get("annotations").and_then(Value::as_object).is_some_and(|a| a.contains_key(LAST_APPLIED));
    !metadata.contains_key(MANAGED_FIELDS) && !last_applied
}

/// Where in a document a value sits, for what [`Kept`] leaves out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Document,
    Metadata,
    Annotations,
    Other,
}

/// A document (or a part of one) serialized without what [`document_json`] leaves out.
struct Kept<'a>(&'a Value, Level);

impl Serialize for Kept<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(map) = self.0 else { return self.0.serialize(s) };
        if self.1 == Level::Other {
            return self.0.serialize(s);
        }
        let dropped = |k: &str| match self.1 {
            Level::Metadata => k == MANAGED_FIELDS,
            Level::Annotations => k == LAST_APPLIED,
            Level::Document | Level::Other => false,
        };
        let mut m = s.serialize_map(None)?;
        for (k, v) in map.iter().filter(|(k, _)| !dropped(k)) {
            let level = match (self.1, k.as_str()) {
                (Level::Document, "metadata") => Level::Metadata,
                (Level::Metadata, "annotations") => Level::Annotations,
                _ => Level::Other,
            };
            m.serialize_entry(k, &Kept(v, level))?;
        }
        m.end()
    }
}

/// The `meta` key present once every source entry of every kind has its document: set when a
/// store is created, after a restore of a snapshot that carries every document, and once the
/// documents of a store written before they were kept have been filled in
/// ([`crate::Store::complete_documents`]).
pub(crate) const COMPLETE: &str = "documents_complete";

impl crate::ReadView {
    /// The stored source document of the object `namespace`/`name` of `kind`, as stored
    /// ([`Dictionaries::decode`] reads it), with the source version it is of.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub(crate) fn source_document(&self, kind: KindId, namespace: &str, name: &str) -> Result<Option<(Vec<u8>, String)>, StorageError> {
        let skey = crate::tables::source_key(kind, namespace, name);
        let Some(entry) = self.txn().open_table(crate::tables::SOURCES)?.get(skey.as_slice())?.map(|v| v.value().to_vec()) else {
            return Ok(None);
        };
        let (_, version) = crate::write::decode_source_entry(&entry, kind)?;
        Ok(self.txn().open_table(DOCUMENTS)?.get(skey.as_slice())?.map(|v| (v.value().to_vec(), version)))
    }
}

/// Whether every source entry in `txn`'s store has its document.
///
/// # Errors
/// [`StorageError`] on redb failures.
pub(crate) fn all_present(txn: &redb::ReadTransaction) -> Result<bool, StorageError> {
    use redb::ReadableTable;
    let sources = txn.open_table(crate::tables::SOURCES)?;
    let documents = txn.open_table(DOCUMENTS)?;
    for item in sources.iter()? {
        let (k, _) = item?;
        if documents.get(k.value())?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

impl crate::Store {
    /// The store's document dictionaries: what the sources encode documents with.
    pub fn dictionaries(&self) -> Dictionaries {
        self.dictionaries.clone()
    }

    /// Trains the dictionary of each kind that has none and of which the store holds at least
    /// [`TRAIN_AFTER`] documents (from its first documents in key order, bounded as the
    /// sources' samples are), makes it the one later documents of the kind are compressed with,
    /// unless the sources trained one meanwhile, and commits it (with any other not stored
    /// yet); returns the kinds trained. The kinds the sources have not trained one for: a store
    /// written by a build before dictionaries, or whose process never read enough documents of
    /// the kind (a restart whose checkpoints skip unchanged files, documents above
    /// [`MAX_SAMPLE_BYTES`]). Meant for a thread of its own (training takes a fraction of a
    /// second per kind). A kind whose documents do not train a dictionary is logged and added
    /// to `given_up`, which later calls skip.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn train_dictionaries(&self, given_up: &mut std::collections::HashSet<KindId>) -> Result<Vec<KindId>, StorageError> {
        self.noting_failure(|| self.train_dictionaries_now(given_up))
    }

    fn train_dictionaries_now(&self, given_up: &mut std::collections::HashSet<KindId>) -> Result<Vec<KindId>, StorageError> {
        let mut trained = Vec::new();
        for &kind in KindId::ALL {
            if self.dictionaries.has(kind) || given_up.contains(&kind) {
                continue;
            }
            let samples = {
                let txn = self.database()?.begin_read()?;
                let docs = txn.open_table(DOCUMENTS)?;
                let (start, end) = ([kind.code()], [kind.code() + 1]);
                if (docs.range(&start[..]..&end[..])?.take(TRAIN_AFTER as usize).count() as u64) < TRAIN_AFTER {
                    continue;
                }
                let mut samples = Samples::default();
                for item in docs.range(&start[..]..&end[..])?.take(STORED_LOOKED_AT) {
                    let (_, v) = item?;
                    // Bounded as the sources' samples are; a document stated larger is not
                    // decompressed.
                    if !json_len(v.value()).is_some_and(Samples::takes) {
                        continue;
                    }
                    match self.dictionaries.decode(kind, v.value()) {
                        Ok(json) if Samples::takes(json.len() as u64) => samples.push(json),
                        _ => {}
                    }
                    if samples.complete() {
                        break;
                    }
                }
                samples
            };
            if samples.documents.is_empty() {
                tracing::info!(
                    kind = kind.name(),
                    max_sample_bytes = MAX_SAMPLE_BYTES,
                    "no document dictionary trained: the kind's first documents are all too large to sample; they are compressed alone"
                );
                given_up.insert(kind);
                continue;
            }
            // The sources may have trained one meanwhile: the first kept is the kind's.
            match self.dictionaries.train_from(kind, &samples) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(kind = kind.name(), error = %e, "no document dictionary trained; its documents are compressed alone");
                    given_up.insert(kind);
                    continue;
                }
            }
            let txn = self.database()?.begin_write()?;
            let stored = self.dictionaries.store_new(&txn)?;
            txn.commit()?;
            self.dictionaries.mark_stored(&stored);
            trained.push(kind);
        }
        Ok(trained)
    }

    /// Recompresses with `kind`'s dictionary the documents of `kind` written before it (compressed
    /// alone), in one write transaction: at most [`RECOMPRESS_CHUNK`] documents, looking at at
    /// most [`RECOMPRESS_SCAN`], from the key after `after` (`None`: the kind's first). Returns
    /// the last key looked at, to pass as `after` next; `None` once the kind's last document is
    /// behind (a pass is then complete, and recorded in `meta`: see
    /// [`crate::Store::documents_recompressed`]). A document that does not decode is left as it
    /// is. Meant for the dictionary thread; no revision moves.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn recompress_documents(&self, kind: KindId, after: Option<&[u8]>) -> Result<Option<Vec<u8>>, StorageError> {
        self.noting_failure(|| self.recompress_documents_now(kind, after))
    }

    fn recompress_documents_now(&self, kind: KindId, after: Option<&[u8]>) -> Result<Option<Vec<u8>>, StorageError> {
        use redb::ReadableTable;
        use std::ops::Bound::{Excluded, Included};
        if !self.dictionaries.has(kind) {
            return Ok(None);
        }
        let (start, end) = ([kind.code()], [kind.code() + 1]);
        let from = match after {
            Some(key) => Excluded(key),
            None => Included(&start[..]),
        };
        let txn = self.database()?.begin_write()?;
        let mut last = None;
        let more = {
            let mut docs = txn.open_table(DOCUMENTS)?;
            let mut rewritten = Vec::new();
            for item in docs.range::<&[u8]>((from, Excluded(&end[..])))?.take(RECOMPRESS_SCAN) {
                let (k, v) = item?;
                last = Some(k.value().to_vec());
                if dictionary_of(v.value()).is_none() {
                    if let Ok(json) = self.dictionaries.decode(kind, v.value()) {
                        rewritten.push((k.value().to_vec(), self.dictionaries.compress(kind, &json)));
                    }
                    if rewritten.len() >= RECOMPRESS_CHUNK {
                        break;
                    }
                }
            }
            for (k, v) in &rewritten {
                docs.insert(k.as_slice(), v.as_slice())?;
            }
            match &last {
                Some(key) => docs.range::<&[u8]>((Excluded(key.as_slice()), Excluded(&end[..])))?.next().is_some(),
                None => false,
            }
        };
        // First: a dictionary stored now makes its kind's pass due again, but this one's.
        let stored = self.dictionaries.store_new(&txn)?;
        if !more {
            txn.open_table(crate::tables::META)?.insert(recompressed_key(kind).as_str(), 1)?;
        }
        txn.commit()?;
        self.dictionaries.mark_stored(&stored);
        Ok(if more { last } else { None })
    }

    /// Whether every document of `kind` written before its dictionary was recompressed with it
    /// ([`crate::Store::recompress_documents`]).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn documents_recompressed(&self, kind: KindId) -> Result<bool, StorageError> {
        Ok(self.database()?.begin_read()?.open_table(crate::tables::META)?.get(recompressed_key(kind).as_str())?.is_some())
    }

    /// Whether documents are being filled in: the store was written before source documents
    /// were kept (or restored from such a snapshot), so some source entries lack theirs. The
    /// sources then hand over every object once more ([`crate::WriteBatch::fill_document`]),
    /// and [`crate::Store::complete_documents`] ends it.
    pub fn filling_documents(&self) -> bool {
        self.read().and_then(|v| Ok(v.txn().open_table(crate::tables::META)?.get(COMPLETE)?.is_none())).unwrap_or(false)
    }

    /// Ends the filling in of documents ([`crate::Store::filling_documents`]) when every source
    /// entry has its document now; returns whether it did.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn complete_documents(&self) -> Result<bool, StorageError> {
        if !self.filling_documents() {
            return Ok(true);
        }
        if !all_present(self.read()?.txn())? {
            return Ok(false);
        }
        let txn = self.database()?.begin_write()?;
        txn.open_table(crate::tables::META)?.insert(COMPLETE, 1)?;
        txn.commit()?;
        Ok(true)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A stored document of a kind without a dictionary, decoded.
    fn decode(bytes: &[u8]) -> Result<Vec<u8>, StorageError> {
        Dictionaries::default().decode(KindId::Group, bytes)
    }

    /// A document keeps everything translation may read and drops Kubernetes' bookkeeping; it
    /// reads back as the same JSON.
    #[test]
    fn a_document_is_kept_without_managed_fields_and_last_applied() {
        let doc = json!({
            "apiVersion": "organization.cp.ei.telekom.de/v1",
            "kind": "Group",
            "metadata": {
                "name": "payments",
                "namespace": "poc",
                "managedFields": [{"manager": "kubectl", "operation": "Update"}],
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{…}", "keep": "me"},
            },
            "spec": {"displayName": "Payments", "managedFields": "a spec field of that name stays"},
        });
        let stored = encode(&doc);
        let back: Value = serde_json::from_slice(&decode(&stored).unwrap()).unwrap();
        let mut expected = doc.clone();
        expected["metadata"].as_object_mut().unwrap().remove("managedFields");
        expected["metadata"]["annotations"].as_object_mut().unwrap().remove("kubectl.kubernetes.io/last-applied-configuration");
        assert_eq!(back, expected);
    }

    /// A stored value that is not a frame, or expands past the bound, is an error, never a panic.
    #[test]
    fn a_damaged_document_is_an_error() {
        assert!(matches!(decode(b"not zstd"), Err(StorageError::Corrupt(_))));
        let bomb = zstd::bulk::compress(&vec![b' '; MAX_DOCUMENT_BYTES + 1], 19).unwrap();
        assert!(matches!(decode(&bomb), Err(StorageError::Corrupt(_))));
    }

    /// The name of the `i`th zone of [`store_with_dictionary`].
    fn zone_name(i: u64) -> String {
        format!("zone-{i:05}")
    }

    /// A store of [`TRAIN_AFTER`] zones whose documents are compressed alone, then (its Zone
    /// dictionary trained) 200 more compressed with it.
    pub(crate) fn store_with_dictionary(dir: &std::path::Path) -> crate::Store {
        let store = crate::Store::open(dir).unwrap();
        let at = schema::Timestamp(5);
        store
            .write(at, |b| {
                (0..TRAIN_AFTER).for_each(|i| crate::test_support::zone(b, &zone_name(i)));
                Ok(())
            })
            .unwrap();
        assert_eq!(store.train_dictionaries(&mut Default::default()).unwrap(), vec![KindId::Zone]);
        let dictionaries = store.dictionaries();
        store
            .write(at, |b| {
                for i in TRAIN_AFTER..TRAIN_AFTER + 200 {
                    crate::test_support::zone_compressed(b, &zone_name(i), "1", at, &dictionaries);
                }
                Ok(())
            })
            .unwrap();
        store
    }

    /// The stored document of zone `name`, raw.
    pub(crate) fn stored(store: &crate::Store, name: &str) -> Vec<u8> {
        let view = store.read().unwrap();
        let mut key = vec![KindId::Zone.code()];
        key.extend_from_slice(crate::Key::new(&["poc", name]).as_bytes());
        view.txn().open_table(DOCUMENTS).unwrap().get(key.as_slice()).unwrap().unwrap().value().to_vec()
    }

    /// Once a kind has enough documents, its dictionary is trained, kept across a restart, and
    /// later documents are compressed with it, smaller, reading back as the same JSON; earlier
    /// ones stay readable. Kinds with too few documents get none; a trained kind is not trained
    /// again.
    #[test]
    fn documents_are_compressed_with_their_kinds_trained_dictionary() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_dictionary(dir.path());
        assert!(!store.dictionaries().has(KindId::Team), "no Team documents");
        assert_eq!(store.train_dictionaries(&mut Default::default()).unwrap(), Vec::<KindId>::new(), "trained once");
        drop(store);
        let store = crate::Store::open(dir.path()).unwrap();
        let dictionaries = store.dictionaries();
        assert!(dictionaries.has(KindId::Zone), "the dictionary is read at open");
        let (alone, with) = (stored(&store, &zone_name(0)), stored(&store, &zone_name(TRAIN_AFTER)));
        assert_eq!((dictionary_of(&alone), dictionary_of(&with)), (None, Some(1)));
        assert!(with.len() * 2 < alone.len(), "{} bytes with the dictionary, {} alone", with.len(), alone.len());
        let json = |bytes: &[u8]| serde_json::from_slice::<Value>(&dictionaries.decode(KindId::Zone, bytes).unwrap()).unwrap();
        assert_eq!(json(&with)["metadata"]["name"], zone_name(TRAIN_AFTER));
        assert_eq!(json(&alone)["metadata"]["name"], zone_name(0));
    }

    /// The documents written before the kind's dictionary are recompressed with it, a bounded
    /// transaction at a time, into the same JSON; no revision moves, and the pass is recorded.
    #[test]
    fn documents_written_before_the_dictionary_are_recompressed_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_dictionary(dir.path());
        let before = stored(&store, &zone_name(0));
        let revision = store.read().unwrap().revision().unwrap();
        assert!(!store.documents_recompressed(KindId::Zone).unwrap());
        let mut after = None;
        let mut calls = 0;
        while let Some(last) = store.recompress_documents(KindId::Zone, after.as_deref()).unwrap() {
            after = Some(last);
            calls += 1;
        }
        assert_eq!(
            calls,
            (TRAIN_AFTER as usize).div_ceil(RECOMPRESS_CHUNK),
            "{RECOMPRESS_CHUNK} documents a transaction, then the rest looked at"
        );
        assert!(store.documents_recompressed(KindId::Zone).unwrap());
        assert_eq!(store.read().unwrap().revision().unwrap(), revision);
        let now = stored(&store, &zone_name(0));
        assert_eq!(dictionary_of(&now), Some(1));
        assert!(now.len() * 2 < before.len(), "{} bytes, {} before", now.len(), before.len());
        let dictionaries = store.dictionaries();
        assert_eq!(dictionaries.decode(KindId::Zone, &now).unwrap(), dictionaries.decode(KindId::Zone, &before).unwrap());
        assert_eq!(store.recompress_documents(KindId::Team, None).unwrap(), None, "a kind without a dictionary has nothing to do");
    }

    /// A document compressed alone (prepared before the dictionary was trained) is stored
    /// compressed with it; while the writer loads ([`crate::Store::set_loading`]) it is stored
    /// as it is, for the recompression pass.
    #[test]
    fn a_document_compressed_alone_is_stored_with_the_dictionary_but_while_loading() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_dictionary(dir.path());
        let at = schema::Timestamp(6);
        let write = |name: &str, version: &str| {
            store
                .write(at, |b| {
                    crate::test_support::zone_version(b, name, version, at);
                    Ok(())
                })
                .unwrap();
            stored(&store, name)
        };
        let late = write("late", "2");
        assert_eq!(dictionary_of(&late), Some(1));
        let json: Value = serde_json::from_slice(&store.dictionaries().decode(KindId::Zone, &late).unwrap()).unwrap();
        assert_eq!(json["metadata"]["resourceVersion"], "2");

        store.set_loading(true);
        let loaded = write("loaded", "3");
        assert_eq!(dictionary_of(&loaded), None, "stored as the source compressed it");
        let json: Value = serde_json::from_slice(&store.dictionaries().decode(KindId::Zone, &loaded).unwrap()).unwrap();
        assert_eq!(json["metadata"]["resourceVersion"], "3");
        store.set_loading(false);
        let mut after = None;
        while let Some(last) = store.recompress_documents(KindId::Zone, after.as_deref()).unwrap() {
            after = Some(last);
        }
        let recompressed = stored(&store, "loaded");
        assert_eq!(dictionary_of(&recompressed), Some(1), "recompressed by the pass");
        assert_eq!(
            store.dictionaries().decode(KindId::Zone, &recompressed).unwrap(),
            store.dictionaries().decode(KindId::Zone, &loaded).unwrap()
        );
        assert_eq!(dictionary_of(&write("after", "4")), Some(1), "the load processed: compressed with it again");
    }

    /// The stored dictionary of `kind` in `store`'s file, if any.
    fn stored_dictionary(store: &crate::Store, kind: KindId) -> Option<Vec<u8>> {
        let txn = store.database().unwrap().begin_read().unwrap();
        let table = txn.open_table(DICTIONARIES).unwrap();
        table.get(kind.code()).unwrap().map(|v| v.value().to_vec())
    }

    /// Writes zones `from..to`, their documents compressed with `store`'s dictionaries (as the
    /// sources compress them), in one commit.
    fn write_zones(store: &crate::Store, from: u64, to: u64) {
        let dictionaries = store.dictionaries();
        let at = schema::Timestamp(5);
        store
            .write(at, |b| {
                (from..to).for_each(|i| crate::test_support::zone_compressed(b, &zone_name(i), "1", at, &dictionaries));
                Ok(())
            })
            .unwrap();
    }

    /// The store's dictionaries train a kind's from the first documents encoded with them, by
    /// the encode that completes the samples (or on a thread it starts, in the background);
    /// every later document is compressed with it. The dictionary is stored by the next
    /// commit, not before, and read back at the next open; every document reads back as its
    /// JSON.
    #[test]
    fn the_first_documents_encoded_train_their_kinds_dictionary_committed_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        write_zones(&store, 0, TRAIN_SAMPLES as u64 - 1);
        assert!(!store.dictionaries().has(KindId::Zone), "one sample short");
        let doc = serde_json::json!({"apiVersion": "admin.cp.ei.telekom.de/v1", "kind": "Zone", "metadata": {"name": "last"}});
        assert_eq!(dictionary_of(&store.dictionaries().encode(KindId::Zone, &doc)), Some(1), "trained by the encode completing them");
        assert!(store.dictionaries().has(KindId::Zone));
        let background = store.dictionaries().training_in_background();
        let team = serde_json::json!({"kind": "Team", "metadata": {"name": "t"}, "spec": {"email": "t@example.com"}});
        (1..TRAIN_SAMPLES).for_each(|_| drop(background.encode(KindId::Team, &team)));
        assert_eq!(dictionary_of(&background.encode(KindId::Team, &team)), None, "compressed alone: its encode starts the training");
        background.wait_for_training();
        assert_eq!(dictionary_of(&background.encode(KindId::Team, &team)), Some(1), "the next is compressed with it");
        assert_eq!(stored_dictionary(&store, KindId::Zone), None, "not stored before a commit");
        // A batch that fails stores nothing; the next commit stores the dictionary.
        let failed = store.write(schema::Timestamp(5), |_| Err::<(), _>(StorageError::Corrupt("test".into())));
        assert!(failed.is_err());
        assert_eq!(stored_dictionary(&store, KindId::Zone), None);
        write_zones(&store, TRAIN_SAMPLES as u64, TRAIN_SAMPLES as u64 + 100);
        let bytes = stored_dictionary(&store, KindId::Zone).expect("stored with the first documents compressed with it");
        assert_eq!(crate::codec::decode::<(u32, Vec<u8>)>(&bytes, "dictionary").unwrap().1, store.dictionaries().all()[0].2);
        assert_eq!(store.train_dictionaries(&mut Default::default()).unwrap(), Vec::<KindId>::new(), "not trained again from the store");
        drop(store);
        let store = crate::Store::open(dir.path()).unwrap();
        let dictionaries = store.dictionaries();
        let later = stored(&store, &zone_name(TRAIN_SAMPLES as u64 + 99));
        assert_eq!(dictionary_of(&later), Some(1));
        for i in [0, TRAIN_SAMPLES as u64 + 99] {
            let json: Value = serde_json::from_slice(&dictionaries.decode(KindId::Zone, &stored(&store, &zone_name(i))).unwrap()).unwrap();
            assert_eq!(json["metadata"]["name"], zone_name(i));
        }
    }

    /// Dictionaries made elsewhere than by a store never train one (their documents may be
    /// stored into a store with another); samples are bounded in size: a document above
    /// [`MAX_SAMPLE_BYTES`] is not kept, and [`MAX_SAMPLES_BYTES`] of samples train before
    /// [`TRAIN_SAMPLES`] of them.
    #[test]
    fn samples_are_kept_by_the_stores_dictionaries_only_and_bounded_in_bytes() {
        // Documents of one length for a given `pad`.
        let doc = |i: usize, pad: usize| serde_json::json!({"kind": "Zone", "metadata": {"name": format!("zone-{i:05}")}, "spec": {"pad": format!("{i:05}-{}", "ab".repeat(pad / 2))}});
        let alone = Dictionaries::default();
        (0..TRAIN_SAMPLES).for_each(|i| drop(alone.encode(KindId::Zone, &doc(i, 10))));
        alone.wait_for_training();
        assert!(!alone.has(KindId::Zone));

        let sampling = Dictionaries::sampling();
        (0..=TRAIN_SAMPLES).for_each(|i| drop(sampling.encode(KindId::Zone, &doc(i, MAX_SAMPLE_BYTES))));
        sampling.wait_for_training();
        assert!(!sampling.has(KindId::Zone), "documents too large to sample");
        assert_eq!(sampling.samples.as_ref().unwrap().state.lock().unwrap().bytes, 0);

        let pad = 16 << 10;
        let enough = MAX_SAMPLES_BYTES.div_ceil(document_json(&doc(0, pad)).len());
        assert!(enough < TRAIN_SAMPLES);
        (0..enough - 1).for_each(|i| drop(sampling.encode(KindId::Team, &doc(i, pad))));
        sampling.wait_for_training();
        assert!(!sampling.has(KindId::Team));
        drop(sampling.encode(KindId::Team, &doc(enough, pad)));
        sampling.wait_for_training();
        assert!(sampling.has(KindId::Team), "trained at {enough} samples of {pad} bytes");
        assert_eq!(sampling.samples.as_ref().unwrap().state.lock().unwrap().bytes, 0, "freed once trained");
    }

    /// Threads encoding documents of the same kinds at once (the scan's threads, the kube
    /// source's tasks) train each kind once, keep no sample after, and every document reads
    /// back, whether trainings run inline or in the background.
    #[test]
    fn concurrent_encodes_train_each_kind_once_and_every_document_reads_back() {
        for dictionaries in [Dictionaries::sampling(), Dictionaries::sampling().training_in_background()] {
            let kinds = [KindId::Zone, KindId::Team, KindId::Group];
            let encoded: Vec<Vec<(KindId, String, Vec<u8>)>> = std::thread::scope(|scope| {
                let threads: Vec<_> = (0..4)
                    .map(|t| {
                        let dictionaries = dictionaries.clone();
                        scope.spawn(move || {
                            (0..1500)
                                .map(|i| {
                                    let (kind, name) = (kinds[i % 3], format!("t{t}-{i}"));
                                    let doc = serde_json::json!({"kind": kind.name(), "metadata": {"name": name}});
                                    (kind, name, dictionaries.encode(kind, &doc))
                                })
                                .collect()
                        })
                    })
                    .collect();
                threads.into_iter().map(|t| t.join().unwrap()).collect()
            });
            dictionaries.wait_for_training();
            assert_eq!(dictionaries.kinds().len(), 3);
            let state = dictionaries.samples.as_ref().unwrap().state.lock().unwrap();
            assert!(state.kinds.is_empty() && state.bytes == 0, "no samples kept");
            drop(state);
            for (kind, name, stored) in encoded.into_iter().flatten() {
                let json: Value = serde_json::from_slice(&dictionaries.decode(kind, &stored).unwrap()).unwrap();
                assert_eq!(json["metadata"]["name"], name);
            }
        }
    }

    /// The samples of all kinds together stay within [`MAX_ALL_SAMPLES_BYTES`]: kinds that
    /// never complete theirs (each just below [`MAX_SAMPLES_BYTES`]) leave later kinds
    /// unsampled, never more memory.
    #[test]
    fn samples_of_every_kind_together_are_bounded() {
        let sampling = Dictionaries::sampling();
        let doc = |i: usize| serde_json::json!({"spec": {"pad": format!("{i:05}-{}", "x".repeat(60 << 10))}});
        let size = document_json(&doc(0)).len();
        let per_kind = (MAX_SAMPLES_BYTES - 1) / size;
        for &kind in &KindId::ALL[..10] {
            (0..per_kind).for_each(|i| drop(sampling.encode(kind, &doc(i))));
        }
        sampling.wait_for_training();
        let state = sampling.samples.as_ref().unwrap().state.lock().unwrap();
        assert!(state.bytes <= MAX_ALL_SAMPLES_BYTES && state.bytes + size > MAX_ALL_SAMPLES_BYTES, "{} bytes kept", state.bytes);
        assert_eq!(state.bytes, state.kinds.values().map(|s| s.bytes).sum::<usize>());
        assert!(state.kinds.get(&KindId::ALL[9]).is_none_or(|s| s.documents.len() < per_kind), "the last kind is not sampled in full");
        assert!(KindId::ALL[..10].iter().all(|k| !sampling.has(*k)), "no kind completed its samples");
    }

    /// Degenerate samples (empty objects) are taken once: whether zstd trains a dictionary
    /// from them or not, every document reads back and no sample is kept after; a dictionary
    /// the kind has already is kept over a later one.
    #[test]
    fn samples_are_taken_once_and_every_document_reads_back() {
        let sampling = Dictionaries::sampling();
        let tiny = serde_json::json!({});
        for _ in 0..TRAIN_SAMPLES + 10 {
            let stored = sampling.encode(KindId::Zone, &tiny);
            assert_eq!(sampling.decode(KindId::Zone, &stored).unwrap(), b"{}");
        }
        sampling.wait_for_training();
        let samples = sampling.samples.as_ref().unwrap();
        assert!(samples.done[usize::from(KindId::Zone.code())].load(Ordering::Acquire));
        let state = samples.state.lock().unwrap();
        assert!(state.kinds.is_empty() && state.bytes == 0, "no samples kept after");
        drop(state);

        let dir = tempfile::tempdir().unwrap();
        let store = store_with_dictionary(dir.path());
        let trained = store.dictionaries().all()[0].2.clone();
        assert!(!store.dictionaries().insert_trained(KindId::Zone, trained.clone()).unwrap(), "the kind has one");
        // One in use and not stored yet is never replaced by another (read or restored).
        let fresh = Dictionaries::sampling();
        (0..TRAIN_SAMPLES as u64).for_each(|i| drop(fresh.encode(KindId::Zone, &serde_json::json!({"metadata": {"name": zone_name(i)}}))));
        let in_use = fresh.all()[0].2.clone();
        assert_ne!(in_use, trained);
        assert!(matches!(fresh.insert(KindId::Zone, 1, trained), Err(StorageError::Corrupt(m)) if m.contains("not stored yet")));
        fresh.insert(KindId::Zone, 1, in_use.clone()).unwrap();
        assert_eq!(fresh.all()[0].2, in_use);
    }

    /// Whichever transaction commits first after a dictionary is trained from the sources'
    /// documents stores it: here the recompression pass's.
    #[test]
    fn a_recompression_pass_stores_a_dictionary_not_stored_yet() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let dictionaries = store.dictionaries();
        (0..TRAIN_SAMPLES as u64).for_each(|i| {
            let doc = serde_json::json!({"kind": "Zone", "metadata": {"name": zone_name(i), "namespace": "poc"}});
            drop(dictionaries.encode(KindId::Zone, &doc));
        });
        dictionaries.wait_for_training();
        assert!(dictionaries.has(KindId::Zone) && stored_dictionary(&store, KindId::Zone).is_none());
        assert_eq!(store.recompress_documents(KindId::Zone, None).unwrap(), None);
        assert!(stored_dictionary(&store, KindId::Zone).is_some());
        assert!(store.documents_recompressed(KindId::Zone).unwrap(), "the pass stored the dictionary it recompressed with");
        drop((store, dictionaries));
        assert!(crate::Store::open(dir.path()).unwrap().dictionaries().has(KindId::Zone), "read back");
    }

    /// A dictionary stored anew makes its kind's recompression pass due again: the pass is per
    /// dictionary (one trained anew for a damaged one finds documents compressed alone).
    #[test]
    fn storing_a_new_dictionary_makes_its_kinds_pass_due_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_dictionary(dir.path());
        let mut after = None;
        while let Some(last) = store.recompress_documents(KindId::Zone, after.as_deref()).unwrap() {
            after = Some(last);
        }
        assert!(store.documents_recompressed(KindId::Zone).unwrap());
        let fresh = Dictionaries::sampling();
        let samples: Vec<Vec<u8>> = (0..TRAIN_SAMPLES as u64)
            .map(|i| document_json(&serde_json::json!({"kind": "Zone", "metadata": {"name": zone_name(i), "namespace": "poc"}})))
            .collect();
        assert!(fresh.insert_trained(KindId::Zone, zstd::dict::from_samples(&samples, DICTIONARY_BYTES).unwrap()).unwrap());
        let txn = store.database().unwrap().begin_write().unwrap();
        assert_eq!(fresh.store_new(&txn).unwrap(), vec![KindId::Zone]);
        txn.commit().unwrap();
        assert!(!store.documents_recompressed(KindId::Zone).unwrap(), "due again with the new dictionary");
    }

    /// The store's own training is bounded as the sources' samples are: documents above
    /// [`MAX_SAMPLE_BYTES`] are not decompressed for it, so a kind of only such documents
    /// trains none (and is given up), whatever their number.
    #[test]
    fn the_stores_training_skips_documents_too_large_to_sample() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        let big =
            |i: u64| serde_json::json!({"kind": "Zone", "metadata": {"name": zone_name(i)}, "spec": {"pad": "y".repeat(MAX_SAMPLE_BYTES)}});
        let stored = encode(&big(0));
        assert_eq!(json_len(&stored), Some(document_json(&big(0)).len() as u64));
        assert_eq!(json_len(b"{\"a\":1}"), Some(7));
        assert_eq!(json_len(b"garbage"), None);
        let at = schema::Timestamp(5);
        store
            .write(at, |b| {
                for i in 0..TRAIN_AFTER {
                    crate::test_support::zone_compressed(b, &zone_name(i), "1", at, &Dictionaries::default());
                }
                Ok(())
            })
            .unwrap();
        // Replace every stored document by a large one, compressed alone.
        use redb::ReadableTable;
        let txn = store.database().unwrap().begin_write().unwrap();
        {
            let mut docs = txn.open_table(DOCUMENTS).unwrap();
            let keys: Vec<Vec<u8>> = docs.iter().unwrap().map(|i| i.unwrap().0.value().to_vec()).collect();
            for (i, k) in keys.iter().enumerate() {
                docs.insert(k.as_slice(), encode(&big(i as u64)).as_slice()).unwrap();
            }
        }
        txn.commit().unwrap();
        let mut given_up = Default::default();
        assert_eq!(store.train_dictionaries(&mut given_up).unwrap(), Vec::<KindId>::new());
        assert!(given_up.contains(&KindId::Zone) && !store.dictionaries().has(KindId::Zone));
    }

    /// [`keeps_whole`] says exactly when the document kept is the whole compact JSON.
    #[test]
    fn keeps_whole_is_exactly_when_nothing_is_left_out() {
        let cases = [
            serde_json::json!({"metadata": {"name": "a"}, "spec": {"metadata": {"managedFields": []}}}),
            serde_json::json!({"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}}),
            serde_json::json!({"metadata": {"managedFields": null}}),
            serde_json::json!({"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}),
            serde_json::json!({"metadata": {"annotations": {"other": "x"}}}),
            serde_json::json!({"metadata": {"annotations": "not a map"}}),
            serde_json::json!({"metadata": "not a map"}),
            serde_json::json!([{"metadata": {"managedFields": []}}]),
            serde_json::json!("scalar"),
        ];
        let whole: Vec<bool> = cases.iter().map(keeps_whole).collect();
        assert_eq!(whole, [true, false, false, false, true, true, true, true, true]);
        for (doc, whole) in cases.iter().zip(whole) {
            assert_eq!(document_json(doc) == serde_json::to_vec(doc).unwrap(), whole, "{doc}");
        }
    }

    /// A document naming a dictionary its kind lacks (or another id) is an error, never a
    /// panic; so is a dictionary too large.
    #[test]
    fn a_document_naming_a_missing_dictionary_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_dictionary(dir.path());
        let with = stored(&store, &zone_name(TRAIN_AFTER));
        let corrupt = |r: Result<Vec<u8>, StorageError>| matches!(r, Err(StorageError::Corrupt(m)) if m.contains("no dictionary"));
        assert!(corrupt(Dictionaries::default().decode(KindId::Zone, &with)));
        assert!(corrupt(store.dictionaries().decode(KindId::Team, &with)), "another kind's");
        let mut other_id = with.clone();
        other_id[1] = 2;
        assert!(corrupt(store.dictionaries().decode(KindId::Zone, &other_id)));
        assert!(matches!(store.dictionaries().decode(KindId::Zone, &with[..3]), Err(StorageError::Corrupt(_))), "cut in its tag");
        let huge = Dictionaries::default().insert(KindId::Zone, 1, vec![0; MAX_DICTIONARY_BYTES + 1]);
        assert!(matches!(huge, Err(StorageError::Corrupt(m)) if m.contains("larger than")));
    }
}
