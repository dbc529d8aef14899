//! Shared harness of the end-to-end tests: start the server on a manifests directory, send
//! GraphQL over HTTP with mock tokens; `jwt` has a JWKS issuer and real signed tokens.
//!
//! Snapshot round trip on every query: each query the suite sends through
//! [`Server::query_raw`] is also answered by a *twin* — a store restored, through
//! `control_plane::snapshot::restore` (the CLI's restore, search index included), from a snapshot
//! of the server's store exported at the same revision — and both answers must be identical,
//! IDs and cursors included. The twin is re-made whenever the server's revision moved; a query
//! during which the revision (or, for search, the index) moved is not compared.

#![allow(dead_code)]

pub mod jwt;
pub mod secret_manager;

use base64::Engine;
use control_plane::config::Config;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Calls `probe` until it gives a value and returns it, checking again after each change the
/// server in `app` reports (a change its writer counts, a readiness change, a search index
/// commit: `Metrics::subscribe`); fails naming `what` when nothing came within 30 s.
pub async fn eventually<T>(app: &control_plane::app::App, what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let mut changes = app.metrics().subscribe();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        changes.borrow_and_update();
        if let Some(value) = probe().await {
            return value;
        }
        if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
            panic!("timed out waiting for {what}");
        }
    }
}

/// `examples/world`.
pub fn world_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/world")
}

/// `examples/world.facts.json`.
pub fn facts() -> Value {
    serde_json::from_str(&std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/world.facts.json")).unwrap())
        .unwrap()
}

/// A mock (unsigned) compact JWS with the given claims.
pub fn token(client_id: &str, scope: &str, env: &str) -> String {
    let enc = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.mock", enc(json!({"alg": "none"})), enc(json!({"clientId": format!("{client_id}"), "scope": scope, "env": env})))
}

/// A `read` token of team `team` (`<group>--<team>`).
pub fn team_token(team: &str, env: &str) -> String {
    token(&format!("{team}--console"), "tardis:team:read", env)
}

/// The values of `field` of every edge node of a connection.
pub fn names(conn: &Value, field: &str) -> Vec<String> {
    conn["edges"].as_array().unwrap().iter().map(|e| e["node"][field].as_str().unwrap().to_string()).collect()
}

/// Copies a directory tree.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// A running server on 127.0.0.1 with its own data directory.
pub struct Server {
    running: control_plane::Running,
    base: String,
    client: reqwest::Client,
    _data: Option<tempfile::TempDir>,
    /// The GraphQL API with the server's settings, to answer on the twin.
    api: query::Api,
    twin: tokio::sync::Mutex<Option<Twin>>,
    /// Queries sent through [`Server::query_raw`] (but searches sent while the index lagged).
    pub queries: std::sync::atomic::AtomicUsize,
    /// Of those, the ones compared with the twin.
    pub round_trips: std::sync::atomic::AtomicUsize,
}

/// A store restored from a snapshot of the server's store at `revision`.
struct Twin {
    revision: u64,
    store: storage::Store,
    _catalogue: storage::search::Catalogue,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts on `manifests` (data in `data_dir`, or a fresh temporary directory) with the
    /// clock pinned to the world's reference time, and waits until ready.
    pub async fn start(manifests: &Path, data_dir: Option<&Path>) -> Server {
        Server::start_with(manifests, data_dir, |_| {}).await
    }

    /// [`Server::start`] with `configure` applied to the configuration first (e.g. jwt mode).
    pub async fn start_with(manifests: &Path, data_dir: Option<&Path>, configure: impl FnOnce(&mut Config)) -> Server {
        let tmp = if data_dir.is_none() { Some(tempfile::tempdir().unwrap()) } else { None };
        let dir = data_dir.map(Path::to_path_buf).unwrap_or_else(|| tmp.as_ref().unwrap().path().to_path_buf());
        let mut config = Config::for_manifests(manifests, &dir);
        config.now = Some(schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap());
        configure(&mut config);
        let running = control_plane::start(config).await.unwrap();
        let base = format!("http://{}", running.local_addr());
        let client = reqwest::Client::new();
        assert!(running.app().wait_caught_up(std::time::Duration::from_secs(30)).await, "server not ready after 30 s");
        let api = query::build_schema(query::QueryConfig {
            secret_resolver: running.app().secret_manager().map(|m| m.resolver()),
            ..control_plane::http::graphql::query_config(running.app().config())
        })
        .unwrap();
        let twin = tokio::sync::Mutex::new(None);
        let server = Server { running, base, client, _data: tmp, api, twin, queries: Default::default(), round_trips: Default::default() };
        // Ready serves the store; let the search index catch up with it too, so the first
        // queries meet a settled store.
        eventually(server.running.app(), "the search index to follow the store", async || {
            let (store, search) = server.revisions();
            (store == search).then_some(())
        })
        .await;
        server
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// POSTs a query with an optional bearer token; the whole response.
    pub async fn post(&self, token: Option<&str>, query: &str) -> reqwest::Response {
        let mut req = self.client.post(format!("{}/graphql/query", self.base)).json(&json!({"query": query}));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap()
    }

    /// GETs a path (`/metrics`, `/readyz`) as text.
    pub async fn get_text(&self, path: &str) -> String {
        self.client.get(format!("{}{path}", self.base)).send().await.unwrap().text().await.unwrap()
    }

    /// The process handle.
    pub fn running(&self) -> &control_plane::Running {
        &self.running
    }

    /// POSTs a query; returns `(data, errors)`.
    pub async fn query_raw(&self, token: &str, query: &str, variables: Value) -> (Value, Vec<Value>) {
        let before = self.revisions();
        let resp = self
            .client
            .post(format!("{}/graphql/query", self.base))
            .bearer_auth(token)
            .json(&json!({"query": query, "variables": variables}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        self.compare_with_twin(token, query, &variables, &body, before).await;
        (body["data"].clone(), body["errors"].as_array().cloned().unwrap_or_default())
    }

    /// The live store's revision and its search index's.
    fn revisions(&self) -> (u64, u64) {
        let store = self.running.app().store();
        let revision = store.read().unwrap().revision().unwrap();
        (revision, store.catalogue().map(|c| c.revision()).unwrap_or(revision))
    }

    /// Answers `query` on the twin at the live revision and asserts it equals `live`, unless
    /// the live store moved since `before` was read.
    async fn compare_with_twin(&self, token: &str, query: &str, variables: &Value, live: &Value, before: (u64, u64)) {
        if query.trim_start().starts_with("mutation") {
            // A mutation's answer is the cluster's (the twin writes nothing): not a read to compare.
            return;
        }
        if query.contains("earch") && before.0 != before.1 {
            // The search index lags the store (up to 250 ms): an answer not yet settled, as
            // when a test polls until a change is searchable; not a query to compare.
            return;
        }
        self.queries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Only a search answer depends on the search index's revision.
        let now = self.revisions();
        if now.0 != before.0 || (query.contains("earch") && now.1 != before.1) {
            return;
        }
        let mut twin = self.twin.lock().await;
        if twin.as_ref().map(|t| t.revision) != Some(before.0) {
            *twin = None;
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("round-trip.snap");
            {
                let view = self.running.app().store().read().unwrap();
                if view.revision().unwrap() != before.0 {
                    return;
                }
                let out = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
                storage::snapshot::export(&view, schema::Timestamp(0), out).unwrap();
            }
            let data = dir.path().join("data");
            control_plane::snapshot::restore(&file, &data, false).unwrap();
            let store = storage::Store::open(&data).unwrap();
            store.set_history(self.running.app().config().history);
            let (catalogue, opened) = storage::search::Catalogue::open(&data.join(storage::search::SEARCH_DIR), &store).unwrap();
            assert_eq!(opened, storage::search::Opened::UpToDate, "restore built the search index");
            *twin = Some(Twin { revision: before.0, store, _catalogue: catalogue, _dir: dir });
        }
        let twin = twin.as_ref().unwrap();
        let viewer = self.running.app().authenticator().authenticate(Some(&format!("Bearer {token}"))).await.unwrap();
        let request = async_graphql::Request::new(query).variables(async_graphql::Variables::from_json(variables.clone()));
        let answer = serde_json::to_value(self.api.execute(&twin.store, viewer, request).await).unwrap();
        assert_eq!(&answer, live, "snapshot round trip at revision {}: the restored store answers differently\n{query}", before.0);
        self.round_trips.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// POSTs a query that must succeed without errors; returns `data`.
    pub async fn query(&self, token: &str, query: &str) -> Value {
        let (data, errors) = self.query_raw(token, query, json!({})).await;
        assert!(errors.is_empty(), "{query}: {errors:?}");
        data
    }

    /// The HTTP status of a POSTed query.
    pub async fn status(&self, token: Option<&str>, query: &str) -> u16 {
        let mut req = self.client.post(format!("{}/graphql/query", self.base)).json(&json!({"query": query}));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.unwrap().status().as_u16()
    }

    /// The HTTP status of a POST with a raw body.
    pub async fn post_raw(&self, token: Option<&str>, body: Vec<u8>) -> u16 {
        self.post_raw_closing(token, body).await.0
    }

    /// POSTs `body` as is; the HTTP status and whether the answer says `Connection: close`.
    pub async fn post_raw_closing(&self, token: Option<&str>, body: Vec<u8>) -> (u16, bool) {
        let mut req = self.client.post(format!("{}/graphql/query", self.base)).header("content-type", "application/json").body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap();
        let closing = resp.headers().get("connection").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"));
        (resp.status().as_u16(), closing)
    }

    /// Graceful shutdown. Asserts that the snapshot round trip compared at least half of the
    /// queries sent (the rest ran while the store moved).
    pub async fn stop(self) {
        let (sent, compared) = (self.queries.into_inner(), self.round_trips.into_inner());
        assert!(compared * 2 >= sent, "snapshot round trip compared only {compared} of {sent} queries");
        self.running.shutdown().await.unwrap();
    }
}
