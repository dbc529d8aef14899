//! Where GraphQL requests execute (ARCHITECTURE.md, `control-plane`: queries never take every
//! async worker), so that no query can take every
//! thread that serves HTTP, `/healthz`, `/readyz` and `/metrics`.
//!
//! A request is admitted while fewer than `workers + heavy slots + graphql.queueLength`
//! requests are in flight (else HTTP 503 with `Retry-After`). It then waits for one of the
//! `graphql.workers` **light** permits, is prepared (parsed and measured, see `query::limits`)
//! and, when light, runs right there on its async worker: the server's runtime has more
//! workers than light permits and heavy slots together ([`Executor::worker_threads`]), so two
//! always stay free, and a small query pays no thread hand-off. Heavy work runs on one of the
//! **heavy slots** (half the workers, at least one), so it never takes every core and small
//! queries keep theirs:
//! - a request measured heavy (`query::Prepared::is_heavy`) gives its light permit back and
//!   runs on tokio's blocking pool once it has a heavy slot;
//! - a light request still running after [`LIGHT_BUDGET`] gives its light permit back at its
//!   next deadline check (`query::deadline::Deadline::on_slow`) and waits there for a heavy
//!   slot, having handed its worker's other tasks to another thread (`block_in_place`).
//!
//! A request's deadline (`graphql.requestTimeout`) counts from its arrival, waiting included.
//! A heavy request is answered at its deadline (plus [`GRACE`]) whatever its thread is doing;
//! every request's work stops at its next deadline check, freeing its permit or slot.
//!
//! A light request that waits on something outside the process (a secret lookup,
//! `query::deadline::Deadline::wait_outside`) gives its light permit back while it waits and
//! takes one again after: such a wait uses no thread.

use crate::metrics::Metrics;
use query::deadline::Deadline;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long after its deadline a request is answered at the latest, if its thread has not
/// stopped by then.
pub const GRACE: Duration = Duration::from_millis(50);

/// How long a light request runs on a light permit before it moves to a heavy slot.
pub const LIGHT_BUDGET: Duration = Duration::from_millis(25);

/// Why a request did not get a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Too many requests in flight: HTTP 503 with `Retry-After`.
    Overloaded,
    /// The deadline passed while waiting.
    Deadline,
}

/// Why a job gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// Its deadline plus [`GRACE`] passed first.
    Deadline,
    /// It panicked (a bug; logged).
    Panicked,
}

/// Counting slots taken by blocking threads (heavy work).
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    /// Takes a slot, waiting until `deadline` at most; `None` when it passed first.
    fn take(self: &Arc<Slots>, deadline: Option<Instant>) -> Option<SlotGuard> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = match deadline {
                None => self.freed.wait(free).unwrap_or_else(|e| e.into_inner()),
                Some(at) => {
                    let left = at.checked_duration_since(Instant::now())?;
                    self.freed.wait_timeout(free, left).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
        *free -= 1;
        Some(SlotGuard(self.clone()))
    }
}

struct SlotGuard(Arc<Slots>);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.0.freed.notify_one();
    }
}

/// What one job holds: its light permit, then (when its work turns out heavy) a heavy slot.
struct Hold {
    light: Mutex<Option<OwnedSemaphorePermit>>,
    heavy: Mutex<Option<SlotGuard>>,
    metrics: Metrics,
}

impl Hold {
    /// Gives the light permit back and waits for a heavy slot (until `deadline`).
    fn go_heavy(&self, slots: &Arc<Slots>, deadline: Option<Instant>) -> bool {
        if self.light.lock().unwrap_or_else(|e| e.into_inner()).take().is_some() {
            self.metrics.graphql_executing.with_label_values(&["light"]).dec();
        }
        let queued = self.metrics.graphql_queued.with_label_values(&["heavy"]);
        queued.inc();
        let slot = slots.take(deadline);
        queued.dec();
        let Some(slot) = slot else { return false };
        self.metrics.graphql_executing.with_label_values(&["heavy"]).inc();
        *self.heavy.lock().unwrap_or_else(|e| e.into_inner()) = Some(slot);
        true
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.light.get_mut().unwrap_or_else(|e| e.into_inner()).take().is_some() {
            self.metrics.graphql_executing.with_label_values(&["light"]).dec();
        }
        if self.heavy.get_mut().unwrap_or_else(|e| e.into_inner()).take().is_some() {
            self.metrics.graphql_executing.with_label_values(&["heavy"]).dec();
        }
    }
}

/// A light request's permit around its outside waits ([`query::deadline::OutsideWait`]): given
/// back while it waits (unless it moved to a heavy slot), taken again after.
#[derive(Debug)]
struct LightWait {
    hold: Arc<Hold>,
    light: Arc<Semaphore>,
    deadline: Option<Instant>,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold").finish_non_exhaustive()
    }
}

impl query::deadline::OutsideWait for LightWait {
    fn release(&self) -> bool {
        if self.hold.heavy.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
            return false;
        }
        let released = self.hold.light.lock().unwrap_or_else(|e| e.into_inner()).take().is_some();
        if released {
            self.hold.metrics.graphql_executing.with_label_values(&["light"]).dec();
        }
        released
    }

    fn reacquire(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let wait = self.light.clone().acquire_owned();
            let permit = match self.deadline {
                // Past the deadline the request stops at its next check, without a permit.
                Some(at) => tokio::time::timeout_at(at.into(), wait).await.ok().and_then(Result::ok),
                None => wait.await.ok(),
            };
            if let Some(permit) = permit {
                self.hold.metrics.graphql_executing.with_label_values(&["light"]).inc();
                *self.hold.light.lock().unwrap_or_else(|e| e.into_inner()) = Some(permit);
            }
        })
    }
}

/// Runs `prepared` with `run` on tokio's blocking pool once it has one of the heavy `slots`
/// (before `deadline`; `None` when it passed first).
fn heavy_job<T, F>(
    slots: Arc<Slots>,
    hold: Arc<Hold>,
    in_flight: InFlight,
    deadline: Option<Instant>,
    prepared: query::Prepared,
    run: impl FnOnce(query::Prepared) -> F + Send + 'static,
) -> tokio::task::JoinHandle<Option<T>>
where
    T: Send + 'static,
    F: std::future::Future<Output = T> + Send,
{
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let _in_flight = in_flight;
        if !hold.go_heavy(&slots, deadline) {
            return None;
        }
        let answer = handle.block_on(run(prepared));
        drop(hold);
        // The blocking pool has many threads, each with its own allocator heap: a heavy job
        // hands the pages it freed back before its thread idles, so idle threads do not keep a
        // past job's memory.
        crate::release_free_memory();
        Some(answer)
    })
}

/// One request counted in a `controlplane_graphql_queued` gauge until dropped.
struct Queued(prometheus::IntGauge);

impl Queued {
    fn new(gauge: prometheus::IntGauge) -> Queued {
        gauge.inc();
        Queued(gauge)
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The light permits, the heavy slots, the admission bound and the shutdown flag.
pub struct Executor {
    light: Arc<Semaphore>,
    heavy: Arc<Slots>,
    in_flight: Arc<AtomicUsize>,
    max_in_flight: usize,
    shutdown: Arc<AtomicBool>,
    metrics: Metrics,
}

impl Executor {
    /// `workers` light permits (0 = one per CPU core, at least 2), half as many heavy slots (at
    /// least one), and `queue_length` requests admitted beyond those; requests stop when
    /// `shutdown` is set.
    pub fn new(workers: usize, queue_length: usize, shutdown: Arc<AtomicBool>, metrics: Metrics) -> Executor {
        let workers = Self::light_permits(workers);
        let heavy = (workers / 2).max(1);
        Executor {
            light: Arc::new(Semaphore::new(workers)),
            heavy: Arc::new(Slots { free: Mutex::new(heavy), freed: Condvar::new() }),
            in_flight: Arc::default(),
            max_in_flight: workers + heavy + queue_length,
            shutdown,
            metrics,
        }
    }

    /// A deadline for a request that arrived at `start` with the time limit `limit` (zero =
    /// none), also stopped by the shutdown.
    pub fn deadline(&self, start: Instant, limit: Duration) -> Deadline {
        Deadline::new(start, Some(limit), Some(self.shutdown.clone()))
    }

    /// Whether the server is shutting down.
    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(Ordering::Relaxed)
    }

    /// Prepares with `prepare` and runs with `run` (see the module docs). `prepare` returns the
    /// request, or the answer to send without running anything; `lost` answers a job that gave
    /// none.
    ///
    /// # Errors
    /// [`Refusal`] when the request was not admitted, or its deadline passed while it waited.
    pub async fn execute<T, F>(
        &self,
        deadline: Option<Instant>,
        cancel: Arc<AtomicBool>,
        prepare: impl FnOnce() -> Result<query::Prepared, Box<T>>,
        run: impl FnOnce(query::Prepared) -> F + Send + 'static,
        lost: impl Fn(Lost) -> T,
    ) -> Result<T, Refusal>
    where
        T: Send + 'static,
        F: std::future::Future<Output = T> + Send,
    {
        // The request is abandoned when this future ends or is dropped (its client left): its
        // thread stops at the next deadline check.
        let _cancel_on_drop = CancelOnDrop(cancel);
        if self.in_flight.fetch_add(1, Ordering::AcqRel) >= self.max_in_flight {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Overloaded);
        }
        // Counted until the request's work is done, not only until the answer is sent.
        let in_flight = InFlight(self.in_flight.clone());
        let permit = self.light_permit(deadline).await?;
        self.metrics.graphql_executing.with_label_values(&["light"]).inc();
        let hold = Arc::new(Hold { light: Mutex::new(Some(permit)), heavy: Mutex::new(None), metrics: self.metrics.clone() });
        let prepared = match prepare() {
            Err(answer) => return Ok(*answer),
            Ok(p) => p,
        };
        if !prepared.is_heavy() {
            // Light: run here, on this async worker (no light permit is held by more requests
            // than there are spare workers, see `worker_threads`); past its budget it moves.
            prepared.deadline().on_outside_wait(Arc::new(LightWait { hold: hold.clone(), light: self.light.clone(), deadline }));
            let (h, slots) = (hold.clone(), self.heavy.clone());
            prepared.deadline().on_slow(LIGHT_BUDGET, move || {
                let wait = || {
                    h.go_heavy(&slots, deadline);
                };
                // The wait hands this worker's other tasks to another thread.
                if tokio::runtime::Handle::try_current().is_ok_and(|r| r.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread) {
                    tokio::task::block_in_place(wait);
                } else {
                    wait();
                }
            });
            let started = Instant::now();
            let answer = run(prepared).await;
            drop((hold, in_flight));
            // A request that ran past its light budget may have built large values: this
            // thread's allocator hands their pages back now rather than keeping them.
            if started.elapsed() >= LIGHT_BUDGET {
                crate::release_free_memory();
            }
            return Ok(answer);
        }
        let job = heavy_job(self.heavy.clone(), hold, in_flight, deadline, prepared, run);
        let joined = match deadline {
            Some(at) => match tokio::time::timeout_at((at + GRACE).into(), job).await {
                Ok(j) => j,
                Err(_) => return Ok(lost(Lost::Deadline)),
            },
            None => job.await,
        };
        match joined {
            Ok(Some(answer)) => Ok(answer),
            Ok(None) => Err(Refusal::Deadline),
            Err(e) => {
                tracing::error!(error = %e, "a GraphQL worker job failed");
                Ok(lost(Lost::Panicked))
            }
        }
    }

    /// A light permit: at once when one is free, else queued (counted in
    /// `controlplane_graphql_queued{lane="light"}`) until one is or `deadline` passes.
    async fn light_permit(&self, deadline: Option<Instant>) -> Result<tokio::sync::OwnedSemaphorePermit, Refusal> {
        if let Ok(permit) = self.light.clone().try_acquire_owned() {
            return Ok(permit);
        }
        // Counted while waiting, also when the client leaves meanwhile (this future dropped).
        let _queued = Queued::new(self.metrics.graphql_queued.with_label_values(&["light"]));
        let wait = self.light.clone().acquire_owned();
        let got = match deadline {
            Some(at) => tokio::time::timeout_at(at.into(), wait).await.map_err(|_| Refusal::Deadline),
            None => Ok(wait.await),
        };
        // The semaphore is never closed.
        got?.map_err(|_| Refusal::Overloaded)
    }

    /// The async worker threads the server's runtime needs: one per light permit and heavy
    /// slot (light requests run on the async workers; heavy ones block a worker while they
    /// wait at most) plus two that no query can take (HTTP, `/healthz`, `/readyz`, `/metrics`).
    pub fn worker_threads(workers: usize) -> usize {
        let light = Self::light_permits(workers);
        light + (light / 2).max(1) + 2
    }

    fn light_permits(workers: usize) -> usize {
        if workers == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get()).max(2)
        } else {
            workers
        }
    }
}

struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
