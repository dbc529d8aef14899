//! `control-plane serve` on the kube source as a process: the default source (no
//! `--manifests`), configured the way it is outside a cluster — through a kubeconfig — pointing
//! at the fake Kubernetes API server of the end-to-end tests (`tests/support/fake_k8s.rs`).

mod common;

use common::ADMIN;

#[path = "../../tests/support/fake_k8s.rs"]
mod fake_k8s;

use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_watches_the_cluster_of_the_kubeconfig_and_stops_on_sigterm() {
    let fake = fake_k8s::FakeK8s::start_world().await;
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n",
            fake.url()
        ),
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let base = format!("http://127.0.0.1:{port}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_control-plane"));
    for (k, _) in std::env::vars() {
        if k.starts_with("CP_") || k.starts_with("FEATURE_") || k.starts_with("KUBERNETES_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd
        .args(["serve", "--auth", "mock", "--log-format", "json", "--now", "2026-09-01T00:00:00Z"])
        .args(["--data-dir", tmp.path().join("data").to_str().unwrap(), "--listen", &format!("127.0.0.1:{port}")])
        .env("KUBECONFIG", &kubeconfig)
        // No retry within the test: what converges below converges because parents woke their
        // children.
        .env("DEPENDENCY_DELAY", "10m")
        .env("DEPENDENCY_DELAY_JITTER", "0s")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let http = reqwest::Client::new();
    let log = common::ServerLog::follow(&mut child);
    log.wait_for_async(common::READY_LINE, Duration::from_secs(60)).await;
    // Children listed before their parents were parked at first; they are retried as soon as
    // their parent is written (DEPENDENCY_DELAY is 10 minutes here).
    let count = |kind: &str| fake.objects().iter().filter(|o| o["kind"] == kind).count();
    let expected = json!({"teams": {"totalCount": count("Team")}, "approvals": {"totalCount": count("Approval")}});
    // Each woken child is logged once its commit is durable ("dependency resolved; projected"):
    // the counts are read again after each new log line.
    loop {
        let seen = log.len();
        let body: Value = http
            .post(format!("{base}/graphql/query"))
            .bearer_auth(ADMIN)
            .json(&json!({"query": "{ teams { totalCount } approvals { totalCount } }"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if body["data"] == expected {
            break;
        }
        let log = log.clone();
        tokio::task::spawn_blocking(move || log.wait_for_more(seen, Duration::from_secs(60))).await.unwrap();
    }
    assert!(log.text().contains("dependency missing; will retry"), "children were parked: the test shows their wake-up");

    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap()).await.unwrap();
    log.wait_for_end();
    let log = log.text();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("projector started (kube source)") && log.contains("sweeping records of objects no longer listed"), "{log}");
    assert!(log.contains("stopped"), "{log}");
}
