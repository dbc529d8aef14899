//! Token authentication (ARCHITECTURE.md, `control-plane`: authentication is fail-closed; the
//! claims: "Viewers and visibility"): the bearer token of a request →
//! a [`query::viewer::Viewer`], or why not.
//!
//! Two modes (`security.mode`):
//! - **`jwt`** (default, [`jwt`]): the token is a compact JWS signed with an asymmetric key
//!   (RS256/384/512, PS256/384/512, ES256/384; never `none` or HMAC) of a trusted issuer
//!   (`security.trustedIssuers`, compared with `iss` exactly), whose keys come from its JWKS
//!   ([`jwks`]); `exp` is required, `exp`/`nbf` are checked with `security.leeway`, `aud` must
//!   contain `security.audience` when that is set.
//! - **`mock`**: the payload is decoded without checking signature or issuer (local use and
//!   demos only: the server warns at start and notes it in `/readyz`); `exp`/`nbf` are still
//!   honoured when present.
//!
//! Then, in both modes, the claims (`clientId`, `scope`, `env`) make the viewer
//! ([`query::viewer::Viewer::from_claims`]).
//!
//! **Invariants.** Fail closed: no path accepts a token whose signature was not verified in
//! `jwt` mode. A rejected token is [`AuthError::Invalid`] whatever check failed (the reason is
//! only logged, at debug level, target `control_plane::auth`), so callers learn nothing about
//! which check failed. Claims are looked at only after the token is verified.

pub mod jwks;
pub mod jwt;

use crate::config::{AuthMode, ConfigError, SecurityConfig};
use base64::Engine;
use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};
use query::viewer::{ClaimsError, Viewer};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Largest accepted token, in bytes (16 KiB); longer tokens are [`AuthError::Invalid`] before
/// anything is decoded.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Why a request is not authenticated. The HTTP layer maps each variant to one status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No `Authorization: Bearer <token>` header (HTTP 401).
    #[error("missing token")]
    Missing,
    /// The token failed a check: shape, algorithm, issuer, key, signature, `exp`, `nbf`, `aud`
    /// (HTTP 401, "invalid token"; which check failed is not disclosed).
    #[error("invalid token")]
    Invalid,
    /// The token names a trusted issuer and a key that is not cached, and the issuer's keys
    /// cannot be fetched right now (HTTP 503; the client retries later).
    #[error("the token issuer's keys are unavailable")]
    Unavailable,
    /// The token is valid but its claims make no viewer (HTTP 403).
    #[error(transparent)]
    Forbidden(#[from] ClaimsError),
}

impl AuthError {
    /// The outcome label of `controlplane_auth_requests_total`.
    pub fn outcome(&self) -> &'static str {
        match self {
            AuthError::Missing => "missing",
            AuthError::Invalid => "invalid",
            AuthError::Unavailable => "unavailable",
            AuthError::Forbidden(_) => "forbidden",
        }
    }
}

/// Why an [`Authenticator`] cannot be built. Reaction for all: fix the build or the
/// configuration; the process exits with 1.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// `jwt` mode without a trusted issuer.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The build has no crypto backend for `jsonwebtoken` (its `aws_lc_rs` feature is off).
    #[error("this build has no JWT crypto backend (jsonwebtoken's aws_lc_rs feature); jwt mode cannot verify tokens")]
    NoCryptoBackend,
    /// The HTTP client for fetching JWKS cannot be built (TLS setup).
    #[error("cannot build the HTTP client for JWKS: {0}")]
    HttpClient(String),
}

/// Checks, without I/O, that this build can verify JWTs (startup stage 1).
///
/// # Errors
/// [`SetupError::NoCryptoBackend`].
pub fn check_jwt_support() -> Result<(), SetupError> {
    jsonwebtoken::crypto::CryptoProvider::try_get_default().map(|_| ()).ok_or(SetupError::NoCryptoBackend)
}

/// The metrics of authentication, registered in the process registry.
#[derive(Clone)]
pub struct AuthMetrics {
    /// `controlplane_auth_requests_total{outcome}`: `ok`, `missing`, `invalid`, `forbidden`,
    /// `unavailable`.
    pub requests: IntCounterVec,
    /// `controlplane_auth_jwks_fetch_total{issuer,trigger,outcome}`: JWKS fetches; trigger
    /// `background` (start and periodic) or `unknown_key`; outcome `success` or `failure`.
    pub jwks_fetches: IntCounterVec,
    /// `controlplane_auth_jwks_keys{issuer}`: usable keys cached per issuer.
    pub jwks_keys: IntGaugeVec,
    /// `controlplane_auth_jwks_up{issuer}`: 1 when the last fetch succeeded, 0 when it failed
    /// (cached keys stay in use).
    pub jwks_up: IntGaugeVec,
}

impl AuthMetrics {
    /// Creates the metrics and registers them in `registry` (a name already registered is
    /// logged and the metric stays unexported).
    pub fn new(registry: &Registry) -> AuthMetrics {
        let requests = IntCounterVec::new(
            Opts::new("controlplane_auth_requests_total", "Authentication decisions on GraphQL requests, by outcome."),
            &["outcome"],
        )
        .expect("metric definition is valid");
        let jwks_fetches = IntCounterVec::new(
            Opts::new("controlplane_auth_jwks_fetch_total", "JWKS fetches per trusted issuer, by trigger and outcome."),
            &["issuer", "trigger", "outcome"],
        )
        .expect("metric definition is valid");
        let jwks_keys =
            IntGaugeVec::new(Opts::new("controlplane_auth_jwks_keys", "Usable verification keys cached per issuer."), &["issuer"])
                .expect("metric definition is valid");
        let jwks_up = IntGaugeVec::new(
            Opts::new("controlplane_auth_jwks_up", "1 when the last JWKS fetch of the issuer succeeded, else 0."),
            &["issuer"],
        )
        .expect("metric definition is valid");
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(jwks_fetches.clone()),
            Box::new(jwks_keys.clone()),
            Box::new(jwks_up.clone()),
        ] {
            if let Err(e) = registry.register(c) {
                tracing::warn!(error = %e, "authentication metric not registered");
            }
        }
        AuthMetrics { requests, jwks_fetches, jwks_keys, jwks_up }
    }
}

enum Verification {
    Mock,
    Jwt(jwt::JwtVerifier),
}

struct AuthenticatorState {
    verification: Verification,
    scope_prefix: String,
    leeway: Duration,
    metrics: AuthMetrics,
}

/// Turns bearer tokens into viewers. Cheap to clone (shared state).
#[derive(Clone)]
pub struct Authenticator(Arc<AuthenticatorState>);

impl Authenticator {
    /// Builds the authenticator of `security.mode`, registering its metrics in `registry`.
    ///
    /// In `jwt` mode this does no network I/O: when called inside a Tokio runtime it starts one
    /// background task per trusted issuer that fetches the keys at once and keeps them fresh
    /// ([`jwks`]); outside a runtime keys are fetched on the first request. An unreachable
    /// issuer is logged and retried, never a startup failure.
    ///
    /// # Errors
    /// [`SetupError`]: `jwt` mode without trusted issuers, without a crypto backend, or without
    /// a usable HTTP client.
    pub fn new(security: &SecurityConfig, registry: &Registry) -> Result<Authenticator, SetupError> {
        let metrics = AuthMetrics::new(registry);
        let verification = match security.mode {
            AuthMode::Mock => Verification::Mock,
            AuthMode::Jwt => {
                if security.trusted_issuers.is_empty() {
                    return Err(ConfigError::NoTrustedIssuer.into());
                }
                check_jwt_support()?;
                let jwks = jwks::Jwks::new(&security.trusted_issuers, jwks::JwksSettings::default(), metrics.clone())?;
                if tokio::runtime::Handle::try_current().is_ok() {
                    jwks.spawn_refreshers();
                }
                for issuer in &security.trusted_issuers {
                    if issuer.starts_with("http://") {
                        tracing::warn!(issuer = %issuer, "trusted issuer uses plain HTTP: its keys are fetched without TLS");
                    }
                }
                tracing::info!(
                    issuers = ?security.trusted_issuers,
                    audience = ?security.audience,
                    leeway_seconds = security.leeway.as_secs(),
                    "JWT verification enabled"
                );
                Verification::Jwt(jwt::JwtVerifier::new(security, jwks))
            }
        };
        Ok(Authenticator(Arc::new(AuthenticatorState {
            verification,
            scope_prefix: security.scope_prefix.clone(),
            leeway: security.leeway,
            metrics,
        })))
    }

    /// Follows successful JWKS key fetches (`jwt` mode; `None` in `mock` mode): a barrier for
    /// "the keys of an issuer that was unreachable are loaded now".
    pub fn key_loads(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match &self.0.verification {
            Verification::Mock => None,
            Verification::Jwt(v) => Some(v.key_loads()),
        }
    }

    /// The mode it verifies in.
    pub fn mode(&self) -> AuthMode {
        match self.0.verification {
            Verification::Mock => AuthMode::Mock,
            Verification::Jwt(_) => AuthMode::Jwt,
        }
    }

    /// The viewer of a request with the given `Authorization` header value, counted in
    /// `controlplane_auth_requests_total`.
    ///
    /// # Errors
    /// [`AuthError`]: no bearer token, a token that fails verification, keys that cannot be
    /// fetched, claims that make no viewer.
    pub async fn authenticate(&self, authorization: Option<&str>) -> Result<Viewer, AuthError> {
        let result = self.viewer(authorization).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.outcome(),
        };
        self.0.metrics.requests.with_label_values(&[outcome]).inc();
        result
    }

    async fn viewer(&self, authorization: Option<&str>) -> Result<Viewer, AuthError> {
        let token = authorization.and_then(bearer).ok_or(AuthError::Missing)?;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(AuthError::Invalid);
        }
        let claims = match &self.0.verification {
            Verification::Mock => mock_claims(token, self.0.leeway, now_seconds()).ok_or(AuthError::Invalid)?,
            Verification::Jwt(v) => v.verify(token).await?,
        };
        Ok(Viewer::from_claims(&claims, &self.0.scope_prefix)?)
    }
}

/// The token of an `Authorization: Bearer <token>` header value (scheme case-insensitive).
fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The current Unix time in seconds.
impl Authenticator {
    /// Whether the token `viewer` was built from has expired by now: its `exp` plus
    /// `security.leeway` has passed (what a request with it would be refused for). A viewer
    /// without `exp` never expires here.
    pub fn expired(&self, viewer: &Viewer) -> bool {
        let leeway = i64::try_from(self.0.leeway.as_secs()).unwrap_or(i64::MAX);
        viewer.expires_at.is_some_and(|exp| exp.saturating_add(leeway) < now_seconds())
    }
}

fn now_seconds() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Decodes one base64url segment of a compact JWS into a JSON object.
fn decode_object(segment: &str) -> Option<Value> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(segment.trim_end_matches('=')).ok()?;
    let v: Value = serde_json::from_slice(&bytes).ok()?;
    v.is_object().then_some(v)
}

/// The payload of a compact JWS (three dot-separated parts), without verifying anything.
fn decode_unverified(token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let (_header, payload, _sig) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    decode_object(payload)
}

/// Mock mode: the unverified payload, if `exp`/`nbf` (when present) are numbers that admit
/// `now` (Unix seconds) within `leeway`.
fn mock_claims(token: &str, leeway: Duration, now: i64) -> Option<Value> {
    let claims = decode_unverified(token)?;
    let leeway = i64::try_from(leeway.as_secs()).unwrap_or(i64::MAX);
    for (claim, admits) in [
        ("exp", (|t: f64, now: i64, leeway: i64| t as i64 >= now.saturating_sub(leeway)) as fn(f64, i64, i64) -> bool),
        ("nbf", |t, now, leeway| t as i64 <= now.saturating_add(leeway)),
    ] {
        match claims.get(claim) {
            None => {}
            Some(v) => match v.as_f64() {
                Some(t) if admits(t, now, leeway) => {}
                _ => return None,
            },
        }
    }
    Some(claims)
}

#[cfg(test)]
mod tests;
