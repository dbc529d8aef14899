//! The source's memory of the directory ([`ManifestsState`]) and how a refresh turns file changes
//! into [`Change`]s, by job: the state and the file reads here, the store's checkpoints and the
//! warm start in [`checkpoint`], the declaration index in [`index`], the decision over changed
//! files in [`diff`].
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
    has_manifest_extension, scan_text_blocks, walk, Document, DocumentPosition, FileScan, Ignored, LeftOut, SkipReason, SkipReport, Stamp,
    Version, STREAM_BLOCK,
};
use crate::config::Clock;
use crate::projector::handlers::{Handlers, Prepared};
use crate::projector::writer::{Change, Committed};
use schema::kind::{Context, Features};
use schema::KindId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use storage::{SourceRef, Store};

mod checkpoint;
mod diff;
mod index;

pub use checkpoint::file_checkpoint_key;

#[cfg(test)]
pub(super) use checkpoint::hex_decode;
use diff::*;
use index::*;

// Maps over every object of the directory (a million at the largest): a fast hasher, seeded per
// process. The keys come from the operator's own manifests.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// A file's documents: in memory, or only in the store's checkpoint.
enum Docs {
    /// In memory (with their translated records until those are sent). `written` is the
    /// checkpoint sent to the writer for exactly these documents, until the writer acknowledged
    /// it and the store is seen to hold it ([`ManifestsState::settle`]); then the documents are
    /// dropped.
    Held { docs: Vec<Document>, written: Option<Written> },
    /// Only in the store's checkpoint ([`FileCheckpoint`]).
    Stored,
}

/// A file checkpoint sent to the writer, and the writer's acknowledgement of its commit.
struct Written {
    bytes: Arc<[u8]>,
    committed: Committed,
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
    /// The skipped and ignored documents beyond those held (counted when it was last read; none
    /// when it was taken over from its checkpoint).
    left_out: LeftOut,
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
            left_out: scan.left_out,
            partial: scan.partial,
            retained: Vec::new(),
            chunks: 0,
        }
    }

    /// Whether the file is read on every start instead of being checkpointed (a partially
    /// readable file keeps the checkpoint of when it was last read whole).
    fn uncheckpointed(&self) -> bool {
        self.partial || !self.skips.is_empty() || self.left_out.skips > 0
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
    /// Per file read in this refresh, its skipped and ignored documents not held (to be logged).
    pub new_left_out: Vec<(Arc<str>, LeftOut)>,
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
    /// Whether the checkpoints were sealed: nothing changed the store's source entries since
    /// the writer confirmed that they are exactly the checkpoints' objects, so each file's
    /// identity hashes were read instead of its documents, and nothing was checked.
    pub sealed: bool,
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
    /// What was last sent of the seal ([`checkpoint::SEAL_CHECKPOINT`]): to seal (`true`), to
    /// remove it, or nothing yet. A call of [`ManifestsState::take_checkpoints`] with nothing
    /// to write sends it only when that changes.
    sealed: Option<bool>,
    /// Whether the store holds the seed of [`ManifestsState::ids`] ([`checkpoint::ID_SEED_CHECKPOINT`]).
    id_seed_stored: bool,
    /// Whether a checkpoint could not be read back: the objects it listed may stay in the store
    /// unseen, so nothing is sealed again and the next start checks everything.
    unreadable_checkpoint: std::cell::Cell<bool>,
    /// The identity hashes of files taken over by a checked warm start, to be checkpointed
    /// ([`checkpoint::IDS_CHECKPOINT`]): relative path, 8 bytes per document.
    pending_ids: Vec<(String, Vec<u8>)>,
    /// The largest file read, in bytes (`source.maxFileBytes`): a file is read whole.
    max_file_bytes: u64,
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
            sealed: None,
            id_seed_stored: false,
            unreadable_checkpoint: std::cell::Cell::new(false),
            pending_ids: Vec::new(),
            max_file_bytes: crate::config::DEFAULT_MAX_FILE_BYTES as u64,
        }
    }

    /// Reads no file larger than `bytes` (`source.maxFileBytes`): a larger one is skipped with
    /// its reason, like a file that cannot be read, and the objects it held stay.
    pub fn with_max_file_bytes(mut self, bytes: u64) -> ManifestsState {
        self.max_file_bytes = bytes;
        self
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

    /// The skipped and ignored documents of the directory beyond those [`ManifestsState::skips`]
    /// and [`ManifestsState::ignored`] hold (at most [`super::KEPT_PER_FILE`] of each per file), as
    /// counted when each file was last read.
    pub fn left_out(&self) -> LeftOut {
        let mut all = LeftOut::default();
        self.files.values().for_each(|f| all.add(f.left_out));
        all
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
        if let Some(e) = self.files.get(rel).filter(|e| e.stamp == stamp && !force) {
            if stamp.len > self.max_file_bytes {
                // Skipped for its size when it had this stamp: neither read nor hashed again.
                return None;
            }
            // The periodic full check of a file whose stamp did not move: its hash, read in
            // blocks (a manifest file of 500 MB is not held whole to find it unchanged).
            if let Ok(hash) = hash_file(path) {
                if hash == e.hash {
                    return None;
                }
            }
        }
        let bytes = match read_at_most(path, stamp.len, self.max_file_bytes) {
            Ok(b) => b,
            Err(e) => {
                let id = self.id_of(rel);
                let scan = unreadable(rel, e.to_string());
                r.changed |= self.files.get(rel).is_none_or(|old| old.skips != scan.skips || old.left_out != scan.left_out);
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
            Ok(text) => self.scan_file(rel, &text, json, force, r, send),
            Err(_) => unreadable(rel, "not UTF-8 text".into()),
        };
        r.new_skips.extend(scan.skips.iter().cloned());
        r.new_ignored.extend(scan.ignored.iter().cloned());
        if scan.left_out != LeftOut::default() {
            r.new_left_out.push((Arc::from(rel), scan.left_out));
        }
        self.dirty.insert(rel.to_string());
        Some(self.replace_entry(rel, FileEntry::new(id, stamp, hash, scan)))
    }

    /// Scans the text of file `rel` ([`ManifestsState::read_file`]): with `send`, in blocks
    /// whose objects are sent at once; otherwise keeping the translated records of the documents
    /// that changed only (all of them with `force`).
    fn scan_file(&self, rel: &str, text: &str, json: bool, force: bool, r: &mut Refresh, send: Option<&mut dyn FnMut(Change)>) -> FileScan {
        // A byte order mark is not part of the first document.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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
            None => {
                // The documents this file held before, unchanged, need no record: only the
                // changed ones are held until they are sent. (A record found missing later is
                // read again: `diff`'s re-read of a winner's file.)
                let before = if force { HashSet::default() } else { self.versions_of(rel) };
                scan_text_blocks(rel, text, json, &self.handlers, &ctx, STREAM_BLOCK, &mut |b| {
                    for d in b.docs.iter_mut().filter(|d| before.contains(&d.version)) {
                        d.record = None;
                    }
                })
            }
        }
    }

    /// The versions of the documents file `rel` held when it was last read (none for a new
    /// file). A version is the hash of a whole document, its identity included.
    fn versions_of(&self, rel: &str) -> HashSet<Version> {
        self.files
            .get(rel)
            .map(|f| self.effective_docs(rel, f).iter().filter(|d| !d.skipped).map(|d| d.version).collect())
            .unwrap_or_default()
    }

    /// Puts `entry` in place of file `rel`'s entry, which it returns; the stored checkpoint's
    /// chunk count carries over (its extra chunks are removed when it is rewritten).
    fn replace_entry(&mut self, rel: &str, mut entry: FileEntry) -> Option<FileEntry> {
        entry.chunks = self.files.get(rel).map_or(0, |f| f.chunks);
        self.files.insert(rel.to_string(), entry)
    }
}

/// The bytes of the file at `path`, whose length was `len` when it was listed, unless that is
/// more than `max` (`source.maxFileBytes`): a file is read whole, so its size is what its read
/// holds in memory.
///
/// # Errors
/// The file's read error, or that it is too large (the skip's reason).
fn read_at_most(path: &Path, len: u64, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    if len > max {
        return Err(std::io::Error::other(format!("the file is {len} bytes, more than source.maxFileBytes ({max})")));
    }
    // A file that grew since it was listed is read one byte further than it was listed (then
    // found changed while read, and read at the next poll), so no read holds more than the
    // listed length: not a procfs file listed as empty, nor one growing while it is read.
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(usize::MAX).saturating_add(1));
    std::fs::File::open(path)?.take(len.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The SHA-256 of the file at `path`, read in blocks of [`HASH_BLOCK`] bytes.
///
/// # Errors
/// The file's read error.
fn hash_file(path: &Path) -> std::io::Result<[u8; 32]> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut block = vec![0u8; HASH_BLOCK];
    let mut hasher = Sha256::new();
    loop {
        match file.read(&mut block) {
            Ok(0) => return Ok(hasher.finalize().into()),
            Ok(n) => hasher.update(&block[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The bytes [`hash_file`] reads at a time.
const HASH_BLOCK: usize = 256 << 10;

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
        left_out: LeftOut::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash of a file read in blocks is the hash of its bytes, for files shorter than a
    /// block, of whole blocks and of a block and a bit.
    #[test]
    fn a_file_hashed_in_blocks_has_the_hash_of_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        for len in [0, 1, HASH_BLOCK - 1, HASH_BLOCK, 2 * HASH_BLOCK + 7] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let path = dir.path().join(format!("{len}.yaml"));
            std::fs::write(&path, &bytes).unwrap();
            let whole: [u8; 32] = Sha256::digest(&bytes).into();
            assert_eq!(hash_file(&path).unwrap(), whole, "{len} bytes");
        }
        assert!(hash_file(&dir.path().join("missing.yaml")).is_err());
    }

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

    /// A file read again because it changed holds the translated records of the documents that
    /// changed only: the others were sent before with the same version.
    #[test]
    fn a_changed_file_holds_records_of_its_changed_documents_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.yaml");
        let group = |name: &str, display: &str| {
            format!("apiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata: {{name: {name}, namespace: poc}}\nspec: {{displayName: {display}}}\n")
        };
        std::fs::write(&path, [group("a", "A"), group("b", "B"), group("c", "C")].join("---\n")).unwrap();
        let features = Features::default();
        let mut state = ManifestsState::new(dir.path(), Arc::new(Handlers::new(&features)), features, Clock(None));
        assert_eq!(state.refresh().changes.len(), 3);
        std::fs::write(&path, [group("a", "A"), group("b", "B2"), group("c", "C")].join("---\n")).unwrap();
        let stamp = Stamp::of(&std::fs::metadata(&path).unwrap());
        let held = |state: &ManifestsState| match &state.files["g.yaml"].docs {
            Docs::Held { docs, .. } => docs.iter().map(|d| (d.src.name.clone(), d.record.is_some())).collect::<Vec<_>>(),
            Docs::Stored => panic!("no store: documents are held"),
        };
        assert!(state.read_file("g.yaml", &path, stamp, false, &mut Refresh::default(), None).is_some());
        assert_eq!(held(&state), [("a".to_string(), false), ("b".to_string(), true), ("c".to_string(), false)]);
        // Read again on purpose (a winner's record is needed): every record.
        assert!(state.read_file("g.yaml", &path, stamp, true, &mut Refresh::default(), None).is_some());
        assert!(held(&state).iter().all(|(_, record)| *record));
    }

    /// The periodic full check finds a change that left the file's stamp as it was (a rewrite
    /// of the same length within the filesystem's time granularity), and reads nothing of an
    /// unchanged file but its hash.
    #[test]
    fn the_full_check_finds_a_change_the_stamp_did_not_show() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.yaml");
        let group = |name: &str| {
            format!("apiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata: {{name: {name}, namespace: poc}}\nspec: {{displayName: G}}\n")
        };
        std::fs::write(&path, group("g1")).unwrap();
        let features = Features::default();
        let mut state = ManifestsState::new(dir.path(), Arc::new(Handlers::new(&features)), features, Clock(None));
        assert_eq!(state.refresh().changes.len(), 1);
        let full = state.refresh_with(true);
        assert_eq!((full.files_read, full.changes.len()), (0, 0), "unchanged: only hashed");
        std::fs::write(&path, group("g2")).unwrap();
        // The stamp as the first read saw it: the walk sees no change of it.
        let now = Stamp::of(&std::fs::metadata(&path).unwrap());
        state.files.get_mut("g.yaml").unwrap().stamp = now;
        assert_eq!(state.refresh().files_read, 0);
        let full = state.refresh_with(true);
        assert_eq!(full.files_read, 1);
        let changes: Vec<(&str, &str)> = full
            .changes
            .iter()
            .filter_map(|c| match c {
                Change::Apply { src, .. } => Some(("apply", src.name.as_str())),
                Change::Delete { src, .. } => Some(("delete", src.name.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(changes, [("apply", "g2"), ("delete", "g1")]);
    }
}
