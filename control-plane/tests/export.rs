//! `POST /graphql/export` over HTTP on the example world: the formats and their headers, the
//! refusals before any row (with codes and statuses), `export.maxRows` ending the rows with an
//! error line in both formats, and stalled exports: they hold their place (one per client,
//! `export.maxConcurrent` overall, HTTP 429 `TOO_MANY_EXPORTS` beyond), a client that never reads
//! is cut at `export.timeout` plus the grace without the server's memory growing, and `/healthz`
//! and queries answer meanwhile.

mod common;

use base64::Engine;
use common::ADMIN;
use control_plane::config::Config;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

async fn server(configure: impl FnOnce(&mut Config)) -> (control_plane::app::Running, String, reqwest::Client) {
    let tmp = tempfile::tempdir().unwrap();
    let world = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world");
    let mut config = Config::for_manifests(&world, &tmp.keep().join("data"));
    configure(&mut config);
    let running = control_plane::start(config).await.unwrap();
    let base = format!("http://{}", running.local_addr());
    (running, base, reqwest::Client::new())
}

/// A mock token of a team viewer whose client is `client`.
fn token(client: &str) -> String {
    let b = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.mock", b(json!({"alg": "none"})), b(json!({"clientId": client, "scope": "tardis:admin:all", "env": "poc"})))
}

async fn export(client: &reqwest::Client, base: &str, token: &str, params: &str, query: &str) -> reqwest::Response {
    client.post(format!("{base}/graphql/export{params}")).bearer_auth(token).json(&json!({"query": query})).send().await.unwrap()
}

/// The answer of /graphql/query to `body`, as the admin.
async fn query(client: &reqwest::Client, base: &str, body: Value) -> Value {
    client.post(format!("{base}/graphql/query")).bearer_auth(ADMIN).json(&body).send().await.unwrap().json().await.unwrap()
}

async fn metric(client: &reqwest::Client, base: &str, name: &str) -> f64 {
    let text = client.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    text.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok())).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread")]
async fn both_formats_stream_with_the_revision_and_refusals_come_before_any_row() {
    let (running, base, client) = server(|c| {
        c.export.max_rows = 5;
        c.graphql.limits.max_complexity = 100_000;
    })
    .await;
    let q = "{ zones { name gatewayURL applications { name } } }";
    let r = export(&client, &base, ADMIN, "?format=ndjson", q).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/x-ndjson");
    let revision: u64 = r.headers()["x-store-revision"].to_str().unwrap().parse().unwrap();
    let text = r.text().await.unwrap();
    let zones = query(&client, &base, json!({"query": q})).await;
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(json!(lines), zones["data"]["zones"], "{text}");
    assert_eq!(revision, metric(&client, &base, "controlplane_store_revision").await as u64);

    let r = client
        .post(format!("{base}/graphql/export"))
        .bearer_auth(ADMIN)
        .header("accept", "text/csv")
        .json(&json!({"query": q}))
        .send()
        .await
        .unwrap();
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("text/csv"));
    let csv = r.text().await.unwrap();
    assert!(csv.starts_with("name,gatewayURL,applications.name\r\n"), "{csv}");
    assert_eq!(csv.matches("\r\n").count(), lines.len() + 1);

    // export.maxRows 5: five rows, then the error line.
    let apps = "{ applications { edges { node { name } } } }";
    let text = export(&client, &base, ADMIN, "", apps).await.text().await.unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), 6, "{text}");
    let last: Value = serde_json::from_str(rows[5]).unwrap();
    assert_eq!(last["error"]["code"], "EXPORT_TOO_LARGE", "{last}");
    let csv = export(&client, &base, ADMIN, "?format=csv", apps).await.text().await.unwrap();
    let records: Vec<&str> = csv.trim_end().split("\r\n").collect();
    assert_eq!(records.len(), 7, "a header, five rows and the error: {csv}");
    assert!(records[6].starts_with("#error,EXPORT_TOO_LARGE,"), "{csv}");
    assert_eq!(metric(&client, &base, "controlplane_exports_total{format=\"csv\",outcome=\"EXPORT_TOO_LARGE\"}").await, 1.0);
    // Rows of about 40 KB, handed over in chunks of 64 KiB: the chunks end with whole rows and
    // the error line is a line of its own.
    let aliases: String = (0..600).map(|i| format!("a{i}: id ")).collect();
    let wide = format!("{{ applications {{ edges {{ node {{ {aliases} }} }} }} }}");
    let text = export(&client, &base, ADMIN, "", &wide).await.text().await.unwrap();
    let lines: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {}", &l[..l.len().min(80)]))).collect();
    assert_eq!(lines.len(), 6);
    assert!(lines[..5].iter().all(|l| l["a599"] == l["a0"]), "whole rows");
    assert_eq!(lines[5]["error"]["code"], "EXPORT_TOO_LARGE");

    for (params, query, status, code) in [
        ("", "{ zones { name } groups { name } }", 400, "NOT_EXPORTABLE"),
        ("", "mutation { __typename }", 400, "NOT_EXPORTABLE"),
        ("", "{ applications { edges { node { nope } } } }", 400, "GRAPHQL_VALIDATION_FAILED"),
        ("?format=xlsx", "{ zones { name } }", 400, "BAD_REQUEST"),
        ("?format=csv&format=ndjson", "{ zones { name } }", 400, "BAD_REQUEST"),
    ] {
        let r = export(&client, &base, ADMIN, params, query).await;
        assert_eq!(r.status(), status, "{params} {query}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["errors"][0]["extensions"]["code"], code, "{body}");
    }
    let r = client.post(format!("{base}/graphql/export")).json(&json!({"query": "{ zones { name } }"})).send().await.unwrap();
    assert_eq!(r.status(), 401);
    running.shutdown().await.unwrap();
}

/// Waits until `condition` holds of the server's metrics (re-checked at each change they
/// announce); two minutes at most, so a failure does not hang the suite.
async fn wait(running: &control_plane::app::Running, condition: impl FnMut(&control_plane::metrics::Metrics) -> bool) {
    assert!(running.app().metrics().wait_until(Duration::from_secs(120), condition).await, "the metrics did not get there");
}

/// Resident memory of this process (the server runs in it), in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4096
}

/// Sends an export request on a connection that never reads (a small receive buffer, so the
/// server's rows wait for it instead of filling this machine's socket buffers).
async fn stalled_export(addr: std::net::SocketAddr, token: &str, query: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let body = json!({"query": query}).to_string();
    let request = format!(
        "POST /graphql/export HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes()).await.unwrap();
    stream
}

#[tokio::test(flavor = "multi_thread")]
async fn stalled_exports_hold_their_place_and_a_client_that_never_reads_is_cut() {
    let (running, base, client) = server(|c| {
        c.export.timeout = Duration::from_secs(2);
        c.graphql.limits.max_complexity = 1_000_000;
        c.graphql.limits.max_page_size = 2;
    })
    .await;
    // Rows of about 450 KB (7 MB in all): more than a connection's buffers take.
    let aliases: String = (0..6000).map(|i| format!("a{i}: id ")).collect();
    let big = format!("{{ applications {{ edges {{ node {{ {aliases} }} }} }} }}");
    let before = rss();
    let stalled = stalled_export(running.local_addr(), ADMIN, &big).await;
    wait(&running, |m| m.export.running.get() >= 1).await;
    // The same client again, twice: refused while its export runs.
    for _ in 0..2 {
        let r = export(&client, &base, ADMIN, "", "{ zones { name } }").await;
        assert_eq!(r.status(), 429);
        assert!(r.headers().contains_key("retry-after"));
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["errors"][0]["extensions"]["code"], "TOO_MANY_EXPORTS", "{body}");
    }
    // Another client holds the second place without reading; a third is refused.
    let second = stalled_export(running.local_addr(), &token("payments--ledger--console"), &big).await;
    wait(&running, |m| m.export.running.get() >= 2).await;
    let third = export(&client, &base, &token("payments--checkout--console"), "", "{ zones { name } }").await;
    assert_eq!(third.status(), 429);
    // Liveness and queries answer meanwhile.
    assert_eq!(client.get(format!("{base}/healthz")).send().await.unwrap().status(), 200);
    let zones: Value = client
        .post(format!("{base}/graphql/query"))
        .bearer_auth(ADMIN)
        .json(&json!({"query": "{ zones { name } }"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(zones["data"]["zones"].as_array().is_some_and(|z| !z.is_empty()), "{zones}");
    // Both stalled connections are closed after export.timeout and the grace; their places free.
    wait(&running, |m| m.http_connections_closed.with_label_values(&["answer_timeout"]).get() >= 2).await;
    wait(&running, |m| m.export.running.get() == 0).await;
    let grown = rss().saturating_sub(before);
    assert!(grown < 64 << 20, "the stalled exports held {grown} bytes more");
    for mut s in [stalled, second] {
        // What the server had sent, then the end of the connection.
        let mut received = Vec::new();
        let _ = tokio::io::AsyncReadExt::read_to_end(&mut s, &mut received).await;
        assert!(received.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&received[..received.len().min(200)]));
    }
    assert_eq!(export(&client, &base, ADMIN, "", "{ zones { name } }").await.status(), 200);
    running.shutdown().await.unwrap();
}

/// A Team manifest of the group `assist` whose email is `email`, with `members` members.
fn team_manifest(name: &str, email: &str, members: usize) -> String {
    let members: String =
        (0..members).map(|i| format!("  - name: Member number {i} of {name}\n    email: member{i}.{name}@example.com\n")).collect();
    format!(
        "apiVersion: organization.cp.ei.telekom.de/v1\nkind: Team\nmetadata:\n  name: assist--{name}\n  namespace: poc\n  labels:\n    cp.ei.telekom.de/environment: poc\nspec:\n  name: {name}\n  group: assist\n  email: {email}\n  category: Customer\n  members:\n{members}"
    )
}

/// Every node of a connection `field(args)` selected by `selection`, walked with `first`/`after`
/// over /graphql/query.
async fn walk(client: &reqwest::Client, base: &str, field: &str, args: &str, selection: &str) -> Vec<Value> {
    let text = format!(
        "query($after: Cursor) {{ {field}({args} after: $after) {{ edges {{ node {{ {selection} }} }} pageInfo {{ hasNextPage endCursor }} }} }}"
    );
    let (mut nodes, mut after) = (Vec::new(), Value::Null);
    loop {
        let answer = query(client, base, json!({"query": text, "variables": {"after": after}})).await;
        assert!(answer.get("errors").is_none(), "{answer}");
        let page = &answer["data"][field];
        nodes.extend(page["edges"].as_array().unwrap().iter().map(|e| e["node"].clone()));
        if page["pageInfo"]["hasNextPage"] != json!(true) {
            return nodes;
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
}

/// The store revision of an export's head (`X-Store-Revision`) and its rows, read from a
/// connection that reads its head, then waits for `between` before it reads the rest.
async fn export_with_a_pause(stream: &mut tokio::net::TcpStream, between: impl std::future::Future<Output = ()>) -> (u64, Vec<Value>) {
    use tokio::io::AsyncReadExt;
    let mut raw = Vec::new();
    let head_end = loop {
        let mut buf = [0u8; 4096];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the head came");
        raw.extend_from_slice(&buf[..n]);
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_lowercase();
    assert!(head.starts_with("http/1.1 200") && head.contains("transfer-encoding: chunked"), "{head}");
    let revision = head.lines().find_map(|l| l.strip_prefix("x-store-revision: ")).unwrap().trim().parse().unwrap();
    between.await;
    // Until the last chunk (the connection stays open for the next request).
    while !raw.ends_with(b"\r\n0\r\n\r\n") {
        let mut buf = [0u8; 65536];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the body ends with its last chunk");
        raw.extend_from_slice(&buf[..n]);
    }
    // The chunked body: `<hex size>\r\n<bytes>\r\n`, until a chunk of size 0.
    let (mut body, mut at) = (Vec::new(), head_end);
    loop {
        let line_end = at + raw[at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&raw[at..line_end]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        body.extend_from_slice(&raw[line_end + 2..line_end + 2 + size]);
        at = line_end + 2 + size + 2;
    }
    // More than every buffer between the export and this client (its chunks in flight, the
    // sockets: 4 MiB at most here).
    assert!(body.len() > 6 << 20, "the rows outgrow every buffer between the export and this client: {} bytes", body.len());
    (revision, body.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect())
}

/// P6's acceptance under churn, over HTTP: while a thread adds a team and changes another's
/// email at every commit (each write waits for the commit before it), exports of 2,500 teams of
/// 3.2 KB in pages of 10, whose client stops reading after the head until a commit has landed
/// (the export waits for it meanwhile: its rows outgrow every buffer), hold exactly the teams of
/// the revision in their header — by the store's own change log (`activity`) — with the
/// changed team's email of that revision (`history`).
#[tokio::test(flavor = "multi_thread")]
async fn under_churn_every_row_of_an_export_is_of_the_revision_in_its_header() {
    let tmp = tempfile::tempdir().unwrap();
    let world = tmp.path().join("world");
    std::fs::create_dir_all(&world).unwrap();
    for file in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world")).unwrap() {
        let file = file.unwrap();
        std::fs::copy(file.path(), world.join(file.file_name())).unwrap();
    }
    let bulk: String = (0..2500).map(|i| format!("---\n{}", team_manifest(&format!("bulk{i:04}"), "bulk@example.com", 40))).collect();
    std::fs::write(world.join("90-bulk.yaml"), bulk).unwrap();
    std::fs::write(world.join("91-churn.yaml"), team_manifest("churn", "v0@example.com", 1)).unwrap();
    let mut config = Config::for_manifests(&world, &tmp.path().join("data"));
    config.graphql.limits.max_page_size = 10;
    let running = control_plane::start(config).await.unwrap();
    let (base, client) = (format!("http://{}", running.local_addr()), reqwest::Client::new());
    wait(&running, |_| running.app().readiness().is_settled()).await;

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (store, stop, world) = (running.app().store().clone(), stop.clone(), world.clone());
        std::thread::spawn(move || {
            let mut writes = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                writes += 1;
                let revision = store.read().unwrap().revision().unwrap();
                std::fs::write(world.join("91-churn.yaml"), team_manifest("churn", &format!("v{writes}@example.com"), 1)).unwrap();
                std::fs::write(
                    world.join(format!("92-churn{writes}.yaml")),
                    team_manifest(&format!("churn{writes}"), "new@example.com", 1),
                )
                .unwrap();
                assert!(store.wait_for_revision_after(revision, Duration::from_secs(60)).unwrap() > revision, "the churn commits");
            }
            writes
        })
    };
    let teams = "{ teams { edges { node { id name email members { name email } } } } }";
    for _ in 0..2 {
        let mut stream = stalled_export(running.local_addr(), ADMIN, teams).await;
        let store = running.app().store().clone();
        let (revision, rows) = export_with_a_pause(&mut stream, async {
            let at = store.read().unwrap().revision().unwrap();
            let later =
                tokio::task::spawn_blocking(move || store.wait_for_revision_after(at, Duration::from_secs(60)).unwrap()).await.unwrap();
            assert!(later > at, "a commit landed while the export waited");
        })
        .await;
        // The store's log says which teams there were at that revision (none is deleted here).
        let log = walk(&client, &base, "activity", "kinds: [TEAM], first: 10,", "revision id").await;
        let expected: std::collections::BTreeSet<String> =
            log.iter().filter(|c| c["revision"].as_u64().unwrap() <= revision).map(|c| c["id"].as_str().unwrap().to_string()).collect();
        let exported: std::collections::BTreeSet<String> = rows.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
        assert_eq!(exported.len(), rows.len(), "no team twice");
        assert!(log.iter().any(|c| c["revision"].as_u64().unwrap() > revision), "teams were added after the export's revision");
        assert_eq!(exported, expected, "the teams of revision {revision}");
        let churned = rows.iter().find(|r| r["name"] == "assist--churn").expect("the churned team is exported");
        let versions = walk(
            &client,
            &base,
            "history",
            &format!("id: \"{}\", first: 10,", churned["id"].as_str().unwrap()),
            "revision node { ... on Team { email } }",
        )
        .await;
        let then =
            versions.iter().find(|v| v["revision"].as_u64().unwrap() <= revision).expect("a version at or before the export's revision");
        assert_eq!(churned["email"], then["node"]["email"], "the churned team's email of revision {revision}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(churn.join().unwrap() > 1, "the churn wrote");
    running.shutdown().await.unwrap();
}
