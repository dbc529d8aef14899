//! `POST /graphql/export` over HTTP on the example world: the formats and their headers, the
//! refusals before any row (with codes and statuses), `export.maxRows` ending the rows with an
//! error line in both formats, and stalled exports: they hold their place (one per client,
//! `export.maxConcurrent` overall, HTTP 429 `TOO_MANY_EXPORTS` beyond), a client that never reads
//! is cut at `export.timeout` plus the grace without the server's memory growing, and `/healthz`
//! and queries answer meanwhile.

mod common;

use base64::Engine;
use common::{query, stalled_export, wait, ADMIN};
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
    // The barrier is the product's own: the initial sync applied and followed (the memory a
    // test measures is then not the load's).
    assert!(running.app().wait_caught_up(Duration::from_secs(120)).await, "initial sync");
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
    // Background steps (ordering indexes, the change log's index) may still commit: the header
    // names the revision the export read, between the store's before and after it.
    let before = metric(&client, &base, "controlplane_store_revision").await as u64;
    let r = export(&client, &base, ADMIN, "?format=ndjson", q).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/x-ndjson");
    let revision: u64 = r.headers()["x-store-revision"].to_str().unwrap().parse().unwrap();
    let text = r.text().await.unwrap();
    let zones = query(&client, &base, json!({"query": q})).await;
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(json!(lines), zones["data"]["zones"], "{text}");
    let after = metric(&client, &base, "controlplane_store_revision").await as u64;
    assert!(before > 0 && (before..=after).contains(&revision), "{before} ≤ {revision} ≤ {after}");

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
        ("?format=csv&form%61t=ndjson", "{ zones { name } }", 400, "BAD_REQUEST"),
        ("?format=%63sv%00", "{ zones { name } }", 400, "BAD_REQUEST"),
    ] {
        let r = export(&client, &base, ADMIN, params, query).await;
        assert_eq!(r.status(), status, "{params} {query}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["errors"][0]["extensions"]["code"], code, "{body}");
    }
    let r = client.post(format!("{base}/graphql/export")).json(&json!({"query": "{ zones { name } }"})).send().await.unwrap();
    assert_eq!(r.status(), 401);
    // Parameter names and values are percent-decoded.
    let encoded = export(&client, &base, ADMIN, "?form%61t=c%73v", "{ zones { name } }").await;
    assert_eq!(encoded.headers()["content-type"].to_str().unwrap().split(';').next(), Some("text/csv"));
    assert!(encoded.text().await.unwrap().starts_with("name\r\n"));
    for method in [reqwest::Method::GET, reqwest::Method::PUT, reqwest::Method::DELETE] {
        let r = client.request(method.clone(), format!("{base}/graphql/export")).bearer_auth(ADMIN).send().await.unwrap();
        assert_eq!(
            (r.status().as_u16(), r.headers().get("allow").map(|a| a.to_str().unwrap().to_string())),
            (405, Some("POST".into())),
            "{method}"
        );
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["errors"][0]["extensions"]["code"], "METHOD_NOT_ALLOWED", "{method}: {body}");
    }
    running.shutdown().await.unwrap();
}

/// Resident memory of this process (the server runs in it), in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    statm.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4096
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
