//! Shared harness of the GraphQL integration tests: the example world (`examples/world`) loaded
//! into a real store through the registered kinds, the GraphQL schema pinned to the world's
//! reference time, viewers from token claims, and one [`World::run`] that executes a query.
//!
//! Use from a test file with `mod support;`.

#![allow(dead_code)] // Each test file uses a different part of the harness.

use async_graphql::Request;
use query::viewer::Viewer;
use query::QueryConfig;
use schema::registry::{self, KindVisitor};
use schema::{Context, Kind, KindId, Timestamp};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use storage::{Outcome, SourceRef, Store, WriteBatch};

/// The world's reference time (`examples/world/FACTS.md`).
pub const REFERENCE_TIME: &str = "2026-09-01T00:00:00Z";

/// The reference time as a [`Timestamp`].
pub fn reference_time() -> Timestamp {
    Timestamp::parse_rfc3339(REFERENCE_TIME).expect("invariant: the reference time is valid RFC 3339")
}

/// `examples/` of the workspace.
pub fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// Every document of `examples/world/*.yaml`, in file (lexical) and document order.
pub fn world_documents() -> Vec<Value> {
    let dir = examples_dir().join("world");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let parsed: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
        docs.extend(parsed.into_iter().filter(|d| d.is_object()));
    }
    docs
}

/// `examples/world.facts.json`.
pub fn facts() -> Value {
    let path = examples_dir().join("world.facts.json");
    serde_json::from_str(&std::fs::read_to_string(&path).expect("reading world.facts.json")).expect("world.facts.json is JSON")
}

/// What loading the world did.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Records written (or stored unlinked) per kind.
    pub written: BTreeMap<KindId, usize>,
    /// Documents of registered kinds that translation skipped, with the reason.
    pub skipped: Vec<String>,
    /// Documents whose required parents never appeared.
    pub dependency_missing: Vec<String>,
    /// Documents of kinds that are not registered (yet), by kind name.
    pub unregistered: BTreeMap<String, usize>,
}

/// Applies one document through the registered kind matching its `apiVersion` and `kind`.
struct Apply<'a, 'txn> {
    doc: &'a Value,
    batch: &'a mut WriteBatch<'txn>,
    ctx: &'a Context,
    /// `None`: no registered kind matched. `Some(Err)`: skipped by translation.
    outcome: Option<(KindId, Result<Outcome, String>)>,
}

impl KindVisitor for Apply<'_, '_> {
    fn visit<K: Kind>(&mut self) {
        let api_version = format!("{}/v1", K::ID.group());
        if self.outcome.is_some() || self.doc["kind"] != K::ID.name() || self.doc["apiVersion"] != api_version.as_str() {
            return;
        }
        let cr: K::Cr = match serde_json::from_value(self.doc.clone()) {
            Ok(cr) => cr,
            Err(e) => {
                self.outcome = Some((K::ID, Err(format!("deserializing: {e}"))));
                return;
            }
        };
        let rec = match K::translate(&cr, self.ctx) {
            Ok(rec) => rec,
            Err(skip) => {
                self.outcome = Some((K::ID, Err(skip.to_string())));
                return;
            }
        };
        let meta = K::meta(&cr);
        let src =
            SourceRef { kind: K::ID, namespace: meta.namespace.clone().unwrap_or_default(), name: meta.name.clone().unwrap_or_default() };
        let version = meta.resource_version.clone().unwrap_or_else(|| "1".to_string());
        let outcome =
            self.batch.upsert::<K>(&src, &version, &rec, self.ctx.now).unwrap_or_else(|e| panic!("storage failure writing {src}: {e}"));
        self.outcome = Some((K::ID, Ok(outcome)));
    }
}

fn describe(doc: &Value) -> String {
    let m = &doc["metadata"];
    format!("{} {}/{}", doc["kind"].as_str().unwrap_or("?"), m["namespace"].as_str().unwrap_or(""), m["name"].as_str().unwrap_or(""))
}

/// Writes `docs` of every registered kind into `store` at the reference time, in rounds: a
/// document whose parents are missing is retried in the next round, until a round makes no
/// progress.
pub fn load(store: &Store, docs: &[Value]) -> LoadReport {
    let ctx = Context { now: reference_time(), features: Default::default() };
    let mut report = LoadReport::default();
    let mut pending: Vec<&Value> = docs.iter().collect();
    loop {
        let ((retry, progressed), _) = store
            .write(ctx.now, |batch| {
                let mut retry = Vec::new();
                let mut progressed = false;
                for doc in pending {
                    let mut apply = Apply { doc, batch, ctx: &ctx, outcome: None };
                    registry::visit(&mut apply);
                    match apply.outcome {
                        None => *report.unregistered.entry(doc["kind"].as_str().unwrap_or("?").to_string()).or_default() += 1,
                        Some((_, Err(reason))) => report.skipped.push(format!("{}: {reason}", describe(doc))),
                        Some((_, Ok(Outcome::DependencyMissing(_)))) => retry.push(doc),
                        Some((kind, Ok(_))) => {
                            progressed = true;
                            *report.written.entry(kind).or_default() += 1;
                        }
                    }
                }
                Ok((retry, progressed))
            })
            .expect("committing the world");
        if retry.is_empty() || !progressed {
            report.dependency_missing = retry.iter().map(|d| describe(d)).collect();
            return report;
        }
        pending = retry;
    }
}

/// A store holding the example world and the GraphQL schema over it.
pub struct World {
    _dir: tempfile::TempDir,
    /// The store.
    pub store: Store,
    /// The schema, with `now` pinned to the reference time.
    pub api: query::Api,
    /// What loading did.
    pub report: LoadReport,
}

impl World {
    /// Loads the whole example world into a fresh store in a temporary directory.
    pub fn load() -> World {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = Store::open(dir.path()).expect("opening the store");
        let report = load(&store, &world_documents());
        let api = query::build_schema(QueryConfig { now: Some(reference_time()), ..QueryConfig::default() }).expect("building the schema");
        World { _dir: dir, store, api, report }
    }

    /// Executes `query` for `viewer`; the whole response (`data`, `errors`) as JSON.
    ///
    /// A query runs on both paths: async-graphql's resolvers, then (the text answered once) its
    /// plan; when a plan answers, its bytes must be the resolvers' ([`planned_agrees`]).
    pub async fn run(&self, viewer: &Viewer, query: &str) -> Value {
        let response = self.api.execute(&self.store, viewer.clone(), Request::new(query)).await;
        planned_agrees(&self.api, &self.store, viewer, Request::new(query), &response).await;
        serde_json::to_value(&response).expect("responses serialize")
    }

    /// Like [`World::run`], but panics on errors and returns `data`.
    pub async fn data(&self, viewer: &Viewer, query: &str) -> Value {
        let r = self.run(viewer, query).await;
        assert!(r.get("errors").is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty())), "unexpected errors for {query}: {r:#}");
        r["data"].clone()
    }
}

/// Runs `request` (a query: mutations and subscriptions are not run again) through
/// [`query::Api::answer`] (its plan, when it has one) and requires the bytes of `resolved` (the
/// resolvers' answer to the same request); whether a plan answered.
pub async fn planned_agrees(
    api: &query::Api,
    store: &Store,
    viewer: &Viewer,
    request: Request,
    resolved: &async_graphql::Response,
) -> bool {
    let is_query = async_graphql::parser::parse_query(&request.query)
        .is_ok_and(|doc| doc.operations.iter().all(|(_, op)| op.node.ty == async_graphql::parser::types::OperationType::Query));
    if !is_query {
        return false;
    }
    let query = request.query.clone();
    let answer = api.execute_answer(store, viewer.clone(), request).await;
    let planned = answer.is_planned();
    let expected = serde_json::to_vec(resolved).expect("responses serialize");
    let got = answer.into_json(Default::default());
    let path = if planned { "the plan's" } else { "a second" };
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&expected), "{path} answer differs for {query}");
    planned
}

/// A viewer from mock-token claims (scope prefix `tardis`).
pub fn viewer(client_id: &str, scope: &str, env: &str) -> Viewer {
    Viewer::from_claims(&json!({"clientId": client_id, "scope": scope, "env": env}), "tardis").expect("valid claims")
}

/// A `team:read` viewer acting for `team` (`<group>--<team>`) in `env`.
pub fn team_viewer(team: &str, env: &str) -> Viewer {
    viewer(&format!("{team}--test-app"), "tardis:team:read", env)
}

/// A `group:read` viewer of `group` in `env`.
pub fn group_viewer(group: &str, env: &str) -> Viewer {
    viewer(&format!("{group}--some-team--test-app"), "tardis:group:read", env)
}

/// An `admin:all` viewer (sees every environment).
pub fn admin() -> Viewer {
    viewer("platform--admins--console", "tardis:admin:all", "poc")
}

/// The `extensions.code` of every error of a response.
pub fn error_codes(response: &Value) -> Vec<String> {
    response["errors"]
        .as_array()
        .map(|a| a.iter().map(|e| e["extensions"]["code"].as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default()
}

/// The string values at `field` of every element of a JSON array.
pub fn strings(list: &Value, field: &str) -> Vec<String> {
    list.as_array().unwrap_or_else(|| panic!("not a list: {list}")).iter().map(|x| x[field].as_str().unwrap_or("").to_string()).collect()
}

/// The nodes of a connection's edges.
pub fn nodes(connection: &Value) -> Vec<Value> {
    connection["edges"].as_array().unwrap_or_else(|| panic!("no edges: {connection}")).iter().map(|e| e["node"].clone()).collect()
}
