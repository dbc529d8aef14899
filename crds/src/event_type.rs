//! `event.cp.ei.telekom.de/v1` `EventType` (CRD `event.cp.ei.telekom.de_eventtypes.yaml`): a
//! catalogue entry of an event type.

use crate::common::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an EventType (lives in the owner team's namespace; name derived from the type,
/// dots to hyphens).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(group = "event.cp.ei.telekom.de", version = "v1", kind = "EventType", namespaced, status = "EventTypeStatus", schema = "disabled")]
#[serde(rename_all = "camelCase")]
pub struct EventTypeSpec {
    /// `spec.type` (required by the CRD): the dot-separated event type identifier, e.g.
    /// `de.telekom.payments.orderplaced.v1`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `spec.version` (required by the CRD), e.g. `1.2.0`.
    pub version: String,
    /// `spec.category` (optional, CRD default `other`; not projected).
    #[serde(default)]
    pub category: Option<String>,
    /// `spec.description` (optional): a human-readable summary.
    #[serde(default)]
    pub description: Option<String>,
    /// `spec.specification` (optional): file-manager file ID of the JSON schema of the payload.
    #[serde(default)]
    pub specification: Option<String>,
}

/// `status` of an EventType.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventTypeStatus {
    /// `status.active` (required by the CRD, `false` when absent here): whether this is the one
    /// active registration of its type in the environment (oldest wins, computed by the event
    /// operator).
    #[serde(default)]
    pub active: bool,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
