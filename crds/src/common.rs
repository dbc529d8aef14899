//! Types shared by several CRDs: conditions and object references.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

/// A status condition (`status.conditions[]`). Lenient: every field may be absent, because
/// real objects (see `fixtures/samples/`) omit required ones such as `lastTransitionTime`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `type`, e.g. `Ready`, `SecretRotation`.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `status`: `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    /// `reason`, CamelCase, e.g. `Provisioned`, `Error`.
    #[serde(default)]
    pub reason: String,
    /// `message`, human readable.
    #[serde(default)]
    pub message: String,
    /// `lastTransitionTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// `observedGeneration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A reference by name and namespace (`{name, namespace}`), e.g. `spec.zone`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `namespace`.
    #[serde(default)]
    pub namespace: String,
}

/// A typed reference (`{apiVersion, kind, name, namespace}`), e.g. `spec.target` of an Approval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypedObjectRef {
    /// `apiVersion`, e.g. `api.cp.ei.telekom.de/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `kind`, e.g. `ApiSubscription`.
    #[serde(default)]
    pub kind: String,
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `namespace` (may be empty: then the referring object's own namespace).
    #[serde(default)]
    pub namespace: String,
}
