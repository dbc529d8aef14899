//! `api.cp.ei.telekom.de/v1` `Api` (CRD `api.cp.ei.telekom.de_apis.yaml`): a catalogue entry.

use crate::common::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an Api (lives in the owner team's namespace; name derived from the base path).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(group = "api.cp.ei.telekom.de", version = "v1", kind = "Api", namespaced, status = "ApiStatus", schema = "disabled")]
#[serde(rename_all = "camelCase")]
pub struct ApiSpec {
    /// `spec.basePath` (required by the CRD), e.g. `/payments/checkout/v1`.
    pub base_path: String,
    /// `spec.version` (required by the CRD), e.g. `1.4.0`.
    pub version: String,
    /// `spec.category` (required by the CRD), e.g. `other`.
    pub category: String,
    /// `spec.xVendor` (required by the CRD).
    pub x_vendor: bool,
    /// `spec.oauth2Scopes[]` (optional; empty when absent).
    #[serde(default)]
    pub oauth2_scopes: Vec<String>,
    /// `spec.specification` (optional): file-manager file ID of the OpenAPI document.
    #[serde(default)]
    pub specification: Option<String>,
}

/// `status` of an Api.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiStatus {
    /// `status.active` (required by the CRD): whether this is the one active registration of its
    /// base path in the environment (oldest wins, computed by the API operator).
    pub active: bool,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
