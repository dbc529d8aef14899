//! Renders the missing entries of `nodes(ids:)` as `null` (as the Go server does: a list as
//! long as `ids`, `null` plus a `NOT_FOUND` error per unknown, malformed or invisible ID).
//!
//! async-graphql's dynamic schema resolves every element of a `[Node]` list as an interface
//! value and fails the whole list on a plain null. This extension catches exactly that failure
//! for elements of `[Node]` lists and yields `null` for the element; the element's `NOT_FOUND`
//! error has already been recorded by the `nodes` resolver.

use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextResolve, ResolveInfo};
use async_graphql::{ServerResult, Value};
use std::sync::Arc;

/// The extension factory (registered once on the schema).
pub struct NullableNodes;

impl ExtensionFactory for NullableNodes {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(NullableNodesExt)
    }
}

struct NullableNodesExt;

#[async_graphql::async_trait::async_trait]
impl Extension for NullableNodesExt {
    async fn resolve(&self, ctx: &ExtensionContext<'_>, info: ResolveInfo<'_>, next: NextResolve<'_>) -> ServerResult<Option<Value>> {
        let node_item = info.parent_type == "[Node]" && info.return_type == "Node";
        match next.run(ctx, info).await {
            Err(e) if node_item && e.message.starts_with("internal: invalid value for interface \"Node\"") => Ok(None),
            other => other,
        }
    }
}
