//! `EventExposure`, its reduced cross-tenant view `EventExposureInfo`, the event value types
//! (`EventScope`, `EventTrigger`, `ResponseFilter`, `SelectionFilter`, `EventDelivery`, their enum
//! values normalised to the GraphQL spelling where the Go server passed the CR's through), and the edges defined next to it: `Application.exposedEvents` and
//! `EventType.activeExposure`. Root query `eventExposures`; visible to the owner application's
//! team.
//!
//! `eventTypeDef` is the active EventType of the same environment and event type (a catalogue
//! entry, visible to every viewer of the environment); `subscriptions` lists every tenant's
//! subscriptions linked to the exposure as `EventSubscriptionInfo`.

use super::common::{register_with_application_edge, ApplicationEdge};
use super::common::{mixin_columns, non_empty};
use super::reduced::{EventExposureInfo, EventSubscriptionInfo};
use super::subscription_info::owner_fields;
use crate::column::Column;
use crate::entity::{Builder, Entity, global_id, node_value};
use crate::fields::{boolean, enum_item, field, integer, object_value, object_values, record_field, string, string_list};
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldValue, Object, TypeRef};
use async_graphql::indexmap::IndexMap;
use async_graphql::{Error, Name, Value};
use schema::common::Visibility;
use schema::keys::{index, natural};
use schema::kinds::application::Application;
use schema::kinds::event_exposure::ResponseFilterMode;
use schema::kinds::event_exposure::{EventExposure, EventExposureRecord, EventScope, EventTrigger, ResponseFilter, SelectionFilter};
use schema::kinds::event_subscription::{DeliveryType, PayloadType};
use schema::kinds::event_subscription::{EventDelivery, EventSubscription};
use schema::kinds::event_type::{EventType, EventTypeRecord};
use storage::Stored;

type S = Stored<EventExposureRecord>;

impl Entity for EventExposure {
    const TYPE: &'static str = "EventExposure";
    const ROOT: Option<&'static str> = Some("eventExposures");
    const TEAM_OWNED: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        register_values(builder);
        register_info(builder);
        vec![
            record_field::<EventExposure>("eventScopes", TypeRef::named_list("EventScope"), |r| object_values(r.event_scopes.clone())),
            record_field::<EventExposure>("approvalConfig", TypeRef::named_nn("ApprovalConfig"), |r| {
                object_value(r.approval_config.clone())
            }),
            field::<S>("owner", TypeRef::named_nn("Application"), |p, request| {
                let r = &p.record;
                let key = natural::application(&r.meta.environment, r.meta.team(), &r.application);
                Ok(request.load_visible::<Application>(&key)?.map(node_value::<Application>))
            }),
            field::<S>("eventTypeDef", TypeRef::named("EventType"), |p, request| {
                let r = &p.record;
                let found = request
                    .view
                    .lookup_records::<EventType>(index::EVENT_TYPE_ACTIVE_BY_TYPE, &natural::in_env(&r.meta.environment, &r.event_type))
                    .map_err(crate::error::storage)?;
                Ok(found.into_iter().find(|t| request.visible::<EventType>(t)).map(node_value::<EventType>))
            }),
            field::<S>("subscriptions", TypeRef::named_nn_list_nn("EventSubscriptionInfo"), |p, request| {
                let subs = request
                    .view
                    .lookup_records::<EventSubscription>(index::EVENT_SUBSCRIPTION_BY_TARGET, &p.key)
                    .map_err(crate::error::storage)?;
                Ok(object_values(subs.into_iter().map(EventSubscriptionInfo)))
            }),
        ]
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<EventExposureRecord>> {
        use crate::kinds::edges;
        use schema::keys::{index, natural};
        vec![
            edges::by_key::<EventExposureRecord, schema::kinds::application::Application>("Owner", |s| {
                Some(natural::application(&s.record.meta.environment, s.record.meta.team(), &s.record.application))
            }),
            edges::by_index::<EventExposureRecord, schema::kinds::event_type::EventType>(
                "EventTypeDef",
                index::EVENT_TYPE_ACTIVE_BY_TYPE,
                |s| Some(natural::in_env(&s.record.meta.environment, &s.record.event_type)),
            ),
            edges::by_index::<EventExposureRecord, schema::kinds::event_subscription::EventSubscription>(
                "Subscriptions",
                index::EVENT_SUBSCRIPTION_BY_TARGET,
                |s| Some(s.key.clone()),
            ).shown_as_info(),
        ]
    }

    fn columns() -> Vec<Column<EventExposureRecord>> {
        type C = Column<EventExposureRecord>;
        let mut c = mixin_columns::<EventExposure>(|r| &r.meta);
        c.extend([
            C::string("eventType", |r| &r.event_type),
            C::enumeration("visibility", "EventExposureVisibility", |r| r.visibility),
            C::boolean("active", |r| r.active).nullable(),
            C::optional_string("gatewayPublishingURL", |r| non_empty(&r.gateway_publishing_url)),
        ]);
        c
    }
}

/// Registers `EventExposure` with its root query, and the edges `Application.exposedEvents` and
/// `EventType.activeExposure`.
pub fn register(builder: &mut Builder) {
    register_with_application_edge::<EventExposure>(builder, "exposedEvents", ApplicationEdge::KeyPrefix);
    builder.extend(
        "EventType",
        vec![field::<Stored<EventTypeRecord>>("activeExposure", TypeRef::named("EventExposureInfo"), |p, request| {
            active_exposure(request, &p.record.meta.environment, &p.record.event_type)
        })],
    );
}

/// The `EventExposureInfo` of the active exposure of `event_type` in `env`, regardless of the
/// viewer; `None` when there is none.
///
/// # Errors
/// Storage failures as `INTERNAL`.
pub fn active_exposure(request: &RequestContext, env: &str, event_type: &str) -> Result<Option<FieldValue<'static>>, Error> {
    let found = request
        .view
        .lookup_records::<EventExposure>(index::EVENT_EXPOSURE_ACTIVE_BY_TYPE, &natural::in_env(env, event_type))
        .map_err(crate::error::storage)?;
    Ok(found.into_iter().next().and_then(|x| object_value(EventExposureInfo(x))))
}

/// Registers `EventExposureInfo`: no scopes, triggers or publishing URL of the owner.
pub fn register_info(builder: &mut Builder) {
    if !builder.first_time("event_exposure::register_info") {
        return;
    }
    super::values::register(builder);
    builder.enumeration_of::<Visibility>("EventExposureVisibility");
    let mut o = Object::new("EventExposureInfo")
        .field(field::<EventExposureInfo>("id", TypeRef::named_nn(TypeRef::ID), |p, _| Ok(string(&global_id::<EventExposure>(&p.0.key)))))
        .field(field::<EventExposureInfo>("eventType", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.0.record.event_type))))
        .field(field::<EventExposureInfo>("visibility", TypeRef::named_nn("EventExposureVisibility"), |p, _| {
            Ok(enum_item(p.0.record.visibility.as_str()))
        }))
        .field(field::<EventExposureInfo>("active", TypeRef::named(TypeRef::BOOLEAN), |p, _| Ok(boolean(p.0.record.active))))
        .field(field::<EventExposureInfo>("approvalConfig", TypeRef::named_nn("ApprovalConfig"), |p, _| {
            Ok(object_value(p.0.record.approval_config.clone()))
        }));
    for f in owner_fields::<EventExposureInfo>(|p| (&p.0.record.meta.environment, p.0.record.meta.team(), &p.0.record.application)) {
        o = o.field(f);
    }
    builder.object(o);
}

/// `attributes: Map` of a selection filter (a JSON object of strings).
fn attributes(a: &std::collections::BTreeMap<String, String>) -> Option<FieldValue<'static>> {
    let map: IndexMap<Name, Value> = a.iter().map(|(k, v)| (Name::new(k), Value::String(v.clone()))).collect();
    Some(FieldValue::value(Value::Object(map)))
}

/// Registers the event value types and enums (idempotent): `EventScope`, `EventTrigger`,
/// `ResponseFilter`, `SelectionFilter`, `EventDelivery`, `ResponseFilterMode`, `PayloadType`,
/// `EventSubscriptionDeliveryType`, `EventExposureVisibility`.
pub fn register_values(builder: &mut Builder) {
    if !builder.first_time("event_exposure::register_values") {
        return;
    }
    super::values::register(builder);
    builder.enumeration_of::<Visibility>("EventExposureVisibility");
    builder.enumeration_of::<DeliveryType>("EventSubscriptionDeliveryType");
    builder.enumeration_of::<ResponseFilterMode>("ResponseFilterMode");
    builder.enumeration_of::<PayloadType>("PayloadType");
    let string_nn = || TypeRef::named_nn(TypeRef::STRING);
    let bool_nn = || TypeRef::named_nn(TypeRef::BOOLEAN);
    builder.object(Object::new("EventScope").field(field::<EventScope>("name", string_nn(), |x, _| Ok(string(&x.name)))).field(field::<
        EventScope,
    >(
        "trigger",
        TypeRef::named_nn("EventTrigger"),
        |x, _| Ok(object_value(x.trigger.clone())),
    )));
    builder.object(
        Object::new("EventTrigger")
            .field(field::<EventTrigger>("responseFilter", TypeRef::named("ResponseFilter"), |t, _| {
                Ok(t.response_filter.clone().and_then(object_value))
            }))
            .field(field::<EventTrigger>("selectionFilter", TypeRef::named("SelectionFilter"), |t, _| {
                Ok(t.selection_filter.clone().and_then(object_value))
            })),
    );
    builder.object(
        Object::new("ResponseFilter")
            .field(field::<ResponseFilter>("paths", TypeRef::named_list_nn(TypeRef::STRING), |r, _| Ok(string_list(&r.paths))))
            .field(field::<ResponseFilter>("mode", TypeRef::named("ResponseFilterMode"), |r, _| Ok(enum_item(r.mode.as_str())))),
    );
    builder.object(
        Object::new("SelectionFilter")
            .field(field::<SelectionFilter>("attributes", TypeRef::named("Map"), |f, _| Ok(f.attributes.as_ref().and_then(attributes))))
            .field(field::<SelectionFilter>("expression", string_nn(), |f, _| Ok(string(&f.expression)))),
    );
    builder.object(
        Object::new("EventDelivery")
            .field(field::<EventDelivery>("payload", TypeRef::named_nn("PayloadType"), |d, _| Ok(enum_item(d.payload.as_str()))))
            .field(field::<EventDelivery>("eventRetentionTime", string_nn(), |d, _| Ok(string(&d.event_retention_time))))
            .field(field::<EventDelivery>("circuitBreakerOptOut", bool_nn(), |d, _| Ok(boolean(d.circuit_breaker_opt_out))))
            .field(field::<EventDelivery>("retryableStatusCodes", TypeRef::named_nn_list(TypeRef::INT), |d, _| {
                Ok(d.retryable_status_codes.as_ref().map(|c| FieldValue::list(c.iter().map(|n| FieldValue::value(Value::from(*n))))))
            }))
            .field(field::<EventDelivery>("redeliveriesPerSecond", TypeRef::named(TypeRef::INT), |d, _| {
                Ok(d.redeliveries_per_second.and_then(integer))
            }))
            .field(field::<EventDelivery>("enforceGetHttpRequestMethodForHealthCheck", bool_nn(), |d, _| {
                Ok(boolean(d.enforce_get_http_request_method_for_health_check))
            })),
    );
}
