//! `api.cp.ei.telekom.de/v1` `ApiSubscription` (CRD `api.cp.ei.telekom.de_apisubscriptions.yaml`).
//!
//! The credential types are shared with ApiExposure ([`crate::api_exposure::BasicAuth`],
//! [`crate::api_exposure::ClientCredentials`]). `status.activeScopes` is read as optional although
//! the CRD lacks it (ARCHITECTURE.md "Fields newer than the CRDs").

use crate::api_exposure::{BasicAuth, ClientCredentials};
use crate::common::{Condition, ObjectRef};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an ApiSubscription.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "api.cp.ei.telekom.de",
    version = "v1",
    kind = "ApiSubscription",
    namespaced,
    status = "ApiSubscriptionStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ApiSubscriptionSpec {
    /// `spec.apiBasePath` (required by the CRD): the base path of the subscribed API.
    pub api_base_path: String,
    /// `spec.requestor` (required by the CRD): who subscribes.
    pub requestor: Requestor,
    /// `spec.zone` (required by the CRD): the zone the subscriber consumes from.
    pub zone: ObjectRef,
    /// `spec.traffic` (required by the CRD).
    pub traffic: SubscriberTraffic,
    /// `spec.security` (optional).
    #[serde(default)]
    pub security: Option<SubscriberSecurity>,
    /// `spec.organization` (optional).
    #[serde(default)]
    pub organization: Option<String>,
}

/// `spec.requestor` of an ApiSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Requestor {
    /// `spec.requestor.application` (required by the CRD): the subscribing Application.
    pub application: ObjectRef,
}

/// `spec.traffic` of an ApiSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscriberTraffic {
    /// `spec.traffic.failover` (optional).
    #[serde(default)]
    pub failover: Option<SubscriberFailover>,
}

/// `spec.traffic.failover` of an ApiSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscriberFailover {
    /// `spec.traffic.failover.enabled` (required by the CRD, defaulted to `false` by the API
    /// server and so here too).
    #[serde(default)]
    pub enabled: bool,
}

/// `spec.security` of an ApiSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscriberSecurity {
    /// `spec.security.m2m` (optional).
    #[serde(default)]
    pub m2m: Option<SubscriberMachine2MachineAuthentication>,
}

/// `spec.security.m2m` of an ApiSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscriberMachine2MachineAuthentication {
    /// `spec.security.m2m.client` (optional): OAuth2 client credentials.
    #[serde(default)]
    pub client: Option<ClientCredentials>,
    /// `spec.security.m2m.basic` (optional).
    #[serde(default)]
    pub basic: Option<BasicAuth>,
    /// `spec.security.m2m.scopes[]` (optional): the requested scopes.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `status` of an ApiSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiSubscriptionStatus {
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `status.gatewayUrl` (optional): the URL subscribers call.
    #[serde(default)]
    pub gateway_url: Option<String>,
    /// `status.idpIssuer` (optional).
    #[serde(default)]
    pub idp_issuer: Option<String>,
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
    /// `status.route` (optional).
    #[serde(default)]
    pub route: Option<ObjectRef>,
    /// `status.remoteApiSubscription` (optional).
    #[serde(default)]
    pub remote_api_subscription: Option<ObjectRef>,
    /// `status.failoverRoutes[]` (optional).
    #[serde(default)]
    pub failover_routes: Vec<ObjectRef>,
    /// `status.failoverConsumeRoutes[]` (optional).
    #[serde(default)]
    pub failover_consume_routes: Vec<ObjectRef>,
}
