//! The kube source end to end: the server started in-process against a
//! fake Kubernetes API server (`support/fake_k8s.rs`, plain HTTP on 127.0.0.1) holding the
//! bundled world, queried over HTTP. Stores are compared record by record (every kind, key,
//! record, links and times) with a projection of the same objects by the manifests source.

#[path = "support/fake_k8s.rs"]
mod fake_k8s;
mod support;

use control_plane::app::App;
use control_plane::config::Config;
use control_plane::metrics::outcome;
use control_plane::Running;
use fake_k8s::FakeK8s;
use schema::registry::KindVisitor;
use schema::{Key, Kind, KindId, Timestamp};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use storage::Store;

fn reference_time() -> Timestamp {
    Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap()
}

fn admin() -> String {
    support::token("platform--ops--console", "tardis:admin:all", "poc")
}

/// Short dependency retries, the clock pinned to the world's reference time.
fn tune(mut c: Config) -> Config {
    c.now = Some(reference_time());
    c.projector.dependency_delay = Duration::from_millis(50);
    c.projector.dependency_delay_jitter = Duration::from_millis(50);
    c
}

/// The control plane, in process, on the kube source.
struct Cp {
    running: Running,
    base: String,
    http: reqwest::Client,
    started: Instant,
}

impl Cp {
    async fn start(fake: &FakeK8s, data: &Path) -> Cp {
        Cp::start_with(tune(Config::for_kube(&fake.url(), data))).await
    }

    async fn start_with(config: Config) -> Cp {
        let started = Instant::now();
        let running = control_plane::start(config).await.unwrap();
        let base = format!("http://{}", running.local_addr());
        Cp { running, base, http: reqwest::Client::new(), started }
    }

    fn store(&self) -> &Store {
        self.running.app().store()
    }

    async fn readyz(&self) -> (u16, Value) {
        let r = self.http.get(format!("{}/readyz", self.base)).send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    /// Waits for `/readyz` 200; returns the time since start.
    async fn ready(&self) -> Duration {
        let ready = self.running.app().wait_caught_up(Duration::from_secs(30)).await;
        let took = self.started.elapsed();
        let (code, body) = self.readyz().await;
        assert!(ready && code == 200, "not ready after 30 s: {body}");
        took
    }

    /// The value of the first metric line starting with `needle` (0 when absent).
    async fn metric(&self, needle: &str) -> f64 {
        let text = self.http.get(format!("{}/metrics", self.base)).send().await.unwrap().text().await.unwrap();
        text.lines().find(|l| l.starts_with(needle)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).unwrap_or(0.0)
    }

    /// An admin query: the HTTP status and the whole answer (`data`, `errors`, `extensions`).
    async fn answer(&self, query: &str) -> (u16, Value) {
        let r = self
            .http
            .post(format!("{}/graphql/query", self.base))
            .bearer_auth(admin())
            .json(&json!({ "query": query }))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    /// An admin query that must succeed.
    async fn query(&self, query: &str) -> Value {
        let (_, body) = self.answer(query).await;
        assert!(body["errors"].is_null(), "{query}: {body}");
        body["data"].clone()
    }

    async fn stop(self) {
        self.running.shutdown().await.unwrap();
    }
}

/// Every record of the store: `Kind [key parts]` → the stored record with links and times.
fn dump(store: &Store) -> BTreeMap<String, String> {
    struct D<'a>(&'a storage::ReadView, BTreeMap<String, String>);
    impl KindVisitor for D<'_> {
        fn visit<K: Kind>(&mut self) {
            for s in self.0.with_prefix::<K>(&Key::new::<&str>(&[])).unwrap() {
                self.1.insert(format!("{} {:?}", K::ID.name(), s.key.parts().unwrap()), format!("{s:?}"));
            }
        }
    }
    let view = store.read().unwrap();
    assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
    let mut d = D(&view, BTreeMap::new());
    schema::registry::visit(&mut d);
    d.1
}

/// The store of `app` once settled: ready, then rounds in which each change waiting for a
/// retry (a child parked for its parent, a link without its target) is retried once, until a
/// whole round writes nothing.
async fn settled(app: &App) -> BTreeMap<String, String> {
    assert!(app.wait_caught_up(Duration::from_secs(30)).await);
    let metrics = app.metrics();
    let processed = |m: &control_plane::metrics::Metrics| {
        [outcome::SUCCESS, outcome::SKIP, outcome::DEPENDENCY_MISSING, outcome::DELETE_SUCCESS, outcome::ERROR]
            .into_iter()
            .map(|o| m.reconciles(o))
            .sum::<u64>()
    };
    for _round in 0..100 {
        let revision = app.store().read().unwrap().revision().unwrap();
        let (pending, before) = (metrics.retries_pending.get() as u64, processed(metrics));
        // A retry waits up to the longest backoff: a link without its target retried since
        // the load began may be that far from its next attempt on a slow machine.
        let round = control_plane::projector::retry::MAX_DEPENDENCY_DELAY + Duration::from_secs(30);
        assert!(metrics.wait_until(round, |m| processed(m) >= before + pending).await, "the retries stopped");
        if app.store().read().unwrap().revision().unwrap() == revision {
            return dump(app.store());
        }
    }
    panic!("the store does not settle: every round of retries writes again");
}

/// The store the manifests source builds from the fake server's current objects.
async fn reference(fake: &FakeK8s) -> BTreeMap<String, String> {
    let tmp = tempfile::tempdir().unwrap();
    let manifests = tmp.path().join("manifests");
    fake.write_manifests(&manifests);
    let config = tune(Config::for_manifests(&manifests, &tmp.path().join("data")));
    let app = tokio::task::spawn_blocking(move || App::start(config).unwrap()).await.unwrap();
    let d = settled(&app).await;
    tokio::task::spawn_blocking(move || app.shutdown()).await.unwrap();
    d
}

/// Waits until the store equals `expected`, checking again after each commit; on timeout,
/// fails naming the differences.
async fn converges_to(store: &Store, expected: &BTreeMap<String, String>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let revision = store.read().unwrap().revision().unwrap();
        let got = dump(store);
        if &got == expected {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let store = store.clone();
        let moved = tokio::task::spawn_blocking(move || store.wait_for_revision_after(revision, left).unwrap()).await.unwrap();
        if moved <= revision {
            let missing: Vec<_> = expected.keys().filter(|k| !got.contains_key(*k)).take(5).collect();
            let extra: Vec<_> = got.keys().filter(|k| !expected.contains_key(*k)).take(5).collect();
            let differ: Vec<_> = expected.iter().filter(|(k, v)| got.get(*k).is_some_and(|g| g != *v)).map(|(k, _)| k).take(5).collect();
            panic!(
                "{what}: the store differs ({} records, expected {}): missing {missing:?}, extra {extra:?}, different {differ:?}",
                got.len(),
                expected.len()
            );
        }
    }
}

/// Starts on `data`, waits for ready and for the store to equal what the manifests source
/// builds from the fake server's objects; returns the server and that store.
async fn first_start(fake: &FakeK8s, data: &Path) -> (Cp, BTreeMap<String, String>) {
    let cp = Cp::start(fake, data).await;
    cp.ready().await;
    let expected = reference(fake).await;
    converges_to(cp.store(), &expected, "first start").await;
    (cp, expected)
}

/// Waits until every registered kind but `held` has had its initial list processed by the writer
/// (`/admin/v1/status` would say `synced`).
async fn synced_except(app: &App, held: &[KindId]) {
    let readiness = app.readiness();
    let others = || {
        schema::registry::registered()
            .into_iter()
            .filter(|k| !held.contains(k))
            .all(|k| readiness.kind_state(k.name()) == control_plane::readiness::SyncState::Synced)
    };
    assert!(app.metrics().wait_until(Duration::from_secs(30), |_| others()).await, "the other kinds did not sync");
}

/// Waits until `cond` holds, checking again after each change the server reports and each
/// request the fake API server answers.
async fn wait_for(cp: &Cp, fake: &FakeK8s, what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let (mut server, mut api) = (cp.running.app().metrics().subscribe(), fake.requests());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        server.borrow_and_update();
        api.borrow_and_update();
        if cond().await {
            return;
        }
        let changed = async {
            tokio::select! {
                _ = server.changed() => {}
                _ = api.changed() => {}
            }
        };
        assert!(tokio::time::timeout_at(deadline, changed).await.is_ok(), "timed out waiting for {what}");
    }
}

fn team_doc(name: &str, display: &str) -> Value {
    json!({
        "apiVersion": "organization.cp.ei.telekom.de/v1",
        "kind": "Team",
        "metadata": {"name": format!("payments--{name}"), "namespace": "poc", "labels": {"cp.ei.telekom.de/environment": "poc"},
                     "creationTimestamp": "2026-05-01T00:00:00Z"},
        "spec": {"name": name, "group": "payments", "email": format!("{name}@example.com"), "category": "Customer",
                 "members": [{"name": "A", "email": "a@example.com"}], "displayName": display},
        "status": {"namespace": format!("poc--payments--{name}")}
    })
}

async fn team_display_name(cp: &Cp, name: &str) -> Option<String> {
    let data = cp.query("{ teams { edges { node { name displayname } } } }").await;
    data["teams"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["node"]["name"] == name)
        .map(|e| e["node"]["displayname"].as_str().unwrap_or_default().to_string())
}

/// The world over the fake API server: ready, equal to the manifests projection; a created,
/// updated and deleted object reaches GraphQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_and_delete_reach_graphql() {
    let fake = FakeK8s::start_world().await;
    let data = tempfile::tempdir().unwrap();
    let cp = Cp::start(&fake, data.path()).await;
    let took = cp.ready().await;
    println!("the world ({} objects) over the fake API server: ready {} ms after start", fake.objects().len(), took.as_millis());
    let facts = support::facts();
    let total = |k: &str| facts["env"]["poc"]["counts"][k].as_u64().unwrap() + facts["env"]["qa"]["counts"][k].as_u64().unwrap();
    let expected = reference(&fake).await;
    converges_to(cp.store(), &expected, "initial sync").await;
    let data_ = cp.query("{ teams { totalCount } applications { totalCount } apiSubscriptions { totalCount } }").await;
    assert_eq!(data_["teams"]["totalCount"], json!(total("Team")));
    assert_eq!(data_["applications"]["totalCount"], json!(total("Application")));
    assert_eq!(data_["apiSubscriptions"]["totalCount"], json!(total("ApiSubscription")));

    fake.apply(team_doc("newcomers", "Newcomers"));
    wait_for(&cp, &fake, "the created team", async || team_display_name(&cp, "payments--newcomers").await.as_deref() == Some("Newcomers"))
        .await;
    fake.apply(team_doc("newcomers", "Renamed"));
    wait_for(&cp, &fake, "the updated team", async || team_display_name(&cp, "payments--newcomers").await.as_deref() == Some("Renamed"))
        .await;
    assert!(fake.delete(KindId::Team, "poc", "payments--newcomers"));
    wait_for(&cp, &fake, "the deleted team", async || team_display_name(&cp, "payments--newcomers").await.is_none()).await;
    assert_eq!(cp.metric("controlplane_kube_events_total{event=\"deleted\",kind=\"Team\"}").await, 1.0);
    assert_eq!(cp.metric("controlplane_kube_synced{kind=\"Team\"}").await, 1.0);
    assert_eq!(fake.lists(KindId::Team), 1, "no relist was needed");
    converges_to(cp.store(), &expected, "after create, update, delete").await;
    cp.stop().await;
}

/// A delete that happens while the watch is down (and whose event is compacted away) is swept
/// after the relist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_while_the_watch_is_down_is_swept_after_the_relist() {
    let fake = FakeK8s::start_world().await;
    let data = tempfile::tempdir().unwrap();
    let cp = Cp::start(&fake, data.path()).await;
    cp.ready().await;
    // An application nothing refers to (deleting a parent alone would leave its children's
    // records, which a fresh projection would not write: ARCHITECTURE.md "References by natural key").
    let mut app = fake.objects().into_iter().find(|o| o["kind"] == "Application").unwrap();
    app["metadata"]["name"] = json!("lonely");
    app["metadata"]["labels"]["cp.ei.telekom.de/application"] = json!("lonely");
    let (ns, name) = (app["metadata"]["namespace"].as_str().unwrap().to_string(), "lonely".to_string());
    let count = async || cp.query("{ applications { totalCount } }").await["applications"]["totalCount"].as_u64().unwrap();
    let before = count().await;
    fake.apply(app);
    wait_for(&cp, &fake, "the new application", async || count().await == before + 1).await;
    let before = before + 1;

    fake.block_watches(true);
    wait_for(&cp, &fake, "the watch to be refused", async || fake.refused_watches(KindId::Application) > 0).await;
    assert!(fake.delete(KindId::Application, &ns, &name));
    fake.compact();
    fake.block_watches(false);
    wait_for(&cp, &fake, "the sweep", async || count().await == before - 1).await;
    assert_eq!(fake.lists(KindId::Application), 2, "one relist");
    assert_eq!(cp.metric("controlplane_kube_events_total{event=\"deleted\",kind=\"Application\"}").await, 0.0, "no delete event arrived");
    assert!(cp.metric("controlplane_kube_watch_errors_total{kind=\"Application\",reason=\"gone\"}").await >= 1.0);
    converges_to(cp.store(), &reference(&fake).await, "after the relist").await;
    cp.stop().await;
}

/// `410 Gone` on every watch after changes no watch saw: every kind relists, and the store
/// equals the server's state, record by record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_leads_to_a_relist_and_the_store_equals_the_server() {
    let fake = FakeK8s::start_world().await;
    let data = tempfile::tempdir().unwrap();
    let cp = Cp::start(&fake, data.path()).await;
    cp.ready().await;
    converges_to(cp.store(), &reference(&fake).await, "initial sync").await;

    let objects = fake.objects();
    let of = |kind: &str| objects.iter().filter(|o| o["kind"] == kind).cloned().collect::<Vec<_>>();
    let id = |o: &Value| {
        (o["metadata"]["namespace"].as_str().unwrap_or_default().to_string(), o["metadata"]["name"].as_str().unwrap().to_string())
    };
    fake.silently(|objs| {
        // An update, a new team, and a subscription deleted with what Kubernetes' garbage
        // collector deletes with it (its approvals and approval requests, which name it in the
        // `cp.ei.telekom.de/target.name` label). A parent deleted alone leaves its children's
        // records in place (ARCHITECTURE.md "References by natural key"), which a fresh projection would not write.
        let mut team = of("Team")[0].clone();
        team["spec"]["displayName"] = json!("Changed while nobody watched");
        objs.apply(team);
        objs.apply(team_doc("silent", "Silent"));
        let sub = of("ApiSubscription").into_iter().find(|s| s["metadata"]["name"] == "copilot-gateway--logistics-parcels-v1").unwrap();
        let (ns, n) = id(&sub);
        assert!(objs.delete(KindId::ApiSubscription, &ns, &n));
        let mut cascaded = 0;
        for (kind, k) in [("Approval", KindId::Approval), ("ApprovalRequest", KindId::ApprovalRequest)] {
            for child in of(kind) {
                let labels = &child["metadata"]["labels"];
                if child["metadata"]["namespace"] == ns.as_str() && labels["cp.ei.telekom.de/target.name"] == n.as_str() {
                    let (cns, cn) = id(&child);
                    assert!(objs.delete(k, &cns, &cn));
                    cascaded += 1;
                }
            }
        }
        assert!(cascaded >= 2, "the subscription's approval and request");
    });
    fake.expire_watches();
    wait_for(&cp, &fake, "every kind to relist", async || schema::registry::registered().into_iter().all(|k| fake.lists(k) >= 2)).await;
    converges_to(cp.store(), &reference(&fake).await, "after 410 and the relists").await;
    assert!(cp.metric("controlplane_kube_watch_errors_total{kind=\"Team\",reason=\"gone\"}").await >= 1.0);
    assert_eq!(team_display_name(&cp, "payments--silent").await.as_deref(), Some("Silent"));

    // A dropped connection resumes from the last revision: events are not lost, no relist.
    let lists = fake.lists(KindId::Team);
    fake.drop_watches();
    fake.apply(team_doc("after-drop", "After the drop"));
    wait_for(&cp, &fake, "the team created after the drop", async || team_display_name(&cp, "payments--after-drop").await.is_some()).await;
    assert_eq!(fake.lists(KindId::Team), lists, "a dropped watch resumes without a relist");
    cp.stop().await;
}

/// A kind whose CRD is not installed does not block the others; readiness names it; once it is
/// installed it is listed (after backoff) and the server becomes ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_crd_does_not_block_other_kinds() {
    let fake = FakeK8s::start_world().await;
    fake.set_installed(KindId::FileSubscription, false);
    let data = tempfile::tempdir().unwrap();
    let cp = Cp::start(&fake, data.path()).await;
    wait_for(&cp, &fake, "every other kind synced", async || {
        let mut all = true;
        for k in schema::registry::registered().into_iter().filter(|k| *k != KindId::FileSubscription) {
            all &= cp.metric(&format!("controlplane_kube_synced{{kind=\"{}\"}}", k.name())).await == 1.0;
        }
        all
    })
    .await;
    let (code, body) = cp.readyz().await;
    assert_eq!(code, 503);
    assert_eq!(body["missingKinds"], json!(["FileSubscription"]));
    assert_eq!(body["pendingPhases"], json!(["initial list of FileSubscription"]));
    assert_eq!(cp.metric("controlplane_kube_crd_missing{kind=\"FileSubscription\"}").await, 1.0);
    assert!(cp.metric("controlplane_kube_watch_errors_total{kind=\"FileSubscription\",reason=\"crd_missing\"}").await >= 1.0);
    let data_ = cp.query("{ applications { totalCount } fileExposures { totalCount } fileSubscriptions { totalCount } }").await;
    assert!(data_["applications"]["totalCount"].as_u64().unwrap() > 0);
    assert!(data_["fileExposures"]["totalCount"].as_u64().unwrap() > 0);
    assert_eq!(data_["fileSubscriptions"]["totalCount"], 0);

    fake.set_installed(KindId::FileSubscription, true);
    cp.ready().await;
    let (_, body) = cp.readyz().await;
    assert_eq!(body["missingKinds"], json!([]));
    assert_eq!(cp.metric("controlplane_kube_crd_missing{kind=\"FileSubscription\"}").await, 0.0);
    converges_to(cp.store(), &reference(&fake).await, "after the CRD is installed").await;
    cp.stop().await;
}

/// A second start on the same data directory with an unchanged server is ready at once (a warm
/// start: the store completed a sync of this API server), serves the stored model while every
/// kind catches up (`/readyz` and `extensions.freshness` name them, `controlplane_catching_up`
/// counts them), lists from the API server's watch cache (no quorum read) and writes nothing
/// (the revision does not move).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_the_same_data_is_ready_at_once_reads_the_watch_cache_and_writes_nothing() {
    let fake = FakeK8s::start_world().await;
    let data = tempfile::tempdir().unwrap();
    let (cp, expected) = first_start(&fake, data.path()).await;
    let revision = cp.store().read().unwrap().revision().unwrap();
    cp.stop().await;
    for k in schema::registry::registered() {
        assert!(fake.list_requests(k).iter().all(|l| !l.reads_the_cache()), "{}: a first start lists with a quorum read", k.name());
    }

    // Lists held back: the restarted server serves before any list is answered.
    for k in schema::registry::registered() {
        fake.hold_lists(k);
    }
    let cp = Cp::start(&fake, data.path()).await;
    let (code, body) = cp.readyz().await;
    assert_eq!(code, 200, "a warm start is ready at once: {body}");
    let kinds: Vec<&str> = schema::registry::registered().iter().map(|k| k.name()).collect();
    assert_eq!(body["catchingUp"], json!(kinds), "{body}");
    assert_eq!(cp.metric("controlplane_catching_up{kind=\"Application\"}").await, 1.0);
    let (_, answer) = cp.answer("{ applications { totalCount } }").await;
    assert_eq!(
        answer["data"]["applications"]["totalCount"],
        expected.keys().filter(|k| k.starts_with("Application ")).count(),
        "the stored model is served at once: {answer}"
    );
    let freshness = &answer["extensions"]["freshness"];
    assert_eq!(freshness["catchingUp"], json!(kinds), "{answer}");
    let last = cp.store().read().unwrap().last_commit().unwrap().unwrap().to_rfc3339();
    assert_eq!(freshness["lastChangeAt"], json!(last), "{answer}");
    for k in schema::registry::registered() {
        fake.release_lists(k);
    }
    assert!(cp.running.app().wait_caught_up(Duration::from_secs(30)).await, "caught up");
    let (code, body) = cp.readyz().await;
    assert_eq!((code, &body["catchingUp"]), (200, &json!([])), "{body}");
    assert_eq!(cp.metric("controlplane_catching_up{kind=\"Application\"}").await, 0.0);
    let (_, answer) = cp.answer("{ zones { name } }").await;
    assert!(answer.get("extensions").is_none(), "no freshness once caught up: {answer}");
    assert!(cp.metric("projector_reconcile_total{module=\"application\",outcome=\"success\"}").await > 0.0, "the relist was processed");
    // Objects waiting for a target that never comes are retried with a backoff: wait until
    // each change pending at ready has been retried (counted again) once.
    let metrics = cp.running.app().metrics();
    let pending = metrics.retries_pending.get() as u64;
    let before = metrics.reconciles(outcome::DEPENDENCY_MISSING);
    let retried = metrics.wait_until(Duration::from_secs(60), |m| m.reconciles(outcome::DEPENDENCY_MISSING) >= before + pending).await;
    assert!(retried, "{pending} pending retries not retried within 60 s");
    assert_eq!(cp.store().read().unwrap().revision().unwrap(), revision, "zero record writes");
    assert_eq!(cp.metric("controlplane_store_revision").await, revision as f64);
    assert_eq!(dump(cp.store()), expected);
    for k in schema::registry::registered() {
        let lists = fake.list_requests(k);
        assert_eq!(lists.len(), 2, "{} listed once per start", k.name());
        assert!(lists[1].reads_the_cache(), "{}: the restart's list reads the watch cache: {:?}", k.name(), lists[1]);
    }
    cp.stop().await;
}

/// Objects created, changed and deleted while the server was down show correctly once it has
/// caught up, though its lists come from a watch cache that lags behind the store: an older
/// version never replaces a newer one, and an object the cache does not hold yet is kept (then
/// confirmed by a quorum list) rather than swept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_made_while_down_show_once_caught_up_even_from_a_lagging_watch_cache() {
    let fake = FakeK8s::start_world().await;
    let data = tempfile::tempdir().unwrap();
    let (cp, _) = first_start(&fake, data.path()).await;
    // The watch cache of groups freezes now; then a group is created and one changed while the
    // server runs: the store holds versions newer than the cache.
    let groups: Vec<Value> = fake.objects().into_iter().filter(|o| o["kind"] == "Group").collect();
    fake.freeze_cache(KindId::Group);
    let mut created = groups[0].clone();
    created["metadata"]["name"] = json!("created-while-cached");
    created["metadata"]["uid"] = Value::Null;
    fake.apply(created);
    let mut changed = groups[1].clone();
    changed["spec"]["displayName"] = json!("Changed after the cache froze");
    fake.apply(changed);
    converges_to(cp.store(), &reference(&fake).await, "before the restart").await;
    cp.stop().await;

    // While down: a team created, an application changed, an approval request deleted.
    let teams: Vec<Value> = fake.objects().into_iter().filter(|o| o["kind"] == "Team").collect();
    let mut team = teams[0].clone();
    team["metadata"]["name"] = json!("created-while-down");
    team["metadata"]["uid"] = Value::Null;
    fake.apply(team);
    let apps: Vec<Value> = fake.objects().into_iter().filter(|o| o["kind"] == "Application").collect();
    let mut app = apps[0].clone();
    app["status"]["conditions"] = json!([]);
    fake.apply(app);
    // A leaf: deleting a parent never deletes its children (ARCHITECTURE.md "References by natural key").
    let requests: Vec<Value> = fake.objects().into_iter().filter(|o| o["kind"] == "ApprovalRequest").collect();
    let gone = &requests[0]["metadata"];
    assert!(fake.delete(KindId::ApprovalRequest, gone["namespace"].as_str().unwrap(), gone["name"].as_str().unwrap()));

    let cp = Cp::start(&fake, data.path()).await;
    assert_eq!(cp.readyz().await.0, 200, "warm");
    assert!(cp.running.app().wait_caught_up(Duration::from_secs(30)).await, "caught up");
    converges_to(cp.store(), &reference(&fake).await, "after catching up").await;
    let groups = fake.list_requests(KindId::Group);
    assert!(groups.len() >= 3, "{groups:?}");
    assert!(groups[1].reads_the_cache(), "the restart reads the watch cache first");
    assert!(!groups[2].reads_the_cache(), "then, the cache lagging behind the store, a quorum read");
    assert!(fake.list_requests(KindId::Team)[1].reads_the_cache());
    assert_eq!(fake.list_requests(KindId::Team).len(), 2, "a cache as new as the store needs no quorum read");
    cp.stop().await;
}

/// A kind stored under another derivation version (here ApiExposure, version 0): the restart
/// purges it (a store written before source documents were kept), the relist brings it back;
/// until then the server is ready, the kind's queries answer `UNAVAILABLE` naming it and every
/// other kind answers normally (with `extensions.freshness.rederiving`), and the store ends as
/// before with no record of another kind rewritten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_of_another_version_is_re_derived_from_the_relist() {
    use schema::KindId;
    let fake = FakeK8s::start_world().await;
    let data = tempfile::tempdir().unwrap();
    let (cp, expected) = first_start(&fake, data.path()).await;
    let digests = |store: &Store| {
        let view = store.read().unwrap();
        KindId::ALL.iter().map(|&k| (k, view.digest(k).unwrap())).collect::<Vec<_>>()
    };
    let before = digests(cp.store());
    cp.stop().await;
    storage::versions::downgrade_for_tests(data.path(), KindId::ApiExposure, 0, |b| b[..b.len() / 2].to_vec()).unwrap();
    // A store written before source documents were kept: the kind comes back from the source.
    storage::versions::forget_documents_for_tests(data.path(), KindId::ApiExposure).unwrap();

    // The purged kind comes back last: every record linking it arrives while it is missing.
    fake.hold_lists(KindId::ApiExposure);
    let cp = Cp::start(&fake, data.path()).await;
    assert_eq!(cp.store().rederiving(), vec![KindId::ApiExposure]);
    let (code, body) = cp.answer("{ apiExposures { totalCount } }").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["errors"][0]["extensions"]["code"], "UNAVAILABLE", "{body}");
    assert_eq!(body["errors"][0]["extensions"]["kind"], "ApiExposure", "{body}");
    let at_field = body["errors"][0]["locations"].as_array().is_none_or(|l| l.iter().all(|p| p["line"].as_u64() >= Some(1)));
    assert!(at_field, "no location, or a real one: {body}");
    let (code, body) = cp.answer("{ applications { totalCount } }").await;
    assert_eq!(code, 200);
    assert!(body["errors"].is_null(), "another kind answers: {body}");
    assert!(body["data"]["applications"]["totalCount"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(body["extensions"]["freshness"]["rederiving"], json!(["ApiExposure"]), "{body}");
    let (code, status) = cp.readyz().await;
    assert_eq!(code, 200, "warm: ready while re-deriving: {status}");
    assert_eq!(status["rederiving"], json!(["ApiExposure"]), "{status}");
    assert_eq!(cp.metric("controlplane_rederiving{kind=\"ApiExposure\"}").await, 1.0);
    synced_except(cp.running.app(), &[KindId::ApiExposure]).await;
    fake.release_lists(KindId::ApiExposure);
    cp.ready().await;
    assert_eq!(cp.store().rederiving(), Vec::<KindId>::new());
    assert_eq!(cp.metric("controlplane_rederiving{kind=\"ApiExposure\"}").await, 0.0);
    assert_eq!(dump(cp.store()), expected, "the store is as before");
    for ((kind, was), (_, now)) in before.iter().zip(digests(cp.store())) {
        if *kind != KindId::ApiExposure {
            assert_eq!(*was, now, "{kind:?} was rewritten");
        }
    }
    assert_eq!(
        cp.query("{ apiExposures { totalCount } }").await["apiExposures"]["totalCount"],
        expected.keys().filter(|k| k.starts_with("ApiExposure ")).count()
    );
    cp.stop().await;
}

/// The kinds by depth in the table's `parents` column: round 0 the kinds without parents, round
/// `n` the kinds whose deepest parent is in round `n - 1`.
fn dependency_rounds() -> Vec<Vec<KindId>> {
    let mut depth = std::collections::BTreeMap::new();
    for kind in KindId::REGISTRATION_ORDER {
        let d = kind.parents().iter().map(|p| depth[p] + 1).max().unwrap_or(0);
        depth.insert(*kind, d);
    }
    let deepest = depth.values().copied().max().unwrap_or(0);
    (0..=deepest).map(|d| KindId::REGISTRATION_ORDER.iter().copied().filter(|k| depth[k] == d).collect()).collect()
}

/// Kinds listed round by round, each after the one before synced: parents first (the table's
/// `parents` column, [`dependency_rounds`]) and children first (the rounds reversed) converge to
/// the same store; only children first makes applications wait for their teams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parents_after_children_converge_to_the_same_store() {
    let rounds = dependency_rounds();
    assert!(rounds.len() >= 4, "zones and teams, applications, exposures, subscriptions, approvals: {rounds:?}");
    assert_eq!(rounds.iter().map(Vec::len).sum::<usize>(), KindId::ALL.len());
    let run = async |rounds: &[Vec<KindId>]| {
        let fake = FakeK8s::start_world().await;
        let mut held: Vec<KindId> = rounds[1..].concat();
        for k in &held {
            fake.hold_lists(*k);
        }
        let data = tempfile::tempdir().unwrap();
        let cp = Cp::start(&fake, data.path()).await;
        synced_except(cp.running.app(), &held).await;
        for round in &rounds[1..] {
            held.retain(|k| !round.contains(k));
            for k in round {
                fake.release_lists(*k);
            }
            synced_except(cp.running.app(), &held).await;
        }
        cp.ready().await;
        let store = settled(cp.running.app()).await;
        let parked = cp.metric("projector_reconcile_total{module=\"application\",outcome=\"dependency_missing\"}").await;
        cp.stop().await;
        (store, parked, reference(&fake).await)
    };
    let (ordered, parked_ordered, expected) = run(&rounds).await;
    let reversed_rounds: Vec<Vec<KindId>> = rounds.iter().rev().cloned().collect();
    let (reversed, parked_reversed, _) = run(&reversed_rounds).await;
    assert_eq!(parked_ordered, 0.0, "parents first: no application waits");
    assert!(parked_reversed > 0.0, "children first: applications wait for their teams");
    assert_eq!(ordered, expected, "parents first = the manifests projection");
    assert_eq!(reversed, ordered, "children first converges to the same store");
}

/// `PERIODIC_RESYNC` re-lists every kind on its own: a change no watch event reported (here a
/// silent delete) is repaired by the next periodic sweep, without any watch error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_resync_relists_and_repairs_what_no_event_reported() {
    let fake = FakeK8s::start_world().await;
    let data = tempfile::tempdir().unwrap();
    let mut config = tune(Config::for_kube(&fake.url(), data.path()));
    config.projector.periodic_resync = Duration::from_millis(500);
    let cp = Cp::start_with(config).await;
    cp.ready().await;
    let group = fake.objects().into_iter().find(|o| o["kind"] == "Group").unwrap();
    let mut lonely = group.clone();
    lonely["metadata"]["name"] = json!("lonely-group");
    fake.apply(lonely);
    let groups = async || cp.query("{ groups { name } }").await["groups"].as_array().unwrap().len();
    let with_lonely = fake.objects().iter().filter(|o| o["kind"] == "Group").count();
    wait_for(&cp, &fake, "the new group", async || groups().await == with_lonely).await;
    fake.silently(|objs| assert!(objs.delete(KindId::Group, group["metadata"]["namespace"].as_str().unwrap_or_default(), "lonely-group")));
    wait_for(&cp, &fake, "the periodic sweep", async || groups().await == with_lonely - 1).await;
    assert!(fake.lists(KindId::Group) >= 2);
    assert_eq!(cp.metric("controlplane_kube_watch_errors_total").await, 0.0, "no watch error was needed");
    cp.stop().await;
}

/// A family switched off by its feature flag is not watched (its CRDs need not exist), and the
/// records a run with the flag on left in the data directory are removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_switched_off_is_not_watched_and_its_records_go() {
    let fake = FakeK8s::start_world().await;
    let data = tempfile::tempdir().unwrap();
    let cp = Cp::start(&fake, data.path()).await;
    cp.ready().await;
    let files = async |cp: &Cp| cp.query("{ fileExposures { totalCount } }").await["fileExposures"]["totalCount"].as_u64().unwrap();
    wait_for(&cp, &fake, "file exposures", async || files(&cp).await > 0).await;
    cp.stop().await;

    fake.set_installed(KindId::FileExposure, false);
    fake.set_installed(KindId::FileSubscription, false);
    let mut config = tune(Config::for_kube(&fake.url(), data.path()));
    config.features.file_manager = false;
    let cp = Cp::start_with(config).await;
    cp.ready().await;
    wait_for(&cp, &fake, "the file records to go", async || files(&cp).await == 0).await;
    assert_eq!(fake.lists(KindId::FileExposure), 1, "not listed by the second run");
    let (_, body) = cp.readyz().await;
    assert_eq!(body["missingKinds"], json!([]));
    cp.stop().await;
}
