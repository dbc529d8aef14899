//! Every EventType, EventExposure and EventSubscription of the example world deserializes into
//! its typed custom resource, with the values the manifests carry (counts per
//! `examples/world/FACTS.md`: 5 event types, 4 exposures, 7 subscriptions over both
//! environments).

mod support;

use crds::{EventExposure, EventSubscription, EventType};
use kube::ResourceExt;
use serde_json::json;
use support::world_objects;

/// The object named `namespace/name` in `objects`.
fn find<'a, T: ResourceExt>(objects: &'a [T], namespace: &str, name: &str) -> &'a T {
    objects
        .iter()
        .find(|o| o.namespace().as_deref() == Some(namespace) && o.name_any() == name)
        .unwrap_or_else(|| panic!("no object {namespace}/{name}"))
}

#[test]
fn event_types() {
    let all: Vec<EventType> = world_objects("EventType");
    assert_eq!(all.len(), 5);
    assert_eq!(all.iter().filter(|t| t.status.as_ref().is_some_and(|s| s.active)).count(), 4);

    let orders = find(&all, "poc--payments--checkout", "de-telekom-payments-orderplaced-v1");
    assert_eq!(orders.spec.type_, "de.telekom.payments.orderplaced.v1");
    assert_eq!(orders.spec.version, "1.2.0");
    assert_eq!(orders.spec.category.as_deref(), Some("other"));
    assert_eq!(orders.spec.description.as_deref(), Some("Emitted once per order after payment authorisation."));
    assert_eq!(orders.spec.specification.as_deref(), Some("8b2e4f60-1c3d-4e5f-8a9b-0c1d2e3f4a01"));
    let status = orders.status.as_ref().unwrap();
    assert!(status.active);
    assert_eq!((status.conditions[0].type_.as_str(), status.conditions[0].status.as_str()), ("Ready", "True"));

    let shadow = find(&all, "poc--payments--ledger", "de-telekom-payments-orderplaced-v1");
    assert_eq!(shadow.spec.version, "1.0.0");
    assert_eq!(shadow.spec.specification, None);
    let status = shadow.status.as_ref().unwrap();
    assert!(!status.active);
    assert_eq!(status.conditions[0].reason, "PreconditionNotMet");

    let fleet = find(&all, "poc--logistics--fleet", "de-telekom-logistics-fleetposition-v2");
    assert_eq!(fleet.spec.category.as_deref(), Some("telemetry"));
    let qa = find(&all, "qa--payments--checkout", "de-telekom-payments-orderplaced-v1");
    assert_eq!(qa.labels()["cp.ei.telekom.de/environment"], "qa");
}

#[test]
fn event_exposures() {
    let all: Vec<EventExposure> = world_objects("EventExposure");
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|e| e.status.as_ref().is_some_and(|s| s.active)));

    let orders = find(&all, "poc--payments--checkout", "checkout-api--de-telekom-payments-orderplaced-v1");
    assert_eq!(orders.labels()["cp.ei.telekom.de/application"], "checkout-api");
    let spec = &orders.spec;
    assert_eq!(spec.event_type, "de.telekom.payments.orderplaced.v1");
    assert_eq!(spec.visibility, "World");
    assert_eq!(
        (spec.approval.strategy.as_str(), spec.approval.trusted_teams.as_slice()),
        ("Auto", &["payments--checkout".to_string()][..])
    );
    assert_eq!((spec.zone.name.as_str(), spec.zone.namespace.as_str()), ("aws-eu1", "poc"));
    assert_eq!((spec.provider.kind.as_str(), spec.provider.name.as_str()), ("Application", "checkout-api"));
    assert_eq!(spec.additional_publisher_ids, vec!["payments--checkout--checkout-batch"]);
    assert_eq!(spec.scopes.len(), 2);
    let eu = &spec.scopes[0];
    assert_eq!(eu.name, "eu-orders");
    let rf = eu.trigger.response_filter.as_ref().unwrap();
    assert_eq!(rf.mode.as_deref(), Some("Include"));
    assert_eq!(rf.paths, vec!["$.orderId", "$.amount", "$.currency"]);
    let sf = eu.trigger.selection_filter.as_ref().unwrap();
    assert_eq!(sf.attributes.as_ref().unwrap()["region"], "eu");
    assert_eq!(sf.expression, Some(json!({"and": [{"eq": {"field": "$.channel", "value": "web"}}]})));
    let redacted = &spec.scopes[1];
    assert_eq!(redacted.trigger.response_filter.as_ref().unwrap().mode.as_deref(), Some("Exclude"));
    assert_eq!(redacted.trigger.selection_filter, None);
    let status = orders.status.as_ref().unwrap();
    assert_eq!(status.publish_url.as_deref(), Some("https://api.aws-eu1.poc.example.com/horizon/events/v1"));
    assert_eq!(status.callback_url.as_deref(), Some("https://api.aws-eu1.poc.example.com/horizon/callback/v1"));
    assert_eq!(status.sse_urls.len(), 1);
    assert_eq!(status.route.as_ref().unwrap().namespace, "poc--aws-eu1");
    assert_eq!(status.publisher.as_ref().unwrap().name, "de-telekom-payments-orderplaced-v1");

    let fleet = find(&all, "poc--logistics--fleet", "fleet-telemetry--de-telekom-logistics-fleetposition-v2");
    assert_eq!(fleet.spec.visibility, "Zone");
    assert_eq!(fleet.spec.approval.strategy, "FourEyes");
    assert!(fleet.spec.scopes.is_empty());
    let parcels = find(&all, "poc--logistics--parcel-tracking", "parcel-notifier--de-telekom-logistics-parceldelivered-v1");
    assert_eq!((parcels.spec.visibility.as_str(), parcels.spec.approval.strategy.as_str()), ("Enterprise", "Simple"));
}

#[test]
fn event_subscriptions() {
    let all: Vec<EventSubscription> = world_objects("EventSubscription");
    assert_eq!(all.len(), 7);
    assert!(all.iter().all(|s| s.status.as_ref().is_some_and(|s| s.active_scopes.is_none())));

    let ledger = find(&all, "poc--payments--ledger", "ledger-core--de-telekom-payments-orderplaced-v1");
    let spec = &ledger.spec;
    assert_eq!(spec.event_type, "de.telekom.payments.orderplaced.v1");
    assert_eq!((spec.requestor.kind.as_str(), spec.requestor.name.as_str()), ("Application", "ledger-core"));
    assert_eq!(spec.requestor.namespace, "poc--payments--ledger");
    assert_eq!(spec.zone.name, "caas-cetus");
    let d = &spec.delivery;
    assert_eq!((d.type_.as_str(), d.payload.as_str()), ("Callback", "Data"));
    assert_eq!(d.callback.as_deref(), Some("https://ledger-core.payments.poc.example.com/events"));
    assert_eq!(d.event_retention_time.as_deref(), Some("168h"));
    assert_eq!(d.circuit_breaker_opt_out, Some(false));
    assert_eq!(d.retryable_status_codes, Some(vec![502, 503, 504]));
    assert_eq!(d.redeliveries_per_second, Some(10));
    assert_eq!(d.enforce_get_http_request_method_for_health_check, Some(true));
    let trigger = spec.trigger.as_ref().unwrap();
    assert_eq!(trigger.response_filter, None);
    assert_eq!(trigger.selection_filter.as_ref().unwrap().attributes.as_ref().unwrap()["currency"], "EUR");
    assert_eq!(trigger.selection_filter.as_ref().unwrap().expression, None);
    assert_eq!(spec.scopes, Some(vec!["eu-orders".to_string()]));
    let status = ledger.status.as_ref().unwrap();
    assert_eq!(status.url, None);
    assert_eq!(status.subscription_id.as_deref(), Some("5bff7ff77b"));
    assert_eq!(status.approval.as_ref().unwrap().name, "eventsubscription--ledger-core--de-telekom-payments-orderplaced-v1");
    assert_eq!(status.approval_request.as_ref().unwrap().name, "ledger-core--de-telekom-payments-orderplaced-v1--56b5ff7f49");

    let sse = find(&all, "poc--payments--checkout", "checkout-batch--de-telekom-payments-orderplaced-v1");
    assert_eq!((sse.spec.delivery.type_.as_str(), sse.spec.delivery.callback.as_deref()), ("ServerSentEvent", None));
    assert_eq!(sse.spec.scopes, None);
    assert_eq!(sse.spec.trigger.as_ref().unwrap().response_filter.as_ref().unwrap().paths, vec!["$.orderId"]);
    assert_eq!(
        sse.status.as_ref().unwrap().url.as_deref(),
        Some("https://api.caas-cetus.poc.example.com:8443/gw/horizon/sse/v1/de.telekom.payments.orderplaced.v1")
    );

    let refunds = find(&all, "poc--logistics--parcel-tracking", "parcel-tracker--de-telekom-payments-refundissued-v1");
    assert_eq!(refunds.spec.event_type, "de.telekom.payments.refundissued.v1");
    assert_eq!(refunds.status.as_ref().unwrap().approval, None);
    let knowledge = find(&all, "poc--assist--knowledge", "knowledge-base--de-telekom-logistics-fleetposition-v2");
    assert_eq!(knowledge.spec.delivery.payload, "DataRef");
    assert_eq!(knowledge.spec.delivery.retryable_status_codes, None);
}

/// The newer `status.activeScopes` is read when present; absent and `[]` stay apart.
#[test]
fn active_scopes_are_optional() {
    let mut doc = support::world_docs("EventSubscription").remove(0);
    doc["status"]["activeScopes"] = json!(["eu-orders"]);
    let sub: EventSubscription = serde_json::from_value(doc.clone()).unwrap();
    assert_eq!(sub.status.unwrap().active_scopes, Some(vec!["eu-orders".to_string()]));
    doc["status"]["activeScopes"] = json!([]);
    let sub: EventSubscription = serde_json::from_value(doc).unwrap();
    assert_eq!(sub.status.unwrap().active_scopes, Some(vec![]));
}
