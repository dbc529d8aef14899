//! Stored data outlives the build. Each directory under `tests/fixtures/stores/`
//! holds what one earlier build wrote from the manifests beside it (`manifests/`, a copy of the
//! example world of that day): its data directory (`data/`), an offline snapshot of it
//! (`world.snap`), and the answers that build gave (`answers.json`: viewer, query, response).
//! Every later build must
//! - open a copy of the data directory and answer every query the same (IDs, cursors, values),
//! - restore the snapshot (the CLI's restore) and answer the same,
//! - start a server on a copy of the old data directory with the same manifests (a warm start
//!   after an upgrade) and answer the same over HTTP.
//!
//! The queries are generated from `query/schema.graphql` when a pair is recorded (every root
//! field, every field of every record two object hops deep, an order of each connection, the
//! searches, `node`), and stored with their answers, so a later build runs the old queries.
//!
//! A release that changes the storage layout or a kind's version records a pair of its own:
//! `CP_RECORD_STORE_FIXTURE=<name> cargo test --test stored_fixtures` writes
//! `tests/fixtures/stores/<name>/` (it refuses to overwrite one) and the test then checks it.

mod support;

use async_graphql::parser::types::{BaseType, ServiceDocument, Type, TypeKind, TypeSystemDefinition};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use support::{copy_dir, token, world_dir, Server};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores")
}

/// The viewers whose answers are recorded: `(name, clientId, scope, env)`.
const VIEWERS: &[(&str, &str, &str, &str)] = &[
    ("admin", "platform--ops--console", "tardis:admin:all", "poc"),
    ("team payments--checkout (poc)", "payments--checkout--console", "tardis:team:read", "poc"),
    ("team payments--ledger (poc, obfuscated)", "payments--ledger--console", "tardis:team:obfuscated", "poc"),
    ("group payments (poc)", "payments--checkout--console", "tardis:group:read", "poc"),
    ("team payments--checkout (qa)", "payments--checkout--console", "tardis:team:read", "qa"),
];

fn viewer_token(name: &str) -> String {
    let (_, client, scope, env) = VIEWERS.iter().find(|v| v.0 == name).unwrap_or_else(|| panic!("unknown viewer {name}"));
    token(client, scope, env)
}

fn viewer(name: &str) -> query::viewer::Viewer {
    let (_, client, scope, env) = VIEWERS.iter().find(|v| v.0 == name).unwrap_or_else(|| panic!("unknown viewer {name}"));
    query::viewer::Viewer::from_claims(&json!({"clientId": client, "scope": scope, "env": env}), "tardis").unwrap()
}

// ------------------------------------------------------------------ queries from the schema

struct Schema {
    /// Object types and interfaces: field name → (type, has a required argument).
    objects: BTreeMap<String, Vec<(String, Type, bool)>>,
    unions: BTreeMap<String, Vec<String>>,
    enums: BTreeMap<String, Vec<String>>,
}

fn named(ty: &Type) -> &str {
    match &ty.base {
        BaseType::Named(n) => n.as_str(),
        BaseType::List(inner) => named(inner),
    }
}

impl Schema {
    fn load() -> Schema {
        let sdl = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("query/schema.graphql")).unwrap();
        let doc: ServiceDocument = async_graphql::parser::parse_schema(sdl).unwrap();
        let mut s = Schema { objects: BTreeMap::new(), unions: BTreeMap::new(), enums: BTreeMap::new() };
        for def in doc.definitions {
            let TypeSystemDefinition::Type(t) = def else { continue };
            let t = t.node;
            let name = t.name.node.to_string();
            let fields = |fs: &[async_graphql::Positioned<async_graphql::parser::types::FieldDefinition>]| {
                fs.iter()
                    .map(|f| {
                        let required = f.node.arguments.iter().any(|a| !a.node.ty.node.nullable && a.node.default_value.is_none());
                        (f.node.name.node.to_string(), f.node.ty.node.clone(), required)
                    })
                    .collect::<Vec<_>>()
            };
            match &t.kind {
                TypeKind::Object(o) => {
                    s.objects.insert(name, fields(&o.fields));
                }
                TypeKind::Interface(i) => {
                    s.objects.insert(name, fields(&i.fields));
                }
                TypeKind::Union(u) => {
                    s.unions.insert(name, u.members.iter().map(|m| m.node.to_string()).collect());
                }
                TypeKind::Enum(e) => {
                    s.enums.insert(name, e.values.iter().map(|v| v.node.value.node.to_string()).collect());
                }
                _ => {}
            }
        }
        s
    }

    fn is_leaf(&self, ty: &str) -> bool {
        !self.objects.contains_key(ty) && !self.unions.contains_key(ty)
    }

    /// Every field of `ty` without required arguments; objects `hops` deep, connections below
    /// the top as `totalCount` and their nodes' IDs.
    /// `None` when nothing of `ty` is selectable at that depth.
    fn selection(&self, ty: &str, hops: usize) -> Option<String> {
        if let Some(members) = self.unions.get(ty) {
            let parts: Vec<String> =
                members.iter().filter_map(|m| self.selection(m, hops).map(|sel| format!("... on {m} {sel}"))).collect();
            return Some(format!("{{ __typename {} }}", parts.join(" ")));
        }
        let mut out = Vec::new();
        for (name, fty, required) in &self.objects[ty] {
            if *required {
                continue;
            }
            let target = named(fty);
            if self.is_leaf(target) {
                out.push(name.clone());
            } else if target.ends_with("Connection") {
                out.push(format!("{name} {{ totalCount edges {{ cursor node {{ __typename {} }} }} }}", self.id_of(target)));
            } else if let Some(sel) = (hops > 0).then(|| self.selection(target, hops - 1)).flatten() {
                out.push(format!("{name} {sel}"));
            } else if self.objects.get(target).is_some_and(|f| f.iter().any(|(n, _, _)| n == "id")) {
                out.push(format!("{name} {{ id }}"));
            }
        }
        (!out.is_empty()).then(|| format!("{{ {} }}", out.join(" ")))
    }

    /// `id` when the connection's nodes have one.
    fn id_of(&self, connection: &str) -> &'static str {
        let node = connection.trim_end_matches("Connection");
        if self.objects.get(node).is_some_and(|f| f.iter().any(|(n, _, _)| n == "id")) {
            "id"
        } else {
            ""
        }
    }

    /// The queries recorded with a pair.
    fn queries(&self) -> Vec<String> {
        let page = "pageInfo { hasNextPage hasPreviousPage startCursor endCursor }";
        let mut out = Vec::new();
        for (name, ty, required) in &self.objects["Query"] {
            let target = named(ty);
            if *required {
                continue;
            }
            if target.ends_with("Connection") {
                let node = target.trim_end_matches("Connection");
                out.push(format!(
                    "{{ {name}(first: 1000) {{ totalCount {page} edges {{ cursor node {} }} }} }}",
                    self.selection(node, 2).unwrap()
                ));
                let orders = self.enums.get(&format!("{node}OrderField")).cloned().unwrap_or_default();
                if let Some(field) = orders.last() {
                    out.push(format!(
                        "{{ {name}(first: 3, orderBy: {{field: {field}, direction: DESC}}) {{ totalCount {page} edges {{ cursor node {{ id }} }} }} }}"
                    ));
                }
            } else {
                out.push(match self.selection(target, 2) {
                    Some(sel) => format!("{{ {name} {sel} }}"),
                    None => format!("{{ {name} }}"),
                });
            }
        }
        let hits = self.selection("CatalogueSearchConnection", 3).unwrap();
        out.push(format!("{{ catalogueSearch(query: \"payment\") {hits} }}"));
        out.push(format!("{{ catalogueSearch(query: \"chekout\", first: 2) {hits} }}"));
        out.push("{ apis(search: \"paymnts\") { totalCount edges { cursor node { id basePath } } } }".to_string());
        out
    }
}

// ------------------------------------------------------------------ the recorded answers

/// `answers.json`: the queries and what the recording build answered, per viewer.
fn read_answers(dir: &Path) -> Vec<(String, String, Value)> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("answers.json")).unwrap()).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|a| (a["viewer"].as_str().unwrap().to_string(), a["query"].as_str().unwrap().to_string(), a["response"].clone()))
        .collect()
}

/// A response as recorded: `data`, and `errors` when there are any.
fn response(data: Value, errors: Vec<Value>) -> Value {
    if errors.is_empty() {
        json!({"data": data})
    } else {
        json!({"data": data, "errors": errors})
    }
}

async fn record(name: &str) {
    let dir = fixtures_dir().join(name);
    assert!(!dir.exists(), "{} exists: a recorded pair is never overwritten", dir.display());
    let manifests = dir.join("manifests");
    copy_dir(&world_dir(), &manifests);
    let data = dir.join("data");
    let server = Server::start(&manifests, Some(&data)).await;
    let mut answers = Vec::new();
    for query in Schema::load().queries() {
        for (viewer, ..) in VIEWERS {
            let (d, errors) = server.query_raw(&viewer_token(viewer), &query, json!({})).await;
            answers.push(json!({"viewer": viewer, "query": query, "response": response(d, errors)}));
        }
    }
    // Every record reached by its ID.
    let mut ids = std::collections::BTreeSet::new();
    for a in answers.iter().filter(|a| a["viewer"] == "admin") {
        collect_ids(&a["response"]["data"], &mut ids);
    }
    let list: Vec<String> = ids.iter().map(|id| format!("{id:?}")).collect();
    for chunk in list.chunks(100) {
        let query = format!("{{ nodes(ids: [{}]) {{ __typename ... on Node {{ id }} }} }}", chunk.join(", "));
        for (viewer, ..) in VIEWERS {
            let (d, errors) = server.query_raw(&viewer_token(viewer), &query, json!({})).await;
            answers.push(json!({"viewer": viewer, "query": query, "response": response(d, errors)}));
        }
    }
    server.stop().await;
    control_plane::snapshot::export_offline(&data, &dir.join("world.snap")).unwrap();
    // One answer per line.
    let lines: Vec<String> = answers.iter().map(|a| serde_json::to_string(a).unwrap()).collect();
    std::fs::write(dir.join("answers.json"), format!("[\n{}\n]\n", lines.join(",\n"))).unwrap();
}

/// Every `id` string in an answer.
fn collect_ids(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(id)) = o.get("id") {
                out.insert(id.clone());
            }
            o.values().for_each(|v| collect_ids(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| collect_ids(v, out)),
        _ => {}
    }
}

fn recorded() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(fixtures_dir()).unwrap().map(|e| e.unwrap().path()).filter(|p| p.join("answers.json").exists()).collect();
    dirs.sort();
    dirs
}

/// Answers every recorded query on `store` in process; the mismatches.
async fn answer_in_process(store: &storage::Store, answers: &[(String, String, Value)]) -> Vec<String> {
    let config = query::QueryConfig { now: Some(schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap()), ..Default::default() };
    let api = query::build_schema(config).unwrap();
    let mut wrong = Vec::new();
    for (who, query, expected) in answers {
        let got = serde_json::to_value(api.execute(store, viewer(who), async_graphql::Request::new(query.as_str())).await).unwrap();
        if &got != expected {
            wrong.push(format!("{who}: {query}"));
        }
    }
    wrong
}

/// For a pair whose recorded answers hold the admin's `activity` (a build with history): each
/// object in it answers `history(id:)` with exactly its revisions there (revision and
/// operation, newest first, `totalCount`), each that is no delete with its node; the
/// mismatches. (`history(id:)` takes a required argument: the recorder generates no query of
/// it.)
async fn histories_in_process(store: &storage::Store, answers: &[(String, String, Value)]) -> Vec<String> {
    let Some((_, _, activity)) = answers.iter().find(|(who, query, _)| who == "admin" && query.contains("activity(")) else {
        return Vec::new();
    };
    let mut expected: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for edge in activity["data"]["activity"]["edges"].as_array().unwrap() {
        let node = &edge["node"];
        let revision = (node["revision"].as_u64().unwrap(), node["operation"].as_str().unwrap().to_string());
        expected.entry(node["id"].as_str().unwrap().to_string()).or_default().push(revision);
    }
    let config = query::QueryConfig { now: Some(schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap()), ..Default::default() };
    let api = query::build_schema(config).unwrap();
    let query = "query($id: ID!) { history(id: $id, first: 100) { totalCount edges { node { revision operation node { id } } } } }";
    let mut wrong = Vec::new();
    for (id, revisions) in &expected {
        let request = async_graphql::Request::new(query).variables(async_graphql::Variables::from_json(json!({"id": id})));
        let got = serde_json::to_value(api.execute(store, viewer("admin"), request).await).unwrap();
        let edges = got["data"]["history"]["edges"].as_array().cloned().unwrap_or_default();
        let listed: Vec<(u64, String)> = edges
            .iter()
            .map(|e| (e["node"]["revision"].as_u64().unwrap_or(0), e["node"]["operation"].as_str().unwrap_or("").to_string()))
            .collect();
        let nodes_ok = edges.iter().all(|e| e["node"]["operation"] == "DELETED" || e["node"]["node"]["id"] == json!(id));
        if &listed != revisions || got["data"]["history"]["totalCount"] != json!(revisions.len()) || !nodes_ok {
            wrong.push(format!("{id}: {got}"));
        }
    }
    assert!(expected.len() > 100, "the admin's activity lists {} objects", expected.len());
    wrong
}

/// `phaseCounts` of every root connection for every recorded viewer (layouts before 5 had no
/// phase counters: the migration counts them).
async fn phase_counts(store: &storage::Store, answers: &[(String, String, Value)]) -> Vec<Value> {
    let api = query::build_schema(query::QueryConfig::default()).unwrap();
    let roots =
        ["teams", "applications", "apis", "apiExposures", "apiSubscriptions", "eventSubscriptions", "approvals", "approvalRequests"];
    let query = format!("{{ {} }}", roots.map(|r| format!("{r} {{ totalCount phaseCounts {{ phase count }} }}")).join(" "));
    let viewers: std::collections::BTreeSet<&String> = answers.iter().map(|(who, _, _)| who).collect();
    let mut out = Vec::new();
    for who in viewers {
        out.push(serde_json::to_value(api.execute(store, viewer(who), async_graphql::Request::new(query.as_str())).await).unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_and_snapshots_of_earlier_builds_open_restore_and_answer_the_same() {
    if let Ok(name) = std::env::var("CP_RECORD_STORE_FIXTURE") {
        record(&name).await;
    }
    let pairs = recorded();
    assert!(!pairs.is_empty(), "no recorded store under {}", fixtures_dir().display());
    for pair in pairs {
        let answers = read_answers(&pair);
        assert!(answers.len() > 100, "{}: {} answers", pair.display(), answers.len());
        let tmp = tempfile::tempdir().unwrap();

        // The data directory, opened as it is.
        let data = tmp.path().join("data");
        copy_dir(&pair.join("data"), &data);
        let migrated_phases = {
            let store = storage::Store::open(&data).unwrap();
            let (_catalogue, _) = storage::search::Catalogue::open(&data.join(storage::search::SEARCH_DIR), &store).unwrap();
            let wrong = answer_in_process(&store, &answers).await;
            assert!(wrong.is_empty(), "{}: the old data directory answers differently:\n{}", pair.display(), wrong.join("\n"));
            let wrong = histories_in_process(&store, &answers).await;
            assert!(wrong.is_empty(), "{}: the old data directory's histories differ:\n{}", pair.display(), wrong.join("\n"));
            assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new(), "{}: migrated counters", pair.display());
            phase_counts(&store, &answers).await
        };

        // The snapshot, restored by the CLI's restore.
        let restored = tmp.path().join("restored");
        control_plane::snapshot::restore(&pair.join("world.snap"), &restored, false).unwrap();
        {
            let store = storage::Store::open(&restored).unwrap();
            let (_catalogue, _) = storage::search::Catalogue::open(&restored.join(storage::search::SEARCH_DIR), &store).unwrap();
            let wrong = answer_in_process(&store, &answers).await;
            assert!(wrong.is_empty(), "{}: the restored snapshot answers differently:\n{}", pair.display(), wrong.join("\n"));
            let wrong = histories_in_process(&store, &answers).await;
            assert!(wrong.is_empty(), "{}: the restored snapshot's histories differ:\n{}", pair.display(), wrong.join("\n"));
            // The restore counts phases from the records; the migration must agree.
            let restored_phases = phase_counts(&store, &answers).await;
            assert_eq!(migrated_phases, restored_phases, "{}: phaseCounts after the migration", pair.display());
            assert!(restored_phases.iter().all(|a| a.get("errors").is_none()), "{restored_phases:?}");
            let admin = restored_phases.iter().map(|a| a["data"]["approvals"]["phaseCounts"][0]["count"].as_u64().unwrap()).max();
            assert!(admin > Some(0), "{}: some viewer counts READY approvals", pair.display());
        }

        // A server started on the old directory with the same manifests (an upgrade).
        let upgraded = tmp.path().join("upgraded");
        copy_dir(&pair.join("data"), &upgraded);
        let server = Server::start(&pair.join("manifests"), Some(&upgraded)).await;
        let mut wrong = Vec::new();
        for (who, query, expected) in &answers {
            let (d, errors) = server.query_raw(&viewer_token(who), query, json!({})).await;
            if &response(d, errors) != expected {
                wrong.push(format!("{who}: {query}"));
            }
        }
        server.stop().await;
        assert!(wrong.is_empty(), "{}: a server upgraded on the old directory answers differently:\n{}", pair.display(), wrong.join("\n"));
    }
}

/// The bytes of a Group record as a build before `description` was added wrote them: the
/// record without its last field.
fn group_without_description(bytes: &[u8]) -> Vec<u8> {
    let rec: schema::kinds::group::GroupRecord = postcard::from_bytes(bytes).unwrap();
    postcard::to_stdvec(&(rec.meta, rec.display_name)).unwrap()
}

/// Every recorded query against a server started on `data` with `manifests`; the mismatches.
async fn answer_over_http(manifests: &Path, data: &Path, answers: &[(String, String, Value)]) -> Vec<String> {
    let server = Server::start(manifests, Some(data)).await;
    let mut wrong = Vec::new();
    for (who, query, expected) in answers {
        let (d, errors) = server.query_raw(&viewer_token(who), query, json!({})).await;
        if &response(d, errors) != expected {
            wrong.push(format!("{who}: {query}"));
        }
    }
    server.stop().await;
    wrong
}

fn digests(data: &Path) -> Vec<[u8; 32]> {
    let store = storage::Store::open(data).unwrap();
    let view = store.read().unwrap();
    schema::KindId::ALL.iter().map(|&k| view.digest(k).unwrap()).collect()
}

/// A record that gained a field (a test-only version bump: the store says Group was written
/// under version 0, in the shape without `description`): the old data directory opens, Group is
/// re-derived from the manifests before the server is ready, every recorded query answers as the
/// clean load did, and no record of another kind is rewritten. The same for a snapshot of that
/// version, restored by the CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_whose_record_gained_a_field_is_re_derived_and_answers_as_a_clean_load() {
    use schema::KindId;
    let pair = recorded().into_iter().next().expect("a recorded store");
    let answers = read_answers(&pair);
    let manifests = pair.join("manifests");
    let tmp = tempfile::tempdir().unwrap();

    let data = tmp.path().join("data");
    copy_dir(&pair.join("data"), &data);
    let before = digests(&data); // opened once by this build: the layout is migrated
    storage::versions::downgrade_for_tests(&data, KindId::Group, 0, group_without_description).unwrap();
    {
        let store = storage::Store::open(&data).unwrap();
        assert_eq!(store.rederiving(), vec![KindId::Group]);
        assert_eq!(store.read().unwrap().count(KindId::Group, &schema::Scope::All).unwrap(), 0, "purged on open");
    }
    let wrong = answer_over_http(&manifests, &data, &answers).await;
    assert!(wrong.is_empty(), "after re-deriving Group the server answers differently:\n{}", wrong.join("\n"));
    let after = digests(&data);
    for (i, kind) in KindId::ALL.iter().enumerate().filter(|(_, k)| **k != KindId::Group) {
        assert_eq!(after[i], before[i], "{kind:?} was rewritten");
    }
    let store = storage::Store::open(&data).unwrap();
    assert_eq!(store.rederiving(), Vec::<KindId>::new());
    assert_eq!(store.read().unwrap().count(KindId::Group, &schema::Scope::All).unwrap(), 4);
    drop(store);

    // A snapshot of that version, restored by the CLI's restore, then served.
    let old = storage::snapshot::downgrade_for_tests(
        &std::fs::read(pair.join("world.snap")).unwrap(),
        KindId::Group,
        0,
        group_without_description,
    );
    let snap = tmp.path().join("old.snap");
    std::fs::write(&snap, old).unwrap();
    let restored = tmp.path().join("restored");
    control_plane::snapshot::restore(&snap, &restored, false).unwrap();
    assert_eq!(storage::Store::open(&restored).unwrap().rederiving(), vec![KindId::Group]);
    let wrong = answer_over_http(&manifests, &restored, &answers).await;
    assert!(wrong.is_empty(), "a restored snapshot of the old version answers differently:\n{}", wrong.join("\n"));
    let restored_digests = digests(&restored);
    for (i, kind) in KindId::ALL.iter().enumerate().filter(|(_, k)| **k != KindId::Group) {
        assert_eq!(restored_digests[i], before[i], "{kind:?} differs from the old store after the restore");
    }
}

/// The newest recorded pair: written by a build that keeps source documents.
fn newest_pair() -> PathBuf {
    recorded().into_iter().last().expect("a recorded store")
}

/// An Application record as a build of version 0 whose rule read every status message as
/// `previous derivation` wrote it: the same shape, other values.
fn previous_application_rule(bytes: &[u8]) -> Vec<u8> {
    let mut rec: schema::kinds::application::ApplicationRecord = postcard::from_bytes(bytes).unwrap();
    rec.status.message = "previous derivation".into();
    postcard::to_stdvec(&rec).unwrap()
}

const APPLICATIONS: &str = "{ applications(first: 100) { totalCount edges { node { id name statusMessage ownerTeam { name } } } } }";

/// The answer of [`APPLICATIONS`] for an admin from the store in `data`, in process.
async fn applications_in_process(data: &Path) -> Value {
    let store = storage::Store::open(data).unwrap();
    let api = query::build_schema(query::QueryConfig::default()).unwrap();
    let answer = api.execute(&store, viewer("admin"), async_graphql::Request::new(APPLICATIONS)).await;
    let answer = serde_json::to_value(answer).unwrap();
    assert!(answer.get("errors").is_none(), "{answer}");
    answer["data"].clone()
}

/// Sends [`APPLICATIONS`] to the server at `base` again and again from its start until the
/// re-derivation of Application in `store` has ended; every answer must be 200 with the data of
/// the previous derivation or of the new one, never an error, a partial or an empty list.
/// Returns how many answers came of each.
async fn applications_while_rederiving(base: &str, store: &storage::Store, previous: &Value, new: &Value) -> (usize, usize) {
    let http = reqwest::Client::new();
    let (mut old_answers, mut new_answers) = (0, 0);
    loop {
        let rederiving = !store.rebuilding().is_empty();
        let resp = http
            .post(format!("{base}/graphql/query"))
            .bearer_auth(viewer_token("admin"))
            .json(&json!({"query": APPLICATIONS}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        assert!(body.get("errors").is_none(), "an error while re-deriving: {body}");
        if &body["data"] == previous {
            old_answers += 1;
        } else if &body["data"] == new {
            new_answers += 1;
        } else {
            panic!("an answer of neither derivation: {body}");
        }
        if !rederiving {
            return (old_answers, new_answers);
        }
    }
}

/// Upgrades keep serving: on a store written by a build that keeps source documents,
/// a test-only bump of Application's derivation version (the store says version 0, whose rule
/// gave every status message another value, in the same record shape) is re-derived from the
/// volume in the background. A query of that kind sent again and again from the server's start
/// until the re-derivation ends answers 200 with the previous derivation or the new one, never
/// an error or an empty list; at the end every recorded query answers as the clean load did and
/// no record of another kind was rewritten. The same from a snapshot of that version, and with
/// the kube source whose API server is unreachable (the volume alone suffices).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_kind_is_re_derived_from_the_volume_while_every_query_answers() {
    use schema::KindId;
    let pair = newest_pair();
    let answers = read_answers(&pair);
    let manifests = pair.join("manifests");
    let tmp = tempfile::tempdir().unwrap();
    let clean = tmp.path().join("clean");
    copy_dir(&pair.join("data"), &clean);
    let new = applications_in_process(&clean).await;
    let before = digests(&clean);
    // Kinds this build has and the recorded store had not: opened, they wait for the source to
    // bring their objects (a source that cannot, the unreachable API server below, leaves them so).
    let unknown_to_the_recording = storage::Store::open(&clean).unwrap().rederiving();

    let prepare = |name: &str| {
        let data = tmp.path().join(name);
        copy_dir(&pair.join("data"), &data);
        storage::versions::downgrade_for_tests(&data, KindId::Application, 0, previous_application_rule).unwrap();
        data
    };
    let check = |data: &Path, what: &str| {
        let after = digests(data);
        for (i, kind) in KindId::ALL.iter().enumerate().filter(|(_, k)| **k != KindId::Application) {
            assert_eq!(after[i], before[i], "{what}: {kind:?} was rewritten");
        }
        let store = storage::Store::open(data).unwrap();
        let rederiving: Vec<KindId> = store.rederiving().into_iter().filter(|k| !unknown_to_the_recording.contains(k)).collect();
        assert!(store.rebuilding().is_empty() && rederiving.is_empty(), "{what}: {:?} {rederiving:?}", store.rebuilding());
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new(), "{what}");
    };

    // The manifests source.
    let data = prepare("manifests-source");
    let previous = applications_in_process(&data).await;
    assert_ne!(previous, new, "the previous derivation answers differently");
    assert!(previous["applications"]["edges"].as_array().unwrap().iter().all(|e| e["node"]["statusMessage"] == "previous derivation"));
    {
        let store = storage::Store::open(&data).unwrap();
        assert_eq!(store.rebuilding(), vec![(KindId::Application, true)], "served while it is re-derived");
    }
    let mut config = control_plane::config::Config::for_manifests(&manifests, &data);
    config.now = Some(schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap());
    let running = control_plane::start(config).await.unwrap();
    let base = format!("http://{}", running.local_addr());
    let (old_answers, new_answers) = applications_while_rederiving(&base, running.app().store(), &previous, &new).await;
    println!("manifests source: {old_answers} answers of the previous derivation, {new_answers} of the new one");
    assert!(new_answers >= 1);
    running.shutdown().await.unwrap();
    check(&data, "manifests source");
    let wrong = answer_over_http(&manifests, &data, &answers).await;
    assert!(wrong.is_empty(), "after the re-derivation the server answers differently:\n{}", wrong.join("\n"));

    // A snapshot of that version, restored by the CLI: the same path.
    let old = storage::snapshot::downgrade_for_tests(
        &std::fs::read(pair.join("world.snap")).unwrap(),
        KindId::Application,
        3,
        previous_application_rule,
    );
    let snap = tmp.path().join("old.snap");
    std::fs::write(&snap, old).unwrap();
    let restored = tmp.path().join("restored");
    control_plane::snapshot::restore(&snap, &restored, false).unwrap();
    assert_eq!(applications_in_process(&restored).await, previous, "restored as it was");
    let mut config = control_plane::config::Config::for_manifests(&manifests, &restored);
    config.now = Some(schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap());
    let running = control_plane::start(config).await.unwrap();
    let base = format!("http://{}", running.local_addr());
    applications_while_rederiving(&base, running.app().store(), &previous, &new).await;
    running.shutdown().await.unwrap();
    assert_eq!(applications_in_process(&restored).await, new);

    // The kube source, its API server unreachable: the volume alone re-derives the kind.
    let data = prepare("kube-source");
    let unreachable = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", unreachable.local_addr().unwrap());
    drop(unreachable);
    let mut config = control_plane::config::Config::for_kube(&url, &data);
    config.now = Some(schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap());
    let running = control_plane::start(config).await.unwrap();
    let base = format!("http://{}", running.local_addr());
    applications_while_rederiving(&base, running.app().store(), &previous, &new).await;
    running.shutdown().await.unwrap();
    check(&data, "kube source, API server unreachable");
    assert_eq!(applications_in_process(&data).await, new);
}

/// A store written before source documents were kept gets them on its first start by this build
/// (every file is read once, nothing is rewritten), and from then on an upgrade re-derives from
/// the volume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_of_an_earlier_release_gets_its_documents_on_its_first_start() {
    use schema::KindId;
    let pair = recorded().into_iter().next().expect("a recorded store");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    copy_dir(&pair.join("data"), &data);
    assert!(storage::Store::open(&data).unwrap().filling_documents(), "no documents yet");
    let before = digests(&data);
    let wrong = answer_over_http(&pair.join("manifests"), &data, &read_answers(&pair)).await;
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(digests(&data), before, "filling documents in rewrites no record");
    let store = storage::Store::open(&data).unwrap();
    assert!(!store.filling_documents(), "every document is stored");
    assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    drop(store);
    storage::versions::downgrade_for_tests(&data, KindId::Application, 0, previous_application_rule).unwrap();
    assert_eq!(storage::Store::open(&data).unwrap().rebuilding(), vec![(KindId::Application, true)], "re-derived from the volume");
}
