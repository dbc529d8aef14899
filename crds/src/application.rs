//! `application.cp.ei.telekom.de/v1` `Application` (CRD
//! `application.cp.ei.telekom.de_applications.yaml`).

use crate::common::{Condition, ObjectRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an Application (lives in its team's namespace `<env>--<group>--<team>`).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "application.cp.ei.telekom.de",
    version = "v1",
    kind = "Application",
    namespaced,
    status = "ApplicationStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSpec {
    /// `spec.team` (required by the CRD): the owner team's name `<group>--<team>`.
    pub team: String,
    /// `spec.teamEmail` (required by the CRD).
    pub team_email: String,
    /// `spec.zone` (required by the CRD): the application's primary Zone.
    pub zone: ObjectRef,
    /// `spec.secret` (required by the CRD): the client secret (usually a secret reference `$<…>`).
    pub secret: String,
    /// `spec.failover` (required by the CRD).
    pub failover: ApplicationFailover,
    /// `spec.needsClient` (required by the CRD, default `true`): whether an identity client is
    /// created.
    #[serde(default = "default_true")]
    pub needs_client: bool,
    /// `spec.needsConsumer` (required by the CRD, default `true`): whether a gateway consumer is
    /// created.
    #[serde(default = "default_true")]
    pub needs_consumer: bool,
    /// `spec.rotatedSecret` (optional): reference of the previous client secret during a grace
    /// period.
    #[serde(default)]
    pub rotated_secret: Option<String>,
    /// `spec.externalIds[]` (optional): business identifiers, in order.
    #[serde(default)]
    pub external_ids: Vec<ExternalId>,
    /// `spec.security` (optional).
    #[serde(default)]
    pub security: Option<ApplicationSecurity>,
}

/// The CRD default of `spec.needsClient` and `spec.needsConsumer`.
fn default_true() -> bool {
    true
}

/// `spec.failover` of an Application.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationFailover {
    /// `spec.failover.enabled` (required by the CRD).
    pub enabled: bool,
}

/// `spec.externalIds[]` of an Application.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalId {
    /// `id` (required by the CRD), e.g. `PSA-10442`.
    pub id: String,
    /// `scheme` (required by the CRD), e.g. `psa`.
    pub scheme: String,
}

/// `spec.security` of an Application.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSecurity {
    /// `spec.security.ipRestrictions` (optional).
    #[serde(default)]
    pub ip_restrictions: Option<IpRestrictions>,
}

/// `spec.security.ipRestrictions` of an Application.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IpRestrictions {
    /// `allow[]`: CIDRs or addresses allowed (empty when absent).
    #[serde(default)]
    pub allow: Vec<String>,
    /// `deny[]`: CIDRs or addresses denied (empty when absent).
    #[serde(default)]
    pub deny: Vec<String>,
}

/// `status` of an Application.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationStatus {
    /// `status.clientId` (required by the CRD; may be `""` before the client exists).
    pub client_id: String,
    /// `status.clientSecret` (required by the CRD).
    pub client_secret: String,
    /// `status.rotatedClientSecret` (optional): the previous secret during a grace period.
    #[serde(default)]
    pub rotated_client_secret: Option<String>,
    /// `status.rotatedExpiresAt` (optional): when the rotated (old) secret stops being accepted.
    #[serde(default)]
    pub rotated_expires_at: Option<Time>,
    /// `status.currentExpiresAt` (optional): when the current secret expires.
    #[serde(default)]
    pub current_expires_at: Option<Time>,
    /// `status.clients[]`: the identity clients created for the application.
    #[serde(default)]
    pub clients: Vec<ObjectRef>,
    /// `status.consumers[]`: the gateway consumers created for the application.
    #[serde(default)]
    pub consumers: Vec<ObjectRef>,
    /// `status.conditions` (`Ready`, `SecretRotation`, …).
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
