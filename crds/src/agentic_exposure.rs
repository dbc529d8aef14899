//! `agentic.cp.ei.telekom.de/v1` `AgenticExposure` (CRD
//! `agentic.cp.ei.telekom.de_agenticexposures.yaml`): an Application exposing an MCP server or an
//! agent on the AI gateway.
//!
//! Shares with ApiExposure what the two CRDs agree on ([`Upstream`], [`ApprovalConfig`],
//! [`Traffic`], [`Transformation`], the credential types); its external identity provider differs
//! (only `tokenEndpoint` is required), so the security types are its own.

use crate::api_exposure::{ApprovalConfig, BasicAuth, ClientCredentials, Traffic, Transformation, Upstream};
use crate::common::{Condition, ObjectRef};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an AgenticExposure.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "agentic.cp.ei.telekom.de",
    version = "v1",
    kind = "AgenticExposure",
    namespaced,
    status = "AgenticExposureStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct AgenticExposureSpec {
    /// `spec.basePath` (required by the CRD, pattern `^/.*$`), e.g. `/mcp/parcels/v1`.
    pub base_path: String,
    /// `spec.upstreams[]` (required by the CRD, at least one).
    pub upstreams: Vec<Upstream>,
    /// `spec.visibility` (required by the CRD, defaulted to `Enterprise` by the API server and so
    /// here too): `World`, `Zone` or `Enterprise`.
    #[serde(default = "default_visibility")]
    pub visibility: String,
    /// `spec.approval` (required by the CRD).
    pub approval: ApprovalConfig,
    /// `spec.zone` (required by the CRD): the zone the server is exposed in.
    pub zone: ObjectRef,
    /// `spec.provider` (required by the CRD): the providing Application.
    pub provider: ObjectRef,
    /// `spec.variant` (required by the CRD, defaulted to `MCP` by the API server and so here
    /// too): `MCP`, `TELECONTEXTMCP` or `AGENT`.
    #[serde(default = "default_variant")]
    pub variant: String,
    /// `spec.security` (optional).
    #[serde(default)]
    pub security: Option<AgenticSecurity>,
    /// `spec.traffic` (optional).
    #[serde(default)]
    pub traffic: Option<Traffic>,
    /// `spec.transformation` (optional).
    #[serde(default)]
    pub transformation: Option<Transformation>,
}

fn default_visibility() -> String {
    "Enterprise".to_string()
}

fn default_variant() -> String {
    "MCP".to_string()
}

/// `spec.security` of an AgenticExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgenticSecurity {
    /// `spec.security.m2m` (optional): machine-to-machine authentication towards the upstream.
    #[serde(default)]
    pub m2m: Option<AgenticMachine2MachineAuthentication>,
}

/// `spec.security.m2m` of an AgenticExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AgenticMachine2MachineAuthentication {
    /// `spec.security.m2m.externalIDP` (optional).
    #[serde(default, rename = "externalIDP")]
    pub external_idp: Option<AgenticExternalIdentityProvider>,
    /// `spec.security.m2m.basic` (optional).
    #[serde(default)]
    pub basic: Option<BasicAuth>,
    /// `spec.security.m2m.scopes[]` (optional, at most 10).
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `spec.security.m2m.externalIDP` of an AgenticExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgenticExternalIdentityProvider {
    /// `spec.security.m2m.externalIDP.tokenEndpoint` (required by the CRD, a URI).
    pub token_endpoint: String,
    /// `spec.security.m2m.externalIDP.tokenRequest` (optional): `client_secret_basic` or
    /// `client_secret_post`.
    #[serde(default)]
    pub token_request: Option<String>,
    /// `spec.security.m2m.externalIDP.grantType` (optional): `client_credentials`,
    /// `authorization_code` or `password`.
    #[serde(default)]
    pub grant_type: Option<String>,
    /// `spec.security.m2m.externalIDP.basic` (optional).
    #[serde(default)]
    pub basic: Option<BasicAuth>,
    /// `spec.security.m2m.externalIDP.client` (optional).
    #[serde(default)]
    pub client: Option<ClientCredentials>,
}

/// `status` of an AgenticExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgenticExposureStatus {
    /// `status.active` (required by the CRD): whether this is the one active exposure of its
    /// base path (oldest wins).
    pub active: bool,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `status.route` (optional).
    #[serde(default)]
    pub route: Option<ObjectRef>,
    /// `status.proxyRoutes[]` (optional).
    #[serde(default)]
    pub proxy_routes: Vec<ObjectRef>,
}
