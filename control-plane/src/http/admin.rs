//! The admin API (`/admin/v1/...`, DESIGN "Ports and paths"): `GET /admin/v1/snapshot` streams a
//! snapshot ([`storage::snapshot`]) taken from one read transaction while the projector keeps
//! writing; `GET /admin/v1/status` reports revision, per-kind counts, sync state and last commit
//! time; `GET /admin/v1/openapi.json` documents both. Every call but the document needs an admin
//! token (viewer kind `admin`, access `all`), checked before anything else.
//!
//! Note: the OpenAPI document is written by hand here (poem-openapi is not yet a dependency).

use crate::auth::Authenticator;
use crate::http::graphql::{problem, rejection};
use crate::readiness::Readiness;
use poem::http::StatusCode;
use poem::web::Data;
use poem::{get, handler, EndpointExt, Request, Response, Route};
use query::viewer::Access;
use schema::{KindId, Scope, Timestamp};
use std::sync::Arc;
use storage::Store;

struct State {
    store: Store,
    auth: Authenticator,
    readiness: Readiness,
}

/// Adds the admin routes to `route`.
pub fn mount(route: Route, store: Store, auth: Authenticator, readiness: Readiness) -> Route {
    let state = Arc::new(State { store, auth, readiness });
    route
        .at("/admin/v1/snapshot", get(snapshot).data(state.clone()))
        .at("/admin/v1/status", get(status).data(state))
        .at("/admin/v1/openapi.json", get(openapi))
}

/// `None` when the caller is an admin with access `all`, else the answer to send.
async fn require_admin(req: &Request, state: &State) -> Option<Response> {
    let authorization = req.headers().get("authorization").and_then(|h| h.to_str().ok());
    match state.auth.authenticate(authorization).await {
        Err(e) => Some(rejection(&e)),
        Ok(v) if v.is_admin() && v.access == Access::All => None,
        Ok(_) => Some(problem(StatusCode::FORBIDDEN, "Forbidden", "the admin API needs an admin token with access `all`")),
    }
}

#[handler]
async fn snapshot(req: &Request, state: Data<&Arc<State>>) -> Response {
    if let Some(denied) = require_admin(req, &state).await {
        return denied;
    }
    let store = state.store.clone();
    let result = tokio::task::spawn_blocking(move || {
        let view = store.read()?;
        let mut out = Vec::new();
        let summary = storage::snapshot::export(&view, Timestamp::from_datetime(chrono::Utc::now()), &mut out)?;
        Ok::<_, storage::snapshot::SnapshotError>((summary, out))
    })
    .await;
    match result {
        Ok(Ok((summary, bytes))) => Response::builder()
            .content_type("application/octet-stream")
            .header("content-disposition", format!("attachment; filename=\"controlplane-r{}.snap\"", summary.header.revision))
            .header("x-snapshot-revision", summary.header.revision.to_string())
            .body(bytes),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "online snapshot failed");
            problem(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error", "the snapshot could not be taken")
        }
        Err(e) => {
            tracing::error!(error = %e, "online snapshot task failed");
            problem(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error", "the snapshot could not be taken")
        }
    }
}

#[handler]
async fn status(req: &Request, state: Data<&Arc<State>>) -> Response {
    if let Some(denied) = require_admin(req, &state).await {
        return denied;
    }
    let view = match state.store.read() {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "status: reading the store failed");
            return problem(StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error", "the store cannot be read");
        }
    };
    let mut counts = serde_json::Map::new();
    for &k in KindId::ALL {
        counts.insert(k.name().to_string(), view.count(k, &Scope::All).unwrap_or(0).into());
    }
    let last_commit = view.last_commit().ok().flatten().map(|t| t.to_rfc3339());
    let sync = state.readiness.status();
    let body = serde_json::json!({
        "revision": view.revision().unwrap_or(0),
        "lastCommitAt": last_commit,
        "counts": counts,
        "sync": sync,
        "schemaVersion": storage::SCHEMA_VERSION,
        "snapshotFormatVersion": storage::snapshot::FORMAT_VERSION,
    });
    Response::builder().content_type("application/json").body(body.to_string())
}

#[handler]
fn openapi() -> Response {
    Response::builder().content_type("application/json").body(OPENAPI)
}

const OPENAPI: &str = r#"{
  "openapi": "3.0.3",
  "info": { "title": "ControlPlane read model admin API", "version": "1" },
  "components": {
    "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer", "description": "admin token (scope <prefix>:admin:all)" } }
  },
  "security": [ { "bearer": [] } ],
  "paths": {
    "/admin/v1/snapshot": {
      "get": {
        "summary": "A snapshot of the read model from one consistent read transaction (format: storage::snapshot)",
        "responses": {
          "200": { "description": "the snapshot file", "headers": { "x-snapshot-revision": { "schema": { "type": "integer" } } },
                   "content": { "application/octet-stream": { "schema": { "type": "string", "format": "binary" } } } },
          "401": { "description": "no or an invalid token" },
          "403": { "description": "not an admin token with access all" }
        }
      }
    },
    "/admin/v1/status": {
      "get": {
        "summary": "Revision, per-kind counts, sync state, last commit time",
        "responses": {
          "200": { "description": "status", "content": { "application/json": { "schema": { "type": "object",
            "properties": { "revision": { "type": "integer" }, "lastCommitAt": { "type": "string", "format": "date-time", "nullable": true },
                            "counts": { "type": "object", "additionalProperties": { "type": "integer" } },
                            "sync": { "type": "object" }, "schemaVersion": { "type": "integer" }, "snapshotFormatVersion": { "type": "integer" } } } } } },
          "401": { "description": "no or an invalid token" },
          "403": { "description": "not an admin token with access all" }
        }
      }
    }
  }
}"#;
