//! `event.cp.ei.telekom.de/v1` `EventSubscription` (CRD
//! `event.cp.ei.telekom.de_eventsubscriptions.yaml`).
//!
//! The trigger type is shared with EventExposure ([`crate::event_exposure::EventTrigger`]).
//! `status.activeScopes` is read as optional although the CRD lacks it (ARCHITECTURE.md "Fields
//! newer than the CRDs").

use crate::common::{Condition, ObjectRef, TypedObjectRef};
use crate::event_exposure::EventTrigger;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an EventSubscription (lives in the subscriber team's namespace).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "event.cp.ei.telekom.de",
    version = "v1",
    kind = "EventSubscription",
    namespaced,
    status = "EventSubscriptionStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct EventSubscriptionSpec {
    /// `spec.eventType` (required by the CRD): the subscribed event type.
    pub event_type: String,
    /// `spec.zone` (required by the CRD): the zone the subscriber consumes from.
    pub zone: ObjectRef,
    /// `spec.requestor` (required by the CRD): the subscribing Application.
    pub requestor: TypedObjectRef,
    /// `spec.delivery` (required by the CRD).
    pub delivery: Delivery,
    /// `spec.trigger` (optional): which events and payload fields are delivered.
    #[serde(default)]
    pub trigger: Option<EventTrigger>,
    /// `spec.scopes[]` (optional): the requested scopes of the exposure. `None` when absent.
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
}

/// `spec.delivery` of an EventSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// `spec.delivery.type` (required by the CRD, default `Callback`): `Callback` or
    /// `ServerSentEvent`.
    #[serde(rename = "type", default = "default_delivery_type")]
    pub type_: String,
    /// `spec.delivery.payload` (required by the CRD, default `Data`): `Data` or `DataRef`.
    #[serde(default = "default_payload")]
    pub payload: String,
    /// `spec.delivery.callback` (optional, a URI): where events are delivered (type `Callback`
    /// only).
    #[serde(default)]
    pub callback: Option<String>,
    /// `spec.delivery.eventRetentionTime` (optional), e.g. `168h`.
    #[serde(default)]
    pub event_retention_time: Option<String>,
    /// `spec.delivery.circuitBreakerOptOut` (optional).
    #[serde(default)]
    pub circuit_breaker_opt_out: Option<bool>,
    /// `spec.delivery.retryableStatusCodes[]` (optional): HTTP status codes that are retried.
    #[serde(default)]
    pub retryable_status_codes: Option<Vec<i64>>,
    /// `spec.delivery.redeliveriesPerSecond` (optional): redelivery rate limit.
    #[serde(default)]
    pub redeliveries_per_second: Option<i64>,
    /// `spec.delivery.enforceGetHttpRequestMethodForHealthCheck` (optional): health checks use
    /// GET instead of HEAD.
    #[serde(default)]
    pub enforce_get_http_request_method_for_health_check: Option<bool>,
}

fn default_delivery_type() -> String {
    "Callback".to_string()
}

fn default_payload() -> String {
    "Data".to_string()
}

/// `status` of an EventSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventSubscriptionStatus {
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `status.url` (optional, a URI): the SSE endpoint (type `ServerSentEvent`).
    #[serde(default)]
    pub url: Option<String>,
    /// `status.subscriptionID` (optional; not projected): the subscriber's ID in the event
    /// broker.
    #[serde(default, rename = "subscriptionID")]
    pub subscription_id: Option<String>,
    /// `status.activeScopes` (optional; **not in the CRD**, newer platform generation): the last
    /// approved scopes written downstream. Absent and `[]` are kept apart.
    #[serde(default)]
    pub active_scopes: Option<Vec<String>>,
    /// `status.approval` (optional): the subscription's Approval.
    #[serde(default)]
    pub approval: Option<ObjectRef>,
    /// `status.approvalRequest` (optional): the current ApprovalRequest.
    #[serde(default)]
    pub approval_request: Option<ObjectRef>,
    /// `status.subscriber` (optional).
    #[serde(default)]
    pub subscriber: Option<ObjectRef>,
}
