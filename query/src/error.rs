//! GraphQL errors with `extensions.code` (`BAD_USER_INPUT`, `NOT_FOUND`, `FORBIDDEN`, `INTERNAL`,
//! `TIMEOUT` and the limits' codes). Produced in this crate only.

use async_graphql::{Error, ErrorExtensions};

/// `BAD_USER_INPUT`: invalid cursor, `first` and `last` together, negative or too large page
/// sizes, malformed filters.
pub fn bad_input(message: impl Into<String>) -> Error {
    Error::new(message.into()).extend_with(|_, e| e.set("code", "BAD_USER_INPUT"))
}

/// The longest ID a `NOT_FOUND` message repeats whole, in bytes (a global ID of the longest
/// natural key is well under it); a longer one is cut to [`ECHOED_ID_PREFIX_BYTES`] and its
/// length, so that a request naming a huge ID in many fields cannot multiply it in its answer.
pub const MAX_ECHOED_ID_BYTES: usize = 512;

/// The part of an ID longer than [`MAX_ECHOED_ID_BYTES`] a `NOT_FOUND` message repeats.
pub const ECHOED_ID_PREFIX_BYTES: usize = 64;

/// `NOT_FOUND`: the same answer for unknown, malformed and invisible IDs (no existence leak).
/// The message repeats the ID (an ID over [`MAX_ECHOED_ID_BYTES`]: its first
/// [`ECHOED_ID_PREFIX_BYTES`] and its length).
pub fn not_found(id: &str) -> Error {
    let message = if id.len() <= MAX_ECHOED_ID_BYTES {
        format!("Could not resolve to a node with the global id of '{id}'")
    } else {
        let mut end = ECHOED_ID_PREFIX_BYTES;
        while !id.is_char_boundary(end) {
            end -= 1;
        }
        format!("Could not resolve to a node with the global id of '{}…' ({} bytes)", &id[..end], id.len())
    };
    Error::new(message).extend_with(|_, e| e.set("code", "NOT_FOUND"))
}

/// `NOT_FOUND` for a non-null field whose target is not (or no longer) projected, e.g. the
/// owner application of a subscription whose application was deleted a moment ago.
pub fn not_projected(field: &str) -> Error {
    Error::new(format!("{field} is not projected (deleted or not synced yet)")).extend_with(|_, e| e.set("code", "NOT_FOUND"))
}

/// `FORBIDDEN`.
pub fn forbidden(message: impl Into<String>) -> Error {
    Error::new(message.into()).extend_with(|_, e| e.set("code", "FORBIDDEN"))
}

/// `INTERNAL`: the cause is logged here and never sent to the client.
pub fn internal(cause: impl std::fmt::Display) -> Error {
    tracing::error!(error = %cause, "internal error while processing a GraphQL request");
    Error::new("internal error while processing request").extend_with(|_, e| e.set("code", "INTERNAL"))
}

/// A storage failure: `UNAVAILABLE` (with `extensions.kind`) for a kind whose records are being
/// re-derived after an upgrade ([`storage::StorageError::Rederiving`]: retry shortly), else
/// [`internal`].
pub fn storage(e: storage::StorageError) -> Error {
    match e {
        storage::StorageError::Rederiving(kind) => Error::new(e.to_string()).extend_with(|_, x| {
            x.set("code", "UNAVAILABLE");
            x.set("kind", kind.name());
        }),
        // A read cut off by a reopen of the store after a volume fault: retry.
        storage::StorageError::Volume(_) | storage::StorageError::Reopened => {
            // The writer logs the fault, once per cause and minute.
            tracing::debug!(error = %e, "a read failed on the volume");
            Error::new("the store cannot be read after a volume fault (it is reopened); retry the request")
                .extend_with(|_, x| x.set("code", "UNAVAILABLE"))
        }
        e => internal(e),
    }
}

/// [`storage`] for a whole request (no field is at fault): a request error without
/// `locations`.
pub fn storage_request_error(e: storage::StorageError) -> async_graphql::ServerError {
    let mut error = storage(e).into_server_error(Default::default());
    error.locations.clear();
    error
}

impl From<storage::StorageError> for crate::QueryError {
    fn from(e: storage::StorageError) -> crate::QueryError {
        crate::QueryError(storage(e))
    }
}

/// The request ran longer than `graphql.requestTimeout`: code `TIMEOUT`, no partial data.
pub fn timeout(limit: std::time::Duration) -> async_graphql::ServerError {
    request_error(format!("the request exceeded the time limit of {limit:?}"), "TIMEOUT")
}

/// The server is shutting down: code `UNAVAILABLE`, no partial data.
pub fn unavailable() -> async_graphql::ServerError {
    request_error("the server is shutting down; retry the request", "UNAVAILABLE")
}

/// The store is re-deriving kinds whose derivation version changed (`kinds`, comma-separated):
/// code `UNAVAILABLE`, no data; the kinds are incomplete until their source has been read again.
pub fn rederiving(kinds: &str) -> async_graphql::ServerError {
    let message = format!("the store is re-deriving {kinds} after an upgrade (read again from the source); retry the request shortly");
    request_error(message, "UNAVAILABLE")
}

/// `INTERNAL` for a request whose execution failed as a whole (logged where it failed).
pub fn internal_server_error() -> async_graphql::ServerError {
    request_error("internal error while processing request", "INTERNAL")
}

/// `BAD_REQUEST`: a subscription sent as a plain HTTP request.
pub fn subscription_over_http() -> async_graphql::ServerError {
    request_error("subscriptions run over a WebSocket (subprotocol graphql-transport-ws or graphql-ws) on the same path", "BAD_REQUEST")
}

/// `BAD_REQUEST`: a query or mutation sent as a subscription.
pub fn not_a_subscription() -> async_graphql::ServerError {
    request_error("only subscriptions run over the WebSocket; send queries as HTTP requests", "BAD_REQUEST")
}

/// `SUBSCRIPTION_TOO_HEAVY`: a subscription whose selection is heavier than light work per event.
pub fn subscription_too_heavy(nodes: u64, max: u64) -> async_graphql::ServerError {
    let mut e = request_error(
        format!("a subscription may resolve at most {max} nodes per event, without search or edge filters (this one: up to {nodes}); select less and query the rest"),
        "SUBSCRIPTION_TOO_HEAVY",
    );
    if let Some(ext) = &mut e.extensions {
        ext.set("max", max);
    }
    e
}

/// `TOO_MANY_SUBSCRIPTIONS`: a subscription beyond `subscriptions.maxPerConnection` (`where`
/// "on this connection") or `subscriptions.maxTotal` ("on this server").
pub fn too_many_subscriptions(place: &str) -> async_graphql::ServerError {
    request_error(format!("too many subscriptions {place}; end one first"), "TOO_MANY_SUBSCRIPTIONS")
}

/// `GRAPHQL_VALIDATION_FAILED`: a subscription that selects other than exactly one root field.
pub fn not_one_root_field() -> async_graphql::ServerError {
    request_error("a subscription selects exactly one root field (GraphQL's single root field rule)", "GRAPHQL_VALIDATION_FAILED")
}

/// `TOO_MANY_MUTATIONS`: more mutation fields in one request than `max` (the mutations'
/// bound, `mutations::MAX_MUTATIONS`).
pub fn too_many_mutations(max: usize) -> async_graphql::ServerError {
    let mut e =
        request_error(format!("a request holds at most {max} mutation fields (each is a write to the cluster)"), "TOO_MANY_MUTATIONS");
    if let Some(ext) = e.extensions.as_mut() {
        ext.set("max", max as u64);
    }
    e
}

/// `MUTATION_OVER_GET`: a mutation sent with GET (the server answers HTTP 406).
pub fn mutation_over_get() -> async_graphql::ServerError {
    request_error("GET requests only allow query operations", "MUTATION_OVER_GET")
}

/// `UNAUTHENTICATED`: a subscription on a connection whose token was not accepted.
pub fn unauthenticated() -> async_graphql::ServerError {
    request_error("not authenticated", "UNAUTHENTICATED")
}

/// `NOT_EXPORTABLE`: a request to the export endpoint that is not one query selecting one root
/// connection or list of records; `why` says what is wrong and what to send.
pub fn not_exportable(why: impl std::fmt::Display) -> async_graphql::ServerError {
    request_error(format!("not exportable: {why}"), "NOT_EXPORTABLE")
}

/// `EXPORT_TOO_LARGE`: an export with more rows than `export.maxRows` (its last line; the rows
/// before it were sent).
pub fn export_too_large(max: usize) -> async_graphql::ServerError {
    let mut e = request_error(
        format!("the export has more than {max} rows (export.maxRows); narrow it with `where` or split it"),
        "EXPORT_TOO_LARGE",
    );
    if let Some(ext) = e.extensions.as_mut() {
        ext.set("max", max as u64);
    }
    e
}

/// A request-level error (no path) with `extensions.code` `code`.
fn request_error(message: impl Into<String>, code: &str) -> async_graphql::ServerError {
    let mut e = async_graphql::ServerError::new(message.into(), None);
    let mut ext = async_graphql::ErrorExtensionValues::default();
    ext.set("code", code);
    e.extensions = Some(ext);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request refused as a whole points at no place in the query: no `locations` (not
    /// `[{line: 0, column: 0}]`), and the answer's JSON has none.
    #[test]
    fn a_request_level_storage_error_has_no_locations() {
        for e in [storage::StorageError::Reopened, storage::StorageError::Rederiving(schema::KindId::Api)] {
            let error = storage_request_error(e);
            assert!(error.locations.is_empty(), "{error:?}");
            let json = serde_json::to_value(async_graphql::Response::from_errors(vec![error])).unwrap();
            assert!(json["errors"][0].get("locations").is_none(), "{json}");
            assert_eq!(json["errors"][0]["extensions"]["code"], "UNAVAILABLE", "{json}");
        }
    }
}
