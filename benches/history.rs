//! History over HTTP: `history(id:)` and the first `activity` page on a generated world
//! (`target/genworld/<size>/`, see `benches/support/mod.rs`) whose objects have
//! `CP_BENCH_REVISIONS` revisions each (default 20: the load, then every document's status
//! messages rewritten 19 times through the manifests source, so every kind with a status
//! changes), and what the change log takes per revision.
//!
//! Run: `CP_BENCH_SIZES=100k cargo bench --bench history` (`CP_BENCH_1M=1` adds 1M;
//! `CP_BENCH_REVISIONS=N`; `CP_BENCH_REWRITE=04-applications.yaml,08-apisubscriptions.yaml`
//! rewrites only those files, for a 1M world whose every revision would not fit the disk: the
//! measured objects are the busiest team's applications and API subscriptions).
//! `history.maxBytes` is raised to 1 TiB so that nothing is pruned.
//! The first `activity` page is measured for the busiest team and an admin (the same page
//! again and again: its past records stay translated), and cold, for every other team in turn.
//! Results: `BENCH_RESULT {json}` lines and `target/bench-results/ours-history-<size>.json`.
//! Not part of `cargo test`.

mod support;

use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// Requests per measured query (after as many warm-up ones).
const REQUESTS: usize = 2000;

const HISTORY: &str = "query($id: ID!) { history(id: $id, first: 20) { totalCount edges { cursor node { revision at operation \
                       changedFields resourceVersion manager node { id } } } } }";

const ACTIVITY: &str = "{ activity(first: 20) { edges { cursor node { revision at operation kind id name changedFields manager } } } }";

fn main() {
    let revisions: usize = std::env::var("CP_BENCH_REVISIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let only: Vec<String> = std::env::var("CP_BENCH_REWRITE").map(|v| v.split(',').map(str::to_string).collect()).unwrap_or_default();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for size in support::sizes() {
        let world = support::world(size);
        let work = support::work_dir(&format!("history-{}", size.name));
        let manifests = work.join("manifests");
        support::copy_world(&world, &manifests);
        let mut config = support::config(&manifests, &work.join("data"));
        config.history.max_bytes = 1 << 40;
        let running = rt.block_on(async {
            let running = control_plane::start(config).await.unwrap();
            while !running.app().readiness().is_ready() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            running
        });
        let store = running.app().store().clone();
        let loaded = store.read().unwrap().history_stats().unwrap();
        let mut pass_seconds = Vec::new();
        for round in 1..revisions {
            let t0 = Instant::now();
            let changed = rewrite_messages(&manifests, round, &only);
            let expected = loaded.entries as usize + changed * round;
            wait_for_entries(&store, expected);
            pass_seconds.push(t0.elapsed().as_secs_f64());
            eprintln!(
                "{}: revision {} of every object with a status message ({changed} documents) in {:.1} s",
                size.name,
                round + 1,
                t0.elapsed().as_secs_f64()
            );
        }
        let stats = store.read().unwrap().history_stats().unwrap();
        let file_bytes = std::fs::metadata(store.path()).map(|m| m.len()).unwrap_or(0);
        let url = format!("http://{}/graphql/query", running.local_addr());
        let client = reqwest::Client::builder().pool_max_idle_per_host(8).build().unwrap();
        let teams = support::teams_by_load(&world);
        let team = teams[0].0.clone();
        let token = support::team_token(&team);
        let ids = rt.block_on(object_ids(&client, &url, &token));
        let mut results = support::Results::new("history", size.name);
        let mut report = |name: &str, mut lat: Vec<Duration>| {
            let (p50, p90, p99) =
                (support::percentile_us(&mut lat, 50.0), support::percentile_us(&mut lat, 90.0), support::percentile_us(&mut lat, 99.0));
            println!("{} {name}: p50 {p50:.0} µs, p90 {p90:.0} µs, p99 {p99:.0} µs ({} requests)", size.name, lat.len());
            results.emit("HISTORY", json!({"query": name, "requests": lat.len(), "p50Us": p50, "p90Us": p90, "p99Us": p99}));
        };
        let bodies: Vec<String> = ids.iter().map(|id| support::gql_body(HISTORY, &json!({"id": id}))).collect();
        report("history(id:) first 20", rt.block_on(timed(&client, &url, &token, &bodies)));
        let activity = vec![support::gql_body(ACTIVITY, &json!({}))];
        report(&format!("activity first 20 (team {team})"), rt.block_on(timed(&client, &url, &token, &activity)));
        report("activity first 20 (admin)", rt.block_on(timed(&client, &url, &support::admin_token(), &activity)));
        // Cold: every other team's first page in turn, more pages than the server's past
        // records hold, so each request translates its revisions afresh.
        let others: Vec<(String, String)> = teams.iter().skip(1).map(|t| (support::team_token(&t.0), activity[0].clone())).collect();
        let cold = format!("activity first 20, another team each request ({} teams in turn)", others.len());
        report(&cold, rt.block_on(timed_each(&client, &url, &activity[0], &token, &others)));
        let summary = json!({
            "objects": world.objects,
            "revisionsPerObject": revisions,
            "rewritten": if only.is_empty() { json!("every file") } else { json!(only) },
            "entries": stats.entries,
            "bytes": stats.bytes,
            "bytesPerEntry": stats.bytes as f64 / stats.entries.max(1) as f64,
            "loadEntries": loaded.entries,
            "loadBytesPerEntry": loaded.bytes as f64 / loaded.entries.max(1) as f64,
            "storeFileBytes": file_bytes,
            "medianPassSeconds": median(&mut pass_seconds),
        });
        println!("{} log: {summary}", size.name);
        results.emit("LOG", summary);
        results.write();
        rt.block_on(running.shutdown()).unwrap();
        let _ = std::fs::remove_dir_all(&work);
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Rewrites every kind file of `dir` with each status message prefixed by `r<round>` (written
/// aside and renamed into place); returns the documents changed.
fn rewrite_messages(dir: &Path, round: usize, only: &[String]) -> usize {
    let mut changed = 0;
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| only.is_empty() || only.iter().any(|o| p.file_name().is_some_and(|n| n == o.as_str())))
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let previous = format!("\"message\":\"r{} ", round - 1);
        let mut out = String::with_capacity(text.len() + 4096);
        for line in text.lines() {
            if line.starts_with('{') && line.contains("\"message\":\"") {
                let base = if round > 1 { line.replace(&previous, "\"message\":\"") } else { line.to_string() };
                out.push_str(&base.replace("\"message\":\"", &format!("\"message\":\"r{round} ")));
                changed += 1;
            } else {
                out.push_str(line);
            }
            out.push('\n');
        }
        let aside = path.with_extension("yaml.tmp");
        std::fs::write(&aside, out).unwrap();
        std::fs::rename(&aside, &path).unwrap();
    }
    changed
}

/// Waits until the change log holds at least `entries` entries, or its count, once it moved,
/// has not moved for 3 s (documents whose records did not change write none).
fn wait_for_entries(store: &storage::Store, entries: usize) {
    let count = || store.read().unwrap().history_stats().unwrap().entries;
    let start = count();
    let mut last = (start, Instant::now());
    loop {
        let now = count();
        if now != last.0 {
            last = (now, Instant::now());
        }
        if now as usize >= entries || (now > start && last.1.elapsed() > Duration::from_secs(3)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The IDs of the team's applications and API subscriptions (objects with a status: one
/// revision per pass).
async fn object_ids(client: &reqwest::Client, url: &str, token: &str) -> Vec<String> {
    let q = "{ applications(first: 50) { edges { node { id subscribedApis(first: 50) { edges { node { id } } } } } } }";
    let data = support::gql(client, url, token, q, &json!({})).await.unwrap();
    let mut out = Vec::new();
    for app in data["applications"]["edges"].as_array().unwrap() {
        out.push(app["node"]["id"].as_str().unwrap().to_string());
        for s in app["node"]["subscribedApis"]["edges"].as_array().unwrap() {
            out.push(s["node"]["id"].as_str().unwrap().to_string());
        }
    }
    assert!(!out.is_empty(), "the team has objects");
    out
}

/// Sends `(token, body)` requests in turn ([`REQUESTS`], after as many warm-up ones of `warm`
/// as `token`); the latencies.
async fn timed_each(client: &reqwest::Client, url: &str, warm: &str, token: &str, requests: &[(String, String)]) -> Vec<Duration> {
    for _ in 0..REQUESTS {
        support::gql_ok(client, url, token, warm).await.unwrap();
    }
    let mut out = Vec::with_capacity(REQUESTS);
    for (token, body) in requests.iter().cycle().take(REQUESTS) {
        let t0 = Instant::now();
        support::gql_ok(client, url, token, body).await.unwrap();
        out.push(t0.elapsed());
    }
    out
}

/// Sends the request bodies in turn ([`REQUESTS`] after as many warm-up ones); the latencies.
async fn timed(client: &reqwest::Client, url: &str, token: &str, bodies: &[String]) -> Vec<Duration> {
    for body in bodies.iter().cycle().take(REQUESTS) {
        support::gql_ok(client, url, token, body).await.unwrap();
    }
    let mut out = Vec::with_capacity(REQUESTS);
    for body in bodies.iter().cycle().take(REQUESTS) {
        let t0 = Instant::now();
        support::gql_ok(client, url, token, body).await.unwrap();
        out.push(t0.elapsed());
    }
    out
}
