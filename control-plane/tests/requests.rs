//! How requests are read: only a JSON object with a query (or a persisted
//! query's hash) is executed; refusals at the HTTP level carry a GraphQL `extensions.code`; a
//! subscription sent over HTTP is counted under its code; an asset name that does not decode is
//! 404; an answer whose every root field is skipped is `{}`.

mod common;

use common::ADMIN;
use control_plane::config::Config;
use serde_json::{json, Value};
use std::path::Path;

async fn server() -> (control_plane::app::Running, String, reqwest::Client) {
    let tmp = tempfile::tempdir().unwrap();
    let world = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world");
    let running = control_plane::start(Config::for_manifests(&world, &tmp.keep().join("data"))).await.unwrap();
    let base = format!("http://{}", running.local_addr());
    (running, base, reqwest::Client::new())
}

async fn post(client: &reqwest::Client, base: &str, body: &str) -> (u16, Value) {
    let r = client
        .post(format!("{base}/graphql/query"))
        .bearer_auth(ADMIN)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread")]
async fn only_a_json_object_with_a_query_is_executed_and_every_refusal_has_a_code() {
    let (running, base, client) = server().await;
    for body in [
        r#"["{ zones { name } }"]"#,
        "[]",
        "{}",
        r#"{"variables": {}}"#,
        "  \n[{\"query\": \"{ zones { name } }\"}]",
        r#"{"query": " \n\t"}"#,
    ] {
        let (status, answer) = post(&client, &base, body).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["errors"][0]["extensions"]["code"], "BAD_REQUEST", "{body}: {answer}");
        assert!(answer["data"].is_null(), "nothing executed for {body}: {answer}");
    }
    // A persisted query's hash alone is a request (answered PERSISTED_QUERY_NOT_FOUND here).
    let hash = json!({"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "a".repeat(64)}}}).to_string();
    let (status, answer) = post(&client, &base, &hash).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["errors"][0]["extensions"]["code"], "PERSISTED_QUERY_NOT_FOUND", "{answer}");

    // Refusals at the HTTP level: problem JSON with a GraphQL code.
    let unauthenticated: Value = client
        .post(format!("{base}/graphql/query"))
        .json(&json!({"query": "{ zones { name } }"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(unauthenticated["errors"][0]["extensions"]["code"], "UNAUTHENTICATED", "{unauthenticated}");
    let large = format!(r#"{{"query": "{}"}}"#, " ".repeat(2 << 20));
    let (status, answer) = post(&client, &base, &large).await;
    assert_eq!((status, answer["errors"][0]["extensions"]["code"].clone()), (413, json!("PAYLOAD_TOO_LARGE")), "{answer}");
    let long = client.get(format!("{base}/graphql/query?query={}", "x".repeat(20 << 10))).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(long.status(), 414);
    let long: Value = long.json().await.unwrap();
    assert_eq!(long["errors"][0]["extensions"]["code"], "URI_TOO_LONG", "{long}");
    let mut headers = reqwest::header::HeaderMap::new();
    for i in 0..20 {
        headers
            .insert(reqwest::header::HeaderName::from_bytes(format!("x-pad-{i}").as_bytes()).unwrap(), "y".repeat(4000).parse().unwrap());
    }
    let big = client.get(format!("{base}/healthz")).headers(headers).send().await.unwrap();
    assert_eq!(big.status(), 431);
    let big: Value = big.json().await.unwrap();
    assert_eq!(big["errors"][0]["extensions"]["code"], "HEADERS_TOO_LARGE", "{big}");
    // Many small fields: answered alike up to the fields the HTTP layer parses, beyond with its
    // bare 431.
    let many = |n: usize| {
        let mut headers = reqwest::header::HeaderMap::new();
        for i in 0..n {
            headers.insert(reqwest::header::HeaderName::from_bytes(format!("x-{i}").as_bytes()).unwrap(), "y".parse().unwrap());
        }
        client.get(format!("{base}/healthz")).headers(headers).send()
    };
    assert_eq!(many(90).await.unwrap().status(), 200, "90 fields (and reqwest's own) are within the limit");
    let fields = many(150).await.unwrap();
    assert_eq!(fields.status(), 431);
    let fields: Value = fields.json().await.unwrap();
    assert_eq!(fields["errors"][0]["extensions"]["code"], "HEADERS_TOO_LARGE", "{fields}");
    assert_eq!(many(2000).await.unwrap().status(), 431, "beyond the parsed table");

    // A GET without a query is no request; a method but GET and POST, two Authorization
    // headers (which one counts is not for the client to guess) and an encoded body are
    // refused before anything runs.
    for path in ["/graphql/query", "/graphql/query?foo=bar", "/graphql/query?query=", "/graphql/query?query=%20%20"] {
        let r = client.get(format!("{base}{path}")).bearer_auth(ADMIN).send().await.unwrap();
        assert_eq!(r.status(), 400, "{path}");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["errors"][0]["extensions"]["code"], "BAD_REQUEST", "{path}: {answer}");
    }
    // A method of the client's own naming is not echoed back, however long.
    let long_method = reqwest::Method::from_bytes("X".repeat(5000).as_bytes()).unwrap();
    for method in [reqwest::Method::PUT, reqwest::Method::DELETE, reqwest::Method::PATCH, long_method] {
        let r = client.request(method.clone(), format!("{base}/graphql/query")).bearer_auth(ADMIN).send().await.unwrap();
        assert_eq!(
            (r.status().as_u16(), r.headers().get("allow").map(|v| v.to_str().unwrap().to_string())),
            (405, Some("GET, POST".into()))
        );
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["errors"][0]["extensions"]["code"], "METHOD_NOT_ALLOWED", "{}: {answer}", &method.as_str()[..3]);
        assert!(!answer.to_string().contains(method.as_str()), "the method is not echoed: {answer}");
    }
    for (method, path) in [
        (reqwest::Method::POST, "/readyz"),
        (reqwest::Method::POST, "/healthz"),
        (reqwest::Method::DELETE, "/metrics"),
        (reqwest::Method::POST, "/admin/v1/openapi.json"),
    ] {
        let r = client.request(method.clone(), format!("{base}{path}")).send().await.unwrap();
        assert_eq!(
            (r.status().as_u16(), r.headers().get("allow").map(|v| v.to_str().unwrap().to_string())),
            (405, Some("GET, HEAD".into()))
        );
        let head = client.head(format!("{base}{path}")).send().await.unwrap();
        assert_ne!(head.status().as_u16(), 405, "{path}: HEAD is allowed, as the header says");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["errors"][0]["extensions"]["code"], "METHOD_NOT_ALLOWED", "{method} {path}: {answer}");
    }
    // A path no route serves is the 404 problem, whatever the method, near a route or not; the
    // path is not echoed.
    let long = format!("/{}", "a".repeat(8000));
    for (method, path) in [
        (reqwest::Method::GET, "/"),
        (reqwest::Method::GET, "/nope"),
        (reqwest::Method::POST, "/graphql/query/extra"),
        (reqwest::Method::GET, "/graphql/assets/none.js"),
        (reqwest::Method::DELETE, "/healthz/x"),
        (reqwest::Method::GET, "/admin/v1/nope"),
        (reqwest::Method::GET, "/admin/nope"),
        (reqwest::Method::GET, long.as_str()),
    ] {
        let r = client.request(method.clone(), format!("{base}{path}")).bearer_auth(ADMIN).send().await.unwrap();
        assert_eq!(r.status(), 404, "{method} {}", &path[..path.len().min(40)]);
        assert_eq!(r.headers()["content-type"], "application/problem+json");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["errors"][0]["extensions"]["code"], "NOT_FOUND", "{method}: {answer}");
        assert!(!answer.to_string().contains("aaaa"), "the path is not echoed");
    }
    // A chunked body that does not decode is a bad request, not one too large.
    for body in ["zz\r\n{}\r\n0\r\n\r\n", "ffffffffffffffffffff\r\n{}\r\n0\r\n\r\n", "2\r\n{}0\r\n\r\n"] {
        let mut stream = tokio::net::TcpStream::connect(running.local_addr()).await.unwrap();
        let head = format!("POST /graphql/query HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {ADMIN}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n");
        tokio::io::AsyncWriteExt::write_all(&mut stream, format!("{head}{body}").as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 400"), "{body:?}: {answer}");
        assert!(answer.contains(r#""code":"BAD_REQUEST""#), "{body:?}: {answer}");
    }
    let mut twice = reqwest::header::HeaderMap::new();
    twice.append("authorization", format!("Bearer {ADMIN}").parse().unwrap());
    twice.append("authorization", "Bearer another".parse().unwrap());
    let r = client.post(format!("{base}/graphql/query")).headers(twice).json(&json!({"query": "{ zones { name } }"})).send().await.unwrap();
    assert_eq!(r.status(), 400);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["errors"][0]["extensions"]["code"], "BAD_REQUEST", "{answer}");
    assert!(answer["data"].is_null(), "{answer}");
    for encoding in ["gzip", "br", "GZIP, identity"] {
        let r = client
            .post(format!("{base}/graphql/query"))
            .bearer_auth(ADMIN)
            .header("content-encoding", encoding)
            .json(&json!({"query": "{ zones { name } }"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 415, "{encoding}");
        let answer: Value = r.json().await.unwrap();
        assert_eq!(answer["errors"][0]["extensions"]["code"], "UNSUPPORTED_MEDIA_TYPE", "{encoding}: {answer}");
    }
    // Every Content-Encoding header counts, not the first one.
    let mut encodings = reqwest::header::HeaderMap::new();
    encodings.append("content-encoding", "identity".parse().unwrap());
    encodings.append("content-encoding", "gzip".parse().unwrap());
    let r =
        client.post(format!("{base}/graphql/query")).bearer_auth(ADMIN).headers(encodings).json(&json!({"query": "{ zones { name } }"}));
    assert_eq!(r.send().await.unwrap().status(), 415);
    // A request without a body has nothing to decode.
    let r = client.get(format!("{base}/graphql/query?query=%7B__typename%7D")).bearer_auth(ADMIN).header("content-encoding", "gzip");
    assert_eq!(r.send().await.unwrap().status(), 200);
    let (status, answer) = {
        let r = client
            .post(format!("{base}/graphql/query"))
            .bearer_auth(ADMIN)
            .header("content-encoding", "identity")
            .json(&json!({"query": "{ zones { name } }"}))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    };
    assert_eq!(status, 200, "identity is no encoding: {answer}");

    // A subscription over HTTP: refused, and counted under its code.
    let (_, answer) = post(&client, &base, &json!({"query": "subscription { changes { id } }"}).to_string()).await;
    assert_eq!(answer["errors"][0]["extensions"]["code"], "BAD_REQUEST", "{answer}");
    let metrics = client.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    assert!(!metrics.contains("controlplane_graphql_requests_total{code=\"OTHER\"}"), "{metrics}");

    // Every root field skipped: `{}`, not null.
    let (status, answer) = post(&client, &base, &json!({"query": "{ zones @skip(if: true) { name } }"}).to_string()).await;
    assert_eq!(status, 200);
    assert_eq!(answer["data"], json!({}), "{answer}");

    // An asset name that does not decode is one that does not exist.
    for name in ["%ff", "..%2f..%2fetc%2fpasswd", "nope.js"] {
        let r = client.get(format!("{base}/graphql/assets/{name}")).send().await.unwrap();
        assert_eq!(r.status(), 404, "{name}");
    }
    assert_eq!(client.get(format!("{base}/graphql/assets/graphiql.min.css")).send().await.unwrap().status(), 200);
    running.shutdown().await.unwrap();
}
