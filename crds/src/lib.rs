//! Rust types of every custom resource the read model watches (`*.cp.ei.telekom.de/v1`),
//! faithful to the platform's CRD schemas (read leniently: ARCHITECTURE.md "Fields newer than the
//! CRDs").
//!
//! **Architecture invariant:** these are plain data types with `kube::CustomResource`. No
//! translation logic lives here (that is `schema`), no client code (that is `control-plane`).
//!
//! Deserialization is lenient the way the projector needs it: unknown fields are ignored, every
//! field the CRD does not mark as required is an `Option` (or defaults to empty), and enum-like
//! fields are kept as `String` so that `schema` can match them case-insensitively and report a
//! precise skip reason. Fields the CRD marks as required are required here too, so an object
//! missing them fails to deserialize with a message naming the field.

#![forbid(unsafe_code)]

pub mod common;

pub mod group;
pub use group::Group;
// Kind modules (one line `pub mod <kind>;` + one `pub use`), added per kind:
pub mod zone;
pub use zone::Zone;
pub mod team;
pub use team::Team;
pub mod application;
pub use application::Application;
pub mod api;
pub use api::Api;
pub mod api_exposure;
pub use api_exposure::ApiExposure;
pub mod api_subscription;
pub use api_subscription::ApiSubscription;
pub mod approval;
pub use approval::Approval;
pub mod approval_request;
pub use approval_request::ApprovalRequest;
pub mod permission_set;
pub use permission_set::PermissionSet;
pub mod file_exposure;
pub use file_exposure::FileExposure;
pub mod file_subscription;
pub use file_subscription::FileSubscription;
pub mod event_type;
pub use event_type::EventType;
pub mod event_exposure;
pub use event_exposure::EventExposure;
pub mod event_subscription;
pub use event_subscription::EventSubscription;
pub mod mcp_server;
pub use mcp_server::McpServer;
pub mod agent_card;
pub use agent_card::AgentCard;
pub mod agentic_exposure;
pub use agentic_exposure::AgenticExposure;
pub mod agentic_subscription;
pub use agentic_subscription::AgenticSubscription;
