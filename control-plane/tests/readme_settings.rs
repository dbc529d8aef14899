//! The README's configuration table lists every setting of `config::SETTINGS` with its
//! environment variable, its flag and default (the table is documentation derived from the one definition;
//! this keeps them from drifting).

#[test]
fn readme_lists_every_setting() {
    let readme = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let mut missing = Vec::new();
    for s in control_plane::config::SETTINGS {
        let found = if s.in_file {
            let flag = s.flag().expect("a setting of the file has a flag");
            readme.lines().any(|l| l.starts_with(&format!("| `{}` | `{}` | `{flag}` |", s.key, s.env)))
        } else {
            readme.lines().any(|l| l.starts_with('|') && l.contains(&format!("`{}`", s.env)))
        };
        if !found {
            missing.push(s.key);
        }
    }
    assert!(missing.is_empty(), "README configuration table lacks: {missing:?}");
}

/// The README's limits table names every limit checked before execution with its code and
/// setting, and every limit setting of `config::SETTINGS` (`graphql.max*`, `source.max*`).
#[test]
fn readme_limits_table_lists_every_limit() {
    let readme = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let section = &readme[readme.find("## Limits").expect("a Limits section")..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let rows: Vec<&str> = section.lines().filter(|l| l.starts_with("| ")).collect();
    for limit in query::limits::LIMITS {
        assert!(
            rows.iter().any(|r| r.contains(&format!("`{}`", limit.setting)) && r.contains(&format!("`{}`", limit.code))),
            "no row names {} with {}",
            limit.setting,
            limit.code
        );
    }
    for s in control_plane::config::SETTINGS.iter().filter(|s| s.key.starts_with("graphql.max") || s.key.starts_with("source.max")) {
        assert!(rows.iter().any(|r| r.contains(&format!("`{}` (`", s.key))), "no row for {}", s.key);
        assert!(rows.iter().any(|r| r.contains(&format!("`{}` (`{}`", s.key, s.default))), "{}: the default is {}", s.key, s.default);
    }
}
