//! Catalogue search end to end: the server on a copy of the bundled world answers a
//! misspelled `catalogueSearch`, follows a removed manifest within a second, keeps its index in
//! `DATA_DIR/search/`, and rebuilds that index on start after it was deleted on disk.

mod support;

use serde_json::Value;
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

/// Asks `query` again after each change the server reports (search index commits included)
/// until `check` holds for the answer.
async fn eventually(server: &Server, query: &str, check: impl Fn(&[String]) -> bool) -> Vec<String> {
    support::eventually(server.running().app(), &format!("search for {query:?}"), async || {
        let paths = base_paths(server, query).await;
        check(&paths).then_some(paths)
    })
    .await
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

/// A new Api document (`zebra-extra-<i>`, base path `/zebra/extra<i>/v1`) in its own file.
fn add_api(manifests: &std::path::Path, i: usize) {
    let doc = format!(
        "apiVersion: api.cp.ei.telekom.de/v1\nkind: Api\nmetadata:\n  name: zebra-extra{i}-v1\n  namespace: poc--logistics--fleet\n  \
         labels:\n    cp.ei.telekom.de/environment: poc\n    cp.ei.telekom.de/basepath: zebra-extra{i}-v1\n  \
         creationTimestamp: \"2026-03-26T19:07:00Z\"\nspec:\n  version: \"1.0.0\"\n  basePath: /zebra/extra{i}/v1\n  category: other\n  xVendor: false\n\
         status:\n  active: true\n"
    );
    std::fs::write(manifests.join(format!("zz-extra-{i}.yaml")), doc).unwrap();
}

const ZEBRAS: &str =
    r#"{ apis(search: "zebra") { totalCount edges { node { basePath } } } catalogueSearch(query: "zebra", kinds: [API]) { totalCount } }"#;

/// Starts the server on `manifests` and `data`, waits for `/readyz` to turn 200 and asks
/// [`ZEBRAS`] at once; returns that answer and the one a settled server gives (the index at
/// the store's revision).
async fn zebras_at_ready(manifests: &std::path::Path, data: &std::path::Path) -> (Value, Value) {
    let mut config = control_plane::config::Config::for_manifests(manifests, data);
    config.now = Some(schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap());
    // Ready once the initial sync is applied, as on a first start: what a warm start serves
    // while it catches up is tested with the kube source (e2e_kube).
    config.serve_while_catching_up = false;
    let running = control_plane::start(config).await.unwrap();
    let base = format!("http://{}", running.local_addr());
    let http = reqwest::Client::new();
    let ask = || async {
        let body = serde_json::json!({"query": ZEBRAS});
        let resp = http.post(format!("{base}/graphql/query")).bearer_auth(support::team_token("payments--checkout", "poc")).json(&body);
        let answer: Value = resp.send().await.unwrap().json().await.unwrap();
        assert!(answer.get("errors").is_none(), "{answer}");
        answer["data"].clone()
    };
    // The barrier is the product's own: /readyz.
    while http.get(format!("{base}/readyz")).send().await.unwrap().status() != 200 {
        tokio::task::yield_now().await;
    }
    let at_ready = ask().await;
    let store = running.app().store();
    let settled = |s: &storage::Store| s.read().unwrap().revision().unwrap() == s.catalogue().unwrap().revision();
    while !settled(store) {
        tokio::task::yield_now().await;
    }
    let after = ask().await;
    running.shutdown().await.unwrap();
    (at_ready, after)
}

/// Ready means searchable. 20 starts on the example world — cold, warm after a new
/// Api document each time, after a snapshot restore, after the index was deleted — and, with
/// `source.serveWhileCatchingUp` off, a search sent right after `/readyz` turns 200 answers
/// what the settled server answers, the new document included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_right_after_ready_answers_as_a_settled_server() {
    let tmp = tempfile::tempdir().unwrap();
    let manifests = tmp.path().join("world");
    support::copy_dir(&support::world_dir(), &manifests);
    let data = tmp.path().join("data");
    for start in 0..20 {
        let how = match start {
            0 => "cold",
            17 => {
                std::fs::remove_dir_all(data.join(storage::search::SEARCH_DIR)).unwrap();
                "warm, index deleted"
            }
            18 | 19 => {
                let snap = tmp.path().join(format!("{start}.snap"));
                control_plane::snapshot::export_offline(&data, &snap).unwrap();
                std::fs::remove_dir_all(&data).unwrap();
                control_plane::snapshot::restore(&snap, &data, false).unwrap();
                "restored"
            }
            _ => "warm",
        };
        add_api(&manifests, start);
        let (at_ready, settled) = zebras_at_ready(&manifests, &data).await;
        assert_eq!(at_ready, settled, "start {start} ({how}): a search right after ready");
        assert_eq!(at_ready["apis"]["totalCount"], start + 1, "start {start} ({how}): {at_ready}");
        assert_eq!(at_ready["catalogueSearch"]["totalCount"], start + 1, "start {start} ({how})");
    }
}

/// `phaseCounts` counts what a search finds, as `totalCount` does, for a team and an admin.
#[tokio::test]
async fn phase_counts_count_the_records_a_search_finds() {
    let server = Server::start(&support::world_dir(), None).await;
    let admin = support::token("platform--admins--console", "tardis:admin:all", "poc");
    for token in [support::team_token("payments--checkout", "poc"), admin] {
        let data = server
            .query(&token, r#"{ found: apis(search: "ledger") { totalCount phaseCounts { phase count } } all: apis { totalCount } }"#)
            .await;
        let counted: u64 = data["found"]["phaseCounts"].as_array().unwrap().iter().map(|p| p["count"].as_u64().unwrap()).sum();
        let found = data["found"]["totalCount"].as_u64().unwrap();
        assert_eq!(counted, found, "{data}");
        assert!(found > 0 && found < data["all"]["totalCount"].as_u64().unwrap(), "the search narrows: {data}");
    }
    server.stop().await;
}

/// An Api document (`fold-<i>`, base path `/fold/api<i>/v1`) with `category` and OAuth2 scopes
/// as given, in its own file.
fn add_api_with(manifests: &std::path::Path, i: usize, category: &str, scopes: &[&str]) {
    // Plain YAML scalars: the texts are written as they are (no escapes).
    let scopes: String = scopes.iter().map(|s| format!("\n    - {s}")).collect();
    let doc = format!(
        "apiVersion: api.cp.ei.telekom.de/v1\nkind: Api\nmetadata:\n  name: fold{i}-v1\n  namespace: poc--logistics--fleet\n  \
         labels:\n    cp.ei.telekom.de/environment: poc\n    cp.ei.telekom.de/basepath: fold-api{i}-v1\n  \
         creationTimestamp: \"2026-03-26T19:07:00Z\"\nspec:\n  version: \"1.0.0\"\n  basePath: /fold/api{i}/v1\n  category: {category}\n  \
         xVendor: false\n  oauth2Scopes:{scopes}\nstatus:\n  active: true\n"
    );
    std::fs::write(manifests.join(format!("zz-fold-{i}.yaml")), doc).unwrap();
}

/// The base paths `apis(search:)` and `catalogueSearch(kinds: [API])` find for `text`, and
/// their totalCounts: (apis, catalogueSearch).
async fn both_searches(server: &Server, text: &str) -> ((u64, Vec<String>), (u64, Vec<String>)) {
    // The text as it is: a JSON string in the request's variables.
    let query = r#"query($text: String!) { apis(search: $text, first: 1000) { totalCount edges { node { basePath } } }
        catalogueSearch(query: $text, kinds: [API], first: 1000) { totalCount edges { node { ...on Api { basePath } } } } }"#;
    let (data, errors) =
        server.query_raw(&support::team_token("payments--checkout", "poc"), query, serde_json::json!({ "text": text })).await;
    assert!(errors.is_empty(), "{text:?}: {errors:?}");
    let side = |conn: &Value| {
        let mut paths: Vec<String> =
            conn["edges"].as_array().unwrap().iter().map(|e| e["node"]["basePath"].as_str().unwrap().to_string()).collect();
        paths.sort();
        (conn["totalCount"].as_u64().unwrap(), paths)
    };
    (side(&data["apis"]), side(&data["catalogueSearch"]))
}

/// One rule for every search: `apis(search:)` and `catalogueSearch` agree on accents in any
/// Unicode form and on case, on a word longer than 64 bytes, and on texts without a searchable
/// word (which do not narrow: every API the viewer sees).
#[tokio::test]
async fn every_search_follows_one_rule_for_accents_long_words_and_texts_without_words() {
    let tmp = tempfile::tempdir().unwrap();
    let manifests = tmp.path().join("world");
    support::copy_dir(&support::world_dir(), &manifests);
    let long = format!("scope{}", "x".repeat(70));
    // Precomposed in one document, decomposed (U + U+0308) in the other.
    add_api_with(&manifests, 1, "Überweisungen", &["read"]);
    add_api_with(&manifests, 2, "U\u{0308}berweisungen", &[long.as_str()]);
    let server = Server::start(&manifests, None).await;
    let both = vec!["/fold/api1/v1".to_string(), "/fold/api2/v1".to_string()];
    for text in ["Überweisungen", "U\u{0308}berweisungen", "uberweisungen", "UBERWEISUNGEN", "überweisungen"] {
        let (apis, catalogue) = both_searches(&server, text).await;
        assert_eq!(apis, (2, both.clone()), "apis(search: {text:?})");
        assert_eq!(catalogue, apis, "catalogueSearch(query: {text:?})");
    }
    // A word longer than 64 bytes still matches itself, and only itself.
    let (apis, catalogue) = both_searches(&server, &long).await;
    assert_eq!(apis, (1, vec!["/fold/api2/v1".to_string()]));
    assert_eq!(catalogue, apis);
    let (apis, catalogue) = both_searches(&server, &format!("other{}", "y".repeat(70))).await;
    assert_eq!((apis.0, catalogue.0), (0, 0), "an unknown long word matches nothing");
    // Texts without a letter or digit do not narrow, in both.
    let (all, _) = both_searches(&server, "").await;
    let visible: Value = server.query(&support::team_token("payments--checkout", "poc"), "{ apis { totalCount } }").await;
    assert_eq!(all.0, visible["apis"]["totalCount"].as_u64().unwrap());
    assert!(all.0 > 2, "{all:?}");
    for text in ["", "   ", "*", "?", "\"", "🚀🔥", "\u{0301}", "-- / --"] {
        let (apis, catalogue) = both_searches(&server, text).await;
        assert_eq!(apis, all, "apis(search: {text:?}) lists as without search");
        assert_eq!(catalogue, all, "catalogueSearch(query: {text:?}) answers every API the viewer sees");
    }
    server.stop().await;
}
