//! ARCHITECTURE.md maps every workspace member (STYLE §1).

#[test]
fn every_workspace_member_has_a_section() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let arch = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let members_line = manifest.lines().find(|l| l.starts_with("members")).expect("workspace members line");
    let members: Vec<&str> = members_line.split('"').skip(1).step_by(2).collect();
    assert!(members.len() >= 5, "{members:?}");
    for m in members {
        assert!(arch.contains(&format!("## `{m}`")), "ARCHITECTURE.md has no section for workspace member `{m}`");
    }
}

#[test]
fn every_module_opens_with_a_doc_comment() {
    let mut missing = Vec::new();
    for path in rust_files_in(&["crds/src", "schema/src", "storage/src", "query/src", "control-plane/src"]) {
        let text = std::fs::read_to_string(&path).unwrap();
        if !text.trim_start().starts_with("//!") {
            missing.push(path.display().to_string());
        }
    }
    assert!(missing.is_empty(), "modules without a //! doc: {missing:?}");
}

/// Every Rust file under the given directories of the repository.
fn rust_files_in(dirs: &[&str]) -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut stack: Vec<_> = dirs.iter().map(|d| root.join(d)).collect();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// No hand-kept `unsafe` (issue 20): the library crates forbid it, and the one FFI call
/// (`control_plane::release_free_memory`, mimalloc's `mi_collect`) is the only `unsafe` block.
#[test]
fn the_library_crates_forbid_unsafe_and_one_ffi_call_is_the_only_unsafe_block() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for krate in ["crds", "schema", "storage", "query"] {
        let lib = std::fs::read_to_string(root.join(krate).join("src/lib.rs")).unwrap();
        assert!(lib.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]"), "{krate}/src/lib.rs does not forbid unsafe code");
    }
    // Spelled in pieces so that this file does not match itself.
    let keyword = concat!("un", "safe");
    let forms: Vec<String> = ["{", " {", " fn ", " impl ", " trait ", " extern "].iter().map(|f| format!("{keyword}{f}")).collect();
    let mut found = Vec::new();
    for path in rust_files_in(&["crds", "schema", "storage", "query", "control-plane", "tests", "benches"]) {
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if forms.iter().any(|f| code.contains(f.as_str())) {
                found.push(format!("{}:{}", path.strip_prefix(root).unwrap().display(), n + 1));
            }
        }
    }
    assert_eq!(found.len(), 1, "unsafe outside the one FFI call: {found:?}");
    assert!(found[0].starts_with("control-plane/src/lib.rs:"), "{found:?}");
}

/// Every kind the projector registers is served (issue 20): the SDL has its `Node` type, named
/// like the kind, and a root connection named after its plural (`ApiSubscription` →
/// `apiSubscriptions`).
#[test]
fn every_projected_kind_is_served() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let sdl = std::fs::read_to_string(root.join("query/schema.graphql")).unwrap();
    let query = &sdl[sdl.find("type Query {").expect("a Query type")..];
    let query = &query[..query.find("\n}").unwrap()];
    let mut missing = Vec::new();
    for kind in schema::registry::registered() {
        let name = kind.name();
        if !sdl.contains(&format!("type {name} implements Node")) {
            missing.push(format!("type {name}"));
        }
        let mut plural = name[..1].to_lowercase() + &name[1..];
        plural.push('s');
        if !query.lines().any(|l| l.trim_start().starts_with(&format!("{plural}(")) || l.trim_start().starts_with(&format!("{plural}:"))) {
            missing.push(format!("Query.{plural}"));
        }
    }
    assert!(missing.is_empty(), "projected kinds that are not served: {missing:?}");
}

/// Tests wait on the product's barriers (writer settle, readiness, revisions, metrics, log
/// lines), never on a fixed sleep (issue 20): no test file calls `sleep`, but the fake API
/// server's page latency. Source files count from their `#[cfg(test)]` module on.
#[test]
fn no_test_sleeps() {
    let needle = ["sle", "ep("].concat();
    let mut sleeping = Vec::new();
    for path in rust_files_in(&["tests", "crds", "schema", "storage", "query", "control-plane"]) {
        let text = std::fs::read_to_string(&path).unwrap();
        let in_src = path.components().any(|c| c.as_os_str() == "src") && !path.ends_with("tests.rs");
        let tests = if in_src { text.find("#[cfg(test)]").map_or("", |at| &text[at..]) } else { &text };
        for line in tests.lines() {
            // The fake API server's page latency stands for etcd's time to read a page: there,
            // a delay is the point (`FakeK8s::set_page_latency`).
            let page_latency =
                path.ends_with("tests/support/fake_k8s.rs") && line.trim() == ["tokio::time::", &needle, "latency).await;"].concat();
            if line.contains(&needle) && !line.trim_start().starts_with("//") && !page_latency {
                sleeping.push(format!("{}: {}", path.display(), line.trim()));
            }
        }
    }
    assert!(sleeping.is_empty(), "tests that sleep: {sleeping:#?}");
}
