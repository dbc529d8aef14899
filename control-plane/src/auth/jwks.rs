//! The verification keys of the trusted issuers: fetched over HTTP(S), cached per issuer.
//!
//! **Where keys come from.** OIDC discovery: `<issuer>/.well-known/openid-configuration` →
//! `jwks_uri`; when that fails (no document, no `jwks_uri`), the Keycloak path
//! `<issuer>/protocol/openid-connect/certs`. The resolved JWKS URL is remembered until a fetch
//! from it fails. Only the configured issuer URLs are ever contacted: nothing a token says
//! (`iss` of an untrusted issuer, `jku`, `x5u`) makes the server fetch anything.
//!
//! **When keys are fetched.**
//! - In the background ([`Jwks::spawn_refreshers`]): at once after start (startup never waits
//!   for an issuer), then every [`JwksSettings::max_age`]; a failed fetch is retried after
//!   [`JwksSettings::retry_min`], doubling up to [`JwksSettings::retry_max`].
//! - On demand: a token whose key (`kid`) is not cached triggers one fetch for its issuer, at
//!   most one per [`JwksSettings::min_refresh_interval`] (rate limit); requests arriving during a
//!   fetch wait for it instead of starting another.
//!
//! **Invariant: a failed fetch never removes cached keys.** An issuer outage is logged (warn),
//! counted (`controlplane_auth_jwks_fetch_total{outcome="failure"}`, `controlplane_auth_jwks_up`
//! = 0), and tokens signed with cached keys keep verifying. Only a successful fetch replaces an
//! issuer's keys, which is how a key removed at the issuer stops being accepted.
//!
//! Only asymmetric signing keys are kept ([`usable_key`]): RSA keys for RS256/384/512 and
//! PS256/384/512, EC P-256 keys for ES256 and P-384 keys for ES384, narrowed to the key's `alg`
//! when it has one. Keys with `use: enc`, symmetric (`oct`) keys, other curves and types are
//! skipped, so an HMAC key can never be selected.

use super::{AuthMetrics, SetupError};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::{Duration, Instant};

/// The signature algorithms accepted in `jwt` mode: asymmetric only.
pub const ALLOWED_ALGORITHMS: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

const RSA_ALGORITHMS: &[Algorithm] =
    &[Algorithm::RS256, Algorithm::RS384, Algorithm::RS512, Algorithm::PS256, Algorithm::PS384, Algorithm::PS512];

/// Largest discovery document or JWKS accepted, in bytes (1 MiB).
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// Timing of key fetches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JwksSettings {
    /// Minimum time between two on-demand fetches (unknown `kid`) of one issuer; default 10 s.
    pub min_refresh_interval: Duration,
    /// Age after which the background task fetches the keys again; default 5 min.
    pub max_age: Duration,
    /// First retry delay after a failed background fetch; default 1 s.
    pub retry_min: Duration,
    /// Longest retry delay after repeated failures; default 60 s.
    pub retry_max: Duration,
    /// Timeout of one HTTP request (connect included); default 10 s.
    pub timeout: Duration,
}

impl Default for JwksSettings {
    fn default() -> JwksSettings {
        JwksSettings {
            min_refresh_interval: Duration::from_secs(10),
            max_age: Duration::from_secs(300),
            retry_min: Duration::from_secs(1),
            retry_max: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
        }
    }
}

/// One usable verification key.
#[derive(Clone)]
pub struct VerifyingKey {
    /// `kid`, if the JWK has one.
    pub kid: Option<String>,
    /// The algorithms it may verify (a subset of [`ALLOWED_ALGORITHMS`], never empty).
    pub algorithms: Vec<Algorithm>,
    /// The key.
    pub key: DecodingKey,
}

impl std::fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyingKey").field("kid", &self.kid).field("algorithms", &self.algorithms).finish_non_exhaustive()
    }
}

/// The outcome of a key lookup.
#[derive(Debug)]
pub enum Lookup {
    /// Keys that may have signed the token (same `kid`, or every key when the token has none;
    /// all support the token's algorithm). Never empty.
    Found(Vec<Arc<VerifyingKey>>),
    /// No such key, after a fetch or while fetches are rate-limited; or the `kid` is known but
    /// not for this algorithm.
    Unknown,
    /// No such key cached and the issuer's keys cannot be fetched right now.
    Unavailable,
}

/// What a fetch was for (the `trigger` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    Background,
    UnknownKey,
}

impl Trigger {
    fn label(self) -> &'static str {
        match self {
            Trigger::Background => "background",
            Trigger::UnknownKey => "unknown_key",
        }
    }
}

#[derive(Default)]
struct IssuerState {
    keys: Vec<Arc<VerifyingKey>>,
    /// Last successful fetch.
    fetched_at: Option<Instant>,
    /// Whether the last fetch failed.
    failing: bool,
    /// Last on-demand fetch (rate limit).
    last_on_demand: Option<Instant>,
    /// The JWKS URL that worked last.
    jwks_uri: Option<String>,
}

/// One trusted issuer and its cached keys.
struct Issuer {
    url: String,
    state: RwLock<IssuerState>,
    /// Held while fetching: one fetch per issuer at a time.
    fetching: tokio::sync::Mutex<()>,
}

/// What a cache probe found.
enum Cached {
    Keys(Vec<Arc<VerifyingKey>>),
    KidWithoutAlgorithm,
    Missing,
}

impl Issuer {
    fn read(&self) -> RwLockReadGuard<'_, IssuerState> {
        // The state is replaced field by field under the lock; a panic cannot leave it torn.
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, IssuerState> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    fn cached(&self, kid: Option<&str>, alg: Algorithm) -> Cached {
        let state = self.read();
        let same_kid: Vec<&Arc<VerifyingKey>> = match kid {
            Some(kid) => state.keys.iter().filter(|k| k.kid.as_deref() == Some(kid)).collect(),
            None => state.keys.iter().collect(),
        };
        let keys: Vec<Arc<VerifyingKey>> = same_kid.iter().filter(|k| k.algorithms.contains(&alg)).map(|k| Arc::clone(k)).collect();
        match (keys.is_empty(), kid.is_some() && !same_kid.is_empty()) {
            (false, _) => Cached::Keys(keys),
            (true, true) => Cached::KidWithoutAlgorithm,
            (true, false) => Cached::Missing,
        }
    }

    fn due(&self, max_age: Duration) -> bool {
        self.read().fetched_at.is_none_or(|t| t.elapsed() >= max_age)
    }
}

/// The key cache of every trusted issuer. Shared (`Arc`); background tasks end when it is
/// dropped.
pub struct Jwks {
    issuers: Vec<Arc<Issuer>>,
    client: reqwest::Client,
    settings: JwksSettings,
    metrics: AuthMetrics,
    /// Successful key fetches so far, of any issuer ([`Jwks::key_loads`]).
    loads: tokio::sync::watch::Sender<u64>,
    /// Dropped with the cache: ends the background tasks.
    _stop: tokio::sync::watch::Sender<()>,
    stopped: tokio::sync::watch::Receiver<()>,
}

impl Jwks {
    /// A cache for `issuers` (exact URLs, in `iss` form). Fetches nothing yet.
    ///
    /// # Errors
    /// [`SetupError::HttpClient`] when the HTTP client cannot be built.
    pub fn new(issuers: &[String], settings: JwksSettings, metrics: AuthMetrics) -> Result<Arc<Jwks>, SetupError> {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout)
            .user_agent(concat!("control-plane/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| SetupError::HttpClient(error_chain(&e)))?;
        let (stop, stopped) = tokio::sync::watch::channel(());
        let issuers = issuers
            .iter()
            .map(|url| {
                metrics.jwks_keys.with_label_values(&[url]).set(0);
                metrics.jwks_up.with_label_values(&[url]).set(0);
                Arc::new(Issuer { url: url.clone(), state: RwLock::new(IssuerState::default()), fetching: tokio::sync::Mutex::new(()) })
            })
            .collect();
        Ok(Arc::new(Jwks { issuers, client, settings, metrics, loads: tokio::sync::watch::Sender::new(0), _stop: stop, stopped }))
    }

    /// Follows the number of successful key fetches (of every issuer): changes once keys were
    /// (re)loaded, e.g. after an issuer that was down came up.
    pub fn key_loads(&self) -> tokio::sync::watch::Receiver<u64> {
        self.loads.subscribe()
    }

    /// The position of `iss` among the trusted issuers (exact string comparison).
    pub fn issuer_index(&self, iss: &str) -> Option<usize> {
        self.issuers.iter().position(|i| i.url == iss)
    }

    /// Starts one background task per issuer (in the current Tokio runtime) that fetches its
    /// keys now and keeps them fresh; see the module docs. The tasks end when the cache is
    /// dropped.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub fn spawn_refreshers(self: &Arc<Self>) {
        for index in 0..self.issuers.len() {
            let jwks = Arc::downgrade(self);
            let stopped = self.stopped.clone();
            tokio::spawn(refresh_loop(jwks, index, stopped));
        }
    }

    /// The keys of issuer `index` (from [`Jwks::issuer_index`]) that may verify a token with
    /// `kid` and `alg`; fetches once when none is cached (see the module docs).
    pub async fn lookup(&self, index: usize, kid: Option<&str>, alg: Algorithm) -> Lookup {
        let Some(issuer) = self.issuers.get(index) else { return Lookup::Unknown };
        match issuer.cached(kid, alg) {
            Cached::Keys(k) => return Lookup::Found(k),
            Cached::KidWithoutAlgorithm => return Lookup::Unknown,
            Cached::Missing => {}
        }
        let _fetching = issuer.fetching.lock().await;
        // Another request or the background task may have fetched meanwhile.
        match issuer.cached(kid, alg) {
            Cached::Keys(k) => return Lookup::Found(k),
            Cached::KidWithoutAlgorithm => return Lookup::Unknown,
            Cached::Missing => {}
        }
        {
            let mut state = issuer.write();
            if state.last_on_demand.is_some_and(|t| t.elapsed() < self.settings.min_refresh_interval) {
                tracing::debug!(issuer = %issuer.url, kid = ?kid, "unknown key; refresh rate-limited");
                return if state.failing || state.fetched_at.is_none() { Lookup::Unavailable } else { Lookup::Unknown };
            }
            state.last_on_demand = Some(Instant::now());
        }
        let fetched = self.refresh(issuer, Trigger::UnknownKey).await;
        match issuer.cached(kid, alg) {
            Cached::Keys(k) => Lookup::Found(k),
            Cached::KidWithoutAlgorithm => Lookup::Unknown,
            Cached::Missing if fetched => Lookup::Unknown,
            Cached::Missing => Lookup::Unavailable,
        }
    }

    /// Fetches the issuer's keys and replaces the cached ones on success. The caller holds
    /// `issuer.fetching`. Returns whether the fetch succeeded.
    async fn refresh(&self, issuer: &Issuer, trigger: Trigger) -> bool {
        let labels = |outcome| [issuer.url.as_str(), trigger.label(), outcome];
        let known_uri = issuer.read().jwks_uri.clone();
        let result = match known_uri {
            Some(uri) => self.fetch_keys(&uri).await.map(|keys| (keys, uri)),
            None => self.discover_and_fetch(&issuer.url).await,
        };
        match result {
            Ok((keys, uri)) => {
                let kids: Vec<&str> = keys.iter().map(|k| k.kid.as_deref().unwrap_or("-")).collect();
                let mut state = issuer.write();
                let before: Vec<Option<String>> = state.keys.iter().map(|k| k.kid.clone()).collect();
                let after: Vec<Option<String>> = keys.iter().map(|k| k.kid.clone()).collect();
                if before != after || state.failing {
                    tracing::info!(issuer = %issuer.url, jwks_uri = %uri, keys = ?kids, trigger = trigger.label(), "token signing keys loaded");
                } else {
                    tracing::debug!(issuer = %issuer.url, keys = ?kids, trigger = trigger.label(), "token signing keys unchanged");
                }
                self.metrics.jwks_keys.with_label_values(&[&issuer.url]).set(i64::try_from(keys.len()).unwrap_or(i64::MAX));
                state.keys = keys.into_iter().map(Arc::new).collect();
                state.fetched_at = Some(Instant::now());
                state.failing = false;
                state.jwks_uri = Some(uri);
                self.metrics.jwks_fetches.with_label_values(&labels("success")).inc();
                self.metrics.jwks_up.with_label_values(&[&issuer.url]).set(1);
                drop(state);
                self.loads.send_modify(|n| *n += 1);
                true
            }
            Err(message) => {
                let mut state = issuer.write();
                tracing::warn!(
                    issuer = %issuer.url,
                    trigger = trigger.label(),
                    cached_keys = state.keys.len(),
                    error = %message,
                    "cannot fetch the issuer's token signing keys; cached keys stay in use"
                );
                state.failing = true;
                state.jwks_uri = None;
                self.metrics.jwks_fetches.with_label_values(&labels("failure")).inc();
                self.metrics.jwks_up.with_label_values(&[&issuer.url]).set(0);
                false
            }
        }
    }

    /// Discovery, else the Keycloak path; returns the keys and the JWKS URL they came from.
    async fn discover_and_fetch(&self, issuer: &str) -> Result<(Vec<VerifyingKey>, String), String> {
        let base = issuer.trim_end_matches('/');
        let discovery_url = format!("{base}/.well-known/openid-configuration");
        let discovery_error = match self.get_json(&discovery_url).await {
            Ok(doc) => match doc.get("jwks_uri").and_then(Value::as_str) {
                Some(uri) if uri.starts_with("https://") || uri.starts_with("http://") => {
                    if doc.get("issuer").and_then(Value::as_str) != Some(issuer) {
                        tracing::warn!(issuer, discovered = ?doc.get("issuer"), "the discovery document names another issuer");
                    }
                    return self.fetch_keys(uri).await.map(|keys| (keys, uri.to_string()));
                }
                _ => format!("{discovery_url}: no http(s) jwks_uri"),
            },
            Err(e) => e,
        };
        let fallback = format!("{base}/protocol/openid-connect/certs");
        tracing::debug!(issuer, error = %discovery_error, fallback = %fallback, "OIDC discovery failed; trying the Keycloak path");
        match self.fetch_keys(&fallback).await {
            Ok(keys) => Ok((keys, fallback)),
            Err(e) => Err(format!("discovery: {discovery_error}; Keycloak path: {e}")),
        }
    }

    /// GETs a JWKS and keeps its usable keys.
    async fn fetch_keys(&self, url: &str) -> Result<Vec<VerifyingKey>, String> {
        let doc = self.get_json(url).await?;
        let keys = parse_jwks(&doc).map_err(|e| format!("{url}: {e}"))?;
        if keys.is_empty() {
            return Err(format!("{url}: no usable signing key (RSA, EC P-256/P-384)"));
        }
        Ok(keys)
    }

    /// GETs `url` as JSON (at most [`MAX_DOCUMENT_BYTES`]).
    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let mut resp = self
            .client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| format!("{url}: {}", error_chain(&e)))?;
        if !resp.status().is_success() {
            return Err(format!("{url}: HTTP {}", resp.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| format!("{url}: {}", error_chain(&e)))? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("{url}: larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON ({e})"))
    }
}

/// The background task of issuer `index`; see [`Jwks::spawn_refreshers`].
async fn refresh_loop(jwks: Weak<Jwks>, index: usize, mut stopped: tokio::sync::watch::Receiver<()>) {
    let mut failures: u32 = 0;
    loop {
        let delay = {
            let Some(jwks) = jwks.upgrade() else { return };
            let issuer = &jwks.issuers[index];
            let settings = jwks.settings;
            let mut fetched = None;
            if issuer.due(settings.max_age) {
                let _fetching = issuer.fetching.lock().await;
                if issuer.due(settings.max_age) {
                    fetched = Some(jwks.refresh(issuer, Trigger::Background).await);
                }
            }
            // Not due: another fetch succeeded recently.
            failures = match fetched {
                Some(false) => failures.saturating_add(1),
                Some(true) | None => 0,
            };
            if failures > 0 {
                let factor = 2u32.saturating_pow(failures - 1);
                settings.retry_min.saturating_mul(factor).min(settings.retry_max)
            } else {
                let age = issuer.read().fetched_at.map(|t| t.elapsed()).unwrap_or_default();
                settings.max_age.saturating_sub(age).max(settings.retry_min)
            }
        };
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = stopped.changed() => return,
        }
    }
}

/// The usable keys of a JWKS document (`{"keys": [...]}`); unusable or malformed keys are
/// skipped (logged at debug level).
///
/// # Errors
/// A message when the document has no `keys` array.
pub fn parse_jwks(doc: &Value) -> Result<Vec<VerifyingKey>, String> {
    let keys = doc.get("keys").and_then(Value::as_array).ok_or("not a JWKS (no `keys` array)")?;
    Ok(keys
        .iter()
        .filter_map(|k| match serde_json::from_value::<Jwk>(k.clone()) {
            Ok(jwk) => usable_key(&jwk),
            Err(e) => {
                tracing::debug!(kid = ?k.get("kid"), error = %e, "JWK skipped: unreadable");
                None
            }
        })
        .collect())
}

/// The key as a [`VerifyingKey`] if it is an asymmetric signing key this server accepts.
pub fn usable_key(jwk: &Jwk) -> Option<VerifyingKey> {
    let kid = jwk.common.key_id.clone();
    if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    let by_type: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => RSA_ALGORITHMS.to_vec(),
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        None => by_type,
        Some(declared) => {
            let declared = signing_algorithm(declared)?;
            if !by_type.contains(&declared) {
                return None;
            }
            vec![declared]
        }
    };
    match DecodingKey::from_jwk(jwk) {
        Ok(key) => Some(VerifyingKey { kid, algorithms, key }),
        Err(e) => {
            tracing::debug!(kid = ?kid, error = %e, "JWK skipped: bad key material");
            None
        }
    }
}

/// A JWK `alg` as an accepted signature algorithm.
fn signing_algorithm(alg: KeyAlgorithm) -> Option<Algorithm> {
    Some(match alg {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        _ => return None,
    })
}

/// An error with its sources, `a: b: c` (reqwest hides the cause behind "error sending request").
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
impl Jwks {
    /// Caches `keys` for issuer `index` as if just fetched from `jwks_uri`.
    pub(crate) fn seed(&self, index: usize, keys: Vec<VerifyingKey>, jwks_uri: &str) {
        let mut state = self.issuers[index].write();
        state.keys = keys.into_iter().map(Arc::new).collect();
        state.fetched_at = Some(Instant::now());
        state.jwks_uri = Some(jwks_uri.to_string());
    }
}
