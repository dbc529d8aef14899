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
pub fn register_all(builder: &mut Builder) {
    info::register(builder);
    zone::register_zone(builder);
    register::<schema::kinds::group::Group>(builder);
    let groups = list_field::<schema::kinds::group::Group>(builder, "groups", true);
    builder.query_fields.push(groups);
    team::register_team(builder);
    application::register_application(builder);
    api::register_api(builder);
    subscription_info::register(builder);
    api_exposure::register_all(builder);
    api_subscription::register_all(builder);
    register::<schema::kinds::approval::Approval>(builder);
    register::<schema::kinds::approval_request::ApprovalRequest>(builder);
    permission_set::register_all(builder);
    file_exposure::register_all(builder);
    file_subscription::register_all(builder);
    event_type::register_all(builder);
    event_exposure::register_all(builder);
    event_subscription::register_all(builder);
    mcp_server::register_all(builder);
    agent_card::register_all(builder);
    agentic_exposure::register_all(builder);
    agentic_subscription::register_all(builder);
}
