//! The HTTP surface through the library: `/healthz`, `/readyz` (503 with what is pending, then
//! 200), `/metrics`, and graceful shutdown.

mod common;

use common::ADMIN;

use control_plane::config::Config;
use schema::{KindId, Scope};
use std::path::Path;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread")]
async fn health_readiness_and_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let world = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world");
    let running = control_plane::start(Config::for_manifests(&world, &tmp.path().join("data"))).await.unwrap();
    let base = format!("http://{}", running.local_addr());
    let client = reqwest::Client::new();

    let health = client.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut changes = running.app().metrics().subscribe();
    loop {
        changes.borrow_and_update();
        let r = client.get(format!("{base}/readyz")).send().await.unwrap();
        let status = r.status();
        let body: serde_json::Value = r.json().await.unwrap();
        if status == 200 {
            assert_eq!(body["ready"], true);
            assert_eq!(body["pendingCount"], 0);
            break;
        }
        assert_eq!(status, 503);
        assert_eq!(body["ready"], false);
        assert!(body["pendingPhases"].is_array() && body["pending"].is_array(), "{body}");
        let changed = tokio::time::timeout_at(deadline.into(), changes.changed()).await;
        assert!(changed.is_ok(), "not ready: {body}");
    }
    assert!(running.app().readiness().is_ready());

    // GraphQL requests with three outcomes.
    let gql = format!("{base}/graphql/query");
    let ok = client.post(&gql).bearer_auth(ADMIN).json(&serde_json::json!({"query": "{ zones { name } }"})).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    let q = serde_json::json!({"query": "{ node(id: \"nope\") { id } }"});
    let missing = client.post(&gql).bearer_auth(ADMIN).json(&q).send().await.unwrap().json::<serde_json::Value>().await.unwrap();
    assert_eq!(missing["errors"][0]["extensions"]["code"], "NOT_FOUND", "{missing}");
    assert_eq!(client.post(&gql).json(&q).send().await.unwrap().status(), 401);
    // A text answered once without errors: its second request runs by its plan, with the
    // same answer.
    let twice = serde_json::json!({"query": "{ teams(first: 2) { totalCount edges { node { id name } } } }"});
    let mut answers = Vec::new();
    for _ in 0..2 {
        answers.push(client.post(&gql).bearer_auth(ADMIN).json(&twice).send().await.unwrap().bytes().await.unwrap());
    }
    assert_eq!(answers[0], answers[1]);

    let text = client.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    let metric = |name: &str| -> f64 {
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_else(|| panic!("{name} missing:\n{text}"));
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    for name in ["projector_reconcile_total", "projector_reconcile_duration_seconds", "controlplane_store_commit_seconds"] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    assert_eq!(metric("projector_retries_pending"), running.app().metrics().retries_pending.get() as f64);
    let view = running.app().store().read().unwrap();
    assert_eq!(metric("controlplane_store_revision"), view.revision().unwrap() as f64);
    let mut total = 0;
    for &kind in KindId::ALL {
        let n = view.count(kind, &Scope::All).unwrap();
        total += n;
        assert_eq!(metric(&format!("controlplane_store_records{{kind=\"{}\"}}", kind.name())), n as f64, "{}", kind.name());
    }
    assert!(total > 100, "the world is loaded: {total} records");
    let db = std::fs::metadata(tmp.path().join("data").join(storage::DB_FILE)).unwrap().len() as f64;
    assert!(metric("controlplane_store_bytes") > db, "redb file plus search index");
    assert_eq!(metric("controlplane_graphql_requests_total{code=\"OK\"}"), 3.0);
    assert_eq!(metric("controlplane_graphql_planned_total"), 1.0);
    assert_eq!(metric("controlplane_graphql_requests_total{code=\"NOT_FOUND\"}"), 1.0);
    assert_eq!(metric("controlplane_graphql_requests_total{code=\"UNAUTHENTICATED\"}"), 1.0);
    assert_eq!(metric("controlplane_graphql_request_seconds_count"), 5.0);
    drop(view);
    running.shutdown().await.unwrap();
}

#[test]
fn readiness_names_pending_phases_before_the_scan() {
    let r = control_plane::readiness::Readiness::new(["initial scan of w"]);
    let st = r.status();
    assert!(!st.ready);
    assert_eq!(st.pending_phases, vec!["initial scan of w"]);
}

/// The GraphiQL page and everything it loads come from the server: the page names no other
/// host, each script and stylesheet it names answers 200 with its type, an unknown asset 404;
/// with the playground switched off neither is served.
#[tokio::test(flavor = "multi_thread")]
async fn graphiql_is_served_with_its_assets_from_the_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let world = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world");
    let client = reqwest::Client::new();
    for enabled in [true, false] {
        let mut config = Config::for_manifests(&world, &tmp.path().join(format!("data-{enabled}")));
        config.graphql.playground_enabled = enabled;
        let running = control_plane::start(config).await.unwrap();
        let base = format!("http://{}", running.local_addr());
        let page = client.get(format!("{base}/graphql")).send().await.unwrap();
        if !enabled {
            assert_eq!(page.status(), 404);
            assert_eq!(client.get(format!("{base}/graphql/assets/graphiql.min.js")).send().await.unwrap().status(), 404);
            running.shutdown().await.unwrap();
            continue;
        }
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        assert!(!html.contains("http://") && !html.contains("https://"), "{html}");
        let assets: Vec<&str> = html.split('"').filter(|s| s.starts_with("/graphql/assets/")).collect();
        assert_eq!(assets.len(), 4, "{html}");
        for path in assets {
            let r = client.get(format!("{base}{path}")).send().await.unwrap();
            assert_eq!(r.status(), 200, "{path}");
            let kind = r.headers()["content-type"].to_str().unwrap().to_string();
            assert!(kind.starts_with(if path.ends_with(".css") { "text/css" } else { "text/javascript" }), "{path}: {kind}");
            assert!(r.bytes().await.unwrap().len() > 1000, "{path}");
        }
        for missing in ["/graphql/assets/nope.js", "/graphql/assets/..%2Fgraphql.rs", "/graphql/assets/%00"] {
            assert_eq!(client.get(format!("{base}{missing}")).send().await.unwrap().status(), 404, "{missing}");
        }
        running.shutdown().await.unwrap();
    }
}
