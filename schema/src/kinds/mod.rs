//! One module per kind: record, natural key, declared parents, links, scopes, index keys and the
//! translation rule. Each follows the Go projector's rules for its kind; its doc says where it
//! departs from them (ARCHITECTURE.md "The Go projector's quirks, fixed") or where the Go
//! projector has no such kind.

pub mod agent_card;
pub mod agentic_catalogue;
pub mod agentic_exposure;
pub mod agentic_subscription;
pub mod api;
pub mod api_exposure;
pub mod api_subscription;
pub mod application;
pub mod approval;
pub mod approval_common;
pub mod approval_request;
pub mod event_exposure;
pub mod event_subscription;
pub mod event_type;
pub mod file_exposure;
pub mod file_subscription;
pub mod group;
pub mod mcp_server;
pub mod permission_set;
pub mod subscription_wiring;
pub mod team;
pub mod zone;

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod translations;
