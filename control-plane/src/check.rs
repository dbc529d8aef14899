//! `control-plane check --manifests DIR`: a dry run. Parses and translates every document
//! without a store and prints, per document, what would be projected (`OK`: kind, natural key,
//! the parents it needs) or why it would be skipped (`SKIP` deliberate, `FAIL` bad input). Documents of kinds that are not projected
//! (`v1 Namespace`, `Environment`) are ignored, not failures. Required parents are not checked
//! (that needs the store).

use crate::config::Clock;
use crate::projector::handlers::Handlers;
use crate::projector::writer::Change;
use crate::source::manifests::{Duplicate, ManifestsState, SkipReport};
use schema::kind::Features;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

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
    /// Ignored documents (not projected kinds, empty documents).
    pub ignored: usize,
    /// Objects defined more than once.
    pub duplicates: Vec<Duplicate>,
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
    /// Documents that failed to parse, decode or translate (deliberate skips excluded).
    pub fn failures(&self) -> usize {
        self.skips.iter().filter(|s| s.reason.is_failure()).count()
    }

    /// Writes the human-readable report.
    ///
    /// # Errors
    /// The writer's I/O error.
    pub fn print(&self, out: &mut impl Write) -> std::io::Result<()> {
        for p in &self.projected {
            write!(out, "OK {} {}: key {}", p.origin, p.object, p.key)?;
            if !p.requires.is_empty() {
                write!(out, ", needs {}", p.requires.join(", "))?;
            }
            writeln!(out)?;
        }
        for s in &self.skips {
            let tag = if s.reason.is_failure() { "FAIL" } else { "SKIP" };
            writeln!(out, "{tag} {s}")?;
        }
        for d in &self.duplicates {
            writeln!(out, "DUPLICATE {}: {} is overridden by {}", d.src, d.loser, d.winner)?;
        }
        writeln!(
            out,
            "{} files, {} documents of projected kinds, {} would be projected, {} skipped ({} failed), {} ignored",
            self.files,
            self.documents,
            self.projected.len(),
            self.skips.len(),
            self.failures(),
            self.ignored
        )
    }
}

/// Reads and translates every document under `dir`.
///
/// # Errors
/// A message when `dir` is not a readable directory.
pub fn check(dir: &Path, features: Features, clock: Clock) -> Result<CheckReport, String> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(format!("{} is not a directory", dir.display())),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    let mut state = ManifestsState::new(dir, Arc::new(Handlers::new(&features)), features, clock);
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
    Ok(CheckReport {
        files: state.file_count(),
        documents: state.document_count(),
        projected,
        skips: state.skips(),
        ignored: state.ignored().len(),
        duplicates: r.new_duplicates,
    })
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
