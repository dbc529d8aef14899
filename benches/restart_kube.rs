//! P4-kube: restarts with the kube source at scale. A generated world
//! (`target/genworld/<size>/`, see `benches/support/mod.rs`) is served by the fake Kubernetes API
//! server of the end-to-end tests (`tests/support/fake_k8s.rs`, seeded with
//! `FakeK8s::seed_dir`); the server is started on it in process (`control_plane::start` with
//! `Config::for_kube`, mock authentication, the clock pinned) and measured from the call that
//! starts it:
//!
//! - **first answer**: the first answer of an admin GraphQL query (P2's Q2, `apiSubscriptions
//!   (first: 50)` with `totalCount`, over HTTP, asked every 20 ms from the moment `start`
//!   returns) with HTTP 200, no errors and every ApiSubscription of the world counted
//!   (`firstAnyData`: the first with at least one);
//! - **ready**: `App::wait_ready` (what `/readyz` answers; its 200 is checked over HTTP then);
//! - **caught up**: `App::wait_caught_up` (the initial sync applied and indexed, the log's
//!   `caught up` line on a warm start);
//! - **memory**: `VmRSS` at ready and at caught up, `VmHWM` (the start's peak) from
//!   `/proc/self/status`. Each start runs in a fresh process of this bench binary, so these are
//!   that server's own numbers (the measuring client is in it, nothing else); the fake API
//!   server runs in another process, so its copy of the world is not in them (its own VmRSS
//!   once seeded and VmHWM at the end are the measure `fake API server`);
//! - **stop**: `Running::shutdown` after caught up (what SIGTERM runs);
//! - **lists**: every list request the start made, from `FakeK8s::list_requests`: from the watch
//!   cache (`resourceVersion=0`, unpaged) or quorum reads (pages of 500).
//!
//! The modes, in order, on one data directory: the **first start** (cold, lists answered at
//! once; before it stops, each change parked for a missing dependency is retried once and every
//! ordering index is built, as a store settles before a restart); **warm restarts with lists
//! answered at once**; **warm restarts with 3 s per list page** (`FakeK8s::set_page_latency`: a
//! cached list takes 3 s, a quorum list 3 s per page of 500); and **cold starts with 3 s per
//! page** into an empty data directory each, for comparison. The warm modes are criterion groups timing the start to caught up (flat
//! sampling, 10 samples plus one warm-up start; `CP_BENCH_WARM_STARTS=N`: N starts without
//! criterion instead); the slow cold start runs `CP_BENCH_COLD_RUNS` times (default 1).
//! `CP_BENCH_MODES=warm,warm-slow,cold-slow` picks the modes after the first start (default all).
//!
//! Run: `cargo bench --bench restart_kube` (100k by default; `CP_BENCH_1M=1` adds 1M,
//! `CP_BENCH_SIZES=1m` picks sizes). Results: `BENCH_RESULT {json}` lines (one per mode, each
//! with its starts) and `target/bench-results/ours-restart_kube-<size>.json`; the logs of every
//! start and of the fake in `target/bench-work/restart_kube-<size>/logs/`. Not part of `cargo
//! test`.

#[path = "../tests/support/fake_k8s.rs"]
mod fake_k8s;
mod support;

use criterion::{BenchmarkId, SamplingMode};
use fake_k8s::FakeK8s;
use schema::KindId;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Which part this process plays: unset = the bench, `fake` = the fake API server, `start` =
/// one measured start of the server.
const ROLE: &str = "CP_BENCH_RESTART_KUBE_ROLE";

/// P2's Q2 (the first page): an admin's `apiSubscriptions` with `totalCount`.
const QUERY: &str =
    "query Q2($after: Cursor) { apiSubscriptions(first: 50, after: $after) { totalCount pageInfo { endCursor hasNextPage } \
    edges { cursor node { id name basePath statusPhase owner { name } target { basePath } } } } }";

/// The latency of a list page in the slow modes (etcd reading a page of 500 under load).
const PAGE_LATENCY: Duration = Duration::from_secs(3);

/// How often the first answer is asked for.
const POLL: Duration = Duration::from_millis(20);

/// The longest any start may take.
const TIMEOUT: Duration = Duration::from_secs(3600);

fn main() {
    match std::env::var(ROLE).as_deref() {
        Ok("fake") => return fake_role(),
        Ok("start") => return start_role(),
        _ => {}
    }
    let mut c = support::criterion(10);
    for size in sizes() {
        bench_size(&mut c, size);
    }
    c.final_summary();
}

/// 100k, plus 1M with `CP_BENCH_1M=1`; `CP_BENCH_SIZES` picks sizes.
fn sizes() -> Vec<support::Size> {
    if std::env::var_os("CP_BENCH_SIZES").is_some() {
        return support::sizes();
    }
    let mut out = vec![support::SIZES[1]];
    if std::env::var("CP_BENCH_1M").is_ok_and(|v| v == "1") {
        out.push(support::SIZES[2]);
    }
    out
}

fn bench_size(c: &mut criterion::Criterion, size: support::Size) {
    let world = support::world(size);
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(world.dir.join("manifest.json")).unwrap()).unwrap();
    let subscriptions = manifest["countsPerEnvironment"]["poc"]["ApiSubscription"].as_u64().unwrap();
    let work = support::work_dir(&format!("restart_kube-{}", size.name));
    let logs = work.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let data = work.join("data");
    let mut results = support::Results::new("restart_kube", size.name);

    let mut fake = FakeProcess::spawn(&world.dir, &logs.join("fake.log"));
    let fake_seeded_mb = fake.status_mb("VmRSS:");
    eprintln!(
        "{}: the fake API server holds {} objects in {:.0} MB (VmRSS), seeded in {:.1} s",
        size.name,
        fake.objects,
        fake_seeded_mb,
        fake.seeded.as_secs_f64()
    );

    // The first start: cold (paged quorum lists), lists answered at once; stopped once every
    // ordering index is built, as a store settles before it is restarted.
    let first = start(&mut fake, &data, subscriptions, true, &logs.join("first-cold.log"));
    assert_eq!(first["warm"], false, "the first start is cold: {first}");
    emit(&mut results, "cold, lists at once (first start)", Duration::ZERO, &world, &[first]);

    // (a) Warm restarts, lists answered at once.
    if mode_on("warm") {
        let runs =
            warm_group(c, &mut fake, &world, &data, subscriptions, &logs, "warm", "P4-kube warm restart to caught up, lists at once");
        emit(&mut results, "warm, lists at once", Duration::ZERO, &world, &runs);
    }

    // (b) Warm restarts, 3 s per list page.
    fake.set_page_latency(PAGE_LATENCY);
    if mode_on("warm-slow") {
        let group = "P4-kube warm restart to caught up, 3 s per list page";
        let runs = warm_group(c, &mut fake, &world, &data, subscriptions, &logs, "warm-slow", group);
        emit(&mut results, "warm, 3 s per list page", PAGE_LATENCY, &world, &runs);
    }

    // (c) Cold starts into an empty data directory, 3 s per list page.
    let cold_runs = if mode_on("cold-slow") { number("CP_BENCH_COLD_RUNS").unwrap_or(1) } else { 0 };
    let mut runs = Vec::new();
    for i in 0..cold_runs {
        let dir = work.join(format!("cold-{i}"));
        let run = start(&mut fake, &dir, subscriptions, false, &logs.join(format!("cold-slow-{i}.log")));
        assert_eq!(run["warm"], false, "an empty data directory starts cold: {run}");
        runs.push(run);
        let _ = std::fs::remove_dir_all(&dir);
    }
    if !runs.is_empty() {
        emit(&mut results, "cold, 3 s per list page", PAGE_LATENCY, &world, &runs);
    }
    // The fake's own memory: the world as it keeps it, and its peak while it answered.
    let fake_memory = json!({
        "objects": fake.objects,
        "seededSeconds": fake.seeded.as_secs_f64(),
        "vmRssSeededMb": fake_seeded_mb,
        "vmRssEndMb": fake.status_mb("VmRSS:"),
        "vmHwmMb": fake.status_mb("VmHWM:"),
    });
    eprintln!("{}: the fake API server: {fake_memory}", size.name);
    results.emit("fake API server", fake_memory);
    results.write();
    drop(fake);
    let _ = std::fs::remove_dir_all(&data);
    eprintln!("{}: logs in {}", size.name, logs.display());
}

/// Whether `mode` (`warm`, `warm-slow`, `cold-slow`) runs: every one unless `CP_BENCH_MODES`
/// (comma-separated) names others.
fn mode_on(mode: &str) -> bool {
    std::env::var("CP_BENCH_MODES").ok().is_none_or(|modes| modes.split(',').any(|m| m.trim() == mode))
}

/// The number in the environment variable `name`, if set.
fn number(name: &str) -> Option<usize> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")))
}

/// One criterion group of warm restarts on `data` (or, with `CP_BENCH_WARM_STARTS=N`, N starts
/// without criterion: at 1M a start takes a minute); returns every start's measures.
#[allow(clippy::too_many_arguments)]
fn warm_group(
    c: &mut criterion::Criterion,
    fake: &mut FakeProcess,
    world: &support::World,
    data: &Path,
    subscriptions: u64,
    logs: &Path,
    label: &str,
    group: &str,
) -> Vec<Value> {
    let mut runs: Vec<Value> = Vec::new();
    if let Some(starts) = number("CP_BENCH_WARM_STARTS") {
        for i in 0..starts {
            let run = start(fake, data, subscriptions, false, &logs.join(format!("{label}-{}.log", i + 1)));
            assert_eq!(run["warm"], true, "a restart on the synced store is warm: {run}");
            runs.push(run);
        }
        return runs;
    }
    let mut g = c.benchmark_group(group);
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function(BenchmarkId::new("in process, existing store", world.size.name), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let log = logs.join(format!("{label}-{}.log", runs.len() + 1));
                let run = start(fake, data, subscriptions, false, &log);
                assert_eq!(run["warm"], true, "a restart on the synced store is warm: {run}");
                total += Duration::from_secs_f64(run["caughtUpSeconds"].as_f64().unwrap());
                runs.push(run);
            }
            total
        })
    });
    g.finish();
    runs
}

/// Median, best and worst of `field` over `runs` (absent values left out).
fn spread(runs: &[Value], field: &str) -> Value {
    let mut v: Vec<f64> = runs.iter().filter_map(|r| r[field].as_f64()).collect();
    if v.is_empty() {
        return Value::Null;
    }
    v.sort_by(f64::total_cmp);
    json!({"median": v[v.len() / 2], "best": v[0], "worst": v[v.len() - 1]})
}

/// The largest value of `field` over `runs`.
fn largest(runs: &[Value], field: &str) -> Value {
    runs.iter().filter_map(|r| r[field].as_f64()).max_by(f64::total_cmp).map_or(Value::Null, |v| json!(v))
}

/// Prints and records one mode's measures (with every start's own).
fn emit(results: &mut support::Results, mode: &str, latency: Duration, world: &support::World, runs: &[Value]) {
    let all = |f: &dyn Fn(&Value) -> bool| runs.iter().all(f);
    let lists = |field: &str| runs.iter().map(|r| r["lists"][field].as_u64().unwrap_or(0)).collect::<Vec<_>>();
    let summary = json!({
        "mode": mode,
        "pageLatencySeconds": latency.as_secs_f64(),
        "objects": world.objects,
        "starts": runs.len(),
        "warm": all(&|r| r["warm"] == true),
        "firstAnswerSeconds": spread(runs, "firstAnswerSeconds"),
        "firstAnyDataSeconds": spread(runs, "firstAnyDataSeconds"),
        "readySeconds": spread(runs, "readySeconds"),
        "caughtUpSeconds": spread(runs, "caughtUpSeconds"),
        "stopSeconds": spread(runs, "stopSeconds"),
        "vmRssReadyMb": largest(runs, "vmRssReadyMb"),
        "vmRssCaughtUpMb": largest(runs, "vmRssCaughtUpMb"),
        "vmHwmMb": largest(runs, "vmHwmMb"),
        "firstAnswerCatchingUpKinds": runs[0]["firstAnswerCatchingUp"],
        "readyzCatchingUpKinds": runs[0]["readyzCatchingUp"],
        "listRequests": lists("requests"),
        "listsFromCache": lists("fromCache"),
        "quorumPages": lists("quorum"),
        "everyKindListedOnceFromCache": all(&|r| r["lists"]["everyKindOnceFromCache"] == true),
        "revisionsWritten": runs.iter().map(|r| r["revisionsWritten"].clone()).collect::<Vec<_>>(),
        "records": runs[runs.len() - 1]["records"],
        "loadAverage": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
        "runs": runs,
    });
    let s = |f: &str, k: &str| summary[f][k].as_f64().unwrap_or(f64::NAN);
    println!(
        "P4-kube {} {mode}: first answer {:.3} s, ready {:.3} s, caught up {:.3} s (medians of {}; caught up best {:.3}, worst {:.3}), \
         VmRSS {:.0} MB at ready, {:.0} MB caught up, VmHWM {:.0} MB, stop {:.3} s; list requests {}, from the watch cache {}",
        world.size.name,
        s("firstAnswerSeconds", "median"),
        s("readySeconds", "median"),
        s("caughtUpSeconds", "median"),
        runs.len(),
        s("caughtUpSeconds", "best"),
        s("caughtUpSeconds", "worst"),
        summary["vmRssReadyMb"].as_f64().unwrap_or(f64::NAN),
        summary["vmRssCaughtUpMb"].as_f64().unwrap_or(f64::NAN),
        summary["vmHwmMb"].as_f64().unwrap_or(f64::NAN),
        s("stopSeconds", "median"),
        lists("requests").iter().sum::<u64>(),
        lists("fromCache").iter().sum::<u64>(),
    );
    results.emit("P4-kube", summary);
}

/// One start in a process of its own on `data`, until caught up (and every ordering index built
/// when `settle`), then stopped; returns its measures and the list requests it made.
fn start(fake: &mut FakeProcess, data: &Path, subscriptions: u64, settle: bool, log: &Path) -> Value {
    let before = fake.lists();
    let out = Command::new(std::env::current_exe().unwrap())
        .env(ROLE, "start")
        .env("CP_BENCH_KUBE_URL", &fake.url)
        .env("CP_BENCH_DATA", data)
        .env("CP_BENCH_SUBSCRIPTIONS", subscriptions.to_string())
        .env("CP_BENCH_SETTLE", if settle { "1" } else { "0" })
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "a start failed ({}); see {}\n{stdout}", out.status, log.display());
    let line = stdout.lines().find_map(|l| l.strip_prefix("RUN ")).unwrap_or_else(|| panic!("no RUN line; see {}", log.display()));
    let mut run: Value = serde_json::from_str(line).unwrap();
    run["lists"] = list_stats(&before, &fake.lists());
    eprintln!(
        "  {}: first answer {:.3} s, ready {:.3} s, caught up {:.3} s, VmHWM {:.0} MB, lists {}",
        log.file_stem().unwrap().to_string_lossy(),
        run["firstAnswerSeconds"].as_f64().unwrap_or(f64::NAN),
        run["readySeconds"].as_f64().unwrap(),
        run["caughtUpSeconds"].as_f64().unwrap(),
        run["vmHwmMb"].as_f64().unwrap(),
        run["lists"]
    );
    run
}

/// The list requests made between two readings of [`FakeProcess::lists`]: how many, how many
/// from the watch cache, how many quorum pages, and whether every kind was listed exactly once,
/// from the cache.
fn list_stats(before: &BTreeMap<String, Vec<Value>>, after: &BTreeMap<String, Vec<Value>>) -> Value {
    let (mut requests, mut cached, mut quorum, mut once_cached) = (0, 0, 0, true);
    for (kind, lists) in after {
        let new = &lists[before.get(kind).map_or(0, Vec::len)..];
        let from_cache = new.iter().filter(|l| l["resourceVersion"] == "0").count();
        requests += new.len();
        cached += from_cache;
        quorum += new.len() - from_cache;
        once_cached &= new.len() == 1 && from_cache == 1 && new[0]["limit"].is_null();
    }
    json!({"requests": requests, "fromCache": cached, "quorum": quorum, "everyKindOnceFromCache": once_cached})
}

/// The fake API server in a process of its own (role `fake`), driven over its stdin: `latency
/// <ms>` sets the page latency, `lists` answers every kind's list requests so far.
struct FakeProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    url: String,
    objects: u64,
    seeded: Duration,
}

impl FakeProcess {
    fn spawn(world: &Path, log: &Path) -> FakeProcess {
        let t0 = Instant::now();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(ROLE, "fake")
            .env("CP_BENCH_WORLD_DIR", world)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let mut words = line
            .trim()
            .strip_prefix("FAKE ")
            .unwrap_or_else(|| panic!("the fake API server did not start; see {}", log.display()))
            .split(' ');
        let url = words.next().unwrap().to_string();
        let objects = words.next().unwrap().parse().unwrap();
        FakeProcess { child, stdin, stdout, url, objects, seeded: t0.elapsed() }
    }

    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the fake API server exited");
        line.trim_end().to_string()
    }

    /// A field of the fake process's `/proc/<pid>/status` in MB.
    fn status_mb(&self, field: &str) -> f64 {
        proc_status_mb(&format!("/proc/{}/status", self.child.id()), field)
    }

    fn set_page_latency(&mut self, latency: Duration) {
        assert_eq!(self.ask(&format!("latency {}", latency.as_millis())), "OK");
    }

    /// Every kind's list requests so far: `{resourceVersion, limit, continue}` each.
    fn lists(&mut self) -> BTreeMap<String, Vec<Value>> {
        let answer = self.ask("lists");
        serde_json::from_str(answer.strip_prefix("LISTS ").unwrap()).unwrap()
    }
}

impl Drop for FakeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Role `fake`: serves the world of `CP_BENCH_WORLD_DIR` and answers the bench's commands.
fn fake_role() {
    let dir = PathBuf::from(std::env::var("CP_BENCH_WORLD_DIR").unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let fake = rt.block_on(FakeK8s::start());
    let t0 = Instant::now();
    let objects = fake.seed_dir(&dir);
    eprintln!("seeded {objects} objects from {} in {:.1} s", dir.display(), t0.elapsed().as_secs_f64());
    println!("FAKE {} {objects}", fake.url());
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        match line.split_once(' ').unwrap_or((line.as_str(), "")) {
            ("latency", ms) => {
                fake.set_page_latency(Duration::from_millis(ms.parse().unwrap()));
                eprintln!("page latency {ms} ms");
                println!("OK");
            }
            ("lists", _) => {
                let lists: BTreeMap<&str, Vec<Value>> = KindId::ALL
                    .iter()
                    .map(|&k| {
                        let requests = fake.list_requests(k).into_iter().map(
                            |l| json!({"resourceVersion": l.resource_version, "limit": l.limit, "continue": l.continue_token.is_some()}),
                        );
                        (k.name(), requests.collect())
                    })
                    .collect();
                println!("LISTS {}", json!(lists));
            }
            _ => panic!("unknown command {line:?}"),
        }
    }
}

/// A field of `/proc/self/status` in MB.
fn status_mb(field: &str) -> f64 {
    proc_status_mb("/proc/self/status", field)
}

/// A field of the `/proc/<pid>/status` file at `path` in MB (0 when absent).
fn proc_status_mb(path: &str, field: &str) -> f64 {
    let status = std::fs::read_to_string(path).unwrap_or_default();
    let kb: u64 =
        status.lines().find_map(|l| l.strip_prefix(field)).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0);
    kb as f64 / 1024.0
}

/// Role `start`: one start of the server, measured (see the module docs); prints `RUN {json}`.
fn start_role() {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
    let data = PathBuf::from(var("CP_BENCH_DATA"));
    let subscriptions: u64 = var("CP_BENCH_SUBSCRIPTIONS").parse().unwrap();
    let settle = var("CP_BENCH_SETTLE") == "1";
    control_plane::logging::init(control_plane::config::LogFormat::Text);
    let config = support::kube_config(&var("CP_BENCH_KUBE_URL"), &data);
    // The runtime the binary builds (`main.rs`).
    let workers = control_plane::http::executor::Executor::worker_threads(config.graphql.workers);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap();
    let run = rt.block_on(measure(config, subscriptions, settle));
    rt.shutdown_timeout(Duration::from_secs(2));
    println!("RUN {run}");
}

/// Q2's `totalCount` and how many kinds its `extensions.freshness` says are catching up, or why
/// there is no such answer.
async fn ask(http: &reqwest::Client, url: &str, token: &str, body: &str) -> Result<(u64, usize), String> {
    let resp = http
        .post(url)
        .bearer_auth(token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status();
    let answer: Value = resp.json().await.map_err(|e| e.to_string())?;
    if status != 200 || !answer["errors"].is_null() {
        return Err(format!("HTTP {status}: {answer}"));
    }
    let count = answer["data"]["apiSubscriptions"]["totalCount"].as_u64().ok_or_else(|| format!("no totalCount: {answer}"))?;
    Ok((count, answer["extensions"]["freshness"]["catchingUp"].as_array().map_or(0, Vec::len)))
}

async fn measure(config: control_plane::Config, subscriptions: u64, settle: bool) -> Value {
    let t0 = Instant::now();
    let running = control_plane::start(config).await.expect("starting the server");
    let started = t0.elapsed();
    let app = running.app();
    let warm = app.readiness().is_warm();
    let revision = || app.store().read().unwrap().revision().unwrap();
    let revision_at_start = revision();
    let base = format!("http://{}", running.local_addr());
    let url = format!("{base}/graphql/query");
    let http = reqwest::Client::new();
    let admin = support::admin_token();
    let body = support::gql_body(QUERY, &json!({}));
    let caught_up = AtomicBool::new(false);

    let first_answer = async {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut any, mut polls) = (None, 0u64);
        loop {
            tick.tick().await;
            // Read before asking: an answer after caught up holds everything there is.
            let last = caught_up.load(Ordering::SeqCst);
            polls += 1;
            if let Ok((count, catching_up)) = ask(&http, &url, &admin, &body).await {
                let at = t0.elapsed().as_secs_f64();
                if count > 0 && any.is_none() {
                    any = Some(at);
                }
                if count >= subscriptions {
                    return (any, Some((at, catching_up)), polls);
                }
            }
            if last {
                return (any, None, polls);
            }
        }
    };
    let ready = async {
        assert!(app.wait_ready(TIMEOUT).await, "not ready within {TIMEOUT:?}");
        let at = t0.elapsed().as_secs_f64();
        let rss = status_mb("VmRSS:");
        let resp = http.get(format!("{base}/readyz")).send().await.unwrap();
        let code = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap();
        (at, rss, code, body["catchingUp"].as_array().map_or(0, Vec::len))
    };
    let settled = async {
        assert!(app.wait_caught_up(TIMEOUT).await, "not caught up within {TIMEOUT:?}");
        let at = t0.elapsed().as_secs_f64();
        caught_up.store(true, Ordering::SeqCst);
        (at, status_mb("VmRSS:"), status_mb("VmHWM:"))
    };
    let ((any, first, polls), (ready_at, rss_ready, readyz, readyz_catching_up), (caught_up_at, rss_caught_up, hwm)) =
        tokio::join!(first_answer, ready, settled);
    assert_eq!(readyz, 200, "/readyz once ready");
    let revisions_written = revision() - revision_at_start;
    let (total, _) = ask(&http, &url, &admin, &body).await.expect("Q2 once caught up");
    let records = support::record_count(app.store());
    let retries_pending = app.metrics().retries_pending.get();
    let orders_built_at = if settle {
        // Each change parked for a dependency at caught up retried once (those whose parent
        // came are written), then every ordering index built.
        let metrics = app.metrics();
        let processed = |m: &control_plane::metrics::Metrics| {
            use control_plane::metrics::outcome;
            [outcome::SUCCESS, outcome::SKIP, outcome::DEPENDENCY_MISSING, outcome::DELETE_SUCCESS, outcome::ERROR]
                .into_iter()
                .map(|o| m.reconciles(o))
                .sum::<u64>()
        };
        let (pending, before) = (metrics.retries_pending.get() as u64, processed(metrics));
        assert!(metrics.wait_until(TIMEOUT, |m| processed(m) >= before + pending).await, "the retries stopped");
        let store = app.store().clone();
        assert!(metrics.wait_until(TIMEOUT, |_| !store.orders_pending()).await, "ordering indexes not built");
        Some(t0.elapsed().as_secs_f64())
    } else {
        None
    };
    let hwm_end = status_mb("VmHWM:");
    let stopping = Instant::now();
    running.shutdown().await.expect("stopping the server");
    json!({
        "warm": warm,
        "startReturnedSeconds": started.as_secs_f64(),
        "firstAnswerSeconds": first.map(|(at, _)| at),
        "firstAnswerCatchingUp": first.map(|(_, kinds)| kinds),
        "firstAnyDataSeconds": any,
        "polls": polls,
        "readySeconds": ready_at,
        "readyzCatchingUp": readyz_catching_up,
        "caughtUpSeconds": caught_up_at,
        "ordersBuiltSeconds": orders_built_at,
        "stopSeconds": stopping.elapsed().as_secs_f64(),
        "vmRssReadyMb": rss_ready,
        "vmRssCaughtUpMb": rss_caught_up,
        "vmHwmMb": hwm,
        "vmHwmEndMb": hwm_end,
        "revisionsWritten": revisions_written,
        "apiSubscriptions": total,
        "worldApiSubscriptions": subscriptions,
        "records": records,
        "retriesPending": retries_pending,
    })
}
