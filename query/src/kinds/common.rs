//! Helpers shared by the kinds' modules: the filterable mixins every kind with them
//! shares, as in the Go server (`statusPhase`, `statusMessage`, `environment`, `namespace`) and small value conversions.

use crate::column::Column;
use crate::connection::{connection_field, nested_rows, register_entity};
use crate::entity::{Builder, Entity};
use crate::fields::string;
use async_graphql::dynamic::FieldValue;
use schema::common::{Meta, Status};

/// `createdAt` and `lastModifiedAt` (`Time!`): when the record was first and last written.
pub fn time_columns<R: Send + Sync + 'static>() -> Vec<Column<R>> {
    vec![Column::stored_time("createdAt", |s| s.created_at), Column::stored_time("lastModifiedAt", |s| s.last_modified_at)]
}

/// `statusPhase` (`<Type>StatusPhase`) and `statusMessage` (`String`), both nullable and nil in
/// `where` as the reference declares them, though a record without status conditions has
/// phase `UNKNOWN` and message `""`.
pub fn status_columns<K: Entity>() -> Vec<Column<K::Record>> {
    vec![
        Column::enumeration("statusPhase", &format!("{}StatusPhase", K::TYPE), |r| status_of::<K>(r).phase).nullable(),
        Column::string("statusMessage", |r| &status_of::<K>(r).message).nullable(),
    ]
}

/// The record's status ([`schema::Kind::status`]); unknown for a kind without one (which
/// never registers the status columns).
fn status_of<K: Entity>(r: &K::Record) -> &Status {
    static NO_STATUS: Status = Status { phase: schema::common::StatusPhase::Unknown, message: String::new() };
    K::status(r).unwrap_or(&NO_STATUS)
}

/// The filterable mixins of a kind with status and metadata: its
/// [`time_columns`], [`status_columns`] and [`meta_columns`], in that order.
pub fn mixin_columns<K: Entity>(meta: fn(&K::Record) -> &Meta) -> Vec<Column<K::Record>> {
    let mut c = time_columns();
    c.extend(status_columns::<K>());
    c.extend(meta_columns(meta));
    c
}

/// `environment` (`String`, STR+nil) and `namespace` (`String!`, STR) from the record's metadata.
pub fn meta_columns<R: Send + Sync + 'static>(meta: fn(&R) -> &Meta) -> Vec<Column<R>> {
    vec![
        Column::optional_string("environment", move |r| Some(meta(r).environment.as_str())),
        Column::string("namespace", move |r| &meta(r).namespace),
    ]
}

/// A string that is null when empty (fields stored as `""` when their source is absent).
pub fn non_empty_string(v: &str) -> Option<FieldValue<'static>> {
    if v.is_empty() {
        None
    } else {
        string(v)
    }
}

/// `Some(v)` unless `v` is empty.
pub fn non_empty(v: &str) -> Option<&str> {
    Some(v).filter(|v| !v.is_empty())
}

/// Where the records of an `Application.<edge>` connection are found.
#[derive(Clone, Copy)]
pub enum ApplicationEdge {
    /// The kind's natural key starts with its application's: `(environment, team, application,
    /// …)` (the exposure kinds).
    KeyPrefix,
    /// The kind's index by owner application (the subscription kinds).
    Index(schema::IndexName),
}

/// Registers entity `K` with its root query, and the connection `Application.<edge>`: the
/// application's records of `K`, found as `by` says.
pub fn register_with_application_edge<K: Entity>(builder: &mut Builder, edge: &str, by: ApplicationEdge) {
    register_entity::<K>(builder);
    let w = builder.where_type::<K>();
    let field = connection_field::<K, storage::Stored<schema::kinds::application::ApplicationRecord>>(
        builder,
        edge,
        w,
        move |request, app, order, pred| {
            let candidates = match by {
                ApplicationEdge::KeyPrefix => request.view.with_prefix::<K>(&app.key),
                ApplicationEdge::Index(index) => request.view.lookup_records::<K>(index, &app.key),
            }
            .map_err(crate::error::storage)?;
            Ok(Box::new(nested_rows::<K>(request, candidates, order, &pred)))
        },
    );
    builder.extend(schema::kinds::application::Application::TYPE, vec![field]);
}
