//! Loads the documents of the bundled example world (`examples/world/`) for the per-kind tests.

#![allow(dead_code)]

use std::path::PathBuf;

/// The example world directory (`<repo>/examples/world`).
pub fn world_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/world")
}

/// Every document of `kind` in the world, as JSON values, in file order.
pub fn world_docs(kind: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(world_dir()).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for path in files.into_iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")) {
        let text = std::fs::read_to_string(&path).unwrap();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
        out.extend(docs.into_iter().filter(|d| d["kind"] == kind));
    }
    assert!(!out.is_empty(), "no {kind} documents in the world");
    out
}

/// Deserializes every document of `kind` into `T`, panicking with the document name on failure.
pub fn world_objects<T: serde::de::DeserializeOwned>(kind: &str) -> Vec<T> {
    world_docs(kind)
        .into_iter()
        .map(|d| {
            let name = format!("{}/{}", d["metadata"]["namespace"], d["metadata"]["name"]);
            serde_json::from_value(d).unwrap_or_else(|e| panic!("{kind} {name}: {e}"))
        })
        .collect()
}
