//! `organization.cp.ei.telekom.de/v1` `Team` (CRD `organization.cp.ei.telekom.de_teams.yaml`).

use crate::common::{Condition, ObjectRef};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of a Team. The object's `metadata.name` is `<group>--<team>`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(group = "organization.cp.ei.telekom.de", version = "v1", kind = "Team", namespaced, status = "TeamStatus", schema = "disabled")]
#[serde(rename_all = "camelCase")]
pub struct TeamSpec {
    /// `spec.name` (required by the CRD): the team's short name (without group).
    pub name: String,
    /// `spec.group` (required by the CRD): name of the team's Group.
    pub group: String,
    /// `spec.email` (required by the CRD): the team's mail address.
    pub email: String,
    /// `spec.category` (required by the CRD, default `Customer`): `Customer` or `Infrastructure`.
    /// Absent → `Customer`, as the API server defaults it.
    #[serde(default = "default_category")]
    pub category: String,
    /// `spec.members[]` (required by the CRD).
    pub members: Vec<TeamMember>,
    /// `spec.displayName` (optional): name shown in UIs.
    #[serde(default)]
    pub display_name: Option<String>,
    /// `spec.description` (optional).
    #[serde(default)]
    pub description: Option<String>,
    /// `spec.secret` (optional): secret reference passed to the team's identity client.
    #[serde(default)]
    pub secret: Option<String>,
    /// `spec.teamToken` (optional): reference of the token for team APIs (a secret).
    #[serde(default)]
    pub team_token: Option<String>,
}

/// The CRD default of `spec.category`.
fn default_category() -> String {
    "Customer".to_string()
}

/// `spec.members[]` of a Team.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TeamMember {
    /// `name` (required by the CRD): the member's display name.
    pub name: String,
    /// `email` (required by the CRD, unique within the team).
    pub email: String,
}

/// `status` of a Team.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TeamStatus {
    /// `status.namespace` (required by the CRD): the team's namespace, e.g. `poc--payments--checkout`.
    pub namespace: String,
    /// `status.teamToken` (optional, deprecated: moved to `spec.teamToken`).
    #[serde(default)]
    pub team_token: Option<String>,
    /// `status.identityClientRef` (optional).
    #[serde(default)]
    pub identity_client_ref: Option<ObjectRef>,
    /// `status.gatewayConsumerRef` (optional).
    #[serde(default)]
    pub gateway_consumer_ref: Option<ObjectRef>,
    /// `status.notificationChannelRef` (optional).
    #[serde(default)]
    pub notification_channel_ref: Option<ObjectRef>,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
