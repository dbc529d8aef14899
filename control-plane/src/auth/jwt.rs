//! `jwt` mode: verifies a compact JWS against the keys of the trusted issuers.
//!
//! Order of checks (each failure is [`AuthError::Invalid`], except where noted):
//! 1. three non-empty dot-separated parts, at most [`super::MAX_TOKEN_BYTES`];
//! 2. the header parses and `alg` is one of [`ALLOWED_ALGORITHMS`] (`none` and `HS*` never are);
//! 3. the unverified payload's `iss` equals a trusted issuer exactly (an untrusted issuer is never
//!    contacted);
//! 4. a cached key of that issuer with the header's `kid` supports `alg`; an unknown `kid`
//!    triggers one rate-limited fetch ([`Jwks::lookup`]); keys that cannot be fetched →
//!    [`AuthError::Unavailable`];
//! 5. the signature verifies with that key (`jsonwebtoken`), and then `exp` (required), `nbf`
//!    (when present) with `security.leeway`, `iss` again, and `aud` when `security.audience` is
//!    set (then required).
//!
//! Only the verified payload is returned; the claims that make the viewer are read from it.

use super::jwks::{Jwks, Lookup, ALLOWED_ALGORITHMS};
use super::AuthError;
use crate::config::SecurityConfig;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::Validation;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Verifies tokens of the trusted issuers.
pub struct JwtVerifier {
    jwks: Arc<Jwks>,
    audience: Option<String>,
    leeway: Duration,
}

impl JwtVerifier {
    /// The key cache's [`Jwks::key_loads`].
    pub fn key_loads(&self) -> tokio::sync::watch::Receiver<u64> {
        self.jwks.key_loads()
    }

    /// A verifier with `security`'s audience and leeway over `jwks`.
    pub fn new(security: &SecurityConfig, jwks: Arc<Jwks>) -> JwtVerifier {
        JwtVerifier { jwks, audience: security.audience.clone(), leeway: security.leeway }
    }

    /// The verified payload of `token`.
    ///
    /// # Errors
    /// [`AuthError::Invalid`] for any failed check, [`AuthError::Unavailable`] when the key is
    /// not cached and cannot be fetched.
    pub async fn verify(&self, token: &str) -> Result<Value, AuthError> {
        self.check(token).await.map_err(|rejection| {
            tracing::debug!(reason = rejection.reason(), "token rejected");
            rejection.error()
        })
    }

    async fn check(&self, token: &str) -> Result<Value, Rejection> {
        let parts: Vec<&str> = token.split('.').collect();
        if token.len() > super::MAX_TOKEN_BYTES || parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
            return Err(Rejection::Invalid("not a compact JWS"));
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| Rejection::Invalid("unreadable header or unknown algorithm"))?;
        if !ALLOWED_ALGORITHMS.contains(&header.alg) {
            return Err(Rejection::Invalid("algorithm not allowed (asymmetric only)"));
        }
        let payload = super::decode_object(parts[1]).ok_or(Rejection::Invalid("unreadable payload"))?;
        let iss = payload.get("iss").and_then(Value::as_str).ok_or(Rejection::Invalid("no iss"))?;
        let index = self.jwks.issuer_index(iss).ok_or(Rejection::Invalid("issuer not trusted"))?;
        let keys = match self.jwks.lookup(index, header.kid.as_deref(), header.alg).await {
            Lookup::Found(keys) => keys,
            Lookup::Unknown => return Err(Rejection::Invalid("no key of the issuer matches kid and alg")),
            Lookup::Unavailable => return Err(Rejection::Unavailable),
        };
        let validation = self.validation(header.alg, iss);
        for key in keys {
            match jsonwebtoken::decode::<Value>(token, &key.key, &validation) {
                Ok(data) if data.claims.is_object() => return Ok(data.claims),
                Ok(_) => return Err(Rejection::Invalid("payload is not an object")),
                // Without a `kid` several keys are candidates: try the next one.
                Err(e) if matches!(e.kind(), ErrorKind::InvalidSignature) => continue,
                Err(e) => return Err(Rejection::Invalid(reason(e.kind()))),
            }
        }
        Err(Rejection::Invalid("signature does not verify"))
    }

    fn validation(&self, alg: jsonwebtoken::Algorithm, iss: &str) -> Validation {
        let mut v = Validation::new(alg);
        v.leeway = self.leeway.as_secs();
        v.validate_exp = true;
        v.validate_nbf = true;
        v.set_issuer(&[iss]);
        match &self.audience {
            Some(aud) => {
                v.set_audience(&[aud]);
                v.set_required_spec_claims(&["exp", "iss", "aud"]);
            }
            None => {
                v.validate_aud = false;
                v.set_required_spec_claims(&["exp", "iss"]);
            }
        }
        v
    }
}

/// Why a token was rejected (logged at debug level only).
enum Rejection {
    Invalid(&'static str),
    Unavailable,
}

impl Rejection {
    fn reason(&self) -> &'static str {
        match self {
            Rejection::Invalid(r) => r,
            Rejection::Unavailable => "issuer keys unavailable",
        }
    }

    fn error(&self) -> AuthError {
        match self {
            Rejection::Invalid(_) => AuthError::Invalid,
            Rejection::Unavailable => AuthError::Unavailable,
        }
    }
}

fn reason(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "expired (exp)",
        ErrorKind::ImmatureSignature => "not yet valid (nbf)",
        ErrorKind::InvalidIssuer => "issuer mismatch",
        ErrorKind::InvalidAudience => "audience mismatch",
        ErrorKind::MissingRequiredClaim(_) => "missing exp, iss or aud",
        ErrorKind::InvalidClaimFormat(_) => "malformed exp, nbf, iss or aud",
        ErrorKind::InvalidAlgorithm => "algorithm does not match the key",
        _ => "malformed token",
    }
}
