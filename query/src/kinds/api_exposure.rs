//! `ApiExposure`, its reduced cross-tenant view `ApiExposureInfo`, and the edges defined next to it: `Application.exposedApis` and
//! `Api.activeExposure`. Root query `apiExposures`; visible to the owner application's team.

use super::common::{register_with_application_edge, ApplicationEdge};
use super::reduced::{ApiExposureInfo, ApiSubscriptionInfo};
use super::common::mixin_columns;
use super::subscription_info::owner_fields;
use super::values::{feature_list, Owned};
use crate::column::Column;
use crate::entity::{Builder, Entity, global_id, node_value};
use crate::fields::{boolean, enum_item, field, object_value, object_values, record_field, string};
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldValue, Object, TypeRef};
use async_graphql::Error;
use schema::keys::{index, natural};
use schema::kinds::api::{Api, ApiRecord};
use schema::kinds::api_exposure::{ApiExposure, ApiExposureRecord};
use schema::kinds::api_subscription::ApiSubscription;
use schema::kinds::application::Application;
use storage::Stored;

type S = Stored<ApiExposureRecord>;

impl Entity for ApiExposure {
    const TYPE: &'static str = "ApiExposure";
    const ROOT: Option<&'static str> = Some("apiExposures");
    const TEAM_OWNED: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        super::values::register(builder);
        register_info(builder);
        vec![
            record_field::<ApiExposure>("features", TypeRef::named_nn_list_nn("ApiExposureFeature"), |r| feature_list(&r.features)),
            record_field::<ApiExposure>("upstreams", TypeRef::named_nn_list_nn("Upstream"), |r| object_values(r.upstreams.clone())),
            field::<S>("security", TypeRef::named("ApiExposureSecurity"), |p, _| {
                let r = &p.record;
                Ok(r.security.m2m.as_ref().and_then(|_| {
                    object_value(Owned::new(&r.meta.environment, r.meta.team(), &global_id::<ApiExposure>(&p.key), p.as_of.is_some(), r.security.clone()))
                }))
            }),
            record_field::<ApiExposure>("traffic", TypeRef::named("Traffic"), |r| object_value(r.traffic.clone())),
            record_field::<ApiExposure>("approvalConfig", TypeRef::named_nn("ApprovalConfig"), |r| object_value(r.approval_config.clone())),
            field::<S>("owner", TypeRef::named_nn("Application"), |p, request| {
                let r = &p.record;
                let key = natural::application(&r.meta.environment, r.meta.team(), &r.application);
                Ok(request.load_visible::<Application>(&key)?.map(node_value::<Application>))
            }),
            field::<S>("api", TypeRef::named("Api"), |p, request| {
                let r = &p.record;
                let apis = request
                    .view
                    .lookup_records::<Api>(index::API_ACTIVE_BY_BASE_PATH, &natural::in_env(&r.meta.environment, &r.base_path))
                    .map_err(crate::error::storage)?;
                Ok(apis.into_iter().find(|a| request.visible::<Api>(a)).map(node_value::<Api>))
            }),
            field::<S>("subscriptions", TypeRef::named_nn_list_nn("ApiSubscriptionInfo"), |p, request| {
                let subs = request
                    .view
                    .lookup_records::<ApiSubscription>(index::API_SUBSCRIPTION_BY_TARGET, &p.key)
                    .map_err(crate::error::storage)?;
                Ok(object_values(subs.into_iter().map(ApiSubscriptionInfo)))
            }),
        ]
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<ApiExposureRecord>> {
        use crate::kinds::edges;
        use schema::keys::{index, natural};
        vec![
            edges::by_key::<ApiExposureRecord, schema::kinds::application::Application>("Owner", |s| {
                Some(natural::application(&s.record.meta.environment, s.record.meta.team(), &s.record.application))
            }),
            edges::by_index::<ApiExposureRecord, schema::kinds::api::Api>("API", index::API_ACTIVE_BY_BASE_PATH, |s| {
                Some(natural::in_env(&s.record.meta.environment, &s.record.base_path))
            }),
            edges::by_index::<ApiExposureRecord, schema::kinds::api_subscription::ApiSubscription>(
                "Subscriptions",
                index::API_SUBSCRIPTION_BY_TARGET,
                |s| Some(s.key.clone()),
            ).shown_as_info(),
        ]
    }

    fn columns() -> Vec<Column<ApiExposureRecord>> {
        type C = Column<ApiExposureRecord>;
        let mut c = mixin_columns::<ApiExposure>(|r| &r.meta);
        c.extend([
            C::string("basePath", |r| &r.base_path),
            C::enumeration("visibility", "ApiExposureVisibility", |r| r.visibility),
            C::boolean("active", |r| r.active).nullable(),
            // The CR carries no API version; kept for compatibility (always null).
            C::optional_string("apiVersion", |_| None),
        ]);
        c
    }
}

/// Registers `ApiExposure` with its root query, and the edges `Application.exposedApis` and
/// `Api.activeExposure`.
pub fn register(builder: &mut Builder) {
    register_with_application_edge::<ApiExposure>(builder, "exposedApis", ApplicationEdge::KeyPrefix);
    builder.extend(
        "Api",
        vec![field::<Stored<ApiRecord>>("activeExposure", TypeRef::named("ApiExposureInfo"), |p, request| {
            active_exposure(request, &p.record.meta.environment, &p.record.base_path)
        })],
    );
}

/// The `ApiExposureInfo` of the active exposure of `base_path` in `env`, regardless of the
/// viewer; `None` when there is none.
///
/// # Errors
/// Storage failures as `INTERNAL`.
pub fn active_exposure(request: &RequestContext, env: &str, base_path: &str) -> Result<Option<FieldValue<'static>>, Error> {
    let found = request
        .view
        .lookup_records::<ApiExposure>(index::API_EXPOSURE_ACTIVE_BY_BASE_PATH, &natural::in_env(env, base_path))
        .map_err(crate::error::storage)?;
    Ok(found.into_iter().next().and_then(|x| object_value(ApiExposureInfo(x))))
}

/// Registers `ApiExposureInfo`: no upstreams, security or subscriber data of the owner.
pub fn register_info(builder: &mut Builder) {
    if !builder.first_time("api_exposure::register_info") {
        return;
    }
    super::values::register(builder);
    let mut o = Object::new("ApiExposureInfo")
        .field(field::<ApiExposureInfo>("id", TypeRef::named_nn(TypeRef::ID), |p, _| Ok(string(&global_id::<ApiExposure>(&p.0.key)))))
        .field(field::<ApiExposureInfo>("basePath", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.0.record.base_path))))
        .field(field::<ApiExposureInfo>("visibility", TypeRef::named_nn("ApiExposureVisibility"), |p, _| {
            Ok(enum_item(p.0.record.visibility.as_str()))
        }))
        .field(field::<ApiExposureInfo>("active", TypeRef::named(TypeRef::BOOLEAN), |p, _| Ok(boolean(p.0.record.active))))
        .field(field::<ApiExposureInfo>("apiVersion", TypeRef::named(TypeRef::STRING), |_, _| Ok(None)))
        .field(field::<ApiExposureInfo>("features", TypeRef::named_nn_list_nn("ApiExposureFeature"), |p, _| {
            Ok(feature_list(&p.0.record.features))
        }))
        .field(field::<ApiExposureInfo>("approvalConfig", TypeRef::named_nn("ApprovalConfig"), |p, _| {
            Ok(object_value(p.0.record.approval_config.clone()))
        }))
        .field(field::<ApiExposureInfo>("traffic", TypeRef::named("Traffic"), |p, _| Ok(object_value(p.0.record.traffic.clone()))));
    for f in owner_fields::<ApiExposureInfo>(|p| (&p.0.record.meta.environment, p.0.record.meta.team(), &p.0.record.application)) {
        o = o.field(f);
    }
    builder.object(o);
}
