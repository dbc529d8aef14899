//! Catalogue full-text search on the example world: typo tolerance, prefix matching,
//! exact base path first, `active` (one entry per base path), visibility per environment,
//! relevance-ordered pagination with query-bound cursors, highlights, a deleted entry that
//! disappears at once (before the index commits), and an index rebuilt when deleted on disk or
//! stale.

mod support;

use schema::{KindId, Timestamp};
use serde_json::Value;
use std::time::Duration;
use storage::search::{Catalogue, Opened};
use storage::SourceRef;
use support::{admin, error_codes, nodes, reference_time, strings, team_viewer, World};

/// The world with a search index open (rebuilt from the store: the index directory is new).
struct Searchable {
    w: World,
    catalogue: Catalogue,
    dir: tempfile::TempDir,
}

fn world() -> Searchable {
    let w = World::load();
    let dir = tempfile::tempdir().unwrap();
    let (catalogue, opened) = Catalogue::open(&dir.path().join("search"), &w.store).unwrap();
    assert!(matches!(opened, Opened::Rebuilt(n) if n > 0), "{opened:?}");
    Searchable { w, catalogue, dir }
}

/// Waits until the index has committed the store's current revision.
fn wait_indexed(s: &Searchable) {
    let revision = s.w.store.read().unwrap().revision().unwrap();
    if s.catalogue.revision() < revision {
        let at = s.catalogue.wait_for_revision_after(revision - 1, Duration::from_secs(60));
        assert!(at >= revision, "the index stopped following the store at {at} of {revision}");
    }
}

fn poc() -> query::viewer::Viewer {
    team_viewer("payments--checkout", "poc")
}

async fn search(s: &Searchable, q: &str) -> Value {
    s.w.data(&poc(), &format!(r#"{{ catalogueSearch(query: {q:?}) {{ totalCount edges {{ score node {{ __typename ...on Api {{ basePath owner {{ name }} }} ...on EventType {{ eventType }} ...on McpServer {{ name basePath }} ...on AgentCard {{ name basePath }} }} highlights {{ field snippet }} }} }} }}"#)).await["catalogueSearch"].clone()
}

fn first_node(conn: &Value) -> Value {
    nodes(conn).first().cloned().unwrap_or_else(|| panic!("no hits: {conn:#}"))
}

#[tokio::test]
async fn a_misspelled_query_finds_the_intended_entry() {
    let s = world();
    // One edit in a 5-letter word ("ledgr" → "ledger").
    let conn = search(&s, "ledgr").await;
    assert_eq!(first_node(&conn)["basePath"], "/payments/ledger/v2", "{conn:#}");
    // A transposition in a long word, and a missing letter.
    assert_eq!(first_node(&search(&s, "chekcout").await)["basePath"], "/payments/checkout/v1");
    assert_eq!(first_node(&search(&s, "Knowlege").await)["name"], "mcp-knowledge-v1");
    // Two edits are too many for a 5-letter word.
    assert_eq!(search(&s, "lgdgr").await["totalCount"], 0);
}

#[tokio::test]
async fn prefix_of_the_last_word_and_exact_matches_first() {
    let s = world();
    // Search as you type: "dispat" is a prefix of "dispatch".
    let conn = search(&s, "planner dispat").await;
    assert_eq!(first_node(&conn)["name"], "agents-dispatch-v1", "{conn:#}");
    // The exact base path ranks first, far above partial matches.
    let conn = search(&s, "/mcp/parcels/v1").await;
    let first = &conn["edges"][0];
    assert_eq!(first["node"]["basePath"], "/mcp/parcels/v1");
    assert!(first["score"].as_f64().unwrap() > 1000.0, "{conn:#}");
    let conn = search(&s, "de.telekom.payments.orderplaced.v1").await;
    assert_eq!(first_node(&conn)["eventType"], "de.telekom.payments.orderplaced.v1");
    // An exact word outranks a fuzzy one: "parcels" is exact in /mcp/parcels/v1 and
    // /logistics/parcels/v1, fuzzy ("parcel") nowhere better.
    let conn = search(&s, "parcels").await;
    let scores: Vec<f64> = conn["edges"].as_array().unwrap().iter().map(|e| e["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "relevance order: {scores:?}");
}

#[tokio::test]
async fn active_limits_to_one_entry_per_base_path() {
    let s = world();
    let q = |active: &str| {
        format!(
            r#"{{ apis(search: "payments checkout"{active}) {{ totalCount edges {{ node {{ basePath active owner {{ name }} }} }} }} }}"#
        )
    };
    let all = s.w.data(&poc(), &q("")).await;
    let both: Vec<Value> = nodes(&all["apis"]).into_iter().filter(|n| n["basePath"] == "/payments/checkout/v1").collect();
    assert_eq!(both.len(), 2, "{all:#}");
    let active = s.w.data(&poc(), &q(", where: { active: true }")).await;
    let one: Vec<Value> = nodes(&active["apis"]).into_iter().filter(|n| n["basePath"] == "/payments/checkout/v1").collect();
    assert_eq!(one.len(), 1, "{active:#}");
    assert_eq!(one[0]["owner"]["name"], "payments--checkout");
    // The same through catalogueSearch(activeOnly: true).
    let d = s
        .w
        .data(&poc(), r#"{ catalogueSearch(query: "parcels", kinds: [MCP_SERVER], activeOnly: true) { totalCount edges { node { ...on McpServer { basePath active } } } } }"#)
        .await;
    let paths = strings(&Value::Array(nodes(&d["catalogueSearch"])), "basePath");
    assert_eq!(paths, vec!["/mcp/parcels/v1"], "{d:#}");
    assert_eq!(d["catalogueSearch"]["totalCount"], 1);
}

#[tokio::test]
async fn a_deleted_entry_disappears() {
    let s = world();
    assert_eq!(first_node(&search(&s, "ledger v2").await)["basePath"], "/payments/ledger/v2");
    s.w.store
        .write(Timestamp(reference_time().0 + 1), |b| {
            let src = SourceRef { kind: KindId::Api, namespace: "poc--payments--ledger".into(), name: "payments-ledger-v2".into() };
            b.delete(&src, reference_time()).unwrap();
            Ok(())
        })
        .unwrap();
    // At once, before the index commits: filtered against the store.
    let conn = search(&s, "ledger v2").await;
    assert!(!strings(&Value::Array(nodes(&conn)), "basePath").contains(&"/payments/ledger/v2".to_string()), "{conn:#}");
    let apis = s.w.data(&poc(), r#"{ apis(search: "ledger") { edges { node { basePath } } } }"#).await;
    assert!(!strings(&Value::Array(nodes(&apis["apis"])), "basePath").contains(&"/payments/ledger/v2".to_string()));
    // And from the index itself once it has committed.
    wait_indexed(&s);
    let hits = s
        .catalogue
        .search(
            &storage::search::SearchRequest { query: "/payments/ledger/v2", kinds: &[KindId::Api], environment: None, active_only: false },
            10,
        )
        .unwrap();
    assert!(hits.hits.iter().all(|h| h.key.part(2) != "/payments/ledger/v2"), "{hits:?}");
}

#[tokio::test]
async fn entries_are_visible_per_environment() {
    let s = world();
    // A text without a searchable word does not narrow: it answers the viewer's catalogue,
    // still only of the viewer's environment.
    for text in ["payments", "", "*"] {
        let count = |v: query::viewer::Viewer| {
            let w = &s.w;
            async move {
                let q = format!(
                    r#"{{ catalogueSearch(query: {text:?}) {{ totalCount edges {{ node {{ ...on Api {{ environment }} ...on EventType {{ environment }} ...on McpServer {{ environment }} ...on AgentCard {{ environment }} }} }} }} }}"#
                );
                let d = w.data(&v, &q).await;
                let envs: std::collections::BTreeSet<String> =
                    nodes(&d["catalogueSearch"]).iter().map(|n| n["environment"].as_str().unwrap().to_string()).collect();
                (d["catalogueSearch"]["totalCount"].as_i64().unwrap(), envs)
            }
        };
        let (n_poc, envs) = count(poc()).await;
        assert_eq!(envs.into_iter().collect::<Vec<_>>(), vec!["poc"], "{text:?}");
        // Another team of the same environment sees the same catalogue.
        assert_eq!(count(team_viewer("logistics--fleet", "poc")).await.0, n_poc, "{text:?}");
        let (_, envs) = count(team_viewer("payments--checkout", "qa")).await;
        assert_eq!(envs.into_iter().collect::<Vec<_>>(), vec!["qa"], "{text:?}");
        let (n_all, envs) = count(admin()).await;
        assert_eq!(envs.into_iter().collect::<Vec<_>>(), vec!["poc", "qa"], "{text:?}");
        assert!(n_all > n_poc, "{text:?}");
    }
}

#[tokio::test]
async fn pages_follow_relevance_and_cursors_belong_to_their_query() {
    let s = world();
    let all = s.w.data(&poc(), r#"{ catalogueSearch(query: "v1") { totalCount edges { cursor node { __typename ...on Api { basePath } ...on EventType { eventType } ...on McpServer { basePath } ...on AgentCard { basePath } } } } }"#).await;
    let total = all["catalogueSearch"]["totalCount"].as_i64().unwrap() as usize;
    assert!(total >= 6, "{all:#}");
    let full: Vec<Value> = nodes(&all["catalogueSearch"]);
    let mut paged = Vec::new();
    let mut after = String::new();
    loop {
        let d = s.w.data(&poc(), &format!(r#"{{ catalogueSearch(query: "v1", first: 2{after}) {{ totalCount pageInfo {{ hasNextPage endCursor }} edges {{ node {{ __typename ...on Api {{ basePath }} ...on EventType {{ eventType }} ...on McpServer {{ basePath }} ...on AgentCard {{ basePath }} }} }} }} }}"#)).await;
        let c = &d["catalogueSearch"];
        assert_eq!(c["totalCount"].as_i64().unwrap() as usize, total);
        paged.extend(nodes(c));
        if !c["pageInfo"]["hasNextPage"].as_bool().unwrap() {
            break;
        }
        after = format!(", after: {:?}", c["pageInfo"]["endCursor"].as_str().unwrap());
    }
    assert_eq!(paged, full);
    // A cursor of one query is refused by another.
    let r = s.w.run(&poc(), &format!(r#"{{ catalogueSearch(query: "payments", first: 1{after}) {{ totalCount }} }}"#)).await;
    assert_eq!(error_codes(&r), vec!["BAD_USER_INPUT"]);
    // The same with `apis(search:)` cursors.
    let a =
        s.w.data(&poc(), r#"{ apis(search: "payments", first: 1) { totalCount pageInfo { endCursor } edges { node { basePath } } } }"#)
            .await;
    let cursor = a["apis"]["pageInfo"]["endCursor"].as_str().unwrap().to_string();
    let b =
        s.w.data(&poc(), &format!(r#"{{ apis(search: "payments", first: 10, after: {cursor:?}) {{ edges {{ node {{ basePath }} }} }} }}"#))
            .await;
    assert_eq!(nodes(&b["apis"]).len() + 1, a["apis"]["totalCount"].as_i64().unwrap() as usize);
    let r = s.w.run(&poc(), &format!(r#"{{ apis(search: "ledger", after: {cursor:?}) {{ totalCount }} }}"#)).await;
    assert_eq!(error_codes(&r), vec!["BAD_USER_INPUT"]);
    let r = s.w.run(&poc(), &format!(r#"{{ apis(after: {cursor:?}) {{ totalCount }} }}"#)).await;
    assert_eq!(error_codes(&r), vec!["BAD_USER_INPUT"]);
}

#[tokio::test]
async fn search_with_order_by_is_bad_input() {
    let s = world();
    let r = s.w.run(&poc(), r#"{ apis(search: "payments", orderBy: { field: CREATED_AT }) { totalCount } }"#).await;
    assert_eq!(error_codes(&r), vec!["BAD_USER_INPUT"]);
}

#[tokio::test]
async fn highlights_mark_matches_in_exposed_fields() {
    let s = world();
    let conn = search(&s, "knowledge serch").await;
    let first = &conn["edges"][0];
    assert_eq!(first["node"]["name"], "mcp-knowledge-v1");
    let hl: Vec<(String, String)> = first["highlights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["field"].as_str().unwrap().to_string(), h["snippet"].as_str().unwrap().to_string()))
        .collect();
    assert!(hl.contains(&("displayName".into(), "<em>Knowledge</em> <em>Search</em>".into())), "{hl:?}");
    assert!(hl.iter().all(|(_, s)| s.contains("<em>")), "{hl:?}");
}

#[test]
fn the_index_is_rebuilt_when_deleted_damaged_on_disk_or_stale() {
    let s = world();
    let dir = s.dir.path().join("search");
    let store = s.w.store.clone();
    let count = |c: &Catalogue| {
        c.search(&storage::search::SearchRequest { query: "v1", kinds: &[], environment: None, active_only: false }, usize::MAX)
            .unwrap()
            .total
    };
    let n = count(&s.catalogue);
    s.catalogue.shutdown();
    drop(s.catalogue);
    // Up to date: reopened as is.
    let (c, opened) = Catalogue::open(&dir, &store).unwrap();
    assert_eq!(opened, Opened::UpToDate);
    c.shutdown();
    drop(c);
    // Deleted on disk: rebuilt from the store.
    std::fs::remove_dir_all(&dir).unwrap();
    let (c, opened) = Catalogue::open(&dir, &store).unwrap();
    assert!(matches!(opened, Opened::Rebuilt(_)), "{opened:?}");
    assert_eq!(count(&c), n);
    c.shutdown();
    drop(c);
    // Damaged on disk (every segment file cut to nothing, as a full disk might leave it): rebuilt.
    let mut cut = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "term" || e == "store" || e == "idx") {
            std::fs::write(&path, b"").unwrap();
            cut += 1;
        }
    }
    assert!(cut > 0, "the index has segment files");
    let (c, opened) = Catalogue::open(&dir, &store).unwrap();
    assert!(matches!(opened, Opened::Rebuilt(_)), "{opened:?}");
    assert_eq!(count(&c), n);
    c.shutdown();
    drop(c);
    // Stale: the store moved on while no index followed it.
    let (_, b_revision) = store
        .write(reference_time(), |b| {
            b.delete(
                &SourceRef { kind: KindId::McpServer, namespace: "poc--assist--knowledge".into(), name: "mcp-knowledge-v1".into() },
                reference_time(),
            )
            .unwrap();
            Ok(())
        })
        .unwrap();
    assert!(b_revision.is_some());
    let (c, opened) = Catalogue::open(&dir, &store).unwrap();
    assert!(matches!(opened, Opened::Rebuilt(_)), "{opened:?}");
    let hits = c
        .search(
            &storage::search::SearchRequest {
                query: "knowledge",
                kinds: &[KindId::McpServer],
                environment: Some("poc"),
                active_only: false,
            },
            10,
        )
        .unwrap();
    assert_eq!(hits.total, 0, "{hits:?}");
    // The store finds the open index.
    assert!(store.catalogue().is_some());
}
