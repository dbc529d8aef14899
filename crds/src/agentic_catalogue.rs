//! What the two agentic catalogue CRDs share: McpServer and AgentCard have the same `spec` and
//! `status` (`agentic.cp.ei.telekom.de/v1`), declared once by [`agentic_catalogue_cr!`].
//!
//! `spec.hash` is read as optional although the CRDs lack it (ARCHITECTURE.md "Fields newer than
//! the CRDs"). Optional fields are not serialized when absent, so that serializing the spec
//! gives back the fields the document carries (the catalogue hash is computed over it).

/// Declares a custom resource of the agentic catalogue family: its `$spec` type (kube's derive
/// makes the resource type from it) and `$status` type, named again as strings for the derive.
macro_rules! agentic_catalogue_cr {
    ($spec:ident, $status:ident, kind = $kind_name:tt, status = $status_name:tt) => {
        #[doc = concat!("`spec` of a ", $kind_name, " (lives in the owner team's namespace; name derived from the base path).")]
        #[derive(kube::CustomResource, Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[kube(group = "agentic.cp.ei.telekom.de", version = "v1", kind = $kind_name, namespaced, status = $status_name, schema = "disabled")]
        #[serde(rename_all = "camelCase")]
        pub struct $spec {
            /// `spec.basePath` (required by the CRD, pattern `^/.*$`), e.g. `/mcp/parcels/v1`.
            pub base_path: String,
            /// `spec.name` (required by the CRD): the human-readable title, e.g. `Parcel Tracking MCP`.
            pub name: String,
            /// `spec.version` (required by the CRD), e.g. `1.0.0`.
            pub version: String,
            /// `spec.description` (optional).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub description: Option<String>,
            /// `spec.category` (optional), e.g. `tool` or `assistant`.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub category: Option<String>,
            /// `spec.scopes[]` (optional; empty when absent): the OAuth2 scopes the entry offers.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub scopes: Vec<String>,
            /// `spec.specification` (optional): file-manager file ID of the specification (an
            /// MCP specification, an agent card).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub specification: Option<String>,
            /// `spec.hash` (optional; **not in the CRD**, newer platform generation): SHA-256 of
            /// the specification content.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub hash: Option<String>,
        }

        #[doc = concat!("`status` of a ", $kind_name, ".")]
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $status {
            /// `status.active` (required by the CRD): whether this is the one active registration
            /// of its base path in the environment (oldest wins, computed by the operator).
            pub active: bool,
            /// `status.conditions`.
            #[serde(default)]
            pub conditions: Vec<$crate::common::Condition>,
        }
    };
}

pub(crate) use agentic_catalogue_cr;
