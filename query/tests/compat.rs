//! Console compatibility suite: GraphQL documents as consoles send them (nested connections,
//! fragments on `SubscriptionInfo`, where/orderBy combinations), each with a viewer, mapped to a
//! committed JSON answer on the example world (`query/tests/compat/NAME.graphql` →
//! `NAME.json`). Refresh with `UPDATE_EXPECT=1 cargo test -p query --test compat` and review
//! the diff.

mod support;

use support::{admin, group_viewer, team_viewer, World};

#[tokio::test]
async fn console_queries_answer_as_committed() {
    let w = World::load();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat");
    let mut files: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "graphql")).collect();
    files.sort();
    assert!(files.len() >= 5);
    for path in files {
        let doc = std::fs::read_to_string(&path).unwrap();
        let header = doc.lines().next().unwrap().trim_start_matches("# viewer:").trim().to_string();
        let parts: Vec<&str> = header.split_whitespace().collect();
        let viewer = match parts.as_slice() {
            ["admin"] => admin(),
            ["team", team, env] => team_viewer(team, env),
            ["group", group, env] => group_viewer(group, env),
            other => panic!("{}: unknown viewer header {other:?}", path.display()),
        };
        let answer = w.run(&viewer, &doc).await;
        assert!(answer.get("errors").is_none(), "{}: {answer:#}", path.display());
        let rendered = serde_json::to_string_pretty(&answer).unwrap() + "\n";
        expect_test::expect_file![path.with_extension("json")].assert_eq(&rendered);
    }
}
