//! One module per kind: its GraphQL object fields and filters ([`crate::entity::Entity`]).

use crate::entity::{list_field, register, Builder};

pub mod api;
pub mod api_exposure;
pub mod api_subscription;
pub mod application;
pub mod approval;
pub mod approval_request;
pub mod common;
pub mod group;
pub mod info;
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
}
