//! `agentic.cp.ei.telekom.de/v1` `AgenticSubscription` (CRD
//! `agentic.cp.ei.telekom.de_agenticsubscriptions.yaml`): an Application subscribing to an MCP
//! server or agent.
//!
//! Its requestor, security and traffic blocks have the shape of ApiSubscription's
//! ([`Requestor`], [`SubscriberSecurity`], [`SubscriberTraffic`]). `status.activeScopes` is read as
//! optional although the CRD lacks it (ARCHITECTURE.md "Fields newer than the CRDs").

use crate::api_subscription::{Requestor, SubscriberSecurity, SubscriberTraffic};
use crate::common::{Condition, ObjectRef};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an AgenticSubscription.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "agentic.cp.ei.telekom.de",
    version = "v1",
    kind = "AgenticSubscription",
    namespaced,
    status = "AgenticSubscriptionStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct AgenticSubscriptionSpec {
    /// `spec.basePath` (required by the CRD, pattern `^/.*$`): the base path of the subscribed
    /// MCP server or agent.
    pub base_path: String,
    /// `spec.requestor` (required by the CRD): who subscribes.
    pub requestor: Requestor,
    /// `spec.zone` (required by the CRD): the zone the subscriber consumes from.
    pub zone: ObjectRef,
    /// `spec.security` (optional).
    #[serde(default)]
    pub security: Option<SubscriberSecurity>,
    /// `spec.traffic` (optional).
    #[serde(default)]
    pub traffic: Option<SubscriberTraffic>,
}

/// `status` of an AgenticSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgenticSubscriptionStatus {
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `status.gatewayUrl` (optional): the path-specific AI gateway URL subscribers call.
    #[serde(default)]
    pub gateway_url: Option<String>,
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
    /// `status.consumeRoute` (optional).
    #[serde(default)]
    pub consume_route: Option<ObjectRef>,
}
