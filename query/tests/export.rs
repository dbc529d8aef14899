//! Exports (`query::export`) on the example world, with pages of 3 so that every export reads
//! many: for every exportable root field of the schema and a team, a group and an admin, the
//! exported nodes equal a full `first`/`after` walk (or the list) in order; rows written after an
//! export started never reach it (one read view); another team's export holds none of a team's
//! rows; what is not one query of one root connection or list is refused with a code before any
//! row.

mod support;

use async_graphql::parser::types::{BaseType, TypeKind, TypeSystemDefinition};
use query::export::{Export, Format};
use query::viewer::Viewer;
use query::QueryConfig;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};
use storage::search::Catalogue;
use support::{admin, error_codes, group_viewer, reference_time, team_viewer, World};

/// The page size of every export and walk here.
const PAGE: usize = 3;

fn api() -> query::Api {
    let limits = query::limits::Limits { max_page_size: PAGE, ..query::limits::Limits::default() };
    query::build_schema(QueryConfig { now: Some(reference_time()), limits, ..QueryConfig::default() }).unwrap()
}

/// An exportable root field: its name, required arguments, whether it is a connection, and a
/// selection of its nodes (every scalar field without arguments, and `__typename`).
struct Root {
    name: String,
    args: String,
    connection: bool,
    selection: String,
}

/// Every root field of the schema the export walks, read from the SDL.
fn roots(api: &query::Api, some_id: &str) -> Vec<Root> {
    let doc = async_graphql::parser::parse_schema(api.sdl()).unwrap();
    let mut types = HashMap::new();
    for d in &doc.definitions {
        if let TypeSystemDefinition::Type(t) = d {
            types.insert(t.node.name.node.to_string(), t.node.kind.clone());
        }
    }
    let named = |ty: &async_graphql::parser::types::Type| -> (String, bool) {
        match &ty.base {
            BaseType::Named(n) => (n.to_string(), false),
            BaseType::List(inner) => match &inner.base {
                BaseType::Named(n) => (n.to_string(), true),
                BaseType::List(_) => (String::new(), true),
            },
        }
    };
    let fields = |name: &str| match types.get(name) {
        Some(TypeKind::Object(o)) => o.fields.iter().map(|f| f.node.clone()).collect(),
        _ => Vec::new(),
    };
    let selection = |node: &str| {
        let mut s = vec!["__typename".to_string()];
        for f in fields(node) {
            let (ty, _) = named(&f.ty.node);
            let leaf = matches!(types.get(&ty), Some(TypeKind::Scalar | TypeKind::Enum(_)))
                || ["String", "Int", "Boolean", "ID", "Float"].contains(&ty.as_str());
            if leaf && f.arguments.is_empty() {
                s.push(f.name.node.to_string());
            }
        }
        s.join(" ")
    };
    let mut out = Vec::new();
    for f in fields("Query") {
        let name = f.name.node.to_string();
        let (ty, list) = named(&f.ty.node);
        let args = match name.as_str() {
            "history" => format!("id: \"{some_id}\""),
            "catalogueSearch" => "query: \"payments\"".to_string(),
            "nodes" => format!("ids: [\"{some_id}\"]"),
            _ if f.arguments.iter().any(|a| a.node.ty.node.nullable.not() && a.node.default_value.is_none()) => continue,
            _ => String::new(),
        };
        let edge = fields(&ty).into_iter().find(|c| c.name.node == "edges").map(|e| named(&e.ty.node).0);
        let node = edge.and_then(|e| fields(&e).into_iter().find(|n| n.name.node == "node")).map(|n| named(&n.ty.node).0);
        match (node, list) {
            (Some(node), false) => out.push(Root { name, args, connection: true, selection: selection(&node) }),
            (None, true) if matches!(types.get(&ty), Some(TypeKind::Object(_) | TypeKind::Interface(_) | TypeKind::Union(_))) => {
                out.push(Root { name, args, connection: false, selection: selection(&ty) })
            }
            _ => {}
        }
    }
    out
}

trait Not {
    fn not(self) -> bool;
}

impl Not for bool {
    fn not(self) -> bool {
        !self
    }
}

/// Every node of `root` for `viewer`: pages of [`PAGE`] with `first`/`after`, or the list.
async fn walk(w: &World, api: &query::Api, viewer: &Viewer, root: &Root) -> Vec<Value> {
    let mut nodes = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let mut args = vec![root.args.clone()];
        if root.connection {
            args.push(format!("first: {PAGE}"));
            if let Some(a) = &after {
                args.push(format!("after: \"{a}\""));
            }
        }
        let args = args.into_iter().filter(|a| !a.is_empty()).collect::<Vec<_>>().join(", ");
        let args = if args.is_empty() { String::new() } else { format!("({args})") };
        let q = if root.connection {
            format!("{{ {}{args} {{ edges {{ node {{ {} }} }} pageInfo {{ hasNextPage endCursor }} }} }}", root.name, root.selection)
        } else {
            format!("{{ {}{args} {{ {} }} }}", root.name, root.selection)
        };
        let r = serde_json::to_value(api.execute(&w.store, viewer.clone(), async_graphql::Request::new(q.clone())).await).unwrap();
        assert!(r.get("errors").is_none(), "{q}: {r}");
        let data = &r["data"][&root.name];
        if !root.connection {
            return data.as_array().unwrap().clone();
        }
        nodes.extend(data["edges"].as_array().unwrap().iter().map(|e| e["node"].clone()));
        if data["pageInfo"]["hasNextPage"] != json!(true) {
            return nodes;
        }
        after = Some(data["pageInfo"]["endCursor"].as_str().unwrap().to_string());
    }
}

/// The rows of a whole export of `query` (`Err`: refused before any row, with its codes).
async fn export(w: &World, api: &query::Api, viewer: &Viewer, query: &str, format: Format) -> Result<(Vec<u8>, u64), Vec<String>> {
    let request = async_graphql::Request::new(query);
    let refused = |r: Box<async_graphql::Response>| error_codes(&serde_json::to_value(*r).unwrap());
    let mut e: Export =
        api.prepare_export(&w.store, viewer.clone(), request, query::deadline::Deadline::none(), format).map_err(refused)?;
    let mut out = e.preamble();
    while let Some(page) = api.export_page(&mut e, &mut out, usize::MAX).await.map_err(refused)? {
        assert!(!page.over);
    }
    Ok((out, e.revision()))
}

fn lines(bytes: &[u8]) -> Vec<Value> {
    std::str::from_utf8(bytes).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn world_with_search() -> (World, Catalogue, tempfile::TempDir) {
    let w = World::load();
    let dir = tempfile::tempdir().unwrap();
    let (catalogue, _) = Catalogue::open(&dir.path().join("search"), &w.store).unwrap();
    (w, catalogue, dir)
}

#[tokio::test]
async fn every_root_connection_and_list_exports_what_a_full_walk_reads_for_every_viewer() {
    let (w, _catalogue, _dir) = world_with_search();
    let api = api();
    let some_app = w.data(&team_viewer("payments--checkout", "poc"), "{ applications(first: 1) { edges { node { id } } } }").await
        ["applications"]["edges"][0]["node"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let roots = roots(&api, &some_app);
    let names: BTreeSet<&str> = roots.iter().map(|r| r.name.as_str()).collect();
    for expected in ["applications", "apiSubscriptions", "zones", "groups", "activity", "history", "catalogueSearch", "apis"] {
        assert!(names.contains(expected), "{expected} is exported: {names:?}");
    }
    let viewers = [admin(), group_viewer("payments", "poc"), team_viewer("payments--checkout", "poc")];
    let mut compared = 0;
    for root in &roots {
        for viewer in &viewers {
            let expected = walk(&w, &api, viewer, root).await;
            let args = if root.args.is_empty() { String::new() } else { format!("({})", root.args) };
            let q = if root.connection {
                format!("{{ {}{args} {{ totalCount edges {{ cursor node {{ {} }} }} }} }}", root.name, root.selection)
            } else {
                format!("{{ {}{args} {{ {} }} }}", root.name, root.selection)
            };
            let (ndjson, _) = export(&w, &api, viewer, &q, Format::Ndjson).await.unwrap_or_else(|e| panic!("{q}: {e:?}"));
            assert_eq!(lines(&ndjson), expected, "{} for {:?}", root.name, viewer.client_id);
            let (csv, _) = export(&w, &api, viewer, &q, Format::Csv).await.unwrap();
            let text = String::from_utf8(csv).unwrap();
            assert_eq!(text.matches("\r\n").count(), expected.len() + 1, "{}: a header and one record per node", root.name);
            compared += expected.len();
        }
    }
    assert!(compared > 500, "the world's nodes were compared: {compared}");
}

#[tokio::test]
async fn an_export_reads_one_revision_while_the_store_changes() {
    let w = World::load();
    let api = api();
    let q = "{ applications { edges { node { id name } } } }";
    let root = Root { name: "applications".into(), args: String::new(), connection: true, selection: "id name".into() };
    let before = walk(&w, &api, &admin(), &root).await;
    let mut e =
        api.prepare_export(&w.store, admin(), async_graphql::Request::new(q), query::deadline::Deadline::none(), Format::Ndjson).unwrap();
    let mut exported = Vec::new();
    api.export_page(&mut e, &mut exported, usize::MAX).await.unwrap().unwrap();
    // Between the first page and the next: new applications (their names sort first and last).
    let template = support::world_documents().into_iter().find(|d| d["kind"] == "Application").unwrap();
    let added: Vec<Value> = ["aaa-added", "zzz-added"]
        .iter()
        .map(|name| {
            let mut d = template.clone();
            d["metadata"]["name"] = json!(name);
            d
        })
        .collect();
    let report = support::load(&w.store, &added);
    assert_eq!(report.written.values().sum::<usize>(), 2, "{report:?}");
    while api.export_page(&mut e, &mut exported, usize::MAX).await.unwrap().is_some() {}
    assert_eq!(lines(&exported), before, "every page reads the revision of the first");
    let after = walk(&w, &api, &admin(), &root).await;
    assert_eq!(after.len(), before.len() + 2, "the new applications are there for new reads");
    assert!(w.store.read().unwrap().revision().unwrap() > e.revision());
}

#[tokio::test]
async fn a_team_exports_none_of_another_teams_rows() {
    let (w, _catalogue, _dir) = world_with_search();
    let api = api();
    let (a, b) = (team_viewer("payments--checkout", "poc"), team_viewer("payments--ledger", "poc"));
    let mut probed = 0;
    for root in roots(&api, "x").iter().filter(|r| r.connection && r.selection.contains(" id") && r.args.is_empty()) {
        let q = format!("{{ {} {{ edges {{ node {{ id }} }} }} }}", root.name);
        let ids = |rows: Vec<Value>| rows.into_iter().map(|r| r["id"].as_str().unwrap().to_string()).collect::<BTreeSet<_>>();
        let sa = ids(lines(&export(&w, &api, &a, &q, Format::Ndjson).await.unwrap().0));
        let sb = ids(lines(&export(&w, &api, &b, &q, Format::Ndjson).await.unwrap().0));
        let only_a: BTreeSet<_> = sa.difference(&sb).collect();
        let csv = String::from_utf8(export(&w, &api, &b, &q, Format::Csv).await.unwrap().0).unwrap();
        for id in &only_a {
            assert!(!csv.contains(id.as_str()), "{}: the ledger team's export holds {id} of the checkout team", root.name);
        }
        let walked =
            walk(&w, &api, &b, &Root { name: root.name.clone(), args: String::new(), connection: true, selection: "id".into() }).await;
        assert_eq!(sb, ids(walked), "{}: the ledger team exports what it may read", root.name);
        probed += only_a.len();
    }
    assert!(probed > 10, "the teams own different rows: {probed}");
}

#[tokio::test]
async fn what_is_not_one_query_of_one_root_connection_or_list_is_refused_before_any_row() {
    let w = World::load();
    let api = api();
    let nested = format!("{{ teams {{ edges {{ node {}{} }} }} }}", "{ applications { edges { node ".repeat(50), "}}}".repeat(50));
    let bomb: String = (0..16).map(|i| format!("fragment F{i} on Zone {{ ...F{} ...F{} }} ", i + 1, i + 1)).collect::<String>()
        + "fragment F16 on Zone { name }";
    let cases: Vec<(String, &[&str])> = vec![
        ("{ zones { name } groups { name } }".into(), &["NOT_EXPORTABLE"]),
        ("{ zones { name } __typename }".into(), &["NOT_EXPORTABLE"]),
        ("{ __typename }".into(), &["NOT_EXPORTABLE"]),
        (r#"{ node(id: "x") { id } }"#.into(), &["NOT_EXPORTABLE"]),
        ("mutation { __typename }".into(), &["NOT_EXPORTABLE"]),
        ("subscription { zoneChanges { __typename } }".into(), &["NOT_EXPORTABLE"]),
        ("{ ...Q } fragment Q on Query { zones { name } }".into(), &["NOT_EXPORTABLE"]),
        ("{ zones @include(if: true) { name } }".into(), &["NOT_EXPORTABLE"]),
        ("{ applications { totalCount } }".into(), &["NOT_EXPORTABLE"]),
        ("{ applications { edges @skip(if: false) { node { id } } } }".into(), &["NOT_EXPORTABLE"]),
        ("query A { zones { name } } query B { groups { name } }".into(), &["NOT_EXPORTABLE"]),
        (nested, &["QUERY_TOO_DEEP"]),
        (format!("{{ zones {{ ...F0 }} }} {bomb}"), &["NOT_EXPORTABLE", "QUERY_TOO_COMPLEX"]),
        ("{ applications { edges { node { nope } } } }".into(), &["GRAPHQL_VALIDATION_FAILED"]),
        ("{ applications(where: {nameHasPrefix: 7}) { edges { node { id } } } }".into(), &["GRAPHQL_VALIDATION_FAILED"]),
        ("{ zones { name ".into(), &["GRAPHQL_VALIDATION_FAILED"]),
        ("{ zonez { name } }".into(), &["GRAPHQL_VALIDATION_FAILED"]),
        ("query($s: Int) { zones { name } }".into(), &["GRAPHQL_VALIDATION_FAILED"]),
        (r#"{ applications(first: "x") { edges { node { id } } } }"#.into(), &["GRAPHQL_VALIDATION_FAILED"]),
        ("{ applications(after: 7) { edges { node { id } } } }".into(), &["GRAPHQL_VALIDATION_FAILED"]),
    ];
    for (q, codes) in cases {
        for format in [Format::Ndjson, Format::Csv] {
            let refused = export(&w, &api, &admin(), &q, format).await.err().unwrap_or_else(|| panic!("{q} is refused"));
            assert!(refused.len() == 1 && codes.contains(&refused[0].as_str()), "{q}: {refused:?}, expected one of {codes:?}");
        }
    }
    // The connection's own page arguments and other fields are ignored; variables they used are
    // dropped from the operation.
    let q = "query($n: Int, $c: Cursor) { applications(first: $n, after: $c) { totalCount pageInfo { endCursor } edges { cursor node { id } } } }";
    let request = async_graphql::Request::new(q).variables(async_graphql::Variables::from_json(json!({"n": 1})));
    let mut e = api.prepare_export(&w.store, admin(), request, query::deadline::Deadline::none(), Format::Ndjson).unwrap();
    let (mut rows, mut out) = (0, Vec::new());
    while let Some(page) = api.export_page(&mut e, &mut out, usize::MAX).await.unwrap() {
        rows += page.rows;
    }
    let total = w.data(&admin(), "{ applications { totalCount } }").await["applications"]["totalCount"].as_u64().unwrap();
    assert_eq!(rows as u64, total);
}

#[tokio::test]
async fn csv_columns_follow_the_selection_and_join_lists() {
    let w = World::load();
    let api = api();
    let q = "{ applications(where: {name: \"checkout-web\"}) { edges { node { name team: ownerTeam { name } ...Subs } } } } \
             fragment Subs on Application { subscribedApis { edges { node { basePath } } } name }";
    let (csv, _) = export(&w, &api, &admin(), q, Format::Csv).await.unwrap();
    let text = String::from_utf8(csv).unwrap();
    let mut records = text.split("\r\n");
    assert_eq!(records.next(), Some("name,team.name,subscribedApis.edges.node.basePath"));
    let d = w.data(&admin(), "{ applications(where: {name: \"checkout-web\"}) { edges { node { name ownerTeam { name } subscribedApis { edges { node { basePath } } } } } } }").await;
    let node = &d["applications"]["edges"][0]["node"];
    let paths: Vec<&str> =
        node["subscribedApis"]["edges"].as_array().unwrap().iter().map(|e| e["node"]["basePath"].as_str().unwrap()).collect();
    assert!(!paths.is_empty(), "{d}");
    let expected = format!("{},{},{}", node["name"].as_str().unwrap(), node["ownerTeam"]["name"].as_str().unwrap(), paths.join(";"));
    assert_eq!(records.next(), Some(expected.as_str()));
}

/// Rows of columns are written by the root connection itself (`FlatRows`); the same selection
/// forced through GraphQL's own resolution (an `@include(if: true)` fragment) gives the same
/// bytes, for every root connection of an entity, three viewers, both formats, aliases and
/// fragments, filtered and ordered.
#[tokio::test]
async fn rows_written_from_the_records_equal_what_graphql_resolves() {
    let (w, _catalogue, _dir) = world_with_search();
    let api = api();
    let viewers = [admin(), group_viewer("payments", "poc"), team_viewer("payments--checkout", "poc")];
    let (mut flat, mut bytes) = (0, 0);
    for root in roots(&api, "x").iter().filter(|r| r.connection && r.args.is_empty()) {
        let node = root.selection.split(' ').nth(1).map(|_| ()).and(type_of(&api, &root.name));
        let Some(type_name) = node else { continue };
        let Some(columns) = api.columns_of(&type_name) else { continue };
        let fields = format!("id __typename alias: {} {}", columns[0], columns.join(" "));
        for args in ["", "(orderBy: {field: CREATED_AT, direction: DESC})", "(where: {idNEQ: \"x\"})"] {
            let args =
                if args.contains("orderBy") && ["teams", "applications", "approvals", "approvalRequests"].contains(&root.name.as_str()) {
                    args.replace("orderBy: {", "orderBy: [{").replace("DESC}", "DESC}]")
                } else {
                    args.to_string()
                };
            let direct = format!("{{ {}{args} {{ edges {{ node {{ ...F }} }} }} }} fragment F on {type_name} {{ {fields} }}", root.name);
            let resolved = format!("{{ {}{args} {{ edges {{ node {{ ... @include(if: true) {{ {fields} }} }} }} }} }}", root.name);
            for viewer in &viewers {
                for format in [Format::Ndjson, Format::Csv] {
                    let e = api
                        .prepare_export(
                            &w.store,
                            viewer.clone(),
                            async_graphql::Request::new(&direct),
                            query::deadline::Deadline::none(),
                            format,
                        )
                        .unwrap();
                    assert!(e.is_flat(), "{direct}");
                    let r = api
                        .prepare_export(
                            &w.store,
                            viewer.clone(),
                            async_graphql::Request::new(&resolved),
                            query::deadline::Deadline::none(),
                            format,
                        )
                        .unwrap();
                    assert!(!r.is_flat(), "{resolved}");
                    let a = export(&w, &api, viewer, &direct, format).await.unwrap_or_else(|e| panic!("{direct}: {e:?}")).0;
                    let b = export(&w, &api, viewer, &resolved, format).await.unwrap().0;
                    assert_eq!(String::from_utf8(a.clone()).unwrap(), String::from_utf8(b).unwrap(), "{direct} for {:?}", viewer.client_id);
                    flat += 1;
                    bytes += a.len();
                }
            }
        }
    }
    assert!(flat >= 17 * 3 * 3 * 2, "every root connection of an entity was compared: {flat}");
    assert!(bytes > 100_000, "{bytes}");
}

/// The node type of the root connection `field`, from the SDL.
fn type_of(api: &query::Api, field: &str) -> Option<String> {
    let doc = async_graphql::parser::parse_schema(api.sdl()).unwrap();
    doc.definitions.iter().find_map(|d| match d {
        TypeSystemDefinition::Type(t) if t.node.name.node == "Query" => match &t.node.kind {
            TypeKind::Object(o) => o.fields.iter().find(|f| f.node.name.node == field).and_then(|f| match &f.node.ty.node.base {
                BaseType::Named(n) => n.strip_suffix("Connection").map(str::to_string),
                BaseType::List(_) => None,
            }),
            _ => None,
        },
        _ => None,
    })
}

/// A page is one answer, bounded by `graphql.maxResponseBytes` (at most `export::PAGE_BYTES`):
/// a page over it is read again smaller, down to one node; a node over it ends the export with
/// `RESPONSE_TOO_LARGE`. Rows of columns and rows GraphQL resolves alike.
#[tokio::test]
async fn a_page_over_the_answer_budget_is_read_again_smaller() {
    let w = World::load();
    let limits = query::limits::Limits {
        max_page_size: 8,
        max_response_bytes: 64 << 10,
        max_complexity: 100_000,
        ..query::limits::Limits::default()
    };
    let api = query::build_schema(QueryConfig { now: Some(reference_time()), limits, ..QueryConfig::default() }).unwrap();
    let total = w.data(&admin(), "{ applications { totalCount } }").await["applications"]["totalCount"].as_u64().unwrap() as usize;
    // About 20 KB a row: three rows fit a page, eight do not.
    let aliases: String = (0..300).map(|i| format!("a{i}: id ")).collect();
    for fields in [aliases.clone(), format!("... @include(if: true) {{ {aliases} }}")] {
        let q = format!("{{ applications {{ edges {{ node {{ {fields} }} }} }} }}");
        let (rows, _) = export(&w, &api, &admin(), &q, Format::Ndjson).await.unwrap_or_else(|e| panic!("{e:?}"));
        let rows = lines(&rows);
        assert_eq!(rows.len(), total);
        assert!(rows.iter().all(|r| r["a299"] == r["a0"]), "whole rows");
    }
    let huge: String = (0..2000).map(|i| format!("a{i}: id ")).collect();
    let q = format!("{{ applications {{ edges {{ node {{ {huge} }} }} }} }}");
    let request = async_graphql::Request::new(q);
    let mut e = api.prepare_export(&w.store, admin(), request, query::deadline::Deadline::none(), Format::Ndjson).unwrap();
    let refused = api.export_page(&mut e, &mut Vec::new(), usize::MAX).await.expect_err("one node over the budget");
    assert_eq!(error_codes(&serde_json::to_value(*refused).unwrap()), ["RESPONSE_TOO_LARGE"]);
}

/// A page halved for one tenant's large rows grows back once the rows are small again: the
/// applications that expose APIs answer about 3 KB per exposure here (20 aliases), the others
/// 0.1 KB, and the export's pages (4 nodes and 16 KB at most) follow them down and up.
#[tokio::test]
async fn a_page_halved_for_large_rows_grows_back_for_small_ones() {
    let w = World::load();
    let limits = query::limits::Limits {
        max_page_size: 4,
        max_response_bytes: 16 << 10,
        max_complexity: 1_000_000,
        max_nodes: 1_000_000,
        ..query::limits::Limits::default()
    };
    let api = query::build_schema(QueryConfig { now: Some(reference_time()), limits, ..QueryConfig::default() }).unwrap();
    let aliases: String = (0..20).map(|i| format!("s{i}: exposedApis {{ edges {{ node {{ id basePath }} }} }} ")).collect();
    let q = format!("{{ applications {{ edges {{ node {{ id {aliases} }} }} }} }}");
    let mut e =
        api.prepare_export(&w.store, admin(), async_graphql::Request::new(q), query::deadline::Deadline::none(), Format::Ndjson).unwrap();
    let (mut out, mut sizes) = (Vec::new(), vec![e.page_size()]);
    while api.export_page(&mut e, &mut out, usize::MAX).await.unwrap_or_else(|r| panic!("{r:?}")).is_some() {
        sizes.push(e.page_size());
    }
    let halved = sizes.iter().position(|s| *s < 4).expect("a page was halved");
    assert!(sizes[halved..].contains(&4), "the pages grew back: {sizes:?}");
    let total = w.data(&admin(), "{ applications { totalCount } }").await["applications"]["totalCount"].as_u64().unwrap() as usize;
    assert_eq!(lines(&out).len(), total);
}
