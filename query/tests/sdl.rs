//! The served schema is committed as `query/schema.graphql`; this test fails when they differ.
//! Refresh with `UPDATE_SDL=1 cargo test -p query --test sdl`.

#[test]
fn committed_sdl_matches_the_served_schema() {
    let served = query::build_schema(query::QueryConfig::default()).unwrap().sdl();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("schema.graphql");
    if std::env::var_os("UPDATE_SDL").is_some() {
        std::fs::write(&path, &served).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == served,
        "query/schema.graphql differs from the served schema; run UPDATE_SDL=1 cargo test -p query --test sdl and review the diff"
    );
    for name in ["type Query", "applications(", "apiSubscriptions(", "approvals(", "node(id: ID!): Node", "interface SubscriptionInfo"] {
        assert!(served.contains(name), "schema lacks {name}");
    }
}
