//! The manifests source (DESIGN decision 13): a directory of YAML/JSON manifests, read
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
//!   is checkpointed (its stamp: length, mtime, inode and ctime; hash; each document's identity, position and
//!   version; [`storage::checkpoint`]) after its changes. On start, unchanged files are taken over
//!   from their checkpoints and not read; every checkpointed version is checked against the
//!   store's source versions, so a record the store lacks or holds at another version (parked for
//!   a retry at shutdown) has its file read again, and a stored object no file holds is deleted.
//!   Translated records are dropped once handed to the writer; a file is read again when one of
//!   its records is needed once more (a duplicate whose winner went away).

use crate::config::{one_line, Clock};
use crate::metrics::{outcome, Metrics};
use crate::projector::handlers::{Handlers, Lookup, Prepared, Rejection};
use crate::projector::writer::{Change, ChangeSender};
use crate::readiness::Readiness;
use schema::kind::{Context, Features};
use schema::{KindId, Skip};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use storage::{SourceRef, Store};

// Maps over every object of the directory (a million at the largest): a fast hasher, seeded per
// process. The keys come from the operator's own manifests.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// The default polling interval (changes are applied within two intervals).
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Every this many polls, file contents are hashed even when their stamps are unchanged.
const FULL_CHECK_EVERY: u64 = 30;

/// Where a document is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
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

impl fmt::Display for Origin {
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
        }
    }
}

/// One skipped document, with everything known about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkipReport {
    /// Where it is.
    pub origin: Origin,
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
    pub origin: Origin,
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
    pub origin: Origin,
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
/// ending in a bare `\n`, as in generated worlds): the scan then copies no document.
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

    /// Appends `piece` (a slice of `text` starting at byte `at`, without line end) and a `\n`.
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
        let verbatim = self.text.as_bytes().get(end) == Some(&b'\n');
        if verbatim && self.from == self.to {
            (self.from, self.to) = (at, end + 1);
        } else if verbatim && self.to == at {
            self.to = end + 1;
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
    let mut out = Vec::new();
    let mut cur = Pending { text, from: 0, to: 0, owned: None, meaningful: false };
    let mut start = 1;
    fn flush<'a>(cur: &mut Pending<'a>, start: usize, out: &mut Vec<Part<'a>>) {
        let meaningful = cur.meaningful;
        let text = cur.take();
        if meaningful {
            let document = out.len() + 1;
            out.push(Part { document, line: start, text });
        }
    }
    let mut at = 0;
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let line = raw.trim_end_matches(['\n', '\r']);
        let lineno = i + 1;
        if line == "---" || line.starts_with("--- ") || line.starts_with("---\t") {
            flush(&mut cur, start, &mut out);
            start = lineno;
            let rest = &line[3..];
            if !rest.trim().is_empty() {
                cur.push(at + 3, rest);
            }
        } else if line == "..." {
            flush(&mut cur, start, &mut out);
            start = lineno + 1;
        } else {
            if cur.is_empty() {
                start = lineno;
            }
            cur.push(at, line);
        }
        at += raw.len();
    }
    flush(&mut cur, start, &mut out);
    out
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

/// SHA-256 of `v`'s canonical JSON ([`canonical_json`]): a document's version.
///
/// serde_json's maps are ordered by key (its `preserve_order` feature is off in this build, and
/// `versions_ignore_key_order_and_formatting` fails if it is switched on), so its compact
/// serialization is the canonical JSON; it is written into a reused per-thread buffer and hashed
/// in one call (not one hash update per token).
pub fn version_of(v: &Value) -> Version {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with(|buf| {
        let mut buf = buf.borrow_mut();
        buf.clear();
        // Writing a `Value` into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *buf, v);
        let version = Version(Sha256::digest(&buf[..]).into());
        // A huge document's buffer is not kept for the life of the thread.
        if buf.capacity() > 1 << 20 {
            *buf = Vec::new();
        }
        version
    })
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
/// for the skip report only.
fn guess_identity(text: &str) -> (Option<String>, Option<String>, Option<String>) {
    let clean = |v: &str| {
        let v = v.split(" #").next().unwrap_or("").trim().trim_matches(['"', '\'']).to_string();
        (!v.is_empty()).then_some(v)
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
/// path used in reports; `json` selects single-document JSON parsing.
pub fn scan_text(file: &str, text: &str, json: bool, handlers: &Handlers, ctx: &Context) -> FileScan {
    scan_text_blocks(file, text, json, handlers, ctx, usize::MAX, &mut |_| {})
}

/// [`scan_text`] in blocks of at most `block` documents, in file order: `on_block` sees each
/// block's scan before the next block is parsed (and may take its translated records), so a
/// large file's records need not all be held at once. Returns the whole file's scan.
fn scan_text_blocks(
    file: &str,
    text: &str,
    json: bool,
    handlers: &Handlers,
    ctx: &Context,
    block: usize,
    on_block: &mut dyn FnMut(&mut FileScan),
) -> FileScan {
    let mut scan = FileScan::default();
    let file: Arc<str> = Arc::from(file);
    let chunks = if json {
        if text.trim().is_empty() {
            Vec::new()
        } else {
            vec![Part { document: 1, line: 1, text: Cow::Borrowed(text) }]
        }
    } else {
        split_parts(text)
    };
    for group in chunks.chunks(block.max(1)) {
        let mut b = scan_parts(&file, group, json, handlers, ctx);
        on_block(&mut b);
        scan.docs.extend(b.docs);
        scan.skips.extend(b.skips);
        scan.ignored.extend(b.ignored);
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

/// Documents per block when a cold start streams a file ([`ManifestsState::refresh_streaming`]).
const STREAM_BLOCK: usize = 8192;

/// Documents from which a file is scanned on several threads.
const PARALLEL_CHUNKS: usize = 512;

/// Parses, decodes and translates one document into `scan`.
fn scan_chunk(file: &Arc<str>, chunk: &Part<'_>, json: bool, handlers: &Handlers, ctx: &Context, scan: &mut FileScan) {
    let origin = Origin { file: file.clone(), document: chunk.document, item: None, line: chunk.line };
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
                let o = Origin { item: Some(i), ..origin.clone() };
                scan_value(o, item, handlers, ctx, scan);
            }
        }
        _ => scan_value(origin, &value, handlers, ctx, scan),
    }
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

fn scan_value(origin: Origin, value: &Value, handlers: &Handlers, ctx: &Context, scan: &mut FileScan) {
    let ignore = |scan: &mut FileScan, reason: String| scan.ignored.push(Ignored { origin: origin.clone(), reason, disabled: false });
    if value.is_null() {
        return ignore(scan, "empty document".into());
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
    let version = version_of(value);
    let record = match handler.prepare(value, ctx) {
        Ok(r) => Some(r),
        Err(Rejection::Decode(m)) => {
            scan.skips.push(report(SkipReason::Decode(m)));
            None
        }
        Err(Rejection::Skip(s)) => {
            scan.skips.push(report(SkipReason::Translate(s)));
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
fn walk(dir: &Path) -> (Vec<Found>, Vec<String>) {
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
                tracing::warn!(dir = %path.display(), error = %e, "cannot read directory; keeping what it held");
                failed.push(rel);
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

struct FileEntry {
    stamp: Stamp,
    hash: [u8; 32],
    scan: FileScan,
}

/// What the writer was last told about an object.
#[derive(Clone)]
struct Current {
    /// The version sent; `None` when nothing was sent because the object's document is skipped
    /// (a stored record of it stays).
    version: Option<Version>,
    origin: Origin,
}

/// A duplicate: `winner` overrides `loser` for the same object.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Duplicate {
    /// The object.
    pub src: SourceRef,
    /// The document that is ignored.
    pub loser: Origin,
    /// The document that wins (later path in lexical order).
    pub winner: Origin,
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
    /// Files read in this refresh.
    pub files_read: usize,
    /// Changes handed to the sender by [`ManifestsState::refresh_streaming`].
    pub sent: usize,
    /// Whether the changes were computed from the files read alone (each holds the same
    /// objects as before, declared nowhere else), without a pass over every object.
    pub incremental: bool,
    /// Whether anything in the directory changed.
    pub changed: bool,
}

/// What [`ManifestsState::warm_start`] took over from the store's checkpoints.
#[derive(Debug, Default)]
pub struct WarmStart {
    /// Whether the checkpoints belong to this directory, build and feature set and were checked
    /// against the store (then no sweep is needed: `gone` lists what to delete).
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
    /// unless a file read then holds them ([`ManifestsState::holds`]).
    pub unconfirmed: Vec<SourceRef>,
    /// Whether the store held no record at all (a new store): then everything stored after the
    /// first refresh came from it, and no sweep is needed.
    pub store_empty: bool,
}

/// Checkpoint keys of the manifests source ([`storage::checkpoint`]), all under `manifests/v1/`
/// (`v1`: the layout of [`FileCheckpoint`]). The directory, build and features the file
/// checkpoints belong to:
const DIR_CHECKPOINT: &str = "manifests/v1/dir";
/// Followed by the file's relative path.
const FILE_CHECKPOINT: &str = "manifests/v1/file/";

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

/// One file as last read: enough to know it is unchanged and what it holds, without its text.
/// Only files without skipped documents are checkpointed (a file with skips is read on every
/// start, so its skip reports are logged again).
#[derive(Serialize, Deserialize)]
struct FileCheckpoint {
    stamp: Stamp,
    /// SHA-256 of the file.
    hash: [u8; 32],
    docs: Vec<DocCheckpoint>,
    ignored: Vec<IgnoredCheckpoint>,
}

/// Where a document is in its file ([`Origin`] without the file).
#[derive(Serialize, Deserialize)]
struct Position {
    document: u64,
    item: Option<u64>,
    line: u64,
}

impl Position {
    fn of(o: &Origin) -> Position {
        Position { document: o.document as u64, item: o.item.map(|i| i as u64), line: o.line as u64 }
    }

    fn origin(self, file: &Arc<str>) -> Origin {
        Origin { file: file.clone(), document: self.document as usize, item: self.item.map(|i| i as usize), line: self.line as usize }
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

#[derive(Serialize, Deserialize)]
struct IgnoredCheckpoint {
    position: Position,
    reason: String,
    disabled: bool,
}

impl FileCheckpoint {
    /// `None` for a file that must be read on every start (skips, unreadable parts).
    fn of(f: &FileEntry) -> Option<FileCheckpoint> {
        if f.scan.partial || !f.scan.skips.is_empty() || f.scan.docs.iter().any(|d| d.skipped) {
            return None;
        }
        let docs = f
            .scan
            .docs
            .iter()
            .map(|d| DocCheckpoint {
                position: Position::of(&d.origin),
                kind: d.src.kind.code(),
                namespace: d.src.namespace.clone(),
                name: d.src.name.clone(),
                version: d.version,
            })
            .collect();
        let ignored = f
            .scan
            .ignored
            .iter()
            .map(|i| IgnoredCheckpoint { position: Position::of(&i.origin), reason: i.reason.clone(), disabled: i.disabled })
            .collect();
        Some(FileCheckpoint { stamp: f.stamp, hash: f.hash, docs, ignored })
    }

    /// The file entry it describes (documents without records), or `None` when it names a kind
    /// this build does not know.
    fn into_entry(self, rel: &str) -> Option<FileEntry> {
        let file: Arc<str> = Arc::from(rel);
        let mut docs = Vec::with_capacity(self.docs.len());
        for d in self.docs {
            let kind = KindId::from_code(d.kind)?;
            docs.push(Document {
                origin: d.position.origin(&file),
                src: Arc::new(SourceRef { kind, namespace: d.namespace, name: d.name }),
                version: d.version,
                record: None,
                skipped: false,
            });
        }
        let ignored = self
            .ignored
            .into_iter()
            .map(|i| Ignored { origin: i.position.origin(&file), reason: i.reason, disabled: i.disabled })
            .collect();
        let scan = FileScan { docs, skips: Vec::new(), ignored, partial: false };
        Some(FileEntry { stamp: self.stamp, hash: self.hash, scan })
    }
}

/// Whether `hex` is the lowercase hex form of `bytes`.
fn hex_eq(bytes: &[u8; 32], hex: &str) -> bool {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let h = hex.as_bytes();
    h.len() == 64
        && bytes.iter().enumerate().all(|(i, b)| h[2 * i] == DIGITS[(b >> 4) as usize] && h[2 * i + 1] == DIGITS[(b & 15) as usize])
}

/// The winning document of every object (the later path in lexical order, the later document
/// within a file), the duplicates, and the files with unreadable parts.
type Winners<'a> = (HashMap<&'a Arc<SourceRef>, &'a Document>, HashSet<Duplicate>, HashSet<&'a str>);

fn winners(files: &BTreeMap<String, FileEntry>) -> Winners<'_> {
    // Sized up front: growing rehashes every key (every object of the directory).
    let documents = files.values().map(|f| f.scan.docs.len()).sum();
    let mut winners: HashMap<&Arc<SourceRef>, &Document> = HashMap::with_capacity_and_hasher(documents, Default::default());
    let mut partial_files = HashSet::default();
    let mut dups = HashSet::default();
    for (rel, f) in files {
        if f.scan.partial {
            partial_files.insert(rel.as_str());
        }
        for d in &f.scan.docs {
            if let Some(prev) = winners.insert(&d.src, d) {
                dups.insert(Duplicate { src: (*d.src).clone(), loser: prev.origin.clone(), winner: d.origin.clone() });
            }
        }
    }
    (winners, dups, partial_files)
}

/// The source's memory of the directory: files with their documents (identities and versions;
/// translated records only until they are handed to the writer), and what the writer was told.
pub struct ManifestsState {
    dir: PathBuf,
    handlers: Arc<Handlers>,
    features: Features,
    clock: Clock,
    files: BTreeMap<String, FileEntry>,
    current: HashMap<Arc<SourceRef>, Current>,
    duplicates: HashSet<Duplicate>,
    /// Where checkpoints are read from ([`ManifestsState::with_checkpoints`]).
    store: Option<Store>,
    /// Files whose checkpoint is to be written or removed ([`ManifestsState::take_checkpoints`]).
    dirty: BTreeSet<String>,
    /// Whether the directory checkpoint is to be written.
    dir_dirty: bool,
    /// Whether the next refresh must diff even when no file changed (the warm start corrected
    /// what the writer was told).
    force_diff: bool,
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
            current: HashMap::default(),
            duplicates: HashSet::default(),
            store: None,
            dirty: BTreeSet::new(),
            dir_dirty: true,
            force_diff: false,
        }
    }

    /// Keeps checkpoints in `store` ([`storage::checkpoint`]): [`ManifestsState::warm_start`]
    /// reads them, [`ManifestsState::take_checkpoints`] writes them.
    pub fn with_checkpoints(mut self, store: Store) -> ManifestsState {
        self.store = Some(store);
        self
    }

    /// Every skip report of the directory as it is now, in path order.
    pub fn skips(&self) -> Vec<SkipReport> {
        self.files.values().flat_map(|f| f.scan.skips.iter().cloned()).collect()
    }

    /// Every ignored document of the directory as it is now.
    pub fn ignored(&self) -> Vec<Ignored> {
        self.files.values().flat_map(|f| f.scan.ignored.iter().cloned()).collect()
    }

    /// Every object the directory holds now (including skipped and retained ones).
    pub fn present(&self) -> std::collections::HashSet<SourceRef> {
        self.current.keys().map(|k| (**k).clone()).collect()
    }

    /// Whether the directory holds `src` now (see [`ManifestsState::present`]).
    pub fn holds(&self, src: &SourceRef) -> bool {
        self.current.contains_key(src)
    }

    /// Number of manifest files read.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Number of documents of projected kinds (winners and losers of duplicates included).
    pub fn document_count(&self) -> usize {
        self.files.values().map(|f| f.scan.docs.len()).sum()
    }

    fn dir_checkpoint(&self) -> DirCheckpoint {
        let dir = self.dir.canonicalize().unwrap_or_else(|_| self.dir.clone());
        DirCheckpoint {
            dir: dir.display().to_string(),
            features: format!("{:?}", self.features),
            build: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// Takes over the files of the store's checkpoints, before the first refresh: a file whose
    /// stamp (length, mtime, inode, ctime) is unchanged is then not read again. Every checkpointed
    /// object is checked against the store's source versions; one that is missing or at another
    /// version has its file read again (its record is sent once more), and every stored object
    /// not confirmed is listed in [`WarmStart::unconfirmed`] so the caller deletes it unless the
    /// first refresh finds it. Without checkpoints for this directory, build and feature set
    /// (a new store, a restored one, another directory), nothing is taken over and every
    /// checkpoint is rewritten.
    ///
    /// # Errors
    /// A store error reading the checkpoints or sources; the state is then unchanged (start cold).
    pub fn warm_start(&mut self) -> Result<WarmStart, storage::StorageError> {
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
        let mut files = BTreeMap::new();
        view.for_each_checkpoint(FILE_CHECKPOINT, |key, value| {
            let Some(rel) = key.strip_prefix(FILE_CHECKPOINT) else { return };
            let entry = if same_dir {
                storage::checkpoint::decode::<FileCheckpoint>(value, "manifests file checkpoint").ok().and_then(|c| c.into_entry(rel))
            } else {
                None
            };
            match entry {
                Some(e) => {
                    files.insert(rel.to_string(), e);
                }
                // Rewritten (or removed) after the first refresh.
                None => {
                    self.dirty.insert(rel.to_string());
                }
            }
        })?;
        if !same_dir {
            return Ok(w);
        }
        // What the writer was told, as far as the checkpoints know: the later document wins.
        let documents = files.values().map(|f| f.scan.docs.len()).sum();
        let mut current: HashMap<Arc<SourceRef>, Current> = HashMap::with_capacity_and_hasher(documents, Default::default());
        for d in files.values().flat_map(|f| &f.scan.docs) {
            current.insert(d.src.clone(), Current { version: Some(d.version), origin: d.origin.clone() });
        }
        let mut confirmed: HashSet<*const SourceRef> = HashSet::with_capacity_and_hasher(current.len(), Default::default());
        let mut src = SourceRef { kind: KindId::Group, namespace: String::new(), name: String::new() };
        for kind in schema::registry::registered() {
            view.for_each_source(kind, |namespace, name, version| {
                src.kind = kind;
                src.namespace.clear();
                src.namespace.push_str(namespace);
                src.name.clear();
                src.name.push_str(name);
                match current.get_key_value(&src) {
                    Some((k, c)) if c.version.is_some_and(|v| hex_eq(&v.0, version)) => {
                        confirmed.insert(Arc::as_ptr(k));
                    }
                    _ => w.unconfirmed.push(src.clone()),
                }
            })?;
        }
        w.checked = true;
        w.files = files.len();
        w.documents = documents;
        let checkpointed = current.len();
        self.current = current;
        self.current.retain(|k, _| confirmed.contains(&Arc::as_ptr(k)));
        w.stale = checkpointed - self.current.len();
        self.files = files;
        self.force_diff = w.stale > 0;
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
        let mut out = Vec::new();
        for rel in std::mem::take(&mut self.dirty) {
            let value = self.files.get(&rel).and_then(FileCheckpoint::of).map(|c| Arc::from(storage::checkpoint::encode(&c)));
            out.push(Change::Checkpoint { key: format!("{FILE_CHECKPOINT}{rel}"), value });
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
    /// first refresh of a state that holds nothing (no files, nothing told to the writer: a cold
    /// start), changes are sent while files are scanned, in blocks of [`STREAM_BLOCK`]
    /// documents (parents first within a block), so the writer works while the rest is parsed
    /// and the translated records are freed at once; the final diff then sends only what later
    /// documents changed (none in a directory without duplicates). Otherwise the refresh's
    /// changes are sent at its end, in [`Refresh::changes`] order. The returned
    /// [`Refresh::changes`] is empty; [`Refresh::sent`] counts what was sent.
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
        let (found, failed_dirs) = walk(&self.dir);
        let under_failed = |rel: &str| failed_dirs.iter().any(|d| d.is_empty() || rel.starts_with(&format!("{d}/")));
        let cold = self.files.is_empty() && self.current.is_empty();
        let mut seen = HashSet::default();
        // Files read and changed, with what they held before (for `diff_files`).
        let mut replaced: Vec<(String, Option<FileEntry>)> = Vec::new();
        for f in found {
            seen.insert(f.rel.clone());
            if let Some(e) = self.files.get(&f.rel) {
                if !full && e.stamp == f.stamp {
                    continue;
                }
            }
            let stream: Option<&mut dyn FnMut(Change)> = match (cold, send.as_mut()) {
                (true, Some(s)) => Some(&mut **s),
                _ => None,
            };
            if let Some(old) = self.read_file_sending(&f.rel, &f.path, f.stamp, false, &mut r, stream) {
                if !cold {
                    replaced.push((f.rel.clone(), old));
                }
            }
        }
        let before = self.files.len();
        let dirty = &mut self.dirty;
        self.files.retain(|rel, _| {
            let keep = seen.contains(rel) || under_failed(rel);
            if !keep {
                dirty.insert(rel.clone());
            }
            keep
        });
        let removed = self.files.len() != before;
        r.changed |= removed;
        let force = std::mem::take(&mut self.force_diff);
        if r.changed && !force && !removed && self.diff_files(&replaced, &mut r) {
            drop(replaced);
        } else if r.changed || force {
            drop(replaced);
            // Objects to send whose translated record is no longer held (a duplicate whose
            // winner went away, a record the store lacks): read their files again. Not after a
            // streamed cold start: every winner was sent when its file was read.
            let streamed = cold && send.is_some();
            let reread = self.diff(&mut r, !streamed);
            if !reread.is_empty() {
                for rel in reread {
                    let path = self.dir.join(&rel);
                    let stamp = std::fs::metadata(&path).map(|m| Stamp::of(&m)).unwrap_or_default();
                    self.read_file(&rel, &path, stamp, true, &mut r);
                }
                self.diff(&mut r, false);
            }
        }
        r
    }

    /// Reads and scans one file into `files` (unless its content hash is unchanged and `force`
    /// is false). Returns the entry it replaced (`Some(None)` for a new file), `None` when the
    /// entry was kept.
    fn read_file(&mut self, rel: &str, path: &Path, stamp: Stamp, force: bool, r: &mut Refresh) -> Option<Option<FileEntry>> {
        self.read_file_sending(rel, path, stamp, force, r, None)
    }

    /// [`ManifestsState::read_file`]; with `send`, the file is scanned in blocks of
    /// [`STREAM_BLOCK`] documents and each block's objects are sent ([`send_docs`]) before the
    /// next block is parsed (counted in [`Refresh::sent`]).
    fn read_file_sending(
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
                let scan = unreadable(rel, e.to_string());
                r.changed |= self.files.get(rel).is_none_or(|old| old.scan.skips != scan.skips);
                r.new_skips.extend(scan.skips.iter().cloned());
                self.dirty.insert(rel.to_string());
                return Some(self.files.insert(rel.to_string(), FileEntry { stamp, hash: [0; 32], scan }));
            }
        };
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
        let json = has_manifest_extension(path).unwrap_or(false);
        let scan = match String::from_utf8(bytes) {
            Ok(text) => {
                let ctx = Context { now: self.clock.now(), features: self.features };
                match send {
                    Some(send) => {
                        let (current, handlers) = (&mut self.current, &self.handlers);
                        let mut sent = 0;
                        let scan = scan_text_blocks(rel, &text, json, handlers, &ctx, STREAM_BLOCK, &mut |b| {
                            sent += send_docs(current, handlers, &mut b.docs, send);
                        });
                        r.sent += sent;
                        scan
                    }
                    None => scan_text(rel, &text, json, &self.handlers, &ctx),
                }
            }
            Err(_) => unreadable(rel, "not UTF-8 text".into()),
        };
        r.new_skips.extend(scan.skips.iter().cloned());
        r.new_ignored.extend(scan.ignored.iter().cloned());
        self.dirty.insert(rel.to_string());
        Some(self.files.insert(rel.to_string(), FileEntry { stamp, hash, scan }))
    }

    /// The diff when only files that were read again changed, each holds exactly the objects it
    /// held before (each once), and each of those objects is held by no other file and was last
    /// told to the writer from that file: then no winner moves, nothing is deleted and no
    /// duplicate appears or goes, so the changes are the documents of those files whose version
    /// differs. Returns `false` (nothing changed) when that does not hold; then the full
    /// [`ManifestsState::diff`] runs. Costs the files' documents, not the directory's.
    fn diff_files(&mut self, replaced: &[(String, Option<FileEntry>)], r: &mut Refresh) -> bool {
        if replaced.is_empty() {
            return false;
        }
        {
            let duplicated: HashSet<&SourceRef> = self.duplicates.iter().map(|d| &d.src).collect();
            let mut objects: HashSet<&SourceRef> = HashSet::default();
            let clean = |s: &FileScan| !s.partial && s.skips.is_empty();
            for (rel, old) in replaced {
                let (Some(old), Some(new)) = (old, self.files.get(rel)) else { return false };
                if !clean(&old.scan) || !clean(&new.scan) || old.scan.docs.len() != new.scan.docs.len() {
                    return false;
                }
                objects.clear();
                for d in &new.scan.docs {
                    let told_here = self.current.get(d.src.as_ref()).is_some_and(|c| c.version.is_some() && *c.origin.file == **rel);
                    if d.skipped
                        || d.record.is_none()
                        || !told_here
                        || duplicated.contains(d.src.as_ref())
                        || !objects.insert(d.src.as_ref())
                    {
                        return false;
                    }
                }
                // Same length, every old object found once: the same objects.
                if !old.scan.docs.iter().all(|d| objects.remove(d.src.as_ref())) {
                    return false;
                }
            }
        }
        let mut applies: Vec<(usize, Origin, Change)> = Vec::new();
        for (rel, _) in replaced {
            let Some(f) = self.files.get_mut(rel) else { continue };
            for d in &mut f.scan.docs {
                let record = d.record.take();
                let Some(cur) = self.current.get_mut(d.src.as_ref()) else { continue };
                if cur.version != Some(d.version) {
                    if let Some(record) = record {
                        let change = apply_of(d, record);
                        applies.push((self.handlers.position(d.src.kind), d.origin.clone(), change));
                    }
                }
                *cur = Current { version: Some(d.version), origin: d.origin.clone() };
            }
        }
        applies.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        r.changes = applies.into_iter().map(|(_, _, c)| c).collect();
        r.incremental = true;
        true
    }

    /// Diffs the winning documents of the files against what the writer was told, updating
    /// that map in place; then drops the translated records (the changes hold them until
    /// written). With `check_records`, changes nothing and returns the files to read again first
    /// when a winner must be sent but its record is no longer held (a duplicate whose winner
    /// went away, a record the store lacks); an empty set means the diff is done. One pass over
    /// the objects builds the winners; each object is then looked up once in the map of what
    /// was told and once more for deletes.
    fn diff(&mut self, r: &mut Refresh, check_records: bool) -> BTreeSet<String> {
        let (winners, dups, partial_files) = winners(&self.files);
        if check_records {
            let reread: BTreeSet<String> = winners
                .values()
                .filter(|d| !d.skipped && d.record.is_none())
                .filter(|d| self.current.get(d.src.as_ref()).is_none_or(|c| c.version != Some(d.version)))
                .map(|d| d.origin.file.to_string())
                .collect();
            if !reread.is_empty() {
                return reread;
            }
        }
        let mut applies: Vec<(usize, Origin, Change)> = Vec::new();
        for d in winners.values() {
            let prev = self.current.get_mut(d.src.as_ref());
            if d.skipped {
                // Skipped: the previous record (if any) stays, under its previous version.
                if prev.is_none() {
                    self.current.insert(d.src.clone(), Current { version: None, origin: d.origin.clone() });
                }
                continue;
            }
            let unchanged = prev.as_ref().is_some_and(|p| p.version == Some(d.version));
            if !unchanged {
                let Some(record) = &d.record else {
                    // Only when its file could not be read again just now: sent once it can.
                    tracing::warn!(object = %d.src, origin = %d.origin, "record not available; sent when its file can be read");
                    continue;
                };
                let change = apply_of(d, record.clone());
                applies.push((self.handlers.position(d.src.kind), d.origin.clone(), change));
            }
            let told = Current { version: Some(d.version), origin: d.origin.clone() };
            match prev {
                Some(p) => *p = told,
                None => {
                    self.current.insert(d.src.clone(), told);
                }
            }
        }
        let mut deletes = Vec::new();
        self.current.retain(|src, cur| {
            // Files under unreadable directories stay in `files`, so their documents are still
            // winners; a partially readable file keeps the objects it held.
            if winners.contains_key(src) || partial_files.contains(&*cur.origin.file) {
                return true;
            }
            deletes.push(Change::Delete { src: (**src).clone(), origin: Arc::from(cur.origin.to_string()), token: None });
            false
        });
        applies.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        deletes.sort_by(|a, b| match (a, b) {
            (Change::Delete { src: x, .. }, Change::Delete { src: y, .. }) => x.cmp(y),
            _ => std::cmp::Ordering::Equal,
        });
        r.changes = applies.into_iter().map(|(_, _, c)| c).chain(deletes).collect();
        r.new_duplicates = dups.iter().filter(|d| !self.duplicates.contains(d)).cloned().collect();
        r.new_duplicates.sort_by(|a, b| a.winner.cmp(&b.winner));
        drop(winners);
        drop(partial_files);
        self.duplicates = dups;
        for f in self.files.values_mut() {
            for d in &mut f.scan.docs {
                d.record = None;
            }
        }
        BTreeSet::new()
    }
}

/// Sends the objects of a block of just-scanned documents (the later document of an object
/// within the block wins), in registry order, records in `current` what the writer was told,
/// and drops the block's translated records. Returns how many changes were sent.
fn send_docs(
    current: &mut HashMap<Arc<SourceRef>, Current>,
    handlers: &Handlers,
    docs: &mut [Document],
    send: &mut dyn FnMut(Change),
) -> usize {
    // Whether each document is the last of its object in the block, from the end: one hash per
    // document (each object's key is hashed again for `current` only).
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
        let entry = match current.entry(d.src.clone()) {
            std::collections::hash_map::Entry::Occupied(c) if c.get().version == Some(d.version) => continue,
            entry => entry,
        };
        let change = apply_of(d, record.clone());
        applies.push((handlers.position(d.src.kind), i, change));
        entry.insert_entry(Current { version: Some(d.version), origin: d.origin.clone() });
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
            origin: Origin { file: Arc::from(rel), document: 0, item: None, line: 0 },
            kind: None,
            namespace: None,
            name: None,
            reason: SkipReason::Unreadable(message),
        }],
        ignored: Vec::new(),
        partial: true,
    }
}

/// Logs a refresh's findings: one `warn!` per skipped document and duplicate, debug for ignored
/// documents; counts skips in `projector_reconcile_total{outcome="skip"}`.
pub fn report(r: &Refresh, metrics: &Metrics) {
    for s in &r.new_skips {
        let module = s.kind.as_deref().and_then(KindId::from_name).map(KindId::module).unwrap_or("unknown");
        metrics.reconciled(module, outcome::SKIP, 0.0);
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
    for i in &r.new_ignored {
        if i.disabled {
            tracing::info!(origin = %i.origin, reason = %i.reason, "document skipped: kind disabled");
        } else {
            tracing::debug!(origin = %i.origin, reason = %i.reason, "document ignored");
        }
    }
    for d in &r.new_duplicates {
        tracing::warn!(object = %d.src, ignored = %d.loser, wins = %d.winner, "the same object is defined twice; the later path wins");
    }
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
        let (stop2, skips2, dir2) = (stop.clone(), skips.clone(), dir.to_path_buf());
        let thread = std::thread::Builder::new()
            .name("cp-manifests".into())
            .spawn(move || run(dir2, state, sender, readiness, metrics, interval, stop2, skips2))
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

#[allow(clippy::too_many_arguments)]
fn run(
    dir: PathBuf,
    mut state: ManifestsState,
    sender: ChangeSender,
    readiness: Readiness,
    metrics: Metrics,
    interval: Duration,
    stop: Arc<AtomicBool>,
    skips: Arc<Mutex<Vec<SkipReport>>>,
) {
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
    report(&r, &metrics);
    *skips.lock().unwrap_or_else(|e| e.into_inner()) = state.skips();
    let applies = r.sent;
    let mut gone = 0;
    if warm.checked {
        // Every stored object was checked against the checkpoints: delete what no file holds.
        for src in warm.unconfirmed.into_iter().filter(|s| !state.holds(s)) {
            gone += 1;
            let mut c = Change::Delete { src, origin: Arc::from("no longer in the directory"), token: None };
            expect(&mut c);
            sender.send(c);
        }
    } else if !warm.store_empty {
        let kinds = schema::registry::registered();
        let token = Some(readiness.expect("sweep of objects no longer in the directory".into()));
        sender.send(Change::Sweep { kinds, present: Arc::new(state.present()), token });
    }
    for c in state.take_checkpoints() {
        sender.send(c);
    }
    readiness.end_phase(&initial_phase(&dir));
    tracing::info!(
        dir = %dir.display(),
        documents = state.document_count(),
        files_read = r.files_read,
        files_unchanged = state.file_count().saturating_sub(r.files_read),
        changes = applies + gone,
        skipped = state.skips().len(),
        elapsed = ?t0.elapsed(),
        "initial scan done"
    );
    let mut polls: u64 = 0;
    loop {
        std::thread::park_timeout(interval);
        if stop.load(Ordering::SeqCst) {
            break;
        }
        polls += 1;
        let r = state.refresh_with(polls.is_multiple_of(FULL_CHECK_EVERY));
        if r.changed {
            report(&r, &metrics);
            *skips.lock().unwrap_or_else(|e| e.into_inner()) = state.skips();
            if !r.changes.is_empty() {
                tracing::info!(files_read = r.files_read, changes = r.changes.len(), "manifests changed");
            }
        }
        // Checkpoints also move when a file was only touched (same content, new time).
        for c in r.changes.into_iter().chain(state.take_checkpoints()) {
            if !sender.send_paced(c) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
