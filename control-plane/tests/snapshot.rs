//! `control-plane snapshot export|restore|verify`: exit codes, messages, a database held by a
//! running server, damaged files refused with distinct messages, the target left untouched.

mod common;

use common::ADMIN;

use control_plane::app::App;
use control_plane::config::Config;
use schema::{KindId, Scope};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use storage::Store;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_control-plane")).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn counts(dir: &Path) -> BTreeMap<KindId, u64> {
    let store = Store::open(dir).unwrap();
    let view = store.read().unwrap();
    KindId::ALL.iter().map(|&k| (k, view.count(k, &Scope::All).unwrap())).collect()
}

/// Every file under `dir` with its content.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(tree(&e.path()));
        } else {
            out.insert(e.path(), std::fs::read(e.path()).unwrap());
        }
    }
    out
}

/// The search index a restore built in `data` (from the snapshot, while the store was written)
/// is taken as up to date by the next open, and finds what an index rebuilt from the restored
/// store finds.
fn assert_search_index_matches_a_rebuild(data: &Path) {
    use storage::search::{Catalogue, Opened, SearchRequest};
    let store = Store::open(data).unwrap();
    let (restored, opened) = Catalogue::open(&data.join(storage::search::SEARCH_DIR), &store).unwrap();
    assert_eq!(opened, Opened::UpToDate);
    let elsewhere = tempfile::tempdir().unwrap();
    let (rebuilt, opened) = Catalogue::open(elsewhere.path(), &store).unwrap();
    let Opened::Rebuilt(entries) = opened else { panic!("a new directory is rebuilt: {opened:?}") };
    assert!(entries > 0, "{entries} catalogue entries");
    for query in ["payments", "ledger", "fleet tracking", "", "zzzz-nothing"] {
        let request = SearchRequest { query, ..Default::default() };
        let found = restored.search(&request, 1000).unwrap();
        assert_eq!(found, rebuilt.search(&request, 1000).unwrap(), "search {query:?}");
        if query == "payments" {
            assert!(found.total > 0, "search {query:?} finds something");
        }
    }
    assert_eq!(restored.search(&SearchRequest::default(), 10_000).unwrap().total, entries);
    restored.shutdown();
    rebuilt.shutdown();
}

/// The server on the example world and `data`, once its initial sync is applied.
fn synced(data: &Path) -> App {
    let app = App::start(Config::for_manifests(&repo().join("examples/world"), data)).unwrap();
    let waiting = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    assert!(waiting.block_on(app.wait_caught_up(Duration::from_secs(30))), "initial sync");
    app
}

#[test]
fn export_verify_restore_and_refusals() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let file = tmp.path().join("world.snap");
    let (d, f) = (data.to_str().unwrap(), file.to_str().unwrap());

    let app = synced(&data);
    // Held by a running server: exit 1, pointing to the online export.
    let o = run(&["snapshot", "export", "--data-dir", d, "--out", f]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("held by a running server") && stderr(&o).contains("--server"), "{}", stderr(&o));
    assert!(!file.exists());
    app.shutdown();

    let o = run(&["snapshot", "export", "--data-dir", d, "--out", f]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = run(&["snapshot", "verify", f]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("revision:"));
    // The spelling of `restore --in` verifies the same file and prints the same summary.
    let spelled_as_restore = run(&["snapshot", "verify", "--in", f]);
    assert_eq!(spelled_as_restore.status.code(), Some(0), "{}", stderr(&spelled_as_restore));
    assert_eq!(spelled_as_restore.stdout, o.stdout);

    // Restore into a new directory: the same counts.
    let restored = tmp.path().join("restored");
    let r = restored.to_str().unwrap();
    let o = run(&["snapshot", "restore", "--in", f, "--data-dir", r]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let original = counts(&data);
    assert!(original.values().sum::<u64>() > 100);
    assert_eq!(counts(&restored), original);
    assert!(restored.join(storage::search::SEARCH_DIR).is_dir(), "restore builds the search index");
    assert_search_index_matches_a_rebuild(&restored);

    // Non-empty target: refused without --force, replaced with it.
    let o = run(&["snapshot", "restore", "--in", f, "--data-dir", r]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not empty") && stderr(&o).contains("--force"), "{}", stderr(&o));
    std::fs::create_dir(restored.join("lost+found")).unwrap(); // the root of an ext4 volume
    let o = run(&["snapshot", "restore", "--in", f, "--data-dir", r, "--force"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(counts(&restored), original);
    std::fs::remove_dir(restored.join("lost+found")).unwrap();
    // Built inside the target (which may be a mount point), then moved: nothing else is left.
    let mut names: Vec<String> =
        std::fs::read_dir(&restored).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, vec![storage::DB_FILE.to_string(), storage::search::SEARCH_DIR.to_string()]);

    // A path whose first part does not exist yet but that names the restored directory
    // (`new/../restored`) is checked as that directory: refused without --force.
    let detour = tmp.path().join("new").join("..").join("restored");
    let o = run(&["snapshot", "restore", "--in", f, "--data-dir", detour.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not empty") && stderr(&o).contains("--force"), "{}", stderr(&o));
    assert_eq!(counts(&restored), original);
    // A new volume's root (only `lost+found`) is empty for a restore, and keeps it.
    let volume = tmp.path().join("volume");
    std::fs::create_dir_all(volume.join("lost+found")).unwrap();
    let o = run(&["snapshot", "restore", "--in", f, "--data-dir", volume.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(counts(&volume), original);
    assert!(volume.join("lost+found").is_dir());

    // --force never deletes a directory that is not a data directory.
    let other = tmp.path().join("documents");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("thesis.txt"), "precious").unwrap();
    let o = run(&["snapshot", "restore", "--in", f, "--data-dir", other.to_str().unwrap(), "--force"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("does not look like a data directory") && stderr(&o).contains("`thesis.txt`"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(other.join("thesis.txt")).unwrap(), "precious");
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 1);

    // Damaged files: distinct messages from verify and restore; the target stays as it was.
    let good = std::fs::read(&file).unwrap();
    let mut flipped = good.clone();
    let at = good.len() / 2;
    flipped[at] ^= 0x01;
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("truncated", good[..good.len() - 10].to_vec(), "truncated"),
        ("flipped", flipped, "checksum mismatch"),
        ("format", storage::snapshot::encode_for_tests(99, &good, storage::SCHEMA_VERSION), "format version 99"),
        (
            "schema",
            storage::snapshot::encode_for_tests(storage::snapshot::FORMAT_VERSION, &good, storage::SCHEMA_VERSION + 1),
            "read-model schema version",
        ),
    ];
    let before = tree(&restored);
    for (name, bytes, message) in cases {
        let bad = tmp.path().join(format!("{name}.snap"));
        std::fs::write(&bad, bytes).unwrap();
        let b = bad.to_str().unwrap();
        let o = run(&["snapshot", "verify", b]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(stderr(&o).contains(message), "{name}: {}", stderr(&o));
        let o = run(&["snapshot", "restore", "--in", b, "--data-dir", r, "--force"]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(stderr(&o).contains(message), "{name}: {}", stderr(&o));
        assert_eq!(tree(&restored), before, "{name}: the target changed");
    }
    // No temporary directories are left next to the target.
    let left: Vec<_> =
        std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).filter(|n| n.to_string_lossy().starts_with('.')).collect();
    assert!(left.is_empty(), "{left:?}");

    // Not a regular file (a device that never ends, a directory): refused before reading.
    for path in ["/dev/zero", tmp.path().to_str().unwrap()] {
        for args in [vec!["snapshot", "verify", path], vec!["snapshot", "restore", "--in", path, "--data-dir", d, "--force"]] {
            let o = run(&args);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
            assert!(stderr(&o).contains("is not a regular file"), "{args:?}: {}", stderr(&o));
        }
    }

    // A large file of something else is refused after its first bytes, not read whole (this one
    // is sparse: 2 GiB that take no disk).
    let other = tmp.path().join("sparse.snap");
    std::fs::File::create(&other).unwrap().set_len(2 << 30).unwrap();
    for args in [
        vec!["snapshot", "verify", other.to_str().unwrap()],
        vec!["snapshot", "restore", "--in", other.to_str().unwrap(), "--data-dir", d, "--force"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("not a snapshot file (bad magic bytes)"), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(&format!("reading {}", other.display())), "names the file: {}", stderr(&o));
    }

    // Usage errors exit 2.
    assert_eq!(run(&["snapshot", "restore", "--in", f]).status.code(), Some(2));
    assert_eq!(run(&["snapshot", "verify"]).status.code(), Some(2));
    assert_eq!(run(&["snapshot", "verify", f, "--in", f]).status.code(), Some(2), "FILE and --in together");
}

/// What a restore killed while building leaves in `dir`: a staging directory named after a
/// process that is gone, holding a complete store and a search index directory.
fn leave_killed_restore(dir: &Path, store: &Path) -> PathBuf {
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let staging = dir.join(format!("{}{}", control_plane::snapshot::STAGING_PREFIX, gone.id()));
    std::fs::create_dir_all(staging.join(storage::search::SEARCH_DIR)).unwrap();
    std::fs::copy(store.join(storage::DB_FILE), staging.join(storage::DB_FILE)).unwrap();
    std::fs::write(staging.join(storage::search::SEARCH_DIR).join("meta.json"), "{").unwrap();
    staging
}

/// A temporary directory holding `data`, the example world's synced store, and `world.snap`,
/// its offline export.
fn exported_world() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (data, file) = (tmp.path().join("data"), tmp.path().join("world.snap"));
    synced(&data).shutdown();
    let o = run(&["snapshot", "export", "--data-dir", data.to_str().unwrap(), "--out", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    (tmp, data, file)
}

#[test]
fn a_killed_restores_staging_directory_is_removed_by_the_next_restore_and_by_serve() {
    let (tmp, data, file) = exported_world();
    let f = file.to_str().unwrap();
    let original = counts(&data);

    // A directory holding only the leftover: restored without --force, the leftover named.
    let target = tmp.path().join("target");
    std::fs::create_dir(&target).unwrap();
    let leftover = leave_killed_restore(&target, &data);
    let o = run(&["snapshot", "restore", "--in", f, "--data-dir", target.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains(&leftover.display().to_string()), "the removal is logged with the path: {}", stderr(&o));
    assert!(!leftover.exists());
    assert_eq!(counts(&target), original);

    // Beside a store: the plain restore refuses the store, and still removes the leftover.
    let leftover = leave_killed_restore(&target, &data);
    let o = run(&["snapshot", "restore", "--in", f, "--data-dir", target.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not empty") && stderr(&o).contains(&leftover.display().to_string()), "{}", stderr(&o));
    assert!(!leftover.exists());

    // `serve` removes it before opening the store, and serves the store as it was; what only
    // looks like one (a symbolic link to a directory elsewhere) is left alone.
    let leftover = leave_killed_restore(&data, &data);
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("precious"), "kept").unwrap();
    let link = data.join(format!("{}1", control_plane::snapshot::STAGING_PREFIX));
    std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
    let app = synced(&data);
    assert!(!leftover.exists());
    assert_eq!(std::fs::read_to_string(elsewhere.join("precious")).unwrap(), "kept");
    std::fs::remove_file(&link).unwrap();
    app.shutdown();
    assert_eq!(counts(&data), original);
    let mut names: Vec<String> = std::fs::read_dir(&data).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, vec![storage::DB_FILE.to_string(), storage::search::SEARCH_DIR.to_string()]);
}

const TEAM: &str = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJjbGllbnRJZCI6InBheW1lbnRzLS1jaGVja291dC0tY29uc29sZSIsInNjb3BlIjoidGFyZGlzOnRlYW06cmVhZCIsImVudiI6InBvYyJ9.mock";

#[tokio::test(flavor = "multi_thread")]
async fn online_export_through_the_admin_api() {
    let tmp = tempfile::tempdir().unwrap();
    let running = control_plane::start(Config::for_manifests(&repo().join("examples/world"), &tmp.path().join("data"))).await.unwrap();
    let base = format!("http://{}", running.local_addr());
    assert!(running.app().wait_caught_up(Duration::from_secs(30)).await, "initial sync");
    let client = reqwest::Client::new();
    let url = format!("{base}/admin/v1/status");
    let missing = client.get(&url).send().await.unwrap();
    assert_eq!(missing.status(), 401);
    assert_eq!(missing.headers()["content-type"], "application/problem+json");
    assert_eq!(missing.headers()["www-authenticate"], "Bearer");
    let invalid = client.get(&url).bearer_auth("not-a-token").send().await.unwrap();
    assert_eq!(invalid.status(), 401);
    assert_eq!(invalid.json::<serde_json::Value>().await.unwrap()["detail"], "invalid token");
    let team = client.get(&url).bearer_auth(TEAM).send().await.unwrap();
    assert_eq!(team.status(), 403);
    let forbidden = team.json::<serde_json::Value>().await.unwrap();
    assert_eq!(
        (&forbidden["title"], &forbidden["errors"][0]["extensions"]["code"]),
        (&"Forbidden".into(), &"FORBIDDEN".into()),
        "{forbidden}"
    );
    assert_eq!(client.get(format!("{base}/admin/v1/snapshot")).bearer_auth(TEAM).send().await.unwrap().status(), 403);
    // Every operation is a GET; another method is refused like every other refusal.
    for (method, path) in [(reqwest::Method::PUT, "status"), (reqwest::Method::POST, "snapshot"), (reqwest::Method::DELETE, "status")] {
        let r = client.request(method, format!("{base}/admin/v1/{path}")).bearer_auth(ADMIN).send().await.unwrap();
        assert_eq!((r.status().as_u16(), r.headers().get("allow").map(|v| v.to_str().unwrap().to_string())), (405, Some("GET".into())));
        let refused = r.json::<serde_json::Value>().await.unwrap();
        assert_eq!(refused["errors"][0]["extensions"]["code"], "METHOD_NOT_ALLOWED", "{refused}");
    }
    let r = client.get(&url).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let status: serde_json::Value = r.json().await.unwrap();
    let revision = running.app().store().read().unwrap().revision().unwrap();
    assert_eq!(status["revision"], revision, "{status}");
    assert_eq!(status["counts"]["Application"], running.app().store().read().unwrap().count(KindId::Application, &Scope::All).unwrap());
    assert!(status["lastCommitAt"].is_string(), "{status}");
    assert_eq!(status["sync"]["ready"], true, "{status}");
    let kinds = status["kinds"].as_array().unwrap();
    assert_eq!(kinds.len(), KindId::ALL.len());
    for (k, kind) in kinds.iter().zip(KindId::ALL) {
        assert_eq!(k["kind"], kind.name());
        assert_eq!(k["sync"], "synced", "{k}");
        assert_eq!(k["records"], status["counts"][kind.name()]);
    }
    let doc: serde_json::Value = client.get(format!("{base}/admin/v1/openapi.json")).send().await.unwrap().json().await.unwrap();
    assert_eq!(doc["servers"][0]["url"], "/admin/v1", "{doc}");
    assert!(doc["paths"]["/snapshot"]["get"]["responses"]["200"]["content"]["application/octet-stream"].is_object(), "{doc}");
    assert!(doc["paths"]["/status"]["get"]["responses"]["403"].is_object(), "{doc}");
    assert_eq!(doc["components"]["securitySchemes"]["AdminToken"]["scheme"], "bearer", "{doc}");

    // Streamed: no length known up front, the revision in a header, a valid file.
    let r = client.get(format!("{base}/admin/v1/snapshot")).bearer_auth(ADMIN).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("content-length").is_none(), "{:?}", r.headers());
    assert_eq!(r.headers()["x-snapshot-revision"], revision.to_string().as_str());
    let streamed = r.bytes().await.unwrap();
    assert_eq!(storage::snapshot::verify(&streamed).unwrap().header.revision, revision);

    let file = tmp.path().join("online.snap");
    let f = file.to_str().unwrap().to_string();
    let b = base.clone();
    let o = tokio::task::spawn_blocking(move || run(&["snapshot", "export", "--server", &b, "--token", ADMIN, "--out", &f])).await.unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let summary = control_plane::snapshot::verify(&file).unwrap();
    assert_eq!(summary.header.revision, revision);
    let f = file.to_str().unwrap().to_string();
    let b = base.clone();
    let o = tokio::task::spawn_blocking(move || run(&["snapshot", "export", "--server", &b, "--token", TEAM, "--out", &f])).await.unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("403"), "{}", stderr(&o));
    running.shutdown().await.unwrap();

    let restored = tmp.path().join("restored");
    control_plane::snapshot::restore(&file, &restored, false).unwrap();
    assert_eq!(counts(&restored), counts(&tmp.path().join("data")));
}

/// An online export taken while the projector keeps writing is one consistent revision: it
/// restores to a store whose revision is the snapshot's and whose invariants hold, while the
/// source has moved on.
#[tokio::test(flavor = "multi_thread")]
async fn online_export_during_continuous_ingest_is_one_consistent_revision() {
    let tmp = tempfile::tempdir().unwrap();
    let world = tmp.path().join("world");
    std::fs::create_dir_all(&world).unwrap();
    for entry in std::fs::read_dir(repo().join("examples/world")).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, world.join(p.file_name().unwrap())).unwrap();
    }
    let running = control_plane::start(Config::for_manifests(&world, &tmp.path().join("data"))).await.unwrap();
    let base = format!("http://{}", running.local_addr());
    assert!(running.app().wait_caught_up(Duration::from_secs(30)).await, "initial sync");
    // Keep changing every application's status message, each step once the store has
    // committed the previous one.
    let apps = world.join("04-applications.yaml");
    let original = std::fs::read_to_string(&apps).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, store) = (stop.clone(), running.app().store().clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                i += 1;
                let before = store.read().unwrap().revision().unwrap();
                std::fs::write(&apps, original.replace("All sub-resources are up to date", &format!("ingest step {i}"))).unwrap();
                let after = store.wait_for_revision_after(before, Duration::from_secs(60)).unwrap();
                assert!(after > before, "ingest step {i} was not committed");
            }
        })
    };
    let client = reqwest::Client::new();
    let mut revisions = Vec::new();
    for n in 0..4 {
        // Each export after the store moved past the previous one's revision.
        let after = revisions.last().copied().unwrap_or(0);
        let store = running.app().store();
        let now = tokio::task::block_in_place(|| store.wait_for_revision_after(after, Duration::from_secs(60)).unwrap());
        assert!(now > after, "ingest stopped at revision {after}");
        let bytes = client.get(format!("{base}/admin/v1/snapshot")).bearer_auth(ADMIN).send().await.unwrap().bytes().await.unwrap();
        let file = tmp.path().join(format!("during-{n}.snap"));
        std::fs::write(&file, &bytes).unwrap();
        let summary = control_plane::snapshot::verify(&file).unwrap();
        let restored = tmp.path().join(format!("restored-{n}"));
        control_plane::snapshot::restore(&file, &restored, false).unwrap();
        let store = Store::open(&restored).unwrap();
        let view = store.read().unwrap();
        assert_eq!(view.revision().unwrap(), summary.header.revision);
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new(), "snapshot {n}");
        revisions.push(summary.header.revision);
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.join().unwrap();
    let final_revision = running.app().store().read().unwrap().revision().unwrap();
    running.shutdown().await.unwrap();
    assert!(revisions.windows(2).all(|w| w[0] < w[1]), "each export is of a later revision: {revisions:?}");
    assert!(revisions.first() < revisions.last(), "ingest moved between exports: {revisions:?}");
    assert!(final_revision >= *revisions.last().unwrap());
}

/// Starts `control-plane` with `args`, reads its log until a line holds `barrier`, sends it
/// SIGTERM, and returns its exit status with the whole log.
fn terminate_at(args: &[&str], barrier: &str) -> (std::process::ExitStatus, String) {
    use std::io::{BufRead, Read};
    let mut child = Command::new(env!("CARGO_BIN_EXE_control-plane")).args(args).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let mut log = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let before = seen.len();
        assert!(log.read_line(&mut seen).unwrap() > 0, "{args:?} ended before logging {barrier:?}: {seen}");
        if seen[before..].contains(barrier) {
            break;
        }
    }
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    log.read_to_string(&mut seen).unwrap();
    (child.wait().unwrap(), seen)
}

/// The names in `dir` that start with `prefix`.
fn named(dir: &Path, prefix: &str) -> Vec<String> {
    let names = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned());
    names.filter(|n| n.starts_with(prefix)).collect()
}

#[test]
fn a_restore_or_an_export_stopped_by_sigterm_leaves_no_unfinished_output() {
    let (tmp, data, file) = exported_world();
    let (d, f) = (data.to_str().unwrap(), file.to_str().unwrap());
    let original = counts(&data);

    // Stopped while it builds: its staging directory is removed, and the store it would have
    // replaced is whole. Whether the signal or the end of the restore comes first, nothing
    // unfinished is left, and the store is the old one or the restored one.
    let target = tmp.path().join("target");
    synced(&target).shutdown();
    let before = counts(&target);
    for _ in 0..3 {
        let (status, log) = terminate_at(
            &["snapshot", "restore", "--in", f, "--data-dir", target.to_str().unwrap(), "--force"],
            "building the restored store",
        );
        match status.code() {
            Some(143) => assert!(log.contains("stopped by a signal: removed what was not finished") && log.contains(".restore-"), "{log}"),
            Some(0) => {}
            other => panic!("exit {other:?}: {log}"),
        }
        assert_eq!(named(&target, control_plane::snapshot::STAGING_PREFIX), Vec::<String>::new(), "{log}");
        let now = counts(&target);
        assert!(now == before || now == original, "{now:?}");
    }

    // Into a directory it created: the directory goes too.
    let fresh = tmp.path().join("fresh");
    let (status, log) =
        terminate_at(&["snapshot", "restore", "--in", f, "--data-dir", fresh.to_str().unwrap()], "building the restored store");
    match status.code() {
        Some(143) => assert!(!fresh.exists(), "{log}"),
        Some(0) => assert_eq!(counts(&fresh), original),
        other => panic!("exit {other:?}: {log}"),
    }

    // An offline export stopped the same way leaves no `.partial` file, and the snapshot, if
    // it was written, verifies.
    let out = tmp.path().join("stopped.snap");
    let (status, log) = terminate_at(&["snapshot", "export", "--data-dir", d, "--out", out.to_str().unwrap()], "writing the snapshot");
    assert!(matches!(status.code(), Some(143 | 0)), "{status:?}: {log}");
    assert_eq!(named(tmp.path(), "stopped.snap."), Vec::<String>::new(), "{log}");
    if out.exists() {
        assert_eq!(run(&["snapshot", "verify", out.to_str().unwrap()]).status.code(), Some(0));
    }
}

#[test]
fn a_data_directory_in_use_is_refused_by_restore_and_serve_and_its_leftover_spared() {
    let (tmp, data, file) = exported_world();
    let target = tmp.path().join("target");
    let staging = leave_killed_restore(&target, &data);
    let restore = ["snapshot", "restore", "--in", file.to_str().unwrap(), "--data-dir", target.to_str().unwrap(), "--force"];
    let in_use = format!("the data directory {} is in use by another process", target.display());

    // A restore in progress holds the directory's lock (whatever its binary is called): a second
    // restore and a server are refused before they check or remove anything (a server that
    // removed the leftover and a restore started with it both succeeded before, the server then
    // serving the replaced database).
    let restoring = std::fs::File::open(&target).unwrap();
    restoring.try_lock().unwrap();
    let o = run(&restore);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(&in_use), "{}", stderr(&o));
    assert!(!stderr(&o).contains("snapshot read"), "refused before the file is read: {}", stderr(&o));
    let refused = App::start(Config::for_manifests(&repo().join("examples/world"), &target)).err().expect("refused");
    assert!(format!("{refused:#}").contains(&in_use), "{refused:#}");
    assert!(staging.join(storage::DB_FILE).exists(), "left alone");
    drop(restoring);

    // A running server holds it too: the restore is refused, the server's store untouched.
    let served = tmp.path().join("served");
    let app = synced(&served);
    let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(served.join(storage::DB_FILE)).unwrap());
    let before = inode();
    let served_restore = ["snapshot", "restore", "--in", file.to_str().unwrap(), "--data-dir", served.to_str().unwrap(), "--force"];
    let o = run(&served_restore);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("is in use by another process"), "{}", stderr(&o));
    assert_eq!(inode(), before, "the served database is not replaced");
    app.shutdown();

    // Once the lock is released (its process ended), the directory is a leftover.
    let o = run(&restore);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!staging.exists());
    assert_eq!(counts(&target), counts(&data));
}
