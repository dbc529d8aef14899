//! `event.cp.ei.telekom.de/v1` `EventExposure` (CRD `event.cp.ei.telekom.de_eventexposures.yaml`).
//!
//! Also home of the trigger types EventSubscription shares with it ([`EventTrigger`],
//! [`ResponseFilter`], [`SelectionFilter`]): the two CRDs define them identically. The approval
//! configuration is the one of ApiExposure ([`crate::api_exposure::ApprovalConfig`]).

use crate::api_exposure::ApprovalConfig;
use crate::common::{Condition, ObjectRef, TypedObjectRef};
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `spec` of an EventExposure (lives in the provider team's namespace).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "event.cp.ei.telekom.de",
    version = "v1",
    kind = "EventExposure",
    namespaced,
    status = "EventExposureStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct EventExposureSpec {
    /// `spec.eventType` (required by the CRD): the exposed event type, e.g.
    /// `de.telekom.payments.orderplaced.v1`.
    pub event_type: String,
    /// `spec.visibility` (required by the CRD, default `Enterprise`): `World`, `Zone` or
    /// `Enterprise`.
    #[serde(default = "default_visibility")]
    pub visibility: String,
    /// `spec.approval` (required by the CRD).
    pub approval: ApprovalConfig,
    /// `spec.zone` (required by the CRD): the zone the events are published in.
    pub zone: ObjectRef,
    /// `spec.provider` (required by the CRD): the publishing Application.
    pub provider: TypedObjectRef,
    /// `spec.scopes[]` (optional): named subsets of the events, each with its own trigger.
    #[serde(default)]
    pub scopes: Vec<EventScope>,
    /// `spec.additionalPublisherIds[]` (optional; not projected).
    #[serde(default)]
    pub additional_publisher_ids: Vec<String>,
}

fn default_visibility() -> String {
    "Enterprise".to_string()
}

/// `spec.scopes[]` of an EventExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventScope {
    /// `spec.scopes[].name` (required by the CRD).
    pub name: String,
    /// `spec.scopes[].trigger` (required by the CRD).
    pub trigger: EventTrigger,
}

/// An event trigger: `spec.scopes[].trigger` of an EventExposure, `spec.trigger` of an
/// EventSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventTrigger {
    /// `…trigger.responseFilter` (optional): which payload fields are delivered.
    #[serde(default)]
    pub response_filter: Option<ResponseFilter>,
    /// `…trigger.selectionFilter` (optional): which events are delivered.
    #[serde(default)]
    pub selection_filter: Option<SelectionFilter>,
}

/// `…trigger.responseFilter`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResponseFilter {
    /// `…responseFilter.mode` (optional, CRD default `Include`): `Include` or `Exclude`.
    #[serde(default)]
    pub mode: Option<String>,
    /// `…responseFilter.paths[]` (optional): JSON paths, e.g. `$.orderId`.
    #[serde(default)]
    pub paths: Vec<String>,
}

/// `…trigger.selectionFilter`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SelectionFilter {
    /// `…selectionFilter.attributes` (optional): CloudEvents attribute equality matches.
    #[serde(default)]
    pub attributes: Option<BTreeMap<String, String>>,
    /// `…selectionFilter.expression` (optional): an arbitrary JSON filter expression tree,
    /// passed through unvalidated.
    #[serde(default)]
    pub expression: Option<serde_json::Value>,
}

/// `status` of an EventExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventExposureStatus {
    /// `status.active` (required by the CRD, `false` when absent here): whether this is the one
    /// active exposure of its event type in the environment.
    #[serde(default)]
    pub active: bool,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `status.publishURL` (optional): where the provider publishes events.
    #[serde(default, rename = "publishURL")]
    pub publish_url: Option<String>,
    /// `status.callbackURL` (optional; not projected).
    #[serde(default, rename = "callbackURL")]
    pub callback_url: Option<String>,
    /// `status.sseUrls` (optional; not projected): SSE endpoint per zone.
    #[serde(default)]
    pub sse_urls: BTreeMap<String, String>,
    /// `status.route` (optional).
    #[serde(default)]
    pub route: Option<ObjectRef>,
    /// `status.proxyRoutes[]` (optional).
    #[serde(default)]
    pub proxy_routes: Vec<ObjectRef>,
    /// `status.publisher` (optional).
    #[serde(default)]
    pub publisher: Option<ObjectRef>,
}
