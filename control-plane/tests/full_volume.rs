//! A full volume, on a real size-limited file system: the data directory on a tmpfs
//! too small for the world. The server, a child process as in production:
//! - on a first start, cannot complete its initial sync: `/readyz` answers 503 naming the disk
//!   and the data directory, and the failure is logged a bounded number of times;
//! - once the tmpfs is remounted larger, without a restart, reaches exactly the state of a clean
//!   load of the same world before `/readyz` answers 200;
//! - when the volume fills again after the sync, keeps serving what it holds, reported stale
//!   (`/readyz`, `/admin/v1/status`, `extensions.freshness`), and catches up once space is back.
//!
//! Mounting a tmpfs needs root; elsewhere the test says so and checks nothing.

mod common;

use common::{ServerLog, ADMIN, READY_LINE};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A server process, killed when dropped (a failed assertion must not leave it running).
struct Server(Child);

impl std::ops::Deref for Server {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server; its page cache is the smallest allowed (1 MiB), so reads go to the file.
fn spawn(world: &Path, data: &Path, port: u16) -> Server {
    Server(
        Command::new(env!("CARGO_BIN_EXE_control-plane"))
            .args(["serve", "--auth", "mock", "--listen", &format!("127.0.0.1:{port}"), "--storage-cache-size", "1048576"])
            .arg("--manifests")
            .arg(world)
            .arg("--data-dir")
            .arg(data)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `count` groups named `bulk-<prefix>-<i>`, each with a description of about 1 KiB: enough
/// documents that the store outgrows a small volume.
fn groups(prefix: &str, count: usize) -> String {
    let filler = "storage faults are faults ".repeat(40);
    (0..count)
        .map(|i| {
            format!(
                "---\napiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata:\n  name: bulk-{prefix}-{i}\n  namespace: poc\n  \
                 labels:\n    cp.ei.telekom.de/environment: poc\nspec:\n  displayName: Bulk {prefix} {i}\n  description: {filler}{i}\n"
            )
        })
        .collect()
}

/// A tmpfs mounted on a directory, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, bytes: u64) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={bytes}")]).arg("tmpfs").arg(dir).status();
        ok.is_ok_and(|s| s.success()).then(|| Tmpfs(dir.to_path_buf()))
    }

    fn resize(&self, bytes: u64) {
        let ok = Command::new("mount").args(["-o", &format!("remount,size={bytes}")]).arg(&self.0).status().unwrap();
        assert!(ok.success(), "remounting {}", self.0.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0")))
}

/// Bytes of the files under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                bytes_under(&e.path())
            } else {
                e.metadata().unwrap().len()
            }
        })
        .sum()
}

/// Writes zeros into `path` until the volume is full.
fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 64 << 10];
    while f.write_all(&chunk).and_then(|_| f.sync_data()).is_ok() {}
}

struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(format!("{}{path}", self.base)).bearer_auth(ADMIN).send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    async fn graphql(&self, query: &str) -> Value {
        let q = json!({ "query": query });
        self.http.post(format!("{}/graphql/query", self.base)).bearer_auth(ADMIN).json(&q).send().await.unwrap().json().await.unwrap()
    }

    /// [`Client::graphql`], sent again (at most 20 times) while it answers `UNAVAILABLE`, as the
    /// README tells clients to: a read that ran across a failed write (and the reopen after it).
    async fn graphql_retrying(&self, query: &str) -> Value {
        let mut answer = self.graphql(query).await;
        for _ in 0..20 {
            if answer["errors"][0]["extensions"]["code"] != "UNAVAILABLE" {
                break;
            }
            answer = self.graphql(query).await;
        }
        answer
    }

    /// Records per kind and every group's and application's answer, sorted.
    async fn state(&self) -> (Value, Vec<String>) {
        let (_, status) = self.get("/admin/v1/status").await;
        let body = self
            .graphql("{ groups { name displayName description } applications(first: 1000) { edges { node { name statusMessage } } } }")
            .await;
        let mut answers: Vec<String> =
            body["data"]["groups"].as_array().unwrap_or_else(|| panic!("{body}")).iter().map(|g| g.to_string()).collect();
        answers.extend(body["data"]["applications"]["edges"].as_array().unwrap().iter().map(|e| e["node"].to_string()));
        answers.sort();
        (status["counts"].clone(), answers)
    }
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A `changes` subscription on groups (graphql-transport-ws), acknowledged.
async fn subscribe_to_groups(base: &str) -> Ws {
    use futures::SinkExt;
    use tokio_tungstenite::tungstenite::{client::IntoClientRequest, Message};
    let mut request = format!("{}/graphql/query", base.replacen("http", "ws", 1)).into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let init = json!({"type": "connection_init", "payload": {"Authorization": format!("Bearer {ADMIN}")}});
    ws.send(Message::text(init.to_string())).await.unwrap();
    assert_eq!(frame(&mut ws).await["type"], "connection_ack");
    let subscribe = json!({"id": "1", "type": "subscribe", "payload": {"query": "subscription { changes(kinds: [GROUP]) { operation } }"}});
    ws.send(Message::text(subscribe.to_string())).await.unwrap();
    ws
}

/// The next JSON text frame.
async fn frame(ws: &mut Ws) -> Value {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        match tokio::time::timeout(Duration::from_secs(120), ws.next()).await.expect("a frame within 120 s") {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).unwrap(),
            Some(Ok(_)) => continue,
            other => panic!("the subscription ended: {other:?}"),
        }
    }
}

/// Waits for `n` group creations on `ws`.
async fn wait_for_created(ws: &mut Ws, n: usize) {
    let mut created = 0;
    while created < n {
        let f = frame(ws).await;
        assert_eq!(f["type"], "next", "{f}");
        created += usize::from(f["payload"]["data"]["changes"]["operation"] == "CREATED");
    }
}

/// What the server logs once it reopened the store after a failed write.
const REOPENED: &str = "store reopened after a failed write";
/// Logged once when store writes start failing on the volume, and once when they all succeed
/// again (a fault that begins again within a minute of its end goes on, unlogged till a minute
/// after its last line); the store is reopened, and says so, after every failed write.
const FAULT_BEGINS: &str = "store write failed on the volume";
const FAULT_ENDS: &str = "store writes succeed again";

/// Whether the store was reopened after a failed write since it had been `reopened_before`
/// times, and the log's last fault line says writes succeed again: a nearly full volume can
/// take a small write after a failed one (the reopen gives back what the failed write took),
/// so a fault may end and go on again before space is back.
fn all_faults_ended(log: &str, reopened_before: usize) -> bool {
    log.matches(REOPENED).count() > reopened_before && log.rfind(FAULT_ENDS) > log.rfind(REOPENED)
}

/// The size of the full volume.
const VOLUME: u64 = 4 << 20;

fn error_lines(log: &str) -> usize {
    log.lines().filter(|l| l.contains("ERROR")).count()
}

#[test]
fn a_full_volume_keeps_every_change_and_catches_up_once_space_is_back() {
    if !is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let world = tmp.path().join("world");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world");
    std::fs::create_dir_all(&world).unwrap();
    for entry in std::fs::read_dir(&example).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, world.join(path.file_name().unwrap())).unwrap();
    }
    std::fs::write(world.join("90-bulk-groups.yaml"), groups("a", 3000)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();

    // A clean load of the same world on the ordinary disk: what the recovered store must hold.
    let clean_dir = tmp.path().join("clean");
    let port = free_port();
    let mut clean = spawn(&world, &clean_dir, port);
    let log = ServerLog::follow(&mut clean);
    log.wait_for(READY_LINE, Duration::from_secs(120));
    let client = Client { base: format!("http://127.0.0.1:{port}"), http: reqwest::Client::new() };
    let expected = rt.block_on(client.state());
    clean.kill().unwrap();
    clean.wait().unwrap();
    let groups_loaded = expected.0["Group"].as_u64().unwrap();
    assert!(groups_loaded >= 3000, "{expected:?}");
    let needed = bytes_under(&clean_dir);

    // A first start on a volume of 4 MiB, less than the world needs: the initial sync cannot
    // complete; a restart meanwhile (its search index cannot be rebuilt either) is the same.
    // The store's size after a load varies with when its last commits and the search index's
    // merges ran: only "does not fit" matters.
    assert!(needed > VOLUME, "the world must not fit: {needed} bytes");
    let volume = Tmpfs::mount(&tmp.path().join("volume"), VOLUME).expect("mounting a tmpfs as root");
    let data = volume.0.join("data");
    let mut first = spawn(&world, &data, free_port());
    let first_log = ServerLog::follow(&mut first);
    first_log.wait_for(REOPENED, Duration::from_secs(120));
    let _ = Command::new("kill").args(["-TERM", &first.id().to_string()]).status();
    assert!(common::wait_exit(&mut first, Duration::from_secs(60)).success(), "{}", first_log.text());
    let port = free_port();
    let mut server = spawn(&world, &data, port);
    let log = ServerLog::follow(&mut server);
    let client = Client { base: format!("http://127.0.0.1:{port}"), http: reqwest::Client::new() };
    log.wait_for(REOPENED, Duration::from_secs(120));
    rt.block_on(async {
        let (code, readyz) = client.get("/readyz").await;
        assert_eq!(code, 503, "{readyz}\n{}\nneeded {needed}", log.text());
        let fault = readyz["storeFault"].as_str().unwrap_or_else(|| panic!("{}\n{}", readyz["storeFault"], log.text()));
        assert!(fault.contains("No space left on device") && fault.contains(&data.display().to_string()), "{fault}");
        assert_eq!(client.get("/healthz").await.0, 200);
        // What the store holds is read from the file, whose last write failed.
        let answer = client.graphql_retrying("{ groups { name description } }").await;
        assert!(answer["errors"].is_null() && answer["data"]["groups"].is_array(), "{answer}");
        let metrics = client.http.get(format!("{}/metrics", client.base)).send().await.unwrap().text().await.unwrap();
        assert!(metrics.contains("controlplane_store_write_failing 1"), "{metrics}");
    });

    // Space is back: no restart, the same state as the clean load, then ready.
    volume.resize(needed * 4 + (64 << 20));
    log.wait_for(READY_LINE, Duration::from_secs(120));
    // Barrier: every fault ended (its end is logged after readiness is told).
    log.wait_until("the volume fault to end", Duration::from_secs(120), |l| all_faults_ended(l, 0));
    assert_eq!(log.text().matches(FAULT_BEGINS).count(), 1, "logged once when it began: {}", log.text());
    let recovered = rt.block_on(client.state());
    assert_eq!(recovered.0, expected.0, "records per kind");
    assert!(recovered.1 == expected.1, "the answers differ from the clean load's");
    rt.block_on(async {
        let (code, readyz) = client.get("/readyz").await;
        assert_eq!(code, 200, "{readyz}");
        assert_eq!(readyz["storeFault"], Value::Null);
    });

    // Full again after the sync: served stale, the new objects kept until space is back.
    let mut changes = rt.block_on(subscribe_to_groups(&client.base));
    let filler = volume.0.join("filler");
    fill(&filler);
    std::fs::write(world.join("91-more-groups.yaml"), groups("b", 1000)).unwrap();
    let reopened = log.text().matches(REOPENED).count();
    // Reads wait for the reopen that follows a failed write (the failed handle refuses them).
    log.wait_until("a second volume fault and the reopen after it", Duration::from_secs(120), |l| l.matches(REOPENED).count() > reopened);
    rt.block_on(async {
        let (code, readyz) = client.get("/readyz").await;
        assert_eq!(code, 200, "a store that completed its sync keeps serving: {readyz}");
        // The fault may have ended meanwhile (a small write fits after the reopen): while it is
        // reported, it names the cause, the kind is stale and answers say so.
        let fault = readyz["storeFault"].as_str().map(str::to_string);
        assert!(fault.as_deref().is_none_or(|f| f.contains("No space left on device")), "{readyz}");
        let (_, status) = client.get("/admin/v1/status").await;
        let group = status["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == "Group").cloned().unwrap();
        assert!(["stale", "synced"].contains(&group["sync"].as_str().unwrap_or_default()), "{status}");
        // Answers say so while the fault is reported: asked again until an answer carries it,
        // or the fault is no longer reported after an answer without it.
        for attempt in 0.. {
            let answer = client.graphql_retrying("{ zones { name } groups { name description } }").await;
            assert!(answer["errors"].is_null(), "every record it holds is served: {answer}");
            let served = answer["data"]["groups"].as_array().map_or(0, Vec::len) as u64;
            assert!((groups_loaded..=groups_loaded + 1000).contains(&served), "{answer}");
            assert!(answer["data"]["zones"].as_array().is_some_and(|z| !z.is_empty()), "{answer}");
            if answer["extensions"]["freshness"]["lastChangeAt"].is_string() || client.get("/readyz").await.1["storeFault"].is_null() {
                break;
            }
            assert!(attempt < 20, "answers lack extensions.freshness while the fault is reported: {}", answer["extensions"]);
        }
    });
    std::fs::remove_file(&filler).unwrap();
    rt.block_on(wait_for_created(&mut changes, 1000));
    log.wait_until("writes succeeding again", Duration::from_secs(120), |l| all_faults_ended(l, reopened));
    rt.block_on(async {
        let (_, status) = client.get("/admin/v1/status").await;
        assert_eq!(status["counts"]["Group"], json!(groups_loaded + 1000), "{status}");
        let (code, readyz) = client.get("/readyz").await;
        assert_eq!(code, 200, "{readyz}");
        assert_eq!(readyz["storeFault"], Value::Null, "{readyz}");
    });
    // Each cause is logged once per minute with a count, not once per object or retry.
    let errors = error_lines(&log.text());
    assert!(errors <= 20, "{errors} ERROR lines:\n{}", log.text());
    server.kill().unwrap();
    server.wait().unwrap();

    // Snapshots on a full volume: the disk named, nothing half-written left behind.
    fill(&filler);
    let run = |args: &[&std::ffi::OsStr]| Command::new(env!("CARGO_BIN_EXE_control-plane")).args(args).output().unwrap();
    let out = volume.0.join("world.snap");
    let export =
        run(&["snapshot".as_ref(), "export".as_ref(), "--data-dir".as_ref(), clean_dir.as_os_str(), "--out".as_ref(), out.as_os_str()]);
    let stderr = String::from_utf8_lossy(&export.stderr);
    assert_eq!(export.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("No space left on device") && stderr.contains(&volume.0.display().to_string()), "{stderr}");
    let snapshot = tmp.path().join("world.snap");
    let export = run(&[
        "snapshot".as_ref(),
        "export".as_ref(),
        "--data-dir".as_ref(),
        clean_dir.as_os_str(),
        "--out".as_ref(),
        snapshot.as_os_str(),
    ]);
    assert_eq!(export.status.code(), Some(0), "{}", String::from_utf8_lossy(&export.stderr));
    let target = volume.0.join("restored");
    let restore =
        run(&["snapshot".as_ref(), "restore".as_ref(), "--in".as_ref(), snapshot.as_os_str(), "--data-dir".as_ref(), target.as_os_str()]);
    let stderr = String::from_utf8_lossy(&restore.stderr);
    assert_eq!(restore.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("No space left on device") && stderr.contains(&target.display().to_string()), "{stderr}");
    let mut left: Vec<String> =
        std::fs::read_dir(&volume.0).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, vec!["data", "filler"], "no partial snapshot, no staging directory");
}
