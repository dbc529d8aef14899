//! GraphQL over PermissionSets, FileExposures and FileSubscriptions, checked against the example
//! world's facts (`examples/world.facts.json`) and manifests: team isolation of lists, counts,
//! `node` and nested edges; subscription targets; the cross-tenant `FileExposureInfo` /
//! `FileSubscriptionInfo` views with their nullable service URLs; approvals of file
//! subscriptions resolving `subscription` to `FileSubscriptionInfo`; `Application.permissionSet`
//! and `permissionsURL`.

mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;
use support::{admin, error_codes, facts, nodes, strings, team_viewer, world_documents, World};

static WORLD: LazyLock<World> = LazyLock::new(World::load);
static FACTS: LazyLock<Value> = LazyLock::new(facts);

const ENVS: [&str; 2] = ["poc", "qa"];

fn set<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> BTreeSet<String> {
    items.into_iter().map(Into::into).collect()
}

fn str_list(v: &Value) -> Vec<String> {
    v.as_array().unwrap_or_else(|| panic!("not a list: {v}")).iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

/// The teams of `env` in the facts.
fn teams(env: &str) -> Vec<String> {
    FACTS["env"][env]["teams"].as_object().unwrap().keys().cloned().collect()
}

/// The world's manifests of `kind`.
fn manifests(kind: &str) -> Vec<Value> {
    world_documents().into_iter().filter(|d| d["kind"] == kind).collect()
}

fn ns_name(d: &Value) -> String {
    format!("{}/{}", d["metadata"]["namespace"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap())
}

/// `namespace/name` of every Approval or ApprovalRequest manifest of `env` whose subscription is
/// a FileSubscription.
fn file_targeted(kind: &str, env: &str) -> BTreeSet<String> {
    manifests(kind)
        .iter()
        .filter(|d| d["spec"]["target"]["kind"] == "FileSubscription")
        .map(ns_name)
        .filter(|k| k.starts_with(&format!("{env}--")))
        .collect()
}

/// `namespace/name` of the nodes of a connection.
fn ns_names(connection: &Value) -> BTreeSet<String> {
    nodes(connection).iter().map(|n| format!("{}/{}", n["namespace"].as_str().unwrap(), n["name"].as_str().unwrap())).collect()
}

/// A GraphQL list literal of strings.
fn gql_list(items: &[String]) -> String {
    format!("[{}]", items.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", "))
}

#[test]
fn world_loads_the_file_and_permission_kinds() {
    let r = &WORLD.report;
    for (kind, id) in [
        ("PermissionSet", schema::KindId::PermissionSet),
        ("FileExposure", schema::KindId::FileExposure),
        ("FileSubscription", schema::KindId::FileSubscription),
    ] {
        let expected: u64 = ENVS.iter().map(|e| FACTS["env"][*e]["counts"][kind].as_u64().unwrap()).sum();
        assert_eq!(r.written.get(&id).copied().unwrap_or(0) as u64, expected, "{kind}");
        assert!(!r.skipped.iter().any(|s| s.starts_with(&format!("{kind} "))), "{kind} skipped: {:?}", r.skipped);
        assert!(!r.dependency_missing.iter().any(|s| s.starts_with(&format!("{kind} "))), "{kind}: {:?}", r.dependency_missing);
        assert!(!r.unregistered.contains_key(kind), "{kind} is registered");
    }
}

const TEAM_LISTS: &str = r#"{
  fileExposures { totalCount edges { node { id namespace environment fileType active statusPhase owner { name } } } }
  fileSubscriptions { totalCount edges { node { id namespace environment name fileType
    target { __typename fileType active ownerApplicationName ownerTeam { name } ownerApplication { name ownerTeam { name } } } } } }
}"#;

/// Every team of both environments sees exactly its own file exposures and subscriptions, with
/// the targets the facts name and matching `totalCount`.
#[tokio::test]
async fn team_sees_exactly_its_file_exposures_and_subscriptions() {
    for env in ENVS {
        for team in teams(env) {
            let t = &FACTS["env"][env]["teams"][&team];
            let data = WORLD.data(&team_viewer(&team, env), TEAM_LISTS).await;
            let ns = format!("{env}--{team}");

            let facts_exposures = t["exposures"]["FileExposure"].as_array().unwrap();
            let expected: BTreeSet<(String, bool, String)> = facts_exposures
                .iter()
                .map(|e| {
                    let key = e["key"].as_str().unwrap();
                    // `<fileType>--<app>`
                    let app = e["name"].as_str().unwrap().strip_prefix(&format!("{key}--")).unwrap();
                    (key.to_string(), e["active"].as_bool().unwrap(), app.to_string())
                })
                .collect();
            let exposures = nodes(&data["fileExposures"]);
            let got: BTreeSet<(String, bool, String)> = exposures
                .iter()
                .map(|e| {
                    (
                        e["fileType"].as_str().unwrap().to_string(),
                        e["active"].as_bool().unwrap(),
                        e["owner"]["name"].as_str().unwrap().into(),
                    )
                })
                .collect();
            assert_eq!(got, expected, "{env} {team} file exposures");
            assert_eq!(data["fileExposures"]["totalCount"], json!(expected.len()), "{env} {team}");
            for e in &exposures {
                assert_eq!((e["namespace"].as_str(), e["environment"].as_str()), (Some(ns.as_str()), Some(env)));
            }

            let facts_subs = t["subscriptions"]["FileSubscription"].as_array().unwrap();
            let subs = nodes(&data["fileSubscriptions"]);
            let expected = set(facts_subs.iter().map(|s| s["name"].as_str().unwrap()));
            assert_eq!(set(strings(&json!(subs), "name")), expected, "{env} {team} file subscriptions");
            assert_eq!(data["fileSubscriptions"]["totalCount"], json!(expected.len()), "{env} {team}");
            for s in &subs {
                let fact = facts_subs.iter().find(|f| f["name"] == s["name"]).unwrap();
                assert_eq!((s["namespace"].as_str(), s["environment"].as_str()), (Some(ns.as_str()), Some(env)));
                assert_eq!(s["fileType"], fact["key"]);
                match fact["target"].as_str() {
                    None => assert_eq!(s["target"], Value::Null, "{env} {team} {}", s["name"]),
                    Some(target) => {
                        // `<env>--<team>/<fileType>--<app>`
                        let (target_ns, target_name) = target.split_once('/').unwrap();
                        let target_team = target_ns.split_once("--").unwrap().1;
                        let info = &s["target"];
                        assert_eq!(info["__typename"], "FileExposureInfo");
                        assert_eq!(info["fileType"], fact["key"]);
                        assert_eq!(info["active"], true);
                        let app = info["ownerApplication"]["name"].as_str().unwrap();
                        assert_eq!(target_name, format!("{}--{app}", fact["key"].as_str().unwrap()), "{target}");
                        assert_eq!(info["ownerApplication"]["ownerTeam"]["name"].as_str(), Some(target_team));
                        // Deprecated but populated.
                        assert_eq!(info["ownerApplicationName"].as_str(), Some(app));
                        assert_eq!(info["ownerTeam"]["name"].as_str(), Some(target_team));
                    }
                }
            }
        }
    }
}

/// A team sees none of another team's file records: not in lists or counts, and `node` with the
/// other team's IDs answers null plus `NOT_FOUND`, while the owner resolves them.
#[tokio::test]
async fn other_teams_file_records_are_invisible() {
    let ledger = team_viewer("payments--ledger", "poc");
    let data = WORLD.data(&ledger, TEAM_LISTS).await;
    let ids: Vec<String> = nodes(&data["fileExposures"])
        .iter()
        .chain(nodes(&data["fileSubscriptions"]).iter())
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "one exposure and one subscription");

    // assist--knowledge subscribes to the ledger's file type but owns neither record.
    let knowledge = team_viewer("assist--knowledge", "poc");
    let data = WORLD.data(&knowledge, TEAM_LISTS).await;
    assert_eq!(data["fileExposures"]["totalCount"], json!(0));
    assert_eq!(data["fileSubscriptions"]["totalCount"], json!(1));
    let visible: BTreeSet<String> = nodes(&data["fileSubscriptions"]).iter().map(|n| n["id"].as_str().unwrap().to_string()).collect();
    assert!(ids.iter().all(|id| !visible.contains(id)));
    for id in &ids {
        let r = WORLD.run(&knowledge, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
        assert_eq!(r["data"]["node"], Value::Null, "{id}");
        assert_eq!(error_codes(&r), vec!["NOT_FOUND"], "{id}");
        let own = WORLD.data(&ledger, &format!(r#"{{ node(id: "{id}") {{ id __typename }} }}"#)).await;
        assert_eq!(own["node"]["id"].as_str(), Some(id.as_str()));
        assert!(["FileExposure", "FileSubscription"].contains(&own["node"]["__typename"].as_str().unwrap()));
    }
    // A filter cannot reach another team's rows.
    let r = WORLD.data(&knowledge, r#"{ fileExposures(where: {fileTypeHasPrefix: "de-telekom"}) { totalCount } }"#).await;
    assert_eq!(r["fileExposures"]["totalCount"], 0);
}

/// `serviceURL` / `serviceExternalURL` and the Info types' `serviceUrl` / `serviceExternalUrl` are
/// the status values, null when unset (world README, "FileExposure service URLs" and
/// "FileSubscription service URLs").
#[tokio::test]
async fn service_urls_are_null_when_unset() {
    let data = WORLD
        .data(
            &admin(),
            r#"{ fileExposures { edges { node { namespace fileType serviceURL serviceExternalURL owner { name } } } }
                 fileSubscriptions { edges { node { namespace name serviceURL serviceExternalURL } } } }"#,
        )
        .await;
    let expected: BTreeMap<String, (Value, Value)> = manifests("FileExposure")
        .iter()
        .map(|d| (ns_name(d), (d["status"]["serviceURL"].clone(), d["status"]["serviceExternalURL"].clone())))
        .collect();
    let got: BTreeMap<String, (Value, Value)> = nodes(&data["fileExposures"])
        .iter()
        .map(|n| {
            let name = format!(
                "{}/{}--{}",
                n["namespace"].as_str().unwrap(),
                n["fileType"].as_str().unwrap(),
                n["owner"]["name"].as_str().unwrap()
            );
            (name, (n["serviceURL"].clone(), n["serviceExternalURL"].clone()))
        })
        .collect();
    assert_eq!(got, expected);
    // Both, internal only, none.
    let urls = |k: &str| got[k].clone();
    assert!(urls("poc--payments--ledger/de-telekom-payments-settlementreport-v1--ledger-reports").1.is_string());
    let fleet = urls("poc--logistics--fleet/de-telekom-logistics-manifest-v1--fleet-planner");
    assert!(fleet.0.is_string() && fleet.1.is_null());
    assert_eq!(urls("poc--logistics--parcel-tracking/de-telekom-logistics-manifest-v1--parcel-tracker"), (Value::Null, Value::Null));

    let expected: BTreeMap<String, (Value, Value)> = manifests("FileSubscription")
        .iter()
        .map(|d| (ns_name(d), (d["status"]["serviceURL"].clone(), d["status"]["serviceExternalURL"].clone())))
        .collect();
    let got: BTreeMap<String, (Value, Value)> = nodes(&data["fileSubscriptions"])
        .iter()
        .map(|n| {
            (
                format!("{}/{}", n["namespace"].as_str().unwrap(), n["name"].as_str().unwrap()),
                (n["serviceURL"].clone(), n["serviceExternalURL"].clone()),
            )
        })
        .collect();
    assert_eq!(got, expected);
    assert_eq!(got.values().filter(|(i, e)| i.is_null() && e.is_null()).count(), 3, "ledger-core, knowledge-base, chargebacks");
    assert_eq!(got.values().filter(|(i, e)| i.is_string() && e.is_string()).count(), 1, "checkout-batch");

    // The Info views carry the same values across tenants.
    let data = WORLD
        .data(
            &team_viewer("payments--ledger", "poc"),
            r#"{ fileExposures { edges { node { serviceURL serviceExternalURL
                   subscriptions { id fileType statusPhase statusMessage serviceUrl serviceExternalUrl ownerApplication { name } } } } } }"#,
        )
        .await;
    let exposure = &nodes(&data["fileExposures"])[0];
    let subs = exposure["subscriptions"].as_array().unwrap();
    let by_app: BTreeMap<&str, &Value> = subs.iter().map(|s| (s["ownerApplication"]["name"].as_str().unwrap(), s)).collect();
    assert_eq!(by_app.keys().copied().collect::<Vec<_>>(), ["checkout-batch", "knowledge-base", "ledger-core"]);
    assert_eq!(
        by_app["checkout-batch"]["serviceUrl"],
        expected["poc--payments--checkout/de-telekom-payments-settlementreport-v1--checkout-batch"].0
    );
    assert_eq!(by_app["checkout-batch"]["serviceExternalUrl"], exposure["serviceExternalURL"]);
    for app in ["knowledge-base", "ledger-core"] {
        assert_eq!((&by_app[app]["serviceUrl"], &by_app[app]["serviceExternalUrl"]), (&Value::Null, &Value::Null), "{app}");
    }
    assert_eq!(
        (by_app["ledger-core"]["statusPhase"].as_str(), by_app["knowledge-base"]["statusPhase"].as_str()),
        (Some("ERROR"), Some("PENDING"))
    );
    assert_eq!(by_app["ledger-core"]["statusMessage"], "SFTP user provisioning failed: public key rejected");

    let data = WORLD
        .data(
            &team_viewer("logistics--parcel-tracking", "poc"),
            r#"{ fileSubscriptions { edges { node { target { serviceUrl serviceExternalUrl visibility } } } } }"#,
        )
        .await;
    assert_eq!(
        nodes(&data["fileSubscriptions"])[0]["target"],
        json!({"serviceUrl": "sftp://sftp.aws-eu1.poc.example.com:22/de-telekom-logistics-manifest-v1", "serviceExternalUrl": null, "visibility": "WORLD"})
    );
}

/// The target-less subscription returns `target: null` without an error.
#[tokio::test]
async fn subscription_without_target_has_null_target_and_no_error() {
    let fleet = team_viewer("logistics--fleet", "poc");
    let r = WORLD
        .run(&fleet, r#"{ fileSubscriptions(where: {name: "de-telekom-payments-chargebacks-v1--fleet-planner"}) { edges { node { name fileType statusPhase target { id fileType } } } } }"#)
        .await;
    assert!(r.get("errors").is_none(), "{r:#}");
    assert_eq!(
        nodes(&r["data"]["fileSubscriptions"]),
        vec![
            json!({"name": "de-telekom-payments-chargebacks-v1--fleet-planner", "fileType": "de-telekom-payments-chargebacks-v1", "statusPhase": "PENDING", "target": null})
        ]
    );
    let without: Vec<&Value> =
        FACTS["env"]["poc"]["subscriptionsWithoutTarget"].as_array().unwrap().iter().filter(|s| s["kind"] == "FileSubscription").collect();
    assert_eq!(without.len(), 1);
    assert_eq!(without[0]["name"], "de-telekom-payments-chargebacks-v1--fleet-planner");
}

/// The full shape of an exposure and a subscription seen by their owners.
#[tokio::test]
async fn file_entity_fields() {
    let data = WORLD
        .data(
            &team_viewer("logistics--fleet", "poc"),
            r#"{ fileExposures { edges { node {
                 createdAt statusPhase statusMessage environment namespace fileType variant visibility active zoneName zone { name }
                 approvalConfig { strategy trustedTeams } sftp { publicKeys { key } } serviceURL serviceExternalURL owner { name }
                 subscriptions { __typename fileType ownerApplicationName ownerTeam { name groupName } ownerApplication { name zone { name } } }
               } } } }"#,
        )
        .await;
    let e = &nodes(&data["fileExposures"])[0];
    assert_eq!(e["createdAt"], "2026-06-07T13:38:00Z");
    assert_eq!((e["statusPhase"].as_str(), e["statusMessage"].as_str()), (Some("READY"), Some("FileExposure is ready")));
    assert_eq!((e["environment"].as_str(), e["namespace"].as_str()), (Some("poc"), Some("poc--logistics--fleet")));
    assert_eq!(
        (e["fileType"].as_str(), e["variant"].as_str(), e["visibility"].as_str()),
        (Some("de-telekom-logistics-manifest-v1"), Some("SFTP"), Some("WORLD"))
    );
    assert_eq!((e["active"].as_bool(), e["zoneName"].as_str(), e["zone"]["name"].as_str()), (Some(true), Some("aws-eu1"), Some("aws-eu1")));
    assert_eq!(e["approvalConfig"], json!({"strategy": "AUTO", "trustedTeams": []}));
    let keys = strings(&e["sftp"]["publicKeys"], "key");
    assert_eq!(keys.len(), 2);
    assert!(keys[1].ends_with(" fleet-planner-backup@poc"));
    assert_eq!(e["owner"]["name"], "fleet-planner");
    // Its one subscriber is another team's: reduced view only.
    assert_eq!(
        e["subscriptions"],
        json!([{"__typename": "FileSubscriptionInfo", "fileType": "de-telekom-logistics-manifest-v1", "ownerApplicationName": "parcel-notifier",
                "ownerTeam": {"name": "logistics--parcel-tracking", "groupName": "logistics"},
                "ownerApplication": {"name": "parcel-notifier", "zone": {"name": "aws-eu1"}}}])
    );

    let data = WORLD
        .data(
            &team_viewer("payments--checkout", "poc"),
            r#"{ fileSubscriptions { edges { node {
                 name statusPhase fileType zoneName zone { name } sftp { publicKeys { key } } serviceURL serviceExternalURL owner { name }
                 approval { name state } approvalRequests { name state }
                 target { id fileType visibility active ownerApplication { name ownerTeam { name } } }
               } } } }"#,
        )
        .await;
    let s = &nodes(&data["fileSubscriptions"])[0];
    assert_eq!(s["name"], "de-telekom-payments-settlementreport-v1--checkout-batch");
    assert_eq!(
        (s["statusPhase"].as_str(), s["zoneName"].as_str(), s["zone"]["name"].as_str()),
        (Some("READY"), Some("caas-cetus"), Some("caas-cetus"))
    );
    assert_eq!(s["sftp"]["publicKeys"].as_array().unwrap().len(), 1);
    assert_eq!(s["owner"]["name"], "checkout-batch");
    assert_eq!(
        s["approval"],
        json!({"name": "filesubscription--de-telekom-payments-settlementreport-v1--checkout-batch", "state": "GRANTED"})
    );
    assert_eq!(
        s["approvalRequests"],
        json!([{"name": "de-telekom-payments-settlementreport-v1--checkout-batch--7b986fc5c", "state": "GRANTED"}])
    );
    assert_eq!(s["target"]["visibility"], "ENTERPRISE");
    assert_eq!(s["target"]["ownerApplication"], json!({"name": "ledger-reports", "ownerTeam": {"name": "payments--ledger"}}));
    // The target's ID is the ledger team's exposure, which the checkout team cannot open.
    let id = s["target"]["id"].as_str().unwrap();
    let r = WORLD.run(&team_viewer("payments--checkout", "poc"), &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
    assert_eq!(error_codes(&r), vec!["NOT_FOUND"]);
    let own = WORLD
        .data(
            &team_viewer("payments--ledger", "poc"),
            &format!(r#"{{ node(id: "{id}") {{ ... on FileExposure {{ fileType owner {{ name }} }} }} }}"#),
        )
        .await;
    assert_eq!(own["node"], json!({"fileType": "de-telekom-payments-settlementreport-v1", "owner": {"name": "ledger-reports"}}));
}

/// Approvals and approval requests of file subscriptions are visible to subscriber and provider
/// (facts `approvalsVisible` / `approvalRequestsVisible`), and `subscription` resolves to a
/// `FileSubscriptionInfo`, selectable through the interface and a fragment.
#[tokio::test]
async fn file_approvals_resolve_to_file_subscription_info() {
    for env in ENVS {
        let approvals = file_targeted("Approval", env);
        let requests = file_targeted("ApprovalRequest", env);
        if env == "qa" {
            // No file subscriptions in qa (and an empty `nameIn` would be ignored).
            assert!(approvals.is_empty() && requests.is_empty());
            continue;
        }
        assert_eq!((approvals.len(), requests.len()), (3, 4));
        let names = |s: &BTreeSet<String>| s.iter().map(|a| a.split_once('/').unwrap().1.to_string()).collect::<Vec<_>>();
        let q = format!(
            r#"{{ approvals(where: {{nameIn: {}}}) {{ totalCount edges {{ node {{ namespace name subscription {{ __typename id }} }} }} }}
                 approvalRequests(where: {{nameIn: {}}}) {{ totalCount edges {{ node {{ namespace name subscription {{ __typename }} }} }} }} }}"#,
            gql_list(&names(&approvals)),
            gql_list(&names(&requests)),
        );
        for team in teams(env) {
            let t = &FACTS["env"][env]["teams"][&team];
            let data = WORLD.data(&team_viewer(&team, env), &q).await;
            let expected: BTreeSet<String> = str_list(&t["approvalsVisible"]).into_iter().filter(|a| approvals.contains(a)).collect();
            assert_eq!(ns_names(&data["approvals"]), expected, "{env} {team} approvals");
            assert_eq!(data["approvals"]["totalCount"], json!(expected.len()));
            let expected: BTreeSet<String> = str_list(&t["approvalRequestsVisible"]).into_iter().filter(|a| requests.contains(a)).collect();
            assert_eq!(ns_names(&data["approvalRequests"]), expected, "{env} {team} approval requests");
            assert_eq!(data["approvalRequests"]["totalCount"], json!(expected.len()));
            for n in nodes(&data["approvals"]).iter().chain(nodes(&data["approvalRequests"]).iter()) {
                assert_eq!(n["subscription"]["__typename"], "FileSubscriptionInfo");
            }
        }
        // The admin sees every one.
        let all = WORLD.data(&admin(), &q).await;
        assert_eq!(ns_names(&all["approvals"]), approvals);
        assert_eq!(ns_names(&all["approvalRequests"]), requests);
    }

    // The full subscription view of the checkout-batch approval, seen by the provider.
    let data = WORLD
        .data(
            &team_viewer("payments--ledger", "poc"),
            r#"fragment Sub on SubscriptionInfo { id ownerApplication { name ownerTeam { name } } }
            { approvals(where: {name: "filesubscription--de-telekom-payments-settlementreport-v1--checkout-batch"}) { edges { node {
                namespace state strategy requester { teamName teamEmail applicationName } decider { teamName teamEmail }
                subscription { __typename ...Sub ... on FileSubscriptionInfo {
                  fileType statusPhase statusMessage serviceUrl serviceExternalUrl ownerApplicationName ownerTeam { name } } }
              } } } }"#,
        )
        .await;
    let a = &nodes(&data["approvals"])[0];
    assert_eq!(
        (a["namespace"].as_str(), a["state"].as_str(), a["strategy"].as_str()),
        (Some("poc--payments--checkout"), Some("GRANTED"), Some("SIMPLE"))
    );
    assert_eq!(a["decider"], json!({"teamName": "payments--ledger", "teamEmail": null}));
    let sub = &a["subscription"];
    assert_eq!(sub["__typename"], "FileSubscriptionInfo");
    assert_eq!(sub["fileType"], "de-telekom-payments-settlementreport-v1");
    assert_eq!(
        (sub["statusPhase"].as_str(), sub["statusMessage"].as_str()),
        (Some("READY"), Some("Successfully provisioned subresources"))
    );
    assert_eq!(sub["serviceUrl"], "sftp://sftp.caas-cetus.poc.example.com:22/de-telekom-payments-settlementreport-v1");
    assert_eq!(sub["serviceExternalUrl"], "sftp://files.poc.example.com:2222/de-telekom-payments-settlementreport-v1");
    assert_eq!(sub["ownerApplication"], json!({"name": "checkout-batch", "ownerTeam": {"name": "payments--checkout"}}));
    assert_eq!(
        (sub["ownerApplicationName"].as_str(), sub["ownerTeam"]["name"].as_str()),
        (Some("checkout-batch"), Some("payments--checkout"))
    );
    // The subscription's ID is the checkout team's FileSubscription.
    let id = sub["id"].as_str().unwrap();
    let own = WORLD
        .data(
            &team_viewer("payments--checkout", "poc"),
            &format!(r#"{{ node(id: "{id}") {{ __typename ... on FileSubscription {{ name }} }} }}"#),
        )
        .await;
    assert_eq!(own["node"], json!({"__typename": "FileSubscription", "name": "de-telekom-payments-settlementreport-v1--checkout-batch"}));

    // The pending request of knowledge-base: subscriber and provider see it, through the
    // interface too; it has no approval yet.
    for team in ["assist--knowledge", "payments--ledger"] {
        let data = WORLD
            .data(
                &team_viewer(team, "poc"),
                r#"{ approvalRequests(where: {name: "de-telekom-payments-settlementreport-v1--knowledge-base--6c65dcc579"}) { edges { node {
                    state approval { name } subscription { ... on SubscriptionInfo { ownerApplication { name } } ... on FileSubscriptionInfo { statusPhase serviceUrl } } } } } }"#,
            )
            .await;
        assert_eq!(
            nodes(&data["approvalRequests"]),
            vec![
                json!({"state": "PENDING", "approval": null, "subscription": {"ownerApplication": {"name": "knowledge-base"}, "statusPhase": "PENDING", "serviceUrl": null}})
            ],
            "{team}"
        );
    }
}

/// `Application.fileExposures` / `Application.fileSubscriptions` list the application's own
/// records (visible ones only), with filters.
#[tokio::test]
async fn application_file_edges() {
    for team in teams("poc") {
        let t = &FACTS["env"]["poc"]["teams"][&team];
        let data = WORLD
            .data(
                &team_viewer(&team, "poc"),
                r#"{ applications { edges { node { name
                    fileExposures { totalCount edges { node { fileType active } } }
                    activeExposures: fileExposures(where: {active: true}) { totalCount }
                    fileSubscriptions(orderBy: {field: CREATED_AT, direction: DESC}) { totalCount edges { node { name createdAt } } }
                } } } }"#,
            )
            .await;
        for app in nodes(&data["applications"]) {
            let name = app["name"].as_str().unwrap();
            let exposed: BTreeSet<String> = t["exposures"]["FileExposure"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["name"].as_str().unwrap().ends_with(&format!("--{name}")))
                .map(|e| e["key"].as_str().unwrap().to_string())
                .collect();
            assert_eq!(set(strings(&json!(nodes(&app["fileExposures"])), "fileType")), exposed, "{team} {name}");
            assert_eq!(app["fileExposures"]["totalCount"], json!(exposed.len()));
            let active = nodes(&app["fileExposures"]).iter().filter(|e| e["active"] == true).count();
            assert_eq!(app["activeExposures"]["totalCount"], json!(active));
            let subscribed = set(t["subscriptions"]["FileSubscription"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["name"].as_str().unwrap())
                .filter(|n| n.ends_with(&format!("--{name}"))));
            let subs = nodes(&app["fileSubscriptions"]);
            assert_eq!(set(strings(&json!(subs), "name")), subscribed, "{team} {name}");
            assert_eq!(app["fileSubscriptions"]["totalCount"], json!(subscribed.len()));
            let times = strings(&json!(subs), "createdAt");
            let mut sorted = times.clone();
            sorted.sort_by(|a, b| b.cmp(a));
            assert_eq!(times, sorted, "createdAt DESC");
        }
    }
}

/// Filters and ordering on the file where inputs; secrets and JSON columns are not filterable.
#[tokio::test]
async fn file_filters() {
    let data = WORLD
        .data(
            &admin(),
            r#"{
              active: fileExposures(where: {active: true}) { totalCount }
              manifest: fileExposures(where: {fileType: "de-telekom-logistics-manifest-v1"}) { totalCount }
              world: fileExposures(where: {visibility: WORLD, variant: SFTP}) { edges { node { owner { name } } } }
              noUrl: fileExposures(where: {serviceURLIsNil: true}) { totalCount }
              external: fileSubscriptions(where: {serviceExternalURLNotNil: true}) { edges { node { name } } }
              errors: fileSubscriptions(where: {statusPhase: ERROR}) { edges { node { name } } }
              cetus: fileSubscriptions(where: {zoneName: "caas-cetus"}, orderBy: {field: CREATED_AT}) { edges { node { name } } }
              ready: permissionSets(where: {statusPhase: READY}) { totalCount }
              qaSets: permissionSets(where: {environment: "qa"}) { totalCount }
            }"#,
        )
        .await;
    assert_eq!(data["active"]["totalCount"], 2);
    assert_eq!(data["manifest"]["totalCount"], 2);
    assert_eq!(nodes(&data["world"]), vec![json!({"owner": {"name": "fleet-planner"}})]);
    assert_eq!(data["noUrl"]["totalCount"], 1);
    assert_eq!(strings(&json!(nodes(&data["external"])), "name"), ["de-telekom-payments-settlementreport-v1--checkout-batch"]);
    assert_eq!(strings(&json!(nodes(&data["errors"])), "name"), ["de-telekom-payments-settlementreport-v1--ledger-core"]);
    assert_eq!(
        strings(&json!(nodes(&data["cetus"])), "name"),
        ["de-telekom-payments-settlementreport-v1--checkout-batch", "de-telekom-payments-settlementreport-v1--ledger-core"]
    );
    let ready: u64 = ENVS.iter().map(|e| FACTS["env"][*e]["statusPhases"]["PermissionSet"]["READY"].as_u64().unwrap()).sum();
    assert_eq!(data["ready"]["totalCount"], json!(ready));
    assert_eq!(data["qaSets"]["totalCount"], FACTS["env"]["qa"]["counts"]["PermissionSet"]);

    for bad in [
        r#"{ fileExposures(where: {sftp: "x"}) { totalCount } }"#,
        r#"{ fileExposures(where: {approvalConfig: "x"}) { totalCount } }"#,
        r#"{ permissionSets(where: {permissions: "x"}) { totalCount } }"#,
    ] {
        assert!(!error_codes(&WORLD.run(&admin(), bad).await).is_empty(), "{bad}");
    }
}

/// statusPhase counts per kind equal the facts, per environment.
#[tokio::test]
async fn status_phases_match_the_facts() {
    for env in ENVS {
        let q = format!(
            r#"{{ fileExposures(where: {{environment: "{env}"}}) {{ edges {{ node {{ statusPhase }} }} }}
                 fileSubscriptions(where: {{environment: "{env}"}}) {{ edges {{ node {{ statusPhase }} }} }}
                 permissionSets(where: {{environment: "{env}"}}) {{ edges {{ node {{ statusPhase }} }} }} }}"#
        );
        let data = WORLD.data(&admin(), &q).await;
        for (field, kind) in
            [("fileExposures", "FileExposure"), ("fileSubscriptions", "FileSubscription"), ("permissionSets", "PermissionSet")]
        {
            let mut got: BTreeMap<String, u64> = ["READY", "PENDING", "ERROR", "UNKNOWN"].iter().map(|p| (p.to_string(), 0)).collect();
            for n in nodes(&data[field]) {
                *got.get_mut(n["statusPhase"].as_str().unwrap()).unwrap() += 1;
            }
            let phases = &FACTS["env"][env]["statusPhases"][kind];
            let expected: BTreeMap<String, u64> = if phases.is_null() {
                got.keys().map(|k| (k.clone(), 0)).collect()
            } else {
                phases.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect()
            };
            assert_eq!(got, expected, "{env} {kind}");
        }
    }
}

/// PermissionSets per team (ownership by namespace), their permissions, `Application.permissionSet`
/// (visible only) and `permissionsURL` from the facts.
#[tokio::test]
async fn permission_sets_per_team_and_application_permissions_url() {
    let sets = manifests("PermissionSet");
    for env in ENVS {
        for team in teams(env) {
            let ns = format!("{env}--{team}");
            let own: Vec<&Value> = sets.iter().filter(|d| d["metadata"]["namespace"] == ns.as_str()).collect();
            let data = WORLD
                .data(
                    &team_viewer(&team, env),
                    r#"{ permissionSets { totalCount edges { node { id environment namespace statusPhase permissions { role resource actions } } } }
                        applications { edges { node { name permissionsURL permissionSet { namespace permissions { role } } } } } }"#,
                )
                .await;
            assert_eq!(data["permissionSets"]["totalCount"], json!(own.len()), "{env} {team}");
            let got: BTreeSet<String> =
                nodes(&data["permissionSets"]).iter().map(|n| serde_json::to_string(&n["permissions"]).unwrap()).collect();
            let expected: BTreeSet<String> = own.iter().map(|d| serde_json::to_string(&d["spec"]["permissions"]).unwrap()).collect();
            assert_eq!(got, expected, "{env} {team}");
            for n in nodes(&data["permissionSets"]) {
                assert_eq!((n["environment"].as_str(), n["namespace"].as_str()), (Some(env), Some(ns.as_str())));
            }

            let with_set: BTreeSet<&str> =
                own.iter().map(|d| d["metadata"]["labels"]["cp.ei.telekom.de/application"].as_str().unwrap()).collect();
            let facts_apps: BTreeMap<&str, &Value> = FACTS["env"][env]["applications"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| a["team"] == team.as_str())
                .map(|a| (a["name"].as_str().unwrap(), &a["permissionsUrl"]))
                .collect();
            for app in nodes(&data["applications"]) {
                let name = app["name"].as_str().unwrap();
                assert_eq!(app["permissionSet"].is_null(), !with_set.contains(name), "{env} {team} {name}");
                if !app["permissionSet"].is_null() {
                    assert_eq!(app["permissionSet"]["namespace"].as_str(), Some(ns.as_str()));
                }
                assert_eq!(&app["permissionsURL"], facts_apps[name], "{env} {team} {name} permissionsURL");
            }
        }
    }

    // Another team sees none of them: lists, counts, node.
    let checkout = WORLD.data(&team_viewer("payments--checkout", "poc"), "{ permissionSets { edges { node { id } } } }").await;
    let id = nodes(&checkout["permissionSets"])[0]["id"].as_str().unwrap().to_string();
    let fleet = team_viewer("logistics--fleet", "poc");
    let data = WORLD.data(&fleet, "{ permissionSets { totalCount } }").await;
    assert_eq!(data["permissionSets"]["totalCount"], 0);
    let r = WORLD.run(&fleet, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
    assert_eq!((r["data"]["node"].clone(), error_codes(&r)), (Value::Null, vec!["NOT_FOUND".to_string()]));
    // The qa set of the same name is a different record, invisible from poc.
    let qa =
        WORLD.data(&team_viewer("payments--checkout", "qa"), "{ permissionSets { edges { node { id permissions { actions } } } } }").await;
    let qa_id = nodes(&qa["permissionSets"])[0]["id"].as_str().unwrap().to_string();
    assert_ne!(qa_id, id);
    assert_eq!(nodes(&qa["permissionSets"])[0]["permissions"], json!([{"actions": ["read", "write"]}]));
    let r = WORLD.run(&team_viewer("payments--checkout", "poc"), &format!(r#"{{ node(id: "{qa_id}") {{ id }} }}"#)).await;
    assert_eq!(error_codes(&r), vec!["NOT_FOUND"]);
}

/// Environment isolation: the `qa` teams own no file records and see none of `poc`'s.
#[tokio::test]
async fn qa_sees_no_poc_file_records() {
    for team in teams("qa") {
        let data = WORLD.data(&team_viewer(&team, "qa"), "{ fileExposures { totalCount } fileSubscriptions { totalCount } }").await;
        assert_eq!(
            (data["fileExposures"]["totalCount"].as_u64(), data["fileSubscriptions"]["totalCount"].as_u64()),
            (Some(0), Some(0)),
            "{team}"
        );
    }
}

/// A store with the world minus its FileExposures, the GraphQL schema over it, and helpers to
/// write or delete single FileExposure documents.
struct Partial {
    _dir: tempfile::TempDir,
    store: storage::Store,
    api: query::Api,
}

impl Partial {
    fn load() -> Partial {
        let dir = tempfile::tempdir().unwrap();
        let store = storage::Store::open(dir.path()).unwrap();
        let docs: Vec<Value> = world_documents().into_iter().filter(|d| d["kind"] != "FileExposure").collect();
        let report = support::load(&store, &docs);
        assert!(report.dependency_missing.iter().all(|d| !d.starts_with("File")), "{:?}", report.dependency_missing);
        let config = query::QueryConfig { now: Some(support::reference_time()), ..query::QueryConfig::default() };
        Partial { _dir: dir, store, api: query::build_schema(config).unwrap() }
    }

    /// Writes the world's FileExposure `name` with `status.active = active` as version `version`.
    fn upsert_exposure(&self, name: &str, active: bool, version: &str) -> storage::Outcome {
        use schema::kinds::file_exposure::FileExposure;
        use schema::Kind;
        let mut doc = manifests("FileExposure").into_iter().find(|d| d["metadata"]["name"] == name).unwrap();
        doc["status"]["active"] = json!(active);
        // The CR type without a dependency on `crds`.
        let cr: <FileExposure as Kind>::Cr = serde_json::from_value(doc).unwrap();
        let ctx = schema::Context { now: support::reference_time(), features: Default::default() };
        let rec = FileExposure::translate(&cr, &ctx).unwrap();
        let src = storage::SourceRef {
            kind: schema::KindId::FileExposure,
            namespace: cr.metadata.namespace.clone().unwrap(),
            name: name.to_string(),
        };
        self.store.write(ctx.now, |batch| batch.upsert::<FileExposure>(&src, version, &rec, ctx.now)).unwrap().0
    }

    fn delete_exposure(&self, namespace: &str, name: &str) -> storage::Outcome {
        let src = storage::SourceRef { kind: schema::KindId::FileExposure, namespace: namespace.into(), name: name.into() };
        self.store.write(support::reference_time(), |batch| batch.delete(&src, support::reference_time())).unwrap().0
    }

    async fn data(&self, viewer: &query::viewer::Viewer, q: &str) -> Value {
        let r = serde_json::to_value(self.api.execute(&self.store, viewer.clone(), async_graphql::Request::new(q)).await).unwrap();
        assert!(r.get("errors").is_none(), "{q}: {r:#}");
        r["data"].clone()
    }

    /// Subscription name → the owner application of its target (None = unlinked).
    async fn targets(&self) -> BTreeMap<String, Option<String>> {
        let d = self.data(&admin(), "{ fileSubscriptions { edges { node { name target { ownerApplication { name } } } } } }").await;
        nodes(&d["fileSubscriptions"])
            .iter()
            .map(|n| (n["name"].as_str().unwrap().to_string(), n["target"]["ownerApplication"]["name"].as_str().map(str::to_string)))
            .collect()
    }

    /// Names of the file approvals the viewer sees.
    async fn file_approvals(&self, viewer: &query::viewer::Viewer) -> BTreeSet<String> {
        let d = self.data(viewer, r#"{ approvals(where: {nameHasPrefix: "filesubscription--"}) { edges { node { name } } } }"#).await;
        set(strings(&json!(nodes(&d["approvals"])), "name"))
    }
}

/// Subscriptions are stored without target while no active exposure exists, link as soon as one
/// becomes active, and unlink when it becomes inactive or goes away; the provider team's view of
/// the approvals follows the link.
#[tokio::test]
async fn subscriptions_link_and_unlink_with_the_active_exposure() {
    let p = Partial::load();
    let targets = p.targets().await;
    assert_eq!(targets.len(), 5);
    assert!(targets.values().all(Option::is_none), "{targets:?}");
    let ledger = team_viewer("payments--ledger", "poc");
    let checkout_approval = "filesubscription--de-telekom-payments-settlementreport-v1--checkout-batch";
    // Only its own subscription's approval: the provider side is not linked yet.
    assert_eq!(p.file_approvals(&ledger).await, set(["filesubscription--de-telekom-payments-settlementreport-v1--ledger-core"]));

    // The exposure appears, inactive: still unlinked.
    let ledger_reports = "de-telekom-payments-settlementreport-v1--ledger-reports";
    assert!(matches!(p.upsert_exposure(ledger_reports, false, "1"), storage::Outcome::Written));
    assert!(p.targets().await.values().all(Option::is_none));

    // It becomes active: the three settlement-report subscriptions link to it.
    p.upsert_exposure(ledger_reports, true, "2");
    let targets = p.targets().await;
    for sub in ["checkout-batch", "knowledge-base", "ledger-core"] {
        assert_eq!(targets[&format!("de-telekom-payments-settlementreport-v1--{sub}")].as_deref(), Some("ledger-reports"), "{sub}");
    }
    assert_eq!(targets.values().filter(|t| t.is_some()).count(), 3);
    assert!(p.file_approvals(&ledger).await.contains(checkout_approval));
    let d = p.data(&ledger, "{ fileExposures { edges { node { subscriptions { ownerApplication { name } } } } } }").await;
    assert_eq!(nodes(&d["fileExposures"])[0]["subscriptions"].as_array().unwrap().len(), 3);

    // Inactive again: unlinked, and the provider loses sight of the approval.
    p.upsert_exposure(ledger_reports, false, "3");
    assert!(p.targets().await.values().all(Option::is_none));
    assert!(!p.file_approvals(&ledger).await.contains(checkout_approval));
    let d = p.data(&ledger, "{ fileExposures { edges { node { active subscriptions { id } } } } }").await;
    assert_eq!(nodes(&d["fileExposures"]), vec![json!({"active": false, "subscriptions": []})]);

    // Manifest: the inactive duplicate does not link; the active one does; deleting it unlinks.
    p.upsert_exposure("de-telekom-logistics-manifest-v1--parcel-tracker", false, "1");
    p.upsert_exposure("de-telekom-logistics-manifest-v1--fleet-planner", true, "1");
    assert_eq!(p.targets().await["de-telekom-logistics-manifest-v1--parcel-notifier"].as_deref(), Some("fleet-planner"));
    assert!(p
        .file_approvals(&team_viewer("logistics--fleet", "poc"))
        .await
        .contains("filesubscription--de-telekom-logistics-manifest-v1--parcel-notifier"));
    assert!(matches!(
        p.delete_exposure("poc--logistics--fleet", "de-telekom-logistics-manifest-v1--fleet-planner"),
        storage::Outcome::Deleted
    ));
    assert_eq!(p.targets().await["de-telekom-logistics-manifest-v1--parcel-notifier"], None);
    assert!(p.file_approvals(&team_viewer("logistics--fleet", "poc")).await.is_empty());
    // The chargebacks subscription never had an exposure.
    assert_eq!(p.targets().await["de-telekom-payments-chargebacks-v1--fleet-planner"], None);
    assert!(p.store.read().unwrap().check_invariants().unwrap().is_empty());
}
