//! GraphQL subscriptions over WebSocket, end to end: the server on a copy of the
//! example world (manifests source), clients speaking `graphql-transport-ws` through a real
//! client library (`graphql-ws-client`), the world's manifests edited while they listen.
//!
//! Barriers: a subscription counts in `controlplane_subscriptions_active` once it is prepared
//! (it then starts at the change log's head), and every assertion that a client got *nothing*
//! is made by a later event that client must get first if it had.

mod support;

use control_plane::config::Config;
use futures::StreamExt;
use graphql_ws_client::graphql::GraphqlOperation;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;
use support::{team_token, token};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const ADMIN_SCOPE: &str = "tardis:admin:all";

/// One GraphQL operation for the client library; answers are kept as JSON.
#[derive(serde::Serialize)]
struct Op {
    query: String,
    variables: Value,
}

impl GraphqlOperation for Op {
    type Response = Value;
    type Error = serde_json::Error;

    fn decode(&self, data: Value) -> Result<Value, serde_json::Error> {
        Ok(data)
    }
}

fn op(query: &str, variables: Value) -> Op {
    Op { query: query.to_string(), variables }
}

const APP_CHANGES: &str = "subscription($after: String) { changes(kinds: [APPLICATION], after: $after) { position revision operation kind id node { ... on Application { name statusMessage } } } }";

struct World {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    running: control_plane::Running,
}

impl World {
    async fn start(tune: impl FnOnce(&mut Config)) -> World {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("world");
        support::copy_dir(&support::world_dir(), &dir);
        let running = World::serve(&dir, &tmp.path().join("data"), tune).await;
        World { _tmp: tmp, dir, running }
    }

    async fn serve(dir: &std::path::Path, data: &std::path::Path, tune: impl FnOnce(&mut Config)) -> control_plane::Running {
        let mut config = Config::for_manifests(dir, data);
        tune(&mut config);
        let running = control_plane::start(config).await.unwrap();
        assert!(running.app().wait_caught_up(Duration::from_secs(60)).await, "ready");
        running
    }

    /// Stops the server and starts it again on the same manifests and data directory.
    async fn restart(self) -> World {
        let World { _tmp, dir, running } = self;
        running.shutdown().await.unwrap();
        let running = World::serve(&dir, &_tmp.path().join("data"), |_| {}).await;
        World { _tmp, dir, running }
    }

    fn url(&self) -> String {
        format!("ws://{}/graphql/query", self.running.local_addr())
    }

    /// A connected client: the token in the `connection_init` payload (or, with `header`, in
    /// the upgrade request's `Authorization`).
    async fn client(&self, token: &str, header: bool) -> graphql_ws_client::Client {
        let mut request = self.url().into_client_request().unwrap();
        request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
        if header {
            request.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        let (socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let builder = graphql_ws_client::Client::build(socket);
        let builder = if header { builder } else { builder.payload(json!({"Authorization": format!("Bearer {token}")})).unwrap() };
        let (client, actor) = builder.await.unwrap();
        tokio::spawn(std::future::IntoFuture::into_future(actor));
        client
    }

    /// Waits until `n` subscriptions are running.
    async fn subscriptions_running(&self, n: f64) {
        let metrics = self.running.app().metrics();
        let ok = metrics.wait_until(Duration::from_secs(30), |m| gauge(m, "controlplane_subscriptions_active") >= n).await;
        assert!(ok, "{} subscriptions running, expected {n}", gauge(metrics, "controlplane_subscriptions_active"));
    }

    /// Rewrites the document of application `name` with `edit`.
    fn edit_app(&self, name: &str, edit: impl Fn(&str) -> String) {
        let path = self.dir.join("04-applications.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let docs: Vec<String> =
            text.split("\n---\n").map(|d| if d.contains(&format!("\n  name: {name}\n")) { edit(d) } else { d.to_string() }).collect();
        let edited = docs.join("\n---\n");
        assert_ne!(edited, text, "application {name} not found");
        std::fs::write(&path, edited).unwrap();
    }

    fn set_message(&self, app: &str, message: &str) {
        self.edit_app(app, |d| {
            let at = d.find("    message: ").expect("a status message");
            let end = at + d[at..].find('\n').unwrap();
            format!("{}    message: {message}{}", &d[..at], &d[end..])
        });
    }
}

/// The value of a gauge or counter line `name` (summed over its labels) in `m`.
fn gauge(m: &control_plane::metrics::Metrics, name: &str) -> f64 {
    m.encode()
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The next answer of `s` (its event, or the whole answer when it has errors).
async fn next(s: &mut (impl futures::Stream<Item = Result<Value, graphql_ws_client::Error>> + Unpin)) -> Value {
    let answer = tokio::time::timeout(Duration::from_secs(30), s.next()).await.expect("an event within 30 s").expect("the stream goes on");
    let answer = answer.expect("a JSON answer");
    if answer.get("errors").is_some() {
        return answer;
    }
    // The one subscription field's value (`changes`, `applicationChanges`, …).
    answer["data"].as_object().and_then(|o| o.values().next()).cloned().unwrap_or(Value::Null)
}

fn team(t: &str) -> String {
    team_token(t, "poc")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_viewer_gets_the_changes_it_may_see_and_resumes_what_it_missed() {
    let w = World::start(|_| {}).await;
    let a = w.client(&team("assist--copilot"), false).await;
    let b = w.client(&team("logistics--fleet"), true).await;
    let admin = w.client(&token("platform--ops--console", ADMIN_SCOPE, "poc"), true).await;
    let group = w.client(&token("assist--probe--console", "tardis:group:read", "poc"), false).await;
    let mut sa = a.subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    let mut sb = b.subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    let mut sadmin = admin.subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    let mut sgroup = group.subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    w.subscriptions_running(4.0).await;

    // Team A's application changes: A, its group and the admin get it.
    w.set_message("copilot-agent", "first edit");
    let ev = next(&mut sa).await;
    assert_eq!((ev["operation"].as_str(), ev["kind"].as_str()), (Some("UPDATED"), Some("APPLICATION")), "{ev}");
    assert_eq!(ev["node"], json!({"name": "copilot-agent", "statusMessage": "first edit"}));
    let first = ev["position"].as_str().unwrap().to_string();
    let a_id = ev["id"].clone();
    assert_eq!(next(&mut sgroup).await["id"], a_id);
    assert_eq!(next(&mut sadmin).await["id"], a_id);

    // Team B's: B's first event is its own, so it got nothing of A's.
    w.set_message("fleet-planner", "b edit");
    let ev = next(&mut sb).await;
    assert_eq!(ev["node"], json!({"name": "fleet-planner", "statusMessage": "b edit"}), "team B sees only its own change first");
    let b_id = ev["id"].clone();
    assert_ne!(b_id, a_id);
    assert_eq!(next(&mut sadmin).await["id"], b_id, "the admin sees both, in order");

    // A's application moves to another group's team: for A and its group it is a delete.
    w.edit_app("copilot-agent", |d| d.replace("team: assist--copilot", "team: logistics--fleet"));
    let ev = next(&mut sa).await;
    assert_eq!((ev["operation"].as_str(), &ev["id"], &ev["node"]), (Some("DELETED"), &a_id, &Value::Null), "{ev}");
    let ev = next(&mut sgroup).await;
    assert_eq!((ev["operation"].as_str(), &ev["id"]), (Some("DELETED"), &a_id), "{ev}");
    // Team B sees the moved application arrive (and nothing of the delete it never saw).
    let ev = next(&mut sb).await;
    assert_eq!((ev["operation"].as_str(), ev["node"]["name"].as_str()), (Some("CREATED"), Some("copilot-agent")), "{ev}");
    let mut admin_saw = [next(&mut sadmin).await, next(&mut sadmin).await];
    admin_saw.sort_by_key(|e| e["operation"].as_str().unwrap().to_string());
    assert_eq!(admin_saw.iter().map(|e| e["operation"].as_str().unwrap()).collect::<Vec<_>>(), ["CREATED", "DELETED"]);

    // Resume: A drops its connection; what it missed is replayed from its last position.
    drop(sa);
    a.close(1000, "bye").await;
    // Barrier: the group viewer sees each edit, so it is in the log.
    for message in ["while away 1", "while away 2"] {
        w.set_message("copilot-gateway", message);
        assert_eq!(next(&mut sgroup).await["node"]["statusMessage"], message);
    }
    let a = w.client(&team("assist--copilot"), false).await;
    let mut sa = a.subscribe(op(APP_CHANGES, json!({"after": first}))).await.unwrap();
    let replayed = [next(&mut sa).await, next(&mut sa).await, next(&mut sa).await];
    let seen: Vec<(&str, &str)> = replayed.iter().map(|e| (e["operation"].as_str().unwrap(), e["id"].as_str().unwrap())).collect();
    let gateway = replayed[1]["id"].as_str().unwrap();
    assert_eq!(seen, [("DELETED", a_id.as_str().unwrap()), ("UPDATED", gateway), ("UPDATED", gateway)], "exactly the missed events");
    // The node is the record now: both replayed updates show the last message.
    assert_eq!(replayed[2]["node"]["statusMessage"], "while away 2");

    // A position of another server (or a restarted one) gets GONE.
    let mut forged = a.subscribe(op(APP_CHANGES, json!({"after": "MDAwMDAwMDAwMDAwMDAwMC4xLjA"}))).await.unwrap();
    let answer = next(&mut forged).await;
    assert_eq!(answer["errors"][0]["extensions"]["code"], "GONE", "{answer}");
    let mut garbage = a.subscribe(op(APP_CHANGES, json!({"after": "not a position"}))).await.unwrap();
    assert_eq!(next(&mut garbage).await["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    let mut long = a.subscribe(op(APP_CHANGES, json!({"after": "A".repeat(100_000)}))).await.unwrap();
    assert_eq!(next(&mut long).await["errors"][0]["extensions"]["code"], "BAD_USER_INPUT", "a 100 kB position");
    w.running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_older_than_the_log_gets_gone() {
    let w = World::start(|c| {
        c.subscriptions.change_log_size = 2;
        c.history.enabled = false;
    })
    .await;
    let (admin, mut s, first) = subscribed_after_one_change(&w).await;
    for m in ["two", "three", "four"] {
        w.set_message("copilot-agent", m);
        assert_eq!(next(&mut s).await["node"]["statusMessage"], m);
    }
    let mut late = admin.subscribe(op(APP_CHANGES, json!({"after": first}))).await.unwrap();
    let answer = next(&mut late).await;
    assert_eq!(answer["errors"][0]["extensions"]["code"], "GONE", "{answer}");
    w.running.shutdown().await.unwrap();
}

/// An admin client subscribed to application changes, and the position of the first change it
/// got (a new status message of copilot-agent).
async fn subscribed_after_one_change(w: &World) -> (graphql_ws_client::Client, graphql_ws_client::Subscription<Op>, String) {
    let admin = w.client(&token("platform--ops--console", ADMIN_SCOPE, "poc"), true).await;
    let mut s = admin.subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    w.subscriptions_running(1.0).await;
    w.set_message("copilot-agent", "one");
    let first = next(&mut s).await["position"].as_str().unwrap().to_string();
    (admin, s, first)
}

/// With history on, a position older than the memory's log resumes from the store's durable log
/// with exactly the changes after it; one the durable log no longer holds (its object's older
/// revisions pruned, `history.maxRevisionsPerObject`) gets `GONE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_older_than_memory_resumes_from_the_durable_log_until_it_is_pruned() {
    let w = World::start(|c| {
        c.subscriptions.change_log_size = 2;
        c.history.max_revisions_per_object = 3;
    })
    .await;
    let (admin, mut s, first) = subscribed_after_one_change(&w).await;
    let mut seen = Vec::new();
    for m in ["two", "three"] {
        w.set_message("copilot-agent", m);
        seen.push(next(&mut s).await);
    }
    let mut late = admin.subscribe(op(APP_CHANGES, json!({"after": first}))).await.unwrap();
    for expected in &seen {
        let got = next(&mut late).await;
        assert_eq!(
            (&got["position"], &got["revision"], &got["operation"]),
            (&expected["position"], &expected["revision"], &expected["operation"])
        );
    }
    // Two more revisions of the object: its three newest are kept, the one at `first` goes.
    for m in ["four", "five"] {
        w.set_message("copilot-agent", m);
        assert_eq!(next(&mut s).await["node"]["statusMessage"], m);
    }
    let mut gone = admin.subscribe(op(APP_CHANGES, json!({"after": first}))).await.unwrap();
    let answer = next(&mut gone).await;
    assert_eq!(answer["errors"][0]["extensions"]["code"], "GONE", "{answer}");
    w.running.shutdown().await.unwrap();
}

/// A subscription that resumes with `after:` a position from before a restart receives exactly
/// the changes it missed, in order, then follows live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_resumes_across_a_restart_with_exactly_what_it_missed() {
    let w = World::start(|_| {}).await;
    let admin_token = token("platform--ops--console", ADMIN_SCOPE, "poc");
    let admin = w.client(&admin_token, true).await;
    let mut s = admin.subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    w.subscriptions_running(1.0).await;
    w.set_message("copilot-agent", "one");
    let resume_at = next(&mut s).await["position"].as_str().unwrap().to_string();
    // What a client that went away at `resume_at` misses, as this one sees it.
    let mut missed = Vec::new();
    for (app, m) in [("copilot-gateway", "two"), ("copilot-agent", "three")] {
        w.set_message(app, m);
        missed.push(next(&mut s).await);
    }
    drop(s);
    drop(admin);
    let w = w.restart().await;
    let admin = w.client(&admin_token, true).await;
    let mut resumed = admin.subscribe(op(APP_CHANGES, json!({"after": resume_at}))).await.unwrap();
    // Another team resuming from the same position replays none of the first team's changes.
    let other = w.client(&team("payments--ledger"), true).await;
    let mut other_resumed = other.subscribe(op(APP_CHANGES, json!({"after": resume_at}))).await.unwrap();
    w.subscriptions_running(2.0).await;
    for expected in &missed {
        assert_eq!(&next(&mut resumed).await, expected, "the missed changes, in order");
    }
    w.set_message("copilot-agent", "four");
    let live = next(&mut resumed).await;
    assert_eq!(live["node"]["statusMessage"], "four", "then live: {live}");
    w.set_message("ledger-core", "ledger's own");
    let first = next(&mut other_resumed).await;
    assert_eq!(first["node"]["name"], "ledger-core", "the other team's first event is its own change: {first}");
    w.running.shutdown().await.unwrap();
}

/// Tokens are checked as for HTTP requests: a bad header gets HTTP 401 before any upgrade, a bad
/// `connection_init` payload closes the socket; queries are refused on the socket and
/// subscriptions over HTTP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_checked_and_each_transport_runs_its_own_operations() {
    let w = World::start(|_| {}).await;
    let mut request = w.url().into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
    request.headers_mut().insert("authorization", "Bearer nonsense".parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 401),
        other => panic!("expected HTTP 401, got {other:?}"),
    }
    let mut request = w.url().into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
    let (socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let refused = graphql_ws_client::Client::build(socket).payload(json!({"Authorization": "Bearer nonsense"})).unwrap().await;
    assert!(refused.is_err(), "the init with a bad token is refused");
    // No subprotocol: HTTP 400.
    let request = w.url().into_client_request().unwrap();
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 400),
        other => panic!("expected HTTP 400, got {other:?}"),
    }

    let a = w.client(&team("assist--copilot"), false).await;
    let mut q = a.subscribe(op("{ applications { totalCount } }", json!({}))).await.unwrap();
    assert_eq!(next(&mut q).await["errors"][0]["extensions"]["code"], "BAD_REQUEST");
    // Events are light work: a selection filtering through edges is refused up front.
    let heavy = "subscription { changes { node { ... on Team { applications(where: {hasSubscribedApisWith: [{nameContains: \"a\"}]}) { totalCount } } } } }";
    let mut h = a.subscribe(op(heavy, json!({}))).await.unwrap();
    let answer = next(&mut h).await;
    assert_eq!(answer["errors"][0]["extensions"]["code"], "SUBSCRIPTION_TOO_HEAVY", "{answer}");
    // One root field per subscription (GraphQL's rule), so the limits count what runs.
    let mut two = a.subscribe(op("subscription { changes { id } b: changes { position } }", json!({}))).await.unwrap();
    assert_eq!(next(&mut two).await["errors"][0]["extensions"]["code"], "GRAPHQL_VALIDATION_FAILED");
    let mut empty = a.subscribe(op("subscription { changes(kinds: []) { id } }", json!({}))).await.unwrap();
    assert_eq!(next(&mut empty).await["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    // The query limits apply to the selection.
    let deep = format!(
        "subscription {{ changes {{ node {{ ... on Application {{ {}name{} }} }} }} }}",
        "team { applications { edges { node { ".repeat(6),
        " } } } }".repeat(6)
    );
    let mut d = a.subscribe(op(&deep, json!({}))).await.unwrap();
    let answer = next(&mut d).await;
    assert_eq!(answer["errors"][0]["extensions"]["code"], "QUERY_TOO_DEEP", "{answer}");
    let http = reqwest::Client::new()
        .post(format!("http://{}/graphql/query", w.running.local_addr()))
        .bearer_auth(team("assist--copilot"))
        .json(&json!({"query": "subscription { changes { id } }"}))
        .send()
        .await
        .unwrap();
    let body: Value = http.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "BAD_REQUEST", "{body}");
    w.running.shutdown().await.unwrap();
}

/// `subscriptions.maxPerConnection`: one more subscription gets `TOO_MANY_SUBSCRIPTIONS`, the
/// running ones go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_per_connection_are_bounded() {
    let w = World::start(|c| c.subscriptions.max_per_connection = 2).await;
    let a = w.client(&team("assist--copilot"), false).await;
    let mut s1 = a.subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    // `kinds: APPLICATION` (one value for a list) is a list of one.
    let mut s2 = a
        .subscribe(op("subscription { changes(kinds: APPLICATION) { node { ... on Application { statusMessage } } } }", json!({})))
        .await
        .unwrap();
    w.subscriptions_running(2.0).await;
    let mut s3 = a.subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    assert_eq!(next(&mut s3).await["errors"][0]["extensions"]["code"], "TOO_MANY_SUBSCRIPTIONS");
    let metrics = w.running.app().metrics();
    assert_eq!(gauge(metrics, "controlplane_subscription_events_total"), 0.0, "a refusal is not an event");
    w.set_message("copilot-agent", "still running");
    assert_eq!(next(&mut s1).await["node"]["statusMessage"], "still running");
    assert_eq!(next(&mut s2).await["node"]["statusMessage"], "still running");
    assert_eq!(gauge(metrics, "controlplane_subscription_events_total"), 2.0);
    w.running.shutdown().await.unwrap();
}

use futures::SinkExt;
use tokio_tungstenite::tungstenite::Message;

/// A raw WebSocket client (frames by hand) on `stream`, with subprotocol `protocol`.
async fn raw<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    w: &World,
    stream: S,
    protocol: &str,
    bearer: Option<&str>,
) -> tokio_tungstenite::WebSocketStream<S> {
    let mut request = w.url().into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", protocol.parse().unwrap());
    if let Some(t) = bearer {
        request.headers_mut().insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    tokio_tungstenite::client_async(request, stream).await.unwrap().0
}

/// The next JSON text message (skipping pings), or the close frame as `{"close": code, "reason": …}`.
async fn frame<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(ws: &mut tokio_tungstenite::WebSocketStream<S>) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(30), ws.next()).await.expect("a frame within 30 s");
        match m {
            Some(Ok(Message::Text(t))) => return serde_json::from_str(&t).unwrap(),
            Some(Ok(Message::Close(Some(c)))) => return json!({"close": u16::from(c.code), "reason": c.reason.to_string()}),
            Some(Ok(Message::Close(None))) | None => return json!({"close": null}),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return json!({"error": e.to_string()}),
        }
    }
}

async fn send<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(ws: &mut tokio_tungstenite::WebSocketStream<S>, v: Value) {
    ws.send(Message::text(v.to_string())).await.unwrap();
}

fn admin_token() -> String {
    token("platform--ops--console", ADMIN_SCOPE, "poc")
}

/// The legacy `graphql-ws` subprotocol (subscriptions-transport-ws): `start` and `data`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_graphql_ws_protocol_runs_the_same_subscription() {
    let w = World::start(|_| {}).await;
    let tcp = tokio::net::TcpStream::connect(w.running.local_addr()).await.unwrap();
    let mut ws = raw(&w, tcp, "graphql-ws", None).await;
    send(
        &mut ws,
        json!({"type": "connection_init", "payload": {"headers": {"Authorization": format!("Bearer {}", team("assist--copilot"))}}}),
    )
    .await;
    assert_eq!(frame(&mut ws).await["type"], "connection_ack");
    send(&mut ws, json!({"id": "1", "type": "start", "payload": {"query": APP_CHANGES}})).await;
    w.subscriptions_running(1.0).await;
    w.set_message("copilot-agent", "legacy");
    let data = frame(&mut ws).await;
    assert_eq!((data["type"].as_str(), data["id"].as_str()), (Some("data"), Some("1")), "{data}");
    assert_eq!(data["payload"]["data"]["changes"]["node"]["statusMessage"], "legacy");
    assert_eq!(gauge(w.running.app().metrics(), "controlplane_subscription_events_total"), 1.0);
    w.running.shutdown().await.unwrap();
}

/// A client that stops reading is disconnected once a message waits `subscriptions.sendTimeout`
/// for it (`reason="slow"`), and the server produced only what the socket buffers took — not
/// every event of the changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_disconnected_and_nothing_piles_up() {
    let w = World::start(|c| c.subscriptions.send_timeout = Duration::from_millis(500)).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let tcp = socket.connect(w.running.local_addr()).await.unwrap();
    let mut ws = raw(&w, tcp, "graphql-transport-ws", Some(&admin_token())).await;
    send(&mut ws, json!({"type": "connection_init"})).await;
    assert_eq!(frame(&mut ws).await["type"], "connection_ack");
    // Events of about 1 MB: 50 copies of a 20 KB status message.
    let copies: Vec<String> = (0..50).map(|i| format!("m{i}: statusMessage")).collect();
    let query = format!("subscription {{ changes(kinds: [APPLICATION]) {{ node {{ ... on Application {{ {} }} }} }} }}", copies.join(" "));
    send(&mut ws, json!({"id": "1", "type": "subscribe", "payload": {"query": query}})).await;
    w.subscriptions_running(1.0).await;
    let apps = w.dir.join("04-applications.yaml");
    let text = std::fs::read_to_string(&apps).unwrap();
    let changed = text.matches("    message: ").count();
    assert!(changed >= 15, "{changed} messages");
    // Every application's messages change at once: 15 events of 1 MB, more than any socket
    // buffer holds, for a client that reads nothing more.
    std::fs::write(&apps, text.replace("    message: ", &format!("    message: {}", "x".repeat(20_000)))).unwrap();
    let metrics = w.running.app().metrics();
    let slow = r#"controlplane_subscription_disconnects_total{reason="slow"}"#;
    assert!(metrics.wait_until(Duration::from_secs(60), |m| gauge(m, slow) >= 1.0).await, "the client was not disconnected");
    let produced = gauge(metrics, "controlplane_subscription_events_total");
    println!("a client that stopped reading: {produced} of 15 events of 1 MB produced before its disconnect");
    assert!((1.0..15.0).contains(&produced), "{produced} of 15 events produced for a client that did not read");
    // Its subscription and connection are gone.
    assert!(metrics.wait_until(Duration::from_secs(30), |m| gauge(m, "controlplane_subscription_connections") == 0.0).await);
    assert_eq!(gauge(metrics, "controlplane_subscriptions_active"), 0.0);
    drop(ws);
    w.running.shutdown().await.unwrap();
}

/// The server closes: an idle connection (4000), an expired token (4403, after
/// `security.leeway`), one that never sends `connection_init` (4408, after 10 s, also with a
/// token in the upgrade request), every
/// connection at shutdown (1001); each counted by reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_expired_and_shutdown_connections_are_closed_with_their_codes() {
    let w = World::start(|c| {
        c.subscriptions.idle_timeout = Duration::from_secs(1);
        c.security.leeway = Duration::ZERO;
    })
    .await;
    let connect = async || {
        let tcp = tokio::net::TcpStream::connect(w.running.local_addr()).await.unwrap();
        raw(&w, tcp, "graphql-transport-ws", None).await
    };
    // Idle: connected, no subscription.
    let mut idle = connect().await;
    send(&mut idle, json!({"type": "connection_init", "payload": {"Authorization": format!("Bearer {}", admin_token())}})).await;
    assert_eq!(frame(&mut idle).await["type"], "connection_ack");
    // Expiring: a token valid for two more seconds, with a subscription running.
    let exp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 2;
    let enc = |v: Value| base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, v.to_string());
    let expiring_token = format!(
        "{}.{}.mock",
        enc(json!({"alg": "none"})),
        enc(json!({"clientId": "assist--copilot--console", "scope": "tardis:team:read", "env": "poc", "exp": exp}))
    );
    let mut expiring = connect().await;
    send(&mut expiring, json!({"type": "connection_init", "payload": {"Authorization": format!("Bearer {expiring_token}")}})).await;
    assert_eq!(frame(&mut expiring).await["type"], "connection_ack");
    send(&mut expiring, json!({"id": "1", "type": "subscribe", "payload": {"query": APP_CHANGES}})).await;
    // Busy: a subscription that keeps it from idling, open at shutdown.
    let mut busy = connect().await;
    send(&mut busy, json!({"type": "connection_init", "payload": {"Authorization": format!("Bearer {}", admin_token())}})).await;
    assert_eq!(frame(&mut busy).await["type"], "connection_ack");
    send(&mut busy, json!({"id": "1", "type": "subscribe", "payload": {"query": APP_CHANGES}})).await;

    // Silent: never sends connection_init; with a token in the upgrade request or without.
    let mut silent = connect().await;
    let tcp = tokio::net::TcpStream::connect(w.running.local_addr()).await.unwrap();
    let mut silent_with_token = raw(&w, tcp, "graphql-transport-ws", Some(&admin_token())).await;

    assert_eq!(frame(&mut idle).await, json!({"close": 4000, "reason": "idle: no subscription is running"}));
    assert_eq!(frame(&mut expiring).await, json!({"close": 4403, "reason": "token expired"}));
    assert_eq!(frame(&mut silent).await, json!({"close": 4408, "reason": "connection initialisation timeout"}));
    assert_eq!(frame(&mut silent_with_token).await, json!({"close": 4408, "reason": "connection initialisation timeout"}));
    let metrics = w.running.app().metrics();
    for (reason, count) in [("idle", 1.0), ("expired", 1.0), ("init_timeout", 2.0)] {
        assert_eq!(gauge(metrics, &format!("controlplane_subscription_disconnects_total{{reason=\"{reason}\"}}")), count, "{reason}");
    }
    assert!(metrics.wait_until(Duration::from_secs(30), |m| gauge(m, "controlplane_subscription_connections") == 1.0).await);
    let stopping = tokio::spawn(w.running.shutdown());
    assert_eq!(frame(&mut busy).await, json!({"close": 1001, "reason": "the server is shutting down"}));
    stopping.await.unwrap().unwrap();
}

/// `applicationChanges(where:)`: the kind's changes only, created and updated ones kept when the
/// record matches `where` after the change; isolation as for `changes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_subscription_filters_with_its_where_input() {
    let w = World::start(|_| {}).await;
    let a = w.client(&team("assist--copilot"), false).await;
    let b = w.client(&team("logistics--fleet"), false).await;
    let filtered = "subscription($w: ApplicationWhereInput) { applicationChanges(where: $w) { operation kind node { ... on Application { name statusMessage } } } }";
    let mut sa = a.subscribe(op(filtered, json!({"w": {"name": "copilot-agent"}}))).await.unwrap();
    // Team B filters on team A's application's name: it must still get nothing of it.
    let mut sb = b.subscribe(op(filtered, json!({"w": {"name": "copilot-agent"}}))).await.unwrap();
    let mut sb_all = b.subscribe(op(filtered, json!({}))).await.unwrap();
    w.subscriptions_running(3.0).await;
    w.set_message("copilot-gateway", "not matching");
    w.set_message("copilot-agent", "matching");
    let ev = next(&mut sa).await;
    assert_eq!((ev["operation"].as_str(), ev["kind"].as_str()), (Some("UPDATED"), Some("APPLICATION")), "{ev}");
    assert_eq!(ev["node"], json!({"name": "copilot-agent", "statusMessage": "matching"}), "the gateway's change did not match");
    w.set_message("fleet-planner", "b's own");
    assert_eq!(next(&mut sb_all).await["node"]["name"], "fleet-planner", "B sees its own first: nothing of A's");
    w.edit_app("fleet-planner", |d| d.replace("  name: fleet-planner\n", "  name: copilot-agent\n"));
    // Renamed (a new natural key): B's filtered subscription gets B's record now named
    // copilot-agent, and the delete of the old one (deletes are always sent); nothing of A's.
    let mut evs = [next(&mut sb).await, next(&mut sb).await];
    evs.sort_by_key(|e| e["operation"].as_str().unwrap_or_default().to_string());
    assert_eq!((evs[0]["operation"].as_str(), evs[0]["node"]["name"].as_str()), (Some("CREATED"), Some("copilot-agent")), "{evs:?}");
    assert_eq!((evs[1]["operation"].as_str(), &evs[1]["node"]), (Some("DELETED"), &Value::Null), "{evs:?}");
    let mut sa_heavy = a
        .subscribe(op("subscription { applicationChanges(where: {hasSubscribedApisWith: [{nameContains: \"a\"}]}) { id } }", json!({})))
        .await
        .unwrap();
    assert_eq!(next(&mut sa_heavy).await["errors"][0]["extensions"]["code"], "SUBSCRIPTION_TOO_HEAVY");
    w.running.shutdown().await.unwrap();
}

/// Identical subscriptions (same operation, variables and claims) resolve each change once and
/// share the answer; subscriptions of other viewers, with the same text and variables, are
/// groups of their own and get nothing of it. A group viewer's teams are resolved again when a
/// team changes: a team that joins its group is seen with its records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_subscriptions_share_answers_and_other_viewers_do_not() {
    let w = World::start(|_| {}).await;
    let (a1, a2) = (w.client(&team("assist--copilot"), false).await, w.client(&team("assist--copilot"), true).await);
    let b = w.client(&team("logistics--fleet"), true).await;
    let group_token = token("assist--probe--console", "tardis:group:read", "poc");
    let (g1, g2) = (w.client(&group_token, false).await, w.client(&group_token, true).await);
    let filtered = "subscription($w: ApplicationWhereInput) { applicationChanges(where: $w) { operation node { ... on Application { name statusMessage } } } }";
    let mut sa = [
        a1.subscribe(op(APP_CHANGES, json!({}))).await.unwrap(),
        a1.subscribe(op(APP_CHANGES, json!({}))).await.unwrap(),
        a2.subscribe(op(APP_CHANGES, json!({}))).await.unwrap(),
    ];
    let mut sb = [b.subscribe(op(APP_CHANGES, json!({}))).await.unwrap(), b.subscribe(op(APP_CHANGES, json!({}))).await.unwrap()];
    let mut sg = [g1.subscribe(op(APP_CHANGES, json!({}))).await.unwrap(), g2.subscribe(op(APP_CHANGES, json!({}))).await.unwrap()];
    // B filters on A's application's name, twice: a group of its own, still nothing of A's.
    let mut sb_filtered = [
        b.subscribe(op(filtered, json!({"w": {"name": "copilot-agent"}}))).await.unwrap(),
        b.subscribe(op(filtered, json!({}))).await.unwrap(),
    ];
    w.subscriptions_running(9.0).await;
    let metrics = w.running.app().metrics();
    // A subscription counts as running when accepted and joins its group when its stream first
    // follows the log: wait for the groups too.
    metrics.wait_until(Duration::from_secs(30), |m| gauge(m, "controlplane_subscription_groups") >= 5.0).await;
    assert_eq!(gauge(metrics, "controlplane_subscription_groups"), 5.0, "A, B, the group, B filtered, B unfiltered");

    w.set_message("copilot-agent", "shared edit");
    let mut got = Vec::new();
    for s in sa.iter_mut().chain(sg.iter_mut()) {
        got.push(next(s).await);
    }
    assert_eq!(got[0]["node"], json!({"name": "copilot-agent", "statusMessage": "shared edit"}));
    assert!(got[..3].iter().all(|e| *e == got[0]), "A's three subscriptions get the same event: {got:?}");
    assert_eq!((&got[3]["id"], &got[3]["node"]), (&got[0]["id"], &got[0]["node"]));
    assert_eq!(got[3], got[4], "the group viewer's two subscriptions get the same event");
    // A's two subscriptions on one connection are answered in turn: the second takes the first's.
    assert!(gauge(metrics, "controlplane_subscription_answers_shared_total") >= 1.0, "{}", metrics.encode());

    w.set_message("fleet-planner", "b edit");
    for s in sb.iter_mut() {
        assert_eq!(next(s).await["node"], json!({"name": "fleet-planner", "statusMessage": "b edit"}), "B's first event is its own");
    }
    let ev = next(&mut sb_filtered[1]).await;
    assert_eq!(ev["node"]["name"], "fleet-planner", "{ev}");

    // A team joins group `assist` with an application: the group viewer's subscriptions see it.
    let team_doc = std::fs::read_to_string(w.dir.join("03-teams.yaml")).unwrap();
    let copilot = team_doc.split("\n---\n").find(|d| d.contains("  name: assist--copilot\n")).unwrap();
    let app_doc = std::fs::read_to_string(w.dir.join("04-applications.yaml")).unwrap();
    let agent = app_doc.split("\n---\n").find(|d| d.contains("  name: copilot-agent\n")).unwrap();
    let new_team = copilot.replace("assist--copilot", "assist--newcomer").replace("name: copilot\n", "name: newcomer\n");
    let new_app = agent.replace("assist--copilot", "assist--newcomer").replace("copilot-agent", "newcomer-app");
    std::fs::write(w.dir.join("zz-newcomer.yaml"), format!("{new_team}\n---\n{new_app}\n")).unwrap();
    let evs = [next(&mut sg[0]).await, next(&mut sg[1]).await];
    assert_eq!((evs[0]["operation"].as_str(), evs[0]["node"]["name"].as_str()), (Some("CREATED"), Some("newcomer-app")), "{evs:?}");
    assert_eq!(evs[0], evs[1]);
    // Team A's subscriptions did not get it: their next event is A's own.
    w.set_message("copilot-agent", "after the newcomer");
    for s in sa.iter_mut() {
        assert_eq!(next(s).await["node"]["statusMessage"], "after the newcomer");
    }
    drop(sa);
    a1.close(1000, "bye").await;
    a2.close(1000, "bye").await;
    let gone = metrics.wait_until(Duration::from_secs(30), |m| gauge(m, "controlplane_subscription_groups") == 4.0).await;
    assert!(gone, "A's group ends with its last subscription: {}", gauge(metrics, "controlplane_subscription_groups"));
    w.running.shutdown().await.unwrap();
}

/// graphql-transport-ws: an id is free again once its subscription completed (by the client or
/// by the server), and a `subscribe` with the id of a running subscription closes the socket
/// with 4409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_subscriber_id_cannot_be_reused() {
    let w = World::start(|_| {}).await;
    let tcp = tokio::net::TcpStream::connect(w.running.local_addr()).await.unwrap();
    let mut ws = raw(&w, tcp, "graphql-transport-ws", Some(&team("assist--copilot"))).await;
    send(&mut ws, json!({"type": "connection_init"})).await;
    assert_eq!(frame(&mut ws).await["type"], "connection_ack");
    // A subscription the server ends at once (a garbage position): its id is free again.
    send(&mut ws, json!({"id": "a", "type": "subscribe", "payload": {"query": APP_CHANGES, "variables": {"after": "x"}}})).await;
    assert_eq!(frame(&mut ws).await["payload"]["errors"][0]["extensions"]["code"], "BAD_USER_INPUT");
    assert_eq!(frame(&mut ws).await, json!({"type": "complete", "id": "a"}));
    send(&mut ws, json!({"id": "a", "type": "subscribe", "payload": {"query": APP_CHANGES}})).await;
    w.subscriptions_running(1.0).await;
    // Completed by the client: free again.
    send(&mut ws, json!({"id": "a", "type": "complete"})).await;
    assert_eq!(frame(&mut ws).await, json!({"type": "complete", "id": "a"}), "async-graphql confirms it");
    let metrics = w.running.app().metrics();
    assert!(metrics.wait_until(Duration::from_secs(30), |m| gauge(m, "controlplane_subscriptions_active") == 0.0).await);
    send(&mut ws, json!({"id": "a", "type": "subscribe", "payload": {"query": APP_CHANGES}})).await;
    w.subscriptions_running(1.0).await;
    w.set_message("copilot-agent", "to the second a");
    let next = frame(&mut ws).await;
    assert_eq!(
        (next["id"].as_str(), next["payload"]["data"]["changes"]["node"]["statusMessage"].as_str()),
        (Some("a"), Some("to the second a"))
    );
    // The same id while it runs: 4409, and the server and other connections go on.
    send(&mut ws, json!({"id": "a", "type": "subscribe", "payload": {"query": APP_CHANGES}})).await;
    assert_eq!(frame(&mut ws).await, json!({"close": 4409, "reason": "subscriber id already exists"}));
    assert!(metrics.wait_until(Duration::from_secs(30), |m| gauge(m, "controlplane_subscriptions_active") == 0.0).await);
    let other = w.client(&team("assist--copilot"), false).await;
    let mut s = other.subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    w.subscriptions_running(1.0).await;
    w.set_message("copilot-agent", "after the close");
    assert_eq!(self::next(&mut s).await["node"]["statusMessage"], "after the close");
    w.running.shutdown().await.unwrap();
}

/// What running subscriptions hold grows with their texts: a connection's texts and variables
/// are bounded by `graphql.maxBodyBytes`, all of the server's by `subscriptions.maxTextBytes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_texts_of_running_subscriptions_are_bounded() {
    let w = World::start(|c| c.subscriptions.max_text_bytes = 1 << 20).await;
    // 300 kB of comment around a small selection: the limits of queries let it through.
    let big = format!("{APP_CHANGES}\n#{}", "x".repeat(300_000));
    let a = w.client(&team("assist--copilot"), false).await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(a.subscribe(op(&big, json!({}))).await.unwrap());
    }
    w.subscriptions_running(3.0).await;
    let mut refused = a.subscribe(op(&big, json!({}))).await.unwrap();
    let answer = next(&mut refused).await;
    assert_eq!(answer["errors"][0]["extensions"]["code"], "TOO_MANY_SUBSCRIPTIONS", "{answer}");
    assert!(answer["errors"][0]["message"].as_str().unwrap().contains("on this connection"), "{answer}");
    let b = w.client(&team("logistics--fleet"), false).await;
    let mut over = b.subscribe(op(&big, json!({}))).await.unwrap();
    let answer = next(&mut over).await;
    assert!(answer["errors"][0]["message"].as_str().unwrap().contains("subscriptions.maxTextBytes"), "{answer}");
    // A small one still runs, and the bytes come back when subscriptions end.
    let mut small = b.subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    w.subscriptions_running(4.0).await;
    drop(held);
    a.close(1000, "bye").await;
    let metrics = w.running.app().metrics();
    assert!(metrics.wait_until(Duration::from_secs(30), |m| gauge(m, "controlplane_subscriptions_active") == 1.0).await);
    let mut again = b.subscribe(op(&big, json!({}))).await.unwrap();
    w.subscriptions_running(2.0).await;
    w.set_message("fleet-planner", "after the big ones");
    assert_eq!(next(&mut small).await["node"]["statusMessage"], "after the big ones");
    assert_eq!(next(&mut again).await["node"]["statusMessage"], "after the big ones");
    w.running.shutdown().await.unwrap();
}

/// Connections without a token yet take at most a tenth of `subscriptions.maxConnections`: they
/// cannot lock out clients that have one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokenless_connections_cannot_take_every_place() {
    let w = World::start(|c| c.subscriptions.max_connections = 10).await;
    let tcp = tokio::net::TcpStream::connect(w.running.local_addr()).await.unwrap();
    let _waiting = raw(&w, tcp, "graphql-transport-ws", None).await;
    let mut request = w.url().into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
    match tokio_tungstenite::connect_async(request).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 503),
        other => panic!("expected HTTP 503 for a second connection without a token, got {other:?}"),
    }
    let mut clients = Vec::new();
    for _ in 0..9 {
        clients.push(w.client(&team("assist--copilot"), true).await);
    }
    let mut s = clients[8].subscribe(op(APP_CHANGES, json!({}))).await.unwrap();
    w.subscriptions_running(1.0).await;
    w.set_message("copilot-agent", "nine with a token");
    assert_eq!(next(&mut s).await["node"]["statusMessage"], "nine with a token");
    w.running.shutdown().await.unwrap();
}

/// A subscribe whose variables nest deeper than the JSON reader follows is answered
/// INPUT_TOO_DEEP for its id, as over HTTP; the connection and its other subscriptions go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variables_too_deep_to_read_are_refused_for_their_subscription_only() {
    let w = World::start(|_| {}).await;
    let tcp = tokio::net::TcpStream::connect(w.running.local_addr()).await.unwrap();
    let mut ws = raw(&w, tcp, "graphql-transport-ws", Some(&team("assist--copilot"))).await;
    send(&mut ws, json!({"type": "connection_init"})).await;
    assert_eq!(frame(&mut ws).await["type"], "connection_ack");
    send(&mut ws, json!({"id": "ok", "type": "subscribe", "payload": {"query": APP_CHANGES}})).await;
    w.subscriptions_running(1.0).await;
    let nested = format!("{}1{}", "[".repeat(500), "]".repeat(500));
    let text = format!(
        r#"{{"id":"deep","type":"subscribe","payload":{{"query":"{}","variables":{{"after":{nested}}}}}}}"#,
        APP_CHANGES.replace('"', "\\\"")
    );
    ws.send(Message::text(text)).await.unwrap();
    let refusal = frame(&mut ws).await;
    assert_eq!((refusal["type"].as_str(), refusal["id"].as_str()), (Some("error"), Some("deep")), "{refusal}");
    assert_eq!(refusal["payload"][0]["extensions"]["code"], "INPUT_TOO_DEEP", "{refusal}");
    w.set_message("copilot-agent", "still open");
    let event = frame(&mut ws).await;
    assert_eq!(
        (event["id"].as_str(), event["payload"]["data"]["changes"]["node"]["statusMessage"].as_str()),
        (Some("ok"), Some("still open"))
    );
    w.running.shutdown().await.unwrap();
}
