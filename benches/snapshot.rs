//! Snapshot export, verify and restore of a generated world of 100k objects (issue 8): 200
//! teams and 100k Apis (every Api indexed in its team's scopes and by base path).
//!
//! Run with `cargo bench --bench snapshot` (minutes: it writes 100k records first). Not part of
//! `cargo test`.
//!
//! Rough numbers measured once (release, 100k objects, this 2-core machine): the file is 2.5 MB;
//! export 0.10 s, verify + decode 0.18 s, restore into a new store including rebuilding every
//! index and the invariant check 1.45 s (search index build not included).

use criterion::{criterion_group, criterion_main, Criterion};
use schema::common::{Meta, Status, StatusPhase};
use schema::kinds::api::{Api, ApiRecord};
use schema::kinds::team::{Team, TeamCategory, TeamRecord};
use schema::{KindId, Timestamp};
use std::time::{Duration, Instant};
use storage::snapshot;
use storage::{SourceRef, Store};

const OBJECTS: usize = 100_000;
const TEAMS: usize = 200;

fn meta(env: &str, namespace: &str, name: &str) -> Meta {
    Meta { environment: env.into(), namespace: namespace.into(), name: name.into(), creation_timestamp: Some(Timestamp(0)) }
}

fn ready() -> Status {
    Status { phase: StatusPhase::Ready, message: "ready".into() }
}

fn generate(store: &Store) {
    let now = Timestamp(0);
    let env = "poc";
    let mut b = store.write().unwrap();
    let teams: Vec<String> = (0..TEAMS).map(|i| format!("group{}--team{i}", i % 20)).collect();
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
        b.upsert::<Team>(&SourceRef { kind: KindId::Team, namespace: env.into(), name: t.clone() }, "1", rec, now).unwrap();
    }
    b.commit(now).unwrap();
    let mut b = store.write().unwrap();
    for i in 0..OBJECTS - TEAMS {
        let team = &teams[i % TEAMS];
        let ns = format!("{env}--{team}");
        let name = format!("api-{i}-v1");
        let rec = ApiRecord {
            meta: meta(env, &ns, &name),
            team: team.clone(),
            base_path: format!("/domain{}/api{i}/v1", i % 97),
            version: format!("{}.{}.0", 1 + i % 3, i % 7),
            category: Some("other".into()),
            oauth2_scopes: vec![format!("s{i}:read")],
            x_vendor: false,
            specification: None,
            active: true,
            status: ready(),
        };
        b.upsert::<Api>(&SourceRef { kind: KindId::Api, namespace: ns, name }, "1", rec, now).unwrap();
        if i % 5000 == 4999 {
            b.commit(now).unwrap();
            b = store.write().unwrap();
        }
    }
    b.commit(now).unwrap();
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("data")).unwrap();
    let t0 = Instant::now();
    generate(&store);
    println!("generated {OBJECTS} objects in redb in {:.1} s", t0.elapsed().as_secs_f64());
    let mut bytes = Vec::new();
    let t0 = Instant::now();
    let summary = snapshot::export(&store.read().unwrap(), Timestamp(0), &mut bytes).unwrap();
    println!("export: {} bytes, revision {}, in {:.2} s", summary.bytes, summary.header.revision, t0.elapsed().as_secs_f64());

    c.bench_function("snapshot export (100k objects, in memory)", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(bytes.len());
            snapshot::export(&store.read().unwrap(), Timestamp(0), &mut out).unwrap();
            out
        })
    });
    c.bench_function("snapshot verify (100k objects)", |b| b.iter(|| snapshot::verify(&bytes).unwrap()));
    let mut round = 0;
    c.bench_function("snapshot restore (100k objects, into a new store, invariants checked)", |b| {
        b.iter(|| {
            round += 1;
            let target = dir.path().join(format!("restore-{round}"));
            let restored = Store::open(&target).unwrap();
            restored.restore(&snapshot::decode_file(&bytes).unwrap()).unwrap();
            drop(restored);
            std::fs::remove_dir_all(&target).unwrap();
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(10)).warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
