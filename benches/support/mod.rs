//! Shared support of the world benches (`projection`, `http_queries`, `restart`,
//! `restart_kube`, …):
//! generated worlds, the in-process projector load, mock tokens, GraphQL over HTTP, percentiles
//! and the machine-readable results.
//!
//! Worlds come from `tools/genworld/genworld.py` (vendored, see `tools/genworld/README.md`) and
//! are generated into `target/genworld/<size>/` only when its `manifest.json` is missing. The
//! genworld parameters of every size are in [`SIZES`] (the one place they are written down).
//! Sizes run: `10k` and `100k` by default; `CP_BENCH_1M=1` adds `1m`; `CP_BENCH_SIZES=10k`
//! (comma-separated names) picks sizes explicitly.
//!
//! Every measure is printed as one line `BENCH_RESULT {json}` and written, per bench and size,
//! to `target/bench-results/ours-<bench>-<size>.json` (a JSON array of those objects).
//!
//! Not a bench itself: included by the benches with `mod support;`.

#![allow(dead_code)]

use base64::Engine;
use control_plane::config::Config;
use control_plane::App;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The binary's allocator (mimalloc), so in-process measures match the binary.
#[global_allocator]
static ALLOCATOR: control_plane::Allocator = control_plane::Allocator;

/// A world size and the genworld parameters that give it (all with `--seed 1 --env poc`).
#[derive(Clone, Copy, Debug)]
pub struct Size {
    /// `10k`, `100k`, `1m`.
    pub name: &'static str,
    /// `--teams`.
    pub teams: u32,
    /// `--apps-per-team`.
    pub apps_per_team: u32,
    /// `--exposures-per-app`.
    pub exposures_per_app: u32,
    /// `--subscriptions-per-app`.
    pub subscriptions_per_app: u32,
}

/// The sizes: genworld's `medium` shape (8 apps per team, 3 exposure and 4 subscription slots
/// per app) with 71 teams (≈10k objects), 705 teams (= `--preset medium`, ≈100k) and 7050
/// teams (= `--preset large`, ≈1M).
pub const SIZES: &[Size] = &[
    Size { name: "10k", teams: 71, apps_per_team: 8, exposures_per_app: 3, subscriptions_per_app: 4 },
    Size { name: "100k", teams: 705, apps_per_team: 8, exposures_per_app: 3, subscriptions_per_app: 4 },
    Size { name: "1m", teams: 7050, apps_per_team: 8, exposures_per_app: 3, subscriptions_per_app: 4 },
];

/// The reference time the worlds are projected at (`--now`).
pub const NOW: &str = "2026-09-01T00:00:00Z";

/// The sizes to run (see the module docs).
pub fn sizes() -> Vec<Size> {
    if let Ok(list) = std::env::var("CP_BENCH_SIZES") {
        return list
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| *SIZES.iter().find(|z| z.name.eq_ignore_ascii_case(s)).unwrap_or_else(|| panic!("unknown size {s} in CP_BENCH_SIZES")))
            .collect();
    }
    let mut out = vec![SIZES[0], SIZES[1]];
    if std::env::var("CP_BENCH_1M").is_ok_and(|v| v == "1") {
        out.push(SIZES[2]);
    }
    out
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The cargo target directory (`CARGO_TARGET_DIR` or `target/`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|p| if p.is_absolute() { p } else { root().join(p) })
        .unwrap_or_else(|| root().join("target"))
}

/// A generated world on disk.
#[derive(Clone, Debug)]
pub struct World {
    /// The size.
    pub size: Size,
    /// `target/genworld/<size>/`.
    pub dir: PathBuf,
    /// Documents (`manifest.json` `totalDocuments`).
    pub objects: u64,
    /// Bytes of the manifest files (`totalBytes`).
    pub bytes: u64,
}

/// The world of `size`, generated when `manifest.json` is missing.
pub fn world(size: Size) -> World {
    let dir = target_dir().join("genworld").join(size.name);
    let manifest = dir.join("manifest.json");
    if !manifest.exists() {
        let t0 = Instant::now();
        let script = root().join("tools/genworld/genworld.py");
        let status = std::process::Command::new("python3")
            .arg(&script)
            .args(["--teams", &size.teams.to_string()])
            .args(["--apps-per-team", &size.apps_per_team.to_string()])
            .args(["--exposures-per-app", &size.exposures_per_app.to_string()])
            .args(["--subscriptions-per-app", &size.subscriptions_per_app.to_string()])
            .args(["--seed", "1", "--env", "poc", "--out"])
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("running python3 tools/genworld/genworld.py");
        assert!(status.success(), "genworld failed: {status}");
        eprintln!("generated world {} in {:.1} s", dir.display(), t0.elapsed().as_secs_f64());
    }
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    World { size, dir, objects: m["totalDocuments"].as_u64().unwrap(), bytes: m["totalBytes"].as_u64().unwrap() }
}

/// Collects the results of one bench at one size.
pub struct Results {
    bench: &'static str,
    size: &'static str,
    lines: Vec<Value>,
}

impl Results {
    /// Results of `bench` (`projection`, `http_queries`, `restart`) at `size`.
    pub fn new(bench: &'static str, size: &'static str) -> Results {
        Results { bench, size, lines: Vec::new() }
    }

    /// Records and prints one measure: `fields` (an object) plus `bench`, `size`, `measure`.
    pub fn emit(&mut self, measure: &str, fields: Value) {
        let mut v = json!({"impl": "ours", "bench": self.bench, "size": self.size, "measure": measure});
        if let (Some(o), Value::Object(f)) = (v.as_object_mut(), fields) {
            o.extend(f);
        }
        println!("BENCH_RESULT {v}");
        self.lines.push(v);
    }

    /// Writes `target/bench-results/ours-<bench>-<size>.json`.
    pub fn write(&self) {
        let dir = target_dir().join("bench-results");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("ours-{}-{}.json", self.bench, self.size));
        std::fs::write(&path, serde_json::to_string_pretty(&self.lines).unwrap() + "\n").unwrap();
        eprintln!("wrote {}", path.display());
    }
}

/// The `p`-th percentile (0..=100, nearest rank) of `v` (sorted here), in microseconds.
pub fn percentile_us(v: &mut [Duration], p: f64) -> f64 {
    v.sort_unstable();
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1].as_secs_f64() * 1e6
}

/// The configuration of the benches: manifests source on `manifests`, store in `data_dir`,
/// mock authentication, clock pinned to [`NOW`], `127.0.0.1:0`; redb's page cache from
/// `CP_STORAGE_CACHE_SIZE` (bytes), the GraphQL workers from `CP_GRAPHQL_WORKERS`, planned
/// execution from `CP_GRAPHQL_PLANNED_EXECUTION` and the change
/// log from `CP_HISTORY_ENABLED`, as in the server, else the defaults.
pub fn config(manifests: &Path, data_dir: &Path) -> Config {
    from_env(Config::for_manifests(manifests, data_dir))
}

/// [`config`] with the kube source reading the API server at `url` (a fake one, see
/// `tests/support/fake_k8s.rs`) instead of a manifests directory.
pub fn kube_config(url: &str, data_dir: &Path) -> Config {
    from_env(Config::for_kube(url, data_dir))
}

/// The clock pinned to [`NOW`] and the settings the benches take from the environment (see
/// [`config`]); the allocator configured as the binary does at start.
fn from_env(mut c: Config) -> Config {
    control_plane::configure_allocator();
    c.now = Some(schema::Timestamp::parse_rfc3339(NOW).unwrap());
    if let Ok(v) = std::env::var("CP_STORAGE_CACHE_SIZE") {
        c.storage.cache_size = v.parse().unwrap_or_else(|_| panic!("CP_STORAGE_CACHE_SIZE={v}: not a number of bytes"));
    }
    if let Ok(v) = std::env::var("CP_HISTORY_ENABLED") {
        c.history.enabled = v.parse().unwrap_or_else(|_| panic!("CP_HISTORY_ENABLED={v}: not true or false"));
    }
    if let Ok(v) = std::env::var("CP_STORAGE_PREBUILD_ORDERS") {
        c.storage.prebuild_orders = v.parse().unwrap_or_else(|_| panic!("CP_STORAGE_PREBUILD_ORDERS={v}: not true or false"));
    }
    if let Ok(v) = std::env::var("CP_GRAPHQL_PLANNED_EXECUTION") {
        c.graphql.planned_execution = v.parse().unwrap_or_else(|_| panic!("CP_GRAPHQL_PLANNED_EXECUTION={v}: not true or false"));
    }
    if let Ok(v) = std::env::var("CP_GRAPHQL_WORKERS") {
        c.graphql.workers = v.parse().unwrap_or_else(|_| panic!("CP_GRAPHQL_WORKERS={v}: not a number"));
    }
    c
}

/// Number of records in the store (every registered kind, environment `poc`).
pub fn record_count(store: &storage::Store) -> usize {
    let view = store.read().unwrap();
    schema::registry::registered().into_iter().map(|k| view.with_prefix_count(k, "poc")).sum()
}

/// Starts the projector ([`App::start`]: manifests source + the one writer, durable commits)
/// on `manifests` into `data_dir` and waits until ready (every document of the initial scan
/// processed once). Returns the app and the time from start to ready.
pub fn load(manifests: &Path, data_dir: &Path) -> (App, Duration) {
    let t0 = Instant::now();
    let app = App::start(config(manifests, data_dir)).unwrap();
    while !app.readiness().is_ready() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let elapsed = t0.elapsed();
    (app, elapsed)
}

/// A mock (unsigned) token with the given claims.
pub fn token(client_id: &str, scope: &str) -> String {
    let enc = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.mock", enc(json!({"alg": "none"})), enc(json!({"clientId": client_id, "scope": scope, "env": "poc"})))
}

/// A `read` token of team `team` (`<group>--<team>`).
pub fn team_token(team: &str) -> String {
    token(&format!("{team}--console"), "tardis:team:read")
}

/// An admin token (access `all`).
pub fn admin_token() -> String {
    token("platform--ops--console", "tardis:admin:all")
}

/// Teams ordered by (applications, approvals on both sides) descending: for each team
/// `(team, applications, approvals as requester, approvals as decider)`, read from the world's
/// manifests (labels `cp.ei.telekom.de/team`, `…/requester.team`, `…/decider.team`).
pub fn teams_by_load(world: &World) -> Vec<(String, u64, u64, u64)> {
    let mut t: HashMap<String, (u64, u64, u64)> = HashMap::new();
    let lines = |file: &str| std::fs::read_to_string(world.dir.join(file)).unwrap();
    for line in lines("04-applications.yaml").lines().filter(|l| l.starts_with('{')) {
        let v: Value = serde_json::from_str(line).unwrap();
        if let Some(team) = v["metadata"]["labels"]["cp.ei.telekom.de/team"].as_str() {
            t.entry(team.to_string()).or_default().0 += 1;
        }
    }
    for line in lines("19-approvals.yaml").lines().filter(|l| l.starts_with('{')) {
        let v: Value = serde_json::from_str(line).unwrap();
        let labels = &v["metadata"]["labels"];
        if let Some(team) = labels["cp.ei.telekom.de/requester.team"].as_str() {
            t.entry(team.to_string()).or_default().1 += 1;
        }
        if let Some(team) = labels["cp.ei.telekom.de/decider.team"].as_str() {
            t.entry(team.to_string()).or_default().2 += 1;
        }
    }
    let mut out: Vec<_> = t.into_iter().map(|(k, (a, r, d))| (k, a, r, d)).collect();
    out.sort_by(|x, y| (y.1, y.2.min(y.3), y.2 + y.3, &x.0).cmp(&(x.1, x.2.min(x.3), x.2 + x.3, &y.0)));
    out
}

/// POSTs a GraphQL request; `Ok(data)` on HTTP 200 without `errors`, else `Err(why)`.
pub async fn gql(client: &reqwest::Client, url: &str, token: &str, query: &str, variables: &Value) -> Result<Value, String> {
    let resp = client
        .post(url)
        .bearer_auth(token)
        .json(&json!({"query": query, "variables": variables}))
        .send()
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = resp.status();
    let body: Value = resp.json().await.map_err(|e| format!("body ({status}): {e}"))?;
    if status != 200 {
        return Err(format!("HTTP {status}: {body}"));
    }
    match body.get("errors") {
        Some(e) if !e.is_null() => Err(format!("errors: {e}")),
        _ => Ok(body["data"].clone()),
    }
}

/// The JSON body of a GraphQL request, serialized once for requests sent many times.
pub fn gql_body(query: &str, variables: &Value) -> String {
    json!({"query": query, "variables": variables}).to_string()
}

/// Sends a pre-serialized GraphQL request ([`gql_body`]) and checks the answer like [`gql`]
/// (HTTP 200, a `data` member, no `errors`), without building the response tree: a measuring
/// client must not spend the shared cores on decoding what it throws away. The body is still
/// read whole and tokenized as JSON.
pub async fn gql_ok(client: &reqwest::Client, url: &str, token: &str, body: &str) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        data: Option<serde::de::IgnoredAny>,
        errors: Option<Value>,
    }
    let resp = client
        .post(url)
        .bearer_auth(token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = resp.status();
    let bytes = resp.bytes().await.map_err(|e| format!("body ({status}): {e}"))?;
    if status != 200 {
        return Err(format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes)));
    }
    let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| format!("body: {e}"))?;
    match (answer.errors, answer.data) {
        (Some(e), _) if !e.is_null() => Err(format!("errors: {e}")),
        (_, None) => Err("no data".to_string()),
        _ => Ok(()),
    }
}

/// Copies the world's kind files (not `manifest.json`) into `to`.
pub fn copy_world(world: &World, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(&world.dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

/// Criterion for whole-world measures: `samples` samples, flat, no real warm-up (one sample is
/// one load, restart or restore); command-line flags still apply.
pub fn criterion(samples: usize) -> criterion::Criterion {
    criterion::Criterion::default()
        .sample_size(samples)
        .warm_up_time(Duration::from_millis(1))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args()
}

/// Runs `f` `iters` times (one criterion `iter_custom` call), keeps each duration in `runs`,
/// returns their sum.
pub fn timed(iters: u64, runs: &mut Vec<Duration>, mut f: impl FnMut()) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let t0 = Instant::now();
        f();
        let d = t0.elapsed();
        runs.push(d);
        total += d;
    }
    total
}

/// A fresh `target/bench-work/<name>` directory.
pub fn work_dir(name: &str) -> PathBuf {
    let work = target_dir().join("bench-work").join(name);
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    work
}

/// Rewrites `zz-<label>-churn.yaml` in `manifests` every `every` until `stop`: the first
/// `objects` Applications of `world`, each with a new Ready message and a `<label>/generation`
/// annotation (the later path wins for duplicates; written aside and renamed into place).
/// The thread returns the number of writes.
pub fn churn(
    world: &Path,
    manifests: &Path,
    label: &'static str,
    objects: usize,
    every: Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let apps: Vec<Value> = std::fs::read_to_string(world.join("04-applications.yaml"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('{'))
        .take(objects)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let dir = manifests.to_path_buf();
    std::thread::spawn(move || {
        let mut generation = 0u64;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            generation += 1;
            let mut text = String::new();
            for app in &apps {
                let mut app = app.clone();
                if let Some(conds) = app["status"]["conditions"].as_array_mut() {
                    for c in conds.iter_mut().filter(|c| c["type"] == "Ready") {
                        c["message"] = json!(format!("{label} churn generation {generation}"));
                    }
                }
                app["metadata"]["annotations"] = json!({format!("{label}/generation"): generation.to_string()});
                text.push_str("---\n");
                text.push_str(&app.to_string());
                text.push('\n');
            }
            let tmp = dir.join(format!(".zz-{label}-churn.tmp"));
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, dir.join(format!("zz-{label}-churn.yaml"))).unwrap();
            std::thread::sleep(every);
        }
        generation
    })
}
