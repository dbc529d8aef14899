//! GraphQL over the organisation kinds (Zone, Group, Team, Member, Application, Api) on the
//! example world: isolation per team, group, admin and environment; field values from
//! `examples/world.facts.json`; Relay pagination; `where` and `orderBy`.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::LazyLock;
use support::*;

static WORLD: LazyLock<World> = LazyLock::new(World::load);

static FACTS: LazyLock<Value> = LazyLock::new(facts);

const ENVS: [&str; 2] = ["poc", "qa"];

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn fact_strings(v: &Value) -> Vec<String> {
    v.as_array().expect("a list").iter().map(|x| x.as_str().expect("a string").to_string()).collect()
}

/// The facts' teams of `env` with their applications.
fn fact_teams(env: &str) -> Vec<(String, Vec<String>)> {
    FACTS["env"][env]["teams"]
        .as_object()
        .expect("teams")
        .iter()
        .map(|(t, v)| (t.clone(), sorted(fact_strings(&v["applications"]))))
        .collect()
}

/// IDs of the applications a viewer sees, with their names.
async fn application_ids(v: &query::viewer::Viewer) -> Vec<(String, String)> {
    let d = WORLD.data(v, "{ applications { edges { node { id name } } } }").await;
    nodes(&d["applications"]).iter().map(|n| (n["id"].as_str().unwrap().to_string(), n["name"].as_str().unwrap().to_string())).collect()
}

#[test]
fn world_loads_without_skips() {
    let r = &WORLD.report;
    assert!(r.skipped.is_empty(), "skipped: {:?}", r.skipped);
    for (kind, id) in [
        ("Zone", schema::KindId::Zone),
        ("Group", schema::KindId::Group),
        ("Team", schema::KindId::Team),
        ("Application", schema::KindId::Application),
        ("Api", schema::KindId::Api),
    ] {
        let expected: u64 = ENVS.iter().map(|e| FACTS["env"][*e]["counts"][kind].as_u64().unwrap()).sum();
        assert_eq!(r.written.get(&id).copied().unwrap_or(0) as u64, expected, "{kind}");
    }
}

#[tokio::test]
async fn team_viewers_see_exactly_their_applications() {
    for env in ENVS {
        for (team, apps) in fact_teams(env) {
            let v = team_viewer(&team, env);
            let d = WORLD.data(&v, "{ applications { totalCount edges { node { name environment ownerTeam { name } } } } }").await;
            let list = nodes(&d["applications"]);
            assert_eq!(strings(&Value::from(list.clone()), "name"), apps, "{env} {team}");
            assert_eq!(d["applications"]["totalCount"], json!(apps.len()), "{env} {team}");
            for n in list {
                assert_eq!((n["environment"].as_str(), n["ownerTeam"]["name"].as_str()), (Some(env), Some(team.as_str())));
            }
        }
    }
}

#[tokio::test]
async fn another_team_cannot_reach_foreign_applications() {
    let checkout = team_viewer("payments--checkout", "poc");
    let ledger = team_viewer("payments--ledger", "poc");
    let own = application_ids(&checkout).await;
    assert_eq!(own.iter().map(|x| x.1.as_str()).collect::<Vec<_>>(), ["checkout-api", "checkout-batch", "checkout-web"]);
    let theirs = application_ids(&ledger).await;
    assert!(theirs.iter().all(|(id, _)| !own.iter().any(|(o, _)| o == id)));
    let d = WORLD.data(&ledger, r#"{ applications(where: {nameHasPrefix: "checkout"}) { totalCount } }"#).await;
    assert_eq!(d["applications"]["totalCount"], 0);

    for (id, name) in &own {
        let q = format!(r#"{{ node(id: "{id}") {{ id ... on Application {{ name }} }} }}"#);
        assert_eq!(WORLD.data(&checkout, &q).await["node"]["name"], json!(name));
        let r = WORLD.run(&ledger, &q).await;
        assert_eq!(r["data"]["node"], Value::Null, "{name}");
        assert_eq!(error_codes(&r), ["NOT_FOUND"]);
    }
    let list = own.iter().map(|(id, _)| format!("{id:?}")).collect::<Vec<_>>().join(", ");
    let r = WORLD.run(&ledger, &format!("{{ nodes(ids: [{list}]) {{ id }} }}")).await;
    // `[null, null, null]` plus one NOT_FOUND per element, as the reference answers.
    assert_eq!(r["data"]["nodes"], json!([null, null, null]), "{r:#}");
    assert_eq!(error_codes(&r).iter().filter(|c| *c == "NOT_FOUND").count(), 3, "{r:#}");
    // Mixed: visible entries resolve, hidden ones are null at their index.
    let (own_id, _) = &own[0];
    let r = WORLD.run(&checkout, &format!(r#"{{ nodes(ids: [{own_id:?}, "garbage"]) {{ id }} }}"#)).await;
    assert_eq!(r["data"]["nodes"], json!([{"id": own_id}, null]), "{r:#}");
    assert_eq!(error_codes(&r), ["NOT_FOUND"]);
}

#[tokio::test]
async fn group_viewers_see_their_groups_teams() {
    for env in ENVS {
        let teams = fact_teams(env);
        for (group, members) in FACTS["env"][env]["groups"].as_object().unwrap() {
            let members = sorted(fact_strings(members));
            let v = group_viewer(group, env);
            let d = WORLD
                .data(&v, "{ teams { totalCount edges { node { name } } } applications { totalCount } groups { name teams { name } } }")
                .await;
            assert_eq!(strings(&Value::from(nodes(&d["teams"])), "name"), members, "{env} {group}");
            assert_eq!(d["teams"]["totalCount"], json!(members.len()));
            let apps: usize = teams.iter().filter(|(t, _)| members.contains(t)).map(|(_, a)| a.len()).sum();
            assert_eq!(d["applications"]["totalCount"], json!(apps), "{env} {group}");
            // Every group of the environment is listed; only the own group shows teams.
            let groups = d["groups"].as_array().unwrap();
            assert_eq!(groups.len(), FACTS["env"][env]["groups"].as_object().unwrap().len());
            for g in groups {
                let expected = if g["name"] == json!(group) { members.clone() } else { vec![] };
                assert_eq!(sorted(strings(&g["teams"], "name")), expected, "{env} {group} sees {}", g["name"]);
            }
        }
    }
}

#[tokio::test]
async fn admins_see_every_environment() {
    let count = |kind: &str| -> u64 { ENVS.iter().map(|e| FACTS["env"][*e]["counts"][kind].as_u64().unwrap()).sum() };
    let d = WORLD
        .data(
            &admin(),
            "{ applications { totalCount edges { node { environment } } } teams { totalCount } apis { totalCount } zones { name } groups { name } }",
        )
        .await;
    assert_eq!(d["applications"]["totalCount"], json!(count("Application")));
    assert_eq!(d["teams"]["totalCount"], json!(count("Team")));
    assert_eq!(d["apis"]["totalCount"], json!(count("Api")));
    assert_eq!(d["zones"].as_array().unwrap().len() as u64, count("Zone"));
    assert_eq!(d["groups"].as_array().unwrap().len() as u64, count("Group"));
    let envs: BTreeSet<String> = strings(&Value::from(nodes(&d["applications"])), "environment").into_iter().collect();
    assert_eq!(envs, BTreeSet::from(["poc".to_string(), "qa".to_string()]));
}

#[tokio::test]
async fn environments_are_isolated() {
    let poc = team_viewer("payments--checkout", "poc");
    let qa = team_viewer("payments--checkout", "qa");
    let poc_ids = application_ids(&poc).await;
    let qa_ids = application_ids(&qa).await;
    assert_eq!(qa_ids.iter().map(|x| x.1.as_str()).collect::<Vec<_>>(), ["checkout-api", "checkout-web"]);
    for (id, name) in &poc_ids {
        let r = WORLD.run(&qa, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
        assert_eq!((r["data"]["node"].clone(), error_codes(&r)), (Value::Null, vec!["NOT_FOUND".to_string()]), "{name}");
    }
    for (id, _) in &qa_ids {
        assert!(!poc_ids.iter().any(|(p, _)| p == id), "same name, different environment, different ID");
    }
    let d = WORLD
        .data(&qa, "{ zones { name environment } groups { name environment } apis { totalCount edges { node { environment } } } }")
        .await;
    assert_eq!(d["zones"], json!([{"name": "aws-eu1", "environment": "qa"}]));
    assert_eq!(d["groups"], json!([{"name": "payments", "environment": "qa"}]));
    assert_eq!(d["apis"]["totalCount"], FACTS["env"]["qa"]["counts"]["Api"]);
    assert!(nodes(&d["apis"]).iter().all(|n| n["environment"] == "qa"));
}

#[tokio::test]
async fn application_fields_match_facts() {
    // `permissionsURL` needs the application's PermissionSet: null until that kind is registered.
    let permission_sets = schema::registry::registered().contains(&schema::KindId::PermissionSet);
    let d = WORLD
        .data(
            &admin(),
            "{ applications { edges { node { name environment clientID statusPhase secretRotationPhase secretRotationMessage \
             permissionsURL zone { name } ownerTeam { name groupName } } } } }",
        )
        .await;
    let got = nodes(&d["applications"]);
    let mut n = 0;
    for env in ENVS {
        for f in FACTS["env"][env]["applications"].as_array().unwrap() {
            let a = got
                .iter()
                .find(|a| a["environment"] == env && a["name"] == f["name"] && a["ownerTeam"]["name"] == f["team"])
                .unwrap_or_else(|| panic!("{env} {f}"));
            let ctx = format!("{env} {}", f["name"]);
            assert_eq!(a["clientID"], f["clientId"], "{ctx}");
            assert_eq!(a["statusPhase"], f["statusPhase"], "{ctx}");
            assert_eq!(a["secretRotationPhase"], f["secretRotationPhase"], "{ctx}");
            assert_eq!(a["zone"]["name"], f["zone"], "{ctx}");
            let group = f["team"].as_str().unwrap().split("--").next().unwrap();
            assert_eq!(a["ownerTeam"]["groupName"], json!(group), "{ctx}");
            let expected_permissions = if permission_sets { f["permissionsUrl"].clone() } else { Value::Null };
            assert_eq!(a["permissionsURL"], expected_permissions, "{ctx}");
            if f["secretRotationPhase"] == "DONE" {
                assert_eq!(a["secretRotationMessage"], Value::Null, "{ctx}");
            }
            n += 1;
        }
    }
    assert_eq!(n, got.len());

    let v = team_viewer("payments--checkout", "poc");
    let d = WORLD
        .data(&v, r#"{ applications(where: {name: "checkout-web"}) { edges { node { ipRestrictions { Allow Deny } externalIds { Id Schema } clientSecret } } } }"#)
        .await;
    let web = &nodes(&d["applications"])[0];
    assert_eq!(web["ipRestrictions"], json!({"Allow": ["10.20.0.0/16", "192.0.2.0/24"], "Deny": null}));
    assert_eq!(web["externalIds"], json!([{"Id": "PSA-10442", "Schema": "psa"}]));
    assert_eq!(web["clientSecret"], "$<poc:payments--checkout:checkout-web:clientSecret:bec2c9fcd0>");
    let d = WORLD
        .data(&v, r#"{ applications(where: {name: "checkout-api"}) { edges { node { ipRestrictions { Allow } externalIds { Id } } } } }"#)
        .await;
    assert_eq!(nodes(&d["applications"])[0], json!({"ipRestrictions": null, "externalIds": null}));
}

#[tokio::test]
async fn secrets_are_masked_for_obfuscated_viewers_and_never_filterable() {
    let q = r#"{ teams { edges { node { teamToken applications(where: {name: "checkout-api"}) { edges { node { clientSecret rotatedClientSecret } } } } } } }"#;
    let plain = WORLD.data(&team_viewer("payments--checkout", "poc"), q).await;
    let team = &nodes(&plain["teams"])[0];
    assert_eq!(team["teamToken"], "$<poc:payments--checkout::teamToken:33e829c1a1>");
    assert_eq!(nodes(&team["applications"])[0]["clientSecret"], "$<poc:payments--checkout:checkout-api:clientSecret:bc8f5f7be2>");
    let masked = WORLD.data(&viewer("payments--checkout--x", "tardis:team:obfuscated", "poc"), q).await;
    let team = &nodes(&masked["teams"])[0];
    assert_eq!(team["teamToken"], "**********");
    assert_eq!(nodes(&team["applications"])[0]["clientSecret"], "**********");

    for q in [
        r#"{ teams(where: {teamToken: "x"}) { totalCount } }"#,
        r#"{ applications(where: {clientSecretIsNil: true}) { totalCount } }"#,
        r#"{ apis(where: {specificationIsNil: true}) { totalCount } }"#,
    ] {
        let r = WORLD.run(&admin(), q).await;
        assert!(!error_codes(&r).is_empty(), "{q} must not validate: {r}");
    }
}

#[tokio::test]
async fn zones_match_facts_per_environment() {
    for env in ENVS {
        let (team, _) = &fact_teams(env)[0];
        let d = WORLD
            .data(&team_viewer(team, env), "{ zones { name visibility gatewayURL permissionsURL issuerURL tokenURL environment } }")
            .await;
        let zones = d["zones"].as_array().unwrap();
        let facts = FACTS["env"][env]["zones"].as_array().unwrap();
        assert_eq!(sorted(strings(&d["zones"], "name")), sorted(strings(&FACTS["env"][env]["zones"], "name")), "{env}");
        for f in facts {
            let z = zones.iter().find(|z| z["name"] == f["name"]).unwrap();
            assert_eq!(
                (&z["visibility"], &z["gatewayURL"], &z["permissionsURL"]),
                (&f["visibility"], &f["gatewayUrl"], &f["permissionsUrl"])
            );
            let token = z["issuerURL"].as_str().map(|i| format!("{i}/protocol/openid-connect/token"));
            assert_eq!(z["tokenURL"], json!(token));
            assert_eq!(z["environment"], env);
        }
    }
    let d = WORLD.data(&team_viewer("payments--checkout", "poc"), r#"{ zones { name tokenURL applications { name } } }"#).await;
    let aws = d["zones"].as_array().unwrap().iter().find(|z| z["name"] == "aws-eu1").unwrap().clone();
    assert_eq!(aws["tokenURL"], "https://iris.aws-eu1.poc.example.com/auth/realms/poc/protocol/openid-connect/token");
    // Only the viewer's own applications in the zone.
    let expected: Vec<String> = FACTS["env"]["poc"]["applications"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["team"] == "payments--checkout" && a["zone"] == "aws-eu1")
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(sorted(strings(&aws["applications"], "name")), sorted(expected));
}

/// Pages forward (`first`/`after`) and backward (`last`/`before`) through `applications` with
/// page size `n` and `orderBy`; both must visit exactly the unpaged result, in order.
async fn check_pagination(v: &query::viewer::Viewer, order: &str, n: usize) {
    let args = |extra: &str| {
        let parts: Vec<&str> = [order, extra].into_iter().filter(|p| !p.is_empty()).collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!("({})", parts.join(", "))
        }
    };
    let all = WORLD.data(v, &format!("{{ applications{} {{ totalCount edges {{ node {{ id }} }} }} }}", args(""))).await;
    let all_ids = strings(&Value::from(nodes(&all["applications"])), "id");
    assert_eq!(all["applications"]["totalCount"], json!(all_ids.len()));
    assert!(all_ids.len() > n, "the test needs more than one page");

    let page = |extra: String| async move {
        let q = format!(
            "{{ applications{} {{ totalCount pageInfo {{ hasNextPage hasPreviousPage startCursor endCursor }} edges {{ cursor node {{ id }} }} }} }}",
            args(&extra)
        );
        WORLD.data(v, &q).await["applications"].clone()
    };

    let mut forward = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let args = match &after {
            Some(c) => format!("first: {n}, after: \"{c}\""),
            None => format!("first: {n}"),
        };
        let p = page(args).await;
        assert_eq!(p["totalCount"], json!(all_ids.len()), "totalCount ignores cursors");
        assert_eq!(p["pageInfo"]["hasPreviousPage"], json!(after.is_some()));
        forward.extend(strings(&Value::from(nodes(&p)), "id"));
        if p["pageInfo"]["hasNextPage"] == json!(false) {
            break;
        }
        assert_eq!(nodes(&p).len(), n);
        after = p["pageInfo"]["endCursor"].as_str().map(str::to_string);
        assert!(forward.len() <= all_ids.len(), "pagination does not terminate");
    }
    assert_eq!(forward, all_ids, "forward {order}");

    let mut backward: Vec<String> = Vec::new();
    let mut before: Option<String> = None;
    loop {
        let args = match &before {
            Some(c) => format!("last: {n}, before: \"{c}\""),
            None => format!("last: {n}"),
        };
        let p = page(args).await;
        assert_eq!(p["pageInfo"]["hasNextPage"], json!(before.is_some()));
        let mut ids = strings(&Value::from(nodes(&p)), "id");
        ids.extend(backward);
        backward = ids;
        if p["pageInfo"]["hasPreviousPage"] == json!(false) {
            break;
        }
        before = p["pageInfo"]["startCursor"].as_str().map(str::to_string);
        assert!(backward.len() <= all_ids.len(), "pagination does not terminate");
    }
    assert_eq!(backward, all_ids, "backward {order}");
}

#[tokio::test]
async fn pagination_visits_every_visible_application_once() {
    for v in [admin(), group_viewer("payments", "poc"), group_viewer("logistics", "poc")] {
        for order in ["", "orderBy: [{field: NAME, direction: DESC}]", "orderBy: [{field: CREATED_AT}]"] {
            check_pagination(&v, order, 2).await;
        }
    }
    check_pagination(&admin(), "", 4).await;
}

#[tokio::test]
async fn where_filters_and_ordering() {
    let v = group_viewer("payments", "poc");
    let names = |d: &Value| strings(&Value::from(nodes(&d["applications"])), "name");
    for (filter, expected) in [
        (r#"{nameHasPrefix: "ledger"}"#, vec!["ledger-core", "ledger-reports"]),
        (r#"{nameIn: ["checkout-web", "ledger-core", "fleet-planner"]}"#, vec!["checkout-web", "ledger-core"]),
        (r#"{nameContainsFold: "CORE"}"#, vec!["ledger-core"]),
        (r#"{or: [{nameHasPrefix: "ledger"}, {name: "checkout-web"}]}"#, vec!["checkout-web", "ledger-core", "ledger-reports"]),
        (r#"{not: {nameHasPrefix: "checkout"}, clientIDNotNil: true}"#, vec!["ledger-core", "ledger-reports"]),
        (r#"{nameIn: []}"#, vec!["checkout-api", "checkout-batch", "checkout-web", "ledger-core", "ledger-reports"]),
    ] {
        let d = WORLD.data(&v, &format!("{{ applications(where: {filter}) {{ totalCount edges {{ node {{ name }} }} }} }}")).await;
        let mut got = names(&d);
        got.sort();
        assert_eq!(got, expected, "{filter}");
        assert_eq!(d["applications"]["totalCount"], json!(expected.len()), "{filter}");
    }

    let d = WORLD.data(&v, "{ applications(orderBy: [{field: NAME, direction: DESC}]) { edges { node { name } } } }").await;
    assert_eq!(names(&d), ["ledger-reports", "ledger-core", "checkout-web", "checkout-batch", "checkout-api"]);
    let d = WORLD.data(&v, "{ teams(orderBy: [{field: NAME, direction: DESC}]) { edges { node { name } } } }").await;
    assert_eq!(strings(&Value::from(nodes(&d["teams"])), "name"), ["payments--ledger", "payments--checkout"]);

    let d = WORLD.data(&admin(), r#"{ applications(where: {environment: "qa"}) { totalCount } teams(where: {displaynameContainsFold: "LEDGER"}) { edges { node { name environment } } } }"#).await;
    assert_eq!(d["applications"]["totalCount"], FACTS["env"]["qa"]["counts"]["Application"]);
    assert_eq!(
        nodes(&d["teams"]),
        [json!({"name": "payments--ledger", "environment": "poc"}), json!({"name": "payments--ledger", "environment": "qa"})]
    );
    let d = WORLD.data(&admin(), r#"{ groups(where: {name: "payments"}) { environment } zones { name } }"#).await;
    assert_eq!(d["groups"], json!([{"environment": "poc"}, {"environment": "qa"}]));
}

#[tokio::test]
async fn team_fields_members_and_nested_connections() {
    let v = team_viewer("payments--checkout", "poc");
    let d = WORLD
        .data(
            &v,
            "{ teams { totalCount edges { node { id name email displayname description category statusPhase environment namespace \
             group { name } members { id name email environment team { name } } \
             applications(first: 2) { totalCount pageInfo { hasNextPage } edges { node { name } } } \
             apis { totalCount edges { node { basePath active owner { name groupName displayName email } } } } } } } }",
        )
        .await;
    assert_eq!(d["teams"]["totalCount"], 1);
    let t = &nodes(&d["teams"])[0];
    assert_eq!(
        (&t["name"], &t["displayname"], &t["category"], &t["environment"]),
        (&json!("payments--checkout"), &json!("Checkout"), &json!("CUSTOMER"), &json!("poc"))
    );
    assert_eq!(t["group"], json!({"name": "payments"}));
    assert_eq!(strings(&t["members"], "email"), ["mara.lindqvist@example.com", "jonas.peretti@example.com"]);
    assert!(t["members"].as_array().unwrap().iter().all(|m| m["team"]["name"] == "payments--checkout" && m["environment"] == "poc"));
    assert_eq!(t["applications"]["totalCount"], 3);
    assert_eq!(t["applications"]["pageInfo"]["hasNextPage"], true);
    assert_eq!(strings(&Value::from(nodes(&t["applications"])), "name"), ["checkout-api", "checkout-batch"]);
    let apis = nodes(&t["apis"]);
    assert_eq!(apis.len(), 1);
    assert_eq!(apis[0]["basePath"], "/payments/checkout/v1");
    assert_eq!(apis[0]["owner"]["name"], "payments--checkout");
    assert_eq!(apis[0]["owner"]["groupName"], "payments");

    // A member resolves through `node` for viewers of its team only.
    let member = t["members"][0]["id"].as_str().unwrap();
    let q = format!(r#"{{ node(id: "{member}") {{ id ... on Member {{ email team {{ name }} }} }} }}"#);
    let d = WORLD.data(&v, &q).await;
    assert_eq!(d["node"]["email"], "mara.lindqvist@example.com");
    let r = WORLD.run(&team_viewer("payments--ledger", "poc"), &q).await;
    assert_eq!((r["data"]["node"].clone(), error_codes(&r)), (Value::Null, vec!["NOT_FOUND".to_string()]));
    // A team node of another team is not found either.
    let team_id = t["id"].as_str().unwrap();
    let r = WORLD.run(&team_viewer("payments--ledger", "poc"), &format!(r#"{{ node(id: "{team_id}") {{ id }} }}"#)).await;
    assert_eq!(error_codes(&r), ["NOT_FOUND"]);
}

#[tokio::test]
async fn api_catalogue_is_visible_per_environment() {
    for env in ENVS {
        let apis = FACTS["env"][env]["catalogue"]["apis"].as_array().unwrap();
        let (team, _) = &fact_teams(env)[0];
        let v = team_viewer(team, env);
        let d = WORLD
            .data(&v, "{ apis { totalCount edges { node { basePath active specificationUrl owner { name } } } } active: apis(where: {active: true}) { totalCount } apiCategories { name } }")
            .await;
        assert_eq!(d["apis"]["totalCount"], json!(apis.len()), "{env}");
        let active = apis.iter().filter(|a| a["active"] == true).count();
        assert_eq!(d["active"]["totalCount"], json!(active), "{env}");
        for f in apis {
            let a = nodes(&d["apis"]).into_iter().find(|a| a["basePath"] == f["key"] && a["owner"]["name"] == f["team"]).unwrap();
            assert_eq!(a["active"], f["active"]);
            assert_eq!(a["specificationUrl"], Value::Null);
        }
        // Every Api of the world has category `other`.
        assert_eq!(d["apiCategories"], json!([{"name": "other"}]));
    }
}
