//! Reduced cross-tenant types: `TeamInfo` and
//! `ApplicationInfo`, plus the value type `ExternalId` they share with `Application`.
//!
//! These hops cross tenants (ARCHITECTURE.md "Viewers and visibility"), so they read with [`RequestContext::load_system`] and the
//! types expose no secrets, no client IDs and no navigable edges besides the public `Zone` and
//! the nested `TeamInfo`. Other modules build them with [`team_info`] and
//! [`application_info`].

use super::common::non_empty_string;
use crate::entity::{global_id, node_value, Builder};
use crate::fields::{field, object_value, object_values, string};
use crate::request::RequestContext;
use async_graphql::dynamic::{FieldValue, Object, TypeRef};
use async_graphql::Error;
use schema::keys::natural;
use schema::kinds::application::{Application, ApplicationRecord, ExternalId};
use schema::kinds::team::{Team, TeamRecord};
use schema::kinds::zone::Zone;
use schema::Key;
use storage::Stored;

/// The parent value of a `TeamInfo`: the team's key and name, and its record when it exists
/// (a team deleted after its children keeps a `TeamInfo` with just `id` and `name`).
pub struct TeamInfo {
    key: Key,
    name: String,
    record: Option<TeamRecord>,
}

/// The parent value of an `ApplicationInfo`.
pub struct ApplicationInfo(pub Stored<ApplicationRecord>);

/// The `TeamInfo` of team `team` in environment `env`, read regardless of the viewer.
///
/// # Errors
/// Storage failures as `INTERNAL`.
pub fn team_info(request: &RequestContext, env: &str, team: &str) -> Result<Option<FieldValue<'static>>, Error> {
    let key = natural::team(env, team);
    let record = request.load_system::<Team>(&key)?.map(|s| s.record);
    Ok(object_value(TeamInfo { key, name: team.to_string(), record }))
}

/// The `ApplicationInfo` of the application under `key`, read regardless of the viewer; `None`
/// when it does not exist.
///
/// # Errors
/// Storage failures as `INTERNAL`.
pub fn application_info(request: &RequestContext, key: &Key) -> Result<Option<FieldValue<'static>>, Error> {
    Ok(request.load_system::<Application>(key)?.and_then(|s| object_value(ApplicationInfo(s))))
}

/// `externalIds: [ExternalId!]`: null when the application has none, else in CR order.
pub fn external_ids(v: &[ExternalId]) -> Option<FieldValue<'static>> {
    if v.is_empty() {
        None
    } else {
        object_values(v.to_vec())
    }
}

/// Registers `TeamInfo`, `ApplicationInfo` and `ExternalId`.
pub fn register(builder: &mut Builder) {
    builder.object(
        Object::new("ExternalId")
            .field(field::<ExternalId>("Id", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.id))))
            .field(field::<ExternalId>("Schema", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.scheme)))),
    );
    builder.object(
        Object::new("TeamInfo")
            .field(field::<TeamInfo>("id", TypeRef::named_nn(TypeRef::ID), |p, _| Ok(string(&global_id::<Team>(&p.key)))))
            .field(field::<TeamInfo>("name", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.name))))
            .field(field::<TeamInfo>("groupName", TypeRef::named_nn(TypeRef::STRING), |p, _| {
                Ok(string(p.record.as_ref().map(|r| r.group.as_str()).unwrap_or("")))
            }))
            .field(field::<TeamInfo>("email", TypeRef::named(TypeRef::STRING), |p, _| {
                Ok(p.record.as_ref().and_then(|r| non_empty_string(&r.email)))
            }))
            .field(field::<TeamInfo>("displayName", TypeRef::named(TypeRef::STRING), |p, _| {
                Ok(p.record.as_ref().and_then(|r| non_empty_string(&r.display_name)))
            }))
            .field(field::<TeamInfo>("description", TypeRef::named(TypeRef::STRING), |p, _| {
                Ok(p.record.as_ref().and_then(|r| non_empty_string(&r.description)))
            })),
    );
    builder.object(
        Object::new("ApplicationInfo")
            .field(field::<ApplicationInfo>("id", TypeRef::named_nn(TypeRef::ID), |p, _| Ok(string(&global_id::<Application>(&p.0.key)))))
            .field(field::<ApplicationInfo>("name", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.0.record.meta.name))))
            .field(field::<ApplicationInfo>("externalIds", TypeRef::named_nn_list("ExternalId"), |p, _| {
                Ok(external_ids(&p.0.record.external_ids))
            }))
            .field(field::<ApplicationInfo>("zone", TypeRef::named_nn("Zone"), |p, request| {
                let r = &p.0.record;
                Ok(request.load_system::<Zone>(&natural::zone(&r.meta.environment, &r.zone))?.map(node_value::<Zone>))
            }))
            .field(field::<ApplicationInfo>("ownerTeam", TypeRef::named_nn("TeamInfo"), |p, request| {
                team_info(request, &p.0.record.meta.environment, &p.0.record.team)
            })),
    );
}
