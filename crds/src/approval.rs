//! `approval.cp.ei.telekom.de/v1` `Approval` (CRD `approval.cp.ei.telekom.de_approvals.yaml`).
//!
//! Also home of the types ApprovalRequest shares with it ([`Requester`], [`Decider`],
//! [`Decision`], [`AvailableTransition`]): the two CRDs define them identically.

use crate::common::{ObjectRef, TypedObjectRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// A spec or status struct of the approval family: the fields Approval and ApprovalRequest share
/// (their CRDs define them identically), then the kind's own `$own` fields.
macro_rules! approval_struct {
    (spec $(#[$attr:meta])* $name:ident { $($own:tt)* }) => {
        $(#[$attr])*
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// `spec.action` (required by the CRD, defaulted to `unknown` by the API server and
            /// so here too), e.g. `subscribe`.
            #[serde(default = "crate::approval::default_action")]
            pub action: String,
            /// `spec.strategy` (required by the CRD, default `Auto`): `Auto`, `Simple` or
            /// `FourEyes`.
            #[serde(default = "crate::approval::default_strategy")]
            pub strategy: String,
            /// `spec.state` (required by the CRD, default `Pending`): `Pending`, `Semigranted`,
            /// `Granted`, `Rejected`; an Approval also `Suspended` or `Expired`.
            #[serde(default = "crate::approval::default_state")]
            pub state: String,
            /// `spec.target` (required by the CRD): the subscription the approval is for.
            pub target: $crate::common::TypedObjectRef,
            /// `spec.requester` (required by the CRD).
            pub requester: $crate::approval::Requester,
            /// `spec.decider` (optional).
            #[serde(default)]
            pub decider: Option<$crate::approval::Decider>,
            /// `spec.decisions[]` (required by the CRD, default `[]`).
            #[serde(default)]
            pub decisions: Vec<$crate::approval::Decision>,
            $($own)*
        }
    };
    (status $(#[$attr:meta])* $name:ident { $($own:tt)* }) => {
        $(#[$attr])*
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            /// `status.conditions`.
            #[serde(default)]
            pub conditions: Vec<$crate::common::Condition>,
            /// `status.availableTransitions[]` (optional).
            #[serde(default)]
            pub available_transitions: Vec<$crate::approval::AvailableTransition>,
            /// `status.lastState` (optional).
            #[serde(default)]
            pub last_state: Option<String>,
            /// `status.notificationRefs[]` (optional).
            #[serde(default)]
            pub notification_refs: Vec<$crate::common::ObjectRef>,
            $($own)*
        }
    };
}
pub(crate) use approval_struct;

approval_struct!(spec
    /// `spec` of an Approval.
    #[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[kube(group = "approval.cp.ei.telekom.de", version = "v1", kind = "Approval", namespaced, status = "ApprovalStatus", schema = "disabled")]
    ApprovalSpec {
        /// `spec.approvedRequest` (optional): the ApprovalRequest this approval was granted for.
        #[serde(default)]
        pub approved_request: Option<ObjectRef>,
    }
);

/// The CRD default of `spec.action`.
pub(crate) fn default_action() -> String {
    "unknown".to_string()
}

/// The CRD default of `spec.strategy`.
pub(crate) fn default_strategy() -> String {
    "Auto".to_string()
}

/// The CRD default of `spec.state`.
pub(crate) fn default_state() -> String {
    "Pending".to_string()
}

/// `spec.requester` of an Approval or ApprovalRequest: the subscribing team.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requester {
    /// `spec.requester.teamName` (required by the CRD).
    pub team_name: String,
    /// `spec.requester.teamEmail` (required by the CRD; may be `""`).
    pub team_email: String,
    /// `spec.requester.reason` (required by the CRD).
    pub reason: String,
    /// `spec.requester.applicationRef` (optional): the subscribing Application (or, for file
    /// approvals, the FileSubscription).
    #[serde(default)]
    pub application_ref: Option<TypedObjectRef>,
    /// `spec.requester.properties` (optional): free-form JSON object the operator writes, e.g.
    /// `{basePath, resource_type, resource_name, scopes}`.
    #[serde(default)]
    pub properties: Option<serde_json::Value>,
}

/// `spec.decider` of an Approval or ApprovalRequest: the providing team.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decider {
    /// `spec.decider.teamName` (optional in the CRD; required for projection).
    #[serde(default)]
    pub team_name: Option<String>,
    /// `spec.decider.teamEmail` (optional).
    #[serde(default)]
    pub team_email: Option<String>,
    /// `spec.decider.applicationRef` (optional): the providing Application (or exposure).
    #[serde(default)]
    pub application_ref: Option<TypedObjectRef>,
}

/// `spec.decisions[]` of an Approval or ApprovalRequest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// `spec.decisions[].name` (required by the CRD): who decided (`System` for auto-approval).
    pub name: String,
    /// `spec.decisions[].email` (optional).
    #[serde(default)]
    pub email: Option<String>,
    /// `spec.decisions[].comment` (optional).
    #[serde(default)]
    pub comment: Option<String>,
    /// `spec.decisions[].timestamp` (optional).
    #[serde(default)]
    pub timestamp: Option<Time>,
    /// `spec.decisions[].resultingState` (required by the CRD): the state the decision led to.
    pub resulting_state: String,
}

/// `status.availableTransitions[]` of an Approval or ApprovalRequest.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AvailableTransition {
    /// `status.availableTransitions[].action` (required by the CRD), e.g. `Allow`, `Suspend`.
    pub action: String,
    /// `status.availableTransitions[].to` (required by the CRD): the resulting state.
    pub to: String,
}

approval_struct!(status
    /// `status` of an Approval.
    ApprovalStatus {
        /// `status.expiresAt` (optional): when a granted approval expires.
        #[serde(default)]
        pub expires_at: Option<Time>,
    }
);
