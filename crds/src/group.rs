//! `organization.cp.ei.telekom.de/v1` `Group` (CRD `organization.cp.ei.telekom.de_groups.yaml`).

use crate::common::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of a Group.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(group = "organization.cp.ei.telekom.de", version = "v1", kind = "Group", namespaced, status = "GroupStatus", schema = "disabled")]
#[serde(rename_all = "camelCase")]
pub struct GroupSpec {
    /// `spec.displayName` (required by the CRD).
    pub display_name: String,
    /// `spec.description` (optional).
    #[serde(default)]
    pub description: Option<String>,
}

/// `status` of a Group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
