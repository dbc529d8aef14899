//! History end to end (`history(id:)`, `activity`): the server on a copy of the example world
//! (manifests source), an Application edited twice, deleted and created again; what its team,
//! other teams, another group and the other environment see, before and after a restart. The
//! same through the kube source, with the manager taken from `managedFields`.
//!
//! Barriers: each edit is awaited through the answer it must change (`eventually`, woken by
//! the writer's changes); no sleeps.

#[path = "support/fake_k8s.rs"]
mod fake_k8s;
mod support;

use serde_json::{json, Value};
use std::path::Path;
use support::{eventually, team_token, token, Server};

/// The Application written, edited and deleted: `history-app` of `payments--checkout` (poc).
const FILE: &str = "90-history.yaml";
const NAMESPACE: &str = "poc--payments--checkout";

fn app_yaml(client_id: &str, external: &str) -> String {
    format!(
        r#"apiVersion: application.cp.ei.telekom.de/v1
kind: Application
metadata:
  name: history-app
  namespace: {NAMESPACE}
  labels:
    cp.ei.telekom.de/environment: poc
  creationTimestamp: "2026-03-13T06:11:00Z"
spec:
  team: payments--checkout
  teamEmail: checkout@example.com
  zone:
    name: aws-eu1
    namespace: poc
  secret: "$<poc:payments--checkout:history-app:clientSecret:1>"
  failover:
    enabled: false
  externalIds:
  - scheme: psa
    id: {external}
status:
  clientId: {client_id}
  clientSecret: "$<poc:payments--checkout:history-app:clientSecret:1>"
"#
    )
}

fn app_id() -> String {
    schema::GlobalId::new("Application", &schema::keys::natural::application("poc", "payments--checkout", "history-app")).encode()
}

const HISTORY: &str =
    "query($id: ID!) { history(id: $id) { totalCount edges { cursor node { revision operation changedFields resourceVersion manager \
                       node { id ... on Application { name clientID externalIds { Id } clientSecret } } } } } }";

const ACTIVITY: &str = "{ activity(first: 100) { totalCount edges { node { revision operation kind id name changedFields manager } } } }";

/// The viewers that must see nothing of `payments--checkout`'s application: another team of
/// its group, a team and a group of another group, the same team name in the other environment.
fn attackers() -> Vec<(&'static str, String)> {
    vec![
        ("another team of the group", team_token("payments--ledger", "poc")),
        ("another group's team", team_token("logistics--fleet", "poc")),
        ("another group", token("logistics--fleet--console", "tardis:group:read", "poc")),
        ("the other environment", team_token("payments--checkout", "qa")),
        ("the other environment's group", token("payments--checkout--console", "tardis:group:all", "qa")),
    ]
}

async fn history(server: &Server, token: &str) -> (Value, Vec<Value>) {
    server.query_raw(token, HISTORY, json!({"id": app_id()})).await
}

/// The revisions (newest first) as (operation, changedFields contains, clientID).
fn summary(data: &Value) -> Vec<(String, Option<String>)> {
    data["history"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["node"]["operation"].as_str().unwrap().to_string(), e["node"]["node"]["clientID"].as_str().map(str::to_string)))
        .collect()
}

async fn revisions_now(server: &Server, owner: &str) -> usize {
    let (data, errors) = history(server, owner).await;
    assert!(errors.iter().all(|e| e["extensions"]["code"] == "NOT_FOUND"), "{errors:?}");
    data["history"]["totalCount"].as_u64().unwrap_or(0) as usize
}

/// Writes `text` as the history file and waits until the owner sees `revisions` revisions.
async fn write_and_wait(server: &Server, dir: &Path, text: &str, revisions: usize) {
    std::fs::write(dir.join(FILE), text).unwrap();
    let owner = team_token("payments--checkout", "poc");
    eventually(server.running().app(), "the revision to be recorded", async || {
        (revisions_now(server, &owner).await == revisions).then_some(())
    })
    .await;
}

/// A server on a copy of the example world (`world/` in the directory returned, its data in
/// `data/`) with the history file holding the Application at `client_id`, `external`.
async fn world_with_app(client_id: &str, external: &str) -> (tempfile::TempDir, Server) {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, data) = (tmp.path().join("world"), tmp.path().join("data"));
    support::copy_dir(&support::world_dir(), &dir);
    std::fs::write(dir.join(FILE), app_yaml(client_id, external)).unwrap();
    let server = Server::start(&dir, Some(&data)).await;
    (tmp, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_edited_deleted_and_recreated_shows_its_revisions_to_its_team_only() {
    let (tmp, server) = world_with_app("first-client", "PSA-1").await;
    let (dir, data) = (tmp.path().join("world"), tmp.path().join("data"));
    let owner = team_token("payments--checkout", "poc");
    assert_eq!(revisions_now(&server, &owner).await, 1, "its creation at load");
    write_and_wait(&server, &dir, &app_yaml("second-client", "PSA-1"), 2).await;
    write_and_wait(&server, &dir, &app_yaml("second-client", "PSA-2"), 3).await;
    write_and_wait(&server, &dir, "", 4).await;
    write_and_wait(&server, &dir, &app_yaml("third-client", "PSA-3"), 5).await;

    let (answer, errors) = history(&server, &owner).await;
    assert!(errors.is_empty(), "{errors:?}");
    let expected: Vec<(String, Option<String>)> = [
        ("CREATED", Some("third-client")),
        ("DELETED", None),
        ("UPDATED", Some("second-client")),
        ("UPDATED", Some("second-client")),
        ("CREATED", Some("first-client")),
    ]
    .iter()
    .map(|(o, c)| (o.to_string(), c.map(str::to_string)))
    .collect();
    assert_eq!(summary(&answer), expected, "{answer}");
    let edges = answer["history"]["edges"].as_array().unwrap();
    let changed = |i: usize| {
        edges[i]["node"]["changedFields"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    assert!(changed(2).contains(&"externalIds".to_string()) && !changed(2).contains(&"clientID".to_string()), "{:?}", changed(2));
    assert!(changed(3).contains(&"clientID".to_string()) && !changed(3).contains(&"externalIds".to_string()), "{:?}", changed(3));
    assert_eq!(changed(1), Vec::<String>::new(), "a delete changes no field");
    for i in [0, 4] {
        for field in ["name", "clientID", "externalIds"] {
            assert!(changed(i).contains(&field.to_string()), "creation {i} lists {field}: {:?}", changed(i));
        }
        assert!(!changed(i).contains(&"rotatedExpiresAt".to_string()), "a field without a value is not listed");
    }
    assert_eq!(edges[2]["node"]["node"]["externalIds"][0]["Id"], "PSA-2");
    assert_eq!(edges[3]["node"]["node"]["externalIds"][0]["Id"], "PSA-1");
    assert_eq!(edges[0]["node"]["node"]["clientSecret"], "**********", "a past node's secrets are masked");
    let revisions: Vec<u64> = edges.iter().map(|e| e["node"]["revision"].as_u64().unwrap()).collect();
    assert!(revisions.windows(2).all(|w| w[0] > w[1]), "newest first: {revisions:?}");
    assert!(edges.iter().all(|e| e["node"]["manager"].is_null()), "manifests have no manager");

    let (activity, errors) = server.query_raw(&owner, ACTIVITY, json!({})).await;
    assert!(errors.is_empty(), "{errors:?}");
    let mine: Vec<&Value> = activity["activity"]["edges"].as_array().unwrap().iter().filter(|e| e["node"]["id"] == app_id()).collect();
    assert_eq!(mine.len(), 5, "the team's activity lists the five revisions");
    assert_eq!(mine[0]["node"]["name"], "history-app");
    assert_eq!(mine[0]["node"]["kind"], "APPLICATION");

    for (who, attacker) in attackers() {
        let (answer, errors) = history(&server, &attacker).await;
        assert_eq!(errors.first().map(|e| e["extensions"]["code"].clone()), Some(json!("NOT_FOUND")), "{who}: {answer} {errors:?}");
        let (activity, errors) = server.query_raw(&attacker, ACTIVITY, json!({})).await;
        assert!(errors.is_empty(), "{who}: {errors:?}");
        let text = activity.to_string();
        assert!(!text.contains(&app_id()) && !text.contains("history-app"), "{who} sees the application in its activity");
    }

    // After a restart every answer is the same.
    let before: Vec<(Value, Vec<Value>)> = vec![history(&server, &owner).await, server.query_raw(&owner, ACTIVITY, json!({})).await];
    server.stop().await;
    let server = Server::start(&dir, Some(&data)).await;
    let after: Vec<(Value, Vec<Value>)> = vec![history(&server, &owner).await, server.query_raw(&owner, ACTIVITY, json!({})).await];
    assert_eq!(after, before, "the same answers after a restart");
    for (who, attacker) in attackers() {
        let (_, errors) = history(&server, &attacker).await;
        assert_eq!(errors.first().map(|e| e["extensions"]["code"].clone()), Some(json!("NOT_FOUND")), "{who} after a restart");
    }
    server.stop().await;
}

/// Pages of `history` and `activity` are Relay connections: `first`/`after` and `last`/`before`
/// walk the same revisions; hostile arguments get `BAD_USER_INPUT`; with history off both
/// answer `HISTORY_DISABLED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_pages_walk_both_ways_and_hostile_arguments_are_refused() {
    let (tmp, server) = world_with_app("c0", "PSA-0").await;
    let (dir, data_dir) = (tmp.path().join("world"), tmp.path().join("data"));
    for i in 1..5 {
        write_and_wait(&server, &dir, &app_yaml(&format!("c{i}"), "PSA-0"), i + 1).await;
    }
    let owner = team_token("payments--checkout", "poc");
    let page = "query($id: ID!, $first: Int, $after: Cursor, $last: Int, $before: Cursor) { history(id: $id, first: $first, after: $after, last: $last, before: $before) \
                { totalCount pageInfo { hasNextPage hasPreviousPage } edges { cursor node { node { ... on Application { clientID } } } } } }";
    let ids = |v: &Value| {
        v["history"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["node"]["node"]["clientID"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let mut forward = Vec::new();
    let mut after = Value::Null;
    loop {
        let (data, errors) = server.query_raw(&owner, page, json!({"id": app_id(), "first": 2, "after": after})).await;
        assert!(errors.is_empty(), "{errors:?}");
        forward.extend(ids(&data));
        assert_eq!(data["history"]["totalCount"], 5);
        if data["history"]["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = data["history"]["edges"].as_array().unwrap().last().unwrap()["cursor"].clone();
    }
    assert_eq!(forward, ["c4", "c3", "c2", "c1", "c0"]);
    let (data, _) = server.query_raw(&owner, page, json!({"id": app_id(), "last": 2})).await;
    assert_eq!(ids(&data), ["c1", "c0"], "the oldest two, newest first");
    assert_eq!(data["history"]["pageInfo"]["hasPreviousPage"], true);
    for (vars, what) in [
        (json!({"id": app_id(), "first": 1, "last": 1}), "first and last"),
        (json!({"id": app_id(), "first": -1}), "a negative first"),
        (json!({"id": app_id(), "first": 1_000_000}), "first beyond the page size"),
        (json!({"id": app_id(), "after": "x".repeat(10_000)}), "a huge cursor"),
        (json!({"id": app_id(), "after": "bm90LWEtY3Vyc29y"}), "a foreign cursor"),
    ] {
        let (_, errors) = server.query_raw(&owner, page, vars).await;
        assert_eq!(errors.first().map(|e| e["extensions"]["code"].clone()), Some(json!("BAD_USER_INPUT")), "{what}: {errors:?}");
    }
    let many_kinds = format!("{{ activity(kinds: [{}]) {{ totalCount }} }}", ["APPLICATION"; 65].join(", "));
    for (query, what) in [
        ("{ activity(kinds: []) { totalCount } }", "no kinds"),
        ("{ activity(since: \"yesterday\") { totalCount } }", "a time that is not RFC 3339"),
        (many_kinds.as_str(), "65 kinds"),
        ("{ activity(since: \"2026-09-02T00:00:00Z\", until: \"2026-09-01T00:00:00Z\") { totalCount } }", "since after until"),
    ] {
        let (_, errors) = server.query_raw(&owner, query, json!({})).await;
        assert_eq!(errors.first().map(|e| e["extensions"]["code"].clone()), Some(json!("BAD_USER_INPUT")), "{what}: {errors:?}");
    }
    let (_, errors) = server.query_raw(&owner, page, json!({"id": app_id(), "after": "y".repeat(100_000)})).await;
    assert!(errors[0]["message"].as_str().unwrap().len() < 200, "a hostile cursor is not echoed");
    let (_, errors) = server.query_raw(&owner, "query($t: Time) { activity(since: $t) { totalCount } }", json!({"t": 12345})).await;
    assert_eq!(errors[0]["extensions"]["code"], "BAD_USER_INPUT", "a time that is no string: {errors:?}");
    // A kind listed twice counts once.
    let twice = "{ activity(kinds: [APPLICATION, APPLICATION]) { totalCount edges { node { id } } } }";
    let (data, errors) = server.query_raw(&owner, twice, json!({})).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(data["activity"]["totalCount"], json!(data["activity"]["edges"].as_array().unwrap().len()));
    let (data, errors) =
        server.query_raw(&owner, "{ activity(kinds: [APPLICATION], since: \"2000-01-01T00:00:00Z\") { totalCount } }", json!({})).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert!(data["activity"]["totalCount"].as_u64().unwrap() >= 5);
    let (_, errors) = server.query_raw(&owner, "{ history(id: \"not-an-id\") { totalCount } }", json!({})).await;
    assert_eq!(errors[0]["extensions"]["code"], "NOT_FOUND");
    server.stop().await;

    let server = Server::start_with(&dir, Some(&data_dir), |c| c.history.enabled = false).await;
    for query in ["{ activity { totalCount } }", &format!("{{ history(id: \"{}\") {{ totalCount }} }}", app_id())] {
        let (_, errors) = server.query_raw(&owner, query, json!({})).await;
        assert_eq!(errors[0]["extensions"]["code"], "HISTORY_DISABLED", "{query}");
    }
    server.stop().await;
}

/// Through the kube source, the same story: created at load, edited twice (by two managers),
/// deleted and created again — five revisions, each naming the manager of its change
/// (`managedFields`) and its `resourceVersion`; other viewers get `NOT_FOUND`; a restart answers
/// the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_kube_source_each_revision_names_its_manager() {
    let k8s = fake_k8s::FakeK8s::start_world().await;
    let data = tempfile::tempdir().unwrap();
    let config = || {
        let mut config = control_plane::config::Config::for_kube(&k8s.url(), data.path());
        config.now = Some(schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap());
        config
    };
    let doc: Value = serde_saphyr::from_str(&app_yaml("k1", "PSA-1")).unwrap();
    k8s.apply_by(doc.clone(), "kubectl-client-side-apply");
    let running = control_plane::start(config()).await.unwrap();
    assert!(running.app().wait_caught_up(std::time::Duration::from_secs(60)).await);
    let client = reqwest::Client::new();
    let ask = async |running: &control_plane::Running, token: &str| -> Value {
        let base = format!("http://{}/graphql/query", running.local_addr());
        let body = json!({"query": HISTORY, "variables": {"id": app_id()}});
        client.post(&base).bearer_auth(token).json(&body).send().await.unwrap().json().await.unwrap()
    };
    let owner = team_token("payments--checkout", "poc");
    let until = async |running: &control_plane::Running, revisions: usize| {
        eventually(running.app(), "the change to be recorded", async || {
            let a = ask(running, &owner).await;
            (a["data"]["history"]["totalCount"] == revisions).then_some(a)
        })
        .await
    };
    let mut versions = Vec::new();
    for (i, (client_id, manager)) in [("k2", "application-operator"), ("k3", "kubectl-edit")].into_iter().enumerate() {
        let mut edited = doc.clone();
        edited["status"]["clientId"] = json!(client_id);
        versions.push(k8s.apply_by(edited, manager));
        until(&running, i + 2).await;
    }
    assert!(k8s.delete(schema::KindId::Application, NAMESPACE, "history-app"));
    until(&running, 4).await;
    let mut recreated = doc.clone();
    recreated["status"]["clientId"] = json!("k4");
    // A new object: the API server's managedFields start anew.
    recreated["metadata"].as_object_mut().unwrap().remove("managedFields");
    versions.push(k8s.apply_by(recreated, "kubectl-create"));
    let answer = until(&running, 5).await;
    let edges = answer["data"]["history"]["edges"].as_array().unwrap();
    let seen: Vec<(&str, &Value, &Value)> =
        edges.iter().map(|e| (e["node"]["operation"].as_str().unwrap(), &e["node"]["manager"], &e["node"]["resourceVersion"])).collect();
    let rv = |v: u64| json!(v.to_string());
    assert_eq!(
        seen,
        vec![
            ("CREATED", &json!("kubectl-create"), &rv(versions[2])),
            ("DELETED", &Value::Null, &Value::Null),
            ("UPDATED", &json!("kubectl-edit"), &rv(versions[1])),
            ("UPDATED", &json!("application-operator"), &rv(versions[0])),
            ("CREATED", &json!("kubectl-client-side-apply"), &edges[4]["node"]["resourceVersion"]),
        ],
        "{answer}"
    );
    assert_eq!(edges[2]["node"]["changedFields"].as_array().unwrap().iter().filter(|f| *f == "clientID").count(), 1);
    for (who, attacker) in attackers() {
        let answer = ask(&running, &attacker).await;
        assert_eq!(answer["errors"][0]["extensions"]["code"], "NOT_FOUND", "{who}: {answer}");
    }
    running.shutdown().await.unwrap();
    let running = control_plane::start(config()).await.unwrap();
    assert!(running.app().wait_caught_up(std::time::Duration::from_secs(60)).await);
    assert_eq!(ask(&running, &owner).await, answer, "the same after a restart");
    running.shutdown().await.unwrap();
}

/// The Approval that moves: `moving-approval` of `logistics--fleet`, first on `payments--checkout`'s
/// subscription of `logistics-fleet-positions-v1`, then on `payments--ledger`'s.
const MOVING_FILE: &str = "91-moving-approval.yaml";

fn approval_yaml(team: &str, subscription: &str, reason: &str) -> String {
    format!(
        r#"apiVersion: approval.cp.ei.telekom.de/v1
kind: Approval
metadata:
  name: moving-approval
  namespace: poc--logistics--fleet
  labels:
    cp.ei.telekom.de/environment: poc
  creationTimestamp: "2026-05-30T05:08:00Z"
spec:
  action: subscribe
  strategy: Auto
  state: Granted
  target:
    apiVersion: api.cp.ei.telekom.de/v1
    kind: ApiSubscription
    name: {subscription}
    namespace: poc--{team}
  requester:
    teamName: {team}
    teamEmail: someone@example.com
    reason: {reason}
  decider:
    teamName: logistics--fleet
    teamEmail: fleet@example.com
"#
    )
}

fn approval_id() -> String {
    schema::GlobalId::new("Approval", &schema::keys::natural::namespaced("poc", "poc--logistics--fleet", "moving-approval")).encode()
}

/// (revision, operation) of the moving approval's revisions `token` sees, newest first, with
/// `totalCount`; and the revisions of it in the viewer's activity.
async fn moving_revisions(server: &Server, token: &str) -> (Vec<(u64, String)>, u64, Vec<(u64, String)>, Vec<Value>) {
    let query = "query($id: ID!) { history(id: $id) { totalCount edges { node { revision operation node { id } } } } }";
    let (data, errors) = server.query_raw(token, query, json!({"id": approval_id()})).await;
    let pairs = |edges: &Value| {
        edges
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|e| e["node"]["id"].is_null() || e["node"]["id"] == approval_id())
                    .map(|e| (e["node"]["revision"].as_u64().unwrap(), e["node"]["operation"].as_str().unwrap().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let history = pairs(&data["history"]["edges"]);
    let total = data["history"]["totalCount"].as_u64().unwrap_or(0);
    let (activity, activity_errors) = server.query_raw(token, ACTIVITY, json!({})).await;
    assert!(activity_errors.is_empty(), "{activity_errors:?}");
    let mine = pairs(&activity["activity"]["edges"]);
    (history, total, mine, errors)
}

/// An object that moves from team A to team B shows A only the revisions A owned (before or
/// after the change) and B only those B owned, in `history`, its `totalCount` and `activity`;
/// a team that never owned it gets `NOT_FOUND`. An Approval belongs to the team of its
/// subscription (`spec.target`): it moves from `payments--checkout` to `payments--ledger`, then
/// changes again under `payments--ledger`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_that_moved_shows_each_team_only_the_revisions_it_owned() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, data) = (tmp.path().join("world"), tmp.path().join("data"));
    support::copy_dir(&support::world_dir(), &dir);
    let write = |text: String| std::fs::write(dir.join(MOVING_FILE), text).unwrap();
    write(approval_yaml("payments--checkout", "checkout-web--logistics-fleet-positions-v1", "first"));
    let server = Server::start(&dir, Some(&data)).await;
    let (a, b) = (team_token("payments--checkout", "poc"), team_token("payments--ledger", "poc"));
    let provider = team_token("logistics--fleet", "poc");
    let seen = async |token: &str, n: u64| {
        eventually(server.running().app(), "the revision to be recorded", async || {
            (moving_revisions(&server, token).await.1 == n).then_some(())
        })
        .await
    };
    seen(&a, 1).await;
    write(approval_yaml("payments--ledger", "ledger-reports--logistics-fleet-positions-v1", "moved"));
    seen(&provider, 2).await;
    write(approval_yaml("payments--ledger", "ledger-reports--logistics-fleet-positions-v1", "changed under ledger"));
    seen(&provider, 3).await;

    let (all, _, all_activity, errors) = moving_revisions(&server, &provider).await;
    assert!(errors.is_empty(), "{errors:?}");
    let ops: Vec<&str> = all.iter().map(|(_, o)| o.as_str()).collect();
    assert_eq!(ops, ["UPDATED", "UPDATED", "CREATED"], "the provider team owned every revision");
    assert_eq!(all_activity, all);
    let (created, moved, changed) = (all[2].clone(), all[1].clone(), all[0].clone());

    let (history, total, activity, errors) = moving_revisions(&server, &a).await;
    assert!(errors.is_empty(), "A owned some of its revisions, so its history is no NOT_FOUND: {errors:?}");
    assert_eq!(history, vec![moved.clone(), created.clone()], "A sees its creation and the move away, not what followed");
    assert_eq!(total, 2);
    assert_eq!(activity, history);

    let (history, total, activity, errors) = moving_revisions(&server, &b).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(history, vec![changed, moved], "B sees the move to it and what followed, not the creation under A");
    assert_eq!(total, 2);
    assert_eq!(activity, history);

    let (history, total, activity, errors) = moving_revisions(&server, &team_token("assist--copilot", "poc")).await;
    assert_eq!(errors.first().map(|e| e["extensions"]["code"].clone()), Some(json!("NOT_FOUND")), "{errors:?}");
    assert!(history.is_empty() && total == 0 && activity.is_empty());
    server.stop().await;
}
