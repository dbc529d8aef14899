//! EventSubscription: an Application subscribing
//! to an event type. Natural key `(environment, namespace, name)`; the owner application is
//! `spec.requestor.name`, its team the namespace's; owned by (and visible to) that team. Its
//! target is the *active* EventExposure of the same environment and event type, linked by the
//! writer; while there is none the record is written without target and retried
//! (ARCHITECTURE.md "References by natural key").
//!
//! Quirk fixed (ARCHITECTURE.md "The Go projector's quirks, fixed"): an emptied `spec.delivery.callback` clears the stored
//! callback URL. Scopes: `requested_scopes` = `spec.scopes` (also served as the deprecated
//! GraphQL `scopes`), `active_scopes` = the newer `status.activeScopes`, read as optional.

use crate::common::{self, Meta, Status};
use crate::graphql_enum::graphql_enum;
use crate::keys::index;
use crate::kind::{Context, KindId, Skip};
use crate::kinds::event_exposure::EventTrigger;
use crate::kinds::subscription_wiring::{subscription_kind, SubscriptionWiring};
use serde::{Deserialize, Serialize};

/// The EventSubscription kind.
pub struct EventSubscription;

/// A projected EventSubscription.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventSubscriptionRecord {
    /// Common metadata; the owner team is `meta.team()` (from `metadata.namespace`).
    pub meta: Meta,
    /// From `status.conditions`; `UNKNOWN` when the CR has no status.
    pub status: Status,
    /// The owner Application's name: `spec.requestor.name` (required, non-empty).
    pub application: String,
    /// `spec.eventType` (required, non-empty).
    pub event_type: String,
    /// `spec.delivery.type`, matched case-insensitively (`""` is the CRD default `Callback`).
    pub delivery_type: DeliveryType,
    /// `spec.delivery.callback`; `None` when absent or empty.
    pub callback_url: Option<String>,
    /// `spec.trigger`; `None` when absent.
    pub trigger: Option<EventTrigger>,
    /// `spec.delivery` besides type and callback.
    pub delivery: EventDelivery,
    /// `spec.scopes[]`: the latest requested scopes; `None` when absent or empty.
    pub requested_scopes: Option<Vec<String>>,
    /// `status.activeScopes[]`: the last approved scopes written downstream; `None` when absent
    /// (`Some(vec![])` when the operator cleared them).
    pub active_scopes: Option<Vec<String>>,
    /// `status.url`: the SSE endpoint (delivery type `ServerSentEvent`); `""` when absent.
    pub gateway_sse_url: String,
}

graphql_enum! {
    /// `spec.delivery.type` (GraphQL `EventSubscriptionDeliveryType`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum DeliveryType {
        /// `Callback`: events are POSTed to `spec.delivery.callback`.
        Callback = "CALLBACK",
        /// `ServerSentEvent`: the subscriber reads the SSE endpoint `status.url`.
        ServerSentEvent = "SERVER_SENT_EVENT",
    }
}

impl DeliveryType {
    /// Parses the CR value case-insensitively; `""` is the CRD default `Callback`.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse(field: &'static str, value: &str) -> Result<DeliveryType, Skip> {
        if value.is_empty() {
            return Ok(DeliveryType::Callback);
        }
        common::parse_enum(
            field,
            value,
            "Callback, ServerSentEvent",
            &[("Callback", DeliveryType::Callback), ("ServerSentEvent", DeliveryType::ServerSentEvent)],
        )
    }
}

graphql_enum! {
    /// `spec.delivery.payload` (GraphQL `PayloadType`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum PayloadType {
        /// `Data`: the event carries its payload.
        Data = "DATA",
        /// `DataRef`: the event carries a reference to its payload.
        DataRef = "DATA_REF",
    }
}

impl PayloadType {
    /// Parses the CR value case-insensitively; `""` is the CRD default `Data`.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse(field: &'static str, value: &str) -> Result<PayloadType, Skip> {
        if value.is_empty() {
            return Ok(PayloadType::Data);
        }
        common::parse_enum(field, value, "Data, DataRef", &[("Data", PayloadType::Data), ("DataRef", PayloadType::DataRef)])
    }
}

/// `spec.delivery` without type and callback (GraphQL `EventDelivery`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventDelivery {
    /// `spec.delivery.payload`, matched case-insensitively.
    pub payload: PayloadType,
    /// `spec.delivery.eventRetentionTime` verbatim (e.g. `168h`); `""` when absent.
    pub event_retention_time: String,
    /// `spec.delivery.circuitBreakerOptOut`; `false` when absent.
    pub circuit_breaker_opt_out: bool,
    /// `spec.delivery.retryableStatusCodes[]`; `None` when absent.
    pub retryable_status_codes: Option<Vec<i64>>,
    /// `spec.delivery.redeliveriesPerSecond`; `None` when absent.
    pub redeliveries_per_second: Option<i64>,
    /// `spec.delivery.enforceGetHttpRequestMethodForHealthCheck`; `false` when absent.
    pub enforce_get_http_request_method_for_health_check: bool,
}

/// Keys, links, scopes and indexes of the EventSubscription family (see [`SubscriptionWiring`]).
const WIRING: SubscriptionWiring = SubscriptionWiring {
    kind: KindId::EventSubscription,
    target_active: index::EVENT_EXPOSURE_ACTIVE_BY_TYPE,
    by_key: index::EVENT_SUBSCRIPTION_BY_TYPE,
    by_owner: index::EVENT_SUBSCRIPTION_BY_OWNER,
    by_target: index::EVENT_SUBSCRIPTION_BY_TARGET,
};

/// The translation of an EventSubscription ([`Kind::translate`](crate::kind::Kind::translate)).
fn translate(cr: &crds::EventSubscription, _ctx: &Context) -> Result<EventSubscriptionRecord, Skip> {
    let meta = Meta::from_object(&cr.metadata)?;
    let spec = &cr.spec;
    let application = common::required("spec.requestor.name", &spec.requestor.name)?.to_string();
    let event_type = common::required("spec.eventType", &spec.event_type)?.to_string();
    let d = &spec.delivery;
    let delivery_type = DeliveryType::parse("spec.delivery.type", &d.type_)?;
    let delivery = EventDelivery {
        payload: PayloadType::parse("spec.delivery.payload", &d.payload)?,
        event_retention_time: d.event_retention_time.clone().unwrap_or_default(),
        circuit_breaker_opt_out: d.circuit_breaker_opt_out.unwrap_or(false),
        retryable_status_codes: d.retryable_status_codes.clone(),
        redeliveries_per_second: d.redeliveries_per_second,
        enforce_get_http_request_method_for_health_check: d.enforce_get_http_request_method_for_health_check.unwrap_or(false),
    };
    let trigger = spec.trigger.as_ref().map(|t| EventTrigger::from_cr("spec.trigger.responseFilter.mode", t)).transpose()?;
    let status = cr.status.as_ref();
    Ok(EventSubscriptionRecord {
        meta,
        status: common::status_from_conditions(status.map(|s| s.conditions.as_slice()).unwrap_or_default()),
        application,
        event_type,
        delivery_type,
        callback_url: d.callback.clone().filter(|c| !c.is_empty()),
        trigger,
        delivery,
        requested_scopes: spec.scopes.clone().filter(|s| !s.is_empty()),
        active_scopes: status.and_then(|s| s.active_scopes.clone()),
        gateway_sse_url: status.and_then(|s| s.url.clone()).unwrap_or_default(),
    })
}

subscription_kind!(EventSubscription, EventSubscriptionRecord {
    const VERSION: u32 = 1;
    wiring: WIRING,
    target: event_type,
    translate: translate,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::keys::natural;
    use crate::keys::Key;
    use crate::kind::{Kind, Link, Parent, Scope};
    use crate::kinds::event_exposure::{ResponseFilter, ResponseFilterMode, SelectionFilter};
    use crate::kinds::testing::{ctx, world_object};
    use crate::time::Timestamp;
    use std::collections::BTreeMap;

    // A subscription without target is written and retried until linked (ARCHITECTURE.md "References by natural key").
    const _: () = assert!(EventSubscription::RETRY_UNLINKED);

    const ORDERS: &str = "de.telekom.payments.orderplaced.v1";

    fn subscription(env: &str, name: &str) -> crds::EventSubscription {
        world_object("EventSubscription", env, name)
    }

    fn translate(cr: &crds::EventSubscription) -> Result<EventSubscriptionRecord, Skip> {
        EventSubscription::translate(cr, &ctx())
    }

    #[test]
    fn callback_delivery_full_mapping() {
        let rec = translate(&subscription("poc", "poc--payments--ledger/ledger-core--de-telekom-payments-orderplaced-v1")).unwrap();
        assert_eq!(rec.meta.namespace, "poc--payments--ledger");
        assert_eq!(rec.meta.team(), "payments--ledger");
        assert_eq!(rec.application, "ledger-core");
        assert_eq!(rec.event_type, ORDERS);
        assert_eq!(rec.delivery_type, DeliveryType::Callback);
        assert_eq!(rec.delivery_type.as_str(), "CALLBACK");
        assert_eq!(rec.callback_url.as_deref(), Some("https://ledger-core.payments.poc.example.com/events"));
        assert_eq!(
            rec.delivery,
            EventDelivery {
                payload: PayloadType::Data,
                event_retention_time: "168h".into(),
                circuit_breaker_opt_out: false,
                retryable_status_codes: Some(vec![502, 503, 504]),
                redeliveries_per_second: Some(10),
                enforce_get_http_request_method_for_health_check: true,
            }
        );
        assert_eq!(
            rec.trigger,
            Some(EventTrigger {
                response_filter: None,
                selection_filter: Some(SelectionFilter {
                    attributes: Some(BTreeMap::from([("currency".to_string(), "EUR".to_string())])),
                    expression: String::new(),
                }),
            })
        );
        assert_eq!(rec.requested_scopes, Some(vec!["eu-orders".to_string()]));
        assert_eq!(rec.active_scopes, None);
        assert_eq!(rec.gateway_sse_url, "");
        assert_eq!(rec.status, Status { phase: StatusPhase::Ready, message: "Successfully provisioned subresources".into() });
        assert_eq!(EventSubscription::created_at(&rec), Some(Timestamp::parse_rfc3339("2026-05-03T00:41:00Z").unwrap()));
    }

    #[test]
    fn server_sent_events_without_callback() {
        let rec = translate(&subscription("poc", "checkout-batch--de-telekom-payments-orderplaced-v1")).unwrap();
        assert_eq!(rec.delivery_type, DeliveryType::ServerSentEvent);
        assert_eq!(rec.delivery_type.as_str(), "SERVER_SENT_EVENT");
        assert_eq!(rec.callback_url, None);
        assert_eq!(rec.requested_scopes, None);
        assert_eq!(rec.gateway_sse_url, "https://api.caas-cetus.poc.example.com:8443/gw/horizon/sse/v1/de.telekom.payments.orderplaced.v1");
        assert_eq!(
            rec.trigger,
            Some(EventTrigger {
                response_filter: Some(ResponseFilter { paths: vec!["$.orderId".into()], mode: ResponseFilterMode::Include }),
                selection_filter: None,
            })
        );
        // Minimal delivery: the defaults.
        assert_eq!(
            rec.delivery,
            EventDelivery {
                payload: PayloadType::Data,
                event_retention_time: String::new(),
                circuit_breaker_opt_out: false,
                retryable_status_codes: None,
                redeliveries_per_second: None,
                enforce_get_http_request_method_for_health_check: false,
            }
        );
    }

    #[test]
    fn data_ref_payload_pending_status_and_no_trigger() {
        let rec = translate(&subscription("poc", "knowledge-base--de-telekom-logistics-fleetposition-v2")).unwrap();
        assert_eq!(rec.delivery.payload, PayloadType::DataRef);
        assert_eq!(rec.delivery.payload.as_str(), "DATA_REF");
        assert_eq!(rec.trigger, None);
        assert_eq!(rec.status, Status { phase: StatusPhase::Pending, message: "Waiting for approval decision".into() });
        assert_eq!(rec.application, "knowledge-base");
    }

    #[test]
    fn requested_and_active_scopes() {
        let mut cr = subscription("poc", "poc--payments--ledger/ledger-core--de-telekom-payments-orderplaced-v1");
        cr.status.as_mut().unwrap().active_scopes = Some(vec!["eu-orders".into()]);
        cr.spec.scopes = Some(vec!["eu-orders".into(), "all-orders-redacted".into()]);
        let rec = translate(&cr).unwrap();
        assert_eq!(rec.requested_scopes, Some(vec!["eu-orders".to_string(), "all-orders-redacted".to_string()]));
        assert_eq!(rec.active_scopes, Some(vec!["eu-orders".to_string()]));
        cr.status.as_mut().unwrap().active_scopes = Some(vec![]);
        cr.spec.scopes = Some(vec![]);
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.requested_scopes, rec.active_scopes), (None, Some(vec![])));
    }

    #[test]
    fn keys_requires_links_scopes_refs_and_dependents() {
        let name = "copilot-gateway--de-telekom-logistics-parceldelivered-v1";
        let rec = translate(&subscription("poc", name)).unwrap();
        let ns = "poc--assist--copilot";
        let parcels = "de.telekom.logistics.parceldelivered.v1";
        assert_eq!(EventSubscription::key(&rec), Key::new(&["poc", ns, name]));
        let owner = Key::new(&["poc", "assist--copilot", "copilot-gateway"]);
        assert_eq!(EventSubscription::requires(&rec), vec![Parent { kind: KindId::Application, key: owner.clone() }]);
        let by_type = natural::in_env("poc", parcels);
        assert_eq!(EventSubscription::links(&rec), vec![Link::First { index: index::EVENT_EXPOSURE_ACTIVE_BY_TYPE, key: by_type.clone() }]);
        assert_eq!(EventSubscription::scopes(&rec, &[None]), vec![Scope::Team { env: "poc".into(), team: "assist--copilot".into() }]);
        let unlinked = vec![(index::EVENT_SUBSCRIPTION_BY_TYPE, by_type), (index::EVENT_SUBSCRIPTION_BY_OWNER, owner)];
        assert_eq!(EventSubscription::index_entries(&rec, &[None]), unlinked);
        assert_eq!(EventSubscription::index_entries(&rec, &[]), unlinked);
        let target = natural::event_exposure("poc", "logistics--parcel-tracking", "parcel-notifier", parcels);
        let mut linked = unlinked.clone();
        linked.push((index::EVENT_SUBSCRIPTION_BY_TARGET, target.clone()));
        assert_eq!(EventSubscription::index_entries(&rec, &[Some(target)]), linked);
        let sub = Key::new(&["EventSubscription", "poc", ns, name]);
        assert_eq!(
            EventSubscription::dependents(&rec, &[None]),
            vec![(index::APPROVAL_BY_SUBSCRIPTION, sub.clone()), (index::APPROVAL_REQUEST_BY_SUBSCRIPTION, sub)]
        );
    }

    #[test]
    fn qa_subscription_links_in_qa() {
        let rec = translate(&subscription("qa", "ledger-core--de-telekom-payments-orderplaced-v1")).unwrap();
        assert_eq!(
            EventSubscription::links(&rec),
            vec![Link::First { index: index::EVENT_EXPOSURE_ACTIVE_BY_TYPE, key: Key::new(&["qa", ORDERS]) }]
        );
        assert_eq!(EventSubscription::requires(&rec)[0].key, Key::new(&["qa", "payments--ledger", "ledger-core"]));
    }

    #[test]
    fn enums_are_case_insensitive_and_default_when_empty() {
        let mut cr = subscription("poc", "checkout-batch--de-telekom-payments-orderplaced-v1");
        cr.spec.delivery.type_ = "serversentevent".into();
        cr.spec.delivery.payload = "DATAREF".into();
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.delivery_type, rec.delivery.payload), (DeliveryType::ServerSentEvent, PayloadType::DataRef));
        cr.spec.delivery.type_.clear();
        cr.spec.delivery.payload.clear();
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.delivery_type, rec.delivery.payload), (DeliveryType::Callback, PayloadType::Data));
    }

    #[test]
    fn emptied_callback_clears_it() {
        let mut cr = subscription("poc", "poc--payments--ledger/ledger-core--de-telekom-payments-orderplaced-v1");
        cr.spec.delivery.callback = Some(String::new());
        assert_eq!(translate(&cr).unwrap().callback_url, None);
    }

    #[test]
    fn bad_input_is_skipped_with_its_reason() {
        let base = subscription("poc", "poc--payments--ledger/ledger-core--de-telekom-payments-orderplaced-v1");
        let mut cr = base.clone();
        cr.spec.requestor.name.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.requestor.name")));
        let mut cr = base.clone();
        cr.spec.event_type.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.eventType")));
        let mut cr = base.clone();
        cr.metadata.name = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.name")));
        let mut cr = base.clone();
        cr.spec.delivery.type_ = "Webhook".into();
        assert_eq!(
            translate(&cr),
            Err(Skip::InvalidEnum { field: "spec.delivery.type", value: "Webhook".into(), expected: "Callback, ServerSentEvent" })
        );
        let mut cr = base.clone();
        cr.spec.delivery.payload = "Blob".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.delivery.payload", .. })));
        let mut cr = base.clone();
        cr.spec.trigger.as_mut().unwrap().response_filter =
            Some(crds::event_exposure::ResponseFilter { mode: Some("x".into()), paths: vec![] });
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.trigger.responseFilter.mode", .. })));
        let mut cr = base;
        cr.status = None;
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.status.phase, rec.gateway_sse_url.as_str(), rec.active_scopes), (StatusPhase::Unknown, "", None));
    }
}
