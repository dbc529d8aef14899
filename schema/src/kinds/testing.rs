//! Test helpers: objects from the bundled example world and a fixed translation context at the
//! world's reference time (`2026-09-01T00:00:00Z`, see `examples/world/FACTS.md`).

use crate::kind::{Context, Features};
use crate::time::Timestamp;

/// The translation context at the world's reference time, all features on.
pub fn ctx() -> Context {
    Context { now: Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap(), features: Features::default() }
}

/// The world document of `kind` in environment `env` named `name` (`namespace/name` also
/// accepted when names repeat across namespaces), deserialized into `T`.
pub fn world_object<T: serde::de::DeserializeOwned>(kind: &str, env: &str, name: &str) -> T {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for path in files.into_iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")) {
        let text = std::fs::read_to_string(&path).unwrap();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        for d in docs {
            let m = &d["metadata"];
            let full = format!("{}/{}", m["namespace"].as_str().unwrap_or(""), m["name"].as_str().unwrap_or(""));
            if d["kind"] == kind && m["labels"]["cp.ei.telekom.de/environment"] == env && (m["name"] == name || full == name) {
                return serde_json::from_value(d).unwrap_or_else(|e| panic!("{kind} {name}: {e}"));
            }
        }
    }
    panic!("no {kind} {name} in environment {env}");
}

/// Every world document of `kind`, in file order (files sorted by name).
pub fn world_objects(kind: &str) -> Vec<serde_json::Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut found = Vec::new();
    for path in files.into_iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")) {
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&std::fs::read_to_string(&path).unwrap()).unwrap();
        found.extend(docs.into_iter().filter(|d| d["kind"] == kind));
    }
    found
}
