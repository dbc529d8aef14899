//! P4 restart to ready on an existing store: a generated world
//! (`target/genworld/<size>/`, see `benches/support/mod.rs`) is loaded once in process into a
//! data directory; then the release binary is started on it as a subprocess
//! (`target/release/control-plane serve --manifests <world> --data-dir <dir> --auth mock
//! --now …`) and timed from spawn until `/readyz` answers 200 (seconds; the manifests source
//! takes every file over from the store's checkpoints, checks every object's version against
//! the store, reads no file again and writes nothing). The load waits for the ordering indexes
//! built after the initial sync (`storage.prebuildOrders`) before it stops. After ready: `VmRSS`
//! and `VmHWM` of the process from `/proc/<pid>/status` (MB), then SIGTERM. Also: bytes on disk
//! of the data directory (`readmodel.redb` + `search/`) against the raw manifest bytes.
//!
//! P4b, re-derivation: a restart on a copy of the store in which the kind with the most
//! records is marked as written under another derivation version (a test-only bump,
//! `storage::versions::downgrade_for_tests`, done before the clock starts): the binary
//! re-derives that kind from the store's source documents in the background while it serves.
//! Measured from spawn: `/readyz` 200, the end of the re-derivation (`/readyz` names no kind
//! under `rederiving`), and, with a count of that kind sent again and again meanwhile, the
//! queries that failed and the time they covered (must be 0); VmHWM at the end.
//!
//! Needs the binary first: `cargo build --release -p control-plane && cargo bench --bench restart`
//! (the bench does not run cargo itself; it refuses to run without the binary). 10k and 100k;
//! `CP_BENCH_1M=1` adds 1M, `CP_BENCH_SIZES=10k` picks sizes. Every restart is one criterion
//! iteration (flat sampling, 10 samples). Results: `BENCH_RESULT {json}` lines and
//! `target/bench-results/ours-restart-<size>.json`. Not part of `cargo test`.

mod support;

use criterion::{BenchmarkId, SamplingMode};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One restart: time to ready, VmRSS and VmHWM in kB.
struct Restart {
    ready: Duration,
    rss_kb: u64,
    hwm_kb: u64,
}

fn main() {
    let mut c = support::criterion(10);
    let bin = support::target_dir().join("release").join("control-plane");
    assert!(bin.exists(), "{} is missing: run `cargo build --release -p control-plane` first", bin.display());
    let built = std::fs::metadata(&bin).and_then(|m| m.modified()).ok();
    eprintln!("binary {} (modified {built:?})", bin.display());
    let rt = tokio::runtime::Runtime::new().unwrap();
    for size in support::sizes() {
        let world = support::world(size);
        let work = support::work_dir(&format!("restart-{}", size.name));
        let data = work.join("data");
        {
            let _guard = rt.enter();
            let (app, elapsed) = support::load(&world.dir, &data);
            eprintln!("{}: loaded {} records in {:.1} s", size.name, support::record_count(app.store()), elapsed.as_secs_f64());
            // The ordering indexes the writer builds after the initial sync
            // (`storage.prebuildOrders`): restarts are measured on the store as it settles.
            let t0 = Instant::now();
            while app.store().orders_pending() {
                std::thread::sleep(Duration::from_millis(10));
            }
            let built = app.store().read().unwrap().built_orders().unwrap().iter().count();
            eprintln!("{}: {built} ordering indexes built {:.1} s after ready", size.name, t0.elapsed().as_secs_f64());
            app.shutdown();
        }
        let redb = std::fs::metadata(data.join("readmodel.redb")).map(|m| m.len()).unwrap_or(0);
        let disk = control_plane::metrics::dir_bytes(&data);
        let mut runs: Vec<Restart> = Vec::new();
        let mut round = 0;
        let mut g = c.benchmark_group("P4 restart to ready");
        g.sampling_mode(SamplingMode::Flat);
        g.bench_function(BenchmarkId::new("release binary, existing store", size.name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    round += 1;
                    let r = rt.block_on(restart(&bin, &world.dir, &data, &work.join(format!("serve-{round}.log"))));
                    total += r.ready;
                    runs.push(r);
                }
                total
            })
        });
        g.finish();
        let (ready, median) = ready_times(&runs);
        let (rss, hwm) = peak_memory_mb(&runs);
        let mut results = support::Results::new("restart", size.name);
        results.emit(
            "P4",
            json!({
                "objects": world.objects,
                "restarts": runs.len(),
                "readyMedianSeconds": median,
                "readyBestSeconds": ready[0],
                "readyWorstSeconds": ready[ready.len() - 1],
                "vmRssMb": rss,
                "vmHwmMb": hwm,
                "diskBytes": disk,
                "redbBytes": redb,
                "searchBytes": disk - redb,
                "manifestBytes": world.bytes,
                "diskToRaw": disk as f64 / world.bytes as f64,
                "redbToRaw": redb as f64 / world.bytes as f64,
            }),
        );
        println!(
            "P4 {}: ready median {median:.3} s (best {:.3}, worst {:.3}, {} restarts), VmRSS {rss:.0} MB, VmHWM {hwm:.0} MB, disk {:.1} MB \
             (redb {:.1} MB) vs raw {:.1} MB = {:.2}x",
            size.name,
            ready[0],
            ready[ready.len() - 1],
            runs.len(),
            disk as f64 / 1e6,
            redb as f64 / 1e6,
            world.bytes as f64 / 1e6,
            disk as f64 / world.bytes as f64
        );
        results.write();
        rederive(&mut c, &rt, &bin, &world, &work, &data);
        let _ = std::fs::remove_dir_all(&work);
    }
    c.final_summary();
}

/// The restarts' times to ready in seconds, sorted, and their median.
fn ready_times(runs: &[Restart]) -> (Vec<f64>, f64) {
    let mut ready: Vec<f64> = runs.iter().map(|r| r.ready.as_secs_f64()).collect();
    ready.sort_by(f64::total_cmp);
    let median = ready[ready.len() / 2];
    (ready, median)
}

/// The largest VmRSS and VmHWM at ready over the restarts, in MB.
fn peak_memory_mb(runs: &[Restart]) -> (f64, f64) {
    let mb = |kb: Option<u64>| kb.unwrap_or(0) as f64 / 1024.0;
    (mb(runs.iter().map(|r| r.rss_kb).max()), mb(runs.iter().map(|r| r.hwm_kb).max()))
}

/// A free TCP port on 127.0.0.1.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts the binary on `data`, waits for `/readyz` 200, reads its memory, stops it (SIGTERM).
async fn restart(bin: &Path, manifests: &Path, data: &Path, log: &PathBuf) -> Restart {
    let port = free_port();
    let log_file = std::fs::File::create(log).unwrap();
    let t0 = Instant::now();
    let mut child: Child = Command::new(bin)
        .arg("serve")
        .arg("--manifests")
        .arg(manifests)
        .arg("--data-dir")
        .arg(data)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--auth", "mock", "--now", support::NOW])
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/readyz");
    let ready = loop {
        if client.get(&url).send().await.map(|r| r.status() == 200).unwrap_or(false) {
            break t0.elapsed();
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("control-plane exited with {status} before ready; see {}", log.display());
        }
        assert!(t0.elapsed() < Duration::from_secs(300), "not ready after 300 s; see {}", log.display());
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let (rss_kb, hwm_kb) = (field("VmRSS:"), field("VmHWM:"));
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let exit = child.wait().unwrap();
    if !exit.success() {
        eprintln!("control-plane exited with {exit} after SIGTERM; see {}", log.display());
    }
    Restart { ready, rss_kb, hwm_kb }
}

/// What one P4b restart measured.
struct Rederived {
    /// From spawn to `/readyz` 200.
    ready: Duration,
    /// From spawn until `/readyz` names no kind under `rederiving` (the switch is committed).
    rederived: Duration,
    /// Queries of the re-derived kind answered meanwhile, and those that failed (not 200, an
    /// error, or another count of records).
    queries: usize,
    failed: usize,
    /// Time from each failed answer's request to the next correct one's, summed.
    unavailable: Duration,
    /// VmHWM at the end, in kB.
    hwm_kb: u64,
}

/// The root connection field of `kind` (`approvalRequests`).
fn connection_field(kind: schema::KindId) -> String {
    let name = kind.name();
    format!("{}{}s", name[..1].to_lowercase(), &name[1..])
}

/// Starts the binary on `data` (where `kind` has another derivation version), sends a count of
/// `kind` again and again from the start until `/readyz` names no kind re-derived, and stops it.
async fn rederive_once(bin: &Path, manifests: &Path, data: &Path, log: &PathBuf, kind: schema::KindId, records: u64) -> Rederived {
    let port = free_port();
    let log_file = std::fs::File::create(log).unwrap();
    let t0 = Instant::now();
    let mut child: Child = Command::new(bin)
        .arg("serve")
        .arg("--manifests")
        .arg(manifests)
        .arg("--data-dir")
        .arg(data)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--auth", "mock", "--now", support::NOW])
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .unwrap();
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{port}");
    let query = json!({"query": format!("{{ {}(first: 10) {{ totalCount edges {{ node {{ id }} }} }} }}", connection_field(kind))});
    let (mut ready, mut queries, mut failed, mut unavailable) = (None, 0, 0, Duration::ZERO);
    let mut failing_since: Option<Instant> = None;
    let rederived = loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("control-plane exited with {status}; see {}", log.display());
        }
        assert!(t0.elapsed() < Duration::from_secs(600), "not re-derived after 600 s; see {}", log.display());
        let readyz = match client.get(format!("{base}/readyz")).send().await {
            Ok(r) => Some((r.status().as_u16(), r.json::<serde_json::Value>().await.unwrap_or_default())),
            Err(_) => None,
        };
        let Some((code, body)) = readyz else {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        };
        if code == 200 && ready.is_none() {
            ready = Some(t0.elapsed());
        }
        let rederiving = body["rederiving"].as_array().is_some_and(|k| !k.is_empty());
        let sent = Instant::now();
        let answer = client.post(format!("{base}/graphql/query")).bearer_auth(ADMIN).json(&query).send().await;
        let ok = match answer {
            Ok(r) if r.status() == 200 => {
                let b: serde_json::Value = r.json().await.unwrap_or_default();
                b.get("errors").is_none() && b["data"][connection_field(kind)]["totalCount"].as_u64() == Some(records)
            }
            _ => false,
        };
        queries += 1;
        match (ok, failing_since) {
            (false, None) => {
                failed += 1;
                failing_since = Some(sent);
            }
            (false, Some(_)) => failed += 1,
            (true, Some(since)) => {
                unavailable += since.elapsed();
                failing_since = None;
            }
            (true, None) => {}
        }
        if ready.is_some() && !rederiving && failing_since.is_none() {
            break t0.elapsed();
        }
    };
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let hwm_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
    Rederived { ready: ready.unwrap_or(rederived), rederived, queries, failed, unavailable, hwm_kb }
}

/// A mock admin token (`platform--ops--console`, `tardis:admin:all`, `poc`).
const ADMIN: &str = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJjbGllbnRJZCI6InBsYXRmb3JtLS1vcHMtLWNvbnNvbGUiLCJzY29wZSI6InRhcmRpczphZG1pbjphbGwiLCJlbnYiOiJwb2MifQ.mock";

/// P4b: a restart when the kind with the most records has another derivation version (a
/// test-only bump: the store says version 0, the records' shape is this build's): the kind is
/// re-derived from the store's source documents while it is served. Measured: time to ready,
/// time until the switch, the queries of that kind that failed meanwhile and the time they
/// covered (which must be 0), VmHWM.
fn rederive(c: &mut criterion::Criterion, rt: &tokio::runtime::Runtime, bin: &Path, world: &support::World, work: &Path, data: &Path) {
    let store = storage::Store::open(data).unwrap();
    let view = store.read().unwrap();
    let (kind, records) =
        schema::KindId::ALL.iter().map(|&k| (k, view.count(k, &schema::Scope::All).unwrap())).max_by_key(|(_, n)| *n).unwrap();
    drop(view);
    drop(store);
    let copy = work.join("rederive");
    let mut runs: Vec<Rederived> = Vec::new();
    let mut round = 0;
    let mut g = c.benchmark_group("P4b restart with one kind re-derived from the volume");
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function(BenchmarkId::new(format!("release binary, {} re-derived", kind.name()), world.size.name), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                round += 1;
                let _ = std::fs::remove_dir_all(&copy);
                std::fs::create_dir_all(&copy).unwrap();
                std::fs::copy(data.join(storage::DB_FILE), copy.join(storage::DB_FILE)).unwrap();
                storage::versions::downgrade_for_tests(&copy, kind, 0, |b| b.to_vec()).unwrap();
                assert_eq!(storage::Store::open(&copy).unwrap().rebuilding(), vec![(kind, true)], "re-derived from the volume, served");
                let r = rt.block_on(rederive_once(bin, &world.dir, &copy, &work.join(format!("rederive-{round}.log")), kind, records));
                let store = storage::Store::open(&copy).unwrap();
                assert!(store.rebuilding().is_empty() && store.rederiving().is_empty(), "the re-derivation ended");
                assert_eq!(store.read().unwrap().count(kind, &schema::Scope::All).unwrap(), records, "every record is there");
                total += r.rederived;
                runs.push(r);
            }
            total
        })
    });
    g.finish();
    let mut times: Vec<f64> = runs.iter().map(|r| r.rederived.as_secs_f64()).collect();
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let ready = runs.iter().map(|r| r.ready.as_secs_f64()).fold(0.0, f64::max);
    let unavailable = runs.iter().map(|r| r.unavailable.as_secs_f64()).fold(0.0, f64::max);
    let (queries, failed): (usize, usize) = (runs.iter().map(|r| r.queries).sum(), runs.iter().map(|r| r.failed).sum());
    let hwm = runs.iter().map(|r| r.hwm_kb).max().unwrap_or(0) as f64 / 1024.0;
    let mut results = support::Results::new("rederive", world.size.name);
    results.emit(
        "P4b",
        json!({
            "objects": world.objects,
            "kind": kind.name(),
            "records": records,
            "restarts": runs.len(),
            "rederivedMedianSeconds": median,
            "rederivedBestSeconds": times[0],
            "rederivedWorstSeconds": times[times.len() - 1],
            "readyWorstSeconds": ready,
            "queriesDuring": queries,
            "queriesFailed": failed,
            "unavailableWorstSeconds": unavailable,
            "vmHwmMb": hwm,
        }),
    );
    println!(
        "P4b {}: {} ({records} records) re-derived from the volume in {median:.3} s median (best {:.3}, worst {:.3}, {} restarts); ready within {ready:.3} s; \
         {queries} queries of the kind meanwhile, {failed} failed, unavailable {unavailable:.3} s; VmHWM {hwm:.0} MB",
        world.size.name,
        kind.name(),
        times[0],
        times[times.len() - 1],
        runs.len()
    );
    results.write();
}
