//! `POST /graphql/export` under churn, over HTTP, in a process of its own (its world of 2,500
//! large teams would move the memory that `export.rs` measures): every row of an export is of
//! the store revision in its header.

mod common;

use common::{query, stalled_export, wait, ADMIN};
use control_plane::config::Config;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// A Team manifest of the group `assist` whose email is `email`, with `members` members.
fn team_manifest(name: &str, email: &str, members: usize) -> String {
    let members: String =
        (0..members).map(|i| format!("  - name: Member number {i} of {name}\n    email: member{i}.{name}@example.com\n")).collect();
    format!(
        "apiVersion: organization.cp.ei.telekom.de/v1\nkind: Team\nmetadata:\n  name: assist--{name}\n  namespace: poc\n  labels:\n    cp.ei.telekom.de/environment: poc\nspec:\n  name: {name}\n  group: assist\n  email: {email}\n  category: Customer\n  members:\n{members}"
    )
}

/// Every node of a connection `field(args)` selected by `selection`, walked with `first`/`after`
/// over /graphql/query.
async fn walk(client: &reqwest::Client, base: &str, field: &str, args: &str, selection: &str) -> Vec<Value> {
    let text = format!(
        "query($after: Cursor) {{ {field}({args} after: $after) {{ edges {{ node {{ {selection} }} }} pageInfo {{ hasNextPage endCursor }} }} }}"
    );
    let (mut nodes, mut after) = (Vec::new(), Value::Null);
    loop {
        let answer = query(client, base, json!({"query": text, "variables": {"after": after}})).await;
        assert!(answer.get("errors").is_none(), "{answer}");
        let page = &answer["data"][field];
        nodes.extend(page["edges"].as_array().unwrap().iter().map(|e| e["node"].clone()));
        if page["pageInfo"]["hasNextPage"] != json!(true) {
            return nodes;
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
}

/// The store revision of an export's head (`X-Store-Revision`) and its rows, read from a
/// connection that reads its head, then waits for `between` before it reads the rest.
async fn export_with_a_pause(stream: &mut tokio::net::TcpStream, between: impl std::future::Future<Output = ()>) -> (u64, Vec<Value>) {
    use tokio::io::AsyncReadExt;
    let mut raw = Vec::new();
    let head_end = loop {
        let mut buf = [0u8; 4096];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the head came");
        raw.extend_from_slice(&buf[..n]);
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_lowercase();
    assert!(head.starts_with("http/1.1 200") && head.contains("transfer-encoding: chunked"), "{head}");
    let revision = head.lines().find_map(|l| l.strip_prefix("x-store-revision: ")).unwrap().trim().parse().unwrap();
    between.await;
    // Until the last chunk (the connection stays open for the next request).
    while !raw.ends_with(b"\r\n0\r\n\r\n") {
        let mut buf = [0u8; 65536];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the body ends with its last chunk");
        raw.extend_from_slice(&buf[..n]);
    }
    // The chunked body: `<hex size>\r\n<bytes>\r\n`, until a chunk of size 0.
    let (mut body, mut at) = (Vec::new(), head_end);
    loop {
        let line_end = at + raw[at..].windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&raw[at..line_end]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        body.extend_from_slice(&raw[line_end + 2..line_end + 2 + size]);
        at = line_end + 2 + size + 2;
    }
    // More than every buffer between the export and this client (its chunks in flight, the
    // sockets: 4 MiB at most here).
    assert!(body.len() > 6 << 20, "the rows outgrow every buffer between the export and this client: {} bytes", body.len());
    (revision, body.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect())
}

/// P6's acceptance under churn, over HTTP: while a thread adds a team and changes another's
/// email at every commit (each write waits for the commit before it), exports of 2,500 teams of
/// 3.2 KB in pages of 10, whose client stops reading after the head until a commit has landed
/// (the export waits for it meanwhile: its rows outgrow every buffer), hold exactly the teams of
/// the revision in their header — by the store's own change log (`activity`) — with the
/// changed team's email of that revision (`history`).
#[tokio::test(flavor = "multi_thread")]
async fn under_churn_every_row_of_an_export_is_of_the_revision_in_its_header() {
    let tmp = tempfile::tempdir().unwrap();
    let world = tmp.path().join("world");
    std::fs::create_dir_all(&world).unwrap();
    for file in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world")).unwrap() {
        let file = file.unwrap();
        std::fs::copy(file.path(), world.join(file.file_name())).unwrap();
    }
    let bulk: String = (0..2500).map(|i| format!("---\n{}", team_manifest(&format!("bulk{i:04}"), "bulk@example.com", 40))).collect();
    std::fs::write(world.join("90-bulk.yaml"), bulk).unwrap();
    std::fs::write(world.join("91-churn.yaml"), team_manifest("churn", "v0@example.com", 1)).unwrap();
    let mut config = Config::for_manifests(&world, &tmp.path().join("data"));
    config.graphql.limits.max_page_size = 10;
    let running = control_plane::start(config).await.unwrap();
    let (base, client) = (format!("http://{}", running.local_addr()), reqwest::Client::new());
    wait(&running, |_| running.app().readiness().is_settled()).await;

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn = {
        let (store, stop, world) = (running.app().store().clone(), stop.clone(), world.clone());
        std::thread::spawn(move || {
            let mut writes = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                writes += 1;
                let revision = store.read().unwrap().revision().unwrap();
                std::fs::write(world.join("91-churn.yaml"), team_manifest("churn", &format!("v{writes}@example.com"), 1)).unwrap();
                std::fs::write(
                    world.join(format!("92-churn{writes}.yaml")),
                    team_manifest(&format!("churn{writes}"), "new@example.com", 1),
                )
                .unwrap();
                assert!(store.wait_for_revision_after(revision, Duration::from_secs(60)).unwrap() > revision, "the churn commits");
            }
            writes
        })
    };
    let teams = "{ teams { edges { node { id name email members { name email } } } } }";
    for _ in 0..2 {
        let mut stream = stalled_export(running.local_addr(), ADMIN, teams).await;
        let store = running.app().store().clone();
        let (revision, rows) = export_with_a_pause(&mut stream, async {
            let at = store.read().unwrap().revision().unwrap();
            let later =
                tokio::task::spawn_blocking(move || store.wait_for_revision_after(at, Duration::from_secs(60)).unwrap()).await.unwrap();
            assert!(later > at, "a commit landed while the export waited");
        })
        .await;
        // The store's log says which teams there were at that revision (none is deleted here).
        let log = walk(&client, &base, "activity", "kinds: [TEAM], first: 10,", "revision id").await;
        let expected: std::collections::BTreeSet<String> =
            log.iter().filter(|c| c["revision"].as_u64().unwrap() <= revision).map(|c| c["id"].as_str().unwrap().to_string()).collect();
        let exported: std::collections::BTreeSet<String> = rows.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
        assert_eq!(exported.len(), rows.len(), "no team twice");
        assert!(log.iter().any(|c| c["revision"].as_u64().unwrap() > revision), "teams were added after the export's revision");
        assert_eq!(exported, expected, "the teams of revision {revision}");
        let churned = rows.iter().find(|r| r["name"] == "assist--churn").expect("the churned team is exported");
        let versions = walk(
            &client,
            &base,
            "history",
            &format!("id: \"{}\", first: 10,", churned["id"].as_str().unwrap()),
            "revision node { ... on Team { email } }",
        )
        .await;
        let then =
            versions.iter().find(|v| v["revision"].as_u64().unwrap() <= revision).expect("a version at or before the export's revision");
        assert_eq!(churned["email"], then["node"]["email"], "the churned team's email of revision {revision}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(churn.join().unwrap() > 1, "the churn wrote");
    running.shutdown().await.unwrap();
}
