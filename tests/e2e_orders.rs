//! Ordering indexes, end to end. Built on first use (storage layout 3, `storage.prebuildOrders`
//! false): the first query that sorts by a field is answered by sorting in memory, the writer
//! then builds the index, and the answers stay the same, for every viewer, before and after the
//! build and after later changes. Built after the initial sync (the default, in steps: layout 6):
//! every order of every kind is built without a query asking, and answers as sorting in memory
//! does.

mod support;

use schema::KindId;
use serde_json::{json, Value};
use std::path::Path;
use storage::OrderField;
use support::{names, Server};

const BY_NAME: &str = "{ applications(orderBy: [{field: NAME, direction: DESC}]) { totalCount edges { cursor node { id name } } } }";
const BY_CREATED: &str = "{ approvals(orderBy: [{field: CREATED_AT, direction: ASC}]) { totalCount edges { node { id createdAt } } } }";

/// Waits until the store lists `kind` by `order` as built.
async fn built(server: &Server, kind: KindId, order: OrderField) {
    let store = server.running().app().store();
    support::eventually(server.running().app(), &format!("{kind:?} by {order:?} to be built"), async || {
        store.read().unwrap().built_orders().unwrap().contains(kind, order).then_some(())
    })
    .await
}

/// Writes `doc` as a JSON manifest.
fn write(path: &Path, doc: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(doc).unwrap()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_is_indexed_after_its_first_query_with_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    support::copy_dir(&support::world_dir(), dir.path());
    let server = Server::start_with(dir.path(), None, |c| c.storage.prebuild_orders = false).await;
    let store = server.running().app().store().clone();
    assert!(store.read().unwrap().built_orders().unwrap().is_empty(), "a cold load builds no order beyond the natural-key ones");

    let viewers = [
        support::team_token("payments--checkout", "poc"),
        support::team_token("logistics--fleet", "poc"),
        support::token("platform--ops--console", "tardis:admin:all", "poc"),
    ];
    let mut sorted = Vec::new();
    for token in &viewers {
        sorted.push((server.query(token, BY_NAME).await, server.query(token, BY_CREATED).await));
    }
    built(&server, KindId::Application, OrderField::Name).await;
    built(&server, KindId::Approval, OrderField::CreatedAt).await;
    assert!(
        !store.read().unwrap().built_orders().unwrap().contains(KindId::Approval, OrderField::LastModifiedAt),
        "only what was asked for"
    );
    for (token, before) in viewers.iter().zip(&sorted) {
        assert_eq!((server.query(token, BY_NAME).await, server.query(token, BY_CREATED).await), *before);
    }

    // The answers are what they claim to be, and a team sees only its own applications.
    let checkout = names(&sorted[0].0["applications"], "name");
    let fleet = names(&sorted[1].0["applications"], "name");
    assert!(checkout.len() >= 2 && !fleet.is_empty(), "{checkout:?} {fleet:?}");
    assert!(checkout.windows(2).all(|w| w[0] >= w[1]), "descending: {checkout:?}");
    assert!(checkout.iter().all(|n| !fleet.contains(n)), "{checkout:?} {fleet:?}");
    assert_eq!(sorted[0].0["applications"]["totalCount"], json!(checkout.len()));
    let created: Vec<String> = sorted[2].1["approvals"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["node"]["createdAt"].as_str().unwrap().to_string())
        .collect();
    assert!(created.len() >= 2 && created.windows(2).all(|w| w[0] <= w[1]), "{created:?}");

    // A later change is kept in the built index: a new application of the team sorts in place.
    let apps: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(dir.path().join("04-applications.yaml")).unwrap()).unwrap();
    let mut app = apps.into_iter().find(|d| d["metadata"]["namespace"] == "poc--payments--checkout").expect("a checkout application");
    app["metadata"]["name"] = json!("zzz-sorted-first");
    app["metadata"].as_object_mut().unwrap().remove("uid");
    write(&dir.path().join("30-new-application.json"), &app);
    let data = support::eventually(server.running().app(), "the new application", async || {
        let data = server.query(&viewers[0], BY_NAME).await;
        (data["applications"]["totalCount"] == json!(checkout.len() + 1)).then_some(data)
    })
    .await;
    let after = names(&data["applications"], "name");
    assert_eq!(after[0], "zzz-sorted-first");
    assert_eq!(&after[1..], checkout.as_slice());
    assert_eq!(names(&server.query(&viewers[1], BY_NAME).await["applications"], "name"), fleet, "another team sees no change");
    assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    server.stop().await;
}

/// The default: once the initial sync is processed, the writer builds every order of every kind
/// in steps, without a query asking; the built indexes answer as the in-memory sort of a server
/// that builds on first use, for every viewer; the metrics say when nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_order_is_built_after_the_initial_sync_and_answers_as_sorting_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    support::copy_dir(&support::world_dir(), dir.path());
    let viewers = [support::team_token("payments--checkout", "poc"), support::token("platform--ops--console", "tardis:admin:all", "poc")];
    let on_first_use = Server::start_with(dir.path(), None, |c| c.storage.prebuild_orders = false).await;
    let mut expected = Vec::new();
    for token in &viewers {
        expected.push((on_first_use.query(token, BY_NAME).await, on_first_use.query(token, BY_CREATED).await));
    }
    on_first_use.stop().await;

    let data = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), Some(data.path())).await;
    let app = server.running().app();
    let store = app.store().clone();
    support::eventually(app, "every order to be built", async || (!store.orders_pending()).then_some(())).await;
    let built = store.read().unwrap().built_orders().unwrap();
    for &kind in KindId::ALL {
        for order in [OrderField::CreatedAt, OrderField::LastModifiedAt] {
            assert!(built.contains(kind, order), "{kind:?} by {order:?}");
        }
    }
    assert!(built.contains(KindId::Application, OrderField::Name) && built.contains(KindId::Team, OrderField::Name));
    let metrics = app.metrics().encode();
    assert!(metrics.contains("controlplane_order_builds_left 0"), "{metrics}");
    let steps = metrics.lines().find(|l| l.starts_with("controlplane_order_build_step_seconds_count")).unwrap();
    assert_ne!(steps.rsplit(' ').next(), Some("0"), "{steps}");
    for (token, before) in viewers.iter().zip(&expected) {
        assert_eq!((server.query(token, BY_NAME).await, server.query(token, BY_CREATED).await), *before);
    }
    assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    server.stop().await;
}
