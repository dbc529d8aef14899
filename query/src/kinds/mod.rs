//! One module per kind: its GraphQL object fields and filters ([`crate::entity::Entity`]).

use crate::entity::{list_field, register, Builder};

pub mod agent_card;
pub mod agentic_catalogue;
pub mod agentic_exposure;
pub mod agentic_subscription;
pub mod api;
pub mod api_exposure;
pub mod api_subscription;
pub mod application;
pub mod approval;
pub mod approval_request;
pub mod common;
pub mod edges;
pub mod event_exposure;
pub mod event_subscription;
pub mod event_type;
pub mod file_exposure;
pub mod file_subscription;
pub mod group;
pub mod info;
pub mod mcp_server;
pub mod permission_set;
pub mod subscription_common;
pub mod subscription_info;
pub mod team;
pub mod values;
pub mod zone;

/// Registers every entity type.
pub fn register_all(b: &mut Builder) {
    info::register(b);
    zone::register_zone(b);
    register::<schema::kinds::group::Group>(b);
    let groups = list_field::<schema::kinds::group::Group>(b, "groups", true);
    b.query_fields.push(groups);
    team::register_team(b);
    application::register_application(b);
    api::register_api(b);
    subscription_info::register(b);
    api_exposure::register_all(b);
    api_subscription::register_all(b);
    register::<schema::kinds::approval::Approval>(b);
    register::<schema::kinds::approval_request::ApprovalRequest>(b);
    permission_set::register_all(b);
    file_exposure::register_all(b);
    file_subscription::register_all(b);
    event_type::register_all(b);
    event_exposure::register_all(b);
    event_subscription::register_all(b);
    mcp_server::register_all(b);
    agent_card::register_all(b);
    agentic_exposure::register_all(b);
    agentic_subscription::register_all(b);
}
