//! The HTTP server loop: the routes (poem endpoints) served by hyper with a deadline on every
//! connection and a cap on their number — what poem's own server loop does not offer (a
//! connection that never finishes its header, or never sends another request, would hold its
//! socket and file descriptor for good).
//!
//! - `server.headerTimeout` (default 10 s): from the first byte of a request (for a new
//!   connection: from its accept) to the end of its header; a connection that sends less is
//!   closed.
//! - `server.bodyTimeout` (default 30 s): reading a request's body, answered 408 by the GraphQL
//!   endpoint (the only one that takes a body, [`super::graphql`]).
//! - `server.idleTimeout` (default 60 s): a keep-alive connection with no request in progress and
//!   no byte received since its last answer is closed. A connection upgraded to a WebSocket is
//!   never idle here: the `subscriptions.*` limits apply to it.
//! - `server.maxConnections` ([`default_max_connections`] unless set): every open connection
//!   counts, WebSockets included, until its socket is closed. At the cap the oldest idle
//!   connection is closed for a new one. With none idle, [`PROBE_ROOM`] more connections are
//!   accepted for probes: they answer `/healthz`, `/readyz` and `/metrics` only (503 for anything
//!   else), one request each, and must send their header within [`PROBE_HEADER_TIMEOUT`].
//!   Beyond that a new connection is closed at once.
//!
//! `controlplane_http_connections` counts the open connections,
//! `controlplane_http_connections_closed_total{reason}` those closed by these rules (`idle`,
//! `header_timeout`, `evicted`, `refused`, `answer_timeout`: an answer with an [`AnswerDeadline`] not taken by
//! then).

use crate::metrics::Metrics;
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use poem::Endpoint;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// Connections accepted beyond `server.maxConnections` when none is idle, for the kubelet's
/// probes (`/healthz`, `/readyz`; one request each).
pub const PROBE_ROOM: usize = 32;

/// The longest request target answered (longer: 414 with a problem JSON and code
/// `URI_TOO_LONG`; the HTTP layer itself refuses beyond 64 KiB with a bare 414).
pub const MAX_URI_BYTES: usize = 16 << 10;

/// The most bytes of request headers answered (more: 431 with a problem JSON and code
/// `HEADERS_TOO_LARGE`; the HTTP layer itself refuses beyond about 400 KiB, or beyond
/// [`PARSED_HEADER_FIELDS`] fields, with a bare 431).
pub const MAX_HEADER_BYTES: usize = 64 << 10;

/// The most header fields of a request answered (more: 431 with a problem JSON and code
/// `HEADERS_TOO_LARGE`).
pub const MAX_HEADER_FIELDS: usize = 100;

/// The header fields the HTTP layer parses at most; beyond, it refuses the request itself with
/// a bare 431 (the fields are parsed into a table of this size).
pub const PARSED_HEADER_FIELDS: usize = 1024;

/// The paths a connection accepted into [`PROBE_ROOM`] answers: the kubelet's probes and the
/// metrics that show the connections.
const PROBE_PATHS: &[&str] = &["/healthz", "/readyz", "/metrics"];

/// How long a connection accepted into [`PROBE_ROOM`] may take to send its request header (a
/// probe sends it at once; a silent connection must not hold the room).
pub const PROBE_HEADER_TIMEOUT: Duration = Duration::from_secs(1);

/// The listen backlog: connections the kernel completes before the server accepts them.
pub const LISTEN_BACKLOG: u32 = 1024;

/// The most connections [`default_max_connections`] allows (about 32 KiB of buffers each).
pub const MAX_DEFAULT_CONNECTIONS: usize = 10_000;

/// The deadlines and the cap of [`serve`] (`server.*`).
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// `server.headerTimeout`.
    pub header_timeout: Duration,
    /// `server.idleTimeout`.
    pub idle_timeout: Duration,
    /// `server.maxConnections`, resolved (never 0).
    pub max_connections: usize,
}

impl ConnectionLimits {
    /// The limits of `config` (`server.maxConnections` 0 resolved by
    /// [`default_max_connections`]).
    pub fn of(config: &crate::config::ServerConfig) -> ConnectionLimits {
        let nofile = open_file_limit();
        let max_connections = match config.max_connections {
            0 => default_max_connections(nofile),
            n if n as u64 + PROBE_ROOM as u64 + 256 > nofile => {
                let fitting = usize::try_from(nofile.saturating_sub(PROBE_ROOM as u64 + 256)).unwrap_or(usize::MAX).max(16);
                tracing::warn!(
                    configured = n,
                    open_file_limit = nofile,
                    using = fitting,
                    "server.maxConnections leaves no room in the open-file limit for the store, the sources and the log; using less"
                );
                fitting
            }
            n => n,
        };
        ConnectionLimits { header_timeout: config.header_timeout, idle_timeout: config.idle_timeout, max_connections }
    }
}

/// `server.maxConnections` by default: the open-file limit `nofile` (`RLIMIT_NOFILE`) less an
/// eighth of it, at least 256 descriptors kept for the store, the search index, the sources and
/// the log (and [`PROBE_ROOM`]), at most [`MAX_DEFAULT_CONNECTIONS`], at least 16.
pub fn default_max_connections(nofile: u64) -> usize {
    let kept = (nofile / 8).max(256) + PROBE_ROOM as u64;
    usize::try_from(nofile.saturating_sub(kept)).unwrap_or(usize::MAX).clamp(16, MAX_DEFAULT_CONNECTIONS)
}

/// The process's soft open-file limit (an unlimited one counts as 2^30).
pub fn open_file_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current.unwrap_or(u64::MAX).min(1 << 30)
}

/// Binds `address` (`HOST:PORT`, the first address it resolves to) with a listen backlog of
/// [`LISTEN_BACKLOG`] (tokio's default is 128: a burst of connections would lose some).
///
/// # Errors
/// The address does not resolve, or cannot be bound.
pub async fn bind(address: &str) -> std::io::Result<TcpListener> {
    let addr = tokio::net::lookup_host(address)
        .await?
        .next()
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{address} resolves to no address")))?;
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// What a connection is doing, for its deadline.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// No request in progress since this instant (the end of the last answer), and no byte
    /// received since.
    Idle(Instant),
    /// Waiting for a request's header since this instant: its first bytes arrived then, or the
    /// connection was accepted then.
    Header(Instant),
    /// Requests in progress (their answers not sent yet).
    Busy(usize),
    /// Switched to another protocol (a WebSocket): no deadline here.
    Upgraded,
}

/// Why [`serve`] closed a connection (the `reason` label).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Closed {
    Idle,
    HeaderTimeout,
    /// An answer with an [`AnswerDeadline`] was not taken by then.
    AnswerTimeout,
}

impl Closed {
    /// The `reason` label.
    fn reason(self) -> &'static str {
        match self {
            Closed::Idle => "idle",
            Closed::HeaderTimeout => "header_timeout",
            Closed::AnswerTimeout => "answer_timeout",
        }
    }
}

/// A response extension: the connection is closed when its answer is not sent by this time (a
/// streamed export whose client stopped reading, `http::export`).
#[derive(Clone, Copy, Debug)]
pub struct AnswerDeadline(pub Instant);

/// One open connection.
struct Connection {
    phase: Mutex<Phase>,
    /// Told when the phase changes or the connection is asked to close.
    changed: Notify,
    /// Asked to close (evicted for a new one, or the server stops).
    closing: AtomicBool,
    /// Evicted for a new connection (counted in [`OpenConnections::evicted`]).
    evicted: AtomicBool,
    /// Accepted into [`PROBE_ROOM`].
    probe_only: bool,
    /// The [`AnswerDeadline`] of the answer being sent, if it has one.
    answer_deadline: Mutex<Option<Instant>>,
}

impl Connection {
    fn phase(&self) -> std::sync::MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, phase: Phase) {
        *self.phase() = phase;
        self.changed.notify_waiters();
    }

    /// Bytes arrived: an idle connection starts a request's header.
    fn received(&self) {
        let mut phase = self.phase();
        if let Phase::Idle(_) = *phase {
            *phase = Phase::Header(Instant::now());
            drop(phase);
            self.changed.notify_waiters();
        }
    }

    fn request_started(&self) {
        let mut phase = self.phase();
        *phase = match *phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            Phase::Upgraded => Phase::Upgraded,
            Phase::Idle(_) | Phase::Header(_) => Phase::Busy(1),
        };
        drop(phase);
        self.changed.notify_waiters();
    }

    fn request_ended(&self) {
        let mut phase = self.phase();
        *phase = match *phase {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            Phase::Upgraded => Phase::Upgraded,
            _ => {
                *self.answer_deadline.lock().unwrap_or_else(|e| e.into_inner()) = None;
                Phase::Idle(Instant::now())
            }
        };
        drop(phase);
        self.changed.notify_waiters();
    }

    fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// When the current phase ends the connection, if nothing changes before.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        match *self.phase() {
            Phase::Idle(since) => Some(since + limits.idle_timeout),
            Phase::Header(since) => Some(since + self.header_timeout(limits)),
            Phase::Busy(_) => *self.answer_deadline.lock().unwrap_or_else(|e| e.into_inner()),
            Phase::Upgraded => None,
        }
    }

    /// Sets the [`AnswerDeadline`] of the answer being sent.
    fn answer_by(&self, at: Instant) {
        *self.answer_deadline.lock().unwrap_or_else(|e| e.into_inner()) = Some(at);
        self.changed.notify_waiters();
    }

    fn header_timeout(&self, limits: &ConnectionLimits) -> Duration {
        if self.probe_only {
            limits.header_timeout.min(PROBE_HEADER_TIMEOUT)
        } else {
            limits.header_timeout
        }
    }

    /// Why the connection is to be closed now, if its deadline passed.
    fn expired(&self, limits: &ConnectionLimits) -> Option<Closed> {
        let now = Instant::now();
        match *self.phase() {
            Phase::Idle(since) if now >= since + limits.idle_timeout => Some(Closed::Idle),
            Phase::Header(since) if now >= since + self.header_timeout(limits) => Some(Closed::HeaderTimeout),
            Phase::Busy(_) if self.answer_deadline.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|at| now >= at) => {
                Some(Closed::AnswerTimeout)
            }
            _ => None,
        }
    }
}

/// The open connections (until their sockets are closed: an upgraded one lives on in its
/// WebSocket's task).
#[derive(Default)]
struct Registry {
    open: Mutex<OpenConnections>,
}

#[derive(Default)]
struct OpenConnections {
    /// The last connection id given.
    last_id: u64,
    connections: HashMap<u64, Arc<Connection>>,
    /// Of those, the ones evicted and not closed yet: they do not count against the cap (each
    /// was evicted for one new connection).
    evicted: usize,
}

/// How a new connection is taken.
enum Admission {
    Served(Box<Registered>),
    Refused,
}

impl Registry {
    /// Admits a connection under `max` (closing the oldest idle one at the cap, else into
    /// [`PROBE_ROOM`]), or refuses it.
    fn admit(self: &Arc<Registry>, max: usize, metrics: &Metrics) -> Admission {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.connections.len() - open.evicted;
        let mut probe_only = false;
        if count >= max {
            let oldest_idle = open
                .connections
                .values()
                .filter(|c| !c.closing.load(Ordering::SeqCst))
                // A probe's connection closes after its one answer: it may still be listed,
                // idle, when the next connection comes; closing it frees no place for that one.
                .filter(|c| !c.probe_only)
                .filter_map(|c| match *c.phase() {
                    Phase::Idle(since) => Some((since, c.clone())),
                    _ => None,
                })
                .min_by_key(|(since, _)| *since);
            match oldest_idle {
                Some((_, c)) => {
                    c.evicted.store(true, Ordering::SeqCst);
                    c.close();
                    open.evicted += 1;
                    metrics.http_connections_closed.with_label_values(&["evicted"]).inc();
                }
                None if count < max + PROBE_ROOM => probe_only = true,
                None => {
                    metrics.http_connections_closed.with_label_values(&["refused"]).inc();
                    return Admission::Refused;
                }
            }
        }
        open.last_id += 1;
        let id = open.last_id;
        let connection = Arc::new(Connection {
            phase: Mutex::new(Phase::Header(Instant::now())),
            changed: Notify::new(),
            closing: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            answer_deadline: Mutex::new(None),
            probe_only,
        });
        open.connections.insert(id, connection.clone());
        metrics.http_connections.set(open.connections.len() as i64);
        Admission::Served(Box::new(Registered { registry: self.clone(), id, connection, metrics: metrics.clone() }))
    }

    fn close_all(&self) {
        for c in self.open.lock().unwrap_or_else(|e| e.into_inner()).connections.values() {
            c.close();
        }
    }
}

/// A connection's place in the [`Registry`], given up when its socket is closed.
struct Registered {
    registry: Arc<Registry>,
    id: u64,
    connection: Arc<Connection>,
    metrics: Metrics,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut open = self.registry.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.connections.remove(&self.id).is_some_and(|c| c.evicted.load(Ordering::SeqCst)) {
            open.evicted -= 1;
        }
        self.metrics.http_connections.set(open.connections.len() as i64);
    }
}

/// The socket of a connection: notes received bytes, and holds the connection's registration
/// until it is closed.
struct TrackedStream {
    stream: TcpStream,
    registered: Registered,
}

impl AsyncRead for TrackedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.registered.connection.received();
        }
        polled
    }
}

impl AsyncWrite for TrackedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Ends its request (the connection may turn idle) when dropped: once the answer's body is
/// sent or abandoned.
struct InProgress(Arc<Connection>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

/// An answer's body that keeps its request [`InProgress`] until its last frame is handed to
/// the connection (or the body is dropped): a client that has read the whole answer finds the
/// connection idle.
struct AnswerBody {
    body: PoemBody,
    request: Option<InProgress>,
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) || self.body.is_end_stream() {
            self.request = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The body type poem's responses convert into.
type PoemBody = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

/// Serves `routes` on `listener` until `shutdown` completes, with the deadlines and the cap of
/// `limits` (module docs). Then stops accepting, asks every connection to close after its
/// request in progress, and waits at most `grace` for them.
///
/// # Errors
/// None today: accept failures (such as running out of file descriptors) are logged once per
/// cause and minute, with a count, and accepting goes on.
pub async fn serve(
    listener: TcpListener,
    routes: poem::Route,
    limits: ConnectionLimits,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> std::io::Result<()> {
    let endpoint = Arc::new(routes);
    let registry = Arc::new(Registry::default());
    let local = listener.local_addr()?;
    let mut tasks = tokio::task::JoinSet::new();
    let mut accept_failures = storage::throttle::LogThrottle::new(Duration::from_secs(60));
    tokio::pin!(shutdown);
    tracing::info!(addr = %local, max_connections = limits.max_connections, "server started");
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
            // Finished connections are reaped as they go, so the set stays as large as what is open.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        let (stream, remote) = match accepted {
            Ok(a) => a,
            Err(e) => {
                if let Some(since) = accept_failures.admit(&e.to_string()) {
                    tracing::error!(error = %e, failures_since_last_line = since, "accepting a connection failed");
                }
                // Out of descriptors: let connections close before trying again.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let registered = match registry.admit(limits.max_connections, &metrics) {
            Admission::Served(r) => *r,
            Admission::Refused => continue,
        };
        let _ = stream.set_nodelay(true);
        let connection = registered.connection.clone();
        let stream = TrackedStream { stream, registered };
        tasks.spawn(serve_connection(stream, connection, endpoint.clone(), local, remote, limits, metrics.clone()));
    }
    drop(listener);
    registry.close_all();
    if tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await.is_err() {
        tracing::info!(left = tasks.len(), "connections still busy after the grace period are closed");
        tasks.abort_all();
    }
    tracing::info!("server stopped");
    Ok(())
}

/// `response` with `Connection: close` (its request's body is not read).
fn closing(mut response: poem::Response) -> poem::Response {
    response.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
    response
}

/// The answer to a request refused before it reaches an endpoint: a target longer than
/// [`MAX_URI_BYTES`] (414), headers over [`MAX_HEADER_BYTES`] or [`MAX_HEADER_FIELDS`] (431),
/// anything but a probe on a connection beyond the limit (`probe_only`, 503 `OVERLOADED`), more
/// than one `Authorization` header (400), a body with a `Content-Encoding` (415).
fn refusal(req: &http::Request<Incoming>, probe_only: bool) -> Option<poem::Response> {
    let uri_bytes = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    let header_bytes: usize = req.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
    if uri_bytes > MAX_URI_BYTES {
        let detail = format!("the request target is longer than {MAX_URI_BYTES} bytes");
        Some(closing(super::graphql::problem(http::StatusCode::URI_TOO_LONG, "URI Too Long", &detail)))
    } else if header_bytes > MAX_HEADER_BYTES || req.headers().len() > MAX_HEADER_FIELDS {
        let detail = format!("the request headers are larger than {MAX_HEADER_BYTES} bytes or {MAX_HEADER_FIELDS} fields");
        let status = http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
        Some(closing(super::graphql::problem(status, "Request Header Fields Too Large", &detail)))
    } else if probe_only && !PROBE_PATHS.contains(&req.uri().path()) {
        Some(super::graphql::overloaded("too many connections; retry later"))
    } else if req.headers().get_all(http::header::AUTHORIZATION).iter().count() > 1 {
        // Which one a proxy or this server would take is not for the client to guess.
        let detail = "the request has more than one Authorization header";
        Some(closing(super::graphql::problem(http::StatusCode::BAD_REQUEST, "Bad Request", detail)))
    } else if let Some(encoding) = body_encoding(req) {
        let detail = format!("request bodies are read as sent, without a Content-Encoding (not {encoding})");
        let status = http::StatusCode::UNSUPPORTED_MEDIA_TYPE;
        Some(closing(super::graphql::problem(status, "Unsupported Media Type", &detail)))
    } else {
        None
    }
}

/// The `Content-Encoding` of the body of `req` (every such header, cut to 64 bytes) when it is
/// anything but `identity`; `None` for a request without a body (no `Content-Length` above 0,
/// no `Transfer-Encoding`), which has nothing to decode.
fn body_encoding(req: &http::Request<Incoming>) -> Option<String> {
    let headers = req.headers();
    let declared = headers.get(http::header::CONTENT_LENGTH).is_some_and(|n| n.as_bytes() != b"0");
    if !declared && !headers.contains_key(http::header::TRANSFER_ENCODING) {
        return None;
    }
    let values: Vec<String> =
        headers.get_all(http::header::CONTENT_ENCODING).iter().map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).collect();
    let encoded = values.iter().flat_map(|v| v.split(',')).map(str::trim).any(|e| !e.is_empty() && !e.eq_ignore_ascii_case("identity"));
    encoded.then(|| values.join(", ").chars().take(64).collect())
}

/// Serves one connection until it ends, its deadline passes, or it is asked to close.
async fn serve_connection(
    stream: TrackedStream,
    connection: Arc<Connection>,
    endpoint: Arc<poem::Route>,
    local: std::net::SocketAddr,
    remote: std::net::SocketAddr,
    limits: ConnectionLimits,
    metrics: Metrics,
) {
    let service = {
        let connection = connection.clone();
        hyper::service::service_fn(move |req: http::Request<Incoming>| {
            let (endpoint, connection) = (endpoint.clone(), connection.clone());
            async move {
                connection.request_started();
                let request = InProgress(connection.clone());
                let probe_only = connection.probe_only;
                let response = if let Some(refused) = refusal(&req, probe_only) {
                    refused
                } else {
                    let req = poem::Request::from((
                        req,
                        poem::web::LocalAddr(poem::Addr::SocketAddr(local)),
                        poem::web::RemoteAddr(poem::Addr::SocketAddr(remote)),
                        poem::http::uri::Scheme::HTTP,
                    ));
                    endpoint.get_response(req).await
                };
                if response.status() == http::StatusCode::SWITCHING_PROTOCOLS {
                    connection.set(Phase::Upgraded);
                }
                if let Some(AnswerDeadline(at)) = response.extensions().get::<AnswerDeadline>() {
                    connection.answer_by(*at);
                }
                let mut response: http::Response<PoemBody> = response.into();
                if probe_only {
                    response.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
                }
                Ok::<_, Infallible>(response.map(|body| AnswerBody { body, request: Some(request) }))
            }
        })
    };
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().max_headers(PARSED_HEADER_FIELDS);
    let served = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    tokio::pin!(served);
    let mut shutting_down = false;
    loop {
        let changed = connection.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        if connection.closing.load(Ordering::SeqCst) && !shutting_down {
            shutting_down = true;
            served.as_mut().graceful_shutdown();
        }
        let deadline = connection.deadline(&limits);
        let expiry = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = served.as_mut() => return,
            _ = changed => {}
            _ = expiry => {
                if let Some(why) = connection.expired(&limits) {
                    metrics.http_connections_closed.with_label_values(&[why.reason()]).inc();
                    metrics.notify_waiters();
                    // Dropping the connection closes its socket.
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_leaves_room_for_the_store_the_sources_and_the_log() {
        assert_eq!(default_max_connections(20_000), 10_000, "at most 10,000");
        assert_eq!(default_max_connections(8_192), 8_192 - 1_024 - 32);
        assert_eq!(default_max_connections(1_024), 1_024 - 256 - 32);
        assert_eq!(default_max_connections(100), 16, "at least 16");
        assert!(open_file_limit() >= 16);
    }
}
