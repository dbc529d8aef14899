//! The abuse suite: every request that once crashed, hung or exhausted the server is
//! sent to the real binary on a generated world of about 100 000 objects (`tools/genworld`, the
//! benches' `100k`), and the suite asserts bounds, never timings: the answer's code, that the
//! process is alive and answers `/healthz` during and after, and that its peak resident memory
//! grows by less than a stated bound (256 MB for search texts, 512 MB for the rest).
//!
//! Phases, one server per configuration (restarts take the store over from its checkpoints):
//! hostile requests with the defaults; 8 heavy requests at once while small queries and
//! `/healthz` keep answering; an oversized manifest; a 1 ms time limit (`TIMEOUT`); a full
//! queue (HTTP 503 with `Retry-After`); SIGTERM with heavy requests in flight (the process exits
//! and the store opens with every invariant).

mod common;

#[path = "../../tests/support/fake_k8s.rs"]
mod fake_k8s;

use base64::Engine;
use common::ADMIN;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Peak memory growth allowed for a search text (MB).
const SEARCH_GROWTH_MB: u64 = 256;
/// Peak memory growth allowed for any other request (MB).
const GROWTH_MB: u64 = 512;

/// The benches' `100k` world (same parameters, see `benches/support/mod.rs`), generated into
/// `target/genworld/100k` when missing (into a temporary directory first, then renamed).
fn world() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("target/genworld/100k");
    if dir.join("manifest.json").exists() {
        return dir;
    }
    let tmp = root.join(format!("target/genworld/.100k-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let status = Command::new("python3")
        .arg(root.join("tools/genworld/genworld.py"))
        .args(["--teams", "705", "--apps-per-team", "8", "--exposures-per-app", "3", "--subscriptions-per-app", "4"])
        .args(["--seed", "1", "--env", "poc", "--out"])
        .arg(&tmp)
        .stdout(Stdio::null())
        .status()
        .expect("python3 runs tools/genworld/genworld.py");
    assert!(status.success(), "genworld failed: {status}");
    if std::fs::rename(&tmp, &dir).is_err() {
        // Another run generated it meanwhile.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    assert!(dir.join("manifest.json").exists());
    dir
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A mock token (`--auth mock` decodes it without a signature).
fn token(client_id: &str, scope: &str) -> String {
    let b = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.mock", b(json!({"alg": "none", "typ": "JWT"})), b(json!({"clientId": client_id, "scope": scope, "env": "poc"})))
}

/// Resident memory of a process: (now, peak) in MB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
            / 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets the peak to the current resident size (`clear_refs` 5); false when not allowed, then
/// the growth is measured against the peak so far (an upper bound).
fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

struct Server {
    child: Child,
    pid: u32,
    log: common::ServerLog,
    base: String,
    data: PathBuf,
    http: reqwest::Client,
}

impl Server {
    async fn start(manifests: &Path, data: &Path, env: &[(&str, &str)]) -> Server {
        Server::spawn(&["--manifests".as_ref(), manifests.as_os_str()], data, env).await
    }

    /// On the kube source of the API server at `url`.
    async fn start_kube(url: &str, data: &Path, env: &[(&str, &str)]) -> Server {
        Server::spawn(&["--source".as_ref(), "kube".as_ref(), "--kube-url".as_ref(), url.as_ref()], data, env).await
    }

    async fn spawn(source: &[&std::ffi::OsStr], data: &Path, env: &[(&str, &str)]) -> Server {
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_control-plane"));
        cmd.args(["serve", "--auth", "mock", "--listen", &format!("127.0.0.1:{port}")])
            .args(source)
            .arg("--data-dir")
            .arg(data)
            .env("RUST_LOG", "warn,control_plane::app=info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let pid = child.id();
        let log = common::ServerLog::follow(&mut child);
        let s =
            Server { child, pid, log, base: format!("http://127.0.0.1:{port}"), data: data.to_path_buf(), http: reqwest::Client::new() };
        // The product's barrier: the server logs that it is ready once the initial load is
        // applied. (The bound only turns a hang into a failure.)
        s.log.wait_for_async(common::READY_LINE, Duration::from_secs(600)).await;
        assert_eq!(s.http.get(format!("{}/readyz", s.base)).send().await.unwrap().status(), 200, "ready as logged");
        s
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    async fn healthz(&self) -> u16 {
        self.http.get(format!("{}/healthz", self.base)).send().await.map(|r| r.status().as_u16()).unwrap_or(0)
    }

    /// One GraphQL request: (HTTP status, the first error's code or `OK`, the body).
    async fn post(&self, token: &str, body: Value) -> (u16, String, Value) {
        post(&self.http, &self.base, token, body).await
    }

    async fn metric(&self, line_prefix: &str) -> f64 {
        let text = self.http.get(format!("{}/metrics", self.base)).send().await.unwrap().text().await.unwrap();
        text.lines().filter(|l| l.starts_with(line_prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
    }

    /// Waits until the metric `line_prefix` is at least `at_least`. A separate process offers
    /// its metrics only to be read: they are read every 10 ms, at most 60 s (a hang turned
    /// into a failure).
    async fn wait_for_metric(&self, line_prefix: &str, at_least: f64) {
        let mut every = tokio::time::interval(Duration::from_millis(10));
        let reached = async {
            while self.metric(line_prefix).await < at_least {
                every.tick().await;
            }
        };
        assert!(tokio::time::timeout(Duration::from_secs(60), reached).await.is_ok(), "{line_prefix} stayed under {at_least}");
    }

    /// Sends `body`, probing `/healthz` until it is answered; asserts the process stayed alive,
    /// every probe was answered and the peak memory grew by less than `growth_mb`. Returns the
    /// answer's status and code.
    async fn case(&mut self, name: &str, token: &str, body: Value, growth_mb: u64) -> (u16, String) {
        let (before, _) = memory(self.pid);
        let reset = reset_peak(self.pid);
        let done = Arc::new(AtomicBool::new(false));
        let probe = {
            let (http, base, done) = (self.http.clone(), self.base.clone(), done.clone());
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0, 0);
                let mut every = tokio::time::interval(Duration::from_millis(20));
                while !done.load(Ordering::Relaxed) {
                    every.tick().await;
                    match http.get(format!("{base}/healthz")).send().await {
                        Ok(r) if r.status() == 200 => ok += 1,
                        _ => failed += 1,
                    }
                }
                (ok, failed)
            })
        };
        let (status, code, _) = self.post(token, body).await;
        done.store(true, Ordering::Relaxed);
        let (_, failed) = probe.await.unwrap();
        assert!(self.alive(), "{name}: the server died");
        assert_eq!(failed, 0, "{name}: /healthz did not answer during the request");
        assert_eq!(self.healthz().await, 200, "{name}: /healthz after the request");
        let (_, peak) = memory(self.pid);
        let base = if reset { before } else { before.min(peak) };
        assert!(peak.saturating_sub(base) < growth_mb, "{name}: peak memory grew from {before} MB to {peak} MB (bound {growth_mb} MB)");
        (status, code)
    }

    /// SIGTERM, then the exit status (the bound only turns a hang into a failure).
    fn terminate(mut self) -> (std::process::ExitStatus, PathBuf) {
        let sent = Command::new("kill").args(["-TERM", &self.pid.to_string()]).status().unwrap();
        assert!(sent.success());
        let status = common::wait_exit(&mut self.child, Duration::from_secs(60));
        (status, self.data.clone())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn post(http: &reqwest::Client, base: &str, token: &str, body: Value) -> (u16, String, Value) {
    try_post(http, base, token, body).await.expect("the server answers")
}

/// [`post`], `None` when the connection fails (the server stopped).
async fn try_post(http: &reqwest::Client, base: &str, token: &str, body: Value) -> Option<(u16, String, Value)> {
    let resp = http.post(format!("{base}/graphql/query")).bearer_auth(token).json(&body).send().await.ok()?;
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let code = match body["errors"].as_array() {
        None => "OK".to_string(),
        Some(errors) if errors.is_empty() => "OK".to_string(),
        Some(errors) => errors[0]["extensions"]["code"].as_str().unwrap_or("NO_CODE").to_string(),
    };
    Some((status, code, body))
}

fn q(query: String) -> Value {
    json!({ "query": query })
}

fn nested_edges(k: usize) -> String {
    let mut s = "{name: \"x\"}".to_string();
    for _ in 0..k {
        s = format!("{{hasZoneWith: [{{hasApplicationsWith: [{s}]}}]}}");
    }
    s
}

/// Heavy requests: an edge filter through three kinds, and a nested page of every team.
const HEAVY: &[&str] = &[
    "{ applications(first: 1000, where: {hasSubscribedApisWith: [{hasTargetWith: [{hasSubscriptionsWith: [{nameContains: \"a\"}]}]}]}) { totalCount edges { node { name } } } }",
    "{ teams(first: 1000) { edges { node { name applications(first: 100) { edges { node { name subscribedApis(first: 10) { edges { node { name } } } } } } } } } }",
];

/// Keeps `n` clients sending heavy requests until `stop` (or the server is gone: `CLOSED`);
/// returns every answer's status and code.
fn heavy_load(http: &reqwest::Client, base: &str, n: usize, stop: Arc<AtomicBool>) -> Vec<tokio::task::JoinHandle<Vec<(u16, String)>>> {
    (0..n)
        .map(|i| {
            let (http, base, stop) = (http.clone(), base.to_string(), stop.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match try_post(&http, &base, ADMIN, q(HEAVY[i % HEAVY.len()].to_string())).await {
                        Some((status, code, _)) => out.push((status, code)),
                        None => {
                            out.push((0, "CLOSED".to_string()));
                            break;
                        }
                    }
                }
                out
            })
        })
        .collect()
}

/// A raw `graphql-transport-ws` connection (frames by hand), initialised with `token`.
async fn ws_connect(base: &str, token: &str) -> WsStream {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut request = format!("{}/graphql/query", base.replacen("http", "ws", 1)).into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    ws_send(&mut ws, json!({"type": "connection_init", "payload": {"Authorization": format!("Bearer {token}")}})).await;
    let ack = ws_frame(&mut ws).await;
    assert_eq!(ack["type"], "connection_ack", "{ack}");
    ws
}

type WsStream = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws_send(ws: &mut WsStream, v: Value) {
    use futures::SinkExt;
    ws.send(tokio_tungstenite::tungstenite::Message::text(v.to_string())).await.unwrap();
}

/// The next JSON text frame, or `{"close": code}` / `{"closed": reason}` when the socket ends.
async fn ws_frame(ws: &mut WsStream) -> Value {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    loop {
        match tokio::time::timeout(Duration::from_secs(60), ws.next()).await.expect("a frame within 60 s") {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).unwrap(),
            Some(Ok(Message::Close(c))) => return json!({"close": c.map(|c| u16::from(c.code))}),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return json!({"closed": e.to_string()}),
            None => return json!({"closed": "end of stream"}),
        }
    }
}

const WS_SUBSCRIPTION: &str = "subscription { changes { operation id node { id } } }";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_abusive_request_is_refused_or_cut_and_the_server_stays_up() {
    let world = world();
    let tmp = tempfile::tempdir().unwrap();
    let manifests = tmp.path().join("manifests");
    copy_dir(&world, &manifests);
    let data = tmp.path().join("data");

    // ---- hostile requests, defaults ----
    let mut s = Server::start(&manifests, &data, &[]).await;
    let (_, _, teams) = s.post(ADMIN, q("{ teams(first: 1) { edges { node { name } } } }".into())).await;
    let team_name = teams["data"]["teams"]["edges"][0]["node"]["name"].as_str().unwrap().to_string();
    let team = token(&format!("{team_name}--console"), "tardis:team:read");
    // Subscriptions stay open through every case: 10 connections of 10 that read, and one that
    // subscribes and never reads.
    let mut readers = Vec::new();
    for i in 0..10 {
        let mut ws = ws_connect(&s.base, if i % 2 == 0 { ADMIN } else { &team }).await;
        for id in 0..10 {
            ws_send(&mut ws, json!({"id": id.to_string(), "type": "subscribe", "payload": {"query": WS_SUBSCRIPTION}})).await;
        }
        readers.push(tokio::spawn(async move {
            loop {
                let f = ws_frame(&mut ws).await;
                if f.get("type").is_none_or(|t| t != "next") {
                    return f;
                }
            }
        }));
    }
    let mut stalled = ws_connect(&s.base, ADMIN).await;
    ws_send(&mut stalled, json!({"id": "1", "type": "subscribe", "payload": {"query": WS_SUBSCRIPTION}})).await;
    s.wait_for_metric("controlplane_subscriptions_active", 101.0).await;
    let words = |n: usize| (0..n).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    let mut fragments = String::from("{ applications(first: 1) { edges { node { ...F26 } } } } fragment F0 on Application { name }");
    for i in 1..=26 {
        fragments.push_str(&format!(" fragment F{i} on Application {{ ...F{} ...F{} }}", i - 1, i - 1));
    }
    let deep_variable = (0..100).fold(json!("x"), |v, _| json!([v]));
    let cases: Vec<(&str, &str, Value, &str, u64)> = vec![
        ("nodes(ids:) 2000 levels", &team, q(format!("{{ nodes(ids: {}\"x\"{}) {{ id }} }}", "[".repeat(2000), "]".repeat(2000))), "INPUT_TOO_DEEP", GROWTH_MB),
        ("where and 1000 levels", &team, q(format!("{{ applications(where: {}{{name: \"x\"}}{}) {{ totalCount }} }}", "{and: [".repeat(1000), "]}".repeat(1000))), "INPUT_TOO_DEEP", GROWTH_MB),
        ("where not 3000 levels", &team, q(format!("{{ applications(where: {}{{name: \"x\"}}{}) {{ totalCount }} }}", "{not: ".repeat(3000), "}".repeat(3000))), "INPUT_TOO_DEEP", GROWTH_MB),
        ("has…With 500 pairs", &team, q(format!("{{ applications(where: {}) {{ totalCount }} }}", nested_edges(500))), "INPUT_TOO_DEEP", GROWTH_MB),
        ("idIn 5000 levels", &team, q(format!("{{ applications(where: {{idIn: {}\"x\"{}}}) {{ totalCount }} }}", "[".repeat(5000), "]".repeat(5000))), "INPUT_TOO_DEEP", GROWTH_MB),
        ("variables nested 1000 levels (beyond the JSON reader)", &team, json!({"query": "query($ids: [ID!]!) { nodes(ids: $ids) { id } }", "variables": {"ids": (0..1000).fold(json!("x"), |v, _| json!([v]))}}), "INPUT_TOO_DEEP", GROWTH_MB),
        ("nesting in variables", &team, json!({"query": "query($ids: [ID!]!) { nodes(ids: $ids) { id } }", "variables": {"ids": deep_variable}}), "INPUT_TOO_DEEP", GROWTH_MB),
        ("catalogueSearch 5000 words", &team, q(format!("{{ catalogueSearch(query: \"{}\") {{ totalCount }} }}", words(5000))), "BAD_USER_INPUT", SEARCH_GROWTH_MB),
        ("catalogueSearch 100000 words", &team, q(format!("{{ catalogueSearch(query: \"{}\") {{ totalCount }} }}", words(100_000))), "BAD_USER_INPUT", SEARCH_GROWTH_MB),
        ("apis(search:) 5000 words", &team, q(format!("{{ apis(search: \"{}\") {{ totalCount }} }}", words(5000))), "BAD_USER_INPUT", SEARCH_GROWTH_MB),
        ("lists along zone → applications, depth 12", ADMIN, q("{ applications(first:1) { edges { node { zone { applications { zone { applications { zone { applications { zone { applications { name } } } } } } } } } } } }".into()), "TOO_MANY_NODES", GROWTH_MB),
        ("4 aliases of applications(first:1000) → zone → applications", ADMIN, q(format!("{{ {} }}", (0..4).map(|i| format!("a{i}: applications(first: 1000) {{ edges {{ node {{ zone {{ applications {{ name }} }} }} }} }}")).collect::<Vec<_>>().join(" "))), "TOO_MANY_NODES", GROWTH_MB),
        ("20 aliases of teams → applications → subscribedApis, 1000 each", ADMIN, q(format!("{{ {} }}", (0..20).map(|i| format!("a{i}: teams(first: 1000) {{ edges {{ node {{ applications(first: 1000) {{ edges {{ node {{ subscribedApis(first: 1000) {{ edges {{ node {{ name }} }} }} }} }} }} }} }} }}")).collect::<Vec<_>>().join(" "))), "TOO_MANY_NODES", GROWTH_MB),
        ("has…With nested 5 pairs (team)", &team, q(format!("{{ applications(first: 10, where: {}) {{ totalCount }} }}", nested_edges(5))), "INPUT_TOO_DEEP", GROWTH_MB),
        ("has…With nested 4 levels", ADMIN, q("{ applications(first: 10, where: {hasZoneWith: [{hasApplicationsWith: [{hasZoneWith: [{hasApplicationsWith: [{name: \"x\"}]}]}]}]}) { totalCount } }".into()), "FILTER_TOO_DEEP", GROWTH_MB),
        ("has…With nested 3 levels runs", ADMIN, q("{ applications(first: 10, where: {hasZoneWith: [{hasApplicationsWith: [{hasZoneWith: [{name: \"x\"}]}]}]}) { totalCount } }".into()), "OK", GROWTH_MB),
        ("doubling fragment chain of 26", &team, q(fragments), "QUERY_TOO_COMPLEX", GROWTH_MB),
        ("or of 900 predicates on one 400 KB variable", &team, json!({"query": format!("query($s: String!) {{ applications(first: 1, where: {{or: [{}]}}) {{ totalCount }} }}", vec!["{nameContains: $s}"; 900].join(", ")), "variables": {"s": "É".repeat(200_000)}}), "FILTER_TOO_LARGE", GROWTH_MB),
        ("selection 40 levels", &team, q(format!("{}{}", "{ a ".repeat(40), "}".repeat(40))), "QUERY_TOO_DEEP", GROWTH_MB),
    ];
    for (name, tok, body, expected, growth) in cases {
        let (status, code) = s.case(name, tok, body, growth).await;
        assert_eq!((status, code.as_str()), (200, expected), "{name}");
    }
    // ---- hostile WebSocket input: each closes its own socket, the server and the others stay ----
    let (_, _, counts_before) = s.post(ADMIN, q("{ teams { totalCount } }".into())).await;
    let mut big = ws_connect(&s.base, &team).await;
    let huge = json!({"id": "1", "type": "subscribe", "payload": {"query": format!("subscription {{ changes {{ id }} }} #{}", "x".repeat(2 << 20))}});
    // The server may close while the message is still being sent (the send then fails).
    let sent = {
        use futures::SinkExt;
        big.send(tokio_tungstenite::tungstenite::Message::text(huge.to_string())).await
    };
    let end = if sent.is_ok() { ws_frame(&mut big).await } else { json!({"closed": "while sending"}) };
    assert!(end.get("close").is_some() || end.get("closed").is_some(), "a 2 MiB message closes the socket: {end}");
    let mut garbage = ws_connect(&s.base, &team).await;
    {
        use futures::SinkExt;
        garbage.send(tokio_tungstenite::tungstenite::Message::text("{not json")).await.unwrap();
    }
    assert_eq!(ws_frame(&mut garbage).await["close"], 4400, "a frame that is not a protocol message");
    {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = format!("{}/graphql/query", s.base.replacen("http", "ws", 1)).into_client_request().unwrap();
        request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
        let (mut early, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        ws_send(&mut early, json!({"id": "1", "type": "subscribe", "payload": {"query": WS_SUBSCRIPTION}})).await;
        let end = ws_frame(&mut early).await;
        assert!(end.get("close").is_some(), "a subscribe before connection_init closes the socket: {end}");
    }
    // 1000 aliases of `changes` in one subscription: refused (one root field), not 1000 streams.
    let mut fan = ws_connect(&s.base, ADMIN).await;
    let aliases: Vec<String> = (0..1000).map(|i| format!("a{i}: changes {{ id }}")).collect();
    ws_send(&mut fan, json!({"id": "1", "type": "subscribe", "payload": {"query": format!("subscription {{ {} }}", aliases.join(" "))}}))
        .await;
    let answer = ws_frame(&mut fan).await;
    assert_eq!(answer["payload"]["errors"][0]["extensions"]["code"], "GRAPHQL_VALIDATION_FAILED", "{answer}");
    // An unknown message type: 4400 with a short reason of ours, not the client's text.
    ws_send(&mut fan, json!({"type": format!("x{}", "y".repeat(500))})).await;
    loop {
        let f = ws_frame(&mut fan).await;
        if f.get("type").is_some() {
            continue;
        }
        assert_eq!(f["close"], 4400, "{f}");
        break;
    }
    // 1000 subscriptions on one connection: the first 100 run, the rest are refused at once.
    let mut flood = ws_connect(&s.base, &team).await;
    for id in 0..1000 {
        ws_send(&mut flood, json!({"id": id.to_string(), "type": "subscribe", "payload": {"query": WS_SUBSCRIPTION}})).await;
    }
    let mut refused = 0;
    while refused < 900 {
        let f = ws_frame(&mut flood).await;
        if f["payload"]["errors"][0]["extensions"]["code"] == "TOO_MANY_SUBSCRIPTIONS" {
            refused += 1;
        } else {
            assert!(matches!(f["type"].as_str(), Some("complete")), "{f}");
        }
    }
    // 21 connections of one client: the 21st is refused at its connection_init.
    let client = token(&format!("{team_name}--limits"), "tardis:team:read");
    let mut same = Vec::new();
    for _ in 0..20 {
        same.push(ws_connect(&s.base, &client).await);
    }
    {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = format!("{}/graphql/query", s.base.replacen("http", "ws", 1)).into_client_request().unwrap();
        request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
        let (mut one_more, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        ws_send(&mut one_more, json!({"type": "connection_init", "payload": {"Authorization": format!("Bearer {client}")}})).await;
        assert_eq!(ws_frame(&mut one_more).await["close"], 4429, "the 21st connection of one client");
    }
    assert!(readers.iter().all(|r| !r.is_finished()), "the reading subscriptions stay open");
    assert!(s.alive(), "the server died on hostile WebSocket input");
    assert_eq!(s.healthz().await, 200);
    let (_, _, counts_after) = s.post(ADMIN, q("{ teams { totalCount } }".into())).await;
    assert_eq!(counts_after, counts_before);
    drop((big, garbage, flood, same));

    // Over GET too.
    let deep = format!("{{ nodes(ids: {}\"x\"{}) {{ id }} }}", "[".repeat(2000), "]".repeat(2000));
    let resp = s.http.get(format!("{}/graphql/query", s.base)).query(&[("query", deep)]).bearer_auth(&team).send().await.unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "INPUT_TOO_DEEP", "{body}");
    assert!(s.alive());

    // ---- 8 heavy requests at once: small queries and /healthz keep answering ----
    let stop = Arc::new(AtomicBool::new(false));
    reset_peak(s.pid);
    let (before, _) = memory(s.pid);
    let load = heavy_load(&s.http, &s.base, 8, stop.clone());
    // Barrier: heavy work is running.
    s.wait_for_metric("controlplane_graphql_executing{lane=\"heavy\"}", 1.0).await;
    for _ in 0..20 {
        let (status, code, body) =
            s.post(&team, q("{ applications(first: 5) { totalCount edges { node { name zone { name } } } } }".into())).await;
        assert_eq!((status, code.as_str()), (200, "OK"), "{body}");
        assert_eq!(s.healthz().await, 200);
    }
    stop.store(true, Ordering::Relaxed);
    let mut answers = Vec::new();
    for l in load {
        answers.extend(l.await.unwrap());
    }
    assert!(!answers.is_empty());
    assert!(answers.iter().all(|(status, code)| *status == 200 && (code == "OK" || code == "TIMEOUT")), "{answers:?}");
    let (_, peak) = memory(s.pid);
    assert!(peak.saturating_sub(before) < GROWTH_MB, "heavy load: {before} MB → peak {peak} MB");

    // ---- an oversized manifest: skipped, nothing stored is lost, counts stay cheap ----
    let (_, _, before_counts) = s.post(ADMIN, q("{ teams { totalCount } }".into())).await;
    let skips_before = s.metric("projector_reconcile_total{module=\"team\",outcome=\"skip\"}").await;
    reset_peak(s.pid);
    let (before, _) = memory(s.pid);
    let (group, short) = team_name.split_once("--").unwrap();
    let huge = format!(
        "apiVersion: organization.cp.ei.telekom.de/v1\nkind: Team\nmetadata:\n  name: {team_name}\n  namespace: poc\n  labels:\n    cp.ei.telekom.de/environment: poc\nspec:\n  name: {short}\n  group: {group}\n  email: x@example.com\n  description: {}\n",
        "x".repeat(50 << 20)
    );
    std::fs::write(manifests.join("zz-huge.yaml"), huge).unwrap();
    // Barrier: the skip is logged (after it is counted).
    let skipped = |log: &str| log.lines().any(|l| l.contains("document skipped") && l.contains("zz-huge.yaml"));
    let log = s.log.clone();
    tokio::task::spawn_blocking(move || log.wait_until("the huge manifest's skip", Duration::from_secs(60), skipped)).await.unwrap();
    assert!(s.metric("projector_reconcile_total{module=\"team\",outcome=\"skip\"}").await > skips_before, "the skip is counted");
    for tok in [&team, ADMIN] {
        let (status, code) =
            s.case("teams { totalCount } after the oversized manifest", tok, q("{ teams { totalCount } }".into()), GROWTH_MB).await;
        assert_eq!((status, code.as_str()), (200, "OK"));
    }
    let (_, _, after_counts) = s.post(ADMIN, q("{ teams { totalCount } }".into())).await;
    assert_eq!(after_counts, before_counts, "the team keeps its stored record");
    let (_, peak) = memory(s.pid);
    assert!(peak.saturating_sub(before) < GROWTH_MB, "oversized manifest: {before} MB → peak {peak} MB");
    std::fs::remove_file(manifests.join("zz-huge.yaml")).unwrap();

    // ---- SIGTERM with heavy requests in flight ----
    let stop = Arc::new(AtomicBool::new(false));
    let load = heavy_load(&s.http, &s.base, 8, stop.clone());
    s.wait_for_metric("controlplane_graphql_executing{lane=\"heavy\"}", 1.0).await;
    let (status, data) = s.terminate();
    assert!(status.success(), "exit status {status}");
    stop.store(true, Ordering::Relaxed);
    let mut answers = Vec::new();
    for l in load {
        answers.extend(l.await.unwrap());
    }
    // In flight at SIGTERM: answered (stopped requests say UNAVAILABLE), or the connection closed.
    assert!(
        answers
            .iter()
            .all(|(status, code)| (*status == 200 && ["OK", "TIMEOUT", "UNAVAILABLE"].contains(&code.as_str())) || code == "CLOSED"),
        "{answers:?}"
    );
    // Every open subscription connection was closed with 1001 (or, cut by the exit, ended).
    for r in readers {
        let end = r.await.unwrap();
        assert!(end["close"] == 1001 || end.get("closed").is_some(), "{end}");
    }
    drop(stalled);
    let store = storage::Store::open(&data).expect("the store opens after SIGTERM");
    assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    drop(store);

    // ---- an answer larger than `graphql.maxResponseBytes`: cut, whatever the machine's load
    // (the request timeout is long enough for the limit to come first) ----
    let mut s = Server::start(&manifests, &data, &[("CP_GRAPHQL_REQUEST_TIMEOUT", "120s")]).await;
    let aliases = (0..500)
        .map(|i| format!("a{i}: approvalRequests(first: 1000) {{ edges {{ node {{ id name requester {{ reason teamName }} }} }} }}"));
    let name = "500 aliases of approvalRequests(first: 1000): a 188 MB answer";
    let (status, code) = s.case(name, ADMIN, q(format!("{{ {} }}", aliases.collect::<Vec<_>>().join(" "))), GROWTH_MB).await;
    assert_eq!((status, code.as_str()), (200, "RESPONSE_TOO_LARGE"), "{name}");
    let (status, _) = s.terminate();
    assert!(status.success(), "exit status {status}");

    // ---- the memory budget of the queries in flight (`graphql.maxInFlightBytes`, 1 MiB): a
    // query that alone holds more beyond its free 256 KiB gets a final MEMORY_BUDGET_EXCEEDED
    // (no Retry-After: retrying cannot help); queries within it pass, again and again (each
    // gives its share back). (Queries that would fit alone but find the pool taken get
    // OVERLOADED: the deadline's unit tests; HTTP 503 with Retry-After: the full queue below.) ----
    let s = Server::start(&manifests, &data, &[("CP_GRAPHQL_MAX_IN_FLIGHT_BYTES", "1048576")]).await;
    let aliases = |n: usize| {
        let fields = (0..n)
            .map(|i| format!("a{i}: approvalRequests(first: 1000) {{ edges {{ node {{ id name requester {{ reason teamName }} }} }} }}"));
        q(format!("{{ {} }}", fields.collect::<Vec<_>>().join(" ")))
    };
    let r = s.http.post(format!("{}/graphql/query", s.base)).bearer_auth(ADMIN).json(&aliases(8)).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers().get("retry-after").and_then(|v| v.to_str().ok())), (200, None));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["data"], Value::Null, "{body}");
    assert_eq!(
        body["errors"][0]["extensions"],
        json!({"code": "MEMORY_BUDGET_EXCEEDED", "limit": "graphql.maxInFlightBytes", "max": 1048576})
    );
    for round in 0..3 {
        let (status, _, body) = s.post(ADMIN, aliases(2)).await;
        assert_eq!(status, 200, "round {round}: {body}");
        assert!(body["errors"].is_null() && body["data"]["a1"]["edges"].as_array().is_some_and(|e| !e.is_empty()), "round {round}: {body}");
    }
    assert_eq!(s.metric("controlplane_graphql_requests_total{code=\"MEMORY_BUDGET_EXCEEDED\"}").await, 1.0);
    drop(s);

    // ---- a query's share is the most it holds at once: eight sorts by two fields, one after
    // the other, each holding the keys of every approval request (≈ 3 MB), fit a budget of
    // 8 MiB that their sum would not ----
    let s = Server::start(&manifests, &data, &[("CP_GRAPHQL_MAX_IN_FLIGHT_BYTES", "8388608")]).await;
    let sorts = (0..8).map(|i| {
        format!("s{i}: approvalRequests(first: 1, orderBy: [{{field: CREATED_AT}}, {{field: LAST_MODIFIED_AT, direction: DESC}}]) {{ totalCount }}")
    });
    let (status, _, body) = s.post(ADMIN, q(format!("{{ {} }}", sorts.collect::<Vec<_>>().join(" ")))).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["errors"].is_null() && body["data"]["s7"]["totalCount"].as_u64().is_some_and(|n| n > 10_000), "{body}");
    drop(s);

    // ---- a 1 ms time limit: TIMEOUT, no data ----
    let mut s = Server::start(&manifests, &data, &[("CP_GRAPHQL_REQUEST_TIMEOUT", "1ms")]).await;
    let (status, code) = s.case("1 ms time limit", ADMIN, q(HEAVY[1].to_string()), GROWTH_MB).await;
    assert_eq!((status, code.as_str()), (200, "TIMEOUT"));
    let (_, _, body) = s.post(ADMIN, q(HEAVY[0].to_string())).await;
    assert_eq!(body["data"], Value::Null, "{body}");
    assert_eq!(body["errors"][0]["extensions"]["code"], "TIMEOUT");
    assert!(s.metric("controlplane_graphql_requests_total{code=\"TIMEOUT\"}").await >= 2.0);
    drop(s);

    // ---- a full queue: HTTP 503 with Retry-After ----
    let s = Server::start(&manifests, &data, &[("CP_GRAPHQL_WORKERS", "2"), ("CP_GRAPHQL_QUEUE_LENGTH", "1")]).await;
    let sends: Vec<_> = (0..12)
        .map(|_| {
            let req = s.http.post(format!("{}/graphql/query", s.base)).bearer_auth(ADMIN).json(&q(HEAVY[0].to_string()));
            tokio::spawn(async move {
                let r = req.send().await.unwrap();
                let retry = r.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
                let status = r.status().as_u16();
                let body: Value = r.json().await.unwrap_or(Value::Null);
                (status, retry, body["errors"][0]["extensions"]["code"].as_str().unwrap_or_default().to_string())
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in sends {
        statuses.push(t.await.unwrap());
    }
    assert!(statuses.iter().any(|(st, _, _)| *st == 200), "{statuses:?}");
    let refused: Vec<_> = statuses.iter().filter(|(st, _, _)| *st == 503).collect();
    assert!(!refused.is_empty(), "at most 4 of 12 are admitted at once: {statuses:?}");
    // Answered with the code it is counted under.
    assert!(refused.iter().all(|(_, retry, code)| retry.as_deref() == Some("1") && code == "OVERLOADED"), "{statuses:?}");
    assert!(s.metric("controlplane_graphql_requests_total{code=\"OVERLOADED\"}").await >= 1.0);
}

/// With `mutations.enabled` on the kube source (the bundled world on the fake API server):
/// hostile mutation requests are refused before anything is written, within the same bounds as
/// queries, and the server stays up; the bounded-cost refusals of queries hold as well.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_mutations_enabled_hostile_requests_are_refused_and_nothing_is_written() {
    let fake = fake_k8s::FakeK8s::start_world().await;
    let tmp = tempfile::tempdir().unwrap();
    // A node bound the bundled world can pass (its lists are short).
    let env = [("CP_MUTATIONS_ENABLED", "true"), ("CP_GRAPHQL_MAX_NODES", "1000")];
    let mut s = Server::start_kube(&fake.url(), &tmp.path().join("data"), &env).await;
    let team = token("payments--checkout--console", "tardis:team:all");
    let (_, _, ids) = s.post(ADMIN, q("{ teams(where: {name: \"payments--checkout\"}) { edges { node { id } } } }".into())).await;
    let team_id = ids["data"]["teams"]["edges"][0]["node"]["id"].as_str().unwrap().to_string();
    let create = "mutation($in: CreateTeamInput!) { createTeam(input: $in) { accepted errors { code field } } }";
    let members: Vec<Value> = (0..20_000).map(|i| json!({"name": "m", "email": format!("m{i}@example.com")})).collect();
    let rotate = |i: usize| format!("m{i}: rotateTeamToken(teamId: \"{team_id}\") {{ accepted }}");
    let deep_input = format!("mutation {{ createGroup(input: {{environment: \"poc\", name: \"x\", displayName: \"x\", description: {}\"x\"{}}}) {{ accepted }} }}", "[".repeat(2000), "]".repeat(2000));
    let heavy_payload = format!(
        "mutation {{ rotateTeamToken(teamId: \"{team_id}\") {{ team {{ {} }} }} }}",
        "applications(first: 1000) { edges { node { zone { applications { zone { applications { name } } } } } } }"
    );
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "11 mutation fields",
            ADMIN,
            q(format!("mutation {{ {} }}", (0..11).map(rotate).collect::<Vec<_>>().join(" "))),
            "TOO_MANY_MUTATIONS",
        ),
        (
            "5000 mutation fields",
            ADMIN,
            q(format!("mutation {{ {} }}", (0..5000).map(rotate).collect::<Vec<_>>().join(" "))),
            "TOO_MANY_MUTATIONS",
        ),
        ("an input nested 2000 levels", ADMIN, q(deep_input), "INPUT_TOO_DEEP"),
        ("a payload selecting lists of lists", ADMIN, q(heavy_payload), "TOO_MANY_NODES"),
        (
            "20000 members (a list longer than graphql.maxPageSize)",
            ADMIN,
            json!({"query": create, "variables": {"in": {"environment": "poc", "group": "payments", "name": "x", "email": "x@example.com", "members": members}}}),
            "BAD_USER_INPUT",
        ),
        (
            "a 900 kB description",
            ADMIN,
            json!({"query": create, "variables": {"in": {"environment": "poc", "group": "payments", "name": "x", "email": "x@example.com", "members": [], "description": "d".repeat(900_000)}}}),
            "OK",
        ),
        (
            "a name of 100 kB",
            &team,
            json!({"query": create, "variables": {"in": {"environment": "poc", "group": "payments", "name": "n".repeat(100_000), "email": "x@example.com", "members": []}}}),
            "OK",
        ),
    ];
    for (name, tok, body, expected) in cases {
        let (status, code) = s.case(name, tok, body.clone(), GROWTH_MB).await;
        assert_eq!((status, code.as_str()), (200, expected), "{name}");
        if expected == "OK" {
            let (_, _, answer) = s.post(tok, body).await;
            assert_eq!(answer["data"]["createTeam"]["errors"][0]["code"], "VALIDATION_FAILED", "{name}: {answer}");
        }
    }
    let resp = s
        .http
        .get(format!("{}/graphql/query", s.base))
        .query(&[("query", format!("mutation {{ {} }}", rotate(0)))])
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 406, "a mutation over GET");
    assert_eq!(fake.writes(), 0, "no hostile mutation reached the cluster");
    // The server still writes and answers.
    let (status, code, body) = s.post(&team, q(format!("mutation {{ {} }}", rotate(0)))).await;
    assert_eq!((status, code.as_str(), &body["data"]["m0"]["accepted"]), (200, "OK", &json!(true)), "{body}");
    assert_eq!(fake.writes(), 1);
    assert!(s.alive());
    assert_eq!(s.healthz().await, 200);
}
