//! The admin API (`/admin/v1/...`, admin token required), built with poem-openapi and
//! documented by the OpenAPI 3 document it generates, served at `/admin/v1/openapi.json`:
//!
//! - `GET /admin/v1/snapshot` streams a snapshot ([`storage::snapshot`]) read from ONE read
//!   transaction while the projector keeps writing: records are read, framed and compressed as
//!   the client downloads them (memory stays bounded), and a client that goes away ends the
//!   export.
//! - `GET /admin/v1/status`: revision, last commit time, per-kind record counts and sync state,
//!   readiness.
//!
//! Every call but the document needs an admin token (viewer kind `admin`, access `all`), checked
//! before anything else: no or an invalid token → 401, another token → 403, both as problem JSON
//! like the GraphQL endpoint.

use crate::auth::{AuthError, Authenticator};
use crate::http::graphql::rejection;
use crate::readiness::{Readiness, ReadyStatus, SyncState};
use poem::http::StatusCode;
use poem::web::Data;
use poem::{Body, EndpointExt, IntoEndpoint, Request, Route};
use poem_openapi::auth::Bearer;
use poem_openapi::payload::{Binary, Json};
use poem_openapi::{ApiResponse, Enum, Object, OpenApi, OpenApiService, SecurityScheme};
use query::viewer::{Access, Viewer};
use schema::Timestamp;
use std::sync::Arc;
use storage::Store;

/// What the admin API reads.
pub struct AdminEndpoint {
    store: Store,
    auth: Authenticator,
    readiness: Readiness,
}

impl AdminEndpoint {
    /// The admin API over `store`, with the sync state of each kind from `readiness` (a kind it
    /// does not track is switched off).
    pub fn new(store: Store, auth: Authenticator, readiness: Readiness) -> AdminEndpoint {
        AdminEndpoint { store, auth, readiness }
    }
}

/// Adds the admin routes and the OpenAPI document to `route`.
pub fn mount(route: Route, state: AdminEndpoint) -> Route {
    let service = OpenApiService::new(AdminApi, "ControlPlane read model admin API", "1")
        .description("Backups and status of the embedded read model. Every operation needs an admin token with access `all`.")
        .server("/admin/v1");
    let spec = service.spec_endpoint();
    let api = service
        .data(Arc::new(state))
        // A missing or non-bearer Authorization header is rejected by poem-openapi before the
        // checker runs: answer it like every other 401.
        .catch_error(|_: poem_openapi::error::AuthorizationError| async { rejection(&AuthError::Missing) });
    let admin = Route::new().at("/openapi.json", super::graphql::get_only(spec)).nest("/", api.into_endpoint());
    // Every operation is a GET: another method gets a problem like every other refusal.
    route.nest(
        "/admin/v1",
        admin
            .catch_error(|_: poem::error::MethodNotAllowedError| async {
                super::graphql::method_not_allowed("the admin API answers GET only", "GET")
            })
            .catch_error(|_: poem::error::NotFoundError| async { super::graphql::not_found_problem() }),
    )
}

/// The admin bearer token (a JWT, or a mock token in `mock` mode).
#[derive(SecurityScheme)]
#[oai(ty = "bearer", bearer_format = "JWT", checker = "admin_only")]
struct AdminToken(Viewer);

impl AdminToken {
    /// Whether the token is an admin's with access `all`, the only one the admin API accepts.
    fn allowed(&self) -> bool {
        self.0.is_admin() && self.0.access == Access::All
    }
}

/// Authenticates with the server's [`Authenticator`]; a missing or invalid token is refused
/// with the problem JSON of [`rejection`] (401, or 503 when keys are unavailable).
async fn admin_only(req: &Request, bearer: Bearer) -> poem::Result<Viewer> {
    let state = req.data::<Arc<AdminEndpoint>>().ok_or_else(|| poem::Error::from_status(StatusCode::INTERNAL_SERVER_ERROR))?;
    let header = format!("Bearer {}", bearer.token);
    state.auth.authenticate(Some(&header)).await.map_err(|e| poem::Error::from_response(rejection(&e)))
}

fn forbidden() -> Json<Problem> {
    Problem::of(StatusCode::FORBIDDEN, "the admin API needs an admin token with access `all`".into())
}

/// A problem detail (RFC 9457), as every error of this server.
#[derive(Object)]
struct Problem {
    /// Short type name, e.g. `Unauthorized`.
    #[oai(rename = "type")]
    ty: String,
    /// HTTP status code.
    status: u16,
    /// Title, e.g. `Forbidden`.
    title: String,
    /// What went wrong.
    detail: String,
    /// Always empty (kept for the same shape as every other error of this server).
    instance: String,
    /// The same refusal as one GraphQL error, for clients that read those: `detail` as its
    /// `message`, and `extensions.code` (`FORBIDDEN`, `INTERNAL`, `UNAVAILABLE`).
    errors: Vec<ProblemError>,
}

/// The GraphQL error of a [`Problem`].
#[derive(Object)]
struct ProblemError {
    /// The problem's `detail`.
    message: String,
    /// Its `code`.
    extensions: ProblemCode,
}

/// The `extensions` of a [`ProblemError`].
#[derive(Object)]
struct ProblemCode {
    /// The refusal's code, as the GraphQL endpoint's refusals at the HTTP level name it.
    code: String,
}

impl Problem {
    /// The problem of `status` saying `detail`.
    fn of(status: StatusCode, detail: String) -> Json<Problem> {
        let title = status.canonical_reason().unwrap_or_default();
        let code = super::graphql::refusal_code(status).to_string();
        Json(Problem {
            ty: title.replace(' ', ""),
            status: status.as_u16(),
            title: title.into(),
            errors: vec![ProblemError { message: detail.clone(), extensions: ProblemCode { code } }],
            detail,
            instance: String::new(),
        })
    }
}

#[derive(ApiResponse)]
enum SnapshotResponse {
    /// The snapshot file (the format of `storage::snapshot::FORMAT_VERSION`, documented in `storage/src/snapshot.rs`),
    /// streamed. `x-snapshot-revision` is the store revision it reflects.
    #[oai(status = 200, content_type = "application/octet-stream")]
    Ok(Binary<Body>, #[oai(header = "x-snapshot-revision")] u64, #[oai(header = "content-disposition")] String),
    /// No token or an invalid one (answered by the token check before the operation runs;
    /// listed for the document).
    #[oai(status = 401, content_type = "application/problem+json")]
    #[allow(dead_code)]
    Unauthorized(Json<Problem>),
    /// Not an admin token with access `all`.
    #[oai(status = 403, content_type = "application/problem+json")]
    Forbidden(Json<Problem>),
    /// The store could not be read.
    #[oai(status = 500, content_type = "application/problem+json")]
    Internal(Json<Problem>),
    /// The token issuer's keys cannot be fetched (jwt mode); retry after `Retry-After` seconds
    /// (answered by the token check; listed for the document).
    #[oai(status = 503, content_type = "application/problem+json")]
    #[allow(dead_code)]
    Unavailable(Json<Problem>),
}

/// The sync state of a kind.
#[derive(Enum, Clone, Copy)]
#[oai(rename_all = "camelCase")]
enum KindSyncState {
    /// Switched off by a feature flag.
    Disabled,
    /// Initial sync running; not served before it ends (a cold start).
    Syncing,
    /// Served from the store while the initial sync after a warm start runs behind.
    CatchingUp,
    /// Initial sync applied; following changes.
    Synced,
    /// CRD not installed (kube source); retried.
    CrdMissing,
    /// Served from the store while its writes fail (a full or failing volume; see
    /// `sync.storeFault`): changes since the last commit are applied once writes succeed.
    Stale,
}

impl From<SyncState> for KindSyncState {
    fn from(s: SyncState) -> KindSyncState {
        match s {
            SyncState::Disabled => KindSyncState::Disabled,
            SyncState::Syncing => KindSyncState::Syncing,
            SyncState::CatchingUp => KindSyncState::CatchingUp,
            SyncState::Synced => KindSyncState::Synced,
            SyncState::CrdMissing => KindSyncState::CrdMissing,
            SyncState::Stale => KindSyncState::Stale,
        }
    }
}

/// One kind in the status.
#[derive(Object)]
#[oai(rename_all = "camelCase")]
struct KindStatus {
    /// Kind name, e.g. `ApiSubscription`.
    kind: String,
    /// Records of the kind in the store (all environments).
    records: u64,
    /// Sync state.
    sync: KindSyncState,
}

/// Readiness as `/readyz` reports it.
#[derive(Object)]
#[oai(rename_all = "camelCase")]
struct Readyz {
    /// Whether the server answers: the initial sync of every enabled kind is applied, or the
    /// store completed one of the same source before (a warm start, then catching up).
    ready: bool,
    /// Kinds served while they catch up after a warm start.
    catching_up: Vec<String>,
    /// Kinds being re-derived after an upgrade changed their derivation version.
    rederiving: Vec<String>,
    /// Phases still running.
    pending_phases: Vec<String>,
    /// Documents or objects not yet processed.
    pending_count: u64,
    /// Kinds whose CRD is not installed.
    missing_kinds: Vec<String>,
    /// Operator notes (e.g. mock authentication).
    notes: Vec<String>,
    /// While store writes fail (a full or failing volume): the cause, the data directory and
    /// since when; the store serves what it holds meanwhile. Null normally.
    store_fault: Option<String>,
    /// Why the source stopped for good (its thread failed, e.g. on a damaged store): not ready,
    /// the store no longer follows the source; restart the server (restore a snapshot when the
    /// store is damaged). Null normally.
    source_fault: Option<String>,
}

impl From<ReadyStatus> for Readyz {
    fn from(s: ReadyStatus) -> Readyz {
        Readyz {
            ready: s.ready,
            catching_up: s.catching_up,
            rederiving: s.rederiving,
            pending_phases: s.pending_phases,
            pending_count: s.pending_count as u64,
            missing_kinds: s.missing_kinds,
            notes: s.notes,
            store_fault: s.store_fault,
            source_fault: s.source_fault,
        }
    }
}

/// `GET /admin/v1/status`.
#[derive(Object)]
#[oai(rename_all = "camelCase")]
struct Status {
    /// Revision of the last commit (0 for an empty store).
    revision: u64,
    /// Time of the last commit that changed something (RFC 3339), null for an empty store.
    last_commit_at: Option<String>,
    /// Per kind, in registry order: records and sync state.
    kinds: Vec<KindStatus>,
    /// Records per kind name (the same numbers as `kinds`, keyed for scripts).
    counts: std::collections::BTreeMap<String, u64>,
    /// Readiness.
    sync: Readyz,
    /// Read-model schema version of the store.
    schema_version: u64,
    /// Snapshot format version this build writes.
    snapshot_format_version: u32,
}

#[derive(ApiResponse)]
enum StatusResponse {
    /// The status.
    #[oai(status = 200)]
    Ok(Json<Status>),
    /// No token or an invalid one (answered by the token check before the operation runs;
    /// listed for the document).
    #[oai(status = 401, content_type = "application/problem+json")]
    #[allow(dead_code)]
    Unauthorized(Json<Problem>),
    /// Not an admin token with access `all`.
    #[oai(status = 403, content_type = "application/problem+json")]
    Forbidden(Json<Problem>),
    /// The store could not be read.
    #[oai(status = 500, content_type = "application/problem+json")]
    Internal(Json<Problem>),
    /// The token issuer's keys cannot be fetched (jwt mode); retry after `Retry-After` seconds
    /// (answered by the token check), or the store cannot be read after a volume fault.
    #[oai(status = 503, content_type = "application/problem+json")]
    Unavailable(Json<Problem>),
}

fn internal(detail: &str) -> Json<Problem> {
    Problem::of(StatusCode::INTERNAL_SERVER_ERROR, detail.into())
}

/// Chunk size of the streamed snapshot body (bytes).
const CHUNK: usize = 64 * 1024;

/// A `Write` that hands full chunks to the HTTP body; fails once the client is gone.
struct ChunkSender {
    buf: Vec<u8>,
    tx: tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>,
}

impl ChunkSender {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away"))
    }
}

impl std::io::Write for ChunkSender {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

struct AdminApi;

#[OpenApi]
impl AdminApi {
    /// A snapshot of the whole read model, from one consistent read transaction, streamed.
    #[oai(path = "/snapshot", method = "get")]
    async fn snapshot(&self, token: AdminToken, state: Data<&Arc<AdminEndpoint>>) -> SnapshotResponse {
        if !token.allowed() {
            return SnapshotResponse::Forbidden(forbidden());
        }
        let view = match state.store.read() {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %e, "online snapshot: reading the store failed");
                return SnapshotResponse::Internal(internal("the store cannot be read"));
            }
        };
        let revision = match view.revision() {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "online snapshot: reading the revision failed");
                return SnapshotResponse::Internal(internal("the store cannot be read"));
            }
        };
        // Four chunks in flight: the export thread waits for a slow client instead of buffering.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(4);
        tokio::task::spawn_blocking(move || {
            let mut out = ChunkSender { buf: Vec::with_capacity(CHUNK), tx: tx.clone() };
            match storage::snapshot::export(&view, Timestamp::from_datetime(chrono::Utc::now()), &mut out) {
                Ok(summary) => tracing::info!(revision, bytes = summary.bytes, "online snapshot sent"),
                Err(e) => {
                    tracing::warn!(revision, error = %e, "online snapshot aborted");
                    // Break the body so the client sees an error, not a short file.
                    let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
                }
            }
        });
        let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        SnapshotResponse::Ok(
            Binary(Body::from_bytes_stream(stream)),
            revision,
            format!("attachment; filename=\"controlplane-r{revision}.snap\""),
        )
    }

    /// Revision, last commit time, per-kind record counts and sync state, readiness.
    #[oai(path = "/status", method = "get")]
    async fn status(&self, token: AdminToken, state: Data<&Arc<AdminEndpoint>>) -> StatusResponse {
        if !token.allowed() {
            return StatusResponse::Forbidden(forbidden());
        }
        let read = || -> Result<Status, storage::StorageError> {
            let view = state.store.read()?;
            let records = view.record_counts()?;
            let mut kinds = Vec::new();
            let mut counts = std::collections::BTreeMap::new();
            for (kind, n) in records {
                let sync = state.readiness.kind_state(kind.name());
                kinds.push(KindStatus { kind: kind.name().to_string(), records: n, sync: sync.into() });
                counts.insert(kind.name().to_string(), n);
            }
            Ok(Status {
                revision: view.revision()?,
                last_commit_at: view.last_commit()?.map(|t| t.to_rfc3339()),
                kinds,
                counts,
                sync: state.readiness.status().into(),
                schema_version: storage::SCHEMA_VERSION,
                snapshot_format_version: storage::snapshot::FORMAT_VERSION,
            })
        };
        match read() {
            Ok(s) => StatusResponse::Ok(Json(s)),
            // A failing volume (the writer reports it): readiness says why.
            Err(e) if e.is_volume_fault() => StatusResponse::Unavailable(Problem::of(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the store cannot be read after a volume fault; see /readyz: {}",
                    state.readiness.store_fault().unwrap_or_default()
                ),
            )),
            Err(e) => {
                tracing::error!(error = %e, "status: reading the store failed");
                StatusResponse::Internal(internal("the store cannot be read"))
            }
        }
    }
}
