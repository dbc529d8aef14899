//! GraphQL over the agentic kinds — McpServer, AgentCard (catalogue), AgenticExposure and
//! AgenticSubscription — checked against the example world's facts (`examples/world.facts.json`):
//! team isolation of lists, counts, `node` and nested edges; the catalogue (visible to every
//! viewer of the environment, one active entry per base path, names and display names); the
//! catalogue ↔ exposure links; subscription targets and the target-less subscription; the
//! cross-tenant `AgenticExposureInfo` / `AgenticSubscriptionInfo` views; approvals of agentic
//! subscriptions; secrets and requested/active scopes; re-linking when exposures change.

mod support;

use async_graphql::Request;
use query::viewer::Viewer;
use query::QueryConfig;
use schema::KindId;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use storage::{SourceRef, Store};
use support::{admin, error_codes, facts, nodes, reference_time, strings, team_viewer, viewer, world_documents, World};

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

/// `namespace/name` of every `kind` (Approval, ApprovalRequest) manifest of `env` whose
/// subscription is an AgenticSubscription.
fn agentic_targeted(kind: &str, env: &str) -> BTreeSet<String> {
    world_documents()
        .into_iter()
        .filter(|d| d["kind"] == kind && d["spec"]["target"]["kind"] == "AgenticSubscription")
        .map(|d| format!("{}/{}", d["metadata"]["namespace"].as_str().unwrap(), d["metadata"]["name"].as_str().unwrap()))
        .filter(|k| k.starts_with(&format!("{env}--")))
        .collect()
}

/// Exposure IDs by `namespace/<owner app>--…` prefix and base path, as the admin sees them:
/// `(namespace, owner application, basePath) → id`.
async fn exposure_ids(w: &World) -> BTreeMap<(String, String, String), String> {
    let data = w.data(&admin(), "{ agenticExposures { edges { node { id namespace basePath owner { name } } } } }").await;
    nodes(&data["agenticExposures"])
        .iter()
        .map(|n| {
            let k = (n["namespace"].as_str().unwrap(), n["owner"]["name"].as_str().unwrap(), n["basePath"].as_str().unwrap());
            ((k.0.to_string(), k.1.to_string(), k.2.to_string()), n["id"].as_str().unwrap().to_string())
        })
        .collect()
}

/// The `(namespace, application, basePath)` of a facts target `<ns>/<app>--<rest>` with `key`.
fn target_of(target: &str, key: &Value) -> (String, String, String) {
    let (ns, name) = target.split_once('/').unwrap();
    let app = name.split_once("--").unwrap().0;
    (ns.to_string(), app.to_string(), key.as_str().unwrap().to_string())
}

const TEAM_LISTS: &str = r#"{
  agenticExposures { totalCount edges { node { id namespace environment basePath active owner { name } } } }
  agenticSubscriptions { totalCount edges { node { id namespace environment name basePath
    target { id basePath active ownerApplication { name ownerTeam { name } } } } } }
}"#;

/// Every team of both environments sees exactly its own agentic exposures and subscriptions
/// with matching `totalCount`, the targets the facts name, and `null` without error for the
/// target-less subscription.
#[tokio::test]
async fn team_sees_exactly_its_agentic_exposures_and_subscriptions() {
    let w = World::load();
    let facts = facts();
    let ids = exposure_ids(&w).await;
    let mut targetless = 0;
    for env in ["poc", "qa"] {
        for team in teams(&facts, env) {
            let t = &facts["env"][env]["teams"][&team];
            let r = w.run(&team_viewer(&team, env), TEAM_LISTS).await;
            assert_eq!(error_codes(&r), Vec::<String>::new(), "{env} {team}: {r:#}");
            let data = &r["data"];
            let ns = format!("{env}--{team}");

            let facts_exposures = t["exposures"]["AgenticExposure"].as_array().unwrap();
            let expected: BTreeSet<(String, bool)> =
                facts_exposures.iter().map(|e| (e["key"].as_str().unwrap().to_string(), e["active"].as_bool().unwrap())).collect();
            let exposures = nodes(&data["agenticExposures"]);
            let got: BTreeSet<(String, bool)> =
                exposures.iter().map(|e| (e["basePath"].as_str().unwrap().to_string(), e["active"].as_bool().unwrap())).collect();
            assert_eq!(got, expected, "{env} {team} exposures");
            assert_eq!(data["agenticExposures"]["totalCount"], json!(expected.len()), "{env} {team}");
            for e in &exposures {
                assert_eq!((e["namespace"].as_str(), e["environment"].as_str()), (Some(ns.as_str()), Some(env)));
                let fact = facts_exposures.iter().find(|f| f["key"] == e["basePath"]).unwrap();
                let app = e["owner"]["name"].as_str().unwrap();
                assert!(fact["name"].as_str().unwrap().starts_with(&format!("{app}--")), "{env} {team}: owner {app} of {fact}");
            }

            let facts_subs = t["subscriptions"]["AgenticSubscription"].as_array().unwrap();
            let subs = nodes(&data["agenticSubscriptions"]);
            let expected = set(facts_subs.iter().map(|s| s["name"].as_str().unwrap()));
            assert_eq!(set(strings(&json!(subs), "name")), expected, "{env} {team} subscriptions");
            assert_eq!(data["agenticSubscriptions"]["totalCount"], json!(expected.len()), "{env} {team}");
            for s in &subs {
                let fact = facts_subs.iter().find(|f| f["name"] == s["name"]).unwrap();
                assert_eq!((s["namespace"].as_str(), s["environment"].as_str()), (Some(ns.as_str()), Some(env)));
                assert_eq!(s["basePath"], fact["key"]);
                match fact["target"].as_str() {
                    None => {
                        targetless += 1;
                        assert_eq!(s["target"], Value::Null, "{env} {team} {}", s["name"]);
                    }
                    Some(target) => {
                        let (target_ns, app, key) = target_of(target, &fact["key"]);
                        let info = &s["target"];
                        assert_eq!(info["id"].as_str(), Some(ids[&(target_ns.clone(), app.clone(), key)].as_str()), "{target}");
                        assert_eq!(info["basePath"], fact["key"]);
                        assert_eq!(info["active"], true);
                        assert_eq!(info["ownerApplication"]["name"].as_str(), Some(app.as_str()));
                        assert_eq!(info["ownerApplication"]["ownerTeam"]["name"].as_str(), target_ns.split_once("--").map(|x| x.1));
                    }
                }
            }
        }
    }
    let facts_targetless = facts["env"]["poc"]["subscriptionsWithoutTarget"].as_array().unwrap();
    assert_eq!(targetless, facts_targetless.iter().filter(|s| s["kind"] == "AgenticSubscription").count());
    assert_eq!(targetless, 1);
}

/// A second team sees none of a team's agentic records: not in lists or counts, and `node` with
/// their IDs answers null plus `NOT_FOUND`, while the owner resolves them.
#[tokio::test]
async fn other_teams_agentic_records_are_invisible() {
    let w = World::load();
    let copilot = team_viewer("assist--copilot", "poc");
    let data = w.data(&copilot, TEAM_LISTS).await;
    let ids: Vec<String> = nodes(&data["agenticExposures"])
        .iter()
        .chain(nodes(&data["agenticSubscriptions"]).iter())
        .map(|n| n["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3, "one exposure and two subscriptions");

    // payments--ledger owns no agentic record at all.
    let ledger = team_viewer("payments--ledger", "poc");
    let data = w.data(&ledger, TEAM_LISTS).await;
    assert_eq!((data["agenticExposures"]["totalCount"].clone(), data["agenticSubscriptions"]["totalCount"].clone()), (json!(0), json!(0)));
    assert!(nodes(&data["agenticExposures"]).is_empty() && nodes(&data["agenticSubscriptions"]).is_empty());
    // A filter cannot reach another team's rows either.
    let data = w.data(&ledger, r#"{ agenticSubscriptions(where: {nameHasPrefix: "copilot"}) { totalCount } }"#).await;
    assert_eq!(data["agenticSubscriptions"]["totalCount"], 0);

    // Not even the provider of the target sees a subscriber's subscription (only its Info).
    let provider = team_viewer("logistics--parcel-tracking", "poc");
    for viewer in [&ledger, &provider] {
        for id in &ids {
            let r = w.run(viewer, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
            assert_eq!(r["data"]["node"], Value::Null, "{id}");
            assert_eq!(error_codes(&r), vec!["NOT_FOUND"], "{id}");
        }
    }
    for id in &ids {
        let own = w.data(&copilot, &format!(r#"{{ node(id: "{id}") {{ id __typename }} }}"#)).await;
        assert_eq!(own["node"]["id"].as_str(), Some(id.as_str()));
        assert!(own["node"]["__typename"].as_str().unwrap().starts_with("Agentic"));
    }
}

const CATALOGUE: &str = r#"{
  mcpServers { totalCount edges { node { id name displayName basePath version active environment namespace hash
    oauth2Scopes category description specificationUrl statusPhase owner { name groupName } } } }
  agentCards { totalCount edges { node { id name displayName basePath version active environment namespace hash
    oauth2Scopes category description specificationUrl statusPhase owner { name groupName } } } }
  activeMcp: mcpServers(where: {active: true}) { totalCount edges { node { basePath owner { name } } } }
  activeAgents: agentCards(where: {active: true}) { totalCount edges { node { basePath owner { name } } } }
}"#;

/// `(key, team, name, displayName, active)` of a catalogue table of the facts.
fn catalogue_rows(facts: &Value, env: &str, table: &str) -> BTreeSet<(String, String, String, String, bool)> {
    facts["env"][env]["catalogue"][table]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_string();
            (s("key"), s("team"), s("name"), s("displayName"), e["active"].as_bool().unwrap())
        })
        .collect()
}

fn node_rows(connection: &Value) -> BTreeSet<(String, String, String, String, bool)> {
    nodes(connection)
        .iter()
        .map(|n| {
            let s = |v: &Value| v.as_str().unwrap().to_string();
            (s(&n["basePath"]), s(&n["owner"]["name"]), s(&n["name"]), s(&n["displayName"]), n["active"].as_bool().unwrap())
        })
        .collect()
}

/// Every viewer of an environment sees its whole catalogue (names and display names per the
/// facts' tables), `where: {active: true}` yields one entry per base path, and the other
/// environment sees none of it.
#[tokio::test]
async fn catalogue_is_visible_to_every_viewer_of_its_environment() {
    let w = World::load();
    let facts = facts();
    for env in ["poc", "qa"] {
        let mcp = catalogue_rows(&facts, env, "mcpServers");
        let agents = catalogue_rows(&facts, env, "agentCards");
        for team in teams(&facts, env) {
            let data = w.data(&team_viewer(&team, env), CATALOGUE).await;
            assert_eq!(node_rows(&data["mcpServers"]), mcp, "{env} {team} mcpServers");
            assert_eq!(data["mcpServers"]["totalCount"], json!(mcp.len()));
            assert_eq!(node_rows(&data["agentCards"]), agents, "{env} {team} agentCards");
            assert_eq!(data["agentCards"]["totalCount"], json!(agents.len()));
            for (list, all) in [("activeMcp", &mcp), ("activeAgents", &agents)] {
                let active = strings(&json!(nodes(&data[list])), "basePath");
                let keys: BTreeSet<String> = all.iter().map(|r| r.0.clone()).collect();
                assert_eq!(active.len(), keys.len(), "{env} {team} {list}: one active entry per base path");
                assert_eq!(set(active), keys);
                let owners: BTreeSet<(String, String)> = nodes(&data[list])
                    .iter()
                    .map(|n| (n["basePath"].as_str().unwrap().into(), n["owner"]["name"].as_str().unwrap().into()))
                    .collect();
                let expected: BTreeSet<(String, String)> = all.iter().filter(|r| r.4).map(|r| (r.0.clone(), r.1.clone())).collect();
                assert_eq!(owners, expected, "{env} {team} {list}");
            }
            for n in nodes(&data["mcpServers"]).iter().chain(nodes(&data["agentCards"]).iter()) {
                assert_eq!(n["environment"], env);
                assert_eq!(n["namespace"].as_str().map(str::to_string), Some(format!("{env}--{}", n["owner"]["name"].as_str().unwrap())));
                let hash = n["hash"].as_str().unwrap();
                assert!(hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{hash}");
                assert_eq!(n["specificationUrl"], Value::Null);
                assert_eq!(n["owner"]["groupName"].as_str(), n["owner"]["name"].as_str().and_then(|t| t.split_once("--")).map(|x| x.0));
            }
        }
    }
    let poc = w.data(&team_viewer("payments--ledger", "poc"), CATALOGUE).await;
    let parcels = nodes(&poc["mcpServers"]).into_iter().find(|n| n["owner"]["name"] == "logistics--parcel-tracking").unwrap();
    assert_eq!(parcels["version"], "1.0.0");
    assert_eq!(parcels["oauth2Scopes"], json!(["parcels:read"]));
    assert_eq!(parcels["category"], "tool");
    assert_eq!(parcels["description"], "Look up parcel status and delivery windows.");
    assert_eq!(parcels["statusPhase"], "READY");
    // Computed independently: sha256 of the spec's canonical JSON.
    assert_eq!(parcels["hash"], "587b66b28b498962f0a9fb529095ba76fb0d7202c846bc9bb3e851fa04e028ff");
    let shadow = nodes(&poc["mcpServers"]).into_iter().find(|n| n["owner"]["name"] == "logistics--fleet").unwrap();
    assert_eq!((shadow["statusPhase"].as_str(), shadow["oauth2Scopes"].clone()), (Some("PENDING"), json!([])));
    let dispatch = nodes(&poc["agentCards"]).into_iter().find(|n| n["name"] == "agents-dispatch-v1").unwrap();
    assert_eq!(dispatch["hash"], "ecfe1decf1d25e9aa473ffc54cdfe25f0c42cbccf2742e8998ecf8866ebecefd");

    // The admin sees both environments; catalogue IDs of poc are NOT_FOUND for a qa viewer.
    let all = w.data(&admin(), "{ mcpServers { totalCount } agentCards { totalCount } }").await;
    let count = |k: &str| facts["env"]["poc"]["counts"][k].as_u64().unwrap() + facts["env"]["qa"]["counts"][k].as_u64().unwrap();
    assert_eq!(
        (all["mcpServers"]["totalCount"].as_u64(), all["agentCards"]["totalCount"].as_u64()),
        (Some(count("McpServer")), Some(count("AgentCard")))
    );
    let qa = team_viewer("payments--checkout", "qa");
    for n in nodes(&poc["mcpServers"]).iter().chain(nodes(&poc["agentCards"]).iter()) {
        let id = n["id"].as_str().unwrap();
        let r = w.run(&qa, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
        assert_eq!(error_codes(&r), vec!["NOT_FOUND"], "{id}");
        let own = w.data(&team_viewer("payments--ledger", "poc"), &format!(r#"{{ node(id: "{id}") {{ __typename id }} }}"#)).await;
        assert_eq!(own["node"]["id"].as_str(), Some(id));
    }
}

/// `Team.mcpServers` / `Team.agentCards` list the team's own registrations.
#[tokio::test]
async fn team_catalogue_edges() {
    let w = World::load();
    let facts = facts();
    let data = w
        .data(
            &admin(),
            r#"{ teams(where: {environment: "poc"}) { edges { node { name
                mcpServers { totalCount edges { node { basePath name active } } }
                activeMcp: mcpServers(where: {active: true}) { totalCount }
                agentCards(orderBy: {field: CREATED_AT, direction: DESC}) { totalCount edges { node { basePath name } } }
            } } } }"#,
        )
        .await;
    let teams = nodes(&data["teams"]);
    assert_eq!(teams.len(), 6);
    for t in teams {
        let team = t["name"].as_str().unwrap();
        for (field, table) in [("mcpServers", "mcpServers"), ("agentCards", "agentCards")] {
            let expected = set(catalogue_rows(&facts, "poc", table).into_iter().filter(|r| r.1 == team).map(|r| r.0));
            assert_eq!(set(strings(&json!(nodes(&t[field])), "basePath")), expected, "{team} {field}");
            assert_eq!(t[field]["totalCount"], json!(expected.len()));
        }
        let active = catalogue_rows(&facts, "poc", "mcpServers").into_iter().filter(|r| r.1 == team && r.4).count();
        assert_eq!(t["activeMcp"]["totalCount"], json!(active), "{team}");
    }
}

/// `AgenticExposure.mcpServer` / `agentCard` (the active catalogue entry, by variant),
/// `McpServer.activeExposure` / `AgentCard.activeExposure`, and `AgenticExposure.subscriptions`
/// listing every tenant's subscriptions of the exposure.
#[tokio::test]
async fn catalogue_and_exposure_links() {
    let w = World::load();
    let facts = facts();
    let q = r#"{ agenticExposures { edges { node { id basePath variant active owner { name }
        mcpServer { name displayName active owner { name } }
        agentCard { name displayName active owner { name } }
        subscriptions { id basePath statusPhase statusMessage ownerApplicationName ownerTeam { name } ownerApplication { name ownerTeam { name } } }
    } } } }"#;
    let all = w.data(&admin(), r#"{ agenticSubscriptions { edges { node { id namespace name } } } }"#).await;
    let by_id: BTreeMap<String, String> = nodes(&all["agenticSubscriptions"])
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_string(), format!("{}/{}", n["namespace"].as_str().unwrap(), n["name"].as_str().unwrap())))
        .collect();
    for team in teams(&facts, "poc") {
        let data = w.data(&team_viewer(&team, "poc"), q).await;
        for e in nodes(&data["agenticExposures"]) {
            let (base_path, variant) = (e["basePath"].as_str().unwrap(), e["variant"].as_str().unwrap());
            // The catalogue entry matching the variant; the other link is null.
            let (linked, other, table) =
                if variant == "AGENT" { ("agentCard", "mcpServer", "agentCards") } else { ("mcpServer", "agentCard", "mcpServers") };
            assert_eq!(e[other], Value::Null, "{team} {base_path}");
            let entry = catalogue_rows(&facts, "poc", table).into_iter().find(|r| r.0 == base_path && r.4).unwrap();
            assert_eq!(e[linked], json!({"name": entry.2, "displayName": entry.3, "active": true, "owner": {"name": entry.1}}));

            // Subscribers of this exposure, from every team's facts (only the active one has any).
            let exposure_ns = format!("poc--{team}");
            let owner = e["owner"]["name"].as_str().unwrap().to_string();
            let mut expected = BTreeSet::new();
            for sub_team in teams(&facts, "poc") {
                for s in facts["env"]["poc"]["teams"][&sub_team]["subscriptions"]["AgenticSubscription"].as_array().unwrap() {
                    if let Some(target) = s["target"].as_str() {
                        if target_of(target, &s["key"]) == (exposure_ns.clone(), owner.clone(), base_path.to_string()) {
                            expected.insert(format!("poc--{sub_team}/{}", s["name"].as_str().unwrap()));
                        }
                    }
                }
            }
            let subs = e["subscriptions"].as_array().unwrap();
            assert_eq!(set(subs.iter().map(|s| by_id[s["id"].as_str().unwrap()].clone())), expected, "{team} {base_path}");
            if e["active"] == false {
                assert!(subs.is_empty());
            }
            for s in subs {
                assert_eq!(s["basePath"], base_path);
                let sub_team = by_id[s["id"].as_str().unwrap()].split('/').next().unwrap().split_once("--").unwrap().1.to_string();
                assert_eq!(s["ownerApplication"]["ownerTeam"]["name"].as_str(), Some(sub_team.as_str()));
                assert_eq!(s["ownerTeam"]["name"].as_str(), Some(sub_team.as_str()));
                assert_eq!(s["ownerApplicationName"], s["ownerApplication"]["name"]);
            }
        }
    }

    let data = w
        .data(
            &team_viewer("payments--checkout", "poc"),
            r#"{ mcpServers { edges { node { basePath owner { name } activeExposure {
                    __typename basePath variant visibility active approvalConfig { strategy trustedTeams }
                    traffic { rateLimit { provider { limits { minute } options { hideClientHeaders faultTolerant } } } }
                    ownerApplicationName ownerTeam { name } ownerApplication { name zone { name } ownerTeam { name } } } } } }
                 agentCards { edges { node { basePath activeExposure { basePath variant ownerApplication { name } } } } } }"#,
        )
        .await;
    let exposure_of = |list: &str, base_path: &str, owner: &str| {
        nodes(&data[list]).into_iter().find(|n| n["basePath"] == base_path && (owner.is_empty() || n["owner"]["name"] == owner)).unwrap()
            ["activeExposure"]
            .clone()
    };
    let knowledge = exposure_of("mcpServers", "/mcp/knowledge/v1", "");
    assert_eq!(
        knowledge,
        json!({"__typename": "AgenticExposureInfo", "basePath": "/mcp/knowledge/v1", "variant": "TELECONTEXTMCP", "visibility": "WORLD",
               "active": true, "approvalConfig": {"strategy": "AUTO", "trustedTeams": ["assist--knowledge"]},
               "traffic": {"rateLimit": {"provider": {"limits": {"minute": 600}, "options": {"hideClientHeaders": true, "faultTolerant": true}}}},
               "ownerApplicationName": "knowledge-base", "ownerTeam": {"name": "assist--knowledge"},
               "ownerApplication": {"name": "knowledge-base", "zone": {"name": "aws-eu1"}, "ownerTeam": {"name": "assist--knowledge"}}})
    );
    // Both registrations of /mcp/parcels/v1 name the one active exposure; an entry that is not
    // exposed has none.
    for owner in ["logistics--parcel-tracking", "logistics--fleet"] {
        let e = exposure_of("mcpServers", "/mcp/parcels/v1", owner);
        assert_eq!((e["variant"].as_str(), e["ownerApplicationName"].as_str()), (Some("MCP"), Some("parcel-tracker")), "{owner}");
    }
    assert_eq!(exposure_of("mcpServers", "/mcp/orders/v1", ""), Value::Null);
    let agents = |bp: &str| nodes(&data["agentCards"]).into_iter().find(|n| n["basePath"] == bp).unwrap()["activeExposure"].clone();
    assert_eq!(
        agents("/agents/copilot/v1"),
        json!({"basePath": "/agents/copilot/v1", "variant": "AGENT", "ownerApplication": {"name": "copilot-agent"}})
    );
    assert_eq!(agents("/agents/dispatch/v1"), Value::Null);
}

/// Approvals and approval requests of agentic subscriptions are projected, visible to the
/// subscriber's and the provider's team (facts), and resolve `subscription` to an
/// `AgenticSubscriptionInfo`.
#[tokio::test]
async fn approvals_of_agentic_subscriptions() {
    let w = World::load();
    let facts = facts();
    let q = r#"{
      approvals { edges { node { namespace name subscription { __typename id ... on AgenticSubscriptionInfo { basePath } } } } }
      approvalRequests { edges { node { namespace name subscription { __typename } } } }
    }"#;
    let approvals = agentic_targeted("Approval", "poc");
    let requests = agentic_targeted("ApprovalRequest", "poc");
    assert_eq!((approvals.len(), requests.len()), (3, 5));
    let all = w.data(&admin(), q).await;
    let agentic_of = |d: &Value, list: &str| -> BTreeSet<String> {
        nodes(&d[list])
            .into_iter()
            .filter(|n| n["subscription"]["__typename"] == "AgenticSubscriptionInfo")
            .map(|n| format!("{}/{}", n["namespace"].as_str().unwrap(), n["name"].as_str().unwrap()))
            .collect()
    };
    assert_eq!(agentic_of(&all, "approvals"), approvals);
    assert_eq!(agentic_of(&all, "approvalRequests"), requests);
    for team in teams(&facts, "poc") {
        let t = &facts["env"]["poc"]["teams"][&team];
        let data = w.data(&team_viewer(&team, "poc"), q).await;
        let expected: BTreeSet<String> = str_list(&t["approvalsVisible"]).into_iter().filter(|a| approvals.contains(a)).collect();
        assert_eq!(agentic_of(&data, "approvals"), expected, "{team} approvals");
        let expected: BTreeSet<String> = str_list(&t["approvalRequestsVisible"]).into_iter().filter(|a| requests.contains(a)).collect();
        assert_eq!(agentic_of(&data, "approvalRequests"), expected, "{team} approval requests");
    }

    // The provider team sees the approval and the reduced subscription, not the subscription.
    let provider = team_viewer("logistics--parcel-tracking", "poc");
    let data = w
        .data(
            &provider,
            r#"fragment Sub on SubscriptionInfo { id ownerApplication { name ownerTeam { name } } }
            { approvals(where: {name: "agenticsubscription--copilot-gateway--mcp-parcels-v1"}) { edges { node {
                strategy state requestedScopes deciderTeamName
                subscription { __typename ...Sub ... on AgenticSubscriptionInfo { basePath statusPhase statusMessage ownerApplicationName ownerTeam { name } } }
            } } } }"#,
        )
        .await;
    let a = &nodes(&data["approvals"])[0];
    assert_eq!((a["strategy"].as_str(), a["state"].as_str()), (Some("SIMPLE"), Some("GRANTED")));
    assert_eq!(a["requestedScopes"], json!(["parcels:read"]));
    assert_eq!(a["deciderTeamName"], "logistics--parcel-tracking");
    let sub = &a["subscription"];
    assert_eq!(sub["__typename"], "AgenticSubscriptionInfo");
    assert_eq!(sub["basePath"], "/mcp/parcels/v1");
    assert_eq!(sub["statusPhase"], "READY");
    assert_eq!(sub["statusMessage"], "Successfully provisioned subresources");
    assert_eq!(sub["ownerApplication"], json!({"name": "copilot-gateway", "ownerTeam": {"name": "assist--copilot"}}));
    assert_eq!(
        (sub["ownerApplicationName"].as_str(), sub["ownerTeam"]["name"].as_str()),
        (Some("copilot-gateway"), Some("assist--copilot"))
    );
    let id = sub["id"].as_str().unwrap();
    let r = w.run(&provider, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
    assert_eq!(error_codes(&r), vec!["NOT_FOUND"]);

    // The subscriber reaches approval and requests from the subscription.
    let data = w
        .data(
            &team_viewer("assist--copilot", "poc"),
            r#"{ agenticSubscriptions(where: {name: "copilot-gateway--mcp-parcels-v1"}) { edges { node { id
                approval { name state subscription { id } } approvalRequests { name state }
            } } } }"#,
        )
        .await;
    let s = &nodes(&data["agenticSubscriptions"])[0];
    assert_eq!(s["id"].as_str(), Some(id));
    assert_eq!(
        s["approval"],
        json!({"name": "agenticsubscription--copilot-gateway--mcp-parcels-v1", "state": "GRANTED", "subscription": {"id": id}})
    );
    assert_eq!(s["approvalRequests"], json!([{"name": "copilot-gateway--mcp-parcels-v1--5d54cbcf99", "state": "GRANTED"}]));
}

/// `Application.agenticExposures` / `agenticSubscriptions`, field values of the world and the
/// filters of the new where inputs.
#[tokio::test]
async fn application_edges_fields_and_filters() {
    let w = World::load();
    let facts = facts();
    let copilot = team_viewer("assist--copilot", "poc");
    let data = w
        .data(
            &copilot,
            r#"{ applications { edges { node { name
                agenticExposures { totalCount edges { node { basePath variant visibility active statusPhase upstreams { url weight }
                    approvalConfig { strategy trustedTeams } security { m2m { scopes } } traffic { failover { zones } rateLimit { provider { limits { second } } } } } } }
                agenticSubscriptions(orderBy: {field: CREATED_AT}) { totalCount edges { node { name basePath gatewayURL statusPhase
                    requestedScopes activeScopes security { m2m { scopes } } owner { name } createdAt } } }
            } } } }"#,
        )
        .await;
    let t = &facts["env"]["poc"]["teams"]["assist--copilot"];
    for app in nodes(&data["applications"]) {
        let name = app["name"].as_str().unwrap();
        let prefix = format!("{name}--");
        let exposed = set(t["exposures"]["AgenticExposure"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"].as_str().unwrap().starts_with(&prefix))
            .map(|e| e["key"].as_str().unwrap()));
        assert_eq!(set(strings(&json!(nodes(&app["agenticExposures"])), "basePath")), exposed, "{name}");
        assert_eq!(app["agenticExposures"]["totalCount"], json!(exposed.len()));
        let subscribed = set(t["subscriptions"]["AgenticSubscription"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .filter(|n| n.starts_with(&prefix)));
        assert_eq!(set(strings(&json!(nodes(&app["agenticSubscriptions"])), "name")), subscribed, "{name}");
        assert_eq!(app["agenticSubscriptions"]["totalCount"], json!(subscribed.len()));
    }
    let apps = nodes(&data["applications"]);
    let agent = apps.iter().find(|a| a["name"] == "copilot-agent").unwrap();
    let e = &nodes(&agent["agenticExposures"])[0];
    assert_eq!(
        *e,
        json!({"basePath": "/agents/copilot/v1", "variant": "AGENT", "visibility": "ENTERPRISE", "active": true, "statusPhase": "READY",
               "upstreams": [{"url": "https://copilot-a.assist.poc.example.com/a2a", "weight": 50}, {"url": "https://copilot-b.assist.poc.example.com/a2a", "weight": 50}],
               "approvalConfig": {"strategy": "FOUR_EYES", "trustedTeams": ["assist--copilot"]}, "security": null,
               "traffic": {"failover": null, "rateLimit": null}})
    );
    let gateway = apps.iter().find(|a| a["name"] == "copilot-gateway").unwrap();
    let subs = nodes(&gateway["agenticSubscriptions"]);
    // CREATED_AT ASC: /mcp/parcels/v1 (May 25) before /agents/copilot/v1 (May 30).
    assert_eq!(strings(&json!(subs), "name"), ["copilot-gateway--mcp-parcels-v1", "copilot-gateway--agents-copilot-v1"]);
    assert_eq!(subs[0]["gatewayURL"], "https://ai.aws-eu1.poc.example.com/mcp/parcels/v1");
    assert_eq!(subs[0]["requestedScopes"], json!(["parcels:read"]));
    assert_eq!(subs[0]["activeScopes"], Value::Null);
    // Deprecated, still the requested scopes.
    assert_eq!(subs[0]["security"], json!({"m2m": {"scopes": ["parcels:read"]}}));
    assert_eq!(subs[1]["security"], Value::Null);
    assert_eq!(subs[1]["requestedScopes"], Value::Null);
    assert_eq!(subs[1]["owner"]["name"], "copilot-gateway");
    assert_eq!(subs[1]["createdAt"], "2026-05-30T02:33:00Z");

    let tracker = w
        .data(
            &team_viewer("logistics--parcel-tracking", "poc"),
            r#"{ agenticExposures { edges { node { security { m2m { scopes basic { username } externalIDP { tokenEndpoint } } } } } }
                 agenticSubscriptions { edges { node { name statusPhase statusMessage gatewayURL } } } }"#,
        )
        .await;
    assert_eq!(
        nodes(&tracker["agenticExposures"])[0]["security"],
        json!({"m2m": {"scopes": ["parcels:read"], "basic": null, "externalIDP": null}})
    );
    assert_eq!(
        nodes(&tracker["agenticSubscriptions"]),
        vec![json!({"name": "parcel-notifier--mcp-knowledge-v1", "statusPhase": "UNKNOWN", "statusMessage": "", "gatewayURL": null})]
    );

    // Filters over the whole poc environment (admin).
    let data = w
        .data(
            &admin(),
            r#"{ agents: agenticExposures(where: {variant: AGENT}) { edges { node { basePath } } }
                 mcp: agenticExposures(where: {variantIn: [MCP, TELECONTEXTMCP], active: true}) { totalCount }
                 inactive: agenticExposures(where: {active: false}) { edges { node { basePath namespace } } }
                 world: agenticExposures(where: {visibility: WORLD}) { edges { node { basePath } } }
                 pending: agenticSubscriptions(where: {statusPhase: PENDING}) { totalCount }
                 noGateway: agenticSubscriptions(where: {gatewayURLIsNil: true}) { totalCount }
                 parcels: agenticSubscriptions(where: {basePath: "/mcp/parcels/v1", environment: "poc"}) { edges { node { name } } }
                 tools: mcpServers(where: {categoryEqualFold: "TOOL", displayNameContains: "Parcel"}) { totalCount }
                 orders: mcpServers(where: {nameHasPrefix: "mcp-orders", descriptionNotNil: true}) { edges { node { displayName } } }
                 assistants: agentCards(where: {category: "assistant", versionHasPrefix: "1."}) { edges { node { name } } } }"#,
        )
        .await;
    assert_eq!(strings(&json!(nodes(&data["agents"])), "basePath"), ["/agents/copilot/v1"]);
    assert_eq!(data["mcp"]["totalCount"], 2);
    assert_eq!(nodes(&data["inactive"]), vec![json!({"basePath": "/mcp/parcels/v1", "namespace": "poc--logistics--fleet"})]);
    assert_eq!(strings(&json!(nodes(&data["world"])), "basePath"), ["/mcp/knowledge/v1"]);
    assert_eq!(data["pending"]["totalCount"], facts["env"]["poc"]["statusPhases"]["AgenticSubscription"]["PENDING"]);
    assert_eq!(data["noGateway"]["totalCount"], 4);
    assert_eq!(
        set(strings(&json!(nodes(&data["parcels"])), "name")),
        set(["copilot-gateway--mcp-parcels-v1", "knowledge-base--mcp-parcels-v1"])
    );
    assert_eq!(data["tools"]["totalCount"], 2);
    assert_eq!(nodes(&data["orders"]), vec![json!({"displayName": "Order Assistant Tools"})]);
    assert_eq!(strings(&json!(nodes(&data["assistants"])), "name"), ["agents-copilot-v1"]);

    // Secrets and JSON columns are not filterable.
    for q in [
        r#"{ agenticExposures(where: {security: "x"}) { totalCount } }"#,
        r#"{ agenticSubscriptions(where: {requestedScopes: "x"}) { totalCount } }"#,
        r#"{ mcpServers(where: {hash: "x"}) { totalCount } }"#,
    ] {
        assert!(!error_codes(&w.run(&copilot, q).await).is_empty(), "{q}");
    }
}

/// A store loaded from `docs` (the world plus changes), the schema over it, and the write path
/// for later changes.
struct Store2 {
    _dir: tempfile::TempDir,
    store: Store,
    api: query::Api,
}

impl Store2 {
    fn load(docs: &[Value]) -> Store2 {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        support::load(&store, docs);
        let api = query::build_schema(QueryConfig { now: Some(reference_time()), ..QueryConfig::default() }).unwrap();
        Store2 { _dir: dir, store, api }
    }

    async fn data(&self, viewer: &Viewer, q: &str) -> Value {
        let r = serde_json::to_value(self.api.execute(&self.store, viewer.clone(), Request::new(q)).await).unwrap();
        assert!(r.get("errors").is_none_or(|e| e.as_array().is_some_and(|a| a.is_empty())), "{q}: {r:#}");
        r["data"].clone()
    }

    fn delete(&self, kind: KindId, namespace: &str, name: &str) {
        self.store
            .write(reference_time(), |batch| {
                batch.delete(&SourceRef { kind, namespace: namespace.into(), name: name.into() }, reference_time()).unwrap();
                Ok(())
            })
            .unwrap();
    }
}

/// The world document of `kind` named `namespace/name`.
fn world_doc(kind: &str, namespace: &str, name: &str) -> Value {
    world_documents()
        .into_iter()
        .find(|d| d["kind"] == kind && d["metadata"]["namespace"] == namespace && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {namespace}/{name}"))
}

/// Secrets of agentic security blocks: plain for the owner, `**********` for obfuscated
/// callers; requested and active scopes come back distinctly.
#[tokio::test]
async fn secrets_and_scopes() {
    let mut docs = world_documents();
    for d in docs.iter_mut() {
        let name = d["metadata"]["name"].as_str().unwrap_or("").to_string();
        if d["kind"] == "AgenticExposure" && name == "parcel-tracker--mcp-parcels-v1" {
            d["spec"]["security"]["m2m"]["basic"] = json!({"username": "mcp-gw", "password": "$<poc:parcel:basic>"});
            d["spec"]["security"]["m2m"]["externalIDP"] = json!({"tokenEndpoint": "https://idp.example.com/token",
                "tokenRequest": "client_secret_post", "client": {"clientId": "mcp-idp", "clientSecret": "$<poc:parcel:idp>"}});
        }
        if d["kind"] == "AgenticSubscription" && name == "copilot-gateway--mcp-parcels-v1" {
            d["spec"]["security"]["m2m"]["client"] = json!({"clientId": "copilot-mcp", "clientSecret": "$<poc:copilot:client>"});
            d["spec"]["security"]["m2m"]["scopes"] = json!(["parcels:read", "parcels:write"]);
            d["status"]["activeScopes"] = json!(["parcels:read"]);
        }
    }
    let s = Store2::load(&docs);
    let exposure = r#"{ agenticExposures { edges { node { security { m2m { basic { username password }
        externalIDP { tokenEndpoint tokenRequest grantType client { clientId clientSecret clientKey } } } } } } } }"#;
    let plain = s.data(&team_viewer("logistics--parcel-tracking", "poc"), exposure).await;
    assert_eq!(
        nodes(&plain["agenticExposures"])[0]["security"]["m2m"],
        json!({"basic": {"username": "mcp-gw", "password": "$<poc:parcel:basic>"},
               "externalIDP": {"tokenEndpoint": "https://idp.example.com/token", "tokenRequest": "client_secret_post", "grantType": null,
                               "client": {"clientId": "mcp-idp", "clientSecret": "$<poc:parcel:idp>", "clientKey": null}}})
    );
    let masked = s.data(&viewer("logistics--parcel-tracking--console", "tardis:team:obfuscated", "poc"), exposure).await;
    let m2m = &nodes(&masked["agenticExposures"])[0]["security"]["m2m"];
    assert_eq!(m2m["basic"]["password"], "**********");
    assert_eq!(m2m["externalIDP"]["client"]["clientSecret"], "**********");

    let subscription = r#"{ agenticSubscriptions(where: {name: "copilot-gateway--mcp-parcels-v1"}) { edges { node {
        requestedScopes activeScopes security { m2m { scopes client { clientId clientSecret } } } } } } }"#;
    let plain = s.data(&team_viewer("assist--copilot", "poc"), subscription).await;
    let n = &nodes(&plain["agenticSubscriptions"])[0];
    assert_eq!(n["requestedScopes"], json!(["parcels:read", "parcels:write"]));
    assert_eq!(n["activeScopes"], json!(["parcels:read"]));
    assert_eq!(
        n["security"]["m2m"],
        json!({"scopes": ["parcels:read", "parcels:write"], "client": {"clientId": "copilot-mcp", "clientSecret": "$<poc:copilot:client>"}})
    );
    let masked = s.data(&viewer("assist--copilot--console", "tardis:group:obfuscated", "poc"), subscription).await;
    assert_eq!(nodes(&masked["agenticSubscriptions"])[0]["security"]["m2m"]["client"]["clientSecret"], "**********");
    // The provider sees neither the subscription nor its secrets.
    let provider = s.data(&team_viewer("logistics--parcel-tracking", "poc"), subscription).await;
    assert!(nodes(&provider["agenticSubscriptions"]).is_empty());
}

/// Subscriptions follow the active exposure of their base path: re-linked when another exposure
/// becomes active, linked when one appears for a target-less subscription, unlinked when it goes
/// away; approvals follow the provider team.
#[tokio::test]
async fn subscriptions_relink_when_exposures_change() {
    let s = Store2::load(&world_documents());
    let copilot = team_viewer("assist--copilot", "poc");
    let fleet = team_viewer("logistics--fleet", "poc");
    let parcel = team_viewer("logistics--parcel-tracking", "poc");
    let target = r#"{ agenticSubscriptions { edges { node { name target { basePath ownerApplication { name } } } } } }"#;
    let target_of = |data: &Value, name: &str| {
        nodes(&data["agenticSubscriptions"]).into_iter().find(|n| n["name"] == name).unwrap()["target"]["ownerApplication"]["name"].clone()
    };
    let approval = r#"{ approvals(where: {name: "agenticsubscription--copilot-gateway--mcp-parcels-v1"}) { totalCount } }"#;
    assert_eq!(target_of(&s.data(&copilot, target).await, "copilot-gateway--mcp-parcels-v1"), "parcel-tracker");
    assert_eq!(s.data(&parcel, approval).await["approvals"]["totalCount"], 1);
    assert_eq!(s.data(&fleet, approval).await["approvals"]["totalCount"], 0);

    // The fleet exposure becomes the active one, the parcel-tracking one inactive.
    let mut active = world_doc("AgenticExposure", "poc--logistics--fleet", "fleet-planner--mcp-parcels-v1");
    active["status"]["active"] = json!(true);
    let mut inactive = world_doc("AgenticExposure", "poc--logistics--parcel-tracking", "parcel-tracker--mcp-parcels-v1");
    inactive["status"]["active"] = json!(false);
    support::load(&s.store, &[inactive, active]);
    assert_eq!(target_of(&s.data(&copilot, target).await, "copilot-gateway--mcp-parcels-v1"), "fleet-planner");
    assert_eq!(s.data(&parcel, approval).await["approvals"]["totalCount"], 0, "the old provider no longer sees it");
    assert_eq!(s.data(&fleet, approval).await["approvals"]["totalCount"], 1, "the new provider does");
    let subs = s.data(&fleet, r#"{ agenticExposures { edges { node { subscriptions { ownerApplicationName } } } } }"#).await;
    assert_eq!(nodes(&subs["agenticExposures"])[0]["subscriptions"].as_array().unwrap().len(), 2);
    let subs = s.data(&parcel, r#"{ agenticExposures { edges { node { active subscriptions { id } } } } }"#).await;
    assert_eq!(nodes(&subs["agenticExposures"]), vec![json!({"active": false, "subscriptions": []})]);

    // An exposure for the target-less /mcp/weather/v1 appears, then goes away again.
    let mut weather = world_doc("AgenticExposure", "poc--logistics--fleet", "fleet-planner--mcp-parcels-v1");
    weather["metadata"]["name"] = json!("fleet-telemetry--mcp-weather-v1");
    weather["metadata"]["labels"]["cp.ei.telekom.de/application"] = json!("fleet-telemetry");
    weather["spec"]["basePath"] = json!("/mcp/weather/v1");
    weather["status"]["active"] = json!(true);
    support::load(&s.store, &[weather]);
    assert_eq!(target_of(&s.data(&fleet, target).await, "fleet-planner--mcp-weather-v1"), "fleet-telemetry");
    s.delete(KindId::AgenticExposure, "poc--logistics--fleet", "fleet-telemetry--mcp-weather-v1");
    assert_eq!(target_of(&s.data(&fleet, target).await, "fleet-planner--mcp-weather-v1"), Value::Null);
    assert_eq!(s.store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
}
