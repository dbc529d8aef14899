//! `permission.cp.ei.telekom.de/v1` `PermissionSet` (CRD
//! `permission.cp.ei.telekom.de_permissionsets.yaml`): the permissions of one Application,
//! named by the label `cp.ei.telekom.de/application`.

use crate::common::{Condition, ObjectRef};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of a PermissionSet (lives in its team's namespace).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "permission.cp.ei.telekom.de",
    version = "v1",
    kind = "PermissionSet",
    namespaced,
    status = "PermissionSetStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct PermissionSetSpec {
    /// `spec.permissions[]` (required by the CRD, at least one): the grants, in order.
    pub permissions: Vec<Permission>,
}

/// `spec.permissions[]`: one role-resource-actions grant.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Permission {
    /// `spec.permissions[].role` (required by the CRD).
    pub role: String,
    /// `spec.permissions[].resource` (required by the CRD).
    pub resource: String,
    /// `spec.permissions[].actions[]` (required by the CRD, at least one).
    pub actions: Vec<String>,
}

/// `status` of a PermissionSet.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionSetStatus {
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `status.permissionSet` (optional): the external PermissionSet created for the permission
    /// service (not projected).
    #[serde(default)]
    pub permission_set: Option<ObjectRef>,
}
