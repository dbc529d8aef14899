//! P1 projection throughput: a generated world (`target/genworld/<size>/`, see
//! `benches/support/mod.rs`) loaded into an empty store through the real projector path —
//! `control_plane::App::start` with the manifests source and the one writer (durable redb
//! commits, search index fed as in production) — timed from start until ready (every document
//! of the initial scan processed once). Reported in objects/s (documents of the world ÷ median
//! seconds), plus the records stored at ready and how long after ready the change log's index
//! is whole (a load leaves it for then: `storage::Store::set_loading`).
//!
//! Run: `cargo bench --bench projection` (10k and 100k; `CP_BENCH_1M=1` adds 1M,
//! `CP_BENCH_SIZES=10k` picks sizes). Every load is one criterion iteration (flat sampling, 10
//! samples). Results: `BENCH_RESULT {json}` lines and `target/bench-results/ours-projection-<size>.json`.
//! Not part of `cargo test`.

mod support;

use criterion::{BenchmarkId, SamplingMode, Throughput};
use serde_json::json;
use std::time::Duration;

fn main() {
    let mut c = support::criterion(10);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _guard = rt.enter();
    for size in support::sizes() {
        let world = support::world(size);
        let work = support::work_dir(&format!("projection-{}", size.name));
        let mut runs: Vec<Duration> = Vec::new();
        // After ready: until the change log's index is whole (a load leaves it for then).
        let mut indexing: Vec<Duration> = Vec::new();
        let mut records = Vec::new();
        let mut round = 0;
        let mut g = c.benchmark_group("P1 projection");
        g.sampling_mode(SamplingMode::Flat).throughput(Throughput::Elements(world.objects));
        g.bench_function(BenchmarkId::new("load world into empty store", size.name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    round += 1;
                    let data = work.join(format!("run-{round}"));
                    let (app, elapsed) = support::load(&world.dir, &data);
                    total += elapsed;
                    runs.push(elapsed);
                    let ready = std::time::Instant::now();
                    while app.store().read().unwrap().unindexed_after().unwrap().is_some() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    indexing.push(ready.elapsed());
                    records.push(support::record_count(app.store()));
                    app.shutdown();
                    std::fs::remove_dir_all(&data).unwrap();
                }
                total
            })
        });
        g.finish();
        let mut sorted = runs.clone();
        sorted.sort_unstable();
        let median = sorted[sorted.len() / 2].as_secs_f64();
        let best = sorted[0].as_secs_f64();
        indexing.sort_unstable();
        let indexed_after = indexing[indexing.len() / 2].as_secs_f64();
        let mut results = support::Results::new("projection", size.name);
        results.emit(
            "P1",
            json!({
                "objects": world.objects,
                "manifestBytes": world.bytes,
                "loads": runs.len(),
                "medianSeconds": median,
                "bestSeconds": best,
                "objectsPerSecond": world.objects as f64 / median,
                "bestObjectsPerSecond": world.objects as f64 / best,
                "recordsAtReady": records.iter().min().copied().unwrap_or(0),
                "historyIndexedSecondsAfterReady": indexed_after,
            }),
        );
        println!(
            "P1 {}: {} objects, median {:.3} s = {:.0} objects/s (best {:.0}/s), {} loads, records at ready {:?}, history indexed {:.3} s after ready",
            size.name,
            world.objects,
            median,
            world.objects as f64 / median,
            world.objects as f64 / best,
            runs.len(),
            records.iter().min(),
            indexed_after
        );
        results.write();
        let _ = std::fs::remove_dir_all(&work);
    }
    c.final_summary();
}
