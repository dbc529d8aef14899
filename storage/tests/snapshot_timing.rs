//! Rough timings of snapshot export, verify and restore on 100k generated objects (the criterion
//! bench is `benches/snapshot.rs`). Ignored by default; run with
//! `cargo test -p storage --release --test snapshot_timing -- --ignored --nocapture`.

use schema::common::{Meta, Status, StatusPhase};
use schema::kinds::api::{Api, ApiRecord};
use schema::kinds::team::{Team, TeamCategory, TeamRecord};
use schema::{KindId, Timestamp};
use std::time::Instant;
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

#[test]
#[ignore = "slow: writes 100k records"]
fn snapshot_timings_on_100k_objects() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("data")).unwrap();
    let t0 = Instant::now();
    generate(&store);
    println!("generated {OBJECTS} objects in {:.2} s", t0.elapsed().as_secs_f64());
    for round in 0..3 {
        let mut bytes = Vec::new();
        let t0 = Instant::now();
        let s = snapshot::export(&store.read().unwrap(), Timestamp(0), &mut bytes).unwrap();
        let export = t0.elapsed();
        let t0 = Instant::now();
        let decoded = snapshot::decode_file(&bytes).unwrap();
        let verify = t0.elapsed();
        let target = dir.path().join(format!("restore-{round}"));
        let t0 = Instant::now();
        let restored = Store::open(&target).unwrap();
        restored.restore(&decoded).unwrap();
        let restore = t0.elapsed();
        println!(
            "round {round}: {} bytes, export {:.2} s, verify+decode {:.2} s, restore (incl. invariant check) {:.2} s",
            s.bytes,
            export.as_secs_f64(),
            verify.as_secs_f64(),
            restore.as_secs_f64()
        );
    }
}
