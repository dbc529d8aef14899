//! Configuration: every setting declared once, as one row of [`SETTINGS`] (file key,
//! environment variable, flag, default, help line and how its value is parsed and applied),
//! layered as flags > environment > YAML config file > defaults (the README's "Configuration").
//! `serve`'s flags ([`crate::cli::SettingFlags`]), [`Config::default`], the help text and the
//! README's table all come from that row.
//!
//! Loading is the first of two startup stages (the second, resolving, is [`crate::app`]): [`load`] only parses and validates
//! (no store, no network); an invalid value is a [`ConfigError`] naming the key and where the
//! value came from. Resolving (opening the store, starting the source) is [`crate::app::App::start`].
//! The resulting [`Config`] is passed explicitly, never read from globals.

pub mod duration;

use crate::cli::ServeArgs;
use const_format::formatcp;
use query::limits::Limits;
use schema::kind::Features;
use schema::Timestamp;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most query threads `graphql.workers` may ask for: each is an OS thread with its stack,
/// and more than the cores of a large node only wait on each other.
pub const MAX_WORKERS: usize = 256;

/// The default of a setting that is unset unless given (shown as such in the help).
pub const UNSET: &str = "-";

/// How a setting's value is parsed and applied; the error says what is wrong with the value.
type Apply = fn(&mut Draft, &Raw) -> Result<(), String>;

/// One configurable setting: one row of [`SETTINGS`].
#[derive(Clone, Copy)]
pub struct Setting {
    /// The config-file key (`server.address`); for environment-only settings the variable name.
    pub key: &'static str,
    /// Whether the key may appear in the config file (and has a flag).
    pub in_file: bool,
    /// The environment variable.
    pub env: &'static str,
    /// The flag's name when it is not the one derived from the key (see [`Setting::flag`]).
    long: Option<&'static str>,
    /// What the value is, in the help (`N`, `DURATION`, `URL`, …).
    pub value_name: &'static str,
    /// Whether the value is a list (a YAML list, a repeated flag, comma-separated in the
    /// environment).
    pub list: bool,
    /// Flag ids this setting's flag cannot be combined with.
    pub conflicts_with: &'static [&'static str],
    /// The default, as text ([`UNSET`] = none).
    pub default: &'static str,
    /// What it does (with its unit).
    pub doc: &'static str,
    /// Parses a value and sets it; the error says what is wrong with it.
    apply: Apply,
}

impl fmt::Debug for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Setting").field("key", &self.key).field("env", &self.env).field("default", &self.default).finish()
    }
}

impl Setting {
    /// A setting of the config file, with its environment variable and a flag.
    const fn file(
        key: &'static str,
        env: &'static str,
        value_name: &'static str,
        default: &'static str,
        doc: &'static str,
        apply: Apply,
    ) -> Setting {
        Setting { key, in_file: true, env, long: None, value_name, list: false, conflicts_with: &[], default, doc, apply }
    }

    /// A setting of the environment only (the Go system's variable names).
    const fn env_only(env: &'static str, value_name: &'static str, default: &'static str, doc: &'static str, apply: Apply) -> Setting {
        Setting { in_file: false, ..Setting::file(env, env, value_name, default, doc, apply) }
    }

    /// The flag is `long` (without `--`) instead of the one derived from the key.
    const fn long(self, long: &'static str) -> Setting {
        Setting { long: Some(long), ..self }
    }

    /// The value is a list.
    const fn list(self) -> Setting {
        Setting { list: true, ..self }
    }

    /// The flag cannot be combined with these flag ids.
    const fn conflicts_with(self, ids: &'static [&'static str]) -> Setting {
        Setting { conflicts_with: ids, ..self }
    }

    /// The flag of `serve` (`--listen`; derived from the key otherwise: `graphql.maxPageSize`
    /// is `--graphql-max-page-size`); `None` for environment-only settings.
    pub fn flag(&self) -> Option<String> {
        if !self.in_file {
            return None;
        }
        if let Some(long) = self.long {
            return Some(format!("--{long}"));
        }
        let mut flag = String::from("--");
        for c in self.key.chars() {
            match c {
                '.' => flag.push('-'),
                c if c.is_ascii_uppercase() => {
                    flag.push('-');
                    flag.push(c.to_ascii_lowercase());
                }
                c => flag.push(c),
            }
        }
        Some(flag)
    }
}

/// Every setting, in help order: the single definition behind parsing, flags, defaults, errors
/// and `--help`.
pub const SETTINGS: &[Setting] = &[
    Setting::file("server.address", "CP_SERVER_ADDRESS", "HOST:PORT", "0.0.0.0:8080", "HTTP listen address, HOST:PORT.", |d, v| {
        set(&mut d.config.server.address, parse_address(one(v)?))
    })
    .long("listen"),
    Setting::file(
        "server.headerTimeout",
        "CP_SERVER_HEADER_TIMEOUT",
        "DURATION",
        "10s",
        "Time from a request's first byte to the end of its header (1s to 5m); a connection that sends less is closed.",
        |d, v| set(&mut d.config.server.header_timeout, parse_duration_between(one(v)?, Duration::from_secs(1), Duration::from_secs(300))),
    ),
    Setting::file(
        "server.bodyTimeout",
        "CP_SERVER_BODY_TIMEOUT",
        "DURATION",
        "30s",
        "Time to receive a request's body once its header is read (1s to 1h); a slower body is answered 408 and its connection closed.",
        |d, v| set(&mut d.config.server.body_timeout, parse_duration_between(one(v)?, Duration::from_secs(1), Duration::from_secs(3600))),
    ),
    Setting::file(
        "server.idleTimeout",
        "CP_SERVER_IDLE_TIMEOUT",
        "DURATION",
        "60s",
        "A keep-alive connection without a request in progress is closed after this (1s to 1h); WebSockets keep the subscriptions.* limits instead.",
        |d, v| set(&mut d.config.server.idle_timeout, parse_duration_between(one(v)?, Duration::from_secs(1), Duration::from_secs(3600))),
    ),
    Setting::file(
        "server.maxConnections",
        "CP_SERVER_MAX_CONNECTIONS",
        "N",
        "0",
        "Open connections, WebSockets included (0 = the open-file limit less an eighth, at least 256, kept for the store, the sources and the log; at most 10000; else at least 16). At the cap the oldest idle connection is closed for a new one; with none idle, 32 more are accepted for /healthz, /readyz and /metrics only.",
        |d, v| set(&mut d.config.server.max_connections, parse_max_connections(one(v)?)),
    ),
    Setting::file("storage.dataDir", "CP_STORAGE_DATA_DIR", "DIR", "./data", "Data directory (holds readmodel.redb); created when missing.", |d, v| {
        set(&mut d.config.storage.data_dir, non_empty_path(one(v)?))
    })
    .long("data-dir"),
    Setting::file(
        "storage.cacheSize",
        "CP_STORAGE_CACHE_SIZE",
        "BYTES",
        formatcp!("{}", storage::DEFAULT_CACHE_SIZE),
        "redb page cache in bytes (at least 1048576). Pages beyond it are read from the file; raising it trades memory for fewer reads.",
        |d, v| set(&mut d.config.storage.cache_size, parse_at_least(one(v)?, 1 << 20)),
    ),
    Setting::file(
        "storage.prebuildOrders",
        "CP_STORAGE_PREBUILD_ORDERS",
        "BOOL",
        "true",
        "Build every ordering index (createdAt, lastModifiedAt, name) of every kind in the background once the initial sync is processed, so no sorted query has to sort in memory; false: build an order when a query first sorts by it (less disk, a slow first sorted query).",
        |d, v| set(&mut d.config.storage.prebuild_orders, parse_bool(one(v)?)),
    ),
    Setting::file("source.manifests", "CP_SOURCE_MANIFESTS", "DIR", UNSET, "Directory of YAML/JSON manifests to project; unset = kube source.", |d, v| {
        set(&mut d.manifests, non_empty_path(one(v)?).map(Some))
    })
    .long("manifests")
    .conflicts_with(&["source"]),
    Setting::file(
        "source.kubeUrl",
        "CP_SOURCE_KUBE_URL",
        "URL",
        UNSET,
        "Kube source: API server URL, used without credentials (kubectl proxy, tests); unset = kubeconfig (KUBECONFIG, ~/.kube/config), else the in-cluster service account.",
        |d, v| set(&mut d.kube.url, base_url(one(v)?).map(Some)),
    )
    .long("kube-url")
    .conflicts_with(&["source.manifests"]),
    Setting::file(
        "security.mode",
        "CP_SECURITY_MODE",
        "MODE",
        "jwt",
        "Authentication: jwt (verify tokens) or mock (decode without verifying; local use only).",
        |d, v| set(&mut d.config.security.mode, parse_mode(one(v)?)),
    )
    .long("auth"),
    Setting::file(
        "security.trustedIssuers",
        "CP_SECURITY_TRUSTED_ISSUERS",
        "URL",
        UNSET,
        "Trusted token issuer URLs (comma-separated in the environment, the flag repeatable); jwt mode needs at least one.",
        |d, v| set(&mut d.config.security.trusted_issuers, urls(v)),
    )
    .long("trusted-issuer")
    .list(),
    Setting::file(
        "security.scopePrefix",
        "CP_SECURITY_SCOPE_PREFIX",
        "WORD",
        "tardis",
        "Prefix of the access scope in tokens (<prefix>:<team|group|admin>:<access>).",
        |d, v| set(&mut d.config.security.scope_prefix, parse_scope_prefix(one(v)?)),
    ),
    Setting::file("security.audience", "CP_SECURITY_AUDIENCE", "TEXT", UNSET, "Required token audience; unset = not checked.", |d, v| {
        set(&mut d.config.security.audience, non_empty(one(v)?).map(Some))
    }),
    Setting::file(
        "security.leeway",
        "CP_SECURITY_LEEWAY",
        "DURATION",
        "30s",
        "Clock skew tolerated when checking a token's exp and nbf (Go duration, at most 5m).",
        |d, v| set(&mut d.config.security.leeway, parse_leeway(one(v)?)),
    ),
    Setting::file(
        "graphql.maxPageSize",
        "CP_GRAPHQL_MAX_PAGE_SIZE",
        "N",
        formatcp!("{}", Limits::DEFAULT.max_page_size),
        "Maximum page size of a connection (records), also applied without first/last.",
        |d, v| set(&mut d.config.graphql.limits.max_page_size, parse_page_size(one(v)?)),
    ),
    Setting::file("graphql.playgroundEnabled", "CP_GRAPHQL_PLAYGROUND_ENABLED", "BOOL", "true", "Serve the GraphiQL page at /graphql.", |d, v| {
        set(&mut d.config.graphql.playground_enabled, parse_bool(one(v)?))
    }),
    Setting::file(
        "graphql.maxDepth",
        "CP_GRAPHQL_MAX_DEPTH",
        "N",
        formatcp!("{}", Limits::DEFAULT.max_depth),
        "Maximum nesting depth of a query (levels of fields, fragments expanded; 1 to 30). Error code QUERY_TOO_DEEP.",
        |d, v| set(&mut d.config.graphql.limits.max_depth, parse_between(one(v)?, 1, query::limits::MAX_DEPTH_CEILING)),
    ),
    Setting::file(
        "graphql.maxComplexity",
        "CP_GRAPHQL_MAX_COMPLEXITY",
        "N",
        formatcp!("{}", Limits::DEFAULT.max_complexity),
        "Maximum selected fields of a query, fragments expanded (aliases count). Error code QUERY_TOO_COMPLEX.",
        |d, v| set(&mut d.config.graphql.limits.max_complexity, parse_at_least(one(v)?, 1)),
    ),
    Setting::file(
        "graphql.maxNodes",
        "CP_GRAPHQL_MAX_NODES",
        "N",
        formatcp!("{}", Limits::DEFAULT.max_nodes),
        "Maximum worst-case node estimate of a query: first/last (else maxPageSize) multiplied along nested connections, lists counted at their largest possible length. Error code TOO_MANY_NODES.",
        |d, v| set(&mut d.config.graphql.limits.max_nodes, parse_at_least(one(v)?, 1).map(|n| n as u64)),
    ),
    Setting::file(
        "graphql.maxInputDepth",
        "CP_GRAPHQL_MAX_INPUT_DEPTH",
        "N",
        formatcp!("{}", Limits::DEFAULT.max_input_depth),
        "Maximum nesting of lists and input objects in one argument or variable. Error code INPUT_TOO_DEEP.",
        |d, v| set(&mut d.config.graphql.limits.max_input_depth, parse_at_least(one(v)?, 1)),
    ),
    Setting::file(
        "graphql.maxFilterDepth",
        "CP_GRAPHQL_MAX_FILTER_DEPTH",
        "N",
        formatcp!("{}", Limits::DEFAULT.max_filter_depth),
        "Maximum nesting of has<Edge>With filters in one where. Error code FILTER_TOO_DEEP.",
        |d, v| set(&mut d.config.graphql.limits.max_filter_depth, parse_at_least(one(v)?, 1)),
    ),
    Setting::file(
        "graphql.maxSearchLength",
        "CP_GRAPHQL_MAX_SEARCH_LENGTH",
        "BYTES",
        formatcp!("{}", Limits::DEFAULT.max_search_length),
        "Maximum bytes of a search text (search:, catalogueSearch(query:)). Error code BAD_USER_INPUT.",
        |d, v| set(&mut d.config.graphql.limits.max_search_length, parse_at_least(one(v)?, 1)),
    ),
    Setting::file(
        "graphql.maxSearchTerms",
        "CP_GRAPHQL_MAX_SEARCH_TERMS",
        "N",
        formatcp!("{}", Limits::DEFAULT.max_search_terms),
        "Maximum words of a search text. Error code BAD_USER_INPUT.",
        |d, v| set(&mut d.config.graphql.limits.max_search_terms, parse_at_least(one(v)?, 1)),
    ),
    Setting::file(
        "graphql.maxDefinitions",
        "CP_GRAPHQL_MAX_DEFINITIONS",
        "N",
        formatcp!("{}", Limits::DEFAULT.max_definitions),
        "Maximum operations and fragments defined in one GraphQL document, used or not (validation's work grows with their square). Error code QUERY_TOO_COMPLEX.",
        |d, v| set(&mut d.config.graphql.limits.max_definitions, parse_at_least(one(v)?, 1)),
    ),
    Setting::file(
        "graphql.maxVariableUses",
        "CP_GRAPHQL_MAX_VARIABLE_USES",
        "N",
        formatcp!("{}", Limits::DEFAULT.max_variable_uses),
        "Maximum variables ($name) written in one GraphQL document, their definitions included (validation checks each use once per operation). Error code QUERY_TOO_COMPLEX.",
        |d, v| set(&mut d.config.graphql.limits.max_variable_uses, parse_at_least(one(v)?, 1)),
    ),
    Setting::file(
        "graphql.maxNameBytes",
        "CP_GRAPHQL_MAX_NAME_BYTES",
        "BYTES",
        formatcp!("{}", Limits::DEFAULT.max_name_bytes),
        "Maximum bytes of one name (field, alias, argument, fragment, type, variable) or number in a GraphQL document (an unknown name is compared with every known one). Error code BAD_USER_INPUT.",
        |d, v| set(&mut d.config.graphql.limits.max_name_bytes, parse_at_least(one(v)?, 1)),
    ),
    Setting::file(
        "graphql.maxFilterBytes",
        "CP_GRAPHQL_MAX_FILTER_BYTES",
        "BYTES",
        formatcp!("{}", Limits::DEFAULT.max_filter_bytes),
        "Maximum bytes of the operands of a request's where filters together, each use of a variable counted. Error code FILTER_TOO_LARGE.",
        |d, v| set(&mut d.config.graphql.limits.max_filter_bytes, parse_at_least(one(v)?, 1)),
    ),
    Setting::file(
        "graphql.maxResponseBytes",
        "CP_GRAPHQL_MAX_RESPONSE_BYTES",
        "BYTES",
        formatcp!("{}", Limits::DEFAULT.max_response_bytes),
        "Maximum bytes of an answer (at least 1024), counted while it is resolved; a larger one ends with one error. Error code RESPONSE_TOO_LARGE.",
        |d, v| set(&mut d.config.graphql.limits.max_response_bytes, parse_at_least(one(v)?, 1024)),
    ),
    Setting::file(
        "graphql.maxInFlightBytes",
        "CP_GRAPHQL_MAX_IN_FLIGHT_BYTES",
        "BYTES",
        formatcp!("{}", Limits::DEFAULT.max_in_flight_bytes),
        "Bytes the queries in flight may hold together beyond 256 KiB each (at least 1 MiB; below graphql.maxResponseBytes the largest answers meet it first): their answers, counted as for graphql.maxResponseBytes, and the rows they sort in memory. A query that finds no room stops and gets HTTP 503 with Retry-After (error code OVERLOADED); one that alone needs more than the whole budget gets MEMORY_BUDGET_EXCEEDED, without Retry-After.",
        |d, v| set(&mut d.config.graphql.limits.max_in_flight_bytes, parse_at_least(one(v)?, 1 << 20)),
    ),
    Setting::file(
        "graphql.workers",
        "CP_GRAPHQL_WORKERS",
        "N",
        "0",
        "Threads executing queries at once, 0 to 256 (0 = one per CPU the process may use, cgroup limits counted; at least 2); heavy queries (large node estimate, search, edge filters) use at most half of them (at least 1).",
        |d, v| set(&mut d.config.graphql.workers, parse_between(one(v)?, 0, MAX_WORKERS)),
    ),
    Setting::file(
        "graphql.queueLength",
        "CP_GRAPHQL_QUEUE_LENGTH",
        "N",
        "64",
        "Queries waiting for a worker, per kind (light, heavy); one more gets HTTP 503 with Retry-After.",
        |d, v| set(&mut d.config.graphql.queue_length, parse_at_least(one(v)?, 1)),
    ),
    Setting::file(
        "graphql.persistedQueries",
        "CP_GRAPHQL_PERSISTED_QUERIES",
        "N",
        formatcp!("{}", query::persisted::DEFAULT_CAPACITY),
        "Query texts kept for automatic persisted queries (Apollo APQ), 100 to 10000; the least recently used goes first.",
        |d, v| set(&mut d.config.graphql.persisted_queries, parse_between(one(v)?, 100, 10_000)),
    ),
    Setting::file(
        "graphql.introspectionEnabled",
        "CP_GRAPHQL_INTROSPECTION_ENABLED",
        "BOOL",
        "true",
        "Answer introspection queries (__schema, __type).",
        |d, v| set(&mut d.config.graphql.introspection_enabled, parse_bool(one(v)?)),
    ),
    Setting::file(
        "graphql.plannedExecution",
        "CP_GRAPHQL_PLANNED_EXECUTION",
        "BOOL",
        "true",
        "Answer a query text seen before by its plan, written without GraphQL's per-field resolution (same answers); false = always resolve field by field.",
        |d, v| set(&mut d.config.graphql.planned_execution, parse_bool(one(v)?)),
    ),
    Setting::file(
        "graphql.requestTimeout",
        "CP_GRAPHQL_REQUEST_TIMEOUT",
        "DURATION",
        "10s",
        "Per-request execution time limit (Go duration); 0s = none.",
        |d, v| set(&mut d.config.graphql.request_timeout, duration::parse(one(v)?)),
    ),
    Setting::file(
        "graphql.maxBodyBytes",
        "CP_GRAPHQL_MAX_BODY_BYTES",
        "BYTES",
        "1048576",
        "Maximum size of a POST body in bytes (larger requests get HTTP 413).",
        |d, v| set(&mut d.config.graphql.max_body_bytes, parse_at_least(one(v)?, 1024)),
    ),
    Setting::file(
        "source.serveWhileCatchingUp",
        "CP_SOURCE_SERVE_WHILE_CATCHING_UP",
        "BOOL",
        "true",
        "On a start with a store that completed an initial sync of the same source: serve it at once (ready) while the source is read again behind it; false: unready until that sync is applied, as on a first start.",
        |d, v| set(&mut d.config.serve_while_catching_up, parse_bool(one(v)?)),
    ),
    Setting::file(
        "source.maxDocumentBytes",
        "CP_SOURCE_MAX_DOCUMENT_BYTES",
        "BYTES",
        "1572864",
        "Largest manifest document or Kubernetes object projected, in bytes (from 1024 to 33554432, what a snapshot can carry); a larger one is skipped with its reason and what is stored of it is kept.",
        |d, v| set(&mut d.config.max_document_bytes, parse_between(one(v)?, 1024, storage::snapshot::MAX_SOURCE_DOCUMENT_BYTES)),
    ),
    Setting::file(
        "source.maxFileBytes",
        "CP_SOURCE_MAX_FILE_BYTES",
        "BYTES",
        "1073741824",
        "Largest manifest file read, in bytes (at least 1048576). A file is read whole, so this bounds what reading one holds; a larger file is skipped with its reason and the objects it held are kept.",
        |d, v| set(&mut d.config.max_file_bytes, parse_at_least(one(v)?, 1 << 20)),
    ),
    Setting::file(
        "secretManager.url",
        "CP_SECRET_MANAGER_URL",
        "URL",
        UNSET,
        "Secret manager base URL for resolving $<id> secret references; unset = references are returned as is.",
        |d, v| set(&mut d.config.secret_manager.url, base_url(one(v)?).map(Some)),
    ),
    Setting::file(
        "secretManager.tokenFile",
        "CP_SECRET_MANAGER_TOKEN_FILE",
        "FILE",
        "/var/run/secrets/secretmgr/token",
        "File holding the bearer token sent to the secret manager, read again for every lookup (at most 64 KiB).",
        |d, v| set(&mut d.config.secret_manager.token_file, non_empty_path(one(v)?)),
    ),
    Setting::file(
        "secretManager.caFile",
        "CP_SECRET_MANAGER_CA_FILE",
        "FILE",
        DEFAULT_SECRET_MANAGER_CA_FILE,
        "PEM bundle of the CAs trusted for the secret manager, besides the system's; read at start (missing at the default path = system CAs only).",
        |d, v| set(&mut d.config.secret_manager.ca_file, non_empty_path(one(v)?)),
    ),
    Setting::file(
        "secretManager.cacheTtl",
        "CP_SECRET_MANAGER_CACHE_TTL",
        "DURATION",
        "30s",
        "How long a resolved secret is reused (Go duration, at most 10m; 0s = not kept); a rotation is visible within it.",
        |d, v| set(&mut d.config.secret_manager.cache_ttl, parse_duration_between(one(v)?, Duration::ZERO, Duration::from_secs(600))),
    ),
    Setting::file(
        "secretManager.timeout",
        "CP_SECRET_MANAGER_TIMEOUT",
        "DURATION",
        "5s",
        "Time limit of one secret lookup, waiting for a free connection included (Go duration, 1ms to 60s).",
        |d, v| set(&mut d.config.secret_manager.timeout, parse_duration_between(one(v)?, Duration::from_millis(1), Duration::from_secs(60))),
    ),
    Setting::file(
        "mutations.enabled",
        "CP_MUTATIONS_ENABLED",
        "BOOL",
        "false",
        "Run the console's mutations (writes to Kubernetes through the kube source's client); off, or with the manifests source, every mutation answers PRECONDITION_FAILED \"mutations are disabled\".",
        |d, v| set(&mut d.config.mutations.enabled, parse_bool(one(v)?)),
    ),
    Setting::file(
        "mutations.projectionTimeout",
        "CP_MUTATIONS_PROJECTION_TIMEOUT",
        "DURATION",
        "5s",
        "How long a mutation waits for the projector to apply its write before it answers with the last projected state and a note (Go duration, 0s to 60s; never past graphql.requestTimeout).",
        |d, v| set(&mut d.config.mutations.projection_timeout, parse_duration_between(one(v)?, Duration::ZERO, Duration::from_secs(60))),
    ),
    Setting::file(
        "roverServer.baseUrl",
        "CP_ROVER_SERVER_BASE_URL",
        "URL",
        UNSET,
        "Rover server asked before deleteTeam whether the team still has resources (GET <url>/resources?group=&team=&limit=1); unset = no check.",
        |d, v| set(&mut d.config.rover_server.base_url, base_url(one(v)?).map(Some)),
    ),
    Setting::file(
        "roverServer.tokenFile",
        "CP_ROVER_SERVER_TOKEN_FILE",
        "FILE",
        "/var/run/secrets/rover/token",
        "File holding the bearer token sent to the rover server, read for every check (at most 64 KiB).",
        |d, v| set(&mut d.config.rover_server.token_file, non_empty_path(one(v)?)),
    ),
    Setting::file(
        "roverServer.caFile",
        "CP_ROVER_SERVER_CA_FILE",
        "FILE",
        DEFAULT_SECRET_MANAGER_CA_FILE,
        "PEM bundle of the CAs trusted for the rover server, besides the system's; read at start (missing at the default path = system CAs only).",
        |d, v| set(&mut d.config.rover_server.ca_file, non_empty_path(one(v)?)),
    ),
    Setting::file(
        "roverServer.timeout",
        "CP_ROVER_SERVER_TIMEOUT",
        "DURATION",
        "10s",
        "Time limit of one rover server check (Go duration, 1ms to 60s).",
        |d, v| set(&mut d.config.rover_server.timeout, parse_duration_between(one(v)?, Duration::from_millis(1), Duration::from_secs(60))),
    ),
    Setting::file(
        "subscriptions.changeLogSize",
        "CP_SUBSCRIPTIONS_CHANGE_LOG_SIZE",
        "N",
        "10000",
        "Record changes kept in memory for resuming subscriptions (`changes(after:)`), 1 to 1000000; an older position is read from the durable change log (history.*), or gets GONE with history off.",
        |d, v| set(&mut d.config.subscriptions.change_log_size, parse_between(one(v)?, 1, 1_000_000)),
    ),
    Setting::file(
        "subscriptions.changeLogRetention",
        "CP_SUBSCRIPTIONS_CHANGE_LOG_RETENTION",
        "DURATION",
        "1h",
        "Longest a record change is kept in memory for resuming subscriptions (Go duration, 1s to 24h); older ones are read from the durable change log (history.*), or get GONE with history off.",
        |d, v| set(&mut d.config.subscriptions.change_log_retention, parse_duration_between(one(v)?, Duration::from_secs(1), Duration::from_secs(86_400))),
    ),
    Setting::file(
        "history.enabled",
        "CP_HISTORY_ENABLED",
        "BOOL",
        "true",
        "Keep a durable log of every change in the store: each object's revisions (`history`), the teams' activity (`activity`), and `changes(after:)` resuming across restarts; false: `history` and `activity` answer HISTORY_DISABLED and subscriptions resume from memory only.",
        |d, v| set(&mut d.config.history.enabled, parse_bool(one(v)?)),
    ),
    Setting::file(
        "history.retention",
        "CP_HISTORY_RETENTION",
        "DURATION",
        "720h",
        "Longest a change is kept in the log (Go duration, 1s to 87600h); older ones are pruned in steps between writes.",
        |d, v| set(&mut d.config.history.retention, parse_duration_between(one(v)?, Duration::from_secs(1), Duration::from_secs(87_600 * 3600))),
    ),
    Setting::file(
        "history.maxRevisionsPerObject",
        "CP_HISTORY_MAX_REVISIONS_PER_OBJECT",
        "N",
        "100",
        formatcp!("Revisions kept per object (1 to {}); the oldest go as new ones are written.", storage::history::MAX_REVISIONS_PER_OBJECT),
        |d, v| set(&mut d.config.history.max_revisions_per_object, parse_between(one(v)?, 1, storage::history::MAX_REVISIONS_PER_OBJECT as usize).map(|n| n as u32)),
    ),
    Setting::file(
        "history.maxBytes",
        "CP_HISTORY_MAX_BYTES",
        "BYTES",
        "1073741824",
        "Most bytes the log keeps (entries and their index keys, at least 65536); the oldest changes go first.",
        |d, v| set(&mut d.config.history.max_bytes, parse_at_least(one(v)?, 65_536).map(|n| n as u64)),
    ),
    Setting::file(
        "export.maxRows",
        "CP_EXPORT_MAX_ROWS",
        "N",
        "1000000",
        "Most rows one export (`POST /graphql/export`) sends, 1 to 100000000; a larger one ends with the error EXPORT_TOO_LARGE after them.",
        |d, v| set(&mut d.config.export.max_rows, parse_between(one(v)?, 1, 100_000_000)),
    ),
    Setting::file(
        "export.timeout",
        "CP_EXPORT_TIMEOUT",
        "DURATION",
        "10m",
        "Time limit of one export, from its request to its last row (Go duration, 1s to 24h), in place of graphql.requestTimeout; past it the export ends with TIMEOUT and a client that stopped reading is disconnected.",
        |d, v| set(&mut d.config.export.timeout, parse_duration_between(one(v)?, Duration::from_secs(1), Duration::from_secs(86_400))),
    ),
    Setting::file(
        "export.maxConcurrent",
        "CP_EXPORT_MAX_CONCURRENT",
        "N",
        "2",
        "Exports running at once (1 to 64), and one per client (token clientId); one more is refused with HTTP 429 and code TOO_MANY_EXPORTS.",
        |d, v| set(&mut d.config.export.max_concurrent, parse_between(one(v)?, 1, 64)),
    ),
    Setting::file(
        "subscriptions.maxConnections",
        "CP_SUBSCRIPTIONS_MAX_CONNECTIONS",
        "N",
        "1000",
        "WebSocket connections open at once (1 to 100000); one more is refused with HTTP 503.",
        |d, v| set(&mut d.config.subscriptions.max_connections, parse_between(one(v)?, 1, 100_000)),
    ),
    Setting::file(
        "subscriptions.maxConnectionsPerClient",
        "CP_SUBSCRIPTIONS_MAX_CONNECTIONS_PER_CLIENT",
        "N",
        "20",
        "WebSocket connections open at once per token clientId (1 to 10000); one more is closed with code 4429.",
        |d, v| set(&mut d.config.subscriptions.max_connections_per_client, parse_between(one(v)?, 1, 10_000)),
    ),
    Setting::file(
        "subscriptions.maxPerConnection",
        "CP_SUBSCRIPTIONS_MAX_PER_CONNECTION",
        "N",
        "100",
        "Subscriptions running at once on one connection (1 to 10000); one more gets TOO_MANY_SUBSCRIPTIONS.",
        |d, v| set(&mut d.config.subscriptions.max_per_connection, parse_between(one(v)?, 1, 10_000)),
    ),
    Setting::file(
        "subscriptions.maxTotal",
        "CP_SUBSCRIPTIONS_MAX_TOTAL",
        "N",
        "10000",
        "Subscriptions running at once on the server (1 to 1000000); one more gets TOO_MANY_SUBSCRIPTIONS.",
        |d, v| set(&mut d.config.subscriptions.max_total, parse_between(one(v)?, 1, 1_000_000)),
    ),
    Setting::file(
        "subscriptions.maxTextBytes",
        "CP_SUBSCRIPTIONS_MAX_TEXT_BYTES",
        "BYTES",
        "67108864",
        "Bytes of the operation texts and variables of all running subscriptions together (1 MiB to 1 GiB; one connection's at most graphql.maxBodyBytes); one more is refused with TOO_MANY_SUBSCRIPTIONS.",
        |d, v| set(&mut d.config.subscriptions.max_text_bytes, parse_between(one(v)?, 1 << 20, 1 << 30)),
    ),
    Setting::file(
        "subscriptions.idleTimeout",
        "CP_SUBSCRIPTIONS_IDLE_TIMEOUT",
        "DURATION",
        "1h",
        "A connection running no subscription for this long is closed (Go duration, 1s to 24h).",
        |d, v| set(&mut d.config.subscriptions.idle_timeout, parse_duration_between(one(v)?, Duration::from_secs(1), Duration::from_secs(86_400))),
    ),
    Setting::file(
        "subscriptions.maxLifetime",
        "CP_SUBSCRIPTIONS_MAX_LIFETIME",
        "DURATION",
        "12h",
        "A connection is closed (code 4000) after this long; the client resumes with `after` (Go duration, 1s to 7 days).",
        |d, v| set(&mut d.config.subscriptions.max_lifetime, parse_duration_between(one(v)?, Duration::from_secs(1), Duration::from_secs(7 * 86_400))),
    ),
    Setting::file(
        "subscriptions.sendTimeout",
        "CP_SUBSCRIPTIONS_SEND_TIMEOUT",
        "DURATION",
        "10s",
        "A client that does not take a message within this long is disconnected (code 4008; Go duration, 100ms to 5m).",
        |d, v| set(&mut d.config.subscriptions.send_timeout, parse_duration_between(one(v)?, Duration::from_millis(100), Duration::from_secs(300))),
    ),
    Setting::file(
        "fileManager.baseUrl",
        "CP_FILE_MANAGER_BASE_URL",
        "URL",
        UNSET,
        "File manager base URL: specificationUrl is <this>/files/<specification>; unset = specificationUrl is null.",
        |d, v| set(&mut d.config.file_manager.base_url, base_url(one(v)?).map(Some)),
    ),
    Setting::env_only("DEPENDENCY_DELAY", "DURATION", "2s", "Delay before retrying an object whose parent or target is missing (Go duration).", |d, v| {
        set(&mut d.config.projector.dependency_delay, duration::parse(one(v)?))
    }),
    Setting::env_only("DEPENDENCY_DELAY_JITTER", "DURATION", "3s", "Random extra delay, uniform in [0, this), added to DEPENDENCY_DELAY.", |d, v| {
        set(&mut d.config.projector.dependency_delay_jitter, duration::parse(one(v)?))
    }),
    Setting::env_only(
        "SKIP_REQUEUE",
        "DURATION",
        "5m",
        "Delay before translating a skipped object again (kube source; changed objects arrive at once, the manifests source re-reads on change).",
        |d, v| set(&mut d.config.projector.skip_requeue, duration::parse(one(v)?)),
    ),
    Setting::env_only("PERIODIC_RESYNC", "DURATION", "0s", "Kube source: each kind's full re-list and sweep interval, ±20 %; 0s = never.", |d, v| {
        set(&mut d.config.projector.periodic_resync, duration::parse(one(v)?))
    }),
    Setting::env_only("FEATURE_PUBSUB_ENABLED", "BOOL", "true", "Project EventType, EventExposure, EventSubscription.", |d, v| {
        set(&mut d.config.features.pubsub, parse_bool(one(v)?))
    }),
    Setting::env_only("FEATURE_PERMISSION_ENABLED", "BOOL", "true", "Project PermissionSet.", |d, v| {
        set(&mut d.config.features.permission, parse_bool(one(v)?))
    }),
    Setting::env_only(
        "FEATURE_AI_GATEWAY_ENABLED",
        "BOOL",
        "true",
        "Project McpServer, AgentCard, AgenticExposure, AgenticSubscription.",
        |d, v| set(&mut d.config.features.ai_gateway, parse_bool(one(v)?)),
    ),
    Setting::env_only("FEATURE_FILE_MANAGER_ENABLED", "BOOL", "true", "Project FileExposure, FileSubscription.", |d, v| {
        set(&mut d.config.features.file_manager, parse_bool(one(v)?))
    }),
];

/// The settings table as help text (appended to `control-plane serve --help`).
pub fn settings_help() -> String {
    let mut out = String::from("Configuration (precedence: flags > environment > --config file > defaults):\n");
    for s in SETTINGS {
        let key = if s.in_file { s.key } else { "(environment only)" };
        let flag = s.flag().map(|f| format!(", {f}")).unwrap_or_default();
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
    /// `fileManager.*`.
    pub file_manager: FileManagerConfig,
    /// `subscriptions.*`.
    pub subscriptions: SubscriptionsConfig,
    /// `history.*`: the durable change log ([`storage::history`]).
    pub history: storage::history::HistorySettings,
    /// `mutations.*`.
    pub mutations: MutationsConfig,
    /// `export.*`: streamed exports (`POST /graphql/export`).
    pub export: ExportConfig,
    /// `roverServer.*`.
    pub rover_server: RoverServerConfig,
    /// Projector timing (`DEPENDENCY_DELAY`, …).
    pub projector: ProjectorConfig,
    /// `source.maxDocumentBytes`: the largest document (manifests) or object (kube) projected,
    /// in bytes; default [`DEFAULT_MAX_DOCUMENT_BYTES`], at least 1024.
    pub max_document_bytes: usize,
    /// `source.maxFileBytes`: the largest manifest file read, in bytes; default
    /// [`DEFAULT_MAX_FILE_BYTES`], at least 1 MiB.
    pub max_file_bytes: usize,
    /// `source.serveWhileCatchingUp`, default `true`: a start on a store that completed an
    /// initial sync of the same source is ready at once and catches up behind; `false`: ready
    /// only once the initial sync is applied.
    pub serve_while_catching_up: bool,
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
    /// `server.headerTimeout`, default 10 s: from a request's first byte to the end of its header.
    pub header_timeout: Duration,
    /// `server.bodyTimeout`, default 30 s: reading a request's body (answered 408 after it).
    pub body_timeout: Duration,
    /// `server.idleTimeout`, default 60 s: a keep-alive connection with no request in progress.
    pub idle_timeout: Duration,
    /// `server.maxConnections`: open connections, WebSockets included; 0 (the default) = from
    /// the open-file limit ([`crate::http::server::default_max_connections`]).
    pub max_connections: usize,
}

/// `storage.*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageConfig {
    /// `storage.dataDir`: holds `readmodel.redb`; created when missing. Default `./data`.
    pub data_dir: PathBuf,
    /// `storage.cacheSize`: redb's page cache in bytes, at least 1 MiB. Default 64 MiB
    /// ([`storage::DEFAULT_CACHE_SIZE`]).
    pub cache_size: usize,
    /// `storage.prebuildOrders`, default `true`: every ordering index is built in the
    /// background once the initial sync is processed (else on first use).
    pub prebuild_orders: bool,
}

/// The default of `source.maxDocumentBytes`: 1.5 MiB, what the Kubernetes API server accepts
/// for one object (etcd's request limit).
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 1536 * 1024;

/// The default of `source.maxFileBytes`: 1 GiB. A manifest file is read whole (and, when it
/// changes, its translated records are held until they are sent), so the largest file bounds
/// the source's memory; the 1M-object world's largest file is 503 MB.
pub const DEFAULT_MAX_FILE_BYTES: usize = 1 << 30;

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

/// `graphql.*` (`Default`: what an unset setting means before [`SETTINGS`]' defaults apply).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphqlConfig {
    /// The limits of every request: `graphql.maxPageSize`, `maxDepth`, `maxComplexity`,
    /// `maxNodes`, `maxInputDepth`, `maxFilterDepth`, `maxSearchLength`, `maxSearchTerms`,
    /// `maxDefinitions`, `maxVariableUses`, `maxNameBytes`, `maxFilterBytes`, `maxResponseBytes`
    /// (one struct, the query layer's own).
    pub limits: query::limits::Limits,
    /// `graphql.playgroundEnabled`, default `true`.
    pub playground_enabled: bool,
    /// `graphql.introspectionEnabled`, default `true`.
    pub introspection_enabled: bool,
    /// `graphql.plannedExecution`, default `true` (`query::plan`).
    pub planned_execution: bool,
    /// `graphql.requestTimeout`, default 10 s; zero = no limit.
    pub request_timeout: Duration,
    /// `graphql.maxBodyBytes`, default 1 MiB, at least 1 KiB.
    pub max_body_bytes: usize,
    /// `graphql.workers`: threads executing queries; 0 (default) = one per CPU core, at
    /// least 2.
    pub workers: usize,
    /// `graphql.queueLength`: waiting queries per lane before HTTP 503, default 64, at least 1.
    pub queue_length: usize,
    /// `graphql.persistedQueries`: query texts kept for automatic persisted queries, default
    /// 1000, 100 to 10 000.
    pub persisted_queries: usize,
}

/// `secretManager.*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretManagerConfig {
    /// `secretManager.url`; `None` = secret references are returned unresolved.
    pub url: Option<String>,
    /// `secretManager.tokenFile`: the bearer token, read for every lookup.
    pub token_file: PathBuf,
    /// `secretManager.caFile`: extra trusted CAs (PEM), read at start.
    pub ca_file: PathBuf,
    /// `secretManager.cacheTtl`: how long a resolved value is reused, at most 10 minutes.
    pub cache_ttl: Duration,
    /// `secretManager.timeout`: one lookup's time limit, 1 ms to 60 s.
    pub timeout: Duration,
}

/// The in-cluster trust bundle (where the Go server reads the secret manager's CAs): when this default is missing, the
/// system's CAs alone are trusted; any other configured CA file must exist.
pub const DEFAULT_SECRET_MANAGER_CA_FILE: &str = "/var/run/secrets/trust-bundle/trust-bundle.pem";

/// `subscriptions.*`: GraphQL subscriptions over WebSocket and their change log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubscriptionsConfig {
    /// `subscriptions.changeLogSize`: record changes kept for resuming.
    pub change_log_size: usize,
    /// `subscriptions.changeLogRetention`: longest a change is kept.
    pub change_log_retention: Duration,
    /// `subscriptions.maxConnections`: WebSocket connections at once.
    pub max_connections: usize,
    /// `subscriptions.maxConnectionsPerClient`: connections at once per `clientId`.
    pub max_connections_per_client: usize,
    /// `subscriptions.maxPerConnection`: subscriptions at once on one connection.
    pub max_per_connection: usize,
    /// `subscriptions.maxTotal`: subscriptions at once on the server.
    pub max_total: usize,
    /// `subscriptions.maxTextBytes`: bytes of the running subscriptions' operation texts and
    /// variables together, default 64 MiB, 1 MiB to 1 GiB (what a subscription holds grows
    /// with its text).
    pub max_text_bytes: usize,
    /// `subscriptions.idleTimeout`: a connection without subscriptions is closed after it.
    pub idle_timeout: Duration,
    /// `subscriptions.maxLifetime`: every connection is closed after it.
    pub max_lifetime: Duration,
    /// `subscriptions.sendTimeout`: a message not taken by the client within it disconnects.
    pub send_timeout: Duration,
}

/// `export.*`: streamed exports (`POST /graphql/export`, `crate::http::export`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportConfig {
    /// `export.maxRows`, default 1,000,000: most rows of one export.
    pub max_rows: usize,
    /// `export.timeout`, default 10 min: time limit of one export.
    pub timeout: Duration,
    /// `export.maxConcurrent`, default 2: exports at once (and one per client).
    pub max_concurrent: usize,
}

/// `mutations.*`: the console's commands (ARCHITECTURE.md, `query`, "Mutations").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MutationsConfig {
    /// `mutations.enabled`, default `false`: mutations write through the kube source's client
    /// (never with the manifests source).
    pub enabled: bool,
    /// `mutations.projectionTimeout`, default 5 s, 0 s to 60 s: how long a mutation waits for
    /// its write to be projected.
    pub projection_timeout: Duration,
}

/// `roverServer.*`: the pre-check of `deleteTeam` (the Go server asks the rover server before deleting a team).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoverServerConfig {
    /// `roverServer.baseUrl`; `None` = teams are deleted without asking.
    pub base_url: Option<String>,
    /// `roverServer.tokenFile`: the bearer token, read for every check.
    pub token_file: PathBuf,
    /// `roverServer.caFile`: extra trusted CAs (PEM), read at start.
    pub ca_file: PathBuf,
    /// `roverServer.timeout`: one check's time limit, 1 ms to 60 s.
    pub timeout: Duration,
}

/// `fileManager.*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileManagerConfig {
    /// `fileManager.baseUrl`, an http(s) URL without a trailing `/`; `None` =
    /// `specificationUrl` is null.
    pub base_url: Option<String>,
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
    /// The defaults of [`SETTINGS`] (`DEPENDENCY_DELAY`, …).
    fn default() -> ProjectorConfig {
        Config::default().projector
    }
}

impl Default for Config {
    /// The defaults of [`SETTINGS`]. Note: jwt mode without trusted issuers, which [`load`]
    /// rejects; tests set `security.mode = Mock`.
    fn default() -> Config {
        Draft::defaults().finish(None).unwrap_or_else(|e| panic!("the defaults of SETTINGS choose a source: {e}"))
    }
}

/// A configuration being built from the settings: the [`Config`], and the two source settings
/// that choose the source only together with `--source` ([`Draft::finish`]).
struct Draft {
    config: Config,
    manifests: Option<PathBuf>,
    kube: KubeSourceConfig,
}

impl Draft {
    /// Every setting at its default ([`Setting::default`]); the values written here are all
    /// replaced by those defaults, or are what an unset setting means.
    fn defaults() -> Draft {
        let config = Config {
            server: ServerConfig {
                address: String::new(),
                header_timeout: Duration::ZERO,
                body_timeout: Duration::ZERO,
                idle_timeout: Duration::ZERO,
                max_connections: 0,
            },
            storage: StorageConfig { data_dir: PathBuf::new(), cache_size: 0, prebuild_orders: false },
            source: SourceConfig::Kube(KubeSourceConfig::default()),
            security: SecurityConfig {
                mode: AuthMode::Jwt,
                trusted_issuers: Vec::new(),
                scope_prefix: String::new(),
                audience: None,
                leeway: Duration::ZERO,
            },
            graphql: GraphqlConfig::default(),
            secret_manager: SecretManagerConfig {
                url: None,
                token_file: PathBuf::new(),
                ca_file: PathBuf::new(),
                cache_ttl: Duration::ZERO,
                timeout: Duration::ZERO,
            },
            file_manager: FileManagerConfig { base_url: None },
            mutations: MutationsConfig { enabled: false, projection_timeout: Duration::ZERO },
            export: ExportConfig { max_rows: 0, timeout: Duration::ZERO, max_concurrent: 0 },
            rover_server: RoverServerConfig {
                base_url: None,
                token_file: PathBuf::new(),
                ca_file: PathBuf::new(),
                timeout: Duration::ZERO,
            },
            subscriptions: SubscriptionsConfig {
                change_log_size: 0,
                change_log_retention: Duration::ZERO,
                max_connections: 0,
                max_connections_per_client: 0,
                max_per_connection: 0,
                max_total: 0,
                max_text_bytes: 0,
                idle_timeout: Duration::ZERO,
                max_lifetime: Duration::ZERO,
                send_timeout: Duration::ZERO,
            },
            history: storage::history::HistorySettings {
                enabled: false,
                retention: Duration::ZERO,
                max_revisions_per_object: 0,
                max_bytes: 0,
            },
            projector: ProjectorConfig {
                dependency_delay: Duration::ZERO,
                dependency_delay_jitter: Duration::ZERO,
                skip_requeue: Duration::ZERO,
                periodic_resync: Duration::ZERO,
            },
            max_document_bytes: 0,
            max_file_bytes: 0,
            serve_while_catching_up: false,
            features: Features { pubsub: false, permission: false, ai_gateway: false, file_manager: false },
            now: None,
        };
        let mut draft = Draft { config, manifests: None, kube: KubeSourceConfig::default() };
        for s in SETTINGS.iter().filter(|s| s.default != UNSET) {
            (s.apply)(&mut draft, &Raw::One(s.default.to_string()))
                .unwrap_or_else(|e| panic!("the default of {} in SETTINGS is invalid: {e}", s.key));
        }
        draft
    }

    /// Applies `raw`, given through `origin`, to setting `s`.
    fn apply(&mut self, s: &Setting, raw: &Raw, origin: ValueOrigin) -> Result<(), ConfigError> {
        (s.apply)(self, raw).map_err(|message| ConfigError::Invalid { key: s.key, origin, message })
    }

    /// The configuration, with the source chosen by `--source` (`kube`, `manifests`, or `None`:
    /// manifests when `source.manifests` is set, else kube).
    fn finish(self, source_flag: Option<&str>) -> Result<Config, ConfigError> {
        let source = match (source_flag, self.manifests) {
            (Some("kube"), _) | (None, None) => SourceConfig::Kube(self.kube),
            (Some("manifests"), Some(dir)) | (None, Some(dir)) => SourceConfig::Manifests(dir),
            (Some("manifests"), None) => {
                return Err(ConfigError::Invalid {
                    key: "source.manifests",
                    origin: ValueOrigin::Flag("--source".into()),
                    message: "--source manifests needs a directory: --manifests DIR or CP_SOURCE_MANIFESTS".into(),
                });
            }
            (Some(other), _) => {
                return Err(ConfigError::Invalid {
                    key: "source.manifests",
                    origin: ValueOrigin::Flag("--source".into()),
                    message: format!("unknown source {other:?} (expected kube or manifests)"),
                });
            }
        };
        Ok(Config { source, ..self.config })
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
pub enum ValueOrigin {
    /// A command-line flag.
    Flag(String),
    /// An environment variable.
    Env(&'static str),
    /// The config file.
    File(PathBuf),
}

impl fmt::Display for ValueOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueOrigin::Flag(flag) => write!(f, "flag {flag}"),
            ValueOrigin::Env(var) => write!(f, "environment variable {var}"),
            ValueOrigin::File(p) => write!(f, "config file {}", p.display()),
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
        origin: ValueOrigin,
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
    /// Jwt mode without a trusted issuer (authentication is fail-closed: ARCHITECTURE.md, `control-plane`).
    #[error(
        "security.mode is jwt but no trusted issuer is configured: set security.trustedIssuers \
         (CP_SECURITY_TRUSTED_ISSUERS or --trusted-issuer URL), or use --auth mock for local use \
         (tokens are then not verified)"
    )]
    NoTrustedIssuer,
}

/// A raw value: one scalar or a list.
#[derive(Clone, Debug)]
pub(crate) enum Raw {
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
    /// The highest-precedence value of `s`, with its origin.
    fn get(&self, s: &Setting) -> Option<(Raw, ValueOrigin)> {
        if let Some(v) = self.flags.get(s.key) {
            return Some((v.clone(), ValueOrigin::Flag(s.flag().unwrap_or_default())));
        }
        if let Some(v) = (self.env)(s.env) {
            return Some((Raw::One(v), ValueOrigin::Env(s.env)));
        }
        if s.in_file {
            if let Some(v) = self.file.get(s.key) {
                return Some((v.clone(), ValueOrigin::File(self.file_path.clone())));
            }
        }
        None
    }
}

/// Sets `slot` to a parsed value.
fn set<T>(slot: &mut T, value: Result<T, String>) -> Result<(), String> {
    *slot = value?;
    Ok(())
}

/// The value of a setting that is not a list.
fn one(raw: &Raw) -> Result<&str, String> {
    match raw {
        Raw::One(v) => Ok(v),
        Raw::List(_) => Err("expected a single value, got a list".into()),
    }
}

/// A list of http(s) URLs: a list, or one value with comma-separated items; empty items are
/// dropped.
fn urls(raw: &Raw) -> Result<Vec<String>, String> {
    let items: Vec<String> = match raw {
        Raw::One(v) => v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect(),
        Raw::List(v) => v.iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
    };
    for i in &items {
        parse_url(i)?;
    }
    Ok(items)
}

/// An http(s) base URL without its trailing `/`.
/// The longest base URL accepted, in bytes.
const MAX_URL_BYTES: usize = 2048;

/// An http(s) base URL without query or fragment, at most [`MAX_URL_BYTES`], trailing `/`
/// removed.
fn base_url(s: &str) -> Result<String, String> {
    if s.trim().len() > MAX_URL_BYTES {
        return Err(format!("expected a URL of at most {MAX_URL_BYTES} bytes, got {} bytes", s.trim().len()));
    }
    if s.contains(['?', '#']) {
        return Err(format!("expected a base URL without query or fragment, got {:?}", s.trim()));
    }
    parse_url(s.trim())?;
    Ok(s.trim().trim_end_matches('/').to_string())
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
    if !matches!(rest, Some(r) if !r.is_empty() && !r.starts_with('/') && !s.contains(char::is_whitespace)) {
        return Err(format!("expected an http(s) URL, got {s:?}"));
    }
    // What the HTTP client will refuse later is refused here, with the setting's name.
    let url = reqwest::Url::parse(s).map_err(|e| format!("expected an http(s) URL, got {s:?} ({e})"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("expected a URL without user or password, got {s:?}"));
    }
    if url.port() == Some(0) {
        return Err(format!("expected a URL with a port from 1 to 65535, got {s:?}"));
    }
    Ok(())
}

fn non_empty_path(s: &str) -> Result<PathBuf, String> {
    if s.trim().is_empty() {
        Err("expected a path, got an empty value".into())
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

/// A duration from `min` to `max`.
/// `server.maxConnections`: 0 (from the open-file limit) or at least 16.
fn parse_max_connections(s: &str) -> Result<usize, String> {
    match parse_at_least(s, 0)? {
        n @ 1..16 => Err(format!("expected 0 (from the open-file limit) or at least 16, got {n}")),
        n => Ok(n),
    }
}

fn parse_duration_between(s: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let d = duration::parse(s)?;
    if d < min || d > max {
        return Err(format!("expected a duration from {} to {}, got {s:?}", duration::format(min), duration::format(max)));
    }
    Ok(d)
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
    let layers = Layers { flags: args.settings.layer(), env, file: file_map, file_path };
    let mut draft = Draft::defaults();
    for s in SETTINGS {
        if let Some((raw, origin)) = layers.get(s) {
            draft.apply(s, &raw, origin)?;
        }
    }
    let mut config = draft.finish(args.source.as_deref())?;
    if let Some(s) = &args.now {
        config.now = Some(Timestamp::parse_rfc3339(s.trim()).map_err(|e| ConfigError::Invalid {
            key: "now",
            origin: ValueOrigin::Flag("--now".into()),
            message: format!("expected an RFC 3339 time such as 2026-09-01T00:00:00Z, got {s:?} ({e})"),
        })?);
    }
    if config.security.mode == AuthMode::Jwt && config.security.trusted_issuers.is_empty() {
        return Err(ConfigError::NoTrustedIssuer);
    }
    Ok(config)
}

/// The defaults with what `check` reads from the environment `env` applied: the feature flags
/// and the source's limits (`source.maxDocumentBytes`, `source.maxFileBytes`), so that `check`
/// judges a directory as `serve` with the same environment would read it.
///
/// # Errors
/// [`ConfigError`] for an invalid value (naming its variable).
pub fn check_config_from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
    const READ_BY_CHECK: [&str; 2] = ["source.maxDocumentBytes", "source.maxFileBytes"];
    let mut draft = Draft::defaults();
    for s in SETTINGS.iter().filter(|s| s.env.starts_with("FEATURE_") || READ_BY_CHECK.contains(&s.key)) {
        if let Some(v) = env(s.env) {
            draft.apply(s, &Raw::One(v), ValueOrigin::Env(s.env))?;
        }
    }
    Ok(draft.config)
}

/// [`load`] with the process environment and the `--config` file read from disk.
///
/// # Errors
/// [`ConfigError`] for an unreadable config file or any invalid value.
pub fn load_from_process(args: &ServeArgs) -> Result<Config, ConfigError> {
    // A value that is not UTF-8 is read lossily, so it fails its setting's check (naming the
    // variable) instead of counting as unset.
    let env = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
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
        (Some(f), _) => (f.to_string(), ValueOrigin::Flag("--log-format".into())),
        (None, Some(e)) => (e, ValueOrigin::Env("CP_LOG_FORMAT")),
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
