//! Pagination property test: for pseudo-random page sizes and every order, forward
//! (`first`/`after`) and backward (`last`/`before`) walks over every root connection visit every
//! visible record exactly once, in the order of the unpaginated list, for several viewers.

mod support;

use serde_json::Value;
use support::{admin, group_viewer, team_viewer, World};

const ROOTS: &[(&str, bool)] = &[
    ("teams", true),
    ("applications", true),
    ("apis", false),
    ("apiExposures", false),
    ("apiSubscriptions", false),
    ("approvals", false),
    ("approvalRequests", false),
    ("eventTypes", false),
    ("eventExposures", false),
    ("eventSubscriptions", false),
    ("permissionSets", false),
    ("mcpServers", false),
    ("agentCards", false),
    ("agenticExposures", false),
    ("agenticSubscriptions", false),
    ("fileExposures", false),
    ("fileSubscriptions", false),
];

/// A small deterministic generator (xorshift), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn ids(conn: &Value) -> Vec<String> {
    conn["edges"].as_array().unwrap().iter().map(|e| e["node"]["id"].as_str().unwrap().to_string()).collect()
}

/// Walks every root connection in every order for several viewers, forward and backward;
/// returns each unpaginated list (by root, viewer and order) and the number of walks.
async fn walk_everything(w: &World) -> (Vec<(String, Vec<String>)>, usize) {
    let mut lists = Vec::new();
    let viewers = [admin(), group_viewer("payments", "poc"), team_viewer("logistics--fleet", "poc")];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut walks = 0;
    for (root, multi) in ROOTS {
        let multi = &(*multi || matches!(*root, "approvals" | "approvalRequests"));
        let mut orders = vec![String::new()];
        let mut fields = vec!["CREATED_AT", "LAST_MODIFIED_AT"];
        if matches!(*root, "teams" | "applications") {
            fields.push("NAME");
        }
        for f in fields {
            for dir in ["ASC", "DESC"] {
                let o = format!("{{field: {f}, direction: {dir}}}");
                orders.push(if *multi || matches!(*root, "approvals" | "approvalRequests") {
                    format!("orderBy: [{o}]")
                } else {
                    format!("orderBy: {o}")
                });
            }
        }
        if *multi {
            orders.push("orderBy: [{field: CREATED_AT, direction: DESC}, {field: LAST_MODIFIED_AT, direction: ASC}]".to_string());
            if matches!(*root, "teams" | "applications") {
                orders.push("orderBy: [{field: NAME, direction: DESC}, {field: CREATED_AT, direction: ASC}]".to_string());
            }
        }
        for v in &viewers {
            for order in &orders {
                let sep = if order.is_empty() { "" } else { ", " };
                let all_args = if order.is_empty() { String::new() } else { format!("({order})") };
                let all = w.data(v, &format!("{{ {root}{all_args} {{ totalCount edges {{ node {{ id }} }} }} }}")).await;
                let expected = ids(&all[*root]);
                lists.push((format!("{root} {order} {}", lists.len()), expected.clone()));
                assert_eq!(all[*root]["totalCount"].as_u64().unwrap() as usize, expected.len(), "{root} {order}");

                let size = 1 + rng.next(4);
                let mut forward = Vec::new();
                let mut after = String::from("null");
                loop {
                    let q = format!("{{ {root}({order}{sep}first: {size}, after: {after}) {{ pageInfo {{ hasNextPage endCursor }} edges {{ node {{ id }} }} }} }}");
                    let d = w.data(v, &q).await;
                    let page = ids(&d[*root]);
                    assert!(page.len() as u64 <= size);
                    forward.extend(page);
                    if d[*root]["pageInfo"]["hasNextPage"] != true {
                        break;
                    }
                    after = d[*root]["pageInfo"]["endCursor"].to_string();
                }
                assert_eq!(forward, expected, "forward {root} {order} size {size}");

                let mut backward: Vec<String> = Vec::new();
                let mut before = String::from("null");
                loop {
                    let q = format!("{{ {root}({order}{sep}last: {size}, before: {before}) {{ pageInfo {{ hasPreviousPage startCursor }} edges {{ node {{ id }} }} }} }}");
                    let d = w.data(v, &q).await;
                    let mut page = ids(&d[*root]);
                    page.extend(backward);
                    backward = page;
                    if d[*root]["pageInfo"]["hasPreviousPage"] != true {
                        break;
                    }
                    before = d[*root]["pageInfo"]["startCursor"].to_string();
                }
                assert_eq!(backward, expected, "backward {root} {order} size {size}");
                walks += 2;
            }
        }
    }
    (lists, walks)
}

#[tokio::test]
async fn forward_and_backward_walks_visit_everything_once_in_order() {
    let w = World::load();
    // No writer runs here: every order but the natural-key one is sorted in memory.
    assert!(w.store.read().unwrap().built_orders().unwrap().is_empty());
    let (sorted, walks) = walk_everything(&w).await;
    assert!(walks > 300, "{walks} walks");

    // The reads asked for their indexes; half built, then built, they answer the same, page
    // for page.
    let first = w.store.build_orders(200).unwrap();
    assert!(first.started.len() >= 30 && first.pending, "{} builds started", first.started.len());
    assert_eq!(first.records, 200);
    assert_eq!(w.store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    let (half_built, _) = walk_everything(&w).await;
    assert_eq!(half_built, sorted, "some indexes whole, one half written, the others not begun");
    let mut built = first.built;
    while w.store.orders_pending() {
        let step = w.store.build_orders(200).unwrap();
        assert!(step.records <= 200);
        built.extend(step.built);
    }
    assert_eq!(built.len(), first.started.len(), "{built:?}");
    assert!(built.iter().all(|b| b.entries > 0), "{built:?}");
    let view = w.store.read().unwrap();
    assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
    assert!(view.built_orders().unwrap().contains(schema::KindId::Application, storage::OrderField::Name));
    drop(view);
    let (indexed, walks_again) = walk_everything(&w).await;
    assert_eq!(walks_again, walks);
    assert!(w.store.build_orders(200).unwrap().started.is_empty(), "nothing left to build");
    assert_eq!(indexed, sorted);
}

#[tokio::test]
async fn multi_field_orders_sort_by_each_field_in_turn() {
    let w = World::load();
    let d = w
        .data(&admin(), "{ applications(orderBy: [{field: CREATED_AT, direction: DESC}, {field: NAME, direction: ASC}]) { edges { node { name createdAt } } } }")
        .await;
    let rows: Vec<(String, String)> = d["applications"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["node"]["createdAt"].as_str().unwrap().to_string(), e["node"]["name"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(rows.len(), 15);
    for pair in rows.windows(2) {
        let ((t0, n0), (t1, n1)) = (&pair[0], &pair[1]);
        assert!(t0 > t1 || (t0 == t1 && n0 <= n1), "{pair:?}");
    }
    // Same field twice in a row is refused, as in the reference.
    let r = w.run(&admin(), "{ applications(orderBy: [{field: NAME}, {field: NAME, direction: DESC}]) { totalCount } }").await;
    assert_eq!(support::error_codes(&r), ["BAD_USER_INPUT"]);
}

/// Nested connections page the same way (walked through `node(id:)` on their parent).
#[tokio::test]
async fn nested_connections_walk_forward_and_backward() {
    let w = World::load();
    let v = admin();
    let cases = [
        ("teams", "Team", "applications"),
        ("teams", "Team", "apis"),
        ("applications", "Application", "subscribedApis"),
        ("applications", "Application", "exposedApis"),
        ("applications", "Application", "subscribedEvents"),
        ("applications", "Application", "agenticSubscriptions"),
    ];
    let mut walked = 0;
    for (root, ty, edge) in cases {
        let parents = w.data(&v, &format!("{{ {root} {{ edges {{ node {{ id }} }} }} }}")).await;
        for p in parents[root]["edges"].as_array().unwrap() {
            let id = p["node"]["id"].as_str().unwrap();
            let at = |args: String| {
                format!(
                    r#"{{ node(id: "{id}") {{ ... on {ty} {{ {edge}{args} {{ totalCount pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }} edges {{ node {{ id }} }} }} }} }} }}"#
                )
            };
            let all = w.data(&v, &at(String::new())).await;
            let expected = ids(&all["node"][edge]);
            if expected.len() < 2 {
                continue;
            }
            let mut forward = Vec::new();
            let mut after = String::from("null");
            loop {
                let d = w.data(&v, &at(format!("(first: 1, after: {after})"))).await;
                forward.extend(ids(&d["node"][edge]));
                if d["node"][edge]["pageInfo"]["hasNextPage"] != true {
                    break;
                }
                after = d["node"][edge]["pageInfo"]["endCursor"].to_string();
            }
            assert_eq!(forward, expected, "{ty}.{edge} forward");
            let mut backward: Vec<String> = Vec::new();
            let mut before = String::from("null");
            loop {
                let d = w.data(&v, &at(format!("(last: 1, before: {before})"))).await;
                let mut page = ids(&d["node"][edge]);
                page.extend(backward);
                backward = page;
                if d["node"][edge]["pageInfo"]["hasPreviousPage"] != true {
                    break;
                }
                before = d["node"][edge]["pageInfo"]["startCursor"].to_string();
            }
            assert_eq!(backward, expected, "{ty}.{edge} backward");
            walked += 1;
        }
    }
    assert!(walked >= 8, "{walked} nested connections walked");
}

/// `orderBy` sent in variables (enum values arrive as strings) sorts as the same order written
/// inline, in the list form and the single-object form, with the field or the direction alone
/// as a variable; an unknown direction is refused.
#[tokio::test]
async fn orders_sent_in_variables_sort_as_inline_ones() {
    use async_graphql::{Request, Variables};
    let w = World::load();
    let v = admin();
    let run = |query: &'static str, vars: serde_json::Value| {
        let (w, v) = (&w, v.clone());
        async move {
            let r = w.api.execute(&w.store, v, Request::new(query).variables(Variables::from_json(vars))).await;
            serde_json::to_value(&r).unwrap()
        }
    };
    let inline = w.data(&v, "{ applications(orderBy: [{field: NAME, direction: DESC}]) { edges { node { id } } } }").await;
    let expected = ids(&inline["applications"]);
    assert!(expected.len() > 2);
    for (query, vars) in [
        (
            "query($o: [ApplicationOrder!]) { applications(orderBy: $o) { edges { node { id } } } }",
            serde_json::json!({"o": [{"field": "NAME", "direction": "DESC"}]}),
        ),
        (
            "query($f: ApplicationOrderField!) { applications(orderBy: [{field: $f, direction: DESC}]) { edges { node { id } } } }",
            serde_json::json!({"f": "NAME"}),
        ),
        (
            "query($d: OrderDirection!) { applications(orderBy: [{field: NAME, direction: $d}]) { edges { node { id } } } }",
            serde_json::json!({"d": "DESC"}),
        ),
    ] {
        let r = run(query, vars).await;
        assert!(r.get("errors").is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty())), "{query}: {r}");
        assert_eq!(ids(&r["data"]["applications"]), expected, "{query}");
    }
    let inline = w.data(&v, "{ apiSubscriptions(orderBy: {field: CREATED_AT, direction: DESC}) { edges { node { id } } } }").await;
    let r = run(
        "query($o: ApiSubscriptionOrder) { apiSubscriptions(orderBy: $o) { edges { node { id } } } }",
        serde_json::json!({"o": {"field": "CREATED_AT", "direction": "DESC"}}),
    )
    .await;
    assert_eq!(ids(&r["data"]["apiSubscriptions"]), ids(&inline["apiSubscriptions"]));
    assert!(ids(&inline["apiSubscriptions"]).len() > 2);
    let r = run(
        "query($d: OrderDirection!) { applications(orderBy: [{field: NAME, direction: $d}]) { totalCount } }",
        serde_json::json!({"d": "DOWN"}),
    )
    .await;
    assert!(!r["errors"].as_array().unwrap().is_empty(), "{r}");
}

/// Isolation of sorted reads: for two teams, a group and an admin, every root connection sorted
/// by each of its fields (in memory before the indexes are built, by the indexes after) lists
/// exactly the records, and counts exactly the total, of its default order, whose isolation
/// `tests/isolation_probe.rs` checks; a second team sees none of a team's own applications.
#[tokio::test]
async fn sorted_reads_see_exactly_what_the_default_order_sees() {
    use std::collections::BTreeSet;
    let w = World::load();
    let viewers =
        [team_viewer("payments--checkout", "poc"), team_viewer("logistics--fleet", "poc"), group_viewer("payments", "poc"), admin()];
    for phase in ["sorted in memory", "indexed"] {
        for (root, multi) in ROOTS {
            let multi = *multi || matches!(*root, "approvals" | "approvalRequests");
            let mut fields = vec!["CREATED_AT", "LAST_MODIFIED_AT"];
            if matches!(*root, "teams" | "applications") {
                fields.push("NAME");
            }
            for v in &viewers {
                let default = w.data(v, &format!("{{ {root} {{ totalCount edges {{ node {{ id }} }} }} }}")).await;
                let expected: BTreeSet<String> = ids(&default[*root]).into_iter().collect();
                for f in &fields {
                    let o = format!("{{field: {f}, direction: DESC}}");
                    let arg = if multi { format!("[{o}]") } else { o };
                    let d = w.data(v, &format!("{{ {root}(orderBy: {arg}) {{ totalCount edges {{ node {{ id }} }} }} }}")).await;
                    let seen: BTreeSet<String> = ids(&d[*root]).into_iter().collect();
                    assert_eq!(seen, expected, "{phase}: {root} by {f}");
                    assert_eq!(d[*root]["totalCount"], default[*root]["totalCount"], "{phase}: {root} by {f}");
                }
            }
        }
        if phase == "sorted in memory" {
            assert!(!w.store.build_orders(usize::MAX).unwrap().built.is_empty());
        }
    }
    let by_name = "{ applications(orderBy: [{field: NAME}]) { edges { node { id } } } }";
    let checkout: BTreeSet<String> = ids(&w.data(&viewers[0], by_name).await["applications"]).into_iter().collect();
    let fleet: BTreeSet<String> = ids(&w.data(&viewers[1], by_name).await["applications"]).into_iter().collect();
    assert!(!checkout.is_empty() && !fleet.is_empty());
    assert!(checkout.is_disjoint(&fleet), "{checkout:?} {fleet:?}");
}

/// A connection of one order (`orderBy: XOrder`) refuses a list of orders, inline or in a
/// variable, with `BAD_USER_INPUT`; a connection of several takes one order as a list of one.
#[tokio::test]
async fn a_connection_of_one_order_refuses_a_list() {
    use async_graphql::{Request, Variables};
    let w = World::load();
    let v = admin();
    let single: Vec<&str> =
        ROOTS.iter().filter(|(root, multi)| !*multi && !matches!(*root, "approvals" | "approvalRequests")).map(|(root, _)| *root).collect();
    assert!(single.len() > 10, "{single:?}");
    for root in single {
        let list = format!("{{ {root}(orderBy: [{{field: LAST_MODIFIED_AT}}, {{field: CREATED_AT, direction: DESC}}]) {{ totalCount }} }}");
        assert_eq!(support::error_codes(&w.run(&v, &list).await), vec!["BAD_USER_INPUT"], "{list}");
        let one = format!("{{ {root}(orderBy: {{field: CREATED_AT, direction: DESC}}) {{ totalCount }} }}");
        assert!(w.data(&v, &one).await[root]["totalCount"].as_u64().is_some(), "{one}");
    }
    let r = w
        .api
        .execute(
            &w.store,
            v.clone(),
            Request::new("query($o: [ApiSubscriptionOrder!]) { apiSubscriptions(orderBy: $o) { totalCount } }")
                .variables(Variables::from_json(serde_json::json!({"o": [{"field": "CREATED_AT"}]}))),
        )
        .await;
    assert_eq!(support::error_codes(&serde_json::to_value(&r).unwrap()), vec!["BAD_USER_INPUT"], "a list variable");
    let single_value = w.data(&v, "{ applications(orderBy: {field: NAME, direction: DESC}) { edges { node { id } } } }").await;
    let list = w.data(&v, "{ applications(orderBy: [{field: NAME, direction: DESC}]) { edges { node { id } } } }").await;
    assert_eq!(ids(&single_value["applications"]), ids(&list["applications"]));
}
