//! `Application`: visible to its owner team's viewers; root
//! connection `applications` with `orderBy: [ApplicationOrder!]`.
//!
//! Computed when read: `secretRotationPhase`/`secretRotationMessage` (from the stored
//! `SecretRotation` condition at the request's `now`), `permissionsURL` (see
//! [`permissions_url`]). `clientSecret` and `rotatedClientSecret` are secrets: never filterable,
//! masked for `obfuscated` callers. `ownerTeam` is the reduced `TeamInfo`.
//! They are filterable too, evaluated at the same `now`.

use super::common::mixin_columns;
use crate::url::query_escape;
use super::info::{external_ids, team_info};
use crate::column::Column;
use crate::connection::register_entity;
use crate::entity::{Builder, Entity, node_value};
use crate::fields::{field, nullable_string, object_value, record_field, string_list};
use crate::request::RequestContext;
use crate::filter::{FilterType, FilterValue};
use async_graphql::dynamic::{Field, Object, TypeRef};
use async_graphql::Error;
use schema::keys::natural;
use schema::kinds::application::SecretRotationPhase;
use schema::kinds::application::{secret_rotation, Application, ApplicationRecord, IpRestrictions};
use schema::kinds::zone::Zone;
use schema::KindId;
use storage::Stored;

/// `permissionsURL`: `<zone.permissionsURL>?application=<clientId, query-escaped>` when the
/// application's zone has a permissions URL, a PermissionSet of the application exists (same
/// natural key) and the application has a client ID; otherwise null.
///
/// # Errors
/// Storage failures as `INTERNAL`.
pub fn permissions_url(request: &RequestContext, r: &ApplicationRecord) -> Result<Option<String>, Error> {
    let env = &r.meta.environment;
    let Some(client_id) = r.client_id.as_deref() else { return Ok(None) };
    let Some(zone) = request.load_system::<Zone>(&natural::zone(env, &r.zone))? else { return Ok(None) };
    let Some(base) = zone.record.permissions_url.filter(|u| !u.is_empty()) else { return Ok(None) };
    let app_key = natural::application(env, &r.team, &r.meta.name);
    if !request.view.contains(KindId::PermissionSet, &app_key).map_err(crate::error::storage)? {
        return Ok(None);
    }
    Ok(Some(format!("{base}?application={}", query_escape(client_id))))
}

/// A list of strings, null when empty.
fn list_or_null(v: &[String]) -> Option<async_graphql::dynamic::FieldValue<'static>> {
    if v.is_empty() {
        None
    } else {
        string_list(v)
    }
}

impl Entity for Application {
    const TYPE: &'static str = "Application";
    const ROOT: Option<&'static str> = Some("applications");
    const TEAM_OWNED: bool = true;
    const MULTI_ORDER: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        builder.enumeration_of::<SecretRotationPhase>("ApplicationSecretRotationPhase");
        builder.object(
            Object::new("IpRestrictions")
                .field(field::<IpRestrictions>("Allow", TypeRef::named_nn_list(TypeRef::STRING), |p, _| Ok(list_or_null(&p.allow))))
                .field(field::<IpRestrictions>("Deny", TypeRef::named_nn_list(TypeRef::STRING), |p, _| Ok(list_or_null(&p.deny)))),
        );
        vec![
            builder.secret_field::<Application>("clientSecret", |r| (&r.meta.environment, &r.team, r.client_secret.as_deref())),
            builder
                .secret_field::<Application>("rotatedClientSecret", |r| (&r.meta.environment, &r.team, r.rotated_client_secret.as_deref())),
            record_field::<Application>("externalIds", TypeRef::named_nn_list("ExternalId"), |r| external_ids(&r.external_ids)),
            record_field::<Application>("ipRestrictions", TypeRef::named("IpRestrictions"), |r| {
                r.ip_restrictions.clone().and_then(object_value)
            }),
            field::<Stored<ApplicationRecord>>("permissionsURL", TypeRef::named(TypeRef::STRING), |p, request| {
                Ok(nullable_string(permissions_url(request, &p.record)?.as_deref()))
            }),
            field::<Stored<ApplicationRecord>>("zone", TypeRef::named_nn(Zone::TYPE), |p, request| {
                let r = &p.record;
                Ok(request.load_visible::<Zone>(&natural::zone(&r.meta.environment, &r.zone))?.map(node_value::<Zone>))
            }),
            field::<Stored<ApplicationRecord>>("ownerTeam", TypeRef::named_nn("TeamInfo"), |p, request| {
                team_info(request, &p.record.meta.environment, &p.record.team)
            }),
        ]
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<ApplicationRecord>> {
        use crate::kinds::edges;
        use schema::keys::{index, natural};
        vec![
            edges::by_key::<ApplicationRecord, schema::kinds::zone::Zone>("Zone", |s| {
                Some(natural::zone(&s.record.meta.environment, &s.record.zone))
            }),
            edges::by_key::<ApplicationRecord, schema::kinds::team::Team>("OwnerTeam", |s| {
                Some(natural::team(&s.record.meta.environment, &s.record.team))
            }).shown_as_info(),
            edges::by_prefix::<ApplicationRecord, schema::kinds::api_exposure::ApiExposure>("ExposedApis", |s| s.key.clone()),
            edges::by_index::<ApplicationRecord, schema::kinds::api_subscription::ApiSubscription>(
                "SubscribedApis",
                index::API_SUBSCRIPTION_BY_OWNER,
                |s| Some(s.key.clone()),
            ),
            edges::by_prefix::<ApplicationRecord, schema::kinds::event_exposure::EventExposure>("ExposedEvents", |s| s.key.clone()),
            edges::by_index::<ApplicationRecord, schema::kinds::event_subscription::EventSubscription>(
                "SubscribedEvents",
                index::EVENT_SUBSCRIPTION_BY_OWNER,
                |s| Some(s.key.clone()),
            ),
            edges::by_key::<ApplicationRecord, schema::kinds::permission_set::PermissionSet>("PermissionSet", |s| Some(s.key.clone())),
            edges::by_prefix::<ApplicationRecord, schema::kinds::agentic_exposure::AgenticExposure>("AgenticExposures", |s| s.key.clone()),
            edges::by_index::<ApplicationRecord, schema::kinds::agentic_subscription::AgenticSubscription>(
                "AgenticSubscriptions",
                index::AGENTIC_SUBSCRIPTION_BY_OWNER,
                |s| Some(s.key.clone()),
            ),
            edges::by_prefix::<ApplicationRecord, schema::kinds::file_exposure::FileExposure>("FileExposures", |s| s.key.clone()),
            edges::by_index::<ApplicationRecord, schema::kinds::file_subscription::FileSubscription>(
                "FileSubscriptions",
                index::FILE_SUBSCRIPTION_BY_OWNER,
                |s| Some(s.key.clone()),
            ),
        ]
    }

    fn columns() -> Vec<Column<ApplicationRecord>> {
        // Client secrets and `permissionsURL` are not filterable (nor in the Go server); secrets
        // never are.
        type C = Column<ApplicationRecord>;
        let mut c = mixin_columns::<Application>(|r| &r.meta);
        c.extend([
            C::string("name", |r| &r.meta.name),
            C::optional_string("clientID", |r| r.client_id.as_deref()),
            C::optional_time("rotatedExpiresAt", |r| r.rotated_expires_at),
            C::optional_time("currentExpiresAt", |r| r.current_expires_at),
            // Computed at the request's `now`.
            C::with_request("secretRotationPhase", FilterType::Enum("ApplicationSecretRotationPhase".into()), false, |s, request| {
                FilterValue::Str(Some(secret_rotation(&s.record, request.now).0.as_str().to_string()))
            }),
            C::with_request("secretRotationMessage", FilterType::Str, true, |s, request| {
                FilterValue::Str(secret_rotation(&s.record, request.now).1)
            }),
        ]);
        c
    }
}

/// Registers `Application` (with the root `applications`) and its value types.
pub fn register(builder: &mut Builder) {
    register_entity::<Application>(builder);
}
