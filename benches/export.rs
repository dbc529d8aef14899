//! P9 exports over HTTP, on a generated world (`target/genworld/<size>/`, see
//! `benches/support/mod.rs`) loaded by the real server (`control_plane::start`, in process,
//! manifests source, mock authentication), read with reqwest on 127.0.0.1.
//!
//! An admin reads every `ApiSubscription`, with each of `SELECTIONS` (a console list's columns,
//! with and without the owner application's name), three ways, in turn, `CP_BENCH_ROUNDS` rounds
//! (default 3; `CP_BENCH_SELECTIONS` and `CP_BENCH_HOW` choose some of them, comma-separated):
//! - `POST /graphql/export?format=ndjson` and `?format=csv`: time to the body's last byte, rows
//!   (lines), bytes, rows/s;
//! - the same walk with `first: 1000` pages over `/graphql/query` (`after` the last page's
//!   `endCursor`, each answer parsed by the client as a console would): time, rows, rows/s.
//!
//! Measured once the server is ready and its writer has built the ordering indexes and the
//! change log's index (work after ready). Also the process's resident memory (server and client share it) before and at its highest
//! during each read (sampled every 10 ms), and the redb file's growth while an export runs
//! under churn (the file grows only by pages a writer could not reuse while the export's read
//! transaction holds them). Results: `BENCH_RESULT` lines and
//! `target/bench-results/ours-export-<size>.json`.

mod support;

use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The selections read: `columns` (fields of the record only: the export writes its rows from
/// the records) and `nested` (with the owner application's name: GraphQL resolves the nodes).
const SELECTIONS: &[(&str, &str)] = &[
    ("columns", "id name basePath m2mAuthMethod statusPhase createdAt lastModifiedAt"),
    ("nested", "id name basePath m2mAuthMethod statusPhase createdAt lastModifiedAt owner { name }"),
];

/// Resident memory of this process, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * 4096
}

/// Runs `f` while a thread samples the resident memory; returns `f`'s result and the highest
/// sample.
async fn with_peak_rss<T>(f: impl std::future::Future<Output = T>) -> (T, u64) {
    let (stop, peak) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(rss())));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let out = f.await;
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    (out, peak.load(Ordering::Relaxed))
}

/// Whether `name` is in the comma-separated list of the environment variable `var` (every name
/// when it is unset): `CP_BENCH_SELECTIONS=columns CP_BENCH_HOW=ndjson` reads one way only (to
/// profile it).
fn chosen(var: &str, name: &str) -> bool {
    std::env::var(var).map_or(true, |list| list.split(',').any(|one| one.trim() == name))
}

/// One export: (rows, bytes, seconds).
async fn export(client: &reqwest::Client, base: &str, token: &str, format: &str, selection: &str) -> (u64, u64, f64) {
    let t0 = Instant::now();
    let query = format!("{{ apiSubscriptions {{ edges {{ node {{ {selection} }} }} }} }}");
    let mut resp = client
        .post(format!("{base}/graphql/export?format={format}"))
        .bearer_auth(token)
        .json(&json!({"query": query}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{format}");
    let (mut lines, mut bytes, mut last) = (0u64, 0u64, 0u8);
    while let Some(chunk) = resp.chunk().await.unwrap() {
        lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
        bytes += chunk.len() as u64;
        last = *chunk.last().unwrap_or(&last);
    }
    assert_eq!(last, b'\n', "the body ends with a whole line");
    let header = u64::from(format == "csv");
    (lines - header, bytes, t0.elapsed().as_secs_f64())
}

/// The same walk in `first: 1000` pages: (rows, bytes, seconds).
async fn paged(client: &reqwest::Client, base: &str, token: &str, selection: &str) -> (u64, u64, f64) {
    let t0 = Instant::now();
    let query = format!(
        "query($after: Cursor) {{ apiSubscriptions(first: 1000, after: $after) {{ edges {{ node {{ {selection} }} }} pageInfo {{ hasNextPage endCursor }} }} }}"
    );
    let (mut rows, mut bytes, mut after) = (0u64, 0u64, Value::Null);
    loop {
        let resp = client
            .post(format!("{base}/graphql/query"))
            .bearer_auth(token)
            .json(&json!({"query": query, "variables": {"after": after}}))
            .send()
            .await
            .unwrap();
        let body = resp.bytes().await.unwrap();
        bytes += body.len() as u64;
        let answer: Value = serde_json::from_slice(&body).unwrap();
        assert!(answer.get("errors").is_none(), "{}", answer["errors"]);
        let page = &answer["data"]["apiSubscriptions"];
        rows += page["edges"].as_array().unwrap().len() as u64;
        if page["pageInfo"]["hasNextPage"] != json!(true) {
            return (rows, bytes, t0.elapsed().as_secs_f64());
        }
        after = page["pageInfo"]["endCursor"].clone();
    }
}

fn main() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let rounds: usize = std::env::var("CP_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    for size in support::sizes() {
        let world = support::world(size);
        let work = support::work_dir(&format!("export-{}", size.name));
        let manifests = work.join("manifests");
        support::copy_world(&world, &manifests);
        let mut results = support::Results::new("export", size.name);
        let running = rt.block_on(async {
            let running = control_plane::start(support::config(&manifests, &work.join("data"))).await.unwrap();
            while !running.app().readiness().is_ready() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // The writer's work after ready (ordering indexes, the change log's index) done, so
            // that the reads below share the cores with nothing else.
            let t0 = Instant::now();
            while running.app().store().orders_pending() || running.app().store().read().unwrap().unindexed_after().unwrap().is_some() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // The writer writes redb's buffered pages out once idle; make sure it has.
            running.app().store().release_write_buffer().unwrap();
            eprintln!("{}: settled {:.1} s after ready", size.name, t0.elapsed().as_secs_f64());
            running
        });
        let base = format!("http://{}", running.local_addr());
        let client = reqwest::Client::new();
        let token = support::admin_token();
        rt.block_on(async {
            for round in 0..rounds {
                for (name, selection) in SELECTIONS.iter().filter(|(name, _)| chosen("CP_BENCH_SELECTIONS", name)) {
                    for how in ["ndjson", "csv", "paged"].into_iter().filter(|how| chosen("CP_BENCH_HOW", how)) {
                        let before = rss();
                        let ((rows, bytes, secs), peak) = with_peak_rss(async {
                            if how == "paged" {
                                paged(&client, &base, &token, selection).await
                            } else {
                                export(&client, &base, &token, how, selection).await
                            }
                        })
                        .await;
                        let line = json!({"selection": name, "how": how, "round": round, "rows": rows, "bytes": bytes, "seconds": secs,
                            "rowsPerSecond": rows as f64 / secs, "rssBeforeMb": before >> 20, "rssPeakMb": peak >> 20});
                        let rate = rows as f64 / secs;
                        println!("P9 {} {name} {how} round {round}: {rows} rows, {bytes} bytes in {secs:.2} s = {rate:.0} rows/s, RSS {} → {} MiB", size.name, before >> 20, peak >> 20);
                        results.emit("P9", line);
                    }
                }
            }
        });
        file_growth_under_churn(&rt, &running, &world, &manifests, &work, &client, &base, &token, &mut results);
        results.write();
        rt.block_on(running.shutdown()).unwrap();
    }
}

/// The redb file's size before and after an NDJSON export read slowly (one chunk every 20 ms)
/// while the manifests change every 100 ms, and the store revisions committed meanwhile; then
/// the same churn as long without an export (the growth the export is not the cause of).
#[allow(clippy::too_many_arguments)]
fn file_growth_under_churn(
    rt: &tokio::runtime::Runtime,
    running: &control_plane::app::Running,
    world: &support::World,
    manifests: &std::path::Path,
    work: &std::path::Path,
    client: &reqwest::Client,
    base: &str,
    token: &str,
    results: &mut support::Results,
) {
    let file = work.join("data").join("readmodel.redb");
    let size = || std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    let (before, revision) = (size(), running.app().store().read().unwrap().revision().unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let churn = support::churn(&world.dir, manifests, "export", 100, Duration::from_millis(100), stop.clone());
    let (rows, secs) = rt.block_on(async {
        let t0 = Instant::now();
        let query = format!("{{ apiSubscriptions {{ edges {{ node {{ {} }} }} }} }}", SELECTIONS[1].1);
        let mut resp =
            client.post(format!("{base}/graphql/export")).bearer_auth(token).json(&json!({"query": query})).send().await.unwrap();
        let mut rows = 0u64;
        while let Some(chunk) = resp.chunk().await.unwrap() {
            rows += chunk.iter().filter(|b| **b == b'\n').count() as u64;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (rows, t0.elapsed().as_secs_f64())
    });
    stop.store(true, Ordering::Relaxed);
    let writes = churn.join().unwrap();
    let committed = running.app().store().read().unwrap().revision().unwrap() - revision;
    let after = size();
    // The same churn as long again without an export: what the file grows by anyway.
    let stop = Arc::new(AtomicBool::new(false));
    let churn = support::churn(&world.dir, manifests, "export-control", 100, Duration::from_millis(100), stop.clone());
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let control_writes = churn.join().unwrap();
    let line = json!({"rows": rows, "seconds": secs, "manifestWrites": writes, "revisionsCommitted": committed,
        "fileBytesBefore": before, "fileBytesAfter": after, "grownBytes": after.saturating_sub(before),
        "controlManifestWrites": control_writes, "controlGrownBytes": size().saturating_sub(after)});
    println!("P9 {} slow export under churn: {line}", world.size.name);
    results.emit("P9_CHURN", line);
}
