//! The planned execution path answers byte for byte as async-graphql's resolvers do: a generated
//! set of queries (every root connection, its columns, every order, both directions of
//! pagination, fragments, aliases, directives, variables and errors) runs through both paths for
//! a team, a group and an admin viewer. Every other query of this crate's suites is compared too
//! (`support::World::run`).

mod support;

use async_graphql::{Request, Variables};
use query::viewer::Viewer;
use serde_json::{json, Value};
use support::{admin, group_viewer, planned_agrees, team_viewer, World};

/// One generated request and whether its plan must answer it.
struct Case {
    query: String,
    variables: Value,
    planned: bool,
}

fn case(query: String, planned: bool) -> Case {
    Case { query, variables: json!({}), planned }
}

/// A root connection of the schema: its field, node type, order fields, whether `orderBy` takes
/// a list, and the node's columns.
struct Root {
    field: String,
    node: String,
    orders: Vec<String>,
    multi: bool,
    columns: Vec<String>,
}

async fn roots(world: &World) -> Vec<Root> {
    let schema =
        world.data(&admin(), "{ __schema { queryType { fields { name args { name type { kind } } type { ofType { name } } } } } }").await;
    let mut out = Vec::new();
    for f in schema["__schema"]["queryType"]["fields"].as_array().unwrap() {
        let Some(node) = f["type"]["ofType"]["name"].as_str().and_then(|t| t.strip_suffix("Connection")) else { continue };
        let order_by = f["args"].as_array().unwrap().iter().find(|a| a["name"] == "orderBy");
        let multi = order_by.is_some_and(|a| a["type"]["kind"] == "LIST");
        let orders = world.data(&admin(), &format!("{{ __type(name: \"{node}OrderField\") {{ enumValues {{ name }} }} }}")).await;
        let orders = orders["__type"]["enumValues"]
            .as_array()
            .map_or(Vec::new(), |v| v.iter().map(|e| e["name"].as_str().unwrap().to_string()).collect());
        // Connections of entities (`catalogueSearch` lists hits, not records of one kind).
        let Some(columns) = world.api.columns_of(node).map(|c| c.iter().map(|c| c.to_string()).collect()) else { continue };
        out.push(Root { field: f["name"].as_str().unwrap().to_string(), node: node.to_string(), orders, multi, columns });
    }
    out
}

/// The generated cases of one root connection.
fn cases(r: &Root) -> Vec<Case> {
    let (f, node) = (&r.field, &r.node);
    let columns = r.columns.join(" ");
    let page = "pageInfo { hasNextPage hasPreviousPage startCursor endCursor }";
    let mut out = vec![
        case(format!("{{ {f}(first: 3) {{ totalCount {page} edges {{ cursor node {{ __typename id {columns} }} }} }} }}"), true),
        case(format!("{{ {f}(last: 2) {{ {page} edges {{ cursor node {{ id }} }} }} }}"), true),
        case(format!("{{ {f} {{ totalCount }} }}"), true),
        case(format!("query Named {{ a: {f}(first: 2) {{ ...C t: totalCount }} b: __typename }} fragment C on {node}Connection {{ __typename edges {{ __typename node {{ ... on {node} {{ i: id }} ... on Node {{ __typename }} }} }} }}"), true),
        case(format!("{{ {f}(first: 1) {{ totalCount @skip(if: true) edges @include(if: true) {{ node {{ id }} }} pageInfo @include(if: false) {{ endCursor }} }} }}"), true),
        // Errors: the plan gives way, the resolvers answer.
        case(format!("{{ {f}(first: -1) {{ totalCount edges {{ node {{ id }} }} }} }}"), false),
        case(format!("{{ {f}(first: 1, last: 1) {{ edges {{ node {{ id }} }} }} }}"), false),
        case(format!("{{ {f}(after: \"not a cursor\") {{ edges {{ node {{ id }} }} }} }}"), false),
        case(format!("{{ {f}(first: 100000) {{ edges {{ node {{ id }} }} }} }}"), false),
        case(format!("{{ {f}(first: 1, where: {{ id: \"x\" }}) {{ totalCount }} }}"), true),
        // Not covered by plans: the resolvers answer.
        case(format!("{{ {f}(first: 1) {{ edges {{ node {{ id @skip(if: true) }} }} }} }}"), false),
        case(format!("{{ {f}(first: 1) {{ totalCount @skip(if: true) }} }}"), false),
        case(format!("{{ {f}(first: 1) {{ pageInfo {{ hasNextPage @include(if: false) }} totalCount }} }}"), false),
        case(format!("{{ {f}(first: 1) {{ edges {{ node {{ id }} }} }} {f}(first: 1) {{ totalCount }} }}"), false),
    ];
    if r.columns.iter().any(|c| c == "statusPhase") {
        out.push(case(format!("{{ {f} {{ phaseCounts {{ __typename phase count }} }} }}"), true));
    }
    for o in &r.orders {
        for dir in ["ASC", "DESC"] {
            let order = format!("{{field: {o}, direction: {dir}}}");
            out.push(case(format!("{{ {f}(first: 2, orderBy: {order}) {{ {page} edges {{ cursor node {{ id }} }} }} }}"), true));
            out.push(case(format!("{{ {f}(last: 2, orderBy: {order}) {{ {page} edges {{ cursor node {{ id }} }} }} }}"), true));
        }
    }
    if r.multi && r.orders.len() >= 2 {
        let order = format!("[{{field: {}}}, {{field: {}, direction: DESC}}]", r.orders[1], r.orders[0]);
        out.push(case(format!("{{ {f}(first: 3, orderBy: {order}) {{ {page} edges {{ cursor node {{ id }} }} }} }}"), true));
    }
    let variables = format!("query V($n: Int, $a: Cursor, $b: Cursor = null) {{ {f}(first: $n, after: $a, before: $b) {{ {page} edges {{ node {{ id }} }} }} }}");
    for (values, planned) in [
        (json!({"n": 2}), true),
        (json!({}), true),
        (json!({"n": null, "a": null}), true),
        (json!({"n": "2"}), false),
        (json!({"n": 2.5}), false),
        (json!({"n": 3_000_000_000u64}), false),
        (json!({"a": 5}), false),
        (json!({"a": "not a cursor"}), false),
    ] {
        out.push(Case { query: variables.clone(), variables: values, planned });
    }
    out
}

/// A field of an object type: its name, named type, the named type's kind, whether it takes
/// arguments.
struct TypeField {
    name: String,
    ty: String,
    kind: String,
    args: bool,
}

async fn fields_of(world: &World, ty: &str) -> Vec<TypeField> {
    let unwrapped = "kind name ofType { kind name ofType { kind name ofType { kind name } } }";
    let t =
        world.data(&admin(), &format!("{{ __type(name: \"{ty}\") {{ fields {{ name args {{ name }} type {{ {unwrapped} }} }} }} }}")).await;
    let mut out = Vec::new();
    for f in t["__type"]["fields"].as_array().into_iter().flatten() {
        let mut t = &f["type"];
        while t["name"].is_null() && !t["ofType"].is_null() {
            t = &t["ofType"];
        }
        out.push(TypeField {
            name: f["name"].as_str().unwrap().to_string(),
            ty: t["name"].as_str().unwrap_or_default().to_string(),
            kind: t["kind"].as_str().unwrap_or_default().to_string(),
            args: f["args"].as_array().is_some_and(|a| !a.is_empty()),
        });
    }
    out
}

/// The leaf fields without arguments of `ty`, as a selection (`__typename` when it has none).
async fn leaves(world: &World, ty: &str) -> String {
    let names: Vec<String> = fields_of(world, ty)
        .await
        .into_iter()
        .filter(|f| !f.args && matches!(f.kind.as_str(), "SCALAR" | "ENUM"))
        .map(|f| f.name)
        .collect();
    if names.is_empty() {
        "__typename".to_string()
    } else {
        names.join(" ")
    }
}

/// Cases through every field of a root connection's nodes: each leaf, each object (its leaf
/// fields, then one level further), each nested connection. Which of them plans cover is not
/// required here (secrets and interfaces are not planned); their answers must agree.
async fn nested_cases(world: &World, r: &Root) -> Vec<Case> {
    let f = &r.field;
    let mut out = Vec::new();
    for field in fields_of(world, &r.node).await {
        let name = &field.name;
        let selection = match (field.kind.as_str(), field.args) {
            ("SCALAR" | "ENUM", false) => name.clone(),
            ("OBJECT", false) => {
                let mut inner = leaves(world, &field.ty).await;
                for deeper in fields_of(world, &field.ty).await.into_iter().filter(|d| d.kind == "OBJECT" && !d.args) {
                    inner.push_str(&format!(" {} {{ {} }}", deeper.name, leaves(world, &deeper.ty).await));
                }
                format!("{name} {{ {inner} }}")
            }
            ("OBJECT", true) if field.ty.ends_with("Connection") => {
                let node = field.ty.trim_end_matches("Connection");
                format!(
                    "{name}(first: 2) {{ totalCount pageInfo {{ hasNextPage endCursor }} edges {{ cursor node {{ id {} }} }} }}",
                    leaves(world, node).await
                )
            }
            _ => continue,
        };
        out.push(case(format!("{{ {f}(first: 3) {{ edges {{ node {{ id {selection} }} }} }} }}"), false));
    }
    out
}

/// One `where` per input field of the root's `<Node>WhereInput` (every filter operator,
/// `has<Edge>`, `has<Edge>With`, `and`, `or`, `not`), each with a value of its type.
async fn where_cases(world: &World, r: &Root) -> Vec<Case> {
    let unwrapped = "kind name ofType { kind name ofType { kind name } }";
    let input = format!("{}WhereInput", r.node);
    let t = world.data(&admin(), &format!("{{ __type(name: \"{input}\") {{ inputFields {{ name type {{ {unwrapped} }} }} }} }}")).await;
    let mut out = Vec::new();
    for field in t["__type"]["inputFields"].as_array().into_iter().flatten() {
        let (mut ty, mut list) = (&field["type"], false);
        while ty["name"].is_null() && !ty["ofType"].is_null() {
            list |= ty["kind"] == "LIST";
            ty = &ty["ofType"];
        }
        let named = ty["name"].as_str().unwrap();
        let one = match (ty["kind"].as_str().unwrap(), named) {
            ("SCALAR", "Boolean") => "true".to_string(),
            ("SCALAR", "Time") => "\"2026-01-01T00:00:00Z\"".to_string(),
            ("SCALAR", _) => "\"a\"".to_string(),
            ("ENUM", _) => {
                let e = world.data(&admin(), &format!("{{ __type(name: \"{named}\") {{ enumValues {{ name }} }} }}")).await;
                e["__type"]["enumValues"][0]["name"].as_str().unwrap().to_string()
            }
            _ => "{}".to_string(),
        };
        let value = if list { format!("[{one}]") } else { one };
        let f = &r.field;
        out.push(case(
            format!(
                "{{ {f}(first: 3, where: {{ {}: {value} }}) {{ totalCount edges {{ node {{ id }} }} }} }}",
                field["name"].as_str().unwrap()
            ),
            false,
        ));
    }
    out
}

/// The console pages of the benches (`benches/http_queries.rs`): all but Q4 (`node`) planned.
fn bench_cases() -> Vec<Case> {
    vec![
        case("query Q1 { applications(first: 50) { totalCount pageInfo { endCursor hasNextPage } edges { cursor node { \
            id name statusPhase secretRotationPhase zone { name } ownerTeam { name } \
            exposedApis(first: 20) { totalCount edges { node { id basePath visibility active statusPhase } } } \
            subscribedApis(first: 20) { totalCount edges { node { id basePath statusPhase target { basePath } } } } \
            exposedEvents(first: 20) { totalCount edges { node { id } } } \
            subscribedEvents(first: 20) { totalCount edges { node { id } } } } } } }".to_string(), true),
        case("query Q2 { apiSubscriptions(first: 50) { totalCount pageInfo { endCursor hasNextPage } \
            edges { cursor node { id name basePath statusPhase owner { name } target { basePath } } } } }".to_string(), true),
        case("query Q3 { approvals(first: 50) { totalCount pageInfo { endCursor hasNextPage } edges { node { \
            id name state action strategy requester { teamName applicationName } decider { teamName } deciderTeamName } } } }".to_string(), true),
        case("query Q5 { approvals(first: 50, orderBy: [{field: CREATED_AT, direction: DESC}]) { totalCount pageInfo { endCursor hasNextPage } \
            edges { node { id name state createdAt } } } }".to_string(), true),
        case("query Q6 { applications(first: 50, orderBy: [{field: NAME}]) { totalCount pageInfo { endCursor hasNextPage } \
            edges { node { id name statusPhase createdAt } } } }".to_string(), true),
        case("{ teams(first: 5) { edges { node { name applications(first: 3) { totalCount edges { node { id name zone { name } } } } } } } }".to_string(), true),
        // A fragment on a union the node belongs to: skipped on both paths.
        case("{ apis(first: 2) { edges { node { ...E } } } } fragment E on CatalogueEntry { __typename ... on Api { basePath } }".to_string(), false),
        case("{ apis(first: 2) { edges { node { id ...E } } } } fragment E on CatalogueEntry { __typename }".to_string(), true),
        case("{ eventTypes(first: 2) { edges { node { ... on CatalogueEntry { t: __typename } } } } }".to_string(), false),
        // A field without an unambiguous resolver under a learned parent type.
        case("{ apiSubscriptions(first: 1) { edges { node { security { m2m { scopes } } } } } }".to_string(), false),
    ]
}

/// `node(id:)` of the first record of each root connection, with the node type's leaves, on
/// both paths; Q4 of the benches (an application with its team and zone) is planned for its
/// owner team.
async fn node_cases(world: &World, roots: &[Root], viewers: &[Viewer]) -> usize {
    let mut planned = 0;
    for r in roots {
        let first = world.data(&admin(), &format!("{{ {}(first: 1) {{ edges {{ node {{ id }} }} }} }}", r.field)).await;
        let Some(id) = first[r.field.as_str()]["edges"][0]["node"]["id"].as_str() else { continue };
        let leaves = leaves(world, &r.node).await;
        for (query, id) in [
            (format!("query N($id: ID!) {{ node(id: $id) {{ id __typename ... on {} {{ {leaves} }} }} }}", r.node), json!(id)),
            ("query N($id: ID!) { node(id: $id) { id } }".to_string(), json!("bm90IGFuIGlk")),
            ("query N($id: ID!) { node(id: $id) { id } }".to_string(), json!("not base64")),
        ] {
            for viewer in viewers {
                planned +=
                    usize::from(run(world, viewer, &Case { query: query.clone(), variables: json!({ "id": id }), planned: false }).await);
            }
        }
    }
    let checkout = team_viewer("payments--checkout", "poc");
    let app = world.data(&checkout, "{ applications(first: 1) { edges { node { id } } } }").await;
    let q4 =
        "query Q4($id: ID!) { node(id: $id) { id ... on Application { name statusPhase clientID ownerTeam { name } zone { name } } } }";
    let c = Case { query: q4.to_string(), variables: json!({ "id": app["applications"]["edges"][0]["node"]["id"] }), planned: true };
    assert!(run(world, &checkout, &c).await, "Q4 is planned for the application's team");
    planned + 1
}

/// Runs `c` for `viewer` on both paths (the first run makes the plan); whether the plan answered.
async fn run(world: &World, viewer: &Viewer, c: &Case) -> bool {
    let request = || Request::new(c.query.clone()).variables(Variables::from_json(c.variables.clone()));
    let resolved = world.api.execute(&world.store, viewer.clone(), request()).await;
    planned_agrees(&world.api, &world.store, viewer, request(), &resolved).await
}

/// Pages forward and backward through every root connection, by cursor, on both paths: the
/// plan's cursors are the resolvers' and lead to the same pages.
async fn pages_through(world: &World, viewer: &Viewer, r: &Root) -> usize {
    let f = &r.field;
    let forward = format!(
        "query F($a: Cursor) {{ {f}(first: 2, after: $a) {{ pageInfo {{ hasNextPage endCursor }} edges {{ cursor node {{ id }} }} }} }}"
    );
    let backward = format!("query B($b: Cursor) {{ {f}(last: 2, before: $b) {{ pageInfo {{ hasPreviousPage startCursor }} edges {{ cursor node {{ id }} }} }} }}");
    let mut pages = 0;
    for (query, cursor_arg, more, cursor) in [(forward, "a", "hasNextPage", "endCursor"), (backward, "b", "hasPreviousPage", "startCursor")]
    {
        let mut at = Value::Null;
        for _ in 0..50 {
            let c = Case { query: query.clone(), variables: json!({ cursor_arg: at }), planned: true };
            assert!(run(world, viewer, &c).await, "planned: {}", c.query);
            let resolved = world
                .api
                .execute(&world.store, viewer.clone(), Request::new(c.query.clone()).variables(Variables::from_json(c.variables.clone())))
                .await;
            let data = resolved.data.into_json().unwrap();
            pages += 1;
            let info = &data[f.as_str()]["pageInfo"];
            if info[more] != true {
                break;
            }
            at = info[cursor].clone();
        }
    }
    pages
}

/// Every generated case answers the same bytes on both paths for a team, a group and an admin,
/// and the cases a plan covers are answered by it.
#[tokio::test]
async fn the_plan_answers_as_the_resolvers_do() {
    let world = World::load();
    let roots = roots(&world).await;
    assert!(roots.len() >= 15, "every kind's root connection: {:?}", roots.iter().map(|r| &r.field).collect::<Vec<_>>());
    let viewers = [team_viewer("payments--checkout", "poc"), group_viewer("payments", "poc"), admin()];
    let nodes = node_cases(&world, &roots, &viewers).await;
    assert!(nodes > roots.len(), "`node` is planned for most types: {nodes} of {} roots", roots.len());
    let (mut planned, mut total) = (0, 0);
    for c in bench_cases() {
        for viewer in &viewers {
            assert_eq!(run(&world, viewer, &c).await, c.planned, "planned ({}) for {}", c.planned, c.query);
        }
    }
    for r in &roots {
        for c in nested_cases(&world, r).await {
            for viewer in &viewers {
                planned += usize::from(run(&world, viewer, &c).await);
                total += 1;
            }
        }
    }
    assert!(planned * 2 > total, "{planned} of {total} nested cases answered by plans");
    let (mut planned, mut total) = (0, 0);
    for r in &roots {
        for c in where_cases(&world, r).await {
            for viewer in &viewers {
                planned += usize::from(run(&world, viewer, &c).await);
                total += 1;
            }
        }
    }
    assert!(planned * 10 > total * 9, "{planned} of {total} where cases answered by plans");
    let (mut planned, mut total) = (0, 0);
    for r in &roots {
        assert!(!r.columns.is_empty(), "{} has columns", r.node);
        for c in cases(r) {
            for viewer in &viewers {
                let answered = run(&world, viewer, &c).await;
                assert_eq!(answered, c.planned, "planned ({}) for {} with {}", c.planned, c.query, c.variables);
                planned += usize::from(answered);
                total += 1;
            }
        }
    }
    assert!(planned * 2 > total, "{planned} of {total} answered by plans");
}

/// Paging through every root connection by the plan's cursors, forward and backward, for each
/// viewer class.
#[tokio::test]
async fn the_plans_cursors_page_as_the_resolvers_do() {
    let world = World::load();
    let viewers = [team_viewer("payments--checkout", "poc"), group_viewer("payments", "poc"), admin()];
    let mut pages = 0;
    for r in roots(&world).await {
        for viewer in &viewers {
            pages += pages_through(&world, viewer, &r).await;
        }
    }
    assert!(pages > 100, "{pages} pages");
}

/// The console pages of the benches (their selection as far as plans cover it) answer the same
/// on both paths; a team sees only its own records on the plan's path too.
#[tokio::test]
async fn a_plan_shows_a_team_only_its_records() {
    let world = World::load();
    let q = "query Q5 { approvals(first: 50, orderBy: [{field: CREATED_AT, direction: DESC}]) { totalCount pageInfo { endCursor hasNextPage } edges { node { id name state createdAt } } } }";
    let checkout = team_viewer("payments--checkout", "poc");
    let ledger = team_viewer("payments--ledger", "poc");
    let mut seen = Vec::new();
    for viewer in [&checkout, &ledger, &admin()] {
        let c = Case { query: q.to_string(), variables: json!({}), planned: true };
        assert!(run(&world, viewer, &c).await, "Q5 is planned");
        let answer = world.api.execute_answer(&world.store, viewer.clone(), Request::new(q)).await;
        assert!(answer.is_planned());
        let json: Value = serde_json::from_slice(&answer.into_json(Default::default())).unwrap();
        seen.push(json["data"]["approvals"]["totalCount"].as_u64().unwrap());
    }
    assert!(seen[0] < seen[2] && seen[1] < seen[2], "each team sees fewer approvals than the admin: {seen:?}");
}

/// The answer budget (`graphql.maxResponseBytes`) stops a planned request where it stops the
/// resolvers: over a range of budgets, a team's console pages (planned once answered) and an
/// admin's (more records, over the budget sooner) answer the same bytes on both paths, either
/// the page or `RESPONSE_TOO_LARGE`.
#[tokio::test]
async fn the_answer_budget_stops_both_paths_alike() {
    let mut world = World::load();
    let (team, admin) = (team_viewer("payments--checkout", "poc"), admin());
    let mut stopped_on_the_plan = 0;
    for budget in [300, 1_000, 3_000, 10_000, 30_000, 100_000] {
        let limits = query::limits::Limits { max_response_bytes: budget, ..Default::default() };
        world.api = query::build_schema(query::QueryConfig { now: Some(support::reference_time()), limits, ..Default::default() }).unwrap();
        for c in bench_cases() {
            let planned = run(&world, &team, &c).await;
            let answer = world.api.execute_answer(&world.store, admin.clone(), Request::new(c.query.clone())).await;
            let json: Value = serde_json::from_slice(&answer.into_json(Default::default())).unwrap();
            if planned && json["errors"][0]["extensions"]["code"] == "RESPONSE_TOO_LARGE" {
                stopped_on_the_plan += 1;
            }
            run(&world, &admin, &c).await;
        }
    }
    assert!(stopped_on_the_plan > 0, "some planned request ran out of its budget");
}

/// A text stopped only by the size of its answer was validated: it is planned, so a later
/// answer of any size is written by the plan (bytes, not a tree of values) — and one too large
/// again stops there with the same `RESPONSE_TOO_LARGE`.
#[tokio::test]
async fn a_text_stopped_by_its_answers_size_is_planned() {
    let mut world = World::load();
    let limits = query::limits::Limits { max_response_bytes: 2_000, ..Default::default() };
    world.api = query::build_schema(query::QueryConfig { now: Some(support::reference_time()), limits, ..Default::default() }).unwrap();
    let q = "query A($n: Int) { applications(first: $n) { totalCount edges { node { id name zone { name } } } } }";
    let ask = |n: u64| world.api.execute_answer(&world.store, admin(), Request::new(q).variables(Variables::from_json(json!({"n": n}))));
    let code = |answer: query::Answer| -> Value {
        let json: Value = serde_json::from_slice(&answer.into_json(Default::default())).unwrap();
        json["errors"][0]["extensions"]["code"].clone()
    };
    assert_eq!(code(ask(1000).await), "RESPONSE_TOO_LARGE", "the first answer: async-graphql's");
    let small = ask(1).await;
    assert!(small.is_planned(), "planned after an answer stopped by its size");
    assert_eq!(code(ask(1000).await), "RESPONSE_TOO_LARGE", "the plan stops at the same budget");
    let c = Case { query: q.to_string(), variables: json!({"n": 1000}), planned: true };
    run(&world, &admin(), &c).await;
}

/// A request whose deadline passed answers `TIMEOUT` on the plan's path as on the resolvers'.
#[tokio::test]
async fn a_passed_deadline_stops_both_paths_alike() {
    let world = World::load();
    let viewer = team_viewer("payments--checkout", "poc");
    let q = bench_cases().remove(0).query;
    assert!(run(&world, &viewer, &case(q.clone(), true)).await, "Q1 is planned");
    let passed = || {
        let deadline = query::deadline::Deadline::new(std::time::Instant::now(), Some(std::time::Duration::from_secs(10)), None);
        deadline.canceller().store(true, std::sync::atomic::Ordering::Relaxed);
        deadline
    };
    let prepare = || {
        world
            .api
            .prepare(&world.store, viewer.clone(), Request::new(q.clone()), passed())
            .unwrap_or_else(|refused| panic!("not prepared: {refused:?}"))
    };
    let planned = world.api.answer(prepare()).await;
    let resolved = world.api.run(prepare()).await;
    assert!(!planned.is_planned());
    let json: Value = serde_json::from_slice(&planned.into_json(Default::default())).unwrap();
    assert_eq!(json["errors"][0]["extensions"]["code"], "TIMEOUT", "{json}");
    assert_eq!(json, serde_json::to_value(&resolved).unwrap());
}

/// On the plan's path a second team sees, counts, filters on and reaches by ID nothing of the
/// first team's: its list holds only its own applications, a `where` on the first team's
/// application name counts 0, and `node(id:)` of that application is `NOT_FOUND` (answered by
/// the resolvers: the plan gives way on the error).
#[tokio::test]
async fn a_plan_gives_a_second_team_nothing_of_the_first() {
    let world = World::load();
    let (checkout, ledger) = (team_viewer("payments--checkout", "poc"), team_viewer("payments--ledger", "poc"));
    let list = "{ applications(first: 50) { totalCount edges { node { id name namespace } } } }";
    let theirs = world.data(&checkout, list).await;
    let app = &theirs["applications"]["edges"][0]["node"];
    let (id, name) = (app["id"].as_str().unwrap().to_string(), app["name"].as_str().unwrap().to_string());
    let by_name = format!("{{ applications(where: {{ name: {name:?} }}) {{ totalCount edges {{ node {{ id }} }} }} }}");
    for q in [list, by_name.as_str()] {
        assert!(run(&world, &checkout, &case(q.to_string(), true)).await, "planned for the owner: {q}");
    }
    let own = |q: &str| {
        let q = q.to_string();
        let (world, ledger) = (&world, ledger.clone());
        async move {
            let answer = world.api.execute_answer(&world.store, ledger, Request::new(q)).await;
            assert!(answer.is_planned());
            serde_json::from_slice::<Value>(&answer.into_json(Default::default())).unwrap()
        }
    };
    let mine = own(list).await;
    assert!(mine["data"]["applications"]["totalCount"].as_u64().unwrap() > 0);
    for node in mine["data"]["applications"]["edges"].as_array().unwrap() {
        assert_ne!(node["node"]["id"], json!(id));
        assert!(node["node"]["namespace"].as_str().is_some());
    }
    let none = own(&by_name).await;
    assert_eq!(none["data"]["applications"]["totalCount"], 0, "{none}");
    let q4 = "query Q4($id: ID!) { node(id: $id) { id ... on Application { name } } }";
    let vars = || Variables::from_json(json!({ "id": id }));
    assert!(run(&world, &checkout, &Case { query: q4.to_string(), variables: json!({ "id": id }), planned: true }).await);
    let reached = world.api.execute_answer(&world.store, ledger.clone(), Request::new(q4).variables(vars())).await;
    assert!(!reached.is_planned(), "a record the viewer cannot see gives way to the resolvers");
    let json: Value = serde_json::from_slice(&reached.into_json(Default::default())).unwrap();
    assert_eq!(json["errors"][0]["extensions"]["code"], "NOT_FOUND", "{json}");
    assert_eq!(json["data"]["node"], Value::Null);
}
