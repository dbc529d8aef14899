//! GraphQL endpoints (placeholder; replaced by the `query` integration).

/// The GraphQL routes (`/graphql/query`, `/graphql`).
pub fn routes(_store: storage::Store, _config: &crate::config::Config) -> poem::Route {
    poem::Route::new()
}

/// The GraphQL schema as SDL.
pub fn print_schema() -> String {
    String::new()
}
