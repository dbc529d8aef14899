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
