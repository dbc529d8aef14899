//! The erased per-kind pipeline: a table `(apiVersion group, kind) → handler`, built once by
//! visiting [`schema::registry`]. No kind has code of its own here: every entry is the same
//! generic [`Typed<K>`].
//!
//! Pipeline of one document: typed decode (a failure names the field path, from
//! `serde_path_to_error`) → [`schema::Kind::translate`] → a [`Prepared`] record with its source
//! document ([`storage::documents`]), applied later by the writer with
//! [`storage::WriteBatch::upsert_encoded`].

use schema::kind::{Context, Features};
use schema::registry::{self, KindVisitor};
use schema::{Key, Kind, KindId, Skip, Timestamp};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use storage::{Outcome, SourceRef, StorageError, WriteBatch};

/// Why a document of a known kind is not projected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The document does not deserialize into the kind's custom resource type; the message
    /// names the field path (`spec.requestor: missing field \`application\``).
    Decode(String),
    /// Translation refused it.
    Skip(Skip),
    /// The document is larger than `source.maxDocumentBytes`.
    TooLarge {
        /// Its size in bytes (of its text, or of an object's JSON).
        bytes: usize,
        /// The limit in bytes.
        max: usize,
    },
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Decode(m) => write!(f, "invalid document: {m}"),
            Rejection::Skip(s) => write!(f, "not projected: {s}"),
            Rejection::TooLarge { bytes, max } => write!(f, "{}", too_large(*bytes, *max)),
        }
    }
}

/// The reason of a document larger than `source.maxDocumentBytes`.
pub fn too_large(bytes: usize, max: usize) -> String {
    format!("the document is {bytes} bytes, more than source.maxDocumentBytes ({max})")
}

/// The length of `v` encoded as compact JSON, in bytes, without building the text; stops
/// counting (returns more than `limit`) once `limit` is passed.
pub fn json_len(v: &Value, limit: usize) -> usize {
    struct Count(usize, usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            if self.0 > self.1 {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0, limit);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// A translated record of some kind, ready to be written. Cheap to share (retries reuse it).
pub trait Prepared: Send + Sync {
    /// The record's kind.
    fn kind(&self) -> KindId;
    /// The record's natural key.
    fn key(&self) -> Key;
    /// The parents that must be stored before the record can be written ([`schema::Kind::requires`]).
    fn requires(&self) -> Vec<schema::kind::Parent>;
    /// Whether an unresolved first link is reported as dependency missing
    /// ([`schema::Kind::RETRY_UNLINKED`]).
    fn retry_unlinked(&self) -> bool;
    /// Writes the record into `batch` (see [`WriteBatch::upsert`]).
    ///
    /// # Errors
    /// [`StorageError`] from the store; the batch must then be dropped.
    fn upsert(&self, batch: &mut WriteBatch<'_>, src: &SourceRef, version: &str, now: Timestamp) -> Result<Outcome, StorageError>;
    /// The record's encoding, as stored (a re-derivation stages it, `storage::rebuild`).
    fn encoded(&self) -> &[u8];
    /// The source document it was translated from, as stored (`storage::documents`).
    fn document(&self) -> Option<&[u8]>;
}

/// The erased operations of one kind.
pub trait Handler: Send + Sync {
    /// The kind.
    fn kind(&self) -> KindId;
    /// Decodes and translates one document; the record keeps the document, compressed with
    /// `dictionaries`, and the `manager` of the change (kept with its revision, the kube
    /// source's: [`crate::source::kube::manager_of`]). `compact` is `doc`'s compact JSON when
    /// the caller has it (the manifests source hashes it): the kept document is not serialized
    /// again when it is the whole of it ([`storage::documents::keeps_whole`]).
    ///
    /// # Errors
    /// [`Rejection`] when the document does not decode or translation skips it.
    fn prepare_with(
        &self,
        doc: &Value,
        compact: Option<&[u8]>,
        ctx: &Context,
        dictionaries: &storage::documents::Dictionaries,
        manager: Option<String>,
    ) -> Result<Arc<dyn Prepared>, Rejection>;
}

struct Typed<K>(PhantomData<K>);

/// A translated record with its key, encoding, parents and links derived where it was
/// translated (on the scan's threads), not by the writer.
struct Record<K: Kind>(storage::Encoded<K>);

impl<K: Kind> Prepared for Record<K> {
    fn kind(&self) -> KindId {
        K::ID
    }
    fn key(&self) -> Key {
        self.0.key().clone()
    }
    fn requires(&self) -> Vec<schema::kind::Parent> {
        self.0.requires().to_vec()
    }
    fn retry_unlinked(&self) -> bool {
        K::RETRY_UNLINKED
    }
    fn upsert(&self, batch: &mut WriteBatch<'_>, src: &SourceRef, version: &str, now: Timestamp) -> Result<Outcome, StorageError> {
        batch.upsert_encoded::<K>(src, version, &self.0, now)
    }
    fn encoded(&self) -> &[u8] {
        self.0.bytes()
    }
    fn document(&self) -> Option<&[u8]> {
        self.0.document()
    }
}

impl<K: Kind> Handler for Typed<K> {
    fn kind(&self) -> KindId {
        K::ID
    }
    fn prepare_with(
        &self,
        doc: &Value,
        compact: Option<&[u8]>,
        ctx: &Context,
        dictionaries: &storage::documents::Dictionaries,
        manager: Option<String>,
    ) -> Result<Arc<dyn Prepared>, Rejection> {
        // Path tracking allocates the name of every key it passes (a fifth of the scan's CPU), so
        // it only runs again on a document that fails: it decodes exactly as the plain decode
        // does and names the field path in the message.
        let cr: K::Cr = match K::Cr::deserialize(doc) {
            Ok(cr) => cr,
            Err(_) => serde_path_to_error::deserialize(doc).map_err(|e| Rejection::Decode(e.to_string()))?,
        };
        let rec = K::translate(&cr, ctx).map_err(Rejection::Skip)?;
        // Kept with the record, so that a later derivation needs nothing but the volume.
        let document = match compact.filter(|_| storage::documents::keeps_whole(doc)) {
            Some(json) => dictionaries.encode_json(K::ID, json),
            None => dictionaries.encode(K::ID, doc),
        };
        Ok(Arc::new(Record::<K>(storage::Encoded::new(rec).with_document(document).with_manager(manager))))
    }
}

/// What a document's `apiVersion` and `kind` refer to.
pub enum Lookup<'a> {
    /// A registered, enabled kind.
    Kind(&'a dyn Handler),
    /// A registered kind switched off by a feature flag.
    Disabled(KindId),
    /// Not a projected kind (e.g. `v1 Namespace`, `Environment`, another version).
    Unknown,
}

struct Entry {
    handler: Box<dyn Handler>,
    enabled: bool,
    position: usize,
}

/// The handler table of every registered kind.
pub struct Handlers {
    by_type: HashMap<(&'static str, &'static str), Entry>,
    by_kind: HashMap<KindId, (&'static str, &'static str)>,
    /// [`Handlers::position`] by [`KindId::code`]: asked once per sent change, without hashing.
    positions: Vec<usize>,
    /// The largest document or object projected, in bytes (`source.maxDocumentBytes`).
    max_document_bytes: usize,
    /// What documents are compressed with ([`Handlers::with_dictionaries`]).
    dictionaries: storage::documents::Dictionaries,
}

impl Handlers {
    /// Builds the table from [`schema::registry::visit`]; kinds switched off by `features`
    /// are known but disabled.
    pub fn new(features: &Features) -> Handlers {
        struct V<'f> {
            features: &'f Features,
            by_type: HashMap<(&'static str, &'static str), Entry>,
            by_kind: HashMap<KindId, (&'static str, &'static str)>,
        }
        impl KindVisitor for V<'_> {
            fn visit<K: Kind>(&mut self) {
                let id = (K::ID.group(), K::ID.name());
                let entry = Entry {
                    handler: Box::new(Typed::<K>(PhantomData)),
                    enabled: K::ID.enabled(self.features),
                    position: self.by_type.len(),
                };
                self.by_type.insert(id, entry);
                self.by_kind.insert(K::ID, id);
            }
        }
        let mut v = V { features, by_type: HashMap::new(), by_kind: HashMap::new() };
        registry::visit(&mut v);
        let mut positions = vec![usize::MAX; 256];
        for (kind, key) in &v.by_kind {
            if let Some(e) = v.by_type.get(key) {
                positions[usize::from(kind.code())] = e.position;
            }
        }
        Handlers {
            by_type: v.by_type,
            by_kind: v.by_kind,
            positions,
            max_document_bytes: crate::config::DEFAULT_MAX_DOCUMENT_BYTES,
            dictionaries: storage::documents::Dictionaries::default(),
        }
    }

    /// The table with another document size limit (`source.maxDocumentBytes`, in bytes).
    pub fn with_max_document_bytes(mut self, bytes: usize) -> Handlers {
        self.max_document_bytes = bytes;
        self
    }

    /// The table with the store's document dictionaries (`storage::documents`): the documents
    /// records keep are compressed with them.
    pub fn with_dictionaries(mut self, dictionaries: storage::documents::Dictionaries) -> Handlers {
        self.dictionaries = dictionaries;
        self
    }

    /// Decodes and translates one document of the handler `h` (see [`Handler::prepare_with`]),
    /// keeping the document compressed with this table's dictionaries.
    ///
    /// # Errors
    /// [`Rejection`] when the document does not decode or translation skips it.
    pub fn prepare(&self, h: &dyn Handler, doc: &Value, ctx: &Context) -> Result<Arc<dyn Prepared>, Rejection> {
        h.prepare_with(doc, None, ctx, &self.dictionaries, None)
    }

    /// [`Handlers::prepare`] of a document whose compact JSON (`serde_json::to_vec(doc)`) the
    /// caller has already written: the kept document is not written again when it is the same.
    ///
    /// # Errors
    /// As [`Handlers::prepare`].
    pub fn prepare_compact(&self, h: &dyn Handler, doc: &Value, compact: &[u8], ctx: &Context) -> Result<Arc<dyn Prepared>, Rejection> {
        h.prepare_with(doc, Some(compact), ctx, &self.dictionaries, None)
    }

    /// [`Handlers::prepare`] of a change made by `manager` (the kube source's).
    ///
    /// # Errors
    /// As [`Handlers::prepare`].
    pub fn prepare_managed(
        &self,
        h: &dyn Handler,
        doc: &Value,
        ctx: &Context,
        manager: Option<String>,
    ) -> Result<Arc<dyn Prepared>, Rejection> {
        h.prepare_with(doc, None, ctx, &self.dictionaries, manager)
    }

    /// The largest document (manifests) or object (kube, as JSON) projected, in bytes; a
    /// larger one is skipped with [`Rejection::TooLarge`] and what is stored of it stays.
    pub fn max_document_bytes(&self) -> usize {
        self.max_document_bytes
    }

    /// Looks up a document's `apiVersion` (`<group>/v1`) and `kind`.
    pub fn lookup(&self, api_version: &str, kind: &str) -> Lookup<'_> {
        let Some((group, "v1")) = api_version.split_once('/') else { return Lookup::Unknown };
        // The kind first: it tells the kinds apart at once, the group is mostly the same.
        let Some(key) = self.by_kind.values().find(|(g, k)| *k == kind && *g == group) else { return Lookup::Unknown };
        match self.by_type.get(key) {
            Some(e) if e.enabled => Lookup::Kind(e.handler.as_ref()),
            Some(e) => Lookup::Disabled(e.handler.kind()),
            None => Lookup::Unknown,
        }
    }

    /// The handler of `kind`, like [`Handlers::lookup`] by kind id.
    pub fn get(&self, kind: KindId) -> Lookup<'_> {
        match self.by_kind.get(&kind).and_then(|k| self.by_type.get(k)) {
            Some(e) if e.enabled => Lookup::Kind(e.handler.as_ref()),
            Some(e) => Lookup::Disabled(e.handler.kind()),
            None => Lookup::Unknown,
        }
    }

    /// The registry position of `kind` (parents before children); unregistered kinds last.
    pub fn position(&self, kind: KindId) -> usize {
        self.positions[usize::from(kind.code())]
    }

    /// The new derivation of a stored source document (its JSON) of `kind`: the record's
    /// encoding, or why it is not projected (a re-derivation from the volume,
    /// `storage::rebuild`).
    ///
    /// # Errors
    /// The reason, as a message: not JSON, a kind switched off, or a [`Rejection`].
    pub fn rederive(&self, kind: KindId, json: &[u8], ctx: &Context) -> Result<Vec<u8>, String> {
        let doc: Value = serde_json::from_slice(json).map_err(|e| format!("the stored document is not JSON: {e}"))?;
        match self.get(kind) {
            Lookup::Kind(h) => self.prepare(h, &doc, ctx).map(|p| p.encoded().to_vec()).map_err(|r| r.to_string()),
            Lookup::Disabled(_) | Lookup::Unknown => Err(format!("{} is switched off", kind.name())),
        }
    }

    /// Registered kinds, in registry order, with whether each is enabled.
    pub fn kinds(&self) -> Vec<(KindId, bool)> {
        let mut v: Vec<_> = self.by_type.values().map(|e| (e.position, e.handler.kind(), e.enabled)).collect();
        v.sort();
        v.into_iter().map(|(_, k, e)| (k, e)).collect()
    }
}
