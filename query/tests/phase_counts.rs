//! `phaseCounts` on every connection of a kind with `statusPhase`: the same records
//! as `totalCount` (viewer, `where`, `search`) counted per phase, from the store's maintained
//! counters when nothing filters. Checked against `examples/world.facts.json` for teams, groups
//! and an admin, against a scan of the same connection, and for isolation when another team's
//! records change.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::LazyLock;
use support::*;

static WORLD: LazyLock<World> = LazyLock::new(World::load);
static FACTS: LazyLock<Value> = LazyLock::new(facts);

const PHASES: [&str; 4] = ["READY", "PENDING", "ERROR", "UNKNOWN"];

/// Root connection → the kind's name in the facts' `statusPhases`.
const ROOTS: [(&str, &str); 17] = [
    ("teams", "Team"),
    ("applications", "Application"),
    ("permissionSets", "PermissionSet"),
    ("apis", "Api"),
    ("apiExposures", "ApiExposure"),
    ("apiSubscriptions", "ApiSubscription"),
    ("eventTypes", "EventType"),
    ("eventExposures", "EventExposure"),
    ("eventSubscriptions", "EventSubscription"),
    ("mcpServers", "McpServer"),
    ("agentCards", "AgentCard"),
    ("agenticExposures", "AgenticExposure"),
    ("agenticSubscriptions", "AgenticSubscription"),
    ("fileExposures", "FileExposure"),
    ("fileSubscriptions", "FileSubscription"),
    ("approvalRequests", "ApprovalRequest"),
    ("approvals", "Approval"),
];

/// `phaseCounts` as phase → count, asserting every phase is listed once, in order.
fn counts(connection: &Value) -> BTreeMap<String, u64> {
    let list = connection["phaseCounts"].as_array().unwrap_or_else(|| panic!("no phaseCounts: {connection}"));
    let phases: Vec<&str> = list.iter().map(|p| p["phase"].as_str().unwrap()).collect();
    assert_eq!(phases, PHASES, "every phase, in declaration order");
    list.iter().map(|p| (p["phase"].as_str().unwrap().to_string(), p["count"].as_u64().unwrap())).collect()
}

fn phase_map(pairs: impl IntoIterator<Item = (String, u64)>) -> BTreeMap<String, u64> {
    let mut m: BTreeMap<String, u64> = PHASES.iter().map(|p| (p.to_string(), 0)).collect();
    for (p, n) in pairs {
        *m.get_mut(&p).unwrap() += n;
    }
    m
}

/// The facts' application phases of `teams` in `env`.
fn application_phases(env: &str, teams: &[&str]) -> BTreeMap<String, u64> {
    let apps = FACTS["env"][env]["applications"].as_array().unwrap();
    phase_map(
        apps.iter().filter(|a| teams.contains(&a["team"].as_str().unwrap())).map(|a| (a["statusPhase"].as_str().unwrap().to_string(), 1)),
    )
}

#[tokio::test]
async fn an_admin_counts_every_phase_of_every_kind_as_the_facts_do() {
    for (root, kind) in ROOTS {
        let q = format!("{{ {root} {{ totalCount phaseCounts {{ phase count }} }} }}");
        let data = WORLD.data(&admin(), &q).await;
        let expected = phase_map(FACTS["environments"].as_array().unwrap().iter().flat_map(|env| {
            let phases = &FACTS["env"][env.as_str().unwrap()]["statusPhases"][kind];
            PHASES.iter().map(move |p| (p.to_string(), phases[p].as_u64().unwrap_or(0)))
        }));
        let got = counts(&data[root]);
        assert_eq!(got, expected, "{root}");
        assert_eq!(got.values().sum::<u64>(), data[root]["totalCount"].as_u64().unwrap(), "{root}: phases add up to totalCount");
    }
}

#[tokio::test]
async fn teams_and_groups_count_the_phases_of_their_own_applications() {
    for env in ["poc", "qa"] {
        let teams: Vec<String> = FACTS["env"][env]["teams"].as_object().unwrap().keys().cloned().collect();
        for team in &teams {
            let data = WORLD.data(&team_viewer(team, env), "{ applications { phaseCounts { phase count } } }").await;
            assert_eq!(counts(&data["applications"]), application_phases(env, &[team.as_str()]), "team {team} ({env})");
        }
        for (group, members) in FACTS["env"][env]["groups"].as_object().unwrap() {
            let members: Vec<&str> = members.as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
            let data = WORLD.data(&group_viewer(group, env), "{ applications { phaseCounts { phase count } } }").await;
            assert_eq!(counts(&data["applications"]), application_phases(env, &members), "group {group} ({env})");
        }
    }
    // Nested connections count what they list.
    let data = WORLD
        .data(
            &team_viewer("payments--checkout", "poc"),
            "{ applications { edges { node { subscribedApis { totalCount phaseCounts { phase count } } } } } }",
        )
        .await;
    for edge in data["applications"]["edges"].as_array().unwrap() {
        let nested = &edge["node"]["subscribedApis"];
        assert_eq!(counts(nested).values().sum::<u64>(), nested["totalCount"].as_u64().unwrap());
    }
}

/// The counters (no filter) and a scan of the same records (a filter every record passes)
/// agree for every viewer and kind; a `where` on the phase leaves only that phase.
#[tokio::test]
async fn maintained_counters_equal_a_scan_and_filters_apply() {
    let viewers =
        [admin(), team_viewer("payments--checkout", "poc"), group_viewer("logistics", "poc"), team_viewer("payments--ledger", "qa")];
    for viewer in &viewers {
        for (root, _) in ROOTS {
            let q = format!(
                r#"{{ all: {root} {{ phaseCounts {{ phase count }} }} scanned: {root}(where: {{namespaceNEQ: "no-such-namespace"}}) {{ phaseCounts {{ phase count }} }}
                   ready: {root}(where: {{statusPhase: READY}}) {{ totalCount phaseCounts {{ phase count }} }} }}"#
            );
            let data = WORLD.data(viewer, &q).await;
            let all = counts(&data["all"]);
            assert_eq!(all, counts(&data["scanned"]), "{root} for {viewer:?}");
            let ready = counts(&data["ready"]);
            assert_eq!(ready["READY"], all["READY"], "{root}");
            assert_eq!(ready.values().sum::<u64>(), ready["READY"], "{root}: a phase filter leaves one phase");
            assert_eq!(data["ready"]["totalCount"].as_u64(), Some(all["READY"]));
        }
    }
}

/// A change of one team's application moves its counters and nobody else's.
#[tokio::test]
async fn another_teams_counts_do_not_change_when_a_teams_records_change() {
    let world = World::load();
    let q = "{ applications { phaseCounts { phase count } } }";
    let checkout = team_viewer("payments--checkout", "poc");
    let ledger = team_viewer("payments--ledger", "poc");
    let (checkout_before, ledger_before, admin_before) = (
        counts(&world.data(&checkout, q).await["applications"]),
        counts(&world.data(&ledger, q).await["applications"]),
        counts(&world.data(&admin(), q).await["applications"]),
    );
    // Turn one READY application of payments--checkout into ERROR.
    let mut changed = world_documents()
        .into_iter()
        .find(|d| {
            d["kind"] == "Application"
                && d["metadata"]["namespace"] == "poc--payments--checkout"
                && d["status"]["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
        })
        .expect("a READY application of payments--checkout");
    for c in changed["status"]["conditions"].as_array_mut().unwrap() {
        if c["type"] == "Ready" {
            c["status"] = json!("False");
            c["reason"] = json!("Error");
        }
    }
    load(&world.store, &[changed]);
    let checkout_after = counts(&world.data(&checkout, q).await["applications"]);
    assert_eq!(checkout_after["READY"], checkout_before["READY"] - 1);
    assert_eq!(checkout_after["ERROR"], checkout_before["ERROR"] + 1);
    assert_eq!(counts(&world.data(&ledger, q).await["applications"]), ledger_before, "another team's counts");
    let admin_after = counts(&world.data(&admin(), q).await["applications"]);
    assert_eq!((admin_after["READY"], admin_after["ERROR"]), (admin_before["READY"] - 1, admin_before["ERROR"] + 1));
    assert_eq!(world.store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new(), "counters equal the records");
}
