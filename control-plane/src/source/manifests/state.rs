//! The source's memory of the directory ([`ManifestsState`]) and how a refresh turns file changes
//! into [`Change`]s.
//!
//! # What is kept
//! * Per file ([`FileEntry`]): its stamp, content hash, skip reports, ignored documents, and its
//!   documents (identity, position, version). The documents are held in memory only while they
//!   may be needed without the store: until the store holds the file's checkpoint, and always for
//!   a file that is never checkpointed (one with skipped documents or unreadable parts, or any
//!   file of a state without a store). Otherwise they are read back from the checkpoint when the
//!   file changes or when one of its objects is needed (a duplicate whose winner went away).
//! * Per object: one entry of the claims index ([`DeclarationIndex`]), the 64-bit identity hash of
//!   (kind, namespace, name) and the file declaring it (more files for a duplicate). A hash only
//!   proposes files: every object found through it is checked against that file's documents, so
//!   a hash collision costs a lookup, never a wrong answer.
//!
//! # How a refresh decides
//! Only files that were read again (stamp and then hash changed), added or removed are looked
//! at, with the files that declare the same objects. For each object declared in such a file,
//! before or now, the winning document (the later path in lexical order, the later document
//! within a file) of the old and of the new state is found; the new winner is sent when its
//! version differs from the old winner's (or that is unknown: a skipped old winner, a checkpoint
//! the store did not confirm), nothing is sent when the new winner is skipped (the stored record
//! stays), and an object without any document is deleted. A winner whose translated record is
//! no longer held (it lives in a file that was not read now) has its file read again.

use super::{
    has_manifest_extension, scan_text, scan_text_blocks, walk, Document, DocumentPosition, FileScan, Ignored, SkipReason, SkipReport,
    Stamp, Version, STREAM_BLOCK,
};
use crate::config::Clock;
use crate::projector::handlers::{Handlers, Prepared};
use crate::projector::writer::Change;
use schema::kind::{Context, Features};
use schema::KindId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use storage::{SourceRef, Store};

// Maps over every object of the directory (a million at the largest): a fast hasher, seeded per
// process. The keys come from the operator's own manifests.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// A file's documents: in memory, or only in the store's checkpoint.
enum Docs {
    /// In memory (with their translated records until those are sent). `written` is the
    /// checkpoint sent to the writer for exactly these documents, until the store is seen to
    /// hold it ([`ManifestsState::settle`]); then the documents are dropped.
    Held { docs: Vec<Document>, written: Option<Arc<[u8]>> },
    /// Only in the store's checkpoint ([`FileCheckpoint`]).
    Stored,
}

/// One file as last read.
struct FileEntry {
    /// The file's id in the claims index, fixed while the file is known.
    id: u32,
    stamp: Stamp,
    hash: [u8; 32],
    docs: Docs,
    /// Documents of projected kinds (winners and losers of duplicates included).
    documents: usize,
    skips: Vec<SkipReport>,
    ignored: Vec<Ignored>,
    /// Whether some part could not be read (then the objects it held before are kept).
    partial: bool,
    /// While `partial`: the documents of objects it held before that cannot be read now.
    retained: Vec<Document>,
    /// Chunks of documents of its checkpoint as last sent (removed when it shrinks or goes).
    chunks: u32,
}

impl FileEntry {
    fn new(id: u32, stamp: Stamp, hash: [u8; 32], scan: FileScan) -> FileEntry {
        FileEntry {
            id,
            stamp,
            hash,
            documents: scan.docs.len(),
            docs: Docs::Held { docs: scan.docs, written: None },
            skips: scan.skips,
            ignored: scan.ignored,
            partial: scan.partial,
            retained: Vec::new(),
            chunks: 0,
        }
    }

    /// Whether the file is read on every start instead of being checkpointed (a partially
    /// readable file keeps the checkpoint of when it was last read whole).
    fn uncheckpointed(&self) -> bool {
        self.partial || !self.skips.is_empty()
    }
}

/// A duplicate: `winner` overrides `loser` for the same object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Duplicate {
    /// The object.
    pub src: SourceRef,
    /// The document that is ignored.
    pub loser: DocumentPosition,
    /// The document that wins (later path in lexical order).
    pub winner: DocumentPosition,
}

/// What one [`ManifestsState::refresh`] found.
#[derive(Default)]
pub struct Refresh {
    /// Changes for the writer: applies in registry order (parents first), then deletes.
    pub changes: Vec<Change>,
    /// Skip reports of files read in this refresh (to be logged).
    pub new_skips: Vec<SkipReport>,
    /// Ignored documents of files read in this refresh.
    pub new_ignored: Vec<Ignored>,
    /// Duplicates not reported before.
    pub new_duplicates: Vec<Duplicate>,
    /// Files read (parsed) in this refresh.
    pub files_read: usize,
    /// Files whose documents the diff looked at: those read, added or removed, and those
    /// declaring one of their objects too. An edit of a file whose objects no other file
    /// declares costs that file alone.
    pub files_examined: usize,
    /// Changes handed to the sender by [`ManifestsState::refresh_streaming`].
    pub sent: usize,
    /// Whether anything in the directory changed.
    pub changed: bool,
}

/// What [`ManifestsState::warm_start`] took over from the store's checkpoints.
#[derive(Debug, Default)]
pub struct WarmStart {
    /// Whether the checkpoints belong to this directory, build and feature set and were checked
    /// against the store (then no sweep is needed: `unconfirmed` lists what to delete).
    pub checked: bool,
    /// Files taken over: read again only when their stamp (length, mtime, inode, ctime) changed.
    pub files: usize,
    /// Documents of those files.
    pub documents: usize,
    /// Checkpointed objects whose record is missing or at another version (parked for a retry
    /// when the last run stopped, or written by a run that stopped before its checkpoint):
    /// their files are read again and their documents sent.
    pub stale: usize,
    /// Stored objects that no checkpointed object confirmed: deleted after the first refresh
    /// unless a file read then holds them ([`ManifestsState::not_held`]).
    pub unconfirmed: Vec<SourceRef>,
    /// Whether the store held no record at all (a new store): then everything stored after the
    /// first refresh came from it, and no sweep is needed.
    pub store_empty: bool,
}

/// Checkpoint keys of the manifests source ([`storage::checkpoint`]), all under `manifests/v2/`
/// (`v2`: the layouts of [`FileCheckpoint`] and its document chunks; `v1` kept a file's
/// documents in one value, and its keys are removed when found). The directory, build and
/// features the file checkpoints belong to:
const DIR_CHECKPOINT: &str = "manifests/v2/dir";
/// Followed by the file's relative path: its [`FileCheckpoint`].
const FILE_CHECKPOINT: &str = "manifests/v2/file/";
/// Followed by the file's relative path, `\0` and the chunk number (8 hex digits): up to
/// [`CHUNK_DOCS`] of its documents, in file order (a list of [`DocCheckpoint`]). Small values:
/// redb's page cache holds and evicts them like other pages.
const DOCS_CHECKPOINT: &str = "manifests/v2/docs/";
/// Checkpoints of earlier layouts, removed after the first refresh.
const OLD_CHECKPOINTS: &str = "manifests/v1/";
/// Documents per checkpoint chunk.
const CHUNK_DOCS: usize = 1024;

/// The key of file `rel`'s checkpoint (`rel` relative to the manifests directory, `/`
/// separators). It is written, in order with the changes the refresh that read the file sent,
/// once per change of the file, and removed with the file: a barrier for "the source has read
/// this version of the file".
pub fn file_checkpoint_key(rel: &str) -> String {
    format!("{FILE_CHECKPOINT}{rel}")
}

/// The key of chunk `n` of file `rel`'s documents.
fn docs_key(rel: &str, n: u32) -> String {
    format!("{DOCS_CHECKPOINT}{rel}\0{n:08x}")
}

/// What the file checkpoints were made for: any difference starts cold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct DirCheckpoint {
    /// The canonical manifests directory.
    dir: String,
    /// The feature flags (`Debug` form): a kind switched on or off changes what is projected.
    features: String,
    /// The build (`CARGO_PKG_VERSION`): translation may differ between builds.
    build: String,
}

/// One file as last read: enough to know it is unchanged and what it holds, without its text
/// (its documents are in `chunks` chunks under [`DOCS_CHECKPOINT`], written before it). Only
/// files without skipped documents or unreadable parts are checkpointed (the others are read on
/// every start, so their skip reports are logged again).
#[derive(Serialize, Deserialize)]
struct FileCheckpoint {
    stamp: Stamp,
    /// SHA-256 of the file.
    hash: [u8; 32],
    /// Documents of projected kinds.
    documents: u64,
    /// Chunks of documents.
    chunks: u32,
    ignored: Vec<IgnoredCheckpoint>,
}

/// Where a document is in its file ([`DocumentPosition`] without the file).
#[derive(Serialize, Deserialize)]
struct Position {
    document: u64,
    item: Option<u64>,
    line: u64,
}

impl Position {
    fn of(o: &DocumentPosition) -> Position {
        Position { document: o.document as u64, item: o.item.map(|i| i as u64), line: o.line as u64 }
    }

    fn origin(self, file: &Arc<str>) -> DocumentPosition {
        DocumentPosition {
            file: file.clone(),
            document: self.document as usize,
            item: self.item.map(|i| i as usize),
            line: self.line as usize,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct DocCheckpoint {
    position: Position,
    /// [`KindId::code`].
    kind: u8,
    namespace: String,
    name: String,
    version: Version,
}

/// [`DocCheckpoint`] borrowing its strings from the stored bytes (the same encoding): what a
/// start reads of every document without building it.
#[derive(Deserialize)]
struct DocCheckpointRef<'a> {
    #[allow(dead_code)]
    position: Position,
    kind: u8,
    namespace: &'a str,
    name: &'a str,
    version: Version,
}

#[derive(Serialize, Deserialize)]
struct IgnoredCheckpoint {
    position: Position,
    reason: String,
    disabled: bool,
}

impl FileCheckpoint {
    /// The checkpoint of `e` with documents `docs`, and its chunks of documents.
    fn of(e: &FileEntry, docs: &[Document]) -> (FileCheckpoint, Vec<Vec<u8>>) {
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
    fn docs(docs: Vec<DocCheckpoint>, rel: &str) -> Option<Vec<Document>> {
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

    fn ignored(ignored: Vec<IgnoredCheckpoint>, rel: &str) -> Vec<Ignored> {
        let file: Arc<str> = Arc::from(rel);
        ignored.into_iter().map(|i| Ignored { origin: i.position.origin(&file), reason: i.reason, disabled: i.disabled }).collect()
    }
}

/// A hasher for keys that are hashes already (the claims index): passes a `u64` through.
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Not used by `u64` keys; a plain fold keeps any other key correct.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type IdMap<V> = std::collections::HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// The claims index: identity hash → the files declaring an object with that hash (each file
/// once, however often it declares it). About 17 bytes per object.
#[derive(Default)]
struct DeclarationIndex {
    first: IdMap<u32>,
    /// Further files, for the few objects declared in more than one file (or hashes shared by
    /// different objects).
    more: IdMap<Vec<u32>>,
}

impl DeclarationIndex {
    fn add(&mut self, h: u64, file: u32) {
        match self.first.entry(h) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(file);
            }
            std::collections::hash_map::Entry::Occupied(o) if *o.get() == file => {}
            std::collections::hash_map::Entry::Occupied(_) => {
                let more = self.more.entry(h).or_default();
                if !more.contains(&file) {
                    more.push(file);
                }
            }
        }
    }

    fn remove(&mut self, h: u64, file: u32) {
        let Some(first) = self.first.get_mut(&h) else { return };
        if *first == file {
            match self.more.get_mut(&h) {
                Some(more) => {
                    *first = more.swap_remove(0);
                    if more.is_empty() {
                        self.more.remove(&h);
                    }
                }
                None => {
                    self.first.remove(&h);
                }
            }
        } else if let Some(more) = self.more.get_mut(&h) {
            more.retain(|f| *f != file);
            if more.is_empty() {
                self.more.remove(&h);
            }
        }
    }

    fn reserve(&mut self, objects: usize) {
        self.first.reserve(objects);
    }

    fn files(&self, h: u64) -> impl Iterator<Item = u32> + '_ {
        self.first.get(&h).copied().into_iter().chain(self.more.get(&h).into_iter().flatten().copied())
    }
}

/// A file's documents as one diff sees them, with their positions by identity hash.
struct Indexed {
    docs: Vec<Document>,
    /// (identity hash, position in `docs`), sorted.
    by_id: Vec<(u64, u32)>,
}

impl Indexed {
    fn new(docs: Vec<Document>, ids: &IdHashes) -> Indexed {
        let mut by_id: Vec<(u64, u32)> = docs.iter().enumerate().map(|(i, d)| (ids.of(&d.src), i as u32)).collect();
        by_id.sort_unstable();
        Indexed { docs, by_id }
    }

    fn empty() -> Indexed {
        Indexed { docs: Vec::new(), by_id: Vec::new() }
    }

    /// The documents of `src` (identity hash `h`), in file order.
    fn all<'a>(&'a self, h: u64, src: &'a SourceRef) -> impl Iterator<Item = &'a Document> + 'a {
        self.all_hash(h).filter(move |d| *d.src == *src)
    }

    /// The documents whose identity hash is `h`, in file order.
    fn all_hash(&self, h: u64) -> impl Iterator<Item = &Document> + '_ {
        let from = self.by_id.partition_point(|(x, _)| *x < h);
        self.by_id[from..].iter().take_while(move |(x, _)| *x == h).map(|(_, i)| &self.docs[*i as usize])
    }

    /// The winning (last) document of `src` in the file.
    fn last<'a>(&'a self, h: u64, src: &'a SourceRef) -> Option<&'a Document> {
        self.all(h, src).last()
    }

    /// The distinct identity hashes of the file.
    fn hashes(&self) -> impl Iterator<Item = u64> + '_ {
        let mut prev = None;
        self.by_id.iter().filter_map(move |(h, _)| (prev.replace(*h) != Some(*h)).then_some(*h))
    }
}

/// The identity hash of source objects ([`DeclarationIndex`]), seeded per process.
#[derive(Default)]
struct IdHashes(foldhash::fast::RandomState);

impl IdHashes {
    fn of(&self, src: &SourceRef) -> u64 {
        self.parts(src.kind, &src.namespace, &src.name)
    }

    fn parts(&self, kind: KindId, namespace: &str, name: &str) -> u64 {
        self.0.hash_one((kind.code(), namespace, name))
    }
}

/// A file read, added or removed in this refresh.
struct Changed {
    rel: String,
    /// The entry it replaced (`None`: a new file).
    old: Option<FileEntry>,
}

/// What the diff decided, before anything is changed.
#[derive(Default)]
struct Plan {
    applies: Vec<(usize, DocumentPosition, Change)>,
    deletes: Vec<Change>,
    /// Unchanged files to read again for records of winners to send.
    reread: BTreeSet<String>,
    /// Per examined object, its duplicates in the new state.
    duplicates: Vec<(SourceRef, Vec<Duplicate>)>,
    /// Objects whose winner must be sent but has no record even after reading its file again.
    unsent: Vec<SourceRef>,
    examined: usize,
}

/// The source's memory of the directory (see the module docs).
pub struct ManifestsState {
    dir: PathBuf,
    handlers: Arc<Handlers>,
    features: Features,
    clock: Clock,
    files: BTreeMap<String, FileEntry>,
    /// Relative path of every file id.
    paths: HashMap<u32, String>,
    next_id: u32,
    claims: DeclarationIndex,
    ids: IdHashes,
    /// Duplicated objects and their duplicates.
    duplicates: HashMap<SourceRef, Vec<Duplicate>>,
    /// Objects whose winner could not be sent yet (its file could not be read again); examined
    /// again by the next refresh.
    unsent: HashSet<SourceRef>,
    /// Files with objects whose checkpointed version the store did not confirm at start: read
    /// again by the first refresh.
    stale: BTreeSet<String>,
    /// Identity hashes of those objects: sent again by the first refresh.
    stale_ids: std::collections::HashSet<u64, BuildHasherDefault<IdHasher>>,
    /// Where checkpoints are read from ([`ManifestsState::with_checkpoints`]).
    store: Option<Store>,
    /// Files whose checkpoint is to be written or removed ([`ManifestsState::take_checkpoints`]).
    dirty: BTreeSet<String>,
    /// Whether the directory checkpoint is to be written.
    dir_dirty: bool,
    /// Checkpoint keys to remove (earlier layouts, chunks of no file).
    obsolete: Vec<String>,
    /// Directories that could not be read at the last refresh (warned about once).
    failed_dirs: BTreeSet<String>,
    /// Chunks of documents stored for files that are gone, removed with their checkpoints.
    gone_chunks: BTreeMap<String, u32>,
}

impl ManifestsState {
    /// A state that has seen nothing yet.
    pub fn new(dir: &Path, handlers: Arc<Handlers>, features: Features, clock: Clock) -> ManifestsState {
        ManifestsState {
            dir: dir.to_path_buf(),
            handlers,
            features,
            clock,
            files: BTreeMap::new(),
            paths: HashMap::default(),
            next_id: 0,
            claims: DeclarationIndex::default(),
            ids: IdHashes::default(),
            duplicates: HashMap::default(),
            unsent: HashSet::default(),
            stale: BTreeSet::new(),
            stale_ids: Default::default(),
            store: None,
            dirty: BTreeSet::new(),
            dir_dirty: true,
            obsolete: Vec::new(),
            failed_dirs: BTreeSet::new(),
            gone_chunks: BTreeMap::new(),
        }
    }

    /// Keeps checkpoints in `store` ([`storage::checkpoint`]): [`ManifestsState::warm_start`]
    /// reads them, [`ManifestsState::take_checkpoints`] writes them, and a file's documents are
    /// read back from its checkpoint instead of being held in memory.
    pub fn with_checkpoints(mut self, store: Store) -> ManifestsState {
        self.store = Some(store);
        self
    }

    /// Every skip report of the directory as it is now, in path order.
    pub fn skips(&self) -> Vec<SkipReport> {
        self.files.values().flat_map(|f| f.skips.iter().cloned()).collect()
    }

    /// Every ignored document of the directory as it is now.
    pub fn ignored(&self) -> Vec<Ignored> {
        self.files.values().flat_map(|f| f.ignored.iter().cloned()).collect()
    }

    /// Every object the directory holds now (including skipped and retained ones). Reads the
    /// documents of checkpointed files back from the store (a file whose checkpoint cannot be
    /// read is logged and left out).
    pub fn present(&self) -> std::collections::HashSet<SourceRef> {
        let mut out = std::collections::HashSet::new();
        for (rel, f) in &self.files {
            for d in self.effective_docs(rel, f) {
                out.insert((*d.src).clone());
            }
        }
        out
    }

    /// Whether the directory holds `src` now (see [`ManifestsState::present`]).
    pub fn holds(&self, src: &SourceRef) -> bool {
        let h = self.ids.of(src);
        self.claims.files(h).any(|id| {
            let Some((rel, f)) = self.paths.get(&id).and_then(|rel| self.files.get_key_value(rel)) else { return false };
            self.effective_docs(rel, f).iter().any(|d| *d.src == *src)
        })
    }

    /// The objects of `srcs` the directory does not hold now ([`ManifestsState::holds`]), each
    /// file's documents read once.
    pub fn not_held(&self, srcs: Vec<SourceRef>) -> Vec<SourceRef> {
        let mut loaded: HashMap<u32, Indexed> = HashMap::default();
        srcs.into_iter()
            .filter(|src| {
                let h = self.ids.of(src);
                !self.claims.files(h).collect::<Vec<_>>().into_iter().any(|id| {
                    let idx = loaded.entry(id).or_insert_with(|| self.indexed_by_id(id));
                    idx.last(h, src).is_some()
                })
            })
            .collect()
    }

    /// Number of manifest files read.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Number of documents of projected kinds (winners and losers of duplicates included).
    pub fn document_count(&self) -> usize {
        self.files.values().map(|f| f.documents).sum()
    }

    /// Files whose documents are held in memory (the others are in the store's checkpoints).
    pub fn files_held(&self) -> usize {
        self.files.values().filter(|f| matches!(f.docs, Docs::Held { .. })).count()
    }

    fn dir_checkpoint(&self) -> DirCheckpoint {
        let dir = self.dir.canonicalize().unwrap_or_else(|_| self.dir.clone());
        DirCheckpoint {
            dir: dir.display().to_string(),
            features: format!("{:?}", self.features),
            build: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// The id of file `rel`: its entry's, or a new one.
    fn id_of(&mut self, rel: &str) -> u32 {
        if let Some(e) = self.files.get(rel) {
            return e.id;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.paths.insert(id, rel.to_string());
        id
    }

    /// The documents of file `rel` as they are now (read back from the store for a checkpointed
    /// file), the retained ones included.
    fn effective_docs(&self, rel: &str, f: &FileEntry) -> Vec<Document> {
        let mut docs = match &f.docs {
            Docs::Held { docs, .. } => docs.clone(),
            Docs::Stored => self.load(rel),
        };
        docs.extend(f.retained.iter().cloned());
        docs
    }

    fn indexed_by_id(&self, id: u32) -> Indexed {
        match self.paths.get(&id).and_then(|rel| self.files.get_key_value(rel)) {
            Some((rel, f)) => Indexed::new(self.effective_docs(rel, f), &self.ids),
            None => Indexed::empty(),
        }
    }

    /// The documents of file `rel` from its checkpoint in the store. A checkpoint that cannot be
    /// read is logged and taken as empty: the objects it listed are then not deleted when the
    /// file changes (the next start's check against the store deletes what no file holds).
    fn load(&self, rel: &str) -> Vec<Document> {
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
                Vec::new()
            }
            Err(e) => {
                tracing::error!(file = rel, error = %e, "cannot read the file's checkpoint; taking it as empty");
                Vec::new()
            }
        }
    }

    /// Drops the documents of files whose checkpoint the store now holds (they are read back
    /// from it when needed). A checkpoint that was never written (its change was dropped) keeps
    /// the documents in memory.
    fn settle(&mut self) {
        let Some(store) = &self.store else { return };
        let Ok(view) = store.read() else { return };
        for (rel, f) in &mut self.files {
            let Docs::Held { written: Some(bytes), .. } = &f.docs else { continue };
            if Arc::strong_count(bytes) > 1 {
                // Still queued in the writer.
                continue;
            }
            let stored = view.checkpoint(&format!("{FILE_CHECKPOINT}{rel}")).ok().flatten();
            if stored.as_deref() == Some(&bytes[..]) {
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
    fn take_over(&mut self) -> Result<WarmStart, storage::StorageError> {
        let mut w = WarmStart::default();
        let Some(store) = self.store.clone() else { return Ok(w) };
        let view = store.read()?;
        w.store_empty = KindId::ALL
            .iter()
            .try_fold(true, |empty, &k| Ok::<_, storage::StorageError>(empty && view.count(k, &schema::Scope::All)? == 0))?;
        let want = self.dir_checkpoint();
        let mut same_dir = false;
        view.for_each_checkpoint(DIR_CHECKPOINT, |key, value| {
            same_dir = key == DIR_CHECKPOINT
                && storage::checkpoint::decode::<DirCheckpoint>(value, "manifests directory checkpoint").is_ok_and(|d| d == want);
        })?;
        // Per checkpointed document: its identity hash, the first 16 bytes of its version (two
        // different versions share them with a chance of 2^-128) and its file. Vectors, sorted
        // and merged, not maps: no spare buckets for a million objects. Sized by the store's
        // record count, which is about the number of documents.
        #[derive(Clone, Copy)]
        struct Expected {
            h: u64,
            version: [u8; 16],
            file: u32,
            kind: u8,
        }
        let stored = KindId::ALL.iter().map(|&k| view.count(k, &schema::Scope::All).unwrap_or(0)).sum::<u64>() as usize;
        let mut expected: Vec<Expected> = Vec::with_capacity(stored);
        view.for_each_checkpoint(OLD_CHECKPOINTS, |key, _| self.obsolete.push(key.to_string()))?;
        // The files (id = position), then their documents, chunk by chunk in key order: by
        // path, then chunk number. A file whose chunks do not add up is read again.
        let mut files: Vec<(String, FileEntry)> = Vec::new();
        let mut by_path: HashMap<String, u32> = HashMap::default();
        let mut dirty = Vec::new();
        view.for_each_checkpoint(FILE_CHECKPOINT, |key, value| {
            let Some(rel) = key.strip_prefix(FILE_CHECKPOINT) else { return };
            let decoded = match same_dir {
                true => storage::checkpoint::decode::<FileCheckpoint>(value, "manifests file checkpoint").ok(),
                false => None,
            };
            let Some(c) = decoded else {
                // Rewritten (or removed) after the first refresh.
                dirty.push(rel.to_string());
                return;
            };
            let id = files.len() as u32;
            by_path.insert(rel.to_string(), id);
            let entry = FileEntry {
                id,
                stamp: c.stamp,
                hash: c.hash,
                documents: c.documents as usize,
                docs: Docs::Stored,
                skips: Vec::new(),
                ignored: FileCheckpoint::ignored(c.ignored, rel),
                partial: false,
                retained: Vec::new(),
                chunks: c.chunks,
            };
            files.push((rel.to_string(), entry));
        })?;
        self.dirty.extend(dirty);
        if !same_dir {
            // Every file is read and checkpointed again; the chunks of the old checkpoints go
            // first.
            view.for_each_checkpoint(DOCS_CHECKPOINT, |key, _| self.obsolete.push(key.to_string()))?;
            return Ok(w);
        }
        // Per file: chunks and documents read, and whether every one decoded.
        let mut read: Vec<(u32, usize, bool)> = vec![(0, 0, true); files.len()];
        view.for_each_checkpoint(DOCS_CHECKPOINT, |key, value| {
            let Some((rel, _)) = key.strip_prefix(DOCS_CHECKPOINT).and_then(|k| k.rsplit_once('\0')) else { return };
            let Some(&id) = by_path.get(rel) else {
                // A chunk whose file checkpoint is gone: removed after the first refresh.
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
                expected.push(Expected { h: self.ids.parts(kind, d.namespace, d.name), version, file: id, kind: d.kind });
            }
        })?;
        let valid: Vec<bool> = files.iter().zip(&read).map(|((_, f), r)| r.2 && r.0 == f.chunks && r.1 == f.documents).collect();
        if valid.iter().any(|v| !v) {
            expected.retain(|e| valid[e.file as usize]);
            for ((rel, _), _) in files.iter().zip(&valid).filter(|(_, v)| !**v) {
                tracing::warn!(file = %rel, "the file's checkpoint is incomplete; reading the file again");
                self.dirty.insert(rel.clone());
                view.for_each_checkpoint(&format!("{DOCS_CHECKPOINT}{rel}\0"), |key, _| self.obsolete.push(key.to_string()))?;
            }
            let mut i = 0;
            files.retain(|_| {
                i += 1;
                valid[i - 1]
            });
        }
        self.claims.reserve(expected.len());
        for e in &expected {
            self.claims.add(e.h, e.file);
        }
        // Files come in path order and documents in file order: of the documents of one
        // object, the last one is the winner (a stable sort keeps that order).
        expected.sort_by_key(|e| (e.kind, e.h));
        expected.dedup_by(|later, kept| {
            let same = (later.kind, later.h) == (kept.kind, kept.h);
            if same {
                *kept = *later;
            }
            same
        });
        let winners = expected;
        let mut confirmed = vec![false; winners.len()];
        // Kind by kind, the store's objects (identity hash, version), sorted and merged with the
        // winners of that kind: a kind's objects at a time, not the store's.
        for kind in schema::registry::registered() {
            let from = winners.partition_point(|e| e.kind < kind.code());
            let to = winners.partition_point(|e| e.kind <= kind.code());
            let (ours, confirmed) = (&winners[from..to], &mut confirmed[from..to]);
            let mut present: Vec<(u64, [u8; 16])> = Vec::with_capacity(ours.len());
            let mut undecodable = false;
            view.for_each_source(kind, |namespace, name, version| {
                let mut v = [0u8; 16];
                undecodable |= version.len() != 64 || !hex_decode(&version[..32], &mut v);
                present.push((self.ids.parts(kind, namespace, name), v));
            })?;
            present.sort_unstable();
            let mut unmatched = undecodable;
            let mut at = 0;
            for (h, v) in &present {
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
                // Rare (objects changed or removed while stopped): a second pass names every
                // object of the kind that no winner confirmed.
                let mut seen = vec![false; ours.len()];
                view.for_each_source(kind, |namespace, name, version| {
                    let h = self.ids.parts(kind, namespace, name);
                    let at = ours.partition_point(|e| e.h < h);
                    let mut v = [0u8; 16];
                    let ok = version.len() == 64 && hex_decode(&version[..32], &mut v);
                    let matched = ok && ours.get(at).is_some_and(|e| e.h == h && e.version == v) && !std::mem::replace(&mut seen[at], true);
                    if !matched {
                        w.unconfirmed.push(SourceRef { kind, namespace: namespace.to_string(), name: name.to_string() });
                    }
                })?;
            }
        }
        // A kind re-derived after a change of its derivation version has no source entries left
        // (`storage::versions`): none of its documents is confirmed, so exactly the files that
        // hold one are read again.
        let mut stale_files: BTreeSet<u32> = BTreeSet::new();
        for (e, _) in winners.iter().zip(&confirmed).filter(|(_, c)| !**c) {
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
        Ok(w)
    }

    /// The checkpoint changes for the writer since the last call: files read, re-read or gone,
    /// then the directory checkpoint. Sent after the refresh's changes, so a checkpoint is never
    /// committed before the records it describes. Empty without [`ManifestsState::with_checkpoints`].
    pub fn take_checkpoints(&mut self) -> Vec<Change> {
        if self.store.is_none() {
            self.dirty.clear();
            return Vec::new();
        }
        // Keys of no current checkpoint first: a chunk rewritten below then stays.
        let mut out: Vec<Change> =
            std::mem::take(&mut self.obsolete).into_iter().map(|key| Change::Checkpoint { key, value: None }).collect();
        let set = |key: String, bytes: Vec<u8>| Change::Checkpoint { key, value: Some(Arc::from(bytes)) };
        for rel in std::mem::take(&mut self.dirty) {
            if self.files.get(&rel).is_some_and(|f| matches!(f.docs, Docs::Stored)) {
                // Only its stamp changed (touched): rewritten with its documents.
                let docs = self.load(&rel);
                if let Some(f) = self.files.get_mut(&rel) {
                    f.docs = Docs::Held { docs, written: None };
                }
            }
            let gone = self.gone_chunks.remove(&rel).unwrap_or(0);
            let Some(f) = self.files.get_mut(&rel) else {
                out.extend((0..gone).map(|n| Change::Checkpoint { key: docs_key(&rel, n), value: None }));
                out.push(Change::Checkpoint { key: format!("{FILE_CHECKPOINT}{rel}"), value: None });
                continue;
            };
            if f.partial {
                // Parts cannot be read: the checkpoint of the file as it was last read whole
                // stays, so a restart still knows (and keeps) the objects it held.
                continue;
            }
            let before = f.chunks.max(gone);
            let written = match &f.docs {
                Docs::Held { docs, .. } if !f.uncheckpointed() => {
                    let (header, chunks) = FileCheckpoint::of(f, docs);
                    f.chunks = chunks.len() as u32;
                    out.extend(chunks.into_iter().enumerate().map(|(n, c)| set(docs_key(&rel, n as u32), c)));
                    Some(Arc::<[u8]>::from(storage::checkpoint::encode(&header)))
                }
                _ => {
                    f.chunks = 0;
                    None
                }
            };
            out.extend((f.chunks..before).map(|n| Change::Checkpoint { key: docs_key(&rel, n), value: None }));
            // The header after its chunks: once it is stored, so are they.
            out.push(Change::Checkpoint { key: format!("{FILE_CHECKPOINT}{rel}"), value: written.clone() });
            if let Docs::Held { written: w, .. } = &mut f.docs {
                *w = written;
            }
        }
        if std::mem::take(&mut self.dir_dirty) {
            let value = Some(Arc::from(storage::checkpoint::encode(&self.dir_checkpoint())));
            out.push(Change::Checkpoint { key: DIR_CHECKPOINT.to_string(), value });
        }
        out
    }

    /// Re-reads changed files (by their stamp) and computes the changes since the last
    /// refresh.
    pub fn refresh(&mut self) -> Refresh {
        self.refresh_with(false)
    }

    /// Like [`ManifestsState::refresh`]; with `full`, every file's content hash is checked even
    /// when its stamp is unchanged (a safety net for coarse file-system clocks).
    pub fn refresh_with(&mut self, full: bool) -> Refresh {
        self.refresh_inner(full, None)
    }

    /// Like [`ManifestsState::refresh`], handing changes to `send` as they are found. On the
    /// first refresh of a state that holds nothing (no files: a cold start), changes are sent
    /// while files are scanned, in blocks of [`STREAM_BLOCK`] documents (parents first within a
    /// block), so the writer works while the rest is parsed and the translated records are freed
    /// at once. Otherwise the refresh's changes are sent at its end, in [`Refresh::changes`]
    /// order. The returned [`Refresh::changes`] is empty; [`Refresh::sent`] counts what was sent.
    ///
    /// A cold start sends a block's objects before later documents are read: an object declared
    /// again later (in a later file, or a later block of the same file; the later document wins)
    /// is sent twice, and when its winning document is skipped, the earlier document's record
    /// stays, as it does for a skipped document of an object already stored.
    pub fn refresh_streaming(&mut self, send: &mut dyn FnMut(Change)) -> Refresh {
        let mut r = self.refresh_inner(false, Some(&mut *send));
        for c in r.changes.drain(..) {
            r.sent += 1;
            send(c);
        }
        r
    }

    fn refresh_inner(&mut self, full: bool, mut send: Option<&mut dyn FnMut(Change)>) -> Refresh {
        let mut r = Refresh::default();
        self.settle();
        let (found, failed) = walk(&self.dir);
        let failed_dirs: BTreeSet<String> = failed.iter().map(|(d, _)| d.clone()).collect();
        for (d, error) in failed.iter().filter(|(d, _)| !self.failed_dirs.contains(d)) {
            tracing::warn!(dir = %self.dir.join(d).display(), %error, "cannot read directory; keeping what it held");
        }
        for d in self.failed_dirs.difference(&failed_dirs) {
            tracing::info!(dir = %self.dir.join(d).display(), "directory readable again");
        }
        self.failed_dirs = failed_dirs.clone();
        let under_failed = |rel: &str| failed_dirs.iter().any(|d| d.is_empty() || rel.starts_with(&format!("{d}/")));
        let streamed = self.files.is_empty() && send.is_some();
        let mut seen = HashSet::default();
        let mut changed: Vec<Changed> = Vec::new();
        for f in found {
            seen.insert(f.rel.clone());
            let stale = self.stale.remove(&f.rel);
            if let Some(e) = self.files.get(&f.rel) {
                if !full && !stale && e.stamp == f.stamp {
                    continue;
                }
            }
            let stream: Option<&mut dyn FnMut(Change)> = match (streamed, send.as_mut()) {
                (true, Some(s)) => Some(&mut **s),
                _ => None,
            };
            if let Some(old) = self.read_file(&f.rel, &f.path, f.stamp, stale, &mut r, stream) {
                changed.push(Changed { rel: f.rel, old });
            }
        }
        // Stale files that are gone are handled like any removed file.
        self.stale.clear();
        let removed: Vec<String> = self.files.keys().filter(|rel| !seen.contains(*rel) && !under_failed(rel)).cloned().collect();
        if !removed.is_empty() && removed.len() == self.files.len() {
            // Legitimate (everything was removed), or a volume that came back empty: say so.
            let documents: usize = self.files.values().map(|f| f.documents).sum();
            tracing::warn!(dir = %self.dir.display(), files = removed.len(), documents, "every manifest file is gone; deleting their objects");
        }
        for rel in removed {
            if let Some(old) = self.files.remove(&rel) {
                self.paths.remove(&old.id);
                self.gone_chunks.insert(rel.clone(), old.chunks);
                self.dirty.insert(rel.clone());
                r.changed = true;
                changed.push(Changed { rel, old: Some(old) });
            }
        }
        if changed.is_empty() && self.unsent.is_empty() {
            return r;
        }
        self.diff(changed, streamed, &mut r);
        self.stale_ids.clear();
        r
    }

    /// Reads and scans one file into `files` (unless its content hash is unchanged and `force`
    /// is false). Returns the entry it replaced (`Some(None)` for a new file), `None` when the
    /// entry was kept. With `send`, the file is scanned in blocks of [`STREAM_BLOCK`] documents
    /// and each block's objects are sent ([`send_docs`]) before the next block is parsed
    /// (counted in [`Refresh::sent`]).
    fn read_file(
        &mut self,
        rel: &str,
        path: &Path,
        stamp: Stamp,
        force: bool,
        r: &mut Refresh,
        send: Option<&mut dyn FnMut(Change)>,
    ) -> Option<Option<FileEntry>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                let id = self.id_of(rel);
                let scan = unreadable(rel, e.to_string());
                r.changed |= self.files.get(rel).is_none_or(|old| old.skips != scan.skips);
                r.new_skips.extend(scan.skips.iter().cloned());
                self.dirty.insert(rel.to_string());
                return Some(self.replace_entry(rel, FileEntry::new(id, stamp, [0; 32], scan)));
            }
        };
        // Being written right now (its length or stamp moved while it was read): read at the
        // next poll, so a file rewritten in place is not taken half-written.
        let after = std::fs::metadata(path).map(|m| Stamp::of(&m)).ok();
        if bytes.len() as u64 != stamp.len || after != Some(stamp) {
            tracing::debug!(file = rel, "file changed while it was read; reading it at the next poll");
            return None;
        }
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        if let Some(e) = self.files.get_mut(rel) {
            if e.hash == hash && !force {
                if e.stamp != stamp {
                    e.stamp = stamp;
                    // Touched, not changed: remember the new time so a restart does not read it.
                    self.dirty.insert(rel.to_string());
                }
                return None;
            }
        }
        r.files_read += 1;
        r.changed = true;
        let id = self.id_of(rel);
        let json = has_manifest_extension(path).unwrap_or(false);
        let scan = match String::from_utf8(bytes) {
            Ok(text) => {
                // A byte order mark is not part of the first document.
                let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
                let ctx = Context { now: self.clock.now(), features: self.features };
                match send {
                    Some(send) => {
                        let handlers = &self.handlers;
                        let mut sent = 0;
                        let scan = scan_text_blocks(rel, text, json, handlers, &ctx, STREAM_BLOCK, &mut |b| {
                            sent += send_docs(handlers, &mut b.docs, send);
                        });
                        r.sent += sent;
                        scan
                    }
                    None => scan_text(rel, text, json, &self.handlers, &ctx),
                }
            }
            Err(_) => unreadable(rel, "not UTF-8 text".into()),
        };
        r.new_skips.extend(scan.skips.iter().cloned());
        r.new_ignored.extend(scan.ignored.iter().cloned());
        self.dirty.insert(rel.to_string());
        Some(self.replace_entry(rel, FileEntry::new(id, stamp, hash, scan)))
    }

    /// Puts `entry` in place of file `rel`'s entry, which it returns; the stored checkpoint's
    /// chunk count carries over (its extra chunks are removed when it is rewritten).
    fn replace_entry(&mut self, rel: &str, mut entry: FileEntry) -> Option<FileEntry> {
        entry.chunks = self.files.get(rel).map_or(0, |f| f.chunks);
        self.files.insert(rel.to_string(), entry)
    }

    /// The documents of the entry a changed file replaced, the retained ones included.
    fn old_docs(&self, c: &Changed) -> Vec<Document> {
        match &c.old {
            None => Vec::new(),
            Some(old) => self.effective_docs(&c.rel, old),
        }
    }

    /// Computes the changes of the files in `changed` (see the module docs), updates the claims
    /// index, the duplicates and the entries, and fills `r`. After a streamed cold start
    /// (`streamed`), every winner was sent while its file was read: only the index and the
    /// duplicates are brought up to date.
    fn diff(&mut self, mut changed: Vec<Changed>, streamed: bool, r: &mut Refresh) {
        let mut reread_once = false;
        let (plan, olds, news) = loop {
            // The old and new documents of every changed file. A partially readable file keeps,
            // as retained documents, the objects it held before that it does not declare now.
            let olds: Vec<Indexed> = changed.iter().map(|c| Indexed::new(self.old_docs(c), &self.ids)).collect();
            let mut news: Vec<Indexed> = Vec::with_capacity(changed.len());
            for (c, old) in changed.iter().zip(&olds) {
                let Some(f) = self.files.get_mut(&c.rel) else {
                    news.push(Indexed::empty());
                    continue;
                };
                let mut docs = match std::mem::replace(&mut f.docs, Docs::Held { docs: Vec::new(), written: None }) {
                    Docs::Held { docs, .. } => docs,
                    Docs::Stored => Vec::new(),
                };
                f.retained.clear();
                if f.partial {
                    let now: HashSet<&SourceRef> = docs.iter().map(|d| d.src.as_ref()).collect();
                    let mut kept: Vec<Document> = Vec::new();
                    let mut done: HashSet<&SourceRef> = HashSet::default();
                    for d in &old.docs {
                        if now.contains(d.src.as_ref()) || !done.insert(d.src.as_ref()) {
                            continue;
                        }
                        if let Some(last) = old.last(self.ids.of(&d.src), &d.src) {
                            // Kept, but not sendable (its text cannot be read): like a skipped
                            // document, the stored record stays until the file is readable.
                            kept.push(Document { record: None, skipped: true, ..last.clone() });
                        }
                    }
                    f.retained = kept.clone();
                    docs.extend(kept);
                }
                news.push(Indexed::new(docs, &self.ids));
            }
            let plan = self.plan(&changed, &olds, &news, streamed, reread_once);
            // Give the new documents back before anything else reads the entries.
            for (c, new) in changed.iter().zip(news.iter_mut()) {
                if let Some(f) = self.files.get_mut(&c.rel) {
                    let mut docs = std::mem::take(&mut new.docs);
                    docs.truncate(docs.len() - f.retained.len());
                    f.docs = Docs::Held { docs, written: None };
                }
            }
            if plan.reread.is_empty() || reread_once {
                break (plan, olds, news);
            }
            // Winners to send live in files not read now: read them again (their records) and
            // decide once more with them among the changed files.
            reread_once = true;
            for rel in &plan.reread {
                let path = self.dir.join(rel);
                let stamp = std::fs::metadata(&path).map(|m| Stamp::of(&m)).unwrap_or_default();
                if let Some(old) = self.read_file(rel, &path, stamp, true, r, None) {
                    changed.push(Changed { rel: rel.clone(), old });
                }
            }
        };
        r.files_examined = plan.examined;
        // The claims index: each changed file's old identities out, its new ones in.
        for ((c, old), new) in changed.iter().zip(&olds).zip(&news) {
            let old_id = c.old.as_ref().map(|o| o.id);
            if let Some(id) = old_id {
                for h in old.hashes() {
                    self.claims.remove(h, id);
                }
            }
            if let Some(id) = self.files.get(&c.rel).map(|f| f.id) {
                for h in new.hashes() {
                    self.claims.add(h, id);
                }
            }
        }
        // Translated records are not kept: the changes hold them until they are written.
        for c in &changed {
            if let Some(Docs::Held { docs, .. }) = self.files.get_mut(&c.rel).map(|f| &mut f.docs) {
                for d in docs.iter_mut() {
                    d.record = None;
                }
            }
        }
        let mut new_duplicates = Vec::new();
        for (src, dups) in plan.duplicates {
            let before = self.duplicates.remove(&src).unwrap_or_default();
            new_duplicates.extend(dups.iter().filter(|d| !before.contains(d)).cloned());
            if !dups.is_empty() {
                self.duplicates.insert(src, dups);
            }
        }
        new_duplicates.sort_by(|a, b| a.winner.cmp(&b.winner));
        r.new_duplicates = new_duplicates;
        self.unsent = plan.unsent.into_iter().collect();
        let mut applies = plan.applies;
        applies.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let mut deletes = plan.deletes;
        deletes.sort_by(|a, b| match (a, b) {
            (Change::Delete { src: x, .. }, Change::Delete { src: y, .. }) => x.cmp(y),
            _ => std::cmp::Ordering::Equal,
        });
        r.changes = applies.into_iter().map(|(_, _, c)| c).chain(deletes).collect();
    }

    /// Decides, for every object declared in a changed file before or now (and every object not
    /// sent yet), what to send; changes nothing. With `streamed`, only duplicates are computed.
    fn plan(&self, changed: &[Changed], olds: &[Indexed], news: &[Indexed], streamed: bool, reread_once: bool) -> Plan {
        let mut plan = Plan::default();
        let changed_ids: HashSet<u32> =
            changed.iter().flat_map(|c| c.old.as_ref().map(|o| o.id).into_iter().chain(self.files.get(&c.rel).map(|f| f.id))).collect();
        // (identity hash, changed file, whether in its new state), grouped by hash: for every
        // object, the changed files that declare it, without a pass over every file per object.
        let mut entries: Vec<(u64, u32, bool)> = Vec::new();
        for (i, (old, new)) in olds.iter().zip(news).enumerate() {
            entries.extend(old.hashes().map(|h| (h, i as u32, false)));
            entries.extend(new.hashes().map(|h| (h, i as u32, true)));
        }
        let unsent: Vec<(u64, &SourceRef)> = self.unsent.iter().map(|s| (self.ids.of(s), s)).collect();
        entries.extend(unsent.iter().map(|(h, _)| (*h, u32::MAX, false)));
        entries.sort_unstable();
        entries.dedup();
        // Files declaring some of these objects too, read once each.
        let mut others: HashMap<u32, (String, Indexed)> = HashMap::default();
        for group in entries.chunk_by(|a, b| a.0 == b.0) {
            let h = group[0].0;
            let side = |&(_, i, new): &(u64, u32, bool)| -> Option<&Indexed> {
                match (i, new) {
                    (u32::MAX, _) => None,
                    (i, true) => news.get(i as usize),
                    (i, false) => olds.get(i as usize),
                }
            };
            // The objects of this hash (more than one only for a hash collision).
            let mut srcs: Vec<&SourceRef> = Vec::with_capacity(1);
            for idx in group.iter().filter_map(side) {
                for d in idx.all_hash(h) {
                    if !srcs.contains(&d.src.as_ref()) {
                        srcs.push(d.src.as_ref());
                    }
                }
            }
            for (uh, src) in &unsent {
                if *uh == h && !srcs.contains(src) {
                    srcs.push(src);
                }
            }
            for id in self.claims.files(h) {
                if !changed_ids.contains(&id) && !others.contains_key(&id) {
                    if let Some(rel) = self.paths.get(&id) {
                        others.insert(id, (rel.clone(), self.indexed_by_id(id)));
                    }
                }
            }
            for src in srcs {
                self.decide(h, src, group, changed, olds, news, &others, streamed, reread_once, &mut plan);
            }
        }
        plan.examined = changed.len() + others.len();
        plan
    }

    /// [`ManifestsState::plan`] for one object `src` (identity hash `h`); `group` lists the
    /// changed files that declare an object of that hash (see `plan`).
    #[allow(clippy::too_many_arguments)]
    fn decide(
        &self,
        h: u64,
        src: &SourceRef,
        group: &[(u64, u32, bool)],
        changed: &[Changed],
        olds: &[Indexed],
        news: &[Indexed],
        others: &HashMap<u32, (String, Indexed)>,
        streamed: bool,
        reread_once: bool,
        plan: &mut Plan,
    ) {
        // The winning document of the old and of the new state: (path, document). Files never
        // share a path, so `>` decides.
        let mut old_w: Option<(&str, &Document)> = None;
        let mut new_w: Option<(&str, &Document)> = None;
        // Where the object is declared now, for its duplicates: (path, changed file or other).
        let mut now: Vec<(&str, &Indexed)> = Vec::new();
        for id in self.claims.files(h) {
            let Some((rel, idx)) = others.get(&id) else { continue };
            if let Some(d) = idx.last(h, src) {
                if old_w.is_none_or(|w| rel.as_str() > w.0) {
                    old_w = Some((rel, d));
                }
                if new_w.is_none_or(|w| rel.as_str() > w.0) {
                    new_w = Some((rel, d));
                }
                now.push((rel, idx));
            }
        }
        for &(_, i, is_new) in group {
            let Some(c) = changed.get(i as usize) else { continue };
            let rel = c.rel.as_str();
            if is_new {
                if let Some(d) = news[i as usize].last(h, src) {
                    if new_w.is_none_or(|w| rel > w.0) {
                        new_w = Some((rel, d));
                    }
                    now.push((rel, &news[i as usize]));
                }
            } else if let Some(d) = olds[i as usize].last(h, src) {
                if old_w.is_none_or(|w| rel > w.0) {
                    old_w = Some((rel, d));
                }
            }
        }
        let declared: usize = now.iter().map(|(_, idx)| idx.all(h, src).count()).sum();
        if declared > 1 || self.duplicates.contains_key(src) {
            now.sort_by(|a, b| a.0.cmp(b.0));
            let all: Vec<&Document> = now.iter().flat_map(|(_, idx)| idx.all(h, src)).collect();
            let dups =
                all.windows(2).map(|p| Duplicate { src: src.clone(), loser: p[0].origin.clone(), winner: p[1].origin.clone() }).collect();
            plan.duplicates.push((src.clone(), dups));
        }
        if streamed {
            return;
        }
        let Some((rel, d)) = new_w else {
            if let Some((_, d)) = old_w {
                plan.deletes.push(Change::Delete { src: src.clone(), origin: Arc::from(d.origin.to_string()), token: None });
            }
            return;
        };
        if d.skipped {
            // Skipped: the previous record (if any) stays, under its previous version.
            return;
        }
        // Not told: never sent yet, or not confirmed by the store at start.
        let told =
            !self.unsent.contains(src) && !self.stale_ids.contains(&h) && old_w.is_some_and(|(_, o)| !o.skipped && o.version == d.version);
        if told {
            return;
        }
        match &d.record {
            Some(record) => plan.applies.push((self.handlers.position(src.kind), d.origin.clone(), apply_of(d, record.clone()))),
            None if !reread_once => {
                plan.reread.insert(rel.to_string());
            }
            None => {
                // Only when its file could not be read again just now.
                tracing::warn!(object = %src, origin = %d.origin, "record not available; sent when its file can be read");
                plan.unsent.push(src.clone());
            }
        }
    }
}

/// Decodes lowercase hex digits into `out` (`hex` twice as long); `false` for anything else.
pub(super) fn hex_decode(hex: &str, out: &mut [u8]) -> bool {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let h = hex.as_bytes();
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

/// Sends the objects of a block of just-scanned documents (the later document of an object
/// within the block wins), in registry order, and drops the block's translated records. Returns
/// how many changes were sent.
fn send_docs(handlers: &Handlers, docs: &mut [Document], send: &mut dyn FnMut(Change)) -> usize {
    // Whether each document is the last of its object in the block, from the end.
    let mut seen: HashSet<&SourceRef> = HashSet::with_capacity_and_hasher(docs.len(), Default::default());
    let mut is_last: Vec<bool> = docs.iter().rev().map(|d| seen.insert(d.src.as_ref())).collect();
    is_last.reverse();
    let mut applies: Vec<(usize, usize, Change)> = Vec::with_capacity(seen.len());
    drop(seen);
    for (i, d) in docs.iter().enumerate() {
        if d.skipped || !is_last[i] {
            continue;
        }
        let Some(record) = &d.record else { continue };
        applies.push((handlers.position(d.src.kind), i, apply_of(d, record.clone())));
    }
    for d in docs.iter_mut() {
        d.record = None;
    }
    applies.sort_by_key(|a| (a.0, a.1));
    let n = applies.len();
    for (_, _, c) in applies {
        send(c);
    }
    n
}

/// The change that sends document `d` with its translated `record`.
fn apply_of(d: &Document, record: Arc<dyn Prepared>) -> Change {
    Change::Apply { src: (*d.src).clone(), version: d.version.hex(), record, origin: Arc::from(d.origin.to_string()), token: None }
}

fn unreadable(rel: &str, message: String) -> FileScan {
    FileScan {
        docs: Vec::new(),
        skips: vec![SkipReport {
            origin: DocumentPosition { file: Arc::from(rel), document: 0, item: None, line: 0 },
            kind: None,
            namespace: None,
            name: None,
            reason: SkipReason::Unreadable(message),
        }],
        ignored: Vec::new(),
        partial: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file whose length or stamp moves while it is read (written in place right now) is not
    /// taken: it is read at the next poll.
    #[test]
    fn a_file_that_changes_while_it_is_read_waits_for_the_next_poll() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.yaml");
        std::fs::write(
            &path,
            "apiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata: {name: g, namespace: poc}\nspec: {displayName: G}\n",
        )
        .unwrap();
        let features = Features::default();
        let mut state = ManifestsState::new(dir.path(), Arc::new(Handlers::new(&features)), features, Clock(None));
        let stamp = Stamp::of(&std::fs::metadata(&path).unwrap());
        let mut r = Refresh::default();
        // The stamp the walk saw is not the file's any more (it was still being written).
        let seen = Stamp { len: stamp.len - 10, ..stamp };
        assert!(state.read_file("g.yaml", &path, seen, false, &mut r, None).is_none());
        assert_eq!((state.file_count(), r.files_read), (0, 0));
        assert!(state.read_file("g.yaml", &path, stamp, false, &mut r, None).is_some());
        assert_eq!((state.file_count(), r.files_read), (1, 1));
    }
}
