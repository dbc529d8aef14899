//! The per-request deadline (ARCHITECTURE.md, `query`: long loops ask the request's deadline): every long loop of a request — scans, filter
//! evaluation, in-memory sorts' inputs, search hits, nested connections, counts, and every
//! resolved field — asks its [`Deadline`], and stops with `TIMEOUT` once the request's time is
//! up, it was cancelled (its client left, or its answer was already sent), or the server is
//! shutting down (`UNAVAILABLE`).
//!
//! The same object carries the request's **response budget** (`graphql.maxResponseBytes`):
//! every resolved field charges the bytes its value adds to the answer ([`Deadline::charge`]);
//! once they exceed the budget the request stops like a timed-out one, and its answer is one
//! `RESPONSE_TOO_LARGE` error — so no answer, and no tree of values built for one, grows beyond
//! a bound, whatever the records hold.
//!
//! Together, the requests in flight hold at most a **memory budget** (`graphql.maxInFlightBytes`,
//! a [`MemoryPool`]): beyond [`FREE_BYTES`] each, a request's answer bytes and the rows it sorts
//! in memory ([`Deadline::hold`]) are taken from the pool, in steps of [`POOL_STEP`], and given
//! back when the request's last clone of its deadline is dropped. A request that finds the pool
//! taken stops like a timed-out one with `OVERLOADED` (the server answers HTTP 503 with
//! `Retry-After`): small requests never wait on large ones, and many large ones at once cannot
//! make the process grow past the budget. A request that alone needs more than the whole pool
//! stops with `MEMORY_BUDGET_EXCEEDED` (a final answer: retrying cannot help).
//!
//! Checks are cheap: [`Deadline::tick`] reads the clock on every 64th call only.

use async_graphql::{Error, ErrorExtensions};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Called once when a request has run longer than planned ([`Deadline::on_slow`]).
struct SlowHook {
    at: Instant,
    hook: Box<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for SlowHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlowHook").field("at", &self.at).finish_non_exhaustive()
    }
}

/// What the executor does while a request waits on something outside the process (a secret
/// lookup, [`Deadline::wait_outside`]): such a wait uses no thread, so the request gives back
/// the worker permit it runs on and takes it again afterwards.
pub trait OutsideWait: Send + Sync + std::fmt::Debug {
    /// Gives the request's worker permit back; `false` when it holds none to give (it then
    /// takes none again).
    fn release(&self) -> bool;
    /// Takes a worker permit again (waiting for one, until the request's deadline at most).
    fn reacquire(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>;
}

/// When a request must stop, and the flags that stop it early.
#[derive(Debug, Default)]
pub struct Deadline {
    /// The instant the request's time is up; `None` = no time limit.
    at: Option<Instant>,
    /// The time limit, for the message.
    limit: Duration,
    /// Set by whoever holds [`Deadline::canceller`]: the request is abandoned.
    cancelled: Arc<AtomicBool>,
    /// Set once when the server shuts down (shared by every request).
    shutdown: Option<Arc<AtomicBool>>,
    ticks: AtomicU32,
    /// Run once by the first check after its instant (not cloned).
    slow: std::sync::OnceLock<SlowHook>,
    /// The response budget, shared by every clone (set once, [`Deadline::limit_response`]).
    budget: Arc<std::sync::OnceLock<Budget>>,
    /// The executor's permit handling around outside waits, shared by every clone (set once).
    outside: Arc<std::sync::OnceLock<Arc<dyn OutsideWait>>>,
    slow_done: AtomicBool,
}

/// Bytes an answer may take (`graphql.maxResponseBytes`) and what it has taken so far; what
/// the request holds of the process's [`MemoryPool`].
#[derive(Debug)]
struct Budget {
    max: usize,
    spent: AtomicUsize,
    exceeded: AtomicBool,
    /// The pool the request's bytes beyond [`FREE_BYTES`] are taken from (`None`: unbounded).
    pool: Option<Arc<MemoryPool>>,
    /// Bytes of rows held in memory besides the answer ([`Deadline::hold`]).
    working: AtomicUsize,
    /// Bytes taken from `pool`, given back on drop.
    taken: AtomicUsize,
    /// Set once the pool had no room for this request.
    starved: AtomicBool,
    /// Set once this request alone held more than the whole pool.
    beyond_pool: AtomicBool,
}

impl Drop for Budget {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.give(*self.taken.get_mut());
        }
    }
}

/// Bytes counted as held by a request until dropped ([`Deadline::hold`]).
#[derive(Debug)]
pub struct Held {
    budget: Arc<std::sync::OnceLock<Budget>>,
    bytes: usize,
}

impl Held {
    /// Adds `other`'s bytes to these (both are given back together).
    pub fn join(&mut self, mut other: Held) {
        self.bytes += std::mem::take(&mut other.bytes);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(b) = self.budget.get() {
            b.working.fetch_sub(self.bytes.min(b.working.load(Ordering::Relaxed)), Ordering::Relaxed);
        }
    }
}

/// Bytes a request holds without taking them from the [`MemoryPool`]: a console page's answer
/// and sorts fit (256 KiB).
pub const FREE_BYTES: usize = 256 << 10;

/// The step in which a request takes bytes from the [`MemoryPool`] (64 KiB): one shared
/// counter update per step, not per field.
pub const POOL_STEP: usize = 64 << 10;

/// The bytes every request in flight may hold together beyond [`FREE_BYTES`] each
/// (`graphql.maxInFlightBytes`): answers as counted for `graphql.maxResponseBytes`, and rows
/// sorted in memory. One per process, shared by every request.
#[derive(Debug)]
pub struct MemoryPool {
    max: usize,
    taken: AtomicUsize,
}

impl MemoryPool {
    /// A pool of `max` bytes.
    pub fn new(max: usize) -> Arc<MemoryPool> {
        Arc::new(MemoryPool { max, taken: AtomicUsize::new(0) })
    }

    /// The pool's size in bytes.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes taken by the requests in flight.
    pub fn taken(&self) -> usize {
        self.taken.load(Ordering::Relaxed)
    }

    /// Takes `bytes` if that many are free.
    fn take(&self, bytes: usize) -> bool {
        self.taken.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |t| t.checked_add(bytes).filter(|n| *n <= self.max)).is_ok()
    }

    fn give(&self, bytes: usize) {
        self.taken.fetch_sub(bytes.min(self.taken()), Ordering::AcqRel);
    }
}

/// How often [`Deadline::tick`] reads the clock (every this many calls).
const TICKS_PER_CHECK: u32 = 64;

impl Clone for Deadline {
    /// The same deadline and flags (its own tick counter, no slow hook).
    fn clone(&self) -> Deadline {
        Deadline {
            at: self.at,
            limit: self.limit,
            cancelled: self.cancelled.clone(),
            shutdown: self.shutdown.clone(),
            budget: self.budget.clone(),
            outside: self.outside.clone(),
            ..Deadline::default()
        }
    }
}

impl Deadline {
    /// No time limit, never cancelled (tests, offline tools).
    pub fn none() -> Deadline {
        Deadline::default()
    }

    /// A deadline `limit` after `start` (`None` or zero = no time limit), also stopped by the
    /// server-wide `shutdown` flag.
    pub fn new(start: Instant, limit: Option<Duration>, shutdown: Option<Arc<AtomicBool>>) -> Deadline {
        let limit = limit.filter(|l| !l.is_zero());
        Deadline { at: limit.map(|l| start + l), limit: limit.unwrap_or_default(), shutdown, ..Deadline::default() }
    }

    /// Limits the answer to `max` bytes (see [`Deadline::charge`]) and takes what the request
    /// holds beyond [`FREE_BYTES`] from `pool` (`None`: no pool); for this deadline and every
    /// clone of it, made before or after. A second call is ignored.
    pub fn limit_response(&self, max: usize, pool: Option<Arc<MemoryPool>>) {
        let _ = self.budget.set(Budget {
            max,
            spent: AtomicUsize::new(0),
            exceeded: AtomicBool::new(false),
            pool,
            working: AtomicUsize::new(0),
            taken: AtomicUsize::new(0),
            starved: AtomicBool::new(false),
            beyond_pool: AtomicBool::new(false),
        });
    }

    /// Counts `bytes` more of the answer (a field's name and value as JSON, roughly).
    ///
    /// # Errors
    /// `RESPONSE_TOO_LARGE` once the answer exceeds the budget; from then on the request
    /// [`Deadline::passed`] and every check fails with that error.
    /// `OVERLOADED` once the request's bytes beyond [`FREE_BYTES`] find no room in the
    /// [`MemoryPool`], `MEMORY_BUDGET_EXCEEDED` once they exceed the whole pool (retrying cannot
    /// help); from then on it has passed too.
    pub fn charge(&self, bytes: usize) -> Result<(), Error> {
        let Some(b) = self.budget.get() else { return Ok(()) };
        if b.spent.fetch_add(bytes, Ordering::Relaxed).saturating_add(bytes) > b.max {
            b.exceeded.store(true, Ordering::Relaxed);
            return Err(self.error());
        }
        self.reserve(b)
    }

    /// Counts `bytes` more held in memory by the request besides its answer (rows sorted in
    /// memory) against the [`MemoryPool`] until the returned [`Held`] is dropped. What the
    /// request took from the pool stays taken until it ends: its share is the most it held at
    /// once, not the sum of everything it held in turn.
    ///
    /// # Errors
    /// `OVERLOADED` when the pool has no room for them (see [`Deadline::charge`]).
    pub fn hold(&self, bytes: usize) -> Result<Held, Error> {
        let held = Held { budget: self.budget.clone(), bytes };
        let Some(b) = self.budget.get() else { return Ok(held) };
        b.working.fetch_add(bytes, Ordering::Relaxed);
        self.reserve(b).map(|()| held)
    }

    /// Takes from the pool what the request holds beyond [`FREE_BYTES`] and has not taken yet.
    fn reserve(&self, b: &Budget) -> Result<(), Error> {
        let Some(pool) = &b.pool else { return Ok(()) };
        let held = b.spent.load(Ordering::Relaxed).saturating_add(b.working.load(Ordering::Relaxed));
        let taken = b.taken.load(Ordering::Relaxed);
        let Some(missing) = held.saturating_sub(FREE_BYTES).checked_sub(taken).filter(|m| *m > 0) else { return Ok(()) };
        if held.saturating_sub(FREE_BYTES) > pool.max() {
            b.beyond_pool.store(true, Ordering::Relaxed);
            b.starved.store(true, Ordering::Relaxed);
            return Err(self.error());
        }
        let step = missing.div_ceil(POOL_STEP).saturating_mul(POOL_STEP);
        if pool.take(step) {
            b.taken.fetch_add(step, Ordering::Relaxed);
            return Ok(());
        }
        b.starved.store(true, Ordering::Relaxed);
        Err(self.error())
    }

    /// Sets the bytes counted back to `bytes` ([`Deadline::spent`] earlier): a plan that gave
    /// way to the resolvers, which charge the answer again ([`crate::plan`]).
    pub(crate) fn restore_spent(&self, bytes: usize) {
        if let Some(b) = self.budget.get() {
            b.spent.store(bytes, Ordering::Relaxed);
        }
    }

    /// Bytes of the answer counted so far ([`Deadline::charge`]); 0 without a budget.
    pub fn spent(&self) -> usize {
        self.budget.get().map_or(0, |b| b.spent.load(Ordering::Relaxed))
    }

    fn too_large(&self) -> Option<&Budget> {
        self.budget.get().filter(|b| b.exceeded.load(Ordering::Relaxed))
    }

    fn starved(&self) -> Option<&MemoryPool> {
        self.budget.get().filter(|b| b.starved.load(Ordering::Relaxed)).and_then(|b| b.pool.as_deref())
    }

    /// This deadline and its flags with an answer budget of its own of `max` bytes: each page
    /// of an export is one answer ([`crate::export`]).
    pub fn with_own_budget(&self, max: usize) -> Deadline {
        let own = Deadline { budget: Arc::default(), ..self.clone() };
        own.limit_response(max, None);
        own
    }

    /// Whether the answer outgrew its budget ([`Deadline::limit_response`]).
    pub fn answer_too_large(&self) -> bool {
        self.too_large().is_some()
    }

    /// The instant the request's time is up, if it has a limit.
    pub fn at(&self) -> Option<Instant> {
        self.at
    }

    /// The time limit (zero = none).
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// The flag that cancels this request when set.
    pub fn canceller(&self) -> Arc<AtomicBool> {
        self.cancelled.clone()
    }

    /// Whether the server is shutting down.
    pub fn shutting_down(&self) -> bool {
        self.shutdown.as_ref().is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// Whether the request must stop: its time is up, it was cancelled, its answer outgrew
    /// its budget, or the server shuts down.
    pub fn passed(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
            || self.shutting_down()
            || self.too_large().is_some()
            || self.starved().is_some()
            || self.at.is_some_and(|at| Instant::now() >= at)
    }

    /// Runs `hook` once, on the thread of the first check made `after` from now (the executor
    /// moves a request that runs longer than planned to its heavy slots). A second hook is
    /// ignored.
    pub fn on_slow(&self, after: Duration, hook: impl Fn() + Send + Sync + 'static) {
        let _ = self.slow.set(SlowHook { at: Instant::now() + after, hook: Box::new(hook) });
    }

    /// Sets what [`Deadline::wait_outside`] does with the request's worker permit (for this
    /// deadline and every clone of it). A second call is ignored.
    pub fn on_outside_wait(&self, hooks: Arc<dyn OutsideWait>) {
        let _ = self.outside.set(hooks);
    }

    /// Awaits `wait` — something outside the process, using no thread — without holding the
    /// request's worker permit, so other requests run meanwhile; takes one again afterwards.
    pub async fn wait_outside<T>(&self, wait: impl std::future::Future<Output = T>) -> T {
        let hooks = self.outside.get().cloned();
        let released = hooks.as_ref().is_some_and(|h| h.release());
        let out = wait.await;
        if let (true, Some(h)) = (released, hooks) {
            h.reacquire().await;
        }
        out
    }

    /// `Ok` while the request may go on.
    ///
    /// # Errors
    /// [`Deadline::error`] once it [`Deadline::passed`].
    pub fn check(&self) -> Result<(), Error> {
        if let Some(slow) = self.slow.get() {
            if !self.slow_done.load(Ordering::Relaxed) && Instant::now() >= slow.at && !self.slow_done.swap(true, Ordering::AcqRel) {
                (slow.hook)();
            }
        }
        if self.passed() {
            Err(self.error())
        } else {
            Ok(())
        }
    }

    /// [`Deadline::check`] on every 64th call (for per-item loops and per-field resolvers).
    ///
    /// # Errors
    /// As [`Deadline::check`].
    pub fn tick(&self) -> Result<(), Error> {
        if self.ticks.fetch_add(1, Ordering::Relaxed).is_multiple_of(TICKS_PER_CHECK) {
            self.check()
        } else {
            Ok(())
        }
    }

    /// The error of a request that must stop: `UNAVAILABLE` when the server shuts down,
    /// `RESPONSE_TOO_LARGE` (with `limit` and `max`, like every limit) when its answer outgrew
    /// its budget, `MEMORY_BUDGET_EXCEEDED` (likewise) when it alone held more than the whole
    /// [`MemoryPool`], `OVERLOADED` (likewise) when the pool had no room for it, else `TIMEOUT`.
    pub fn error(&self) -> Error {
        if let Some(b) = self.too_large().filter(|_| !self.shutting_down()) {
            return crate::limits::LimitError::response_too_large(b.max).into_error();
        }
        if let Some(pool) = self.starved().filter(|_| !self.shutting_down()) {
            let alone = self.budget.get().is_some_and(|b| b.beyond_pool.load(Ordering::Relaxed));
            let error = if alone { crate::limits::LimitError::query_memory } else { crate::limits::LimitError::in_flight_bytes };
            return error(pool.max()).into_error();
        }
        if self.shutting_down() {
            Error::new("the server is shutting down; retry the request").extend_with(|_, e| e.set("code", "UNAVAILABLE"))
        } else {
            let limit = self.limit;
            Error::new(format!("the request exceeded the time limit of {limit:?}")).extend_with(|_, e| e.set("code", "TIMEOUT"))
        }
    }

    /// [`Deadline::error`] as a request-level error: no field is at fault, so it has no
    /// `locations` (GraphQL positions start at 1; none is better than a made-up one).
    pub fn server_error(&self) -> async_graphql::ServerError {
        let mut error = self.error().into_server_error(Default::default());
        error.locations.clear();
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request without a time limit or an answer bound, taking from `pool`.
    fn in_pool(pool: &Arc<MemoryPool>) -> Deadline {
        let d = Deadline::none();
        d.limit_response(usize::MAX, Some(pool.clone()));
        d
    }

    /// The `extensions.code` of `e`.
    fn code(e: &Error) -> Option<async_graphql::Value> {
        e.extensions.as_ref().and_then(|x| x.get("code")).cloned()
    }

    #[test]
    fn stops_when_the_time_is_up_cancelled_or_shutting_down() {
        let none = Deadline::none();
        assert!(none.check().is_ok() && !none.passed());

        let past = Deadline::new(Instant::now() - Duration::from_secs(2), Some(Duration::from_secs(1)), None);
        let e = past.check().unwrap_err();
        assert_eq!(e.extensions.as_ref().and_then(|x| x.get("code")), Some(&async_graphql::Value::from("TIMEOUT")));
        assert!(past.tick().is_err(), "the first tick reads the clock");

        let zero = Deadline::new(Instant::now() - Duration::from_secs(2), Some(Duration::ZERO), None);
        assert!(zero.check().is_ok(), "a zero limit is no limit");

        let d = Deadline::new(Instant::now(), Some(Duration::from_secs(3600)), None);
        assert!(d.check().is_ok());
        d.canceller().store(true, Ordering::Relaxed);
        assert!(d.check().is_err());

        let shutdown = Arc::new(AtomicBool::new(false));
        let d = Deadline::new(Instant::now(), None, Some(shutdown.clone()));
        assert!(d.check().is_ok());
        shutdown.store(true, Ordering::Relaxed);
        let e = d.check().unwrap_err();
        assert_eq!(e.extensions.as_ref().and_then(|x| x.get("code")), Some(&async_graphql::Value::from("UNAVAILABLE")));
    }

    #[test]
    fn requests_in_flight_share_the_memory_pool_beyond_their_free_bytes() {
        let pool = MemoryPool::new(4 * POOL_STEP);
        let small = in_pool(&pool);
        assert!(small.charge(FREE_BYTES).is_ok() && small.hold(0).is_ok());
        assert_eq!(pool.taken(), 0, "within its free bytes a request takes nothing");

        let large = in_pool(&pool);
        assert!(large.charge(FREE_BYTES + 1).is_ok());
        assert_eq!(pool.taken(), POOL_STEP, "taken in steps");
        assert!(large.hold(2 * POOL_STEP).is_ok(), "rows held in memory count too");
        assert_eq!(pool.taken(), 3 * POOL_STEP);

        let other = in_pool(&pool);
        let e = other.charge(FREE_BYTES + 2 * POOL_STEP).unwrap_err();
        assert_eq!(code(&e), Some(async_graphql::Value::from("OVERLOADED")));
        assert_eq!(e.extensions.as_ref().and_then(|x| x.get("limit")), Some(&async_graphql::Value::from("graphql.maxInFlightBytes")));
        assert!(other.passed() && other.clone().check().is_err(), "a starved request stops, with every clone");
        assert_eq!(pool.taken(), 3 * POOL_STEP, "a refused step is not taken");
        assert!(small.charge(1000).is_ok(), "the others go on");
        assert_eq!(pool.taken(), 4 * POOL_STEP, "the pool is full");

        drop(large);
        assert_eq!(pool.taken(), POOL_STEP, "a request's share comes back when its last clone is dropped");
        drop((small, other));
        assert_eq!(pool.taken(), 0);
        let next = in_pool(&pool);
        assert!(next.charge(FREE_BYTES + 4 * POOL_STEP).is_ok(), "the whole pool is free again");
        let e = next.charge(1).unwrap_err();
        assert_eq!(code(&e), Some(async_graphql::Value::from("MEMORY_BUDGET_EXCEEDED")), "more than the whole pool: final");
        assert_eq!(e.extensions.as_ref().and_then(|x| x.get("max")), Some(&async_graphql::Value::from(4 * POOL_STEP as u64)));
        assert!(
            next.passed() && next.clone().check().is_err_and(|e| code(&e) == Some(async_graphql::Value::from("MEMORY_BUDGET_EXCEEDED")))
        );
        drop(next);
        assert_eq!(pool.taken(), 0);
    }

    #[test]
    fn a_stopped_request_points_at_no_place_in_the_query() {
        let d = Deadline::none();
        d.limit_response(10, None);
        assert!(d.charge(11).is_err());
        let error = d.server_error();
        assert_eq!(error.extensions.as_ref().and_then(|x| x.get("code")), Some(&async_graphql::Value::from("RESPONSE_TOO_LARGE")));
        assert!(error.locations.is_empty(), "{error:?}");
        let json = serde_json::to_value(async_graphql::Response::from_errors(vec![error])).unwrap();
        assert!(json["errors"][0].get("locations").is_none(), "{json}");
    }

    #[test]
    fn a_request_alone_beyond_the_whole_pool_is_refused_for_good_whatever_the_others_hold() {
        let pool = MemoryPool::new(4 * POOL_STEP);
        let busy = in_pool(&pool);
        assert!(busy.charge(FREE_BYTES + 4 * POOL_STEP).is_ok());
        let huge = in_pool(&pool);
        let e = huge.hold(FREE_BYTES + 4 * POOL_STEP + 1).unwrap_err();
        assert_eq!(code(&e), Some(async_graphql::Value::from("MEMORY_BUDGET_EXCEEDED")), "not OVERLOADED although the pool is full");
        let fits = in_pool(&pool);
        let e = fits.hold(FREE_BYTES + POOL_STEP).unwrap_err();
        assert_eq!(code(&e), Some(async_graphql::Value::from("OVERLOADED")), "would fit alone: retry later");
        drop(busy);
        assert_eq!(pool.taken(), 0, "nothing was taken for the refused requests");
    }

    #[test]
    fn a_request_takes_the_most_it_holds_at_once_not_the_sum() {
        let pool = MemoryPool::new(2 * POOL_STEP);
        let d = in_pool(&pool);
        for _ in 0..10 {
            let held = d.hold(FREE_BYTES + POOL_STEP).expect("one at a time fits");
            drop(held);
        }
        assert_eq!(pool.taken(), POOL_STEP, "taken once, for the most held at once");
        let mut both = d.hold(2 * POOL_STEP).unwrap();
        both.join(d.hold(FREE_BYTES).unwrap());
        assert_eq!(pool.taken(), 2 * POOL_STEP);
        assert!(d.hold(1).is_err(), "while both are held the pool is full");
        drop(both);
        drop(d);
        assert_eq!(pool.taken(), 0);
    }

    #[test]
    fn an_answer_beyond_its_budget_stops_the_request_and_every_clone() {
        let d = Deadline::none();
        let early = d.clone();
        assert!(d.charge(1 << 30).is_ok(), "no budget: no limit");
        d.limit_response(100, None);
        assert!(d.charge(60).is_ok() && early.charge(40).is_ok());
        assert!(!d.passed());
        let e = early.charge(1).unwrap_err();
        assert_eq!(e.extensions.as_ref().and_then(|x| x.get("code")), Some(&async_graphql::Value::from("RESPONSE_TOO_LARGE")));
        assert_eq!(e.extensions.as_ref().and_then(|x| x.get("max")), Some(&async_graphql::Value::from(100u64)));
        assert!(d.passed() && d.clone().check().is_err(), "a clone made before or after stops too");
    }

    #[test]
    fn the_slow_hook_runs_once_after_its_time() {
        let runs = Arc::new(AtomicU32::new(0));
        let d = Deadline::none();
        let r = runs.clone();
        d.on_slow(Duration::ZERO, move || {
            r.fetch_add(1, Ordering::Relaxed);
        });
        assert!(d.check().is_ok() && d.check().is_ok());
        assert_eq!(runs.load(Ordering::Relaxed), 1);
        assert_eq!(runs.load(Ordering::Relaxed), 1);
        d.clone().check().unwrap();
        assert_eq!(runs.load(Ordering::Relaxed), 1, "a clone has no hook");
        let later = Deadline::none();
        let r = runs.clone();
        later.on_slow(Duration::from_secs(3600), move || {
            r.fetch_add(1, Ordering::Relaxed);
        });
        assert!(later.check().is_ok());
        assert_eq!(runs.load(Ordering::Relaxed), 1, "not yet");
    }
}
