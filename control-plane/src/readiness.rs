//! Readiness: ready once the initial sync is done — every document of the
//! initial scan processed once (written, skipped or parked for retry). Until then `/readyz`
//! answers 503 with what is pending.
//!
//! Two kinds of pending items: *phases* (e.g. "initial scan of DIR", or one "initial list of
//! `<Kind>`" per watched kind, ended by the source once it has handed over every object) and
//! *items* (one per document or listed object, ended by whoever processes it). Items may belong
//! to a *group* (the kube source uses the kind name) whose expected/done counts are the sync
//! progress of that group. Phases can be marked *missing* (a kind whose CRD is not installed):
//! they stay pending and `/readyz` names them in `missingKinds`.
//!
//! **Warm starts** ([`Readiness::serve_warm`]): a store that completed an initial sync of the
//! same source before (`storage::sync`) is ready at once; the initial sync still runs, behind
//! it, and the kinds whose initial sync is not applied yet are *catching up*
//! ([`Readiness::catching_up`], `catchingUp` in `/readyz`, [`SyncState::CatchingUp`]).
//!
//! Derived data that must catch up before the server is ready (the catalogue search index) is
//! *followed* ([`Readiness::follow`]): once the initial sync is done, the store's revision at
//! that moment is the target, and the server stays unready — with a pending phase saying how
//! far the follower is — until the follower has reached it. A ready server answers searches as
//! a settled one does, on a cold start, a warm start and after a restore.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// A pending item handed to whoever finishes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(u64);

#[derive(Default)]
struct Progress {
    phases: BTreeSet<String>,
    items: BTreeMap<u64, (String, Option<usize>)>,
    /// Group name → (index into `counts`).
    groups: BTreeMap<String, usize>,
    /// Per group: (items expected, items done).
    counts: Vec<(u64, u64)>,
    missing: BTreeSet<String>,
    notes: Vec<String>,
    next: u64,
    followers: Vec<Follower>,
    /// Each tracked kind (its name, also its item group) with the phase its initial sync ends
    /// with ([`Readiness::track_kinds`]).
    kinds: Vec<(String, String)>,
    /// A warm start: ready whatever the initial sync's progress ([`Readiness::serve_warm`]).
    warm: bool,
    /// The kinds being re-derived ([`Readiness::report_rederiving`]).
    rederiving: Option<KindsOf>,
    /// Why store writes fail, while they do ([`Readiness::set_store_fault`]).
    store_fault: Option<String>,
    /// Whether the store cannot even be read (it could not be reopened after a failed write).
    store_closed: bool,
    /// Why the source stopped for good ([`Readiness::source_stopped`]).
    source_stopped: Option<String>,
    /// Why the search index's commits fail ([`Readiness::report_search_failure`]).
    search_failure: Option<FailureOf>,
}

/// Why something fails, while it does.
type FailureOf = Box<dyn Fn() -> Option<String> + Send>;

impl Progress {
    /// The store's fault, else the search index's failure.
    fn store_fault(&self) -> Option<String> {
        self.store_fault.clone().or_else(|| {
            let failure = self.search_failure.as_ref().and_then(|f| f())?;
            let failure = if failure.starts_with("search index") { failure } else { format!("search index: {failure}") };
            Some(format!("{failure}; searches answer as of its last commit and it is retried"))
        })
    }
}

/// The kinds being re-derived, by name.
type KindsOf = Box<dyn Fn() -> Vec<String> + Send>;

/// A revision function: the store's, or how far derived data has followed it.
type RevisionOf = Box<dyn Fn() -> u64 + Send>;

/// Derived data that must reach the store's revision of the end of the initial sync.
struct Follower {
    label: String,
    leader: RevisionOf,
    follower: RevisionOf,
    /// The leader's revision when the initial sync was first seen complete.
    target: Option<u64>,
    caught_up: bool,
}

impl Progress {
    /// Whether the initial sync is done; then whether every follower has caught up, and the
    /// pending phase of each one that has not.
    fn settled(&mut self) -> (bool, Vec<String>) {
        if !(self.phases.is_empty() && self.items.is_empty()) {
            return (false, Vec::new());
        }
        // In order: a follower's target is taken once every follower before it caught up (the
        // search index follows what a re-derivation wrote).
        for f in self.followers.iter_mut().filter(|f| !f.caught_up) {
            let target = *f.target.get_or_insert_with(|| (f.leader)());
            let at = (f.follower)();
            if at < target {
                return (false, vec![format!("{} at revision {at} of {target}", f.label)]);
            }
            f.caught_up = true;
        }
        (true, Vec::new())
    }
}

impl Progress {
    /// The state of the tracked `kind`'s initial sync, ending with `phase`.
    fn kind_state(&self, kind: &str, phase: &str) -> SyncState {
        let unprocessed = self.groups.get(kind).is_some_and(|&g| self.counts[g].0 > self.counts[g].1);
        if self.missing.contains(kind) {
            SyncState::CrdMissing
        } else if self.phases.contains(phase) || unprocessed {
            if self.warm {
                SyncState::CatchingUp
            } else {
                SyncState::Syncing
            }
        } else if self.store_fault.is_some() {
            SyncState::Stale
        } else {
            SyncState::Synced
        }
    }

    /// The tracked kinds served while their initial sync is not applied yet (warm starts).
    fn catching_up(&self) -> Vec<String> {
        if !self.warm {
            return Vec::new();
        }
        self.kinds.iter().filter(|(k, p)| self.kind_state(k, p) == SyncState::CatchingUp).map(|(k, _)| k.clone()).collect()
    }

    fn insert(&mut self, label: String, group: Option<usize>) -> Token {
        self.next += 1;
        self.items.insert(self.next, (label, group));
        Token(self.next)
    }
}

/// Called after each change of the readiness state ([`Readiness::on_change`]).
type ChangeHook = Box<dyn Fn() + Send + Sync>;

/// Shared readiness state. Cheap to clone.
#[derive(Clone)]
pub struct Readiness(Arc<Mutex<Progress>>, Arc<Mutex<Vec<ChangeHook>>>);

/// The answer of `/readyz`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyStatus {
    /// Whether the initial sync is complete and the search index has caught up with it.
    pub ready: bool,
    /// Phases still running (e.g. `initial scan of ./world`).
    pub pending_phases: Vec<String>,
    /// Number of documents not yet processed.
    pub pending_count: usize,
    /// The first of them (at most [`ReadyStatus::LIST_LIMIT`]), e.g. `ApiSubscription ns/name`.
    pub pending: Vec<String>,
    /// What cannot be synced at the moment and is retried (kube source: kinds whose CRD is not
    /// installed, e.g. `FileSubscription`). Empty when everything is available.
    pub missing_kinds: Vec<String>,
    /// Facts an operator should see that do not affect readiness, e.g. that authentication runs
    /// in mock mode. Empty normally.
    pub notes: Vec<String>,
    /// Kinds served from the store while their initial sync after a warm start is not applied
    /// yet: their answers may miss changes made while the server was down. Empty normally.
    pub catching_up: Vec<String>,
    /// Kinds being re-derived after an upgrade changed their derivation version (their queries
    /// may answer `UNAVAILABLE` until it ends). Empty normally.
    pub rederiving: Vec<String>,
    /// While store writes fail (a full or failing volume): the cause, the data directory and
    /// since when, e.g. `store write failed: No space left on device (os error 28); data
    /// directory /data; since 2026-12-05T10:00:00Z; retried with backoff`. A store that
    /// completed a sync stays ready and serves what it holds (stale); one whose initial sync
    /// cannot complete is not ready. `None` normally.
    pub store_fault: Option<String>,
    /// Why the source stopped for good (its thread failed, e.g. on a damaged store): the store
    /// no longer follows it and the server is not ready until it is restarted. `None` normally.
    pub source_fault: Option<String>,
}

/// The sync state of one kind (`GET /admin/v1/status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SyncState {
    /// Switched off by a feature flag: not projected.
    Disabled,
    /// The initial sync of the kind is still running (its phase is pending or items of its
    /// group are unprocessed), and the kind is not served before it ends (a cold start).
    Syncing,
    /// A warm start: the kind is served from the store while its initial sync runs behind.
    CatchingUp,
    /// Initial sync applied; changes follow as they come.
    Synced,
    /// Served from the store while its writes fail (a full or failing volume): changes since
    /// the last applied one are not in it yet; they are applied once writes succeed again.
    Stale,
    /// The kind's CRD is not installed (kube source); retried.
    CrdMissing,
}

impl ReadyStatus {
    /// How many pending items are listed.
    pub const LIST_LIMIT: usize = 50;
}

impl Readiness {
    /// Not ready until every phase in `phases` has ended (and every item since expected is done).
    pub fn new<S: Into<String>>(phases: impl IntoIterator<Item = S>) -> Readiness {
        let state = Progress { phases: phases.into_iter().map(Into::into).collect(), ..Progress::default() };
        Readiness(Arc::new(Mutex::new(state)), Arc::default())
    }

    /// Tracks the initial sync of each `(kind, phase)`: the kind's items are those of the group
    /// named after it, and its sync ends with `phase` (see [`Readiness::kind_state`]).
    pub fn track_kinds(&self, kinds: impl IntoIterator<Item = (String, String)>) {
        self.lock().kinds.extend(kinds);
    }

    /// The names of the tracked kinds ([`Readiness::track_kinds`]), in the order they were
    /// tracked.
    pub fn tracked(&self) -> Vec<String> {
        self.lock().kinds.iter().map(|(k, _)| k.clone()).collect()
    }

    /// Makes this a warm start: ready at once, whatever the initial sync's progress; the kinds
    /// whose sync is not applied are [`Readiness::catching_up`].
    pub fn serve_warm(&self) {
        self.lock().warm = true;
        self.changed();
    }

    /// Names, in every status, the kinds `rederiving()` returns (called with the readiness
    /// lock held: it must not block or call back into this).
    pub fn report_rederiving(&self, rederiving: impl Fn() -> Vec<String> + Send + 'static) {
        self.lock().rederiving = Some(Box::new(rederiving));
    }

    /// Records why store writes fail (`Some`, shown as [`ReadyStatus::store_fault`]) or that
    /// they succeed again (`None`), and whether the store cannot be read meanwhile (`closed`:
    /// not ready, whatever the sync).
    pub fn set_store_fault(&self, fault: Option<String>, closed: bool) {
        let mut s = self.lock();
        s.store_fault = fault;
        s.store_closed = closed;
        drop(s);
        self.changed();
    }

    /// Records that the source stopped for good, and why: not ready from now on (the store no
    /// longer follows the source), named in [`ReadyStatus::source_fault`].
    pub fn source_stopped(&self, why: String) {
        self.lock().source_stopped = Some(why);
        self.changed();
    }

    /// Why store writes fail, while they do ([`Readiness::set_store_fault`]); else why the
    /// search index's commits fail ([`Readiness::report_search_failure`]).
    pub fn store_fault(&self) -> Option<String> {
        self.lock().store_fault()
    }

    /// Names, in `storeFault` while store writes succeed, why the search index's commits fail
    /// (`failure()` is called with the readiness lock held: it must not block or call back).
    pub fn report_search_failure(&self, failure: impl Fn() -> Option<String> + Send + 'static) {
        self.lock().search_failure = Some(Box::new(failure));
    }

    /// Whether this is a warm start ([`Readiness::serve_warm`]).
    pub fn is_warm(&self) -> bool {
        self.lock().warm
    }

    /// The tracked kinds served while their initial sync after a warm start is not applied
    /// yet, in the order they were tracked; empty on a cold start and once caught up.
    pub fn catching_up(&self) -> Vec<String> {
        self.lock().catching_up()
    }

    /// Calls `hook` after each later change of the state (a phase ended, an item done, a kind
    /// missing or back); it must not block or call back into this.
    pub fn on_change(&self, hook: impl Fn() + Send + Sync + 'static) {
        self.1.lock().unwrap_or_else(|e| e.into_inner()).push(Box::new(hook));
    }

    fn changed(&self) {
        for hook in self.1.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            hook();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        // A panic while holding this lock cannot leave the maps inconsistent: recover.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the server unready after the initial sync until `follower()` (a revision of
    /// derived data, e.g. the search index's) has reached what `leader()` (the store's
    /// revision) was when the sync was first seen complete; until then `/readyz` lists
    /// `"<label> at revision A of B"` among its pending phases. Followers are waited for in the
    /// order they were registered: a follower's target is taken once those before it caught
    /// up. Both functions are called with the readiness lock held: they must not block or call
    /// back into this.
    pub fn follow(&self, label: &str, leader: impl Fn() -> u64 + Send + 'static, follower: impl Fn() -> u64 + Send + 'static) {
        self.lock().followers.push(Follower {
            label: label.to_string(),
            leader: Box::new(leader),
            follower: Box::new(follower),
            target: None,
            caught_up: false,
        });
    }

    /// Whether the initial sync is processed: every phase ended, every item done (followers
    /// aside).
    pub fn synced(&self) -> bool {
        let s = self.lock();
        s.phases.is_empty() && s.items.is_empty()
    }

    /// Ends a phase.
    pub fn end_phase(&self, phase: &str) {
        self.lock().phases.remove(phase);
        self.changed();
    }

    /// Registers a pending item described by `label`.
    pub fn expect(&self, label: String) -> Token {
        self.lock().insert(label, None)
    }

    /// Registers a pending item of `group`, counted in [`Readiness::progress`] of that group.
    pub fn expect_in(&self, group: &str, label: String) -> Token {
        let mut s = self.lock();
        let g = match s.groups.get(group) {
            Some(&g) => g,
            None => {
                let g = s.counts.len();
                s.counts.push((0, 0));
                s.groups.insert(group.to_string(), g);
                g
            }
        };
        s.counts[g].0 += 1;
        s.insert(label, Some(g))
    }

    /// Marks an item processed (idempotent).
    pub fn done(&self, token: Token) {
        let mut s = self.lock();
        if let Some((_, Some(g))) = s.items.remove(&token.0) {
            s.counts[g].1 += 1;
        }
        drop(s);
        self.changed();
    }

    /// `(expected, done)`: items registered in `group` with [`Readiness::expect_in`] and how
    /// many of them are processed; `(0, 0)` for an unknown group.
    pub fn progress(&self, group: &str) -> (u64, u64) {
        let s = self.lock();
        s.groups.get(group).map(|&g| s.counts[g]).unwrap_or((0, 0))
    }

    /// Marks `what` (a kind name) as missing or available again; see [`ReadyStatus::missing_kinds`].
    pub fn set_missing(&self, what: &str, missing: bool) {
        let mut s = self.lock();
        if missing {
            s.missing.insert(what.to_string());
        } else {
            s.missing.remove(what);
        }
        drop(s);
        self.changed();
    }

    /// Adds a note to every status (idempotent); see [`ReadyStatus::notes`].
    pub fn note(&self, text: &str) {
        let mut s = self.lock();
        if !s.notes.iter().any(|n| n == text) {
            s.notes.push(text.to_string());
        }
    }

    /// The sync state of the tracked `kind` ([`Readiness::track_kinds`]); `Disabled` for a
    /// kind not tracked (switched off).
    pub fn kind_state(&self, kind: &str) -> SyncState {
        let s = self.lock();
        match s.kinds.iter().find(|(k, _)| k == kind) {
            Some((k, phase)) => s.kind_state(k, phase),
            None => SyncState::Disabled,
        }
    }

    /// Whether the phase `phase` is still pending.
    pub fn phase_pending(&self, phase: &str) -> bool {
        self.lock().phases.contains(phase)
    }

    /// Whether the initial sync is complete and every follower has caught up with it, warm
    /// start or not: what a warm start is once it has caught up.
    pub fn is_settled(&self) -> bool {
        self.lock().settled().0
    }

    /// Whether the server is ready: a warm start, or the initial sync is complete and every
    /// follower has caught up with it; never while the store cannot be read.
    pub fn is_ready(&self) -> bool {
        let mut s = self.lock();
        !s.store_closed && s.source_stopped.is_none() && (s.warm || s.settled().0)
    }

    /// The current status.
    pub fn status(&self) -> ReadyStatus {
        let mut s = self.lock();
        let (settled, behind) = s.settled();
        ReadyStatus {
            ready: !s.store_closed && s.source_stopped.is_none() && (s.warm || settled),
            catching_up: s.catching_up(),
            rederiving: s.rederiving.as_ref().map(|f| f()).unwrap_or_default(),
            pending_phases: s.phases.iter().cloned().chain(behind).collect(),
            pending_count: s.items.len(),
            pending: s.items.values().take(ReadyStatus::LIST_LIMIT).map(|(l, _)| l.clone()).collect(),
            missing_kinds: s.missing.iter().cloned().collect(),
            notes: s.notes.clone(),
            store_fault: s.store_fault(),
            source_fault: s.source_stopped.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_fault_is_reported_stale_or_unready_and_a_search_failure_is_named_below_it() {
        let r = Readiness::new(Vec::<String>::new());
        r.track_kinds([("Zone".to_string(), "list Zone".to_string())]);
        assert!(r.is_ready());
        let failing = Arc::new(Mutex::new(Some("No space left on device".to_string())));
        let reported = failing.clone();
        r.report_search_failure(move || reported.lock().unwrap().clone());
        assert!(r.is_ready(), "a failing search index does not make the server unready");
        assert!(r.status().store_fault.is_some_and(|f| f.starts_with("search index: No space left on device")));
        assert_eq!(r.kind_state("Zone"), SyncState::Synced);
        r.set_store_fault(Some("store write failed: No space left on device".into()), false);
        assert!(r.is_ready(), "a store that completed its sync keeps serving");
        assert_eq!(r.status().store_fault.as_deref(), Some("store write failed: No space left on device"));
        assert_eq!(r.kind_state("Zone"), SyncState::Stale);
        r.set_store_fault(Some("store write failed: Read-only file system".into()), true);
        assert!(!r.is_ready() && !r.status().ready, "a store that cannot be read is not ready");
        r.set_store_fault(None, false);
        *failing.lock().unwrap() = None;
        assert!(r.is_ready());
        assert_eq!(r.status().store_fault, None);
        assert_eq!(r.kind_state("Zone"), SyncState::Synced);
    }

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
        assert_eq!(
            r.status(),
            ReadyStatus {
                ready: true,
                pending_phases: vec![],
                pending_count: 0,
                pending: vec![],
                missing_kinds: vec![],
                notes: vec![],
                catching_up: vec![],
                rederiving: vec![],
                store_fault: None,
                source_fault: None
            }
        );
    }

    #[test]
    fn groups_count_progress_and_missing_kinds_are_named() {
        let r = Readiness::new(["initial list of Team", "initial list of Zone"]);
        r.track_kinds([("Team", "initial list of Team"), ("Zone", "initial list of Zone")].map(|(k, p)| (k.to_string(), p.to_string())));
        let a = r.expect_in("Team", "Team poc/a".into());
        let b = r.expect_in("Team", "Team poc/b".into());
        assert_eq!(r.progress("Team"), (2, 0));
        r.done(a);
        r.done(a);
        assert_eq!(r.progress("Team"), (2, 1), "done is idempotent");
        assert_eq!(r.progress("Zone"), (0, 0));
        r.set_missing("Zone", true);
        r.end_phase("initial list of Team");
        r.done(b);
        let st = r.status();
        assert!(!st.ready);
        assert_eq!(st.pending_phases, vec!["initial list of Zone"]);
        assert_eq!(st.missing_kinds, vec!["Zone"]);
        assert!(serde_json::to_string(&st).unwrap().contains(r#""missingKinds":["Zone"]"#));
        assert_eq!(r.kind_state("Zone"), SyncState::CrdMissing);
        assert_eq!(r.kind_state("Team"), SyncState::Synced);
        r.set_missing("Zone", false);
        assert_eq!(r.kind_state("Zone"), SyncState::Syncing);
        let z = r.expect_in("Zone", "Zone poc/z".into());
        r.end_phase("initial list of Zone");
        assert_eq!(r.kind_state("Zone"), SyncState::Syncing, "an item of the group is unprocessed");
        r.done(z);
        assert_eq!(r.kind_state("Zone"), SyncState::Synced);
        assert!(r.is_ready());
        assert!(r.status().missing_kinds.is_empty());
    }

    /// A warm start is ready at once; the kinds whose initial sync is not applied are catching
    /// up, named in the status, until their phase ended and their items are done.
    #[test]
    fn a_warm_start_is_ready_at_once_and_names_the_kinds_catching_up() {
        let r = Readiness::new(["initial list of Team", "initial list of Zone"]);
        r.track_kinds([("Team", "initial list of Team"), ("Zone", "initial list of Zone")].map(|(k, p)| (k.to_string(), p.to_string())));
        r.follow("search index", || 5, || 0);
        r.report_rederiving(|| vec!["Zone".to_string()]);
        assert!(!r.is_ready());
        assert!(r.catching_up().is_empty(), "a cold start is not catching up: it is not served");
        assert_eq!(r.kind_state("Team"), SyncState::Syncing);
        r.serve_warm();
        assert!(r.is_ready() && r.is_warm());
        let t = r.expect_in("Team", "Team poc/a".into());
        r.end_phase("initial list of Team");
        let st = r.status();
        assert!(st.ready);
        assert_eq!(st.catching_up, vec!["Team", "Zone"]);
        assert_eq!(st.rederiving, vec!["Zone"]);
        assert_eq!(r.kind_state("Team"), SyncState::CatchingUp, "an item is unprocessed");
        r.done(t);
        r.end_phase("initial list of Zone");
        assert_eq!(r.catching_up(), Vec::<String>::new());
        assert_eq!(r.kind_state("Zone"), SyncState::Synced);
        assert_eq!(r.kind_state("Group"), SyncState::Disabled, "not tracked");
        assert!(serde_json::to_string(&r.status()).unwrap().contains(r#""catchingUp":[]"#));
    }

    #[test]
    fn a_follower_holds_readiness_until_it_reaches_the_revision_of_the_end_of_the_sync() {
        use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
        let store = Arc::new(AtomicU64::new(3));
        let index = Arc::new(AtomicU64::new(3));
        let r = Readiness::new(["initial scan"]);
        let (s, i) = (store.clone(), index.clone());
        r.follow("search index", move || s.load(SeqCst), move || i.load(SeqCst));
        store.store(7, SeqCst); // the initial load commits
        assert!(!r.is_ready(), "the sync is not done");
        r.end_phase("initial scan");
        let st = r.status();
        assert!(!st.ready);
        assert_eq!(st.pending_phases, vec!["search index at revision 3 of 7"]);
        store.store(9, SeqCst); // later commits do not move the target
        index.store(7, SeqCst);
        assert!(r.is_ready());
        index.store(0, SeqCst);
        assert!(r.is_ready(), "once caught up, ready stays ready");
    }
}
