//! End to end over HTTP on the bundled world (file and permission kinds): the server
//! started as the binary starts it (manifests source, mock tokens), queried with real HTTP
//! requests. Expectations come from `examples/world.facts.json` and the world's manifests.

mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use support::{facts, names, Server};

fn set(v: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    v.into_iter().collect()
}

fn admin() -> String {
    support::token("platform--ops--console", "tardis:admin:all", "poc")
}

/// The world's manifests of `kind`.
fn manifests(kind: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(support::world_dir()).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for path in files.into_iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")) {
        let docs: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(&path).unwrap()).unwrap();
        out.extend(docs.into_iter().filter(|d| d["kind"] == kind));
    }
    out
}

fn ns_name(d: &Value) -> String {
    format!("{}/{}", d["metadata"]["namespace"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap())
}

fn nodes(conn: &Value) -> Vec<Value> {
    conn["edges"].as_array().unwrap().iter().map(|e| e["node"].clone()).collect()
}

const LISTS: &str = "{
  fileExposures { totalCount edges { node { id fileType active owner { name } } } }
  fileSubscriptions { totalCount edges { node { id name fileType serviceURL serviceExternalURL
    target { fileType serviceUrl serviceExternalUrl ownerApplication { name ownerTeam { name } } } } } }
  permissionSets { totalCount edges { node { id namespace permissions { role resource actions } } } }
  applications { edges { node { name permissionsURL permissionSet { id } } } }
}";

/// Every team of both environments sees exactly its file exposures, file subscriptions (with the
/// targets of the facts) and permission sets; `permissionsURL` equals the facts; a second team
/// sees none of the first team's records (lists, counts, `node`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_and_permission_records_per_team_over_http() {
    let server = Server::start(&support::world_dir(), None).await;
    let facts = facts();
    let sets = manifests("PermissionSet");
    let mut ids_by_team: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for env in ["poc", "qa"] {
        for (team, t) in facts["env"][env]["teams"].as_object().unwrap() {
            let data = server.query(&support::team_token(team, env), LISTS).await;

            let expected: BTreeSet<String> = t["exposures"]["FileExposure"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| format!("{}/{}", e["key"].as_str().unwrap(), e["active"]))
                .collect();
            let got: BTreeSet<String> =
                nodes(&data["fileExposures"]).iter().map(|e| format!("{}/{}", e["fileType"].as_str().unwrap(), e["active"])).collect();
            assert_eq!(got, expected, "{env} {team} file exposures");
            assert_eq!(data["fileExposures"]["totalCount"], json!(expected.len()));
            for e in nodes(&data["fileExposures"]) {
                let fact = t["exposures"]["FileExposure"].as_array().unwrap().iter().find(|f| f["key"] == e["fileType"]).unwrap();
                assert_eq!(
                    fact["name"].as_str().unwrap(),
                    format!("{}--{}", e["fileType"].as_str().unwrap(), e["owner"]["name"].as_str().unwrap())
                );
            }

            let facts_subs = t["subscriptions"]["FileSubscription"].as_array().unwrap();
            let subs = nodes(&data["fileSubscriptions"]);
            assert_eq!(
                set(names(&data["fileSubscriptions"], "name")),
                set(facts_subs.iter().map(|s| s["name"].as_str().unwrap().to_string())),
                "{env} {team}"
            );
            assert_eq!(data["fileSubscriptions"]["totalCount"], json!(facts_subs.len()));
            for s in &subs {
                let fact = facts_subs.iter().find(|f| f["name"] == s["name"]).unwrap();
                match fact["target"].as_str() {
                    None => assert_eq!(s["target"], Value::Null, "{}", s["name"]),
                    Some(target) => {
                        let info = &s["target"];
                        let owner = &info["ownerApplication"];
                        let got = format!(
                            "{env}--{}/{}--{}",
                            owner["ownerTeam"]["name"].as_str().unwrap(),
                            info["fileType"].as_str().unwrap(),
                            owner["name"].as_str().unwrap()
                        );
                        assert_eq!(got, target, "{env} {team} {}", s["name"]);
                    }
                }
            }

            let ns = format!("{env}--{team}");
            let own_sets: Vec<&Value> = sets.iter().filter(|d| d["metadata"]["namespace"] == ns.as_str()).collect();
            assert_eq!(data["permissionSets"]["totalCount"], json!(own_sets.len()), "{env} {team} permission sets");
            let got: BTreeSet<String> = nodes(&data["permissionSets"]).iter().map(|n| n["permissions"].to_string()).collect();
            let expected: BTreeSet<String> = own_sets.iter().map(|d| d["spec"]["permissions"].to_string()).collect();
            assert_eq!(got, expected, "{env} {team}");

            let with_set: BTreeSet<&str> =
                own_sets.iter().map(|d| d["metadata"]["labels"]["cp.ei.telekom.de/application"].as_str().unwrap()).collect();
            for app in nodes(&data["applications"]) {
                let name = app["name"].as_str().unwrap();
                let fact = facts["env"][env]["applications"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|a| a["team"] == team.as_str() && a["name"] == name)
                    .unwrap();
                assert_eq!(app["permissionsURL"], fact["permissionsUrl"], "{env} {team} {name}");
                assert_eq!(!app["permissionSet"].is_null(), with_set.contains(name), "{env} {team} {name}");
            }

            let ids: Vec<String> =
                ["fileExposures", "fileSubscriptions", "permissionSets"].iter().flat_map(|k| names(&data[*k], "id")).collect();
            ids_by_team.insert(format!("{env}/{team}"), ids);
        }
    }
    // Two applications have a permissions URL (zone with permissions API + PermissionSet).
    let urls: Vec<&Value> =
        facts["env"]["poc"]["applications"].as_array().unwrap().iter().filter(|a| !a["permissionsUrl"].is_null()).collect();
    assert_eq!(urls.len(), 2);

    // A second team sees none of the first team's records.
    for (first, second) in
        [("payments--ledger", "logistics--fleet"), ("logistics--fleet", "payments--checkout"), ("payments--checkout", "payments--ledger")]
    {
        let ids = &ids_by_team[&format!("poc/{first}")];
        assert!(!ids.is_empty(), "{first}");
        let token = support::team_token(second, "poc");
        let data = server.query(&token, LISTS).await;
        let seen: BTreeSet<String> =
            ["fileExposures", "fileSubscriptions", "permissionSets"].iter().flat_map(|k| names(&data[*k], "id")).collect();
        for id in ids {
            assert!(!seen.contains(id), "{second} sees {first}'s {id}");
            let (data, errors) = server.query_raw(&token, "query($id: ID!) { node(id: $id) { id } }", json!({"id": id})).await;
            assert_eq!(data["node"], Value::Null, "{id}");
            assert_eq!(errors[0]["extensions"]["code"], "NOT_FOUND");
            let (data, _) =
                server.query_raw(&support::team_token(first, "poc"), "query($id: ID!) { node(id: $id) { id } }", json!({"id": id})).await;
            assert_eq!(data["node"]["id"], json!(id), "the owner resolves its own ID");
        }
    }
    // The qa team of the same name owns no file records; the poc IDs are unknown to it.
    let qa = support::team_token("payments--ledger", "qa");
    let data = server.query(&qa, "{ fileExposures { totalCount } fileSubscriptions { totalCount } }").await;
    assert_eq!((data["fileExposures"]["totalCount"].as_u64(), data["fileSubscriptions"]["totalCount"].as_u64()), (Some(0), Some(0)));
    for id in &ids_by_team["poc/payments--ledger"] {
        let (data, errors) = server.query_raw(&qa, "query($id: ID!) { node(id: $id) { id } }", json!({"id": id})).await;
        assert_eq!((data["node"].clone(), errors[0]["extensions"]["code"].clone()), (Value::Null, json!("NOT_FOUND")));
    }
    server.stop().await;
}

/// Service URLs are null when unset, the target-less subscription answers `target: null` without
/// an error, and approvals of file subscriptions resolve `subscription` to `FileSubscriptionInfo`
/// for both sides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_urls_targets_and_file_approvals_over_http() {
    let server = Server::start(&support::world_dir(), None).await;
    let facts = facts();

    let data = server
        .query(
            &admin(),
            "{ fileExposures { edges { node { namespace fileType owner { name } serviceURL serviceExternalURL } } }
                           fileSubscriptions { edges { node { namespace name serviceURL serviceExternalURL } } } }",
        )
        .await;
    let status = |d: &Value| (d["status"]["serviceURL"].clone(), d["status"]["serviceExternalURL"].clone());
    let expected: BTreeMap<String, (Value, Value)> = manifests("FileExposure").iter().map(|d| (ns_name(d), status(d))).collect();
    let got: BTreeMap<String, (Value, Value)> = nodes(&data["fileExposures"])
        .iter()
        .map(|n| {
            (
                format!(
                    "{}/{}--{}",
                    n["namespace"].as_str().unwrap(),
                    n["fileType"].as_str().unwrap(),
                    n["owner"]["name"].as_str().unwrap()
                ),
                (n["serviceURL"].clone(), n["serviceExternalURL"].clone()),
            )
        })
        .collect();
    assert_eq!(got, expected);
    assert_eq!(got["poc--logistics--parcel-tracking/de-telekom-logistics-manifest-v1--parcel-tracker"], (Value::Null, Value::Null));
    let expected: BTreeMap<String, (Value, Value)> = manifests("FileSubscription").iter().map(|d| (ns_name(d), status(d))).collect();
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
    for none in [
        "poc--payments--ledger/de-telekom-payments-settlementreport-v1--ledger-core",
        "poc--assist--knowledge/de-telekom-payments-settlementreport-v1--knowledge-base",
        "poc--logistics--fleet/de-telekom-payments-chargebacks-v1--fleet-planner",
    ] {
        assert_eq!(got[none], (Value::Null, Value::Null), "{none}");
    }
    assert_eq!(got["poc--logistics--parcel-tracking/de-telekom-logistics-manifest-v1--parcel-notifier"].1, Value::Null);

    // The subscription without target.
    let without = facts["env"]["poc"]["subscriptionsWithoutTarget"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "FileSubscription")
        .unwrap()
        .clone();
    let (data, errors) = server
        .query_raw(
            &support::team_token("logistics--fleet", "poc"),
            "query($n: String) { fileSubscriptions(where: {name: $n}) { edges { node { name fileType target { id } } } } }",
            json!({"n": without["name"]}),
        )
        .await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(nodes(&data["fileSubscriptions"]), vec![json!({"name": without["name"], "fileType": without["key"], "target": null})]);

    // File approvals: visible to subscriber and provider per the facts, `subscription` typed.
    let file_approvals: BTreeSet<String> =
        manifests("Approval").iter().filter(|d| d["spec"]["target"]["kind"] == "FileSubscription").map(ns_name).collect();
    let file_requests: BTreeSet<String> =
        manifests("ApprovalRequest").iter().filter(|d| d["spec"]["target"]["kind"] == "FileSubscription").map(ns_name).collect();
    assert_eq!((file_approvals.len(), file_requests.len()), (3, 4));
    let bare = |s: &BTreeSet<String>| json!(s.iter().map(|a| a.split_once('/').unwrap().1).collect::<Vec<_>>());
    // The registry lists Approval/ApprovalRequest before FileSubscription, so the initial sync
    // parks file approvals as *dependency missing* and projects them on their retry
    // (`DEPENDENCY_DELAY` + jitter, 2 s + up to 3 s): readiness does not wait for retries.
    let count = "query($a: [String!], $r: [String!]) { approvals(where: {nameIn: $a}) { totalCount } approvalRequests(where: {nameIn: $r}) { totalCount } }";
    let vars = json!({"a": bare(&file_approvals), "r": bare(&file_requests)});
    support::eventually(server.running().app(), "the file approvals", async || {
        let (data, _) = server.query_raw(&admin(), count, vars.clone()).await;
        let projected = data["approvals"]["totalCount"] == json!(file_approvals.len())
            && data["approvalRequests"]["totalCount"] == json!(file_requests.len());
        projected.then_some(())
    })
    .await;
    let q = "query($a: [String!], $r: [String!]) {
        approvals(where: {nameIn: $a}) { edges { node { namespace name subscription { __typename ... on FileSubscriptionInfo { fileType ownerApplication { name } } } } } }
        approvalRequests(where: {nameIn: $r}) { edges { node { namespace name subscription { __typename } } } } }";
    for (team, t) in facts["env"]["poc"]["teams"].as_object().unwrap() {
        let (data, errors) =
            server.query_raw(&support::team_token(team, "poc"), q, json!({"a": bare(&file_approvals), "r": bare(&file_requests)})).await;
        assert!(errors.is_empty(), "{team}: {errors:?}");
        for (field, fact, all) in
            [("approvals", "approvalsVisible", &file_approvals), ("approvalRequests", "approvalRequestsVisible", &file_requests)]
        {
            let seen: BTreeSet<String> = nodes(&data[field])
                .iter()
                .map(|n| format!("{}/{}", n["namespace"].as_str().unwrap(), n["name"].as_str().unwrap()))
                .collect();
            let expected: BTreeSet<String> =
                t[fact].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).filter(|n| all.contains(n)).collect();
            assert_eq!(seen, expected, "{team} {field}");
            assert!(nodes(&data[field]).iter().all(|n| n["subscription"]["__typename"] == "FileSubscriptionInfo"), "{team} {field}");
        }
    }
    let (data, errors) = server
        .query_raw(
            &support::team_token("payments--ledger", "poc"),
            r#"{ approvals(where: {name: "filesubscription--de-telekom-payments-settlementreport-v1--checkout-batch"}) { edges { node {
                 namespace subscription { __typename id ... on FileSubscriptionInfo { fileType statusPhase serviceUrl serviceExternalUrl ownerApplicationName ownerTeam { name } ownerApplication { name ownerTeam { name } } } } } } } }"#,
            json!({}),
        )
        .await;
    assert!(errors.is_empty(), "{errors:?}");
    let sub = &nodes(&data["approvals"])[0]["subscription"];
    assert_eq!(sub["__typename"], "FileSubscriptionInfo");
    assert_eq!(sub["fileType"], "de-telekom-payments-settlementreport-v1");
    assert_eq!(sub["statusPhase"], "READY");
    assert_eq!(sub["serviceUrl"], "sftp://sftp.caas-cetus.poc.example.com:22/de-telekom-payments-settlementreport-v1");
    assert_eq!(sub["serviceExternalUrl"], "sftp://files.poc.example.com:2222/de-telekom-payments-settlementreport-v1");
    assert_eq!(sub["ownerApplication"], json!({"name": "checkout-batch", "ownerTeam": {"name": "payments--checkout"}}));
    assert_eq!(
        (sub["ownerApplicationName"].as_str(), sub["ownerTeam"]["name"].as_str()),
        (Some("checkout-batch"), Some("payments--checkout"))
    );
    // The provider cannot open the subscriber's FileSubscription itself.
    let (data, errors) = server
        .query_raw(&support::team_token("payments--ledger", "poc"), "query($id: ID!) { node(id: $id) { id } }", json!({"id": sub["id"]}))
        .await;
    assert_eq!((data["node"].clone(), errors[0]["extensions"]["code"].clone()), (Value::Null, json!("NOT_FOUND")));
    server.stop().await;
}

/// With `FEATURE_FILE_MANAGER_ENABLED` and `FEATURE_PERMISSION_ENABLED` off, the file and
/// permission kinds and the approvals of file subscriptions are not projected (the schema is
/// unchanged), and no application has a permissions URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_features_project_no_file_or_permission_records() {
    let data_dir = tempfile::tempdir().unwrap();
    let mut config = control_plane::config::Config::for_manifests(&support::world_dir(), data_dir.path());
    config.now = Some(schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap());
    config.features.file_manager = false;
    config.features.permission = false;
    let running = control_plane::start(config).await.unwrap();
    let base = format!("http://{}", running.local_addr());
    let client = reqwest::Client::new();
    assert!(running.app().wait_caught_up(std::time::Duration::from_secs(30)).await, "server not ready after 30 s");
    assert_eq!(client.get(format!("{base}/readyz")).send().await.unwrap().status(), 200);
    let q = r#"{ fileExposures { totalCount } fileSubscriptions { totalCount } permissionSets { totalCount }
                approvals(where: {nameHasPrefix: "filesubscription--"}) { totalCount }
                apiSubscriptions { totalCount }
                applications { edges { node { name permissionsURL permissionSet { id } } } } }"#;
    let body: Value = client
        .post(format!("{base}/graphql/query"))
        .bearer_auth(admin())
        .json(&json!({"query": q}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(body["errors"].as_array().is_none_or(|e| e.is_empty()), "{body:#}");
    let data = &body["data"];
    for field in ["fileExposures", "fileSubscriptions", "permissionSets", "approvals"] {
        assert_eq!(data[field]["totalCount"], 0, "{field}");
    }
    let facts = facts();
    let api_subs = facts["env"]["poc"]["counts"]["ApiSubscription"].as_u64().unwrap()
        + facts["env"]["qa"]["counts"]["ApiSubscription"].as_u64().unwrap();
    assert_eq!(data["apiSubscriptions"]["totalCount"], json!(api_subs), "other kinds still project");
    let apps = nodes(&data["applications"]);
    assert!(!apps.is_empty());
    assert!(apps.iter().all(|a| a["permissionsURL"].is_null() && a["permissionSet"].is_null()), "{apps:?}");
    running.shutdown().await.unwrap();
}
