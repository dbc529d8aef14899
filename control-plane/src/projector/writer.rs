//! The one writer (every change funnels into it, so the store has one write transaction at a
//! time and each commit a new revision): a thread that owns every store write. It drains a channel
//! of [`Change`]s, groups them into one [`storage::WriteBatch`] per at most
//! [`WriterSettings::max_batch`] changes or [`WriterSettings::max_wait`], commits durably, then
//! records outcomes (metrics, readiness, retries).
//!
//! Retries ([`policy`]): a missing parent or an unresolved target is parked and retried after
//! `DEPENDENCY_DELAY + rand[0,1) × DEPENDENCY_DELAY_JITTER`; a newer change of the same object
//! replaces a parked one, and an older one in the same batch is not applied. A change parked for a missing parent is also retried at once when that
//! parent is written (children listed before their parents converge without waiting out the
//! delay). A store error never panics: the batch is retried change by change, and
//! a change that still fails is parked with a growing delay and counted as outcome `error`.
//!
//! **Volume faults** ([`StorageError::is_volume_fault`]: no space left, an I/O error, a
//! read-only volume) are not the change's fault: the writer keeps the batch that failed
//! ([`VolumeFault`]), takes no new change (the sources wait for room in the queue), reopens the
//! store at once (redb refuses every later write of a handle whose write failed, and the reads
//! its cache cannot answer), and tries again as soon as the volume has [`FAULT_SPACE_STEP`] more
//! free than at the failure, else after a backoff of 1 s doubling to 60 s. Nothing is dropped: the batch's readiness items
//! end only once it is committed. Meanwhile the store serves what it holds, and readiness,
//! `extensions.freshness`, `/admin/v1/status` and `controlplane_store_write_failing` say why;
//! the failure is logged once per cause and minute, with a count. A fault ends once writes
//! succeed, the changes queued meanwhile are written and the background steps ran again; one
//! that begins again within a minute of its end goes on (its `since`, backoff and log throttle).

use crate::config::{Clock, ProjectorConfig};
use crate::metrics::{outcome, Metrics};
use crate::projector::handlers::Prepared;
use crate::projector::retry::{self, Wait};
use crate::readiness::{Readiness, Token};
use rand::Rng;
use schema::{Key, KindId, Parent, Scope, Timestamp};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use storage::{Outcome, SourceRef, StorageError, Store, WriteBatch};

/// One change for the writer.
#[derive(Clone)]
pub enum Change {
    /// Write the translated record of `src` at `version`.
    Apply {
        /// The source object.
        src: SourceRef,
        /// Its version (manifests: SHA-256 of the canonical document).
        version: String,
        /// The translated record.
        record: Arc<dyn Prepared>,
        /// Where it came from, for logs (`file.yaml#2`).
        origin: Arc<str>,
        /// Readiness item finished once this change was processed once.
        token: Option<Token>,
        /// The source's current state, applied even when its version is a smaller number than
        /// the stored one (an object of a quorum list: a recreated cluster, an etcd restore);
        /// otherwise (a watch event, a list from the API server's watch cache) a smaller
        /// version is older than the store and not applied ([`older`]).
        authoritative: bool,
    },
    /// Delete the record of `src`.
    Delete {
        /// The source object.
        src: SourceRef,
        /// Where it came from, for logs.
        origin: Arc<str>,
        /// Readiness item.
        token: Option<Token>,
    },
    /// Delete every stored object of `kinds` that is not in `present` (the sweep after a
    /// (re)list: delete events can be lost, a list cannot).
    Sweep {
        /// The kinds the list covered.
        kinds: Vec<KindId>,
        /// The objects the list contained.
        present: Arc<HashSet<SourceRef>>,
        /// A list that may be older than the store (the API server's watch cache): only objects
        /// whose stored version is a number at most this one (the newest version the list
        /// holds) are deleted; the others may have been created after the list was taken and
        /// are kept, and reported. `None`: every object not listed is deleted.
        keep_newer_than: Option<u64>,
        /// Told, once the sweep is committed, the objects it kept (see `keep_newer_than`).
        report: Option<SweepReport>,
        /// Readiness item.
        token: Option<Token>,
    },
    /// Store or remove source checkpoints ([`storage::checkpoint`]), in order with the changes
    /// sent before it and all in the same transaction: what must never be committed apart (a
    /// manifest file's document chunks, identity hashes and header) is one change. Such a change
    /// holds a whole file's checkpoint (about 100 bytes per document): a paced sender may queue
    /// one past [`PACED_QUEUE_BYTES`], as a large record may.
    Checkpoint {
        /// (checkpoint key (`manifests/…`), the encoded checkpoint or `None` to remove it), in
        /// the order they are applied.
        entries: Vec<(String, Option<Arc<[u8]>>)>,
        /// Set once the checkpoints are committed (never, when the writer stops first).
        committed: Option<Committed>,
    },
    /// Seal the source's checkpoints at `key` ([`storage::WriteBatch::seal_checkpoints`]) when
    /// the store's source entries are exactly as the changes sent before it left them: none of
    /// them waits for a retry without its source entry written (a missing parent, a natural key
    /// held by another object, a store error), none was older than the store, and no checkpoint
    /// waits for a retry. Otherwise the seal at `key` is removed. The source sends it after its
    /// checkpoints.
    Seal {
        /// The seal's checkpoint key.
        key: String,
    },
}

impl Change {
    /// A [`Change::Checkpoint`] of one key: `value` stored, or the key removed (`None`).
    pub fn checkpoint(key: String, value: Option<Arc<[u8]>>) -> Change {
        Change::Checkpoint { entries: vec![(key, value)], committed: None }
    }

    fn src(&self) -> Option<&SourceRef> {
        match self {
            Change::Apply { src, .. } | Change::Delete { src, .. } => Some(src),
            Change::Sweep { .. } | Change::Checkpoint { .. } | Change::Seal { .. } => None,
        }
    }

    fn token(&self) -> Option<Token> {
        match self {
            Change::Apply { token, .. } | Change::Delete { token, .. } | Change::Sweep { token, .. } => *token,
            Change::Checkpoint { .. } | Change::Seal { .. } => None,
        }
    }

    /// What the change holds in memory while queued, in bytes, as the queue counts it
    /// ([`PACED_QUEUE_BYTES`]): a record's encoding twice (its decoded form is about as large)
    /// and its document, a checkpoint's values; other changes 0.
    fn queued_bytes(&self) -> usize {
        match self {
            Change::Apply { record, .. } => {
                record.encoded().len().saturating_mul(2).saturating_add(record.document().map_or(0, <[u8]>::len))
            }
            Change::Checkpoint { entries, .. } => entries.iter().map(|(_, value)| value.as_ref().map_or(0, |v| v.len())).sum(),
            Change::Delete { .. } | Change::Sweep { .. } | Change::Seal { .. } => 0,
        }
    }

    fn module(&self) -> &'static str {
        match self {
            Change::Apply { src, .. } | Change::Delete { src, .. } => src.kind.module(),
            Change::Sweep { .. } => "sweep",
            Change::Checkpoint { .. } | Change::Seal { .. } => "checkpoint",
        }
    }
}

/// What a sweep of a list that may be older than the store tells its source
/// ([`Change::Sweep`]`::report`): whether the store is newer than the list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepOutcome {
    /// The objects not listed that it kept (see [`Change::Sweep`]`::keep_newer_than`).
    pub kept: Vec<SourceRef>,
    /// How many listed objects of its kinds, since the previous sweep of them, were not applied
    /// because the store holds a newer version ([`older`]).
    pub outdated: usize,
}

impl SweepOutcome {
    /// Whether the store holds anything newer than the list: then list again with a quorum read.
    pub fn store_is_newer(&self) -> bool {
        !self.kept.is_empty() || self.outdated > 0
    }
}

/// Where a sweep tells its [`SweepOutcome`]. Cheap to clone; told once.
#[derive(Clone, Debug)]
pub struct SweepReport(Arc<std::sync::Mutex<Option<tokio::sync::oneshot::Sender<SweepOutcome>>>>);

impl SweepReport {
    /// A report and the receiver it is told through.
    pub fn new() -> (SweepReport, tokio::sync::oneshot::Receiver<SweepOutcome>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (SweepReport(Arc::new(std::sync::Mutex::new(Some(tx)))), rx)
    }

    fn tell(&self, kept: SweepOutcome) {
        if let Some(tx) = self.0.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(kept);
        }
    }
}

/// Whether the source version `incoming` is older than `stored`: both are numbers (Kubernetes
/// `resourceVersion`s, which the API server issues in increasing order) and `incoming` is the
/// smaller. Versions that are not numbers (the manifests source's SHA-256 hex digests) are never
/// older.
pub fn older(incoming: &str, stored: &str) -> bool {
    matches!((incoming.parse::<u64>(), stored.parse::<u64>()), (Ok(a), Ok(b)) if a < b)
}

/// The writer's acknowledgement of one change: set once the change is committed. Cheap to
/// clone; the sender keeps a clone and asks [`Committed::is_set`].
#[derive(Clone, Debug, Default)]
pub struct Committed(Arc<AtomicBool>);

impl Committed {
    /// Whether the writer has committed the change this came with.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Marks the change committed (the writer, once its batch is durable).
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }
}

enum WriterMessage {
    Change(Change),
    Wake,
    /// Another thread's write failed on the volume (its message): the store's reads fail too
    /// until the writer reopens it, unless it was reopened since ([`Store::write_failed`]).
    Fault(String),
}

/// Changes sent and not yet taken by the writer, and whether the writer has stopped.
#[derive(Default)]
struct Queue {
    depth: AtomicUsize,
    /// The [`Change::queued_bytes`] of the changes queued.
    bytes: AtomicUsize,
    closed: AtomicBool,
    /// Told when the depth falls to [`PACED_QUEUE_DEPTH`] or the bytes to
    /// [`PACED_QUEUE_BYTES`], and when the writer stops ([`ChangeSender::room`]).
    room: tokio::sync::Notify,
}

impl Queue {
    /// Counts one change queued.
    fn queued(&self, c: &Change) {
        self.depth.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(c.queued_bytes(), Ordering::Relaxed);
    }

    /// Counts one change taken by the writer.
    fn taken(&self, c: &Change) {
        let bytes = c.queued_bytes();
        let depth_before = self.depth.fetch_sub(1, Ordering::Relaxed);
        let bytes_before = self.bytes.fetch_sub(bytes, Ordering::Relaxed);
        let bytes_fell = bytes_before > PACED_QUEUE_BYTES && bytes_before - bytes <= PACED_QUEUE_BYTES;
        if depth_before == PACED_QUEUE_DEPTH + 1 || bytes_fell {
            self.room.notify_waiters();
        }
    }

    /// Whether a paced source may queue another change ([`ChangeSender::room`]).
    fn has_room(&self) -> bool {
        let depth = self.depth.load(Ordering::Relaxed);
        let bytes = self.bytes.load(Ordering::Relaxed);
        (depth <= PACED_QUEUE_DEPTH && bytes <= PACED_QUEUE_BYTES) || self.closed.load(Ordering::Relaxed)
    }
}

/// The writer's own maps (object identities and keys, hashed per change): foldhash, not SipHash.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type FastSet<K> = HashSet<K, foldhash::fast::RandomState>;

/// Sends changes to the writer. Cheap to clone.
#[derive(Clone)]
pub struct ChangeSender {
    tx: mpsc::Sender<WriterMessage>,
    queue: Arc<Queue>,
}

/// The queue depth above which [`ChangeSender::send_paced`] waits: two full batches, so the
/// writer never runs dry while a source that reads faster than it writes (a manifests
/// directory of a million objects) does not hold every translated record in the queue.
pub const PACED_QUEUE_DEPTH: usize = 20_000;

/// The [`Change::queued_bytes`] above which [`ChangeSender::send_paced`] waits: 20,000 changes
/// of large documents (a file of `source.maxDocumentBytes` documents) would otherwise queue
/// gigabytes.
pub const PACED_QUEUE_BYTES: usize = 64 << 20;

impl ChangeSender {
    /// Queues a change. Returns `false` when the writer has stopped (the change is dropped).
    pub fn send(&self, c: Change) -> bool {
        self.queue.queued(&c);
        self.tx.send(WriterMessage::Change(c)).is_ok()
    }

    /// Like [`ChangeSender::send`], but first waits (on this thread: for sources with a thread
    /// of their own, never on an async runtime) while more than [`PACED_QUEUE_DEPTH`] changes
    /// or [`PACED_QUEUE_BYTES`] are queued, so the queue's memory stays bounded.
    pub fn send_paced(&self, c: Change) -> bool {
        futures::executor::block_on(self.room());
        self.send(c)
    }

    /// Waits (asynchronously: for sources on an async runtime) until at most
    /// [`PACED_QUEUE_DEPTH`] changes and [`PACED_QUEUE_BYTES`] are queued, or the writer has
    /// stopped: what
    /// [`ChangeSender::send_paced`] does on a thread of its own.
    pub async fn room(&self) {
        loop {
            let told = self.queue.room.notified();
            let mut told = std::pin::pin!(told);
            told.as_mut().enable();
            if self.queue.has_room() {
                return;
            }
            told.await;
        }
    }

    /// Changes queued and not yet taken by the writer.
    pub fn queued(&self) -> usize {
        self.queue.depth.load(Ordering::Relaxed)
    }

    /// What the changes queued hold, in bytes, as the queue counts them ([`PACED_QUEUE_BYTES`]).
    pub fn queued_bytes(&self) -> usize {
        self.queue.bytes.load(Ordering::Relaxed)
    }
}

/// Writer tuning.
#[derive(Clone, Debug)]
pub struct WriterSettings {
    /// Most changes per write transaction (default 10 000). Batches only grow this large when
    /// changes queue up (an initial load); each commit rewrites the B-tree pages its changes
    /// touched and syncs the file, so larger batches write and sync far less per change (P1 at
    /// 100k: 1000 → 10 000 cut the load by about a fifth).
    pub max_batch: usize,
    /// Longest wait for more changes after the first of a batch (default 5 ms).
    pub max_wait: Duration,
    /// Retry timing (`DEPENDENCY_DELAY`, `DEPENDENCY_DELAY_JITTER`).
    pub projector: ProjectorConfig,
    /// Time source for projection times.
    pub clock: Clock,
    /// Whether every ordering index of every kind is built once the initial sync is processed
    /// (`storage.prebuildOrders`, default true); otherwise an order is built when a read first
    /// sorts by it.
    pub prebuild_orders: bool,
    /// Most records one step of an ordering index build reads ([`Store::build_orders_within`];
    /// default 1024): changes wait for one step at most.
    pub order_build_chunk: usize,
    /// Time after which a step reads no more records (default 20 ms; its commit follows).
    pub order_build_time: Duration,
    /// Feature flags: a kind re-derived from the volume (`storage::rebuild`) is translated as
    /// the sources translate it.
    pub features: schema::kind::Features,
    /// Most documents one step of a re-derivation from the volume translates (default 1024;
    /// also at most [`WriterSettings::order_build_time`] of reading): changes wait for one step
    /// at most.
    pub rebuild_chunk: usize,
}

impl WriterSettings {
    /// Defaults with the given projector timing and clock.
    pub fn new(projector: ProjectorConfig, clock: Clock) -> WriterSettings {
        WriterSettings {
            max_batch: 10_000,
            max_wait: Duration::from_millis(5),
            projector,
            clock,
            prebuild_orders: true,
            order_build_chunk: 1024,
            order_build_time: Duration::from_millis(20),
            features: schema::kind::Features::default(),
            rebuild_chunk: 1024,
        }
    }
}

/// The running writer thread.
pub struct Writer {
    tx: mpsc::Sender<WriterMessage>,
    queue: Arc<Queue>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Trains the store's document dictionaries ([`spawn_trainer`]); ends after the writer.
    trainer: Option<JoinHandle<()>>,
}

impl Writer {
    /// Starts the writer thread.
    ///
    /// # Errors
    /// The OS error when the thread cannot be spawned.
    pub fn spawn(store: Store, metrics: Metrics, readiness: Readiness, settings: WriterSettings) -> std::io::Result<Writer> {
        let (tx, rx) = mpsc::channel();
        let (mut state, trainer) = WriterThread::new(store, metrics, readiness, settings, &tx)?;
        let (queue, stop) = (state.queue.clone(), state.stop.clone());
        let thread = std::thread::Builder::new().name("cp-writer".into()).spawn(move || state.run(rx))?;
        Ok(Writer { tx, queue, stop, thread: Some(thread), trainer: Some(trainer) })
    }

    /// A sender for sources.
    pub fn sender(&self) -> ChangeSender {
        ChangeSender { tx: self.tx.clone(), queue: self.queue.clone() }
    }

    /// Stops the writer after the batch in progress is committed; queued and parked changes
    /// are dropped (the source replays them on the next start). Blocks until the thread ends.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    /// Asks the writer to stop after the batch in progress, without waiting: paced senders stop
    /// waiting for room at once (a source that is stopping then sends what it holds and ends,
    /// instead of waiting for the writer to write it). [`Writer::shutdown`] then joins.
    pub fn begin_shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.queue.closed.store(true, Ordering::Relaxed);
        self.queue.room.notify_waiters();
        let _ = self.tx.send(WriterMessage::Wake);
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.tx.send(WriterMessage::Wake);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                tracing::error!("the writer thread panicked");
            }
        }
        // The writer's end dropped the trainer's channel.
        if let Some(t) = self.trainer.take() {
            if t.join().is_err() {
                tracing::error!("the dictionary trainer thread panicked");
            }
        }
    }
}

/// Starts the thread that keeps the store's documents small ([`storage::documents`]): it trains
/// the dictionary of a kind the sources have not trained one for once the store holds enough
/// of its documents (a store written by an earlier build; [`Store::train_dictionaries`], a
/// fraction of a second per kind), then recompresses with each kind's dictionary the kind's
/// documents written before ([`Store::recompress_documents`], one short write
/// transaction at a time, once per dictionary, once the writer's load has ended:
/// [`WriterThread::note_loading`]). Off the writer; woken at its start, after commits and when
/// the load ends (wakes coalesce), it ends once the returned sender is dropped, between two
/// transactions.
fn spawn_trainer(store: Store, writer: mpsc::Sender<WriterMessage>) -> std::io::Result<(mpsc::SyncSender<()>, JoinHandle<()>)> {
    let (tx, rx) = mpsc::sync_channel::<()>(1);
    // A store trained before (or a start cut short) finishes its recompression, once the
    // writer's load has ended.
    let _ = tx.try_send(());
    let thread = std::thread::Builder::new().name("cp-dictionaries".into()).spawn(move || {
        let mut done = DictionaryWork::default();
        // A wake taken while recompressing (a commit meanwhile) runs another round at once.
        while (std::mem::take(&mut done.woken) || rx.recv().is_ok()) && keep_documents_small(&store, &mut done, &rx, &writer) {}
    })?;
    Ok((tx, thread))
}

/// What [`keep_documents_small`] gave up on or finished, in this process.
#[derive(Default)]
struct DictionaryWork {
    /// Kinds whose documents trained no dictionary.
    given_up: std::collections::HashSet<KindId>,
    /// Kinds whose documents written before their dictionary are recompressed.
    recompressed: std::collections::HashSet<KindId>,
    /// Whether a wake arrived during the round (commits whose kinds may now be due).
    woken: bool,
}

/// One round of the dictionary thread ([`spawn_trainer`]): trains the dictionaries due, then
/// recompresses what each kind with a dictionary wrote before it, unless the writer is loading
/// (the round then ends there; the end of the load wakes the next). `false` when the writer
/// ended meanwhile (`rx` disconnected).
fn keep_documents_small(store: &Store, done: &mut DictionaryWork, rx: &mpsc::Receiver<()>, writer: &mpsc::Sender<WriterMessage>) -> bool {
    let fault = |e: &StorageError| {
        let _ = writer.send(WriterMessage::Fault(e.to_string()));
    };
    match store.train_dictionaries(&mut done.given_up) {
        Ok(kinds) if !kinds.is_empty() => {
            tracing::info!(kinds = ?kinds.iter().map(|k| k.name()).collect::<Vec<_>>(), "document dictionaries trained: the documents of these kinds are stored smaller");
        }
        Ok(_) => {}
        // Cut off by a reopen: the next commit wakes this again.
        Err(StorageError::Reopened) => return true,
        // The writer reopens the store and reports the fault; the next commit wakes this again.
        Err(e) if e.is_volume_fault() => {
            fault(&e);
            return true;
        }
        Err(e) => tracing::warn!(error = %e, "training document dictionaries failed; tried again after the next commit"),
    }
    for kind in store.dictionaries().kinds() {
        if done.recompressed.contains(&kind) {
            continue;
        }
        match recompress(store, kind, rx, &mut done.woken) {
            Ok(Pass::Complete) => {}
            // Woken again when the load ends.
            Ok(Pass::Loading) => return true,
            Ok(Pass::WriterEnded) => return false,
            Err(StorageError::Reopened) => return true,
            Err(e) if e.is_volume_fault() => {
                // Tried again once writes succeed: the end of the fault or the next commit wakes this.
                tracing::debug!(kind = kind.name(), error = %e, "recompressing documents failed on the volume; tried again after the next commit");
                fault(&e);
                return true;
            }
            Err(e) => {
                tracing::warn!(kind = kind.name(), error = %e, "recompressing documents failed; they stay as they are until the next start")
            }
        }
        done.recompressed.insert(kind);
    }
    true
}

/// How long the sources may send no change before the writer ends its load although its
/// initial sync is not processed ([`WriterThread::note_loading`]).
pub const LOAD_IDLE: Duration = Duration::from_secs(2);

/// How a recompression pass of [`recompress`] ended.
#[derive(Debug, PartialEq)]
enum Pass {
    /// Every document of the kind written before its dictionary is recompressed.
    Complete,
    /// The writer is loading, and stores the documents compressed alone as they are
    /// ([`Store::set_loading`]): the pass waits for the load's end (the writer wakes this
    /// thread then) and goes on from the kind's first document.
    Loading,
    /// The writer ended (`rx` disconnected).
    WriterEnded,
}

/// Recompresses `kind`'s documents written before its dictionary, a transaction at a time,
/// once the writer's load has ended. A wake taken meanwhile sets `woken`.
fn recompress(store: &Store, kind: KindId, rx: &mpsc::Receiver<()>, woken: &mut bool) -> Result<Pass, storage::StorageError> {
    if store.documents_recompressed(kind)? {
        return Ok(Pass::Complete);
    }
    let started = Instant::now();
    let mut after = None;
    loop {
        match rx.try_recv() {
            Err(mpsc::TryRecvError::Disconnected) => return Ok(Pass::WriterEnded),
            Ok(()) => *woken = true,
            Err(mpsc::TryRecvError::Empty) => {}
        }
        if store.loading() {
            return Ok(Pass::Loading);
        }
        match store.recompress_documents(kind, after.as_deref())? {
            Some(last) => after = Some(last),
            None => break,
        }
    }
    tracing::info!(
        kind = kind.name(),
        seconds = format!("{:.2}", started.elapsed().as_secs_f64()),
        "documents written before the kind's dictionary recompressed with it"
    );
    Ok(Pass::Complete)
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Per change of `batch`, whether a later change of the same object follows in it. Such a change
/// is not applied: the later one decides, and the earlier must not be parked and retried after
/// it (a cold manifests start sends both copies of an object defined twice).
fn superseded(batch: &[QueuedChange]) -> Vec<bool> {
    let mut later: FastSet<&SourceRef> = FastSet::with_capacity_and_hasher(batch.len(), Default::default());
    let mut out: Vec<bool> = batch.iter().rev().map(|w| w.change.src().is_some_and(|src| !later.insert(src))).collect();
    out.reverse();
    out
}

/// Drops from `retries` (changes waiting for a retry after a store error) every checkpoint
/// change that `newer` supersedes: one that writes or removes a key `newer` writes or removes.
/// A retry of an older checkpoint must never land after a newer one of the same key (the header
/// of a file before an edit over the records of after it).
fn drop_superseded_checkpoints(retries: &mut Vec<(Instant, QueuedChange)>, newer: &Change) {
    let Change::Checkpoint { entries, .. } = newer else { return };
    let keys: HashSet<&str> = entries.iter().map(|(key, _)| key.as_str()).collect();
    retries.retain(|(_, w)| match &w.change {
        Change::Checkpoint { entries: older, .. } => !older.iter().any(|(key, _)| keys.contains(key.as_str())),
        _ => true,
    });
}

/// Adds `src`, just handed to the store, to the list of every sweep in `retries` (changes
/// waiting for a retry after a store error) that covers its kind. A sweep judges the store as the
/// changes sent before it left it: retried after `src`'s change, which came after it, it would
/// delete an object its list never had a chance to hold (a file added after the scan the sweep
/// comes from).
fn spare_from_retried_sweeps(retries: &mut [(Instant, QueuedChange)], src: &SourceRef) {
    for (_, w) in retries {
        if let Change::Sweep { kinds, present, .. } = &mut w.change {
            if kinds.contains(&src.kind) && !present.contains(src) {
                // Cloned only if the source kept a handle on the list (none does).
                Arc::make_mut(present).insert(src.clone());
            }
        }
    }
}

/// `work` with a [`Change::Seal`] turned into the removal of the seal's key; other changes as
/// they are.
fn unsealed(work: QueuedChange) -> QueuedChange {
    match work.change {
        Change::Seal { key } => QueuedChange { change: Change::checkpoint(key, None), ..work },
        change => QueuedChange { change, ..work },
    }
}

/// A queued change with its failed attempts.
struct QueuedChange {
    change: Change,
    /// Store errors so far.
    failures: u32,
    /// Retries so far because a parent or link target was missing (see [`backoff`]).
    waits: u32,
}

struct Parked {
    seq: u64,
    work: QueuedChange,
    /// Whether its source entry is written as sent (a record stored without its link target,
    /// retried to link it): such a wait does not break a [`Change::Seal`].
    stored: bool,
}

/// How one change ended, before its side effects are applied: the store's [`Outcome`] of an
/// apply or delete in the same words, and what only the writer knows (superseded, swept,
/// checkpointed). [`ChangeEnd::wait`] is the retry policy, [`ChangeEnd::outcome`] the metrics label.
enum ChangeEnd {
    /// The record was created or changed.
    Written,
    /// Nothing changed (same source version, or the same record and links).
    Unchanged,
    /// Not applied: a later change of the same object follows in the same batch.
    Superseded,
    /// Stored, but its first link is unresolved and the kind asks for a retry.
    Unlinked,
    /// Required parents are missing: nothing was written.
    DependencyMissing(Vec<Parent>),
    /// Another object holds the record's natural key.
    Conflict(SourceRef),
    /// Deleted (the record's kind and natural key), or nothing was stored.
    Deleted(Option<(KindId, Key)>),
    /// Not applied: the store holds a newer version of the object (a list from the API
    /// server's watch cache that is older than the store).
    Outdated,
    /// The objects a sweep deleted, and those it kept as possibly newer than its list.
    Swept {
        gone: Vec<SourceRef>,
        kept: Vec<SourceRef>,
    },
    Checkpointed,
}

impl ChangeEnd {
    /// The retry policy ([`retry`]): whether a change that ended so waits for another attempt.
    /// (A store error, which has no `ChangeEnd`, waits for [`Wait::StoreError`].)
    fn wait(&self) -> Option<Wait> {
        match self {
            ChangeEnd::Unlinked | ChangeEnd::DependencyMissing(_) | ChangeEnd::Conflict(_) => Some(Wait::Dependency),
            ChangeEnd::Written
            | ChangeEnd::Unchanged
            | ChangeEnd::Outdated
            | ChangeEnd::Superseded
            | ChangeEnd::Deleted(_)
            | ChangeEnd::Swept { .. }
            | ChangeEnd::Checkpointed => None,
        }
    }

    /// Whether the change left the object's source entry other than it was sent
    /// ([`Change::Seal`]).
    fn left_source_entry_behind(&self) -> bool {
        matches!(self, ChangeEnd::DependencyMissing(_) | ChangeEnd::Conflict(_) | ChangeEnd::Outdated)
    }

    /// The `projector_reconcile_total` outcome label ([`outcome`]) the change is counted under;
    /// `None` for what is not one object's change (a sweep counts each object it deletes, a
    /// checkpoint nothing).
    fn outcome(&self) -> Option<&'static str> {
        match self {
            ChangeEnd::Written | ChangeEnd::Unchanged | ChangeEnd::Outdated | ChangeEnd::Superseded => Some(outcome::SUCCESS),
            ChangeEnd::Unlinked | ChangeEnd::DependencyMissing(_) | ChangeEnd::Conflict(_) => Some(outcome::DEPENDENCY_MISSING),
            ChangeEnd::Deleted(_) => Some(outcome::DELETE_SUCCESS),
            ChangeEnd::Swept { .. } | ChangeEnd::Checkpointed => None,
        }
    }
}

struct WriterThread {
    queue: Arc<Queue>,
    store: Store,
    metrics: Metrics,
    readiness: Readiness,
    settings: WriterSettings,
    stop: Arc<AtomicBool>,
    parked: FastMap<SourceRef, Parked>,
    due: BinaryHeap<Reverse<(Instant, u64, SourceRef)>>,
    seq: u64,
    /// Objects whose missing dependency was already logged at info.
    reported: FastSet<SourceRef>,
    /// Missing parent (kind, natural key) → parked objects waiting for it. May hold objects
    /// that are no longer parked (checked when woken; pruned when it outgrows `parked`).
    waiting: FastMap<(KindId, Key), FastSet<SourceRef>>,
    /// Sweeps waiting for a retry after a store error.
    sweeps: Vec<(Instant, QueuedChange)>,
    kinds: Vec<KindId>,
    /// The release thread's queue ([`WriterThread::release`]).
    release: mpsc::Sender<Vec<QueuedChange>>,
    /// `projector_reconcile_*` by (module, outcome), looked up once each.
    reconcile: FastMap<(&'static str, &'static str), (prometheus::IntCounter, prometheus::Histogram)>,
    /// After a failed build of ordering indexes, no new try before this instant (reads keep
    /// sorting in memory meanwhile).
    orders_retry_at: Option<Instant>,
    /// When the next step of pruning the change log is due ([`Store::prune_history`]).
    history_prune_at: Instant,
    /// Whether revisions may wait for their index entries ([`Store::index_history`]): a load's
    /// batches leave them until the initial sync is processed.
    history_unindexed: bool,
    /// Whether the store has kinds to re-derive ([`Store::rederiving`]) whose re-derivation
    /// this writer has not ended yet.
    rederiving: bool,
    /// Ordering indexes built since the last time none was left to build (for the log).
    orders_built: usize,
    /// Whether the store records this run's initial sync as complete ([`Store::mark_synced`]).
    synced_marked: bool,
    /// Translates the documents of a kind re-derived from the volume.
    handlers: crate::projector::handlers::Handlers,
    /// After a failed step of a re-derivation from the volume, no new try before this instant.
    rebuild_retry_at: Option<Instant>,
    /// When this process began the re-derivation in progress, and the documents it translated.
    rebuild_started: Option<(Instant, usize)>,
    /// Whether source documents are being filled in ([`Store::filling_documents`]): an object
    /// handed over unchanged leaves its document.
    filling_documents: bool,
    /// Per kind, the changes not applied since its last sweep because the store held a newer
    /// version ([`ChangeEnd::Outdated`]), for that sweep's report.
    outdated: FastMap<KindId, usize>,
    /// Wakes the dictionary trainer ([`spawn_trainer`]) after a commit, and when the load ends
    /// ([`WriterThread::note_loading`]).
    train: mpsc::SyncSender<()>,
    /// How long the writer has waited for a change since its last (its loop's waits added up):
    /// a load whose sources fall silent for [`LOAD_IDLE`] ends ([`WriterThread::note_loading`]).
    idle: Duration,
    /// While store writes fail on the volume: the batch held and the retry schedule.
    fault: Option<VolumeFault>,
    /// Store errors, logged once per cause and [`FAILURE_LOG_INTERVAL`].
    failure_log: storage::throttle::LogThrottle,
    /// After a volume fault, writes succeed again: when the fault began and the tries it took,
    /// until the queue is empty ([`WriterThread::end_recovery`]).
    recovering: Option<Recovering>,
    /// The last volume fault's end, for [`FAILURE_LOG_INTERVAL`]: a fault that begins again
    /// meanwhile goes on ([`WriterThread::enter_fault`]).
    ended_fault: Option<(Instant, Recovering)>,
    /// A batch was written since the writer last went idle: its freed memory is handed back
    /// to the system when it does ([`crate::release_free_memory`]).
    wrote_since_idle: bool,
}

/// The wait after a failed build of ordering indexes before the next try.
const ORDERS_RETRY: Duration = Duration::from_secs(60);

/// Entries one step of pruning the change log removes at most ([`Store::prune_history`]).
const HISTORY_PRUNE_CHUNK: usize = 2048;

/// Entries of the change log one step of [`Store::index_history`] indexes, about (whole commits).
const HISTORY_INDEX_CHUNK: usize = 16_384;

/// How often the writer looks for changes beyond the log's bounds when none were left.
const HISTORY_PRUNE_EVERY: Duration = Duration::from_secs(1);

/// How many more free bytes than at the last failure count as "space is freed": the held
/// changes are tried at once, not after the backoff.
pub const FAULT_SPACE_STEP: u64 = 1 << 20;

/// The free space below which the idle writer does not release redb's write buffer
/// ([`Store::release_write_buffer`]): that buffer holds at most half of redb's page cache (64 MiB
/// by default), and on a nearly full volume a write that nothing waits for is not worth a fault.
const RELEASE_MIN_FREE: u64 = 64 << 20;

/// How often the writer looks at the volume's free space while its writes fail.
const FAULT_POLL: Duration = Duration::from_millis(200);

/// How long a reopen of the store waits for the reads of the closed database to end.
const REOPEN_READERS_WAIT: Duration = Duration::from_secs(5);

/// Writes succeed again after a volume fault, and the changes queued meanwhile are written.
struct Recovering {
    since: Instant,
    since_at: String,
    attempts: u32,
}

/// The wait after a volume fault's `attempts`-th failed try before the next: 1 s doubling to
/// 60 s ([`Wait::StoreError`]).
fn fault_backoff(attempts: u32, projector: &ProjectorConfig) -> Duration {
    retry::delay(Wait::StoreError, attempts.saturating_sub(1), projector, 0.0)
}

/// How often the same failure is logged again (with the count since).
const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Store writes failing on the volume (see the module docs): the batch kept for the next try,
/// and what readiness and the log say.
struct VolumeFault {
    /// The last failure's message, e.g. `No space left on device (os error 28)`.
    cause: String,
    /// When writes began to fail.
    since: Instant,
    /// When writes began to fail (RFC 3339, wall clock).
    since_at: String,
    /// Failed tries since `since`.
    attempts: u32,
    /// When the backoff allows the next try.
    next_try: Instant,
    /// Free bytes of the volume at the last failure.
    free_then: u64,
    /// The changes of the batch that failed, tried first.
    held: Vec<QueuedChange>,
}

/// Starts the thread that frees the writer's finished changes; it ends when the writer drops
/// the sender.
fn spawn_release() -> std::io::Result<mpsc::Sender<Vec<QueuedChange>>> {
    let (tx, rx) = mpsc::channel::<Vec<QueuedChange>>();
    std::thread::Builder::new().name("cp-writer-free".into()).spawn(move || rx.into_iter().for_each(drop))?;
    Ok(tx)
}

impl Drop for WriterThread {
    /// However the thread ends (stop, disconnect, panic), paced senders stop waiting.
    fn drop(&mut self) {
        self.queue.closed.store(true, Ordering::Relaxed);
        self.queue.room.notify_waiters();
    }
}

impl WriterThread {
    /// The writer's state on `store`, before its thread runs, with the dictionary thread it
    /// wakes (started); `tx` is the writer's own channel (the store's order requests and the
    /// dictionary thread's volume faults come through it).
    fn new(
        store: Store,
        metrics: Metrics,
        readiness: Readiness,
        settings: WriterSettings,
        tx: &mpsc::Sender<WriterMessage>,
    ) -> std::io::Result<(WriterThread, JoinHandle<()>)> {
        let waker = tx.clone();
        store.on_order_wanted(move || {
            let _ = waker.send(WriterMessage::Wake);
        });
        let stop = Arc::new(AtomicBool::new(false));
        let queue = Arc::new(Queue::default());
        let rederiving = !store.rederiving().is_empty();
        // Used to translate stored documents again (`Handlers::rederive`), which keeps no
        // document: not the store's dictionaries, which would take them as samples.
        let handlers = crate::projector::handlers::Handlers::new(&settings.features);
        // Before the dictionary thread starts: it recompresses nothing while the writer loads.
        store.set_loading(!readiness.synced());
        let (train, trainer) = spawn_trainer(store.clone(), tx.clone())?;
        let filling_documents = store.filling_documents();
        if settings.prebuild_orders {
            // Asked for now, built once the initial sync is processed: `orders_pending` is true
            // from the start until every order is built.
            store.want_every_order();
        }
        match store.order_builds_left() {
            Ok(left) => metrics.order_builds_left.set(left as i64),
            Err(e) => tracing::warn!(error = %e, "cannot count the ordering indexes left to build"),
        }
        let state = WriterThread {
            queue,
            store,
            metrics,
            readiness,
            settings,
            stop,
            parked: FastMap::default(),
            due: BinaryHeap::new(),
            seq: 0,
            reported: FastSet::default(),
            waiting: FastMap::default(),
            sweeps: Vec::new(),
            kinds: schema::registry::registered(),
            release: spawn_release()?,
            reconcile: FastMap::default(),
            orders_retry_at: None,
            history_prune_at: Instant::now(),
            history_unindexed: true,
            rederiving,
            orders_built: 0,
            synced_marked: false,
            handlers,
            rebuild_retry_at: None,
            rebuild_started: None,
            filling_documents,
            outdated: FastMap::default(),
            train,
            idle: Duration::ZERO,
            fault: None,
            failure_log: storage::throttle::LogThrottle::new(FAILURE_LOG_INTERVAL),
            recovering: None,
            ended_fault: None,
            wrote_since_idle: false,
        };
        Ok((state, trainer))
    }

    fn run(&mut self, rx: mpsc::Receiver<WriterMessage>) {
        self.update_counts();
        let mut batch: Vec<QueuedChange> = Vec::new();
        loop {
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            if self.fault.is_some() {
                self.ride_out_fault();
                continue;
            }
            if self.rederiving && self.readiness.synced() {
                self.finish_rederivation();
            }
            if !self.synced_marked && !self.rederiving && self.readiness.synced() {
                self.mark_synced();
            }
            self.note_loading();
            let wait = self.background_steps();
            if !self.takes_changes_after_steps(&batch) {
                continue;
            }
            if !wait.is_zero() && self.queue.depth.load(Ordering::Relaxed) == 0 {
                self.release_write_buffer();
                // The allocator keeps the pages a batch freed for this thread's next batch;
                // idle, it hands them back (a change a second must not hold a load's worth).
                if std::mem::take(&mut self.wrote_since_idle) {
                    crate::release_free_memory();
                }
            }
            let waiting = Instant::now();
            let received = rx.recv_timeout(wait);
            match &received {
                Ok(WriterMessage::Change(_)) => self.idle = Duration::ZERO,
                _ => self.idle += waiting.elapsed(),
            }
            match received {
                Ok(WriterMessage::Change(c)) => {
                    self.queue.taken(&c);
                    self.accept(c, &mut batch)
                }
                Ok(WriterMessage::Wake) => continue,
                Ok(WriterMessage::Fault(cause)) => {
                    self.fault_told(cause);
                    continue;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.take_due(&mut batch);
            if batch.is_empty() {
                continue;
            }
            let deadline = Instant::now() + self.settings.max_wait;
            while batch.len() < self.settings.max_batch {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match rx.recv_timeout(left) {
                    Ok(WriterMessage::Change(c)) => {
                        self.queue.taken(&c);
                        self.accept(c, &mut batch)
                    }
                    // A fault told by another thread: this batch's commit meets it.
                    Ok(WriterMessage::Wake) | Ok(WriterMessage::Fault(_)) | Err(_) => break,
                }
            }
            self.process(std::mem::take(&mut batch));
            self.wrote_since_idle = true;
        }
        tracing::debug!(parked = self.parked.len(), "writer stopped");
    }

    /// After the background steps: whether the writer takes changes now. Not while a step
    /// failed on the volume, until the fault's retry (a small commit now would end the fault,
    /// and the next step would fail again at once). Ends a recovery once nothing is queued and
    /// the steps ran again without a fault: on a volume with room for small writes only, a
    /// build or an index step fails again.
    fn takes_changes_after_steps(&mut self, batch: &[QueuedChange]) -> bool {
        if self.fault.is_some() {
            return false;
        }
        if self.recovering.is_some() && batch.is_empty() && self.queue.depth.load(Ordering::Relaxed) == 0 {
            self.end_recovery();
        }
        true
    }

    /// One step of each background job that is due between two batches: the re-derivation of
    /// a kind from the volume, the ordering index builds, pruning the change log. Returns how
    /// long to wait for changes: while a job has steps left, only for changes that are already
    /// there (a change waits for one step at most).
    fn background_steps(&mut self) -> Duration {
        // Re-derivations from the volume need no source: they run from the start.
        let rebuilding = !self.store.rebuilding().is_empty() && self.rebuild_retry_at.is_none_or(|at| Instant::now() >= at);
        if rebuilding {
            self.rebuild_step();
        }
        // A step that failed on the volume ends the pass: the next would fail too, and count
        // another try of the fault (skipping a step of its backoff).
        if self.fault.is_some() {
            return Duration::ZERO;
        }
        // Builds wait for the initial sync: the load goes first (reads sort in memory
        // meanwhile).
        let building = self.store.orders_pending() && self.readiness.synced() && self.orders_retry_at.is_none_or(|at| Instant::now() >= at);
        if building {
            self.build_orders();
        }
        if self.fault.is_none() && Instant::now() >= self.history_prune_at {
            self.prune_history();
        }
        let indexing = self.fault.is_none() && self.history_unindexed && self.readiness.synced();
        if indexing {
            self.index_history();
        }
        if (building && self.store.orders_pending())
            || (rebuilding && !self.store.rebuilding().is_empty())
            || (indexing && self.history_unindexed)
        {
            return Duration::ZERO;
        }
        let due = self.next_due().map_or(self.history_prune_at, |d| d.min(self.history_prune_at));
        due.saturating_duration_since(Instant::now()).min(Duration::from_secs(1))
    }

    /// Ends the re-derivation of kinds whose derivation version changed
    /// ([`Store::finish_rederivation`]) once the initial sync is processed: every object of
    /// theirs has been read again. After a failure, the next loop tries again.
    fn finish_rederivation(&mut self) {
        match self.store.finish_rederivation(self.settings.clock.now()) {
            Ok(done) => {
                self.rederiving = false;
                if let Some(d) = done {
                    let kinds: Vec<&str> = d.kinds.iter().map(|k| k.name()).collect();
                    tracing::info!(kinds = ?kinds, relinked = d.relinked, ms = (d.seconds * 1e3) as u64, "re-derivation ended");
                    self.update_counts();
                    self.metrics.notify_waiters();
                }
            }
            Err(e) if e.is_volume_fault() => self.enter_fault(&e, Vec::new(), true),
            Err(e) => tracing::warn!(error = %e, "ending the re-derivation failed; trying again"),
        }
    }

    /// One step of the re-derivation of a kind from the volume ([`Store::rebuild_step`]: at most
    /// [`WriterSettings::rebuild_chunk`] documents and [`WriterSettings::order_build_time`]);
    /// once every document is translated, the switch ([`Store::switch_rebuilt`], one commit).
    /// After a failure, the next try waits [`ORDERS_RETRY`] (the kind keeps its records).
    fn rebuild_step(&mut self) {
        self.rebuild_retry_at = None;
        let ctx = schema::kind::Context { now: self.settings.clock.now(), features: self.settings.features };
        let handlers = &self.handlers;
        let mut translate = |kind: KindId, json: &[u8]| handlers.rederive(kind, json, &ctx);
        let step = match self.store.rebuild_step(self.settings.rebuild_chunk, self.settings.order_build_time, &mut translate) {
            Ok(Some(step)) => step,
            Ok(None) => return,
            Err(e) => return self.rebuild_failed(&e),
        };
        let (began, documents) = self.rebuild_started.get_or_insert_with(|| (Instant::now(), 0));
        *documents += step.documents;
        let (began, documents) = (*began, *documents);
        if !step.complete {
            return;
        }
        match self.store.switch_rebuilt(self.settings.clock.now()) {
            Ok(s) => {
                self.rebuild_started = None;
                tracing::info!(
                    kind = s.kind.map(|k| k.name()).unwrap_or_default(),
                    documents,
                    written = s.written,
                    deleted = s.deleted,
                    kept = s.kept,
                    seconds = format!("{:.3}", began.elapsed().as_secs_f64()),
                    "re-derived from the stored source documents; switched to the new derivation"
                );
                self.update_counts();
                self.metrics.notify_waiters();
            }
            Err(e) => self.rebuild_failed(&e),
        }
    }

    fn rebuild_failed(&mut self, e: &StorageError) {
        if e.is_volume_fault() {
            return self.enter_fault(e, Vec::new(), true);
        }
        self.rebuild_retry_at = Some(Instant::now() + ORDERS_RETRY);
        let served = self.store.rebuilding().first().is_some_and(|(_, served)| *served);
        let meanwhile = if served { "its previous records are served meanwhile" } else { "it answers UNAVAILABLE meanwhile" };
        tracing::warn!(error = %e, retry_in_s = ORDERS_RETRY.as_secs(), "re-deriving a kind from the stored source documents failed; {meanwhile}");
    }

    /// Ends the store's load ([`Store::set_loading`], said when this thread started) once this
    /// run's initial sync is processed, or once the sources have sent no change for
    /// [`LOAD_IDLE`] before it is (a kube kind whose list never succeeds keeps the sync pending
    /// for good; the writer then writes as after a load). A load ends once per run. Wakes the
    /// dictionary thread then: the load's documents compressed alone wait for that wake, and
    /// no commit may come after it to wake the thread.
    fn note_loading(&mut self) {
        if self.store.loading() && (self.readiness.synced() || self.idle >= LOAD_IDLE) {
            // Said before the wake, so the woken thread sees the load ended.
            self.store.set_loading(false);
            let _ = self.train.try_send(());
        }
    }

    /// Records in the store that the initial sync of its source completed (the next start with
    /// that source is warm, `storage::sync`). After a failure, the next loop tries again.
    fn mark_synced(&mut self) {
        if self.filling_documents {
            match self.store.complete_documents() {
                Ok(true) => {
                    self.filling_documents = false;
                    tracing::info!("every object's source document is stored: later upgrades re-derive from the volume")
                }
                Ok(false) => tracing::info!("some objects still lack their source document; they are filled in as they change"),
                Err(e) => tracing::warn!(error = %e, "checking the source documents failed"),
            }
        }
        match self.store.mark_synced() {
            Ok(()) => self.synced_marked = true,
            Err(e) if e.is_volume_fault() => self.enter_fault(&e, Vec::new(), true),
            Err(e) => tracing::warn!(error = %e, "recording the completed initial sync failed; trying again"),
        }
    }

    /// One step of pruning the change log ([`Store::prune_history`]: at most
    /// [`HISTORY_PRUNE_CHUNK`] entries, one commit); the next is due at once while entries beyond
    /// the bounds remain, else after [`HISTORY_PRUNE_EVERY`].
    fn prune_history(&mut self) {
        self.history_prune_at = Instant::now() + HISTORY_PRUNE_EVERY;
        match self.store.prune_history(self.settings.clock.now(), HISTORY_PRUNE_CHUNK) {
            Ok(pruned) => {
                if pruned.more {
                    self.history_prune_at = Instant::now();
                }
                if pruned.entries > 0 {
                    tracing::debug!(entries = pruned.entries, more = pruned.more, "change log pruned");
                    self.update_counts();
                }
            }
            Err(e) if e.is_volume_fault() => self.enter_fault(&e, Vec::new(), true),
            Err(e) => tracing::warn!(error = %e, retry_in_s = HISTORY_PRUNE_EVERY.as_secs(), "pruning the change log failed"),
        }
    }

    /// With nothing left to do: redb's buffered pages written out ([`Store::release_write_buffer`],
    /// which keeps reads that miss its cache fast), once after any writes, unless the volume has
    /// less than [`RELEASE_MIN_FREE`] free.
    fn release_write_buffer(&mut self) {
        if self.store.available_space().is_ok_and(|free| free < RELEASE_MIN_FREE) {
            return;
        }
        match self.store.release_write_buffer() {
            Ok(_) => {}
            Err(e) if e.is_volume_fault() => self.enter_fault(&e, Vec::new(), true),
            Err(e) => tracing::warn!(error = %e, "writing out redb's buffered pages failed; the next idle writer tries again"),
        }
    }

    /// One step of indexing the revisions a load left unindexed ([`Store::index_history`]: about
    /// [`HISTORY_INDEX_CHUNK`] entries, one commit). After a failure no step follows: the next
    /// batch that is no load's indexes them first (reads find them meanwhile).
    fn index_history(&mut self) {
        let started = Instant::now();
        match self.store.index_history(HISTORY_INDEX_CHUNK) {
            Ok(more) => {
                self.history_unindexed = more;
                tracing::debug!(ms = started.elapsed().as_millis() as u64, more, "change log indexed");
            }
            Err(e) if e.is_volume_fault() => self.enter_fault(&e, Vec::new(), true),
            Err(e) => {
                self.history_unindexed = false;
                tracing::warn!(error = %e, "indexing the change log failed; the next batch indexes it");
            }
        }
    }

    /// One step of the ordering index builds asked for ([`Store::build_orders_within`], at
    /// most [`WriterSettings::order_build_chunk`] records and
    /// [`WriterSettings::order_build_time`]), between two batches. After a failure,
    /// the next try waits [`ORDERS_RETRY`].
    fn build_orders(&mut self) {
        self.orders_retry_at = None;
        let started = Instant::now();
        match self.store.build_orders_within(self.settings.order_build_chunk, self.settings.order_build_time) {
            Ok(step) => {
                self.metrics.order_build_step_seconds.observe(started.elapsed().as_secs_f64());
                self.metrics.order_builds_left.set(step.left as i64);
                for (kind, order) in &step.started {
                    tracing::debug!(kind = kind.name(), ?order, "building an ordering index");
                }
                for b in &step.built {
                    let ms = (b.seconds * 1e3) as u64;
                    tracing::debug!(kind = b.kind.name(), order = ?b.order, entries = b.entries, ms, "ordering index built");
                }
                self.orders_built += step.built.len();
                if !step.built.is_empty() {
                    self.metrics.notify_waiters();
                }
                if !step.pending && self.orders_built > 0 {
                    tracing::info!(orders = self.orders_built, "ordering indexes built; none left to build");
                    self.orders_built = 0;
                }
            }
            Err(e) if e.is_volume_fault() => self.enter_fault(&e, Vec::new(), true),
            Err(e) => {
                self.orders_retry_at = Some(Instant::now() + ORDERS_RETRY);
                tracing::warn!(error = %e, retry_in_s = ORDERS_RETRY.as_secs(), "building ordering indexes failed; reads sort in memory meanwhile");
            }
        }
    }

    /// Takes a new change: it supersedes a parked retry of the same object, and a checkpoint
    /// the retries of earlier checkpoints of its keys ([`drop_superseded_checkpoints`]); an
    /// apply is spared by the sweeps waiting for a retry ([`spare_from_retried_sweeps`]). A sweep
    /// also drops every retry (parked, or queued earlier in this batch) of an object of its kinds
    /// that is not in its list: that object is gone, and a retry must not bring it back.
    fn accept(&mut self, c: Change, batch: &mut Vec<QueuedChange>) {
        if let Some(src) = c.src().filter(|_| !self.parked.is_empty()) {
            self.parked.remove(src);
        }
        if !self.sweeps.is_empty() {
            drop_superseded_checkpoints(&mut self.sweeps, &c);
            // Taken after a sweep waiting for its retry: the sweep, appended to the batch after
            // it when due, must not delete it.
            if let Change::Apply { src, .. } = &c {
                spare_from_retried_sweeps(&mut self.sweeps, src);
            }
        }
        if let Change::Sweep { kinds, present, .. } = &c {
            let gone = |src: &SourceRef| kinds.contains(&src.kind) && !present.contains(src);
            self.parked.retain(|src, _| !gone(src));
            self.reported.retain(|src| !gone(src));
            let readiness = &self.readiness;
            batch.retain(|w| match &w.change {
                Change::Apply { src, token, .. } if gone(src) => {
                    if let Some(t) = token {
                        readiness.done(*t);
                    }
                    false
                }
                _ => true,
            });
        }
        batch.push(QueuedChange { change: c, failures: 0, waits: 0 });
    }

    fn next_due(&mut self) -> Option<Instant> {
        let sweep = self.sweeps.iter().map(|(at, _)| *at).min();
        while let Some(Reverse((at, seq, src))) = self.due.peek() {
            if self.parked.get(src).is_some_and(|p| p.seq == *seq) {
                return Some(sweep.map_or(*at, |s| s.min(*at)));
            }
            self.due.pop();
        }
        sweep
    }

    fn take_due(&mut self, batch: &mut Vec<QueuedChange>) {
        let now = Instant::now();
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.sweeps).into_iter().partition(|(at, _)| *at <= now);
        self.sweeps = waiting;
        batch.extend(ready.into_iter().map(|(_, w)| w));
        while let Some(Reverse((at, _, _))) = self.due.peek() {
            if *at > now || batch.len() >= self.settings.max_batch {
                break;
            }
            let Some(Reverse((_, seq, src))) = self.due.pop() else { break };
            if self.parked.get(&src).is_some_and(|p| p.seq == seq) {
                if let Some(p) = self.parked.remove(&src) {
                    batch.push(p.work);
                }
            }
        }
    }

    /// Retries at once the parked objects waiting for the record `parent`, just written.
    fn wake(&mut self, parent: (KindId, Key)) {
        let Some(waiting) = self.waiting.remove(&parent) else { return };
        let now = Instant::now();
        for src in waiting {
            if let Some(p) = self.parked.get_mut(&src) {
                self.seq += 1;
                p.seq = self.seq;
                self.due.push(Reverse((now, self.seq, src)));
            }
        }
        if self.waiting.len() > 2 * self.parked.len() + 1024 {
            let parked = &self.parked;
            self.waiting.retain(|_, srcs| {
                srcs.retain(|s| parked.contains_key(s));
                !srcs.is_empty()
            });
        }
    }

    fn park(&mut self, work: QueuedChange, delay: Duration, stored: bool) {
        let Some(src) = work.change.src().cloned() else { return };
        self.seq += 1;
        let at = Instant::now() + delay;
        self.due.push(Reverse((at, self.seq, src.clone())));
        self.parked.insert(src, Parked { seq: self.seq, work, stored });
        self.metrics.set_retries_pending(self.parked.len());
    }

    /// The wait before `work`'s next attempt ([`retry::delay`]), counting this wait.
    fn retry_delay(&self, work: &mut QueuedChange, why: Wait) -> Duration {
        let earlier = match why {
            Wait::Dependency => &mut work.waits,
            Wait::StoreError => &mut work.failures,
        };
        let delay = retry::delay(why, *earlier, &self.settings.projector, rand::rng().random::<f64>());
        *earlier = earlier.saturating_add(1);
        delay
    }

    /// Applies a batch in one transaction; on a store error, change by change.
    fn process(&mut self, batch: Vec<QueuedChange>) {
        let now = self.settings.clock.now();
        match self.attempt(&batch, now) {
            Ok(done) => {
                let mut finished = Vec::with_capacity(batch.len());
                for (work, (d, secs)) in batch.into_iter().zip(done) {
                    finished.extend(self.finish(work, d, secs));
                }
                self.release(finished);
            }
            Err(e) if e.is_volume_fault() => self.enter_fault(&e, batch, true),
            Err(e) if batch.len() > 1 => {
                tracing::error!(error = %e, changes = batch.len(), "store write failed; retrying the batch change by change");
                let superseded = superseded(&batch);
                for (work, superseded) in batch.into_iter().zip(superseded) {
                    if superseded {
                        drop(self.finish(work, ChangeEnd::Superseded, 0.0));
                    } else {
                        // Change by change, a change after the seal may fail after it is
                        // committed: the seal is removed instead.
                        self.process_one(unsealed(work), now);
                    }
                }
            }
            Err(e) => self.failed(batch.into_iter().next().expect("batch of one"), &e),
        }
        // Lowered only here: a change taken out of `parked` for its retry counts until then.
        self.metrics.set_retries_pending(self.parked.len());
    }

    fn process_one(&mut self, work: QueuedChange, now: Timestamp) {
        match self.attempt(std::slice::from_ref(&work), now) {
            Ok(mut done) => {
                let (d, secs) = done.pop().expect("one outcome per change");
                drop(self.finish(work, d, secs));
            }
            Err(e) => self.failed(work, &e),
        }
    }

    fn failed(&mut self, mut work: QueuedChange, e: &StorageError) {
        let delay = self.retry_delay(&mut work, Wait::StoreError);
        let what = match work.change.src() {
            Some(s) => s.to_string(),
            None => work.change.module().to_string(),
        };
        let cause = e.to_string();
        if let Some(since) = self.failure_log.admit(&cause) {
            tracing::error!(error = %cause, object = %what, retry_in = ?delay, failures_since_last_line = since, "store write failed; will retry");
        }
        self.reconciled(work.change.module(), outcome::ERROR, 0.0);
        // A change the volume could not take is not processed: readiness waits for its retry.
        if let Some(t) = work.change.token().filter(|_| !e.is_volume_fault()) {
            self.readiness.done(t);
        }
        if work.change.src().is_some() {
            self.park(work, delay, false);
        } else {
            // A sweep or a checkpoint has no object identity to park under. A seal is retried as
            // its removal: committed later, out of order with the changes it vouches for, it
            // would vouch for changes it never saw.
            self.sweeps.push((Instant::now() + delay, unsealed(work)));
        }
    }

    /// Enters (or, after another failed try, continues) the volume fault of the module docs:
    /// `held` waits for the next try, readiness and the metrics say why, the log says it once
    /// per cause and [`FAILURE_LOG_INTERVAL`]. Then, unless `e` came from reopening, the store
    /// is reopened at once: redb refuses the reads of a handle whose write failed too (pages not
    /// in its cache), and the reopened handle serves them while writes wait.
    fn enter_fault(&mut self, e: &StorageError, held: Vec<QueuedChange>, reopen: bool) {
        self.metrics.store_write_failures.inc();
        let free = self.store.available_space().unwrap_or(0);
        // A write refused after another thread's failed one: name the likely first cause.
        let cause = match e.to_string() {
            c if c == storage::PREVIOUS_FAULT && free < FAULT_SPACE_STEP => format!("No space left on device ({free} bytes free; {c})"),
            c => c,
        };
        let dir = self.store.dir().display().to_string();
        let logged = self.failure_log.admit(&cause);
        // After its "succeed again" line, a fault that goes on says so at once.
        let logged = if self.resume_fault(&cause, free) { Some(logged.unwrap_or(0)) } else { logged };
        match &mut self.fault {
            Some(fault) => {
                fault.attempts = fault.attempts.saturating_add(1);
                fault.next_try = Instant::now() + fault_backoff(fault.attempts, &self.settings.projector);
                fault.free_then = free;
                fault.held.extend(held);
                if let Some(since) = logged {
                    tracing::error!(
                        error = %cause, data_dir = %dir, attempts = fault.attempts, failing_for_s = fault.since.elapsed().as_secs(),
                        failures_since_last_line = since, free_bytes = free, "store writes still fail; the store serves what it holds and retries"
                    );
                }
                fault.cause = cause;
            }
            None => {
                tracing::error!(
                    error = %cause, data_dir = %dir, changes_held = held.len(), free_bytes = free,
                    "store write failed on the volume; the store serves what it holds, keeps the changes, and retries once space is back"
                );
                self.metrics.store_write_failing.set(1);
                let delay = fault_backoff(1, &self.settings.projector);
                self.fault = Some(VolumeFault {
                    cause,
                    since: Instant::now(),
                    since_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    attempts: 1,
                    next_try: Instant::now() + delay,
                    free_then: free,
                    held,
                })
            }
        };
        // Reopened before readiness is told (new reads wait for the reopen, and readiness may
        // read the store while it holds its lock); logged once told.
        let reopened = if reopen { Some(self.reopen_store()) } else { None };
        if reopened.is_some() {
            // Measured after the reopen (recovery may give back what the failed write took): only
            // space freed later counts as space being back.
            if let (Some(fault), Ok(free)) = (&mut self.fault, self.store.available_space()) {
                fault.free_then = free;
            }
        }
        self.report_fault();
        if let Some(Some(r)) = reopened {
            tracing::info!(seconds = format!("{:.3}", r.seconds), readers_cut = r.readers_cut, "store reopened after a failed write");
        }
    }

    /// A write of another thread failed on the volume (the dictionary thread's): enters the
    /// fault, unless one is on or the store was reopened since ([`Store::write_failed`]) — a
    /// message taken after a fault ended would start another, whose backoff would keep the
    /// changes queued meanwhile waiting (up to a minute) once space is back.
    fn fault_told(&mut self, cause: String) {
        if self.fault.is_some() || !self.store.write_failed() {
            tracing::debug!(error = %cause, "a write of another thread failed on the volume: recovered from, or being recovered from, already");
            return;
        }
        self.enter_fault(&StorageError::Volume(cause), Vec::new(), true);
    }

    /// Failing again before the queue drained after the last fault, or within a minute of its
    /// end (a volume with room for small writes only): the same fault goes on, its backoff and
    /// its log's throttle with it. Returns whether it had ended (its end was logged).
    fn resume_fault(&mut self, cause: &str, free: u64) -> bool {
        if self.fault.is_some() {
            return false;
        }
        let (resumed, ended) = match self.recovering.take() {
            Some(recovering) => (recovering, false),
            None => match self.ended_fault.take().filter(|(ended, _)| ended.elapsed() < FAILURE_LOG_INTERVAL) {
                Some((_, ended)) => (ended, true),
                None => return false,
            },
        };
        let Recovering { since, since_at, attempts } = resumed;
        self.metrics.store_write_failing.set(1);
        self.fault = Some(VolumeFault {
            cause: cause.to_string(),
            since,
            since_at,
            attempts,
            next_try: Instant::now(),
            free_then: free,
            held: Vec::new(),
        });
        ended
    }

    /// Tells readiness about the fault as it is now (its cause, whether the store can be read).
    fn report_fault(&mut self) {
        let Some(fault) = &self.fault else { return };
        let dir = self.store.dir().display().to_string();
        let closed = !self.store.is_open();
        let report = format!(
            "store write failed: {}; data directory {dir}; since {}; retried with backoff (at once when space is freed){}",
            fault.cause,
            fault.since_at,
            if closed { "; the store cannot be read until it is reopened" } else { "" }
        );
        self.readiness.set_store_fault(Some(report), closed);
        self.metrics.notify_waiters();
    }

    /// Reopens the store after a failed write (its reads fail too until then), logging how long
    /// reads waited; a failure leaves it closed, tried again at the next turn.
    fn reopen_store(&mut self) -> Option<storage::Reopened> {
        match self.store.reopen(REOPEN_READERS_WAIT) {
            Ok(r) => Some(r),
            Err(e) => {
                let cause = e.to_string();
                if let Some(since) = self.failure_log.admit(&cause) {
                    tracing::error!(error = %cause, failures_since_last_line = since, "reopening the store failed; it cannot be read until it is reopened");
                }
                None
            }
        }
    }

    /// One turn of the loop while store writes fail: waits at most [`FAULT_POLL`]; reopens a
    /// store left closed; once the volume has [`FAULT_SPACE_STEP`] more free than at the last
    /// failure, or the backoff has passed, tries the held batch (a failure continues the fault,
    /// a success ends it).
    fn ride_out_fault(&mut self) {
        let Some(fault) = &self.fault else { return };
        std::thread::sleep(FAULT_POLL.min(fault.next_try.saturating_duration_since(Instant::now())));
        let free = self.store.available_space().ok();
        let space_back = free.is_some_and(|f| f >= fault.free_then.saturating_add(FAULT_SPACE_STEP));
        if !space_back && Instant::now() < fault.next_try {
            return;
        }
        if !self.store.is_open() {
            let Some(r) = self.reopen_store() else {
                if let Some(fault) = &mut self.fault {
                    fault.attempts = fault.attempts.saturating_add(1);
                    fault.next_try = Instant::now() + fault_backoff(fault.attempts, &self.settings.projector);
                }
                return;
            };
            self.report_fault();
            tracing::info!(seconds = format!("{:.3}", r.seconds), readers_cut = r.readers_cut, "store reopened after a failed write");
            return;
        }
        let held = self.fault.as_mut().map(|f| std::mem::take(&mut f.held)).unwrap_or_default();
        if !held.is_empty() {
            return self.process(held);
        }
        // Nothing held (a build or a mark failed): a write of its own says whether writes work.
        match self.store.check_writable() {
            Ok(()) => self.fault_cleared(false),
            Err(e) => self.enter_fault(&e, Vec::new(), true),
        }
    }

    /// Ends the volume fault after a successful commit: of the held changes (`committed`), or
    /// of the writer's own check when nothing was held. The report stays until the changes
    /// queued meanwhile are written and the background steps ran again
    /// ([`WriterThread::end_recovery`]): a nearly full volume may take one batch and refuse the
    /// next. Only committed changes make it say "writes resumed", and the metric go to 0.
    fn fault_cleared(&mut self, committed: bool) {
        let Some(fault) = self.fault.take() else { return };
        tracing::debug!(
            failing_for_s = fault.since.elapsed().as_secs(),
            attempts = fault.attempts,
            committed,
            "a store write succeeded after a volume fault"
        );
        if committed {
            self.metrics.store_write_failing.set(0);
            let dir = self.store.dir().display().to_string();
            let report = format!(
                "store write failed: {}; data directory {dir}; since {}; writes resumed, the changes queued meanwhile are being written",
                fault.cause, fault.since_at
            );
            self.readiness.set_store_fault(Some(report), false);
        }
        self.recovering = Some(Recovering { since: fault.since, since_at: fault.since_at, attempts: fault.attempts });
    }

    /// Ends the report of a volume fault once writes succeed, nothing is queued and the
    /// background steps ran without a fault; logged once readiness is told (the line is a
    /// barrier for what `/readyz` says). Wakes the dictionary thread: what it could not write
    /// meanwhile (a recompression after the load, which no commit may follow) is tried again.
    /// The fault is kept for [`FAILURE_LOG_INTERVAL`]: one beginning again meanwhile goes on.
    fn end_recovery(&mut self) {
        let Some(recovering) = self.recovering.take() else { return };
        self.metrics.store_write_failing.set(0);
        self.readiness.set_store_fault(None, false);
        let _ = self.train.try_send(());
        tracing::info!(
            failing_for_s = recovering.since.elapsed().as_secs(),
            attempts = recovering.attempts,
            "store writes succeed again; the changes held and queued meanwhile are committed"
        );
        self.ended_fault = Some((Instant::now(), recovering));
    }

    /// One write transaction over `batch`; returns each change's result and duration.
    /// A volume fault ends here once a transaction succeeds (or fails for another reason: the
    /// volume takes writes again), before anything reports the commit.
    fn attempt(&mut self, batch: &[QueuedChange], now: Timestamp) -> Result<Vec<(ChangeEnd, f64)>, StorageError> {
        let mut committing = Instant::now();
        let written = self.store.write(now, |wb| {
            let mut out = Vec::with_capacity(batch.len());
            for (w, superseded) in batch.iter().zip(superseded(batch)) {
                if superseded {
                    out.push((ChangeEnd::Superseded, 0.0));
                    continue;
                }
                let t0 = Instant::now();
                let d = self.apply(wb, &w.change, now, &out)?;
                out.push((d, t0.elapsed().as_secs_f64()));
            }
            if out.iter().any(|(d, _)| d.left_source_entry_behind()) {
                // A change after a seal in this batch left its source entry behind.
                for w in batch {
                    if let Change::Seal { key } = &w.change {
                        wb.put_checkpoint(key, None)?;
                    }
                }
            }
            committing = Instant::now();
            Ok(out)
        });
        if self.fault.is_some() && !matches!(&written, Err(e) if e.is_volume_fault()) {
            self.fault_cleared(true);
        }
        let (out, revision) = written?;
        self.metrics.store_commit_seconds.observe(committing.elapsed().as_secs_f64());
        if let Some(rev) = revision {
            let _ = self.train.try_send(());
            self.metrics.store_revision.set(rev as i64);
            self.update_counts();
        }
        Ok(out)
    }

    /// Applies a [`Change::Seal`]: `before` are the outcomes of the batch's changes before it.
    fn seal(&self, wb: &mut WriteBatch<'_>, key: &str, before: &[(ChangeEnd, f64)]) -> Result<ChangeEnd, StorageError> {
        let as_sent =
            self.sweeps.is_empty() && self.parked.values().all(|p| p.stored) && !before.iter().any(|(d, _)| d.left_source_entry_behind());
        match as_sent {
            true => wb.seal_checkpoints(key)?,
            false => wb.put_checkpoint(key, None)?,
        }
        Ok(ChangeEnd::Checkpointed)
    }

    /// Applies one change; `before` are the outcomes of the batch's changes before it.
    fn apply(&self, wb: &mut WriteBatch<'_>, c: &Change, now: Timestamp, before: &[(ChangeEnd, f64)]) -> Result<ChangeEnd, StorageError> {
        Ok(match c {
            Change::Apply { src, version, record, authoritative, .. } => {
                let stored = wb.source_version(src)?;
                if !record.retry_unlinked() && stored.as_deref() == Some(version.as_str()) {
                    if let Some(document) = record.document().filter(|_| self.filling_documents) {
                        wb.fill_document(src, document)?;
                    }
                    return Ok(ChangeEnd::Unchanged);
                }
                if !authoritative && stored.as_deref().is_some_and(|stored| older(version, stored)) {
                    return Ok(ChangeEnd::Outdated);
                }
                let outcome = record.upsert(wb, src, version, now)?;
                if let Some(document) = record.document().filter(|_| self.filling_documents) {
                    // Stored unchanged (a retried link, the same version): its document is missing.
                    wb.fill_document(src, document)?;
                }
                match outcome {
                    Outcome::Written => ChangeEnd::Written,
                    Outcome::Unchanged | Outcome::Deleted | Outcome::NotFound | Outcome::Staged => ChangeEnd::Unchanged,
                    Outcome::Unlinked { .. } => ChangeEnd::Unlinked,
                    Outcome::DependencyMissing(parents) => ChangeEnd::DependencyMissing(parents),
                    Outcome::Conflict(holder) => ChangeEnd::Conflict(holder),
                }
            }
            Change::Delete { src, .. } => {
                let key = wb.natural_key(src)?;
                match wb.delete(src, now)? {
                    Outcome::Deleted => ChangeEnd::Deleted(key.map(|k| (src.kind, k))),
                    _ => ChangeEnd::Deleted(None),
                }
            }
            Change::Sweep { kinds, present, keep_newer_than, .. } => {
                let (mut gone, mut kept) = (Vec::new(), Vec::new());
                for &kind in kinds {
                    for (src, version) in wb.sources(kind)? {
                        if present.contains(&src) {
                            continue;
                        }
                        match keep_newer_than {
                            Some(newest) if !version.parse::<u64>().is_ok_and(|v| v <= *newest) => kept.push(src),
                            _ => {
                                wb.delete(&src, now)?;
                                gone.push(src);
                            }
                        }
                    }
                }
                ChangeEnd::Swept { gone, kept }
            }
            Change::Checkpoint { entries, .. } => {
                for (key, value) in entries {
                    wb.put_checkpoint(key, value.as_deref())?;
                }
                ChangeEnd::Checkpointed
            }
            Change::Seal { key } => self.seal(wb, key, before)?,
        })
    }

    /// Refreshes `controlplane_store_records` and `controlplane_store_revision` from the store
    /// (after each commit, and once at start so a restart without changes reports the stored
    /// revision, not 0).
    fn update_counts(&self) {
        let view = match self.store.read() {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read record counts");
                return;
            }
        };
        if let Ok(rev) = view.revision() {
            self.metrics.store_revision.set(rev as i64);
        }
        if let Ok(stats) = view.history_stats() {
            self.metrics.history.set(stats);
        }
        for &kind in &self.kinds {
            if let Ok(n) = view.count(kind, &Scope::All) {
                self.metrics.store_records.with_label_values(&[kind.name()]).set(n as i64);
            }
        }
    }

    /// Counts one processed change ([`Metrics::reconciled`], without a label lookup per change).
    fn reconciled(&mut self, module: &'static str, outcome: &'static str, seconds: f64) {
        let metrics = &self.metrics;
        let (count, duration) = self.reconcile.entry((module, outcome)).or_insert_with(|| {
            (
                metrics.reconcile_total.with_label_values(&[module, outcome]),
                metrics.reconcile_duration.with_label_values(&[module, outcome]),
            )
        });
        count.inc();
        duration.observe(seconds);
        self.metrics.notify_waiters();
    }

    /// Frees finished changes (their translated records, tens of small allocations each) on the
    /// release thread, so the writer goes on with the next batch; inline when that thread is gone.
    fn release(&self, finished: Vec<QueuedChange>) {
        if let Err(mpsc::SendError(finished)) = self.release.send(finished) {
            drop(finished);
        }
    }

    /// Side effects after a successful commit. Returns the change unless it was parked for a
    /// retry.
    /// Its readiness item is done after it was parked, so that a reader seeing the server ready
    /// also sees the initial sync's retries in `projector_retries_pending`.
    fn finish(&mut self, work: QueuedChange, done: ChangeEnd, secs: f64) -> Option<QueuedChange> {
        let token = work.change.token();
        // An apply after a sweep in a batch retried change by change: that sweep failed first.
        if let (Change::Apply { src, .. }, false) = (&work.change, self.sweeps.is_empty()) {
            spare_from_retried_sweeps(&mut self.sweeps, src);
        }
        let kept = self.outcome_effects(work, done, secs);
        if let Some(t) = token {
            self.readiness.done(t);
        }
        kept
    }

    /// [`WriterThread::finish`] but for the readiness item.
    fn outcome_effects(&mut self, mut work: QueuedChange, done: ChangeEnd, secs: f64) -> Option<QueuedChange> {
        let module = work.change.module();
        let (wait, counted, stored) = (done.wait(), done.outcome(), !done.left_source_entry_behind());
        // A change that waits for a retry is counted once it is parked, below.
        if let (None, Some(label)) = (&wait, counted) {
            self.reconciled(module, label, secs);
        }
        match done {
            ChangeEnd::Written | ChangeEnd::Unchanged => {
                // Nothing waits during most of a load: then skip building the key.
                if let (ChangeEnd::Written, Change::Apply { record, .. }, false) = (&done, &work.change, self.waiting.is_empty()) {
                    self.wake((record.kind(), record.key()));
                }
                if let Change::Apply { src, origin, .. } = &work.change {
                    if !self.reported.is_empty() && self.reported.remove(src) {
                        tracing::info!(object = %src, origin = %origin, "dependency resolved; projected");
                    } else if matches!(done, ChangeEnd::Written) {
                        tracing::debug!(object = %src, origin = %origin, "projected");
                    }
                }
            }
            ChangeEnd::Unlinked => {
                // Written (without its target): children waiting for it can go ahead.
                if let Change::Apply { record, .. } = &work.change {
                    self.wake((record.kind(), record.key()));
                }
                if let Change::Apply { src, origin, .. } = &work.change {
                    if self.reported.insert(src.clone()) {
                        tracing::info!(object = %src, origin = %origin, "stored without target (no active target yet); retrying until linked");
                    } else {
                        tracing::debug!(object = %src, "still without target; retrying");
                    }
                }
            }
            ChangeEnd::DependencyMissing(parents) => self.dependency_missing(&work.change, &parents),
            ChangeEnd::Deleted(gone) => {
                if let Change::Delete { src, origin, .. } = &work.change {
                    self.reported.remove(src);
                    if gone.is_some() {
                        tracing::info!(object = %src, origin = %origin, "deleted");
                    }
                }
                // An object waiting for the natural key it held can have it now.
                if let Some(key) = gone.filter(|_| !self.waiting.is_empty()) {
                    self.wake(key);
                }
            }
            ChangeEnd::Conflict(holder) => self.key_held(&work.change, &holder),
            ChangeEnd::Checkpointed => {
                if let Change::Checkpoint { committed: Some(c), .. } = &work.change {
                    c.set();
                }
            }
            ChangeEnd::Superseded => {}
            ChangeEnd::Outdated => {
                if let Change::Apply { src, version, .. } = &work.change {
                    tracing::debug!(object = %src, resource_version = %version, "the store holds a newer version; not applied");
                    *self.outdated.entry(src.kind).or_default() += 1;
                }
            }
            ChangeEnd::Swept { gone, kept } => self.swept(&work.change, gone, kept),
        }
        if let Some(why) = wait {
            let delay = self.retry_delay(&mut work, why);
            self.park(work, delay, stored);
            // Counted once parked: a reader seeing the count sees the retry pending.
            if let Some(label) = counted {
                self.reconciled(module, label, secs);
            }
            return None;
        }
        Some(work)
    }

    /// An object parked for missing parents: it waits for each of them (woken when one is
    /// written), reported once.
    fn dependency_missing(&mut self, change: &Change, parents: &[Parent]) {
        if let Change::Apply { src, .. } = change {
            for r in parents {
                self.waiting.entry((r.kind, r.key.clone())).or_default().insert(src.clone());
            }
        }
        if let Change::Apply { src, origin, .. } = change {
            let missing = parents.iter().map(|r| format!("{} {}", r.kind.name(), r.key)).collect::<Vec<_>>().join(", ");
            if self.reported.insert(src.clone()) {
                tracing::info!(object = %src, origin = %origin, missing = %missing, "dependency missing; will retry");
            } else {
                tracing::debug!(object = %src, missing = %missing, "dependency still missing");
            }
        }
    }

    /// An object whose natural key another object holds: it waits for the key, reported once.
    fn key_held(&mut self, change: &Change, holder: &SourceRef) {
        if let Change::Apply { src, origin, record, .. } = change {
            let key = record.key();
            if self.reported.insert(src.clone()) {
                tracing::warn!(object = %src, origin = %origin, key = %key, holder = %holder, "another object holds this natural key; not projected while it does (will retry)");
            } else {
                tracing::debug!(object = %src, holder = %holder, "natural key still held");
            }
            self.waiting.entry((record.kind(), key)).or_default().insert(src.clone());
        }
    }

    /// A sweep's deletes counted, what it kept reported, and its report told.
    fn swept(&mut self, change: &Change, gone: Vec<SourceRef>, kept: Vec<SourceRef>) {
        for src in gone {
            tracing::info!(object = %src, "deleted: no longer in the source");
            self.reconciled(src.kind.module(), outcome::DELETE_SUCCESS, 0.0);
        }
        if !kept.is_empty() {
            tracing::info!(objects = kept.len(), first = %kept[0], "not listed, but possibly newer than the list: kept");
        }
        if let Change::Sweep { report, kinds, .. } = change {
            let outdated = kinds.iter().filter_map(|k| self.outdated.remove(k)).sum();
            if let Some(report) = report {
                report.tell(SweepOutcome { kept, outdated });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_parents_targets_and_keys_wait_for_a_retry_and_nothing_else_does() {
        let src = SourceRef { kind: KindId::Application, namespace: "ns".into(), name: "a".into() };
        let missing = Parent { kind: KindId::Team, key: Key::new(&["poc", "t"]) };
        assert_eq!(ChangeEnd::Unlinked.wait(), Some(Wait::Dependency));
        assert_eq!(ChangeEnd::DependencyMissing(vec![missing]).wait(), Some(Wait::Dependency));
        assert_eq!(ChangeEnd::Conflict(src.clone()).wait(), Some(Wait::Dependency));
        for done in [
            ChangeEnd::Written,
            ChangeEnd::Unchanged,
            ChangeEnd::Outdated,
            ChangeEnd::Superseded,
            ChangeEnd::Deleted(None),
            ChangeEnd::Swept { gone: vec![src.clone()], kept: vec![src] },
            ChangeEnd::Checkpointed,
        ] {
            assert_eq!(done.wait(), None);
        }
    }

    /// A change that waits for a retry is counted as `dependency_missing`, a written, unchanged
    /// or superseded one as `success`, a delete as `delete_success`; sweeps and checkpoints are
    /// not one object's change.
    #[test]
    fn each_ending_is_counted_under_the_label_of_its_retry_policy() {
        let src = SourceRef { kind: KindId::Application, namespace: "ns".into(), name: "a".into() };
        let missing = Parent { kind: KindId::Team, key: Key::new(&["poc", "t"]) };
        let all = [
            ChangeEnd::Written,
            ChangeEnd::Unchanged,
            ChangeEnd::Superseded,
            ChangeEnd::Unlinked,
            ChangeEnd::DependencyMissing(vec![missing]),
            ChangeEnd::Conflict(src.clone()),
            ChangeEnd::Deleted(None),
            ChangeEnd::Outdated,
            ChangeEnd::Swept { gone: vec![src], kept: vec![] },
            ChangeEnd::Checkpointed,
        ];
        let labels: Vec<Option<&str>> = all.iter().map(ChangeEnd::outcome).collect();
        let s = Some(outcome::SUCCESS);
        let d = Some(outcome::DEPENDENCY_MISSING);
        assert_eq!(labels, [s, s, s, d, d, d, Some(outcome::DELETE_SUCCESS), s, None, None]);
        for done in &all {
            assert_eq!(done.wait().is_some(), done.outcome() == d, "a retry is counted as dependency_missing");
        }
    }

    /// A writer with default settings on a new store in `dir`.
    fn writer_on(dir: &std::path::Path) -> (Store, Metrics, Writer) {
        let store = Store::open(dir).unwrap();
        let settings = WriterSettings::new(ProjectorConfig::default(), Clock(None));
        let metrics = Metrics::new();
        let writer = Writer::spawn(store.clone(), metrics.clone(), Readiness::new(["test"]), settings).unwrap();
        (store, metrics, writer)
    }

    fn checkpoint(i: usize) -> Change {
        Change::checkpoint(format!("test/{i}"), Some(Arc::from(&b"x"[..])))
    }

    /// A checkpoint supersedes the retries of earlier checkpoints that write or remove one of
    /// its keys (a retried header of a file before an edit must not land over the one after it);
    /// other retries stay. A seal is retried as the removal of its key.
    #[test]
    fn a_checkpoint_drops_the_retries_it_supersedes_and_a_seal_is_retried_as_its_removal() {
        let at = Instant::now();
        let retry = |change: Change| (at, QueuedChange { change, failures: 1, waits: 0 });
        let file = |rel: &str, v: u8| Change::Checkpoint {
            entries: vec![(format!("docs/{rel}"), Some(Arc::from(vec![v]))), (format!("file/{rel}"), Some(Arc::from(vec![v])))],
            committed: None,
        };
        let keys = |retries: &[(Instant, QueuedChange)]| -> Vec<String> {
            retries
                .iter()
                .flat_map(|(_, w)| match &w.change {
                    Change::Checkpoint { entries, .. } => entries.iter().map(|(key, _)| key.clone()).collect(),
                    _ => vec!["other".to_string()],
                })
                .collect()
        };
        let mut retries = vec![retry(file("a", 1)), retry(file("b", 1)), retry(Change::Seal { key: "seal".into() })];
        drop_superseded_checkpoints(&mut retries, &Change::Seal { key: "seal".into() });
        assert_eq!(keys(&retries), ["docs/a", "file/a", "docs/b", "file/b", "other"], "a seal supersedes no retry");
        drop_superseded_checkpoints(&mut retries, &file("a", 2));
        assert_eq!(keys(&retries), ["docs/b", "file/b", "other"]);
        drop_superseded_checkpoints(&mut retries, &Change::checkpoint("file/b".into(), None));
        assert_eq!(keys(&retries), ["other"], "a removal of one of its keys supersedes it too");

        let (_, seal) = retry(Change::Seal { key: "manifests/v2/seal".into() });
        let removal = unsealed(seal);
        assert_eq!(removal.failures, 1);
        assert!(
            matches!(&removal.change, Change::Checkpoint { entries, committed: None } if entries.len() == 1 && entries[0].0 == "manifests/v2/seal" && entries[0].1.is_none())
        );
        let (_, other) = retry(file("c", 1));
        assert!(matches!(unsealed(other).change, Change::Checkpoint { entries, .. } if entries.len() == 2 && entries[1].0 == "file/c"));
    }

    /// A sweep retried after a store error spares the objects handed to the store after it: of
    /// its kinds and missing from its list, they came after the list was taken.
    #[test]
    fn a_retried_sweep_spares_the_objects_applied_after_it() {
        let app = |name: &str| SourceRef { kind: KindId::Application, namespace: "ns".into(), name: name.into() };
        let listed = app("listed");
        let sweep = Change::Sweep {
            kinds: vec![KindId::Application],
            present: Arc::new(HashSet::from([listed.clone()])),
            keep_newer_than: None,
            report: None,
            token: None,
        };
        let sent = match &sweep {
            Change::Sweep { present, .. } => Arc::clone(present),
            _ => unreachable!(),
        };
        let mut retries = vec![(Instant::now(), QueuedChange { change: sweep, failures: 1, waits: 0 })];
        let zone = SourceRef { kind: KindId::Zone, namespace: "ns".into(), name: "z".into() };
        for src in [app("added-later"), listed.clone(), zone.clone(), app("added-later")] {
            spare_from_retried_sweeps(&mut retries, &src);
        }
        let Change::Sweep { present, .. } = &retries[0].1.change else { panic!("still a sweep") };
        let mut spared: Vec<&str> = present.iter().map(|s| s.name.as_str()).collect();
        spared.sort_unstable();
        assert_eq!(spared, ["added-later", "listed"], "a zone is not of the sweep's kinds");
        assert_eq!(sent.len(), 1, "the list the source sent is not changed under it");
    }

    /// An async source that waits for room before each send keeps the queue within the paced
    /// depth, and never waits for a stopped writer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_async_source_waits_for_room_in_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, _metrics, writer) = writer_on(dir.path());
        let tx = writer.sender();
        let mut deepest = 0;
        for i in 0..3 * PACED_QUEUE_DEPTH {
            tx.room().await;
            assert!(tx.send(checkpoint(i)));
            deepest = deepest.max(tx.queued());
        }
        assert!(deepest <= PACED_QUEUE_DEPTH + 1, "queue reached {deepest}");
        let tx2 = tx.clone();
        tokio::task::spawn_blocking(move || writer.shutdown()).await.unwrap();
        for i in 0..PACED_QUEUE_DEPTH + 2 {
            let _ = tx2.send(checkpoint(i));
        }
        tx2.room().await;
    }

    #[test]
    fn a_paced_sender_keeps_the_queue_bounded_and_never_waits_for_a_stopped_writer() {
        let dir = tempfile::tempdir().unwrap();
        let (store, metrics, writer) = writer_on(dir.path());
        let tx = writer.sender();
        let mut deepest = 0;
        for i in 0..3 * PACED_QUEUE_DEPTH {
            assert!(tx.send_paced(checkpoint(i)));
            deepest = deepest.max(tx.queued());
        }
        // Sending is far faster than durable commits, so the queue did fill up to the limit.
        assert!(deepest > PACED_QUEUE_DEPTH / 2 && deepest <= PACED_QUEUE_DEPTH + 1, "queue reached {deepest}");
        // Barrier: the end of each writer batch is reported to the metrics' subscribers.
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        assert!(runtime.block_on(metrics.wait_until(Duration::from_secs(30), |_| tx.queued() == 0)), "the writer took every change");
        writer.shutdown();
        assert_eq!(store.read().unwrap().checkpoints("test/").unwrap().len(), 3 * PACED_QUEUE_DEPTH);

        // The writer is gone: changes are refused at once, however deep the queue.
        for i in 0..PACED_QUEUE_DEPTH + 1 {
            assert!(!tx.send(checkpoint(i)));
        }
        assert!(tx.queued() > PACED_QUEUE_DEPTH);
        assert!(!tx.send_paced(checkpoint(0)));
    }

    /// The queue also counts bytes: a paced source waits once more than
    /// [`PACED_QUEUE_BYTES`] are queued, however few changes hold them, and is told when the
    /// writer's taking brings the bytes back under the bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_paced_source_waits_while_the_queued_bytes_are_above_their_bound() {
        let (tx, rx) = mpsc::channel();
        let sender = ChangeSender { tx, queue: Arc::new(Queue::default()) };
        let large = |i: usize| Change::checkpoint(format!("test/{i}"), Some(Arc::from(vec![7u8; 1 << 20])));
        for i in 0..=PACED_QUEUE_BYTES >> 20 {
            assert!(sender.queue.has_room(), "room before change {i}");
            assert!(sender.send(large(i)));
        }
        assert_eq!((sender.queued(), sender.queued_bytes()), ((PACED_QUEUE_BYTES >> 20) + 1, PACED_QUEUE_BYTES + (1 << 20)));
        assert!(!sender.queue.has_room(), "far fewer than {PACED_QUEUE_DEPTH} changes, but over the bytes");
        let waiting = tokio::spawn({
            let sender = sender.clone();
            async move { sender.room().await }
        });
        let Ok(WriterMessage::Change(first)) = rx.recv() else { panic!("a change was queued") };
        sender.queue.taken(&first);
        tokio::time::timeout(Duration::from_secs(60), waiting).await.expect("the waiting source is told").unwrap();
        assert_eq!(sender.queued_bytes(), PACED_QUEUE_BYTES);
        // A record counts its encoding twice and its document; a delete counts nothing.
        let apply = zone_apply("z");
        let Change::Apply { record, src, .. } = &apply else { panic!("an apply") };
        let (expected, src) = (2 * record.encoded().len() + record.document().unwrap().len(), src.clone());
        assert!(expected > 0);
        assert_eq!(apply.queued_bytes(), expected);
        assert_eq!(Change::Delete { src, origin: Arc::from("t"), token: None }.queued_bytes(), 0);
    }

    /// The change a source sends for the zone `name` (namespace `poc`).
    fn zone_apply(name: &str) -> Change {
        let handlers = crate::projector::handlers::Handlers::new(&schema::kind::Features::default());
        let crate::projector::handlers::Lookup::Kind(zones) = handlers.get(KindId::Zone) else { panic!("zones are projected") };
        let doc = serde_json::json!({
            "apiVersion": "admin.cp.ei.telekom.de/v1", "kind": "Zone",
            "metadata": {"name": name, "namespace": "poc", "resourceVersion": "1"},
            "spec": {"visibility": "World"},
        });
        let ctx = schema::kind::Context { now: Timestamp(5), features: schema::kind::Features::default() };
        let record = handlers.prepare(zones, &doc, &ctx).unwrap();
        let src = SourceRef { kind: KindId::Zone, namespace: "poc".into(), name: name.into() };
        Change::Apply { src, version: "1".into(), record, origin: Arc::from("t"), token: None, authoritative: true }
    }

    /// A sweep waiting for its retry after a store error is appended, once due, to the batch
    /// after the change just taken: it deletes what it was sent to delete, not an object that
    /// came after it.
    #[test]
    fn a_due_sweep_retry_keeps_the_object_taken_before_it_in_the_batch() {
        let (_dir, store) = zones_with_documents(1);
        let (tx, _rx) = mpsc::channel();
        let settings = WriterSettings::new(ProjectorConfig::default(), Clock(None));
        let (mut state, _trainer) = WriterThread::new(store.clone(), Metrics::new(), Readiness::new(["test"]), settings, &tx).unwrap();
        let sweep = Change::Sweep { kinds: vec![KindId::Zone], present: Arc::default(), keep_newer_than: None, report: None, token: None };
        state.sweeps.push((Instant::now(), QueuedChange { change: sweep, failures: 1, waits: 0 }));
        let mut batch = Vec::new();
        state.accept(zone_apply("added-later"), &mut batch);
        state.take_due(&mut batch);
        assert_eq!(batch.iter().map(|w| w.change.module()).collect::<Vec<_>>(), ["zone", "sweep"]);
        state.process(batch);
        let view = store.read().unwrap();
        assert!(view.source_version(KindId::Zone, "poc", "zone-00000").unwrap().is_none(), "stored before the sweep: deleted");
        assert!(view.source_version(KindId::Zone, "poc", "added-later").unwrap().is_some(), "taken after the sweep: kept");
    }

    /// A new store holding `n` zones with their documents, as the sources hand them over (and
    /// the directory that holds it).
    fn zones_with_documents(n: usize) -> (tempfile::TempDir, Store) {
        use schema::Kind;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let ctx = schema::kind::Context { now: Timestamp(5), features: schema::kind::Features::default() };
        store
            .write(Timestamp(5), |batch| {
                for i in 0..n {
                    let name = format!("zone-{i:05}");
                    let doc = serde_json::json!({
                        "apiVersion": "admin.cp.ei.telekom.de/v1",
                        "kind": "Zone",
                        "metadata": {"name": name, "namespace": "poc", "resourceVersion": "1"},
                        "spec": {"visibility": "World"},
                    });
                    let cr = serde_json::from_value(doc.clone()).unwrap();
                    let rec = schema::kinds::zone::Zone::translate(&cr, &ctx).unwrap();
                    let encoded = storage::Encoded::new(rec).with_document(storage::documents::encode(&doc));
                    let src = SourceRef { kind: KindId::Zone, namespace: "poc".into(), name };
                    batch.upsert_encoded::<schema::kinds::zone::Zone>(&src, "1", &encoded, Timestamp(5))?;
                }
                Ok(())
            })
            .unwrap();
        (dir, store)
    }

    /// The dictionary thread's round trains a kind's dictionary once the store holds enough of
    /// its documents and recompresses those written before; it stops between transactions once
    /// the writer is gone.
    #[test]
    fn the_dictionary_round_trains_and_recompresses() {
        let (_dir, store) = zones_with_documents(storage::documents::TRAIN_AFTER as usize + 1);
        let (tx, rx) = mpsc::sync_channel::<()>(1);
        let (writer, faults) = mpsc::channel();
        let mut done = DictionaryWork::default();
        assert!(keep_documents_small(&store, &mut done, &rx, &writer));
        assert_eq!(store.dictionaries().kinds(), vec![KindId::Zone]);
        assert!(store.documents_recompressed(KindId::Zone).unwrap());
        assert!(done.recompressed.contains(&KindId::Zone));

        let (_dir, store) = zones_with_documents(storage::documents::TRAIN_AFTER as usize);
        drop(tx);
        let mut done = DictionaryWork::default();
        assert!(!keep_documents_small(&store, &mut done, &rx, &writer), "the writer is gone: the round ends before recompressing");
        assert_eq!(store.dictionaries().kinds(), vec![KindId::Zone], "trained");
        assert!(!store.documents_recompressed(KindId::Zone).unwrap());
        assert!(faults.try_recv().is_err(), "no volume fault was told");
    }

    /// While the writer loads, the dictionary thread trains but leaves the recompression for
    /// after the load (its documents compressed alone are stored as they are meanwhile); the
    /// next round after it recompresses them.
    #[test]
    fn the_recompression_waits_until_the_load_is_processed() {
        let (_dir, store) = zones_with_documents(storage::documents::TRAIN_AFTER as usize + 1);
        let (_tx, rx) = mpsc::sync_channel::<()>(1);
        let (writer, _faults) = mpsc::channel();
        let mut done = DictionaryWork::default();
        store.set_loading(true);
        assert!(keep_documents_small(&store, &mut done, &rx, &writer));
        assert_eq!(store.dictionaries().kinds(), vec![KindId::Zone], "trained while loading");
        assert!(!store.documents_recompressed(KindId::Zone).unwrap(), "not while loading");
        assert!(!done.recompressed.contains(&KindId::Zone));
        store.set_loading(false);
        assert!(keep_documents_small(&store, &mut done, &rx, &writer));
        assert!(store.documents_recompressed(KindId::Zone).unwrap(), "once the load is processed");
        assert!(done.recompressed.contains(&KindId::Zone));
    }

    /// A writer's state on `store`; the wakes it sends the dictionary thread land in the
    /// returned receiver.
    fn writer_waking(store: &Store, readiness: Readiness) -> (WriterThread, mpsc::Receiver<()>) {
        let (tx, _rx) = mpsc::channel();
        let settings = WriterSettings::new(ProjectorConfig::default(), Clock(None));
        let (mut state, _trainer) = WriterThread::new(store.clone(), Metrics::new(), readiness, settings, &tx).unwrap();
        let (train, woken) = mpsc::sync_channel::<()>(1);
        state.train = train;
        (state, woken)
    }

    /// The end of a volume fault wakes the dictionary thread: a recompression that failed on
    /// the volume after the load is tried again, though no commit may follow.
    #[test]
    fn the_end_of_a_volume_fault_wakes_the_dictionary_thread() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (mut state, woken) = writer_waking(&store, Readiness::new(["test"]));
        state.end_recovery();
        assert!(woken.try_recv().is_err(), "no fault to end");
        state.recovering = Some(Recovering { since: Instant::now(), since_at: "then".into(), attempts: 2 });
        state.end_recovery();
        assert_eq!(woken.try_recv(), Ok(()), "woken when writes succeed again");
    }

    /// A volume fault that begins again within a minute of the last one's end (a volume with
    /// room for the writer's small writes, not for an ordering build or a recompression) goes
    /// on: the same `since`, its backoff growing, its log's throttle kept; the writer's own
    /// check write ends it without saying "writes resumed"; a failed background step takes no
    /// change before the retry. Later it is a new one.
    #[test]
    fn a_volume_fault_that_begins_again_within_a_minute_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let readiness = Readiness::new(["test"]);
        let (mut state, _woken) = writer_waking(&store, readiness.clone());
        let cause = "No space left on device (os error 28)";
        let full = StorageError::Volume(cause.into());
        // Begins (or goes on), then the recovery ends once writes succeed and nothing is queued.
        let fails_then_recovers = |state: &mut WriterThread, attempts: u32| {
            let asked = Instant::now();
            state.enter_fault(&full, Vec::new(), false);
            let fault = state.fault.as_ref().expect("a fault");
            let backoff = Duration::from_secs(1 << (attempts - 1));
            assert_eq!(fault.attempts, attempts);
            assert!(fault.next_try >= asked + backoff && fault.next_try <= Instant::now() + backoff, "backoff {backoff:?}");
            let (since, report) = (fault.since, readiness.store_fault().expect("reported"));
            state.fault_cleared(false);
            assert_eq!(readiness.store_fault().as_ref(), Some(&report), "the writer's own check resumes no write: reported as it was");
            assert_eq!(state.metrics.store_write_failing.get(), 1);
            state.end_recovery();
            assert_eq!(state.metrics.store_write_failing.get(), 0);
            assert!(state.fault.is_none() && readiness.store_fault().is_none(), "the recovery ended");
            (since, report)
        };
        let (since, report) = fails_then_recovers(&mut state, 1);
        for attempts in 2..=4 {
            let (again, again_report) = fails_then_recovers(&mut state, attempts);
            assert_eq!(again, since, "the same fault");
            assert_eq!(again_report, report, "failing since the first failure");
            assert_eq!(state.failure_log.admit(cause), None, "the log's throttle goes on: not reset by the end");
        }

        // Held changes committed: "writes resumed" until the recovery ends.
        state.enter_fault(&full, Vec::new(), false);
        state.fault_cleared(true);
        assert!(readiness.store_fault().is_some_and(|r| r.contains("writes resumed")), "{:?}", readiness.store_fault());
        assert_eq!(state.metrics.store_write_failing.get(), 0);
        state.end_recovery();

        // After the background steps: a step that failed takes no change until the retry; a
        // recovery ends once nothing is queued.
        state.enter_fault(&full, Vec::new(), false);
        assert!(!state.takes_changes_after_steps(&[]));
        state.fault_cleared(false);
        state.queue.depth.store(1, Ordering::Relaxed);
        assert!(state.takes_changes_after_steps(&[]));
        assert!(state.recovering.is_some() && readiness.store_fault().is_some(), "changes queued: the recovery goes on");
        state.queue.depth.store(0, Ordering::Relaxed);
        assert!(state.takes_changes_after_steps(&[]));
        assert!(state.recovering.is_none() && readiness.store_fault().is_none(), "ended");

        // A minute after the last end: a new fault, its backoff from the start.
        state.ended_fault.as_mut().expect("the last fault is kept").0 = Instant::now().checked_sub(FAILURE_LOG_INTERVAL).unwrap();
        let (later, _) = fails_then_recovers(&mut state, 1);
        assert!(later > since, "a new fault");
    }

    /// A write of the dictionary thread that failed on the volume enters the fault, unless the
    /// store was reopened since: a message taken after the fault it belonged to ended would
    /// start another (and its backoff keep the changes queued meanwhile waiting).
    #[test]
    fn a_fault_told_by_another_thread_is_entered_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let readiness = Readiness::new(["test"]);
        let (mut state, _woken) = writer_waking(&store, readiness.clone());
        let cause = || "No space left on device (os error 28)".to_string();
        store.note_write_failure_for_tests();
        state.fault_told(cause());
        assert!(state.fault.is_some() && readiness.store_fault().is_some(), "met on the open handle: a fault");
        assert!(!store.write_failed(), "the store was reopened");
        state.fault_told(cause());
        assert_eq!(state.fault.as_ref().map(|f| f.attempts), Some(1), "one fault on: told again, not counted again");
        state.fault_cleared(false);
        state.end_recovery();

        state.fault_told(cause());
        assert!(state.fault.is_none() && readiness.store_fault().is_none(), "met on a handle reopened since: nothing to recover");
        store.note_write_failure_for_tests();
        state.fault_told(cause());
        assert!(state.fault.is_some(), "met on the handle open now: a fault");
        assert!(!store.write_failed());
    }

    /// The writer's load ends when its initial sync is processed, or when the sources are silent
    /// for [`LOAD_IDLE`] before it is, and wakes the dictionary thread then: the load's
    /// documents compressed alone wait for that wake, as no commit may follow.
    #[test]
    fn the_load_ends_once_when_synced_or_silent_and_wakes_the_dictionary_thread() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let readiness = Readiness::new(["test"]);
        let (mut state, woken) = writer_waking(&store, readiness.clone());
        assert!(store.loading(), "said when the writer starts: the initial sync is being processed");
        state.note_loading();
        assert!(store.loading());
        assert!(woken.try_recv().is_err(), "nothing to wake for yet");
        readiness.end_phase("test");
        state.note_loading();
        assert!(!store.loading(), "the initial sync is processed");
        assert_eq!(woken.try_recv(), Ok(()), "the dictionary thread was woken");
        state.note_loading();
        assert!(woken.try_recv().is_err(), "woken once");

        // Sources silent before their initial sync is processed (a kube kind whose list never
        // succeeds) end the load too, once.
        let (mut state, woken) = writer_waking(&store, Readiness::new(["never"]));
        assert!(store.loading());
        state.idle = LOAD_IDLE - Duration::from_millis(1);
        state.note_loading();
        assert!(store.loading(), "not silent for long enough");
        state.idle = LOAD_IDLE;
        state.note_loading();
        assert!(!store.loading(), "silent for {LOAD_IDLE:?}: the load ended");
        assert_eq!(woken.try_recv(), Ok(()));
        state.idle = Duration::ZERO;
        state.note_loading();
        assert!(!store.loading(), "a load ends once per run");
    }
}
