//! GraphQL subscriptions over WebSocket on `/graphql/query`: a `GET` with
//! `Upgrade: websocket` and subprotocol `graphql-transport-ws` (the `graphql-ws` library) or
//! the legacy `graphql-ws` (subscriptions-transport-ws). What runs is `query`'s `changes`
//! subscription ([`query::changes`]); this module carries the connection.
//!
//! **Tokens.** The upgrade request's `Authorization` header, or, without one, the
//! `connection_init` payload's `Authorization` (or `authorization`, or either under `headers`),
//! verified exactly as HTTP requests are. A refused header gets the HTTP answer a query gets
//! (401/403/503) and no upgrade; a refused payload closes the socket (graphql-transport-ws:
//! code 4403 with the reason; graphql-ws: `connection_error`). Other protocol errors close with
//! graphql-transport-ws's codes ([`close_frame`]; a `subscribe` with the id of a running
//! subscription: 4409, [`SubscriberIds`]). When the token's `exp` passes, the
//! socket is closed with code 4403 "token expired" (after `security.leeway`, as
//! requests are refused).
//!
//! **Limits** (`subscriptions.*`): connections at once (one more: HTTP 503 with `Retry-After`;
//! those without a token yet take at most one place in [`UNAUTHENTICATED_SHARE`]), the bytes of
//! the running subscriptions' texts and variables (per connection `graphql.maxBodyBytes`, in all
//! `subscriptions.maxTextBytes`),
//! connections per token `clientId` (one more is closed with 4429), subscriptions per
//! connection and in total (one more gets one error `TOO_MANY_SUBSCRIPTIONS` and completes),
//! messages from the client of at most `graphql.maxBodyBytes` (a larger one closes the socket),
//! an idle connection (no subscription running) closed with 4000 after
//! `subscriptions.idleTimeout`, every connection closed with 4000 after
//! `subscriptions.maxLifetime` (clients resume with `after`), and a client that does not take a
//! message within `subscriptions.sendTimeout` disconnected (counted as `slow`): messages are
//! produced only as fast as the client takes them, so a reader that stops costs one message
//! and the socket's buffers. A connection whose `connection_init` was not accepted 10 s after it
//! opened is closed with 4408 ([`INIT_TIMEOUT`]; a token in the upgrade request does not replace
//! `connection_init`, which the protocols require, so such a socket holds no slot for long). Shutdown closes every socket with 1001.
//!
//! **Metrics:** `controlplane_subscription_connections`, `controlplane_subscriptions_active`,
//! `controlplane_subscription_events_total`, `controlplane_subscription_disconnects_total{reason}`
//! (`slow`, `idle`, `lifetime`, `expired`, `shutdown`, `client_limit`, `init_timeout`).

use crate::auth::{AuthError, Authenticator};
use crate::config::SubscriptionsConfig;
use async_graphql::futures_util::stream::BoxStream;
use async_graphql::http::{WebSocketProtocols, WsMessage, ALL_WEBSOCKET_PROTOCOLS};
use async_graphql_poem::GraphQLProtocol;
use futures::{FutureExt, SinkExt, StreamExt};
use poem::web::websocket::{Message, WebSocket, WebSocketConfig};
use poem::{FromRequest, IntoResponse, Request, RequestBody, Response};
use prometheus::core::Collector;
use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};
use query::changes::ChangeLog;
use query::viewer::Viewer;
use query::Api;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use storage::Store;

/// The reasons of `controlplane_subscription_disconnects_total`.
pub const DISCONNECT_REASONS: &[&str] = &["slow", "idle", "lifetime", "expired", "shutdown", "client_limit", "init_timeout"];

/// Messages ready at once that are written before one flush (at most this many, and no more
/// once this many bytes are written).
const SEND_BATCH: usize = 64;
const SEND_BATCH_BYTES: usize = 256 << 10;

/// Bytes read from a socket at once. Client messages are small, and tungstenite zeroes this
/// much of its buffer before each read (its default, 128 KiB, cost 7 % of P7's CPU).
const READ_BUFFER_BYTES: usize = 4 << 10;

/// The share of `subscriptions.maxConnections` that connections without a token yet may take
/// (one in ten; at least one place).
pub const UNAUTHENTICATED_SHARE: usize = 10;

/// The places for connections without a token yet.
fn unauthenticated_places(max_connections: usize) -> usize {
    (max_connections / UNAUTHENTICATED_SHARE).max(1)
}

/// How long a connection may stay without a token (upgrade header or `connection_init`).
pub const INIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The subscription metrics.
#[derive(Clone)]
pub struct SubscriptionMetrics {
    /// `controlplane_subscription_connections`.
    pub connections: IntGauge,
    /// `controlplane_subscriptions_active`.
    pub active: IntGauge,
    /// `controlplane_subscription_events_total`.
    pub events: IntCounter,
    /// `controlplane_subscription_disconnects_total{reason}`.
    pub disconnects: IntCounterVec,
}

impl SubscriptionMetrics {
    /// Creates the metrics and registers them in `registry` (a name already registered is
    /// logged and the metric stays unexported).
    pub fn new(registry: &Registry) -> SubscriptionMetrics {
        let valid = "metric definition is valid";
        let connections = IntGauge::new("controlplane_subscription_connections", "GraphQL WebSocket connections open.").expect(valid);
        let active = IntGauge::new("controlplane_subscriptions_active", "GraphQL subscriptions running.").expect(valid);
        let events = IntCounter::new("controlplane_subscription_events_total", "Subscription events sent to clients.").expect(valid);

        let disconnects = IntCounterVec::new(
            Opts::new(
                "controlplane_subscription_disconnects_total",
                "WebSocket connections closed by the server, by reason (slow, idle, lifetime, expired, shutdown, client_limit, init_timeout).",
            ),
            &["reason"],
        )
        .expect(valid);
        for c in [
            Box::new(connections.clone()) as Box<dyn Collector>,
            Box::new(active.clone()),
            Box::new(events.clone()),
            Box::new(disconnects.clone()),
        ] {
            if let Err(e) = registry.register(c) {
                tracing::warn!(error = %e, "a subscription metric is not exported");
            }
        }
        for reason in DISCONNECT_REASONS {
            disconnects.with_label_values(&[reason]);
        }
        SubscriptionMetrics { connections, active, events, disconnects }
    }
}

/// Everything the connections share.
pub struct Hub {
    log: ChangeLog,
    settings: SubscriptionsConfig,
    /// `graphql.maxBodyBytes`: the largest client message.
    max_message_bytes: usize,
    metrics: SubscriptionMetrics,
    /// Told of every change of the counts ([`crate::metrics::Metrics::subscribe`]).
    server_metrics: crate::metrics::Metrics,
    connections: AtomicUsize,
    subscriptions: AtomicUsize,
    /// Bytes of the operation texts and variables of the running subscriptions
    /// (`subscriptions.maxTextBytes`).
    text_bytes: AtomicUsize,
    /// Connections open without a token yet (at most [`UNAUTHENTICATED_SHARE`] of
    /// `subscriptions.maxConnections`).
    unauthenticated: AtomicUsize,
    /// Connections per token `clientId` (counted once authenticated).
    per_client: Mutex<std::collections::HashMap<String, usize>>,
    shutdown: Arc<AtomicBool>,
    /// A fresh deadline for each event.
    deadline: Arc<dyn Fn() -> query::deadline::Deadline + Send + Sync>,
}

impl Hub {
    /// The hub of `store`'s subscriptions: follows its commits in a change log.
    ///
    /// # Errors
    /// The change log cannot start ([`ChangeLog::follow`]).
    pub fn new(
        store: &Store,
        settings: SubscriptionsConfig,
        max_message_bytes: usize,
        metrics: &crate::metrics::Metrics,
        shutdown: Arc<AtomicBool>,
        deadline: Arc<dyn Fn() -> query::deadline::Deadline + Send + Sync>,
    ) -> std::io::Result<Hub> {
        let log_settings =
            query::changes::ChangeLogSettings { max_entries: settings.change_log_size, retention: settings.change_log_retention };
        let log = ChangeLog::follow(store, log_settings)?;
        SharingCollector::register(log.clone(), metrics.registry());
        Ok(Hub {
            log,
            settings,
            max_message_bytes,
            metrics: SubscriptionMetrics::new(metrics.registry()),
            server_metrics: metrics.clone(),
            connections: AtomicUsize::new(0),
            subscriptions: AtomicUsize::new(0),
            text_bytes: AtomicUsize::new(0),
            unauthenticated: AtomicUsize::new(0),
            per_client: Mutex::default(),
            shutdown,
            deadline,
        })
    }
}

/// The metrics of answers shared by identical subscriptions ([`query::changes::answers`]), read
/// from the change log when scraped: `controlplane_subscription_groups`,
/// `controlplane_subscription_shared_answer_bytes`, `controlplane_subscription_answers_shared_total`.
struct SharingCollector {
    log: ChangeLog,
    groups: IntGauge,
    bytes: IntGauge,
    shared: IntCounter,
}

impl SharingCollector {
    fn register(log: ChangeLog, registry: &Registry) {
        let valid = "metric definition is valid";
        let collector = SharingCollector {
            log,
            groups: IntGauge::new(
                "controlplane_subscription_groups",
                "Groups of running subscriptions with the same operation and claims: each resolves an event once.",
            )
            .expect(valid),
            bytes: IntGauge::new("controlplane_subscription_shared_answer_bytes", "Bytes of the answers kept for identical subscriptions.")
                .expect(valid),
            shared: IntCounter::new(
                "controlplane_subscription_answers_shared_total",
                "Events answered with an identical subscription's answer.",
            )
            .expect(valid),
        };
        if let Err(e) = registry.register(Box::new(collector)) {
            tracing::warn!(error = %e, "the subscription sharing metrics are not exported");
        }
    }
}

impl Collector for SharingCollector {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        [self.groups.desc(), self.bytes.desc(), self.shared.desc()].concat()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let now = self.log.sharing();
        self.groups.set(i64::try_from(now.groups).unwrap_or(i64::MAX));
        self.bytes.set(i64::try_from(now.bytes).unwrap_or(i64::MAX));
        self.shared.inc_by(now.answers_shared.saturating_sub(self.shared.get()));
        [self.groups.collect(), self.bytes.collect(), self.shared.collect()].concat()
    }
}

/// Whether `req` asks for a WebSocket.
pub fn is_upgrade(req: &Request) -> bool {
    req.headers().get(poem::http::header::UPGRADE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// What one connection's executor needs.
#[derive(Clone)]
struct Connection {
    api: Arc<Api>,
    store: Store,
    hub: Arc<Hub>,
    /// The viewer, once authenticated (header or `connection_init`).
    viewer: Arc<OnceLock<Viewer>>,
    /// Subscriptions running on this connection.
    running: Arc<AtomicUsize>,
    /// Bytes of their operation texts and variables (at most `graphql.maxBodyBytes`).
    text_bytes: Arc<AtomicUsize>,
    /// When the last subscription of this connection ended (or it opened).
    idle_since: Arc<Mutex<Instant>>,
}

/// Decrements the counters of one running subscription when its stream is dropped.
struct Running {
    conn: Connection,
    /// Its text's bytes, once counted.
    text_bytes: usize,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.conn.hub.text_bytes.fetch_sub(self.text_bytes, Ordering::Relaxed);
        self.conn.text_bytes.fetch_sub(self.text_bytes, Ordering::Relaxed);
        self.conn.hub.subscriptions.fetch_sub(1, Ordering::Relaxed);
        self.conn.hub.metrics.active.dec();
        if self.conn.running.fetch_sub(1, Ordering::Relaxed) == 1 {
            *self.conn.idle_since.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
        self.conn.hub.server_metrics.notify_waiters();
    }
}

/// Releases one connection's place in the counts.
struct ConnectionSlot {
    hub: Arc<Hub>,
    client: Option<String>,
    /// Set while the connection counts as unauthenticated ([`Hub::unauthenticated`]).
    unauthenticated: Arc<AtomicBool>,
}

impl ConnectionSlot {
    /// The connection has its viewer: it no longer counts as unauthenticated.
    fn authenticated(hub: &Hub, flag: &AtomicBool) {
        if flag.swap(false, Ordering::Relaxed) {
            hub.unauthenticated.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        ConnectionSlot::authenticated(&self.hub, &self.unauthenticated);
        self.hub.connections.fetch_sub(1, Ordering::Relaxed);
        self.hub.metrics.connections.dec();
        self.hub.server_metrics.notify_waiters();
        if let Some(client) = &self.client {
            let mut counts = self.hub.per_client.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = counts.get_mut(client) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    counts.remove(client);
                }
            }
        }
    }
}

fn too_many(place: &str) -> async_graphql::Response {
    async_graphql::Response::from_errors(vec![query::error::too_many_subscriptions(place)])
}

impl async_graphql::Executor for Connection {
    async fn execute(&self, _request: async_graphql::Request) -> async_graphql::Response {
        async_graphql::Response::from_errors(vec![query::error::not_a_subscription()])
    }

    fn execute_stream(
        &self,
        request: async_graphql::Request,
        _session: Option<Arc<async_graphql::Data>>,
    ) -> BoxStream<'static, async_graphql::Response> {
        let one = |r: async_graphql::Response| futures::stream::once(async move { r }).boxed();
        let Some(viewer) = self.viewer.get().cloned() else {
            // Not reached: subscriptions start only after an accepted connection_init.
            return one(async_graphql::Response::from_errors(vec![query::error::unauthenticated()]));
        };
        let hub = &self.hub;
        if self.running.load(Ordering::Relaxed) >= hub.settings.max_per_connection {
            return one(too_many("on this connection"));
        }
        if hub.subscriptions.fetch_add(1, Ordering::Relaxed) >= hub.settings.max_total {
            hub.subscriptions.fetch_sub(1, Ordering::Relaxed);
            return one(too_many("on this server"));
        }
        self.running.fetch_add(1, Ordering::Relaxed);
        hub.metrics.active.inc();
        let mut running = Running { conn: self.clone(), text_bytes: 0 };
        match self.api.prepare_subscription(&self.store, viewer, request, &hub.log, hub.deadline.clone()) {
            Err(refused) => one(*refused),
            Ok(request) => {
                // What a running subscription holds grows with its text: the texts are bounded
                // per connection and on the server.
                let bytes = request.query.len() + serde_json::to_string(&request.variables).map_or(0, |v| v.len());
                if self.text_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes > hub.max_message_bytes {
                    self.text_bytes.fetch_sub(bytes, Ordering::Relaxed);
                    return one(too_many(&format!(
                        "on this connection: their texts and variables would pass {} bytes",
                        hub.max_message_bytes
                    )));
                }
                if hub.text_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes > hub.settings.max_text_bytes {
                    hub.text_bytes.fetch_sub(bytes, Ordering::Relaxed);
                    self.text_bytes.fetch_sub(bytes, Ordering::Relaxed);
                    return one(too_many(&format!(
                        "on this server: their texts and variables would pass {} bytes (subscriptions.maxTextBytes)",
                        hub.settings.max_text_bytes
                    )));
                }
                running.text_bytes = bytes;
                let events = self.api.subscribe(request);
                // Prepared: it starts at the log's head of now.
                hub.server_metrics.notify_waiters();
                // The guard lives as long as the stream.
                events
                    .map(move |r| {
                        let _counted = &running;
                        r
                    })
                    .boxed()
            }
        }
    }
}

/// The token of a `connection_init` payload.
fn payload_token(payload: &serde_json::Value) -> Option<String> {
    let find = |v: &serde_json::Value| {
        ["Authorization", "authorization"].iter().find_map(|k| v.get(k).and_then(|t| t.as_str()).map(str::to_string))
    };
    find(payload).or_else(|| payload.get("headers").and_then(find))
}

/// Upgrades `req` to a subscription connection, or answers why not.
pub async fn upgrade(req: &Request, api: Arc<Api>, store: Store, auth: Authenticator, hub: Arc<Hub>) -> Response {
    let header = req.headers().get("authorization").and_then(|h| h.to_str().ok()).map(str::to_string);
    let viewer = Arc::new(OnceLock::new());
    if header.is_some() {
        match auth.authenticate(header.as_deref()).await {
            Ok(v) => {
                let _ = viewer.set(v);
            }
            Err(e) => return super::graphql::rejection(&e),
        }
    }
    let mut body = RequestBody::new(poem::Body::empty());
    let Ok(protocol) = GraphQLProtocol::from_request(req, &mut body).await else {
        let detail = "a WebSocket on this path needs the subprotocol graphql-transport-ws or graphql-ws";
        return super::graphql::problem(poem::http::StatusCode::BAD_REQUEST, "Bad Request", detail);
    };
    let websocket = match WebSocket::from_request(req, &mut body).await {
        Ok(ws) => ws,
        Err(e) => return e.into_response(),
    };
    // Connections without a token yet may take only a share of the places: tokenless upgrades
    // cannot lock out the clients that have one.
    let unauthenticated = header.is_none();
    if unauthenticated && hub.unauthenticated.fetch_add(1, Ordering::Relaxed) >= unauthenticated_places(hub.settings.max_connections) {
        hub.unauthenticated.fetch_sub(1, Ordering::Relaxed);
        return busy("too many subscription connections without a token; retry later, or send the token in the upgrade request");
    }
    let unauthenticated = Arc::new(AtomicBool::new(unauthenticated));
    if hub.connections.fetch_add(1, Ordering::Relaxed) >= hub.settings.max_connections {
        hub.connections.fetch_sub(1, Ordering::Relaxed);
        ConnectionSlot::authenticated(&hub, &unauthenticated);
        return busy("too many subscription connections; retry later");
    }
    hub.metrics.connections.inc();
    hub.server_metrics.notify_waiters();
    let open = ConnectionSlot { hub: hub.clone(), client: None, unauthenticated: unauthenticated.clone() };
    let conn = Connection {
        api,
        store,
        hub: hub.clone(),
        viewer,
        running: Arc::default(),
        text_bytes: Arc::default(),
        idle_since: Arc::new(Mutex::new(Instant::now())),
    };
    let config = WebSocketConfig::default()
        .max_message_size(Some(hub.max_message_bytes))
        .max_frame_size(Some(hub.max_message_bytes))
        .read_buffer_size(READ_BUFFER_BYTES);
    websocket
        .protocols(ALL_WEBSOCKET_PROTOCOLS)
        .config(config)
        .on_upgrade(move |socket| serve(socket, conn, protocol.0, auth, open))
        .into_response()
}

/// HTTP 503 with `Retry-After: 10` and `detail`: no place for another connection.
fn busy(detail: &str) -> Response {
    let mut resp = super::graphql::problem(poem::http::StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable", detail);
    resp.headers_mut().insert("retry-after", poem::http::HeaderValue::from_static("10"));
    resp
}

/// Why the server ends a connection.
enum End {
    /// The client went away, or the protocol ended.
    Done,
    /// Close with this code and reason, counted under `reason`.
    Close(u16, &'static str, &'static str),
    /// The client did not take a message in time.
    Slow,
}

/// Serves one upgraded connection until the client goes away, the protocol ends, or a limit or
/// the shutdown ends it ([`End`]); then closes the socket with its code, counts why, and ends
/// every stream of the connection before the connection's own counts.
async fn serve(
    socket: poem::web::websocket::WebSocketStream,
    conn: Connection,
    protocol: WebSocketProtocols,
    auth: Authenticator,
    mut open: ConnectionSlot,
) {
    let hub = conn.hub.clone();
    let (mut sink, input) = socket.split();
    let too_big = Arc::new(AtomicBool::new(false));
    let ids = Arc::new(SubscriberIds::default());
    let (input, mut refused) = client_messages(input, &conn, protocol, &too_big, &ids);
    // The client's limit is counted once its viewer is known.
    let counted: Arc<Mutex<Option<String>>> = Arc::default();
    let init = ConnectionInit {
        viewer: conn.viewer.clone(),
        hub: hub.clone(),
        counted: counted.clone(),
        auth: auth.clone(),
        pending: open.unauthenticated.clone(),
    };
    let mut messages =
        Box::pin(async_graphql::http::WebSocket::new(conn.clone(), input, protocol).on_connection_init(move |payload| init.run(payload)));
    let opened = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let settings = hub.settings;
    let end = loop {
        tokio::select! {
            message = messages.next() => {
                let batch = send_batch(message, &mut messages, &mut sink, protocol, &hub, &ids);
                match tokio::time::timeout(settings.send_timeout, batch).await {
                    Ok(true) => {}
                    Ok(false) => break End::Done,
                    Err(_) => break End::Slow,
                }
            }
            Some(answer) = refused.recv() => {
                if tokio::time::timeout(settings.send_timeout, sink.send(Message::text(answer))).await.is_err() {
                    break End::Slow;
                }
            }
            _ = tick.tick() => {
                let initialised = counted.lock().unwrap_or_else(|e| e.into_inner()).is_some();
                if let Some(end) = limit_reached(&conn, &auth, opened, initialised) {
                    break end;
                }
            }
        }
    };
    if open.client.is_none() {
        open.client = counted.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
    close(&mut sink, end, &hub, &ids, &too_big).await;
    // Ends every stream of the connection (and their counts) before the connection's.
    drop(messages);
    drop(open);
}

/// The client's messages as the protocol machine reads them (text and binary frames' bytes),
/// and the refusals to send back. A message over the limit ends the input and sets `too_big`
/// (the socket is then closed with 1009); with graphql-transport-ws, a `subscribe` with the id of
/// a running subscription ends it (closed with 4409, [`SubscriberIds`]). A message nested deeper
/// than the JSON reader follows cannot be read by the protocol machine (it would close the
/// socket): one with an id is answered `INPUT_TOO_DEEP` for that id instead, as over HTTP, and
/// the connection goes on (a full queue of refusals drops the answer, not the connection).
fn client_messages(
    input: impl futures::Stream<Item = Result<Message, std::io::Error>> + Unpin + Send + 'static,
    conn: &Connection,
    protocol: WebSocketProtocols,
    too_big: &Arc<AtomicBool>,
    ids: &Arc<SubscriberIds>,
) -> (impl futures::Stream<Item = Vec<u8>> + Unpin + Send + 'static, tokio::sync::mpsc::Receiver<String>) {
    let seen_too_big = too_big.clone();
    let input = input
        .take_while(move |m| {
            if let Err(e) = m {
                if e.to_string().contains("too long") {
                    seen_too_big.store(true, Ordering::Relaxed);
                }
            }
            futures::future::ready(m.is_ok())
        })
        .filter_map(|m| futures::future::ready(m.ok().filter(|m| m.is_text() || m.is_binary()).map(Message::into_bytes)));
    let (refusals, refused) = tokio::sync::mpsc::channel::<String>(REFUSALS_QUEUED);
    let too_deep = query::limits::LimitError::input_depth(conn.api.limits().max_input_depth).into_server_error();
    let input = input.filter_map(move |m| {
        let answered = too_deep_for_id(&m).and_then(|id| {
            let answer = serde_json::json!({"id": id, "type": "error", "payload": [too_deep]}).to_string();
            refusals.try_send(answer).ok()
        });
        futures::future::ready(if answered.is_some() { None } else { Some(m) })
    });
    let ids = ids.clone();
    let input = input.take_while(move |m| futures::future::ready(protocol != WebSocketProtocols::GraphQLWS || ids.client_message(m)));
    (input, refused)
}

/// What a connection's `connection_init` needs: it authenticates the payload's token when the
/// upgrade request had none, then counts the connection against its client's limit.
struct ConnectionInit {
    viewer: Arc<OnceLock<Viewer>>,
    hub: Arc<Hub>,
    /// The client counted, to uncount when the connection ends.
    counted: Arc<Mutex<Option<String>>>,
    auth: Authenticator,
    /// The connection's [`ConnectionSlot::unauthenticated`] flag.
    pending: Arc<AtomicBool>,
}

impl ConnectionInit {
    /// Accepts the connection, or refuses it with the reason the protocol sends: a token refused
    /// or unverifiable, or `TOO_MANY_CONNECTIONS` for its client (`subscriptions.maxConnectionsPerClient`).
    async fn run(self, payload: serde_json::Value) -> async_graphql::Result<async_graphql::Data> {
        if self.viewer.get().is_none() {
            let token = payload_token(&payload);
            match self.auth.authenticate(token.as_deref()).await {
                Ok(v) => {
                    let _ = self.viewer.set(v);
                }
                Err(AuthError::Unavailable) => return Err("token keys are unavailable; retry later".into()),
                Err(AuthError::Forbidden(c)) => return Err(format!("forbidden: {c}").into()),
                Err(_) => return Err("invalid token".into()),
            }
        }
        let client = self.viewer.get().map(|v| v.client_id.clone()).unwrap_or_default();
        {
            let mut counts = self.hub.per_client.lock().unwrap_or_else(|e| e.into_inner());
            let n = counts.entry(client.clone()).or_insert(0);
            if *n >= self.hub.settings.max_connections_per_client {
                self.hub.metrics.disconnects.with_label_values(&["client_limit"]).inc();
                return Err(async_graphql::Error::new(TOO_MANY_CONNECTIONS));
            }
            *n += 1;
        }
        *self.counted.lock().unwrap_or_else(|e| e.into_inner()) = Some(client);
        ConnectionSlot::authenticated(&self.hub, &self.pending);
        Ok(async_graphql::Data::default())
    }
}

/// Writes `first` and the messages ready right after it (at most [`SEND_BATCH`], or until
/// [`SEND_BATCH_BYTES`]) with one flush, counting events and completed ids. `false` when the
/// connection ends: the protocol closed it (its close frame is sent), the messages ended, or the
/// socket failed. The caller bounds it by `subscriptions.sendTimeout`.
async fn send_batch(
    first: Option<WsMessage>,
    messages: &mut (impl futures::Stream<Item = WsMessage> + Unpin),
    sink: &mut (impl futures::Sink<Message> + Unpin),
    protocol: WebSocketProtocols,
    hub: &Hub,
    ids: &SubscriberIds,
) -> bool {
    let mut next = first;
    let (mut batch, mut bytes) = (0, 0);
    loop {
        let message = match next.take() {
            Some(WsMessage::Text(text)) => {
                // An event: a `next` (`data`) with data; a refusal or an error has none.
                let event = text.starts_with(r#"{"type":"next""#) || text.starts_with(r#"{"type":"data""#);
                if event && !text.contains(r#""payload":{"data":null"#) {
                    hub.metrics.events.inc();
                } else if text.starts_with(r#"{"type":"complete""#) {
                    ids.completed(&text);
                }
                bytes += text.len();
                Message::text(text)
            }
            Some(WsMessage::Close(code, reason)) => {
                let (code, reason) = close_frame(protocol, code, &reason);
                let _ = sink.send(Message::close_with(code, reason)).await;
                return false;
            }
            None => {
                let _ = sink.flush().await;
                return false;
            }
        };
        if sink.feed(message).await.is_err() {
            return false;
        }
        batch += 1;
        match (batch < SEND_BATCH && bytes < SEND_BATCH_BYTES).then(|| messages.next().now_or_never()).flatten() {
            Some(m) => next = m,
            None => return sink.flush().await.is_ok(),
        }
    }
}

/// The limit a connection has reached, checked every tick: the server shuts down, no accepted
/// `connection_init` (`initialised`) within [`INIT_TIMEOUT`], `subscriptions.maxLifetime`, `subscriptions.idleTimeout` with no
/// subscription running, or the token expired.
fn limit_reached(conn: &Connection, auth: &Authenticator, opened: Instant, initialised: bool) -> Option<End> {
    let settings = conn.hub.settings;
    if conn.hub.shutdown.load(Ordering::Relaxed) {
        return Some(End::Close(1001, "the server is shutting down", "shutdown"));
    }
    let now = Instant::now();
    if !initialised && now.duration_since(opened) >= INIT_TIMEOUT {
        return Some(End::Close(4408, "connection initialisation timeout", "init_timeout"));
    }
    if now.duration_since(opened) >= settings.max_lifetime {
        return Some(End::Close(4000, "connection lifetime reached: reconnect and resume with `after`", "lifetime"));
    }
    let idle = *conn.idle_since.lock().unwrap_or_else(|e| e.into_inner());
    if initialised && conn.running.load(Ordering::Relaxed) == 0 && now.duration_since(idle) >= settings.idle_timeout {
        return Some(End::Close(4000, "idle: no subscription is running", "idle"));
    }
    if conn.viewer.get().is_some_and(|v| auth.expired(v)) {
        return Some(End::Close(4403, "token expired", "expired"));
    }
    None
}

/// Ends the connection as `end` says: the close frame of a duplicate id (4409), of a message too
/// large (1009) or of a limit (its code), each given at most 1 s (the client may not read
/// either); a slow client is only counted and logged.
async fn close(sink: &mut (impl futures::Sink<Message> + Unpin), end: End, hub: &Hub, ids: &SubscriberIds, too_big: &AtomicBool) {
    let frame = match end {
        End::Done if ids.duplicate.load(Ordering::Relaxed) => Some((4409, "subscriber id already exists".to_string())),
        End::Done if too_big.load(Ordering::Relaxed) => Some((1009, format!("a message is larger than {} bytes", hub.max_message_bytes))),
        End::Done => None,
        End::Slow => {
            hub.metrics.disconnects.with_label_values(&["slow"]).inc();
            tracing::info!(after_s = hub.settings.send_timeout.as_secs_f64(), "subscription client disconnected: it did not read");
            None
        }
        End::Close(code, reason, counted_as) => {
            hub.metrics.disconnects.with_label_values(&[counted_as]).inc();
            Some((code, reason.to_string()))
        }
    };
    if let Some((code, reason)) = frame {
        let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(Message::close_with(code, reason))).await;
    }
}

/// Answers of refused messages waiting to be sent on one connection ([`too_deep_for_id`]).
const REFUSALS_QUEUED: usize = 16;

/// The id of a client message nested deeper than the JSON reader follows (128 levels), when its
/// top level has one; `None` for any other message (the protocol machine reads it).
fn too_deep_for_id(message: &[u8]) -> Option<String> {
    // serde_json's reader stops at 128 nested arrays and objects.
    (nesting(message) > 127).then(|| top_level_id(message)).flatten()
}

/// The deepest nesting of arrays and objects in the JSON `text` (brackets inside strings are
/// text), found by a scan.
fn nesting(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &c in text {
        match (in_string, c) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') => in_string = false,
            (true, _) => {}
            (false, b'"') => in_string = true,
            (false, b'{' | b'[') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, b'}' | b']') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The string value of the key `id` of the outermost JSON object in `text`, found without reading
/// what is nested (a scan of strings and brackets).
fn top_level_id(text: &[u8]) -> Option<String> {
    let skip_space = |mut i: usize| {
        while text.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    // The end (exclusive) of the string starting at `start` (its opening quote).
    let string_end = |start: usize| {
        let mut i = start + 1;
        while i < text.len() {
            match text[i] {
                b'\\' => i += 2,
                b'"' => return Some(i + 1),
                _ => i += 1,
            }
        }
        None
    };
    let (mut depth, mut i) = (0usize, 0usize);
    while i < text.len() {
        match text[i] {
            b'{' | b'[' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'"' => {
                let end = string_end(i)?;
                let colon = skip_space(end);
                if depth == 1 && text.get(colon) == Some(&b':') && &text[i..end] == b"\"id\"" {
                    let value = skip_space(colon + 1);
                    if text.get(value) != Some(&b'"') {
                        return None;
                    }
                    return serde_json::from_slice(&text[value..string_end(value)?]).ok();
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    None
}

/// The ids of one connection's running subscriptions (graphql-transport-ws: a `subscribe` with
/// the id of a running one closes the socket with 4409). Kept as hashes, so a long id costs 8
/// bytes; an id is running from its `subscribe` until the client's or the server's `complete`.
#[derive(Default)]
struct SubscriberIds {
    running: Mutex<std::collections::HashSet<u64>>,
    /// Set when a `subscribe` reused a running id.
    duplicate: AtomicBool,
}

/// The head of a graphql-transport-ws message (either direction).
#[derive(serde::Deserialize)]
struct MessageHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    id: Option<std::borrow::Cow<'a, str>>,
}

impl SubscriberIds {
    fn hash(id: &str) -> u64 {
        use std::hash::BuildHasher;
        static KEYS: OnceLock<std::hash::RandomState> = OnceLock::new();
        KEYS.get_or_init(std::hash::RandomState::new).hash_one(id)
    }

    /// Notes a client message; `false` when it reuses the id of a running subscription. A
    /// message that is not of the protocol passes (the protocol machine answers it).
    fn client_message(&self, message: &[u8]) -> bool {
        let Ok(head) = serde_json::from_slice::<MessageHead>(message) else { return true };
        let Some(id) = head.id else { return true };
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        match head.kind.as_ref() {
            "subscribe" if !running.insert(Self::hash(&id)) => {
                self.duplicate.store(true, Ordering::Relaxed);
                false
            }
            "complete" => {
                running.remove(&Self::hash(&id));
                true
            }
            _ => true,
        }
    }

    /// Notes the server's `complete` message `text`.
    fn completed(&self, text: &str) {
        if let Ok(MessageHead { id: Some(id), .. }) = serde_json::from_str::<MessageHead>(text) {
            self.running.lock().unwrap_or_else(|e| e.into_inner()).remove(&Self::hash(&id));
        }
    }
}

/// The close frame for a close the protocol machine asked for: `graphql-transport-ws`'s codes
/// (4400 invalid message, 4401 no `connection_init` yet, 4403 refused token, 4429 too many
/// connections of the client), never the client's own text echoed, and a reason within the
/// 123 bytes a close frame holds.
fn close_frame(protocol: WebSocketProtocols, code: u16, reason: &str) -> (u16, String) {
    let refused_init = reason == "invalid token" || reason.starts_with("forbidden: ") || reason.starts_with("token keys are unavailable");
    let (code, reason) = match (code, protocol) {
        (1002, _) if reason == TOO_MANY_CONNECTIONS => (if protocol == WebSocketProtocols::GraphQLWS { 4429 } else { 1008 }, reason),
        (1002, WebSocketProtocols::GraphQLWS) if refused_init => (4403, reason),
        (1002, _) if refused_init => (1008, reason),
        (1002, WebSocketProtocols::GraphQLWS) => (4400, "invalid message"),
        (1002, _) => (1002, "invalid message"),
        (1011, WebSocketProtocols::GraphQLWS) => (4401, "Unauthorized: send connection_init first"),
        (code, _) => (code, reason),
    };
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    (code, reason[..end].to_string())
}

/// The reason a connection beyond `subscriptions.maxConnectionsPerClient` is refused with.
const TOO_MANY_CONNECTIONS: &str = "too many connections for this client";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_a_message_too_deep_to_read_is_found_at_its_top_level() {
        let deep = |id: &str| {
            let nested = format!("{}1{}", "[".repeat(200), "]".repeat(200));
            format!(r#"{{"type":"subscribe", "payload": {{"query": "q", "variables": {{"x": {nested}, "id": "inner"}}}}, "id" : {id}}}"#)
        };
        assert_eq!(too_deep_for_id(deep(r#""a\"b""#).as_bytes()), Some("a\"b".to_string()), "escapes, spaces, the id after the payload");
        assert_eq!(too_deep_for_id(deep("7").as_bytes()), None, "not a string id");
        assert_eq!(too_deep_for_id(br#"{"type":"subscribe","id":"1","payload":{"query":"q"}}"#), None, "readable: left to the protocol");
        assert_eq!(top_level_id(br#"{"payload":{"id":"inner"}}"#), None, "a nested id is not the message's");
        assert_eq!(top_level_id(br#"{"x":"\"id\":","id":"2"}"#), Some("2".to_string()), "an id inside a string is text");
        assert_eq!(top_level_id(br#"{"id":"unterminated"#), None);
        assert_eq!(top_level_id(b"[[[[[[[[["), None);
        assert_eq!(nesting(br#"{"a":[[1]],"b":"[[[[[[[[","c":{"d":{}}}"#), 3, "brackets in strings are text");
    }

    #[test]
    fn places_without_a_token_are_a_tenth() {
        assert_eq!(unauthenticated_places(1000), 100);
        assert_eq!(unauthenticated_places(5), 1);
    }
}
