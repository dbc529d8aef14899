//! End to end over HTTP for the agentic kinds (McpServer, AgentCard, AgenticExposure,
//! AgenticSubscription): the server started as the binary starts it (manifests source, mock
//! tokens), queried with real HTTP requests. Expectations come from
//! `examples/world.facts.json`.

mod support;

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use support::{facts, names, Server};

fn set(v: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    v.into_iter().collect()
}

fn nodes(conn: &Value) -> Vec<Value> {
    conn["edges"].as_array().unwrap().iter().map(|e| e["node"].clone()).collect()
}

const LISTS: &str = "{
  mcpServers { totalCount edges { node { id name displayName basePath active owner { name } } } }
  agentCards { totalCount edges { node { id name displayName basePath active owner { name } } } }
  activeMcp: mcpServers(where: {active: true}) { totalCount edges { node { basePath } } }
  activeAgents: agentCards(where: {active: true}) { totalCount edges { node { basePath } } }
  agenticExposures { totalCount edges { node { id basePath active variant owner { name } } } }
  agenticSubscriptions { totalCount edges { node { id name basePath gatewayURL
    target { id basePath variant ownerApplication { name ownerTeam { name } } } } } }
}";

/// `key|team|name|displayName|active` of a catalogue table of the facts.
fn catalogue(facts: &Value, env: &str, table: &str) -> BTreeSet<String> {
    facts["env"][env]["catalogue"][table]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            format!(
                "{}|{}|{}|{}|{}",
                c["key"].as_str().unwrap(),
                c["team"].as_str().unwrap(),
                c["name"].as_str().unwrap(),
                c["displayName"].as_str().unwrap(),
                c["active"]
            )
        })
        .collect()
}

fn catalogue_nodes(conn: &Value) -> BTreeSet<String> {
    nodes(conn)
        .iter()
        .map(|n| {
            format!(
                "{}|{}|{}|{}|{}",
                n["basePath"].as_str().unwrap(),
                n["owner"]["name"].as_str().unwrap(),
                n["name"].as_str().unwrap(),
                n["displayName"].as_str().unwrap(),
                n["active"]
            )
        })
        .collect()
}

/// Every team of both environments sees its own agentic exposures and subscriptions (targets as
/// the facts say, `null` without error for the target-less one) and the whole agentic catalogue
/// of its environment (one active entry per base path); a second team sees none of a team's
/// records, by list, count or `node(id)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentic_ownership_catalogue_and_targets_over_http() {
    let server = Server::start(&support::world_dir(), None).await;
    let facts = facts();
    let admin = support::token("platform--ops--console", "tardis:admin:all", "poc");
    let all = server.query(&admin, "{ agenticExposures { edges { node { id namespace basePath owner { name } } } } }").await;
    // (namespace, owner application, basePath) → id
    let exposure_ids: BTreeMap<(String, String, String), String> = nodes(&all["agenticExposures"])
        .iter()
        .map(|n| {
            let s = |v: &Value| v.as_str().unwrap().to_string();
            ((s(&n["namespace"]), s(&n["owner"]["name"]), s(&n["basePath"])), s(&n["id"]))
        })
        .collect();

    let mut ids_by_team: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut targetless = Vec::new();
    for env in ["poc", "qa"] {
        let e = &facts["env"][env];
        let mcp = catalogue(&facts, env, "mcpServers");
        let agents = catalogue(&facts, env, "agentCards");
        for (team, t) in e["teams"].as_object().unwrap() {
            let (data, errors) = server.query_raw(&support::team_token(team, env), LISTS, json!({})).await;
            assert!(errors.is_empty(), "{env} {team}: {errors:?}");

            // Catalogue: everything of the environment, names and display names per the facts.
            assert_eq!(catalogue_nodes(&data["mcpServers"]), mcp, "{env} {team} mcpServers");
            assert_eq!(data["mcpServers"]["totalCount"], json!(mcp.len()));
            assert_eq!(catalogue_nodes(&data["agentCards"]), agents, "{env} {team} agentCards");
            assert_eq!(data["agentCards"]["totalCount"], json!(agents.len()));
            for (list, table) in [("activeMcp", &mcp), ("activeAgents", &agents)] {
                let keys: BTreeSet<String> = table.iter().map(|r| r.split('|').next().unwrap().to_string()).collect();
                let active = names(&data[list], "basePath");
                assert_eq!(active.len(), keys.len(), "{env} {team} {list}: one per base path");
                assert_eq!(set(active), keys);
                assert_eq!(data[list]["totalCount"], json!(keys.len()));
            }

            // Exposures: exactly the team's own.
            let expected: BTreeSet<String> = t["exposures"]["AgenticExposure"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| format!("{}|{}", x["key"].as_str().unwrap(), x["active"]))
                .collect();
            let got: BTreeSet<String> =
                nodes(&data["agenticExposures"]).iter().map(|x| format!("{}|{}", x["basePath"].as_str().unwrap(), x["active"])).collect();
            assert_eq!(got, expected, "{env} {team} exposures");
            assert_eq!(data["agenticExposures"]["totalCount"], json!(expected.len()));

            // Subscriptions: exactly the team's own, with the facts' targets.
            let facts_subs = t["subscriptions"]["AgenticSubscription"].as_array().unwrap();
            let expected = set(facts_subs.iter().map(|s| s["name"].as_str().unwrap().to_string()));
            assert_eq!(set(names(&data["agenticSubscriptions"], "name")), expected, "{env} {team} subscriptions");
            assert_eq!(data["agenticSubscriptions"]["totalCount"], json!(expected.len()));
            for s in nodes(&data["agenticSubscriptions"]) {
                let fact = facts_subs.iter().find(|f| f["name"] == s["name"]).unwrap();
                assert_eq!(s["basePath"], fact["key"]);
                match fact["target"].as_str() {
                    None => {
                        assert_eq!(s["target"], Value::Null, "{env} {team} {}", s["name"]);
                        targetless.push(format!("{env}--{team}/{}", s["name"].as_str().unwrap()));
                    }
                    Some(target) => {
                        let (ns, name) = target.split_once('/').unwrap();
                        let app = name.split_once("--").unwrap().0;
                        let key = (ns.to_string(), app.to_string(), fact["key"].as_str().unwrap().to_string());
                        assert_eq!(s["target"]["id"].as_str(), Some(exposure_ids[&key].as_str()), "{env} {team} {target}");
                        assert_eq!(s["target"]["ownerApplication"]["name"].as_str(), Some(app));
                        assert_eq!(s["target"]["ownerApplication"]["ownerTeam"]["name"].as_str(), ns.split_once("--").map(|x| x.1));
                    }
                }
            }
            let ids: Vec<String> = ["agenticExposures", "agenticSubscriptions"].iter().flat_map(|k| names(&data[k], "id")).collect();
            if env == "poc" {
                ids_by_team.insert(team.clone(), ids);
            } else {
                assert!(ids.is_empty(), "qa has no agentic records");
            }
        }
    }
    let facts_targetless: Vec<String> = facts["env"]["poc"]["subscriptionsWithoutTarget"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "AgenticSubscription")
        .map(|s| format!("{}/{}", s["namespace"].as_str().unwrap(), s["name"].as_str().unwrap()))
        .collect();
    assert_eq!(targetless, facts_targetless);
    assert_eq!(targetless, ["poc--logistics--fleet/fleet-planner--mcp-weather-v1"]);

    // A second team sees none of the first team's records: lists, counts and node(id).
    let (first, second) = ("assist--copilot", "payments--ledger");
    assert_eq!(ids_by_team[first].len(), 3);
    let token = support::team_token(second, "poc");
    let data = server.query(&token, LISTS).await;
    assert_eq!((data["agenticExposures"]["totalCount"].clone(), data["agenticSubscriptions"]["totalCount"].clone()), (json!(0), json!(0)));
    for id in &ids_by_team[first] {
        let (data, errors) = server.query_raw(&token, "query($id: ID!) { node(id: $id) { id } }", json!({"id": id})).await;
        assert_eq!(data["node"], Value::Null, "{id}");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0]["extensions"]["code"], "NOT_FOUND");
        let (data, _) =
            server.query_raw(&support::team_token(first, "poc"), "query($id: ID!) { node(id: $id) { id } }", json!({"id": id})).await;
        assert_eq!(data["node"]["id"], json!(id), "the owner resolves its own ID");
    }
    // Every other team is just as blind to every team's agentic records.
    for (owner, ids) in &ids_by_team {
        for (other, other_ids) in &ids_by_team {
            if owner != other {
                assert!(ids.iter().all(|id| !other_ids.contains(id)), "{owner} / {other}");
            }
        }
    }
    server.stop().await;
}

/// The reduced cross-tenant views over HTTP: `AgenticExposureInfo` as a subscription's target and
/// a catalogue entry's `activeExposure`, `AgenticSubscriptionInfo` in `AgenticExposure.subscriptions`
/// and as `Approval.subscription` (`... on AgenticSubscriptionInfo`), the target-less
/// subscription's `target: null` without error, and `gatewayURL` from the subscription status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentic_info_views_and_approvals_over_http() {
    let server = Server::start(&support::world_dir(), None).await;
    let facts = facts();

    let fleet = support::team_token("logistics--fleet", "poc");
    let (data, errors) = server
        .query_raw(&fleet, "{ agenticSubscriptions { edges { node { name basePath gatewayURL statusPhase target { id } } } } }", json!({}))
        .await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        nodes(&data["agenticSubscriptions"]),
        vec![
            json!({"name": "fleet-planner--mcp-weather-v1", "basePath": "/mcp/weather/v1", "gatewayURL": null, "statusPhase": "PENDING", "target": null})
        ]
    );

    let copilot = support::team_token("assist--copilot", "poc");
    let data = server
        .query(
            &copilot,
            r#"{ agenticSubscriptions(where: {name: "copilot-gateway--mcp-parcels-v1"}) { edges { node { gatewayURL requestedScopes activeScopes
                   target { __typename basePath visibility variant active approvalConfig { strategy trustedTeams }
                            ownerApplicationName ownerTeam { name } ownerApplication { name zone { name } ownerTeam { name groupName } } } } } }
                 agenticExposures { edges { node { basePath agentCard { name displayName } mcpServer { name }
                   subscriptions { __typename basePath statusPhase ownerApplicationName ownerApplication { name ownerTeam { name } } } } } }
                 agentCards(where: {name: "agents-copilot-v1"}) { edges { node { activeExposure { basePath variant ownerApplication { name } } } } } }"#,
        )
        .await;
    let s = &nodes(&data["agenticSubscriptions"])[0];
    assert_eq!(s["gatewayURL"], "https://ai.aws-eu1.poc.example.com/mcp/parcels/v1");
    assert_eq!((s["requestedScopes"].clone(), s["activeScopes"].clone()), (json!(["parcels:read"]), Value::Null));
    assert_eq!(
        s["target"],
        json!({"__typename": "AgenticExposureInfo", "basePath": "/mcp/parcels/v1", "visibility": "ENTERPRISE", "variant": "MCP", "active": true,
               "approvalConfig": {"strategy": "SIMPLE", "trustedTeams": ["logistics--parcel-tracking"]},
               "ownerApplicationName": "parcel-tracker", "ownerTeam": {"name": "logistics--parcel-tracking"},
               "ownerApplication": {"name": "parcel-tracker", "zone": {"name": "aws-eu1"}, "ownerTeam": {"name": "logistics--parcel-tracking", "groupName": "logistics"}}})
    );
    let e = &nodes(&data["agenticExposures"])[0];
    assert_eq!(e["basePath"], "/agents/copilot/v1");
    assert_eq!(
        (e["agentCard"].clone(), e["mcpServer"].clone()),
        (json!({"name": "agents-copilot-v1", "displayName": "Customer Copilot"}), Value::Null)
    );
    // Subscribers of copilot's agent, from every team's facts (another tenant's included).
    let mut expected = BTreeSet::new();
    for (team, t) in facts["env"]["poc"]["teams"].as_object().unwrap() {
        for sub in t["subscriptions"]["AgenticSubscription"].as_array().unwrap() {
            if sub["target"] == "poc--assist--copilot/copilot-agent--agents-copilot-v1" {
                expected.insert(format!("{team}/{}", sub["name"].as_str().unwrap().split_once("--").unwrap().0));
            }
        }
    }
    assert_eq!(expected.len(), 2);
    let subs = e["subscriptions"].as_array().unwrap();
    let got: BTreeSet<String> = subs
        .iter()
        .map(|x| {
            format!("{}/{}", x["ownerApplication"]["ownerTeam"]["name"].as_str().unwrap(), x["ownerApplicationName"].as_str().unwrap())
        })
        .collect();
    assert_eq!(got, expected);
    assert!(subs.iter().all(|x| x["__typename"] == "AgenticSubscriptionInfo" && x["basePath"] == "/agents/copilot/v1"));
    let phases: BTreeSet<String> = subs.iter().map(|x| x["statusPhase"].as_str().unwrap().to_string()).collect();
    assert_eq!(phases, set(["READY".to_string(), "PENDING".to_string()]));
    assert_eq!(
        nodes(&data["agentCards"])[0]["activeExposure"],
        json!({"basePath": "/agents/copilot/v1", "variant": "AGENT", "ownerApplication": {"name": "copilot-agent"}})
    );

    // Approvals of agentic subscriptions: projected, visible to both sides per the facts, and
    // `subscription` resolves to the reduced agentic view.
    let agentic = agentic_targeted();
    assert_eq!(agentic.len(), 3 + 5, "three approvals and five requests");
    // Approvals are applied before subscriptions at start (registry order), so those of agentic
    // subscriptions may arrive one retry delay (DEPENDENCY_DELAY + jitter) after readiness.
    let admin = support::token("platform--ops--console", "tardis:admin:all", "poc");
    let all = "{ approvals { edges { node { namespace name } } } approvalRequests { edges { node { namespace name } } } }";
    eventually(&server, &admin, all, "every agentic approval is projected", |d| {
        let seen: BTreeSet<String> = ["approvals", "approvalRequests"]
            .iter()
            .flat_map(|k| nodes(&d[*k]))
            .map(|n| format!("{}/{}", n["namespace"].as_str().unwrap(), n["name"].as_str().unwrap()))
            .collect();
        agentic.is_subset(&seen)
    })
    .await;
    let q = r#"{ approvals { edges { node { namespace name subscription { __typename id ... on AgenticSubscriptionInfo { basePath ownerApplication { name } } } } } }
                 approvalRequests { edges { node { namespace name subscription { __typename ... on AgenticSubscriptionInfo { basePath } } } } } }"#;
    for (team, t) in facts["env"]["poc"]["teams"].as_object().unwrap() {
        let data = server.query(&support::team_token(team, "poc"), q).await;
        for (field, fact) in [("approvals", "approvalsVisible"), ("approvalRequests", "approvalRequestsVisible")] {
            let seen: BTreeSet<String> = nodes(&data[field])
                .iter()
                .filter(|n| n["subscription"]["__typename"] == "AgenticSubscriptionInfo")
                .map(|n| format!("{}/{}", n["namespace"].as_str().unwrap(), n["name"].as_str().unwrap()))
                .collect();
            let expected: BTreeSet<String> =
                t[fact].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).filter(|n| agentic.contains(n)).collect();
            assert_eq!(seen, expected, "{team} {field}");
        }
    }
    let data = server
        .query(
            &copilot,
            r#"{ approvals(where: {name: "agenticsubscription--copilot-gateway--agents-copilot-v1"}) { edges { node {
                state subscription { __typename id ... on AgenticSubscriptionInfo { basePath statusPhase ownerApplication { name ownerTeam { name } } } } } } } }"#,
        )
        .await;
    let a = &nodes(&data["approvals"])[0];
    assert_eq!(a["state"], "GRANTED");
    let sub = &a["subscription"];
    assert_eq!(sub["__typename"], "AgenticSubscriptionInfo");
    assert_eq!(sub["basePath"], "/agents/copilot/v1");
    assert_eq!(sub["statusPhase"], "READY");
    assert_eq!(sub["ownerApplication"], json!({"name": "copilot-gateway", "ownerTeam": {"name": "assist--copilot"}}));
    let own = server
        .query(
            &copilot,
            r#"{ agenticSubscriptions(where: {name: "copilot-gateway--agents-copilot-v1"}) { edges { node { id approval { name } } } } }"#,
        )
        .await;
    let node = &nodes(&own["agenticSubscriptions"])[0];
    assert_eq!(node["id"], sub["id"]);
    assert_eq!(node["approval"]["name"], "agenticsubscription--copilot-gateway--agents-copilot-v1");
    server.stop().await;
}

/// Asks `query` again after each change the server reports until `done(data)` holds.
async fn eventually(server: &Server, token: &str, query: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    support::eventually(server.running().app(), what, async || {
        let data = server.query(token, query).await;
        done(&data).then_some(data)
    })
    .await
}

/// `namespace/name` of every Approval and ApprovalRequest of the world whose target is an
/// AgenticSubscription.
fn agentic_targeted() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(support::world_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            for d in serde_saphyr::from_multiple::<Value>(&std::fs::read_to_string(&path).unwrap()).unwrap() {
                if (d["kind"] == "Approval" || d["kind"] == "ApprovalRequest") && d["spec"]["target"]["kind"] == "AgenticSubscription" {
                    out.insert(format!("{}/{}", d["metadata"]["namespace"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap()));
                }
            }
        }
    }
    out
}
