//! Helpers shared by the kinds' modules: the filterable mixins of reference-graphql.md §2.2
//! (`statusPhase`, `statusMessage`, `environment`, `namespace`) and small value conversions.

use crate::column::Column;
use crate::entity::string;
use crate::filter::{FilterField, FilterType, FilterValue};
use async_graphql::dynamic::FieldValue;
use schema::common::{Meta, Status};
use storage::Stored;

/// `statusPhase` (ENUM+nil over `<enum_name>`) and `statusMessage` (STR+nil). A record without
/// status conditions has phase `UNKNOWN` and message `""`, so neither is ever nil.
pub fn status_filters<R: 'static>(enum_name: &str, status: fn(&R) -> &Status) -> Vec<FilterField<R>> {
    vec![
        FilterField::new("statusPhase", FilterType::Enum(enum_name.to_string()), true, move |x: &Stored<R>| {
            FilterValue::Str(Some(status(&x.record).phase.as_str().to_string()))
        }),
        FilterField::new("statusMessage", FilterType::Str, true, move |x: &Stored<R>| {
            FilterValue::Str(Some(status(&x.record).message.clone()))
        }),
    ]
}

/// `environment` (`String`, STR+nil) and `namespace` (`String!`, STR) from the record's metadata.
pub fn meta_columns<R: Send + Sync + 'static>(meta: fn(&R) -> &Meta) -> Vec<Column<R>> {
    vec![
        Column::optional_string("environment", move |r| Some(meta(r).environment.as_str())),
        Column::string("namespace", move |r| &meta(r).namespace),
    ]
}

/// `environment` (STR+nil) and `namespace` (STR) from the record's metadata.
pub fn meta_filters<R: 'static>(meta: fn(&R) -> &Meta) -> Vec<FilterField<R>> {
    vec![
        FilterField::new("environment", FilterType::Str, true, move |x: &Stored<R>| {
            FilterValue::Str(Some(meta(&x.record).environment.clone()))
        }),
        FilterField::new("namespace", FilterType::Str, false, move |x: &Stored<R>| {
            FilterValue::Str(Some(meta(&x.record).namespace.clone()))
        }),
    ]
}

/// A string filter field (`nillable` adds `IsNil`/`NotNil`; `get` returning `None` is null).
pub fn str_filter<R: 'static>(name: &'static str, nillable: bool, get: fn(&R) -> Option<&str>) -> FilterField<R> {
    FilterField::new(name, FilterType::Str, nillable, move |x: &Stored<R>| FilterValue::Str(get(&x.record).map(str::to_string)))
}

/// A string that is null when empty (fields stored as `""` when their source is absent).
pub fn ne(v: &str) -> Option<FieldValue<'static>> {
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
    let mut out = String::with_capacity(v.len());
    for &b in v.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
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
}
