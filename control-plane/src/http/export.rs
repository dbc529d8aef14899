//! `POST /graphql/export?format=ndjson|csv`: one query's root connection or list, streamed
//! as rows from one read view ([`query::export`] says what is exported and how rows look).
//!
//! The format is the `format` parameter, else the `Accept` header (`application/x-ndjson`,
//! `text/csv`), else NDJSON. The request is authenticated and read as a GraphQL request to
//! `/graphql/query` is ([`super::graphql`]); then:
//!
//! - **Before any row**, a request that cannot be exported is answered as a GraphQL error with
//!   its code (HTTP 400; 500 `INTERNAL`, 503 `UNAVAILABLE`/`TIMEOUT`): `NOT_EXPORTABLE`, a
//!   limit's code, a validation error, or the first page's field error.
//! - **Rows** follow with HTTP 200, `X-Store-Revision` (the one revision every row is read at)
//!   and, with a search, `X-Search-Revision` (the revision the search index held when the
//!   export started; its hits are the index's as of its last commit at each page).
//! - **Bounds**: `export.maxConcurrent` exports at once and one per client (token `clientId`),
//!   else HTTP 429 with code `TOO_MANY_EXPORTS` and `Retry-After`; `export.maxRows` rows, then
//!   the error line `EXPORT_TOO_LARGE`; `export.timeout` from the request (in place of
//!   `graphql.requestTimeout`), then the error line `TIMEOUT`, and a connection whose client
//!   has not taken the rows by then plus [`CUT_GRACE`] is closed
//!   ([`super::server::AnswerDeadline`]). Rows are produced on a thread of their own into
//!   [`CHUNKS_IN_FLIGHT`] chunks of about [`CHUNK_BYTES`]: a client that reads slowly holds the
//!   export there (back-pressure), not more memory.
//! - Each export ends with one audit line (target `audit`: viewer, field, format, rows, bytes,
//!   outcome, revision, milliseconds) and counts in `controlplane_exports_*`.

use super::graphql::{problem, GraphqlEndpoint};
use bytes::Bytes;
use poem::http::StatusCode;
use poem::{Body, Request, Response};
use query::export::{Export, Format, PageRows};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Chunks of rows waiting for the client at most.
pub const CHUNKS_IN_FLIGHT: usize = 4;

/// Rows are handed to the connection in chunks of about this many bytes.
pub const CHUNK_BYTES: usize = 64 << 10;

/// How long after its `export.timeout` a connection whose client has not taken the export's
/// rows is closed.
pub const CUT_GRACE: Duration = Duration::from_secs(5);

/// The exports running, overall and per client.
#[derive(Default)]
pub struct Exports {
    running: Mutex<std::collections::HashMap<String, usize>>,
}

/// One running export's place in [`Exports`], given back when dropped.
pub struct Slot {
    exports: Arc<Exports>,
    client: String,
    metrics: crate::metrics::Metrics,
}

impl Exports {
    /// A place for an export of `client`, `None` when `max` exports run or one of `client` does.
    fn start(self: &Arc<Exports>, client: &str, max: usize, metrics: &crate::metrics::Metrics) -> Option<Slot> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if running.values().sum::<usize>() >= max || running.contains_key(client) {
            return None;
        }
        running.insert(client.to_string(), 1);
        metrics.export.running.inc();
        metrics.notify_waiters();
        Some(Slot { exports: self.clone(), client: client.to_string(), metrics: metrics.clone() })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.exports.running.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.client);
        self.metrics.export.running.dec();
        self.metrics.notify_waiters();
    }
}

/// The export endpoint's state: the GraphQL endpoint's, the exports running and `export.*`.
pub struct ExportEndpoint {
    graphql: Arc<GraphqlEndpoint>,
    exports: Arc<Exports>,
    settings: crate::config::ExportConfig,
}

/// Routes `POST /graphql/export` on `route`, sharing the GraphQL endpoint's state (`graphql`).
pub(super) fn mount(route: poem::Route, graphql: Arc<GraphqlEndpoint>, settings: crate::config::ExportConfig) -> poem::Route {
    let state = Arc::new(ExportEndpoint { graphql, exports: Arc::default(), settings });
    route.at("/graphql/export", poem::EndpointExt::data(handle, state))
}

#[poem::handler]
async fn handle(req: &Request, body: Body, state: poem::web::Data<&Arc<ExportEndpoint>>) -> Response {
    if req.method() != poem::http::Method::POST {
        return super::graphql::method_not_allowed("an export is a POST of a GraphQL request", "POST");
    }
    answer(req, body, &state).await
}

/// The format a request asks for; `Err` names what is wrong.
fn format_of(req: &Request) -> Result<Format, String> {
    // Names and values percent-decoded (`form%61t=csv` is `format=csv`).
    let query = req.uri().query().unwrap_or("");
    let mut asked = form_urlencoded::parse(query.as_bytes()).filter(|(name, _)| name == "format").map(|(_, value)| value);
    if let Some(name) = asked.next() {
        if asked.next().is_some() {
            return Err("`format` is given more than once".into());
        }
        return Format::from_name(&name)
            .ok_or_else(|| format!("unknown format {:?}: use ndjson or csv", name.chars().take(32).collect::<String>()));
    }
    let accept = req.headers().get("accept").and_then(|h| h.to_str().ok()).unwrap_or("");
    Ok(if accept.contains("text/csv") && !accept.contains("application/x-ndjson") { Format::Csv } else { Format::Ndjson })
}

/// Answers one export request (see the module docs).
async fn answer(req: &Request, body: Body, endpoint: &Arc<ExportEndpoint>) -> Response {
    let state = &endpoint.graphql;
    let t0 = Instant::now();
    let format = match format_of(req) {
        Ok(f) => f,
        Err(why) => return problem(StatusCode::BAD_REQUEST, "Bad Request", &why),
    };
    let authorization = req.headers().get("authorization").and_then(|h| h.to_str().ok());
    let viewer = match state.auth.authenticate(authorization).await {
        Ok(v) => v,
        Err(e) => return super::graphql::closing(super::graphql::rejection(&e)),
    };
    let Some(slot) = endpoint.exports.start(&viewer.client_id, endpoint.settings.max_concurrent, &state.metrics) else {
        state.metrics.export.ended.with_label_values(&[format.name(), "TOO_MANY_EXPORTS"]).inc();
        state.metrics.notify_waiters();
        let detail = format!(
            "at most {} exports run at once, and one per client (export.maxConcurrent); retry when one ended",
            endpoint.settings.max_concurrent
        );
        let mut resp = super::graphql::closing(problem(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests", &detail));
        resp.headers_mut().insert("retry-after", poem::http::HeaderValue::from_static("5"));
        return resp;
    };
    let request = match super::graphql::read_request(req, body, state).await {
        Ok(request) => request,
        Err((code, mut refused)) => {
            // A GraphQL answer (variables nested too deep) is a refusal here, like the others.
            if refused.status() == StatusCode::OK {
                refused.set_status(StatusCode::BAD_REQUEST);
            }
            state.metrics.export.ended.with_label_values(&[format.name(), code]).inc();
            return refused;
        }
    };
    let deadline = state.executor.deadline(t0, endpoint.settings.timeout);
    let cancel = deadline.canceller();
    // A client that leaves before the first page is answered cancels the export (the body
    // takes this over once it exists).
    let leaving = CancelOnDrop(Some(cancel.clone()));
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let (rows_tx, rows_rx) = tokio::sync::mpsc::channel::<Bytes>(CHUNKS_IN_FLIGHT);
    let last_line = Arc::new(OnceLock::new());
    // Held by the producer and by the body: an export runs until its last row was taken.
    let slot = Arc::new(slot);
    let producer = Producer {
        slot: slot.clone(),
        api: state.api.clone(),
        store: state.store.clone(),
        metrics: state.metrics.clone(),
        max_rows: endpoint.settings.max_rows,
        handle: tokio::runtime::Handle::current(),
        rows: rows_tx,
        last_line: last_line.clone(),
        client: viewer.client_id.clone(),
        t0,
        format,
        at_line_start: std::cell::Cell::new(true),
    };
    let producing = tokio::task::spawn_blocking(move || producer.run(viewer, request, deadline, started_tx));
    let started = match started_rx.await {
        Ok(Ok(started)) => started,
        Ok(Err(answer)) => {
            // The producer ends at once and frees the slot: the client's next export must find
            // it free when the refusal arrives.
            let _ = producing.await;
            return refused_answer(*answer);
        }
        // The producer panicked (a bug; the runtime logged it).
        Err(_) => return refused_answer(async_graphql::Response::from_errors(vec![query::error::internal_server_error()])),
    };
    leaving.disarm();
    streamed(started, format, rows_rx, last_line, cancel, t0 + endpoint.settings.timeout + CUT_GRACE, slot)
}

/// Sets the export's cancel flag when dropped, unless disarmed.
struct CancelOnDrop(Option<Arc<std::sync::atomic::AtomicBool>>);

impl CancelOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancel) = &self.0 {
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// What the producer tells the handler once the first page is read.
struct Started {
    field: String,
    revision: u64,
    search_revision: Option<u64>,
}

/// The answer to an export refused before any row: the GraphQL errors, with an HTTP status by
/// the first error's code.
fn refused_answer(mut answer: async_graphql::Response) -> Response {
    let (code, _) = query::export::first_error(&answer);
    // No rows: what a page resolved before its error is not part of the answer.
    answer.data = async_graphql::Value::Null;
    let status = match code.as_str() {
        "INTERNAL" => StatusCode::INTERNAL_SERVER_ERROR,
        "UNAVAILABLE" | "TIMEOUT" => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_REQUEST,
    };
    let body = serde_json::to_string(&answer).unwrap_or_else(|_| "{}".into());
    Response::builder().status(status).content_type("application/json").body(body)
}

/// The streamed answer: the producer's chunks as they come, then its last line (an error) if
/// it left one. The export is cancelled when the body is dropped (the client went away).
fn streamed(
    started: Started,
    format: Format,
    rows: tokio::sync::mpsc::Receiver<Bytes>,
    last_line: Arc<OnceLock<Bytes>>,
    cancel: Arc<std::sync::atomic::AtomicBool>,
    cut_at: Instant,
    slot: Arc<Slot>,
) -> Response {
    struct Stream {
        rows: tokio::sync::mpsc::Receiver<Bytes>,
        last_line: Arc<OnceLock<Bytes>>,
        cancel: Arc<std::sync::atomic::AtomicBool>,
        ended: bool,
        _slot: Arc<Slot>,
    }
    impl Drop for Stream {
        fn drop(&mut self) {
            self.cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let stream = Stream { rows, last_line, cancel, ended: false, _slot: slot };
    let chunks = futures::stream::unfold(stream, |mut s| async move {
        if s.ended {
            return None;
        }
        match s.rows.recv().await {
            Some(chunk) => Some((Ok::<_, std::io::Error>(chunk), s)),
            None => {
                s.ended = true;
                let last = s.last_line.get().cloned()?;
                Some((Ok(last), s))
            }
        }
    });
    let mut resp = Response::builder()
        .status(StatusCode::OK)
        .content_type(format.content_type())
        .header("x-store-revision", started.revision)
        .header("cache-control", "no-store")
        .header("content-disposition", format!("attachment; filename=\"{}.{}\"", started.field, format.name()))
        .body(Body::from_bytes_stream(chunks));
    if let Some(search) = started.search_revision {
        resp.headers_mut().insert("x-search-revision", search.into());
    }
    resp.extensions_mut().insert(super::server::AnswerDeadline(cut_at));
    resp
}

/// Produces one export's rows on a blocking thread.
struct Producer {
    /// Held until the export ends (and by its body until the client took it). Declared first:
    /// fields drop in order, so the place is given back before `rows` closes and the client can
    /// see the end of the body.
    slot: Arc<Slot>,
    api: Arc<query::Api>,
    store: storage::Store,
    metrics: crate::metrics::Metrics,
    max_rows: usize,
    handle: tokio::runtime::Handle,
    rows: tokio::sync::mpsc::Sender<Bytes>,
    last_line: Arc<OnceLock<Bytes>>,
    client: String,
    t0: Instant,
    format: Format,
    /// The last chunk handed to the client ended a line (or none was).
    at_line_start: std::cell::Cell<bool>,
}

/// How an export ended: `OK` or a code, with the error line's message.
type Outcome = Result<(), (String, String)>;

impl Producer {
    fn run(
        self,
        viewer: query::viewer::Viewer,
        request: async_graphql::Request,
        deadline: query::deadline::Deadline,
        started: tokio::sync::oneshot::Sender<Result<Started, Box<async_graphql::Response>>>,
    ) {
        let left = deadline.canceller();
        let mut export = match self.api.prepare_export(&self.store, viewer, request, deadline, self.format) {
            Ok(e) => e,
            Err(refused) => return self.refused(started, refused, "-", &left),
        };
        let mut out = export.preamble();
        let first = match self.handle.block_on(self.api.export_page(&mut export, &mut out, self.max_rows)) {
            Ok(page) => page,
            Err(refused) => return self.refused(started, refused, export.field(), &left),
        };
        let _ = started.send(Ok(Started {
            field: export.field().to_string(),
            revision: export.revision(),
            search_revision: export.search_revision(),
        }));
        let (mut rows, mut bytes) = (0usize, 0usize);
        let outcome = self.stream(&mut export, out, first, &mut rows, &mut bytes);
        if let Err((code, message)) = &outcome {
            // After a row cut short (one longer than a chunk), the error line starts a new line.
            let mut line = if self.at_line_start.get() { Vec::new() } else { self.format.line_break().to_vec() };
            line.extend(self.format.error_line(code, message));
            let _ = self.last_line.set(Bytes::from(line));
        }
        self.ended(&export, rows, bytes, outcome);
    }

    /// Sends `out` (the rows of the first page, `first`) and the rows of every later page, in
    /// chunks.
    fn stream(&self, export: &mut Export, mut out: Vec<u8>, first: Option<PageRows>, rows: &mut usize, bytes: &mut usize) -> Outcome {
        let mut page = first;
        loop {
            let Some(written) = page else { return self.send(export, &mut out, bytes, true) };
            *rows += written.rows;
            if written.over {
                self.send(export, &mut out, bytes, true)?;
                return Err(("EXPORT_TOO_LARGE".into(), query::error::export_too_large(self.max_rows).message));
            }
            self.send(export, &mut out, bytes, false)?;
            page = match self.handle.block_on(self.api.export_page(export, &mut out, self.max_rows - *rows)) {
                Ok(next) => next,
                Err(answer) => {
                    self.send(export, &mut out, bytes, true)?;
                    return Err(query::export::first_error(&answer));
                }
            };
        }
    }

    /// Hands `out` to the client (all of it when `all`, else whole chunks), waiting for room
    /// until the export's deadline.
    fn send(&self, export: &Export, out: &mut Vec<u8>, bytes: &mut usize, all: bool) -> Outcome {
        let mut at = 0;
        let outcome = loop {
            let left = &out[at..];
            if left.is_empty() || (left.len() < CHUNK_BYTES && !all) {
                break Ok(());
            }
            // Chunks end with a whole row when one fits: an export cut short (its deadline)
            // ends after a whole row, and its error line starts a line of its own.
            let cut = if all && left.len() <= CHUNK_BYTES {
                left.len()
            } else {
                left[..CHUNK_BYTES].iter().rposition(|b| *b == b'\n').map_or(CHUNK_BYTES, |i| i + 1)
            };
            let chunk = Bytes::copy_from_slice(&left[..cut]);
            at += cut;
            self.at_line_start.set(chunk.last() == Some(&b'\n'));
            let wait = self.rows.send(chunk);
            let sent = match export.deadline().at() {
                Some(at) => self.handle.block_on(tokio::time::timeout_at(at.into(), wait)),
                None => Ok(self.handle.block_on(wait)),
            };
            match sent {
                Ok(Ok(())) => *bytes += cut,
                Ok(Err(_)) => break Err(("CLIENT_GONE".into(), "the client went away".into())),
                Err(_) => {
                    break Err(query::export::first_error(&async_graphql::Response::from_errors(vec![export.deadline().server_error()])))
                }
            }
        };
        // What was sent leaves the buffer at once (each byte is copied once).
        out.drain(..at);
        outcome
    }

    fn refused(
        self,
        started: tokio::sync::oneshot::Sender<Result<Started, Box<async_graphql::Response>>>,
        answer: Box<async_graphql::Response>,
        field: &str,
        left: &std::sync::atomic::AtomicBool,
    ) {
        // A client that left before the first row stopped the export: not a timeout.
        let code =
            if left.load(std::sync::atomic::Ordering::Relaxed) { "CLIENT_GONE".to_string() } else { query::export::first_error(&answer).0 };
        self.audit(field, 0, 0, &code, None);
        let _ = started.send(Err(answer));
    }

    fn ended(&self, export: &Export, rows: usize, bytes: usize, outcome: Outcome) {
        let code = match &outcome {
            Ok(()) => "OK".to_string(),
            Err((code, _)) => code.clone(),
        };
        let format = self.format.name();
        self.metrics.export.rows.with_label_values(&[format]).inc_by(rows as u64);
        self.metrics.export.bytes.with_label_values(&[format]).inc_by(bytes as u64);
        self.audit(export.field(), rows, bytes, &code, Some(export.revision()));
    }

    fn audit(&self, field: &str, rows: usize, bytes: usize, outcome: &str, revision: Option<u64>) {
        let format = self.format.name();
        let label = if outcome == "OK" || query::limits::LIMITS.iter().any(|l| l.code == outcome) || KNOWN_OUTCOMES.contains(&outcome) {
            outcome
        } else {
            "OTHER"
        };
        self.metrics.export.ended.with_label_values(&[format, label]).inc();
        self.metrics.notify_waiters();
        let ms = self.t0.elapsed().as_millis() as u64;
        let _ = &self.slot;
        tracing::info!(target: "audit", viewer = %self.client, field, format, rows, bytes, outcome, revision, ms, "export");
    }
}

/// The outcome codes counted under their own name in `controlplane_exports_total` (besides `OK`
/// and the limits' codes; others count as `OTHER`).
const KNOWN_OUTCOMES: &[&str] = &[
    "NOT_EXPORTABLE",
    "EXPORT_TOO_LARGE",
    "TIMEOUT",
    "CLIENT_GONE",
    "UNAVAILABLE",
    "INTERNAL",
    "BAD_USER_INPUT",
    "FORBIDDEN",
    "NOT_FOUND",
    "GRAPHQL_VALIDATION_FAILED",
    query::persisted::NOT_FOUND,
];
