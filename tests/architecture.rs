//! Tidy tests: ARCHITECTURE.md maps every workspace member, and the rules it states hold in the
//! code (module docs, `unsafe`, served kinds, no sleeping tests, no reference that leaves the
//! repository).

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

/// No hand-kept `unsafe`: the library crates forbid it, and the one FFI call
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
            if line.contains(&needle) && !line.trim_start().starts_with("//") && !page_latency {
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
