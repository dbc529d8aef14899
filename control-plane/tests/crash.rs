//! Crash safety: the process is killed with SIGKILL at many moments while
//! it projects and re-projects the world; after every kill the store opens and satisfies every
//! invariant (indexes, counters, sources), the revision never goes backwards, and a restart
//! converges to the manifests' state (per-kind counts of a clean run, every status message of the
//! current manifests). redb commits each batch durably, so a kill loses at most the batch in
//! flight — never consistency.

mod common;

use common::ADMIN;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The server on `world` and `data`; its stderr goes to `stderr`.
fn spawn(world: &Path, data: &Path, port: u16, stderr: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_control-plane"))
        .args(["serve", "--auth", "mock", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--manifests")
        .arg(world)
        .arg("--data-dir")
        .arg(data)
        .env("RUST_LOG", "info,control_plane::projector::writer=debug")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// What a converged server holds: records per kind (`/admin/v1/status`) and every
/// application's status message.
#[derive(Debug, PartialEq)]
struct State {
    counts: serde_json::Value,
    messages: Vec<String>,
}

/// Starts the server on `data`, waits until ready, reads its [`State`], kills it.
fn converge(world: &Path, data: &Path) -> State {
    let port = free_port();
    let mut child = spawn(world, data, port, Stdio::piped());
    let log = common::ServerLog::follow(&mut child);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let state = rt.block_on(async {
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        log.wait_for_async(common::READY_LINE, Duration::from_secs(60)).await;
        let status: serde_json::Value =
            client.get(format!("{base}/admin/v1/status")).bearer_auth(ADMIN).send().await.unwrap().json().await.unwrap();
        let q = serde_json::json!({"query": "{ applications(first: 1000) { edges { node { statusMessage } } } }"});
        let body: serde_json::Value =
            client.post(format!("{base}/graphql/query")).bearer_auth(ADMIN).json(&q).send().await.unwrap().json().await.unwrap();
        let mut messages: Vec<String> = body["data"]["applications"]["edges"]
            .as_array()
            .unwrap_or_else(|| panic!("{body}"))
            .iter()
            .map(|e| e["node"]["statusMessage"].as_str().unwrap_or_default().to_string())
            .collect();
        messages.sort();
        State { counts: status["counts"].clone(), messages }
    });
    child.kill().unwrap();
    child.wait().unwrap();
    state
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn sigkill_at_any_moment_leaves_a_consistent_store() {
    let tmp = tempfile::tempdir().unwrap();
    let world = tmp.path().join("world");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world"), &world);
    let data = tmp.path().join("data");
    let apps = world.join("04-applications.yaml");
    let original = std::fs::read_to_string(&apps).unwrap();
    let clean = converge(&world, &tmp.path().join("clean"));
    assert!(clean.messages.iter().any(|m| m == "All sub-resources are up to date"), "{clean:?}");
    let (mut last_revision, mut killed_loading) = (0, 0);
    for round in 0..20u64 {
        // Alternate the manifests so that every start has something to write.
        let text = if round % 2 == 0 {
            original.clone()
        } else {
            original.replace("message: All sub-resources are up to date", &format!("message: round {round}"))
        };
        std::fs::write(&apps, text).unwrap();
        let mut child = spawn(&world, &data, free_port(), Stdio::piped());
        let log = common::ServerLog::follow(&mut child);
        // Kill after the writer reported `kill_after` records projected (each logged once its
        // batch is committed, the next batch under way), or once ready: from before the store
        // is opened (0) to after the initial load, a different point each round.
        let kill_after = ((round * 7) % 17) as usize;
        log.wait_until(&format!("{kill_after} projected records or ready"), Duration::from_secs(60), |log| {
            log.matches(" projected").count() >= kill_after || log.contains(common::READY_LINE)
        });
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        killed_loading += usize::from(!log.text().contains(common::READY_LINE));
        {
            let store = storage::Store::open(&data).expect("the store opens after a kill");
            let view = store.read().unwrap();
            assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new(), "round {round}");
            let revision = view.revision().unwrap();
            assert!(revision >= last_revision, "round {round}: revision went back from {last_revision} to {revision}");
            last_revision = revision;
        }
        // Every few rounds (and at the end) a restart converges to the current manifests.
        if round % 3 == 2 || round == 19 {
            let state = converge(&world, &data);
            assert_eq!(state.counts, clean.counts, "round {round}");
            let expected: Vec<String> = if round % 2 == 0 {
                clean.messages.clone()
            } else {
                let mut m: Vec<String> = clean
                    .messages
                    .iter()
                    .map(|m| if m == "All sub-resources are up to date" { format!("round {round}") } else { m.clone() })
                    .collect();
                m.sort();
                m
            };
            assert_eq!(state.messages, expected, "round {round}");
        }
    }
    assert!(last_revision > 0, "the runs wrote something");
    assert!(killed_loading >= 10, "only {killed_loading} of 20 kills came before ready");
}
