//! GraphQL over event types, event exposures and event subscriptions, checked against the
//! example world's facts (`examples/world.facts.json`): team isolation of lists, counts,
//! `node`/`nodes` and nested edges; the catalogue (`eventTypes`, one active entry per type);
//! subscription targets and target-less subscriptions; the cross-tenant `EventExposureInfo` /
//! `EventSubscriptionInfo` views; approvals of event subscriptions; requested vs active scopes.

mod support;

use query::QueryConfig;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use storage::Store;
use support::{admin, error_codes, facts, nodes, reference_time, strings, team_viewer, world_documents, World};

fn set<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> BTreeSet<String> {
    items.into_iter().map(Into::into).collect()
}

/// The teams of `env` in the facts.
fn teams(facts: &Value, env: &str) -> Vec<String> {
    facts["env"][env]["teams"].as_object().unwrap().keys().cloned().collect()
}

/// `namespace/name` of every `kind` (Approval, ApprovalRequest) manifest of `env` whose
/// subscription is an EventSubscription.
fn event_targeted(kind: &str, env: &str) -> BTreeSet<String> {
    world_documents()
        .into_iter()
        .filter(|d| d["kind"] == kind && d["spec"]["target"]["kind"] == "EventSubscription")
        .map(|d| format!("{}/{}", d["metadata"]["namespace"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap()))
        .filter(|k| k.starts_with(&format!("{env}--")))
        .collect()
}

/// `namespace/name` of the nodes of a connection.
fn ns_names(connection: &Value) -> BTreeSet<String> {
    nodes(connection).iter().map(|n| format!("{}/{}", n["namespace"].as_str().unwrap(), n["name"].as_str().unwrap())).collect()
}

const TEAM_LISTS: &str = r#"{
  eventExposures { totalCount edges { node { id namespace eventType active environment owner { name } } } }
  eventSubscriptions { totalCount edges { node { id namespace name eventType environment
    target { eventType active ownerApplicationName ownerApplication { name ownerTeam { name } } } } } }
}"#;

/// Every team of both environments sees exactly its own event exposures and subscriptions
/// (with the targets the facts name, `null` without error for target-less ones) and matching
/// `totalCount`s.
#[tokio::test]
async fn team_sees_exactly_its_event_exposures_and_subscriptions() {
    let w = World::load();
    let facts = facts();
    let mut targetless = 0;
    for env in ["poc", "qa"] {
        for team in teams(&facts, env) {
            let t = &facts["env"][env]["teams"][&team];
            let data = w.data(&team_viewer(&team, env), TEAM_LISTS).await;
            let ns = format!("{env}--{team}");

            let exposures = nodes(&data["eventExposures"]);
            let fact_exposures = t["exposures"]["EventExposure"].as_array().unwrap();
            let expected: BTreeSet<(String, bool)> =
                fact_exposures.iter().map(|e| (e["key"].as_str().unwrap().to_string(), e["active"].as_bool().unwrap())).collect();
            let got: BTreeSet<(String, bool)> =
                exposures.iter().map(|e| (e["eventType"].as_str().unwrap().to_string(), e["active"].as_bool().unwrap())).collect();
            assert_eq!(got, expected, "{env} {team} event exposures");
            assert_eq!(data["eventExposures"]["totalCount"], json!(expected.len()), "{env} {team}");
            for e in &exposures {
                assert_eq!((e["namespace"].as_str(), e["environment"].as_str()), (Some(ns.as_str()), Some(env)));
                let fact = fact_exposures.iter().find(|f| f["key"] == e["eventType"]).unwrap();
                let app = e["owner"]["name"].as_str().unwrap();
                assert!(fact["name"].as_str().unwrap().starts_with(&format!("{app}--")), "{env} {team}: owner {app} of {fact}");
            }

            let subs = nodes(&data["eventSubscriptions"]);
            let fact_subs = t["subscriptions"]["EventSubscription"].as_array().unwrap();
            assert_eq!(set(strings(&json!(subs), "name")), set(fact_subs.iter().map(|s| s["name"].as_str().unwrap())), "{env} {team}");
            assert_eq!(data["eventSubscriptions"]["totalCount"], json!(fact_subs.len()), "{env} {team}");
            for s in &subs {
                let fact = fact_subs.iter().find(|f| f["name"] == s["name"]).unwrap();
                assert_eq!((s["namespace"].as_str(), s["environment"].as_str()), (Some(ns.as_str()), Some(env)));
                assert_eq!(s["eventType"], fact["key"]);
                match fact["target"].as_str() {
                    None => {
                        assert_eq!(s["target"], Value::Null, "{env} {team} {}", s["name"]);
                        targetless += 1;
                    }
                    Some(target) => {
                        // `<env>--<team>/<app>--<event type name>`
                        let (target_ns, target_name) = target.split_once('/').unwrap();
                        let target_team = target_ns.split_once("--").unwrap().1;
                        let info = &s["target"];
                        assert_eq!(info["eventType"], fact["key"]);
                        assert_eq!(info["active"], true);
                        assert_eq!(info["ownerApplication"]["ownerTeam"]["name"].as_str(), Some(target_team));
                        let app = info["ownerApplication"]["name"].as_str().unwrap();
                        assert_eq!(info["ownerApplicationName"].as_str(), Some(app));
                        assert!(target_name.starts_with(&format!("{app}--")), "{target} owned by {app}");
                    }
                }
            }
        }
    }
    // The facts' target-less event subscriptions are all met.
    let expected = ["poc", "qa"]
        .iter()
        .flat_map(|env| facts["env"][*env]["subscriptionsWithoutTarget"].as_array().cloned().unwrap_or_default())
        .filter(|s| s["kind"] == "EventSubscription")
        .count();
    assert_eq!(targetless, expected);
    assert!(targetless > 0);
}

/// A team sees none of another team's event records: not in lists or counts, and `node` with
/// their IDs answers null plus `NOT_FOUND` (the owner resolves them).
#[tokio::test]
async fn other_teams_event_records_are_invisible() {
    let w = World::load();
    let checkout = team_viewer("payments--checkout", "poc");
    let data = w.data(&checkout, TEAM_LISTS).await;
    let ids: Vec<String> = nodes(&data["eventExposures"])
        .iter()
        .chain(nodes(&data["eventSubscriptions"]).iter())
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "one exposure and one subscription");

    let copilot = team_viewer("assist--copilot", "poc");
    let data = w.data(&copilot, TEAM_LISTS).await;
    assert_eq!(data["eventExposures"]["totalCount"], json!(0));
    let visible: BTreeSet<String> = nodes(&data["eventSubscriptions"]).iter().map(|n| n["id"].as_str().unwrap().to_string()).collect();
    assert!(ids.iter().all(|id| !visible.contains(id)));
    for id in &ids {
        let r = w.run(&copilot, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
        assert_eq!(r["data"]["node"], Value::Null, "{id}");
        assert_eq!(error_codes(&r), vec!["NOT_FOUND"], "{id}");
        let own = w.data(&checkout, &format!(r#"{{ node(id: "{id}") {{ id __typename }} }}"#)).await;
        assert_eq!(own["node"]["id"].as_str(), Some(id.as_str()));
        assert!(own["node"]["__typename"].as_str().unwrap().starts_with("Event"));
    }
    // The same team name in qa does not see poc records.
    let qa = team_viewer("payments--checkout", "qa");
    for id in &ids {
        let r = w.run(&qa, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
        assert_eq!(error_codes(&r), vec!["NOT_FOUND"], "{id}");
    }
    let data = w.data(&qa, TEAM_LISTS).await;
    assert_eq!(data["eventExposures"]["totalCount"], json!(1));
    assert!(nodes(&data["eventExposures"]).iter().all(|n| n["environment"] == "qa" && !ids.contains(&n["id"].as_str().unwrap().into())));
}

/// The catalogue: every viewer of an environment sees all its event types (facts
/// `catalogue.eventTypes`), `where: {active: true}` gives one entry per type, `owner` and
/// `activeExposure` cross tenants as `TeamInfo` / `EventExposureInfo`; `Team.eventTypes` lists
/// a team's registrations.
#[tokio::test]
async fn event_type_catalogue() {
    let w = World::load();
    let facts = facts();
    let q = r#"{
      eventTypes { totalCount edges { node { id name: eventType version description active environment namespace statusPhase
        specificationUrl owner { name groupName } activeExposure { eventType active ownerApplication { name ownerTeam { name } } } } } }
      active: eventTypes(where: {active: true}) { totalCount edges { node { eventType } } }
    }"#;
    for env in ["poc", "qa"] {
        let catalogue = facts["env"][env]["catalogue"]["eventTypes"].as_array().unwrap();
        let expected: BTreeSet<(String, String, bool)> = catalogue
            .iter()
            .map(|c| (c["key"].as_str().unwrap().to_string(), c["team"].as_str().unwrap().to_string(), c["active"].as_bool().unwrap()))
            .collect();
        for team in teams(&facts, env) {
            let data = w.data(&team_viewer(&team, env), q).await;
            let got: BTreeSet<(String, String, bool)> = nodes(&data["eventTypes"])
                .iter()
                .map(|n| (n["name"].as_str().unwrap().to_string(), n["owner"]["name"].as_str().unwrap().to_string(), n["active"] == true))
                .collect();
            assert_eq!(got, expected, "{env} {team}");
            assert_eq!(data["eventTypes"]["totalCount"], json!(expected.len()));
            let active = strings(&json!(nodes(&data["active"])), "eventType");
            assert_eq!(active.len(), set(active.clone()).len(), "{env}: one active entry per type");
            assert_eq!(set(active), set(catalogue.iter().map(|c| c["key"].as_str().unwrap())), "{env}");
            for n in nodes(&data["eventTypes"]) {
                assert_eq!(n["environment"], env);
                assert_eq!(n["specificationUrl"], Value::Null);
                assert_eq!(n["namespace"].as_str().unwrap(), format!("{env}--{}", n["owner"]["name"].as_str().unwrap()));
            }
        }
    }

    let data = w.data(&team_viewer("assist--copilot", "poc"), q).await;
    let by: BTreeMap<(String, bool), Value> =
        nodes(&data["eventTypes"]).into_iter().map(|n| ((n["name"].as_str().unwrap().to_string(), n["active"] == true), n)).collect();
    let orders = &by[&("de.telekom.payments.orderplaced.v1".to_string(), true)];
    assert_eq!(orders["version"], "1.2.0");
    assert_eq!(orders["statusPhase"], "READY");
    assert_eq!(orders["owner"], json!({"name": "payments--checkout", "groupName": "payments"}));
    assert_eq!(
        orders["activeExposure"],
        json!({"eventType": "de.telekom.payments.orderplaced.v1", "active": true,
               "ownerApplication": {"name": "checkout-api", "ownerTeam": {"name": "payments--checkout"}}})
    );
    let shadow = &by[&("de.telekom.payments.orderplaced.v1".to_string(), false)];
    assert_eq!((shadow["owner"]["name"].as_str(), shadow["statusPhase"].as_str()), (Some("payments--ledger"), Some("PENDING")));
    assert_eq!(shadow["description"], "Ledger copy of the order event (superseded).");

    // `Team.eventTypes`: the ledger team registered one (inactive) event type.
    let data = w
        .data(
            &team_viewer("payments--ledger", "poc"),
            r#"{ teams { edges { node { name eventTypes { totalCount edges { node { eventType active } } }
                 activeOnly: eventTypes(where: {active: true}) { totalCount } } } } }"#,
        )
        .await;
    let team = &nodes(&data["teams"])[0];
    assert_eq!(team["eventTypes"]["totalCount"], 1);
    assert_eq!(nodes(&team["eventTypes"]), vec![json!({"eventType": "de.telekom.payments.orderplaced.v1", "active": false})]);
    assert_eq!(team["activeOnly"]["totalCount"], 0);

    // Admin: every environment's catalogue.
    let all = w.data(&admin(), "{ eventTypes { totalCount } }").await;
    let total: u64 = ["poc", "qa"].iter().map(|e| facts["env"][*e]["counts"]["EventType"].as_u64().unwrap()).sum();
    assert_eq!(all["eventTypes"]["totalCount"], json!(total));
}

/// The full shapes: an exposure's scopes and triggers (enums normalised, `attributes` as a
/// map, `expression` as JSON text), its `eventTypeDef` and cross-tenant `subscriptions`; a
/// subscription's delivery, trigger, scopes, approval and approval requests; the application
/// edges.
#[tokio::test]
async fn event_fields_and_edges() {
    let w = World::load();
    let checkout = team_viewer("payments--checkout", "poc");
    let data = w
        .data(
            &checkout,
            r#"{ eventExposures { edges { node {
                eventType visibility active gatewayPublishingURL statusPhase statusMessage
                approvalConfig { strategy trustedTeams }
                eventScopes { name trigger { responseFilter { mode paths } selectionFilter { attributes expression } } }
                eventTypeDef { eventType active owner { name } }
                subscriptions { __typename id eventType deliveryType statusPhase ownerApplicationName ownerTeam { name }
                  ownerApplication { name ownerTeam { name } } }
            } } } }"#,
        )
        .await;
    let e = &nodes(&data["eventExposures"])[0];
    assert_eq!((e["visibility"].as_str(), e["active"].as_bool()), (Some("WORLD"), Some(true)));
    assert_eq!(e["gatewayPublishingURL"], "https://api.aws-eu1.poc.example.com/horizon/events/v1");
    assert_eq!(e["approvalConfig"], json!({"strategy": "AUTO", "trustedTeams": ["payments--checkout"]}));
    assert_eq!(
        e["eventScopes"],
        json!([
            {"name": "eu-orders", "trigger": {
                "responseFilter": {"mode": "INCLUDE", "paths": ["$.orderId", "$.amount", "$.currency"]},
                "selectionFilter": {"attributes": {"region": "eu"}, "expression": r#"{"and":[{"eq":{"field":"$.channel","value":"web"}}]}"#}}},
            {"name": "all-orders-redacted", "trigger": {
                "responseFilter": {"mode": "EXCLUDE", "paths": ["$.customer.email"]}, "selectionFilter": null}}
        ])
    );
    assert_eq!(
        e["eventTypeDef"],
        json!({"eventType": "de.telekom.payments.orderplaced.v1", "active": true, "owner": {"name": "payments--checkout"}})
    );
    let subs = e["subscriptions"].as_array().unwrap();
    let owners: BTreeSet<(String, String, String)> = subs
        .iter()
        .map(|s| {
            assert_eq!(s["__typename"], "EventSubscriptionInfo");
            assert_eq!(s["eventType"], "de.telekom.payments.orderplaced.v1");
            assert_eq!(s["ownerApplicationName"], s["ownerApplication"]["name"]);
            assert_eq!(s["ownerTeam"]["name"], s["ownerApplication"]["ownerTeam"]["name"]);
            (
                s["ownerApplication"]["ownerTeam"]["name"].as_str().unwrap().to_string(),
                s["ownerApplication"]["name"].as_str().unwrap().to_string(),
                s["deliveryType"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        owners,
        BTreeSet::from([
            ("payments--checkout".into(), "checkout-batch".into(), "SERVER_SENT_EVENT".into()),
            ("payments--ledger".into(), "ledger-core".into(), "CALLBACK".into()),
        ])
    );

    let ledger = team_viewer("payments--ledger", "poc");
    let data = w
        .data(
            &ledger,
            r#"{ eventSubscriptions { edges { node {
                name eventType deliveryType callbackURL gatewaySseURL scopes requestedScopes activeScopes statusPhase
                delivery { payload eventRetentionTime circuitBreakerOptOut retryableStatusCodes redeliveriesPerSecond enforceGetHttpRequestMethodForHealthCheck }
                trigger { responseFilter { mode } selectionFilter { attributes expression } }
                owner { name }
                approval { name state requestedScopes }
                approvalRequests { name state }
                target { __typename id eventType visibility approvalConfig { strategy } ownerTeam { name groupName } }
            } } } }"#,
        )
        .await;
    let s = &nodes(&data["eventSubscriptions"])[0];
    assert_eq!(s["name"], "ledger-core--de-telekom-payments-orderplaced-v1");
    assert_eq!((s["deliveryType"].as_str(), s["statusPhase"].as_str()), (Some("CALLBACK"), Some("READY")));
    assert_eq!(s["callbackURL"], "https://ledger-core.payments.poc.example.com/events");
    assert_eq!(s["gatewaySseURL"], Value::Null);
    assert_eq!((&s["scopes"], &s["requestedScopes"], &s["activeScopes"]), (&json!(["eu-orders"]), &json!(["eu-orders"]), &Value::Null));
    assert_eq!(
        s["delivery"],
        json!({"payload": "DATA", "eventRetentionTime": "168h", "circuitBreakerOptOut": false, "retryableStatusCodes": [502, 503, 504],
               "redeliveriesPerSecond": 10, "enforceGetHttpRequestMethodForHealthCheck": true})
    );
    assert_eq!(s["trigger"], json!({"responseFilter": null, "selectionFilter": {"attributes": {"currency": "EUR"}, "expression": ""}}));
    assert_eq!(s["owner"]["name"], "ledger-core");
    assert_eq!(
        s["approval"],
        json!({"name": "eventsubscription--ledger-core--de-telekom-payments-orderplaced-v1", "state": "GRANTED", "requestedScopes": ["eu-orders"]})
    );
    assert_eq!(s["approvalRequests"], json!([{"name": "ledger-core--de-telekom-payments-orderplaced-v1--56b5ff7f49", "state": "GRANTED"}]));
    let t = &s["target"];
    assert_eq!(t["__typename"], "EventExposureInfo");
    assert_eq!((t["eventType"].as_str(), t["visibility"].as_str()), (Some("de.telekom.payments.orderplaced.v1"), Some("WORLD")));
    assert_eq!(t["ownerTeam"], json!({"name": "payments--checkout", "groupName": "payments"}));
    // The target exposure itself stays invisible to the subscriber.
    let r = w.run(&ledger, &format!(r#"{{ node(id: "{}") {{ id }} }}"#, t["id"].as_str().unwrap())).await;
    assert_eq!(error_codes(&r), vec!["NOT_FOUND"]);

    // A server-sent-event subscription: no callback, the SSE URL, a response-only trigger.
    let data = w
        .data(
            &checkout,
            r#"{ eventSubscriptions { edges { node { name deliveryType callbackURL gatewaySseURL scopes
                delivery { payload eventRetentionTime retryableStatusCodes redeliveriesPerSecond }
                trigger { responseFilter { mode paths } selectionFilter { expression } } } } } }"#,
        )
        .await;
    assert_eq!(
        nodes(&data["eventSubscriptions"])[0],
        json!({"name": "checkout-batch--de-telekom-payments-orderplaced-v1", "deliveryType": "SERVER_SENT_EVENT", "callbackURL": null,
               "gatewaySseURL": "https://api.caas-cetus.poc.example.com:8443/gw/horizon/sse/v1/de.telekom.payments.orderplaced.v1",
               "scopes": null,
               "delivery": {"payload": "DATA", "eventRetentionTime": "", "retryableStatusCodes": null, "redeliveriesPerSecond": null},
               "trigger": {"responseFilter": {"mode": "INCLUDE", "paths": ["$.orderId"]}, "selectionFilter": null}})
    );

    // Application edges.
    let data = w
        .data(
            &checkout,
            r#"{ applications(orderBy: [{field: NAME}]) { edges { node { name
                exposedEvents { totalCount edges { node { eventType } } }
                subscribedEvents { totalCount edges { node { name } } }
                sse: subscribedEvents(where: {deliveryType: SERVER_SENT_EVENT}) { totalCount }
            } } } }"#,
        )
        .await;
    let apps: BTreeMap<String, Value> =
        nodes(&data["applications"]).into_iter().map(|a| (a["name"].as_str().unwrap().to_string(), a)).collect();
    assert_eq!(strings(&json!(nodes(&apps["checkout-api"]["exposedEvents"])), "eventType"), ["de.telekom.payments.orderplaced.v1"]);
    assert_eq!(apps["checkout-api"]["subscribedEvents"]["totalCount"], 0);
    assert_eq!(apps["checkout-batch"]["exposedEvents"]["totalCount"], 0);
    assert_eq!(
        strings(&json!(nodes(&apps["checkout-batch"]["subscribedEvents"])), "name"),
        ["checkout-batch--de-telekom-payments-orderplaced-v1"]
    );
    assert_eq!(apps["checkout-batch"]["sse"]["totalCount"], 1);
    assert_eq!(apps["checkout-web"]["subscribedEvents"]["totalCount"], 0);
}

/// Approvals and approval requests of event subscriptions are projected, visible exactly to the
/// subscriber's and the provider's team (facts `approvalsVisible` / `approvalRequestsVisible`),
/// and their `subscription` is an `EventSubscriptionInfo`.
#[tokio::test]
async fn approvals_of_event_subscriptions() {
    let w = World::load();
    let facts = facts();
    let q = r#"{ approvals { edges { node { namespace name } } } approvalRequests { edges { node { namespace name } } } }"#;
    for env in ["poc", "qa"] {
        let approvals = event_targeted("Approval", env);
        let requests = event_targeted("ApprovalRequest", env);
        assert!(!approvals.is_empty() && !requests.is_empty());
        for team in teams(&facts, env) {
            let t = &facts["env"][env]["teams"][&team];
            let data = w.data(&team_viewer(&team, env), q).await;
            for (field, fact, of_events) in
                [("approvals", "approvalsVisible", &approvals), ("approvalRequests", "approvalRequestsVisible", &requests)]
            {
                let seen: BTreeSet<String> = ns_names(&data[field]).into_iter().filter(|n| of_events.contains(n)).collect();
                let expected: BTreeSet<String> =
                    t[fact].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).filter(|n| of_events.contains(n)).collect();
                assert_eq!(seen, expected, "{env} {team} {field}");
            }
        }
        let all = w
            .data(&admin(), &format!(r#"{{ approvals(where: {{environment: "{env}"}}) {{ edges {{ node {{ namespace name }} }} }} }}"#))
            .await;
        assert!(approvals.is_subset(&ns_names(&all["approvals"])), "{env}: every event approval is projected");
    }

    // The brief's example: the ledger approval, seen by the provider team (payments--checkout).
    let data = w
        .data(
            &team_viewer("payments--checkout", "poc"),
            r#"fragment Sub on SubscriptionInfo { id ownerApplication { name ownerTeam { name } } }
            {
              approvals(where: {name: "eventsubscription--ledger-core--de-telekom-payments-orderplaced-v1"}) { edges { node {
                namespace state requestedScopes
                subscription { __typename ...Sub ... on EventSubscriptionInfo { eventType deliveryType statusPhase statusMessage ownerApplicationName ownerTeam { name } } }
              } } }
              approvalRequests(where: {nameHasPrefix: "ledger-core--de-telekom-payments-orderplaced-v1"}) { edges { node {
                name subscription { __typename ... on SubscriptionInfo { ownerApplication { name } } } approval { name }
              } } }
            }"#,
        )
        .await;
    let a = &nodes(&data["approvals"])[0];
    assert_eq!(a["namespace"], "poc--payments--ledger");
    assert_eq!((a["state"].as_str(), &a["requestedScopes"]), (Some("GRANTED"), &json!(["eu-orders"])));
    let sub = &a["subscription"];
    assert_eq!(sub["__typename"], "EventSubscriptionInfo");
    assert_eq!(sub["eventType"], "de.telekom.payments.orderplaced.v1");
    assert_eq!((sub["deliveryType"].as_str(), sub["statusPhase"].as_str()), (Some("CALLBACK"), Some("READY")));
    assert_eq!(sub["statusMessage"], "Successfully provisioned subresources");
    assert_eq!(sub["ownerApplication"], json!({"name": "ledger-core", "ownerTeam": {"name": "payments--ledger"}}));
    assert_eq!((sub["ownerApplicationName"].as_str(), sub["ownerTeam"]["name"].as_str()), (Some("ledger-core"), Some("payments--ledger")));
    let id = sub["id"].as_str().unwrap().to_string();
    let r = &nodes(&data["approvalRequests"])[0];
    assert_eq!(r["subscription"], json!({"__typename": "EventSubscriptionInfo", "ownerApplication": {"name": "ledger-core"}}));
    assert_eq!(r["approval"]["name"], "eventsubscription--ledger-core--de-telekom-payments-orderplaced-v1");

    // The info's ID is the subscription's node ID, resolvable by its owner only.
    let own = w
        .data(&team_viewer("payments--ledger", "poc"), &format!(r#"{{ node(id: "{id}") {{ ... on EventSubscription {{ name }} }} }}"#))
        .await;
    assert_eq!(own["node"]["name"], "ledger-core--de-telekom-payments-orderplaced-v1");
    let r = w.run(&team_viewer("payments--checkout", "poc"), &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
    assert_eq!(error_codes(&r), vec!["NOT_FOUND"]);
}

/// Filters and ordering of the event where inputs; JSON columns are not filterable.
#[tokio::test]
async fn event_filters_and_ordering() {
    let w = World::load();
    let a = admin();
    let data = w
        .data(
            &a,
            r#"{
              sse: eventSubscriptions(where: {deliveryType: SERVER_SENT_EVENT}) { edges { node { name } } }
              noCallback: eventSubscriptions(where: {callbackURLIsNil: true}) { totalCount }
              withSse: eventSubscriptions(where: {gatewaySseURLNotNil: true}) { totalCount }
              fleet: eventSubscriptions(where: {eventTypeHasSuffix: "fleetposition.v2", environment: "poc"}, orderBy: {field: CREATED_AT, direction: DESC}) { edges { node { name createdAt } } }
              zone: eventExposures(where: {visibility: ZONE}) { edges { node { eventType } } }
              published: eventExposures(where: {gatewayPublishingURLHasPrefix: "https://api.aws-eu1.qa"}) { edges { node { environment } } }
              pending: eventTypes(where: {statusPhase: PENDING}) { edges { node { namespace } } }
              described: eventTypes(where: {descriptionContainsFold: "PARCEL"}) { totalCount }
            }"#,
        )
        .await;
    assert_eq!(
        set(strings(&json!(nodes(&data["sse"])), "name")),
        set(["fleet-planner--de-telekom-logistics-fleetposition-v2", "checkout-batch--de-telekom-payments-orderplaced-v1"])
    );
    assert_eq!(data["noCallback"]["totalCount"], 2);
    assert_eq!(data["withSse"]["totalCount"], 2);
    assert_eq!(
        strings(&json!(nodes(&data["fleet"])), "name"),
        ["knowledge-base--de-telekom-logistics-fleetposition-v2", "fleet-planner--de-telekom-logistics-fleetposition-v2"]
    );
    assert_eq!(strings(&json!(nodes(&data["zone"])), "eventType"), ["de.telekom.logistics.fleetposition.v2"]);
    assert_eq!(nodes(&data["published"]), vec![json!({"environment": "qa"})]);
    assert_eq!(nodes(&data["pending"]), vec![json!({"namespace": "poc--payments--ledger"})]);
    assert_eq!(data["described"]["totalCount"], 1);

    for bad in [
        "eventSubscriptions(where: {delivery: \"x\"})",
        "eventExposures(where: {eventScopes: \"x\"})",
        "eventSubscriptions(where: {scopes: \"x\"})",
    ] {
        let r = w.run(&a, &format!("{{ {bad} {{ totalCount }} }}")).await;
        assert!(!error_codes(&r).is_empty(), "{bad}");
    }
}

/// Requested and active scopes come back distinctly. The world's CRDs predate
/// `status.activeScopes`, so the ledger subscription is loaded with one added.
#[tokio::test]
async fn requested_and_active_scopes_are_distinct() {
    let mut docs = world_documents();
    let sub = docs
        .iter_mut()
        .find(|d| d["kind"] == "EventSubscription" && d["metadata"]["namespace"] == "poc--payments--ledger")
        .expect("the ledger event subscription");
    sub["spec"]["scopes"] = json!(["eu-orders", "all-orders-redacted"]);
    sub["status"]["activeScopes"] = json!(["eu-orders"]);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    support::load(&store, &docs);
    let api = query::build_schema(QueryConfig { now: Some(reference_time()), ..QueryConfig::default() }).unwrap();
    let response = api
        .execute(
            &store,
            team_viewer("payments--ledger", "poc"),
            async_graphql::Request::new("{ eventSubscriptions { edges { node { name scopes requestedScopes activeScopes } } } }"),
        )
        .await;
    let body = serde_json::to_value(&response).unwrap();
    assert!(body.get("errors").is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty())), "{body:#}");
    assert_eq!(
        nodes(&body["data"]["eventSubscriptions"]),
        vec![json!({"name": "ledger-core--de-telekom-payments-orderplaced-v1", "scopes": ["eu-orders", "all-orders-redacted"],
                    "requestedScopes": ["eu-orders", "all-orders-redacted"], "activeScopes": ["eu-orders"]})]
    );
}
