//! Prometheus metrics of the projector and the store (listed in README "What is there",
//! "Operations"). One [`Metrics`] per
//! process (its own registry, so tests can run several side by side), served at `/metrics`.

use prometheus::core::Collector;
use prometheus::{Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};
use std::sync::Arc;

/// Reconcile outcome label values.
pub mod outcome {
    /// Written or unchanged.
    pub const SUCCESS: &str = "success";
    /// Not projected (bad input or deliberately skipped).
    pub const SKIP: &str = "skip";
    /// A parent or link target is missing; retried after `DEPENDENCY_DELAY` + jitter.
    pub const DEPENDENCY_MISSING: &str = "dependency_missing";
    /// Deleted (or already gone).
    pub const DELETE_SUCCESS: &str = "delete_success";
    /// A store error; the change is retried.
    pub const ERROR: &str = "error";
}

/// The process's metrics.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// `projector_reconcile_total{module,outcome}`.
    pub reconcile_total: IntCounterVec,
    /// `projector_reconcile_duration_seconds{module,outcome}`: time to decode+translate (skips)
    /// or to apply the change inside the write transaction (seconds).
    pub reconcile_duration: HistogramVec,
    /// `projector_retries_pending`: changes waiting for a retry (a missing parent, link target
    /// or natural key, or a store error), counting one being retried until its batch is done:
    /// 0 means no retry is due or running.
    pub retries_pending: IntGauge,
    /// `controlplane_store_revision`: the revision of the last commit.
    pub store_revision: IntGauge,
    /// `controlplane_store_commit_seconds`: duration of one durable commit (seconds).
    pub store_commit_seconds: Histogram,
    /// `controlplane_order_build_step_seconds`: duration of one step of the ordering index
    /// builds (`storage::Store::build_orders`: at most one chunk of records, its commit
    /// included), the longest a change waits for a build (seconds).
    pub order_build_step_seconds: Histogram,
    /// `controlplane_order_builds_left`: ordering indexes asked for and not built yet.
    pub order_builds_left: IntGauge,
    /// The change log's size ([`HistoryMetrics`]).
    pub history: HistoryMetrics,
    /// The exports' metrics ([`ExportMetrics`]).
    pub export: ExportMetrics,
    /// `controlplane_store_write_failing`: 1 while store writes fail on the volume (no space,
    /// I/O error, read-only; the store serves what it holds and retries), else 0.
    pub store_write_failing: IntGauge,
    /// `controlplane_store_write_failures_total`: store writes (commits, reopens) that failed
    /// on the volume.
    pub store_write_failures: prometheus::IntCounter,
    /// `controlplane_http_connections`: open HTTP connections, WebSockets included.
    pub http_connections: IntGauge,
    /// `controlplane_http_connections_closed_total{reason}`: connections the server closed or
    /// refused by its limits (`idle`, `header_timeout`, `evicted`, `refused`; see
    /// `http::server`).
    pub http_connections_closed: IntCounterVec,
    /// `controlplane_store_records{kind}`: records per kind after the last commit.
    pub store_records: IntGaugeVec,
    /// `controlplane_store_bytes`: bytes on disk of the data directory (the redb file and the
    /// search index), measured at each scrape.
    pub store_bytes: IntGauge,
    /// `controlplane_graphql_requests_total{code}`: GraphQL requests by outcome: `OK` (no
    /// error), the `extensions.code` of the first error (`BAD_USER_INPUT`, `NOT_FOUND`,
    /// `FORBIDDEN`, `INTERNAL`, `TIMEOUT`, …; `INVALID_QUERY` for parse and validation errors
    /// without a code), or the HTTP refusal before execution (`UNAUTHENTICATED`, `FORBIDDEN`,
    /// `UNAVAILABLE`, `PAYLOAD_TOO_LARGE`, `REQUEST_TIMEOUT`, `BAD_REQUEST`).
    pub graphql_requests: IntCounterVec,
    /// `controlplane_graphql_request_seconds`: time from receiving a GraphQL request to its
    /// answer, authentication included (seconds).
    pub graphql_seconds: Histogram,
    /// `controlplane_graphql_planned_total`: GraphQL requests answered by their query text's
    /// plan (`graphql.plannedExecution`; `query::plan`), a subset of the `OK` requests.
    pub graphql_planned: prometheus::IntCounter,
    /// `controlplane_graphql_executing{lane}`: requests on a worker thread now, by lane
    /// (`light`, `heavy`; see `http::executor`).
    pub graphql_executing: IntGaugeVec,
    /// `controlplane_graphql_queued{lane}`: requests waiting for a worker, by lane.
    pub graphql_queued: IntGaugeVec,
    /// `controlplane_catching_up{kind}`: 1 while the kind is served from the store and its
    /// initial sync after a warm start is not applied yet, else 0; measured at each scrape
    /// ([`Metrics::observe_readiness`]).
    pub catching_up: IntGaugeVec,
    /// `controlplane_rederiving{kind}`: 1 while the kind is re-derived after an upgrade changed
    /// its derivation version, else 0; measured at each scrape.
    pub rederiving: IntGaugeVec,
    /// Bumped whenever what `/metrics`, `/readyz` or a query shows may have changed (see
    /// [`Metrics::subscribe`]).
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// Creates and registers every metric in a fresh registry.
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let reconcile_total = IntCounterVec::new(
            Opts::new("projector_reconcile_total", "Changes processed by the projector, by module (kind) and outcome."),
            &["module", "outcome"],
        )
        .expect("metric definition is valid");
        let reconcile_duration = HistogramVec::new(
            HistogramOpts::new("projector_reconcile_duration_seconds", "Time to process one change, by module and outcome.")
                .buckets(vec![0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0]),
            &["module", "outcome"],
        )
        .expect("metric definition is valid");
        let retries_pending = IntGauge::new(
            "projector_retries_pending",
            "Changes waiting for a retry (missing parent, target or natural key, store error), one being retried included.",
        )
        .expect("metric definition is valid");
        let store_revision =
            IntGauge::new("controlplane_store_revision", "Revision of the last store commit.").expect("metric definition is valid");
        let store_commit_seconds = Histogram::with_opts(
            HistogramOpts::new("controlplane_store_commit_seconds", "Duration of a durable store commit.")
                .buckets(vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]),
        )
        .expect("metric definition is valid");
        let order_build_step_seconds = Histogram::with_opts(
            HistogramOpts::new(
                "controlplane_order_build_step_seconds",
                "Duration of one step of the ordering index builds (one chunk of records and its commit).",
            )
            .buckets(vec![0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]),
        )
        .expect("metric definition is valid");
        let order_builds_left = IntGauge::new("controlplane_order_builds_left", "Ordering indexes asked for and not built yet.")
            .expect("metric definition is valid");
        let store_write_failing = IntGauge::new(
            "controlplane_store_write_failing",
            "1 while store writes fail on the volume (no space, I/O error, read-only) and are retried, else 0.",
        )
        .expect("metric definition is valid");
        let store_write_failures = prometheus::IntCounter::new(
            "controlplane_store_write_failures_total",
            "Store writes (commits, reopens) that failed on the volume.",
        )
        .expect("metric definition is valid");
        let http_connections = IntGauge::new("controlplane_http_connections", "Open HTTP connections, WebSockets included.")
            .expect("metric definition is valid");
        let http_connections_closed = IntCounterVec::new(
            Opts::new(
                "controlplane_http_connections_closed_total",
                "HTTP connections closed or refused by the server's limits, by reason (idle, header_timeout, evicted, refused, answer_timeout).",
            ),
            &["reason"],
        )
        .expect("metric definition is valid");
        let _ = ["idle", "header_timeout", "evicted", "refused", "answer_timeout"]
            .map(|reason| http_connections_closed.with_label_values(&[reason]));
        let store_records = IntGaugeVec::new(Opts::new("controlplane_store_records", "Records in the store, by kind."), &["kind"])
            .expect("metric definition is valid");
        let store_bytes = IntGauge::new("controlplane_store_bytes", "Bytes on disk of the data directory (redb file and search index).")
            .expect("metric definition is valid");
        let (graphql_requests, graphql_seconds, graphql_planned) = graphql_answers();
        let graphql_executing =
            IntGaugeVec::new(Opts::new("controlplane_graphql_executing", "GraphQL requests on a worker thread, by lane."), &["lane"])
                .expect("metric definition is valid");
        let graphql_queued =
            IntGaugeVec::new(Opts::new("controlplane_graphql_queued", "GraphQL requests waiting for a worker, by lane."), &["lane"])
                .expect("metric definition is valid");
        let catching_up = IntGaugeVec::new(
            Opts::new("controlplane_catching_up", "1 while the kind is served while its initial sync after a warm start runs, else 0."),
            &["kind"],
        )
        .expect("metric definition is valid");
        let rederiving = IntGaugeVec::new(
            Opts::new("controlplane_rederiving", "1 while the kind is re-derived after an upgrade changed its derivation version, else 0."),
            &["kind"],
        )
        .expect("metric definition is valid");
        let lanes =
            ["light", "heavy"].map(|lane| (graphql_executing.with_label_values(&[lane]), graphql_queued.with_label_values(&[lane])));
        lanes.iter().for_each(|(executing, queued)| (executing.set(0), queued.set(0)).1);
        for c in [
            Box::new(graphql_executing.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(graphql_queued.clone()),
            Box::new(reconcile_total.clone()),
            Box::new(reconcile_duration.clone()),
            Box::new(retries_pending.clone()),
            Box::new(store_revision.clone()),
            Box::new(store_commit_seconds.clone()),
            Box::new(order_build_step_seconds.clone()),
            Box::new(order_builds_left.clone()),
            Box::new(store_records.clone()),
            Box::new(store_write_failing.clone()),
            Box::new(http_connections.clone()),
            Box::new(http_connections_closed.clone()),
            Box::new(store_write_failures.clone()),
            Box::new(store_bytes.clone()),
            Box::new(graphql_requests.clone()),
            Box::new(graphql_seconds.clone()),
            Box::new(graphql_planned.clone()),
            Box::new(catching_up.clone()),
            Box::new(rederiving.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        Metrics {
            history: HistoryMetrics::new(&registry),
            export: ExportMetrics::new(&registry),
            registry,
            reconcile_total,
            reconcile_duration,
            retries_pending,
            store_revision,
            store_commit_seconds,
            order_build_step_seconds,
            order_builds_left,
            store_records,
            store_write_failing,
            store_write_failures,
            http_connections,
            http_connections_closed,
            store_bytes,
            graphql_requests,
            graphql_seconds,
            graphql_planned,
            graphql_executing,
            graphql_queued,
            catching_up,
            rederiving,
            changes: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// The registry (other components may register their metrics here).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Counts one processed change.
    pub fn reconciled(&self, module: &str, outcome: &str, seconds: f64) {
        self.reconcile_total.with_label_values(&[module, outcome]).inc();
        self.reconcile_duration.with_label_values(&[module, outcome]).observe(seconds);
        self.changes.send_modify(|n| *n += 1);
    }

    /// Counts `n` changes of `module` that ended as `outcome` without a duration (documents
    /// skipped beyond those a source keeps reports of).
    pub fn reconciled_many(&self, module: &str, outcome: &str, n: u64) {
        if n > 0 {
            self.reconcile_total.with_label_values(&[module, outcome]).inc_by(n);
            self.changes.send_modify(|c| *c += 1);
        }
    }

    /// A receiver marked changed whenever what `/metrics`, `/readyz` or a query shows may have
    /// changed: after each change the projector counts, each change of the pending retries
    /// (also the end of each writer batch), each readiness change and each search index commit
    /// ([`crate::app::App`] wires the last two). The barrier tests and tools wait on.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Sets `controlplane_catching_up` and `controlplane_rederiving` of every kind `readiness`
    /// tracks from its state now (1 for the kinds it names, 0 for the others).
    pub fn observe_readiness(&self, readiness: &crate::readiness::Readiness) {
        let status = readiness.status();
        for kind in readiness.tracked() {
            self.catching_up.with_label_values(&[kind.as_str()]).set(i64::from(status.catching_up.contains(&kind)));
            self.rederiving.with_label_values(&[kind.as_str()]).set(i64::from(status.rederiving.contains(&kind)));
        }
    }

    /// Marks [`Metrics::subscribe`] receivers changed after each change of `readiness` and
    /// each commit of `catalogue` (when given).
    pub fn follow(&self, readiness: &crate::readiness::Readiness, catalogue: Option<&storage::search::Catalogue>) {
        let metrics = self.clone();
        readiness.on_change(move || metrics.notify_waiters());
        if let Some(catalogue) = catalogue {
            let metrics = self.clone();
            catalogue.on_commit(move |_| metrics.notify_waiters());
        }
    }

    /// Marks [`Metrics::subscribe`] receivers changed: called after a change is counted through
    /// cached counters (the writer), a readiness change and a search index commit.
    pub fn notify_waiters(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Sets `projector_retries_pending` to `count` changes.
    pub fn set_retries_pending(&self, count: usize) {
        self.retries_pending.set(i64::try_from(count).unwrap_or(i64::MAX));
        self.changes.send_modify(|n| *n += 1);
    }

    /// `projector_reconcile_total` summed over every module, for one `outcome` (an
    /// [`outcome`] value).
    pub fn reconciles(&self, outcome: &str) -> u64 {
        self.reconcile_total
            .collect()
            .iter()
            .flat_map(|family| family.get_metric())
            .filter(|m| m.get_label().iter().any(|l| l.name() == "outcome" && l.value() == outcome))
            .map(|m| m.get_counter().get_value() as u64)
            .sum()
    }

    /// Waits until `condition` holds of these metrics, checking it again after every processed
    /// change and every change of the pending retries; returns whether it held before
    /// `timeout` passed.
    pub async fn wait_until(&self, timeout: std::time::Duration, mut condition: impl FnMut(&Metrics) -> bool) -> bool {
        let mut changes = self.subscribe();
        let waiting = async {
            while !condition(self) {
                // The sender lives as long as `self`.
                let _ = changes.changed().await;
            }
        };
        tokio::time::timeout(timeout, waiting).await.is_ok()
    }

    /// Counts one answered GraphQL request.
    pub fn graphql_answered(&self, code: &str, seconds: f64) {
        self.graphql_requests.with_label_values(&[code]).inc();
        self.graphql_seconds.observe(seconds);
    }

    /// The Prometheus text exposition of every registered metric.
    pub fn encode(&self) -> String {
        TextEncoder::new().encode_to_string(&self.registry.gather()).unwrap_or_else(|e| format!("# encoding metrics failed: {e}\n"))
    }
}

/// `controlplane_graphql_requests_total{code}`, `controlplane_graphql_request_seconds` and
/// `controlplane_graphql_planned_total` (see [`Metrics`]).
fn graphql_answers() -> (IntCounterVec, Histogram, prometheus::IntCounter) {
    let requests = IntCounterVec::new(
        Opts::new(
            "controlplane_graphql_requests_total",
            "GraphQL requests, by outcome code (OK, the first error's code, or the refusal's: OVERLOADED for a full queue).",
        ),
        &["code"],
    )
    .expect("metric definition is valid");
    let seconds = Histogram::with_opts(
        HistogramOpts::new("controlplane_graphql_request_seconds", "Time to answer a GraphQL request.")
            .buckets(vec![0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0]),
    )
    .expect("metric definition is valid");
    let planned = prometheus::IntCounter::new(
        "controlplane_graphql_planned_total",
        "GraphQL requests answered by their query text's plan (graphql.plannedExecution).",
    )
    .expect("metric definition is valid");
    (requests, seconds, planned)
}

/// Bytes of the regular files under `dir`, recursively (0 for what cannot be read).
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// The exports' metrics (`POST /graphql/export`, `crate::http::export`).
#[derive(Clone)]
pub struct ExportMetrics {
    /// `controlplane_exports_total{format,outcome}`: exports ended, by format (`ndjson`, `csv`)
    /// and outcome (`OK`, or the code that ended them: `TIMEOUT`, `EXPORT_TOO_LARGE`,
    /// `CLIENT_GONE`, `TOO_MANY_EXPORTS`, a GraphQL error's code…).
    pub ended: IntCounterVec,
    /// `controlplane_export_rows_total{format}`: rows sent by exports.
    pub rows: IntCounterVec,
    /// `controlplane_export_bytes_total{format}`: bytes of rows sent by exports.
    pub bytes: IntCounterVec,
    /// `controlplane_exports_running`: exports running now.
    pub running: IntGauge,
}

impl ExportMetrics {
    fn new(registry: &Registry) -> ExportMetrics {
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("metric definition is valid");
            registry.register(Box::new(c.clone())).expect("metric names are unique");
            c
        };
        let running = IntGauge::new("controlplane_exports_running", "Exports running now.").expect("metric definition is valid");
        registry.register(Box::new(running.clone())).expect("metric names are unique");
        ExportMetrics {
            ended: counter(
                "controlplane_exports_total",
                "Exports ended, by format and outcome (OK or the code that ended them).",
                &["format", "outcome"],
            ),
            rows: counter("controlplane_export_rows_total", "Rows sent by exports, by format.", &["format"]),
            bytes: counter("controlplane_export_bytes_total", "Bytes sent by exports, by format.", &["format"]),
            running,
        }
    }
}

/// The change log's metrics ([`storage::history`]), set by the writer after its batches and
/// pruning steps.
#[derive(Clone)]
pub struct HistoryMetrics {
    /// `controlplane_history_bytes`: bytes the change log keeps (entries and index keys).
    pub bytes: IntGauge,
    /// `controlplane_history_entries`: changes the log keeps.
    pub entries: IntGauge,
    /// `controlplane_history_pruned_total`: changes pruned from the log (by age, bytes or
    /// revisions per object) since the store was created.
    pub pruned: IntGauge,
}

impl HistoryMetrics {
    fn new(registry: &Registry) -> HistoryMetrics {
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("metric definition is valid");
            registry.register(Box::new(g.clone())).expect("metric names are unique");
            g
        };
        HistoryMetrics {
            bytes: gauge("controlplane_history_bytes", "Bytes the change log keeps (entries and their index keys)."),
            entries: gauge("controlplane_history_entries", "Changes the log keeps."),
            pruned: gauge(
                "controlplane_history_pruned_total",
                "Changes pruned from the log (by age, bytes or revisions per object) since the store was created.",
            ),
        }
    }

    /// Sets them from the log's `stats`.
    pub fn set(&self, stats: storage::history::HistoryStats) {
        self.bytes.set(stats.bytes as i64);
        self.entries.set(stats.entries as i64);
        self.pruned.set(stats.pruned as i64);
    }
}
