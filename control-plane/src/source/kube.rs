//! The kube source: one kube-rs [`watcher`] per enabled kind, feeding the
//! one writer through the same [`Change`]s as the manifests source.
//!
//! * **Which kinds.** Every kind of [`schema::registry`] that [`schema::KindId::enabled`] allows (the
//!   feature flags). The API group, version, kind and plural come from the CR type's
//!   `kube::Resource` impl (derived by `kube::CustomResource` in `crds`), collected by a
//!   [`KindVisitor`] in [`resources`]: no kind has code here. Kinds switched off are not
//!   watched; startup sweeps their records once (`App::start_with`).
//! * **Untyped watch, typed decode.** The watcher lists and watches [`DynamicObject`]s; each
//!   object is then decoded into the kind's CR type by its
//!   [`Handler`](crate::projector::handlers::Handler). A typed watcher would fail a whole list when one object does not deserialize (and retry it forever); here a bad
//!   object is one skip (logged with kind, namespace, name and reason, counted as outcome
//!   `skip`) and every other object still projects (bad input never takes the process down).
//! * **Versions.** A change's version is `metadata.resourceVersion`, so an object whose version
//!   the store already holds causes no write (a restart re-lists everything and writes nothing).
//! * **Lists and lost deletes.** `Init` starts a list, `InitApply` objects are applied as they
//!   come, `InitDone` sends a [`Change::Sweep`] of the kind with every listed object: records of
//!   the kind that were not listed are deleted (kube-rs documents that delete
//!   events can be lost).
//! * **Lists from the watch cache** (restarts read the API server's cache, not etcd). A restart of a store synced from the
//!   same API server ([`Wiring::warm`]), and every relist after the first list (a `410 Gone`, a
//!   periodic resync), list with `resourceVersion=0` (kube-rs `ListSemantic::Any`): the API
//!   server answers from its watch cache, without a quorum read paged from etcd. Such a list
//!   may be older than the store: an object's older version never replaces a newer stored one
//!   (the writer compares `resourceVersion`s, [`crate::projector::writer::older`]), and its
//!   sweep deletes only objects whose stored version is at most the newest one listed (they
//!   existed before the list and are gone from it). An object not listed whose stored version is
//!   newer may have been created after the list was taken: it is kept, and the kind is listed
//!   again at once with a quorum read, whose sweep settles it. A first start (a cold store) lists
//!   with a quorum read.
//! * **Bounded memory.** A list from the watch cache arrives whole, and decodes into 6–8 times
//!   its JSON: the lists in progress hold at most [`LIST_BUDGET`] objects, a kind weighing what
//!   the store holds of it (then what its last list held) ([`ListBudget`]), so the kinds of a
//!   warm start are listed a few at a time; a kind larger than the budget is never listed whole
//!   but with quorum reads in pages of 500, like a first start; and each kind's task waits for
//!   room in the writer's queue before it takes its next event ([`ChangeSender::room`]). `410 Gone` and dropped watches are recovered by the watcher (re-watch
//!   from the last resourceVersion, or a re-list) behind `default_backoff()` (0.8 s doubling to
//!   30 s, with jitter, reset by the next event).
//! * **Missing CRDs.** A `404` on list or watch means the kind's CRD is not installed: logged
//!   once (warn), counted in `controlplane_kube_watch_errors_total{reason="crd_missing"}` and
//!   `controlplane_kube_crd_missing{kind}`, named in `/readyz` (`missingKinds`) and retried
//!   with the same backoff. Each kind has its own task: nothing blocks the others.
//! * **Readiness.** One phase `initial list of <Kind>` per enabled kind ([`initial_phase`]), ended
//!   by the first `InitDone`; the objects of that first list and its sweep are readiness items of
//!   the kind's group, so `/readyz` turns ready once every kind's initial list has been processed
//!   once by the writer (written, unchanged, skipped or parked for a dependency retry).
//! * **Progress.** While a kind's initial sync runs, a log line every [`Settings::progress_every`]
//!   gives objects seen and applied and the rate; `controlplane_kube_initial_sync_objects{kind,
//!   state="seen"|"applied"}` exposes the same numbers.
//!
//! The Go projector's settings, as they apply here:
//! `DEPENDENCY_DELAY` and `DEPENDENCY_DELAY_JITTER` time the writer's retries of objects whose
//! parent or target is missing (unchanged). `SKIP_REQUEUE` re-translates a skipped object after
//! that delay (counted again as outcome `skip`; a changed object arrives as a watch event at
//! once). `PERIODIC_RESYNC` (0 = never) restarts each kind's watcher after that interval ±20 %:
//! a full re-list and sweep, writing only what differs from the store.

use crate::config::{Clock, KubeSourceConfig, ProjectorConfig};
use crate::metrics::{outcome, Metrics};
use crate::projector::handlers::{Handlers, Lookup, Rejection};
use crate::projector::writer::{Change, ChangeSender, SweepOutcome, SweepReport};
use crate::readiness::{Readiness, Token};
use futures::{Stream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use prometheus::{IntCounterVec, IntGaugeVec, Opts};
use rand::Rng;
use schema::kind::{Context, Features};
use schema::registry::{self, KindVisitor};
use schema::{Kind, KindId};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;
use storage::SourceRef;
use tokio::time::Instant;

/// A watched kind: its id and its API resource (group, version `v1`, kind, plural).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchedKind {
    /// The kind.
    pub kind: KindId,
    /// What the watcher lists and watches: `/apis/<group>/v1/<plural>` (all namespaces).
    pub resource: ApiResource,
}

/// Every registered kind (enabled or not) with its API resource, in registry order, from the
/// `kube::Resource` impl of the kind's CR type.
pub fn resources() -> Vec<WatchedKind> {
    struct Collect(Vec<WatchedKind>);
    impl KindVisitor for Collect {
        fn visit<K: Kind>(&mut self) {
            self.0.push(WatchedKind { kind: K::ID, resource: ApiResource::erase::<K::Cr>(&()) });
        }
    }
    let mut c = Collect(Vec::new());
    registry::visit(&mut c);
    c.0
}

/// The RBAC rules the kube source needs with `features`: per API group (sorted), the plurals
/// (sorted) of the enabled kinds it lists and watches. With every feature on, the README section
/// "Kubernetes source" documents exactly these, and the Helm chart renders them (both tested).
pub fn rbac_rules(features: &schema::kind::Features) -> Vec<(String, Vec<String>)> {
    let mut by_group: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for w in resources().into_iter().filter(|w| w.kind.enabled(features)) {
        by_group.entry(w.resource.group.clone()).or_default().push(w.resource.plural.clone());
    }
    by_group
        .into_iter()
        .map(|(g, mut p)| {
            p.sort();
            (g, p)
        })
        .collect()
}

/// The readiness phase of `kind`'s initial list.
pub fn initial_phase(kind: KindId) -> String {
    format!("initial list of {}", kind.name())
}

/// Why the kube source cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// `source.kubeUrl` is not a valid URI.
    #[error("source.kubeUrl {url:?} is not a valid URL: {message}")]
    Url {
        /// The configured value.
        url: String,
        /// The parser's message.
        message: String,
    },
    /// Neither a kubeconfig (`KUBECONFIG`, `~/.kube/config`) nor the in-cluster service account
    /// could be loaded.
    #[error("no Kubernetes configuration: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    /// The client could not be built from the configuration (e.g. unreadable certificates).
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// A Kubernetes client and the API server it talks to.
#[derive(Clone)]
pub struct Cluster {
    /// The client.
    pub client: kube::Client,
    /// The API server's URL (`https://host:6443`, `https://kubernetes.default.svc`): the
    /// source's identity in the store ([`source_identity`]).
    pub url: String,
}

/// The identity the store records for the kube source of `cluster` (`storage::sync`): a store
/// synced from the same API server URL starts warm.
pub fn source_identity(url: &str) -> String {
    format!("kube:{}", url.trim_end_matches('/'))
}

/// Builds the Kubernetes client: `config.url` without credentials when set, otherwise
/// `kube::Config::infer()` (kubeconfig, else in cluster). Needs a tokio runtime (the client
/// spawns its connection tasks on it). Does not contact the API server.
///
/// # Errors
/// [`ConnectError`] for an invalid URL, no usable configuration, or a client that cannot be
/// built.
pub async fn connect(config: &KubeSourceConfig) -> Result<Cluster, ConnectError> {
    let kube_config = match &config.url {
        Some(url) => {
            let uri: http::Uri =
                url.parse().map_err(|e: http::uri::InvalidUri| ConnectError::Url { url: url.clone(), message: e.to_string() })?;
            kube::Config::new(uri)
        }
        None => kube::Config::infer().await?,
    };
    let url = kube_config.cluster_url.to_string();
    Ok(Cluster { client: kube::Client::try_from(kube_config)?, url })
}

/// Timing of the kube source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `SKIP_REQUEUE`: a skipped object is translated again after this delay (default 5 min).
    pub skip_requeue: Duration,
    /// `PERIODIC_RESYNC`: each kind's watcher restarts (full re-list and sweep) after this
    /// interval ±20 %; zero (default) = never.
    pub periodic_resync: Duration,
    /// Interval of the progress log lines while a kind's initial sync runs (default 5 s).
    pub progress_every: Duration,
}

impl Settings {
    /// The settings from the projector configuration, progress every 5 s.
    pub fn new(p: &ProjectorConfig) -> Settings {
        Settings { skip_requeue: p.skip_requeue, periodic_resync: p.periodic_resync, progress_every: Duration::from_secs(5) }
    }
}

/// The kube source's metrics (registered in the process's [`Metrics`] registry).
#[derive(Clone)]
pub struct KubeMetrics {
    /// `controlplane_kube_events_total{kind,event}`: objects received, `event` = `listed`
    /// (`InitApply`), `applied` (`Apply`) or `deleted` (`Delete`).
    pub events: IntCounterVec,
    /// `controlplane_kube_lists_total{kind}`: completed (re)lists (`InitDone`).
    pub lists: IntCounterVec,
    /// `controlplane_kube_watch_errors_total{kind,reason}`: watcher errors, `reason` =
    /// `crd_missing` (404), `gone` (410: re-list), `forbidden` (403: RBAC), `unauthorized`
    /// (401), `list_failed`, `watch_start_failed`, `watch_error`, `watch_failed`,
    /// `no_resource_version`.
    pub errors: IntCounterVec,
    /// `controlplane_kube_crd_missing{kind}`: 1 while the kind's CRD answers 404, else 0.
    pub crd_missing: IntGaugeVec,
    /// `controlplane_kube_synced{kind}`: 1 once the kind's initial list is applied, else 0.
    pub synced: IntGaugeVec,
    /// `controlplane_kube_initial_sync_objects{kind,state}`: progress of the initial list,
    /// `state` = `seen` (received) or `applied` (processed once by the writer).
    pub initial: IntGaugeVec,
}

impl KubeMetrics {
    /// Creates the metrics and registers them in `metrics`' registry.
    ///
    /// # Errors
    /// A message when they are registered twice in the same registry.
    pub fn register(metrics: &Metrics) -> Result<KubeMetrics, String> {
        let counter = |name: &str, help: &str, labels: &[&str]| IntCounterVec::new(Opts::new(name, help), labels);
        let gauge = |name: &str, help: &str, labels: &[&str]| IntGaugeVec::new(Opts::new(name, help), labels);
        let m = KubeMetrics {
            events: counter(
                "controlplane_kube_events_total",
                "Objects received from the Kubernetes API, by kind and event.",
                &["kind", "event"],
            )
            .map_err(|e| e.to_string())?,
            lists: counter("controlplane_kube_lists_total", "Completed (re)lists, by kind.", &["kind"]).map_err(|e| e.to_string())?,
            errors: counter(
                "controlplane_kube_watch_errors_total",
                "Watcher errors (retried with backoff), by kind and reason.",
                &["kind", "reason"],
            )
            .map_err(|e| e.to_string())?,
            crd_missing: gauge("controlplane_kube_crd_missing", "1 while the kind's CRD is not installed (404).", &["kind"])
                .map_err(|e| e.to_string())?,
            synced: gauge("controlplane_kube_synced", "1 once the kind's initial list is applied.", &["kind"])
                .map_err(|e| e.to_string())?,
            initial: gauge(
                "controlplane_kube_initial_sync_objects",
                "Initial sync progress: objects seen and applied, by kind.",
                &["kind", "state"],
            )
            .map_err(|e| e.to_string())?,
        };
        let r = metrics.registry();
        for c in [
            Box::new(m.events.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(m.lists.clone()),
            Box::new(m.errors.clone()),
            Box::new(m.crd_missing.clone()),
            Box::new(m.synced.clone()),
            Box::new(m.initial.clone()),
        ] {
            r.register(c).map_err(|e| format!("registering the kube source metrics: {e}"))?;
        }
        Ok(m)
    }
}

/// What every kind's task shares.
#[derive(Clone)]
pub struct Wiring {
    /// The per-kind decode → translate pipeline.
    pub handlers: Arc<Handlers>,
    /// Feature flags (passed to translation).
    pub features: Features,
    /// Projection time source.
    pub clock: Clock,
    /// The writer.
    pub sender: ChangeSender,
    /// Readiness (phases per kind, see [`initial_phase`]).
    pub readiness: Readiness,
    /// Process metrics (outcome `skip` is counted here).
    pub metrics: Metrics,
    /// The kube source's own metrics.
    pub kube_metrics: KubeMetrics,
    /// Timing.
    pub settings: Settings,
    /// Whether the store completed an initial sync of this API server before: then even the
    /// first lists read the API server's watch cache (see the module docs).
    pub warm: bool,
    /// How many listed objects may be held at once ([`ListBudget`]).
    pub lists: ListBudget,
}

/// The objects the kube source may hold in lists at once: a list from the watch cache arrives
/// whole, so a kind's list takes as many permits as the kind weighs (what the store held of it
/// at the start, then what its last list held; at least one) from its `Init` to its
/// `InitDone`. On a warm start the kinds are then listed a few at a time. A kind that weighs
/// more than [`LIST_BUDGET`] is never listed whole ([`ListBudget::whole`]): it is listed with
/// quorum reads in pages of 500, which hold little and take one permit. Cheap to clone.
#[derive(Clone)]
pub struct ListBudget {
    permits: Arc<tokio::sync::Semaphore>,
    weights: Arc<std::sync::Mutex<HashMap<KindId, u64>>>,
}

/// The listed objects held at once by [`ListBudget`], and the largest kind listed whole from
/// the watch cache. Measured (BENCHMARKS.md, P4-kube): a list of these kinds decodes into
/// 8–12 KB an object beside its JSON, so 50,000 objects are about 0.5–0.6 GB while they decode.
pub const LIST_BUDGET: u32 = 50_000;

impl ListBudget {
    /// A budget of [`LIST_BUDGET`] objects; a kind's list weighs what `stored` says the store
    /// holds of it.
    pub fn new(stored: impl IntoIterator<Item = (KindId, u64)>) -> ListBudget {
        let weights = stored.into_iter().collect();
        ListBudget {
            permits: Arc::new(tokio::sync::Semaphore::new(LIST_BUDGET as usize)),
            weights: Arc::new(std::sync::Mutex::new(weights)),
        }
    }

    fn weight(&self, kind: KindId) -> u64 {
        self.weights.lock().unwrap_or_else(|e| e.into_inner()).get(&kind).copied().unwrap_or(0)
    }

    /// Whether `kind` may be listed whole from the watch cache: it weighs at most
    /// [`LIST_BUDGET`] objects.
    pub fn whole(&self, kind: KindId) -> bool {
        self.weight(kind) <= u64::from(LIST_BUDGET)
    }

    /// Records that a list of `kind` held `objects`: its weight from now on.
    pub fn listed(&self, kind: KindId, objects: u64) {
        self.weights.lock().unwrap_or_else(|e| e.into_inner()).insert(kind, objects);
    }

    /// Waits for the permits of a list of `kind` (`cached`: from the watch cache, whole; else
    /// paged, one permit).
    async fn acquire(&self, kind: KindId, cached: bool) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let weight = match cached {
            true => u32::try_from(self.weight(kind)).unwrap_or(u32::MAX).clamp(1, LIST_BUDGET),
            false => 1,
        };
        self.permits.clone().acquire_many_owned(weight).await.ok()
    }
}

/// The running kube source: one tokio task per watched kind.
pub struct KubeSource {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Disconnected once every task's future is dropped (each holds a sender).
    ended: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

/// How long [`KubeSource::shutdown`] waits for its tasks to be dropped.
const TASKS_END_WAIT: Duration = Duration::from_secs(5);

impl KubeSource {
    /// Starts one watcher task per kind in `kinds` on `runtime`. The readiness phases
    /// ([`initial_phase`]) of these kinds must already be registered.
    pub fn spawn(client: kube::Client, kinds: Vec<WatchedKind>, wiring: Wiring, runtime: &tokio::runtime::Handle) -> KubeSource {
        let mut tasks = Vec::new();
        let (alive, ended) = std::sync::mpsc::channel::<()>();
        for w in kinds {
            let name = w.kind.name();
            wiring.kube_metrics.crd_missing.with_label_values(&[name]).set(0);
            wiring.kube_metrics.synced.with_label_values(&[name]).set(0);
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &w.resource);
            let mut watch = KindWatch::new(w, wiring.clone());
            let alive = alive.clone();
            let readiness = wiring.readiness.clone();
            tasks.push(runtime.spawn(async move {
                let _alive = alive;
                let source = format!("kube ({name})");
                super::report_task_failure(&readiness, &source, watch.run(api)).await
            }));
        }
        KubeSource { tasks, ended: std::sync::Mutex::new(ended) }
    }

    /// Stops every watcher task (changes already sent stay queued for the writer) and waits
    /// until the runtime has dropped them, with what they hold (the writer's sender, the
    /// readiness state), at most [`TASKS_END_WAIT`]. Call it off the runtime's workers (the
    /// server does, from a blocking thread); on a worker of a runtime with one thread the wait
    /// runs out.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.tasks.is_empty() {
            return;
        }
        for t in self.tasks.drain(..) {
            t.abort();
        }
        let ended = self.ended.lock().unwrap_or_else(|e| e.into_inner()).recv_timeout(TASKS_END_WAIT);
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = ended {
            tracing::warn!(wait_s = TASKS_END_WAIT.as_secs(), "the kube source's watchers did not end in time");
        }
    }
}

impl Drop for KubeSource {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How often a kind whose initial sync runs checks its progress (the log itself is every
/// [`Settings::progress_every`]); also the resolution of the "initial sync applied" time.
const SYNC_CHECK: Duration = Duration::from_millis(50);

/// How [`KindWatch::drive`] ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended {
    /// `PERIODIC_RESYNC` elapsed: the caller starts a new watcher (a full re-list).
    Resync,
    /// The event stream ended (a real watcher never ends; test streams do).
    StreamEnded,
    /// A list from the watch cache was older than the store: the caller lists again with a
    /// quorum read.
    QuorumRelist,
    /// The kind weighs more than [`LIST_BUDGET`] objects: the caller lists it with quorum reads
    /// in pages rather than whole from the watch cache (ended before the list was asked for).
    TooLargeToListWhole,
}

/// A list in progress (between `Init` and `InitDone`).
#[derive(Default)]
struct Listing {
    present: HashSet<SourceRef>,
    seen: u64,
    /// The newest `resourceVersion` listed (when they are numbers).
    newest: Option<u64>,
    started: Option<Instant>,
}

impl Listing {
    fn new() -> Listing {
        Listing { started: Some(Instant::now()), ..Listing::default() }
    }
}

/// A skipped object, kept for `SKIP_REQUEUE`.
struct Skipped {
    version: String,
    doc: Value,
    due: Instant,
}

/// One kind's watch state.
pub struct KindWatch {
    watched: WatchedKind,
    wiring: Wiring,
    phase: String,
    /// The first list has not ended yet.
    initial: bool,
    /// The first list ended; the writer has not processed all of it yet.
    applying: bool,
    sync_started: Instant,
    seen_initial: u64,
    listing: Option<Listing>,
    skipped: HashMap<SourceRef, Skipped>,
    crd_missing: bool,
    origin_list: Arc<str>,
    origin_watch: Arc<str>,
    /// Whether the current watcher lists from the API server's watch cache (`resourceVersion=0`)
    /// rather than with a quorum read.
    cached: bool,
    /// Whether the next watcher lists with a quorum read (a first start, or a list from the
    /// watch cache that was older than the store).
    quorum_next: bool,
    /// The sweep of a list from the watch cache, until it reports what it kept.
    checking: Option<tokio::sync::oneshot::Receiver<SweepOutcome>>,
    /// The readiness item of the initial list's check, until it is settled (the quorum
    /// relist's sweep takes it over when one is needed).
    check_token: Option<Token>,
    /// The list budget held by the list in progress ([`ListBudget`]).
    list_permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl KindWatch {
    /// The state of a kind that has not been listed yet.
    pub fn new(watched: WatchedKind, wiring: Wiring) -> KindWatch {
        let wiring_warm = wiring.warm;
        let r = &watched.resource;
        let origin_list = Arc::from(format!("list of {}.{}", r.plural, r.group));
        let origin_watch = Arc::from(format!("watch of {}.{}", r.plural, r.group));
        KindWatch {
            phase: initial_phase(watched.kind),
            watched,
            wiring,
            initial: true,
            applying: false,
            sync_started: Instant::now(),
            seen_initial: 0,
            listing: None,
            skipped: HashMap::new(),
            crd_missing: false,
            origin_list,
            origin_watch,
            cached: false,
            quorum_next: !wiring_warm,
            checking: None,
            check_token: None,
            list_permit: None,
        }
    }

    fn name(&self) -> &'static str {
        self.watched.kind.name()
    }

    /// Watches forever: a watcher with default backoff, restarted after every
    /// `PERIODIC_RESYNC`.
    async fn run(&mut self, api: Api<DynamicObject>) {
        let r = &self.watched.resource;
        tracing::info!(kind = self.name(), resource = %format!("{}.{}/{}", r.plural, r.group, r.version), "watching");
        let mut restarts = watcher::DefaultBackoff::default();
        loop {
            self.cached = !std::mem::take(&mut self.quorum_next) && self.wiring.lists.whole(self.watched.kind);
            let config = match self.cached {
                // Unpaged: kube-rs sends `resourceVersion=0` only without a limit (the watch
                // cache answers a list whole, whatever the limit).
                true => watcher::Config { page_size: None, ..watcher::Config::default().any_semantic() },
                false => watcher::Config::default(),
            };
            let events = watcher::watcher(api.clone(), config).default_backoff();
            let resync = match self.wiring.settings.periodic_resync {
                d if d.is_zero() => None,
                d => Some(Instant::now() + d.mul_f64(0.8 + 0.4 * rand::rng().random::<f64>())),
            };
            match self.drive(events, resync).await {
                Ended::Resync => tracing::info!(kind = self.name(), "periodic resync (PERIODIC_RESYNC): re-listing"),
                Ended::QuorumRelist => {
                    tracing::info!(kind = self.name(), "the watch cache's list was older than the store: listing again with a quorum read")
                }
                Ended::TooLargeToListWhole => tracing::info!(
                    kind = self.name(),
                    budget = LIST_BUDGET,
                    "more objects than a list from the watch cache may hold: listing with quorum reads in pages"
                ),
                Ended::StreamEnded => {
                    // A real watcher never ends; should one, kube-rs's own backoff spaces the
                    // restarts (0.8 s doubling to 30 s, reset after 2 minutes without one).
                    let delay = restarts.next().unwrap_or(Duration::from_secs(30));
                    tracing::warn!(kind = self.name(), delay_s = delay.as_secs_f64(), "the watch stream ended; restarting it");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// Consumes watcher events until the stream ends or `resync_at` passes; handles
    /// `SKIP_REQUEUE` and the progress log meanwhile.
    pub async fn drive<S>(&mut self, events: S, resync_at: Option<Instant>) -> Ended
    where
        S: Stream<Item = Result<Event<DynamicObject>, watcher::Error>>,
    {
        let mut events = pin!(events);
        let mut next_log = Instant::now() + self.wiring.settings.progress_every;
        let mut next_check = Instant::now() + SYNC_CHECK;
        loop {
            // The writer's queue bounds what a list hands over ahead of it.
            self.wiring.sender.room().await;
            let skip_due = self.skipped.values().map(|s| s.due).min();
            let check_sync = (self.initial || self.applying).then_some(next_check);
            tokio::select! {
                kept = until_told(&mut self.checking) => {
                    self.checking = None;
                    if self.checked(kept) {
                        return Ended::QuorumRelist;
                    }
                }
                ev = events.next() => match ev {
                    Some(Ok(Event::Init)) => {
                        // Before the list is asked for: the watcher sends it once polled again.
                        // A relist of the same watcher (after `410 Gone`) of a kind grown past
                        // the budget is paged instead.
                        if self.cached && !self.wiring.lists.whole(self.watched.kind) {
                            return Ended::TooLargeToListWhole;
                        }
                        self.list_permit = None;
                        self.list_permit = self.wiring.lists.acquire(self.watched.kind, self.cached).await;
                        self.event(Event::Init);
                    }
                    Some(Ok(ev)) => {
                        let done = matches!(ev, Event::InitDone);
                        self.event(ev);
                        if done {
                            self.list_permit = None;
                        }
                    }
                    Some(Err(e)) => {
                        self.list_permit = None;
                        self.error(&e);
                    }
                    None => {
                        self.check_sync(&mut next_log, true);
                        // A sweep's report that came with the end is not lost.
                        if let Some(kept) = self.checking.as_mut().and_then(|rx| rx.try_recv().ok()) {
                            self.checking = None;
                            if self.checked(Some(kept)) {
                                return Ended::QuorumRelist;
                            }
                        }
                        return Ended::StreamEnded;
                    }
                },
                () = until(resync_at) => return Ended::Resync,
                () = until(skip_due) => self.requeue_skipped(),
                () = until(check_sync) => {
                    self.check_sync(&mut next_log, false);
                    next_check = Instant::now() + SYNC_CHECK;
                }
            }
        }
    }

    /// Handles one watcher event.
    pub fn event(&mut self, ev: Event<DynamicObject>) {
        let name = self.name();
        let m = self.wiring.kube_metrics.clone();
        match ev {
            Event::Init => {
                if !self.initial {
                    tracing::info!(kind = name, "re-listing (after a lost watch, 410 Gone or a periodic resync)");
                }
                self.listing = Some(Listing::new());
            }
            Event::InitApply(object) => self.list_object(object),
            Event::InitDone => self.list_done(),
            Event::Apply(object) => {
                m.events.with_label_values(&[name, "applied"]).inc();
                if let Some(src) = self.source_ref(&object) {
                    self.apply(src, object, None, false);
                }
            }
            Event::Delete(object) => {
                m.events.with_label_values(&[name, "deleted"]).inc();
                if let Some(src) = self.source_ref(&object) {
                    self.skipped.remove(&src);
                    self.wiring.sender.send(Change::Delete { src, origin: self.origin_watch.clone(), token: None });
                }
            }
        }
    }

    /// One object of a list (initial or re-list): counted, remembered for the sweep, applied.
    fn list_object(&mut self, object: DynamicObject) {
        let name = self.name();
        let m = self.wiring.kube_metrics.clone();
        self.available();
        m.events.with_label_values(&[name, "listed"]).inc();
        let Some(src) = self.source_ref(&object) else { return };
        let listing = self.listing.get_or_insert_with(Listing::new);
        listing.seen += 1;
        listing.present.insert(src.clone());
        if let Some(v) = object.metadata.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok()) {
            listing.newest = Some(listing.newest.map_or(v, |n| n.max(v)));
        }
        let token = if self.initial {
            self.seen_initial += 1;
            Some(self.wiring.readiness.expect_in(name, src.to_string()))
        } else {
            None
        };
        self.apply(src, object, token, true);
    }

    /// A list ended: the records of objects it did not hold are swept (from the watch cache:
    /// only those older than the list, and the list is checked), and the initial phase ends.
    fn list_done(&mut self) {
        let name = self.name();
        let m = self.wiring.kube_metrics.clone();
        self.available();
        let listing = self.listing.take().unwrap_or_default();
        m.lists.with_label_values(&[name]).inc();
        self.wiring.lists.listed(self.watched.kind, listing.seen);
        self.skipped.retain(|src, _| listing.present.contains(src));
        let secs = listing.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
        tracing::info!(
            kind = name,
            objects = listing.seen,
            seconds = format!("{secs:.3}"),
            rate = format!("{:.0}/s", listing.seen as f64 / secs.max(1e-6)),
            "listed; sweeping records of objects no longer listed"
        );
        let token = if self.initial {
            Some(self.wiring.readiness.expect_in(name, format!("sweep of {name} after the initial list")))
        } else {
            // The initial list's check that needed this (quorum) list ends with its sweep.
            self.check_token.take()
        };
        let (keep_newer_than, report) = match self.cached {
            true => {
                let (report, told) = SweepReport::new();
                self.checking = Some(told);
                if self.initial {
                    self.check_token = Some(self.wiring.readiness.expect_in(name, format!("check of {name}'s list from the watch cache")));
                }
                (Some(listing.newest.unwrap_or(0)), Some(report))
            }
            false => (None, None),
        };
        self.wiring.sender.send(Change::Sweep {
            kinds: vec![self.watched.kind],
            present: Arc::new(listing.present),
            keep_newer_than,
            report,
            token,
        });
        if self.initial {
            self.initial = false;
            self.applying = true;
            self.wiring.readiness.end_phase(&self.phase);
        }
    }

    /// Settles the sweep of a list from the watch cache, which told `outcome` (`None`: the
    /// writer stopped first); returns whether the kind must be listed again with a quorum read.
    fn checked(&mut self, outcome: Option<SweepOutcome>) -> bool {
        match outcome {
            Some(outcome) if outcome.store_is_newer() => {
                tracing::info!(
                    kind = self.name(),
                    kept = outcome.kept.len(),
                    outdated = outcome.outdated,
                    "the list from the watch cache is older than the store; listing again with a quorum read"
                );
                self.quorum_next = true;
                true
            }
            _ => {
                if let Some(t) = self.check_token.take() {
                    self.wiring.readiness.done(t);
                }
                false
            }
        }
    }

    /// Handles one watcher error (the watcher recovers by itself after the backoff).
    pub fn error(&mut self, e: &watcher::Error) {
        let name = self.name();
        let reason = classify(e);
        self.wiring.kube_metrics.errors.with_label_values(&[name, reason]).inc();
        let r = &self.watched.resource;
        match reason {
            "crd_missing" => {
                if !self.crd_missing {
                    self.crd_missing = true;
                    self.wiring.kube_metrics.crd_missing.with_label_values(&[name]).set(1);
                    self.wiring.readiness.set_missing(name, true);
                    tracing::warn!(
                        kind = name,
                        resource = %format!("{}.{}", r.plural, r.group),
                        error = %e,
                        "the CRD is not installed (404); retrying with backoff. Other kinds are not affected; install the CRD or switch the kind off with its feature flag"
                    );
                } else {
                    tracing::debug!(kind = name, error = %e, "CRD still missing");
                }
            }
            "gone" => tracing::info!(kind = name, "watch expired (410 Gone): re-listing"),
            "forbidden" | "unauthorized" => tracing::error!(
                kind = name,
                resource = %format!("{}.{}", r.plural, r.group),
                error = %e,
                "access denied: the service account needs get/list/watch on this resource (see the README, Kubernetes source); retrying with backoff"
            ),
            _ => tracing::warn!(kind = name, reason, error = %e, "watch error; retrying with backoff"),
        }
    }

    /// The CRD answered: clear the missing flag.
    fn available(&mut self) {
        if self.crd_missing {
            self.crd_missing = false;
            self.wiring.kube_metrics.crd_missing.with_label_values(&[self.name()]).set(0);
            self.wiring.readiness.set_missing(self.name(), false);
            tracing::info!(kind = self.name(), "the CRD is installed now");
        }
    }

    fn source_ref(&self, object: &DynamicObject) -> Option<SourceRef> {
        match &object.metadata.name {
            Some(n) if !n.is_empty() => Some(SourceRef {
                kind: self.watched.kind,
                namespace: object.metadata.namespace.clone().unwrap_or_default(),
                name: n.clone(),
            }),
            _ => {
                tracing::warn!(kind = self.name(), namespace = ?object.metadata.namespace, "object without metadata.name ignored");
                None
            }
        }
    }

    /// Translates `object` and sends it to the writer, or records it as skipped.
    fn apply(&mut self, src: SourceRef, mut object: DynamicObject, token: Option<Token>, listed: bool) {
        let version = object.metadata.resource_version.clone().unwrap_or_default();
        if object.types.is_none() {
            let r = &self.watched.resource;
            object.types = Some(TypeMeta { api_version: r.api_version.clone(), kind: r.kind.clone() });
        }
        let doc = match serde_json::to_value(&object) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(object = %src, error = %e, "object cannot be re-encoded; skipped");
                if let Some(t) = token {
                    self.wiring.readiness.done(t);
                }
                return;
            }
        };
        let origin = if listed { self.origin_list.clone() } else { self.origin_watch.clone() };
        // A quorum list is the cluster as it is: applied even where its versions went back.
        let authoritative = listed && !self.cached;
        self.prepare(src, version, doc, token, origin, authoritative);
    }

    fn prepare(&mut self, src: SourceRef, version: String, doc: Value, token: Option<Token>, origin: Arc<str>, authoritative: bool) {
        let handler = match self.wiring.handlers.get(src.kind) {
            Lookup::Kind(h) => h,
            Lookup::Disabled(_) | Lookup::Unknown => {
                if let Some(t) = token {
                    self.wiring.readiness.done(t);
                }
                return;
            }
        };
        let t0 = std::time::Instant::now();
        let ctx = Context { now: self.wiring.clock.now(), features: self.wiring.features };
        let max = self.wiring.handlers.max_document_bytes();
        let bytes = crate::projector::handlers::json_len(&doc, max);
        let prepared = if bytes > max {
            Err(Rejection::TooLarge { bytes, max })
        } else {
            self.wiring.handlers.prepare_managed(handler, &doc, &ctx, manager_of(&doc))
        };
        match prepared {
            Ok(record) => {
                self.skipped.remove(&src);
                self.wiring.sender.send(Change::Apply { src, version, record, origin, token, authoritative });
            }
            Err(reason) => {
                self.wiring.metrics.reconciled(src.kind.module(), outcome::SKIP, t0.elapsed().as_secs_f64());
                let repeated = self.skipped.get(&src).is_some_and(|s| s.version == version);
                if repeated {
                    tracing::debug!(object = %src, resource_version = %version, reason = %reason, "object still skipped");
                } else {
                    tracing::warn!(
                        kind = src.kind.name(),
                        namespace = %src.namespace,
                        name = %src.name,
                        resource_version = %version,
                        reason = %reason,
                        "object skipped; its previous record (if any) stays; retried after SKIP_REQUEUE or when it changes"
                    );
                }
                let due = Instant::now() + self.wiring.settings.skip_requeue;
                self.skipped.insert(src, Skipped { version, doc, due });
                if let Some(t) = token {
                    self.wiring.readiness.done(t);
                }
            }
        }
    }

    /// Translates the skipped objects whose `SKIP_REQUEUE` is due again.
    fn requeue_skipped(&mut self) {
        let now = Instant::now();
        let due: Vec<SourceRef> = self.skipped.iter().filter(|(_, s)| s.due <= now).map(|(k, _)| k.clone()).collect();
        for src in due {
            if let Some(s) = self.skipped.get(&src) {
                let (version, doc) = (s.version.clone(), s.doc.clone());
                let origin = self.origin_watch.clone();
                self.prepare(src, version, doc, None, origin, false);
            }
        }
    }

    /// Logs and exports the initial sync's progress; notices its end.
    fn check_sync(&mut self, next_log: &mut Instant, force_log: bool) {
        let name = self.name();
        let (expected, done) = self.wiring.readiness.progress(name);
        let seen = self.seen_initial;
        let m = &self.wiring.kube_metrics;
        m.initial.with_label_values(&[name, "seen"]).set(seen as i64);
        // The sweep is one of the expected items; count objects only.
        let applied = done.min(seen);
        m.initial.with_label_values(&[name, "applied"]).set(applied as i64);
        let secs = self.sync_started.elapsed().as_secs_f64();
        if self.applying && done >= expected {
            self.applying = false;
            m.synced.with_label_values(&[name]).set(1);
            tracing::info!(
                kind = name,
                objects = seen,
                seconds = format!("{secs:.3}"),
                rate = format!("{:.0}/s", seen as f64 / secs.max(1e-6)),
                "initial sync applied"
            );
            return;
        }
        if force_log || Instant::now() >= *next_log {
            *next_log = Instant::now() + self.wiring.settings.progress_every;
            let state = if self.crd_missing {
                "CRD missing"
            } else if self.initial {
                "listing"
            } else {
                "applying"
            };
            tracing::info!(
                kind = name,
                state,
                seen,
                applied,
                rate = format!("{:.0}/s", seen as f64 / secs.max(1e-6)),
                "initial sync in progress"
            );
        }
    }
}

/// What the sweep `checking` reports, once it does; never returns for `None`.
async fn until_told(checking: &mut Option<tokio::sync::oneshot::Receiver<SweepOutcome>>) -> Option<SweepOutcome> {
    match checking {
        Some(rx) => rx.await.ok(),
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`; never returns for `None`.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The metrics label of a watcher error.
pub fn classify(e: &watcher::Error) -> &'static str {
    use watcher::Error as E;
    let status = match e {
        E::InitialListFailed(kube::Error::Api(s)) | E::WatchStartFailed(kube::Error::Api(s)) | E::WatchFailed(kube::Error::Api(s)) => {
            Some(s.code)
        }
        E::WatchError(s) => Some(s.code),
        _ => None,
    };
    match (status, e) {
        (Some(404), _) => "crd_missing",
        (Some(410), _) => "gone",
        (Some(403), _) => "forbidden",
        (Some(401), _) => "unauthorized",
        (_, E::InitialListFailed(_)) => "list_failed",
        (_, E::WatchStartFailed(_)) => "watch_start_failed",
        (_, E::WatchError(_)) => "watch_error",
        (_, E::WatchFailed(_)) => "watch_failed",
        (_, E::NoResourceVersion) => "no_resource_version",
    }
}

#[cfg(test)]
mod tests;

/// Who made an object's latest change: the `manager` of its `metadata.managedFields` entry with
/// the latest `time` (the last listed of equal times; entries without a time count as oldest),
/// when non-empty and at most [`storage::history::MAX_MANAGER_BYTES`] (a longer one is not
/// kept, and logged). `None` without `managedFields`.
pub fn manager_of(doc: &serde_json::Value) -> Option<String> {
    let entries = doc.pointer("/metadata/managedFields")?.as_array()?;
    let time = |e: &serde_json::Value| e.get("time").and_then(|t| t.as_str()).and_then(|t| schema::Timestamp::parse_rfc3339(t).ok());
    let latest = entries.iter().filter(|e| e.get("manager").and_then(|m| m.as_str()).is_some_and(|m| !m.is_empty())).fold(
        None,
        |best: Option<&serde_json::Value>, e| match best {
            Some(b) if time(b) > time(e) => Some(b),
            _ => Some(e),
        },
    )?;
    let manager = latest.get("manager")?.as_str()?;
    if manager.len() > storage::history::MAX_MANAGER_BYTES {
        tracing::debug!(
            bytes = manager.len(),
            max = storage::history::MAX_MANAGER_BYTES,
            "a managedFields manager is longer than Kubernetes allows; not kept"
        );
        return None;
    }
    Some(manager.to_string())
}
