//! P5 snapshot export / restore on a generated world (`target/genworld/<size>/`,
//! see `benches/support/mod.rs`): the world is projected once into a data directory, then
//!
//! - **export**: `control_plane::snapshot::export_offline` — one read transaction streamed into
//!   a file (zstd, SHA-256), as `control-plane snapshot export --data-dir` does;
//! - **verify**: `control_plane::snapshot::verify` — structure, checksum, every envelope decoded;
//! - **restore**: `control_plane::snapshot::restore` into a fresh directory — verify, derive every
//!   index entry and counter, write every table in key order, build the search index, move into
//!   place — as `control-plane snapshot restore` does.
//!
//! Reported in seconds (median of the criterion samples) plus the file size. Run:
//! `cargo bench --bench snapshot` (10k and 100k; `CP_BENCH_1M=1` adds 1M, `CP_BENCH_SIZES=100k`
//! picks sizes). Results: `BENCH_RESULT {json}` lines and
//! `target/bench-results/ours-snapshot-<size>.json`. Not part of `cargo test`.

mod support;

use criterion::{BenchmarkId, SamplingMode};
use serde_json::json;
use std::time::Duration;

fn median(v: &mut [Duration]) -> f64 {
    v.sort_unstable();
    v[v.len() / 2].as_secs_f64()
}

fn main() {
    let mut c = support::criterion(10);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _guard = rt.enter();
    for size in support::sizes() {
        let world = support::world(size);
        let work = support::work_dir(&format!("snapshot-{}", size.name));
        let data = work.join("data");
        let (app, _) = support::load(&world.dir, &data);
        let records = support::record_count(app.store());
        app.shutdown();
        let file = work.join("world.snap");

        let mut g = c.benchmark_group("P5 snapshot");
        g.sampling_mode(SamplingMode::Flat);
        let mut exports = Vec::new();
        g.bench_function(BenchmarkId::new("export (offline, streamed)", size.name), |b| {
            b.iter_custom(|iters| {
                support::timed(iters, &mut exports, || {
                    control_plane::snapshot::export_offline(&data, &file).unwrap();
                })
            })
        });
        let mut verifies = Vec::new();
        g.bench_function(BenchmarkId::new("verify", size.name), |b| {
            b.iter_custom(|iters| {
                support::timed(iters, &mut verifies, || {
                    control_plane::snapshot::verify(&file).unwrap();
                })
            })
        });
        let mut restores = Vec::new();
        let mut round = 0;
        g.bench_function(BenchmarkId::new("restore (indexes, search index)", size.name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    round += 1;
                    let target = work.join(format!("restored-{round}"));
                    total += support::timed(1, &mut restores, || {
                        control_plane::snapshot::restore(&file, &target, false).unwrap();
                    });
                    std::fs::remove_dir_all(&target).unwrap();
                }
                total
            })
        });
        g.finish();

        let summary = control_plane::snapshot::verify(&file).unwrap();
        let mut results = support::Results::new("snapshot", size.name);
        results.emit(
            "P5",
            json!({
                "objects": world.objects,
                "records": records,
                "revision": summary.header.revision,
                "fileBytes": summary.bytes,
                "storeBytes": control_plane::metrics::dir_bytes(&data),
                "exportSeconds": median(&mut exports),
                "verifySeconds": median(&mut verifies),
                "restoreSeconds": median(&mut restores),
                "samples": restores.len(),
            }),
        );
        results.write();
        let _ = std::fs::remove_dir_all(&work);
    }
    c.final_summary();
}
