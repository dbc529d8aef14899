//! P2 console query latency and P6 mixed load over HTTP, on a generated world
//! (`target/genworld/<size>/`, see `benches/support/mod.rs`) loaded by the real server
//! (`control_plane::start`, in process, manifests source, **mock authentication** — tokens are
//! decoded, not verified, so signature checks are not in the numbers), queried with reqwest
//! over keep-alive HTTP/1.1 on 127.0.0.1.
//!
//! P2, sequential requests, latency per request in µs (p50/p90/p99/mean over 2000 requests after
//! 100 warm-up requests; criterion's estimate too):
//! - Q1 `applications(first: 50)` of one team with `totalCount`, nested `exposedApis`,
//!   `subscribedApis`, `exposedEvents`, `subscribedEvents` (the team with the most applications,
//!   ties broken by approvals on both sides);
//! - Q2 `apiSubscriptions(first: 50, after: <cursor of the 10 000th>)` as an admin viewer (no
//!   team has 10k subscriptions; below 10k subscriptions: the last full page);
//! - Q3 `approvals(first: 50)` of that team (a team sees approvals where it is the requester or
//!   the decider);
//! - Q4 `node(id)` of one of its applications;
//! - Q5 `approvals(first: 50, orderBy: [{field: CREATED_AT, direction: DESC}])` as an admin
//!   viewer (every approval of the world), and Q6 `applications(first: 50, orderBy: [{field:
//!   NAME}])` of that team: orders beyond the natural-key one. Their first request is timed
//!   alone (`firstUs`), then the time until the writer has built the index (`indexBuiltAfterMs`;
//!   0 when it was built before), then the 2000 requests.
//!
//! Before any of them, the time from ready until the writer has built every ordering index
//! (`storage.prebuildOrders`, default true; `ORDERS` result: `builtAfterReadyS`, the number of
//! build steps and the longest step's bucket, the longest a change waited for a build).
//! `CP_STORAGE_PREBUILD_ORDERS=false` measures the orders built on first use instead (the first
//! request then sorts in memory).
//!
//! P6: 16 concurrent clients (tokio tasks sharing one keep-alive pool) issue Q1/Q3/Q4 in turn for
//! 16 teams for 10 s while the manifests directory changes every 100 ms (a file with 100
//! modified Applications is rewritten; the source polls every second and re-projects them).
//! Reported: requests/s, errors (any non-200 or GraphQL `errors`), p50/p99, store revisions
//! committed during the run. Client and server share the same 2 cores.
//!
//! P7: 1000 `changes` subscriptions on 100 WebSocket connections (admin, group and team viewers)
//! while the P6 churn applies 100 changes/s: latency from each commit (the store's commit feed)
//! to each event's arrival, p50/p99, and the process's CPU and RSS (server and clients share
//! it); then P6 again with the subscriptions open. The 10 subscriptions of a connection are
//! identical, so the server resolves each event once per viewer (subscriptions with the same
//! operation and claims share answers); `CP_BENCH_P7_DISTINCT=1` gives every subscription a
//! text of its own (an alias), so none shares.
//!
//! Run: `cargo bench --bench http_queries` (10k and 100k; `CP_BENCH_1M=1` adds 1M,
//! `CP_BENCH_SIZES=10k` picks sizes, `CP_BENCH_ONLY=P6` runs only the mixed loads P6 and P7, `CP_BENCH_ONLY=P7` only P7,
//! `CP_BENCH_ONLY=FIRST_SORT` only the ordering index builds and the first sorted requests). Results: `BENCH_RESULT {json}` lines and
//! `target/bench-results/ours-http_queries-<size>.json`. Not part of `cargo test`.

mod support;

use criterion::{BenchmarkId, Criterion};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const Q1: &str = "query Q1 { applications(first: 50) { totalCount pageInfo { endCursor hasNextPage } edges { cursor node { \
    id name statusPhase secretRotationPhase zone { name } ownerTeam { name } \
    exposedApis(first: 20) { totalCount edges { node { id basePath visibility active statusPhase } } } \
    subscribedApis(first: 20) { totalCount edges { node { id basePath statusPhase target { basePath } } } } \
    exposedEvents(first: 20) { totalCount edges { node { id } } } \
    subscribedEvents(first: 20) { totalCount edges { node { id } } } } } } }";

const Q2: &str = "query Q2($after: Cursor) { apiSubscriptions(first: 50, after: $after) { totalCount pageInfo { endCursor hasNextPage } \
    edges { cursor node { id name basePath statusPhase owner { name } target { basePath } } } } }";

const Q3: &str = "query Q3 { approvals(first: 50) { totalCount pageInfo { endCursor hasNextPage } edges { node { \
    id name state action strategy requester { teamName applicationName } decider { teamName } deciderTeamName } } } }";

const Q4: &str =
    "query Q4($id: ID!) { node(id: $id) { id ... on Application { name statusPhase clientID ownerTeam { name } zone { name } } } }";

const Q5: &str =
    "query Q5 { approvals(first: 50, orderBy: [{field: CREATED_AT, direction: DESC}]) { totalCount pageInfo { endCursor hasNextPage } \
    edges { node { id name state createdAt } } } }";

const Q6: &str = "query Q6 { applications(first: 50, orderBy: [{field: NAME}]) { totalCount pageInfo { endCursor hasNextPage } \
    edges { node { id name statusPhase createdAt } } } }";

const WARMUP: usize = 100;
const REQUESTS: usize = 2000;
const CLIENTS: usize = 16;
const MIXED_FOR: Duration = Duration::from_secs(10);
const CHURN_EVERY: Duration = Duration::from_millis(100);
const CHURN_OBJECTS: usize = 100;

/// One measured query: name, document, variables, token.
struct Probe {
    name: &'static str,
    query: &'static str,
    vars: Value,
    token: String,
    detail: Value,
}

fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        // The server's log on stderr, for a run that needs it (`RUST_LOG=info`).
        tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).with_writer(std::io::stderr).init();
    }
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for size in support::sizes() {
        let world = support::world(size);
        let work = support::work_dir(&format!("http-{}", size.name));
        let manifests = work.join("manifests");
        support::copy_world(&world, &manifests);
        let mut results = support::Results::new("http_queries", size.name);
        let running = rt.block_on(async {
            let t0 = Instant::now();
            let running = control_plane::start(support::config(&manifests, &work.join("data"))).await.unwrap();
            while !running.app().readiness().is_ready() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            eprintln!("{}: server ready on {} in {:.1} s", size.name, running.local_addr(), t0.elapsed().as_secs_f64());
            running
        });
        // The ordering indexes built after the initial sync (storage.prebuildOrders): measured,
        // and waited for, so that the queries below run on a settled server.
        let orders_built = rt.block_on(orders_built_after_ready(running.app()));
        println!("orders {}: {orders_built}", size.name);
        results.emit("ORDERS", orders_built);
        let url = format!("http://{}/graphql/query", running.local_addr());
        let client = reqwest::Client::builder().pool_max_idle_per_host(64).build().unwrap();
        let teams = support::teams_by_load(&world);
        let (team, apps, as_requester, as_decider) = teams[0].clone();
        eprintln!("{}: team {team}: {apps} applications, approvals {as_requester} as requester, {as_decider} as decider", size.name);

        // `CP_BENCH_ONLY=P6` skips P2 (for profiling the mixed load).
        let only = std::env::var("CP_BENCH_ONLY").unwrap_or_default().to_ascii_uppercase();
        let only_p6 = only == "P6" || only == "P7";
        let store = running.app().store().clone();
        let probes = if only_p6 { Vec::new() } else { rt.block_on(setup(&client, &url, &team, &store)) };
        if only == "FIRST_SORT" {
            // The first requests of orders not built yet (timed in `setup`), nothing else.
            for p in probes.iter().filter(|p| p.detail.get("firstUs").is_some()) {
                println!("first sort {} {}: {}", size.name, p.name, p.detail);
            }
            rt.block_on(running.shutdown()).unwrap();
            let _ = std::fs::remove_dir_all(&work);
            continue;
        }
        for p in &probes {
            let mut lat = rt.block_on(sequential(&client, &url, p, WARMUP, REQUESTS));
            let mean = lat.iter().map(Duration::as_secs_f64).sum::<f64>() / lat.len() as f64 * 1e6;
            let (p50, p90, p99) =
                (support::percentile_us(&mut lat, 50.0), support::percentile_us(&mut lat, 90.0), support::percentile_us(&mut lat, 99.0));
            println!(
                "P2 {} {}: p50 {p50:.0} µs, p90 {p90:.0} µs, p99 {p99:.0} µs, mean {mean:.0} µs ({REQUESTS} requests)",
                size.name, p.name
            );
            let mut fields = json!({"query": p.name, "requests": REQUESTS, "p50Us": p50, "p90Us": p90, "p99Us": p99, "meanUs": mean});
            if let (Some(o), Value::Object(d)) = (fields.as_object_mut(), p.detail.clone()) {
                o.extend(d);
            }
            results.emit("P2", fields);
        }
        let mut g = c.benchmark_group(format!("P2 query over HTTP ({})", size.name));
        for p in &probes {
            g.bench_function(BenchmarkId::from_parameter(p.name), |b| {
                b.iter_custom(|iters| rt.block_on(sequential(&client, &url, p, 0, iters as usize)).into_iter().sum())
            });
        }
        g.finish();

        if only == "P7" {
            // P7 alone (for profiling): no P6 before or after.
            let (p7, clients) = rt.block_on(subscriptions_load(running.local_addr(), &store, &world.dir, &manifests));
            println!("P7 {}: {p7}", size.name);
            results.emit("P7", p7);
            drop(clients);
            results.write();
            rt.block_on(running.shutdown()).unwrap();
            continue;
        }
        let mixed = rt.block_on(mixed_load(&client, &url, running.local_addr(), &teams, &world.dir, &manifests));
        println!(
            "P6 {}: {CLIENTS} clients, {:.1} s: {} requests = {:.0} req/s, {} errors, p50 {:.0} µs, p99 {:.0} µs, {} churn writes, {} store revisions",
            size.name,
            mixed["seconds"].as_f64().unwrap(),
            mixed["requests"],
            mixed["requestsPerSecond"].as_f64().unwrap(),
            mixed["errors"],
            mixed["p50Us"].as_f64().unwrap(),
            mixed["p99Us"].as_f64().unwrap(),
            mixed["churnWrites"],
            mixed["storeRevisions"],
        );
        results.emit("P6", mixed.clone());
        let (p7, clients) = rt.block_on(subscriptions_load(running.local_addr(), &store, &world.dir, &manifests));
        println!(
            "P7 {}: {} subscriptions on {} connections ({} clients), {} events in {:.1} s: commit → event p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; process CPU {:.0} % (server {:.0} %), RSS {:.0} → {:.0} MB",
            size.name,
            p7["subscriptions"],
            p7["connections"],
            p7["client"].as_str().unwrap(),
            p7["events"],
            p7["seconds"].as_f64().unwrap(),
            p7["p50Ms"].as_f64().unwrap(),
            p7["p99Ms"].as_f64().unwrap(),
            p7["maxMs"].as_f64().unwrap(),
            p7["processCpuPercent"].as_f64().unwrap(),
            p7["serverCpuPercent"].as_f64().unwrap_or(f64::NAN),
            p7["processRssMbBefore"].as_f64().unwrap(),
            p7["processRssMbAfter"].as_f64().unwrap(),
        );
        results.emit("P7", p7);
        // P6 again, the subscriptions still open (and receiving the churn's events).
        let with = rt.block_on(mixed_load(&client, &url, running.local_addr(), &teams, &world.dir, &manifests));
        println!(
            "P6 {} with P7's subscriptions open: {:.0} req/s ({:.0} without), {} errors, p50 {:.0} µs, p99 {:.0} µs",
            size.name,
            with["requestsPerSecond"].as_f64().unwrap(),
            mixed["requestsPerSecond"].as_f64().unwrap(),
            with["errors"],
            with["p50Us"].as_f64().unwrap(),
            with["p99Us"].as_f64().unwrap(),
        );
        results.emit("P6withSubscriptions", with);
        drop(clients);
        results.write();
        rt.block_on(running.shutdown()).unwrap();
        let _ = std::fs::remove_dir_all(&work);
    }
    c.final_summary();
}

/// Waits until the writer has built every ordering index asked for after the initial sync
/// (nothing when `storage.prebuildOrders` is false); the time from ready, and the steps'
/// durations from `controlplane_order_build_step_seconds` (count, mean, and the smallest bucket
/// bound that holds every step: the longest any change waited for a build).
async fn orders_built_after_ready(app: &control_plane::app::App) -> Value {
    let t0 = Instant::now();
    while app.store().orders_pending() {
        assert!(t0.elapsed() < Duration::from_secs(600), "ordering indexes still building after 10 min");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let seconds = t0.elapsed().as_secs_f64();
    let steps = &app.metrics().order_build_step_seconds;
    let (count, sum) = (steps.get_sample_count(), steps.get_sample_sum());
    let families = app.metrics().registry().gather();
    let buckets: Vec<(f64, u64)> = families
        .iter()
        .filter(|f| f.name() == "controlplane_order_build_step_seconds")
        .flat_map(|f| {
            f.get_metric().iter().flat_map(|m| m.get_histogram().get_bucket().iter().map(|b| (b.upper_bound(), b.cumulative_count())))
        })
        .collect();
    let every_step_within = buckets.iter().find(|(_, n)| *n == count).map(|(le, _)| *le);
    let store = app.store().read().unwrap();
    let built = store.built_orders().unwrap().iter().count();
    json!({
        "prebuild": count > 0 || built > 0,
        "builtAfterReadyS": seconds,
        "ordersBuilt": built,
        "steps": count,
        "stepMeanMs": if count > 0 { sum / count as f64 * 1e3 } else { 0.0 },
        "everyStepWithinMs": every_step_within.map(|s| s * 1e3),
        "stepsWithinMs": buckets.iter().map(|(le, n)| json!([le * 1e3, n])).collect::<Vec<_>>(),
    })
}

/// Times the first request of `query`: when its order's index is not built yet (sorted in
/// memory), then waits until the writer has built the index of `kind` by `order`: (first
/// request µs, milliseconds from its answer until the index was built; 0 when it was built
/// before the first request).
async fn first_sort(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    query: &str,
    store: &storage::Store,
    kind: schema::KindId,
    order: storage::OrderField,
) -> (f64, f64) {
    let t0 = Instant::now();
    support::gql(client, url, token, query, &json!({})).await.expect("first sorted query");
    let first = t0.elapsed().as_secs_f64() * 1e6;
    let t1 = Instant::now();
    while !store.read().unwrap().built_orders().unwrap().contains(kind, order) {
        assert!(t1.elapsed() < Duration::from_secs(120), "{kind:?} by {order:?}: no index built");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    (first, t1.elapsed().as_secs_f64() * 1e3)
}

/// Builds the probes: finds an application ID (Q4) and the cursor of the 10 000th subscription
/// (Q2), times the first sorted requests (Q5, Q6).
async fn setup(client: &reqwest::Client, url: &str, team: &str, store: &storage::Store) -> Vec<Probe> {
    let team_token = support::team_token(team);
    let admin = support::admin_token();
    let q1 = support::gql(client, url, &team_token, Q1, &json!({})).await.expect("Q1");
    let apps = &q1["applications"];
    let app_id = apps["edges"][0]["node"]["id"].as_str().expect("the team has an application").to_string();
    let q3 = support::gql(client, url, &team_token, Q3, &json!({})).await.expect("Q3");
    // Walk to the 10 000th subscription (pages of at most graphql.maxPageSize = 1000).
    let total = support::gql(client, url, &admin, "{ apiSubscriptions(first: 1) { totalCount } }", &json!({})).await.unwrap()
        ["apiSubscriptions"]["totalCount"]
        .as_u64()
        .unwrap();
    let offset = 10_000u64.min(total.saturating_sub(50));
    let (mut seen, mut after) = (0u64, Value::Null);
    while seen < offset {
        let n = (offset - seen).min(1000);
        let q = format!("query($after: Cursor) {{ apiSubscriptions(first: {n}, after: $after) {{ pageInfo {{ endCursor }} }} }}");
        let page = support::gql(client, url, &admin, &q, &json!({"after": after})).await.unwrap();
        after = page["apiSubscriptions"]["pageInfo"]["endCursor"].clone();
        seen += n;
    }
    let q2 = support::gql(client, url, &admin, Q2, &json!({"after": after})).await.expect("Q2");
    let q2_edges = q2["apiSubscriptions"]["edges"].as_array().map_or(0, Vec::len);
    use schema::KindId;
    use storage::OrderField;
    let (q5_first, q5_built) = first_sort(client, url, &admin, Q5, store, KindId::Approval, OrderField::CreatedAt).await;
    let (q6_first, q6_built) = first_sort(client, url, &team_token, Q6, store, KindId::Application, OrderField::Name).await;
    let q5 = support::gql(client, url, &admin, Q5, &json!({})).await.expect("Q5");
    let q6 = support::gql(client, url, &team_token, Q6, &json!({})).await.expect("Q6");
    vec![
        Probe {
            name: "Q1 team applications(first:50) nested",
            query: Q1,
            vars: json!({}),
            token: team_token.clone(),
            detail: json!({"team": team, "totalCount": apps["totalCount"], "edges": apps["edges"].as_array().map_or(0, Vec::len)}),
        },
        Probe {
            name: "Q2 admin apiSubscriptions(first:50, after:10000th)",
            query: Q2,
            vars: json!({"after": after}),
            token: admin.clone(),
            detail: json!({"after": offset, "totalCount": total, "edges": q2_edges}),
        },
        Probe {
            name: "Q3 team approvals(first:50) both sides",
            query: Q3,
            vars: json!({}),
            token: team_token.clone(),
            detail: json!({"team": team, "totalCount": q3["approvals"]["totalCount"]}),
        },
        Probe {
            name: "Q4 node(id) application",
            query: Q4,
            vars: json!({"id": app_id}),
            token: team_token.clone(),
            detail: json!({"id": app_id}),
        },
        Probe {
            name: "Q5 admin approvals(first:50, orderBy CREATED_AT DESC)",
            query: Q5,
            vars: json!({}),
            token: admin,
            detail: json!({"totalCount": q5["approvals"]["totalCount"], "firstUs": q5_first, "indexBuiltAfterMs": q5_built}),
        },
        Probe {
            name: "Q6 team applications(first:50, orderBy NAME)",
            query: Q6,
            vars: json!({}),
            token: team_token,
            detail: json!({"team": team, "totalCount": q6["applications"]["totalCount"], "firstUs": q6_first, "indexBuiltAfterMs": q6_built}),
        },
    ]
}

/// `warmup` unmeasured requests, then `n` measured ones, one at a time; panics on any error.
async fn sequential(client: &reqwest::Client, url: &str, p: &Probe, warmup: usize, n: usize) -> Vec<Duration> {
    let body = support::gql_body(p.query, &p.vars);
    for _ in 0..warmup {
        support::gql_ok(client, url, &p.token, &body).await.unwrap_or_else(|e| panic!("{}: {e}", p.name));
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        support::gql_ok(client, url, &p.token, &body).await.unwrap_or_else(|e| panic!("{}: {e}", p.name));
        out.push(t0.elapsed());
    }
    out
}

/// The store revision from `/metrics`.
async fn revision(client: &reqwest::Client, addr: std::net::SocketAddr) -> u64 {
    let text = client.get(format!("http://{addr}/metrics")).send().await.unwrap().text().await.unwrap();
    text.lines().find_map(|l| l.strip_prefix("controlplane_store_revision ")).and_then(|v| v.trim().parse::<f64>().ok()).unwrap_or(0.0)
        as u64
}

/// P6: see the module docs.
async fn mixed_load(
    client: &reqwest::Client,
    url: &str,
    addr: std::net::SocketAddr,
    teams: &[(String, u64, u64, u64)],
    world: &Path,
    manifests: &Path,
) -> Value {
    // Per client: a team, its token and one application ID.
    let mut per_client = Vec::new();
    for (team, ..) in teams.iter().take(CLIENTS) {
        let token = support::team_token(team);
        let d = support::gql(client, url, &token, "{ applications(first: 1) { edges { node { id } } } }", &json!({})).await.unwrap();
        let id = d["applications"]["edges"][0]["node"]["id"].as_str().unwrap().to_string();
        per_client.push((token, id));
    }
    while per_client.len() < CLIENTS {
        per_client.push(per_client[per_client.len() % teams.len().max(1)].clone());
    }
    let (stop, churn) = start_churn(world, manifests);
    let rev0 = revision(client, addr).await;
    let ok = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first_errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let latencies = Arc::new(Mutex::new(Vec::<Duration>::new()));
    let t0 = Instant::now();
    let deadline = t0 + MIXED_FOR;
    let mut tasks = Vec::new();
    for (i, (token, id)) in per_client.into_iter().enumerate() {
        let (client, url) = (client.clone(), url.to_string());
        let (ok, errors, first_errors, latencies) = (ok.clone(), errors.clone(), first_errors.clone(), latencies.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut n = i;
            let bodies = [support::gql_body(Q1, &json!({})), support::gql_body(Q3, &json!({})), support::gql_body(Q4, &json!({"id": id}))];
            while Instant::now() < deadline {
                n += 1;
                let s = Instant::now();
                match support::gql_ok(&client, &url, &token, &bodies[n % 3]).await {
                    Ok(_) => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        let mut f = first_errors.lock().unwrap();
                        if f.len() < 5 {
                            f.push(e);
                        }
                    }
                }
                lat.push(s.elapsed());
            }
            latencies.lock().unwrap().extend(lat);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::SeqCst);
    let churn_writes = churn.join().unwrap();
    // Let the source pick up the last write before reading the revision.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let rev1 = revision(client, addr).await;
    let mut lat = std::mem::take(&mut *latencies.lock().unwrap());
    let (ok, errors) = (ok.load(Ordering::Relaxed), errors.load(Ordering::Relaxed));
    let first_errors = first_errors.lock().unwrap().clone();
    for e in &first_errors {
        eprintln!("P6 error: {e}");
    }
    json!({
        "clients": CLIENTS,
        "seconds": elapsed,
        "requests": ok + errors,
        "errors": errors,
        "requestsPerSecond": (ok + errors) as f64 / elapsed,
        "p50Us": support::percentile_us(&mut lat, 50.0),
        "p99Us": support::percentile_us(&mut lat, 99.0),
        "churnWrites": churn_writes,
        "churnObjectsPerWrite": CHURN_OBJECTS,
        "storeRevisions": rev1.saturating_sub(rev0),
        "firstErrors": first_errors,
    })
}

/// The churn of P6 and P7: CHURN_OBJECTS Applications of the world, their Ready message changed
/// every CHURN_EVERY, written to a later file (the later path wins for duplicates), atomically by
/// rename. Stop it with the flag; the thread returns the number of writes.
fn start_churn(world: &Path, manifests: &Path) -> (Arc<AtomicBool>, std::thread::JoinHandle<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let churn = support::churn(world, manifests, "bench", CHURN_OBJECTS, CHURN_EVERY, stop.clone());
    (stop, churn)
}

/// P7 connections, subscriptions per connection, and how long events are measured.
const P7_CONNECTIONS: usize = 100;
const P7_PER_CONNECTION: usize = 10;
const P7_FOR: Duration = Duration::from_secs(10);
const P7_SUBSCRIPTION: &str =
    "subscription { changes(kinds: [APPLICATION]) { revision operation id node { ... on Application { name statusPhase statusMessage } } } }";

/// One operation for `graphql-ws-client`, answers kept as JSON.
#[derive(serde::Serialize)]
struct WsOp {
    query: String,
}

impl graphql_ws_client::graphql::GraphqlOperation for WsOp {
    type Response = Value;
    type Error = serde_json::Error;

    fn decode(&self, data: Value) -> Result<Value, serde_json::Error> {
        Ok(data)
    }
}

/// CPU seconds (user + system) of this process so far.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat (utime, stime), counted after the command name; 100 ticks/s.
    (ticks(11) + ticks(12)) / 100.0
}

/// Resident memory of this process in MB.
fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()).unwrap_or(0.0) / 1024.0
}

/// The tokens of P7's connections: 5 % admin, 10 % group and 85 % team viewers of `owners`.
fn p7_token(i: usize, owners: &[String]) -> String {
    match i % 20 {
        0 => support::admin_token(),
        1 | 2 => {
            let group = owners[i % owners.len()].split("--").next().unwrap().to_string();
            support::token(&format!("{group}--bench--console"), "tardis:group:read")
        }
        _ => support::team_token(&owners[i % owners.len()]),
    }
}

/// Subscription `j` of connection `i`: the same text for all, or (`CP_BENCH_P7_DISTINCT=1`) one
/// of its own (an alias), so that none shares answers with another.
fn p7_query(i: usize, j: usize, distinct: bool) -> String {
    if distinct {
        P7_SUBSCRIPTION.replace("{ changes", &format!("{{ c{i}x{j}: changes"))
    } else {
        P7_SUBSCRIPTION.to_string()
    }
}

/// The open P7 clients (kept open for P6 with subscriptions).
enum P7Clients {
    /// `graphql-ws-client` on the bench's runtime (`CP_BENCH_P7_CLIENT=graphql-ws-client`).
    Library { _open: Vec<graphql_ws_client::Client> },
    /// The lean reader: graphql-transport-ws over tokio-tungstenite on a thread of its own
    /// ([`LEAN_THREAD`]), taking only the revision out of each `next` message.
    Lean { stop: Arc<AtomicBool>, thread: Option<std::thread::JoinHandle<()>> },
}

impl Drop for P7Clients {
    fn drop(&mut self) {
        if let P7Clients::Lean { stop, thread } = self {
            stop.store(true, Ordering::SeqCst);
            if let Some(t) = thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// The name of the lean clients' thread (its CPU is counted apart from the server's).
const LEAN_THREAD: &str = "p7-clients";

/// CPU seconds of this process's threads named `name`.
fn thread_cpu_seconds(name: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok())
        .filter(|stat| stat.split_once('(').and_then(|(_, r)| r.rsplit_once(')')).is_some_and(|(comm, _)| comm == name))
        .map(|stat| {
            let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
            let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
            (ticks(11) + ticks(12)) / 100.0
        })
        .sum()
}

/// The revision of a `next` message of graphql-transport-ws, read without building the JSON
/// tree (the one number the bench needs).
fn lean_revision(text: &str) -> Option<u64> {
    if !text.starts_with(r#"{"type":"next""#) {
        return None;
    }
    let at = text.find(r#""revision":"#)? + r#""revision":"#.len();
    let digits: &str = &text[at..];
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Opens the lean clients on their own thread; returns once every subscription is sent.
fn lean_clients(addr: std::net::SocketAddr, owners: &[String], distinct: bool, arrivals: Arc<Mutex<Vec<(u64, Instant)>>>) -> P7Clients {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let owners = owners.to_vec();
    let stopped = stop.clone();
    let thread = std::thread::Builder::new()
        .name(LEAN_THREAD.into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                use futures::{SinkExt, StreamExt};
                use tokio_tungstenite::tungstenite::Message;
                let mut readers = Vec::new();
                for i in 0..P7_CONNECTIONS {
                    let mut request = tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!(
                        "ws://{addr}/graphql/query"
                    ))
                    .unwrap();
                    request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
                    request.headers_mut().insert("authorization", format!("Bearer {}", p7_token(i, &owners)).parse().unwrap());
                    let (mut ws, _) = tokio_tungstenite::connect_async(request).await.unwrap();
                    ws.send(Message::text(json!({"type": "connection_init"}).to_string())).await.unwrap();
                    loop {
                        match ws.next().await {
                            Some(Ok(Message::Text(t))) if t.contains("connection_ack") => break,
                            Some(Ok(_)) => continue,
                            other => panic!("P7 connection {i}: no connection_ack: {other:?}"),
                        }
                    }
                    for j in 0..P7_PER_CONNECTION {
                        let subscribe = json!({"id": j.to_string(), "type": "subscribe", "payload": {"query": p7_query(i, j, distinct)}});
                        ws.send(Message::text(subscribe.to_string())).await.unwrap();
                    }
                    let arrivals = arrivals.clone();
                    readers.push(tokio::spawn(async move {
                        while let Some(Ok(m)) = ws.next().await {
                            if let Message::Text(t) = m {
                                match lean_revision(&t) {
                                    Some(r) => arrivals.lock().unwrap().push((r, Instant::now())),
                                    None if t.starts_with(r#"{"type":"next""#) || t.contains("error") => {
                                        eprintln!("P7 message without an event: {t}")
                                    }
                                    None => {}
                                }
                            }
                        }
                    }));
                }
                ready_tx.send(()).unwrap();
                while !stopped.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                for r in readers {
                    r.abort();
                }
            });
        })
        .unwrap();
    ready_rx.recv().unwrap();
    P7Clients::Lean { stop, thread: Some(thread) }
}

/// P7: P7_CONNECTIONS WebSocket connections with P7_PER_CONNECTION `changes` subscriptions each
/// (5 % admin, 10 % group and 85 % team viewers, the teams owning the churned applications),
/// while the P6 churn applies 100 changes/s; every event's latency from its commit (the store's
/// commit feed, in process) to its arrival at the client. Returns the measurement and the
/// clients (kept open for P6 with subscriptions). The clients are the lean reader on a thread of
/// its own, so the server's CPU is the process's minus theirs; `CP_BENCH_P7_CLIENT=graphql-ws-client`
/// uses that library on the bench's runtime instead (its parsing counted with the server's).
async fn subscriptions_load(addr: std::net::SocketAddr, store: &storage::Store, world: &Path, manifests: &Path) -> (Value, P7Clients) {
    let owners: Vec<String> = std::fs::read_to_string(world.join("04-applications.yaml"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('{'))
        .take(CHURN_OBJECTS)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok()?["spec"]["team"].as_str().map(str::to_string))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // Commit instants by revision.
    let commits: Arc<Mutex<std::collections::HashMap<u64, Instant>>> = Arc::default();
    let feed = store.subscribe();
    {
        let commits = commits.clone();
        std::thread::spawn(move || {
            while let Ok(c) = feed.recv() {
                commits.lock().unwrap().insert(c.revision, Instant::now());
            }
        });
    }
    let arrivals: Arc<Mutex<Vec<(u64, Instant)>>> = Arc::default();
    let distinct = std::env::var("CP_BENCH_P7_DISTINCT").is_ok_and(|v| v == "1");
    let library = std::env::var("CP_BENCH_P7_CLIENT").is_ok_and(|v| v == "graphql-ws-client");
    let clients = if library {
        let mut clients = Vec::new();
        for i in 0..P7_CONNECTIONS {
            let mut request =
                tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(format!("ws://{addr}/graphql/query"))
                    .unwrap();
            request.headers_mut().insert("sec-websocket-protocol", "graphql-transport-ws".parse().unwrap());
            request.headers_mut().insert("authorization", format!("Bearer {}", p7_token(i, &owners)).parse().unwrap());
            let (socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
            let (client, actor) = graphql_ws_client::Client::build(socket).await.unwrap();
            tokio::spawn(std::future::IntoFuture::into_future(actor));
            for j in 0..P7_PER_CONNECTION {
                let mut events = client.subscribe(WsOp { query: p7_query(i, j, distinct) }).await.unwrap();
                let arrivals = arrivals.clone();
                tokio::spawn(async move {
                    use futures::StreamExt;
                    while let Some(Ok(answer)) = events.next().await {
                        let event = answer["data"].as_object().and_then(|d| d.values().next());
                        if let Some(r) = event.and_then(|e| e["revision"].as_u64()) {
                            arrivals.lock().unwrap().push((r, Instant::now()));
                        } else {
                            eprintln!("P7 answer without an event: {answer}");
                        }
                    }
                });
            }
            clients.push(client);
        }
        P7Clients::Library { _open: clients }
    } else {
        lean_clients(addr, &owners, distinct, arrivals.clone())
    };
    let (stop, churn) = start_churn(world, manifests);
    let (cpu0, t0, client_cpu0) = (cpu_seconds(), Instant::now(), thread_cpu_seconds(LEAN_THREAD));
    let rss0 = rss_mb();
    tokio::time::sleep(P7_FOR).await;
    stop.store(true, Ordering::SeqCst);
    let churn_writes = churn.join().unwrap();
    // The last commits' events arrive.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (cpu, seconds) = (cpu_seconds() - cpu0, t0.elapsed().as_secs_f64());
    let client_cpu = thread_cpu_seconds(LEAN_THREAD) - client_cpu0;
    let arrivals = std::mem::take(&mut *arrivals.lock().unwrap());
    let commits = commits.lock().unwrap().clone();
    let mut latencies: Vec<Duration> =
        arrivals.iter().filter_map(|(r, at)| commits.get(r).map(|c| at.saturating_duration_since(*c))).collect();
    let measured = latencies.len();
    let revisions = arrivals.iter().map(|(r, _)| *r).collect::<std::collections::BTreeSet<_>>().len();
    let result = json!({
        "distinctSubscriptions": distinct,
        "connections": P7_CONNECTIONS,
        "subscriptions": P7_CONNECTIONS * P7_PER_CONNECTION,
        "seconds": seconds,
        "churnWrites": churn_writes,
        "events": arrivals.len(),
        "eventsMeasured": measured,
        "revisionsWithEvents": revisions,
        "p50Ms": support::percentile_us(&mut latencies, 50.0) / 1000.0,
        "p99Ms": support::percentile_us(&mut latencies, 99.0) / 1000.0,
        "maxMs": latencies.iter().max().map_or(0.0, |d| d.as_secs_f64() * 1000.0),
        "client": if library { "graphql-ws-client" } else { "lean" },
        "processCpuPercent": cpu / seconds * 100.0,
        "serverCpuPercent": if library { Value::Null } else { json!((cpu - client_cpu) / seconds * 100.0) },
        "clientCpuPercent": if library { Value::Null } else { json!(client_cpu / seconds * 100.0) },
        "processRssMbBefore": rss0,
        "processRssMbAfter": rss_mb(),
    });
    (result, clients)
}
