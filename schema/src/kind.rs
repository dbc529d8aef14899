//! The contract every projected kind implements, and the vocabulary the writer uses to link
//! records: [`Parent`] (a required parent), [`Link`] (an optional reference resolved by the writer),
//! [`IndexName`] (a secondary index) and [`Scope`] (who may see a record).
//!
//! Adding a kind = one file under `crate::kinds` implementing [`Kind`] + one line in
//! `crate::registry`.

use crate::keys::Key;
use crate::time::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

macro_rules! kind_ids {
    ($( $variant:ident = $n:literal, $module:literal, $plural:literal, $group:literal; )*) => {
        /// Every custom-resource kind the read model knows, with its stable numeric id (used in
        /// storage keys: never renumber).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum KindId { $( #[doc = concat!("`", stringify!($variant), "` (`", $group, "/v1`, plural `", $plural, "`).")] $variant = $n, )* }

        impl KindId {
            /// All kinds in registration (dependency) order.
            pub const ALL: &'static [KindId] = &[ $( KindId::$variant, )* ];

            /// The Kubernetes kind, e.g. `ApiSubscription`. Also the GraphQL type name.
            pub const fn name(self) -> &'static str { match self { $( KindId::$variant => stringify!($variant), )* } }

            /// The lower-case module name used in metrics labels, e.g. `apisubscription`.
            pub const fn module(self) -> &'static str { match self { $( KindId::$variant => $module, )* } }

            /// The resource plural, e.g. `apisubscriptions`.
            pub const fn plural(self) -> &'static str { match self { $( KindId::$variant => $plural, )* } }

            /// The API group, e.g. `api.cp.ei.telekom.de` (version is always `v1`).
            pub const fn group(self) -> &'static str { match self { $( KindId::$variant => $group, )* } }

            /// The stable numeric id.
            pub const fn code(self) -> u8 { self as u8 }

            /// Inverse of [`KindId::code`].
            pub fn from_code(code: u8) -> Option<KindId> { Self::ALL.iter().copied().find(|k| k.code() == code) }

            /// Looks a kind up by its Kubernetes kind name (exact).
            pub fn from_name(name: &str) -> Option<KindId> { Self::ALL.iter().copied().find(|k| k.name() == name) }
        }
    };
}

kind_ids! {
    Zone = 1, "zone", "zones", "admin.cp.ei.telekom.de";
    Group = 2, "group", "groups", "organization.cp.ei.telekom.de";
    Team = 3, "team", "teams", "organization.cp.ei.telekom.de";
    Application = 4, "application", "applications", "application.cp.ei.telekom.de";
    Api = 5, "api", "apis", "api.cp.ei.telekom.de";
    ApiExposure = 6, "apiexposure", "apiexposures", "api.cp.ei.telekom.de";
    ApiSubscription = 7, "apisubscription", "apisubscriptions", "api.cp.ei.telekom.de";
    Approval = 8, "approval", "approvals", "approval.cp.ei.telekom.de";
    ApprovalRequest = 9, "approvalrequest", "approvalrequests", "approval.cp.ei.telekom.de";
    EventType = 10, "eventtype", "eventtypes", "event.cp.ei.telekom.de";
    EventExposure = 11, "eventexposure", "eventexposures", "event.cp.ei.telekom.de";
    EventSubscription = 12, "eventsubscription", "eventsubscriptions", "event.cp.ei.telekom.de";
    PermissionSet = 13, "permissionset", "permissionsets", "permission.cp.ei.telekom.de";
    McpServer = 14, "mcpserver", "mcpservers", "agentic.cp.ei.telekom.de";
    AgentCard = 15, "agentcard", "agentcards", "agentic.cp.ei.telekom.de";
    AgenticExposure = 16, "agenticexposure", "agenticexposures", "agentic.cp.ei.telekom.de";
    AgenticSubscription = 17, "agenticsubscription", "agenticsubscriptions", "agentic.cp.ei.telekom.de";
    FileExposure = 18, "fileexposure", "fileexposures", "file.cp.ei.telekom.de";
    FileSubscription = 19, "filesubscription", "filesubscriptions", "file.cp.ei.telekom.de";
}

impl KindId {
    /// The file that declares this kind's record, translation and `VERSION`, relative to the
    /// workspace root: `schema/src/kinds/<kind in snake_case>.rs`, e.g.
    /// `schema/src/kinds/api_subscription.rs` (not [`KindId::module`], the metric label
    /// `apisubscription`).
    pub fn source_path(self) -> String {
        let mut file = String::new();
        for (i, c) in self.name().chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                file.push('_');
            }
            file.push(c.to_ascii_lowercase());
        }
        format!("schema/src/kinds/{file}.rs")
    }
}

/// Feature flags that switch kinds off (ARCHITECTURE.md "Feature flags switch kinds off": all
/// default to `true`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// `FEATURE_PUBSUB_ENABLED`: EventType, EventExposure, EventSubscription.
    pub pubsub: bool,
    /// `FEATURE_PERMISSION_ENABLED`: PermissionSet.
    pub permission: bool,
    /// `FEATURE_AI_GATEWAY_ENABLED`: McpServer, AgentCard, AgenticExposure, AgenticSubscription.
    pub ai_gateway: bool,
    /// `FEATURE_FILE_MANAGER_ENABLED`: FileExposure, FileSubscription.
    pub file_manager: bool,
}

impl Default for Features {
    fn default() -> Features {
        Features { pubsub: true, permission: true, ai_gateway: true, file_manager: true }
    }
}

/// Everything translation may depend on besides the object itself.
#[derive(Clone, Debug)]
pub struct Context {
    /// The projection time: used only where the CR carries no time of its own
    /// (`createdAt` when `metadata.creationTimestamp` is absent).
    pub now: Timestamp,
    /// Enabled feature flags.
    pub features: Features,
}

/// Why a document is not projected. Logged with the object's identity and counted as outcome
/// `skip`; the object is retried after `SKIP_REQUEUE` (kube source) or when its file changes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Skip {
    /// A field translation needs is absent or empty (`spec.apiBasePath`, `metadata.namespace`).
    #[error("required field `{0}` is missing or empty")]
    Missing(&'static str),
    /// A field has a value outside its enum (matched case-insensitively).
    #[error("field `{field}` has invalid value {value:?} (expected one of {expected})")]
    InvalidEnum {
        /// JSON path of the field.
        field: &'static str,
        /// The value found.
        value: String,
        /// The accepted values, comma-separated.
        expected: &'static str,
    },
    /// A field has a value translation cannot use (e.g. properties that are not a JSON object).
    #[error("field `{field}` is invalid: {reason}")]
    Invalid {
        /// JSON path of the field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The object is valid but deliberately not projected (e.g. a feature flag is off).
    #[error("{0}")]
    NotProjected(String),
}

/// A required parent: the record is not written until `key` exists in `kind`'s table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parent {
    /// The parent's kind.
    pub kind: KindId,
    /// The parent's natural key.
    pub key: Key,
}

/// The name of a secondary index. Entries are `(index, lookup key) → (kind, record key)`; the
/// name is part of the storage layout (never rename one without a format version bump).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IndexName(pub &'static str);

/// An optional reference the writer resolves inside the write transaction and stores next to the
/// record (not in it). Resolved again whenever a record listed by [`Kind::dependents`] of
/// another kind changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Link {
    /// The first record (in key order) under `key` in secondary index `index`, e.g. the active
    /// ApiExposure of an environment and base path.
    First {
        /// The index to look in.
        index: IndexName,
        /// The lookup key.
        key: Key,
    },
    /// The resolved link number `slot` of the record `key` of `kind` (e.g. an Approval reads the
    /// target exposure of its subscription).
    Via {
        /// The kind of the intermediate record.
        kind: KindId,
        /// Its natural key.
        key: Key,
        /// Which of its links.
        slot: usize,
    },
}

/// Who may see a record. A record is listed under each of its scopes in every ordering index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Visible to viewers of this team (stored team name `<group>--<team>`) in this environment.
    Team {
        /// Environment.
        env: String,
        /// Team name.
        team: String,
    },
    /// Visible to every viewer of the environment (catalogue entries, zones, groups).
    Env {
        /// Environment.
        env: String,
    },
    /// Admins: every record has this scope, added by the store.
    All,
}

impl Scope {
    /// The order-preserving encoding used as index key prefix.
    pub fn key(&self) -> Key {
        match self {
            Scope::Team { env, team } => Key::new(&["T", env, team]),
            Scope::Env { env } => Key::new(&["E", env]),
            Scope::All => Key::new(&["A"]),
        }
    }
}

/// One projected kind: the translation rule and everything the generic pipeline needs to store,
/// link, index and isolate its records.
///
/// All methods are pure functions of their arguments.
pub trait Kind: Send + Sync + 'static {
    /// Which kind this is.
    const ID: KindId;
    /// The derivation version: of the record's shape ([`Kind::Record`], as postcard encodes it)
    /// and of the translation rules ([`Kind::translate`], [`Kind::scopes`], [`Kind::index_entries`],
    /// [`Kind::links`], …). Bump it with every change to either: the store keeps the version
    /// its records of this kind were written with, and a store (or snapshot) of another version
    /// re-derives this kind from the source on open (`storage` crate docs, *Derivation
    /// versions*; ARCHITECTURE.md). The golden encodings test fails when a record's encoding
    /// changes while this stays the same. Starts at 1.
    const VERSION: u32;
    /// Whether an unresolved link number 0 (e.g. a subscription's target) is reported as
    /// *dependency missing* (the record is still written, and retried with `DEPENDENCY_DELAY`).
    const RETRY_UNLINKED: bool = false;
    /// Whether the kind offers the `NAME` order field (Team, Application).
    const ORDER_BY_NAME: bool = false;

    /// The custom resource type (from the `crds` crate). Its `kube::Resource` impl (derived by
    /// `kube::CustomResource`) names the API group, version, kind and plural the kube source
    /// watches.
    type Cr: DeserializeOwned + kube::Resource<DynamicType = ()> + Send + Sync + 'static;
    /// The stored record. Serialized with postcard, a format that does not describe itself:
    /// changing its shape changes [`Kind::VERSION`].
    type Record: Serialize + DeserializeOwned + Clone + PartialEq + Debug + Send + Sync + 'static;

    /// The object's metadata.
    fn meta(cr: &Self::Cr) -> &ObjectMeta;

    /// Translates a custom resource into a record.
    ///
    /// # Errors
    /// [`Skip`] when the object cannot or must not be projected.
    fn translate(cr: &Self::Cr, ctx: &Context) -> Result<Self::Record, Skip>;

    /// The record's natural key (environment first).
    fn key(rec: &Self::Record) -> Key;

    /// Parents that must exist before the record is written.
    fn requires(_rec: &Self::Record) -> Vec<Parent> {
        Vec::new()
    }

    /// Optional references resolved by the writer; their results are passed back as `links`.
    fn links(_rec: &Self::Record) -> Vec<Link> {
        Vec::new()
    }

    /// Who may see the record (the store adds [`Scope::All`]).
    fn scopes(rec: &Self::Record, links: &[Option<Key>]) -> Vec<Scope>;

    /// Secondary index entries of the record.
    fn index_entries(_rec: &Self::Record, _links: &[Option<Key>]) -> Vec<(IndexName, Key)> {
        Vec::new()
    }

    /// Index ranges whose records must re-resolve their links when this record is written or
    /// deleted. Called with the old and with the new state.
    fn dependents(_rec: &Self::Record, _links: &[Option<Key>]) -> Vec<(IndexName, Key)> {
        Vec::new()
    }

    /// The value of the `NAME` order field, when [`Kind::ORDER_BY_NAME`].
    fn name(_rec: &Self::Record) -> Option<&str> {
        None
    }

    /// The creation time from the CR (`metadata.creationTimestamp`), if any.
    fn created_at(_rec: &Self::Record) -> Option<Timestamp> {
        None
    }

    /// The record's `statusPhase` and `statusMessage`, for kinds with the status mixin. The
    /// store counts records per scope and phase from it (`phaseCounts`), the GraphQL layer
    /// exposes and filters the two fields from it.
    fn status(_rec: &Self::Record) -> Option<&crate::common::Status> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::KindId;

    /// Every kind's source path names a file that declares its `VERSION` (messages point there).
    #[test]
    fn every_kind_names_the_file_that_declares_it() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        assert_eq!(KindId::ApiSubscription.source_path(), "schema/src/kinds/api_subscription.rs");
        for kind in KindId::ALL {
            let path = root.join(kind.source_path());
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{kind:?}: {}: {e}", path.display()));
            assert!(text.contains("const VERSION"), "{kind:?}: {} declares no VERSION", path.display());
        }
    }
}
