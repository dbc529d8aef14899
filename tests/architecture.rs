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
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for krate in ["crds", "schema", "storage", "query", "control-plane"] {
        let mut stack = vec![root.join(krate).join("src")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    if !text.trim_start().starts_with("//!") {
                        missing.push(path.display().to_string());
                    }
                }
            }
        }
    }
    assert!(missing.is_empty(), "modules without a //! doc: {missing:?}");
}
