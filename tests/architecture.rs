//! Tidy tests: ARCHITECTURE.md maps every workspace member, and the rules it states hold in the
//! code (module docs, `unsafe`, served kinds, no sleeping tests, no reference that leaves the
//! repository).

#[path = "support/generated.rs"]
mod generated;

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
    files_in(dirs, |path| path.extension().is_some_and(|e| e == "rs"))
}

/// Every file under the given directories of the repository that `keep` keeps, build output
/// (`target/`) and Git's own directory left out.
fn files_in(dirs: &[&str], keep: impl Fn(&std::path::Path) -> bool) -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let mut stack: Vec<_> = dirs.iter().map(|d| root.join(d)).collect();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if !path.file_name().is_some_and(|n| n == "target" || n == ".git") {
                    stack.push(path);
                }
            } else if keep(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// No hand-kept `unsafe`: the library crates forbid it, and the two calls into the allocator
/// (`control_plane::release_free_memory`, mimalloc's `mi_collect`, and
/// `control_plane::configure_allocator`, its `mi_option_set`) are the only `unsafe` blocks.
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
    assert_eq!(found.len(), 2, "unsafe outside the two calls into the allocator: {found:?}");
    let lib = std::fs::read_to_string(root.join("control-plane/src/lib.rs")).unwrap();
    for at in &found {
        let line: usize = at.strip_prefix("control-plane/src/lib.rs:").and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{found:?}"));
        let call = lib.lines().nth(line).unwrap_or("");
        assert!(call.trim_start().starts_with("libmimalloc_sys::"), "{at}: not a call into the allocator: {call}");
    }
}

/// Every kind the projector registers is served: the SDL has its `Node` type, named
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
/// lines), never on a fixed sleep: no test file calls `sleep`, but the fake API
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
            // A call named in a string (a tidy rule's table) is not a call.
            let called = line.match_indices(&needle).any(|(at, _)| line[..at].matches('"').count() % 2 == 0);
            if called && !line.trim_start().starts_with("//") && !page_latency {
                sleeping.push(format!("{}: {}", path.display(), line.trim()));
            }
        }
    }
    assert!(sleeping.is_empty(), "tests that sleep: {sleeping:#?}");
}

/// Files that keep their references to places outside the repository because they are verbatim
/// copies of text kept elsewhere: a path, or a prefix ending in `/` or a name's start, and why.
const VERBATIM_COPIES: &[(&str, &str)] = &[
    ("examples/world/", "the bundled world, copied byte for byte from the ControlPlane fixtures, README included"),
    ("tests/fixtures/samples/", "sample objects and their notes, copied byte for byte from the ControlPlane fixtures"),
    ("tests/fixtures/stores/layout", "what earlier builds wrote, with the world of their day: never rewritten"),
    ("tools/genworld/genworld.py", "the vendored world generator, verbatim (tools/genworld/README.md)"),
    ("tools/genworld/cpfixtures.py", "the world generator's vendored import, verbatim"),
];

/// The repository stands on its own: no tracked text file refers to a document or file outside
/// it (the design notes, style notes and reference descriptions it was written with, the shared
/// fixtures' checkout, a machine's absolute paths) or to an issue tracker a reader does not have
/// ("issue" followed by a number), nor to a numbered section of a document it does not hold; a
/// Markdown link or code path does not climb above the repository's root. State the reason in
/// place, or cite ARCHITECTURE.md by section.
#[test]
fn no_reference_leaves_the_repository() {
    // Spelled in pieces so that this file does not match itself.
    let needles: Vec<String> = [
        ["..", "/shared"],
        ["shared/", "spec"],
        ["shared/", "fixtures"],
        ["shared/", "tools"],
        ["shared/", "seeds"],
        ["/wo", "rk/"],
        ["DESIGN", ".md"],
        ["DESIGN", " decision"],
        ["DESIGN", " \""],
        ["DESIGN", " §"],
        ["STYLE", " §"],
        ["STYLE", ".md"],
        ["reference", "-graphql"],
        ["reference", "-projector"],
    ]
    .iter()
    .map(|p| p.concat())
    .collect();
    let exempt = |path: &str| VERBATIM_COPIES.iter().any(|(prefix, _)| path.starts_with(prefix));
    let files = tracked_files();
    let mut found = Vec::new();
    for path in &files {
        let Some(text) = text_of(path) else { continue };
        let markdown = path.ends_with(".md");
        let mut hits = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let mut why: Vec<String> = needles.iter().filter(|s| line.contains(s.as_str())).map(|s| format!("`{s}`")).collect();
            if names_an_issue(line) {
                why.push("an issue number".to_string());
            }
            if names_a_numbered_section(line) {
                why.push("a numbered section of a document not here".to_string());
            }
            if markdown {
                why.extend(paths_above_the_root(path, line).into_iter().map(|p| format!("`{p}` leaves the repository")));
            }
            if !why.is_empty() {
                hits.push(format!("{path}:{}: {} — {}", n + 1, why.join(", "), line.trim()));
            }
        }
        if !exempt(path) {
            found.extend(hits);
        }
    }
    assert!(
        found.is_empty(),
        "references to places outside the repository (state the reason in place, or cite ARCHITECTURE.md by section):\n{}",
        found.join("\n")
    );
    for (prefix, why) in VERBATIM_COPIES {
        assert!(files.iter().any(|f| f.starts_with(prefix)), "VERBATIM_COPIES names `{prefix}` ({why}), which no file matches");
    }
}

/// The repository's files, relative to its root: the ones Git tracks, or, outside a Git
/// checkout (a source archive), every file but build output.
fn tracked_files() -> Vec<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = std::process::Command::new("git").arg("-C").arg(root).args(["ls-files", "-z"]).output();
    match listed {
        Ok(out) if out.status.success() => {
            String::from_utf8(out.stdout).unwrap().split('\0').filter(|p| !p.is_empty()).map(str::to_string).collect()
        }
        _ => files_in(&[""], |_| true).iter().map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned()).collect(),
    }
}

/// A file's text, or `None` for a binary file (not UTF-8, or holding a NUL) or one that is gone
/// from the working tree.
fn text_of(path: &str) -> Option<String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(root.join(path)).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// Whether `line` names an issue by number: "issue" or "issues" (any case, as a word), a space,
/// then a digit or `#` and a digit.
fn names_an_issue(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(at) = lower[from..].find("issue") {
        let start = from + at;
        from = start + 5;
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        let mut i = from;
        if bytes.get(i) == Some(&b's') {
            i += 1;
        }
        if bytes.get(i) != Some(&b' ') {
            continue;
        }
        i += 1;
        if bytes.get(i) == Some(&b'#') {
            i += 1;
        }
        if bytes.get(i).is_some_and(u8::is_ascii_digit) {
            return true;
        }
    }
    false
}

/// Whether `line` cites a numbered section (a section sign and a digit): this repository's
/// documents are cited by their headings.
fn names_a_numbered_section(line: &str) -> bool {
    line.match_indices('§').any(|(at, sign)| line[at + sign.len()..].trim_start_matches(' ').starts_with(|c: char| c.is_ascii_digit()))
}

/// The relative link targets and code paths of a Markdown line (`](…)`, `` `../…` ``) that
/// climb above the repository's root from the directory of `file`.
fn paths_above_the_root(file: &str, line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for (open, close) in [("](", ')'), ("`", '`')] {
        let mut rest = line;
        while let Some(at) = rest.find(open) {
            let after = &rest[at + open.len()..];
            let Some(end) = after.find(close) else { break };
            let target = &after[..end];
            if open == "](" || target.starts_with("../") {
                targets.push(target.to_string());
            }
            rest = &after[end + close.len_utf8()..];
        }
    }
    targets.retain(|t| {
        if t.contains("://") || t.starts_with('#') || t.starts_with('/') || t.starts_with("mailto:") {
            return false;
        }
        // Depth below the root of the directory the file is in, then of each step of the path.
        let mut depth = file.matches('/').count() as i64;
        for step in t.split(['/', '#', '?']).take_while(|s| !s.contains(' ')) {
            match step {
                ".." => depth -= 1,
                "" | "." => {}
                _ => depth += 1,
            }
            if depth < 0 {
                return true;
            }
        }
        false
    });
    targets
}

#[test]
fn the_reference_check_sees_what_it_must() {
    let issue = ["iss", "ue"].concat();
    assert!(names_an_issue(&format!("as {issue} 8 said")));
    assert!(names_an_issue(&format!("({}s 18, 20)", issue.to_uppercase())));
    assert!(names_an_issue(&format!("{issue} #12")));
    assert!(!names_an_issue(&format!("a t{issue} 3")));
    assert!(!names_an_issue(&format!("the {issue} is 3 ms")));
    assert!(names_a_numbered_section(&format!("per {}1.1", '§')));
    assert!(!names_a_numbered_section("no section here"));
    let up = ["..", "/"].concat();
    assert_eq!(paths_above_the_root("README.md", &format!("see [x]({up}x/y.md)")), vec![format!("{up}x/y.md")]);
    assert_eq!(paths_above_the_root("a/README.md", &format!("see `{up}crds/`")), Vec::<String>::new());
    assert_eq!(paths_above_the_root("a/README.md", &format!("see `{up}{up}x`")), vec![format!("{up}{up}x")]);
    assert!(paths_above_the_root("a/b.md", "[BENCHMARKS.md](../BENCHMARKS.md) and [web](https://x/../../y)").is_empty());
}

// ---------------------------------------------------------------------------------------------
// The layering, read from the manifests (`cargo metadata`) and the production sources.
// ---------------------------------------------------------------------------------------------

/// The workspace crates each crate may depend on (normal dependencies): the layering of
/// ARCHITECTURE.md, one way, no upward edge.
const CRATE_EDGES: &[(&str, &[&str])] = &[
    ("crds", &[]),
    ("schema", &["crds"]),
    ("storage", &["schema"]),
    ("query", &["schema", "storage"]),
    ("control-plane", &["crds", "schema", "storage", "query"]),
];

/// Libraries that do I/O (files, network, a runtime), which `schema` — pure types and
/// translation — must not depend on.
const IO_CRATES: &[&str] = &["tokio", "reqwest", "hyper", "hyper-util", "redb", "tantivy", "poem", "fs4", "async-graphql-poem"];

/// The standard library's I/O, which `schema`'s production code must not use.
const STD_IO_PATHS: &[&str] = &["std::fs", "std::net", "std::process", "std::env", "std::io::Read", "std::io::Write", "tokio::"];

/// Where the Kubernetes client (kube's `client` and `runtime` features, not the API types
/// `crds` and `schema` use) lives: the kube source and the mutations' writes, as ARCHITECTURE.md
/// says.
const KUBE_CLIENT_FILES: &[&str] = &["control-plane/src/source/kube.rs", "control-plane/src/source/kube/", "control-plane/src/commands.rs"];

/// The Kubernetes client's paths in code.
const KUBE_CLIENT_PATHS: &[&str] = &["kube::Client", "kube::Api", "kube::api::", "kube::runtime", "kube::Config", "watcher::"];

/// The waits of production code, each with why no channel or library backoff serves instead:
/// (file, the call's start, why). Any other sleep is a violation.
const ALLOWED_WAITS: &[(&str, &str, &str)] = &[
    (
        "control-plane/src/auth/jwks.rs",
        "tokio::time::sleep(delay)",
        "the key refresh's schedule (its stop signal waits in the same select)",
    ),
    (
        "control-plane/src/http/server.rs",
        "tokio::time::sleep(Duration::from_millis(10))",
        "accepting failed (out of descriptors): no event tells when one is free",
    ),
    ("control-plane/src/projector/writer.rs", "std::thread::sleep(FAULT_POLL", "a full volume: no event tells when space is freed"),
    ("control-plane/src/source/kube.rs", "tokio::time::sleep(delay)", "a restart of an ended watch, spaced by kube-rs's DefaultBackoff"),
];

/// One crate of `cargo metadata`: its name and normal dependencies (name, enabled features).
struct Manifest {
    name: String,
    dependencies: Vec<(String, Vec<String>)>,
}

/// The workspace's crates, from `cargo metadata` (offline, no dependency resolution).
fn manifests() -> Vec<Manifest> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let strings = |v: &serde_json::Value| v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect::<Vec<_>>();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| Manifest {
            name: p["name"].as_str().unwrap().to_string(),
            dependencies: p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| (d["name"].as_str().unwrap().to_string(), strings(&d["features"])))
                .collect(),
        })
        .collect()
}

/// One production source file: its path relative to the repository root and its code without
/// test code.
struct Source {
    path: String,
    code: String,
}

/// The text without `#[cfg(test)]` items (a module, function, `use` or `impl` each), and the
/// names of the modules those items declare by file (`#[cfg(test)] mod name;`).
fn without_test_code(text: &str) -> (String, Vec<String>) {
    let mut code = String::new();
    let mut test_modules = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            code.push_str(line);
            code.push('\n');
            continue;
        }
        // Skip the item: one line ending in `;`, or up to its closing brace.
        let mut depth = 0i64;
        for item in lines.by_ref() {
            let trimmed = item.trim();
            if depth == 0 && trimmed.starts_with("#[") {
                continue;
            }
            if depth == 0 && trimmed.ends_with(';') {
                if let Some(name) = trimmed.trim_start_matches("pub(crate) ").trim_start_matches("pub ").strip_prefix("mod ") {
                    test_modules.push(name.trim_end_matches(';').to_string());
                }
                break;
            }
            depth += item.matches('{').count() as i64 - item.matches('}').count() as i64;
            if depth <= 0 && item.contains('}') {
                break;
            }
        }
    }
    (code, test_modules)
}

/// The production code of the library crates and the binary: test files (`tests.rs`, modules
/// declared under `#[cfg(test)]`) left out, test items cut.
fn production_sources() -> Vec<Source> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut test_only: Vec<std::path::PathBuf> = Vec::new();
    let mut all = Vec::new();
    for path in rust_files_in(&["crds/src", "schema/src", "storage/src", "query/src", "control-plane/src"]) {
        let (code, test_modules) = without_test_code(&std::fs::read_to_string(&path).unwrap());
        let owner = match path.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs" | "main.rs") => path.parent().unwrap().to_path_buf(),
            _ => path.with_extension(""),
        };
        for m in test_modules {
            test_only.push(owner.join(format!("{m}.rs")));
            test_only.push(owner.join(m));
        }
        all.push((path, code));
    }
    all.into_iter()
        .filter(|(path, _)| !test_only.iter().any(|t| path.starts_with(t)) && path.file_name().is_none_or(|n| n != "tests.rs"))
        .map(|(path, code)| Source { path: path.strip_prefix(root).unwrap().display().to_string(), code })
        .collect()
}

/// Each line of `code` without its `//` comment.
fn code_lines(code: &str) -> impl Iterator<Item = (usize, &str)> {
    code.lines().enumerate().map(|(n, l)| (n + 1, l.split("//").next().unwrap_or("")))
}

/// Every break of the layering rules in `manifests` and `sources`, one line each.
fn layering_violations(manifests: &[Manifest], sources: &[Source], architecture: &str) -> Vec<String> {
    let mut out = Vec::new();
    let members: Vec<&str> = CRATE_EDGES.iter().map(|(c, _)| *c).collect();
    for m in manifests.iter().filter(|m| members.contains(&m.name.as_str())) {
        let allowed = CRATE_EDGES.iter().find(|(c, _)| *c == m.name).unwrap().1;
        for (dep, features) in &m.dependencies {
            if members.contains(&dep.as_str()) && !allowed.contains(&dep.as_str()) {
                out.push(format!("crate edge {} → {dep} is not in the layering", m.name));
            }
            if m.name == "schema" && IO_CRATES.contains(&dep.as_str()) {
                out.push(format!("schema depends on {dep}, which does I/O"));
            }
            if dep == "anyhow" && m.name != "control-plane" {
                out.push(format!("{} depends on anyhow (only control-plane does; libraries return typed errors)", m.name));
            }
            if dep == "kube" && m.name != "control-plane" && features.iter().any(|f| f == "client" || f == "runtime") {
                out.push(format!("{} enables kube's client ({features:?}); only control-plane holds the Kubernetes client", m.name));
            }
        }
    }
    let invariant = architecture.split("**Invariant: the Kubernetes client lives").nth(1).map(|t| t.split("\n- **").next().unwrap_or(t));
    for file in KUBE_CLIENT_FILES {
        let named = format!("`{}`", file.trim_start_matches("control-plane/src/"));
        if !invariant.is_some_and(|t| t.contains(&named)) {
            out.push(format!("ARCHITECTURE.md does not say that the Kubernetes client lives in {file} (its invariant names {named})"));
        }
    }
    let keyword = concat!("un", "safe");
    for s in sources {
        let krate = s.path.split('/').next().unwrap_or("");
        for (n, line) in code_lines(&s.code) {
            let at = format!("{}:{n}", s.path);
            if krate == "schema" {
                if let Some(p) = STD_IO_PATHS.iter().find(|p| line.contains(*p)) {
                    out.push(format!("{at}: schema does no I/O, but uses {p}"));
                }
            }
            if krate != "control-plane" && line.contains("anyhow") {
                out.push(format!("{at}: anyhow outside control-plane"));
            }
            if let Some(p) = KUBE_CLIENT_PATHS.iter().find(|p| line.contains(*p)) {
                if !KUBE_CLIENT_FILES.iter().any(|f| s.path.starts_with(f)) {
                    out.push(format!("{at}: the Kubernetes client ({p}) outside {KUBE_CLIENT_FILES:?}"));
                }
            }
            if line.contains(&format!("{keyword} {{")) && !(s.path == "control-plane/src/lib.rs" && line.contains("mi_collect")) {
                let allowed = s.code.lines().nth(n.saturating_sub(2)).is_some_and(|prev| prev.contains("allow(unsafe_code)"));
                if !allowed || s.path != "control-plane/src/lib.rs" {
                    out.push(format!("{at}: {keyword} outside the calls into the allocator"));
                }
            }
            if line.contains("thread::sleep(") || line.contains("time::sleep(") || line.contains("yield_now(") {
                let allowed = ALLOWED_WAITS.iter().any(|(file, call, _)| s.path == *file && line.contains(call));
                if !allowed {
                    out.push(format!(
                        "{at}: a sleep or poll in production code (wait on a channel, or use the library's backoff): {}",
                        line.trim()
                    ));
                }
            }
        }
    }
    for (root_file, attribute) in
        [("control-plane/src/lib.rs", "#![deny(unsafe_code)]"), ("control-plane/src/main.rs", "#![forbid(unsafe_code)]")]
    {
        if !sources.iter().any(|s| s.path == root_file && s.code.lines().any(|l| l.trim() == attribute)) {
            out.push(format!("{root_file} lacks {attribute}"));
        }
    }
    out
}

/// The layering holds in the manifests and the production code: crate edges one way, no I/O in
/// `schema`, `anyhow` only in `control-plane`, the Kubernetes client only where ARCHITECTURE.md
/// says, `unsafe` only in the calls into the allocator (the crate denies it elsewhere), and no sleep or
/// polling loop where a channel or the library's backoff serves ([`ALLOWED_WAITS`] lists the
/// waits that remain, with their reasons).
#[test]
fn production_code_keeps_the_layering() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let sources = production_sources();
    assert!(sources.len() > 50 && sources.iter().any(|s| s.path == "control-plane/src/source/kube.rs"), "the sources are read");
    assert!(!sources.iter().any(|s| s.path.ends_with("kube/tests.rs") || s.path.ends_with("kinds/testing.rs")), "test files are left out");
    let violations = layering_violations(&manifests(), &sources, &architecture);
    assert!(violations.is_empty(), "the layering is broken:\n{}", violations.join("\n"));
    for (file, call, why) in ALLOWED_WAITS {
        let used = sources.iter().any(|s| s.path == *file && s.code.contains(call));
        assert!(used, "ALLOWED_WAITS names `{call}` in {file} ({why}), which is no longer there: remove it");
    }
}

/// One break of a layering rule: what it is, the manifests and sources with it, ARCHITECTURE.md,
/// and the violation expected.
type LayeringCase<'a> = (&'a str, Vec<Manifest>, Vec<Source>, String, &'a str);

/// Each rule of [`production_code_keeps_the_layering`] catches its break: the real manifests
/// and sources, each with one violation added.
#[test]
fn each_layering_rule_catches_its_break() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let keyword = concat!("un", "safe");
    let with_dependency = |krate: &str, dep: &str, features: &[&str]| {
        let mut m = manifests();
        let target = m.iter_mut().find(|m| m.name == krate).unwrap();
        target.dependencies.push((dep.to_string(), features.iter().map(|f| f.to_string()).collect()));
        m
    };
    let with_line = |path: &str, line: &str| {
        let mut s = production_sources();
        s.iter_mut().find(|s| s.path == path).unwrap_or_else(|| panic!("{path}")).code.push_str(&format!("{line}\n"));
        s
    };
    let cases: Vec<LayeringCase> = vec![
        ("an upward crate edge", with_dependency("storage", "query", &[]), production_sources(), architecture.clone(), "storage → query"),
        (
            "I/O in schema's manifest",
            with_dependency("schema", "tokio", &[]),
            production_sources(),
            architecture.clone(),
            "schema depends on tokio",
        ),
        (
            "I/O in schema's code",
            manifests(),
            with_line("schema/src/kind.rs", "fn f() { std::fs::read(\"x\"); }"),
            architecture.clone(),
            "uses std::fs",
        ),
        (
            "anyhow in a library",
            with_dependency("query", "anyhow", &[]),
            production_sources(),
            architecture.clone(),
            "query depends on anyhow",
        ),
        (
            "anyhow in a library's code",
            manifests(),
            with_line("storage/src/lib.rs", "fn f() -> anyhow::Result<()> { Ok(()) }"),
            architecture.clone(),
            "anyhow outside",
        ),
        (
            "kube's client in a library",
            with_dependency("storage", "kube", &["client"]),
            production_sources(),
            architecture.clone(),
            "enables kube's client",
        ),
        (
            "the client elsewhere",
            manifests(),
            with_line("control-plane/src/app.rs", "fn f(c: kube::Client) {}"),
            architecture.clone(),
            "the Kubernetes client",
        ),
        (
            "an undocumented client file",
            manifests(),
            production_sources(),
            architecture.replace("and `commands.rs` (the mutations' writes)", ""),
            "ARCHITECTURE.md does not say",
        ),
        (
            "unsafe",
            manifests(),
            with_line("control-plane/src/app.rs", &format!("fn f() {{ {keyword} {{ }} }}")),
            architecture.clone(),
            "outside the calls into the allocator",
        ),
        (
            "a polling sleep",
            manifests(),
            with_line("storage/src/lib.rs", "fn f() { std::thread::sleep(std::time::Duration::from_millis(5)); }"),
            architecture.clone(),
            "a sleep or poll",
        ),
        (
            "no deny",
            manifests(),
            {
                let mut s = production_sources();
                let lib = s.iter_mut().find(|s| s.path == "control-plane/src/lib.rs").unwrap();
                lib.code = lib.code.replace("#![deny(unsafe_code)]", "");
                s
            },
            architecture.clone(),
            "lacks #![deny(unsafe_code)]",
        ),
    ];
    for (what, manifests, sources, architecture, expected) in cases {
        let violations = layering_violations(&manifests, &sources, &architecture);
        assert!(violations.iter().any(|v| v.contains(expected)), "{what}: expected a violation with {expected:?}, got {violations:?}");
        println!("{what}: {}", violations.join("; "));
    }
}

/// Test code is cut from production sources: `#[cfg(test)]` modules, functions and `mod name;`.
#[test]
fn test_code_is_cut_from_production_sources() {
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn b() { if x { y } }\n}\nfn c() {}\n#[cfg(test)]\nmod testing;\n#[cfg(test)]\n#[allow(dead_code)]\nfn d() {\n}\nfn e() {}\n";
    let (code, modules) = without_test_code(text);
    assert_eq!(code, "fn a() {}\nfn c() {}\nfn e() {}\n");
    assert_eq!(modules, vec!["testing".to_string()]);
}

/// Snapshot tests refresh with one variable, expect-test's `UPDATE_EXPECT`: no test reads
/// another `UPDATE_*` variable.
#[test]
fn snapshot_tests_refresh_with_one_variable() {
    let reads = ["var_os(\"", "var(\""];
    let mut others = Vec::new();
    for path in rust_files_in(&["tests", "crds", "schema", "storage", "query", "control-plane", "benches"]) {
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            for read in reads {
                for (at, _) in line.match_indices(read) {
                    let name: String = line[at + read.len()..].chars().take_while(|c| *c != '"').collect();
                    if name.contains("UPDATE") && name != "UPDATE_EXPECT" {
                        others.push(format!("{}:{}: {name}", path.display(), n + 1));
                    }
                }
            }
        }
    }
    assert!(others.is_empty(), "snapshot update variables other than UPDATE_EXPECT: {others:?}");
}

/// Hand-written functions longer than [`MAX_FUNCTION_LINES`] today, with their length: each may
/// shrink or go, none may grow, and no other function may pass the bound (split it, or take a
/// parameter struct). Tables (one entry a line) are listed as such.
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[
    // A table: one metric a few lines.
    ("control-plane/src/metrics.rs", "new", 139),
    // A table: one GraphQL value type a few lines.
    ("query/src/kinds/values.rs", "register", 189),
];

/// The longest a hand-written function may be, in lines (signature to closing brace).
const MAX_FUNCTION_LINES: usize = 80;

/// Every function of the production sources (`#[cfg(test)]` items left out): file, name and
/// length in lines, read by syn.
fn function_lengths() -> Vec<(String, String, usize)> {
    use syn::visit::Visit;
    struct Lengths<'a> {
        file: &'a str,
        out: Vec<(String, String, usize)>,
    }
    fn is_test(attrs: &[syn::Attribute]) -> bool {
        attrs.iter().any(|a| a.path().is_ident("cfg") && a.meta.require_list().is_ok_and(|l| l.tokens.to_string() == "test"))
    }
    /// From `fn` to the closing brace of the body.
    fn lines(sig: &syn::Signature, body: &syn::Block) -> usize {
        body.brace_token.span.close().end().line - sig.fn_token.span.start().line + 1
    }
    impl<'ast> Visit<'ast> for Lengths<'_> {
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            if !is_test(&m.attrs) {
                syn::visit::visit_item_mod(self, m);
            }
        }
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            if !is_test(&f.attrs) {
                self.out.push((self.file.to_string(), f.sig.ident.to_string(), lines(&f.sig, &f.block)));
                syn::visit::visit_item_fn(self, f);
            }
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            if !is_test(&f.attrs) {
                self.out.push((self.file.to_string(), f.sig.ident.to_string(), lines(&f.sig, &f.block)));
                syn::visit::visit_impl_item_fn(self, f);
            }
        }
        fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
            if !is_test(&i.attrs) {
                syn::visit::visit_item_impl(self, i);
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for source in production_sources() {
        let text = std::fs::read_to_string(root.join(&source.path)).unwrap();
        let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", source.path));
        let mut lengths = Lengths { file: &source.path, out: Vec::new() };
        lengths.visit_file(&file);
        out.extend(lengths.out);
    }
    out
}

/// No hand-written function grows past [`MAX_FUNCTION_LINES`]: the ones that are longer today
/// are listed in [`LONG_FUNCTIONS`] with their length, which they may not pass.
#[test]
fn no_function_grows_past_eighty_lines() {
    let functions = function_lengths();
    assert!(functions.len() > 500, "the sources are read: {} functions", functions.len());
    let mut found = Vec::new();
    for (file, name, lines) in &functions {
        let listed = LONG_FUNCTIONS.iter().find(|(f, n, _)| f == file && n == name);
        match listed {
            Some((_, _, max)) if lines <= max => {}
            Some((_, _, max)) => found.push(format!("{file}: fn {name} grew to {lines} lines (listed at {max})")),
            None if *lines > MAX_FUNCTION_LINES => found.push(format!("(\"{file}\", \"{name}\", {lines}),")),
            None => {}
        }
    }
    assert!(found.is_empty(), "functions longer than {MAX_FUNCTION_LINES} lines (split them):\n{}", found.join("\n"));
    for (file, name, max) in LONG_FUNCTIONS {
        assert!(
            functions.iter().any(|(f, n, lines)| f == file && n == name && *lines > MAX_FUNCTION_LINES),
            "LONG_FUNCTIONS lists {file}: fn {name} ({max} lines), which is now short or gone: remove it"
        );
    }
}

/// The README's table of kinds: one row per row of the table of kinds, in its order.
fn expected_kinds_table() -> String {
    let mut table = String::from("| kind | resource | family | switched off by | parents | `Query` field |\n|---|---|---|---|---|---|\n");
    for kind in schema::KindId::TABLE_ORDER {
        let feature = kind.feature().map_or("—".to_string(), |f| format!("`FEATURE_{}_ENABLED`", f.to_uppercase()));
        let parents = kind.parents().iter().map(|p| p.name()).collect::<Vec<_>>().join(", ");
        let name = kind.name();
        let root = format!("{}{}s", name[..1].to_lowercase(), &name[1..]);
        table.push_str(&format!(
            "| `{name}` | `{}.{}/v1` | {:?} | {feature} | {} | `{root}` |\n",
            kind.plural(),
            kind.group(),
            kind.family(),
            if parents.is_empty() { "—" } else { &parents },
        ));
    }
    table
}

/// The README's table of kinds is generated from the table of kinds; `UPDATE_EXPECT=1` rewrites it.
#[test]
fn readme_kinds_table_is_generated_from_the_table_of_kinds() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("README.md");
    let expected = expected_kinds_table();
    generated::assert_generated_block(
        &path,
        "<!-- kinds-table:begin -->\n",
        "<!-- kinds-table:end -->",
        &expected,
        "architecture readme_kinds_table",
    );
}

/// Circles of files that import each other, found when the one-way rule came and kept for
/// later: each may only shrink, and none may appear in `crds` or `query`.
const KNOWN_CIRCLES: &[&[&str]] = &[
    &[
        "storage/src/checkpoint.rs",
        "storage/src/documents.rs",
        "storage/src/rebuild.rs",
        "storage/src/sync.rs",
        "storage/src/tables.rs",
        "storage/src/versions.rs",
        "storage/src/write.rs",
    ],
    &["schema/src/common.rs", "schema/src/keys.rs", "schema/src/kind.rs"],
    &[
        "control-plane/src/check.rs",
        "control-plane/src/cli.rs",
        "control-plane/src/config/mod.rs",
        "control-plane/src/projector/handlers.rs",
        "control-plane/src/projector/retry.rs",
        "control-plane/src/projector/writer.rs",
        "control-plane/src/source/manifests.rs",
    ],
    &["control-plane/src/http/graphql.rs", "control-plane/src/http/subscriptions.rs"],
    &["control-plane/src/app.rs", "control-plane/src/http/mod.rs"],
];

/// The crate directory (`query/src`) and module path (`["kinds", "common"]`) of a source file.
fn module_of(path: &str) -> (String, Vec<String>) {
    let (crate_dir, rest) = path.split_once("/src/").expect("a file under <crate>/src/");
    let mut parts: Vec<String> = rest.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    (format!("{crate_dir}/src"), parts)
}

/// The files each source imports from its own crate (`crate::…` and `super::…` paths, `use`
/// groups included), by the longest module path they name. The crate root is left out: it
/// declares every module.
fn file_imports(sources: &[Source]) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let modules: std::collections::HashMap<(String, Vec<String>), String> =
        sources.iter().map(|s| (module_of(&s.path), s.path.clone())).collect();
    let mut imports = std::collections::BTreeMap::new();
    for source in sources {
        let (crate_dir, me) = module_of(&source.path);
        let parent: Vec<String> = me[..me.len().saturating_sub(1)].to_vec();
        let code: String = code_lines(&source.code).map(|(_, l)| format!("{l}\n")).collect();
        let mut targets = std::collections::BTreeSet::new();
        for (base, prefix) in [("crate::", Vec::new()), ("super::", parent)] {
            for (at, _) in code.match_indices(base) {
                if at > 0 && code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let rest = &code[at + base.len()..];
                // One path, or each first segment of a `{…}` group.
                let paths: Vec<Vec<String>> = if let Some(group) = rest.strip_prefix('{') {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    group.split(',').map(|p| p.trim().split("::").map(str::to_string).collect()).collect()
                } else {
                    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
                    vec![rest[..end].split("::").map(str::to_string).collect()]
                };
                for path in paths {
                    let full: Vec<String> = prefix.iter().cloned().chain(path.into_iter().filter(|p| !p.is_empty())).collect();
                    let target = (1..=full.len()).rev().find_map(|n| modules.get(&(crate_dir.clone(), full[..n].to_vec())));
                    if let Some(target) = target.filter(|t| **t != source.path) {
                        targets.insert(target.clone());
                    }
                }
            }
        }
        imports.insert(source.path.clone(), targets);
    }
    imports
}

/// The circles of `imports`: each set of two or more files that all reach each other.
fn import_circles(imports: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &String| {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(file) = stack.pop() {
            for next in imports.get(&file).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: std::collections::BTreeMap<&String, std::collections::BTreeSet<String>> = imports.keys().map(|f| (f, reach(f))).collect();
    let mut circles: Vec<Vec<String>> = Vec::new();
    for (file, from_it) in &reached {
        if circles.iter().any(|c| c.contains(file)) || !from_it.contains(*file) {
            continue;
        }
        circles.push(from_it.iter().filter(|other| reached[other].contains(*file)).cloned().collect());
    }
    circles
}

/// Modules import one way: no circle of files in `crds` and `query`, and elsewhere only the
/// [`KNOWN_CIRCLES`], which may only shrink.
#[test]
fn modules_import_one_way() {
    let circles = import_circles(&file_imports(&production_sources()));
    let grown: Vec<&Vec<String>> =
        circles.iter().filter(|c| !KNOWN_CIRCLES.iter().any(|known| c.iter().all(|f| known.contains(&f.as_str())))).collect();
    assert!(grown.is_empty(), "files that import each other (ARCHITECTURE.md, `query`: modules by job, imported one way): {grown:?}");
    assert!(KNOWN_CIRCLES.iter().all(|c| !c[0].starts_with("query/") && !c[0].starts_with("crds/")));
}

/// The circle finder sees a circle through `super::` and a `use crate::{…}` group, and none
/// where imports go one way.
#[test]
fn the_circle_finder_sees_what_it_must() {
    let source = |path: &str, code: &str| Source { path: path.to_string(), code: code.to_string() };
    let circle = [
        source("q/src/lib.rs", "mod a; mod b; mod kinds;"),
        source("q/src/a.rs", "use crate::{b::Thing, other};"),
        source("q/src/kinds/mod.rs", "pub mod k;"),
        source("q/src/kinds/k.rs", "fn f() { crate::a::g(); }"),
        source("q/src/b.rs", "use crate::kinds::k::X; // crate::a::not_this"),
    ];
    assert_eq!(import_circles(&file_imports(&circle)), vec![vec!["q/src/a.rs", "q/src/b.rs", "q/src/kinds/k.rs"]]);
    let one_way = [source("q/src/a.rs", "use super::b::Thing;"), source("q/src/b.rs", "fn f() {}"), source("q/src/lib.rs", "")];
    assert_eq!(file_imports(&one_way)["q/src/a.rs"], std::collections::BTreeSet::from(["q/src/b.rs".to_string()]));
    assert!(import_circles(&file_imports(&one_way)).is_empty());
}

/// The README's ClusterRole for the kube source: get/list/watch on every kind's group and
/// plural, one rule per API group (`control_plane::source::kube::rbac_rules`).
fn expected_cluster_role() -> String {
    let mut yaml = String::from(
        "```yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: controlplane-read-model\nrules:\n",
    );
    for (group, plurals) in control_plane::source::kube::rbac_rules(&schema::kind::Features::default()) {
        let resources = plurals.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", ");
        yaml.push_str(&format!("  - apiGroups: [{group:?}]\n    resources: [{resources}]\n    verbs: [\"get\", \"list\", \"watch\"]\n"));
    }
    yaml.push_str("```\n");
    yaml
}

/// The README's ClusterRole is generated from the table of kinds; `UPDATE_EXPECT=1` rewrites it.
#[test]
fn readme_cluster_role_is_generated_from_the_table_of_kinds() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let expected = expected_cluster_role();
    generated::assert_generated_block(
        &path,
        "<!-- cluster-role:begin -->\n",
        "<!-- cluster-role:end -->",
        &expected,
        "architecture readme_cluster_role",
    );
}
