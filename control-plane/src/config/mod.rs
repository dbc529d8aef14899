//! Configuration: every setting defined once in [`SETTINGS`] (key, environment variable, flag,
//! default, doc), layered as flags > environment > YAML config file > defaults (DESIGN
//! "Configuration").
//!
//! Loading is the first of two startup stages (STYLE §15): [`load`] only parses and validates
//! (no store, no network); an invalid value is a [`ConfigError`] naming the key and where the
//! value came from. Resolving (opening the store, starting the source) is [`crate::app::App::start`].
//! The resulting [`Config`] is passed explicitly, never read from globals.

pub mod duration;

use crate::cli::ServeArgs;
use schema::kind::Features;
use schema::Timestamp;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One configurable setting.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// The config-file key (`server.address`); for environment-only settings the variable name.
    pub key: &'static str,
    /// Whether the key may appear in the config file.
    pub in_file: bool,
    /// The environment variable.
    pub env: &'static str,
    /// The command-line flag of `serve`, if any.
    pub flag: Option<&'static str>,
    /// The default, as text.
    pub default: &'static str,
    /// What it does (with its unit).
    pub doc: &'static str,
}

const fn setting(key: &'static str, env: &'static str, flag: Option<&'static str>, default: &'static str, doc: &'static str) -> Setting {
    Setting { key, in_file: true, env, flag, default, doc }
}

const fn env_only(env: &'static str, default: &'static str, doc: &'static str) -> Setting {
    Setting { key: env, in_file: false, env, flag: None, default, doc }
}

/// Every setting, in help order. The single definition behind parsing, errors and `--help`.
pub const SETTINGS: &[Setting] = &[
    setting("server.address", "CP_SERVER_ADDRESS", Some("--listen"), "0.0.0.0:8080", "HTTP listen address, HOST:PORT."),
    setting(
        "storage.dataDir",
        "CP_STORAGE_DATA_DIR",
        Some("--data-dir"),
        "./data",
        "Data directory (holds readmodel.redb); created when missing.",
    ),
    setting(
        "storage.cacheSize",
        "CP_STORAGE_CACHE_SIZE",
        None,
        "67108864",
        "redb page cache in bytes (at least 1048576). Pages beyond it are read from the file; raising it trades memory for fewer reads.",
    ),
    setting(
        "source.manifests",
        "CP_SOURCE_MANIFESTS",
        Some("--manifests"),
        "-",
        "Directory of YAML/JSON manifests to project; unset = kube source.",
    ),
    setting(
        "source.kubeUrl",
        "CP_SOURCE_KUBE_URL",
        Some("--kube-url"),
        "-",
        "Kube source: API server URL, used without credentials (kubectl proxy, tests); unset = kubeconfig (KUBECONFIG, ~/.kube/config), else the in-cluster service account.",
    ),
    setting(
        "security.mode",
        "CP_SECURITY_MODE",
        Some("--auth"),
        "jwt",
        "Authentication: jwt (verify tokens) or mock (decode without verifying; local use only).",
    ),
    setting(
        "security.trustedIssuers",
        "CP_SECURITY_TRUSTED_ISSUERS",
        Some("--trusted-issuer"),
        "-",
        "Trusted token issuer URLs (comma-separated in the environment); jwt mode needs at least one.",
    ),
    setting(
        "security.scopePrefix",
        "CP_SECURITY_SCOPE_PREFIX",
        None,
        "tardis",
        "Prefix of the access scope in tokens (<prefix>:<team|group|admin>:<access>).",
    ),
    setting("security.audience", "CP_SECURITY_AUDIENCE", None, "-", "Required token audience; unset = not checked."),
    setting(
        "security.leeway",
        "CP_SECURITY_LEEWAY",
        None,
        "30s",
        "Clock skew tolerated when checking a token's exp and nbf (Go duration, at most 5m).",
    ),
    setting(
        "graphql.maxPageSize",
        "CP_GRAPHQL_MAX_PAGE_SIZE",
        None,
        "1000",
        "Maximum page size of a connection (records), also applied without first/last.",
    ),
    setting("graphql.playgroundEnabled", "CP_GRAPHQL_PLAYGROUND_ENABLED", None, "true", "Serve the GraphiQL page at /graphql."),
    setting(
        "graphql.maxDepth",
        "CP_GRAPHQL_MAX_DEPTH",
        None,
        "20",
        "Maximum nesting depth of a query (levels of fields, fragments expanded; 1 to 30). Error code QUERY_TOO_DEEP.",
    ),
    setting(
        "graphql.maxComplexity",
        "CP_GRAPHQL_MAX_COMPLEXITY",
        None,
        "5000",
        "Maximum selected fields of a query, fragments expanded (aliases count). Error code QUERY_TOO_COMPLEX.",
    ),
    setting(
        "graphql.maxNodes",
        "CP_GRAPHQL_MAX_NODES",
        None,
        "2500000",
        "Maximum worst-case node estimate of a query: first/last (else maxPageSize) multiplied along nested connections, lists counted at their largest possible length. Error code TOO_MANY_NODES.",
    ),
    setting(
        "graphql.maxInputDepth",
        "CP_GRAPHQL_MAX_INPUT_DEPTH",
        None,
        "16",
        "Maximum nesting of lists and input objects in one argument or variable. Error code INPUT_TOO_DEEP.",
    ),
    setting(
        "graphql.maxFilterDepth",
        "CP_GRAPHQL_MAX_FILTER_DEPTH",
        None,
        "3",
        "Maximum nesting of has<Edge>With filters in one where. Error code FILTER_TOO_DEEP.",
    ),
    setting(
        "graphql.maxSearchLength",
        "CP_GRAPHQL_MAX_SEARCH_LENGTH",
        None,
        "256",
        "Maximum bytes of a search text (search:, catalogueSearch(query:)). Error code BAD_USER_INPUT.",
    ),
    setting(
        "graphql.maxSearchTerms",
        "CP_GRAPHQL_MAX_SEARCH_TERMS",
        None,
        "8",
        "Maximum words of a search text. Error code BAD_USER_INPUT.",
    ),
    setting(
        "graphql.maxFilterBytes",
        "CP_GRAPHQL_MAX_FILTER_BYTES",
        None,
        "1048576",
        "Maximum bytes of the operands of a request's where filters together, each use of a variable counted. Error code FILTER_TOO_LARGE.",
    ),
    setting(
        "graphql.maxResponseBytes",
        "CP_GRAPHQL_MAX_RESPONSE_BYTES",
        None,
        "16777216",
        "Maximum bytes of an answer (at least 1024), counted while it is resolved; a larger one ends with one error. Error code RESPONSE_TOO_LARGE.",
    ),
    setting(
        "graphql.workers",
        "CP_GRAPHQL_WORKERS",
        None,
        "0",
        "Threads executing queries at once (0 = one per CPU the process may use, cgroup limits counted; at least 2); heavy queries (large node estimate, search, edge filters) use at most half of them (at least 1).",
    ),
    setting(
        "graphql.queueLength",
        "CP_GRAPHQL_QUEUE_LENGTH",
        None,
        "64",
        "Queries waiting for a worker, per kind (light, heavy); one more gets HTTP 503 with Retry-After.",
    ),
    setting("graphql.introspectionEnabled", "CP_GRAPHQL_INTROSPECTION_ENABLED", None, "true", "Answer introspection queries (__schema, __type)."),
    setting("graphql.requestTimeout", "CP_GRAPHQL_REQUEST_TIMEOUT", None, "10s", "Per-request execution time limit (Go duration); 0s = none."),
    setting("graphql.maxBodyBytes", "CP_GRAPHQL_MAX_BODY_BYTES", None, "1048576", "Maximum size of a POST body in bytes (larger requests get HTTP 413)."),
    setting(
        "source.maxDocumentBytes",
        "CP_SOURCE_MAX_DOCUMENT_BYTES",
        None,
        "1572864",
        "Largest manifest document or Kubernetes object projected, in bytes (at least 1024); a larger one is skipped with its reason and what is stored of it is kept.",
    ),
    setting(
        "secretManager.url",
        "CP_SECRET_MANAGER_URL",
        None,
        "-",
        "Secret manager base URL for resolving $<id> secret references; unset = references are returned as is.",
    ),
    env_only("DEPENDENCY_DELAY", "2s", "Delay before retrying an object whose parent or target is missing (Go duration)."),
    env_only("DEPENDENCY_DELAY_JITTER", "3s", "Random extra delay, uniform in [0, this), added to DEPENDENCY_DELAY."),
    env_only(
        "SKIP_REQUEUE",
        "5m",
        "Delay before translating a skipped object again (kube source; changed objects arrive at once, the manifests source re-reads on change).",
    ),
    env_only("PERIODIC_RESYNC", "0s", "Kube source: each kind's full re-list and sweep interval, ±20 %; 0s = never."),
    env_only("FEATURE_PUBSUB_ENABLED", "true", "Project EventType, EventExposure, EventSubscription."),
    env_only("FEATURE_PERMISSION_ENABLED", "true", "Project PermissionSet."),
    env_only("FEATURE_AI_GATEWAY_ENABLED", "true", "Project McpServer, AgentCard, AgenticExposure, AgenticSubscription."),
    env_only("FEATURE_FILE_MANAGER_ENABLED", "true", "Project FileExposure, FileSubscription."),
];

/// The settings table as help text (appended to `control-plane serve --help`).
pub fn settings_help() -> String {
    let mut out = String::from("Configuration (precedence: flags > environment > --config file > defaults):\n");
    for s in SETTINGS {
        let key = if s.in_file { s.key } else { "(environment only)" };
        let flag = s.flag.map(|f| format!(", {f}")).unwrap_or_default();
        out.push_str(&format!("  {key}\n      {}{flag} [default: {}]\n      {}\n", s.env, s.default, s.doc));
    }
    out.push_str(
        "  (not a setting) CP_LOG_FORMAT, --log-format: text or json [default: text]; RUST_LOG sets the log filter [default: info].\n",
    );
    out
}

/// The whole configuration (after validation).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `server.*`.
    pub server: ServerConfig,
    /// `storage.*`.
    pub storage: StorageConfig,
    /// Where objects come from (`source.manifests` / `--source`).
    pub source: SourceConfig,
    /// `security.*`.
    pub security: SecurityConfig,
    /// `graphql.*`.
    pub graphql: GraphqlConfig,
    /// `secretManager.*`.
    pub secret_manager: SecretManagerConfig,
    /// Projector timing (`DEPENDENCY_DELAY`, …).
    pub projector: ProjectorConfig,
    /// `source.maxDocumentBytes`: the largest document (manifests) or object (kube) projected,
    /// in bytes; default [`DEFAULT_MAX_DOCUMENT_BYTES`], at least 1024.
    pub max_document_bytes: usize,
    /// Feature flags (`FEATURE_*_ENABLED`); a disabled kind is not projected.
    pub features: Features,
    /// `--now`: pins the clock for time-dependent fields and projection times (tests, demos);
    /// `None` = the wall clock.
    pub now: Option<Timestamp>,
}

/// `server.*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// `server.address`: `HOST:PORT` (validated shape; resolved when binding). Default
    /// `0.0.0.0:8080`.
    pub address: String,
}

/// `storage.*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageConfig {
    /// `storage.dataDir`: holds `readmodel.redb`; created when missing. Default `./data`.
    pub data_dir: PathBuf,
    /// `storage.cacheSize`: redb's page cache in bytes, at least 1 MiB. Default 64 MiB
    /// ([`storage::DEFAULT_CACHE_BYTES`]).
    pub cache_bytes: usize,
}

/// The default of `source.maxDocumentBytes`: 1.5 MiB, what the Kubernetes API server accepts
/// for one object (etcd's request limit).
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 1536 * 1024;

/// The object source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceConfig {
    /// Watch the Kubernetes API (`crate::source::kube`).
    Kube(KubeSourceConfig),
    /// Read (and poll) a directory of manifests.
    Manifests(PathBuf),
}

/// The kube source's settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeSourceConfig {
    /// `source.kubeUrl`: the API server URL (`http(s)://host[:port]`, no trailing `/`), used
    /// without credentials. `None` (default) = `kube::Config::infer()`: the kubeconfig
    /// (`KUBECONFIG`, `~/.kube/config`), else the in-cluster service account.
    pub url: Option<String>,
}

/// `security.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthMode {
    /// Verify JWT signatures against trusted issuers (default).
    Jwt,
    /// Decode tokens without verifying signatures (local use only; logged loudly).
    Mock,
}

impl AuthMode {
    /// `jwt` / `mock`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Jwt => "jwt",
            AuthMode::Mock => "mock",
        }
    }
}

/// `security.*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecurityConfig {
    /// `security.mode`, default [`AuthMode::Jwt`].
    pub mode: AuthMode,
    /// `security.trustedIssuers`: issuer URLs (`http(s)://…`); empty = none. Jwt mode with none
    /// is rejected by [`load`].
    pub trusted_issuers: Vec<String>,
    /// `security.scopePrefix`, default `tardis`.
    pub scope_prefix: String,
    /// `security.audience`; `None` = the audience is not checked.
    pub audience: Option<String>,
    /// `security.leeway`: clock skew tolerated for `exp`/`nbf` (whole seconds count), default
    /// 30 s, at most 5 min.
    pub leeway: Duration,
}

/// `graphql.*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphqlConfig {
    /// `graphql.maxPageSize` (records), default 1000, at least 1.
    pub max_page_size: usize,
    /// `graphql.playgroundEnabled`, default `true`.
    pub playground_enabled: bool,
    /// `graphql.maxDepth`: selection-set levels, default 20, at least 1.
    pub max_depth: usize,
    /// `graphql.maxComplexity`: selected fields over the document, default 5000, at least 1.
    pub max_complexity: usize,
    /// `graphql.introspectionEnabled`, default `true`.
    pub introspection_enabled: bool,
    /// `graphql.requestTimeout`, default 10 s; zero = no limit.
    pub request_timeout: Duration,
    /// `graphql.maxBodyBytes`, default 1 MiB, at least 1 KiB.
    pub max_body_bytes: usize,
    /// `graphql.maxNodes`: worst-case node estimate, default 2 500 000, at least 1.
    pub max_nodes: u64,
    /// `graphql.maxInputDepth`: nesting of one argument or variable, default 16, at least 1.
    pub max_input_depth: usize,
    /// `graphql.maxFilterDepth`: nested `has<Edge>With` filters, default 3, at least 1.
    pub max_filter_depth: usize,
    /// `graphql.maxSearchLength`: bytes of a search text, default 256, at least 1.
    pub max_search_bytes: usize,
    /// `graphql.maxSearchTerms`: words of a search text, default 8, at least 1.
    pub max_search_terms: usize,
    /// `graphql.maxFilterBytes`: operands of a request's `where` filters, default 1 048 576, at
    /// least 1.
    pub max_filter_bytes: usize,
    /// `graphql.maxResponseBytes`: bytes of an answer, default 16 MiB, at least 1 KiB.
    pub max_response_bytes: usize,
    /// `graphql.workers`: threads executing queries; 0 (default) = one per CPU core, at
    /// least 2.
    pub workers: usize,
    /// `graphql.queueLength`: waiting queries per lane before HTTP 503, default 64, at least 1.
    pub queue_length: usize,
}

/// `secretManager.*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretManagerConfig {
    /// `secretManager.url`; `None` = secret references are returned unresolved.
    pub url: Option<String>,
}

/// Projector timing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProjectorConfig {
    /// `DEPENDENCY_DELAY`, default 2 s: retry delay for a missing parent or unlinked target.
    pub dependency_delay: Duration,
    /// `DEPENDENCY_DELAY_JITTER`, default 3 s: a uniform random `[0, jitter)` is added.
    pub dependency_delay_jitter: Duration,
    /// `SKIP_REQUEUE`, default 5 min: delay before a skipped object is translated again (kube
    /// source only).
    pub skip_requeue: Duration,
    /// `PERIODIC_RESYNC`, default 0 (never): each kind's full re-list and sweep interval, ±20 %
    /// (kube source only).
    pub periodic_resync: Duration,
}

impl Default for ProjectorConfig {
    fn default() -> ProjectorConfig {
        ProjectorConfig {
            dependency_delay: Duration::from_secs(2),
            dependency_delay_jitter: Duration::from_secs(3),
            skip_requeue: Duration::from_secs(300),
            periodic_resync: Duration::ZERO,
        }
    }
}

impl Default for Config {
    /// The documented defaults. Note: jwt mode without trusted issuers, which [`load`] rejects;
    /// tests set `security.mode = Mock`.
    fn default() -> Config {
        Config {
            server: ServerConfig { address: "0.0.0.0:8080".into() },
            storage: StorageConfig { data_dir: PathBuf::from("./data"), cache_bytes: storage::DEFAULT_CACHE_BYTES },
            source: SourceConfig::Kube(KubeSourceConfig::default()),
            security: SecurityConfig {
                mode: AuthMode::Jwt,
                trusted_issuers: Vec::new(),
                scope_prefix: "tardis".into(),
                audience: None,
                leeway: Duration::from_secs(30),
            },
            graphql: GraphqlConfig {
                max_page_size: 1000,
                playground_enabled: true,
                max_depth: 20,
                max_complexity: 5000,
                introspection_enabled: true,
                request_timeout: Duration::from_secs(10),
                max_body_bytes: 1 << 20,
                max_nodes: 2_500_000,
                max_input_depth: 16,
                max_filter_depth: 3,
                max_search_bytes: 256,
                max_search_terms: 8,
                max_filter_bytes: 1_048_576,
                max_response_bytes: 16 << 20,
                workers: 0,
                queue_length: 64,
            },
            secret_manager: SecretManagerConfig { url: None },
            projector: ProjectorConfig::default(),
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            features: Features::default(),
            now: None,
        }
    }
}

impl Config {
    /// A configuration for local use and tests: manifests from `manifests`, store in `data_dir`,
    /// mock authentication, listening on `127.0.0.1:0` (any free port), other values default.
    pub fn for_manifests(manifests: &Path, data_dir: &Path) -> Config {
        let mut c = Config::default();
        c.server.address = "127.0.0.1:0".into();
        c.storage.data_dir = data_dir.to_path_buf();
        c.source = SourceConfig::Manifests(manifests.to_path_buf());
        c.security.mode = AuthMode::Mock;
        c
    }

    /// Like [`Config::for_manifests`], with the kube source reading the API server at `url`
    /// (`http://127.0.0.1:PORT` in tests).
    pub fn for_kube(url: &str, data_dir: &Path) -> Config {
        let mut c = Config::for_manifests(Path::new("."), data_dir);
        c.source = SourceConfig::Kube(KubeSourceConfig { url: Some(url.trim_end_matches('/').to_string()) });
        c
    }

    /// The clock: the pinned `--now` or the wall clock.
    pub fn clock(&self) -> Clock {
        Clock(self.now)
    }
}

/// The time source: pinned (`--now`) or the wall clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock(pub Option<Timestamp>);

impl Clock {
    /// The current time (the pinned time when set).
    pub fn now(&self) -> Timestamp {
        self.0.unwrap_or_else(|| Timestamp::from_datetime(chrono::Utc::now()))
    }
}

/// Where a value came from (named in error messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A command-line flag.
    Flag(&'static str),
    /// An environment variable.
    Env(&'static str),
    /// The config file.
    File(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Flag(flag) => write!(f, "flag {flag}"),
            Origin::Env(var) => write!(f, "environment variable {var}"),
            Origin::File(p) => write!(f, "config file {}", p.display()),
        }
    }
}

/// A configuration problem. Reaction for all: fix the named value; the process exits with 1.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A value does not parse or is out of range.
    #[error("invalid value for `{key}` (from {origin}): {message}")]
    Invalid {
        /// The setting's key.
        key: &'static str,
        /// Where the value came from.
        origin: Origin,
        /// What is wrong.
        message: String,
    },
    /// The config file cannot be read or is not a YAML mapping.
    #[error("config file {path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The config file holds a key that is not a setting.
    #[error("config file {path}: unknown key `{key}` (known keys: {known})")]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// The dotted key.
        key: String,
        /// The accepted keys.
        known: String,
    },
    /// Jwt mode without a trusted issuer (fail-closed, DESIGN decision 10).
    #[error(
        "security.mode is jwt but no trusted issuer is configured: set security.trustedIssuers \
         (CP_SECURITY_TRUSTED_ISSUERS or --trusted-issuer URL), or use --auth mock for local use \
         (tokens are then not verified)"
    )]
    NoTrustedIssuer,
}

/// A raw value: one scalar or a list.
#[derive(Clone, Debug)]
enum Raw {
    One(String),
    List(Vec<String>),
}

/// The three layers below the defaults.
struct Layers<'a> {
    flags: BTreeMap<&'static str, Raw>,
    env: &'a dyn Fn(&str) -> Option<String>,
    file: BTreeMap<String, Raw>,
    file_path: PathBuf,
}

impl Layers<'_> {
    /// The highest-precedence value of `key`, with its origin.
    fn get(&self, key: &str) -> Option<(Raw, Origin)> {
        let s = SETTINGS.iter().find(|s| s.key == key).expect("settings lookup: key is in SETTINGS");
        if let Some(v) = self.flags.get(key) {
            return Some((v.clone(), Origin::Flag(s.flag.unwrap_or("?"))));
        }
        if let Some(v) = (self.env)(s.env) {
            return Some((Raw::One(v), Origin::Env(s.env)));
        }
        if s.in_file {
            if let Some(v) = self.file.get(key) {
                return Some((v.clone(), Origin::File(self.file_path.clone())));
            }
        }
        None
    }

    /// A scalar value parsed by `parse`, or `None` when unset.
    fn scalar<T>(&self, key: &'static str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Option<T>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some((Raw::One(v), origin)) => parse(&v).map(Some).map_err(|message| ConfigError::Invalid { key, origin, message }),
            Some((Raw::List(_), origin)) => {
                Err(ConfigError::Invalid { key, origin, message: "expected a single value, got a list".into() })
            }
        }
    }

    /// A list value (a list in the file or repeated flags; comma-separated in the environment
    /// or as a file scalar), each item checked by `check`.
    fn list(&self, key: &'static str, check: impl Fn(&str) -> Result<(), String>) -> Result<Option<Vec<String>>, ConfigError> {
        let Some((raw, origin)) = self.get(key) else { return Ok(None) };
        let items: Vec<String> = match raw {
            Raw::One(v) => v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
            Raw::List(v) => v.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
        };
        for i in &items {
            check(i).map_err(|message| ConfigError::Invalid { key, origin: origin.clone(), message })?;
        }
        Ok(Some(items))
    }
}

/// Parses `true`/`false` like Go's `strconv.ParseBool` (`1`, `t`, `TRUE`, `0`, `f`, …).
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(format!("expected true or false, got {other:?}")),
    }
}

fn parse_address(s: &str) -> Result<String, String> {
    let s = s.trim();
    let bad = || format!("expected HOST:PORT (e.g. 0.0.0.0:8080), got {s:?}");
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!("an IPv6 host must be in brackets, e.g. [::]:8080; got {s:?}"));
    }
    Ok(s.to_string())
}

fn parse_url(s: &str) -> Result<(), String> {
    let rest = s.strip_prefix("https://").or_else(|| s.strip_prefix("http://"));
    match rest {
        Some(r) if !r.is_empty() && !r.starts_with('/') && !s.contains(char::is_whitespace) => Ok(()),
        _ => Err(format!("expected an http(s) URL, got {s:?}")),
    }
}

fn non_empty_path(s: &str) -> Result<PathBuf, String> {
    if s.trim().is_empty() {
        Err("expected a directory path, got an empty value".into())
    } else {
        Ok(PathBuf::from(s))
    }
}

fn parse_mode(s: &str) -> Result<AuthMode, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "jwt" => Ok(AuthMode::Jwt),
        "mock" => Ok(AuthMode::Mock),
        other => Err(format!("expected jwt or mock, got {other:?}")),
    }
}

/// A whole number of at least `min`.
fn parse_at_least(s: &str, min: usize) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        _ => Err(format!("expected a whole number of at least {min}, got {s:?}")),
    }
}

/// A whole number from `min` to `max`.
fn parse_between(s: &str, min: usize, max: usize) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from {min} to {max}, got {s:?}")),
    }
}

fn parse_page_size(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if (1..=i64::from(i32::MAX)).contains(&n) => Ok(n as usize),
        _ => Err(format!("expected a whole number between 1 and {}, got {s:?}", i32::MAX)),
    }
}

fn parse_scope_prefix(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() || s.contains(':') || s.contains(char::is_whitespace) {
        Err(format!("expected a non-empty word without ':' or spaces, got {s:?}"))
    } else {
        Ok(s.to_string())
    }
}

fn parse_leeway(s: &str) -> Result<Duration, String> {
    let d = duration::parse(s)?;
    if d > Duration::from_secs(300) {
        return Err(format!("at most 5m (a small clock skew), got {s:?}"));
    }
    Ok(d)
}

fn non_empty(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        Err("expected a non-empty value".into())
    } else {
        Ok(s.trim().to_string())
    }
}

/// Flattens a YAML mapping into dotted keys (`server.address`). Sequences stay lists.
fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, Raw>, path: &Path) -> Result<(), ConfigError> {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, out, path)?;
            }
        }
        Value::Array(items) => {
            let mut list = Vec::new();
            for i in items {
                match scalar_text(i) {
                    Some(s) => list.push(s),
                    None => {
                        return Err(ConfigError::File {
                            path: path.to_path_buf(),
                            message: format!("`{prefix}`: list items must be scalars"),
                        });
                    }
                }
            }
            out.insert(prefix.to_string(), Raw::List(list));
        }
        Value::Null => {}
        other => {
            let s = scalar_text(other).unwrap_or_default();
            out.insert(prefix.to_string(), Raw::One(s));
        }
    }
    Ok(())
}

fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Parses the config file text (YAML mapping with the keys of [`SETTINGS`], nested or dotted).
fn parse_file(path: &Path, text: &str) -> Result<BTreeMap<String, Raw>, ConfigError> {
    let mut out = BTreeMap::new();
    if text.trim().is_empty() {
        return Ok(out);
    }
    let v: Value =
        serde_saphyr::from_str(text).map_err(|e| ConfigError::File { path: path.to_path_buf(), message: one_line(&e.to_string()) })?;
    match &v {
        Value::Null => return Ok(out),
        Value::Object(_) => flatten("", &v, &mut out, path)?,
        _ => return Err(ConfigError::File { path: path.to_path_buf(), message: "expected a YAML mapping at the top level".into() }),
    }
    for key in out.keys() {
        if !SETTINGS.iter().any(|s| s.in_file && s.key == key) {
            let known = SETTINGS.iter().filter(|s| s.in_file).map(|s| s.key).collect::<Vec<_>>().join(", ");
            return Err(ConfigError::UnknownKey { path: path.to_path_buf(), key: key.clone(), known });
        }
    }
    Ok(out)
}

/// Joins a multi-line message into one line.
pub(crate) fn one_line(s: &str) -> String {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Builds the flag layer from `serve`'s arguments.
fn flag_layer(args: &ServeArgs) -> BTreeMap<&'static str, Raw> {
    let mut m = BTreeMap::new();
    if let Some(v) = &args.listen {
        m.insert("server.address", Raw::One(v.clone()));
    }
    if let Some(v) = &args.data_dir {
        m.insert("storage.dataDir", Raw::One(v.to_string_lossy().into_owned()));
    }
    if let Some(v) = &args.manifests {
        m.insert("source.manifests", Raw::One(v.to_string_lossy().into_owned()));
    }
    if let Some(v) = &args.kube_url {
        m.insert("source.kubeUrl", Raw::One(v.clone()));
    }
    if let Some(v) = &args.auth {
        m.insert("security.mode", Raw::One(v.clone()));
    }
    if !args.trusted_issuer.is_empty() {
        m.insert("security.trustedIssuers", Raw::List(args.trusted_issuer.clone()));
    }
    m
}

/// Stage 1: builds and validates the configuration from `serve`'s flags, the environment (a
/// lookup function, so tests need not touch the process environment) and the config file's
/// text (`(path, text)`, already read by the caller). No other I/O.
///
/// # Errors
/// [`ConfigError`] naming the first invalid setting.
pub fn load(args: &ServeArgs, env: &dyn Fn(&str) -> Option<String>, file: Option<(&Path, &str)>) -> Result<Config, ConfigError> {
    let (file_path, file_map) = match file {
        Some((p, text)) => (p.to_path_buf(), parse_file(p, text)?),
        None => (PathBuf::new(), BTreeMap::new()),
    };
    let layers = Layers { flags: flag_layer(args), env, file: file_map, file_path };
    let d = Config::default();

    let address = layers.scalar("server.address", parse_address)?.unwrap_or(d.server.address);
    let data_dir = layers.scalar("storage.dataDir", non_empty_path)?.unwrap_or(d.storage.data_dir);
    let cache_bytes = layers.scalar("storage.cacheSize", |s| parse_at_least(s, 1 << 20))?.unwrap_or(d.storage.cache_bytes);
    let manifests = layers.scalar("source.manifests", non_empty_path)?;
    let kube_url = layers.scalar("source.kubeUrl", |s| {
        parse_url(s.trim())?;
        Ok(s.trim().trim_end_matches('/').to_string())
    })?;
    let kube = KubeSourceConfig { url: kube_url };
    let source = match (args.source.as_deref(), manifests) {
        (Some("kube"), _) => SourceConfig::Kube(kube),
        (Some("manifests"), Some(dir)) | (None, Some(dir)) => SourceConfig::Manifests(dir),
        (Some("manifests"), None) => {
            return Err(ConfigError::Invalid {
                key: "source.manifests",
                origin: Origin::Flag("--source"),
                message: "--source manifests needs a directory: --manifests DIR or CP_SOURCE_MANIFESTS".into(),
            });
        }
        (Some(other), _) => {
            return Err(ConfigError::Invalid {
                key: "source.manifests",
                origin: Origin::Flag("--source"),
                message: format!("unknown source {other:?} (expected kube or manifests)"),
            });
        }
        (None, None) => SourceConfig::Kube(kube),
    };
    let mode = layers.scalar("security.mode", parse_mode)?.unwrap_or(d.security.mode);
    let trusted_issuers = layers.list("security.trustedIssuers", parse_url)?.unwrap_or_default();
    let scope_prefix = layers.scalar("security.scopePrefix", parse_scope_prefix)?.unwrap_or(d.security.scope_prefix);
    let audience = layers.scalar("security.audience", non_empty)?;
    let leeway = layers.scalar("security.leeway", parse_leeway)?.unwrap_or(d.security.leeway);
    let max_page_size = layers.scalar("graphql.maxPageSize", parse_page_size)?.unwrap_or(d.graphql.max_page_size);
    let playground_enabled = layers.scalar("graphql.playgroundEnabled", parse_bool)?.unwrap_or(d.graphql.playground_enabled);
    let max_depth =
        layers.scalar("graphql.maxDepth", |s| parse_between(s, 1, query::limits::MAX_DEPTH_CEILING))?.unwrap_or(d.graphql.max_depth);
    let max_complexity = layers.scalar("graphql.maxComplexity", |s| parse_at_least(s, 1))?.unwrap_or(d.graphql.max_complexity);
    let introspection_enabled = layers.scalar("graphql.introspectionEnabled", parse_bool)?.unwrap_or(d.graphql.introspection_enabled);
    let request_timeout = layers.scalar("graphql.requestTimeout", duration::parse)?.unwrap_or(d.graphql.request_timeout);
    let max_body_bytes = layers.scalar("graphql.maxBodyBytes", |s| parse_at_least(s, 1024))?.unwrap_or(d.graphql.max_body_bytes);
    let whole = |key: &'static str, min: usize, default: usize| -> Result<usize, ConfigError> {
        Ok(layers.scalar(key, |s| parse_at_least(s, min))?.unwrap_or(default))
    };
    let max_nodes = whole("graphql.maxNodes", 1, d.graphql.max_nodes as usize)? as u64;
    let max_input_depth = whole("graphql.maxInputDepth", 1, d.graphql.max_input_depth)?;
    let max_filter_depth = whole("graphql.maxFilterDepth", 1, d.graphql.max_filter_depth)?;
    let max_search_bytes = whole("graphql.maxSearchLength", 1, d.graphql.max_search_bytes)?;
    let max_search_terms = whole("graphql.maxSearchTerms", 1, d.graphql.max_search_terms)?;
    let max_filter_bytes = whole("graphql.maxFilterBytes", 1, d.graphql.max_filter_bytes)?;
    let max_response_bytes = whole("graphql.maxResponseBytes", 1024, d.graphql.max_response_bytes)?;
    let workers = whole("graphql.workers", 0, d.graphql.workers)?;
    let queue_length = whole("graphql.queueLength", 1, d.graphql.queue_length)?;
    let max_document_bytes = whole("source.maxDocumentBytes", 1024, d.max_document_bytes)?;
    let secret_url = layers.scalar("secretManager.url", |s| {
        parse_url(s.trim())?;
        Ok(s.trim().trim_end_matches('/').to_string())
    })?;
    let dur = |key: &'static str, default: Duration| -> Result<Duration, ConfigError> {
        Ok(layers.scalar(key, duration::parse)?.unwrap_or(default))
    };
    let projector = ProjectorConfig {
        dependency_delay: dur("DEPENDENCY_DELAY", d.projector.dependency_delay)?,
        dependency_delay_jitter: dur("DEPENDENCY_DELAY_JITTER", d.projector.dependency_delay_jitter)?,
        skip_requeue: dur("SKIP_REQUEUE", d.projector.skip_requeue)?,
        periodic_resync: dur("PERIODIC_RESYNC", d.projector.periodic_resync)?,
    };
    let features = features(&layers)?;
    let now = match &args.now {
        None => None,
        Some(s) => Some(Timestamp::parse_rfc3339(s.trim()).map_err(|e| ConfigError::Invalid {
            key: "now",
            origin: Origin::Flag("--now"),
            message: format!("expected an RFC 3339 time such as 2026-09-01T00:00:00Z, got {s:?} ({e})"),
        })?),
    };
    if mode == AuthMode::Jwt && trusted_issuers.is_empty() {
        return Err(ConfigError::NoTrustedIssuer);
    }
    Ok(Config {
        server: ServerConfig { address },
        storage: StorageConfig { data_dir, cache_bytes },
        source,
        security: SecurityConfig { mode, trusted_issuers, scope_prefix, audience, leeway },
        graphql: GraphqlConfig {
            max_page_size,
            playground_enabled,
            max_depth,
            max_complexity,
            introspection_enabled,
            request_timeout,
            max_body_bytes,
            max_nodes,
            max_input_depth,
            max_filter_depth,
            max_search_bytes,
            max_search_terms,
            max_filter_bytes,
            max_response_bytes,
            workers,
            queue_length,
        },
        secret_manager: SecretManagerConfig { url: secret_url },
        projector,
        max_document_bytes,
        features,
        now,
    })
}

fn features(layers: &Layers<'_>) -> Result<Features, ConfigError> {
    let flag = |key: &'static str| -> Result<bool, ConfigError> { Ok(layers.scalar(key, parse_bool)?.unwrap_or(true)) };
    Ok(Features {
        pubsub: flag("FEATURE_PUBSUB_ENABLED")?,
        permission: flag("FEATURE_PERMISSION_ENABLED")?,
        ai_gateway: flag("FEATURE_AI_GATEWAY_ENABLED")?,
        file_manager: flag("FEATURE_FILE_MANAGER_ENABLED")?,
    })
}

/// Feature flags from the environment alone (used by `check`).
///
/// # Errors
/// [`ConfigError::Invalid`] for a value that is not a boolean.
pub fn features_from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Features, ConfigError> {
    let layers = Layers { flags: BTreeMap::new(), env, file: BTreeMap::new(), file_path: PathBuf::new() };
    features(&layers)
}

/// [`load`] with the process environment and the `--config` file read from disk.
///
/// # Errors
/// [`ConfigError`] for an unreadable config file or any invalid value.
pub fn load_from_process(args: &ServeArgs) -> Result<Config, ConfigError> {
    let env = |k: &str| std::env::var(k).ok();
    match &args.config {
        None => load(args, &env, None),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File { path: path.clone(), message: e.to_string() })?;
            load(args, &env, Some((path, &text)))
        }
    }
}

/// The log output format (`--log-format` / `CP_LOG_FORMAT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (default).
    Text,
    /// One JSON object per line.
    Json,
}

/// Resolves the log format from the flag, then `CP_LOG_FORMAT`.
///
/// # Errors
/// A message naming the invalid value.
pub fn log_format(flag: Option<&str>, env: &dyn Fn(&str) -> Option<String>) -> Result<LogFormat, ConfigError> {
    let (v, origin) = match (flag, env("CP_LOG_FORMAT")) {
        (Some(f), _) => (f.to_string(), Origin::Flag("--log-format")),
        (None, Some(e)) => (e, Origin::Env("CP_LOG_FORMAT")),
        (None, None) => return Ok(LogFormat::Text),
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "text" | "" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        other => Err(ConfigError::Invalid { key: "CP_LOG_FORMAT", origin, message: format!("expected text or json, got {other:?}") }),
    }
}

#[cfg(test)]
mod tests;
