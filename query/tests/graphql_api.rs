//! GraphQL over API exposures, API subscriptions, approvals and approval requests, checked
//! against the example world's facts (`examples/world.facts.json`): team isolation of lists,
//! counts, `node`/`nodes` and nested edges; approvals visible to subscriber and provider; the
//! cross-tenant `…Info` views; secret masking; environment isolation.
//!
//! Approvals and requests are projected only when their subscription kind is registered, so
//! expectations keep only those whose `spec.target` kind is registered, read from the world's
//! manifests.

mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use support::{admin, error_codes, facts, nodes, strings, team_viewer, viewer, world_documents, World};

fn set<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> BTreeSet<String> {
    items.into_iter().map(Into::into).collect()
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_array().unwrap_or_else(|| panic!("not a list: {v}")).iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

/// The teams of `env` in the facts.
fn teams(facts: &Value, env: &str) -> Vec<String> {
    facts["env"][env]["teams"].as_object().unwrap().keys().cloned().collect()
}

/// `namespace/name` of every Approval or ApprovalRequest manifest of `env` whose subscription
/// kind is registered (so projected).
fn api_targeted(kind: &str, env: &str) -> BTreeSet<String> {
    let registered = schema::registry::registered();
    world_documents()
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .filter(|d| d["spec"]["target"]["kind"].as_str().and_then(schema::KindId::from_name).is_some_and(|k| registered.contains(&k)))
        .map(|d| format!("{}/{}", d["metadata"]["namespace"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap()))
        .filter(|k| k.starts_with(&format!("{env}--")))
        .collect()
}

/// `namespace/name` of the nodes of a connection.
fn ns_names(connection: &Value) -> BTreeSet<String> {
    nodes(connection).iter().map(|n| format!("{}/{}", n["namespace"].as_str().unwrap(), n["name"].as_str().unwrap())).collect()
}

const TEAM_LISTS: &str = r#"{
  apiExposures { totalCount edges { node { id namespace basePath active environment owner { name } } } }
  apiSubscriptions { totalCount edges { node { id namespace name basePath environment
    target { basePath ownerApplication { name ownerTeam { name } } } } } }
}"#;

/// Every team of both environments sees exactly its own exposures and subscriptions (and the
/// targets the facts name), with matching `totalCount`.
#[tokio::test]
async fn team_sees_exactly_its_exposures_and_subscriptions() {
    let w = World::load();
    let facts = facts();
    for env in ["poc", "qa"] {
        for team in teams(&facts, env) {
            let t = &facts["env"][env]["teams"][&team];
            let data = w.data(&team_viewer(&team, env), TEAM_LISTS).await;
            let ns = format!("{env}--{team}");

            let exposures = nodes(&data["apiExposures"]);
            let expected: BTreeSet<(String, bool)> = t["exposures"]["ApiExposure"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| (e["key"].as_str().unwrap().to_string(), e["active"].as_bool().unwrap()))
                .collect();
            let got: BTreeSet<(String, bool)> =
                exposures.iter().map(|e| (e["basePath"].as_str().unwrap().to_string(), e["active"].as_bool().unwrap())).collect();
            assert_eq!(got, expected, "{env} {team} exposures");
            assert_eq!(data["apiExposures"]["totalCount"], json!(expected.len()), "{env} {team}");
            for e in &exposures {
                assert_eq!((e["namespace"].as_str(), e["environment"].as_str()), (Some(ns.as_str()), Some(env)));
                let fact = t["exposures"]["ApiExposure"].as_array().unwrap().iter().find(|f| f["key"] == e["basePath"]).unwrap();
                let app = e["owner"]["name"].as_str().unwrap();
                assert!(fact["name"].as_str().unwrap().starts_with(&format!("{app}--")), "{env} {team}: owner {app} of {fact}");
            }

            let subs = nodes(&data["apiSubscriptions"]);
            let expected = set(t["subscriptions"]["ApiSubscription"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()));
            assert_eq!(set(strings(&json!(subs), "name")), expected, "{env} {team} subscriptions");
            assert_eq!(data["apiSubscriptions"]["totalCount"], json!(expected.len()), "{env} {team}");
            for s in &subs {
                let fact = t["subscriptions"]["ApiSubscription"].as_array().unwrap().iter().find(|f| f["name"] == s["name"]).unwrap();
                assert_eq!(s["namespace"].as_str(), Some(ns.as_str()));
                assert_eq!(s["basePath"], fact["key"]);
                match fact["target"].as_str() {
                    None => assert_eq!(s["target"], Value::Null, "{env} {team} {}", s["name"]),
                    Some(target) => {
                        // `<env>--<team>/<app>--<api>`
                        let (target_ns, target_name) = target.split_once('/').unwrap();
                        let target_team = target_ns.split_once("--").unwrap().1;
                        let info = &s["target"];
                        assert_eq!(info["basePath"], fact["key"]);
                        assert_eq!(info["ownerApplication"]["ownerTeam"]["name"].as_str(), Some(target_team));
                        let app = info["ownerApplication"]["name"].as_str().unwrap();
                        assert!(target_name.starts_with(&format!("{app}--")), "{target} owned by {app}");
                    }
                }
            }
        }
    }
}

/// A team that owns nothing of another team sees none of it: not in lists or counts, and
/// `node`/`nodes` with the other team's IDs answer null plus `NOT_FOUND`.
#[tokio::test]
async fn other_teams_records_are_invisible() {
    let w = World::load();
    let ledger = team_viewer("payments--ledger", "poc");
    let data = w.data(&ledger, TEAM_LISTS).await;
    let mut ids: Vec<String> = nodes(&data["apiExposures"]).iter().map(|n| n["id"].as_str().unwrap().to_string()).collect();
    ids.extend(nodes(&data["apiSubscriptions"]).iter().map(|n| n["id"].as_str().unwrap().to_string()));
    assert_eq!(ids.len(), 3, "two exposures and one subscription");

    // assist--copilot subscribes to a ledger API but owns neither the exposure nor a ledger subscription.
    let copilot = team_viewer("assist--copilot", "poc");
    let data = w.data(&copilot, TEAM_LISTS).await;
    let visible: BTreeSet<String> = nodes(&data["apiExposures"])
        .iter()
        .chain(nodes(&data["apiSubscriptions"]).iter())
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(data["apiExposures"]["totalCount"], json!(0));
    assert!(ids.iter().all(|id| !visible.contains(id)));

    for id in &ids {
        let r = w.run(&copilot, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
        assert_eq!(r["data"]["node"], Value::Null, "{id}");
        assert_eq!(error_codes(&r), vec!["NOT_FOUND"], "{id}");
        // The owner resolves it.
        let own = w.data(&ledger, &format!(r#"{{ node(id: "{id}") {{ id __typename }} }}"#)).await;
        assert_eq!(own["node"]["id"].as_str(), Some(id.as_str()));
    }
    let list = ids.iter().map(|i| format!("{i:?}")).collect::<Vec<_>>().join(",");
    let r = w.run(&copilot, &format!("{{ nodes(ids: [{list}]) {{ id }} }}")).await;
    // `nodes: [Node]!`: one null and one NOT_FOUND (with its index in the path) per hidden ID.
    assert_eq!(r["data"]["nodes"], json!([null, null, null]), "{r:#}");
    let paths: Vec<Value> = r["errors"].as_array().unwrap().iter().map(|e| e["path"].clone()).collect();
    assert_eq!(paths, vec![json!(["nodes", 0]), json!(["nodes", 1]), json!(["nodes", 2])]);
    assert_eq!(error_codes(&r).iter().filter(|c| *c == "NOT_FOUND").count(), 3, "{r:#}");
}

/// Approvals and approval requests of API subscriptions are visible exactly to the subscriber's
/// and the provider's team (facts `approvalsVisible` / `approvalRequestsVisible`).
#[tokio::test]
async fn approvals_visible_to_subscriber_and_provider() {
    let w = World::load();
    let facts = facts();
    let q = r#"{
      approvals { totalCount edges { node { namespace name subscription { __typename id } } } }
      approvalRequests { totalCount edges { node { namespace name subscription { __typename } } } }
    }"#;
    for env in ["poc", "qa"] {
        let api_approvals = api_targeted("Approval", env);
        let api_requests = api_targeted("ApprovalRequest", env);
        assert!(!api_approvals.is_empty() && !api_requests.is_empty());
        for team in teams(&facts, env) {
            let t = &facts["env"][env]["teams"][&team];
            let data = w.data(&team_viewer(&team, env), q).await;
            let expected: BTreeSet<String> = str_list(&t["approvalsVisible"]).into_iter().filter(|a| api_approvals.contains(a)).collect();
            assert_eq!(ns_names(&data["approvals"]), expected, "{env} {team} approvals");
            assert_eq!(data["approvals"]["totalCount"], json!(expected.len()));
            let expected: BTreeSet<String> =
                str_list(&t["approvalRequestsVisible"]).into_iter().filter(|a| api_requests.contains(a)).collect();
            assert_eq!(ns_names(&data["approvalRequests"]), expected, "{env} {team} approval requests");
            assert_eq!(data["approvalRequests"]["totalCount"], json!(expected.len()));
            for n in nodes(&data["approvals"]).iter().chain(nodes(&data["approvalRequests"]).iter()) {
                assert!(n["subscription"]["__typename"].as_str().is_some_and(|t| t.ends_with("SubscriptionInfo")), "{n}");
            }
        }
        // The admin sees every projected one.
        let all = w
            .data(
                &admin(),
                &q.replace("approvals {", &format!("approvals(where: {{environment: \"{env}\"}}) {{"))
                    .replace("approvalRequests {", &format!("approvalRequests(where: {{environment: \"{env}\"}}) {{")),
            )
            .await;
        assert_eq!(ns_names(&all["approvals"]), api_approvals, "{env}");
        assert_eq!(ns_names(&all["approvalRequests"]), api_requests, "{env}");
    }
}

/// The full shape of an approval seen by the provider team, `SubscriptionInfo` through the
/// interface and a fragment, and the request → approval hop.
#[tokio::test]
async fn approval_fields_and_subscription_info() {
    let w = World::load();
    let ledger = team_viewer("payments--ledger", "poc");
    let data = w
        .data(
            &ledger,
            r#"fragment Sub on SubscriptionInfo { id ownerApplication { name ownerTeam { name } } }
            {
              approvals(where: {name: "apisubscription--copilot-gateway--payments-ledger-v2"}) { edges { node {
                action strategy state expiresat deciderTeamName requestedScopes statusPhase environment
                requester { teamName teamEmail applicationName }
                decider { teamName teamEmail }
                decisions { name email comment timestamp resultingState }
                availableTransitions { action toState }
                subscription { __typename ...Sub ... on ApiSubscriptionInfo { basePath statusPhase ownerApplicationName ownerTeam { name } } }
              } } }
              approvalRequests(where: {nameHasPrefix: "copilot-gateway--payments-ledger-v2"}) { edges { node {
                name strategy state approval { name state }
                subscription { ... on SubscriptionInfo { ownerApplication { name } } }
              } } }
            }"#,
        )
        .await;
    let a = &nodes(&data["approvals"])[0];
    assert_eq!(
        (a["action"].as_str(), a["strategy"].as_str(), a["state"].as_str()),
        (Some("subscribe"), Some("FOUR_EYES"), Some("SEMIGRANTED"))
    );
    assert_eq!(a["expiresat"], Value::Null);
    assert_eq!(a["requestedScopes"], Value::Null);
    assert_eq!(a["deciderTeamName"], "payments--ledger");
    assert_eq!(
        a["requester"],
        json!({"teamName": "assist--copilot", "teamEmail": "copilot-team@example.com", "applicationName": "copilot-gateway"})
    );
    assert_eq!(a["decider"], json!({"teamName": "payments--ledger", "teamEmail": "ledger-team@example.com"}));
    let decisions: Vec<(&str, &str)> =
        a["decisions"].as_array().unwrap().iter().map(|d| (d["name"].as_str().unwrap(), d["resultingState"].as_str().unwrap())).collect();
    assert_eq!(
        decisions,
        [("Aylin Demir", "SEMIGRANTED"), ("Piet van Dijk", "GRANTED"), ("Sofia Marchetti", "REJECTED"), ("Aylin Demir", "SEMIGRANTED")]
    );
    assert_eq!(a["decisions"][2]["comment"], "Rejected after data-protection review");
    assert_eq!(a["decisions"][2]["timestamp"], "2026-04-24T04:27:00Z");
    assert_eq!(a["availableTransitions"], json!([{"action": "DENY", "toState": "REJECTED"}, {"action": "ALLOW", "toState": "GRANTED"}]));
    let sub = &a["subscription"];
    assert_eq!(sub["__typename"], "ApiSubscriptionInfo");
    assert_eq!(sub["basePath"], "/payments/ledger/v2");
    assert_eq!(sub["ownerApplication"], json!({"name": "copilot-gateway", "ownerTeam": {"name": "assist--copilot"}}));
    assert_eq!(sub["ownerApplicationName"], "copilot-gateway");
    assert_eq!(sub["ownerTeam"]["name"], "assist--copilot");

    let r = &nodes(&data["approvalRequests"])[0];
    assert_eq!(r["name"], "copilot-gateway--payments-ledger-v2--bcbd9f59d");
    assert_eq!((r["strategy"].as_str(), r["state"].as_str()), (Some("FOUR_EYES"), Some("GRANTED")));
    assert_eq!(r["approval"], json!({"name": "apisubscription--copilot-gateway--payments-ledger-v2", "state": "SEMIGRANTED"}));
    assert_eq!(r["subscription"]["ownerApplication"]["name"], "copilot-gateway");

    // Expiry and the approved scope snapshot (the subscription now requests two scopes).
    let knowledge = team_viewer("assist--knowledge", "poc");
    let data = w
        .data(
            &knowledge,
            r#"{
              approvals(where: {name: "apisubscription--knowledge-base--logistics-fleet-positions-v1"}) { edges { node { state expiresat requestedScopes availableTransitions { action toState } } } }
              apiSubscriptions(where: {name: "knowledge-base--logistics-fleet-positions-v1"}) { edges { node {
                requestedScopes activeScopes m2mAuthMethod security { m2m { scopes } }
                approval { name } approvalRequests { name }
              } } }
            }"#,
        )
        .await;
    let a = &nodes(&data["approvals"])[0];
    assert_eq!(a["state"], "GRANTED");
    assert_eq!(a["expiresat"], "2027-04-12T19:52:00Z");
    assert_eq!(a["requestedScopes"], json!(["fleet:read"]));
    assert_eq!(
        a["availableTransitions"],
        json!([{"action": "DENY", "toState": "REJECTED"}, {"action": "SUSPEND", "toState": "SUSPENDED"}])
    );
    let s = &nodes(&data["apiSubscriptions"])[0];
    assert_eq!(s["requestedScopes"], json!(["fleet:read", "fleet:history"]));
    assert_eq!(s["activeScopes"], Value::Null);
    assert_eq!(s["m2mAuthMethod"], "SCOPES_ONLY");
    // Deprecated, still the requested scopes.
    assert_eq!(s["security"]["m2m"]["scopes"], json!(["fleet:read", "fleet:history"]));
    assert_eq!(s["approval"]["name"], "apisubscription--knowledge-base--logistics-fleet-positions-v1");
    assert_eq!(s["approvalRequests"], json!([{"name": "knowledge-base--logistics-fleet-positions-v1--7fdc89ff47"}]));
}

/// A request whose subscription has no approval: `approval` is null; a subscriber does not see
/// the approval of a subscription it does not own through `ApiSubscription.approval` either.
#[tokio::test]
async fn approval_links_respect_visibility() {
    let w = World::load();
    let fleet = team_viewer("logistics--fleet", "poc");
    let data = w
        .data(&fleet, r#"{ approvalRequests(where: {name: "fleet-planner--payments-ledger-v2--bcbd9f59d"}) { edges { node { name approval { name } } } } }"#)
        .await;
    assert_eq!(nodes(&data["approvalRequests"]), vec![json!({"name": "fleet-planner--payments-ledger-v2--bcbd9f59d", "approval": null})]);

    // The provider (payments--ledger) sees approvals of copilot's subscription but not the
    // subscription itself.
    let ledger = team_viewer("payments--ledger", "poc");
    let r =
        w.data(&admin(), r#"{ apiSubscriptions(where: {name: "copilot-gateway--payments-ledger-v2"}) { edges { node { id } } } }"#).await;
    let id = nodes(&r["apiSubscriptions"])[0]["id"].as_str().unwrap().to_string();
    let r = w.run(&ledger, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
    assert_eq!(error_codes(&r), vec!["NOT_FOUND"]);
}

/// `target` of a subscription without target is null without error; a cross-tenant target is
/// an `ApiExposureInfo` naming the owner; `ApiExposure.subscriptions` lists every tenant's
/// subscriptions of the exposure.
#[tokio::test]
async fn cross_tenant_info_views() {
    let w = World::load();
    let facts = facts();
    let parcel = team_viewer("logistics--parcel-tracking", "poc");
    let data = w
        .data(&parcel, r#"{ apiSubscriptions(where: {name: "parcel-notifier--payments-refunds-v1"}) { edges { node { name basePath target { id } } } } }"#)
        .await;
    assert_eq!(
        nodes(&data["apiSubscriptions"]),
        vec![json!({"name": "parcel-notifier--payments-refunds-v1", "basePath": "/payments/refunds/v1", "target": null})]
    );

    let ledger = team_viewer("payments--ledger", "poc");
    let data = w
        .data(
            &ledger,
            r#"{ apiSubscriptions { edges { node { name target {
                __typename basePath visibility active apiVersion features approvalConfig { strategy trustedTeams }
                ownerApplicationName ownerTeam { name groupName }
                ownerApplication { name zone { name } ownerTeam { name } }
            } } } } }"#,
        )
        .await;
    let s = &nodes(&data["apiSubscriptions"])[0];
    assert_eq!(s["name"], "ledger-reports--logistics-fleet-positions-v1");
    let t = &s["target"];
    assert_eq!(t["__typename"], "ApiExposureInfo");
    assert_eq!(t["basePath"], "/logistics/fleet/positions/v1");
    assert_eq!(t["active"], true);
    assert_eq!(t["apiVersion"], Value::Null);
    assert_eq!(t["ownerApplicationName"], "fleet-telemetry");
    assert_eq!(t["ownerTeam"], json!({"name": "logistics--fleet", "groupName": "logistics"}));
    assert_eq!(
        t["ownerApplication"],
        json!({"name": "fleet-telemetry", "zone": {"name": "caas-cetus"}, "ownerTeam": {"name": "logistics--fleet"}})
    );
    assert!(t["features"].as_array().unwrap().contains(&json!("LAST_MILE_SECURITY")));

    // Subscribers of ledger-core--payments-ledger-v2, from every team's facts.
    let target = "poc--payments--ledger/ledger-core--payments-ledger-v2";
    let mut expected = BTreeSet::new();
    for team in teams(&facts, "poc") {
        for s in facts["env"]["poc"]["teams"][&team]["subscriptions"]["ApiSubscription"].as_array().unwrap() {
            if s["target"] == target {
                expected.insert(format!("poc--{team}/{}", s["name"].as_str().unwrap()));
            }
        }
    }
    assert_eq!(expected.len(), 3);
    let all = w.data(&admin(), r#"{ apiSubscriptions(where: {environment: "poc"}) { edges { node { id namespace name } } } }"#).await;
    let by_id: BTreeMap<String, String> = nodes(&all["apiSubscriptions"])
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_string(), format!("{}/{}", n["namespace"].as_str().unwrap(), n["name"].as_str().unwrap())))
        .collect();
    let data = w
        .data(
            &ledger,
            r#"{ apiExposures(where: {basePath: "/payments/ledger/v2"}) { edges { node {
                subscriptions { id basePath statusPhase ownerApplicationName ownerApplication { name ownerTeam { name } } }
            } } } }"#,
        )
        .await;
    let subs = nodes(&data["apiExposures"])[0]["subscriptions"].as_array().unwrap().clone();
    let got: BTreeSet<String> = subs.iter().map(|s| by_id[s["id"].as_str().unwrap()].clone()).collect();
    assert_eq!(got, expected);
    for s in &subs {
        assert_eq!(s["basePath"], "/payments/ledger/v2");
        let ns_team = by_id[s["id"].as_str().unwrap()].split('/').next().unwrap().split_once("--").unwrap().1.to_string();
        assert_eq!(s["ownerApplication"]["ownerTeam"]["name"].as_str(), Some(ns_team.as_str()));
        assert_eq!(s["ownerApplicationName"], s["ownerApplication"]["name"]);
    }
}

const SECRETS: &str = r#"{
  apiExposures(where: {basePath: "/payments/ledger/v2"}) { edges { node { security { m2m { basic { username password } } } } } }
}"#;

/// Secrets: the owning team reads the stored value (a secret reference here), an obfuscated
/// caller gets `**********`.
#[tokio::test]
async fn secrets_are_masked_for_obfuscated_viewers() {
    let w = World::load();
    let reference = "$<poc:payments--ledger:ledger-core:externalSecrets/ledger-gw/password:df1a02fad1>";
    let plain = w.data(&team_viewer("payments--ledger", "poc"), SECRETS).await;
    assert_eq!(nodes(&plain["apiExposures"])[0]["security"]["m2m"]["basic"], json!({"username": "ledger-gw", "password": reference}));
    let obfuscated = viewer("payments--ledger--console", "tardis:team:obfuscated", "poc");
    let masked = w.data(&obfuscated, SECRETS).await;
    assert_eq!(nodes(&masked["apiExposures"])[0]["security"]["m2m"]["basic"], json!({"username": "ledger-gw", "password": "**********"}));
    let group = viewer("payments--checkout--console", "tardis:group:obfuscated", "poc");
    let masked = w.data(&group, SECRETS).await;
    assert_eq!(nodes(&masked["apiExposures"])[0]["security"]["m2m"]["basic"]["password"], "**********");

    let q = r#"{ apiSubscriptions(where: {name: "checkout-batch--payments-ledger-v2"}) { edges { node {
        m2mAuthMethod security { m2m { client { clientId clientSecret clientKey } } } } } } }"#;
    let plain = w.data(&team_viewer("payments--checkout", "poc"), q).await;
    let s = &nodes(&plain["apiSubscriptions"])[0];
    assert_eq!(s["m2mAuthMethod"], "OAUTH2_CLIENT");
    assert_eq!(
        s["security"]["m2m"]["client"],
        json!({"clientId": "checkout-batch-ledger", "clientSecret": "$<poc:payments--checkout:checkout-batch:externalSecrets/ledger/clientSecret:7311365994>", "clientKey": null})
    );
    let masked = w.data(&viewer("payments--checkout--console", "tardis:team:obfuscated", "poc"), q).await;
    assert_eq!(nodes(&masked["apiSubscriptions"])[0]["security"]["m2m"]["client"]["clientSecret"], "**********");

    let q = r#"{ apiExposures { edges { node { features security { m2m { externalIDP { tokenEndpoint tokenRequest grantType client { clientId clientSecret } } } } } } } }"#;
    let masked = w.data(&viewer("logistics--parcel-tracking--console", "tardis:team:obfuscated", "poc"), q).await;
    let idp = &nodes(&masked["apiExposures"])[0]["security"]["m2m"]["externalIDP"];
    assert_eq!(idp["client"], json!({"clientId": "parcel-gw", "clientSecret": "**********"}));
    assert_eq!(idp["grantType"], "client_credentials");
}

/// Environment isolation: the same team names in `qa` see only `qa` records, and IDs of the
/// other environment resolve to `NOT_FOUND`.
#[tokio::test]
async fn environments_are_isolated() {
    let w = World::load();
    let q = r#"{ apiExposures { totalCount edges { node { id environment namespace } } }
                apiSubscriptions { totalCount edges { node { id environment name target { id } } } }
                approvals { totalCount edges { node { id environment } } } }"#;
    let qa = w.data(&team_viewer("payments--checkout", "qa"), q).await;
    let poc = w.data(&team_viewer("payments--checkout", "poc"), q).await;
    for (data, env) in [(&qa, "qa"), (&poc, "poc")] {
        for list in ["apiExposures", "apiSubscriptions", "approvals"] {
            assert!(nodes(&data[list]).iter().all(|n| n["environment"] == env), "{env} {list}");
        }
    }
    assert_eq!(qa["apiExposures"]["totalCount"], 1);
    assert_eq!(nodes(&qa["apiExposures"])[0]["namespace"], "qa--payments--checkout");
    assert_eq!(strings(&json!(nodes(&qa["apiSubscriptions"])), "name"), ["checkout-web--payments-checkout-v1"]);
    // The qa subscription targets the qa exposure, not the poc one with the same name.
    assert_eq!(nodes(&qa["apiSubscriptions"])[0]["target"]["id"], nodes(&qa["apiExposures"])[0]["id"]);
    assert_ne!(nodes(&qa["apiExposures"])[0]["id"], nodes(&poc["apiExposures"])[0]["id"]);

    let poc_viewer = team_viewer("payments--checkout", "poc");
    for list in ["apiExposures", "apiSubscriptions", "approvals"] {
        for n in nodes(&qa[list]) {
            let id = n["id"].as_str().unwrap();
            let r = w.run(&poc_viewer, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
            assert_eq!(error_codes(&r), vec!["NOT_FOUND"], "{list} {id}");
        }
    }
}

/// `Application.exposedApis` / `subscribedApis`, `Api.activeExposure` and `ApiExposure.api`.
#[tokio::test]
async fn application_and_api_edges() {
    let w = World::load();
    let facts = facts();
    let ledger = team_viewer("payments--ledger", "poc");
    let data = w
        .data(
            &ledger,
            r#"{ applications { edges { node { name
                exposedApis(orderBy: {field: CREATED_AT, direction: DESC}) { totalCount edges { node { basePath active api { basePath owner { name } } } } }
                active: exposedApis(where: {active: true}) { totalCount }
                subscribedApis { totalCount edges { node { name } } }
            } } } }"#,
        )
        .await;
    let t = &facts["env"]["poc"]["teams"]["payments--ledger"];
    for app in nodes(&data["applications"]) {
        let name = app["name"].as_str().unwrap();
        let prefix = format!("{name}--");
        let exposed: BTreeSet<String> = t["exposures"]["ApiExposure"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"].as_str().unwrap().starts_with(&prefix))
            .map(|e| e["key"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(set(strings(&json!(nodes(&app["exposedApis"])), "basePath")), exposed, "{name}");
        assert_eq!(app["exposedApis"]["totalCount"], json!(exposed.len()));
        let subscribed = set(t["subscriptions"]["ApiSubscription"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .filter(|n| n.starts_with(&prefix)));
        assert_eq!(set(strings(&json!(nodes(&app["subscribedApis"])), "name")), subscribed, "{name}");
        assert_eq!(app["subscribedApis"]["totalCount"], json!(subscribed.len()));
    }
    let core = nodes(&data["applications"]).into_iter().find(|a| a["name"] == "ledger-core").unwrap();
    assert_eq!(core["active"]["totalCount"], 1);
    // The inactive ledger exposure of /payments/checkout/v1 links the active catalogue entry,
    // registered by payments--checkout.
    let checkout = nodes(&core["exposedApis"]).into_iter().find(|e| e["basePath"] == "/payments/checkout/v1").unwrap();
    assert_eq!(checkout["active"], false);
    assert_eq!(checkout["api"], json!({"basePath": "/payments/checkout/v1", "owner": {"name": "payments--checkout"}}));

    let data = w
        .data(
            &ledger,
            r#"{ apis(where: {basePathIn: ["/payments/checkout/v1", "/logistics/parcels/v1", "/payments/refunds/v1"]}) { edges { node {
            basePath active activeExposure { basePath active ownerApplication { name ownerTeam { name } } } } } } }"#,
        )
        .await;
    let got: BTreeSet<(String, bool, Option<String>)> = nodes(&data["apis"])
        .iter()
        .map(|a| {
            let owner = a["activeExposure"]["ownerApplication"]["ownerTeam"]["name"]
                .as_str()
                .map(|t| format!("{t}/{}", a["activeExposure"]["ownerApplication"]["name"].as_str().unwrap()));
            (a["basePath"].as_str().unwrap().to_string(), a["active"].as_bool().unwrap(), owner)
        })
        .collect();
    let checkout_api = Some("payments--checkout/checkout-api".to_string());
    assert_eq!(
        got,
        BTreeSet::from([
            ("/logistics/parcels/v1".to_string(), true, Some("logistics--parcel-tracking/parcel-tracker".to_string())),
            ("/payments/checkout/v1".to_string(), true, checkout_api.clone()),
            ("/payments/checkout/v1".to_string(), false, checkout_api),
        ])
    );
}

/// Filters and ordering on the new where inputs, and the multi-order `orderBy` of approvals.
#[tokio::test]
async fn filters_and_ordering() {
    let w = World::load();
    let checkout = team_viewer("payments--checkout", "poc");
    let data = w
        .data(
            &checkout,
            r#"{
              granted: approvals(where: {state: GRANTED}, orderBy: [{field: CREATED_AT, direction: DESC}]) { totalCount edges { node { name state createdAt } } }
              notGranted: approvals(where: {not: {state: GRANTED}}) { edges { node { name state } } }
              byDecider: approvalRequests(where: {deciderTeamName: "payments--checkout", strategyIn: [SIMPLE, FOUR_EYES, AUTO]}) { totalCount }
              scoped: apiSubscriptions(where: {m2mAuthMethod: SCOPES_ONLY}) { edges { node { name } } }
              gw: apiSubscriptions(where: {gatewayURLIsNil: true}) { totalCount }
              all: apiSubscriptions { totalCount }
              world: apiExposures(where: {visibility: WORLD, basePathHasPrefix: "/payments"}) { edges { node { basePath visibility } } }
            }"#,
        )
        .await;
    let granted = nodes(&data["granted"]);
    assert!(granted.iter().all(|a| a["state"] == "GRANTED"));
    assert_eq!(data["granted"]["totalCount"], json!(granted.len()));
    let times: Vec<&str> = granted.iter().map(|a| a["createdAt"].as_str().unwrap()).collect();
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted, "createdAt DESC");
    assert!(nodes(&data["notGranted"]).iter().all(|a| a["state"] != "GRANTED"));
    assert_eq!(
        set(strings(&json!(nodes(&data["notGranted"])), "name")),
        set(["apisubscription--checkout-web--logistics-fleet-positions-v1", "apisubscription--knowledge-base--payments-checkout-v1"])
    );
    assert_eq!(strings(&json!(nodes(&data["scoped"])), "name"), ["checkout-web--logistics-fleet-positions-v1"]);
    assert_eq!(nodes(&data["world"]), vec![json!({"basePath": "/payments/checkout/v1", "visibility": "WORLD"})]);
    assert!(data["byDecider"]["totalCount"].as_u64().unwrap() > 0);
    assert!(data["gw"]["totalCount"].as_u64().unwrap() <= data["all"]["totalCount"].as_u64().unwrap());

    // Secrets and JSON columns are not filterable.
    let r = w.run(&checkout, r#"{ apiSubscriptions(where: {security: "x"}) { totalCount } }"#).await;
    assert!(!error_codes(&r).is_empty());
}

/// `specificationUrl` is `<fileManager.baseUrl>/files/<specification>` on the four catalogue
/// kinds, for any viewer who sees the entry; null for an entry without a specification, and
/// always null when no base URL is configured (the default).
#[tokio::test]
async fn specification_urls_come_from_the_file_manager_base_url() {
    let w = World::load();
    let config = |base: Option<&str>| query::QueryConfig {
        now: Some(support::reference_time()),
        file_manager_base_url: base.map(String::from),
        ..query::QueryConfig::default()
    };
    let with_base = query::build_schema(config(Some("https://files.example"))).unwrap();
    let without = query::build_schema(config(None)).unwrap();
    let q = "{ apis { edges { node { namespace key: basePath specificationUrl } } } eventTypes { edges { node { namespace key: eventType specificationUrl } } } \
             mcpServers { edges { node { namespace key: name specificationUrl } } } agentCards { edges { node { namespace key: name specificationUrl } } } }";
    let urls = async |api: &query::Api, viewer: query::viewer::Viewer| -> BTreeMap<String, Value> {
        let r = serde_json::to_value(api.execute(&w.store, viewer, async_graphql::Request::new(q)).await).unwrap();
        assert!(r["errors"].is_null(), "{r}");
        let mut out = BTreeMap::new();
        for (field, list) in r["data"].as_object().unwrap() {
            for n in nodes(list) {
                out.insert(
                    format!("{field} {} {}", n["namespace"].as_str().unwrap(), n["key"].as_str().unwrap()),
                    n["specificationUrl"].clone(),
                );
            }
        }
        out
    };
    let team = urls(&with_base, team_viewer("payments--checkout", "poc")).await;
    let file = |id: &str| json!(format!("https://files.example/files/{id}"));
    assert_eq!(team["apis poc--logistics--fleet /logistics/fleet/positions/v1"], file("3f1c9a52-7d0e-4b4f-9c5e-1a2b3c4d5e05"));
    assert_eq!(team["agentCards poc--assist--copilot agents-copilot-v1"], file("c0ffee00-0000-4000-8000-000000000201"));
    assert_eq!(team["mcpServers poc--logistics--parcel-tracking mcp-parcels-v1"], file("c0ffee00-0000-4000-8000-000000000101"));
    assert_eq!(team["eventTypes poc--payments--checkout de.telekom.payments.orderplaced.v1"], file("8b2e4f60-1c3d-4e5f-8a9b-0c1d2e3f4a01"));
    // Entries without a specification (the inactive duplicates here) stay null.
    assert_eq!(team["mcpServers poc--logistics--fleet mcp-parcels-v1"], Value::Null);
    assert_eq!(team["eventTypes poc--payments--ledger de.telekom.payments.orderplaced.v1"], Value::Null);
    let linked = team.values().filter(|v| !v.is_null()).count();
    assert!(linked >= 4 && linked < team.len(), "{team:#?}");
    // The same entries and links for an admin: the catalogue is visible per environment.
    let admin_poc: BTreeMap<String, Value> = urls(&with_base, admin()).await.into_iter().filter(|(k, _)| k.contains(" poc--")).collect();
    assert_eq!(admin_poc, team);
    // No base URL: every one is null.
    let plain = urls(&without, team_viewer("payments--checkout", "poc")).await;
    assert_eq!(plain.keys().collect::<Vec<_>>(), team.keys().collect::<Vec<_>>());
    assert!(plain.values().all(Value::is_null), "{plain:#?}");
}
