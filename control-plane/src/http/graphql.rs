//! The GraphQL endpoint: `POST|GET /graphql/query` with a bearer
//! token, `POST /graphql/export` (streamed exports, `super::export`), and the GraphiQL page at `/graphql` (the page needs no token; its queries do).
//!
//! Every request is authenticated first ([`crate::auth::Authenticator`]), before its body is
//! read. The answers, as problem JSON (RFC 9457): missing or invalid token → HTTP 401 with
//! detail "invalid token" and `WWW-Authenticate: Bearer` (which check failed is never said);
//! unusable claims of a valid token → HTTP 403 naming the claim; the issuer's keys cannot be
//! fetched for a key that is not cached → HTTP 503 with `Retry-After`.
//!
//! **Freshness.** While the server catches up after a warm start (kinds whose initial sync is
//! not applied yet) or re-derives kinds after an upgrade, every answer carries
//! `extensions.freshness`: `{"lastChangeAt": <time of the last change the store holds, RFC 3339,
//! or null>, "catchingUp": [kinds], "rederiving": [kinds]}`, and while store writes fail (a full
//! or failing volume) `"storeFault": "<cause, data directory, since when>"`: the answer is what
//! the store held at `lastChangeAt`. A field of a kind being re-derived
//! whose records are not back yet answers code `UNAVAILABLE` with `extensions.kind`; the other
//! kinds answer normally.

use super::executor::{Executor, Lost, Refusal};
use crate::auth::{AuthError, Authenticator};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use async_graphql_poem::{GraphQLRequest, GraphQLResponse};
use poem::http::{Method, StatusCode};
use poem::web::Data;
use poem::{handler, IntoResponse, Request, Response, Route};
use poem::{Body, FromRequest, RequestBody};
use query::{Answer, Api, QueryConfig};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use storage::Store;

/// Shared state of the endpoint.
pub struct GraphqlEndpoint {
    pub(super) api: Arc<Api>,
    /// The WebSocket connections' shared state ([`super::subscriptions`]).
    subscriptions: Arc<super::subscriptions::Hub>,
    pub(super) store: Store,
    pub(super) auth: Authenticator,
    limits: Limits,
    pub(super) metrics: Metrics,
    pub(super) executor: Executor,
    /// Bytes of answers being sent, in KiB permits ([`ANSWERS_IN_FLIGHT`] answers of
    /// `graphql.maxResponseBytes`): an answer holds its share until its last chunk is handed to
    /// the connection, so clients that read slowly cannot make the server hold more than that.
    sending: Arc<tokio::sync::Semaphore>,
    /// The pool's size in KiB permits (an answer takes at most all of it).
    sending_kib: usize,
    /// What `extensions.freshness` reports ([`freshness`]).
    readiness: Readiness,
}

/// How many answers of the largest size (`graphql.maxResponseBytes`) may be in flight to
/// clients at once; a further one waits for room at most [`SEND_WAIT`] (and never past its
/// deadline), then gets HTTP 503 with `Retry-After`.
pub const ANSWERS_IN_FLIGHT: usize = 4;

/// How long a large answer waits for room among the answers in flight: each waiting answer
/// holds its bytes, so many slow readers must not make many answers wait.
pub const SEND_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The chunks an answer is handed to its connection in.
const SEND_CHUNK: usize = 64 << 10;

/// A request body declared longer than `server.maxBodyBytes` but at most this long (bytes) is
/// read and discarded (within `server.bodyTimeout`) before the 413 is sent: a server that closes
/// a connection with unread bytes resets it, and the client may lose the answer while it still
/// writes. A longer one is answered at once.
pub const DRAINED_BODY_BYTES: u64 = 8 << 20;

/// The query settings derived from the configuration.
pub fn query_config(config: &Config) -> QueryConfig {
    QueryConfig {
        limits: config.graphql.limits.clone(),
        now: config.now,
        introspection: config.graphql.introspection_enabled,
        planned_execution: config.graphql.planned_execution,
        file_manager_base_url: config.file_manager.base_url.clone(),
        persisted_queries: config.graphql.persisted_queries,
        secret_resolver: None,
        command_sink: None,
    }
}

/// What the GraphQL layer calls outside the process.
#[derive(Default)]
pub struct Services {
    /// Resolves secret references (`secretManager.url` set).
    pub secrets: Option<Arc<dyn query::secrets::SecretResolver>>,
    /// Writes mutations (`mutations.enabled` on the kube source).
    pub commands: Option<Arc<dyn query::commands::CommandSink>>,
}

/// Routes `/graphql/query` (and `/graphql` when the playground is enabled), and returns the
/// endpoint's state (the exports share it, `super::export`); authenticating
/// requests with `auth`, resolving secret references and writing mutations with `services`;
/// counts them in `metrics` (`controlplane_graphql_*`). Requests in flight stop once
/// `shutdown` is set.
///
/// # Panics
/// Never on input; building the schema fails only on a programming error caught by the SDL test.
pub fn routes(
    store: Store,
    config: &Config,
    services: Services,
    auth: Authenticator,
    metrics: Metrics,
    readiness: Readiness,
    shutdown: Arc<AtomicBool>,
) -> (Route, Arc<GraphqlEndpoint>) {
    let api =
        query::build_schema(QueryConfig { secret_resolver: services.secrets, command_sink: services.commands, ..query_config(config) })
            .expect("invariant: the generated schema is valid (see query/schema.graphql test)");
    let limits = Limits {
        max_body_bytes: config.graphql.max_body_bytes,
        timeout: config.graphql.request_timeout,
        body_timeout: config.server.body_timeout,
    };
    let executor = Executor::new(config.graphql.workers, config.graphql.queue_length, shutdown.clone(), metrics.clone());
    let timeout = config.graphql.request_timeout;
    let stop = shutdown.clone();
    let event_deadline = Arc::new(move || query::deadline::Deadline::new(std::time::Instant::now(), Some(timeout), Some(stop.clone())));
    let subscriptions =
        super::subscriptions::Hub::new(&store, config.subscriptions, config.graphql.max_body_bytes, &metrics, shutdown, event_deadline)
            .expect("the change log's thread starts");
    let api = Arc::new(api);
    let subscriptions = Arc::new(subscriptions);
    let pool_kib = (ANSWERS_IN_FLIGHT * config.graphql.limits.max_response_bytes).div_ceil(1024).min(tokio::sync::Semaphore::MAX_PERMITS);
    let sending = Arc::new(tokio::sync::Semaphore::new(pool_kib));
    let state =
        Arc::new(GraphqlEndpoint { api, subscriptions, store, auth, limits, metrics, executor, sending, sending_kib: pool_kib, readiness });
    let mut route = Route::new().at("/graphql/query", poem::EndpointExt::data(graphql, state.clone()));
    if config.graphql.playground_enabled {
        route = route.at("/graphql", get_only(super::graphiql::page)).at(
            format!("{}/:file", super::graphiql::ASSETS),
            poem::EndpointExt::catch_error(get_only(super::graphiql::asset), |_: poem::error::NotFoundError| async { not_found_problem() }),
        );
    }
    (route, state)
}

/// The served schema in SDL (`control-plane schema print`).
pub fn print_schema() -> String {
    query::build_schema(QueryConfig::default()).expect("invariant: the generated schema is valid").sdl()
}

/// Per-request limits (`graphql.maxBodyBytes`, `graphql.requestTimeout`, `server.bodyTimeout`).
#[derive(Clone, Copy, Debug)]
struct Limits {
    max_body_bytes: usize,
    /// Zero = no limit.
    timeout: std::time::Duration,
    /// Time to read the body once the header is read.
    body_timeout: std::time::Duration,
}

#[handler]
async fn graphql(req: &Request, body: Body, state: Data<&Arc<GraphqlEndpoint>>) -> Response {
    if req.method() != Method::GET && req.method() != Method::POST {
        return method_not_allowed("a GraphQL request is a POST or a GET", "GET, POST");
    }
    if req.method() == Method::GET && super::subscriptions::is_upgrade(req) {
        let s = &*state;
        return super::subscriptions::upgrade(req, s.api.clone(), s.store.clone(), s.auth.clone(), s.subscriptions.clone()).await;
    }
    let t0 = std::time::Instant::now();
    let (code, resp) = answer(req, body, &state, t0).await;
    state.metrics.graphql_answered(code, t0.elapsed().as_secs_f64());
    resp
}

/// The outcome code of an executed request (see [`Metrics::graphql_requests`]).
fn outcome(resp: &async_graphql::Response) -> &'static str {
    let Some(first) = resp.errors.first() else { return "OK" };
    let code = first.extensions.as_ref().and_then(|e| e.get("code")).and_then(|v| match v {
        async_graphql::Value::String(s) => Some(s.as_str()),
        async_graphql::Value::Enum(n) => Some(n.as_str()),
        _ => None,
    });
    match code {
        None => "INVALID_QUERY",
        Some(c) => {
            OUTCOME_CODES.iter().copied().chain(query::limits::LIMITS.iter().map(|l| l.code)).find(|known| *known == c).unwrap_or("OTHER")
        }
    }
}

/// The `extensions.code` values counted under their own name, besides the limits' codes
/// (others count as `OTHER`).
const OUTCOME_CODES: &[&str] = &[
    "BAD_USER_INPUT",
    "NOT_FOUND",
    "FORBIDDEN",
    "INTERNAL",
    "TIMEOUT",
    "UNAVAILABLE",
    "GRAPHQL_VALIDATION_FAILED",
    "TOO_MANY_ERRORS",
    "TOO_MANY_MUTATIONS",
    "MUTATION_OVER_GET",
    "BAD_REQUEST",
    query::persisted::NOT_FOUND,
];

async fn answer(req: &Request, body: Body, state: &Arc<GraphqlEndpoint>, t0: std::time::Instant) -> (&'static str, Response) {
    // Authenticate before reading or parsing anything the caller sent.
    let authorization = req.headers().get("authorization").and_then(|h| h.to_str().ok());
    let viewer = match state.auth.authenticate(authorization).await {
        Ok(v) => v,
        Err(e) => {
            let code = match e {
                AuthError::Missing | AuthError::Invalid => "UNAUTHENTICATED",
                AuthError::Forbidden(_) => "FORBIDDEN",
                AuthError::Unavailable => "UNAVAILABLE",
            };
            let resp = rejection(&e);
            // The body is not read: a client must not send its next request on this connection.
            return (code, if req.method() == Method::POST { closing(resp) } else { resp });
        }
    };
    let request = match read_request(req, body, state).await {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let deadline = state.executor.deadline(t0, state.limits.timeout);
    let (at, cancel) = (deadline.at(), deadline.canceller());
    let run_state = state.clone();
    let over_get = req.method() == Method::GET;
    let prepare = || {
        let prepared = state.api.prepare(&state.store, viewer, request, deadline)?;
        if over_get && prepared.is_mutation() {
            return Err(Box::new(async_graphql::Response::from_errors(vec![query::error::mutation_over_get()])));
        }
        Ok(prepared)
    };
    // The answer is written where it was built: its values are freed by the thread that
    // allocated them (an allocator keeps what other threads free for the owner's next use).
    let run = move |p: query::Prepared| async move { written(run_state.api.answer(p).await, &run_state) };
    let timeout = state.limits.timeout;
    let shutting_down = || state.executor.shutting_down();
    let errors = |e| written(Answer::Response(async_graphql::Response::from_errors(vec![e])), state);
    let lost = |why: Lost| match why {
        Lost::Deadline if shutting_down() => errors(query::error::unavailable()),
        Lost::Deadline => errors(query::error::timeout(timeout)),
        Lost::Panicked => errors(query::error::internal_server_error()),
    };
    let prepare = || prepare().map_err(|refused| Box::new(written(Answer::Response(*refused), state)));
    let (code, body) = match state.executor.execute(at, cancel, prepare, run, lost).await {
        Ok(written) => written,
        Err(Refusal::Deadline) if shutting_down() => errors(query::error::unavailable()),
        Err(Refusal::Deadline) => errors(query::error::timeout(timeout)),
        Err(Refusal::Overloaded) => return ("OVERLOADED", overloaded("too many queries are waiting; retry later")),
    };
    let mut http = Response::builder().content_type("application/json; charset=utf-8").body(body);
    if code == "MUTATION_OVER_GET" {
        http.set_status(StatusCode::NOT_ACCEPTABLE);
    }
    // The memory budget of the queries in flight had no room (`graphql.maxInFlightBytes`).
    if code == "OVERLOADED" {
        retry_later(&mut http);
    }
    match send(http, state, at).await {
        Some(resp) => (code, resp),
        None => ("OVERLOADED", overloaded("too many answers are being sent; retry later")),
    }
}

/// The outcome code of `answer` and its JSON with `extensions.freshness`; counts the answers of
/// plans.
fn written(answer: Answer, state: &GraphqlEndpoint) -> (&'static str, Vec<u8>) {
    let code = match &answer {
        Answer::Response(resp) => outcome(resp),
        Answer::Planned(_) => {
            state.metrics.graphql_planned.inc();
            "OK"
        }
    };
    let answer = match answer {
        // Every root field skipped (`@skip`/`@include`): an empty selection's answer is `{}`.
        Answer::Response(mut resp) if resp.data == async_graphql::Value::Null && resp.errors.is_empty() => {
            resp.data = async_graphql::Value::Object(Default::default());
            Answer::Response(resp)
        }
        answer => answer,
    };
    let extensions = freshness(&state.store, &state.readiness).map(|f| ("freshness".to_string(), f)).into_iter().collect();
    (code, answer.into_json(extensions))
}

/// The GraphQL request of `req`: a POST body (at most `server.maxBodyBytes`, received within
/// `server.bodyTimeout`, one JSON object with a `query` or a persisted query's hash) or a GET
/// query string. A refusal is the outcome code and the answer to send.
pub(super) async fn read_request(
    req: &Request,
    body: Body,
    state: &Arc<GraphqlEndpoint>,
) -> Result<async_graphql::Request, (&'static str, Response)> {
    if req.method() == Method::POST {
        // A declared length over the limit is refused before waiting for the body.
        let declared = req.headers().get(poem::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if let Some(declared) = declared.filter(|n| *n > state.limits.max_body_bytes as u64) {
            if declared <= DRAINED_BODY_BYTES {
                let mut discarded = tokio::io::AsyncReadExt::take(body.into_async_read(), DRAINED_BODY_BYTES);
                let _ = tokio::time::timeout(state.limits.body_timeout, tokio::io::copy(&mut discarded, &mut tokio::io::sink())).await;
            }
            let detail = format!("the request body exceeds {} bytes", state.limits.max_body_bytes);
            return Err(("PAYLOAD_TOO_LARGE", closing(problem(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large", &detail))));
        }
        let read = tokio::time::timeout(state.limits.body_timeout, body.into_bytes_limit(state.limits.max_body_bytes));
        let bytes = match read.await {
            Ok(Ok(b)) => b,
            Err(_) => {
                let detail = format!("the request body was not received within {:?} (server.bodyTimeout)", state.limits.body_timeout);
                let resp = problem(StatusCode::REQUEST_TIMEOUT, "Request Timeout", &detail);
                return Err(("REQUEST_TIMEOUT", closing(resp)));
            }
            Ok(Err(poem::error::ReadBodyError::PayloadTooLarge)) => {
                let detail = format!("the request body exceeds {} bytes", state.limits.max_body_bytes);
                let resp = problem(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large", &detail);
                return Err(("PAYLOAD_TOO_LARGE", closing(resp)));
            }
            // A malformed chunked encoding, a connection cut mid-body.
            Ok(Err(e)) => {
                let detail = format!("the request body could not be read: {e}");
                return Err(("BAD_REQUEST", closing(problem(StatusCode::BAD_REQUEST, "Bad Request", &detail))));
            }
        };
        // One JSON object: serde would also read a struct from an array, positionally.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            let detail = "the body is not a GraphQL request (a JSON object with a `query`)";
            return Err(("BAD_REQUEST", problem(StatusCode::BAD_REQUEST, "Bad Request", detail)));
        }
        match serde_json::from_slice::<async_graphql::Request>(&bytes) {
            // Neither a query nor a persisted query's hash (`{}`): nothing to execute.
            Ok(r) if r.query.trim().is_empty() && !r.extensions.contains_key("persistedQuery") => {
                let detail = "the request has no `query` (and no `extensions.persistedQuery`)";
                Err(("BAD_REQUEST", problem(StatusCode::BAD_REQUEST, "Bad Request", detail)))
            }
            Ok(r) => Ok(r),
            // Variables nested beyond what the JSON reader follows (128 levels).
            Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
                let error = query::limits::LimitError::input_depth(state.api.limits().max_input_depth).into_server_error();
                let resp = async_graphql::Response::from_errors(vec![error]);
                Err(("INPUT_TOO_DEEP", GraphQLResponse::from(resp).into_response()))
            }
            Err(e) => {
                // serde's message (what was wrong, where), cut short.
                let detail = format!("the body is not a valid GraphQL request: {}", e.to_string().chars().take(200).collect::<String>());
                Err(("BAD_REQUEST", problem(StatusCode::BAD_REQUEST, "Bad Request", &detail)))
            }
        }
    } else {
        match GraphQLRequest::from_request(req, &mut RequestBody::new(Body::empty())).await {
            Ok(r) if r.0.query.trim().is_empty() && !r.0.extensions.contains_key("persistedQuery") => {
                let detail = "the query string has no `query` (and no `extensions` with a `persistedQuery`)";
                Err(("BAD_REQUEST", problem(StatusCode::BAD_REQUEST, "Bad Request", detail)))
            }
            Ok(r) => Ok(with_operation_name(r.0, req.uri().query())),
            Err(_) => Err(("BAD_REQUEST", problem(StatusCode::BAD_REQUEST, "Bad Request", "the query string is not a GraphQL request"))),
        }
    }
}

/// `extensions.freshness` (see the module docs) while kinds catch up or are re-derived; `None`
/// otherwise.
fn freshness(store: &Store, readiness: &Readiness) -> Option<async_graphql::Value> {
    let catching_up = readiness.catching_up();
    let rederiving: Vec<&str> = store.rederivations().iter().map(|k| k.name()).collect();
    let store_fault = readiness.store_fault();
    if catching_up.is_empty() && rederiving.is_empty() && store_fault.is_none() {
        return None;
    }
    let last_change = store.read().and_then(|v| v.last_commit()).ok().flatten().map(|t| t.to_rfc3339());
    let mut value = serde_json::json!({"lastChangeAt": last_change, "catchingUp": catching_up, "rederiving": rederiving});
    if let Some(fault) = store_fault {
        value["storeFault"] = fault.into();
    }
    async_graphql::Value::from_json(value).ok()
}

/// `request` with the `operationName` of the query string `query`: GraphQL over HTTP (and
/// Apollo's clients) name it so; async-graphql's GET reader knows only `operation_name`.
fn with_operation_name(mut request: async_graphql::Request, query: Option<&str>) -> async_graphql::Request {
    if request.operation_name.is_none() {
        let url = query.and_then(|q| reqwest::Url::parse(&format!("http://query/?{q}")).ok());
        request.operation_name = url.and_then(|u| u.query_pairs().find(|(k, _)| k == "operationName").map(|(_, v)| v.into_owned()));
    }
    request
}

/// HTTP 503 with `Retry-After: 1`, code `OVERLOADED` (as it is counted): no room for the
/// request now.
pub(crate) fn overloaded(detail: &str) -> Response {
    let mut resp = problem_with_code(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable", detail, "OVERLOADED");
    retry_later(&mut resp);
    resp
}

/// HTTP 503 with `Retry-After: 1`: the server had no room for the request now.
fn retry_later(resp: &mut Response) {
    resp.set_status(StatusCode::SERVICE_UNAVAILABLE);
    resp.headers_mut().insert("retry-after", poem::http::HeaderValue::from_static("1"));
}

/// The answer with its body handed out in chunks while it holds its share of
/// [`GraphqlEndpoint::sending`] (answers of one chunk or less go as they are: the connection's buffers
/// take them); `None` when no room frees up before `deadline`.
async fn send(resp: Response, state: &GraphqlEndpoint, deadline: Option<std::time::Instant>) -> Option<Response> {
    let (mut parts, body) = resp.into_parts();
    // A JSON answer is one buffer: reading it does not wait.
    let bytes = body.into_bytes().await.unwrap_or_default();
    if bytes.len() <= SEND_CHUNK {
        return Some(Response::from_parts(parts, Body::from_bytes(bytes)));
    }
    parts.headers.insert(poem::http::header::CONTENT_LENGTH, bytes.len().into());
    // The values built for a large answer are freed: hand their pages back, so the resident
    // size is what is in flight.
    if bytes.len() > 16 * SEND_CHUNK {
        crate::release_free_memory();
    }
    // An answer larger than the whole pool waits for all of it.
    let kib = u32::try_from(bytes.len().div_ceil(1024).min(state.sending_kib)).unwrap_or(u32::MAX);
    let acquire = state.sending.clone().acquire_many_owned(kib);
    // A short wait, whatever the deadline: every waiting answer holds its bytes.
    let wait_until = std::time::Instant::now() + SEND_WAIT;
    let at = deadline.map_or(wait_until, |d| d.min(wait_until));
    let permit = tokio::time::timeout_at(at.into(), acquire).await.ok()?.ok()?;
    let chunks = futures::stream::unfold((bytes, 0usize, Some(permit)), |(bytes, at, permit)| async move {
        // The permit is released with the stream: after the last chunk, or when the
        // connection goes away.
        (at < bytes.len()).then(|| {
            let end = (at + SEND_CHUNK).min(bytes.len());
            (Ok::<_, std::io::Error>(bytes.slice(at..end)), (bytes, end, permit))
        })
    });
    Some(Response::from_parts(parts, Body::from_bytes_stream(chunks)))
}

pub(crate) fn problem(status: StatusCode, title: &str, detail: &str) -> Response {
    problem_with_code(status, title, detail, refusal_code(status))
}

/// `endpoint` for GET (and HEAD, which poem answers for a GET route); another method gets the
/// 405 problem every refusal is ([`method_not_allowed`]), not poem's plain text.
pub(crate) fn get_only(endpoint: impl poem::Endpoint + 'static) -> impl poem::Endpoint {
    poem::EndpointExt::catch_error(poem::get(endpoint), |_: poem::error::MethodNotAllowedError| async {
        method_not_allowed("this endpoint answers GET and HEAD only", "GET, HEAD")
    })
}

/// HTTP 404 problem (`NOT_FOUND`) for a path no route serves, whatever the method: the problem
/// every other refusal is, not poem's empty plain-text answer. Its body is not read.
#[poem::handler]
pub(crate) fn not_found() -> Response {
    not_found_problem()
}

/// The answer of [`not_found`]. The path is not echoed: it is the client's own input.
pub(crate) fn not_found_problem() -> Response {
    closing(problem(StatusCode::NOT_FOUND, "Not Found", "nothing is served at this path; the GraphQL API is at /graphql/query"))
}

/// HTTP 405 saying `detail`, with `Allow: allow`, closing the connection (its body is not read).
pub(crate) fn method_not_allowed(detail: &str, allow: &'static str) -> Response {
    let mut resp = problem(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed", detail);
    resp.headers_mut().insert(poem::http::header::ALLOW, poem::http::HeaderValue::from_static(allow));
    closing(resp)
}

/// [`problem`] with the `extensions.code` `code` instead of the status's.
pub(crate) fn problem_with_code(status: StatusCode, title: &str, detail: &str, code: &str) -> Response {
    let body = serde_json::json!({
        "type": title.replace(' ', ""),
        "status": status.as_u16(),
        "title": title,
        "detail": detail,
        "instance": "",
        // What a GraphQL client reads: the same refusal as a GraphQL error with its code.
        "errors": [{"message": detail, "extensions": {"code": code}}],
    });
    Response::builder().status(status).content_type("application/problem+json").body(body.to_string())
}

/// The `extensions.code` of a refusal at the HTTP level, by its status.
pub(crate) fn refusal_code(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED => "UNAUTHENTICATED",
        StatusCode::FORBIDDEN => "FORBIDDEN",
        StatusCode::NOT_FOUND => "NOT_FOUND",
        StatusCode::METHOD_NOT_ALLOWED => "METHOD_NOT_ALLOWED",
        StatusCode::REQUEST_TIMEOUT => "REQUEST_TIMEOUT",
        StatusCode::PAYLOAD_TOO_LARGE => "PAYLOAD_TOO_LARGE",
        StatusCode::URI_TOO_LONG => "URI_TOO_LONG",
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "HEADERS_TOO_LARGE",
        StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
        StatusCode::TOO_MANY_REQUESTS => "TOO_MANY_EXPORTS",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "UNSUPPORTED_MEDIA_TYPE",
        StatusCode::INTERNAL_SERVER_ERROR => "INTERNAL",
        _ => "BAD_REQUEST",
    }
}

/// `resp` with `Connection: close`, for an answer sent before the request body was read to its
/// end: the server closes the connection after it (what is left of the body cannot be told apart
/// from a next request), and the header tells keep-alive clients and proxies not to reuse it.
pub(super) fn closing(mut resp: Response) -> Response {
    resp.headers_mut().insert(poem::http::header::CONNECTION, poem::http::HeaderValue::from_static("close"));
    resp
}

/// The HTTP answer to a request that is not authenticated.
pub(crate) fn rejection(e: &AuthError) -> Response {
    match e {
        AuthError::Missing | AuthError::Invalid => {
            let challenge = if *e == AuthError::Missing { "Bearer" } else { r#"Bearer error="invalid_token""# };
            let mut resp = problem(StatusCode::UNAUTHORIZED, "Unauthorized", "invalid token");
            resp.headers_mut().insert("www-authenticate", poem::http::HeaderValue::from_static(challenge));
            resp
        }
        AuthError::Forbidden(claims) => problem(StatusCode::FORBIDDEN, "Forbidden", &claims.to_string()),
        AuthError::Unavailable => {
            let mut resp = problem(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable", "token keys are unavailable; retry later");
            resp.headers_mut().insert("retry-after", poem::http::HeaderValue::from_static("10"));
            resp
        }
    }
}
