//! Every connection has a deadline and their number a cap (`http::server`): half a
//! header, a header sent a byte at a time, a body that stops, an idle keep-alive connection,
//! and more connections than `server.maxConnections` — idle ones evicted oldest first, probes
//! served in the reserved room when none is idle, the rest refused.

mod common;

use control_plane::config::Config;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn server(configure: impl FnOnce(&mut Config)) -> (control_plane::app::Running, String) {
    let tmp = tempfile::tempdir().unwrap();
    let world = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world");
    let mut config = Config::for_manifests(&world, &tmp.keep().join("data"));
    configure(&mut config);
    let running = control_plane::start(config).await.unwrap();
    let addr = running.local_addr().to_string();
    (running, addr)
}

/// Reads until the server closes the connection; what it sent.
async fn until_closed(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(120), stream.read(&mut buf)).await.expect("closed within 120 s") {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&out).into_owned(),
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

fn closed(running: &control_plane::app::Running, reason: &str) -> u64 {
    running.app().metrics().http_connections_closed.with_label_values(&[reason]).get()
}

#[tokio::test(flavor = "multi_thread")]
async fn half_a_header_a_slow_header_a_stalled_body_and_an_idle_connection_are_closed() {
    let timeout = Duration::from_secs(1);
    let (running, addr) = server(|c| {
        c.server.header_timeout = timeout;
        c.server.body_timeout = timeout;
        c.server.idle_timeout = timeout;
    })
    .await;

    // Half a header.
    let started = Instant::now();
    let mut half = TcpStream::connect(&addr).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    assert_eq!(until_closed(&mut half).await, "", "closed without an answer");
    assert!(started.elapsed() >= timeout, "not before server.headerTimeout");
    assert_eq!(closed(&running, "header_timeout"), 1);

    // A header byte at a time, every 200 ms: more bytes do not extend the header's deadline.
    let started = Instant::now();
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    let mut pace = tokio::time::interval(Duration::from_millis(200));
    let mut sent = 0;
    for byte in b"GET /healthz HTTP/1.1\r\nX-Slow: ".iter().chain(b"a".repeat(1000).iter()) {
        pace.tick().await;
        if slow.write_all(&[*byte]).await.is_err() {
            break;
        }
        sent += 1;
    }
    assert!(sent < 100, "the connection stayed open for {sent} bytes");
    assert_eq!(until_closed(&mut slow).await, "");
    assert!(started.elapsed() >= timeout);
    assert_eq!(closed(&running, "header_timeout"), 2);

    // A body that stops after its first byte: 408, then closed.
    let mut stalled = TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /graphql/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
        common::ADMIN
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    let answer = until_closed(&mut stalled).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("server.bodyTimeout"), "{answer}");
    let text = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap();
    assert!(text.contains("controlplane_graphql_requests_total{code=\"REQUEST_TIMEOUT\"} 1"), "{text}");

    // An idle keep-alive connection, after its answer.
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let answer = until_closed(&mut idle).await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok\n"), "{answer}");
    assert!(closed(&running, "idle") >= 1);
    running.shutdown().await.unwrap();
}

/// A body declared longer than `graphql.maxBodyBytes`: up to
/// [`control_plane::http::graphql::DRAINED_BODY_BYTES`] it is read to its end before the 413,
/// so a client that writes it whole reads the answer (closing with unread bytes would reset the
/// connection and lose it); one declared longer is answered at once, without waiting for its
/// bytes (`server.bodyTimeout` is an hour here, `until_closed` waits two minutes at most).
#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_body_is_read_before_its_413_up_to_a_bound() {
    let (running, addr) = server(|c| c.server.body_timeout = Duration::from_secs(3600)).await;
    let head = |length: u64| {
        format!(
            "POST /graphql/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n",
            common::ADMIN
        )
    };
    let length = control_plane::http::graphql::DRAINED_BODY_BYTES - 1;
    let mut whole = TcpStream::connect(&addr).await.unwrap();
    whole.write_all(head(length).as_bytes()).await.unwrap();
    whole.write_all(&vec![b' '; length as usize]).await.expect("the server takes the whole body");
    let answer = until_closed(&mut whole).await;
    assert!(answer.starts_with("HTTP/1.1 413") && answer.contains("PAYLOAD_TOO_LARGE"), "{answer}");

    let mut huge = TcpStream::connect(&addr).await.unwrap();
    huge.write_all(head(1 << 30).as_bytes()).await.unwrap();
    let answer = until_closed(&mut huge).await;
    assert!(answer.starts_with("HTTP/1.1 413") && answer.contains("PAYLOAD_TOO_LARGE"), "{answer}");
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn at_the_cap_the_oldest_idle_connection_is_closed_for_a_new_one() {
    const CAP: usize = 16;
    let (running, addr) = server(|c| c.server.max_connections = CAP).await;
    let metrics = running.app().metrics().clone();
    // 100 keep-alive connections, idle once answered: each one past the cap closes the oldest
    // idle one.
    let mut idle = Vec::new();
    for _ in 0..100 {
        let mut c = TcpStream::connect(&addr).await.unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut answer = Vec::new();
        while !answer.ends_with(b"ok\n") {
            let mut buf = [0u8; 1024];
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0, "answered: {}", String::from_utf8_lossy(&answer));
            answer.extend_from_slice(&buf[..n]);
        }
        idle.push(c);
    }
    assert_eq!(metrics.http_connections_closed.with_label_values(&["evicted"]).get(), 100 - CAP as u64);
    let mut first = idle.remove(0);
    assert_eq!(until_closed(&mut first).await, "", "the oldest idle connection is closed");
    let mut last = idle.pop().unwrap();
    last.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    assert!(until_closed(&mut last).await.starts_with("HTTP/1.1 200"), "the newest connection is served");
    assert!(metrics.http_connections.get() as usize <= CAP);
    running.shutdown().await.unwrap();
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>;

/// A subscription WebSocket, initialised: upgraded, so never idle.
async fn websocket(addr: &str) -> Ws {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::{client::IntoClientRequest, Message};
    let mut request = format!("ws://{addr}/graphql/query").into_client_request().unwrap();
    request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let init = serde_json::json!({"type": "connection_init", "payload": {"Authorization": format!("Bearer {}", common::ADMIN)}});
    ws.send(Message::text(init.to_string())).await.unwrap();
    let ack = tokio::time::timeout(Duration::from_secs(60), ws.next()).await.unwrap().unwrap().unwrap();
    assert!(ack.to_string().contains("connection_ack"), "{ack}");
    ws
}

#[tokio::test(flavor = "multi_thread")]
async fn with_no_idle_connection_probes_get_through_and_the_rest_is_refused() {
    const CAP: usize = 16;
    let (running, addr) = server(|c| c.server.max_connections = CAP).await;
    let metrics = running.app().metrics().clone();
    // WebSockets count, and are never idle.
    let mut sockets = Vec::new();
    for _ in 0..CAP {
        sockets.push(websocket(&addr).await);
    }
    assert_eq!(metrics.http_connections.get(), CAP as i64);
    // The kubelet's probes get through in the reserved room; anything else there is 503.
    let mut probe = TcpStream::connect(&addr).await.unwrap();
    probe.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let answer = until_closed(&mut probe).await;
    assert!(answer.starts_with("HTTP/1.1 200") || answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("\"ready\""), "the readiness answer itself: {answer}");
    let mut other = TcpStream::connect(&addr).await.unwrap();
    other.write_all(b"GET /graphql HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let answer = until_closed(&mut other).await;
    assert!(answer.starts_with("HTTP/1.1 503") && answer.contains("too many connections"), "{answer}");
    assert!(answer.contains("application/problem+json") && answer.contains(r#""code":"OVERLOADED""#), "{answer}");
    // Beyond the reserved room: refused at once, without an answer. (A new connection waits
    // for its first header, so it is not idle; in the room it may wait 1 s at most.)
    let mut held = Vec::new();
    for _ in 0..control_plane::http::server::PROBE_ROOM + 8 {
        held.push(TcpStream::connect(&addr).await.unwrap());
    }
    let mut last = held.pop().unwrap();
    let _ = last.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let _ = until_closed(&mut last).await;
    assert!(metrics.http_connections_closed.with_label_values(&["refused"]).get() >= 1);
    assert!(metrics.http_connections.get() as usize <= CAP + control_plane::http::server::PROBE_ROOM);
    drop(held);
    drop(sockets);
    running.shutdown().await.unwrap();
}
