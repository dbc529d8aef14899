//! `control-plane check --manifests DIR`: parse and translate every document without a store,
//! print the skipped ones with their reasons. Documents of kinds that are not projected
//! (`v1 Namespace`, `Environment`) are ignored, not failures. Required parents are not checked
//! (that needs the store).

use crate::config::Clock;
use crate::projector::handlers::Handlers;
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
    /// Skipped documents.
    pub skips: Vec<SkipReport>,
    /// Ignored documents (not projected kinds, empty documents).
    pub ignored: usize,
    /// Objects defined more than once.
    pub duplicates: Vec<Duplicate>,
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
        for s in &self.skips {
            let tag = if s.reason.is_failure() { "FAIL" } else { "SKIP" };
            writeln!(out, "{tag} {s}")?;
        }
        for d in &self.duplicates {
            writeln!(out, "DUPLICATE {}: {} is overridden by {}", d.src, d.loser, d.winner)?;
        }
        writeln!(
            out,
            "{} files, {} documents of projected kinds, {} skipped ({} failed), {} ignored",
            self.files,
            self.documents,
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
    Ok(CheckReport {
        files: state.file_count(),
        documents: state.document_count(),
        skips: state.skips(),
        ignored: state.ignored().len(),
        duplicates: r.new_duplicates,
    })
}
