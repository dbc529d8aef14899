//! `control-plane check --manifests DIR`: a dry run. Parses and translates every document
//! without a store and prints, per document, what would be projected (`OK`: kind, natural key,
//! the parents it needs) or why it would be skipped (`SKIP` deliberate, `FAIL` bad input). Documents of kinds that are not projected
//! (`v1 Namespace`, `Environment`) and documents that are not objects are ignored, not failures:
//! each is listed as `IGNORED` with its reason (empty documents are only counted). Required parents are not checked
//! (that needs the store). Objects defined twice (`DUPLICATE`) and two objects with one natural
//! key (`CONFLICT`) are reported as a store that holds none of them would decide.

use crate::config::Clock;
use crate::projector::handlers::Handlers;
use crate::projector::writer::Change;
use crate::source::manifests::{Duplicate, Ignored, LeftOut, ManifestsState, SkipReport, EMPTY_DOCUMENT, KEPT_PER_FILE};
use schema::kind::Features;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

/// What `check` reports, one line each: the tag a report line starts with. `check --help` lists
/// them from here ([`outcomes_help`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A document that would be projected.
    Ok,
    /// A document skipped deliberately.
    Skip,
    /// A document that fails to parse, decode or translate (exit 1).
    Fail,
    /// A document that is not a projected object.
    Ignored,
    /// An object defined twice.
    Duplicate,
    /// Two objects of one kind with one natural key.
    Conflict,
}

impl Outcome {
    /// Every outcome, in the order the report lists them.
    pub const ALL: [Outcome; 6] = [Outcome::Ok, Outcome::Skip, Outcome::Fail, Outcome::Ignored, Outcome::Duplicate, Outcome::Conflict];

    /// The tag a report line starts with.
    pub fn tag(self) -> &'static str {
        match self {
            Outcome::Ok => "OK",
            Outcome::Skip => "SKIP",
            Outcome::Fail => "FAIL",
            Outcome::Ignored => "IGNORED",
            Outcome::Duplicate => "DUPLICATE",
            Outcome::Conflict => "CONFLICT",
        }
    }

    /// What a line with this tag says, for `check --help`.
    pub fn meaning(self) -> &'static str {
        match self {
            Outcome::Ok => "a document that would be projected: its origin (file#N (line L)), kind, namespace/name, natural key and the parents it needs",
            Outcome::Skip => "a document skipped deliberately, with the reason",
            Outcome::Fail => "a document that fails to parse, decode or translate, with the reason (check exits 1)",
            Outcome::Ignored => "a document that is not a projected object (a kind that is not projected, not an object), with the reason",
            Outcome::Duplicate => "an object defined twice: which definition is overridden by which",
            Outcome::Conflict => "two objects of one kind with one natural key: the later one is not projected while the earlier one holds the key",
        }
    }
}

/// The list of outcomes `check --help` shows after its options.
pub fn outcomes_help() -> String {
    let mut out = String::from("Report lines, one per document or finding, then a summary line:\n");
    for o in Outcome::ALL {
        out.push_str(&format!("  {:<10} {}\n", o.tag(), o.meaning()));
    }
    out
}

/// What `check` found.
#[derive(Clone, Debug)]
pub struct CheckReport {
    /// Manifest files read.
    pub files: usize,
    /// Documents of projected kinds.
    pub documents: usize,
    /// What would be written, per document in file order: `origin` (`file.yaml#2 (line 9)`), the
    /// object (`Kind namespace/name`), the record's natural key, and the required parents
    /// (`Kind key`).
    pub projected: Vec<Projected>,
    /// Skipped documents.
    pub skips: Vec<SkipReport>,
    /// Skipped and ignored documents not in `skips` and `ignored` (beyond the
    /// [`KEPT_PER_FILE`] of each listed per file).
    pub left_out: LeftOut,
    /// Ignored documents (not projected kinds, not objects, empty documents), in file order.
    pub ignored: Vec<Ignored>,
    /// Objects defined more than once.
    pub duplicates: Vec<Duplicate>,
    /// Objects whose record has the natural key of an earlier object of its kind (two Apis of a
    /// team with one base path): into a store that holds neither, the earlier one is written and
    /// this one is not (the store keeps the first one it stores).
    pub conflicts: Vec<KeyConflict>,
}

/// Two objects of one kind with one natural key, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyConflict {
    /// The natural key, components joined by `/`.
    pub key: String,
    /// The earlier object (`Kind namespace/name`) and its origin: it keeps the key.
    pub holder: (String, String),
    /// The later object and its origin: not projected while the holder is.
    pub waiting: (String, String),
}

/// One document that would be projected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Projected {
    /// `file.yaml#N (line L)`.
    pub origin: String,
    /// `Kind namespace/name`.
    pub object: String,
    /// The record's natural key, components joined by `/`.
    pub key: String,
    /// Parents that must exist (`Kind key`); checked by the store, not here.
    pub requires: Vec<String>,
}

impl CheckReport {
    /// Documents that failed to parse, decode or translate (deliberate skips excluded), those
    /// not listed included.
    pub fn failures(&self) -> usize {
        self.skips.iter().filter(|s| s.reason.is_failure()).count() + self.left_out.failures
    }

    /// Writes the human-readable report.
    ///
    /// # Errors
    /// The writer's I/O error.
    pub fn print(&self, out: &mut impl Write) -> std::io::Result<()> {
        for p in &self.projected {
            write!(out, "{} {} {}: key {}", Outcome::Ok.tag(), p.origin, p.object, p.key)?;
            if !p.requires.is_empty() {
                write!(out, ", needs {}", p.requires.join(", "))?;
            }
            writeln!(out)?;
        }
        for s in &self.skips {
            let tag = if s.reason.is_failure() { Outcome::Fail } else { Outcome::Skip }.tag();
            writeln!(out, "{tag} {s}")?;
        }
        // Empty documents (comment-only sections) are counted, not listed.
        for i in self.ignored.iter().filter(|i| i.reason != EMPTY_DOCUMENT) {
            writeln!(out, "{} {}: {}", Outcome::Ignored.tag(), i.origin, i.reason)?;
        }
        for d in &self.duplicates {
            writeln!(out, "{} {}: {} is overridden by {}", Outcome::Duplicate.tag(), d.src, d.loser, d.winner)?;
        }
        for c in &self.conflicts {
            let ((holder, at), (waiting, wat)) = (&c.holder, &c.waiting);
            writeln!(out, "{} key {}: {waiting} ({wat}) is not projected while {holder} ({at}) holds it", Outcome::Conflict.tag(), c.key)?;
        }
        write!(
            out,
            "{} files, {} documents of projected kinds, {} would be projected, {} skipped ({} failed), {} ignored",
            self.files,
            self.documents,
            self.projected.len() - self.conflicts.len(),
            self.skips.len() + self.left_out.skips,
            self.failures(),
            self.ignored.len() + self.left_out.ignored
        )?;
        if self.left_out != LeftOut::default() {
            write!(
                out,
                " ({} skipped and {} ignored not listed: at most {KEPT_PER_FILE} of each are listed per file)",
                self.left_out.skips, self.left_out.ignored
            )?;
        }
        if !self.conflicts.is_empty() {
            write!(out, ", {} waiting for a natural key another object holds", self.conflicts.len())?;
        }
        writeln!(out)
    }
}

/// Reads and translates every document under `dir`.
///
/// # Errors
/// A message when `dir` is not a readable directory.
pub fn check(dir: &Path, features: Features, clock: Clock) -> Result<CheckReport, String> {
    check_with(dir, features, clock, crate::config::DEFAULT_MAX_DOCUMENT_BYTES, crate::config::DEFAULT_MAX_FILE_BYTES)
}

/// [`check`] with the feature flags and the source's limits of `config`
/// (`source.maxDocumentBytes`, `source.maxFileBytes`; [`crate::config::check_config_from_env`]).
///
/// # Errors
/// As [`check`].
pub fn check_as_configured(dir: &Path, config: &crate::config::Config) -> Result<CheckReport, String> {
    check_with(dir, config.features, config.clock(), config.max_document_bytes, config.max_file_bytes)
}

fn check_with(
    dir: &Path,
    features: Features,
    clock: Clock,
    max_document_bytes: usize,
    max_file_bytes: usize,
) -> Result<CheckReport, String> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{} is not a directory", dir.display())),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    let handlers = Handlers::new(&features).with_max_document_bytes(max_document_bytes);
    let mut state = ManifestsState::new(dir, Arc::new(handlers), features, clock).with_max_file_bytes(max_file_bytes as u64);
    let r = state.refresh();
    let mut projected: Vec<Projected> = r
        .changes
        .iter()
        .filter_map(|c| match c {
            Change::Apply { src, record, origin, .. } => Some(Projected {
                origin: origin.to_string(),
                object: src.to_string(),
                key: record.key().to_string(),
                requires: record.requires().iter().map(|p| format!("{} {}", p.kind.name(), p.key)).collect(),
            }),
            _ => None,
        })
        .collect();
    projected.sort_by(|a, b| origin_order(&a.origin).cmp(&origin_order(&b.origin)));
    let conflicts = conflicts(&projected);
    Ok(CheckReport {
        files: state.file_count(),
        documents: state.document_count(),
        projected,
        skips: state.skips(),
        left_out: state.left_out(),
        ignored: {
            let mut ignored = state.ignored();
            ignored.sort_by(|a, b| a.origin.cmp(&b.origin));
            ignored
        },
        duplicates: r.new_duplicates,
        conflicts,
    })
}

/// The objects of `projected` (in file order, one per object) whose kind and natural key an
/// earlier one has.
fn conflicts(projected: &[Projected]) -> Vec<KeyConflict> {
    let mut holders: std::collections::HashMap<(&str, &str), &Projected> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for p in projected {
        let kind = p.object.split_once(' ').map_or(p.object.as_str(), |(k, _)| k);
        let holder = *holders.entry((kind, p.key.as_str())).or_insert(p);
        if !std::ptr::eq(holder, p) {
            out.push(KeyConflict {
                key: p.key.clone(),
                holder: (holder.object.clone(), holder.origin.clone()),
                waiting: (p.object.clone(), p.origin.clone()),
            });
        }
    }
    out
}

/// Sorts `file.yaml#N (line L)` by file, then by document number.
fn origin_order(origin: &str) -> (&str, u64) {
    match origin.rsplit_once('#') {
        Some((file, rest)) => {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            (file, digits.parse().unwrap_or(0))
        }
        None => (origin, 0),
    }
}
