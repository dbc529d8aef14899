//! The source's checkpoints in the store: their keys and layouts, the warm start that takes
//! a directory over from them, and the checkpoint changes sent after each refresh.

use super::*;
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

/// Checkpoint keys of the manifests source ([`storage::checkpoint`]), all under `manifests/v2/`
/// (`v2`: the layouts of [`FileCheckpoint`] and its document chunks; `v1` kept a file's
/// documents in one value, and its keys are removed when found). The directory, build and
/// features the file checkpoints belong to:
pub(super) const DIR_CHECKPOINT: &str = "manifests/v2/dir";
/// Followed by the file's relative path: its [`FileCheckpoint`].
pub(super) const FILE_CHECKPOINT: &str = "manifests/v2/file/";
/// Followed by the file's relative path, `\0` and the chunk number (8 hex digits): up to
/// [`CHUNK_DOCS`] of its documents, in file order (a list of [`DocCheckpoint`]). Small values:
/// redb's page cache holds and evicts them like other pages.
pub(super) const DOCS_CHECKPOINT: &str = "manifests/v2/docs/";
/// Followed by the file's relative path: the identity hash ([`IdHashes`]) of each of its
/// documents in file order, 8 bytes each (little-endian), written with its chunks: what a
/// sealed warm start reads instead of the documents.
pub(super) const IDS_CHECKPOINT: &str = "manifests/v2/ids/";
/// The seed of the identity hashes ([`IdSeed`]).
pub(super) const ID_SEED_CHECKPOINT: &str = "manifests/v2/id-seed";
/// The seal of the checkpoints ([`storage::WriteBatch::seal_checkpoints`], [`Change::Seal`]):
/// current while the store's source entries are exactly the winners of the checkpoints and
/// every file is checkpointed. A warm start then checks nothing against the store.
pub(super) const SEAL_CHECKPOINT: &str = "manifests/v2/seal";
/// Checkpoints of earlier layouts, removed after the first refresh.
pub(super) const OLD_CHECKPOINTS: &str = "manifests/v1/";
/// Documents per checkpoint chunk.
pub(super) const CHUNK_DOCS: usize = 1024;

/// The key of file `rel`'s checkpoint (`rel` relative to the manifests directory, `/`
/// separators). It is written, in order with the changes the refresh that read the file sent,
/// once per change of the file, and removed with the file: a barrier for "the source has read
/// this version of the file".
pub fn file_checkpoint_key(rel: &str) -> String {
    format!("{FILE_CHECKPOINT}{rel}")
}

/// The key of file `rel`'s identity hashes.
pub(super) fn ids_key(rel: &str) -> String {
    format!("{IDS_CHECKPOINT}{rel}")
}

/// The identity hashes of `docs` as kept under [`IDS_CHECKPOINT`].
fn id_bytes<'a>(ids: &IdHashes, docs: impl Iterator<Item = &'a Document>) -> Vec<u8> {
    docs.flat_map(|d| ids.of(&d.src).to_le_bytes()).collect()
}

/// The seed of the identity hashes kept with the checkpoints, and the hash of a fixed identity
/// under it ([`IdHashes::probe`]): a build whose hash function differs takes the kept hashes as
/// absent.
#[derive(Serialize, Deserialize)]
pub(super) struct IdSeed {
    seed: u64,
    probe: u64,
}

/// The key of chunk `n` of file `rel`'s documents.
pub(super) fn docs_key(rel: &str, n: u32) -> String {
    format!("{DOCS_CHECKPOINT}{rel}\0{n:08x}")
}

/// What a file's checkpoint guarantees, part of [`DirCheckpoint::build`]: checkpoints written
/// under other rules (or before there were rules) are not trusted, and every file is read and
/// checkpointed again once. 1: a file's document chunks, identity hashes and header are
/// committed in one transaction (before, a kill between them could leave the chunks of an edit
/// under the header of the file before it). In `build`, not a field of its own: a build before
/// the rules compares `build` too, so it does not take over checkpoints of a later one either
/// (and the directory checkpoint it writes then is not taken as made under these rules).
pub(super) const CHECKPOINT_RULES: u32 = 1;

/// What the file checkpoints were made for: any difference starts cold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct DirCheckpoint {
    /// The canonical manifests directory.
    pub(super) dir: String,
    /// The feature flags (`Debug` form): a kind switched on or off changes what is projected.
    pub(super) features: String,
    /// The build (`CARGO_PKG_VERSION`, `+checkpoints.` and [`CHECKPOINT_RULES`]): translation
    /// may differ between builds.
    pub(super) build: String,
}

/// One file as last read: enough to know it is unchanged and what it holds, without its text
/// (its documents are in `chunks` chunks under [`DOCS_CHECKPOINT`], committed with it). Only
/// files without skipped documents or unreadable parts are checkpointed (the others are read on
/// every start, so their skip reports are logged again).
#[derive(Serialize, Deserialize)]
pub(super) struct FileCheckpoint {
    pub(super) stamp: Stamp,
    /// SHA-256 of the file.
    pub(super) hash: [u8; 32],
    /// Documents of projected kinds.
    pub(super) documents: u64,
    /// Chunks of documents.
    pub(super) chunks: u32,
    pub(super) ignored: Vec<IgnoredCheckpoint>,
}

/// Where a document is in its file ([`DocumentPosition`] without the file).
#[derive(Serialize, Deserialize)]
pub(super) struct Position {
    pub(super) document: u64,
    pub(super) item: Option<u64>,
    pub(super) line: u64,
}

impl Position {
    pub(super) fn of(o: &DocumentPosition) -> Position {
        Position { document: o.document as u64, item: o.item.map(|i| i as u64), line: o.line as u64 }
    }

    pub(super) fn origin(self, file: &Arc<str>) -> DocumentPosition {
        DocumentPosition {
            file: file.clone(),
            document: self.document as usize,
            item: self.item.map(|i| i as usize),
            line: self.line as usize,
        }
    }
}

#[derive(Serialize, Deserialize)]
pub(super) struct DocCheckpoint {
    pub(super) position: Position,
    /// [`KindId::code`].
    pub(super) kind: u8,
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) version: Version,
}

/// [`DocCheckpoint`] borrowing its strings from the stored bytes, unchecked (the same encoding:
/// postcard writes a string as its length and bytes): what a start reads of every document
/// without building it; it only hashes the names.
#[derive(Deserialize)]
pub(super) struct DocCheckpointRef<'a> {
    #[allow(dead_code)]
    pub(super) position: Position,
    pub(super) kind: u8,
    pub(super) namespace: &'a [u8],
    pub(super) name: &'a [u8],
    pub(super) version: Version,
}

#[derive(Serialize, Deserialize)]
pub(super) struct IgnoredCheckpoint {
    pub(super) position: Position,
    pub(super) reason: String,
    pub(super) disabled: bool,
}

impl FileCheckpoint {
    /// The checkpoint of `e` with documents `docs`, and its chunks of documents.
    pub(super) fn of(e: &FileEntry, docs: &[Document]) -> (FileCheckpoint, Vec<Vec<u8>>) {
        let chunks: Vec<Vec<u8>> = docs
            .chunks(CHUNK_DOCS)
            .map(|c| {
                let c: Vec<DocCheckpoint> = c
                    .iter()
                    .map(|d| DocCheckpoint {
                        position: Position::of(&d.origin),
                        kind: d.src.kind.code(),
                        namespace: d.src.namespace.clone(),
                        name: d.src.name.clone(),
                        version: d.version,
                    })
                    .collect();
                storage::checkpoint::encode(&c)
            })
            .collect();
        let ignored = e
            .ignored
            .iter()
            .map(|i| IgnoredCheckpoint { position: Position::of(&i.origin), reason: i.reason.clone(), disabled: i.disabled })
            .collect();
        let header = FileCheckpoint { stamp: e.stamp, hash: e.hash, documents: docs.len() as u64, chunks: chunks.len() as u32, ignored };
        (header, chunks)
    }

    /// The documents it lists (without records), or `None` when it names a kind this build does
    /// not know.
    pub(super) fn docs(docs: Vec<DocCheckpoint>, rel: &str) -> Option<Vec<Document>> {
        let file: Arc<str> = Arc::from(rel);
        let mut out = Vec::with_capacity(docs.len());
        for d in docs {
            let kind = KindId::from_code(d.kind)?;
            out.push(Document {
                origin: d.position.origin(&file),
                src: Arc::new(SourceRef { kind, namespace: d.namespace, name: d.name }),
                version: d.version,
                record: None,
                skipped: false,
            });
        }
        Some(out)
    }

    pub(super) fn ignored(ignored: Vec<IgnoredCheckpoint>, rel: &str) -> Vec<Ignored> {
        let file: Arc<str> = Arc::from(rel);
        ignored.into_iter().map(|i| Ignored { origin: i.position.origin(&file), reason: i.reason, disabled: i.disabled }).collect()
    }
}

impl ManifestsState {
    pub(super) fn dir_checkpoint(&self) -> DirCheckpoint {
        let dir = self.dir.canonicalize().unwrap_or_else(|_| self.dir.clone());
        DirCheckpoint {
            dir: dir.display().to_string(),
            features: format!("{:?}", self.features),
            build: format!("{}+checkpoints.{CHECKPOINT_RULES}", env!("CARGO_PKG_VERSION")),
        }
    }

    /// The documents of file `rel` from its checkpoint in the store. A checkpoint that cannot be
    /// read is logged and taken as empty: the objects it listed are then not deleted when the
    /// file changes (the next start's check against the store deletes what no file holds).
    pub(super) fn load(&self, rel: &str) -> Vec<Document> {
        let read = || -> Result<Option<Vec<Document>>, storage::StorageError> {
            let Some(store) = &self.store else { return Ok(None) };
            let view = store.read()?;
            let Some(bytes) = view.checkpoint(&format!("{FILE_CHECKPOINT}{rel}"))? else { return Ok(None) };
            let header: FileCheckpoint = storage::checkpoint::decode(&bytes, "manifests file checkpoint")?;
            let mut docs = Vec::with_capacity(header.documents as usize);
            let mut chunks = 0;
            let mut failed = None;
            view.for_each_checkpoint(&format!("{DOCS_CHECKPOINT}{rel}\0"), |_, value| {
                chunks += 1;
                match storage::checkpoint::decode::<Vec<DocCheckpoint>>(value, "manifests document checkpoint") {
                    Ok(c) => match FileCheckpoint::docs(c, rel) {
                        Some(d) => docs.extend(d),
                        None => failed = Some(storage::StorageError::Corrupt("a document of an unknown kind".into())),
                    },
                    Err(e) => failed = Some(e),
                }
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
            if chunks != header.chunks || docs.len() as u64 != header.documents {
                return Err(storage::StorageError::Corrupt(format!(
                    "{chunks} chunks of {} documents, expected {}",
                    docs.len(),
                    header.documents
                )));
            }
            Ok(Some(docs))
        };
        match read() {
            Ok(Some(docs)) => docs,
            Ok(None) => {
                tracing::error!(file = rel, "the file's checkpoint is missing from the store; taking it as empty");
                self.unreadable_checkpoint.set(true);
                Vec::new()
            }
            Err(e) => {
                tracing::error!(file = rel, error = %e, "cannot read the file's checkpoint; taking it as empty");
                self.unreadable_checkpoint.set(true);
                Vec::new()
            }
        }
    }

    /// Drops the documents of files whose checkpoint the store now holds (they are read back
    /// from it when needed). A checkpoint that was never written (its change was dropped) keeps
    /// the documents in memory.
    pub(super) fn settle(&mut self) {
        let Some(store) = &self.store else { return };
        let Ok(view) = store.read() else { return };
        for (rel, f) in &mut self.files {
            let Docs::Held { written: Some(w), .. } = &f.docs else { continue };
            if !w.committed.is_set() {
                // Still queued in the writer, or never written (the writer stopped first).
                continue;
            }
            let stored = view.checkpoint(&format!("{FILE_CHECKPOINT}{rel}")).ok().flatten();
            if stored.as_deref() == Some(&w.bytes[..]) {
                f.docs = Docs::Stored;
            } else if let Docs::Held { written, .. } = &mut f.docs {
                *written = None;
            }
        }
    }

    /// Takes over the files of the store's checkpoints, before the first refresh: a file whose
    /// stamp (length, mtime, inode, ctime) is unchanged is then not read again. Every checkpointed
    /// object is checked against the store's source versions; one that is missing or at another
    /// version has its file read again (its objects are sent once more), and every stored object
    /// not confirmed is listed in [`WarmStart::unconfirmed`] so the caller deletes it unless the
    /// first refresh finds it. Without checkpoints for this directory, build and feature set
    /// (a new store, a restored one, another directory), nothing is taken over and every
    /// checkpoint is rewritten. Holds no document in memory afterwards: per object, only its
    /// entry in the claims index.
    ///
    /// # Errors
    /// A store error reading the checkpoints or sources; the state is then unchanged (start cold).
    pub fn warm_start(&mut self) -> Result<WarmStart, storage::StorageError> {
        let result = self.take_over();
        if result.is_err() {
            self.claims = DeclarationIndex::default();
            self.stale_ids.clear();
            self.obsolete.clear();
        }
        result
    }

    /// [`ManifestsState::warm_start`]; on an error, the claims index may hold part of the
    /// checkpoints (the caller clears it).
    pub(super) fn take_over(&mut self) -> Result<WarmStart, storage::StorageError> {
        let mut w = WarmStart::default();
        let t0 = std::time::Instant::now();
        let Some(store) = self.store.clone() else { return Ok(w) };
        let view = store.read()?;
        w.store_empty = KindId::ALL
            .iter()
            .try_fold(true, |empty, &k| Ok::<_, storage::StorageError>(empty && view.count(k, &schema::Scope::All)? == 0))?;
        self.read_id_seed(&view)?;
        let want = self.dir_checkpoint();
        let mut same_dir = false;
        view.for_each_checkpoint(DIR_CHECKPOINT, |key, value| {
            same_dir = key == DIR_CHECKPOINT
                && storage::checkpoint::decode::<DirCheckpoint>(value, "manifests directory checkpoint").is_ok_and(|d| d == want);
        })?;
        if same_dir && self.id_seed_stored && view.checkpoints_sealed(SEAL_CHECKPOINT)? {
            match self.take_over_sealed(&view)? {
                Some(files) => {
                    self.adopt(files, &[], &[], &mut w);
                    self.sealed = Some(true);
                    w.sealed = true;
                    tracing::debug!(
                        seconds = t0.elapsed().as_secs_f64(),
                        documents = w.documents,
                        "warm start: sealed checkpoints taken over"
                    );
                    return Ok(w);
                }
                None => self.claims = DeclarationIndex::default(),
            }
        }
        let (mut checkpointed, checked) = self.check_against_store(&view, same_dir, t0)?;
        self.obsolete.append(&mut checkpointed.obsolete);
        self.dirty.extend(std::mem::take(&mut checkpointed.dirty));
        let Some((winners, confirmed, unconfirmed, mut ids)) = checked else { return Ok(w) };
        w.unconfirmed = unconfirmed;
        // The files' identity hashes are checkpointed again (under the seed in use).
        self.pending_ids = checkpointed.files.iter().map(|(rel, f)| (rel.clone(), std::mem::take(&mut ids[f.id as usize]))).collect();
        self.adopt(checkpointed.files, &winners, &confirmed, &mut w);
        Ok(w)
    }

    /// Takes the seed of the identity hashes from the store, when it holds one made by the same
    /// hash function; otherwise the random seed stays, to be stored with the next checkpoints.
    ///
    /// # Errors
    /// A store error reading it.
    fn read_id_seed(&mut self, view: &storage::ReadView) -> Result<(), storage::StorageError> {
        let stored = view.checkpoint(ID_SEED_CHECKPOINT)?;
        let Some(seed) = stored.and_then(|b| storage::checkpoint::decode::<IdSeed>(&b, "manifests id seed").ok()) else { return Ok(()) };
        let ids = IdHashes::with_seed(seed.seed);
        if ids.probe() == seed.probe {
            self.ids = ids;
            self.id_seed_stored = true;
        }
        Ok(())
    }

    /// The file checkpoints and the claims index of sealed checkpoints, read without a check
    /// against the store: from each file's identity hashes, not its documents. `None` (the
    /// claims index then holds part of them) when a file checkpoint does not decode, a file's
    /// hashes are missing or do not add up to its documents, or checkpoints of earlier layouts
    /// or of no file are left: the caller checks everything then.
    ///
    /// # Errors
    /// A store error reading the checkpoints.
    fn take_over_sealed(&mut self, view: &storage::ReadView) -> Result<Option<Vec<(String, FileEntry)>>, storage::StorageError> {
        let checkpointed = CheckpointedFiles::read(view, true)?;
        if !checkpointed.dirty.is_empty() || !checkpointed.obsolete.is_empty() {
            return Ok(None);
        }
        let mut hashes = vec![0usize; checkpointed.files.len()];
        let mut whole = true;
        let claims = &mut self.claims;
        claims.reserve(checkpointed.files.iter().map(|(_, f)| f.documents).sum());
        view.for_each_checkpoint(IDS_CHECKPOINT, |key, value| {
            let file = key.strip_prefix(IDS_CHECKPOINT).and_then(|rel| checkpointed.by_path.get(rel));
            let (Some(&id), 0) = (file, value.len() % 8) else {
                whole = false;
                return;
            };
            hashes[id as usize] += value.len() / 8;
            for h in value.chunks_exact(8) {
                claims.add(u64::from_le_bytes(h.try_into().expect("invariant: chunks of 8 bytes")), id);
            }
        })?;
        let whole = whole && checkpointed.files.iter().zip(&hashes).all(|((_, f), n)| f.documents == *n);
        Ok(whole.then_some(checkpointed.files))
    }

    /// Reads the file checkpoints (and, for this directory, build and feature set, their
    /// documents, checked against the store's source entries): the files, and for a checked
    /// directory the winners, which of them the store confirmed, the stored objects no winner
    /// confirmed and each file's identity hashes (by file id, [`IDS_CHECKPOINT`]'s layout).
    ///
    /// # Errors
    /// A store error reading the checkpoints or sources.
    #[allow(clippy::type_complexity)]
    fn check_against_store(
        &mut self,
        view: &storage::ReadView,
        same_dir: bool,
        t0: std::time::Instant,
    ) -> Result<(CheckpointedFiles, Option<(Vec<Expected>, Vec<bool>, Vec<SourceRef>, Vec<Vec<u8>>)>), storage::StorageError> {
        // The store's objects are read on a second thread (and on this one once the checkpoints
        // are read) while this one reads the checkpoints: the two halves of the check share the
        // two cores instead of running one after the other. Without checkpoints for this
        // directory there is nothing to check.
        let kinds = schema::registry::registered();
        let next_kind = AtomicUsize::new(if same_dir { 0 } else { kinds.len() });
        let present: Mutex<Vec<Option<Present>>> = Mutex::new(kinds.iter().map(|_| None).collect());
        let (ids, claims) = (&self.ids, &mut self.claims);
        std::thread::scope(|scope| {
            let reader = scope.spawn(|| read_present(view, ids, &kinds, &next_kind, &present));
            let mut checkpointed = CheckpointedFiles::read(view, same_dir)?;
            if !same_dir {
                // Every file is read and checkpointed again; the chunks and hashes of the old
                // checkpoints go first.
                for prefix in [DOCS_CHECKPOINT, IDS_CHECKPOINT] {
                    view.for_each_checkpoint(prefix, |key, _| checkpointed.obsolete.push(key.to_string()))?;
                }
                return Ok((checkpointed, None));
            }
            let expected = checkpointed.read_documents(view, ids)?;
            tracing::debug!(seconds = t0.elapsed().as_secs_f64(), documents = expected.len(), "warm start: checkpoints read");
            view.for_each_checkpoint(IDS_CHECKPOINT, |key, _| {
                if key.strip_prefix(IDS_CHECKPOINT).is_none_or(|rel| !checkpointed.by_path.contains_key(rel)) {
                    checkpointed.obsolete.push(key.to_string());
                }
            })?;
            let mut file_ids = vec![Vec::new(); checkpointed.by_path.len()];
            for e in &expected {
                file_ids[e.file as usize].extend_from_slice(&e.h.to_le_bytes());
            }
            let winners = claim_and_pick_winners(expected, claims);
            tracing::debug!(seconds = t0.elapsed().as_secs_f64(), "warm start: claims indexed, winners sorted");
            // This thread reads what is left of the store's objects, then waits for the other.
            read_present(view, ids, &kinds, &next_kind, &present)?;
            reader.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            let present = std::mem::take(&mut *present.lock().unwrap_or_else(|e| e.into_inner()));
            let (confirmed, unconfirmed) = confirm(view, ids, &kinds, present, &winners)?;
            tracing::debug!(seconds = t0.elapsed().as_secs_f64(), "warm start: store's sources checked");
            Ok((checkpointed, Some((winners, confirmed, unconfirmed, file_ids))))
        })
    }

    /// Takes the checked files over: a document no store object confirmed is stale (a kind
    /// re-derived after a change of its derivation version has no source entries left,
    /// `storage::versions`, so exactly the files that hold one of its documents are read again).
    fn adopt(&mut self, files: Vec<(String, FileEntry)>, winners: &[Expected], confirmed: &[bool], w: &mut WarmStart) {
        let mut stale_files: BTreeSet<u32> = BTreeSet::new();
        for (e, _) in winners.iter().zip(confirmed).filter(|(_, c)| !**c) {
            w.stale += 1;
            stale_files.insert(e.file);
            self.stale_ids.insert(e.h);
        }
        w.checked = true;
        w.files = files.len();
        w.documents = files.iter().map(|(_, f)| f.documents).sum();
        self.next_id = files.iter().map(|(_, f)| f.id + 1).max().unwrap_or(0);
        for (rel, entry) in files {
            if stale_files.contains(&entry.id) {
                self.stale.insert(rel.clone());
            }
            self.paths.insert(entry.id, rel.clone());
            self.files.insert(rel, entry);
        }
        self.dir_dirty = false;
    }

    /// The checkpoint changes for the writer since the last call: files read, re-read or gone,
    /// then the directory checkpoint. Sent after the refresh's changes, so a checkpoint is never
    /// committed before the records it describes. Each file's document chunks, identity hashes
    /// and header are one change, committed together: a header never describes chunks of
    /// another version of its file (a kill between them left the chunks of an edit under the
    /// header of the file before it, and a start that found the file back at that version
    /// confirmed the edit's records against those chunks and kept them). Empty without
    /// [`ManifestsState::with_checkpoints`].
    pub fn take_checkpoints(&mut self) -> Vec<Change> {
        if self.store.is_none() {
            self.dirty.clear();
            return Vec::new();
        }
        // Keys of no current checkpoint first: a chunk rewritten below then stays.
        let mut out: Vec<Change> = std::mem::take(&mut self.obsolete).into_iter().map(|key| Change::checkpoint(key, None)).collect();
        self.take_id_checkpoints(&mut out);
        for rel in std::mem::take(&mut self.dirty) {
            if let Some(change) = self.file_checkpoint_change(&rel) {
                out.push(change);
            }
        }
        if std::mem::take(&mut self.dir_dirty) {
            let value = Some(Arc::from(storage::checkpoint::encode(&self.dir_checkpoint())));
            out.push(Change::checkpoint(DIR_CHECKPOINT.to_string(), value));
        }
        if !out.is_empty() {
            // The seal goes first: only writes of source entries end it, and a kill among these
            // checkpoints (hashes under a new seed, keys of no file removed) must not leave a
            // seal that vouches for half of them.
            out.insert(0, Change::checkpoint(SEAL_CHECKPOINT.to_string(), None));
        }
        // Sealed when every file is checkpointed and nothing waits to be sent: the writer seals
        // if the store took every change as sent. Sent again only with other checkpoints or when
        // that changes, so an idle directory costs no commit.
        let sealable = self.sealable();
        if !out.is_empty() || self.sealed != Some(sealable) {
            out.push(match sealable {
                true => Change::Seal { key: SEAL_CHECKPOINT.to_string() },
                false => Change::checkpoint(SEAL_CHECKPOINT.to_string(), None),
            });
            self.sealed = Some(sealable);
        }
        out
    }

    /// The one change that writes (or removes) file `rel`'s checkpoint: its document chunks,
    /// identity hashes and header, in that order (the header last: once it is read back, so are
    /// they). `None` for a file whose parts cannot be read: the checkpoint of the file as it was
    /// last read whole stays, so a restart still knows (and keeps) the objects it held.
    fn file_checkpoint_change(&mut self, rel: &str) -> Option<Change> {
        if self.files.get(rel).is_some_and(|f| matches!(f.docs, Docs::Stored)) {
            // Only its stamp changed (touched): rewritten with its documents.
            let docs = self.load(rel);
            if let Some(f) = self.files.get_mut(rel) {
                f.docs = Docs::Held { docs, written: None };
            }
        }
        let gone = self.gone_chunks.remove(rel).unwrap_or(0);
        let mut entries: Vec<(String, Option<Arc<[u8]>>)> = Vec::new();
        let Some(f) = self.files.get_mut(rel) else {
            entries.extend((0..gone).map(|n| (docs_key(rel, n), None)));
            entries.push((ids_key(rel), None));
            entries.push((file_checkpoint_key(rel), None));
            return Some(Change::Checkpoint { entries, committed: None });
        };
        if f.partial {
            return None;
        }
        let before = f.chunks.max(gone);
        let header = match &f.docs {
            Docs::Held { docs, .. } if !f.uncheckpointed() => {
                let (header, chunks) = FileCheckpoint::of(f, docs);
                f.chunks = chunks.len() as u32;
                entries.extend(chunks.into_iter().enumerate().map(|(n, c)| (docs_key(rel, n as u32), Some(Arc::from(c)))));
                entries.push((ids_key(rel), Some(Arc::from(id_bytes(&self.ids, docs.iter())))));
                Some(Arc::<[u8]>::from(storage::checkpoint::encode(&header)))
            }
            _ => {
                f.chunks = 0;
                entries.push((ids_key(rel), None));
                None
            }
        };
        entries.extend((f.chunks..before).map(|n| (docs_key(rel, n), None)));
        let written = header.map(|bytes| Written { bytes, committed: Committed::default() });
        entries.push((file_checkpoint_key(rel), written.as_ref().map(|w| w.bytes.clone())));
        let committed = written.as_ref().map(|w| w.committed.clone());
        if let Docs::Held { written: w, .. } = &mut f.docs {
            *w = written;
        }
        Some(Change::Checkpoint { entries, committed })
    }

    /// Appends to `out` the seed of the identity hashes when the store does not hold it, and
    /// the hashes of the files a checked warm start took over.
    fn take_id_checkpoints(&mut self, out: &mut Vec<Change>) {
        let set = |key: String, bytes: Vec<u8>| Change::checkpoint(key, Some(Arc::from(bytes)));
        if !self.id_seed_stored {
            let seed = IdSeed { seed: self.ids.seed(), probe: self.ids.probe() };
            out.push(set(ID_SEED_CHECKPOINT.to_string(), storage::checkpoint::encode(&seed)));
            self.id_seed_stored = true;
        }
        for (rel, bytes) in std::mem::take(&mut self.pending_ids) {
            if self.files.contains_key(&rel) {
                out.push(set(ids_key(&rel), bytes));
            }
        }
    }

    /// Whether the checkpoints, once written, describe every object the source holds in the
    /// store: every file checkpointed, no object left unsent or stale, no directory unreadable,
    /// every checkpoint read back whole.
    fn sealable(&self) -> bool {
        self.unsent.is_empty()
            && self.stale.is_empty()
            && self.failed_dirs.is_empty()
            && !self.unreadable_checkpoint.get()
            && self.files.values().all(|f| !f.uncheckpointed())
    }
}

/// One checkpointed document as a warm start checks it: its identity hash, the first 16 bytes
/// of its version (two different versions share them with a chance of 2^-128), its file and its
/// kind's code. Vectors of these, sorted and merged, not maps: no spare buckets for a million
/// objects.
#[derive(Clone, Copy)]
struct Expected {
    h: u64,
    version: [u8; 16],
    file: u32,
    kind: u8,
}

/// The file checkpoints a warm start read.
#[derive(Default)]
struct CheckpointedFiles {
    /// The files, their id their position, in path order.
    files: Vec<(String, FileEntry)>,
    by_path: HashMap<String, u32>,
    /// Files to read again.
    dirty: Vec<String>,
    /// Checkpoint keys to remove.
    obsolete: Vec<String>,
}

impl CheckpointedFiles {
    /// Reads the file checkpoints; those of earlier layouts are to be removed. A checkpoint of
    /// another directory, build or feature set (`same_dir` false) or one that does not decode
    /// marks its file dirty (rewritten, or removed, after the first refresh).
    ///
    /// # Errors
    /// A store error reading the checkpoints.
    fn read(view: &storage::ReadView, same_dir: bool) -> Result<CheckpointedFiles, storage::StorageError> {
        let mut read = CheckpointedFiles::default();
        view.for_each_checkpoint(OLD_CHECKPOINTS, |key, _| read.obsolete.push(key.to_string()))?;
        view.for_each_checkpoint(FILE_CHECKPOINT, |key, value| {
            let Some(rel) = key.strip_prefix(FILE_CHECKPOINT) else { return };
            let decoded = match same_dir {
                true => storage::checkpoint::decode::<FileCheckpoint>(value, "manifests file checkpoint").ok(),
                false => None,
            };
            let Some(c) = decoded else {
                read.dirty.push(rel.to_string());
                return;
            };
            let id = read.files.len() as u32;
            read.by_path.insert(rel.to_string(), id);
            let entry = FileEntry {
                id,
                stamp: c.stamp,
                hash: c.hash,
                documents: c.documents as usize,
                docs: Docs::Stored,
                skips: Vec::new(),
                ignored: FileCheckpoint::ignored(c.ignored, rel),
                // Not checkpointed: counted again when the file is read again.
                left_out: LeftOut::default(),
                partial: false,
                retained: Vec::new(),
                chunks: c.chunks,
            };
            read.files.push((rel.to_string(), entry));
        })?;
        Ok(read)
    }

    /// Reads the files' document chunks, in key order (by path, then chunk number): one
    /// [`Expected`] per document. A file whose chunks do not add up (their count, their
    /// documents', or one that does not decode) is dropped, to be read again, and its chunks
    /// removed; a chunk of no file (removed after the first refresh) is removed.
    ///
    /// # Errors
    /// A store error reading the checkpoints.
    fn read_documents(&mut self, view: &storage::ReadView, ids: &IdHashes) -> Result<Vec<Expected>, storage::StorageError> {
        let stored = KindId::ALL.iter().map(|&k| view.count(k, &schema::Scope::All).unwrap_or(0)).sum::<u64>() as usize;
        // Sized by the store's record count, which is about the number of documents.
        let mut expected: Vec<Expected> = Vec::with_capacity(stored);
        // Per file: chunks and documents read, and whether every one decoded.
        let mut read: Vec<(u32, usize, bool)> = vec![(0, 0, true); self.files.len()];
        view.for_each_checkpoint(DOCS_CHECKPOINT, |key, value| {
            let Some((rel, _)) = key.strip_prefix(DOCS_CHECKPOINT).and_then(|k| k.rsplit_once('\0')) else { return };
            let Some(&id) = self.by_path.get(rel) else {
                self.obsolete.push(key.to_string());
                return;
            };
            let r = &mut read[id as usize];
            r.0 += 1;
            let Ok(docs) = storage::checkpoint::decode_borrowed::<Vec<DocCheckpointRef>>(value, "manifests document checkpoint") else {
                r.2 = false;
                return;
            };
            r.1 += docs.len();
            for d in &docs {
                let Some(kind) = KindId::from_code(d.kind) else {
                    r.2 = false;
                    return;
                };
                let mut version = [0u8; 16];
                version.copy_from_slice(&d.version.0[..16]);
                expected.push(Expected { h: ids.parts(kind, d.namespace, d.name), version, file: id, kind: d.kind });
            }
        })?;
        let valid: Vec<bool> = self.files.iter().zip(&read).map(|((_, f), r)| r.2 && r.0 == f.chunks && r.1 == f.documents).collect();
        if valid.iter().any(|v| !v) {
            expected.retain(|e| valid[e.file as usize]);
            for ((rel, _), _) in self.files.iter().zip(&valid).filter(|(_, v)| !**v) {
                tracing::warn!(file = %rel, "the file's checkpoint is incomplete; reading the file again");
                self.dirty.push(rel.clone());
                view.for_each_checkpoint(&format!("{DOCS_CHECKPOINT}{rel}\0"), |key, _| self.obsolete.push(key.to_string()))?;
            }
            let mut i = 0;
            self.files.retain(|_| {
                i += 1;
                valid[i - 1]
            });
        }
        Ok(expected)
    }
}

/// Adds every checkpointed document to the claims index and returns the winners, sorted by
/// kind and identity: files come in path order and documents in file order, so of the documents
/// of one object the last one wins (a stable sort keeps that order).
fn claim_and_pick_winners(mut expected: Vec<Expected>, claims: &mut DeclarationIndex) -> Vec<Expected> {
    claims.reserve(expected.len());
    for e in &expected {
        claims.add(e.h, e.file);
    }
    expected.sort_by_key(|e| (e.kind, e.h));
    expected.dedup_by(|later, kept| {
        let same = (later.kind, later.h) == (kept.kind, kept.h);
        if same {
            *kept = *later;
        }
        same
    });
    expected
}

/// Kind by kind, merges the store's objects (`present`, sorted) with the `winners` of that kind:
/// which winners an object confirms (same identity and version, once), and every object of the
/// store that no winner confirms (named by a second pass over its kind, rare: objects changed or
/// removed while stopped).
///
/// # Errors
/// A kind whose objects were not read (`Corrupt`), or a store error reading the sources.
fn confirm(
    view: &storage::ReadView,
    ids: &IdHashes,
    kinds: &[KindId],
    present: Vec<Option<Present>>,
    winners: &[Expected],
) -> Result<(Vec<bool>, Vec<SourceRef>), storage::StorageError> {
    let mut confirmed = vec![false; winners.len()];
    let mut unconfirmed = Vec::new();
    for (&kind, present) in kinds.iter().zip(present) {
        let Some(present) = present else {
            return Err(storage::StorageError::Corrupt(format!("the sources of {} were not read", kind.name())));
        };
        let from = winners.partition_point(|e| e.kind < kind.code());
        let to = winners.partition_point(|e| e.kind <= kind.code());
        let (ours, confirmed) = (&winners[from..to], &mut confirmed[from..to]);
        let mut unmatched = present.undecodable;
        let mut at = 0;
        for (h, v) in &present.objects {
            while at < ours.len() && ours[at].h < *h {
                at += 1;
            }
            match ours.get(at) {
                Some(e) if e.h == *h && e.version == *v && !confirmed[at] => confirmed[at] = true,
                _ => unmatched = true,
            }
        }
        drop(present);
        if unmatched {
            let mut seen = vec![false; ours.len()];
            view.for_each_source(kind, |namespace, name, version| {
                let h = ids.parts(kind, namespace.as_bytes(), name.as_bytes());
                let at = ours.partition_point(|e| e.h < h);
                let mut v = [0u8; 16];
                let ok = version.len() == 64 && hex_decode(&version[..32], &mut v);
                let matched = ok && ours.get(at).is_some_and(|e| e.h == h && e.version == v) && !std::mem::replace(&mut seen[at], true);
                if !matched {
                    unconfirmed.push(SourceRef { kind, namespace: namespace.to_string(), name: name.to_string() });
                }
            })?;
        }
    }
    Ok((confirmed, unconfirmed))
}

/// The store's source objects of one kind: (identity hash, first 16 bytes of the version),
/// sorted, and whether a stored version is not 64 lowercase hex digits.
#[derive(Default)]
struct Present {
    objects: Vec<(u64, [u8; 16])>,
    undecodable: bool,
}

/// Reads the store's source objects kind by kind, taking the next kind of `kinds` from
/// `next_kind` until none is left, into `out` at the kind's position. Called on two threads
/// at once, each takes the kinds the other has not.
///
/// # Errors
/// A store error reading the sources.
fn read_present(
    view: &storage::ReadView,
    ids: &IdHashes,
    kinds: &[KindId],
    next_kind: &AtomicUsize,
    out: &Mutex<Vec<Option<Present>>>,
) -> Result<(), storage::StorageError> {
    loop {
        let i = next_kind.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(&kind) = kinds.get(i) else { return Ok(()) };
        let mut p = Present { objects: Vec::with_capacity(view.count(kind, &schema::Scope::All)? as usize), undecodable: false };
        view.for_each_source_bytes(kind, |namespace, name, version| {
            let mut v = [0u8; 16];
            p.undecodable |= version.len() != 64 || !hex_decode(&version[..32], &mut v);
            p.objects.push((ids.parts(kind, namespace, name), v));
            Ok(())
        })?;
        p.objects.sort_unstable();
        out.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(p);
    }
}

/// Decodes lowercase hex digits into `out` (`hex` twice as long); `false` for anything else.
pub(in crate::source::manifests) fn hex_decode(hex: impl AsRef<[u8]>, out: &mut [u8]) -> bool {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let h = hex.as_ref();
    if h.len() != 2 * out.len() {
        return false;
    }
    for (i, o) in out.iter_mut().enumerate() {
        match (digit(h[2 * i]), digit(h[2 * i + 1])) {
            (Some(a), Some(b)) => *o = a << 4 | b,
            _ => return false,
        }
    }
    true
}
