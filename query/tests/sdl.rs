//! The served schema is committed as `query/schema.graphql`; this test fails when they differ.
//! Refresh with `UPDATE_EXPECT=1 cargo test -p query --test sdl` and review the diff.

#[test]
fn committed_sdl_matches_the_served_schema() {
    let served = query::build_schema(query::QueryConfig::default()).unwrap().sdl();
    for name in ["type Query", "applications(", "apiSubscriptions(", "approvals(", "node(id: ID!): Node", "interface SubscriptionInfo"] {
        assert!(served.contains(name), "schema lacks {name}");
    }
    expect_test::expect_file!["../schema.graphql"].assert_eq(&served);
}
