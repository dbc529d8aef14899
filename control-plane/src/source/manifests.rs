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
//! * Change detection ([`ManifestsState::refresh`]): per file mtime and length, then a content
//!   hash; only changed files are parsed again. Added or edited documents become
//!   [`Change::Apply`], removed ones [`Change::Delete`]. A skipped document keeps the object's
//!   previous record (as the kube source would: the object still exists). When a file (or a
//!   directory) cannot be read, or holds a document whose identity cannot be read, the objects
//!   it held before are kept until it is readable again.

use crate::config::{one_line, Clock};
use crate::metrics::{outcome, Metrics};
use crate::projector::handlers::{Handlers, Lookup, Prepared, Rejection};
use crate::projector::writer::{Change, ChangeSender};
use crate::readiness::Readiness;
use schema::kind::{Context, Features};
use schema::{KindId, Skip};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};
use storage::SourceRef;

/// The default polling interval (changes are applied within two intervals).
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Every this many polls, file contents are hashed even when mtime and length are unchanged.
const FULL_CHECK_EVERY: u64 = 30;

/// Where a document is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    /// The file, relative to the manifests directory, with `/` separators.
    pub file: String,
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

/// A document of a projected kind with a readable identity.
#[derive(Clone)]
pub struct Document {
    /// Where it is.
    pub origin: Origin,
    /// Its identity.
    pub src: SourceRef,
    /// Hex SHA-256 of its canonical JSON.
    pub version: String,
    /// The translated record; `None` when skipped (see the file's [`SkipReport`]s).
    pub record: Option<Arc<dyn Prepared>>,
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
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 1;
    let flush = |cur: &mut String, start: usize, out: &mut Vec<Chunk>| {
        let meaningful = cur.lines().any(|l| {
            let t = l.trim();
            !t.is_empty() && !t.starts_with('#') && !l.starts_with('%')
        });
        if meaningful {
            let document = out.len() + 1;
            out.push(Chunk { document, line: start, text: std::mem::take(cur) });
        } else {
            cur.clear();
        }
    };
    for (i, raw) in text.split_inclusive('\n').enumerate() {
        let line = raw.trim_end_matches(['\n', '\r']);
        let lineno = i + 1;
        if line == "---" || line.starts_with("--- ") || line.starts_with("---\t") {
            flush(&mut cur, start, &mut out);
            start = lineno;
            let rest = &line[3..];
            if !rest.trim().is_empty() {
                cur.push_str(rest);
                cur.push('\n');
            }
        } else if line == "..." {
            flush(&mut cur, start, &mut out);
            start = lineno + 1;
        } else {
            if cur.is_empty() {
                start = lineno;
            }
            cur.push_str(line);
            cur.push('\n');
        }
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

/// Hex SHA-256 of `v`'s canonical JSON: a document's version.
pub fn version_of(v: &Value) -> String {
    let mut s = String::new();
    canonical_json(v, &mut s);
    hex(&Sha256::digest(s.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
    let mut scan = FileScan::default();
    let chunks = if json {
        if text.trim().is_empty() {
            Vec::new()
        } else {
            vec![Chunk { document: 1, line: 1, text: text.to_string() }]
        }
    } else {
        split_documents(text)
    };
    // Large files (generated worlds, `kubectl get -o yaml` dumps) are parsed and translated on
    // every core, in contiguous parts whose results are concatenated in file order.
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    if threads < 2 || chunks.len() < PARALLEL_CHUNKS {
        for chunk in &chunks {
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

/// Documents from which a file is scanned on several threads.
const PARALLEL_CHUNKS: usize = 512;

/// Parses, decodes and translates one document into `scan`.
fn scan_chunk(file: &str, chunk: &Chunk, json: bool, handlers: &Handlers, ctx: &Context, scan: &mut FileScan) {
    let origin = Origin { file: file.to_string(), document: chunk.document, item: None, line: chunk.line };
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
    let namespace = str_at(value, &["metadata", "namespace"]).map(String::from);
    let name = str_at(value, &["metadata", "name"]).filter(|n| !n.is_empty()).map(String::from);
    let report = |reason| SkipReport {
        origin: origin.clone(),
        kind: Some(kind.to_string()),
        namespace: namespace.clone(),
        name: name.clone(),
        reason,
    };
    let Some(obj_name) = name.clone() else {
        scan.partial = true;
        scan.skips.push(report(SkipReason::Identity("required field `metadata.name` is missing or empty".into())));
        return;
    };
    let src = SourceRef { kind: handler.kind(), namespace: namespace.clone().unwrap_or_default(), name: obj_name };
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
    scan.docs.push(Document { origin, src, version, record });
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
    modified: Option<SystemTime>,
    len: u64,
}

/// Lists manifest files under `dir` (recursively, following links, skipping hidden entries).
/// Returns the files and the relative paths of directories that could not be read.
fn walk(dir: &Path) -> (Vec<Found>, Vec<String>) {
    let mut files = Vec::new();
    let mut failed = Vec::new();
    let mut visited = HashSet::new();
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
                files.push(Found { rel: child_rel, path: child, modified: meta.modified().ok(), len: meta.len() });
            }
        }
    }
    files.sort_by(|a, b| a.rel.cmp(&b.rel));
    (files, failed)
}

struct FileEntry {
    modified: Option<SystemTime>,
    len: u64,
    hash: [u8; 32],
    scan: FileScan,
}

/// What the writer was last told about an object.
#[derive(Clone)]
struct Current {
    version: String,
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
    /// Whether anything in the directory changed.
    pub changed: bool,
}

/// The source's memory of the directory: files with their parsed documents, and what the
/// writer was told.
pub struct ManifestsState {
    dir: PathBuf,
    handlers: Arc<Handlers>,
    features: Features,
    clock: Clock,
    files: BTreeMap<String, FileEntry>,
    current: HashMap<SourceRef, Current>,
    duplicates: HashSet<Duplicate>,
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
            current: HashMap::new(),
            duplicates: HashSet::new(),
        }
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
    pub fn present(&self) -> HashSet<SourceRef> {
        self.current.keys().cloned().collect()
    }

    /// Number of manifest files read.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Number of documents of projected kinds (winners and losers of duplicates included).
    pub fn document_count(&self) -> usize {
        self.files.values().map(|f| f.scan.docs.len()).sum()
    }

    /// Re-reads changed files (by mtime and length) and computes the changes since the last
    /// refresh.
    pub fn refresh(&mut self) -> Refresh {
        self.refresh_with(false)
    }

    /// Like [`ManifestsState::refresh`]; with `full`, every file's content hash is checked even
    /// when its mtime and length are unchanged (a safety net for coarse file-system clocks).
    pub fn refresh_with(&mut self, full: bool) -> Refresh {
        let mut r = Refresh::default();
        let (found, failed_dirs) = walk(&self.dir);
        let under_failed = |rel: &str| failed_dirs.iter().any(|d| d.is_empty() || rel.starts_with(&format!("{d}/")));
        let mut seen = HashSet::new();
        for f in found {
            seen.insert(f.rel.clone());
            if let Some(e) = self.files.get_mut(&f.rel) {
                if !full && e.modified == f.modified && e.len == f.len {
                    continue;
                }
            }
            let bytes = match std::fs::read(&f.path) {
                Ok(b) => b,
                Err(e) => {
                    let scan = unreadable(&f.rel, e.to_string());
                    r.changed |= self.files.get(&f.rel).is_none_or(|old| old.scan.skips != scan.skips);
                    r.new_skips.extend(scan.skips.iter().cloned());
                    self.files.insert(f.rel.clone(), FileEntry { modified: f.modified, len: f.len, hash: [0; 32], scan });
                    continue;
                }
            };
            let hash: [u8; 32] = Sha256::digest(&bytes).into();
            if let Some(e) = self.files.get_mut(&f.rel) {
                e.modified = f.modified;
                e.len = f.len;
                if e.hash == hash {
                    continue;
                }
            }
            r.files_read += 1;
            r.changed = true;
            let json = has_manifest_extension(&f.path).unwrap_or(false);
            let scan = match String::from_utf8(bytes) {
                Ok(text) => {
                    let ctx = Context { now: self.clock.now(), features: self.features };
                    scan_text(&f.rel, &text, json, &self.handlers, &ctx)
                }
                Err(_) => unreadable(&f.rel, "not UTF-8 text".into()),
            };
            r.new_skips.extend(scan.skips.iter().cloned());
            r.new_ignored.extend(scan.ignored.iter().cloned());
            self.files.insert(f.rel.clone(), FileEntry { modified: f.modified, len: f.len, hash, scan });
        }
        let before = self.files.len();
        self.files.retain(|rel, _| seen.contains(rel) || under_failed(rel));
        r.changed |= self.files.len() != before;
        if r.changed {
            self.diff(&mut r);
        }
        r
    }

    /// Rebuilds the object map from the files and diffs it against what the writer was told.
    fn diff(&mut self, r: &mut Refresh) {
        let mut winners: HashMap<SourceRef, &Document> = HashMap::new();
        let mut partial_files = HashSet::new();
        let mut dups = HashSet::new();
        for (rel, f) in &self.files {
            if f.scan.partial {
                partial_files.insert(rel.clone());
            }
            for d in &f.scan.docs {
                if let Some(prev) = winners.insert(d.src.clone(), d) {
                    dups.insert(Duplicate { src: d.src.clone(), loser: prev.origin.clone(), winner: d.origin.clone() });
                }
            }
        }
        let mut applies: Vec<(usize, Origin, Change)> = Vec::new();
        let mut next: HashMap<SourceRef, Current> = HashMap::new();
        for (src, d) in &winners {
            let prev = self.current.get(src);
            if let Some(record) = &d.record {
                if prev.is_none_or(|p| p.version != d.version) {
                    let change = Change::Apply {
                        src: src.clone(),
                        version: d.version.clone(),
                        record: record.clone(),
                        origin: Arc::from(d.origin.to_string()),
                        token: None,
                    };
                    applies.push((self.handlers.position(src.kind), d.origin.clone(), change));
                }
                next.insert(src.clone(), Current { version: d.version.clone(), origin: d.origin.clone() });
            } else {
                // Skipped: the previous record (if any) stays, under its previous version.
                let keep = prev.cloned().unwrap_or(Current { version: String::new(), origin: d.origin.clone() });
                next.insert(src.clone(), keep);
            }
        }
        let mut deletes = Vec::new();
        for (src, cur) in &self.current {
            if next.contains_key(src) {
                continue;
            }
            // Files under unreadable directories stay in `files`, so their documents are still
            // winners; a partially readable file keeps the objects it held.
            if partial_files.contains(&cur.origin.file) {
                next.insert(src.clone(), cur.clone());
                continue;
            }
            deletes.push(Change::Delete { src: src.clone(), origin: Arc::from(cur.origin.to_string()), token: None });
        }
        applies.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        deletes.sort_by(|a, b| match (a, b) {
            (Change::Delete { src: x, .. }, Change::Delete { src: y, .. }) => x.cmp(y),
            _ => std::cmp::Ordering::Equal,
        });
        r.changes = applies.into_iter().map(|(_, _, c)| c).chain(deletes).collect();
        r.new_duplicates = dups.iter().filter(|d| !self.duplicates.contains(d)).cloned().collect();
        r.new_duplicates.sort_by(|a, b| a.winner.cmp(&b.winner));
        self.duplicates = dups;
        self.current = next;
    }
}

fn unreadable(rel: &str, message: String) -> FileScan {
    FileScan {
        docs: Vec::new(),
        skips: vec![SkipReport {
            origin: Origin { file: rel.to_string(), document: 0, item: None, line: 0 },
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
    let mut r = state.refresh();
    report(&r, &metrics);
    *skips.lock().unwrap_or_else(|e| e.into_inner()) = state.skips();
    let applies = r.changes.len();
    for mut c in r.changes.drain(..) {
        if let Change::Apply { src, origin, token, .. } | Change::Delete { src, origin, token } = &mut c {
            *token = Some(readiness.expect_in(src.kind.name(), format!("{src} ({origin})")));
        }
        sender.send(c);
    }
    let kinds = schema::registry::registered();
    let token = Some(readiness.expect("sweep of objects no longer in the directory".into()));
    sender.send(Change::Sweep { kinds, present: Arc::new(state.present()), token });
    readiness.end_phase(&initial_phase(&dir));
    tracing::info!(
        dir = %dir.display(),
        documents = state.document_count(),
        changes = applies,
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
        if !r.changed {
            continue;
        }
        report(&r, &metrics);
        *skips.lock().unwrap_or_else(|e| e.into_inner()) = state.skips();
        if !r.changes.is_empty() {
            tracing::info!(files_read = r.files_read, changes = r.changes.len(), "manifests changed");
        }
        for c in r.changes {
            if !sender.send(c) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests;
