//! The HTTP surface through the library: `/healthz`, `/readyz` (503 with what is pending, then
//! 200), `/metrics`, and graceful shutdown.

use control_plane::config::Config;
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
    loop {
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
        assert!(Instant::now() < deadline, "not ready: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(running.app().readiness().is_ready());

    let metrics = client.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    for name in [
        "projector_reconcile_total",
        "projector_reconcile_duration_seconds",
        "controlplane_store_revision",
        "controlplane_store_commit_seconds",
        "controlplane_store_records",
    ] {
        assert!(metrics.contains(name), "{name} missing:\n{metrics}");
    }
    running.shutdown().await.unwrap();
}

#[test]
fn readiness_names_pending_phases_before_the_scan() {
    let r = control_plane::readiness::Readiness::new(["initial scan of w"]);
    let st = r.status();
    assert!(!st.ready);
    assert_eq!(st.pending_phases, vec!["initial scan of w"]);
}
