//! `admin.cp.ei.telekom.de/v1` `Zone` (CRD `admin.cp.ei.telekom.de_zones.yaml`).
//!
//! Besides today's `spec.gateway` / `spec.aiGateway` this also reads the newer typed
//! `spec.gateways[]` / `spec.presets[]` (type `API`/`AI`, not in the CRD yet; ARCHITECTURE.md
//! "Fields newer than the CRDs"), all optional so both generations of objects deserialize.
//! Sub-structures no projection needs (`spec.identityProvider`, `spec.redis`,
//! `spec.managedRoutes`, gateway admin credentials, the status object references) are not modelled
//! and are ignored when present.

use crate::common::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of a Zone.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(group = "admin.cp.ei.telekom.de", version = "v1", kind = "Zone", namespaced, status = "ZoneStatus", schema = "disabled")]
#[serde(rename_all = "camelCase")]
pub struct ZoneSpec {
    /// `spec.visibility` (required by the CRD): `World` or `Enterprise`.
    pub visibility: String,
    /// `spec.gateway`. Required by the CRD, optional here because zones of the newer generation
    /// describe their gateways in `spec.gateways[]` / `spec.presets[]` instead.
    #[serde(default)]
    pub gateway: Option<ZoneGateway>,
    /// `spec.aiGateway`: the dedicated AI gateway (optional; when present the zone supports
    /// agentic exposures).
    #[serde(default)]
    pub ai_gateway: Option<ZoneGateway>,
    /// `spec.gateways[]` (newer generation, not in the CRD): the zone's gateway instances.
    #[serde(default)]
    pub gateways: Vec<ZoneGatewayInstance>,
    /// `spec.presets[]` (newer generation, not in the CRD): typed URL profiles (`API`/`AI`).
    #[serde(default)]
    pub presets: Vec<ZoneTypedPreset>,
    /// `spec.permissions` (optional): permission service integration.
    #[serde(default)]
    pub permissions: Option<ZonePermissions>,
    /// `spec.externalIdPolicies[]` (optional): per-scheme rules for applications' external IDs.
    #[serde(default)]
    pub external_id_policies: Vec<ZoneExternalIdPolicy>,
}

/// `spec.gateway` / `spec.aiGateway` of a Zone (the admin endpoint is not modelled).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneGateway {
    /// `presets[]` (required by the CRD): the gateway's URL profiles.
    pub presets: Vec<ZonePreset>,
}

/// `spec.gateway.presets[]` / `spec.aiGateway.presets[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZonePreset {
    /// `name` (required by the CRD).
    pub name: String,
    /// `default` (CRD default `false`): the preset used for the zone's gateway URL.
    #[serde(default)]
    pub default: bool,
    /// `urls[]` (required by the CRD).
    pub urls: Vec<ZonePresetUrl>,
    /// `features[]` (optional).
    #[serde(default)]
    pub features: Vec<ZoneFeature>,
}

/// `spec.gateway.presets[].urls[]`: one externally reachable URL of a preset.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZonePresetUrl {
    /// `hostname` (required by the CRD).
    pub hostname: String,
    /// `basePath` (required by the CRD), e.g. `/`.
    pub base_path: String,
    /// `hidden` (required by the CRD): not advertised as the zone's gateway URL.
    pub hidden: bool,
    /// `port` (optional; absent or `0` = the scheme's default port).
    #[serde(default)]
    pub port: Option<i32>,
    /// `scheme` (`http`/`https`, CRD default `https`).
    #[serde(default)]
    pub scheme: Option<String>,
}

/// `features[]` of a preset and `status.features[]`: a named feature switch.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneFeature {
    /// `name` (required by the CRD), e.g. `SecretRotation`.
    #[serde(default)]
    pub name: String,
    /// `enabled` (required by the CRD).
    #[serde(default)]
    pub enabled: bool,
}

/// `spec.gateways[]` (newer generation, not in the CRD): one gateway instance. Lenient: every
/// field may be absent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneGatewayInstance {
    /// `name`, referenced by `spec.presets[].gatewayRef`.
    #[serde(default)]
    pub name: String,
    /// `admin` (only the non-secret parts are modelled).
    #[serde(default)]
    pub admin: Option<ZoneGatewayInstanceAdmin>,
}

/// `spec.gateways[].admin` (newer generation).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneGatewayInstanceAdmin {
    /// `url` of the gateway's admin API.
    #[serde(default)]
    pub url: Option<String>,
    /// `identityProviderRef`: name of an entry of `spec.identityProviders[]`.
    #[serde(default)]
    pub identity_provider_ref: Option<String>,
}

/// `spec.presets[]` (newer generation, not in the CRD): a typed URL profile. Lenient: every
/// field may be absent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneTypedPreset {
    /// `name`.
    #[serde(default)]
    pub name: String,
    /// `type`: traffic type, `API` or `AI` (kept as a string, matched case-insensitively).
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `default`: the representative preset of its type (`false` when absent).
    #[serde(default)]
    pub default: bool,
    /// `gatewayRef`: name of an entry of `spec.gateways[]`.
    #[serde(default)]
    pub gateway_ref: Option<String>,
    /// `identityProviderRef`: name of an entry of `spec.identityProviders[]`.
    #[serde(default)]
    pub identity_provider_ref: Option<String>,
    /// `urls[]`.
    #[serde(default)]
    pub urls: Vec<ZoneTypedPresetUrl>,
}

/// `spec.presets[].urls[]` (newer generation): like [`ZonePresetUrl`] but every field optional
/// (`hidden` defaults to `false`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneTypedPresetUrl {
    /// `hostname`.
    #[serde(default)]
    pub hostname: String,
    /// `basePath`.
    #[serde(default)]
    pub base_path: String,
    /// `hidden` (`false` when absent).
    #[serde(default)]
    pub hidden: bool,
    /// `port` (absent or `0` = the scheme's default port).
    #[serde(default)]
    pub port: Option<i32>,
    /// `scheme` (`https` when absent).
    #[serde(default)]
    pub scheme: Option<String>,
}

/// `spec.permissions` of a Zone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZonePermissions {
    /// `apiBasePath` (required by the CRD): base path of the permission service on the gateway.
    pub api_base_path: String,
    /// `consoleUrl` (optional).
    #[serde(default)]
    pub console_url: Option<String>,
}

/// `spec.externalIdPolicies[]` of a Zone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneExternalIdPolicy {
    /// `scheme` (required by the CRD), e.g. `psa`.
    pub scheme: String,
    /// `pattern` (required by the CRD): regular expression the ID must match.
    pub pattern: String,
    /// `required` (CRD default `false`).
    #[serde(default)]
    pub required: bool,
}

/// `status` of a Zone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneStatus {
    /// `status.namespace`: the zone's own namespace, e.g. `poc--aws-eu1`.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `status.links`: the URLs the zone publishes.
    #[serde(default)]
    pub links: Option<ZoneLinks>,
    /// `status.features[]`: features enabled or disabled for the zone.
    #[serde(default)]
    pub features: Vec<ZoneFeature>,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// `status.links` of a Zone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneLinks {
    /// `status.links.gatewayUrl` (required by the CRD).
    pub gateway_url: String,
    /// `status.links.gatewayIssuer` (required by the CRD): the gateway's token issuer.
    pub gateway_issuer: String,
    /// `status.links.gatewayLmsIssuer` (optional): last-mile-security issuer.
    #[serde(default)]
    pub gateway_lms_issuer: Option<String>,
    /// `status.links.internalIssuer` (optional).
    #[serde(default)]
    pub internal_issuer: Option<String>,
    /// `status.links.permissionsUrl` (optional): the permission service URL.
    #[serde(default)]
    pub permissions_url: Option<String>,
    /// `status.links.teamApiIssuer` (optional).
    #[serde(default)]
    pub team_api_issuer: Option<String>,
}
