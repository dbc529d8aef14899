//! Readiness (DESIGN "Readiness"): ready once the initial sync is done — every document of the
//! initial scan processed once (written, skipped or parked for retry). Until then `/readyz`
//! answers 503 with what is pending.
//!
//! Two kinds of pending items: *phases* (e.g. "initial scan of DIR", ended by the source once it
//! has handed over every document) and *items* (one per document, ended by whoever processes it).

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A pending item handed to whoever finishes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(u64);

#[derive(Default)]
struct State {
    phases: BTreeSet<String>,
    items: BTreeMap<u64, String>,
    next: u64,
}

/// Shared readiness state. Cheap to clone.
#[derive(Clone)]
pub struct Readiness(Arc<Mutex<State>>);

/// The answer of `/readyz`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyStatus {
    /// Whether the initial sync is complete.
    pub ready: bool,
    /// Phases still running (e.g. `initial scan of ./world`).
    pub pending_phases: Vec<String>,
    /// Number of documents not yet processed.
    pub pending_count: usize,
    /// The first of them (at most [`ReadyStatus::LIST_LIMIT`]), e.g. `ApiSubscription ns/name`.
    pub pending: Vec<String>,
}

impl ReadyStatus {
    /// How many pending items are listed.
    pub const LIST_LIMIT: usize = 50;
}

impl Readiness {
    /// Not ready until every phase in `phases` has ended (and every item since expected is done).
    pub fn new<S: Into<String>>(phases: impl IntoIterator<Item = S>) -> Readiness {
        let state = State { phases: phases.into_iter().map(Into::into).collect(), ..State::default() };
        Readiness(Arc::new(Mutex::new(state)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the maps inconsistent: recover.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends a phase.
    pub fn end_phase(&self, phase: &str) {
        self.lock().phases.remove(phase);
    }

    /// Registers a pending item described by `label`.
    pub fn expect(&self, label: String) -> Token {
        let mut s = self.lock();
        s.next += 1;
        let id = s.next;
        s.items.insert(id, label);
        Token(id)
    }

    /// Marks an item processed (idempotent).
    pub fn done(&self, token: Token) {
        self.lock().items.remove(&token.0);
    }

    /// Whether the initial sync is complete.
    pub fn is_ready(&self) -> bool {
        let s = self.lock();
        s.phases.is_empty() && s.items.is_empty()
    }

    /// The current status.
    pub fn status(&self) -> ReadyStatus {
        let s = self.lock();
        ReadyStatus {
            ready: s.phases.is_empty() && s.items.is_empty(),
            pending_phases: s.phases.iter().cloned().collect(),
            pending_count: s.items.len(),
            pending: s.items.values().take(ReadyStatus::LIST_LIMIT).cloned().collect(),
        }
    }

    /// Waits until ready or `timeout` passes; returns whether ready.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.is_ready() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_after_phases_and_items() {
        let r = Readiness::new(["initial scan of w"]);
        assert!(!r.is_ready());
        let t = r.expect("Group poc/payments".into());
        r.end_phase("initial scan of w");
        let st = r.status();
        assert!(!st.ready);
        assert_eq!(st.pending, vec!["Group poc/payments"]);
        r.done(t);
        r.done(t);
        assert!(r.is_ready());
        assert_eq!(r.status(), ReadyStatus { ready: true, pending_phases: vec![], pending_count: 0, pending: vec![] });
    }
}
