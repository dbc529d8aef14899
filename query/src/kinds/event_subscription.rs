//! `EventSubscription` (`requestedScopes` / `activeScopes`), its reduced cross-tenant view
//! `EventSubscriptionInfo` (implements `SubscriptionInfo`), and the edge
//! `Application.subscribedEvents`. Root query `eventSubscriptions`; visible to the owner
//! application's team. `target` is the cross-tenant `EventExposureInfo` of link 0, null without
//! error while unlinked. The deprecated `scopes` returns the requested scopes.

use super::common::{mixin_columns, non_empty};
use super::event_exposure::register_values;
use super::reduced::{EventExposureInfo, EventSubscriptionInfo};
use super::subscription_info::{register_info_object, SubscriptionView};
use crate::column::Column;
use crate::entity::{Builder, Entity};
use crate::fields::{enum_item, field, object_value, record_field, string, string_list};
use async_graphql::dynamic::{Field, FieldValue, TypeRef};
use schema::keys::index;
use schema::kinds::event_exposure::EventExposure;
use schema::kinds::event_subscription::{EventSubscription, EventSubscriptionRecord};
use storage::Stored;

/// The deprecation reason of `EventSubscription.scopes` (still the requested scopes).
pub const SCOPES_DEPRECATION: &str = "Use `requestedScopes` / `activeScopes`.";

impl Entity for EventSubscription {
    const TYPE: &'static str = "EventSubscription";
    const ROOT: Option<&'static str> = Some("eventSubscriptions");
    const TEAM_OWNED: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        register_values(builder);
        register_info(builder);
        super::event_exposure::register_info(builder);
        let mut f = vec![
            record_field::<EventSubscription>("trigger", TypeRef::named("EventTrigger"), |r| r.trigger.clone().and_then(object_value)),
            record_field::<EventSubscription>("delivery", TypeRef::named_nn("EventDelivery"), |r| object_value(r.delivery.clone())),
            record_field::<EventSubscription>("scopes", TypeRef::named_nn_list(TypeRef::STRING), |r| {
                r.requested_scopes.as_deref().and_then(string_list)
            })
            .deprecation(Some(SCOPES_DEPRECATION)),
            record_field::<EventSubscription>("requestedScopes", TypeRef::named_nn_list(TypeRef::STRING), |r| {
                r.requested_scopes.as_deref().and_then(string_list)
            }),
            record_field::<EventSubscription>("activeScopes", TypeRef::named_nn_list(TypeRef::STRING), |r| {
                r.active_scopes.as_deref().and_then(string_list)
            }),
        ];
        f.extend(super::subscription_common::link_fields::<EventSubscription>());
        f
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<EventSubscriptionRecord>> {
        super::subscription_common::link_edges::<EventSubscription>()
    }

    fn columns() -> Vec<Column<EventSubscriptionRecord>> {
        type C = Column<EventSubscriptionRecord>;
        let mut c = mixin_columns::<EventSubscription>(|r| &r.meta);
        c.extend([
            C::string("name", |r| &r.meta.name),
            C::string("eventType", |r| &r.event_type),
            C::enumeration("deliveryType", "EventSubscriptionDeliveryType", |r| r.delivery_type),
            C::optional_string("callbackURL", |r| r.callback_url.as_deref()),
            C::optional_string("gatewaySseURL", |r| non_empty(&r.gateway_sse_url)),
        ]);
        c
    }
}

/// Registers `EventSubscription` with its root query, and the edge
/// `Application.subscribedEvents`.
pub fn register(builder: &mut Builder) {
    super::common::register_with_application_edge::<EventSubscription>(builder, "subscribedEvents", super::common::ApplicationEdge::Index(index::EVENT_SUBSCRIPTION_BY_OWNER));
}

/// Registers `EventSubscriptionInfo` (implements `SubscriptionInfo`): no delivery, callback or
/// trigger data of the subscriber.
pub fn register_info(builder: &mut Builder) {
    register_values(builder);
    register_info_object::<EventSubscriptionInfo>(
        builder,
        vec![
            field::<EventSubscriptionInfo>("eventType", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.0.record.event_type))),
            field::<EventSubscriptionInfo>("deliveryType", TypeRef::named_nn("EventSubscriptionDeliveryType"), |p, _| {
                Ok(enum_item(p.0.record.delivery_type.as_str()))
            }),
        ],
        Vec::new(),
    );
}

impl SubscriptionView for EventSubscriptionInfo {
    type Kind = EventSubscription;

    fn stored(&self) -> &Stored<EventSubscriptionRecord> {
        &self.0
    }
}

impl super::subscription_common::SubscriptionEntity for EventSubscription {
    type Exposure = EventExposure;
    const TARGET_INFO: &'static str = "EventExposureInfo";

    fn record_meta(r: &EventSubscriptionRecord) -> &schema::common::Meta {
        &r.meta
    }

    fn application(r: &EventSubscriptionRecord) -> &str {
        &r.application
    }

    fn target_info(x: Stored<<EventExposure as schema::Kind>::Record>) -> FieldValue<'static> {
        FieldValue::owned_any(EventExposureInfo(x))
    }
}
