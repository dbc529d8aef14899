//! Helpers shared by the kinds' modules: the filterable mixins every kind with them
//! shares, as in the Go server (`statusPhase`, `statusMessage`, `environment`, `namespace`) and small value conversions.

use crate::column::Column;
use crate::entity::{string, Entity};
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

/// Percent-encodes a query-string value the way Go's `url.QueryEscape` does: unreserved
/// characters (`A-Z a-z 0-9 - _ . ~`) stay, a space becomes `+`, every other byte `%XX`.
pub fn query_escape(v: &str) -> String {
    percent_encode(v, "+")
}

/// Percent-encodes `v` as one URL path segment: unreserved characters (`A-Z a-z 0-9 - _ . ~`)
/// stay, every other byte (`/` and space included) becomes `%XX`.
pub fn path_escape(v: &str) -> String {
    percent_encode(v, "%20")
}

fn percent_encode(v: &str, space: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for &b in v.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push_str(space),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_escape_matches_go() {
        assert_eq!(query_escape("payments--checkout--checkout-api"), "payments--checkout--checkout-api");
        assert_eq!(query_escape("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
    }

    #[test]
    fn path_escape_keeps_one_segment() {
        assert_eq!(path_escape("c0ffee00-0000-4000-8000-000000000201"), "c0ffee00-0000-4000-8000-000000000201");
        assert_eq!(path_escape("../../admin?x=1 #"), "..%2F..%2Fadmin%3Fx%3D1%20%23");
    }
}
