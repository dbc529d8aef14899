//! The manifests source: a directory of YAML/JSON manifests, read
//! recursively and polled for changes.
//!
//! * Files: `*.yaml`, `*.yml`, `*.json` (case-insensitive); other files (`FACTS.md`) and hidden
//!   entries (`.git`, the `..data` links of a mounted ConfigMap) are ignored. Symbolic links are
//!   followed (each directory once).
//! * Documents: YAML files are split on lines that are exactly `---` (or start with `--- `) or
//!   `...` *before* parsing ([`split_documents`]), so one broken document never hides the
//!   others; a JSON file is one document. `apiVersion: v1, kind: List` documents are expanded
//!   into their `items`.
//! * Each document is parsed into JSON; empty documents and documents of kinds that are not
//!   projected (`v1 Namespace`, `Environment`, kinds switched off by a feature flag) are ignored
//!   (logged at debug). A document of a projected kind that does not decode or translate is
//!   skipped with one [`SkipReport`]; everything else still loads.
//! * Identity is the [`SourceRef`] (kind, namespace, name). The same object in two places: the
//!   later relative path in lexical order wins (later document within one file), with a
//!   warning naming both.
//! * Versions: the hex SHA-256 of the document's canonical JSON (sorted keys, no whitespace), so
//!   an unchanged document causes no write.
//! * Change detection ([`ManifestsState::refresh`]): per file length, mtime and (Unix) inode and
//!   ctime, then a content hash; only changed files are parsed again. Added or edited documents become
//!   [`Change::Apply`], removed ones [`Change::Delete`]. A skipped document keeps the object's
//!   previous record (as the kube source would: the object still exists). When a file (or a
//!   directory) cannot be read, or holds a document whose identity cannot be read, the objects
//!   it held before are kept until it is readable again.
//! * Restarts ([`ManifestsState::warm_start`]): with a store, each file without skipped documents
//!   is checkpointed (its stamp: length, mtime, inode and ctime; hash; each document's identity,
//!   position and version, in chunks of 1024; [`storage::checkpoint`]) after its changes. On
//!   start, unchanged files are taken over from their checkpoints and not read; every checkpointed
//!   version is checked against the store's source versions, so a record the store lacks or holds
//!   at another version (parked for a retry at shutdown) has its file read again, and a stored
//!   object no file holds is deleted.
//! * Memory (`manifests/state.rs`): translated records are dropped once handed to the writer, and a
//!   checkpointed file's documents once the store holds its checkpoint; they are read back when
//!   the file changes or one of its records is needed once more (a duplicate whose winner went
//!   away). What stays per object is one entry of an index from identity hash to file.

use crate::config::one_line;
use crate::metrics::{outcome, Metrics};
use crate::projector::handlers::{Handlers, Lookup, Prepared, Rejection};
use crate::projector::writer::{Change, ChangeSender};
use crate::readiness::Readiness;
use schema::kind::Context;
use schema::{KindId, Skip};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use storage::SourceRef;

// Maps over every object of the directory (a million at the largest): a fast hasher, seeded per
// process. The keys come from the operator's own manifests.
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// The default polling interval (changes are applied within two intervals).
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Every this many polls, file contents are hashed even when their stamps are unchanged.
const FULL_CHECK_EVERY: u64 = 30;

/// Where a document is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DocumentPosition {
    /// The file, relative to the manifests directory, with `/` separators (shared by the
    /// file's documents).
    pub file: Arc<str>,
    /// The document's position in the file, 1-based, counting only non-empty documents.
    pub document: usize,
    /// For an item of a `kind: List` document: its index in `items`.
    pub item: Option<usize>,
    /// The 1-based line where the document starts.
    pub line: usize,
}

impl fmt::Display for DocumentPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.file, self.document)?;
        if let Some(i) = self.item {
            write!(f, ".items[{i}]")?;
        }
        write!(f, " (line {})", self.line)
    }
}

/// Why a document was not projected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The file cannot be read (permissions, not UTF-8). `document` is 0.
    Unreadable(String),
    /// The document is not valid YAML/JSON.
    Parse(String),
    /// The document is of a projected kind but its identity (`metadata.name`) is missing.
    Identity(String),
    /// The document does not decode into the kind's type (message names the field path).
    Decode(String),
    /// Translation refused it.
    Translate(Skip),
    /// The document (or `List` item) is larger than `source.maxDocumentBytes`: it is not parsed
    /// (an item: not decoded), and the file keeps what it held of it.
    TooLarge {
        /// Its size in bytes (its text; an item: its JSON encoding).
        bytes: usize,
        /// The limit in bytes.
        max: usize,
    },
}

impl SkipReason {
    /// Whether this is a failure (everything but a deliberate [`Skip::NotProjected`]); `check`
    /// exits 1 when any document failed.
    pub fn is_failure(&self) -> bool {
        !matches!(self, SkipReason::Translate(Skip::NotProjected(_)))
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Unreadable(m) => write!(f, "file cannot be read: {m}"),
            SkipReason::Parse(m) => write!(f, "not valid YAML: {m}"),
            SkipReason::Identity(m) => write!(f, "{m}"),
            SkipReason::Decode(m) => write!(f, "invalid document: {m}"),
            SkipReason::Translate(s) => write!(f, "not projected: {s}"),
            SkipReason::TooLarge { bytes, max } => write!(f, "{}", crate::projector::handlers::too_large(*bytes, *max)),
        }
    }
}

/// One skipped document, with everything known about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkipReport {
    /// Where it is.
    pub origin: DocumentPosition,
    /// Its `kind` when known (also for kinds read heuristically from an unparsable document).
    pub kind: Option<String>,
    /// `metadata.namespace` when known.
    pub namespace: Option<String>,
    /// `metadata.name` when known.
    pub name: Option<String>,
    /// Why.
    pub reason: SkipReason,
}

impl SkipReport {
    /// `Kind namespace/name` with what is known, `?` for the unknown.
    pub fn object(&self) -> String {
        let kind = self.kind.as_deref().unwrap_or("?");
        match (&self.namespace, &self.name) {
            (Some(ns), Some(n)) => format!("{kind} {ns}/{n}"),
            (None, Some(n)) => format!("{kind} {n}"),
            _ => kind.to_string(),
        }
    }
}

impl fmt::Display for SkipReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.origin, self.object(), self.reason)
    }
}

/// A document's version: the SHA-256 of its canonical JSON ([`version_of`]); the writer and the
/// store see it as 64 lowercase hex digits ([`Version::hex`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Version(pub [u8; 32]);

impl Version {
    /// The 64 lowercase hex digits stored as the source version.
    pub fn hex(&self) -> String {
        hex(&self.0)
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

/// A document of a projected kind with a readable identity.
#[derive(Clone)]
pub struct Document {
    /// Where it is.
    pub origin: DocumentPosition,
    /// Its identity (shared with the source's map of what the writer was told).
    pub src: Arc<SourceRef>,
    /// SHA-256 of its canonical JSON.
    pub version: Version,
    /// The translated record. `None` when skipped (see `skipped`), and once the record was
    /// handed to the writer (the source does not keep translated records: a file is read again
    /// when one of its records is needed once more).
    pub record: Option<Arc<dyn Prepared>>,
    /// Whether the document was skipped (see the file's [`SkipReport`]s).
    pub skipped: bool,
}

/// A document that is deliberately not projected (logged at debug).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ignored {
    /// Where it is.
    pub origin: DocumentPosition,
    /// Why (`v1 Namespace is not a projected kind`, `empty document`).
    pub reason: String,
    /// A projected kind switched off by a feature flag (logged at info, not debug).
    pub disabled: bool,
}

/// The result of reading one file.
#[derive(Clone, Default)]
pub struct FileScan {
    /// Documents of projected kinds, in file order.
    pub docs: Vec<Document>,
    /// Skipped documents.
    pub skips: Vec<SkipReport>,
    /// Ignored documents.
    pub ignored: Vec<Ignored>,
    /// Whether some document's identity could not be read (then the file's previous objects
    /// are kept).
    pub partial: bool,
    /// Skipped and ignored documents beyond the [`KEPT_PER_FILE`] of each sort held.
    pub left_out: LeftOut,
}

/// The skipped and ignored documents of a file beyond the first [`KEPT_PER_FILE`] of each sort:
/// counted, not held (a file of millions of broken or foreign documents would otherwise hold a
/// report of each).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// Skipped documents not held.
    pub skips: usize,
    /// Of those, the failures ([`SkipReason::is_failure`]).
    pub failures: usize,
    /// Ignored documents not held.
    pub ignored: usize,
}

impl LeftOut {
    fn add(&mut self, other: LeftOut) {
        self.skips += other.skips;
        self.failures += other.failures;
        self.ignored += other.ignored;
    }
}

/// The skip reports, and the ignored documents, held per file ([`FileScan::left_out`] counts the
/// others): what `check` lists and the admin status shows of a file.
pub const KEPT_PER_FILE: usize = 1000;

/// Appends to `kept` the findings of `more` while it holds fewer than [`KEPT_PER_FILE`], and
/// hands the others to `left_out`.
fn keep_some<T>(kept: &mut Vec<T>, more: Vec<T>, mut left_out: impl FnMut(&T)) {
    let room = KEPT_PER_FILE.saturating_sub(kept.len());
    let mut more = more.into_iter();
    kept.extend(more.by_ref().take(room));
    more.for_each(|t| left_out(&t));
}

/// One document's text as split from a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// 1-based position among the file's non-empty documents.
    pub document: usize,
    /// 1-based line of the document's first line.
    pub line: usize,
    /// The text.
    pub text: String,
}

/// Splits a YAML stream into documents without parsing it: a line that is exactly `---`, or
/// starts with `--- ` (the rest of the line belongs to the new document), or is exactly `...`
/// ends the current document. Documents holding only blank lines, comments and directives
/// (`%YAML`) are dropped and not counted.
pub fn split_documents(text: &str) -> Vec<Chunk> {
    split_parts(text).into_iter().map(|p| Chunk { document: p.document, line: p.line, text: p.text.into_owned() }).collect()
}

/// A [`Chunk`] whose text borrows from the file's text when it is a verbatim slice of it (lines
/// ending in `\n` or `\r\n`, or a document of one line without line end at the end of the
/// file): the scan then copies no document. Its size as measured against
/// `source.maxDocumentBytes` is [`measured_len`].
struct Part<'a> {
    document: usize,
    line: usize,
    text: Cow<'a, str>,
}

/// The text of the document being split: `text[from..to]` while it is verbatim, else `owned`;
/// whether a line of it is more than blanks, a comment or a directive.
struct Pending<'a> {
    text: &'a str,
    from: usize,
    to: usize,
    owned: Option<String>,
    meaningful: bool,
}

impl<'a> Pending<'a> {
    fn is_empty(&self) -> bool {
        self.owned.is_none() && self.from == self.to
    }

    /// Appends `piece` (a slice of `text` starting at byte `at`, without line end) and its line
    /// end: the file's own `\n` or `\r\n` while the document is verbatim, else a `\n`.
    fn push(&mut self, at: usize, piece: &str) {
        if !self.meaningful {
            let t = piece.trim();
            self.meaningful = !t.is_empty() && !t.starts_with('#') && !piece.starts_with('%');
        }
        if let Some(owned) = &mut self.owned {
            owned.push_str(piece);
            owned.push('\n');
            return;
        }
        let end = at + piece.len();
        // A line ending in `\r\n` is verbatim too (YAML reads both line ends alike), and so is
        // a document of one line without line end at the end of the file: a file of one long
        // line, or of Windows line ends, is not copied. (A last line without line end after
        // others is copied with a `\n`: a kept block scalar (`|+`) ending there reads its
        // trailing line breaks from it.)
        let through = match self.text.as_bytes().get(end..end.saturating_add(2).min(self.text.len())) {
            Some([b'\n', ..]) => Some(end + 1),
            Some([b'\r', b'\n']) => Some(end + 2),
            Some([]) if self.from == self.to => Some(end),
            _ => None,
        };
        if let (Some(through), true) = (through, self.from == self.to) {
            (self.from, self.to) = (at, through);
        } else if let (Some(through), true) = (through, self.to == at) {
            self.to = through;
        } else {
            let mut owned = String::with_capacity(self.to - self.from + piece.len() + 1);
            owned.push_str(&self.text[self.from..self.to]);
            owned.push_str(piece);
            owned.push('\n');
            self.owned = Some(owned);
        }
    }

    fn take(&mut self) -> Cow<'a, str> {
        let text = match self.owned.take() {
            Some(owned) => Cow::Owned(owned),
            None => Cow::Borrowed(&self.text[self.from..self.to]),
        };
        self.to = self.from;
        self.meaningful = false;
        text
    }
}

/// [`split_documents`] without copying verbatim documents.
fn split_parts(text: &str) -> Vec<Part<'_>> {
    Parts::new(text).collect()
}

/// The documents of a file's text as [`Part`]s, one at a time: a file of millions of small
/// documents is never split whole.
struct Parts<'a> {
    lines: std::iter::Enumerate<std::str::SplitInclusive<'a, char>>,
    cur: Pending<'a>,
    /// The line the pending document starts at.
    start: usize,
    /// The byte the next line starts at.
    at: usize,
    /// Documents yielded so far.
    documents: usize,
    ended: bool,
}

impl<'a> Parts<'a> {
    fn new(text: &'a str) -> Parts<'a> {
        let cur = Pending { text, from: 0, to: 0, owned: None, meaningful: false };
        Parts { lines: text.split_inclusive('\n').enumerate(), cur, start: 1, at: 0, documents: 0, ended: false }
    }

    /// The pending document as the next part, unless it holds only blanks, comments and
    /// directives.
    fn flush(&mut self) -> Option<Part<'a>> {
        let meaningful = self.cur.meaningful;
        let text = self.cur.take();
        meaningful.then(|| {
            self.documents += 1;
            Part { document: self.documents, line: self.start, text }
        })
    }
}

impl<'a> Iterator for Parts<'a> {
    type Item = Part<'a>;

    fn next(&mut self) -> Option<Part<'a>> {
        while let Some((i, raw)) = self.lines.next() {
            let line = raw.trim_end_matches(['\n', '\r']);
            let (lineno, at) = (i + 1, self.at);
            self.at += raw.len();
            if line == "---" || line.starts_with("--- ") || line.starts_with("---\t") {
                let done = self.flush();
                self.start = lineno;
                let rest = &line[3..];
                if !rest.trim().is_empty() {
                    self.cur.push(at + 3, rest);
                }
                if done.is_some() {
                    return done;
                }
            } else if line == "..." {
                let done = self.flush();
                self.start = lineno + 1;
                if done.is_some() {
                    return done;
                }
            } else {
                if self.cur.is_empty() {
                    self.start = lineno;
                }
                self.cur.push(at, line);
            }
        }
        if std::mem::replace(&mut self.ended, true) {
            return None;
        }
        self.flush()
    }
}

/// Appends the canonical JSON of `v` (object keys sorted, no whitespace).
pub fn canonical_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                canonical_json(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// SHA-256 of `v`'s canonical JSON ([`canonical_json`]): a document's version
/// ([`version_of_compact`] of its compact JSON).
pub fn version_of(v: &Value) -> Version {
    // Writing a `Value` into a `Vec` cannot fail.
    version_of_compact(&serde_json::to_vec(v).unwrap_or_default())
}

/// The version of the document whose compact JSON (`serde_json::to_vec`) is `compact`: its
/// SHA-256, hashed in one call. serde_json's maps are ordered by key (its `preserve_order`
/// feature is off in this build, and `versions_ignore_key_order_and_formatting` fails if it is
/// switched on), so its compact serialization is the canonical JSON ([`canonical_json`]).
pub fn version_of_compact(compact: &[u8]) -> Version {
    Version(Sha256::digest(compact).into())
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

/// Reads `kind`, `metadata.name` and `metadata.namespace` from an unparsable document's text,
/// for the skip report only. A value that is not a plain word of letters, digits, `.`, `-`, `_`
/// (a fragment of the broken text, `[unclosed`) is left out.
fn guess_identity(text: &str) -> (Option<String>, Option<String>, Option<String>) {
    let clean = |v: &str| {
        let v = v.split(" #").next().unwrap_or("").trim().trim_matches(['"', '\'']);
        let plain = !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
        plain.then(|| v.to_string())
    };
    let (mut kind, mut ns, mut name) = (None, None, None);
    let mut in_meta = false;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("kind:") {
            kind = kind.or(clean(v));
        }
        if !line.starts_with(' ') && !line.trim().is_empty() {
            in_meta = line.trim_end() == "metadata:";
            continue;
        }
        if in_meta {
            if let Some(v) = line.strip_prefix("  name:") {
                name = name.or(clean(v));
            } else if let Some(v) = line.strip_prefix("  namespace:") {
                ns = ns.or(clean(v));
            }
        }
    }
    (kind, ns, name)
}

/// Parses, decodes and translates the documents of one file's text. `file` is the relative
/// path used in reports; `json` selects single-document JSON parsing. The text is split and
/// parsed in blocks ([`STREAM_BLOCK`]), and the whole file's scan returned.
pub fn scan_text(file: &str, text: &str, json: bool, handlers: &Handlers, ctx: &Context) -> FileScan {
    scan_text_blocks(file, text, json, handlers, ctx, STREAM_BLOCK, &mut |_| {})
}

/// [`scan_text`] in blocks of at most `block` documents and bytes ([`Block`]), in file order:
/// `on_block` sees each block's scan before the next block is parsed (and may take its
/// translated records), so a large file's records need not all be held at once. Returns the
/// whole file's scan.
fn scan_text_blocks(
    file: &str,
    text: &str,
    json: bool,
    handlers: &Handlers,
    ctx: &Context,
    block: Block,
    on_block: &mut dyn FnMut(&mut FileScan),
) -> FileScan {
    let mut scan = FileScan::default();
    let file: Arc<str> = Arc::from(file);
    // Lines ending in a lone CR (classic Mac OS; YAML reads a CR as a line end): a file that
    // has CRs and no LF is read with LFs instead (a copy, for these files only).
    let with_lf;
    let text = if !json && !text.contains('\n') && text.contains('\r') {
        with_lf = text.replace('\r', "\n");
        with_lf.as_str()
    } else {
        text
    };
    // A JSON file is one document; a YAML file is split as it is parsed.
    let parts: Box<dyn Iterator<Item = Part<'_>> + '_> = if json {
        let one = (!text.trim().is_empty()).then_some(Part { document: 1, line: 1, text: Cow::Borrowed(text) });
        Box::new(one.into_iter())
    } else {
        Box::new(Parts::new(text))
    };
    let mut parts = parts.peekable();
    loop {
        let group = block.take(&mut parts);
        if group.is_empty() {
            break;
        }
        let mut b = scan_parts(&file, &group, json, handlers, ctx);
        drop(group);
        on_block(&mut b);
        scan.docs.extend(b.docs);
        let left_out = &mut scan.left_out;
        keep_some(&mut scan.skips, b.skips, |s| {
            left_out.skips += 1;
            left_out.failures += usize::from(s.reason.is_failure());
        });
        keep_some(&mut scan.ignored, b.ignored, |_| left_out.ignored += 1);
        scan.partial |= b.partial;
    }
    scan
}

/// Parses, decodes and translates `chunks` of one file.
fn scan_parts(file: &Arc<str>, chunks: &[Part<'_>], json: bool, handlers: &Handlers, ctx: &Context) -> FileScan {
    let mut scan = FileScan::default();
    // Large files (generated worlds, `kubectl get -o yaml` dumps) are parsed and translated on
    // every core, in contiguous parts whose results are concatenated in file order.
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if threads < 2 || chunks.len() < PARALLEL_CHUNKS {
        for chunk in chunks {
            scan_chunk(file, chunk, json, handlers, ctx, &mut scan);
        }
        return scan;
    }
    let part = chunks.len().div_ceil(threads);
    let parts: Vec<FileScan> = std::thread::scope(|sc| {
        let workers: Vec<_> = chunks
            .chunks(part)
            .map(|group| {
                sc.spawn(move || {
                    let mut scan = FileScan::default();
                    for chunk in group {
                        scan_chunk(file, chunk, json, handlers, ctx, &mut scan);
                    }
                    scan
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    for p in parts {
        scan.docs.extend(p.docs);
        scan.skips.extend(p.skips);
        scan.ignored.extend(p.ignored);
        scan.partial |= p.partial;
    }
    scan
}

/// How many documents are parsed and translated before their records are handed on
/// ([`scan_text_blocks`]): at most `documents` of them and, after the first, at most `bytes` of
/// their text. The records of a block are held at once, so a block of large documents is cut
/// by its bytes.
#[derive(Clone, Copy, Debug)]
struct Block {
    documents: usize,
    bytes: usize,
}

impl Block {
    /// The next block of `parts`: at least one document (none when `parts` is done), at most
    /// `documents`, and after the first no more than `bytes` of text.
    fn take<'a>(self, parts: &mut std::iter::Peekable<impl Iterator<Item = Part<'a>>>) -> Vec<Part<'a>> {
        let mut block = Vec::new();
        let mut bytes = 0usize;
        while block.len() < self.documents.max(1) {
            let Some(next) = parts.peek() else { break };
            bytes = bytes.saturating_add(next.text.len());
            if bytes > self.bytes && !block.is_empty() {
                break;
            }
            block.extend(parts.next());
        }
        block
    }
}

/// The blocks in which a cold start streams a file ([`ManifestsState::refresh_streaming`]):
/// 8,192 documents, or 16 MiB of their text.
const STREAM_BLOCK: Block = Block { documents: 8192, bytes: 16 << 20 };

/// Documents from which a file is scanned on several threads.
const PARALLEL_CHUNKS: usize = 512;

/// The size of a document's text as measured against `source.maxDocumentBytes`: with every
/// line ending in one `\n`, whether the file ends its lines in `\r\n` or its last line in
/// nothing (so a document is within the limit or not whatever the file's line ends).
fn measured_len(text: &str) -> usize {
    let crlf = text.matches("\r\n").count();
    text.len() - crlf + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

/// Parses, decodes and translates one document into `scan`.
fn scan_chunk(file: &Arc<str>, chunk: &Part<'_>, json: bool, handlers: &Handlers, ctx: &Context, scan: &mut FileScan) {
    let origin = DocumentPosition { file: file.clone(), document: chunk.document, item: None, line: chunk.line };
    let max = handlers.max_document_bytes();
    // A document too large is not parsed; a `List` is, and its items are measured one by one.
    let measured = if chunk.text.len() > max { measured_len(&chunk.text) } else { 0 };
    let oversized = measured > max;
    if oversized && !looks_like_list(&chunk.text) {
        let (kind, namespace, name) = guess_identity(&chunk.text);
        scan.partial = true;
        scan.skips.push(SkipReport { origin, kind, namespace, name, reason: SkipReason::TooLarge { bytes: measured, max } });
        return;
    }
    let parsed: Result<Value, String> = if json {
        serde_json::from_str(&chunk.text).map_err(|e| e.to_string())
    } else if let Some(v) = chunk.text.trim_start().starts_with('{').then(|| serde_json::from_str(&chunk.text).ok()).flatten() {
        // Fast path: a YAML document that is one JSON object (as generated worlds and
        // `kubectl get -o json` streams are) parses to the same value as JSON, several
        // times faster; anything that is not valid JSON goes through the YAML parser.
        Ok(v)
    } else {
        serde_saphyr::from_str(&chunk.text).map_err(|e| yaml_error(&e, chunk.line))
    };
    let value = match parsed {
        Ok(v) => v,
        Err(e) => {
            let (kind, namespace, name) = guess_identity(&chunk.text);
            scan.partial = true;
            scan.skips.push(SkipReport { origin, kind, namespace, name, reason: SkipReason::Parse(e) });
            return;
        }
    };
    let is_list = str_at(&value, &["apiVersion"]) == Some("v1") && str_at(&value, &["kind"]) == Some("List");
    match (is_list, value.get("items").and_then(Value::as_array)) {
        (true, Some(items)) => {
            for (i, item) in items.iter().enumerate() {
                let o = DocumentPosition { item: Some(i), ..origin.clone() };
                let bytes = if oversized { crate::projector::handlers::json_len(item, max) } else { 0 };
                if bytes > max {
                    let at = |path: &[&str]| str_at(item, path).map(String::from);
                    scan.partial = true;
                    let (kind, namespace, name) = (at(&["kind"]), at(&["metadata", "namespace"]), at(&["metadata", "name"]));
                    scan.skips.push(SkipReport { origin: o, kind, namespace, name, reason: SkipReason::TooLarge { bytes, max } });
                    continue;
                }
                scan_value(o, item, handlers, ctx, scan);
            }
        }
        _ => scan_value(origin, &value, handlers, ctx, scan),
    }
}

/// Whether a document's text declares `kind: List` (YAML or JSON) near its start or its end,
/// where `kubectl get -o yaml|json` puts it.
fn looks_like_list(text: &str) -> bool {
    const EDGE: usize = 4096;
    let floor = |i: usize| (0..=i.min(text.len())).rev().find(|j| text.is_char_boundary(*j)).unwrap_or(0);
    let head = &text[..floor(EDGE)];
    let tail = &text[floor(text.len().saturating_sub(EDGE))..];
    [head, tail].iter().any(|part| {
        part.lines().any(|l| l.trim_end() == "kind: List") || part.contains("\"kind\": \"List\"") || part.contains("\"kind\":\"List\"")
    })
}

/// A one-line YAML error message with the line number in the file (not in the document).
fn yaml_error(e: &serde_saphyr::Error, first_line: usize) -> String {
    let text = one_line(&e.without_snippet().to_string());
    let mut msg = text.strip_prefix("error: ").unwrap_or(&text);
    // Drop the document-relative position the message starts with, if any.
    if let Some(rest) = msg.strip_prefix("line ") {
        if let Some((_, after)) = rest.split_once(": ") {
            msg = after;
        }
    }
    if let Some(i) = msg.rfind(" at line ") {
        if msg[i + 9..].chars().all(|c| c.is_ascii_digit() || c == ',' || c == ' ' || c.is_ascii_lowercase()) {
            msg = &msg[..i];
        }
    }
    match e.location() {
        Some(l) if l.line() > 0 => format!("line {} column {}: {msg}", first_line as u64 + l.line() - 1, l.column()),
        _ => msg.to_string(),
    }
}

fn scan_value(origin: DocumentPosition, value: &Value, handlers: &Handlers, ctx: &Context, scan: &mut FileScan) {
    let ignore = |scan: &mut FileScan, reason: String| scan.ignored.push(Ignored { origin: origin.clone(), reason, disabled: false });
    match value {
        Value::Null => return ignore(scan, EMPTY_DOCUMENT.into()),
        Value::Array(_) => return ignore(scan, "a list, not a Kubernetes object (wrap the items in a `kind: List` document)".into()),
        Value::Object(_) => {}
        _ => return ignore(scan, "a scalar, not a Kubernetes object".into()),
    }
    let (Some(api_version), Some(kind)) = (str_at(value, &["apiVersion"]), str_at(value, &["kind"])) else {
        return ignore(scan, "not a Kubernetes object (no apiVersion/kind)".into());
    };
    let handler = match handlers.lookup(api_version, kind) {
        Lookup::Kind(h) => h,
        Lookup::Disabled(k) => {
            let reason = format!("{} is switched off by a feature flag", k.name());
            return scan.ignored.push(Ignored { origin: origin.clone(), reason, disabled: true });
        }
        Lookup::Unknown => return ignore(scan, format!("{api_version} {kind} is not a projected kind")),
    };
    let namespace = str_at(value, &["metadata", "namespace"]);
    let name = str_at(value, &["metadata", "name"]).filter(|n| !n.is_empty());
    let report = |reason| SkipReport {
        origin: origin.clone(),
        kind: Some(kind.to_string()),
        namespace: namespace.map(String::from),
        name: name.map(String::from),
        reason,
    };
    let Some(obj_name) = name else {
        scan.partial = true;
        scan.skips.push(report(SkipReason::Identity("required field `metadata.name` is missing or empty".into())));
        return;
    };
    let src =
        Arc::new(SourceRef { kind: handler.kind(), namespace: namespace.unwrap_or_default().to_string(), name: obj_name.to_string() });
    // Written once: hashed for the version, and kept as the object's document. Writing a
    // `Value` into a `Vec` cannot fail.
    let compact = serde_json::to_vec(value).unwrap_or_default();
    let version = version_of_compact(&compact);
    let record = match handlers.prepare_compact(handler, value, &compact, ctx) {
        Ok(r) => Some(r),
        Err(Rejection::Decode(m)) => {
            scan.skips.push(report(SkipReason::Decode(m)));
            None
        }
        Err(Rejection::Skip(s)) => {
            scan.skips.push(report(SkipReason::Translate(s)));
            None
        }
        Err(Rejection::TooLarge { bytes, max }) => {
            scan.skips.push(report(SkipReason::TooLarge { bytes, max }));
            None
        }
    };
    let skipped = record.is_none();
    scan.docs.push(Document { origin, src, version, record, skipped });
}

fn has_manifest_extension(p: &Path) -> Option<bool> {
    let ext = p.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "yaml" | "yml" => Some(false),
        "json" => Some(true),
        _ => None,
    }
}

/// A file found by [`walk`].
struct Found {
    rel: String,
    path: PathBuf,
    stamp: Stamp,
}

/// What tells that a file may have changed without reading it: length, modification time, and
/// (Unix) the inode and its change time. The change time cannot be set by users, so an edit that
/// keeps the length and restores the modification time (`cp -p`, `rsync -t`, `touch -r`) is
/// still noticed. A differing stamp makes the file be hashed; only a differing hash parses it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    len: u64,
    /// Modification time (seconds, nanoseconds since the epoch).
    modified: Option<(u64, u32)>,
    /// Inode change time (seconds, nanoseconds) and inode number.
    changed: Option<(i64, i64, u64)>,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        let changed = {
            use std::os::unix::fs::MetadataExt;
            Some((meta.ctime(), meta.ctime_nsec(), meta.ino()))
        };
        #[cfg(not(unix))]
        let changed = None;
        let modified =
            meta.modified().ok().and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok()).map(|d| (d.as_secs(), d.subsec_nanos()));
        Stamp { len: meta.len(), modified, changed }
    }
}

/// Lists manifest files under `dir` (recursively, following links, skipping hidden entries).
/// Returns the files and the relative paths of directories that could not be read.
/// Directories that cannot be read are returned as (relative path, error).
fn walk(dir: &Path) -> (Vec<Found>, Vec<(String, String)>) {
    let mut files = Vec::new();
    let mut failed = Vec::new();
    let mut visited = HashSet::default();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, rel)) = stack.pop() {
        if let Ok(canon) = path.canonicalize() {
            if !visited.insert(canon) {
                continue;
            }
        }
        let entries = match std::fs::read_dir(&path) {
            Ok(e) => e,
            Err(e) => {
                failed.push((rel, e.to_string()));
                continue;
            }
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let child = entry.path();
            let child_rel = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            let Ok(meta) = std::fs::metadata(&child) else { continue };
            if meta.is_dir() {
                stack.push((child, child_rel));
            } else if meta.is_file() && has_manifest_extension(&child).is_some() {
                files.push(Found { rel: child_rel, path: child, stamp: Stamp::of(&meta) });
            }
        }
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    (files, failed)
}

/// The reason of an ignored empty document (a comment-only `---` section): logged at debug only.
pub const EMPTY_DOCUMENT: &str = "empty document";

/// The most findings of one sort (skipped, ignored, duplicate documents) logged for one file
/// in one refresh; the file's others are counted in one line (a file of 200,000 documents of
/// no kind would otherwise log 200,000 lines).
pub const LOGGED_PER_FILE: usize = 20;

/// Logs a refresh's findings: one `warn!` per skipped document, ignored document (but empty
/// ones, at debug) and duplicate, for the files read in this refresh (so once per file and
/// change), at most [`LOGGED_PER_FILE`] of each sort per file and then one line with the
/// number left out; counts every skip in `projector_reconcile_total{outcome="skip"}`.
pub fn report(r: &Refresh, metrics: &Metrics) {
    for s in &r.new_skips {
        let module = s.kind.as_deref().and_then(KindId::from_name).map(KindId::module).unwrap_or("unknown");
        metrics.reconciled(module, outcome::SKIP, 0.0);
    }
    let (skips, skips_left) = per_file(&r.new_skips, |s| &s.origin.file);
    for s in skips {
        tracing::warn!(
            file = %s.origin.file,
            document = s.origin.document,
            line = s.origin.line,
            kind = s.kind.as_deref().unwrap_or("?"),
            object = %s.object(),
            reason = %s.reason,
            "document skipped"
        );
    }
    let (ignored, ignored_left) = per_file(&r.new_ignored, |i| &i.origin.file);
    for i in ignored {
        if i.disabled {
            tracing::info!(origin = %i.origin, reason = %i.reason, "document skipped: kind disabled");
        } else if i.reason == EMPTY_DOCUMENT {
            tracing::debug!(origin = %i.origin, reason = %i.reason, "document ignored");
        } else {
            tracing::warn!(file = %i.origin.file, document = i.origin.document, line = i.origin.line, reason = %i.reason, "document ignored");
        }
    }
    let (duplicates, duplicates_left) = per_file(&r.new_duplicates, |d| &d.loser.file);
    for d in duplicates {
        tracing::warn!(object = %d.src, ignored = %d.loser, wins = %d.winner, "the same object is defined twice; the later path wins");
    }
    for (left, what) in [(skips_left, "skipped"), (ignored_left, "ignored"), (duplicates_left, "defined again later")] {
        for (file, more) in left {
            tracing::warn!(file = %file, more, logged = LOGGED_PER_FILE, "more documents {what} in this file than are logged");
        }
    }
    for (file, left) in &r.new_left_out {
        metrics.reconciled_many("unknown", outcome::SKIP, left.skips as u64);
        tracing::warn!(
            file = %file,
            skipped = left.skips,
            failed = left.failures,
            ignored = left.ignored,
            kept = KEPT_PER_FILE,
            "more documents skipped or ignored in this file than are kept: these are counted only"
        );
    }
}

/// `items` with at most [`LOGGED_PER_FILE`] of each file (`file_of`), in their order, and the
/// number left out of each file that had more.
fn per_file<T>(items: &[T], file_of: impl Fn(&T) -> &Arc<str>) -> (Vec<&T>, Vec<(Arc<str>, usize)>) {
    let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut over: Vec<&Arc<str>> = Vec::new();
    let mut kept = Vec::new();
    for item in items {
        let file = file_of(item);
        let seen = counts.entry(file).or_default();
        *seen += 1;
        match *seen {
            n if n <= LOGGED_PER_FILE => kept.push(item),
            n if n == LOGGED_PER_FILE + 1 => over.push(file),
            _ => {}
        }
    }
    let left = over.into_iter().map(|file| (file.clone(), counts[&**file] - LOGGED_PER_FILE)).collect();
    (kept, left)
}

/// The running manifests source: a thread that polls the directory and feeds the writer.
pub struct ManifestsSource {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    skips: Arc<Mutex<Vec<SkipReport>>>,
}

/// The readiness phase of the initial scan of `dir`.
pub fn initial_phase(dir: &Path) -> String {
    format!("initial scan of {}", dir.display())
}

/// The identity the store records for the manifests source of `dir` (`storage::sync`): the
/// directory's absolute path, so a store synced from the same directory starts warm.
pub fn source_identity(dir: &Path) -> String {
    let absolute = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    format!("manifests:{}", absolute.display())
}

impl ManifestsSource {
    /// Starts polling `dir` every `interval`. The first scan hands every document to the writer
    /// with a readiness item each, then a sweep of every registered kind (objects stored from an
    /// earlier run that are gone are deleted), then ends the phase [`initial_phase`].
    ///
    /// # Errors
    /// A message when `dir` is not a readable directory, or the thread cannot be spawned.
    pub fn spawn(
        dir: &Path,
        state: ManifestsState,
        sender: ChangeSender,
        readiness: Readiness,
        metrics: Metrics,
        interval: Duration,
    ) -> Result<ManifestsSource, String> {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(format!("manifests path {} is not a directory", dir.display())),
            Err(e) => return Err(format!("manifests directory {}: {e}", dir.display())),
        }
        let stop = Arc::new(AtomicBool::new(false));
        let skips = Arc::new(Mutex::new(Vec::new()));
        let source =
            SourceThread { dir: dir.to_path_buf(), sender, readiness, metrics, interval, stop: stop.clone(), skips: skips.clone() };
        let readiness = source.readiness.clone();
        let thread = std::thread::Builder::new()
            .name("cp-manifests".into())
            .spawn(move || super::report_failure(&readiness, "manifests", move || source.run(state)))
            .map_err(|e| format!("cannot start the manifests source: {e}"))?;
        Ok(ManifestsSource { stop, thread: Some(thread), skips })
    }

    /// The current skip reports (every skipped document of the directory as last read).
    pub fn skips(&self) -> Vec<SkipReport> {
        self.skips.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stops polling and waits for the thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            if t.join().is_err() {
                tracing::error!("the manifests source thread panicked");
            }
        }
    }
}

impl Drop for ManifestsSource {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// The manifests source's thread: what it reads, where it sends, what it reports.
struct SourceThread {
    dir: PathBuf,
    sender: ChangeSender,
    readiness: Readiness,
    metrics: Metrics,
    /// The time between two reads of the directory.
    interval: Duration,
    stop: Arc<AtomicBool>,
    skips: Arc<Mutex<Vec<SkipReport>>>,
}

impl SourceThread {
    /// The initial scan, then a read of the directory every `interval` until `stop`.
    fn run(self, mut state: ManifestsState) {
        self.initial_scan(&mut state);
        self.poll(state);
    }

    /// Sends every document of the directory (only those changed since the checkpoints on a
    /// warm start) and the deletes of what no file holds any more, then ends the initial phase.
    fn initial_scan(&self, state: &mut ManifestsState) {
        let (dir, sender, readiness) = (&self.dir, &self.sender, &self.readiness);
        let t0 = Instant::now();
        let warm = state.warm_start().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "cannot read the manifests checkpoints; reading every file");
            WarmStart::default()
        });
        let expect = |c: &mut Change| {
            if let Change::Apply { src, origin, token, .. } | Change::Delete { src, origin, token } = c {
                *token = Some(readiness.expect_in(src.kind.name(), format!("{src} ({origin})")));
            }
        };
        let r = state.refresh_streaming(&mut |mut c| {
            expect(&mut c);
            sender.send_paced(c);
        });
        // The skips are visible before they are counted: a reader woken by the count sees them.
        *self.skips.lock().unwrap_or_else(|e| e.into_inner()) = state.skips();
        report(&r, &self.metrics);
        let applies = r.sent;
        let mut gone = 0;
        if warm.checked {
            // Every stored object was checked against the checkpoints: delete what no file holds.
            for src in state.not_held(warm.unconfirmed) {
                gone += 1;
                let mut c = Change::Delete { src, origin: Arc::from("no longer in the directory"), token: None };
                expect(&mut c);
                sender.send(c);
            }
        } else if !warm.store_empty {
            let kinds = schema::registry::registered();
            let token = Some(readiness.expect("sweep of objects no longer in the directory".into()));
            sender.send(Change::Sweep { kinds, present: Arc::new(state.present()), keep_newer_than: None, report: None, token });
        }
        for c in state.take_checkpoints() {
            sender.send(c);
        }
        if state.file_count() == 0 {
            tracing::warn!(
                dir = %dir.display(),
                "the manifests directory holds no manifest files (*.yaml, *.yml, *.json): nothing is projected"
            );
        }
        // The initial scan's transient memory (a restart's check of every object) goes back now.
        crate::release_free_memory();
        readiness.end_phase(&initial_phase(dir));
        tracing::info!(
            dir = %dir.display(),
            documents = state.document_count(),
            files_read = r.files_read,
            files_unchanged = state.file_count().saturating_sub(r.files_read),
            changes = applies + gone,
            skipped = state.skips().len() + state.left_out().skips,
            elapsed = ?t0.elapsed(),
            "initial scan done"
        );
    }

    /// Reads the directory every `interval` (every file's content each `FULL_CHECK_EVERY`th
    /// time) and sends what changed, until `stop` or the writer is gone.
    fn poll(&self, mut state: ManifestsState) {
        let mut polls: u64 = 0;
        loop {
            std::thread::park_timeout(self.interval);
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            polls += 1;
            let r = state.refresh_with(polls.is_multiple_of(FULL_CHECK_EVERY));
            if r.changed {
                *self.skips.lock().unwrap_or_else(|e| e.into_inner()) = state.skips();
                report(&r, &self.metrics);
                if !r.changes.is_empty() {
                    tracing::info!(files_read = r.files_read, changes = r.changes.len(), "manifests changed");
                }
            }
            // Checkpoints also move when a file was only touched (same content, new time).
            for c in r.changes.into_iter().chain(state.take_checkpoints()) {
                if !self.sender.send_paced(c) {
                    return;
                }
            }
        }
    }
}

mod state;

pub use state::{file_checkpoint_key, Duplicate, ManifestsState, Refresh, WarmStart};

#[cfg(test)]
mod tests;
