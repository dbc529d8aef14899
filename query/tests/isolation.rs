//! Isolation per root query: for every root connection, two teams, their
//! group and an admin. Each viewer's `totalCount` equals what it lists; the group sees exactly
//! the union of its teams; the admin sees a superset; every ID one team sees and the other does
//! not resolves to null with `NOT_FOUND` through `node` and `nodes` for the other team; a viewer
//! of another environment sees nothing of it.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeSet;
use support::{admin, error_codes, group_viewer, team_viewer, World};

/// Root connections and whether records are team-owned (catalogue entries are per environment).
const ROOTS: &[(&str, bool)] = &[
    ("teams", true),
    ("applications", true),
    ("apiExposures", true),
    ("apiSubscriptions", true),
    ("approvals", true),
    ("approvalRequests", true),
    ("eventExposures", true),
    ("eventSubscriptions", true),
    ("permissionSets", true),
    ("agenticExposures", true),
    ("agenticSubscriptions", true),
    ("fileExposures", true),
    ("fileSubscriptions", true),
    ("apis", false),
    ("eventTypes", false),
    ("mcpServers", false),
    ("agentCards", false),
];

async fn ids(w: &World, v: &query::viewer::Viewer, root: &str) -> BTreeSet<String> {
    let d = w.data(v, &format!("{{ {root} {{ totalCount edges {{ node {{ id }} }} }} }}")).await;
    let ids: BTreeSet<String> =
        d[root]["edges"].as_array().unwrap().iter().map(|e| e["node"]["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(d[root]["totalCount"].as_u64().unwrap() as usize, ids.len(), "{root}: totalCount equals what is listed");
    ids
}

#[tokio::test]
async fn every_root_query_isolates_teams_groups_and_environments() {
    let w = World::load();
    let (a, b) = (team_viewer("payments--checkout", "poc"), team_viewer("payments--ledger", "poc"));
    let outsider = team_viewer("logistics--fleet", "poc");
    let group = group_viewer("payments", "poc");
    let qa = team_viewer("payments--checkout", "qa");
    let mut probed = 0;
    for (root, team_owned) in ROOTS {
        let (sa, sb, so, sg, sadm, sqa) = (
            ids(&w, &a, root).await,
            ids(&w, &b, root).await,
            ids(&w, &outsider, root).await,
            ids(&w, &group, root).await,
            ids(&w, &admin(), root).await,
            ids(&w, &qa, root).await,
        );
        assert!(sadm.is_superset(&sg) && sadm.is_superset(&so) && sadm.is_superset(&sqa), "{root}: admin sees everything");
        assert!(sqa.is_disjoint(&sa) && sqa.is_disjoint(&sb), "{root}: qa sees nothing of poc");
        if *team_owned {
            let union: BTreeSet<String> = sa.union(&sb).cloned().collect();
            assert_eq!(sg, union, "{root}: the group sees exactly its teams' records");
        } else {
            assert_eq!(sa, sb, "{root}: catalogue entries are visible to the whole environment");
            assert_eq!(sa, so, "{root}");
        }
        // Every record team a sees and the outsider does not: NOT_FOUND for the outsider.
        let hidden: Vec<&String> = sa.difference(&so).collect();
        if *team_owned && *root != "teams" {
            assert!(!hidden.is_empty() || sa.is_empty(), "{root}");
        }
        for id in &hidden {
            let r = w.run(&outsider, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
            assert_eq!(r["data"]["node"], Value::Null, "{root} {id}");
            assert_eq!(error_codes(&r), ["NOT_FOUND"], "{root}");
            let r = w.run(&qa, &format!(r#"{{ node(id: "{id}") {{ id }} }}"#)).await;
            assert_eq!(error_codes(&r), ["NOT_FOUND"], "{root}: another environment");
            probed += 1;
        }
        if !hidden.is_empty() {
            let list = hidden.iter().map(|i| format!("{i:?}")).collect::<Vec<_>>().join(",");
            let r = w.run(&outsider, &format!("{{ nodes(ids: [{list}]) {{ id }} }}")).await;
            assert_eq!(r["data"]["nodes"], json!(vec![Value::Null; hidden.len()]), "{root}");
            assert_eq!(error_codes(&r).len(), hidden.len(), "{root}");
        }
    }
    assert!(probed >= 25, "{probed} node probes");
}

/// An `orderBy` of several fields sorts the viewer's rows by key and reads each page's records
/// again by key: a team sees exactly what it sees unsorted, counts the same, and nothing of
/// another team's.
#[tokio::test]
async fn a_sort_by_several_fields_keeps_the_viewers_rows() {
    let w = World::load();
    let viewers = [team_viewer("payments--checkout", "poc"), team_viewer("logistics--fleet", "poc"), group_viewer("payments", "poc")];
    let order = "orderBy: [{field: CREATED_AT}, {field: LAST_MODIFIED_AT, direction: DESC}]";
    let mut listed = 0;
    for root in ["applications", "approvals", "approvalRequests"] {
        for v in &viewers {
            let plain = ids(&w, v, root).await;
            let d = w.data(v, &format!("{{ {root}({order}) {{ totalCount edges {{ node {{ id }} }} }} }}")).await;
            let sorted: BTreeSet<String> =
                d[root]["edges"].as_array().unwrap().iter().map(|e| e["node"]["id"].as_str().unwrap().to_string()).collect();
            assert_eq!(sorted, plain, "{root}: the sorted rows are the viewer's own");
            assert_eq!(d[root]["totalCount"].as_u64().unwrap() as usize, plain.len(), "{root}: counted alike");
            listed += usize::from(!plain.is_empty());
        }
    }
    assert!(listed >= 5, "{listed} of 9 sorted lists hold rows");
}
