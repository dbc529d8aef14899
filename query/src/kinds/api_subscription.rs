//! `ApiSubscription` (`requestedScopes` / `activeScopes`), its reduced cross-tenant view
//! `ApiSubscriptionInfo` (implements `SubscriptionInfo`), and the edge
//! `Application.subscribedApis`. Root query `apiSubscriptions`; visible to the owner
//! application's team. `target` is the cross-tenant `ApiExposureInfo` of link 0, null without
//! error while unlinked.

use super::reduced::{ApiExposureInfo, ApiSubscriptionInfo};
use super::common::{mixin_columns, non_empty};
use super::subscription_info::{register_info_object, SubscriptionView};
use super::values::Owned;
use crate::column::Column;
use crate::entity::{Builder, Entity, global_id};
use crate::fields::{field, object_value, record_field, string, string_list};
use async_graphql::dynamic::{Field, FieldValue, TypeRef};
use schema::keys::index;
use schema::kinds::api_exposure::ApiExposure;
use schema::kinds::api_subscription::{ApiSubscription, ApiSubscriptionRecord};
use storage::Stored;

type S = Stored<ApiSubscriptionRecord>;

impl Entity for ApiSubscription {
    const TYPE: &'static str = "ApiSubscription";
    const ROOT: Option<&'static str> = Some("apiSubscriptions");
    const TEAM_OWNED: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        super::values::register(builder);
        register_info(builder);
        let mut f = vec![
            field::<S>("security", TypeRef::named("ApiSubscriptionSecurity"), |p, _| {
                let r = &p.record;
                Ok(r.security.clone().and_then(|sec| {
                    object_value(Owned::new(&r.meta.environment, r.meta.team(), &global_id::<ApiSubscription>(&p.key), p.as_of.is_some(), sec))
                }))
            }),
            record_field::<ApiSubscription>("requestedScopes", TypeRef::named_nn_list(TypeRef::STRING), |r| {
                r.requested_scopes.as_deref().and_then(string_list)
            }),
            record_field::<ApiSubscription>("activeScopes", TypeRef::named_nn_list(TypeRef::STRING), |r| {
                r.active_scopes.as_deref().and_then(string_list)
            }),
            // Subscriptions carry no failover zones of their own (the exposure's traffic does).
            record_field::<ApiSubscription>("failoverZones", TypeRef::named_nn_list("Zone"), |_| {
                Some(FieldValue::list(Vec::<FieldValue<'static>>::new()))
            }),
        ];
        f.extend(super::subscription_common::link_fields::<ApiSubscription>());
        f
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<ApiSubscriptionRecord>> {
        super::subscription_common::link_edges::<ApiSubscription>()
    }

    fn columns() -> Vec<Column<ApiSubscriptionRecord>> {
        type C = Column<ApiSubscriptionRecord>;
        let mut c = mixin_columns::<ApiSubscription>(|r| &r.meta);
        c.extend([
            C::string("name", |r| &r.meta.name),
            C::string("basePath", |r| &r.base_path),
            C::enumeration("m2mAuthMethod", "ApiSubscriptionM2mAuthMethod", |r| r.m2m_auth_method),
            C::optional_string("gatewayURL", |r| non_empty(&r.gateway_url)),
        ]);
        c
    }
}

/// Registers `ApiSubscription` with its root query, and the edge `Application.subscribedApis`.
pub fn register(builder: &mut Builder) {
    super::common::register_with_application_edge::<ApiSubscription>(builder, "subscribedApis", super::common::ApplicationEdge::Index(index::API_SUBSCRIPTION_BY_OWNER));
}

/// Registers `ApiSubscriptionInfo` (implements `SubscriptionInfo`): no security, client ids or
/// gateway data of the subscriber.
pub fn register_info(builder: &mut Builder) {
    if !builder.first_time("api_subscription::register_info") {
        return;
    }
    register_info_object::<ApiSubscriptionInfo>(
        builder,
        vec![field::<ApiSubscriptionInfo>("basePath", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.0.record.base_path)))],
        Vec::new(),
    );
}

impl SubscriptionView for ApiSubscriptionInfo {
    type Kind = ApiSubscription;

    fn stored(&self) -> &Stored<ApiSubscriptionRecord> {
        &self.0
    }
}

impl super::subscription_common::SubscriptionEntity for ApiSubscription {
    type Exposure = ApiExposure;
    const TARGET_INFO: &'static str = "ApiExposureInfo";

    fn record_meta(r: &ApiSubscriptionRecord) -> &schema::common::Meta {
        &r.meta
    }

    fn application(r: &ApiSubscriptionRecord) -> &str {
        &r.application
    }

    fn target_info(x: Stored<<ApiExposure as schema::Kind>::Record>) -> FieldValue<'static> {
        FieldValue::owned_any(ApiExposureInfo(x))
    }
}
