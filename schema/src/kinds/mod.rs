//! One module per kind: record, natural key, declared parents, links, scopes, index keys and the
//! translation rule. Each module's doc cites the reference-projector.md section it implements.

pub mod api;
pub mod api_exposure;
pub mod api_subscription;
pub mod application;
pub mod approval;
pub mod approval_common;
pub mod approval_request;
pub mod group;
pub mod team;
pub mod zone;

#[cfg(test)]
pub(crate) mod testing;
