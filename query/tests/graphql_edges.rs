//! `where` edge predicates (`has<Edge>`, `has<Edge>With`): they work on the viewer's own
//! records, never depend on another team's values (the Go server's edge filters
//! leaked them),
//! treat empty nested inputs as no-ops, and secrets are not filterable.

mod support;

use serde_json::{json, Value};
use support::{admin, error_codes, strings, team_viewer, World};

fn names(data: &Value, root: &str) -> Vec<String> {
    strings(&json!(support::nodes(&data[root])), "name")
}

#[tokio::test]
async fn own_edges_filter_own_records() {
    let w = World::load();
    let checkout = team_viewer("payments--checkout", "poc");
    let d = w
        .data(
            &checkout,
            r#"{ applications(where: {hasExposedApisWith: [{basePath: "/payments/checkout/v1"}]}) { edges { node { name } } } }"#,
        )
        .await;
    assert_eq!(names(&d, "applications"), ["checkout-api"]);
    let d = w.data(&checkout, r#"{ applications(where: {hasSubscribedApis: true}) { edges { node { name } } } }"#).await;
    assert_eq!(names(&d, "applications"), ["checkout-batch", "checkout-web"]);
    let d = w.data(&checkout, r#"{ applications(where: {hasSubscribedApis: false}) { edges { node { name } } } }"#).await;
    assert_eq!(names(&d, "applications"), ["checkout-api"]);
    let d = w.data(&checkout, r#"{ applications(where: {hasZoneWith: [{name: "caas-cetus"}]}) { edges { node { name } } } }"#).await;
    assert_eq!(names(&d, "applications"), ["checkout-batch"]);
    // Through two edges: subscriptions of my applications that run in zone caas-cetus.
    let d = w
        .data(
            &checkout,
            r#"{ apiSubscriptions(where: {hasOwnerWith: [{hasZoneWith: [{name: "caas-cetus"}]}]}) { edges { node { name } } } }"#,
        )
        .await;
    assert_eq!(names(&d, "apiSubscriptions"), ["checkout-batch--payments-ledger-v2"]);
    // `has<Edge>` tests the link, which `target { id }` shows anyway.
    let d = w.data(&checkout, r#"{ apiSubscriptions(where: {hasTarget: true}) { totalCount } }"#).await;
    assert_eq!(d["apiSubscriptions"]["totalCount"], 3);
}

#[tokio::test]
async fn edges_into_other_teams_never_depend_on_their_values() {
    let w = World::load();
    let checkout = team_viewer("payments--checkout", "poc");
    // checkout-batch--payments-ledger-v2 targets ledger-core's exposure (team payments--ledger):
    // an admin can filter through it, checkout cannot see into it.
    let probe = r#"{ apiSubscriptions(where: {hasTargetWith: [{hasOwnerWith: [{hasOwnerTeamWith: [{nameHasPrefix: "payments--ledger"}]}]}]}) { totalCount } }"#;
    assert!(w.data(&admin(), probe).await["apiSubscriptions"]["totalCount"].as_u64().unwrap() >= 1);
    assert_eq!(w.data(&checkout, probe).await["apiSubscriptions"]["totalCount"], 0);

    // Blind probes on the other team's values give the same answer whatever the value is.
    let probes = [
        r#"{ apiSubscriptions(where: {hasTargetWith: [{statusMessageContains: "a"}]}) { totalCount } }"#,
        r#"{ apiSubscriptions(where: {hasTargetWith: [{visibility: ENTERPRISE}]}) { totalCount } }"#,
        r#"{ apiSubscriptions(where: {hasTargetWith: [{visibility: WORLD}]}) { totalCount } }"#,
        r#"{ apiSubscriptions(where: {hasTargetWith: [{hasOwnerWith: [{clientIDHasPrefix: "payments--ledger"}]}]}) { totalCount } }"#,
        r#"{ approvals(where: {hasAPISubscriptionWith: [{hasOwnerWith: [{nameHasPrefix: "copilot"}]}]}) { totalCount } }"#,
    ];
    let mut before = Vec::new();
    let mut admin_before = Vec::new();
    for p in probes {
        before.push(w.run(&checkout, p).await);
        admin_before.push(w.run(&admin(), p).await);
    }
    // Change ledger's exposure and application: visibility, status message, client id.
    let mut docs = support::world_documents();
    for d in docs.iter_mut() {
        if d["kind"] == "ApiExposure" && d["metadata"]["name"] == "ledger-core--payments-ledger-v2" {
            d["spec"]["visibility"] = json!("World");
            d["status"]["conditions"][0]["message"] = json!("something else entirely");
        }
        if d["kind"] == "Application" && d["metadata"]["name"] == "ledger-core" && d["metadata"]["namespace"] == "poc--payments--ledger" {
            d["status"]["clientId"] = json!("zzz");
        }
    }
    let changed: Vec<Value> = docs
        .into_iter()
        .filter(|d| {
            (d["kind"] == "ApiExposure" && d["metadata"]["name"] == "ledger-core--payments-ledger-v2")
                || (d["kind"] == "Application" && d["metadata"]["name"] == "ledger-core")
        })
        .collect();
    let report = support::load(&w.store, &changed);
    assert!(report.written.values().sum::<usize>() >= 2, "{report:?}");
    for (p, b) in probes.iter().zip(before) {
        assert_eq!(w.run(&checkout, p).await, b, "{p}");
    }
    // The change is real: an admin (who may see into every team) gets different answers.
    let mut admin_changed = 0;
    for (p, b) in probes.iter().zip(admin_before) {
        admin_changed += usize::from(w.run(&admin(), p).await != b);
    }
    assert!(admin_changed >= 2, "the probes must be sensitive to the changed values for a viewer who may see them");
}

#[tokio::test]
async fn empty_nested_inputs_are_no_ops_and_secrets_are_not_filterable() {
    let w = World::load();
    let checkout = team_viewer("payments--checkout", "poc");
    let all = w.data(&checkout, "{ applications { totalCount } }").await["applications"]["totalCount"].clone();
    for q in [
        "{ applications(where: {}) { totalCount } }",
        "{ applications(where: {not: {}}) { totalCount } }",
        "{ applications(where: {and: [{}]}) { totalCount } }",
        "{ applications(where: {or: []}) { totalCount } }",
        "{ applications(where: {nameIn: []}) { totalCount } }",
    ] {
        assert_eq!(w.data(&checkout, q).await["applications"]["totalCount"], all, "{q}");
    }
    for q in [
        r#"{ teams(where: {teamTokenHasPrefix: "$"}) { totalCount } }"#,
        r#"{ applications(where: {clientSecretNotNil: true}) { totalCount } }"#,
        r#"{ apis(where: {specificationNotNil: true}) { totalCount } }"#,
    ] {
        let r = w.run(&checkout, q).await;
        assert!(
            r["data"].is_null() && !error_codes(&r).is_empty() || r["errors"][0]["message"].as_str().unwrap().contains("Unknown field"),
            "{q}: {r}"
        );
    }
}

/// An active catalogue entry's `hasExposures` counts every team's active exposure of its base
/// path, as its `activeExposure` shows them, but only of its own variant: an agent's exposure at
/// an MCP server's path is not shown by the server's `activeExposure`, and must not be found
/// through its `hasExposures` by a team that cannot see it either.
#[tokio::test]
async fn has_exposures_finds_what_active_exposure_shows() {
    let w = World::load();
    let agent_at_mcp_path = json!({
        "apiVersion": "agentic.cp.ei.telekom.de/v1", "kind": "AgenticExposure",
        "metadata": {
            "name": "copilot-agent--mcp-orders-v1", "namespace": "poc--assist--copilot",
            "labels": {"cp.ei.telekom.de/environment": "poc", "cp.ei.telekom.de/zone": "aws-eu1", "cp.ei.telekom.de/application": "copilot-agent"},
            "creationTimestamp": "2026-05-23T08:05:00Z", "generation": 1
        },
        "spec": {
            "basePath": "/mcp/orders/v1", "upstreams": [{"url": "https://copilot-a.assist.poc.example.com/a2a", "weight": 100}],
            "visibility": "Enterprise", "approval": {"strategy": "FourEyes"}, "zone": {"name": "aws-eu1", "namespace": "poc"},
            "provider": {"name": "copilot-agent", "namespace": "poc--assist--copilot"}, "variant": "AGENT"
        },
        "status": {"active": true}
    });
    let report = support::load(&w.store, &[agent_at_mcp_path]);
    assert!(report.skipped.is_empty() && report.dependency_missing.is_empty(), "{report:?}");
    let all = r#"{ mcpServers { edges { node { id active activeExposure { basePath } } } } }"#;
    let matching = r#"{ mcpServers(where: {hasExposures: true}) { edges { node { id } } } }"#;
    for viewer in [team_viewer("payments--checkout", "poc"), admin()] {
        let shown: Vec<Value> = support::nodes(&w.data(&viewer, all).await["mcpServers"])
            .iter()
            .filter(|n| n["active"] == true && !n["activeExposure"].is_null())
            .map(|n| n["id"].clone())
            .collect();
        assert!(!shown.is_empty(), "the world has MCP servers with an active exposure");
        let found: Vec<Value> = support::nodes(&w.data(&viewer, matching).await["mcpServers"]).iter().map(|n| n["id"].clone()).collect();
        assert_eq!(found, shown);
    }
    let agent = w.data(&admin(), r#"{ agenticExposures(where: {basePath: "/mcp/orders/v1"}) { totalCount } }"#).await;
    assert_eq!(agent["agenticExposures"]["totalCount"], 1, "the agent's exposure at the MCP server's path is stored");
}
