//! Request limits decided before execution (`query::limits`) and the request deadline
//! (`query::deadline`), on the example world: the node estimate's values, each limit's code and
//! message, hostile inputs refused before they can overflow a stack or multiply, nested edge
//! filters answering as they would without their memo, and that no refusal reveals a count of
//! another team's records.

mod support;

use async_graphql::{Request, Variables};
use query::deadline::Deadline;
use query::viewer::Viewer;
use query::QueryConfig;
use serde_json::{json, Value};
use support::{admin, team_viewer, World};

const CHECKOUT: &str = "payments--checkout";

/// The cost `query` is measured at for `viewer`, or the refusal's `extensions`.
fn measure(world: &World, viewer: &Viewer, query: &str, variables: Value) -> Result<query::limits::Cost, Value> {
    let request = Request::new(query).variables(Variables::from_json(variables));
    match world.api.prepare(&world.store, viewer.clone(), request, Deadline::none()) {
        Ok(p) => Ok(p.cost().clone()),
        Err(refused) => {
            let r = serde_json::to_value(&*refused).unwrap();
            assert_eq!(r["errors"].as_array().map(Vec::len), Some(1), "{r}");
            Err(json!({"extensions": r["errors"][0]["extensions"], "message": r["errors"][0]["message"]}))
        }
    }
}

fn code(refusal: &Value) -> &str {
    refusal["extensions"]["code"].as_str().unwrap_or("")
}

async fn total(world: &World, viewer: &Viewer, root: &str) -> u64 {
    world.data(viewer, &format!("{{ {root} {{ totalCount }} }}")).await[root]["totalCount"].as_u64().unwrap()
}

fn world_with(config: impl FnOnce(&mut QueryConfig)) -> World {
    let mut world = World::load();
    let mut c = QueryConfig { now: Some(support::reference_time()), ..QueryConfig::default() };
    config(&mut c);
    world.api = query::build_schema(c).unwrap();
    world
}

/// A connection counts its page (never more than the records the viewer can see), a nested
/// one counts per parent, a list of records its largest possible length.
#[tokio::test]
async fn the_node_estimate_multiplies_pages_along_nested_connections() {
    let world = World::load();
    let team = team_viewer(CHECKOUT, "poc");
    let apps = total(&world, &team, "applications").await;
    let subscriptions = total(&world, &team, "apiSubscriptions").await;
    assert!(apps >= 2 && subscriptions >= 1, "the team has applications ({apps}) and subscriptions ({subscriptions})");

    let cost =
        measure(&world, &team, "{ applications(first: 2) { edges { node { subscribedApis(first: 3) { totalCount } } } } }", json!({}))
            .unwrap();
    assert_eq!(cost.nodes, 2 + 2 * 3.min(subscriptions));
    // Without first: the page size, bounded by what the team can see.
    let cost = measure(&world, &team, "{ applications { edges { node { subscribedApis { totalCount } } } } }", json!({})).unwrap();
    assert_eq!(cost.nodes, apps + apps * subscriptions);
    // Aliases and fragments count like written-out fields; variables give first.
    let q = "query($n: Int) { a: applications(first: $n) { ...A } b: applications(first: $n) { ...A } }
             fragment A on ApplicationConnection { edges { node { name } } }";
    let cost = measure(&world, &team, q, json!({"n": 2})).unwrap();
    assert_eq!((cost.nodes, cost.fields), (4, 10), "8 fields (the fragment twice) and 2 arguments");
    // A list of records: every zone the viewer sees, times the viewer's applications.
    let zones = world.data(&team, "{ zones { name } }").await["zones"].as_array().unwrap().len() as u64;
    let cost = measure(&world, &team, "{ zones { applications { name } } }", json!({})).unwrap();
    assert_eq!(cost.nodes, zones + zones * apps);
    // `nodes(ids:)` counts its IDs.
    let cost = measure(&world, &team, r#"{ nodes(ids: ["a", "b", "c"]) { id } }"#, json!({})).unwrap();
    assert_eq!(cost.nodes, 3);
    // History and activity pages count their page, and a past node's connections per revision.
    let cost = measure(
        &world,
        &team,
        r#"{ history(id: "x", first: 5) { edges { node { revision } } } activity(first: 7) { totalCount } }"#,
        json!({}),
    )
    .unwrap();
    assert_eq!(cost.nodes, 5 + 7);
    let q =
        r#"{ history(id: "x", first: 4) { edges { node { node { ... on Application { subscribedApis(first: 3) { totalCount } } } } } } }"#;
    assert_eq!(measure(&world, &team, q, json!({})).unwrap().nodes, 4 + 4 * 3.min(subscriptions));
    let max = query::limits::Limits::default().max_page_size as u64;
    assert_eq!(measure(&world, &team, "{ activity { totalCount } }", json!({})).unwrap().nodes, max, "without first: the page size");
}

/// Every limit refuses with its own code, its setting and its value, before anything runs.
#[tokio::test]
async fn each_limit_has_its_code() {
    let world = world_with(|c| {
        c.limits.max_nodes = 100;
        c.limits.max_depth = 6;
        c.limits.max_complexity = 50;
        c.limits.max_filter_depth = 2;
    });
    let admin = admin();
    let nodes =
        measure(&world, &admin, "{ applications(first: 11) { edges { node { subscribedApis(first: 10) { totalCount } } } } }", json!({}))
            .unwrap_err();
    assert_eq!(nodes["extensions"], json!({"code": "TOO_MANY_NODES", "limit": "graphql.maxNodes", "max": 100}));
    assert!(nodes["message"].as_str().unwrap().starts_with("the query may return up to "), "{nodes}");

    let deep = measure(&world, &admin, "{ applications { edges { node { zone { applications { zone { name } } } } } } }", json!({}));
    assert_eq!(deep.unwrap_err()["extensions"], json!({"code": "QUERY_TOO_DEEP", "limit": "graphql.maxDepth", "max": 6}));

    let wide = format!("{{ {} }}", (0..30).map(|i| format!("z{i}: zones {{ name }}")).collect::<Vec<_>>().join(" "));
    let wide = measure(&world, &admin, &wide, json!({})).unwrap_err();
    assert_eq!(wide["extensions"], json!({"code": "QUERY_TOO_COMPLEX", "limit": "graphql.maxComplexity", "max": 50}));

    let filter =
        "{ applications(first: 1, where: {hasZoneWith: [{hasApplicationsWith: [{hasZoneWith: [{name: \"x\"}]}]}]}) { totalCount } }";
    let filter = measure(&world, &admin, filter, json!({})).unwrap_err();
    assert_eq!(filter["extensions"], json!({"code": "FILTER_TOO_DEEP", "limit": "graphql.maxFilterDepth", "max": 2}));
    // The same through a variable, and inside `and`/`not`.
    let q = "query($w: ApplicationWhereInput) { applications(first: 1, where: $w) { totalCount } }";
    let w = json!({"w": {"and": [{"not": {"hasZoneWith": [{"hasApplicationsWith": [{"hasZoneWith": [{"name": "x"}]}]}]}}]}});
    assert_eq!(code(&measure(&world, &admin, q, w).unwrap_err()), "FILTER_TOO_DEEP");

    let search = measure(&world, &admin, &format!("{{ catalogueSearch(query: \"{}\") {{ totalCount }} }}", "word ".repeat(9)), json!({}));
    assert_eq!(search.unwrap_err()["extensions"], json!({"code": "BAD_USER_INPUT", "limit": "graphql.maxSearchTerms", "max": 8}));
    let search = measure(&world, &admin, &format!("{{ apis(search: \"{}\") {{ totalCount }} }}", "x".repeat(300)), json!({}));
    assert_eq!(search.unwrap_err()["extensions"], json!({"code": "BAD_USER_INPUT", "limit": "graphql.maxSearchLength", "max": 256}));
    // Through a variable too.
    let q = "query($q: String!) { catalogueSearch(query: $q) { totalCount } }";
    assert_eq!(code(&measure(&world, &admin, q, json!({"q": "x".repeat(300)})).unwrap_err()), "BAD_USER_INPUT");
}

/// A filter's operands are bounded together, a variable counted at each use: one large string
/// reused in many predicates (each parsed into a copy of its own) is refused before it is
/// copied, while the same string used once is accepted and answers.
#[tokio::test]
async fn filter_operands_are_bounded_with_every_use_of_a_variable_counted() {
    let world = world_with(|c| c.limits.max_filter_bytes = 10_000);
    let team = team_viewer(CHECKOUT, "poc");
    let big = "É".repeat(3_000); // 6,000 bytes
    let once = "query($s: String!) { applications(first: 1, where: {nameContains: $s}) { totalCount } }";
    let cost = measure(&world, &team, once, json!({"s": big})).unwrap();
    assert_eq!(cost.filter_bytes, 6_000);
    let request = Request::new(once).variables(Variables::from_json(json!({"s": big})));
    let answer = serde_json::to_value(world.api.execute(&world.store, team.clone(), request).await).unwrap();
    assert_eq!(answer["data"]["applications"]["totalCount"], 0, "{answer}");

    let twice = "query($s: String!) { applications(first: 1, where: {or: [{nameContains: $s}, {name: $s}]}) { totalCount } }";
    let refused = measure(&world, &team, twice, json!({"s": big})).unwrap_err();
    assert_eq!(refused["extensions"], json!({"code": "FILTER_TOO_LARGE", "limit": "graphql.maxFilterBytes", "max": 10_000}));
    // Lists count their items; aliases add up.
    let names: Vec<String> = (0..600).map(|i| format!("application-{i:04}")).collect();
    let list = "query($n: [String!]) { a: applications(first: 1, where: {nameIn: $n}) { totalCount } }";
    assert_eq!(measure(&world, &team, list, json!({"n": names})).unwrap().filter_bytes, 600 * 16);
    let aliased =
        "query($n: [String!]) { a: applications(where: {nameIn: $n}) { totalCount } b: applications(where: {nameIn: $n}) { totalCount } }";
    let small: Vec<&String> = names.iter().take(400).collect();
    assert_eq!(code(&measure(&world, &team, aliased, json!({"n": small})).unwrap_err()), "FILTER_TOO_LARGE");
}

/// An answer is bounded in bytes while it is resolved: beyond `maxResponseBytes` the request
/// ends with one `RESPONSE_TOO_LARGE` error and no data; within it, it answers in full.
#[tokio::test]
async fn an_answer_beyond_its_byte_budget_is_one_error_without_data() {
    let q = "{ applications(first: 1000) { edges { cursor node { id name clientID zone { name } ownerTeam { name email } } } } }";
    let full = World::load();
    let answer = full.data(&admin(), q).await;
    let bytes = answer.to_string().len();
    assert!(bytes > 4_000, "the full answer takes {bytes} bytes");

    let small = world_with(|c| c.limits.max_response_bytes = bytes / 2);
    let r = small.run(&admin(), q).await;
    assert_eq!(r["data"], Value::Null, "{r}");
    assert_eq!(r["errors"].as_array().map(Vec::len), Some(1), "{r}");
    let ext = &r["errors"][0]["extensions"];
    assert_eq!(*ext, json!({"code": "RESPONSE_TOO_LARGE", "limit": "graphql.maxResponseBytes", "max": bytes / 2}));
    // The count is an estimate of the JSON: within twice the real size, the answer passes.
    let roomy = world_with(|c| c.limits.max_response_bytes = bytes * 2);
    assert_eq!(roomy.data(&admin(), q).await, answer);
}

/// Every request error has a code: syntax and validation errors `GRAPHQL_VALIDATION_FAILED`.
#[tokio::test]
async fn syntax_and_validation_errors_have_a_code() {
    let world = World::load();
    for q in ["{ applications { nosuchfield } }", "{ applications(first: ", "query A { zones { name } } query A { zones { name } }"] {
        let r = world.run(&admin(), q).await;
        assert_eq!(r["data"], Value::Null, "{q}: {r}");
        let codes: Vec<&str> = r["errors"].as_array().unwrap().iter().map(|e| e["extensions"]["code"].as_str().unwrap_or("")).collect();
        assert!(!codes.is_empty() && codes.iter().all(|c| *c == "GRAPHQL_VALIDATION_FAILED"), "{q}: {r}");
    }
}

/// Arguments and directives count against `maxComplexity` (each can become an error), and an
/// answer lists at most `MAX_ERRORS` errors.
#[tokio::test]
async fn arguments_count_as_fields_and_errors_are_capped() {
    let args = |n: usize| format!("{{ apis({}) {{ totalCount }} }}", vec!["a: 1"; n].join(" "));
    let world = World::load();
    let r = world.run(&admin(), &args(6_000)).await;
    assert_eq!(r["errors"][0]["extensions"]["code"], "QUERY_TOO_COMPLEX", "{}", r["errors"][0]);
    let roomy = world_with(|c| c.limits.max_complexity = 100_000);
    let r = roomy.run(&admin(), &args(3_000)).await;
    let errors = r["errors"].as_array().unwrap();
    assert_eq!(errors.len(), query::MAX_ERRORS + 1);
    assert_eq!(errors[query::MAX_ERRORS]["extensions"]["code"], "TOO_MANY_ERRORS");
}

/// The inputs of the issue that crashed or exhausted the server: refused before parsing or
/// executing, with a code.
#[tokio::test]
async fn hostile_inputs_are_refused_before_execution() {
    let world = World::load();
    let team = team_viewer(CHECKOUT, "poc");
    let nested_ids = format!("{{ nodes(ids: {}\"x\"{}) {{ id }} }}", "[".repeat(2000), "]".repeat(2000));
    assert_eq!(code(&measure(&world, &team, &nested_ids, json!({})).unwrap_err()), "INPUT_TOO_DEEP");
    let and = format!("{{ applications(where: {}{}) {{ totalCount }} }}", "{and: [".repeat(1000), "]}".repeat(1000));
    assert_eq!(code(&measure(&world, &team, &and, json!({})).unwrap_err()), "INPUT_TOO_DEEP");
    let not = format!("{{ applications(where: {}{{name: \"x\"}}{}) {{ totalCount }} }}", "{not: ".repeat(3000), "}".repeat(3000));
    assert_eq!(code(&measure(&world, &team, &not, json!({})).unwrap_err()), "INPUT_TOO_DEEP");
    let pairs = format!(
        "{{ applications(where: {}{{name: \"x\"}}{}) {{ totalCount }} }}",
        "{hasZoneWith: [{hasApplicationsWith: [".repeat(500),
        "]}]}".repeat(500)
    );
    assert_eq!(code(&measure(&world, &team, &pairs, json!({})).unwrap_err()), "INPUT_TOO_DEEP");
    let deep_selection = format!("{}{}", "{ a ".repeat(3000), "}".repeat(3000));
    assert_eq!(code(&measure(&world, &team, &deep_selection, json!({})).unwrap_err()), "QUERY_TOO_DEEP");
    // The same nesting in variables.
    let mut deep = json!("x");
    for _ in 0..100 {
        deep = json!([deep]);
    }
    let q = "query($ids: [ID!]!) { nodes(ids: $ids) { id } }";
    assert_eq!(code(&measure(&world, &team, q, json!({"ids": deep})).unwrap_err()), "INPUT_TOO_DEEP");
    // Long lists.
    let ids: Vec<String> = (0..1001).map(|i| format!("\"{i}\"")).collect();
    let q = format!("{{ nodes(ids: [{}]) {{ id }} }}", ids.join(","));
    let long = measure(&world, &team, &q, json!({})).unwrap_err();
    assert_eq!(long["extensions"], json!({"code": "BAD_USER_INPUT", "limit": "graphql.maxPageSize", "max": 1000}));
    let q = "query($n: [String!]) { applications(where: {nameIn: $n}) { totalCount } }";
    assert_eq!(code(&measure(&world, &team, q, json!({"n": vec!["x"; 1001]})).unwrap_err()), "BAD_USER_INPUT");
    // A doubling fragment chain: refused once the budget of fields is spent.
    let mut doc = String::from("{ applications { edges { node { ...F25 } } } } fragment F0 on Application { name }");
    for i in 1..=25 {
        doc.push_str(&format!(" fragment F{i} on Application {{ ...F{} ...F{} }}", i - 1, i - 1));
    }
    let doubling = measure(&world, &team, &doc, json!({})).unwrap_err();
    assert_eq!(code(&doubling), "QUERY_TOO_COMPLEX");
    // A cycle of fragments: refused as nesting without end, naming it (not as async-graphql's
    // recursion limit).
    let cyclic = "{ applications { edges { node { ...A } } } } fragment A on Application { name ...B } fragment B on Application { ...A }";
    let cycle_error = measure(&world, &team, cyclic, json!({})).unwrap_err();
    assert_eq!(code(&cycle_error), "QUERY_TOO_DEEP");
    assert!(cycle_error["message"].as_str().unwrap().contains("fragment `A` spreads itself (through `A` → `B`)"), "{cycle_error}");
    // Definitions in one document, used or not (validation's work grows with their square): at
    // most `maxDefinitions`, counted in the text; braces of argument values do not count.
    let unused = |n: usize| {
        let mut doc =
            String::from("query($w: ApplicationWhereInput = {name: \"x\"}) { applications(where: {name: \"y\"}) { totalCount } }");
        for i in 1..n {
            doc.push_str(&format!(" fragment U{i} on Application {{ name }}"));
        }
        doc
    };
    let many = measure(&world, &team, &unused(257), json!({})).unwrap_err();
    assert_eq!(many["extensions"], json!({"code": "QUERY_TOO_COMPLEX", "limit": "graphql.maxDefinitions", "max": 256}), "{many}");
    assert!(measure(&world, &team, &unused(256), json!({})).is_ok(), "within the limit (validation then reports the unused fragments)");
    // Variables written (validation checks each use once per operation) and the bytes of one
    // name (an unknown one is compared with every known one): counted in the text, strings and
    // comments left out.
    let uses = |n: usize| {
        format!(
            "query($v: Boolean = false) {{ applications @skip(if: $v) {{ edges {{ node {{ name{} }} }} }} }}",
            " @skip(if: $v)".repeat(n)
        )
    };
    let many_uses = measure(&world, &team, &uses(1000), json!({})).unwrap_err();
    assert_eq!(
        many_uses["extensions"],
        json!({"code": "QUERY_TOO_COMPLEX", "limit": "graphql.maxVariableUses", "max": 1000}),
        "{many_uses}"
    );
    assert!(measure(&world, &team, &uses(998), json!({})).is_ok(), "two uses and the definition: 1000");
    let long_name = format!("{{ applications {{ edges {{ node {{ {} }} }} }} }}", "a".repeat(1025));
    let long = measure(&world, &team, &long_name, json!({})).unwrap_err();
    assert_eq!(long["extensions"], json!({"code": "BAD_USER_INPUT", "limit": "graphql.maxNameBytes", "max": 1024}), "{long}");
    let in_text = format!("# {}\n{{ applications(where: {{name: \"{}$$$\"}}) {{ totalCount }} }}", "b".repeat(5000), "c".repeat(5000));
    assert!(measure(&world, &team, &in_text, json!({})).is_ok(), "strings and comments are not names");
    // A chain of thousands of fragments (no cycle, no braces nesting): refused at the nesting
    // bound, not by overflowing the stack of the walk; a long cycle's message stays short.
    let unbounded = world_with(|c| c.limits.max_definitions = 30_000);
    for cyclic in [false, true] {
        let mut chain = String::from("{ applications { edges { node { ...F0 } } } }");
        for i in 0..20_000 {
            let next = if cyclic && i == 19_999 { 0 } else { i + 1 };
            chain.push_str(&format!(" fragment F{i} on Application {{ name ...F{next} }}"));
        }
        if !cyclic {
            chain.push_str(" fragment F20000 on Application { name }");
        }
        let deep = measure(&unbounded, &team, &chain, json!({})).unwrap_err();
        assert_eq!(code(&deep), "QUERY_TOO_DEEP", "{deep}");
        let message = deep["message"].as_str().unwrap();
        assert!(message.contains("fragment spreads nest more than 32 deep") && message.len() < 200, "{message}");
    }
    // Lists multiplying along a cycle of edges.
    let cycle = "{ applications(first: 1) { edges { node { zone { applications { zone { applications { zone { applications { zone { applications { name } } } } } } } } } } } }";
    let world_small = world_with(|c| c.limits.max_nodes = 1000);
    assert_eq!(code(&measure(&world_small, &admin(), cycle, json!({})).unwrap_err()), "TOO_MANY_NODES");
}

/// The refusals and the answers through the executor are the same.
#[tokio::test]
async fn refusals_reach_the_response() {
    let world = world_with(|c| c.limits.max_nodes = 10);
    let r = world.run(&admin(), "{ applications(first: 11) { totalCount } }").await;
    assert_eq!(r["errors"][0]["extensions"]["code"], "TOO_MANY_NODES", "{r}");
    assert_eq!(r["data"], Value::Null);
}

/// A refusal never depends on records another team owns: the estimate of a list across
/// tenants (`…Info`) is the page size for non-admins, whatever the store holds.
#[tokio::test]
async fn the_estimate_counts_only_what_the_viewer_can_see() {
    let world = World::load();
    let q = "{ apiExposures(first: 1) { edges { node { subscriptions { id } } } } }";
    let team = team_viewer(CHECKOUT, "poc");
    let exposures = total(&world, &team, "apiExposures").await.min(1);
    assert_eq!(measure(&world, &team, q, json!({})).unwrap().nodes, exposures + exposures * 1000);
    let all = total(&world, &admin(), "apiSubscriptions").await;
    assert_eq!(measure(&world, &admin(), q, json!({})).unwrap().nodes, 1 + all, "an admin's bound is every subscription");
    // A team's connection is bounded by its own records, not by the store's.
    let ledger = team_viewer("payments--ledger", "poc");
    let own = total(&world, &ledger, "applications").await;
    assert_eq!(measure(&world, &ledger, "{ applications { totalCount } }", json!({})).unwrap().nodes, own);
}

/// A nested `has<Edge>With` remembers its answer per record; the answers are those of the same
/// filter evaluated from scratch.
#[tokio::test]
async fn nested_edge_filters_answer_like_their_parts() {
    let world = World::load();
    for viewer in [admin(), team_viewer(CHECKOUT, "poc")] {
        let all = world.data(&viewer, "{ applications { edges { node { name zone { name environment } } } } }").await;
        let zone_of = |a: &Value| format!("{}/{}", a["zone"]["environment"].as_str().unwrap(), a["zone"]["name"].as_str().unwrap());
        // Zones where the viewer sees an application named checkout-api.
        let zone_names: Vec<String> =
            support::nodes(&all["applications"]).iter().filter(|a| a["name"] == "checkout-api").map(zone_of).collect();
        let mut expected: Vec<String> = support::nodes(&all["applications"])
            .iter()
            .filter(|a| zone_names.contains(&zone_of(a)))
            .map(|a| a["name"].as_str().unwrap().to_string())
            .collect();
        expected.sort();
        let nested = world
            .data(
                &viewer,
                "{ applications(where: {hasZoneWith: [{hasApplicationsWith: [{name: \"checkout-api\"}]}]}) { edges { node { name } } } }",
            )
            .await;
        let mut got: Vec<String> =
            support::nodes(&nested["applications"]).iter().map(|a| a["name"].as_str().unwrap().to_string()).collect();
        got.sort();
        assert!(!expected.is_empty());
        assert_eq!(got, expected);
    }
}

/// A request whose deadline passed, or that was cancelled, answers one `TIMEOUT` without data;
/// one stopped by the shutdown answers `UNAVAILABLE`.
#[tokio::test]
async fn a_passed_deadline_answers_timeout_without_data() {
    let world = World::load();
    let q = "{ applications { edges { node { name subscribedApis { edges { node { name } } } } } } }";
    let start = std::time::Instant::now() - std::time::Duration::from_secs(5);
    let passed = Deadline::new(start, Some(std::time::Duration::from_secs(1)), None);
    let p = world.api.prepare(&world.store, admin(), Request::new(q), passed).unwrap_or_else(|_| panic!("prepared"));
    let r = serde_json::to_value(world.api.run(p).await).unwrap();
    assert_eq!(r["data"], Value::Null);
    assert_eq!(r["errors"].as_array().unwrap().len(), 1);
    assert_eq!(r["errors"][0]["extensions"]["code"], "TIMEOUT");

    let live = Deadline::new(std::time::Instant::now(), Some(std::time::Duration::from_secs(3600)), None);
    live.canceller().store(true, std::sync::atomic::Ordering::Relaxed);
    let p = world.api.prepare(&world.store, admin(), Request::new(q), live).unwrap_or_else(|_| panic!("prepared"));
    let r = serde_json::to_value(world.api.run(p).await).unwrap();
    assert_eq!(r["errors"][0]["extensions"]["code"], "TIMEOUT");

    let shutdown = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let stopping = Deadline::new(std::time::Instant::now(), None, Some(shutdown));
    let p = world.api.prepare(&world.store, admin(), Request::new(q), stopping).unwrap_or_else(|_| panic!("prepared"));
    let r = serde_json::to_value(world.api.run(p).await).unwrap();
    assert_eq!(r["errors"][0]["extensions"]["code"], "UNAVAILABLE");

    // Without a limit the same request answers.
    let r = world.run(&admin(), q).await;
    assert!(r["errors"].is_null(), "{r}");
}

/// Introspection is answered outside the response budget, so each `__schema` counts as the
/// schema it can list (half its SDL lines) against `maxComplexity`: GraphiQL's introspection
/// query runs, and hundreds of `__schema` aliases are refused before execution.
#[tokio::test]
async fn schema_introspection_counts_as_the_schema_it_lists() {
    let world = World::load();
    let one = "{ __schema { queryType { name } types { name kind fields { name args { name } type { name kind ofType { name kind } } } inputFields { name } enumValues { name } } } }";
    let r = world.run(&team_viewer("payments--checkout", "poc"), one).await;
    assert!(r.get("errors").is_none(), "{r}");
    assert!(r["data"]["__schema"]["types"].as_array().unwrap().len() > 100);
    let many = format!(
        "{{ {} }}",
        (0..1200).map(|i| format!("s{i}: __schema {{ types {{ inputFields {{ name }} }} }}")).collect::<Vec<_>>().join(" ")
    );
    let refused = world.run(&team_viewer("payments--checkout", "poc"), &many).await;
    assert_eq!(refused["data"], Value::Null);
    assert_eq!(refused["errors"][0]["extensions"]["code"], "QUERY_TOO_COMPLEX", "{refused}");
    let three = format!("{{ {} }}", (0..3).map(|i| format!("s{i}: __schema {{ queryType {{ name }} }}")).collect::<Vec<_>>().join(" "));
    assert_eq!(code(&measure(&world, &admin(), &three, json!({})).unwrap_err()), "QUERY_TOO_COMPLEX", "three schemas in one request");
    let cost = measure(&world, &admin(), "{ __schema { queryType { name } } }", json!({})).unwrap();
    let lines = world.api.sdl().lines().count();
    assert!(cost.fields >= lines / 2 && cost.fields < lines / 2 + 10, "{} fields for a schema of {lines} lines", cost.fields);
}

/// A huge ID named in many fields (`node`, `history`) is not repeated whole in each
/// `NOT_FOUND`: the answer stays small (a trial's 1,000 aliases of a 1 MB ID grew the server
/// past 1.5 GB).
#[tokio::test]
async fn a_huge_id_is_not_repeated_in_its_not_found_errors() {
    let world = world_with(|c| c.limits.max_complexity = 100_000);
    let huge = "A".repeat(200_000);
    for field in ["node(id: $id) { id }", "history(id: $id) { totalCount }"] {
        let aliases: Vec<String> = (0..200).map(|i| format!("f{i}: {field}")).collect();
        let query = format!("query($id: ID!) {{ {} }}", aliases.join(" "));
        let request = Request::new(query).variables(Variables::from_json(json!({"id": huge})));
        let answer = serde_json::to_value(world.api.execute(&world.store, admin(), request).await).unwrap();
        let errors = answer["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 200, "{field}");
        assert!(errors.iter().all(|e| e["extensions"]["code"] == "NOT_FOUND"), "{field}: {}", errors[0]);
        let message = errors[0]["message"].as_str().unwrap();
        assert!(message.len() < 200 && message.contains("(200000 bytes)"), "{field}: {message}");
        assert!(answer.to_string().len() < 100_000, "{field}: the answer is {} bytes", answer.to_string().len());
    }
    // An ID of an ordinary length is repeated whole, as the reference does.
    let r = world.run(&admin(), "{ node(id: \"QXBwbGljYXRpb246eA\") { id } }").await;
    assert_eq!(r["errors"][0]["message"], "Could not resolve to a node with the global id of 'QXBwbGljYXRpb246eA'");
}

/// A past node's edges go through the same limits as any edge: a cycle of edges under
/// `history` multiplies into `TOO_MANY_NODES`, a selection nested past the depth limit is
/// `QUERY_TOO_DEEP`, both refused before execution.
#[tokio::test]
async fn edges_of_past_nodes_are_bounded_like_any_edge() {
    let world = world_with(|c| c.limits.max_nodes = 1000);
    let cycle = "query($id: ID!) { history(id: $id) { edges { node { node { ... on Application { zone { applications { zone { \
                 applications { zone { applications { name } } } } } } } } } } } }";
    let id = json!({"id": "QXBwbGljYXRpb246eA"});
    assert_eq!(code(&measure(&world, &admin(), cycle, id.clone()).unwrap_err()), "TOO_MANY_NODES");
    let deep = format!(
        "query($id: ID!) {{ history(id: $id) {{ edges {{ node {{ node {{ ... on Application {{ {}name{} }} }} }} }} }} }}",
        "zone { applications { ".repeat(40),
        " } }".repeat(40)
    );
    assert_eq!(code(&measure(&world, &admin(), &deep, id).unwrap_err()), "QUERY_TOO_DEEP");
}
