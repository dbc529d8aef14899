//! The manifests source end to end against a real store: the bundled world, file edits and
//! removals, the duplicate rule, restarts, and the messy samples.
//!
//! Expectations are derived from `examples/world.facts.json` for the kinds registered at the
//! time the test runs (`schema::registry::registered()`), so the tests hold while kinds are
//! being added.

use control_plane::app::App;
use control_plane::config::Clock;
use control_plane::config::Config;
use control_plane::metrics::Metrics;
use control_plane::projector::handlers::Handlers;
use control_plane::projector::writer::Change;
use control_plane::source::manifests::{file_checkpoint_key, split_documents, ManifestsState, SkipReason};
use schema::kinds::group::Group;
use schema::{Key, KindId, Scope};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use storage::Store;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Copies `from` into `to` recursively.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

struct World {
    _tmp: tempfile::TempDir,
    manifests: PathBuf,
    data: PathBuf,
}

fn world() -> World {
    let tmp = tempfile::tempdir().unwrap();
    let manifests = tmp.path().join("manifests");
    copy_dir(&repo().join("examples/world"), &manifests);
    let data = tmp.path().join("data/nested");
    World { _tmp: tmp, manifests, data }
}

fn config(w: &World) -> Config {
    let mut c = Config::for_manifests(&w.manifests, &w.data);
    c.projector.dependency_delay = Duration::from_millis(50);
    c.projector.dependency_delay_jitter = Duration::from_millis(50);
    c
}

fn start(w: &World) -> App {
    let app = App::start(config(w)).unwrap();
    wait_until(app.metrics(), "initial sync", Duration::from_secs(20), || app.readiness().is_settled());
    app
}

/// Waits until `cond` holds, checking it again after each change `metrics` reports (a change its
/// writer counts, a readiness change, a search index commit: `Metrics::subscribe`).
fn wait_until(metrics: &Metrics, what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let waiting = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    assert!(waiting.block_on(metrics.wait_until(timeout, |_| cond())), "timed out waiting for {what}");
}

fn count(store: &Store, kind: KindId) -> u64 {
    store.read().unwrap().count(kind, &Scope::All).unwrap()
}

fn counts(store: &Store) -> BTreeMap<KindId, u64> {
    schema::registry::registered().into_iter().map(|k| (k, count(store, k))).collect()
}

/// Documents per registered kind in the world (facts file), minus documents whose
/// `spec.target.kind` is not registered yet (they stay dependency-missing).
fn expected_world_counts() -> BTreeMap<KindId, u64> {
    let registered = schema::registry::registered();
    let facts: Value = serde_json::from_str(&std::fs::read_to_string(repo().join("examples/world.facts.json")).unwrap()).unwrap();
    let mut out: BTreeMap<KindId, u64> = registered.iter().map(|k| (*k, 0)).collect();
    for env in facts["env"].as_object().unwrap().values() {
        for (kind, n) in env["counts"].as_object().unwrap() {
            if let Some(k) = KindId::from_name(kind).filter(|k| registered.contains(k)) {
                *out.get_mut(&k).unwrap() += n.as_u64().unwrap();
            }
        }
    }
    for doc in world_documents() {
        let Some(k) = doc["kind"].as_str().and_then(KindId::from_name).filter(|k| registered.contains(k)) else { continue };
        if let Some(target) = doc["spec"]["target"]["kind"].as_str() {
            if KindId::from_name(target).is_some_and(|t| !registered.contains(&t)) {
                *out.get_mut(&k).unwrap() -= 1;
            }
        }
    }
    out
}

fn world_documents() -> Vec<Value> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(repo().join("examples/world")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            let docs: Vec<Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(&p).unwrap()).unwrap();
            out.extend(docs.into_iter().filter(|d| !d.is_null()));
        }
    }
    out
}

fn group_display_name(store: &Store, env: &str, name: &str) -> Option<String> {
    store.read().unwrap().get::<Group>(&Key::new(&[env, name])).unwrap().map(|s| s.record.display_name)
}

fn group_doc(name: &str, display: &str) -> String {
    format!(
        "---\napiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata:\n  name: {name}\n  namespace: poc\n  labels:\n    cp.ei.telekom.de/environment: poc\nspec:\n  displayName: {display}\n"
    )
}

#[test]
fn world_loads_with_the_counts_of_the_facts() {
    let w = world();
    let app = start(&w);
    let expected = expected_world_counts();
    let store = app.store().clone();
    // Waited for without failing: the assertion below names the difference.
    let waiting = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    waiting.block_on(app.metrics().wait_until(Duration::from_secs(10), |_| counts(&store) == expected));
    assert_eq!(counts(&store), expected);
    assert!(app.skips().is_empty(), "the world has no bad documents: {:?}", app.skips());
    assert!(w.data.join("readmodel.redb").is_file(), "the missing data directory is created");
    let mut names: Vec<_> = std::fs::read_dir(&w.data).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    // The data directory holds the store and the search index, nothing else (README "What is there").
    assert_eq!(names, vec!["readmodel.redb", "search"]);
    assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    let metrics = app.metrics().encode();
    assert!(metrics.contains("projector_reconcile_total{module=\"group\",outcome=\"success\"} 4"), "{metrics}");
    assert!(metrics.contains("controlplane_store_records{kind=\"Group\"} 4"), "{metrics}");
    assert!(metrics.contains("controlplane_store_revision"), "{metrics}");
    app.shutdown();
}

#[test]
fn edits_and_removals_are_applied_within_two_seconds() {
    let w = world();
    let app = start(&w);
    let store = app.store().clone();
    let groups = count(&store, KindId::Group);
    let limit = Duration::from_secs(3);

    // A new file with a new Group.
    std::fs::write(w.manifests.join("50-extra.yaml"), group_doc("extra", "Extra")).unwrap();
    wait_until(app.metrics(), "new group", limit, || count(&store, KindId::Group) == groups + 1);

    // Edit it.
    std::fs::write(w.manifests.join("50-extra.yaml"), group_doc("extra", "Extra Edited")).unwrap();
    wait_until(app.metrics(), "edited group", limit, || group_display_name(&store, "poc", "extra").as_deref() == Some("Extra Edited"));

    // An edit that breaks the document keeps the previous record and reports the skip.
    std::fs::write(w.manifests.join("50-extra.yaml"), group_doc("extra", "\"\"")).unwrap();
    wait_until(app.metrics(), "skip report", limit, || !app.skips().is_empty());
    let skips = app.skips();
    assert_eq!(skips.len(), 1);
    assert_eq!(&*skips[0].origin.file, "50-extra.yaml");
    assert_eq!(skips[0].object(), "Group poc/extra");
    assert!(skips[0].reason.to_string().contains("spec.displayName"), "{}", skips[0]);
    assert_eq!(group_display_name(&store, "poc", "extra").as_deref(), Some("Extra Edited"));

    // Remove the file: the record goes, the skip report too.
    std::fs::remove_file(w.manifests.join("50-extra.yaml")).unwrap();
    wait_until(app.metrics(), "removed group", limit, || count(&store, KindId::Group) == groups);
    assert!(app.skips().is_empty());

    // Remove one document from a multi-document file.
    let path = w.manifests.join("02-groups.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<String> = split_documents(&text).into_iter().filter(|c| !c.text.contains("name: logistics\n")).map(|c| c.text).collect();
    std::fs::write(&path, kept.join("---\n")).unwrap();
    wait_until(app.metrics(), "removed document", limit, || count(&store, KindId::Group) == groups - 1);
    assert_eq!(group_display_name(&store, "poc", "logistics"), None);

    // Remove a whole file: parents go, children stay (they go with their own delete).
    let teams = count(&store, KindId::Team);
    std::fs::remove_file(&path).unwrap();
    wait_until(app.metrics(), "removed file", limit, || count(&store, KindId::Group) == 0);
    assert_eq!(count(&store, KindId::Team), teams);
    assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    app.shutdown();
}

#[test]
fn duplicates_later_path_wins_and_the_loser_returns_when_the_winner_goes() {
    let w = world();
    std::fs::create_dir_all(w.manifests.join("z")).unwrap();
    std::fs::write(w.manifests.join("a-dup.yaml"), group_doc("dup", "From A")).unwrap();
    std::fs::write(w.manifests.join("z/b-dup.yaml"), group_doc("dup", "From B")).unwrap();
    let app = start(&w);
    let store = app.store().clone();
    assert_eq!(group_display_name(&store, "poc", "dup").as_deref(), Some("From B"));

    std::fs::remove_file(w.manifests.join("z/b-dup.yaml")).unwrap();
    wait_until(app.metrics(), "the earlier file wins", Duration::from_secs(3), || {
        group_display_name(&store, "poc", "dup").as_deref() == Some("From A")
    });
    app.shutdown();
}

#[test]
fn duplicate_report_names_both_files() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("b.yaml"), group_doc("dup", "B")).unwrap();
    std::fs::write(tmp.path().join("a.yaml"), format!("{}{}", group_doc("dup", "A1"), group_doc("dup", "A2"))).unwrap();
    let report = control_plane::check::check(tmp.path(), Default::default(), control_plane::config::Clock(None)).unwrap();
    let dups: Vec<String> = report.duplicates.iter().map(|d| format!("{} < {}", d.loser.file, d.winner.file)).collect();
    let mut dups = dups;
    dups.sort();
    assert_eq!(dups, vec!["a.yaml < a.yaml", "a.yaml < b.yaml"]);
    assert_eq!(report.failures(), 0);
}

#[test]
fn restart_writes_nothing_for_unchanged_documents_and_sweeps_removed_ones() {
    let w = world();
    let app = start(&w);
    let store = app.store().clone();
    let expected = expected_world_counts();
    wait_until(app.metrics(), "world", Duration::from_secs(10), || counts(&store) == expected);
    app.shutdown();
    let revision = store.read().unwrap().revision().unwrap();
    drop(store);

    let app = start(&w);
    let store = app.store().clone();
    wait_until(app.metrics(), "no retry pending", Duration::from_secs(10), || app.metrics().retries_pending.get() == 0);
    assert_eq!(store.read().unwrap().revision().unwrap(), revision, "unchanged documents cause no write");
    assert_eq!(counts(&store), expected);
    app.shutdown();
    drop(store);

    std::fs::remove_file(w.manifests.join("02-groups.yaml")).unwrap();
    let app = start(&w);
    assert_eq!(count(app.store(), KindId::Group), 0, "objects gone while stopped are swept on start");
    app.shutdown();
}

/// A restart on a store that completed a sync of the same directory is ready as soon as it is
/// open (warm); the same store read from another directory, or with
/// `source.serveWhileCatchingUp` off, waits for its initial sync (cold).
#[test]
fn a_restart_on_a_store_synced_from_the_same_directory_is_ready_at_once() {
    let w = world();
    let app = start(&w);
    assert!(!app.readiness().is_warm(), "a new store is cold");
    app.shutdown();
    assert!(storage::Store::open(&w.data)
        .unwrap()
        .sync_state()
        .unwrap()
        .warm_for(&control_plane::source::manifests::source_identity(&w.manifests)));

    let app = App::start(config(&w)).unwrap();
    assert!(app.readiness().is_warm() && app.readiness().is_ready(), "warm: ready once open");
    wait_until(app.metrics(), "caught up", Duration::from_secs(20), || app.readiness().is_settled());
    assert!(app.readiness().catching_up().is_empty());
    app.shutdown();

    let mut off = config(&w);
    off.serve_while_catching_up = false;
    let app = App::start(off).unwrap();
    assert!(!app.readiness().is_warm(), "serveWhileCatchingUp off: ready once the sync is applied");
    wait_until(app.metrics(), "initial sync", Duration::from_secs(20), || app.readiness().is_ready());
    app.shutdown();

    // The same directory under another path is another source: cold, and the store records it.
    let elsewhere = w.manifests.with_file_name("elsewhere");
    copy_dir(&w.manifests, &elsewhere);
    let mut moved = config(&w);
    moved.source = control_plane::config::SourceConfig::Manifests(elsewhere.clone());
    let app = App::start(moved.clone()).unwrap();
    assert!(!app.readiness().is_warm(), "another directory is another source");
    wait_until(app.metrics(), "initial sync", Duration::from_secs(20), || app.readiness().is_settled());
    app.shutdown();
    let app = App::start(config(&w)).unwrap();
    assert!(!app.readiness().is_warm(), "the first directory's sync was forgotten");
    app.shutdown();
}

#[test]
fn disabled_kinds_are_not_projected() {
    // Only kinds with a feature flag can be switched off; use one when it is registered.
    let registered = schema::registry::registered();
    let gated: Vec<KindId> = registered
        .iter()
        .copied()
        .filter(|k| !k.enabled(&schema::kind::Features { pubsub: false, permission: false, ai_gateway: false, file_manager: false }))
        .collect();
    let w = world();
    let mut c = config(&w);
    c.features = schema::kind::Features { pubsub: false, permission: false, ai_gateway: false, file_manager: false };
    let app = App::start(c).unwrap();
    wait_until(app.metrics(), "initial sync", Duration::from_secs(20), || app.readiness().is_settled());
    for k in gated {
        assert_eq!(count(app.store(), k), 0, "{}", k.name());
    }
    assert_eq!(count(app.store(), KindId::Group), 4);
    app.shutdown();
}

#[test]
fn messy_samples_load_next_to_the_world_and_every_rejection_has_a_reason() {
    let w = world();
    let samples = repo().join("tests/fixtures/samples");
    copy_dir(&samples, &w.manifests.join("samples"));
    let app = start(&w);
    let store = app.store().clone();
    let expected = expected_world_counts();
    wait_until(app.metrics(), "world", Duration::from_secs(10), || counts(&store).iter().all(|(k, n)| *n >= expected[k]));

    let skips = app.skips();
    assert!(!skips.is_empty());
    for s in &skips {
        assert!(s.origin.file.starts_with("samples/"), "world documents are not skipped: {s}");
        assert!(s.origin.document >= 1, "{s}");
        assert!(s.kind.is_some(), "{s}");
        assert!(!s.reason.to_string().is_empty());
        assert!(!matches!(s.reason, SkipReason::Unreadable(_)), "{s}");
    }
    // Every sample document of a registered kind without a namespace is rejected with a reason.
    let registered = schema::registry::registered();
    let mut without_ns = 0;
    for (file, doc, value) in sample_documents(&samples) {
        let Some(kind) = value["kind"].as_str().and_then(KindId::from_name).filter(|k| registered.contains(k)) else {
            // Not projected kinds (Environment, v1 Namespace, FileType) are ignored, not skipped.
            assert!(!skips.iter().any(|s| *s.origin.file == *format!("samples/{file}") && s.origin.document == doc), "{file}#{doc}");
            continue;
        };
        if value["metadata"]["namespace"].as_str().unwrap_or("").is_empty() {
            without_ns += 1;
            let s = skips.iter().find(|s| *s.origin.file == *format!("samples/{file}") && s.origin.document == doc);
            let s = s.unwrap_or_else(|| panic!("{} {file}#{doc} has no namespace but was not skipped", kind.name()));
            assert_eq!(s.kind.as_deref(), Some(kind.name()));
        }
    }
    assert!(without_ns > 0);

    // The projector still works after the samples: a new document is applied.
    std::fs::write(w.manifests.join("60-after.yaml"), group_doc("after-samples", "After")).unwrap();
    wait_until(app.metrics(), "document after the samples", Duration::from_secs(3), || {
        group_display_name(&store, "poc", "after-samples").is_some()
    });
    assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    app.shutdown();
}

/// `(relative file, document number, value)` of every parsable sample document.
fn sample_documents(dir: &Path) -> Vec<(String, usize, Value)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(&p).unwrap();
            match p.extension().and_then(|x| x.to_str()) {
                Some("json") => {
                    if let Ok(v) = serde_json::from_str::<Value>(&text) {
                        out.push((rel, 1, v));
                    }
                }
                Some("yaml" | "yml") => {
                    for c in split_documents(&text) {
                        if let Ok(v) = serde_saphyr::from_str::<Value>(&c.text) {
                            out.push((rel.clone(), c.document, v));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
fn missing_parents_are_retried_until_they_arrive() {
    let registered = schema::registry::registered();
    if ![KindId::Zone, KindId::Team, KindId::Application].iter().all(|k| registered.contains(k)) {
        return; // The kinds this test needs are not registered in this build.
    }
    let tmp = tempfile::tempdir().unwrap();
    let manifests = tmp.path().join("m");
    std::fs::create_dir_all(&manifests).unwrap();
    for f in ["01-zones.yaml", "04-applications.yaml"] {
        std::fs::copy(repo().join("examples/world").join(f), manifests.join(f)).unwrap();
    }
    let w = World { _tmp: tmp, data: manifests.parent().unwrap().join("data"), manifests };
    let app = start(&w);
    let store = app.store().clone();
    assert_eq!(count(&store, KindId::Application), 0, "applications wait for their teams");
    assert!(app.readiness().is_ready(), "parked documents count as processed");
    let metrics = app.metrics().encode();
    assert!(metrics.contains("projector_reconcile_total{module=\"application\",outcome=\"dependency_missing\"}"), "{metrics}");
    let expected = expected_world_counts()[&KindId::Application];
    assert_eq!(app.metrics().retries_pending.get(), expected as i64, "every application waits, counted once ready");

    std::fs::copy(repo().join("examples/world/03-teams.yaml"), w.manifests.join("03-teams.yaml")).unwrap();
    wait_until(app.metrics(), "applications after their teams", Duration::from_secs(5), || count(&store, KindId::Application) == expected);
    wait_until(app.metrics(), "no retry pending", Duration::from_secs(5), || app.metrics().retries_pending.get() == 0);
    app.shutdown();
}

/// A manifests state on `dir` with the world's features (as `App` builds it), without a store.
fn plain_state(dir: &Path) -> ManifestsState {
    let features = schema::kind::Features::default();
    ManifestsState::new(dir, Arc::new(Handlers::new(&features)), features, Clock(None))
}

/// [`plain_state`] keeping its checkpoints in `store`.
fn checkpointed_state(dir: &Path, store: &Store) -> ManifestsState {
    plain_state(dir).with_checkpoints(store.clone())
}

fn change_names(changes: &[Change]) -> Vec<String> {
    let mut out: Vec<String> = changes
        .iter()
        .flat_map(|c| match c {
            Change::Apply { src, .. } => vec![format!("apply {src}")],
            Change::Delete { src, .. } => vec![format!("delete {src}")],
            Change::Sweep { .. } => vec!["sweep".to_string()],
            Change::Checkpoint { entries, .. } => {
                entries.iter().map(|(key, value)| format!("checkpoint {key} {}", if value.is_some() { "set" } else { "removed" })).collect()
            }
            Change::Seal { key } => vec![format!("seal {key}")],
        })
        .collect();
    out.sort();
    out
}

fn manifest_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "yaml")).count()
}

/// Loads the world, waits for its counts, stops the server; the store reopened, and the counts.
fn loaded_and_stopped(w: &World) -> (BTreeMap<KindId, u64>, Store) {
    let app = start(w);
    let expected = expected_world_counts();
    wait_until(app.metrics(), "world", Duration::from_secs(10), || counts(app.store()) == expected);
    app.shutdown();
    (expected, Store::open(&w.data).unwrap())
}

#[test]
fn restart_takes_over_unchanged_files_from_the_checkpoints() {
    let w = world();
    let (expected, store) = loaded_and_stopped(&w);
    let files = manifest_files(&w.manifests);
    assert_eq!(store.read().unwrap().checkpoints("manifests/v2/file/").unwrap().len(), files, "one checkpoint per file");

    // Unchanged directory: nothing is read, nothing is sent, the store confirms every object.
    let mut state = checkpointed_state(&w.manifests, &store);
    let warm = state.warm_start().unwrap();
    assert!(warm.checked);
    assert!(warm.sealed, "the writer sealed the checkpoints: nothing is checked against the store");
    assert_eq!((warm.files, warm.stale, warm.unconfirmed.len()), (files, 0, 0));
    assert_eq!(warm.documents, world_documents().iter().filter(|d| d["kind"] != "Namespace").count());
    let r = state.refresh();
    assert_eq!((r.files_read, r.changes.len()), (0, 0));
    assert_eq!(state.document_count(), warm.documents);
    assert_eq!(state.files_held(), 0, "no document is held in memory: they are in the checkpoints");
    assert!(state.take_checkpoints().is_empty(), "nothing to rewrite");

    // While stopped: one file edited, one added, one removed, one only touched.
    let groups = w.manifests.join("02-groups.yaml");
    let text = std::fs::read_to_string(&groups).unwrap();
    let kept: Vec<String> = split_documents(&text).into_iter().filter(|c| !c.text.contains("name: logistics\n")).map(|c| c.text).collect();
    std::fs::write(&groups, kept.join("---\n")).unwrap();
    std::fs::write(w.manifests.join("50-extra.yaml"), group_doc("extra", "Extra")).unwrap();
    let zones = std::fs::read_to_string(w.manifests.join("01-zones.yaml")).unwrap();
    std::fs::remove_file(w.manifests.join("01-zones.yaml")).unwrap();
    std::fs::write(w.manifests.join("01-zones.yaml"), &zones).unwrap();
    let removed = world_documents().iter().filter(|d| d["kind"] == "Team").count();
    let teams_file = std::fs::read_dir(&w.manifests)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::read_to_string(p).unwrap().contains("kind: Team\n"))
        .unwrap();
    std::fs::remove_file(&teams_file).unwrap();

    drop(state);
    let mut state = checkpointed_state(&w.manifests, &store);
    let warm = state.warm_start().unwrap();
    assert_eq!((warm.files, warm.stale, warm.unconfirmed.len()), (files, 0, 0));
    let r = state.refresh();
    assert_eq!(r.files_read, 2, "the edited and the new file; the touched one is hashed, not parsed");
    let names = change_names(&r.changes);
    assert!(names.contains(&"apply Group poc/extra".to_string()), "{names:?}");
    assert!(names.contains(&"delete Group poc/logistics".to_string()), "{names:?}");
    assert_eq!(names.iter().filter(|n| n.starts_with("delete Team ")).count(), removed, "{names:?}");
    assert_eq!(names.len(), 2 + removed, "{names:?}");
    let rel = |p: &Path| p.strip_prefix(&w.manifests).unwrap().display().to_string();
    let all = change_names(&state.take_checkpoints());
    let checkpoints: Vec<&String> = all.iter().filter(|n| n.contains("/file/")).collect();
    let mut want = [
        "checkpoint manifests/v2/file/01-zones.yaml set".to_string(),
        "checkpoint manifests/v2/file/02-groups.yaml set".to_string(),
        "checkpoint manifests/v2/file/50-extra.yaml set".to_string(),
        format!("checkpoint manifests/v2/file/{} removed", rel(&teams_file)),
    ];
    want.sort();
    assert_eq!(checkpoints, want.iter().collect::<Vec<_>>());
    // Each file's documents in one chunk (fewer than 1024), the removed file's chunk removed.
    let chunks: Vec<&String> = all.iter().filter(|n| n.contains("/docs/")).collect();
    assert_eq!(chunks.len(), 4, "{chunks:?}");
    assert!(chunks.contains(&&format!("checkpoint manifests/v2/docs/{}\0{:08x} removed", rel(&teams_file), 0)), "{chunks:?}");
    drop((state, store));

    // The server agrees: it starts from the checkpoints and converges to the same store.
    let app = start(&w);
    let mut want_counts = expected.clone();
    *want_counts.get_mut(&KindId::Team).unwrap() = 0;
    wait_until(app.metrics(), "changes while stopped", Duration::from_secs(10), || {
        let c = counts(app.store());
        c[&KindId::Group] == expected[&KindId::Group] && c[&KindId::Team] == 0
    });
    assert_eq!(group_display_name(app.store(), "poc", "extra").as_deref(), Some("Extra"));
    assert_eq!(group_display_name(app.store(), "poc", "logistics"), None);
    assert_eq!(app.store().read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    app.shutdown();
}

/// A sealed start trusts the kept identity hashes only when they add up: hashes of the wrong
/// length, hashes missing for a file, or a seed made by another hash function make the start
/// check everything, and the checkpoints written after it seal the store again.
#[test]
fn a_sealed_start_checks_everything_when_the_kept_hashes_cannot_be_trusted() {
    let w = world();
    let (_, store) = loaded_and_stopped(&w);
    let files = manifest_files(&w.manifests);
    let ids: Vec<String> = store.read().unwrap().checkpoints("manifests/v2/ids/").unwrap().into_iter().map(|(k, _)| k).collect();
    assert_eq!(ids.len(), files, "one key of hashes per file");
    let seed = store.read().unwrap().checkpoint("manifests/v2/id-seed").unwrap().unwrap();
    let hostile: [(&str, &str, Option<Vec<u8>>); 3] = [
        ("hashes of the wrong length", &ids[0], Some(vec![1, 2, 3])),
        ("a file's hashes missing", &ids[1], None),
        ("a seed of another hash function", "manifests/v2/id-seed", Some(storage::checkpoint::encode(&(7u64, 8u64)))),
    ];
    for (what, key, value) in hostile {
        // Checkpoints only: the store's source entries, and so the seal, stay as they were.
        store
            .write(schema::Timestamp(1), |wb| {
                wb.put_checkpoint(key, value.as_deref())?;
                Ok(())
            })
            .unwrap();
        assert!(store.read().unwrap().checkpoints_sealed("manifests/v2/seal").unwrap(), "{what}");
        let mut state = checkpointed_state(&w.manifests, &store);
        let warm = state.warm_start().unwrap();
        assert!(warm.checked && !warm.sealed, "{what}: checked against the store");
        assert_eq!((warm.files, warm.stale, warm.unconfirmed.len()), (files, 0, 0), "{what}");
        let r = state.refresh();
        assert_eq!((r.files_read, r.changes.len()), (0, 0), "{what}");
        let mut checkpoints = state.take_checkpoints();
        let names = change_names(&checkpoints);
        assert_eq!(names.iter().filter(|n| n.contains("/ids/")).count(), files, "{what}: every file's hashes again: {names:?}");
        assert!(names.contains(&"seal manifests/v2/seal".to_string()), "{what}: {names:?}");
        // The seal, current until now, is removed first: a kill among the hashes rewritten one
        // change per file leaves none that vouches for half of them.
        apply(&store, vec![checkpoints.remove(0)]);
        assert!(!store.read().unwrap().checkpoints_sealed("manifests/v2/seal").unwrap(), "{what}: unsealed first");
        apply(&store, checkpoints);
        let warm = checkpointed_state(&w.manifests, &store).warm_start().unwrap();
        assert!(warm.sealed, "{what}: sealed again");
        assert_eq!((warm.files, warm.documents > 0), (files, true), "{what}");
    }
    assert_ne!(store.read().unwrap().checkpoint("manifests/v2/id-seed").unwrap().unwrap(), seed, "a new seed replaced the foreign one");
}

#[test]
fn restart_sends_again_what_the_store_lacks_and_starts_cold_for_another_directory() {
    let w = world();
    let (_, store) = loaded_and_stopped(&w);
    // A record lost behind the source's back (as if its write never committed).
    let lost = storage::SourceRef { kind: KindId::Group, namespace: "poc".into(), name: "logistics".into() };
    store
        .write(schema::Timestamp(1), |wb| {
            assert_eq!(wb.delete(&lost, schema::Timestamp(1)).unwrap(), storage::Outcome::Deleted);
            Ok(())
        })
        .unwrap();

    let mut state = checkpointed_state(&w.manifests, &store);
    let warm = state.warm_start().unwrap();
    assert!(!warm.sealed, "a source entry changed since the seal");
    assert_eq!((warm.stale, warm.unconfirmed.len()), (1, 0));
    let r = state.refresh();
    assert_eq!(r.files_read, 1, "only the file of the lost record is read again");
    assert_eq!(change_names(&r.changes), vec!["apply Group poc/logistics"]);

    // The same store for a copy of the directory elsewhere: nothing is taken over.
    let other = w._tmp.path().join("other");
    copy_dir(&w.manifests, &other);
    let mut state = checkpointed_state(&other, &store);
    let warm = state.warm_start().unwrap();
    assert!(!warm.checked);
    assert_eq!(warm.files, 0);
    let r = state.refresh();
    assert_eq!(r.files_read, manifest_files(&other));
    let rewritten = state.take_checkpoints();
    let files_rewritten = rewritten
        .iter()
        .filter(|c| matches!(c, Change::Checkpoint { entries, .. } if entries.last().is_some_and(|(key, value)| key.starts_with("manifests/v2/file/") && value.is_some())))
        .count();
    assert_eq!(files_rewritten, manifest_files(&other), "every file");
    let (dir, seal) = (&rewritten[rewritten.len() - 2], &rewritten[rewritten.len() - 1]);
    assert!(
        matches!(dir, Change::Checkpoint { entries, .. } if entries.len() == 1 && entries[0].0 == "manifests/v2/dir"),
        "and then the directory"
    );
    assert!(matches!(seal, Change::Seal { key } if key == "manifests/v2/seal"), "and then the seal");
}

#[test]
fn restart_brings_back_a_duplicate_whose_winner_went_and_retries_a_parked_child() {
    let w = world();
    std::fs::create_dir_all(w.manifests.join("z")).unwrap();
    std::fs::write(w.manifests.join("a-dup.yaml"), group_doc("dup", "From A")).unwrap();
    std::fs::write(w.manifests.join("z/b-dup.yaml"), group_doc("dup", "From B")).unwrap();
    // An application whose team never came: parked (dependency missing) when the server stops.
    let text = std::fs::read_to_string(w.manifests.join("04-applications.yaml")).unwrap();
    let app_doc = split_documents(&text).into_iter().map(|c| c.text).find(|t| t.contains("kind: Application")).unwrap();
    let team = app_doc.lines().find_map(|l| l.strip_prefix("  team: ")).unwrap().to_string();
    let name = app_doc.lines().find_map(|l| l.strip_prefix("  name: ")).unwrap().to_string();
    let parked = app_doc.replace(&team, "nowhere--team").replace(&format!("  name: {name}\n"), "  name: parked-app\n");
    std::fs::write(w.manifests.join("60-parked.yaml"), &parked).unwrap();
    let app = start(&w);
    assert_eq!(group_display_name(app.store(), "poc", "dup").as_deref(), Some("From B"));
    let teams = count(app.store(), KindId::Team);
    app.shutdown();

    std::fs::remove_file(w.manifests.join("z/b-dup.yaml")).unwrap();
    let app = start(&w);
    assert_eq!(group_display_name(app.store(), "poc", "dup").as_deref(), Some("From A"), "the loser's file is read again");
    assert_eq!(count(app.store(), KindId::Team), teams);
    app.shutdown();
    let store = Store::open(&w.data).unwrap();
    let mut state = checkpointed_state(&w.manifests, &store);
    let warm = state.warm_start().unwrap();
    assert!(!warm.sealed, "the writer does not seal while a change waits for its parent");
    assert_eq!(warm.stale, 1, "the parked application is not confirmed by the store");
    let r = state.refresh();
    assert_eq!(r.files_read, 1);
    let names = change_names(&r.changes);
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("apply Application ") && names[0].ends_with("/parked-app"), "{names:?}");
}

#[test]
fn restart_notices_an_edit_that_keeps_the_length_and_restores_the_modification_time() {
    let w = world();
    let app = start(&w);
    let old = group_display_name(app.store(), "poc", "logistics").unwrap();
    app.shutdown();
    // As `cp -p`, `rsync -t` or `touch -r` leave it: same length, same mtime, other content.
    let path = w.manifests.join("02-groups.yaml");
    let before = std::fs::metadata(&path).unwrap();
    let new: String = std::iter::once('X').chain(old.chars().skip(1)).collect();
    assert_eq!((new.len(), new != old), (old.len(), true));
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches(&format!("displayName: {old}\n")).count(), 1);
    std::fs::write(&path, text.replace(&format!("displayName: {old}\n"), &format!("displayName: {new}\n"))).unwrap();
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(before.modified().unwrap()).unwrap();
    let after = std::fs::metadata(&path).unwrap();
    assert_eq!((after.len(), after.modified().unwrap()), (before.len(), before.modified().unwrap()));

    let app = start(&w);
    assert_eq!(group_display_name(app.store(), "poc", "logistics"), Some(new));
    app.shutdown();
}

/// The version and source of every apply, by object: the last one sent wins.
fn final_applies(changes: &[Change]) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for c in changes {
        if let Change::Apply { src, version, origin, .. } = c {
            out.insert(src.to_string(), (version.clone(), origin.to_string()));
        }
    }
    out
}

#[test]
fn a_cold_start_streams_each_file_and_ends_where_a_whole_refresh_does() {
    let w = world();
    // A duplicate across files (the later path wins) and one within a file (the later document).
    std::fs::write(w.manifests.join("00-dup.yaml"), format!("{}{}", group_doc("dup", "A1"), group_doc("dup", "A2"))).unwrap();
    std::fs::write(w.manifests.join("99-dup.yaml"), group_doc("dup", "B")).unwrap();
    let state = || plain_state(&w.manifests);

    let mut whole = state();
    let batch = whole.refresh();
    let mut streamed = state();
    let mut sent = Vec::new();
    let r = streamed.refresh_streaming(&mut |c| sent.push(c));
    assert!(r.changes.is_empty());
    assert_eq!(r.sent, sent.len());
    assert_eq!(r.files_read, batch.files_read);

    // The same final version of every object; the cross-file duplicate was sent once per file,
    // the within-file one once.
    assert_eq!(final_applies(&sent), final_applies(&batch.changes));
    let dup: Vec<&str> = sent
        .iter()
        .filter_map(|c| match c {
            Change::Apply { src, origin, .. } if src.name == "dup" => Some(&**origin),
            _ => None,
        })
        .collect();
    assert_eq!(dup.len(), 2, "{dup:?}");
    assert!(dup[0].starts_with("00-dup.yaml") && dup[0].starts_with("00-dup.yaml#2 "), "{dup:?}");
    assert!(dup[1].starts_with("99-dup.yaml"), "{dup:?}");
    assert_eq!(sent.len(), batch.changes.len() + 1);
    // Files are sent in path order; within a file, parents first.
    let first_team = sent.iter().position(|c| matches!(c, Change::Apply { src, .. } if src.kind == KindId::Team)).unwrap();
    let last_zone = sent.iter().rposition(|c| matches!(c, Change::Apply { src, .. } if src.kind == KindId::Zone)).unwrap();
    assert!(last_zone < first_team);

    // Both states now agree, and nothing more is sent by either.
    assert_eq!(streamed.present(), whole.present());
    assert_eq!(streamed.document_count(), whole.document_count());
    let mut more = Vec::new();
    let again = streamed.refresh_streaming(&mut |c| more.push(c));
    assert_eq!((again.files_read, again.sent, more.len()), (0, 0, 0));
    assert!(whole.refresh().changes.is_empty());

    // A later refresh is not streamed per file: a removed winner brings the loser back from
    // a file read again.
    std::fs::remove_file(w.manifests.join("99-dup.yaml")).unwrap();
    let mut after = Vec::new();
    let r = streamed.refresh_streaming(&mut |c| after.push(c));
    assert_eq!(r.sent, 1);
    match &after[..] {
        [Change::Apply { src, origin, .. }] => assert_eq!((src.name.as_str(), origin.starts_with("00-dup.yaml")), ("dup", true)),
        other => panic!("{:?}", change_names(other)),
    }
}

#[test]
fn an_edit_is_diffed_from_the_files_that_declare_its_objects_alone() {
    let w = world();
    let mut state = plain_state(&w.manifests);
    state.refresh();
    let groups = w.manifests.join("02-groups.yaml");
    let text = std::fs::read_to_string(&groups).unwrap();
    let count = |names: &[String], prefix: &str| names.iter().filter(|n| n.starts_with(prefix)).count();

    // One display name changed (and the file's lines shift): one apply, from that file alone.
    let edited = text.replacen("displayName:", "displayName: Renamed #", 1).replacen("---\n", "---\n# a comment\n", 1);
    std::fs::write(&groups, &edited).unwrap();
    let r = state.refresh();
    assert_eq!(r.files_examined, 1);
    let names = change_names(&r.changes);
    assert_eq!((names.len(), count(&names, "apply Group ")), (1, 1), "{names:?}");
    assert!(state.refresh().changes.is_empty());

    // The same objects written again unchanged: nothing to send.
    std::fs::write(&groups, format!("{edited}\n# trailing comment\n")).unwrap();
    let r = state.refresh();
    assert!(r.files_examined == 1 && r.changes.is_empty(), "{:?}", change_names(&r.changes));

    // A document removed from the file: deleted, still from that file alone.
    let kept: Vec<String> = split_documents(&edited).into_iter().skip(1).map(|c| c.text).collect();
    std::fs::write(&groups, kept.join("---\n")).unwrap();
    let r = state.refresh();
    assert_eq!(r.files_examined, 1);
    let names = change_names(&r.changes);
    assert_eq!((names.len(), count(&names, "delete Group ")), (1, 1), "{names:?}");

    // An object also declared in a later file: an edit of either file also looks at the other
    // one, and the later file keeps winning.
    std::fs::write(w.manifests.join("90-dup.yaml"), group_doc("dup", "Later")).unwrap();
    std::fs::write(w.manifests.join("00-dup.yaml"), group_doc("dup", "Earlier")).unwrap();
    let r = state.refresh();
    assert_eq!(r.files_examined, 2);
    assert_eq!(final_applies(&r.changes).len(), 1);
    assert!(final_applies(&r.changes).values().all(|(_, origin)| origin.starts_with("90-dup.yaml")));
    std::fs::write(w.manifests.join("00-dup.yaml"), group_doc("dup", "Earlier, edited")).unwrap();
    let r = state.refresh();
    assert_eq!(r.files_examined, 2);
    assert!(r.changes.is_empty(), "the loser changed: {:?}", change_names(&r.changes));
    std::fs::write(w.manifests.join("90-dup.yaml"), group_doc("dup", "Later, edited")).unwrap();
    let r = state.refresh();
    assert_eq!(r.files_examined, 2, "a duplicated object");
    assert_eq!(change_names(&r.changes), vec!["apply Group poc/dup".to_string()]);
}

#[test]
fn a_large_file_is_streamed_in_blocks_and_its_later_duplicate_wins() {
    let tmp = tempfile::tempdir().unwrap();
    // More than one block of documents (8192); the last one redefines the first object.
    let mut text: String = (0..8200).map(|i| group_doc(&format!("g{i}"), &format!("Group {i}"))).collect();
    text.push_str(&group_doc("g0", "Redefined"));
    std::fs::write(tmp.path().join("groups.yaml"), &text).unwrap();
    let state = || plain_state(tmp.path());

    let mut whole = state();
    let batch = whole.refresh();
    assert_eq!(batch.changes.len(), 8200);
    let mut streamed = state();
    let mut sent = Vec::new();
    let r = streamed.refresh_streaming(&mut |c| sent.push(c));
    assert_eq!(r.sent, sent.len());
    // g0 once from the first block, again from the second: the later document wins.
    assert_eq!(sent.len(), 8201);
    let g0: Vec<&str> = sent
        .iter()
        .filter_map(|c| match c {
            Change::Apply { src, origin, .. } if src.name == "g0" => Some(&**origin),
            _ => None,
        })
        .collect();
    assert_eq!(g0.len(), 2);
    assert!(g0[0].starts_with("groups.yaml#1 ") && g0[1].starts_with("groups.yaml#8201 "), "{g0:?}");
    assert_eq!(final_applies(&sent), final_applies(&batch.changes));
    assert_eq!(streamed.present(), whole.present());
    let again = streamed.refresh_streaming(&mut |_| panic!("nothing more to send"));
    assert_eq!((again.files_read, again.sent), (0, 0));
}

fn application_doc(name: &str, zone: &str) -> String {
    format!(
        "---\napiVersion: application.cp.ei.telekom.de/v1\nkind: Application\nmetadata: {{name: {name}, namespace: poc--payments--checkout, labels: {{cp.ei.telekom.de/environment: poc}}}}\nspec: {{team: payments--checkout, teamEmail: x@example.com, zone: {{name: {zone}, namespace: poc}}, needsClient: false, needsConsumer: false, secret: x, failover: {{enabled: false}}}}\n"
    )
}

#[test]
fn a_parked_losing_copy_never_overwrites_the_winner_sent_in_the_same_batch() {
    // What a cold start sends for an object defined twice whose first copy comes before its
    // parents: the loser (parked: its parents are missing), the parents, the winner, in one
    // batch. Found by the user test: the parked loser was retried after the winner was written.
    let w = world();
    let dir = w.manifests.join("dup");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["01-zones.yaml", "02-groups.yaml", "03-teams.yaml"] {
        std::fs::copy(w.manifests.join(f), dir.join(format!("1{f}"))).unwrap();
    }
    std::fs::write(dir.join("00-a.yaml"), application_doc("dup-cross", "otc-lab")).unwrap();
    std::fs::write(dir.join("zz-b.yaml"), application_doc("dup-cross", "caas-cetus")).unwrap();
    let mut state = plain_state(&dir);
    let mut changes = Vec::new();
    state.refresh_streaming(&mut |c| changes.push(c));
    let names: Vec<String> = changes.iter().map(|c| change_names(std::slice::from_ref(c)).remove(0)).collect();
    let first = names.iter().position(|n| n.ends_with("/dup-cross")).unwrap();
    assert!(first < names.iter().position(|n| n.starts_with("apply Zone")).unwrap(), "{names:?}");

    let store = Store::open(&w.data).unwrap();
    let projector = control_plane::config::ProjectorConfig {
        dependency_delay: Duration::from_millis(20),
        dependency_delay_jitter: Duration::from_millis(20),
        ..Default::default()
    };
    let settings = control_plane::projector::writer::WriterSettings::new(projector, Clock(None));
    let readiness = control_plane::readiness::Readiness::new(["test"]);
    let metrics = control_plane::metrics::Metrics::new();
    // A writer that finds every change queued when it starts takes them in one batch.
    let writer = control_plane::projector::writer::Writer::spawn(store.clone(), metrics.clone(), readiness, settings).unwrap();
    let tx = writer.sender();
    let sent = changes.iter().filter(|c| matches!(c, Change::Apply { .. } | Change::Delete { .. })).count();
    for c in changes {
        assert!(tx.send(c));
    }
    let key = schema::keys::natural::application("poc", "payments--checkout", "dup-cross");
    let zone = || store.read().unwrap().get::<schema::kinds::application::Application>(&key).unwrap().map(|s| s.record.zone);
    wait_until(&metrics, "the duplicated application", Duration::from_secs(5), || zone().is_some());
    // Every change processed once (a parked one is counted once parked); then either nothing
    // waits for a retry, or a loser waiting for the natural key has been retried twice and
    // would have taken the record if it could.
    let processed = || {
        metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("projector_reconcile_total{"))
            .map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) as usize)
            .sum::<usize>()
    };
    wait_until(&metrics, "every change processed", Duration::from_secs(10), || processed() >= sent);
    let waits = || metrics.reconcile_total.with_label_values(&["application", "dependency_missing"]).get();
    let first = waits();
    wait_until(&metrics, "no retry pending, or two retries", Duration::from_secs(10), || {
        metrics.retries_pending.get() == 0 || waits() >= first + 2
    });
    assert_eq!(zone().as_deref(), Some("caas-cetus"));
    writer.shutdown();
}

/// Applies `changes` to `store` in one batch as the writer would (records, deletes, checkpoints,
/// acknowledged once committed).
fn apply(store: &Store, changes: Vec<Change>) {
    let now = schema::Timestamp(1);
    let mut acknowledged = Vec::new();
    store
        .write(now, |wb| {
            for c in changes {
                match c {
                    Change::Apply { src, version, record, .. } => {
                        record.upsert(wb, &src, &version, now).unwrap();
                    }
                    Change::Delete { src, .. } => {
                        wb.delete(&src, now).unwrap();
                    }
                    Change::Checkpoint { entries, committed } => {
                        for (key, value) in entries {
                            wb.put_checkpoint(&key, value.as_deref()).unwrap();
                        }
                        acknowledged.extend(committed);
                    }
                    Change::Seal { key } => wb.seal_checkpoints(&key).unwrap(),
                    Change::Sweep { .. } => panic!("no sweep expected"),
                }
            }
            Ok(())
        })
        .unwrap();
    for c in acknowledged {
        c.set();
    }
}

/// A refresh's changes and then its checkpoints applied to `store`; returns the change names.
fn refresh_and_apply(state: &mut ManifestsState, store: &Store) -> (Vec<String>, usize) {
    let r = state.refresh();
    let names = change_names(&r.changes);
    apply(store, r.changes);
    apply(store, state.take_checkpoints());
    (names, r.files_read)
}

#[test]
fn checkpointed_files_are_read_back_from_the_store_and_diff_exactly() {
    let w = world();
    let store = Store::open(&w.data).unwrap();
    let mut state = checkpointed_state(&w.manifests, &store);
    let files = manifest_files(&w.manifests);
    refresh_and_apply(&mut state, &store);
    assert_eq!(state.files_held(), files, "held until the store holds their checkpoints");
    let (names, _) = refresh_and_apply(&mut state, &store);
    assert!(names.is_empty(), "{names:?}");
    assert_eq!(state.files_held(), 0, "every checkpoint is written: nothing is held");

    // An edit: its file's previous documents come from the checkpoint.
    let groups = w.manifests.join("02-groups.yaml");
    let text = std::fs::read_to_string(&groups).unwrap();
    std::fs::write(&groups, text.replacen("displayName: Digital Assistants", "displayName: Assistants", 1)).unwrap();
    let (names, _) = refresh_and_apply(&mut state, &store);
    assert_eq!(names, vec!["apply Group poc/assist"]);
    assert_eq!(group_display_name(&store, "poc", "assist").as_deref(), Some("Assistants"));

    // A later file overrides it; when that file goes, the earlier document comes back from its
    // file, which is read again for the record (its documents are not held).
    std::fs::write(w.manifests.join("99-dup.yaml"), group_doc("assist", "Later")).unwrap();
    let r = state.refresh();
    assert_eq!(change_names(&r.changes), vec!["apply Group poc/assist"]);
    assert_eq!((r.new_duplicates.len(), r.files_examined), (1, 2));
    assert!(r.new_duplicates[0].winner.file.starts_with("99-dup.yaml") && r.new_duplicates[0].loser.file.starts_with("02-groups.yaml"));
    apply(&store, r.changes);
    apply(&store, state.take_checkpoints());
    assert_eq!(group_display_name(&store, "poc", "assist").as_deref(), Some("Later"));
    refresh_and_apply(&mut state, &store);
    assert_eq!(state.files_held(), 0);
    std::fs::remove_file(w.manifests.join("99-dup.yaml")).unwrap();
    let (names, read) = refresh_and_apply(&mut state, &store);
    assert_eq!((names, read), (vec!["apply Group poc/assist".to_string()], 1));
    assert_eq!(group_display_name(&store, "poc", "assist").as_deref(), Some("Assistants"));

    // A removed document is deleted; a removed file deletes what only it declared.
    let kept: Vec<String> = split_documents(&std::fs::read_to_string(&groups).unwrap())
        .into_iter()
        .filter(|c| !c.text.contains("name: logistics\n"))
        .map(|c| c.text)
        .collect();
    std::fs::write(&groups, kept.join("---\n")).unwrap();
    let (names, _) = refresh_and_apply(&mut state, &store);
    assert_eq!(names, vec!["delete Group poc/logistics"]);

    // Everything now is what a fresh state reads from the same directory.
    refresh_and_apply(&mut state, &store);
    let mut fresh = plain_state(&w.manifests);
    fresh.refresh();
    assert_eq!(state.present(), fresh.present());
    assert_eq!(state.document_count(), fresh.document_count());
    let stored: std::collections::HashSet<storage::SourceRef> = KindId::ALL
        .iter()
        .flat_map(|&k| {
            let mut v = Vec::new();
            store
                .read()
                .unwrap()
                .for_each_source(k, |ns, name, _| v.push(storage::SourceRef { kind: k, namespace: ns.into(), name: name.into() }))
                .unwrap();
            v
        })
        .collect();
    let skipped: std::collections::HashSet<storage::SourceRef> = fresh.present().into_iter().filter(|s| !stored.contains(s)).collect();
    assert!(skipped.is_empty() || fresh.skips().len() >= skipped.len(), "every object not stored is a skipped one: {skipped:?}");
    assert!(stored.iter().all(|s| fresh.holds(s)), "nothing stored that the directory does not hold");
}

/// Every object's source version in `store`, by object.
fn stored_versions(store: &Store) -> BTreeMap<String, String> {
    let view = store.read().unwrap();
    let mut out = BTreeMap::new();
    for &kind in KindId::ALL {
        view.for_each_source(kind, |namespace, name, version| {
            let src = storage::SourceRef { kind, namespace: namespace.into(), name: name.into() };
            out.insert(src.to_string(), version.to_string());
        })
        .unwrap();
    }
    out
}

/// Every object's version in a store loaded from the directory as it is now.
fn fresh_versions(dir: &Path) -> BTreeMap<String, String> {
    final_applies(&plain_state(dir).refresh().changes).into_iter().map(|(src, (version, _))| (src, version)).collect()
}

/// The writer commits a refresh's changes in batches of any size, and a kill can come between
/// any two of them. Loads the directory as `before` leaves it, then, for a store that holds
/// the first `k` changes of the warm start after `after` (every `k` for a short list; for a long
/// one the first, the middle and the last few, where the checkpoints are), checks that a warm
/// start converges to the directory whether it stays as `after` left it or goes back to
/// `before` (each call writes its files anew). Leaves the directory as `before` does.
fn converges_after_a_kill_anywhere(w: &World, before: &dyn Fn(), after: &dyn Fn()) {
    before();
    let want_before = fresh_versions(&w.manifests);
    after();
    let want_after = fresh_versions(&w.manifests);
    assert_ne!(want_before, want_after);
    let base = w._tmp.path().join("base");
    before();
    {
        let store = Store::open(&base).unwrap();
        let mut state = checkpointed_state(&w.manifests, &store);
        refresh_and_apply(&mut state, &store);
        refresh_and_apply(&mut state, &store);
        let stored = stored_versions(&store);
        let differ: Vec<_> = want_before
            .iter()
            .filter(|(k, v)| stored.get(*k) != Some(v))
            .map(|(k, _)| k)
            .chain(stored.keys().filter(|k| !want_before.contains_key(*k)))
            .take(5)
            .collect();
        assert!(differ.is_empty(), "{} stored, {} wanted, differing: {differ:?}", stored.len(), want_before.len());
    }
    let after_committed_up_to = |k: usize, data: &Path| -> usize {
        after();
        let store = Store::open(data).unwrap();
        let mut state = checkpointed_state(&w.manifests, &store);
        state.warm_start().unwrap();
        let mut changes = state.refresh().changes;
        changes.extend(state.take_checkpoints());
        let total = changes.len();
        apply(&store, changes.into_iter().take(k).collect());
        total
    };
    let converged = |data: &Path, set: &dyn Fn()| {
        set();
        let store = Store::open(data).unwrap();
        let mut state = checkpointed_state(&w.manifests, &store);
        state.warm_start().unwrap();
        refresh_and_apply(&mut state, &store);
        stored_versions(&store)
    };
    let probe = w._tmp.path().join("probe");
    copy_dir(&base, &probe);
    let total = after_committed_up_to(0, &probe);
    std::fs::remove_dir_all(&probe).unwrap();
    let ks: std::collections::BTreeSet<usize> = match total {
        0..=40 => (0..=total).collect(),
        _ => [0, 1, total / 2].into_iter().chain(total - 5..=total).collect(),
    };
    for k in ks {
        let (back, kept) = (w._tmp.path().join(format!("back-{k}")), w._tmp.path().join(format!("kept-{k}")));
        copy_dir(&base, &back);
        after_committed_up_to(k, &back);
        copy_dir(&back, &kept);
        assert_eq!(converged(&back, before), want_before, "back as before, {k} of {total} changes committed");
        assert_eq!(converged(&kept, after), want_after, "kept as after, {k} of {total} changes committed");
        std::fs::remove_dir_all(&back).unwrap();
        std::fs::remove_dir_all(&kept).unwrap();
    }
    std::fs::remove_dir_all(&base).unwrap();
    before();
}

/// [`converges_after_a_kill_anywhere`] for an edit of a file, its removal, and a file of more
/// documents than a checkpoint chunk holds shrinking to fewer. (A file's document chunks once
/// committed without its header kept an edit's records when the file went back: the start
/// confirmed them against those chunks and found the file's hash unchanged.)
#[test]
fn a_warm_start_converges_after_a_kill_between_any_two_changes_of_an_edit() {
    let w = world();
    let apps = w.manifests.join("04-applications.yaml");
    let original = std::fs::read_to_string(&apps).unwrap();
    let edited = original.replace("message: All sub-resources are up to date", "message: edited");
    converges_after_a_kill_anywhere(&w, &|| std::fs::write(&apps, &original).unwrap(), &|| std::fs::write(&apps, &edited).unwrap());
    converges_after_a_kill_anywhere(&w, &|| std::fs::write(&apps, &original).unwrap(), &|| drop(std::fs::remove_file(&apps)));

    let many = w.manifests.join("90-many.yaml");
    let groups = |n: usize, display: &str| (0..n).map(|i| group_doc(&format!("many-{i}"), display)).collect::<String>();
    let (large, small) = (groups(1500, "Large"), groups(700, "Small"));
    converges_after_a_kill_anywhere(&w, &|| std::fs::write(&many, &large).unwrap(), &|| std::fs::write(&many, &small).unwrap());
}

/// A store whose checkpoints were written before a file's chunks and header were committed
/// together may hold the chunks of an edit under the header of the file before it: its
/// checkpoints are not trusted, every file is read and checkpointed again once.
#[test]
fn checkpoints_written_before_the_files_were_committed_whole_are_read_again_once() {
    let w = world();
    let store = Store::open(&w.data).unwrap();
    let files = manifest_files(&w.manifests);
    let mut state = checkpointed_state(&w.manifests, &store);
    refresh_and_apply(&mut state, &store);
    refresh_and_apply(&mut state, &store);
    drop(state);
    // The directory checkpoint as those builds wrote it: the build without its rules (postcard:
    // the last field, a string, its length and then its bytes).
    let dir = store.read().unwrap().checkpoint("manifests/v2/dir").unwrap().unwrap();
    let (build, before) = (format!("{}+checkpoints.1", env!("CARGO_PKG_VERSION")), env!("CARGO_PKG_VERSION"));
    let written: Vec<u8> = std::iter::once(build.len() as u8).chain(build.bytes()).collect();
    assert!(dir.ends_with(&written), "{dir:?}");
    let old: Vec<u8> = dir[..dir.len() - written.len()].iter().copied().chain([before.len() as u8]).chain(before.bytes()).collect();
    apply(&store, vec![Change::checkpoint("manifests/v2/dir".into(), Some(Arc::from(old)))]);
    let mut state = checkpointed_state(&w.manifests, &store);
    let warm = state.warm_start().unwrap();
    assert_eq!((warm.checked, warm.files), (false, 0), "nothing taken over");
    let r = state.refresh();
    assert_eq!(r.files_read, files, "every file read again");
    apply(&store, r.changes);
    let checkpoints = state.take_checkpoints();
    let names = change_names(&checkpoints);
    assert_eq!(names.iter().filter(|n| n.starts_with("checkpoint manifests/v2/file/")).count(), files, "and checkpointed again");
    apply(&store, checkpoints);
    let mut state = checkpointed_state(&w.manifests, &store);
    let warm = state.warm_start().unwrap();
    assert_eq!((warm.sealed, warm.files), (true, files), "the next start takes every file over");
}

#[test]
fn a_checkpoint_that_was_never_written_keeps_the_documents_in_memory() {
    let w = world();
    let store = Store::open(&w.data).unwrap();
    let mut state = checkpointed_state(&w.manifests, &store);
    let r = state.refresh();
    apply(&store, r.changes);
    // The writer stopped before the checkpoints: they are dropped, not written.
    drop(state.take_checkpoints());
    assert!(state.refresh().changes.is_empty());
    assert_eq!(state.files_held(), manifest_files(&w.manifests));
    // An edit is still diffed from the held documents.
    let groups = w.manifests.join("02-groups.yaml");
    let text = std::fs::read_to_string(&groups).unwrap();
    std::fs::write(&groups, text.replacen("displayName: Digital Assistants", "displayName: Assistants", 1)).unwrap();
    assert_eq!(change_names(&state.refresh().changes), vec!["apply Group poc/assist"]);
}

#[test]
fn a_large_files_checkpoint_is_kept_in_chunks_and_a_broken_one_is_read_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, data) = (tmp.path().join("m"), tmp.path().join("d"));
    std::fs::create_dir_all(&dir).unwrap();
    let groups = |n: usize| (0..n).map(|i| group_doc(&format!("g{i}"), &format!("Group {i}"))).collect::<String>();
    std::fs::write(dir.join("groups.yaml"), groups(2500)).unwrap();
    let store = Store::open(&data).unwrap();
    let chunks = |store: &Store| store.read().unwrap().checkpoints("manifests/v2/docs/").unwrap().len();
    let mut state = checkpointed_state(&dir, &store);
    let (names, _) = refresh_and_apply(&mut state, &store);
    assert_eq!(names.len(), 2500);
    assert_eq!(chunks(&store), 3, "1024 documents per chunk");
    // A checkpoint of the earlier layout, as an older build left it.
    store
        .write(schema::Timestamp(1), |wb| {
            wb.put_checkpoint("manifests/v1/file/groups.yaml", Some(b"old layout")).unwrap();
            Ok(())
        })
        .unwrap();

    // A restart takes the file over from its chunks, and removes the old layout's key.
    let mut state = checkpointed_state(&dir, &store);
    let warm = state.warm_start().unwrap();
    assert!(warm.checked);
    assert_eq!((warm.files, warm.documents, warm.stale, warm.unconfirmed.len()), (1, 2500, 0, 0));
    let (names, read) = refresh_and_apply(&mut state, &store);
    assert_eq!((names.len(), read), (0, 0));
    assert!(store.read().unwrap().checkpoints("manifests/v1/").unwrap().is_empty());

    // The file shrinks to one chunk: the others go, and so do the removed objects.
    std::fs::write(dir.join("groups.yaml"), groups(1000)).unwrap();
    let (names, _) = refresh_and_apply(&mut state, &store);
    assert_eq!((names.len(), names.iter().all(|n| n.starts_with("delete Group poc/g"))), (1500, true));
    assert_eq!(chunks(&store), 1);

    // A chunk lost behind the source's back while the seal is current: the start trusts the
    // checkpoints and reads nothing; once the file changes its documents cannot be read back,
    // so that is logged and nothing is sealed again.
    let lose_chunk = |store: &Store| {
        store
            .write(schema::Timestamp(1), |wb| {
                wb.put_checkpoint("manifests/v2/docs/groups.yaml\u{0}00000000", None).unwrap();
                Ok(())
            })
            .unwrap()
    };
    lose_chunk(&store);
    let mut state = checkpointed_state(&dir, &store);
    let warm = state.warm_start().unwrap();
    assert_eq!((warm.sealed, warm.files, warm.documents), (true, 1, 1000));
    std::fs::write(dir.join("groups.yaml"), groups(999)).unwrap();
    let (names, read) = refresh_and_apply(&mut state, &store);
    assert_eq!((names.len(), read), (999, 1), "the old documents unknown: every object is sent, none deleted");
    assert!(!store.read().unwrap().checkpoints_sealed("manifests/v2/seal").unwrap());
    assert_eq!(count(&store, KindId::Group), 1000, "g999 stays until the next start checks the store");
    // The next start checks the store: g999 is held by no file and deleted.
    let mut state = checkpointed_state(&dir, &store);
    let warm = state.warm_start().unwrap();
    assert_eq!((warm.sealed, warm.unconfirmed.len()), (false, 1));
    let (names, _) = refresh_and_apply(&mut state, &store);
    assert!(names.is_empty(), "{names:?}");
    let gone: Vec<Change> =
        state.not_held(warm.unconfirmed).into_iter().map(|src| Change::Delete { src, origin: "gone".into(), token: None }).collect();
    assert_eq!(change_names(&gone), vec!["delete Group poc/g999"]);
    apply(&store, gone);
    std::fs::write(dir.join("groups.yaml"), groups(1000)).unwrap();
    let (names, _) = refresh_and_apply(&mut state, &store);
    assert_eq!(names, vec!["apply Group poc/g999"]);

    // A chunk lost behind the source's back without a current seal (as after a change the
    // store took over the source's): the checkpoint does not add up, so the file is read again
    // at the next start and nothing stored is lost.
    lose_chunk(&store);
    store
        .write(schema::Timestamp(1), |wb| {
            wb.put_checkpoint("manifests/v2/seal", None).unwrap();
            Ok(())
        })
        .unwrap();
    let mut state = checkpointed_state(&dir, &store);
    let warm = state.warm_start().unwrap();
    assert_eq!((warm.files, warm.unconfirmed.len()), (0, 1000), "the file's objects are not confirmed by any checkpoint");
    let r = state.refresh();
    assert_eq!(r.files_read, 1);
    assert!(state.not_held(warm.unconfirmed).is_empty(), "the file read again holds every stored object");
    apply(&store, r.changes);
    apply(&store, state.take_checkpoints());
    assert_eq!((chunks(&store), count(&store, KindId::Group)), (1, 1000));
}

#[test]
fn an_unreadable_file_keeps_its_objects_and_its_winner_comes_back_when_it_is_readable() {
    // Found by the user test: a duplicate's winner removed while the other copy's file could not
    // be parsed re-read that file every second and kept the removed copy's record.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let display = |r: &control_plane::source::manifests::Refresh| -> Vec<String> {
        change_names(&r.changes)
            .into_iter()
            .chain(r.changes.iter().filter_map(|c| match c {
                Change::Apply { origin, .. } => Some(origin.split('#').next().unwrap_or("").to_string()),
                _ => None,
            }))
            .collect()
    };
    std::fs::write(dir.join("30-a.yaml"), group_doc("x", "V1")).unwrap();
    let mut state = plain_state(dir);
    assert_eq!(display(&state.refresh()), vec!["apply Group poc/x", "30-a.yaml"]);
    std::fs::write(dir.join("30-a.yaml"), "kind: [unclosed\n").unwrap();
    let r = state.refresh();
    assert!(r.changes.is_empty(), "kept while unreadable: {:?}", change_names(&r.changes));
    std::fs::write(dir.join("40-b.yaml"), group_doc("x", "V2")).unwrap();
    assert_eq!(display(&state.refresh()), vec!["apply Group poc/x", "40-b.yaml"]);
    // The winner goes; the other copy cannot be read: the stored record stays, nothing loops.
    std::fs::remove_file(dir.join("40-b.yaml")).unwrap();
    let r = state.refresh();
    assert!(r.changes.is_empty(), "{:?}", change_names(&r.changes));
    let again = state.refresh();
    assert_eq!((again.files_read, again.changes.len(), again.new_skips.len()), (0, 0, 0), "nothing read again every poll");
    // Readable again: its document is sent.
    std::fs::write(dir.join("30-a.yaml"), group_doc("x", "V1")).unwrap();
    assert_eq!(display(&state.refresh()), vec!["apply Group poc/x", "30-a.yaml"]);
}

#[test]
fn a_restart_keeps_the_objects_of_a_file_that_cannot_be_read() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, data) = (tmp.path().join("m"), tmp.path().join("d"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("groups.yaml"), format!("{}{}", group_doc("a", "A"), group_doc("b", "B"))).unwrap();
    let store = Store::open(&data).unwrap();
    let mut state = checkpointed_state(&dir, &store);
    refresh_and_apply(&mut state, &store);
    // Broken YAML: the file's objects are kept, and so is its checkpoint.
    std::fs::write(dir.join("groups.yaml"), format!("{}---\nkind: [unclosed\n", group_doc("a", "A"))).unwrap();
    let r = state.refresh();
    assert!(r.changes.is_empty(), "{:?}", change_names(&r.changes));
    assert!(change_names(&state.take_checkpoints()).iter().all(|n| !n.contains("groups.yaml")), "the last whole checkpoint stays");
    drop(state);

    let mut state = checkpointed_state(&dir, &store);
    let warm = state.warm_start().unwrap();
    assert_eq!((warm.checked, warm.stale, warm.unconfirmed.len()), (true, 0, 0));
    let r = state.refresh();
    assert_eq!((r.files_read, r.changes.len()), (1, 0), "{:?}", change_names(&r.changes));
    assert!(state.holds(&storage::SourceRef { kind: KindId::Group, namespace: "poc".into(), name: "b".into() }));
    apply(&store, state.take_checkpoints());
    assert_eq!(count(&store, KindId::Group), 2);

    // Readable again without `b`: now it goes.
    std::fs::write(dir.join("groups.yaml"), group_doc("a", "A")).unwrap();
    let (names, _) = refresh_and_apply(&mut state, &store);
    assert_eq!(names, vec!["delete Group poc/b"]);
}

#[test]
fn a_byte_order_mark_is_not_a_document() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("bom.yaml"), format!("\u{feff}{}", group_doc("a", "A"))).unwrap();
    let mut state = plain_state(tmp.path());
    let r = state.refresh();
    assert_eq!(r.new_ignored.len(), 0, "{:?}", r.new_ignored);
    match &r.changes[..] {
        [Change::Apply { origin, .. }] => assert!(origin.starts_with("bom.yaml#1 "), "{origin}"),
        other => panic!("{:?}", change_names(other)),
    }
}

#[test]
fn a_renamed_object_keeps_its_natural_key_and_a_copy_never_takes_the_originals_record() {
    let w = world();
    let mut c = config(&w);
    // Retries far away: what happens below happens without them.
    c.projector.dependency_delay = Duration::from_secs(60);
    let app = App::start(c).unwrap();
    wait_until(app.metrics(), "initial sync", Duration::from_secs(20), || app.readiness().is_settled());
    let apis = w.manifests.join("06-apis.yaml");
    let text = std::fs::read_to_string(&apis).unwrap();
    let api = |store: &Store| count(store, KindId::Api);
    let before = api(app.store());
    let name_of = |store: &Store| {
        let mut names = Vec::new();
        store.read().unwrap().for_each_source(KindId::Api, |_, name, _| names.push(name.to_string())).unwrap();
        names
    };

    // A copy under another name (same team and base path: the same natural key) is not
    // projected, and its removal leaves the original alone.
    let first = split_documents(&text).remove(0).text;
    std::fs::write(
        w.manifests.join("60-copy.yaml"),
        first.replace("name: logistics-fleet-legacy-v1\n", "name: logistics-fleet-legacy-v1-copy\n"),
    )
    .unwrap();
    // The file's checkpoint is written after what the refresh that read it sent.
    let read = |store: &Store| store.read().unwrap().checkpoint(&file_checkpoint_key("60-copy.yaml")).unwrap().is_some();
    wait_until(app.metrics(), "the copy's file read", Duration::from_secs(10), || read(app.store()));
    assert_eq!(api(app.store()), before);
    assert!(!name_of(app.store()).contains(&"logistics-fleet-legacy-v1-copy".to_string()));
    std::fs::remove_file(w.manifests.join("60-copy.yaml")).unwrap();
    wait_until(app.metrics(), "the copy's removal read", Duration::from_secs(10), || !read(app.store()));
    assert_eq!(api(app.store()), before, "the original's record stays");
    assert!(name_of(app.store()).contains(&"logistics-fleet-legacy-v1".to_string()));

    // Renamed in place: the new name waits for the key, which the old name's delete (in the same
    // refresh) frees at once, not after a retry delay.
    std::fs::write(&apis, text.replacen("name: logistics-fleet-legacy-v1\n", "name: logistics-fleet-legacy-v1-renamed\n", 1)).unwrap();
    wait_until(app.metrics(), "the renamed api", Duration::from_secs(10), || {
        name_of(app.store()).contains(&"logistics-fleet-legacy-v1-renamed".to_string())
    });
    assert_eq!(api(app.store()), before);
    assert!(!name_of(app.store()).contains(&"logistics-fleet-legacy-v1".to_string()));
    assert_eq!(app.store().read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    app.shutdown();
}

#[test]
fn check_reports_two_objects_with_one_natural_key() {
    let w = world();
    // A second Api of team poc--logistics--fleet with the base path of logistics-fleet-legacy-v1.
    let apis = std::fs::read_to_string(w.manifests.join("06-apis.yaml")).unwrap();
    let first = apis.split("\n---\n").nth(1).unwrap();
    let copy = first.replacen("name: logistics-fleet-legacy-v1", "name: logistics-fleet-legacy-v1-copy", 1);
    assert_ne!(copy, first);
    std::fs::write(w.manifests.join("20-api-copy.yaml"), format!("---\n{copy}\n")).unwrap();
    let report = control_plane::check::check(&w.manifests, Default::default(), control_plane::config::Clock(None)).unwrap();
    assert_eq!(report.conflicts.len(), 1, "{:?}", report.conflicts);
    let c = &report.conflicts[0];
    assert_eq!(c.holder.0, "Api poc--logistics--fleet/logistics-fleet-legacy-v1");
    assert_eq!(c.waiting.0, "Api poc--logistics--fleet/logistics-fleet-legacy-v1-copy");
    assert!(c.waiting.1.starts_with("20-api-copy.yaml#1"), "{}", c.waiting.1);
    let mut out = Vec::new();
    report.print(&mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    let facts: Value = serde_json::from_str(&std::fs::read_to_string(repo().join("examples/world.facts.json")).unwrap()).unwrap();
    let projected: u64 =
        ["poc", "qa"].iter().flat_map(|env| facts["env"][env]["counts"].as_object().unwrap().values()).map(|n| n.as_u64().unwrap()).sum();
    assert!(out.contains(&format!("{projected} would be projected, 0 skipped (0 failed)")), "{out}");
    assert!(out.trim_end().ends_with(", 1 waiting for a natural key another object holds"), "{out}");
    assert!(out.contains("CONFLICT key "), "{out}");
}

/// A document larger than `source.maxDocumentBytes` is not parsed: it is skipped with its size
/// and the limit, and the object it replaces is not deleted (the file keeps what it held). In a
/// `List`, an oversized item is skipped and the other items are projected.
#[test]
fn an_oversized_document_is_skipped_and_what_is_stored_of_it_stays() {
    let dir = tempfile::tempdir().unwrap();
    let features = schema::kind::Features::default();
    let handlers = Arc::new(Handlers::new(&features).with_max_document_bytes(2048));
    let mut state = ManifestsState::new(dir.path(), handlers, features, Clock(None));
    let file = dir.path().join("groups.yaml");
    let small = group_doc("alpha", "Alpha");
    std::fs::write(&file, format!("{small}\n---\n{}", group_doc("beta", "Beta"))).unwrap();
    let r = state.refresh();
    assert_eq!(change_names(&r.changes).iter().filter(|c| c.starts_with("apply")).count(), 2, "{:?}", change_names(&r.changes));

    // beta grows past the limit: skipped with its size, not deleted.
    let huge = group_doc("beta", &"B".repeat(4096));
    let bytes = huge.len();
    std::fs::write(&file, format!("{small}\n---\n{huge}")).unwrap();
    let r = state.refresh();
    assert!(!change_names(&r.changes).iter().any(|c| c.starts_with("delete")), "{:?}", change_names(&r.changes));
    assert_eq!(r.new_skips.len(), 1, "{:?}", r.new_skips);
    let skip = &r.new_skips[0];
    assert_eq!((skip.kind.as_deref(), skip.name.as_deref()), (Some("Group"), Some("beta")));
    assert!(matches!(skip.reason, SkipReason::TooLarge { max: 2048, .. }), "{:?}", skip.reason);
    assert!(skip.reason.is_failure());
    let SkipReason::TooLarge { bytes: measured, .. } = skip.reason else { unreachable!() };
    assert!(measured > 4096 && measured <= bytes, "{measured} of {bytes}");
    assert_eq!(skip.reason.to_string(), format!("the document is {measured} bytes, more than source.maxDocumentBytes (2048)"));

    // A List: its items are measured one by one.
    let item = |name: &str, display: &str| {
        serde_json::json!({"apiVersion": "organization.cp.ei.telekom.de/v1", "kind": "Group",
            "metadata": {"name": name, "namespace": "poc", "labels": {"cp.ei.telekom.de/environment": "poc"}},
            "spec": {"displayName": display, "description": "d"}})
    };
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [item("gamma", "Gamma"), item("delta", &"D".repeat(4096))]});
    std::fs::write(dir.path().join("list.json"), serde_json::to_string(&list).unwrap()).unwrap();
    let r = state.refresh();
    let names = change_names(&r.changes);
    assert!(names.iter().any(|c| c.starts_with("apply") && c.contains("gamma")), "{names:?}");
    assert!(!names.iter().any(|c| c.contains("delta")), "{names:?}");
    assert_eq!(r.new_skips.len(), 1, "the list file alone was read: {:?}", r.new_skips);
    assert!(r.new_skips.iter().any(|s| s.name.as_deref() == Some("delta") && s.origin.item == Some(1)));
    assert!(matches!(r.new_skips[0].reason, SkipReason::TooLarge { max: 2048, .. }));
    assert_eq!(state.skips().len(), 2, "beta is still skipped");
}

/// `check` lists every ignored document with its reason: kinds that are not projected, scalars,
/// top-level arrays and objects without apiVersion/kind; empty documents are only counted.
#[test]
fn check_lists_ignored_documents_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\njust a string\n---\n# only a comment\n---\nfoo: bar\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("b.json"), "[{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\"}]").unwrap();
    std::fs::write(dir.path().join("c.yaml"), "apiVersion: organization.cp.ei.telekom.de/v2\nkind: Group\nmetadata:\n  name: g\n").unwrap();
    let report = control_plane::check::check(dir.path(), Default::default(), Clock(None)).unwrap();
    let mut out = Vec::new();
    report.print(&mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    let ignored: Vec<&str> = out.lines().filter(|l| l.starts_with("IGNORED ")).collect();
    assert_eq!(
        ignored,
        [
            "IGNORED a.yaml#1 (line 1): v1 ConfigMap is not a projected kind",
            "IGNORED a.yaml#2 (line 6): a scalar, not a Kubernetes object",
            "IGNORED a.yaml#3 (line 10): not a Kubernetes object (no apiVersion/kind)",
            "IGNORED b.json#1 (line 1): a list, not a Kubernetes object (wrap the items in a `kind: List` document)",
            "IGNORED c.yaml#1 (line 1): organization.cp.ei.telekom.de/v2 Group is not a projected kind",
        ],
        "{out}"
    );
    // The comment-only section is not a document.
    assert!(out.trim_end().ends_with(", 5 ignored"), "{out}");
}

/// A file larger than `source.maxFileBytes` is not read: it is skipped with its size and the
/// limit, and the objects it held stay; once it is small enough again it is read.
#[test]
fn a_file_over_the_file_limit_is_skipped_and_its_objects_stay() {
    let dir = tempfile::tempdir().unwrap();
    let features = schema::kind::Features::default();
    let mut state = ManifestsState::new(dir.path(), Arc::new(Handlers::new(&features)), features, Clock(None)).with_max_file_bytes(1 << 20);
    let file = dir.path().join("groups.yaml");
    std::fs::write(&file, group_doc("alpha", "Alpha")).unwrap();
    assert_eq!(change_names(&state.refresh().changes), ["apply Group poc/alpha"]);

    // Grown past the limit (a comment is enough): nothing read, nothing deleted.
    let padding = format!("# {}\n", "p".repeat(1 << 20));
    std::fs::write(&file, format!("{padding}{}", group_doc("alpha", "Alpha 2"))).unwrap();
    let bytes = std::fs::metadata(&file).unwrap().len();
    let r = state.refresh();
    assert_eq!(change_names(&r.changes), Vec::<String>::new());
    assert_eq!(r.new_skips.len(), 1, "{:?}", r.new_skips);
    assert_eq!(
        r.new_skips[0].reason.to_string(),
        format!("file cannot be read: the file is {bytes} bytes, more than source.maxFileBytes (1048576)")
    );
    assert!(state.holds(&storage::SourceRef { kind: schema::KindId::Group, namespace: "poc".into(), name: "alpha".into() }));

    // Small again: read, and its change applied.
    std::fs::write(&file, group_doc("alpha", "Alpha 3")).unwrap();
    let r = state.refresh();
    assert_eq!(change_names(&r.changes), ["apply Group poc/alpha"]);
    assert!(r.new_skips.is_empty() && state.skips().is_empty(), "{:?}", state.skips());

    // A new state (a cold start) with the file too large: a skip, no object.
    std::fs::write(&file, format!("{padding}{}", group_doc("alpha", "Alpha"))).unwrap();
    let mut cold = ManifestsState::new(dir.path(), Arc::new(Handlers::new(&features)), features, Clock(None)).with_max_file_bytes(1 << 20);
    let r = cold.refresh();
    assert!(r.changes.is_empty() && r.new_skips.len() == 1, "{:?}", change_names(&r.changes));
}

/// An object declared twice in one file: when the later (winning) document goes, the earlier
/// one, unchanged in the file, is sent (its file is read again for its record).
#[test]
fn an_unchanged_document_that_becomes_the_winner_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let features = schema::kind::Features::default();
    let mut state = ManifestsState::new(dir.path(), Arc::new(Handlers::new(&features)), features, Clock(None));
    let file = dir.path().join("groups.yaml");
    std::fs::write(&file, format!("{}{}", group_doc("g", "First"), group_doc("g", "Second"))).unwrap();
    let r = state.refresh();
    assert_eq!(change_names(&r.changes), ["apply Group poc/g"]);
    let Change::Apply { origin, .. } = &r.changes[0] else { unreachable!() };
    assert!(origin.starts_with("groups.yaml#2"), "{origin}");
    std::fs::write(&file, group_doc("g", "First")).unwrap();
    let r = state.refresh();
    assert_eq!(change_names(&r.changes), ["apply Group poc/g"]);
    let Change::Apply { origin, .. } = &r.changes[0] else { unreachable!() };
    assert!(origin.starts_with("groups.yaml#1"), "{origin}");
}

/// `check` reads the source's limits from the environment as `serve` does: a file over
/// `CP_SOURCE_MAX_FILE_BYTES` and a document over `CP_SOURCE_MAX_DOCUMENT_BYTES` fail it.
#[test]
fn check_reads_the_source_limits_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big.yaml"), format!("# {}\n{}", "p".repeat(1 << 20), group_doc("alpha", "Alpha"))).unwrap();
    std::fs::write(dir.path().join("small.yaml"), group_doc("beta", &"B".repeat(4096))).unwrap();
    let run = |vars: &[(&str, &str)]| {
        let env = |k: &str| vars.iter().find(|(name, _)| *name == k).map(|(_, v)| v.to_string());
        let config = control_plane::config::check_config_from_env(&env).unwrap();
        control_plane::check::check_as_configured(dir.path(), &config).unwrap()
    };
    assert_eq!((run(&[]).failures(), run(&[]).projected.len()), (0, 2));
    let limited = run(&[("CP_SOURCE_MAX_FILE_BYTES", "1048576"), ("CP_SOURCE_MAX_DOCUMENT_BYTES", "2048")]);
    assert_eq!((limited.failures(), limited.projected.len()), (2, 0));
    let reasons: Vec<String> = limited.skips.iter().map(|s| s.reason.to_string()).collect();
    assert!(reasons.iter().any(|r| r.contains("more than source.maxFileBytes (1048576)")), "{reasons:?}");
    assert!(reasons.iter().any(|r| r.contains("more than source.maxDocumentBytes (2048)")), "{reasons:?}");
    let env = |k: &str| (k == "CP_SOURCE_MAX_FILE_BYTES").then(|| "1".to_string());
    let err = control_plane::config::check_config_from_env(&env).unwrap_err().to_string();
    assert!(err.contains("CP_SOURCE_MAX_FILE_BYTES") && err.contains("at least 1048576"), "{err}");
}
