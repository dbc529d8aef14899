//! `AgenticSubscription` (`requestedScopes` / `activeScopes`), its reduced cross-tenant view
//! `AgenticSubscriptionInfo` (implements `SubscriptionInfo`), the value type
//! `AgenticSubscriptionSecurity`, and the edge `Application.agenticSubscriptions`. Root query
//! `agenticSubscriptions`; visible to the owner application's team. `target` is the
//! cross-tenant `AgenticExposureInfo` of link 0, null without error while unlinked.

use super::reduced::{AgenticExposureInfo, AgenticSubscriptionInfo};
use super::common::{mixin_columns, non_empty};
use super::subscription_info::{register_info_object, SubscriptionView};
use super::values::Owned;
use crate::column::Column;
use crate::entity::{Builder, Entity, global_id};
use crate::fields::{field, object_value, record_field, string, string_list};
use async_graphql::dynamic::{Field, FieldValue, Object, TypeRef};
use schema::keys::index;
use schema::kinds::agentic_exposure::AgenticExposure;
use schema::kinds::agentic_subscription::{AgenticSubscription, AgenticSubscriptionRecord};
use schema::kinds::api_subscription::ApiSubscriptionSecurity;
use storage::Stored;

type S = Stored<AgenticSubscriptionRecord>;

impl Entity for AgenticSubscription {
    const TYPE: &'static str = "AgenticSubscription";
    const ROOT: Option<&'static str> = Some("agenticSubscriptions");
    const TEAM_OWNED: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        super::values::register(builder);
        register_info(builder);
        let mut f = vec![
            field::<S>("security", TypeRef::named("AgenticSubscriptionSecurity"), |p, _| {
                let r = &p.record;
                Ok(r.security.clone().and_then(|sec| {
                    object_value(Owned::new(&r.meta.environment, r.meta.team(), &global_id::<AgenticSubscription>(&p.key), p.as_of.is_some(), sec))
                }))
            }),
            record_field::<AgenticSubscription>("requestedScopes", TypeRef::named_nn_list(TypeRef::STRING), |r| {
                r.requested_scopes.as_deref().and_then(string_list)
            }),
            record_field::<AgenticSubscription>("activeScopes", TypeRef::named_nn_list(TypeRef::STRING), |r| {
                r.active_scopes.as_deref().and_then(string_list)
            }),
        ];
        f.extend(super::subscription_common::link_fields::<AgenticSubscription>());
        f
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<AgenticSubscriptionRecord>> {
        super::subscription_common::link_edges::<AgenticSubscription>()
    }

    fn columns() -> Vec<Column<AgenticSubscriptionRecord>> {
        type C = Column<AgenticSubscriptionRecord>;
        let mut c = mixin_columns::<AgenticSubscription>(|r| &r.meta);
        c.extend([
            C::string("name", |r| &r.meta.name),
            C::string("basePath", |r| &r.base_path),
            C::optional_string("gatewayURL", |r| non_empty(&r.gateway_url)),
        ]);
        c
    }
}

/// Registers `AgenticSubscription` with its root query, `AgenticSubscriptionSecurity`, and the
/// edge `Application.agenticSubscriptions`.
pub fn register(builder: &mut Builder) {
    super::common::register_with_application_edge::<AgenticSubscription>(builder, "agenticSubscriptions", super::common::ApplicationEdge::Index(index::AGENTIC_SUBSCRIPTION_BY_OWNER));
    builder.object(Object::new("AgenticSubscriptionSecurity").field(field::<Owned<ApiSubscriptionSecurity>>(
        "m2m",
        TypeRef::named("SubscriberMachine2MachineAuthentication"),
        |p, _| Ok(p.v.m2m.clone().and_then(|m| object_value(p.child(m)))),
    )));
}

/// Registers `AgenticSubscriptionInfo` (implements `SubscriptionInfo`): no security, client ids
/// or gateway data of the subscriber.
pub fn register_info(builder: &mut Builder) {
    if !builder.first_time("agentic_subscription::register_info") {
        return;
    }
    register_info_object::<AgenticSubscriptionInfo>(
        builder,
        vec![field::<AgenticSubscriptionInfo>("basePath", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.0.record.base_path)))],
        Vec::new(),
    );
}

impl SubscriptionView for AgenticSubscriptionInfo {
    type Kind = AgenticSubscription;

    fn stored(&self) -> &Stored<AgenticSubscriptionRecord> {
        &self.0
    }
}

impl super::subscription_common::SubscriptionEntity for AgenticSubscription {
    type Exposure = AgenticExposure;
    const TARGET_INFO: &'static str = "AgenticExposureInfo";

    fn record_meta(r: &AgenticSubscriptionRecord) -> &schema::common::Meta {
        &r.meta
    }

    fn application(r: &AgenticSubscriptionRecord) -> &str {
        &r.application
    }

    fn target_info(x: Stored<<AgenticExposure as schema::Kind>::Record>) -> FieldValue<'static> {
        FieldValue::owned_any(AgenticExposureInfo(x))
    }
}
