//! `agentic.cp.ei.telekom.de/v1` `AgentCard` (CRD `agentic.cp.ei.telekom.de_agentcards.yaml`): a
//! catalogue entry of an (A2A) agent.
//!
//! `spec.hash` is read as optional although the CRD lacks it (ARCHITECTURE.md "Fields newer
//! than the CRDs"). Optional fields are not serialized when absent, so that serializing the spec
//! gives back the fields the document carries (the catalogue hash is computed over it).

use crate::common::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an AgentCard (lives in the owner team's namespace; name derived from the base path).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(group = "agentic.cp.ei.telekom.de", version = "v1", kind = "AgentCard", namespaced, status = "AgentCardStatus", schema = "disabled")]
#[serde(rename_all = "camelCase")]
pub struct AgentCardSpec {
    /// `spec.basePath` (required by the CRD, pattern `^/.*$`), e.g. `/agents/copilot/v1`.
    pub base_path: String,
    /// `spec.name` (required by the CRD): the human-readable title, e.g. `Customer Copilot`.
    pub name: String,
    /// `spec.version` (required by the CRD), e.g. `1.1.0`.
    pub version: String,
    /// `spec.description` (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// `spec.category` (optional), e.g. `assistant`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// `spec.scopes[]` (optional; empty when absent): the OAuth2 scopes the agent offers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// `spec.specification` (optional): file-manager file ID of the agent card (JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specification: Option<String>,
    /// `spec.hash` (optional; **not in the CRD**, newer platform generation): SHA-256 of the
    /// specification content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
}

/// `status` of an AgentCard.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCardStatus {
    /// `status.active` (required by the CRD): whether this is the one active registration of its
    /// base path in the environment (oldest wins, computed by the operator).
    pub active: bool,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
