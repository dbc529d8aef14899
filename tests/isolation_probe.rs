//! Cross-tenant probe suite (ARCHITECTURE.md "Viewers and visibility"): with real JWTs over HTTP on the
//! bundled world, another team, a group outside the owner's group and a viewer of another
//! environment see nothing of a team's data.
//!
//! The probes are generated from `query/schema.graphql`, so a new root query, edge or
//! `has…With` filter is probed without touching this file:
//! - **crawl**: every root query (its `type Query` fields) selecting every field and every
//!   nested edge (connections, lists, links) a few object hops deep; each full record in any
//!   answer (a type implementing `Node`) must be visible to the viewer, and every connection's
//!   `totalCount` must equal its edges;
//! - **node/nodes**: every ID of the owner's records, asked by each attacker;
//! - **cursors**: the owner's cursors of every root connection reused by each attacker
//!   (`after` and `before`);
//! - **where**: `idIn` of the owner's IDs, and every `has<Edge>With` of every root connection's
//!   where-input, with the owner's IDs;
//! - **mutations**: the server runs on the kube source against the fake API server with
//!   `mutations.enabled`; every mutation of `type Mutation` that takes an entity's ID is sent
//!   with each of the owner's IDs of that type, by each attacker with access `all`: every one
//!   must answer `NOT_FOUND` without the entity, and no write may reach the cluster.
//!
//! What "a team's data" is: the full records the owner team itself sees, except those visible to
//! a whole environment by design (catalogue entries, zones, groups) and the
//! approvals (requests) the facts (`examples/world.facts.json`) make visible to the attacker's
//! teams as well. A viewer of another environment may see none of them, shared or not. Reduced
//! `…Info` types cross tenants by design and are not records here.

#[path = "support/fake_k8s.rs"]
mod fake_k8s;
mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use support::jwt::{Issuer, Key, Publish};
use support::{facts, Server};

/// Types every viewer of an environment sees (ARCHITECTURE.md "Viewers and visibility"): the
/// kinds no team owns.
fn env_wide() -> Vec<&'static str> {
    schema::KindId::ALL.iter().filter(|k| !query::team_owned(**k)).map(|k| k.name()).collect()
}
/// Object hops a crawl query goes deep (connections and edges count as one hop).
const DEPTH: usize = 4;

// ---------------------------------------------------------------- the schema, from the SDL file

#[derive(Clone, Debug)]
struct Arg {
    name: String,
    ty: String,
    required: bool,
}

#[derive(Clone, Debug)]
struct Field {
    name: String,
    args: Vec<Arg>,
    ty: String,
}

impl Field {
    fn base(&self) -> String {
        base(&self.ty)
    }
}

fn base(ty: &str) -> String {
    ty.trim_matches(|c| c == '[' || c == ']' || c == '!').to_string()
}

#[derive(Default, Debug)]
struct Sdl {
    /// Object types and interfaces with their fields.
    objects: BTreeMap<String, Vec<Field>>,
    /// Input types.
    inputs: BTreeMap<String, Vec<Field>>,
    /// Descriptions of input fields, by `Input.field`.
    input_descriptions: BTreeMap<String, String>,
    unions: BTreeMap<String, Vec<String>>,
    /// Types implementing `Node`.
    nodes: BTreeSet<String>,
}

/// The schema's types from the SDL text, read by async-graphql's own parser.
fn parse_sdl(text: &str) -> Sdl {
    use async_graphql::parser::types::{FieldDefinition, InputValueDefinition, TypeKind, TypeSystemDefinition};
    use async_graphql::Positioned;
    let document = async_graphql::parser::parse_schema(text).unwrap_or_else(|e| panic!("query/schema.graphql does not parse: {e}"));
    let arg = |a: &Positioned<InputValueDefinition>| {
        let ty = a.node.ty.node.to_string();
        Arg { name: a.node.name.node.to_string(), required: !a.node.ty.node.nullable && a.node.default_value.is_none(), ty }
    };
    let field = |f: &Positioned<FieldDefinition>| Field {
        name: f.node.name.node.to_string(),
        args: f.node.arguments.iter().map(arg).collect(),
        ty: f.node.ty.node.to_string(),
    };
    let mut sdl = Sdl::default();
    for definition in &document.definitions {
        let TypeSystemDefinition::Type(t) = definition else { continue };
        let name = t.node.name.node.to_string();
        match &t.node.kind {
            TypeKind::Object(o) => {
                if o.implements.iter().any(|i| i.node == "Node") {
                    sdl.nodes.insert(name.clone());
                }
                sdl.objects.insert(name, o.fields.iter().map(field).collect());
            }
            TypeKind::Interface(i) => {
                if i.implements.iter().any(|i| i.node == "Node") {
                    sdl.nodes.insert(name.clone());
                }
                sdl.objects.insert(name, i.fields.iter().map(field).collect());
            }
            TypeKind::InputObject(i) => {
                for f in &i.fields {
                    if let Some(d) = &f.node.description {
                        sdl.input_descriptions.insert(format!("{name}.{}", f.node.name.node), d.node.clone());
                    }
                }
                sdl.inputs.insert(
                    name,
                    i.fields
                        .iter()
                        .map(|f| {
                            let a = arg(f);
                            Field { name: a.name, args: Vec::new(), ty: a.ty }
                        })
                        .collect(),
                );
            }
            TypeKind::Union(u) => {
                sdl.unions.insert(name, u.members.iter().map(|m| m.node.to_string()).collect());
            }
            TypeKind::Scalar | TypeKind::Enum(_) => {}
        }
    }
    sdl
}

impl Sdl {
    fn load() -> Sdl {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("query/schema.graphql");
        let sdl = parse_sdl(&std::fs::read_to_string(path).unwrap());
        assert!(sdl.objects.contains_key("Query") && sdl.nodes.len() > 10, "the SDL parser understands query/schema.graphql");
        sdl
    }

    fn is_composite(&self, ty: &str) -> bool {
        self.objects.contains_key(ty) || self.unions.contains_key(ty)
    }

    /// A connection type: `edges { node }` and `totalCount`.
    fn connection_node(&self, ty: &str) -> Option<String> {
        let fields = self.objects.get(ty)?;
        let edges = fields.iter().find(|f| f.name == "edges")?;
        fields.iter().find(|f| f.name == "totalCount")?;
        let node = self.objects.get(&edges.base())?.iter().find(|f| f.name == "node")?;
        Some(node.base())
    }

    /// The where-input of a field, if it has one.
    fn where_input(&self, field: &Field) -> Option<String> {
        field.args.iter().find(|a| a.name == "where").map(|a| base(&a.ty))
    }

    /// The `has<Edge>With` fields of an input type: `(field, target input)`.
    fn has_with(&self, input: &str) -> Vec<(String, String)> {
        self.inputs
            .get(input)
            .map(|fields| {
                fields
                    .iter()
                    .filter(|f| f.name.starts_with("has") && f.name.ends_with("With"))
                    .map(|f| (f.name.clone(), f.base()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The selection of every field of `ty`, `depth` object hops deep, without entering a type
    /// already on `path` (cycles). Edges (`Type.field`) it enters are added to `edges`.
    fn selection(&self, ty: &str, depth: usize, path: &mut Vec<String>, edges: &mut BTreeSet<String>) -> String {
        if let Some(members) = self.unions.get(ty) {
            let parts: Vec<String> =
                members.iter().map(|m| format!("... on {m} {{ {} }}", self.selection(m, depth, path, edges))).collect();
            return format!("__typename {}", parts.join(" "));
        }
        let mut out = vec!["__typename".to_string()];
        path.push(ty.to_string());
        for f in self.objects.get(ty).into_iter().flatten() {
            if f.args.iter().any(|a| a.required) {
                continue;
            }
            let b = f.base();
            if !self.is_composite(&b) {
                out.push(f.name.clone());
                continue;
            }
            if depth == 0 {
                continue;
            }
            if let Some(node) = self.connection_node(&b) {
                if path.contains(&node) {
                    continue;
                }
                edges.insert(format!("{ty}.{}", f.name));
                let inner = self.selection(&node, depth - 1, path, edges);
                out.push(format!("{} {{ totalCount pageInfo {{ hasNextPage }} edges {{ cursor node {{ {inner} }} }} }}", f.name));
            } else {
                if path.contains(&b) {
                    continue;
                }
                if self.nodes.contains(&b) || self.unions.contains_key(&b) || b.ends_with("Info") {
                    edges.insert(format!("{ty}.{}", f.name));
                }
                out.push(format!("{} {{ {} }}", f.name, self.selection(&b, depth - 1, path, edges)));
            }
        }
        path.pop();
        out.join(" ")
    }
}

// ---------------------------------------------------------------- answers

/// Every `(type, id)` of a full record (a `Node` type) anywhere in `v`.
fn records(sdl: &Sdl, v: &Value, out: &mut BTreeSet<(String, String)>) {
    match v {
        Value::Object(m) => {
            if let (Some(Value::String(t)), Some(Value::String(id))) = (m.get("__typename"), m.get("id")) {
                if sdl.nodes.contains(t) {
                    out.insert((t.clone(), id.clone()));
                }
            }
            m.values().for_each(|v| records(sdl, v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| records(sdl, v, out)),
        _ => {}
    }
}

/// Checks every connection in `v`: `totalCount` equals the number of edges on a complete page.
fn check_counts(v: &Value, at: &str) {
    match v {
        Value::Object(m) => {
            if let (Some(total), Some(Value::Array(edges))) = (m.get("totalCount"), m.get("edges")) {
                if m.get("pageInfo").and_then(|p| p.get("hasNextPage")) == Some(&json!(false)) {
                    assert_eq!(total, &json!(edges.len()), "totalCount of a connection at {at}");
                }
            }
            m.iter().for_each(|(k, v)| check_counts(v, &format!("{at}.{k}")));
        }
        Value::Array(items) => items.iter().for_each(|v| check_counts(v, at)),
        _ => {}
    }
}

fn env_of(id: &str) -> String {
    schema::keys::GlobalId::decode(id).unwrap_or_else(|_| panic!("malformed ID {id}")).key.environment()
}

// ---------------------------------------------------------------- viewers

#[derive(Clone, Debug)]
struct Viewer {
    label: String,
    /// A team viewer (else a group viewer).
    is_team: bool,
    env: String,
    /// The stored team names it acts for.
    teams: Vec<String>,
    token: String,
    /// The same viewer with access `all` (for mutations).
    writer: String,
}

/// What one viewer sees through every root query.
struct Crawl {
    /// Root field → `(type, id)` of full records in its answer.
    by_root: BTreeMap<String, BTreeSet<(String, String)>>,
    /// Root connection field → its `totalCount`.
    totals: BTreeMap<String, Value>,
    /// Root connection field → the cursors of its edges.
    cursors: BTreeMap<String, Vec<String>>,
}

impl Crawl {
    fn records(&self) -> BTreeSet<(String, String)> {
        self.by_root.values().flatten().cloned().collect()
    }
}

struct Probe {
    sdl: Sdl,
    server: Server,
    /// Root field → crawl query (fields without required arguments).
    queries: BTreeMap<String, String>,
    /// Root fields that take required arguments (probed with the owner's IDs).
    with_args: Vec<Field>,
    edges: BTreeSet<String>,
    /// What was probed, for the report.
    covered: BTreeMap<&'static str, BTreeSet<String>>,
    requests: usize,
}

impl Probe {
    async fn post(&mut self, token: &str, query: &str, variables: Value) -> Value {
        self.requests += 1;
        let (data, errors) = self.server.query_raw(token, query, variables).await;
        json!({"data": data, "errors": errors})
    }

    fn cover(&mut self, what: &'static str, item: String) {
        self.covered.entry(what).or_default().insert(item);
    }

    async fn crawl(&mut self, v: &Viewer) -> Crawl {
        let mut crawl = Crawl { by_root: BTreeMap::new(), totals: BTreeMap::new(), cursors: BTreeMap::new() };
        for (root, query) in self.queries.clone() {
            let resp = self.post(&v.token, &query, json!({})).await;
            assert_eq!(resp["errors"], json!([]), "{}: {root}: {query}", v.label);
            let data = &resp["data"][&root];
            check_counts(data, &format!("{} {root}", v.label));
            let mut seen = BTreeSet::new();
            records(&self.sdl, data, &mut seen);
            for (t, id) in &seen {
                assert_eq!(env_of(id), v.env, "{} sees a {t} of another environment through {root}", v.label);
            }
            if let Some(edges) = data.get("edges").and_then(Value::as_array) {
                crawl.totals.insert(root.clone(), data["totalCount"].clone());
                crawl.cursors.insert(root.clone(), edges.iter().map(|e| e["cursor"].as_str().unwrap().to_string()).collect());
            }
            crawl.by_root.insert(root, seen);
        }
        crawl
    }
}

fn viewers(facts: &Value, issuer: &Issuer) -> Vec<Viewer> {
    let mut out = Vec::new();
    for (env, e) in facts["env"].as_object().unwrap() {
        for team in e["teams"].as_object().unwrap().keys() {
            out.push(Viewer {
                label: format!("team {team} ({env})"),
                is_team: true,
                env: env.clone(),
                teams: vec![team.clone()],
                token: issuer.token(&Key::rsa1(), &format!("{team}--console"), "tardis:team:read", env),
                writer: issuer.token(&Key::rsa1(), &format!("{team}--console"), "tardis:team:all", env),
            });
        }
        for (group, teams) in e["groups"].as_object().unwrap() {
            let teams: Vec<String> = teams.as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
            out.push(Viewer {
                label: format!("group {group} ({env})"),
                is_team: false,
                env: env.clone(),
                token: issuer.token(&Key::ec1(), &format!("{group}--probe--console"), "tardis:group:read", env),
                writer: issuer.token(&Key::ec1(), &format!("{group}--probe--console"), "tardis:group:all", env),
                teams,
            });
        }
    }
    out
}

/// The GraphQL type of a global ID (`base64url(Type · 0x00 · key)`).
fn type_of(id: &str) -> String {
    schema::GlobalId::decode(id).map(|g| g.type_name).unwrap_or_default()
}

/// The argument of mutation `f` that names an entity by ID (`teamId` → `Team`), directly or as a
/// field of its `input`: `(argument, type, inside input)`.
fn mutation_id_argument(sdl: &Sdl, f: &Field) -> Option<(String, String, bool)> {
    let entity = |name: &str| {
        let stem = name.strip_suffix("Id")?;
        let mut t = stem.to_string();
        t[..1].make_ascii_uppercase();
        sdl.nodes.contains(&t).then_some(t)
    };
    for a in &f.args {
        if base(&a.ty) == "ID" {
            return entity(&a.name).map(|t| (a.name.clone(), t, false));
        }
        if let Some(fields) = sdl.inputs.get(&base(&a.ty)) {
            if let Some(id) = fields.iter().find(|x| x.ty == "ID!") {
                return entity(&id.name).map(|t| (id.name.clone(), t, true));
            }
        }
    }
    None
}

/// A valid value of input type `ty` for a probe (the entity's ID at `id_arg`).
fn input_value(sdl: &Sdl, ty: &str, id_arg: &str, id: &str) -> String {
    match base(ty).as_str() {
        "ID" => format!("\"{id}\""),
        "String" => "\"probe@example.com\"".into(),
        "ApprovalAction" => "ALLOW".into(),
        input => {
            let fields = sdl.inputs.get(input).unwrap_or_else(|| panic!("mutation input type {input} this suite cannot fill: extend it"));
            let parts: Vec<String> = fields
                .iter()
                .filter(|x| x.ty.ends_with('!') || x.name == id_arg)
                .map(|x| {
                    format!("{}: {}", x.name, if x.name == id_arg { format!("\"{id}\"") } else { input_value(sdl, &x.ty, id_arg, id) })
                })
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
    }
}

/// The arguments of mutation `f` aimed at `id` (at argument `arg`, or inside `input`).
fn mutation_args(sdl: &Sdl, f: &Field, arg: &str, in_input: bool, id: &str) -> String {
    f.args
        .iter()
        .filter(|a| a.required)
        .map(|a| {
            let value = if !in_input && a.name == arg { format!("\"{id}\"") } else { input_value(sdl, &a.ty, arg, id) };
            format!("{}: {value}", a.name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `namespace/name` of the approvals and approval requests the facts make visible to `teams`.
fn shared_approvals(facts: &Value, env: &str, teams: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for t in teams {
        for list in ["approvalsVisible", "approvalRequestsVisible"] {
            for a in facts["env"][env]["teams"][t][list].as_array().into_iter().flatten() {
                out.insert(a.as_str().unwrap().to_string());
            }
        }
    }
    out
}

/// Whether a record of type `ty` with `id` is an approval (request) listed in `shared`.
fn is_shared(ty: &str, id: &str, shared: &BTreeSet<String>) -> bool {
    if ty != "Approval" && ty != "ApprovalRequest" {
        return false;
    }
    let key = schema::keys::GlobalId::decode(id).unwrap().key;
    shared.contains(&format!("{}/{}", key.part(1), key.part(2)))
}

fn id_list(ids: &BTreeSet<String>) -> String {
    format!("[{}]", ids.iter().map(|i| format!("\"{i}\"")).collect::<Vec<_>>().join(", "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_viewer_sees_another_teams_data_through_any_query() {
    let sdl = Sdl::load();
    let issuer = Issuer::start("probe", Publish::Discovery, &[&Key::rsa1(), &Key::ec1()]).await;
    // The bundled world through the kube source (the fake API server), mutations enabled.
    let fake = fake_k8s::FakeK8s::start_world().await;
    let issuers = vec![issuer.url.clone()];
    let server = Server::start_with(&support::world_dir(), None, |c| {
        c.security.mode = control_plane::config::AuthMode::Jwt;
        c.security.trusted_issuers = issuers;
        c.source = control_plane::config::SourceConfig::Kube(control_plane::config::KubeSourceConfig { url: Some(fake.url()) });
        c.mutations.enabled = true;
    })
    .await;
    let facts = facts();

    let mut queries = BTreeMap::new();
    let mut with_args = Vec::new();
    let mut edges = BTreeSet::new();
    for f in sdl.objects["Query"].clone() {
        if f.args.iter().any(|a| a.required) {
            with_args.push(f);
            continue;
        }
        let b = f.base();
        let body = if !sdl.is_composite(&b) {
            f.name.clone()
        } else if let Some(node) = sdl.connection_node(&b) {
            let inner = sdl.selection(&node, DEPTH, &mut vec![], &mut edges);
            format!("{} {{ totalCount pageInfo {{ hasNextPage }} edges {{ cursor node {{ {inner} }} }} }}", f.name)
        } else {
            format!("{} {{ {} }}", f.name, sdl.selection(&b, DEPTH, &mut vec![], &mut edges))
        };
        queries.insert(f.name.clone(), format!("{{ {body} }}"));
    }
    let mut p = Probe { sdl, server, queries, with_args, edges, covered: BTreeMap::new(), requests: 0 };

    let viewers = viewers(&facts, &issuer);
    let mut crawls = Vec::new();
    for v in &viewers {
        crawls.push(p.crawl(v).await);
    }
    let roots: Vec<String> = p.queries.keys().cloned().collect();
    for r in &roots {
        p.cover("root queries crawled", r.clone());
    }

    let mut pairs = 0;
    let mut has_with_hits_for_owner = 0;
    let mut owner_checked = BTreeSet::new();
    for (oi, owner) in viewers.iter().enumerate() {
        if !owner.is_team {
            continue; // owners are teams; groups attack
        }
        let own = crawls[oi].records();
        let env_wide = env_wide();
        let private: BTreeSet<(String, String)> = own.iter().filter(|(t, _)| !env_wide.contains(&t.as_str())).cloned().collect();
        assert!(private.len() >= 5, "{} owns records to probe: {private:?}", owner.label);
        for (t, _) in &private {
            p.cover("record types probed", t.clone());
        }
        for (ai, attacker) in viewers.iter().enumerate() {
            let same_env = attacker.env == owner.env;
            if ai == oi || (same_env && attacker.teams.contains(&owner.teams[0])) {
                continue; // the owner itself, or a group containing it
            }
            pairs += 1;
            let kind = if !same_env {
                "viewers of another environment"
            } else if attacker.is_team {
                "other teams"
            } else {
                "groups outside the owner's group"
            };
            p.cover("attackers", format!("{kind}: {}", attacker.label));
            // Everything of another environment is off limits; within one, the owner's private
            // records except approvals shared with the attacker's teams.
            let shared = shared_approvals(&facts, &attacker.env, &attacker.teams);
            let forbidden: BTreeSet<(String, String)> =
                if same_env { private.iter().filter(|(t, id)| !is_shared(t, id, &shared)).cloned().collect() } else { own.clone() };
            let forbidden_ids: BTreeSet<String> = forbidden.iter().map(|(_, id)| id.clone()).collect();
            let ctx = format!("{} probing {}", attacker.label, owner.label);

            // 1. Crawl: root queries, nested edges, totalCount (checked while crawling).
            for (root, seen) in &crawls[ai].by_root {
                let leaked: Vec<_> = seen.intersection(&forbidden).collect();
                assert!(leaked.is_empty(), "{ctx}: {root} reveals {leaked:?}");
            }

            // 2. node / nodes.
            let aliases: Vec<String> =
                forbidden_ids.iter().enumerate().map(|(i, id)| format!("n{i}: node(id: \"{id}\") {{ __typename id }}")).collect();
            let resp = p.post(&attacker.token, &format!("{{ {} }}", aliases.join(" ")), json!({})).await;
            for i in 0..forbidden_ids.len() {
                assert_eq!(resp["data"][format!("n{i}")], Value::Null, "{ctx}: node reveals {}", resp["data"]);
            }
            let errors = resp["errors"].as_array().unwrap();
            assert_eq!(errors.len(), forbidden_ids.len(), "{ctx}: one NOT_FOUND per ID");
            assert!(errors.iter().all(|e| e["extensions"]["code"] == "NOT_FOUND"), "{ctx}: {errors:?}");
            let resp =
                p.post(&attacker.token, "query($ids: [ID!]!) { nodes(ids: $ids) { __typename id } }", json!({"ids": forbidden_ids})).await;
            let nodes = resp["data"]["nodes"].as_array().unwrap();
            assert_eq!(nodes.len(), forbidden_ids.len());
            assert!(nodes.iter().all(Value::is_null), "{ctx}: nodes reveals {nodes:?}");
            p.cover("root queries probed with IDs", "node".into());
            p.cover("root queries probed with IDs", "nodes".into());

            // 2b. history of every one of the owner's IDs: NOT_FOUND each; the attacker's
            //     activity names none of them.
            let aliases: Vec<String> = forbidden_ids
                .iter()
                .enumerate()
                .map(|(i, id)| format!("h{i}: history(id: \"{id}\") {{ totalCount edges {{ node {{ revision }} }} }}"))
                .collect();
            let resp = p.post(&attacker.token, &format!("{{ {} }}", aliases.join(" ")), json!({})).await;
            assert_eq!(resp["data"], Value::Null, "{ctx}: history reveals {}", resp["data"]);
            let errors = resp["errors"].as_array().unwrap();
            assert_eq!(errors.len(), forbidden_ids.len(), "{ctx}: one NOT_FOUND per ID in history");
            assert!(errors.iter().all(|e| e["extensions"]["code"] == "NOT_FOUND"), "{ctx}: {errors:?}");
            let resp = p.post(&attacker.token, "{ activity(first: 1000) { totalCount edges { node { id } } } }", json!({})).await;
            let listed: BTreeSet<String> = resp["data"]["activity"]["edges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["node"]["id"].as_str().unwrap().to_string())
                .collect();
            let leaked: Vec<&String> = listed.intersection(&forbidden_ids).collect();
            assert!(leaked.is_empty(), "{ctx}: activity reveals {leaked:?}");
            assert_eq!(
                resp["data"]["activity"]["totalCount"],
                json!(listed.len()),
                "{ctx}: activity's totalCount counts only what it lists"
            );
            p.cover("root queries probed with IDs", "history".into());
            p.cover("root queries probed with IDs", "activity".into());

            // 3. Other root fields with required arguments: filled with the owner's IDs.
            for f in p.with_args.clone() {
                if f.name == "node" || f.name == "nodes" {
                    continue;
                }
                let args: Vec<String> = f
                    .args
                    .iter()
                    .filter(|a| a.required)
                    .map(|a| match base(&a.ty).as_str() {
                        "ID" if a.ty.starts_with('[') => format!("{}: {}", a.name, id_list(&forbidden_ids)),
                        "ID" => format!("{}: \"{}\"", a.name, forbidden_ids.iter().next().unwrap()),
                        "String" => format!("{}: \"{}\"", a.name, owner.teams[0].split("--").last().unwrap()),
                        "Int" => format!("{}: 10", a.name),
                        "Boolean" => format!("{}: false", a.name),
                        other => panic!("root query {} has a required argument of type {other} this suite cannot fill: extend it", f.name),
                    })
                    .collect();
                let b = f.base();
                let sel = if let Some(node) = p.sdl.connection_node(&b) {
                    format!("{{ totalCount edges {{ node {{ {} }} }} }}", p.sdl.selection(&node, 1, &mut vec![], &mut BTreeSet::new()))
                } else if p.sdl.is_composite(&b) {
                    format!("{{ {} }}", p.sdl.selection(&b, 1, &mut vec![], &mut BTreeSet::new()))
                } else {
                    String::new()
                };
                let resp = p.post(&attacker.token, &format!("{{ {}({}) {sel} }}", f.name, args.join(", ")), json!({})).await;
                let mut seen = BTreeSet::new();
                records(&p.sdl, &resp["data"], &mut seen);
                assert!(seen.is_disjoint(&forbidden), "{ctx}: {} reveals {seen:?}", f.name);
                p.cover("root queries probed with IDs", f.name.clone());
            }

            // 4. Cursors of the owner's root connections, reused by the attacker (one batch;
            //    one request each if the batch has errors, e.g. a cursor rejected as invalid).
            let mut cursor_probes = Vec::new();
            for (root, cursors) in &crawls[oi].cursors {
                let (Some(first), Some(last)) = (cursors.first(), cursors.last()) else { continue };
                cursor_probes.push((root.clone(), "first: 1000, after", first.clone()));
                cursor_probes.push((root.clone(), "last: 1000, before", last.clone()));
                p.cover("cursors reused across viewers", root.clone());
            }
            let field = |i: usize, (root, dir, _): &(String, &str, String)| {
                format!("c{i}: {root}({dir}: $c{i}) {{ totalCount edges {{ node {{ __typename id }} }} }}")
            };
            let vars: Vec<String> = (0..cursor_probes.len()).map(|i| format!("$c{i}: Cursor")).collect();
            let fields: Vec<String> = cursor_probes.iter().enumerate().map(|(i, c)| field(i, c)).collect();
            let values: serde_json::Map<String, Value> =
                cursor_probes.iter().enumerate().map(|(i, (_, _, c))| (format!("c{i}"), json!(c))).collect();
            let batch =
                p.post(&attacker.token, &format!("query({}) {{ {} }}", vars.join(", "), fields.join(" ")), Value::Object(values)).await;
            let answers: Vec<Value> = if batch["errors"] == json!([]) {
                (0..cursor_probes.len()).map(|i| batch["data"][format!("c{i}")].clone()).collect()
            } else {
                let mut answers = Vec::new();
                for (i, probe) in cursor_probes.iter().enumerate() {
                    let q = format!("query($c{i}: Cursor) {{ {} }}", field(i, probe));
                    let resp = p.post(&attacker.token, &q, json!({format!("c{i}"): probe.2})).await;
                    match resp["errors"].as_array().and_then(|e| e.first()) {
                        Some(e) => {
                            assert_eq!(e["extensions"]["code"], "BAD_USER_INPUT", "{ctx}: {} with the owner's cursor", probe.0);
                            answers.push(Value::Null);
                        }
                        None => answers.push(resp["data"][format!("c{i}")].clone()),
                    }
                }
                answers
            };
            for ((root, dir, _), answer) in cursor_probes.iter().zip(answers) {
                if answer.is_null() {
                    continue;
                }
                let mut seen = BTreeSet::new();
                records(&p.sdl, &answer, &mut seen);
                assert!(seen.is_disjoint(&forbidden), "{ctx}: {root}({dir}: owner's cursor) reveals {seen:?}");
                let own: BTreeSet<String> = crawls[ai].by_root[root].iter().map(|(_, id)| id.clone()).collect();
                assert!(seen.iter().all(|(_, id)| own.contains(id)), "{ctx}: {root} with the owner's cursor shows new records");
                assert_eq!(answer["totalCount"], crawls[ai].totals[root], "{ctx}: {root} totalCount with a foreign cursor");
            }

            // 5. where: idIn and every has…With, aimed at the owner's records (one batch).
            let mut probes = Vec::new();
            for f in p.sdl.objects["Query"].clone() {
                let Some(input) = p.sdl.where_input(&f) else { continue };
                let counted = p.sdl.connection_node(&f.base()).is_some();
                let sel = if counted { "{ totalCount edges { node { __typename id } } }" } else { "{ __typename id }" };
                probes.push((format!("{}.where.idIn", f.name), format!("{}(where: {{idIn: {}}}) {sel}", f.name, id_list(&forbidden_ids))));
                for (has, _) in p.sdl.has_with(&input) {
                    let q = format!("{}(where: {{{has}: [{{idIn: {}}}]}}) {sel}", f.name, id_list(&forbidden_ids));
                    probes.push((format!("{}.where.{has}", f.name), q));
                }
            }
            let batch: Vec<String> = probes.iter().enumerate().map(|(i, (_, q))| format!("p{i}: {q}")).collect();
            let batch = format!("{{ {} }}", batch.join(" "));
            let resp = p.post(&attacker.token, &batch, json!({})).await;
            assert_eq!(resp["errors"], json!([]), "{ctx}: where probes");
            for (i, (label, _)) in probes.iter().enumerate() {
                let r = &resp["data"][format!("p{i}")];
                let mut seen = BTreeSet::new();
                records(&p.sdl, r, &mut seen);
                assert!(seen.is_disjoint(&forbidden), "{ctx}: {label} reveals {seen:?}");
                match r.get("totalCount") {
                    Some(total) => assert_eq!(total, &json!(0), "{ctx}: {label} matches through the owner's records"),
                    None => assert_eq!(r, &json!([]), "{ctx}: {label}"),
                }
                p.cover(if label.contains(".where.has") { "has…With filters" } else { "where idIn" }, label.clone());
            }
            // 5b. A bare has<Edge> counts only the neighbours the viewer sees: it selects
            //     exactly what has<Edge>With: [{}] (some visible neighbour) selects, unless its
            //     description says the edge's field shows every neighbour as a reduced …Info
            //     (then it selects at least as much).
            let mut pairs = Vec::new();
            for f in p.sdl.objects["Query"].clone() {
                let Some(input) = p.sdl.where_input(&f) else { continue };
                let counted = p.sdl.connection_node(&f.base()).is_some();
                for (with, _) in p.sdl.has_with(&input) {
                    let has = with.trim_end_matches("With").to_string();
                    if !p.sdl.inputs[&input].iter().any(|i| i.name == has) {
                        continue;
                    }
                    let sel = if counted { "{ totalCount edges { node { id } } }" } else { "{ __typename id }" };
                    let (bare, any) =
                        (format!("{}(where: {{{has}: true}}) {sel}", f.name), format!("{}(where: {{{with}: [{{}}]}}) {sel}", f.name));
                    let shown = p.sdl.input_descriptions.get(&format!("{input}.{has}")).is_some_and(|d| d == query::filter::SHOWN_AS_INFO);
                    pairs.push((format!("{}.where.{has}", f.name), bare, any, shown));
                }
            }
            let pair_batch = |pick: fn(&(String, String, String, bool)) -> &String| {
                let fields: Vec<String> = pairs.iter().enumerate().map(|(i, pair)| format!("p{i}: {}", pick(pair))).collect();
                format!("{{ {} }}", fields.join(" "))
            };
            let bare = p.post(&attacker.token, &pair_batch(|(_, bare, _, _)| bare), json!({})).await;
            let any = p.post(&attacker.token, &pair_batch(|(_, _, any, _)| any), json!({})).await;
            assert_eq!((&bare["errors"], &any["errors"]), (&json!([]), &json!([])), "{ctx}: bare has<Edge> probes");
            for (i, (label, _, _, shown)) in pairs.iter().enumerate() {
                let key = format!("p{i}");
                if *shown {
                    let size = |v: &Value| v["totalCount"].as_u64().or(v.as_array().map(|a| a.len() as u64));
                    let (b, a) = (size(&bare["data"][&key]), size(&any["data"][&key]));
                    assert!(b >= a, "{ctx}: {label}: every neighbour counts, the visible ones too");
                    p.cover("bare has<Edge> filters shown as …Info", label.clone());
                } else {
                    assert_eq!(bare["data"][&key], any["data"][&key], "{ctx}: {label}: true selects what some visible neighbour selects");
                    p.cover("bare has<Edge> filters", label.clone());
                }
            }

            // 6. Mutations with the owner's IDs of their entity's type, as the attacker with
            //    access `all`: NOT_FOUND, no entity, nothing written.
            let writes = fake.writes();
            for f in p.sdl.objects["Mutation"].clone() {
                let Some((arg, target, in_input)) = mutation_id_argument(&p.sdl, &f) else { continue };
                let ids: Vec<&String> = forbidden_ids.iter().filter(|id| type_of(id) == target).collect();
                let payload = p.sdl.objects[&f.base()].clone();
                let entity = payload.iter().find(|pf| p.sdl.nodes.contains(&pf.base())).map(|pf| format!("{} {{ id }}", pf.name));
                for chunk in ids.chunks(query::mutations::MAX_MUTATIONS) {
                    let fields: Vec<String> = chunk
                        .iter()
                        .enumerate()
                        .map(|(i, id)| {
                            let args = mutation_args(&p.sdl, &f, &arg, in_input, id);
                            format!("m{i}: {}({args}) {{ errors {{ code }} {} }}", f.name, entity.clone().unwrap_or_default())
                        })
                        .collect();
                    let resp = p.post(&attacker.writer, &format!("mutation {{ {} }}", fields.join(" ")), json!({})).await;
                    assert_eq!(resp["errors"], json!([]), "{ctx}: {}", f.name);
                    for (i, id) in chunk.iter().enumerate() {
                        let answer = &resp["data"][format!("m{i}")];
                        assert_eq!(answer["errors"][0]["code"], "NOT_FOUND", "{ctx}: {} on {id}: {answer}", f.name);
                        let mut seen = BTreeSet::new();
                        records(&p.sdl, answer, &mut seen);
                        assert!(seen.is_empty(), "{ctx}: {} reveals {seen:?}", f.name);
                    }
                    p.cover("mutations probed with IDs", f.name.clone());
                }
            }
            assert_eq!(fake.writes(), writes, "{ctx}: no attacker's mutation reached the cluster");

            // The same filters as the owner, over its own records: the probes can match at all.
            if owner_checked.insert(oi) {
                let resp = p.post(&owner.token, &batch, json!({})).await;
                for (i, (label, _)) in probes.iter().enumerate() {
                    if label.contains(".where.has") && resp["data"][format!("p{i}")]["totalCount"].as_u64().unwrap_or(0) > 0 {
                        has_with_hits_for_owner += 1;
                    }
                }
            }
        }
    }

    // Coverage: every root query of the SDL, every edge, and that the probes can match.
    let all_roots: BTreeSet<String> = p.sdl.objects["Query"].iter().map(|f| f.name.clone()).collect();
    let covered_roots: BTreeSet<String> =
        p.covered["root queries crawled"].union(&p.covered["root queries probed with IDs"]).cloned().collect();
    assert_eq!(covered_roots, all_roots, "every root query of query/schema.graphql is probed");
    assert!(has_with_hits_for_owner > 0 || !p.covered.contains_key("has…With filters"), "has…With probes match the owner's own data");
    for t in ["Application", "ApiExposure", "ApiSubscription", "EventSubscription", "Approval", "Team"] {
        assert!(p.covered["record types probed"].contains(t), "{t} records are probed");
    }
    // Every mutation that takes an entity's ID was probed with one.
    let id_mutations: BTreeSet<String> =
        p.sdl.objects["Mutation"].iter().filter(|f| mutation_id_argument(&p.sdl, f).is_some()).map(|f| f.name.clone()).collect();
    assert!(id_mutations.len() >= 10, "{id_mutations:?}");
    assert_eq!(p.covered["mutations probed with IDs"], id_mutations, "every mutation with an ID is probed");
    let edges = p.edges.clone();
    p.covered.insert("nested edges crawled", edges);
    println!("isolation probe: {} viewers, {pairs} owner/attacker pairs, {} requests", viewers.len(), p.requests);
    println!("  owners' has…With filters that matched their own records: {has_with_hits_for_owner}");
    for (what, items) in &p.covered {
        println!("  {what} ({}): {}", items.len(), items.iter().cloned().collect::<Vec<_>>().join(", "));
    }
    if !p.covered.contains_key("has…With filters") {
        println!("  note: the schema has no has…With filters yet");
    }
    p.server.stop().await;
}
