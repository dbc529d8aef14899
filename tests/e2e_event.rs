//! End to end over HTTP for the event kinds (EventType, EventExposure, EventSubscription): the
//! server started as the binary starts it (manifests source, mock tokens), queried with real
//! HTTP requests. Expectations come from `examples/world.facts.json`.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use support::{facts, names, Server};

fn set(v: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    v.into_iter().collect()
}

const LISTS: &str = "{ eventTypes { totalCount edges { node { id eventType active owner { name } } } }
  eventExposures { totalCount edges { node { id eventType active } } }
  eventSubscriptions { totalCount edges { node { id name eventType target { eventType ownerApplication { name ownerTeam { name } } } } } } }";

/// Every team of both environments sees its own event exposures and subscriptions (targets as
/// the facts say, `null` without error when there is none) and the whole catalogue of its
/// environment; a second team sees none of the first team's records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_ownership_catalogue_and_targets_over_http() {
    let server = Server::start(&support::world_dir(), None).await;
    let facts = facts();
    for env in ["poc", "qa"] {
        let e = &facts["env"][env];
        let catalogue: BTreeSet<String> = e["catalogue"]["eventTypes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| format!("{}|{}|{}", c["key"].as_str().unwrap(), c["team"].as_str().unwrap(), c["active"]))
            .collect();
        for (team, t) in e["teams"].as_object().unwrap() {
            let data = server.query(&support::team_token(team, env), LISTS).await;
            let types: BTreeSet<String> = data["eventTypes"]["edges"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| {
                    format!(
                        "{}|{}|{}",
                        n["node"]["eventType"].as_str().unwrap(),
                        n["node"]["owner"]["name"].as_str().unwrap(),
                        n["node"]["active"]
                    )
                })
                .collect();
            assert_eq!(types, catalogue, "{env} {team} catalogue");

            let expected: Vec<String> =
                t["exposures"]["EventExposure"].as_array().unwrap().iter().map(|x| x["key"].as_str().unwrap().to_string()).collect();
            assert_eq!(set(names(&data["eventExposures"], "eventType")), set(expected.clone()), "{env} {team} exposures");
            assert_eq!(data["eventExposures"]["totalCount"], json!(expected.len()));

            let subs = t["subscriptions"]["EventSubscription"].as_array().unwrap();
            assert_eq!(
                set(names(&data["eventSubscriptions"], "name")),
                set(subs.iter().map(|s| s["name"].as_str().unwrap().to_string())),
                "{env} {team}"
            );
            assert_eq!(data["eventSubscriptions"]["totalCount"], json!(subs.len()));
            for edge in data["eventSubscriptions"]["edges"].as_array().unwrap() {
                let node = &edge["node"];
                let fact = subs.iter().find(|s| s["name"] == node["name"]).unwrap();
                match fact["target"].as_str() {
                    None => assert_eq!(node["target"], Value::Null, "{env} {team} {}", node["name"]),
                    Some(target) => {
                        let (ns, name) = target.split_once('/').unwrap();
                        let app = node["target"]["ownerApplication"]["name"].as_str().unwrap();
                        assert_eq!(node["target"]["ownerApplication"]["ownerTeam"]["name"].as_str(), Some(ns.split_once("--").unwrap().1));
                        assert!(name.starts_with(&format!("{app}--")), "{target} owned by {app}");
                        assert_eq!(node["target"]["eventType"], fact["key"]);
                    }
                }
            }
        }
        // `where: {active: true}`: one entry per event type.
        let data = server
            .query(
                &support::team_token("payments--checkout", env),
                "{ eventTypes(where: {active: true}) { edges { node { eventType } } } }",
            )
            .await;
        let active = names(&data["eventTypes"], "eventType");
        assert_eq!(active.len(), set(active.clone()).len(), "{env}");
    }

    // A second team sees none of the first team's event records: lists, counts and node(id).
    let (first, second) = ("payments--checkout", "logistics--fleet");
    let own = server.query(&support::team_token(first, "poc"), LISTS).await;
    let ids: Vec<String> = ["eventExposures", "eventSubscriptions"].iter().flat_map(|k| names(&own[k], "id")).collect();
    assert_eq!(ids.len(), 2);
    let other = server.query(&support::team_token(second, "poc"), LISTS).await;
    let seen: BTreeSet<String> = ["eventExposures", "eventSubscriptions"].iter().flat_map(|k| names(&other[k], "id")).collect();
    for id in &ids {
        assert!(!seen.contains(id));
        let (data, errors) =
            server.query_raw(&support::team_token(second, "poc"), "query($id: ID!) { node(id: $id) { id } }", json!({"id": id})).await;
        assert_eq!(data["node"], Value::Null, "{id}");
        assert_eq!(errors[0]["extensions"]["code"], "NOT_FOUND");
    }
    let filtered = server
        .query(&support::team_token(second, "poc"), r#"{ eventSubscriptions(where: {nameHasPrefix: "checkout"}) { totalCount } }"#)
        .await;
    assert_eq!(filtered["eventSubscriptions"]["totalCount"], 0);

    // Approvals of event subscriptions: `subscription` is an EventSubscriptionInfo. Approvals
    // are applied before subscriptions at start (registry order), so those of event
    // subscriptions may arrive one retry delay after readiness.
    let data = eventually(
        &server,
        &support::team_token("payments--ledger", "poc"),
        r#"{ approvals(where: {name: "eventsubscription--ledger-core--de-telekom-payments-orderplaced-v1"}) { edges { node {
            namespace subscription { __typename id ownerApplication { name } ... on EventSubscriptionInfo { eventType deliveryType } } } } } }"#,
        "the event approval is projected",
        |d| !d["approvals"]["edges"].as_array().unwrap().is_empty(),
    )
    .await;
    let sub = &data["approvals"]["edges"][0]["node"]["subscription"];
    assert_eq!(sub["__typename"], "EventSubscriptionInfo");
    assert_eq!(sub["ownerApplication"]["name"], "ledger-core");
    assert_eq!((sub["eventType"].as_str(), sub["deliveryType"].as_str()), (Some("de.telekom.payments.orderplaced.v1"), Some("CALLBACK")));
    server.stop().await;
}

/// Writes `doc` as a JSON manifest.
fn write(path: &Path, doc: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(doc).unwrap()).unwrap();
}

/// Asks `query` again after each change the server reports until `done(data)` holds.
async fn eventually(server: &Server, token: &str, query: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    support::eventually(server.running().app(), what, async || {
        let data = server.query(token, query).await;
        done(&data).then_some(data)
    })
    .await
}

/// A subscription loaded before its exposure is stored without target (`target: null`, no
/// error), linked as soon as the exposure arrives, and unlinked when the exposure becomes
/// inactive or is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_link_and_unlink_as_the_exposure_comes_and_goes() {
    let dir = tempfile::tempdir().unwrap();
    support::copy_dir(&support::world_dir(), dir.path());
    // Take the poc orders exposure out of the world; keep it as a separate manifest.
    let exposures_file = dir.path().join("10-eventexposures.yaml");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(&exposures_file).unwrap()).unwrap();
    std::fs::remove_file(&exposures_file).unwrap();
    let mut orders = None;
    for (i, d) in docs.into_iter().filter(|d| d.is_object()).enumerate() {
        if d["metadata"]["namespace"] == "poc--payments--checkout" {
            orders = Some(d);
        } else {
            write(&dir.path().join(format!("10-eventexposure-{i}.json")), &d);
        }
    }
    let mut orders = orders.expect("the poc orders exposure");

    let server = Server::start(dir.path(), None).await;
    let token = support::team_token("payments--ledger", "poc");
    let q = r#"{ eventSubscriptions(where: {environment: "poc"}) { edges { node { name target { id eventType ownerApplication { name } } } } } }"#;
    let target = |d: &Value| d["eventSubscriptions"]["edges"][0]["node"]["target"].clone();
    let data = server.query(&token, q).await;
    assert_eq!(target(&data), Value::Null, "no exposure yet: null target without error");

    let exposure_path = dir.path().join("20-orders-exposure.json");
    write(&exposure_path, &orders);
    let data = eventually(&server, &token, q, "linked after the exposure arrives", |d| !target(d).is_null()).await;
    assert_eq!(target(&data)["ownerApplication"]["name"], "checkout-api");

    orders["status"]["active"] = json!(false);
    write(&exposure_path, &orders);
    eventually(&server, &token, q, "unlinked when the exposure is inactive", |d| target(d).is_null()).await;

    orders["status"]["active"] = json!(true);
    write(&exposure_path, &orders);
    eventually(&server, &token, q, "linked again", |d| !target(d).is_null()).await;

    std::fs::remove_file(&exposure_path).unwrap();
    eventually(&server, &token, q, "unlinked when the exposure is deleted", |d| target(d).is_null()).await;
    server.stop().await;
}
