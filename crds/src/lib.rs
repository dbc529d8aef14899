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
/// declared. Rows are in the order of the GraphQL `Query` fields; the registration order
/// (parents before children) is derived from the `parents` column. Each row:
///
/// `Variant = code, module, "label", "plural", "group", feature, Family, [parents];`
///
/// - `Variant`: the Kubernetes kind, also the Rust type in `crds`, `schema::kinds` and the
///   GraphQL type name;
/// - `code`: the stable numeric id in storage keys (never renumber);
/// - `module`: the kind's module in `crds`, `schema::kinds` and `query::kinds`;
/// - `"label"`: the metrics label (`module` without underscores);
/// - `"plural"`, `"group"`: the resource's plural and API group (version `v1`);
/// - `feature`: the `schema::kind::Features` flag that switches the kind off, or `always`;
/// - `Family`: the `schema::kind::Family` whose shared implementation the kind uses;
/// - `[parents]`: the kinds this kind's records require or link to (`Kind::requires`,
///   `Kind::links`; a test compares them with every translation fixture). A kind registers after
///   its parents.
///
/// Expands to `$callback! { rows }`: this crate's modules, `schema::KindId`, the registry's
/// visit order and feature switch, the query crate's registration and the README's tables of
/// kinds and RBAC rules are generated from it.
#[macro_export]
macro_rules! kind_table {
    ($callback:ident) => {
        $callback! {
            Zone = 1, zone, "zone", "zones", "admin.cp.ei.telekom.de", always, Organization, [];
            Group = 2, group, "group", "groups", "organization.cp.ei.telekom.de", always, Organization, [];
            Team = 3, team, "team", "teams", "organization.cp.ei.telekom.de", always, Organization, [];
            Application = 4, application, "application", "applications", "application.cp.ei.telekom.de", always, Application, [Team, Zone];
            Api = 5, api, "api", "apis", "api.cp.ei.telekom.de", always, Catalogue, [Team];
            ApiExposure = 6, api_exposure, "apiexposure", "apiexposures", "api.cp.ei.telekom.de", always, Exposure, [Application];
            ApiSubscription = 7, api_subscription, "apisubscription", "apisubscriptions", "api.cp.ei.telekom.de", always, Subscription, [Application, ApiExposure];
            Approval = 8, approval, "approval", "approvals", "approval.cp.ei.telekom.de", always, Approval, [ApiSubscription, EventSubscription, FileSubscription, AgenticSubscription];
            ApprovalRequest = 9, approval_request, "approvalrequest", "approvalrequests", "approval.cp.ei.telekom.de", always, Approval, [ApiSubscription, EventSubscription, FileSubscription, AgenticSubscription];
            PermissionSet = 13, permission_set, "permissionset", "permissionsets", "permission.cp.ei.telekom.de", permission, Application, [Application];
            FileExposure = 18, file_exposure, "fileexposure", "fileexposures", "file.cp.ei.telekom.de", file_manager, Exposure, [Application];
            FileSubscription = 19, file_subscription, "filesubscription", "filesubscriptions", "file.cp.ei.telekom.de", file_manager, Subscription, [Application, FileExposure];
            EventType = 10, event_type, "eventtype", "eventtypes", "event.cp.ei.telekom.de", pubsub, Catalogue, [Team];
            EventExposure = 11, event_exposure, "eventexposure", "eventexposures", "event.cp.ei.telekom.de", pubsub, Exposure, [Application];
            EventSubscription = 12, event_subscription, "eventsubscription", "eventsubscriptions", "event.cp.ei.telekom.de", pubsub, Subscription, [Application, EventExposure];
            McpServer = 14, mcp_server, "mcpserver", "mcpservers", "agentic.cp.ei.telekom.de", ai_gateway, Catalogue, [Team];
            AgentCard = 15, agent_card, "agentcard", "agentcards", "agentic.cp.ei.telekom.de", ai_gateway, Catalogue, [Team];
            AgenticExposure = 16, agentic_exposure, "agenticexposure", "agenticexposures", "agentic.cp.ei.telekom.de", ai_gateway, Exposure, [Application];
            AgenticSubscription = 17, agentic_subscription, "agenticsubscription", "agenticsubscriptions", "agentic.cp.ei.telekom.de", ai_gateway, Subscription, [Application, AgenticExposure];
        }
    };
}

/// One module per kind of [`kind_table!`], its type re-exported.
macro_rules! kind_modules {
    ($( $variant:ident = $code:literal, $module:ident, $label:literal, $plural:literal, $group:literal, $feature:ident, $family:ident, [$($parent:ident),*]; )*) => {
        $( pub mod $module; pub use $module::$variant; )*
    };
}

kind_table!(kind_modules);
