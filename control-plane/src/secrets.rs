//! The secret manager client (`secretManager.*`; ARCHITECTURE.md "Viewers and visibility"): resolves secret
//! references `$<id>` for [`query::secrets`] with `GET <secretManager.url>/v1/secrets/<id>`,
//! answered `{"value": "<secret>"}`.
//!
//! - The bearer token is read from `secretManager.tokenFile` for every request (projected
//!   tokens rotate), at most [`MAX_TOKEN_BYTES`].
//! - TLS trusts the system's CAs plus the PEM bundle `secretManager.caFile`, read at start.
//!   Redirects are not followed (they could carry the token elsewhere).
//! - Concurrent lookups of one id are coalesced into one request; a resolved value is reused for
//!   `secretManager.cacheTtl` (failures are not kept). The cache holds at most
//!   [`MAX_CACHE_BYTES`] of ids and values.
//! - At most [`MAX_CONCURRENT_REQUESTS`] requests are in flight; one lookup, waiting for its
//!   turn included, takes at most `secretManager.timeout`. The futures only await: no thread
//!   blocks on the manager.
//! - A value is at most [`MAX_VALUE_BYTES`] of JSON. Failures are logged with the field and the
//!   reason (status code, connection error, timeout), never a response body or a value.
//!
//! Metrics: `controlplane_secret_lookups_total{outcome}` (`cached`, `fetched`, `failed`) per
//! field resolution, `controlplane_secret_manager_requests_total{result}` (`ok`, `error`,
//! `timeout`) and `controlplane_secret_manager_request_seconds` per request to the manager.

use crate::config::{SecretManagerConfig, DEFAULT_SECRET_MANAGER_CA_FILE};
use prometheus::{Histogram, HistogramOpts, IntCounterVec, Opts, Registry};
use query::secrets::{lookup_path, Resolution, SecretLookup, SecretResolver, SecretUnresolved};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Requests to the secret manager in flight at once.
pub const MAX_CONCURRENT_REQUESTS: usize = 16;
/// The largest answer of the secret manager read, in bytes.
pub const MAX_VALUE_BYTES: usize = 64 << 10;
/// The largest token file read, in bytes.
pub const MAX_TOKEN_BYTES: u64 = 64 << 10;
/// The largest CA file read, in bytes.
pub const MAX_CA_FILE_BYTES: u64 = 4 << 20;
/// Bytes of ids and values the cache keeps at most.
pub const MAX_CACHE_BYTES: u64 = 16 << 20;

/// Why the client could not be set up (at start).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// The CA file is unreadable or holds no certificate.
    #[error("{key} {path}: {reason}")]
    CaFile {
        /// The setting naming the file (`secretManager.caFile`).
        key: &'static str,
        /// The configured file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The HTTP client could not be built.
    #[error("the secret manager's HTTP client: {0}")]
    HttpClient(String),
}

/// Metrics of secret resolution, registered in the process registry.
#[derive(Clone)]
pub struct SecretMetrics {
    /// `controlplane_secret_lookups_total{outcome}`.
    pub lookups: IntCounterVec,
    /// `controlplane_secret_manager_requests_total{result}`.
    pub requests: IntCounterVec,
    /// `controlplane_secret_manager_request_seconds`.
    pub request_seconds: Histogram,
}

impl SecretMetrics {
    /// Creates the metrics and registers them in `registry` (a name already registered is
    /// logged and the metric stays unexported).
    pub fn new(registry: &Registry) -> SecretMetrics {
        let lookups = IntCounterVec::new(
            Opts::new(
                "controlplane_secret_lookups_total",
                "Secret references resolved for GraphQL fields, by outcome (cached, fetched, failed).",
            ),
            &["outcome"],
        )
        .expect("metric definition is valid");
        let requests = IntCounterVec::new(
            Opts::new("controlplane_secret_manager_requests_total", "Requests to the secret manager, by result (ok, error, timeout)."),
            &["result"],
        )
        .expect("metric definition is valid");
        let request_seconds = Histogram::with_opts(
            HistogramOpts::new("controlplane_secret_manager_request_seconds", "Duration of requests to the secret manager.")
                .buckets(vec![0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
        )
        .expect("metric definition is valid");
        for c in [
            Box::new(lookups.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(requests.clone()),
            Box::new(request_seconds.clone()),
        ] {
            if let Err(e) = registry.register(c) {
                tracing::warn!(error = %e, "a secret metric is not exported");
            }
        }
        for outcome in ["cached", "fetched", "failed"] {
            lookups.with_label_values(&[outcome]);
        }
        for result in ["ok", "error", "timeout"] {
            requests.with_label_values(&[result]);
        }
        SecretMetrics { lookups, requests, request_seconds }
    }
}

/// The secret manager client; see the module docs. Cheap to clone.
#[derive(Clone)]
pub struct SecretManager(Arc<SecretManagerState>);

struct SecretManagerState {
    /// `<secretManager.url>/`.
    base: String,
    token_file: PathBuf,
    timeout: Duration,
    client: reqwest::Client,
    cache: moka::future::Cache<String, Arc<str>>,
    requests: tokio::sync::Semaphore,
    metrics: SecretMetrics,
}

impl std::fmt::Debug for SecretManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretManager").field("base", &self.0.base).finish_non_exhaustive()
    }
}

impl SecretManager {
    /// The client of `config`, `None` when `secretManager.url` is unset. Reads the CA file.
    ///
    /// # Errors
    /// [`SetupError`] when a configured CA file (other than the in-cluster default) is missing,
    /// any CA file is unreadable or holds no certificate, or the client cannot be built.
    pub fn new(config: &SecretManagerConfig, registry: &Registry) -> Result<Option<SecretManager>, SetupError> {
        let Some(url) = &config.url else { return Ok(None) };
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            // The whole lookup's limit is `fetch`'s; this one only bounds connecting.
            .connect_timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(MAX_CONCURRENT_REQUESTS)
            .user_agent(concat!("control-plane/", env!("CARGO_PKG_VERSION")));
        for certificate in ca_certificates(&config.ca_file, "secretManager.caFile")? {
            builder = builder.add_root_certificate(certificate);
        }
        let client = builder.build().map_err(|e| {
            let reason = crate::auth::jwks::error_chain(&e);
            if reason.contains("certificate") {
                SetupError::CaFile { key: "secretManager.caFile", path: config.ca_file.clone(), reason }
            } else {
                SetupError::HttpClient(reason)
            }
        })?;
        let cache = moka::future::Cache::builder()
            .time_to_live(config.cache_ttl)
            .weigher(|id: &String, value: &Arc<str>| u32::try_from(id.len() + value.len()).unwrap_or(u32::MAX))
            .max_capacity(MAX_CACHE_BYTES)
            .build();
        Ok(Some(SecretManager(Arc::new(SecretManagerState {
            base: format!("{url}/"),
            token_file: config.token_file.clone(),
            timeout: config.timeout,
            client,
            cache,
            requests: tokio::sync::Semaphore::new(MAX_CONCURRENT_REQUESTS),
            metrics: SecretMetrics::new(registry),
        }))))
    }

    /// `self` as the GraphQL layer's resolver.
    pub fn resolver(&self) -> Arc<dyn SecretResolver> {
        Arc::new(self.clone())
    }
}

/// The certificates of the CA bundle at `path` (setting `key`); none when the in-cluster default
/// is absent.
pub(crate) fn ca_certificates(path: &PathBuf, key: &'static str) -> Result<Vec<reqwest::Certificate>, SetupError> {
    use std::io::Read;
    let error = |reason: String| SetupError::CaFile { key, path: path.clone(), reason };
    let file = match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => return Err(error("not a regular file".into())),
        Ok(_) => std::fs::File::open(path).map_err(|e| error(e.to_string()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && path.as_os_str() == DEFAULT_SECRET_MANAGER_CA_FILE => {
            tracing::info!(path = %path.display(), setting = key, "no trust bundle at the default path: the system's CAs are trusted");
            return Ok(Vec::new());
        }
        Err(e) => return Err(error(e.to_string())),
    };
    let mut pem = Vec::new();
    file.take(MAX_CA_FILE_BYTES + 1).read_to_end(&mut pem).map_err(|e| error(e.to_string()))?;
    if pem.len() as u64 > MAX_CA_FILE_BYTES {
        return Err(error(format!("larger than {MAX_CA_FILE_BYTES} bytes")));
    }
    let certificates = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| error(crate::auth::jwks::error_chain(&e)))?;
    if certificates.is_empty() {
        return Err(error("no PEM certificate in the file".into()));
    }
    Ok(certificates)
}

impl SecretResolver for SecretManager {
    fn resolve(&self, lookup: SecretLookup) -> Resolution {
        let inner = self.0.clone();
        Box::pin(async move {
            if let Some(value) = inner.cache.get(&lookup.id).await {
                inner.metrics.lookups.with_label_values(&["cached"]).inc();
                return Ok(value.to_string());
            }
            let fetch = inner.fetch(&lookup);
            match inner.cache.try_get_with(lookup.id.clone(), fetch).await {
                Ok(value) => {
                    inner.metrics.lookups.with_label_values(&["fetched"]).inc();
                    Ok(value.to_string())
                }
                Err(_) => {
                    inner.metrics.lookups.with_label_values(&["failed"]).inc();
                    Err(SecretUnresolved)
                }
            }
        })
    }
}

impl SecretManagerState {
    /// One request for `lookup`, bounded by the timeout (its turn included); logs why it
    /// failed.
    async fn fetch(&self, lookup: &SecretLookup) -> Result<Arc<str>, SecretUnresolved> {
        let unresolved = |reason: String| {
            tracing::warn!(field = lookup.field, reason, "a secret could not be resolved");
            SecretUnresolved
        };
        // Without a token no request is sent (nor counted as one).
        let token = read_token(&self.token_file, "secretManager.tokenFile").await.map_err(unresolved)?;
        let started = Instant::now();
        let outcome = tokio::time::timeout(self.timeout, async {
            let _turn = self.requests.acquire().await.map_err(|_| "the client is shutting down".to_string())?;
            self.request(&lookup.id, &token).await
        })
        .await;
        self.metrics.request_seconds.observe(started.elapsed().as_secs_f64());
        let (result, outcome) = match outcome {
            Ok(Ok(value)) => ("ok", Ok(value)),
            Ok(Err(reason)) => ("error", Err(reason)),
            Err(_) => ("timeout", Err(format!("no answer within {:?} (secretManager.timeout)", self.timeout))),
        };
        self.metrics.requests.with_label_values(&[result]).inc();
        outcome.map_err(unresolved)
    }

    async fn request(&self, id: &str, token: &str) -> Result<Arc<str>, String> {
        let url = format!("{}{}", self.base, lookup_path(id));
        let chain = |e: reqwest::Error| crate::auth::jwks::error_chain(&e.without_url());
        let mut response =
            self.client.get(url).bearer_auth(token).header(reqwest::header::ACCEPT, "application/json").send().await.map_err(chain)?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(format!("the secret manager answered HTTP {}", response.status()));
        }
        let body = read_body(&mut response, MAX_VALUE_BYTES).await?;
        #[derive(serde::Deserialize)]
        struct Answer {
            value: String,
        }
        // The parser's message could quote the body: only its position is kept.
        let answer: Answer = serde_json::from_slice(&body)
            .map_err(|e| format!("the answer is not {{\"value\": \"…\"}} (line {}, column {})", e.line(), e.column()))?;
        Ok(Arc::from(answer.value))
    }
}

/// The body of `response`, refused once it passes `max` bytes (read chunk by chunk, so no more
/// than that is held).
///
/// # Errors
/// The reason, for the log: too large, or the connection failed.
pub(crate) async fn read_body(response: &mut reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| crate::auth::jwks::error_chain(&e.without_url()))? {
        if body.len() + chunk.len() > max {
            return Err(format!("the answer is larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The bearer token: the trimmed text of `path` (setting `key`), at most [`MAX_TOKEN_BYTES`].
pub(crate) async fn read_token(path: &PathBuf, key: &str) -> Result<String, String> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::open(path).await.map_err(|e| format!("{key} {}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_TOKEN_BYTES + 1).read_to_string(&mut text).await.map_err(|e| format!("{key} {}: {e}", path.display()))?;
    if text.len() as u64 > MAX_TOKEN_BYTES {
        return Err(format!("{key} {}: larger than {MAX_TOKEN_BYTES} bytes", path.display()));
    }
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("{key} {}: empty", path.display()));
    }
    Ok(token.to_string())
}
