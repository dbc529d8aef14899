//! Rust types of every custom resource the read model watches (`*.cp.ei.telekom.de/v1`),
//! faithful to the platform's CRD schemas (read leniently: ARCHITECTURE.md "Fields newer than the
//! CRDs").
//!
//! **Architecture invariant:** these are plain data types with `kube::CustomResource`. No
//! translation logic lives here (that is `schema`), no client code (that is `control-plane`).
//!
//! Deserialization is lenient the way the projector needs it: unknown fields are ignored, every
//! field the CRD does not mark as required is an `Option` (or defaults to empty), and enum-like
//! fields are kept as `String` so that `schema` can match them case-insensitively and report a
//! precise skip reason. Fields the CRD marks as required are required here too, so an object
//! missing them fails to deserialize with a message naming the field.

#![forbid(unsafe_code)]

pub mod agentic_catalogue;
pub mod common;

/// **The table of kinds**: one row per kind the read model projects — the one place a kind is
/// declared. Rows are in registration order (parents before children; approvals, which need
/// their subscription of any family, last). Each row:
///
/// `Variant = code, module, "label", "plural", "group", feature;`
///
/// - `Variant`: the Kubernetes kind, also the Rust type in `crds`, `schema::kinds` and the
///   GraphQL type name;
/// - `code`: the stable numeric id in storage keys (never renumber);
/// - `module`: the kind's module in `crds`, `schema::kinds` and `query::kinds`;
/// - `"label"`: the metrics label (`module` without underscores);
/// - `"plural"`, `"group"`: the resource's plural and API group (version `v1`);
/// - `feature`: the `schema::kind::Features` flag that switches the kind off, or `always`.
///
/// Expands to `$callback! { rows }`: this crate's modules, `schema::KindId`, the registry's
/// visit order and feature switch are generated from it.
#[macro_export]
macro_rules! kind_table {
    ($callback:ident) => {
        $callback! {
            Zone = 1, zone, "zone", "zones", "admin.cp.ei.telekom.de", always;
            Group = 2, group, "group", "groups", "organization.cp.ei.telekom.de", always;
            Team = 3, team, "team", "teams", "organization.cp.ei.telekom.de", always;
            Application = 4, application, "application", "applications", "application.cp.ei.telekom.de", always;
            Api = 5, api, "api", "apis", "api.cp.ei.telekom.de", always;
            ApiExposure = 6, api_exposure, "apiexposure", "apiexposures", "api.cp.ei.telekom.de", always;
            ApiSubscription = 7, api_subscription, "apisubscription", "apisubscriptions", "api.cp.ei.telekom.de", always;
            EventType = 10, event_type, "eventtype", "eventtypes", "event.cp.ei.telekom.de", pubsub;
            EventExposure = 11, event_exposure, "eventexposure", "eventexposures", "event.cp.ei.telekom.de", pubsub;
            EventSubscription = 12, event_subscription, "eventsubscription", "eventsubscriptions", "event.cp.ei.telekom.de", pubsub;
            PermissionSet = 13, permission_set, "permissionset", "permissionsets", "permission.cp.ei.telekom.de", permission;
            FileExposure = 18, file_exposure, "fileexposure", "fileexposures", "file.cp.ei.telekom.de", file_manager;
            FileSubscription = 19, file_subscription, "filesubscription", "filesubscriptions", "file.cp.ei.telekom.de", file_manager;
            McpServer = 14, mcp_server, "mcpserver", "mcpservers", "agentic.cp.ei.telekom.de", ai_gateway;
            AgentCard = 15, agent_card, "agentcard", "agentcards", "agentic.cp.ei.telekom.de", ai_gateway;
            AgenticExposure = 16, agentic_exposure, "agenticexposure", "agenticexposures", "agentic.cp.ei.telekom.de", ai_gateway;
            AgenticSubscription = 17, agentic_subscription, "agenticsubscription", "agenticsubscriptions", "agentic.cp.ei.telekom.de", ai_gateway;
            Approval = 8, approval, "approval", "approvals", "approval.cp.ei.telekom.de", always;
            ApprovalRequest = 9, approval_request, "approvalrequest", "approvalrequests", "approval.cp.ei.telekom.de", always;
        }
    };
}

/// One module per kind of [`kind_table!`], its type re-exported.
macro_rules! kind_modules {
    ($( $variant:ident = $code:literal, $module:ident, $label:literal, $plural:literal, $group:literal, $feature:ident; )*) => {
        $( pub mod $module; pub use $module::$variant; )*
    };
}

kind_table!(kind_modules);
