//! The GraphQL endpoint (DESIGN "Ports and paths"): `POST|GET /graphql/query` with a bearer
//! token, and the GraphiQL page at `/graphql` (the page needs no token; its queries do).
//!
//! Token handling: the bearer token is a compact JWS. In `mock` mode its payload is decoded
//! without checking the signature (the server warns at start), `exp`/`nbf` are still honoured.
//! Missing or invalid tokens → HTTP 401, unusable claims → HTTP 403, both as problem JSON that
//! says no more than "invalid token" / which claim is unusable.

use crate::config::{AuthMode, Config};
use async_graphql::http::GraphiQLSource;
use async_graphql_poem::{GraphQLRequest, GraphQLResponse};
use base64::Engine;
use poem::http::{Method, StatusCode};
use poem::web::{Data, Html};
use poem::{get, handler, EndpointExt, IntoResponse, Request, Response, Route};
use poem::{Body, FromRequest, RequestBody};
use query::viewer::Viewer;
use query::{Api, QueryConfig};
use std::sync::Arc;
use storage::Store;

/// Shared state of the endpoint.
struct State {
    api: Api,
    store: Store,
    mode: AuthMode,
    scope_prefix: String,
}

/// The query settings derived from the configuration.
pub fn query_config(config: &Config) -> QueryConfig {
    QueryConfig { max_page_size: config.graphql.max_page_size, now: config.now, ..QueryConfig::default() }
}

/// Routes `/graphql/query` (and `/graphql` when the playground is enabled).
///
/// # Panics
/// Never on input; building the schema fails only on a programming error caught by the SDL test.
pub fn routes(store: Store, config: &Config) -> Route {
    let api = query::build_schema(query_config(config)).expect("invariant: the generated schema is valid (see query/schema.graphql test)");
    let state = Arc::new(State { api, store, mode: config.security.mode, scope_prefix: config.security.scope_prefix.clone() });
    let mut route = Route::new().at("/graphql/query", get(graphql).post(graphql).data(state));
    if config.graphql.playground_enabled {
        route = route.at("/graphql", get(graphiql));
    }
    route
}

/// The served schema in SDL (`control-plane schema print`).
pub fn print_schema() -> String {
    query::build_schema(QueryConfig::default()).expect("invariant: the generated schema is valid").sdl()
}

#[handler]
fn graphiql() -> Html<String> {
    Html(GraphiQLSource::build().endpoint("/graphql/query").title("ControlPlane API").finish())
}

/// Maximum size of a POST body in bytes (1 MiB); larger requests get HTTP 413.
pub const MAX_BODY_BYTES: usize = 1 << 20;

#[handler]
async fn graphql(req: &Request, body: Body, state: Data<&Arc<State>>) -> Response {
    // Authenticate before reading or parsing anything the caller sent.
    let viewer = match viewer(req, &state) {
        Ok(v) => v,
        Err(resp) => return resp,
    };
    let request = if req.method() == Method::POST {
        let bytes = match body.into_bytes_limit(MAX_BODY_BYTES).await {
            Ok(b) => b,
            Err(_) => return problem(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large", "the request body exceeds 1 MiB"),
        };
        match serde_json::from_slice::<async_graphql::Request>(&bytes) {
            Ok(r) => r,
            Err(_) => return problem(StatusCode::BAD_REQUEST, "Bad Request", "the body is not a GraphQL request (JSON with a `query`)"),
        }
    } else {
        match GraphQLRequest::from_request(req, &mut RequestBody::new(Body::empty())).await {
            Ok(r) => r.0,
            Err(_) => return problem(StatusCode::BAD_REQUEST, "Bad Request", "the query string is not a GraphQL request"),
        }
    };
    let resp = state.api.execute(&state.store, viewer, request).await;
    GraphQLResponse::from(resp).into_response()
}

fn problem(status: StatusCode, title: &str, detail: &str) -> Response {
    let body = serde_json::json!({
        "type": title.replace(' ', ""),
        "status": status.as_u16(),
        "title": title,
        "detail": detail,
        "instance": "",
    });
    Response::builder().status(status).content_type("application/problem+json").body(body.to_string())
}

/// Token → viewer, or the HTTP error response.
fn viewer(req: &Request, state: &State) -> Result<Viewer, Response> {
    let unauthorized = || problem(StatusCode::UNAUTHORIZED, "Unauthorized", "Invalid token");
    let token = req
        .headers()
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(unauthorized)?;
    let claims = match state.mode {
        AuthMode::Mock => decode_unverified(token).ok_or_else(unauthorized)?,
        // Startup refuses jwt mode until verification exists; never accept unverified claims.
        AuthMode::Jwt => return Err(unauthorized()),
    };
    // `exp`/`nbf` are honoured when present; present but not a number is an invalid token.
    let now = chrono::Utc::now().timestamp();
    for (claim, expired) in [("exp", (|t: i64, now: i64| t < now) as fn(i64, i64) -> bool), ("nbf", |t, now| t > now)] {
        match claims.get(claim) {
            None => {}
            Some(v) => match v.as_f64() {
                Some(t) if !expired(t as i64, now) => {}
                _ => return Err(unauthorized()),
            },
        }
    }
    Viewer::from_claims(&claims, &state.scope_prefix).map_err(|e| problem(StatusCode::FORBIDDEN, "Forbidden", &e.to_string()))
}

/// The payload of a compact JWS, without verifying anything.
fn decode_unverified(token: &str) -> Option<serde_json::Value> {
    let mut parts = token.split('.');
    let (_header, payload, _sig) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v.is_object().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_compact_jws_payloads_only() {
        let t = "eyJhbGciOiJub25lIn0.eyJlbnYiOiJwb2MifQ.sig";
        assert_eq!(decode_unverified(t), Some(serde_json::json!({"env": "poc"})));
        assert_eq!(decode_unverified("a.b"), None);
        assert_eq!(decode_unverified("a.!!!.c"), None);
        assert_eq!(decode_unverified("a.b.c.d"), None);
        // A payload that is JSON but not an object.
        assert_eq!(decode_unverified("a.MQ.c"), None);
    }
}
