//! P8 soak: the release binary (`target/release/control-plane`, build it first) on the
//! `100k` world, for `CP_SOAK_SECONDS` (default 600) seconds: 50 clients, each sending console
//! queries (a team's applications page with nested connections, its approvals, `node`, zones)
//! and, every fifth request, an abusive one (refused before running, or heavy work cut by its
//! deadline), while 1,000 Applications change every second (one file rewritten per second,
//! atomically; the source polls every second). A probe asks `/healthz` every 100 ms.
//!
//! Reported: requests and answers per code, errors (a transport failure, an HTTP status other
//! than 200 and 503, a console query answered with an error, or an abusive one answered with a
//! code it should not get), `/healthz` p50/p99/max, resident memory at start, at the end and at
//! its peak during the soak (`VmHWM`, reset when the soak starts: the cold load's own peak,
//! which P1 measures, is reported apart as `rssLoadPeakMb`), and store revisions. `BENCH_RESULT {json}` and
//! `target/bench-results/ours-soak-100k.json`. Not part of `cargo test`:
//! `cargo build --release -p control-plane && cargo bench --bench soak`.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CLIENTS: usize = 50;
const CHURN_OBJECTS: usize = 1000;

/// Console queries; `{team}` is the client's team token, `$id` one of its applications.
const CONSOLE: &[&str] = &[
    "query Q1 { applications(first: 50) { totalCount pageInfo { endCursor hasNextPage } edges { cursor node { id name statusPhase secretRotationPhase zone { name } ownerTeam { name } exposedApis(first: 20) { totalCount edges { node { id basePath visibility active statusPhase } } } subscribedApis(first: 20) { totalCount edges { node { id basePath statusPhase target { basePath } } } } } } } }",
    "query Q3 { approvals(first: 50) { totalCount pageInfo { endCursor hasNextPage } edges { node { id name state action strategy requester { teamName applicationName } decider { teamName } } } } }",
    "query Q4($id: ID!) { node(id: $id) { id ... on Application { name statusPhase clientID ownerTeam { name } zone { name } } } }",
    "{ zones { name gatewayURL } apiCategories { name } }",
];

/// Abusive requests and the codes each may get.
fn abusive() -> Vec<(String, &'static [&'static str])> {
    let words = |n: usize| (0..n).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    let mut fragments = String::from("{ applications(first: 1) { edges { node { ...F26 } } } } fragment F0 on Application { name }");
    for i in 1..=26 {
        fragments.push_str(&format!(" fragment F{i} on Application {{ ...F{} ...F{} }}", i - 1, i - 1));
    }
    vec![
        (format!("{{ nodes(ids: {}\"x\"{}) {{ id }} }}", "[".repeat(2000), "]".repeat(2000)), &["INPUT_TOO_DEEP"]),
        (format!("{{ applications(where: {}{{name: \"x\"}}{}) {{ totalCount }} }}", "{and: [".repeat(1000), "]}".repeat(1000)), &["INPUT_TOO_DEEP"]),
        (format!("{{ catalogueSearch(query: \"{}\") {{ totalCount }} }}", words(5000)), &["BAD_USER_INPUT"]),
        ("{ applications(first:1) { edges { node { zone { applications { zone { applications { zone { applications { name } } } } } } } } } }".into(), &["TOO_MANY_NODES"]),
        (format!("{{ {} }}", (0..4).map(|i| format!("a{i}: applications(first: 1000) {{ edges {{ node {{ zone {{ applications {{ name }} }} }} }} }}")).collect::<Vec<_>>().join(" ")), &["TOO_MANY_NODES"]),
        (fragments, &["QUERY_TOO_COMPLEX"]),
        ("{ applications(first: 1000, where: {hasSubscribedApisWith: [{hasTargetWith: [{hasSubscriptionsWith: [{nameContains: \"a\"}]}]}]}) { totalCount edges { node { name } } } }".into(), &["OK", "TIMEOUT"]),
        ("{ approvals(first: 1000, orderBy: [{field: CREATED_AT}, {field: LAST_MODIFIED_AT, direction: DESC}]) { totalCount edges { node { name } } } }".into(), &["OK", "TIMEOUT"]),
        (format!("{{ {} }}", (0..600).map(|i| format!("a{i}: apis(first: 1000) {{ edges {{ node {{ id basePath owner {{ name }} }} }} }}")).collect::<Vec<_>>().join(" ")), &["RESPONSE_TOO_LARGE", "TIMEOUT"]),
        ("{ catalogueSearch(query: \"paymnts chekout\", first: 1000) { totalCount edges { node { __typename } } } }".into(), &["OK", "TIMEOUT"]),
    ]
}

fn memory_mb(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
            / 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn main() {
    let bin = support::target_dir().join("release").join("control-plane");
    assert!(bin.exists(), "{} is missing: run `cargo build --release -p control-plane` first", bin.display());
    let seconds: u64 = std::env::var("CP_SOAK_SECONDS").ok().and_then(|v| v.parse().ok()).unwrap_or(600);
    let size = *support::SIZES.iter().find(|s| s.name == "100k").unwrap();
    let world = support::world(size);
    let work = support::work_dir("soak-100k");
    let manifests = work.join("manifests");
    support::copy_world(&world, &manifests);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = std::fs::File::create(work.join("serve.log")).unwrap();
    let mut child = Command::new(&bin)
        .arg("serve")
        .arg("--manifests")
        .arg(&manifests)
        .arg("--data-dir")
        .arg(work.join("data"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--auth", "mock", "--now", support::NOW])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let pid = child.id();
    let base = format!("http://127.0.0.1:{port}");
    let url = format!("{base}/graphql/query");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let result = rt.block_on(async {
        let client = reqwest::Client::builder().pool_max_idle_per_host(CLIENTS + 4).build().unwrap();
        let t0 = Instant::now();
        while !client.get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status() == 200) {
            assert!(child.try_wait().unwrap().is_none(), "the server exited before it was ready");
            assert!(t0.elapsed() < Duration::from_secs(600), "not ready after 600 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprintln!("ready after {:.1} s", t0.elapsed().as_secs_f64());
        let teams = support::teams_by_load(&world);
        let mut per_client = Vec::new();
        for (team, ..) in teams.iter().take(CLIENTS) {
            let token = support::team_token(team);
            let d = support::gql(&client, &url, &token, "{ applications(first: 1) { edges { node { id } } } }", &json!({})).await.unwrap();
            per_client.push((token, d["applications"]["edges"][0]["node"]["id"].as_str().unwrap_or("x").to_string()));
        }
        let (start_rss, load_peak) = memory_mb(pid);
        // The soak's peak from here on (Linux: writing 5 resets the peak resident size).
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("resetting VmHWM");
        let stop = Arc::new(AtomicBool::new(false));
        let churn = churn(&world.dir, &manifests, stop.clone());
        let abusive = Arc::new(abusive());
        let codes: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut tasks = Vec::new();
        for (i, (token, id)) in per_client.into_iter().enumerate() {
            let (client, url, stop, abusive, codes, errors) =
                (client.clone(), url.clone(), stop.clone(), abusive.clone(), codes.clone(), errors.clone());
            tasks.push(tokio::spawn(async move {
                let admin = support::admin_token();
                let mut n = i;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let (body, tok, allowed): (Value, &str, &[&str]) = if n % 5 == 0 {
                        let (q, allowed) = &abusive[(n / 5) % abusive.len()];
                        (json!({"query": q}), &admin, allowed)
                    } else {
                        (json!({"query": CONSOLE[n % CONSOLE.len()], "variables": {"id": id}}), &token, &["OK"])
                    };
                    let outcome = match client.post(&url).bearer_auth(tok).json(&body).send().await {
                        Err(e) => Err(format!("transport: {e}")),
                        Ok(r) if r.status() == 503 => Ok("HTTP_503".to_string()),
                        Ok(r) if r.status() != 200 => Err(format!("HTTP {}", r.status())),
                        Ok(r) => {
                            let v: Value = r.json().await.unwrap_or(Value::Null);
                            let code = v["errors"][0]["extensions"]["code"].as_str().unwrap_or(if v["errors"].is_null() {
                                "OK"
                            } else {
                                "NO_CODE"
                            });
                            if allowed.contains(&code) {
                                Ok(code.to_string())
                            } else {
                                Err(format!(
                                    "{code} for {}",
                                    &body["query"].as_str().unwrap_or("")[..60.min(body["query"].as_str().unwrap_or("").len())]
                                ))
                            }
                        }
                    };
                    match outcome {
                        Ok(code) => *codes.lock().unwrap().entry(code).or_default() += 1,
                        Err(e) => {
                            *codes.lock().unwrap().entry("ERROR".into()).or_default() += 1;
                            let mut errs = errors.lock().unwrap();
                            if errs.len() < 10 {
                                errs.push(e);
                            }
                        }
                    }
                }
            }));
        }
        let probe = {
            let (client, base, stop) = (client.clone(), base.clone(), stop.clone());
            tokio::spawn(async move {
                let mut times = Vec::new();
                let mut failed = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    match client.get(format!("{base}/healthz")).send().await {
                        Ok(r) if r.status() == 200 => times.push(t.elapsed()),
                        _ => failed += 1,
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                (times, failed)
            })
        };
        let started = Instant::now();
        let mut samples = Vec::new();
        while started.elapsed() < Duration::from_secs(seconds) {
            tokio::time::sleep(Duration::from_secs(10)).await;
            let (rss, peak) = memory_mb(pid);
            samples.push(rss);
            eprintln!("{:>4} s: rss {rss} MB (peak {peak} MB), answers {:?}", started.elapsed().as_secs(), codes.lock().unwrap());
            assert!(child.try_wait().unwrap().is_none(), "the server died");
        }
        stop.store(true, Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
        let (mut health, health_failed) = probe.await.unwrap();
        let churn_writes = churn.join().unwrap();
        let elapsed = started.elapsed().as_secs_f64();
        let (end_rss, peak_rss) = memory_mb(pid);
        let codes = codes.lock().unwrap().clone();
        let requests: u64 = codes.values().sum();
        json!({
            "seconds": elapsed,
            "clients": CLIENTS,
            "requests": requests,
            "requestsPerSecond": requests as f64 / elapsed,
            "answers": codes,
            "errors": codes.get("ERROR").copied().unwrap_or(0),
            "firstErrors": errors.lock().unwrap().clone(),
            "healthzP50Us": support::percentile_us(&mut health, 50.0),
            "healthzP99Us": support::percentile_us(&mut health, 99.0),
            "healthzMaxUs": support::percentile_us(&mut health, 100.0),
            "healthzFailed": health_failed,
            "rssStartMb": start_rss,
            "rssEndMb": end_rss,
            "rssPeakMb": peak_rss,
            "rssLoadPeakMb": load_peak,
            "rssSamplesMb": samples,
            "churnWrites": churn_writes,
            "churnObjectsPerWrite": CHURN_OBJECTS,
        })
    });
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let exit = child.wait().unwrap();
    let mut results = support::Results::new("soak", "100k");
    results.emit("P8", result);
    results.write();
    assert!(exit.success(), "the server exited with {exit} after SIGTERM");
}

/// Rewrites `zz-soak-churn.yaml` (CHURN_OBJECTS Applications of the world with a new status
/// message and annotation) every second until `stop`; returns the writes.
fn churn(world: &Path, manifests: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    support::churn(world, manifests, "soak", CHURN_OBJECTS, Duration::from_secs(1), stop)
}
