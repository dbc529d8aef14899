//! Where GraphQL requests execute (DESIGN decision 16): never on the async workers, which only
//! move bytes, so `/healthz`, `/readyz`, `/metrics` and every other connection stay served
//! whatever the queries do.
//!
//! A request is prepared (parsed, measured, see `query::limits`) and, when light, executed on a
//! thread of tokio's blocking pool while it holds a permit of the **light** lane (one per
//! worker, `graphql.workers`). A heavy request (`query::Prepared::is_heavy`) hands its light
//! permit back and waits for one of the **heavy** lane (half the workers, at least one), so
//! heavy work never takes every worker and small queries keep theirs. A lane whose
//! `graphql.queueLength` waiting requests are already queued refuses the next with HTTP 503 and
//! `Retry-After`. A request's deadline (`graphql.requestTimeout`) counts from its arrival, also
//! while it waits: it is answered `TIMEOUT` at its deadline (plus [`GRACE`]) whatever its
//! thread is doing, and that thread stops at its next deadline check and frees its permit.

use crate::metrics::Metrics;
use query::deadline::Deadline;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long after its deadline a request is answered at the latest, if its thread has not
/// stopped by then.
pub const GRACE: Duration = Duration::from_millis(50);

/// Why a request did not get a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The lane's queue is full: HTTP 503 with `Retry-After`.
    Overloaded,
    /// The deadline passed while waiting.
    Deadline,
}

/// One lane: permits for running requests and a bounded number of waiting ones.
struct Lane {
    name: &'static str,
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_waiting: usize,
}

impl Lane {
    async fn acquire(&self, deadline: Option<Instant>, metrics: &Metrics) -> Result<OwnedSemaphorePermit, Refusal> {
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            return Ok(p);
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max_waiting {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(Refusal::Overloaded);
        }
        let queued = metrics.graphql_queued.with_label_values(&[self.name]);
        queued.inc();
        let wait = self.permits.clone().acquire_owned();
        let got = match deadline {
            Some(at) => tokio::time::timeout_at(at.into(), wait).await.map_err(|_| Refusal::Deadline),
            None => Ok(wait.await),
        };
        queued.dec();
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        // The semaphore is never closed.
        got?.map_err(|_| Refusal::Overloaded)
    }
}

/// The two lanes and the server-wide shutdown flag.
pub struct Executor {
    light: Lane,
    heavy: Lane,
    shutdown: Arc<AtomicBool>,
    metrics: Metrics,
}

/// What a job on a worker thread produced.
enum Step<T> {
    Done(T),
    Heavy(Box<query::Prepared>),
}

impl Executor {
    /// Lanes for `workers` threads (0 = one per CPU core, at least 2) with `queue_length`
    /// waiting requests each; requests stop when `shutdown` is set.
    pub fn new(workers: usize, queue_length: usize, shutdown: Arc<AtomicBool>, metrics: Metrics) -> Executor {
        let workers = if workers == 0 { std::thread::available_parallelism().map_or(2, |n| n.get()).max(2) } else { workers };
        let lane =
            |name, n: usize| Lane { name, permits: Arc::new(Semaphore::new(n)), waiting: AtomicUsize::new(0), max_waiting: queue_length };
        Executor { light: lane("light", workers), heavy: lane("heavy", (workers / 2).max(1)), shutdown, metrics }
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

    /// Prepares with `prepare` and runs with `run`, on worker threads (see the module docs).
    /// `prepare` returns the request, or the answer to send without running anything.
    ///
    /// # Errors
    /// [`Refusal`] when no worker was free in time.
    pub async fn execute<T: Send + 'static>(
        &self,
        deadline: Option<Instant>,
        cancel: Arc<AtomicBool>,
        prepare: impl FnOnce() -> Result<query::Prepared, Box<T>> + Send + 'static,
        run: impl Fn(query::Prepared) -> T + Send + Sync + 'static,
        lost: impl Fn(Lost) -> T,
    ) -> Result<T, Refusal> {
        // The request is abandoned when this future ends or is dropped (its client left): its
        // thread stops at the next deadline check.
        let _cancel_on_drop = CancelOnDrop(cancel);
        let run = Arc::new(run);
        let permit = self.light.acquire(deadline, &self.metrics).await?;
        let running = self.metrics.graphql_executing.with_label_values(&["light"]);
        let first = {
            let run = run.clone();
            let running = running.clone();
            tokio::task::spawn_blocking(move || {
                running.inc();
                let step = match prepare() {
                    Err(answer) => Step::Done(*answer),
                    Ok(p) if p.is_heavy() => Step::Heavy(Box::new(p)),
                    Ok(p) => Step::Done(run(p)),
                };
                running.dec();
                drop(permit);
                step
            })
        };
        let prepared = match wait(deadline, first).await {
            Err(why) => return Ok(lost(why)),
            Ok(Step::Done(answer)) => return Ok(answer),
            Ok(Step::Heavy(p)) => p,
        };
        let permit = self.heavy.acquire(deadline, &self.metrics).await?;
        let running = self.metrics.graphql_executing.with_label_values(&["heavy"]);
        let second = tokio::task::spawn_blocking(move || {
            running.inc();
            let answer = run(*prepared);
            running.dec();
            drop(permit);
            answer
        });
        Ok(wait(deadline, second).await.unwrap_or_else(lost))
    }
}

/// Why a job gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// Its deadline plus [`GRACE`] passed first.
    Deadline,
    /// It panicked (a bug; logged).
    Panicked,
}

/// The job's result, unless the deadline plus [`GRACE`] passed first or the job panicked.
async fn wait<T>(deadline: Option<Instant>, job: tokio::task::JoinHandle<T>) -> Result<T, Lost> {
    let joined = match deadline {
        Some(at) => tokio::time::timeout_at((at + GRACE).into(), job).await.map_err(|_| Lost::Deadline)?,
        None => job.await,
    };
    joined.map_err(|e| {
        tracing::error!(error = %e, "a GraphQL worker job failed");
        Lost::Panicked
    })
}

struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}
