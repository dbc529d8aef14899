//! End to end over HTTP on the bundled world: the server started as the
//! binary starts it (manifests source, mock tokens), queried with real HTTP requests.
//!
//! Expectations come from `examples/world.facts.json`, not from hand-written lists.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeSet;
use support::{facts, names, Server};

fn set(v: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    v.into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_group_and_admin_isolation_over_http() {
    let server = Server::start(&support::world_dir(), None).await;
    let facts = facts();
    let poc = &facts["env"]["poc"];
    let list = "{ applications { totalCount edges { node { id name } } }
                  apiExposures { totalCount edges { node { id basePath } } }
                  apiSubscriptions { totalCount edges { node { id name } } } }";

    let teams: Vec<String> = poc["teams"].as_object().unwrap().keys().cloned().collect();
    let mut ids_by_team = std::collections::BTreeMap::new();
    for team in &teams {
        let t = &poc["teams"][team];
        let data = server.query(&support::team_token(team, "poc"), list).await;
        let apps = names(&data["applications"], "name");
        assert_eq!(set(apps.clone()), set(t["applications"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string())), "{team}");
        assert_eq!(data["applications"]["totalCount"], json!(apps.len()), "{team}");
        let exposures = names(&data["apiExposures"], "basePath");
        let expected: Vec<String> =
            t["exposures"]["ApiExposure"].as_array().unwrap().iter().map(|e| e["key"].as_str().unwrap().to_string()).collect();
        assert_eq!(set(exposures), set(expected), "{team} exposures");
        let subs = names(&data["apiSubscriptions"], "name");
        let expected: Vec<String> =
            t["subscriptions"]["ApiSubscription"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect();
        assert_eq!(set(subs), set(expected), "{team} subscriptions");
        let ids: Vec<String> = ["applications", "apiExposures", "apiSubscriptions"].iter().flat_map(|k| names(&data[k], "id")).collect();
        ids_by_team.insert(team.clone(), ids);
    }

    // A second team sees none of the first team's records: lists, counts and node(id).
    let (first, second) = ("payments--checkout", "logistics--fleet");
    let data = server.query(&support::team_token(second, "poc"), list).await;
    let seen: BTreeSet<String> = ["applications", "apiExposures", "apiSubscriptions"].iter().flat_map(|k| names(&data[k], "id")).collect();
    for id in &ids_by_team[first] {
        assert!(!seen.contains(id));
        let (data, errors) =
            server.query_raw(&support::team_token(second, "poc"), "query($id: ID!) { node(id: $id) { id } }", json!({"id": id})).await;
        assert_eq!(data["node"], Value::Null, "{id}");
        assert_eq!(errors[0]["extensions"]["code"], "NOT_FOUND");
        let (data, _) =
            server.query_raw(&support::team_token(first, "poc"), "query($id: ID!) { node(id: $id) { id } }", json!({"id": id})).await;
        assert_eq!(data["node"]["id"], json!(id), "the owner resolves its own ID");
    }
    let filtered =
        server.query(&support::team_token(second, "poc"), r#"{ applications(where: {nameHasPrefix: "checkout"}) { totalCount } }"#).await;
    assert_eq!(filtered["applications"]["totalCount"], 0, "a filter cannot reach another team's rows");

    // Group viewer: every team of its group; admin: everything, both environments.
    let data = server
        .query(&support::token("payments--checkout--console", "tardis:group:read", "poc"), "{ teams { edges { node { name } } } }")
        .await;
    let expected: Vec<String> = poc["groups"]["payments"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    assert_eq!(set(names(&data["teams"], "name")), set(expected));
    let data = server
        .query(&support::token("platform--ops--console", "tardis:admin:all", "poc"), "{ applications { totalCount } teams { totalCount } }")
        .await;
    let total = |k: &str| facts["env"]["poc"]["counts"][k].as_u64().unwrap() + facts["env"]["qa"]["counts"][k].as_u64().unwrap();
    assert_eq!(data["applications"]["totalCount"], json!(total("Application")));
    assert_eq!(data["teams"]["totalCount"], json!(total("Team")));

    // Environment isolation: the qa team of the same name sees only qa.
    let data =
        server.query(&support::team_token("payments--checkout", "qa"), "{ applications { edges { node { name environment } } } }").await;
    assert!(data["applications"]["edges"].as_array().unwrap().iter().all(|e| e["node"]["environment"] == "qa"));
    assert_eq!(
        names(&data["applications"], "name").len(),
        facts["env"]["qa"]["teams"]["payments--checkout"]["applications"].as_array().unwrap().len()
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_of_all_four_families_are_visible_to_both_sides_and_no_one_else() {
    let server = Server::start(&support::world_dir(), None).await;
    let facts = facts();
    for env in ["poc", "qa"] {
        for (team, t) in facts["env"][env]["teams"].as_object().unwrap() {
            let data = server
                .query(
                    &support::team_token(team, env),
                    "{ approvals { edges { node { namespace name } } } approvalRequests { edges { node { namespace name } } } }",
                )
                .await;
            for (field, fact) in [("approvals", "approvalsVisible"), ("approvalRequests", "approvalRequestsVisible")] {
                let seen: BTreeSet<String> = data[field]["edges"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| format!("{}/{}", e["node"]["namespace"].as_str().unwrap(), e["node"]["name"].as_str().unwrap()))
                    .collect();
                let expected: BTreeSet<String> = t[fact].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
                assert_eq!(seen, expected, "{env} {team} {field}");
            }
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pagination_visits_every_record_once_in_order_both_ways() {
    let server = Server::start(&support::world_dir(), None).await;
    let admin = support::token("platform--ops--console", "tardis:admin:all", "poc");
    let all = server.query(&admin, "{ apiSubscriptions { totalCount edges { node { id } } } }").await;
    let expected = names(&all["apiSubscriptions"], "id");
    assert_eq!(all["apiSubscriptions"]["totalCount"], json!(expected.len()));
    assert!(expected.len() > 6);

    let mut forward = Vec::new();
    let mut after = Value::Null;
    loop {
        let (data, errors) = server
            .query_raw(
                &admin,
                "query($a: Cursor) { apiSubscriptions(first: 3, after: $a) { pageInfo { hasNextPage endCursor } edges { node { id } } } }",
                json!({"a": after}),
            )
            .await;
        assert!(errors.is_empty(), "{errors:?}");
        forward.extend(names(&data["apiSubscriptions"], "id"));
        if data["apiSubscriptions"]["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = data["apiSubscriptions"]["pageInfo"]["endCursor"].clone();
    }
    assert_eq!(forward, expected);

    let mut backward = Vec::new();
    let mut before = Value::Null;
    loop {
        let (data, errors) = server
            .query_raw(&admin, "query($b: Cursor) { apiSubscriptions(last: 3, before: $b) { pageInfo { hasPreviousPage startCursor } edges { node { id } } } }", json!({"b": before}))
            .await;
        assert!(errors.is_empty(), "{errors:?}");
        let mut page = names(&data["apiSubscriptions"], "id");
        page.extend(backward);
        backward = page;
        if data["apiSubscriptions"]["pageInfo"]["hasPreviousPage"] != true {
            break;
        }
        before = data["apiSubscriptions"]["pageInfo"]["startCursor"].clone();
    }
    assert_eq!(backward, expected);

    let (data, errors) =
        server.query_raw(&admin, r#"{ apiSubscriptions(first: 1, after: "not-a-cursor") { totalCount } }"#, json!({})).await;
    assert_eq!(data, Value::Null);
    assert_eq!(errors[0]["extensions"]["code"], "BAD_USER_INPUT");
    let (_, errors) = server.query_raw(&admin, "{ apiSubscriptions(first: 1, last: 1) { totalCount } }", json!({})).await;
    assert_eq!(errors[0]["extensions"]["code"], "BAD_USER_INPUT");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_checked_and_a_restart_keeps_ids() {
    let data_dir = tempfile::tempdir().unwrap();
    let server = Server::start(&support::world_dir(), Some(data_dir.path())).await;
    assert_eq!(server.status(None, "{ zones { name } }").await, 401);
    assert_eq!(server.status(Some("garbage"), "{ zones { name } }").await, 401);
    assert_eq!(server.status(Some(&support::token("no-dashes", "tardis:team:read", "poc")), "{ zones { name } }").await, 403);
    assert_eq!(server.status(Some(&support::token("a--b--c", "other:team:read", "poc")), "{ zones { name } }").await, 403);
    let enc = |v: serde_json::Value| base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, v.to_string());
    let claims = |extra: serde_json::Value| {
        let mut c = json!({"clientId": "payments--ledger--console", "scope": "tardis:team:read", "env": "poc"});
        c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        format!("{}.{}.mock", enc(json!({"alg": "none"})), enc(c))
    };
    assert_eq!(server.status(Some(&claims(json!({"exp": 1000}))), "{ zones { name } }").await, 401, "expired");
    assert_eq!(server.status(Some(&claims(json!({"exp": "99999999999"}))), "{ zones { name } }").await, 401, "exp not a number");
    assert_eq!(server.status(Some(&claims(json!({"nbf": 99999999999u64}))), "{ zones { name } }").await, 401, "not yet valid");
    assert_eq!(server.status(Some(&claims(json!({"exp": 99999999999u64}))), "{ zones { name } }").await, 200);
    // Authentication comes before the body is read; bodies are limited to 1 MiB.
    // An answer sent before the body is read closes the connection, and says so: the next
    // request must not go out on it (a pooled client saw it reset).
    assert_eq!(server.post_raw_closing(None, b"{not json".to_vec()).await, (401, true));
    assert_eq!(server.post_raw_closing(Some(&claims(json!({}))), b"{not json".to_vec()).await, (400, false));
    for _ in 0..3 {
        assert_eq!(server.post_raw_closing(Some(&claims(json!({}))), vec![b' '; 2 << 20]).await, (413, true));
        assert_eq!(server.status(Some(&claims(json!({}))), "{ zones { name } }").await, 200, "the next request after a 413");
    }

    let token = support::team_token("payments--ledger", "poc");
    let q = "{ applications { edges { node { id name createdAt } } } apiSubscriptions { edges { node { id target { id } } } } }";
    let before = server.query(&token, q).await;
    server.stop().await;

    let server = Server::start(&support::world_dir(), Some(data_dir.path())).await;
    assert_eq!(server.query(&token, q).await, before, "same data, same IDs after a restart");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messy_samples_next_to_the_world_do_not_crash_and_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    support::copy_dir(&support::world_dir(), &dir.path().join("world"));
    support::copy_dir(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/samples"), &dir.path().join("samples"));
    let server = Server::start(dir.path(), None).await;
    let skips = server.running().app().skips();
    assert!(skips.len() >= 10, "rejected sample documents are reported: {skips:?}");
    for s in &skips {
        assert!(!format!("{s:?}").is_empty());
    }
    // The world still loads completely.
    let data = server
        .query(
            &support::token("platform--ops--console", "tardis:admin:all", "poc"),
            "{ applications(where: {environment: \"poc\"}) { totalCount } }",
        )
        .await;
    assert_eq!(data["applications"]["totalCount"], facts()["env"]["poc"]["counts"]["Application"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requested_and_active_scopes_come_back_distinctly_for_three_families() {
    // The world (its CRDs predate status.activeScopes) plus a later file that re-defines three
    // subscriptions with activeScopes: the later path wins.
    let dir = tempfile::tempdir().unwrap();
    support::copy_dir(&support::world_dir(), &dir.path().join("a-world"));
    support::copy_dir(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/active-scopes"),
        &dir.path().join("b-active-scopes"),
    );
    let server = Server::start(dir.path(), None).await;
    let admin = support::token("platform--ops--console", "tardis:admin:all", "poc");
    let data = server
        .query(
            &admin,
            r#"{
              apiSubscriptions(where: {name: "knowledge-base--logistics-fleet-positions-v1", environment: "poc"}) { edges { node { requestedScopes activeScopes security { m2m { scopes } } } } }
              eventSubscriptions(where: {name: "ledger-core--de-telekom-payments-orderplaced-v1", environment: "poc"}) { edges { node { requestedScopes activeScopes scopes } } }
              agenticSubscriptions(where: {name: "checkout-web--mcp-knowledge-v1"}) { edges { node { requestedScopes activeScopes } } }
            }"#,
        )
        .await;
    let node = |k: &str| data[k]["edges"][0]["node"].clone();
    assert_eq!(node("apiSubscriptions")["requestedScopes"], json!(["fleet:read", "fleet:history"]));
    assert_eq!(node("apiSubscriptions")["activeScopes"], json!(["fleet:read"]));
    assert_eq!(
        node("apiSubscriptions")["security"]["m2m"]["scopes"],
        json!(["fleet:read", "fleet:history"]),
        "deprecated field = requested"
    );
    assert_eq!(node("eventSubscriptions")["requestedScopes"], json!(["eu-orders"]));
    assert_eq!(node("eventSubscriptions")["activeScopes"], json!([]));
    assert_eq!(node("eventSubscriptions")["scopes"], json!(["eu-orders"]), "deprecated field = requested");
    assert_eq!(node("agenticSubscriptions")["requestedScopes"], json!(["kb:search"]));
    assert_eq!(node("agenticSubscriptions")["activeScopes"], json!(["kb:read"]));
    server.stop().await;
}

/// Every kind of the world is projected, per environment, as the facts count them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_is_projected_with_the_facts_counts() {
    let server = Server::start(&support::world_dir(), None).await;
    let facts = facts();
    let admin = support::token("platform--ops--console", "tardis:admin:all", "poc");
    let roots = [
        ("Team", "teams"),
        ("Application", "applications"),
        ("PermissionSet", "permissionSets"),
        ("Api", "apis"),
        ("ApiExposure", "apiExposures"),
        ("ApiSubscription", "apiSubscriptions"),
        ("EventType", "eventTypes"),
        ("EventExposure", "eventExposures"),
        ("EventSubscription", "eventSubscriptions"),
        ("McpServer", "mcpServers"),
        ("AgentCard", "agentCards"),
        ("AgenticExposure", "agenticExposures"),
        ("AgenticSubscription", "agenticSubscriptions"),
        ("FileExposure", "fileExposures"),
        ("FileSubscription", "fileSubscriptions"),
        ("ApprovalRequest", "approvalRequests"),
        ("Approval", "approvals"),
    ];
    for env in ["poc", "qa"] {
        let counts = &facts["env"][env]["counts"];
        for (kind, root) in roots {
            let q = format!(r#"{{ {root}(where: {{environment: "{env}"}}) {{ totalCount }} }}"#);
            let data = server.query(&admin, &q).await;
            assert_eq!(data[root]["totalCount"], counts[kind], "{kind} in {env}");
        }
        // Zones and groups are plain lists, visible per environment.
        let data =
            server.query(&support::token("platform--ops--console", "tardis:team:read", env), "{ zones { name } groups { name } }").await;
        assert_eq!(json!(data["zones"].as_array().unwrap().len()), counts["Zone"], "zones in {env}");
        assert_eq!(json!(data["groups"].as_array().unwrap().len()), counts["Group"], "groups in {env}");
        // Status phases per kind, from the Ready condition.
        for (kind, root) in roots {
            let Some(phases) = facts["env"][env]["statusPhases"][kind].as_object() else { continue };
            for (phase, n) in phases {
                let q = format!(r#"{{ {root}(where: {{environment: "{env}", statusPhase: {phase}}}) {{ totalCount }} }}"#);
                let data = server.query(&admin, &q).await;
                assert_eq!(&data[root]["totalCount"], n, "{kind} {phase} in {env}");
            }
        }
    }
    server.stop().await;
}

/// Query limits are configurable: depth, complexity, introspection, body size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_limits_are_configurable() {
    let server = Server::start_with(&support::world_dir(), None, |c| {
        c.graphql.limits.max_depth = 4;
        c.graphql.limits.max_complexity = 40;
        c.graphql.introspection_enabled = false;
        c.graphql.max_body_bytes = 4096;
    })
    .await;
    let token = support::team_token("payments--checkout", "poc");
    let (data, errors) = server.query_raw(&token, "{ applications { edges { node { name } } } }", json!({})).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert!(data["applications"]["edges"].as_array().is_some_and(|e| !e.is_empty()));
    let (data, errors) = server
        .query_raw(&token, "{ applications { edges { node { subscribedApis { edges { node { target { basePath } } } } } } } }", json!({}))
        .await;
    assert_eq!(data, Value::Null);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["extensions"], json!({"code": "QUERY_TOO_DEEP", "limit": "graphql.maxDepth", "max": 4}), "{errors:?}");
    assert_eq!(errors[0]["message"], "the query nests fields deeper than 4 levels");
    // Through fragments too, with the same answer.
    let fragments = "{ applications { ...A } } fragment A on ApplicationConnection { edges { ...E } } \
                     fragment E on ApplicationEdge { node { subscribedApis { edges { node { name } } } } }";
    let (_, deep) = server.query_raw(&token, fragments, json!({})).await;
    assert_eq!(deep, errors);
    let wide = format!("{{ {} }}", (0..50).map(|i| format!("a{i}: zones {{ name }}")).collect::<Vec<_>>().join(" "));
    let (_, errors) = server.query_raw(&token, &wide, json!({})).await;
    assert_eq!(errors[0]["extensions"], json!({"code": "QUERY_TOO_COMPLEX", "limit": "graphql.maxComplexity", "max": 40}), "{errors:?}");
    let (_, errors) = server.query_raw(&token, "{ __schema { types { name } } }", json!({})).await;
    assert!(!errors.is_empty(), "introspection is off");
    assert_eq!(server.post_raw(Some(&token), vec![b' '; 5000]).await, 413);
    server.stop().await;
}

/// Apollo's automatic persisted queries, the requests an Apollo Client with the persisted-query
/// link sends: GET with the hash only (unknown: `PersistedQueryNotFound`), POST with hash and
/// text, then GET with the hash only again — which answers like the plain query, with the same
/// isolation (another team's answer to the same hash is its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apollo_persisted_queries_over_get_and_post() {
    use sha2::Digest;
    let server = Server::start(&support::world_dir(), None).await;
    let query = "query Mine { applications { totalCount edges { node { name } } } }";
    let hash: String = sha2::Sha256::digest(query.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    let extensions = json!({"persistedQuery": {"version": 1, "sha256Hash": hash}});
    let url = format!("{}/graphql/query", server.base());
    let get = async |token: &str| -> Value {
        let params = [("operationName", "Mine".to_string()), ("variables", "{}".to_string()), ("extensions", extensions.to_string())];
        let r = reqwest::Client::new().get(&url).query(&params).bearer_auth(token).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    };
    let (checkout, ledger) = (support::team_token("payments--checkout", "poc"), support::team_token("payments--ledger", "poc"));

    let missing = get(&checkout).await;
    assert_eq!(missing["errors"][0]["message"], "PersistedQueryNotFound", "{missing}");
    assert_eq!(missing["errors"][0]["extensions"]["code"], "PERSISTED_QUERY_NOT_FOUND", "{missing}");
    assert!(missing["data"].is_null());

    let body = json!({"operationName": "Mine", "variables": {}, "extensions": extensions, "query": query});
    let stored: Value = reqwest::Client::new().post(&url).bearer_auth(&checkout).json(&body).send().await.unwrap().json().await.unwrap();
    assert!(stored["errors"].is_null(), "{stored}");
    let plain = server.query(&checkout, query).await;
    assert_eq!(stored["data"], plain);
    assert!(plain["applications"]["totalCount"].as_u64().unwrap() > 0);

    let by_hash = get(&checkout).await;
    assert!(by_hash["errors"].is_null(), "{by_hash}");
    assert_eq!(by_hash["data"], plain, "the hash answers like the plain query");
    let other = get(&ledger).await;
    assert_eq!(other["data"], server.query(&ledger, query).await, "another team gets its own answer");
    assert_ne!(other["data"], plain);

    // A text that is not the hash's is refused, and stores nothing under that hash.
    let wrong = json!({"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "0".repeat(64)}}, "query": query});
    let refused: Value = reqwest::Client::new().post(&url).bearer_auth(&checkout).json(&wrong).send().await.unwrap().json().await.unwrap();
    assert_eq!(refused["errors"][0]["extensions"]["code"], "BAD_USER_INPUT", "{refused}");
    let zero = json!({"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "0".repeat(64)}}});
    let still: Value = reqwest::Client::new().post(&url).bearer_auth(&checkout).json(&zero).send().await.unwrap().json().await.unwrap();
    assert_eq!(still["errors"][0]["extensions"]["code"], "PERSISTED_QUERY_NOT_FOUND", "{still}");
    server.stop().await;
}
