//! The README's configuration table lists every setting of `config::SETTINGS` with its
//! environment variable and default (the table is documentation derived from the one definition;
//! this keeps them from drifting).

#[test]
fn readme_lists_every_setting() {
    let readme = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let mut missing = Vec::new();
    for s in control_plane::config::SETTINGS {
        let found = if s.in_file {
            readme.lines().any(|l| l.starts_with(&format!("| `{}` | `{}` |", s.key, s.env)))
        } else {
            readme.lines().any(|l| l.starts_with('|') && l.contains(&format!("`{}`", s.env)))
        };
        if !found {
            missing.push(s.key);
        }
    }
    assert!(missing.is_empty(), "README configuration table lacks: {missing:?}");
}
