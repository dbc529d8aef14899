//! `agentic.cp.ei.telekom.de/v1` `McpServer` (CRD `agentic.cp.ei.telekom.de_mcpservers.yaml`): a
//! catalogue entry of an MCP server.
//!
//! `spec.hash` is read as optional although the CRD lacks it (ARCHITECTURE.md "Fields newer
//! than the CRDs"). Optional fields are not serialized when absent, so that serializing the spec
//! gives back the fields the document carries (the catalogue hash is computed over it).

use crate::common::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an McpServer (lives in the owner team's namespace; name derived from the base path).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(group = "agentic.cp.ei.telekom.de", version = "v1", kind = "McpServer", namespaced, status = "McpServerStatus", schema = "disabled")]
#[serde(rename_all = "camelCase")]
pub struct McpServerSpec {
    /// `spec.basePath` (required by the CRD, pattern `^/.*$`), e.g. `/mcp/parcels/v1`.
    pub base_path: String,
    /// `spec.name` (required by the CRD): the human-readable title, e.g. `Parcel Tracking MCP`.
    pub name: String,
    /// `spec.version` (required by the CRD), e.g. `1.0.0`.
    pub version: String,
    /// `spec.description` (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `spec.category` (optional), e.g. `tool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// `spec.scopes[]` (optional; empty when absent): the OAuth2 scopes the server offers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// `spec.specification` (optional): file-manager file ID of the MCP specification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specification: Option<String>,
    /// `spec.hash` (optional; **not in the CRD**, newer platform generation): SHA-256 of the
    /// specification content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

/// `status` of an McpServer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatus {
    /// `status.active` (required by the CRD): whether this is the one active registration of its
    /// base path in the environment (oldest wins, computed by the operator).
    pub active: bool,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
