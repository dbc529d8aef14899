//! Crash safety (issue 8, item 6): the process is killed with SIGKILL at arbitrary moments while
//! it projects and re-projects the world; after every kill the store opens and satisfies every
//! invariant (indexes, counters, sources), and the revision never goes backwards. redb commits
//! each batch durably, so a kill loses at most the batch in flight — never consistency.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

#[test]
fn sigkill_at_any_moment_leaves_a_consistent_store() {
    let tmp = tempfile::tempdir().unwrap();
    let world = tmp.path().join("world");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world"), &world);
    let data = tmp.path().join("data");
    let apps = world.join("04-applications.yaml");
    let original = std::fs::read_to_string(&apps).unwrap();
    let mut last_revision = 0;
    for round in 0..20u64 {
        // Alternate the manifests so that every start has something to write.
        let text = if round % 2 == 0 {
            original.clone()
        } else {
            original.replace("message: All sub-resources are up to date", &format!("message: round {round}"))
        };
        std::fs::write(&apps, text).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_control-plane"))
            .args(["serve", "--auth", "mock", "--listen", "127.0.0.1:0"])
            .arg("--manifests")
            .arg(&world)
            .arg("--data-dir")
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill somewhere between start-up and well after the initial load (deterministic
        // spread over 20..440 ms).
        std::thread::sleep(Duration::from_millis(20 + (round * 97) % 420));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let store = storage::Store::open(&data).expect("the store opens after a kill");
        let view = store.read().unwrap();
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new(), "round {round}");
        let revision = view.revision().unwrap();
        assert!(revision >= last_revision, "round {round}: revision went back from {last_revision} to {revision}");
        last_revision = revision;
    }
    assert!(last_revision > 0, "the runs wrote something");
}
