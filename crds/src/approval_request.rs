//! `approval.cp.ei.telekom.de/v1` `ApprovalRequest` (CRD
//! `approval.cp.ei.telekom.de_approvalrequests.yaml`).
//!
//! Requester, decider, decisions and transitions are the types of [`crate::approval`]; the spec
//! differs from an Approval's only by lacking `approvedRequest`, the status by a required
//! `approval` reference and no `expiresAt`.

use crate::approval::{default_action, default_state, default_strategy};
use crate::approval::{AvailableTransition, Decider, Decision, Requester};
use crate::common::{Condition, ObjectRef, TypedObjectRef};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an ApprovalRequest.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "approval.cp.ei.telekom.de",
    version = "v1",
    kind = "ApprovalRequest",
    namespaced,
    status = "ApprovalRequestStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequestSpec {
    /// `spec.action` (required by the CRD, defaulted to `unknown` by the API server and so here
    /// too), e.g. `subscribe`.
    #[serde(default = "default_action")]
    pub action: String,
    /// `spec.strategy` (required by the CRD, default `Auto`): `Auto`, `Simple` or `FourEyes`.
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// `spec.state` (required by the CRD, default `Pending`): `Pending`, `Granted`,
    /// `Semigranted` or `Rejected`.
    #[serde(default = "default_state")]
    pub state: String,
    /// `spec.target` (required by the CRD): the subscription the request is for.
    pub target: TypedObjectRef,
    /// `spec.requester` (required by the CRD).
    pub requester: Requester,
    /// `spec.decider` (optional).
    #[serde(default)]
    pub decider: Option<Decider>,
    /// `spec.decisions[]` (required by the CRD, default `[]`).
    #[serde(default)]
    pub decisions: Vec<Decision>,
}

/// `status` of an ApprovalRequest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequestStatus {
    /// `status.approval` (required by the CRD): the Approval of the same subscription.
    pub approval: ObjectRef,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `status.availableTransitions[]` (optional).
    #[serde(default)]
    pub available_transitions: Vec<AvailableTransition>,
    /// `status.lastState` (optional).
    #[serde(default)]
    pub last_state: Option<String>,
    /// `status.notificationRefs[]` (optional).
    #[serde(default)]
    pub notification_refs: Vec<ObjectRef>,
}
