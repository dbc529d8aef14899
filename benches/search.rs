//! Catalogue search on a generated world of 100k catalogue entries: index build time
//! (a rebuild from redb, as on a start with a missing index), and search latency — p50/p99 over
//! a mix of queries (exact words, typos, prefixes, several words, an exact base path) at the
//! index level and through GraphQL `catalogueSearch(first: 20)`, plus criterion's own estimate
//! per query shape.
//!
//! Run with `cargo bench --bench search` (minutes: it writes 100k records first). Not part of
//! `cargo test`.

use criterion::{criterion_group, criterion_main, Criterion};
use schema::common::{Meta, Status, StatusPhase};
use schema::kinds::agent_card::AgentCard;
use schema::kinds::agentic_catalogue::AgenticCatalogueRecord;
use schema::kinds::api::{Api, ApiRecord};
use schema::kinds::event_type::{EventType, EventTypeRecord};
use schema::kinds::mcp_server::McpServer;
use schema::kinds::team::{Team, TeamCategory, TeamRecord};
use schema::{KindId, Timestamp};
use std::time::{Duration, Instant};
use storage::search::{Catalogue, SearchRequest};
use storage::{SourceRef, Store};

const ENTRIES: usize = 100_000;
const TEAMS: usize = 200;

const WORDS: &[&str] = &[
    "payments",
    "checkout",
    "ledger",
    "settlement",
    "invoice",
    "billing",
    "refund",
    "orders",
    "cart",
    "catalog",
    "pricing",
    "inventory",
    "warehouse",
    "shipping",
    "parcels",
    "tracking",
    "fleet",
    "positions",
    "dispatch",
    "routing",
    "customers",
    "accounts",
    "identity",
    "consent",
    "profile",
    "loyalty",
    "rewards",
    "coupons",
    "notifications",
    "messaging",
    "email",
    "sms",
    "voice",
    "network",
    "devices",
    "sim",
    "roaming",
    "tariffs",
    "contracts",
    "usage",
    "metering",
    "analytics",
    "reports",
    "knowledge",
    "search",
    "assistant",
    "copilot",
    "agents",
    "planner",
    "scheduler",
    "calendar",
    "documents",
    "archive",
    "audit",
    "compliance",
    "risk",
    "fraud",
    "scoring",
    "telemetry",
    "monitoring",
    "alerts",
    "incidents",
    "tickets",
    "support",
    "feedback",
    "survey",
    "marketing",
    "campaigns",
    "partners",
    "vendors",
    "procurement",
    "payroll",
    "employees",
    "locations",
    "stores",
    "appointments",
    "installations",
    "broadband",
    "fiber",
    "mobile",
    "streaming",
    "television",
    "music",
    "gaming",
    "cloud",
    "storage",
    "backup",
    "security",
    "certificates",
    "keys",
    "tokens",
    "sessions",
    "gateway",
    "mesh",
    "events",
    "stream",
];

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn word(&mut self) -> &'static str {
        WORDS[(self.next() % WORDS.len() as u64) as usize]
    }
}

fn meta(env: &str, namespace: &str, name: &str) -> Meta {
    Meta { environment: env.into(), namespace: namespace.into(), name: name.into(), creation_timestamp: Some(Timestamp(0)) }
}

fn ready() -> Status {
    Status { phase: StatusPhase::Ready, message: "ready".into() }
}

/// Writes 200 teams and 100k catalogue entries (40% Apis, 30% EventTypes, 15% McpServers,
/// 15% AgentCards; every tenth base path registered twice, once inactive) into `store`.
/// Returns an Api base path and an event type that exist (for the exact-match queries).
fn generate(store: &Store) -> (String, String) {
    let mut samples = (String::new(), String::new());
    let now = Timestamp(0);
    let env = "poc";
    let teams: Vec<String> = (0..TEAMS).map(|i| format!("group{}--team{i}", i % 20)).collect();
    store
        .write(now, |b| {
            for t in &teams {
                let rec = TeamRecord {
                    meta: meta(env, env, t),
                    email: format!("{t}@example.com"),
                    category: TeamCategory::Customer,
                    display_name: t.clone(),
                    description: String::new(),
                    team_token: None,
                    group: t.split("--").next().unwrap().into(),
                    members: Vec::new(),
                    status: ready(),
                };
                b.upsert::<Team>(&SourceRef { kind: KindId::Team, namespace: env.into(), name: t.clone() }, "1", &rec, now).unwrap();
            }
            Ok(())
        })
        .unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for first in (0..ENTRIES).step_by(5000) {
        store
            .write(now, |b| {
                for i in first..(first + 5000).min(ENTRIES) {
                    let team = &teams[i % TEAMS];
                    let ns = format!("{env}--{team}");
                    let (w1, w2, w3) = (rng.word(), rng.word(), rng.word());
                    let version = format!("{}.{}.0", 1 + i % 3, i % 7);
                    let active = i % 10 != 9;
                    let description = format!("{} {w1} {w2} service for {w3} and {} {}", rng.word(), rng.word(), rng.word());
                    let status = ready();
                    let src = |kind: KindId, name: &str| SourceRef { kind, namespace: ns.clone(), name: name.to_string() };
                    // Every tenth entry reuses the previous entry's path (inactive second registration).
                    let n = if active { i } else { i - 1 };
                    match i % 20 {
                        0..=7 => {
                            let base_path = format!("/{w1}/{w2}/e{n}/v1");
                            if i == 40 {
                                samples.0 = base_path.clone();
                            }
                            let name = format!("{w1}-{w2}-e{i}-v1");
                            let rec = ApiRecord {
                                meta: meta(env, &ns, &name),
                                team: team.clone(),
                                base_path,
                                version,
                                category: Some(rng.word().into()),
                                oauth2_scopes: vec![format!("{w1}:read"), format!("{w2}:write")],
                                x_vendor: false,
                                specification: None,
                                active,
                                status,
                            };
                            b.upsert::<Api>(&src(KindId::Api, &name), "1", &rec, now).unwrap();
                        }
                        8..=13 => {
                            let event_type = format!("de.telekom.{w1}.{w2}.e{n}.v1");
                            if i == 108 {
                                samples.1 = event_type.clone();
                            }
                            let name = event_type.replace('.', "-");
                            let rec = EventTypeRecord {
                                meta: meta(env, &ns, &name),
                                team: team.clone(),
                                event_type,
                                version,
                                description: Some(description),
                                specification: None,
                                active,
                                status,
                            };
                            b.upsert::<EventType>(&src(KindId::EventType, &name), "1", &rec, now).unwrap();
                        }
                        k => {
                            let agent = k >= 17;
                            let prefix = if agent { "agents" } else { "mcp" };
                            let name = format!("{prefix}-{w1}-e{i}-v1");
                            let rec = AgenticCatalogueRecord {
                                meta: meta(env, &ns, &name),
                                team: team.clone(),
                                base_path: format!("/{prefix}/{w1}/e{n}/v1"),
                                version,
                                display_name: format!("{} {} {}", capital(w1), capital(w2), if agent { "Agent" } else { "Tools" }),
                                description: Some(description),
                                category: Some(rng.word().into()),
                                oauth2_scopes: vec![format!("{w1}:read")],
                                specification: None,
                                hash: format!("{i:064x}"),
                                active,
                                status,
                            };
                            if agent {
                                b.upsert::<AgentCard>(&src(KindId::AgentCard, &name), "1", &rec, now).unwrap();
                            } else {
                                b.upsert::<McpServer>(&src(KindId::McpServer, &name), "1", &rec, now).unwrap();
                            }
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
    }
    samples
}

fn capital(w: &str) -> String {
    let mut c = w.chars();
    c.next().map(|f| f.to_uppercase().chain(c).collect()).unwrap_or_default()
}

/// The query mix: (shape, query).
const QUERIES: &[(&str, &str)] = &[
    ("one word", "ledger"),
    ("one word", "telemetry"),
    ("typo", "setlement"),
    ("typo", "knowlege"),
    ("prefix", "disp"),
    ("prefix", "payments chec"),
    ("two words", "fraud scoring"),
    ("three words typo", "parcels trakcing service"),
];

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{label}: n={} p50={:.3} ms p99={:.3} ms max={:.3} ms",
        samples.len(),
        percentile(&samples, 0.50).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3,
        samples.last().unwrap().as_secs_f64() * 1e3
    );
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let t0 = Instant::now();
    let (path, event_type) = generate(&store);
    let mut queries: Vec<(&str, &str)> = QUERIES.to_vec();
    queries.push(("exact base path", &path));
    queries.push(("exact event type", &event_type));
    println!("generated {ENTRIES} catalogue entries in redb in {:.1} s", t0.elapsed().as_secs_f64());

    // Index build: a rebuild from redb (missing index), three times.
    let mut builds = Vec::new();
    let mut catalogue = None;
    for round in 0..3 {
        let path = dir.path().join(format!("search-{round}"));
        let t0 = Instant::now();
        let (cat, opened) = Catalogue::open(&path, &store).unwrap();
        builds.push(t0.elapsed());
        println!("index build {round}: {opened:?} in {:.2} s", builds[round].as_secs_f64());
        if let Some(old) = catalogue.replace(cat) {
            Catalogue::shutdown(&old);
        }
    }
    let catalogue = catalogue.unwrap();
    report("index build (rebuild from redb, 100k entries)", builds);

    // p50/p99 at the index level: top 21 hits (a page of 20 plus one), one environment.
    let mut all = Vec::new();
    for (shape, q) in &queries {
        let req = SearchRequest { query: q, kinds: &[], environment: Some("poc"), active_only: false };
        let hits = catalogue.search(&req, 21).unwrap();
        println!("query {q:?} ({shape}): {} matches, top {:?}", hits.total, hits.hits.first().map(|h| h.key.to_string()));
        let mut samples = Vec::new();
        for _ in 0..300 {
            let t0 = Instant::now();
            std::hint::black_box(catalogue.search(&req, 21).unwrap());
            samples.push(t0.elapsed());
        }
        all.extend(samples.iter().copied());
        report(&format!("  index search {q:?}"), samples);
    }
    report("index search, all queries", all);

    // p50/p99 through GraphQL: catalogueSearch(first: 20) with scores and highlights.
    let api = query::build_schema(query::QueryConfig::default()).unwrap();
    let viewer = query::viewer::Viewer::from_claims(
        &serde_json::json!({"clientId": "group1--team1--app", "scope": "tardis:team:read", "env": "poc"}),
        "tardis",
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut all = Vec::new();
    for (_, q) in &queries {
        let doc = format!(
            r#"{{ catalogueSearch(query: {q:?}, first: 20) {{ edges {{ score highlights {{ field snippet }} node {{ __typename ...on Api {{ basePath }} ...on EventType {{ eventType }} ...on McpServer {{ name }} ...on AgentCard {{ name }} }} }} }} }}"#
        );
        let r = rt.block_on(api.execute(&store, viewer.clone(), async_graphql_request(&doc)));
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        for _ in 0..200 {
            let t0 = Instant::now();
            std::hint::black_box(rt.block_on(api.execute(&store, viewer.clone(), async_graphql_request(&doc))));
            all.push(t0.elapsed());
        }
    }
    report("GraphQL catalogueSearch(first: 20), all queries", all);

    let mut g = c.benchmark_group("catalogue_search_100k");
    for (shape, q) in &queries {
        let req = SearchRequest { query: q, kinds: &[], environment: Some("poc"), active_only: false };
        g.bench_function(format!("{shape}: {q}"), |b| b.iter(|| catalogue.search(&req, 21).unwrap()));
    }
    g.finish();
    catalogue.shutdown();
}

fn async_graphql_request(doc: &str) -> async_graphql::Request {
    async_graphql::Request::new(doc)
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
