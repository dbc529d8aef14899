//! The kube source without an API server: watcher event sequences from
//! `stream::iter` drive [`KindWatch`] into a real writer and store — lists, watch events, lost
//! deletes swept after a relist, unchanged resource versions, bad objects, missing CRDs and
//! parked children of a relist that no longer holds them.

use super::*;
use crate::config::ProjectorConfig;
use crate::projector::writer::{Writer, WriterSettings};
use crate::source::manifests::split_documents;
use futures::stream;
use kube::core::Status;
use schema::{Scope, Timestamp};
use std::path::{Path, PathBuf};
use storage::Store;

type Ev = Result<Event<DynamicObject>, watcher::Error>;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The world's documents of `kind`, in file order.
fn world(kind: KindId) -> Vec<Value> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(repo().join("examples/world")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
        for chunk in split_documents(&std::fs::read_to_string(&f).unwrap()) {
            let v: Value = serde_saphyr::from_str(&chunk.text).unwrap();
            if v["kind"] == kind.name() {
                out.push(v);
            }
        }
    }
    assert!(!out.is_empty(), "the world has {}s", kind.name());
    out
}

/// `doc` as a watched object at resourceVersion `rv`.
fn object(doc: &Value, rv: u32) -> DynamicObject {
    let mut doc = doc.clone();
    doc["metadata"]["resourceVersion"] = Value::from(rv.to_string());
    serde_json::from_value(doc).unwrap()
}

fn list(docs: &[Value], rv: u32) -> Vec<Ev> {
    let mut evs = vec![Ok(Event::Init)];
    evs.extend(docs.iter().map(|d| Ok(Event::InitApply(object(d, rv)))));
    evs.push(Ok(Event::InitDone));
    evs
}

fn api_error(code: u16) -> kube::Error {
    kube::Error::Api(Status::failure("test", "Test").with_code(code).boxed())
}

struct Harness {
    _dir: Option<tempfile::TempDir>,
    store: Store,
    writer: Option<Writer>,
    wiring: Wiring,
}

impl Harness {
    /// A writer on a fresh store; readiness phases for `kinds`.
    fn new(kinds: &[KindId]) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let h = Harness::on(dir.path(), kinds);
        Harness { _dir: Some(dir), ..h }
    }

    /// A writer on the store in `dir`, dependency retries after 20 ms.
    fn on(dir: &Path, kinds: &[KindId]) -> Harness {
        Harness::with_delay(dir, kinds, Duration::from_millis(20))
    }

    /// A writer on the store in `dir`, dependency retries after `delay` (no jitter).
    fn with_delay(dir: &Path, kinds: &[KindId], delay: Duration) -> Harness {
        let store = Store::open(dir).unwrap();
        let metrics = Metrics::new();
        let readiness = Readiness::new(kinds.iter().map(|k| initial_phase(*k)));
        metrics.follow(&readiness, None);
        let projector = ProjectorConfig { dependency_delay: delay, dependency_delay_jitter: Duration::ZERO, ..ProjectorConfig::default() };
        let clock = Clock(Some(Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap()));
        let writer = Writer::spawn(store.clone(), metrics.clone(), readiness.clone(), WriterSettings::new(projector, clock)).unwrap();
        let wiring = Wiring {
            handlers: Arc::new(Handlers::new(&Features::default())),
            features: Features::default(),
            clock,
            sender: writer.sender(),
            readiness,
            kube_metrics: KubeMetrics::register(&metrics).unwrap(),
            metrics,
            settings: Settings {
                skip_requeue: Duration::from_millis(50),
                periodic_resync: Duration::ZERO,
                progress_every: Duration::from_millis(10),
            },
            warm: false,
            lists: ListBudget::new([]),
        };
        Harness { _dir: None, store, writer: Some(writer), wiring }
    }

    fn watch(&self, kind: KindId) -> KindWatch {
        let w = resources().into_iter().find(|w| w.kind == kind).unwrap();
        KindWatch::new(w, self.wiring.clone())
    }

    /// A watch whose lists come from the API server's watch cache, as `run` makes them once
    /// the store is warm.
    fn cached_watch(&self, kind: KindId) -> KindWatch {
        let mut w = self.watch(kind);
        (w.cached, w.quorum_next) = (true, false);
        w
    }

    fn count(&self, kind: KindId) -> u64 {
        self.store.read().unwrap().count(kind, &Scope::All).unwrap()
    }

    fn revision(&self) -> u64 {
        self.store.read().unwrap().revision().unwrap()
    }

    /// The value of the first metric line starting with `needle` (0 when absent).
    fn metric(&self, needle: &str) -> f64 {
        let text = self.wiring.metrics.encode();
        text.lines().find(|l| l.starts_with(needle)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).unwrap_or(0.0)
    }

    /// Waits until every change sent so far is processed once (the writer is FIFO): sends a
    /// sweep of no kind with a readiness item and waits for it.
    async fn settle(&self) {
        let token = self.wiring.readiness.expect("settle".into());
        self.wiring.sender.send(Change::Sweep {
            kinds: vec![],
            present: Arc::new(HashSet::new()),
            keep_newer_than: None,
            report: None,
            token: Some(token),
        });
        self.wait_until("the writer to catch up", || !self.wiring.readiness.status().pending.iter().any(|p| p == "settle")).await;
    }

    /// Waits until `cond` holds, checking it again after each change the writer counts and
    /// each readiness change (`Metrics::subscribe`).
    async fn wait_until(&self, what: &str, mut cond: impl FnMut() -> bool) {
        assert!(self.wiring.metrics.wait_until(Duration::from_secs(10), |_| cond()).await, "timed out waiting for {what}");
    }

    /// Stops the writer and closes the store (so the next harness can open it).
    fn stop(mut self) {
        if let Some(w) = self.writer.take() {
            w.shutdown();
        }
    }
}

async fn feed(w: &mut KindWatch, events: Vec<Ev>) {
    assert_eq!(w.drive(stream::iter(events), None).await, Ended::StreamEnded);
}

/// Lets `w` run its timers (progress checks, `SKIP_REQUEUE`) for `d` without events.
async fn idle(w: &mut KindWatch, d: Duration) {
    assert!(tokio::time::timeout(d, w.drive(stream::pending::<Ev>(), None)).await.is_err(), "a pending stream never ends");
}

#[tokio::test]
async fn list_watch_events_and_a_lost_delete_swept_after_the_relist() {
    let h = Harness::new(&[KindId::Group]);
    let groups = world(KindId::Group);
    let mut w = h.watch(KindId::Group);
    feed(&mut w, list(&groups, 1)).await;
    h.wait_until("ready", || h.wiring.readiness.is_ready()).await;
    assert_eq!(h.count(KindId::Group), groups.len() as u64);
    idle(&mut w, Duration::from_millis(300)).await;
    assert_eq!(h.metric("controlplane_kube_synced{kind=\"Group\"}"), 1.0);
    assert_eq!(h.metric("controlplane_kube_initial_sync_objects{kind=\"Group\",state=\"applied\"}"), groups.len() as f64);

    // Watch events: an update, a delete.
    let mut changed = groups[0].clone();
    changed["spec"]["displayName"] = Value::from("Renamed");
    feed(&mut w, vec![Ok(Event::Apply(object(&changed, 2))), Ok(Event::Delete(object(&groups[1], 3)))]).await;
    h.settle().await;
    assert_eq!(h.count(KindId::Group), groups.len() as u64 - 1);
    let view = h.store.read().unwrap();
    let names: Vec<String> = view
        .with_prefix::<schema::kinds::group::Group>(&schema::Key::new::<&str>(&[]))
        .unwrap()
        .into_iter()
        .map(|s| format!("{:?}", s.record))
        .collect();
    assert!(names.iter().any(|r| r.contains("Renamed")), "{names:?}");
    drop(view);

    // The delete of groups[2] is lost (the watch was down); the relist does not hold it.
    let rest: Vec<Value> = groups.iter().enumerate().filter(|(i, _)| *i != 1 && *i != 2).map(|(_, g)| g.clone()).collect();
    let mut relist = list(&rest, 4);
    relist.insert(0, Err(watcher::Error::WatchError(Status::failure("too old", "Expired").with_code(410).boxed())));
    feed(&mut w, relist).await;
    h.settle().await;
    assert_eq!(h.count(KindId::Group), groups.len() as u64 - 2, "the lost delete is swept");
    assert_eq!(h.metric("controlplane_kube_watch_errors_total{kind=\"Group\",reason=\"gone\"}"), 1.0);
    assert_eq!(h.metric("controlplane_kube_lists_total{kind=\"Group\"}"), 2.0);
    assert_eq!(h.metric("projector_reconcile_total{module=\"group\",outcome=\"delete_success\"}"), 2.0);
    assert!(h.store.read().unwrap().check_invariants().unwrap().is_empty());
}

#[tokio::test]
async fn a_second_start_on_the_same_data_lists_everything_and_writes_nothing() {
    let kinds = [KindId::Zone, KindId::Group, KindId::Team];
    let dir = tempfile::tempdir().unwrap();
    let run = |dir: PathBuf| async move {
        let h = Harness::on(&dir, &kinds);
        for k in kinds.iter().rev() {
            feed(&mut h.watch(*k), list(&world(*k), 7)).await;
        }
        h.wait_until("ready", || h.wiring.readiness.is_ready()).await;
        // Team → Group/Zone dependencies: wait for the parked teams' retries.
        h.wait_until("every team", || h.count(KindId::Team) == world(KindId::Team).len() as u64).await;
        h.settle().await;
        let rev = h.revision();
        h.stop();
        rev
    };
    let first = run(dir.path().to_path_buf()).await;
    let second = run(dir.path().to_path_buf()).await;
    assert!(first > 0);
    assert_eq!(second, first, "the revision does not move");
}

#[tokio::test]
async fn a_bad_object_is_skipped_and_requeued_without_blocking_the_list() {
    let h = Harness::new(&[KindId::Group]);
    let mut groups = world(KindId::Group);
    groups[0]["spec"] = Value::from("not an object");
    let mut w = h.watch(KindId::Group);
    feed(&mut w, list(&groups, 1)).await;
    h.wait_until("ready", || h.wiring.readiness.is_ready()).await;
    h.settle().await;
    assert_eq!(h.count(KindId::Group), groups.len() as u64 - 1, "every other object projects");
    assert_eq!(h.metric("projector_reconcile_total{module=\"group\",outcome=\"skip\"}"), 1.0);
    // SKIP_REQUEUE (50 ms here) translates it again: skipped again, counted again.
    idle(&mut w, Duration::from_millis(150)).await;
    assert!(h.metric("projector_reconcile_total{module=\"group\",outcome=\"skip\"}") >= 2.0);
    // Fixed by a watch event: projected.
    let fixed = world(KindId::Group)[0].clone();
    feed(&mut w, vec![Ok(Event::Apply(object(&fixed, 2)))]).await;
    h.settle().await;
    assert_eq!(h.count(KindId::Group), groups.len() as u64);
}

#[tokio::test]
async fn a_missing_crd_is_named_in_readiness_and_metrics_until_it_is_listed() {
    let h = Harness::new(&[KindId::Zone, KindId::FileExposure]);
    let mut zones = h.watch(KindId::Zone);
    let mut files = h.watch(KindId::FileExposure);
    feed(&mut files, vec![Ok(Event::Init), Err(watcher::Error::InitialListFailed(api_error(404)))]).await;
    feed(&mut zones, list(&world(KindId::Zone), 1)).await;
    h.settle().await;
    assert_eq!(h.count(KindId::Zone), world(KindId::Zone).len() as u64, "the other kind is not blocked");
    let st = h.wiring.readiness.status();
    assert!(!st.ready);
    assert_eq!(st.missing_kinds, vec!["FileExposure"]);
    assert_eq!(st.pending_phases, vec![initial_phase(KindId::FileExposure)]);
    assert_eq!(h.metric("controlplane_kube_crd_missing{kind=\"FileExposure\"}"), 1.0);
    assert_eq!(h.metric("controlplane_kube_watch_errors_total{kind=\"FileExposure\",reason=\"crd_missing\"}"), 1.0);

    // Installed: an empty list.
    feed(&mut files, vec![Ok(Event::Init), Ok(Event::InitDone)]).await;
    h.wait_until("ready", || h.wiring.readiness.is_ready()).await;
    assert!(h.wiring.readiness.status().missing_kinds.is_empty());
    assert_eq!(h.metric("controlplane_kube_crd_missing{kind=\"FileExposure\"}"), 0.0);
}

#[tokio::test]
async fn a_parked_child_is_dropped_when_the_relist_no_longer_holds_it() {
    let h = Harness::new(&[KindId::Zone, KindId::Team, KindId::Application]);
    let apps = world(KindId::Application);
    let mut w = h.watch(KindId::Application);
    // Applications before their teams and zones: parked (dependency missing), retried.
    feed(&mut w, list(&apps[..1], 1)).await;
    h.wait_until("parked", || h.metric("projector_reconcile_total{module=\"application\",outcome=\"dependency_missing\"}") >= 2.0).await;
    // Deleted while the watch was down: the relist is empty.
    feed(&mut w, vec![Ok(Event::Init), Ok(Event::InitDone)]).await;
    // The parents arrive.
    feed(&mut h.watch(KindId::Zone), list(&world(KindId::Zone), 2)).await;
    feed(&mut h.watch(KindId::Team), list(&world(KindId::Team), 2)).await;
    h.settle().await;
    h.settle().await;
    assert_eq!(h.wiring.metrics.retries_pending.get(), 0, "nothing waits for a retry");
    assert_eq!(h.count(KindId::Team), world(KindId::Team).len() as u64);
    assert_eq!(h.count(KindId::Application), 0, "the swept application does not come back");
}

#[test]
fn errors_are_classified_for_metrics() {
    use watcher::Error as E;
    let cases: Vec<(E, &str)> = vec![
        (E::InitialListFailed(api_error(404)), "crd_missing"),
        (E::WatchStartFailed(api_error(404)), "crd_missing"),
        (E::WatchError(Status::failure("gone", "Expired").with_code(410).boxed()), "gone"),
        (E::InitialListFailed(api_error(403)), "forbidden"),
        (E::InitialListFailed(api_error(401)), "unauthorized"),
        (E::InitialListFailed(api_error(500)), "list_failed"),
        (E::WatchStartFailed(api_error(500)), "watch_start_failed"),
        (E::WatchError(Status::failure("x", "InternalError").with_code(500).boxed()), "watch_error"),
        (E::WatchFailed(api_error(500)), "watch_failed"),
        (E::NoResourceVersion, "no_resource_version"),
    ];
    for (e, reason) in cases {
        assert_eq!(classify(&e), reason, "{e}");
    }
}

#[test]
fn watched_resources_come_from_the_cr_types_and_match_the_kind_table() {
    let r = resources();
    assert_eq!(r.iter().map(|w| w.kind).collect::<Vec<_>>(), schema::registry::registered());
    for w in &r {
        assert_eq!(w.resource.group, w.kind.group(), "{:?}", w.kind);
        assert_eq!(w.resource.plural, w.kind.plural(), "{:?}", w.kind);
        assert_eq!(w.resource.kind, w.kind.name(), "{:?}", w.kind);
        assert_eq!(w.resource.api_version, format!("{}/v1", w.kind.group()), "{:?}", w.kind);
    }
}

/// The README's section "Kubernetes source" holds a ClusterRole whose rules are exactly
/// [`rbac_rules`]: get/list/watch on every watched group and plural, nothing else.
#[test]
fn the_documented_rbac_rules_equal_the_registry() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme.split("\n## Kubernetes source").nth(1).expect("README section `## Kubernetes source`");
    let yaml = section.split("```yaml\n").nth(1).and_then(|s| s.split("```").next()).expect("a yaml block in the section");
    let role: Value = serde_saphyr::from_str(yaml).unwrap();
    assert_eq!(role["kind"], "ClusterRole");
    let mut documented = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        let verbs: Vec<&str> = rule["verbs"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        assert_eq!(verbs, ["get", "list", "watch"], "{rule}");
        let groups = rule["apiGroups"].as_array().unwrap();
        assert_eq!(groups.len(), 1, "one group per rule: {rule}");
        let plurals: Vec<String> = rule["resources"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
        documented.push((groups[0].as_str().unwrap().to_string(), plurals));
    }
    assert_eq!(documented, rbac_rules(&schema::kind::Features::default()));
}

#[tokio::test]
async fn children_listed_first_are_retried_as_soon_as_their_parents_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let kinds = [KindId::Zone, KindId::Group, KindId::Team, KindId::Application];
    // A dependency delay far beyond the test's patience: only the wake-up can converge it.
    let h = Harness::with_delay(dir.path(), &kinds, Duration::from_secs(600));
    for k in kinds.iter().rev() {
        feed(&mut h.watch(*k), list(&world(*k), 1)).await;
    }
    h.wait_until("ready", || h.wiring.readiness.is_ready()).await;
    assert!(h.metric("projector_reconcile_total{module=\"application\",outcome=\"dependency_missing\"}") > 0.0, "they were parked");
    h.wait_until("every application", || h.count(KindId::Application) == world(KindId::Application).len() as u64).await;
    assert_eq!(h.count(KindId::Team), world(KindId::Team).len() as u64);
    h.stop();
}

/// An object larger than `source.maxDocumentBytes` is skipped like any bad object, and the
/// record stored from its earlier, smaller version stays.
#[tokio::test]
async fn an_oversized_object_is_skipped_and_its_stored_record_stays() {
    let mut h = Harness::new(&[KindId::Group]);
    h.wiring.handlers = Arc::new(Handlers::new(&Features::default()).with_max_document_bytes(4096));
    let groups = world(KindId::Group);
    let mut w = h.watch(KindId::Group);
    feed(&mut w, list(&groups, 1)).await;
    h.wait_until("ready", || h.wiring.readiness.is_ready()).await;
    h.settle().await;
    assert_eq!(h.count(KindId::Group), groups.len() as u64);
    let revision = h.revision();
    let mut huge = groups[0].clone();
    huge["spec"]["description"] = Value::from("x".repeat(8192));
    feed(&mut w, vec![Ok(Event::Apply(object(&huge, 2)))]).await;
    h.settle().await;
    assert_eq!(h.metric("projector_reconcile_total{module=\"group\",outcome=\"skip\"}"), 1.0);
    assert_eq!(h.count(KindId::Group), groups.len() as u64, "the stored record stays");
    assert_eq!(h.revision(), revision, "nothing was written");
}

/// The stored `resourceVersion` of each of the world's groups (`None`: not stored), in order.
fn group_versions(h: &Harness) -> Vec<Option<String>> {
    let view = h.store.read().unwrap();
    world(KindId::Group)
        .iter()
        .map(|g| {
            let (ns, name) = (g["metadata"]["namespace"].as_str().unwrap(), g["metadata"]["name"].as_str().unwrap());
            view.source_version(KindId::Group, ns, name).unwrap().map(|(_, v)| v)
        })
        .collect()
}

/// A list from the API server's watch cache can be older than the store. An older version of a
/// listed object never replaces the stored one; an object not listed whose stored version is at
/// most the newest listed one is deleted (it existed before the list and is gone from it); one
/// whose stored version is newer may have been created after the list was taken: it is kept and
/// the kind is listed again with a quorum read, whose sweep settles it. The initial list's check
/// holds the kind's sync until then.
#[tokio::test]
async fn a_list_from_the_watch_cache_never_takes_the_store_back_in_time() {
    let h = Harness::new(&[KindId::Group]);
    let groups = world(KindId::Group);
    assert!(groups.len() >= 4, "the world has four groups");
    // The store, from an earlier run: groups 0..4 at versions 10, 20, 30, 15.
    let mut earlier = vec![Ok(Event::Init)];
    earlier.extend([(0, 10), (1, 20), (2, 30), (3, 15)].map(|(i, rv)| Ok(Event::InitApply(object(&groups[i], rv)))));
    earlier.push(Ok(Event::InitDone));
    let mut w = h.watch(KindId::Group);
    feed(&mut w, earlier).await;
    h.settle().await;
    let before = group_versions(&h);
    assert!(before[..4].iter().all(Option::is_some), "{before:?}");

    // A restart whose first list comes from a cache at version 20: group 0 at an older version
    // (with another display name), group 1 as stored; 2 (stored at 30) and 3 (stored at 15) not
    // listed.
    let h2 = Harness { _dir: None, store: h.store.clone(), writer: None, wiring: h.wiring.clone() };
    let mut w = h2.cached_watch(KindId::Group);
    let mut stale = groups[0].clone();
    stale["spec"]["displayName"] = Value::from("From a stale cache");
    let cached =
        vec![Ok(Event::Init), Ok(Event::InitApply(object(&stale, 5))), Ok(Event::InitApply(object(&groups[1], 20))), Ok(Event::InitDone)];
    let ended = w.drive(stream::iter(cached).chain(stream::pending()), None).await;
    assert_eq!(ended, Ended::QuorumRelist, "group 2 may be newer than the list");
    let after = group_versions(&h);
    assert_eq!(after[0], before[0], "an older version never replaces the stored one");
    assert_eq!(after[2].as_deref(), Some("30"), "kept: possibly created after the list");
    assert_eq!(after[3], None, "stored at 15, not in a list of version 20 or more: gone");
    assert!(w.quorum_next);
    let view = h.store.read().unwrap();
    let records = view.with_prefix::<schema::kinds::group::Group>(&schema::Key::new::<&str>(&[])).unwrap();
    assert!(records.iter().all(|s| !format!("{:?}", s.record).contains("From a stale cache")));
    drop(view);
    assert!(!h.wiring.readiness.is_settled(), "the initial list's check waits for the quorum relist");

    // The quorum relist (what `run` starts next) does not hold group 2 either: it is gone.
    w.cached = false;
    let quorum = list(&[groups[0].clone(), groups[1].clone()], 40);
    feed(&mut w, quorum).await;
    h.settle().await;
    let settled = group_versions(&h);
    assert_eq!(settled[..4], [Some("40".to_string()), Some("40".to_string()), None, None]);
    h.wait_until("the check to settle", || h.wiring.readiness.is_settled()).await;
    assert!(h.store.read().unwrap().check_invariants().unwrap().is_empty());
}

/// A list from the watch cache that holds every stored object, or only newer versions, needs no
/// quorum read.
#[tokio::test]
async fn a_list_from_the_watch_cache_as_new_as_the_store_needs_no_quorum_read() {
    let h = Harness::new(&[KindId::Group]);
    let groups = world(KindId::Group);
    let mut w = h.watch(KindId::Group);
    feed(&mut w, list(&groups, 10)).await;
    h.settle().await;
    let mut w = h.cached_watch(KindId::Group);
    // The last group was deleted meanwhile; the others are listed as stored. The stream ends once
    // the writer has processed the sweep (and told what it kept).
    let cached = list(&groups[..groups.len() - 1], 10);
    let processed = stream::once(h.settle()).filter_map(|()| async { None });
    assert_eq!(w.drive(stream::iter(cached).chain(processed), None).await, Ended::StreamEnded, "no quorum relist");
    assert!(!w.quorum_next && w.checking.is_none());
    assert!(h.wiring.readiness.is_settled());
    assert_eq!(h.count(KindId::Group), groups.len() as u64 - 1);
}

/// Lists from the watch cache hold at most [`LIST_BUDGET`] objects at once: a kind's list weighs
/// what the store holds of it, so two large kinds list one after the other, and a paged list
/// weighs one; a kind larger than the budget is not listed whole at all, and a list's count is
/// the kind's weight from then on.
#[tokio::test]
async fn the_list_budget_lets_large_cached_lists_run_one_after_the_other() {
    use futures::FutureExt;
    let half = u64::from(LIST_BUDGET) / 2;
    let budget = ListBudget::new([(KindId::Approval, half + 1), (KindId::ApprovalRequest, u64::from(LIST_BUDGET)), (KindId::Zone, 0)]);
    let approvals = budget.acquire(KindId::Approval, true).await.unwrap();
    assert!(budget.acquire(KindId::ApprovalRequest, true).now_or_never().is_none(), "the largest waits for the whole budget");
    assert!(budget.acquire(KindId::Zone, true).now_or_never().unwrap().is_some(), "an empty kind weighs one");
    assert!(budget.acquire(KindId::ApprovalRequest, false).now_or_never().unwrap().is_some(), "a paged list weighs one");
    drop(approvals);
    let all = budget.acquire(KindId::ApprovalRequest, true).now_or_never().unwrap().unwrap();
    assert_eq!(all.num_permits(), LIST_BUDGET as usize);
    assert!(budget.acquire(KindId::Group, true).now_or_never().is_none(), "nothing else while it lists");
    drop(all);
    assert!(budget.whole(KindId::ApprovalRequest) && budget.whole(KindId::Group));
    budget.listed(KindId::ApprovalRequest, u64::from(LIST_BUDGET) + 1);
    assert!(!budget.whole(KindId::ApprovalRequest), "grown past the budget: paged from now on");
    budget.listed(KindId::ApprovalRequest, 3);
    assert!(budget.whole(KindId::ApprovalRequest));
}

/// A kind larger than the budget is never listed whole: a watcher from the watch cache ends at
/// its `Init` (before the list is asked for), and a list that found the kind grown past the
/// budget makes the next `Init` end too.
#[tokio::test]
async fn a_kind_larger_than_the_list_budget_is_listed_in_pages() {
    let h = Harness::new(&[KindId::Group]);
    let groups = world(KindId::Group);
    let mut w = h.cached_watch(KindId::Group);
    w.wiring.lists.listed(KindId::Group, u64::from(LIST_BUDGET) + 1);
    assert_eq!(w.drive(stream::iter(list(&groups, 10)), None).await, Ended::TooLargeToListWhole);
    assert_eq!(w.seen_initial, 0, "nothing was listed");
    // Listed whole while small; the list's count is the kind's weight.
    w.wiring.lists.listed(KindId::Group, 1);
    let processed = stream::once(h.settle()).filter_map(|()| async { None });
    assert_eq!(w.drive(stream::iter(list(&groups, 10)).chain(processed), None).await, Ended::StreamEnded);
    assert_eq!(w.seen_initial, groups.len() as u64);
    w.wiring.lists.listed(KindId::Group, u64::from(LIST_BUDGET) + 1);
    assert_eq!(w.drive(stream::iter(vec![Ok(Event::Init)]), None).await, Ended::TooLargeToListWhole, "the relist is paged");
    // A paged watcher lists it.
    w.cached = false;
    let processed = stream::once(h.settle()).filter_map(|()| async { None });
    assert_eq!(w.drive(stream::iter(list(&groups, 11)).chain(processed), None).await, Ended::StreamEnded);
    assert_eq!(h.count(KindId::Group), groups.len() as u64);
}

/// A quorum list is the cluster as it is: an object whose `resourceVersion` went back (a
/// recreated cluster, an etcd restore) is applied, where a watch event or a list from the watch
/// cache of that version is not.
#[tokio::test]
async fn a_quorum_list_applies_an_object_whose_version_went_back() {
    let h = Harness::new(&[KindId::Group]);
    let groups = world(KindId::Group);
    let mut w = h.watch(KindId::Group);
    (w.cached, w.quorum_next) = (false, false);
    feed(&mut w, list(&groups, 1000)).await;
    h.settle().await;
    let mut restored = groups[0].clone();
    restored["spec"]["displayName"] = Value::from("From the restored cluster");
    // A watch event of that smaller version is older than the store.
    feed(&mut w, vec![Ok(Event::Apply(object(&restored, 7)))]).await;
    h.settle().await;
    assert_eq!(group_versions(&h)[0].as_deref(), Some("1000"));
    // The quorum list of the restored cluster is applied.
    let mut relist = groups.clone();
    relist[0] = restored;
    feed(&mut w, list(&relist, 7)).await;
    h.settle().await;
    assert!(group_versions(&h).iter().all(|v| v.as_deref() == Some("7")), "{:?}", group_versions(&h));
}
