//! Catalogue search end to end (issue 7): the server on a copy of the bundled world answers a
//! misspelled `catalogueSearch`, follows a removed manifest within a second, keeps its index in
//! `DATA_DIR/search/`, and rebuilds that index on start after it was deleted on disk.

mod support;

use serde_json::Value;
use std::time::{Duration, Instant};
use support::Server;

const LEDGER: &str = "/payments/ledger/v2";

async fn base_paths(server: &Server, query: &str) -> Vec<String> {
    let data = server
        .query(
            &support::team_token("payments--checkout", "poc"),
            &format!(r#"{{ catalogueSearch(query: {query:?}, kinds: [API]) {{ edges {{ node {{ ...on Api {{ basePath }} }} }} }} }}"#),
        )
        .await;
    data["catalogueSearch"]["edges"].as_array().unwrap().iter().map(|e| e["node"]["basePath"].as_str().unwrap().to_string()).collect()
}

/// Polls until `check` holds for the answer to `query` (the index commits within a second).
async fn eventually(server: &Server, query: &str, check: impl Fn(&[String]) -> bool) -> Vec<String> {
    let t0 = Instant::now();
    loop {
        let paths = base_paths(server, query).await;
        if check(&paths) {
            return paths;
        }
        assert!(t0.elapsed() < Duration::from_secs(3), "search for {query:?} still answers {paths:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Removes the document of object `name` in `namespace` from a multi-document YAML file.
fn remove_document(path: &std::path::Path, namespace: &str, name: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let needle = format!("  name: {name}\n  namespace: {namespace}\n");
    let docs: Vec<&str> = text.split("\n---\n").collect();
    let kept: Vec<&str> = docs.iter().copied().filter(|d| !d.contains(&needle)).collect();
    assert_eq!(kept.len() + 1, docs.len(), "exactly one document of {namespace}/{name} in {}", path.display());
    std::fs::write(path, kept.join("\n---\n")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_follows_the_store_and_is_rebuilt_on_start() {
    let manifests = tempfile::tempdir().unwrap();
    support::copy_dir(&support::world_dir(), manifests.path());
    let data = tempfile::tempdir().unwrap();

    let server = Server::start(manifests.path(), Some(data.path())).await;
    let paths = eventually(&server, "ledgr", |p| p.first().map(String::as_str) == Some(LEDGER)).await;
    assert_eq!(paths[0], LEDGER);
    assert!(data.path().join("search").is_dir(), "the index lives in DATA_DIR/search/");

    // Removing the manifest deletes the record; search never returns it again.
    remove_document(&manifests.path().join("06-apis.yaml"), "poc--payments--ledger", "payments-ledger-v2");
    eventually(&server, "ledger v2", |p| !p.iter().any(|b| b == LEDGER)).await;
    server.stop().await;

    // Deleted on disk: rebuilt on start, answering at once.
    std::fs::remove_dir_all(data.path().join("search")).unwrap();
    let server = Server::start(manifests.path(), Some(data.path())).await;
    let paths = base_paths(&server, "chekout").await;
    assert_eq!(paths.first().map(String::as_str), Some("/payments/checkout/v1"), "{paths:?}");
    assert!(!base_paths(&server, "ledger").await.iter().any(|b| b == LEDGER));
    let _: Value = server.query(&support::team_token("payments--checkout", "poc"), "{ __typename }").await;
    server.stop().await;
}
