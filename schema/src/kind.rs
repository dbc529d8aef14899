//! The contract every projected kind implements, and the vocabulary the writer uses to link
//! records: [`Parent`] (a required parent), [`Link`] (an optional reference resolved by the writer),
//! [`IndexName`] (a secondary index) and [`Scope`] (who may see a record).
//!
//! Kinds are declared once, as rows of the table of kinds ([`crds::kind_table!`]): [`KindId`],
//! the registry's order and the feature switch are generated from it; a kind's translation is
//! its module under `crate::kinds` implementing [`Kind`] (ARCHITECTURE.md, "Adding a kind").

use crate::keys::Key;
use crate::time::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

macro_rules! kind_ids {
    ($( $variant:ident = $code:literal, $module:ident, $label:literal, $plural:literal, $group:literal, $feature:ident, $family:ident, [$($parent:ident),*]; )*) => {
        /// Every custom-resource kind the read model knows, with its stable numeric id (used in
        /// storage keys: never renumber). Declared by the table of kinds, [`crds::kind_table!`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum KindId { $( #[doc = concat!("`", stringify!($variant), "` (`", $group, "/v1`, plural `", $plural, "`).")] $variant = $code, )* }

        impl KindId {
            /// All kinds, by [`KindId::code`].
            pub const ALL: &'static [KindId] = &by_code([ $( KindId::$variant, )* ]);

            /// All kinds in the table's order: the order of the GraphQL `Query` fields.
            pub const TABLE_ORDER: &'static [KindId] = &[ $( KindId::$variant, )* ];

            /// All kinds in registration (dependency) order: every kind after its
            /// [`KindId::parents`], otherwise in the table's order.
            pub const REGISTRATION_ORDER: &'static [KindId] = &dependency_order([ $( KindId::$variant, )* ]);

            /// The kinds this kind's records require or link to (the table's `parents` column).
            pub const fn parents(self) -> &'static [KindId] {
                match self { $( KindId::$variant => &[ $( KindId::$parent, )* ], )* }
            }

            /// The family whose shared implementation this kind uses.
            pub const fn family(self) -> Family { match self { $( KindId::$variant => Family::$family, )* } }

            /// The Kubernetes kind, e.g. `ApiSubscription`. Also the GraphQL type name.
            pub const fn name(self) -> &'static str { match self { $( KindId::$variant => stringify!($variant), )* } }

            /// The lower-case name used in metrics labels, e.g. `apisubscription`.
            pub const fn module(self) -> &'static str { match self { $( KindId::$variant => $label, )* } }

            /// The resource plural, e.g. `apisubscriptions`.
            pub const fn plural(self) -> &'static str { match self { $( KindId::$variant => $plural, )* } }

            /// The API group, e.g. `api.cp.ei.telekom.de` (version is always `v1`).
            pub const fn group(self) -> &'static str { match self { $( KindId::$variant => $group, )* } }

            /// The file that declares this kind's record, translation and `VERSION`, relative to
            /// the workspace root, e.g. `schema/src/kinds/api_subscription.rs` (the metrics label
            /// [`KindId::module`] is `apisubscription`).
            pub const fn source_path(self) -> &'static str {
                match self { $( KindId::$variant => concat!("schema/src/kinds/", stringify!($module), ".rs"), )* }
            }

            /// Whether `features` switch this kind on (ARCHITECTURE.md "Feature flags switch
            /// kinds off").
            pub const fn enabled(self, features: &Features) -> bool {
                match self { $( KindId::$variant => feature_on!(features, $feature), )* }
            }

            /// The field of [`Features`] that switches this kind off (`pubsub`, `permission`,
            /// `ai_gateway`, `file_manager`), or `None` for a kind always on.
            pub const fn feature(self) -> Option<&'static str> {
                match self { $( KindId::$variant => feature_name!($feature), )* }
            }

            /// The stable numeric id.
            pub const fn code(self) -> u8 { self as u8 }

            /// Inverse of [`KindId::code`].
            pub fn from_code(code: u8) -> Option<KindId> { Self::ALL.iter().copied().find(|k| k.code() == code) }

            /// Looks a kind up by its Kubernetes kind name (exact).
            pub fn from_name(name: &str) -> Option<KindId> { Self::ALL.iter().copied().find(|k| k.name() == name) }
        }
    };
}

/// Whether a feature column of the table of kinds is on in `features`.
macro_rules! feature_on {
    ($features:expr, always) => {
        true
    };
    ($features:expr, $flag:ident) => {
        $features.$flag
    };
}

/// The name of a feature column of the table of kinds.
macro_rules! feature_name {
    (always) => {
        None
    };
    ($flag:ident) => {
        Some(stringify!($flag))
    };
}

/// The kinds sorted by code (a selection sort, at compile time).
const fn by_code<const N: usize>(mut kinds: [KindId; N]) -> [KindId; N] {
    let mut i = 0;
    while i < N {
        let mut j = i + 1;
        while j < N {
            if (kinds[j] as u8) < (kinds[i] as u8) {
                let earlier = kinds[i];
                kinds[i] = kinds[j];
                kinds[j] = earlier;
            }
            j += 1;
        }
        i += 1;
    }
    kinds
}

/// The kinds in dependency order (a stable topological sort at compile time): at each step the
/// first kind of `table` not yet placed whose parents all are. A cycle fails the build.
const fn dependency_order<const N: usize>(table: [KindId; N]) -> [KindId; N] {
    let mut order = table;
    let mut placed = [false; N];
    let mut next = 0;
    while next < N {
        let mut i = 0;
        let mut found = false;
        while i < N && !found {
            if !placed[i] && parents_placed(table[i], &table, &placed) {
                order[next] = table[i];
                placed[i] = true;
                found = true;
            }
            i += 1;
        }
        assert!(found, "the parents column of the table of kinds has a cycle");
        next += 1;
    }
    order
}

/// Whether every parent of `kind` is marked in `placed` (indexed like `table`).
const fn parents_placed<const N: usize>(kind: KindId, table: &[KindId; N], placed: &[bool; N]) -> bool {
    let parents = kind.parents();
    let mut p = 0;
    while p < parents.len() {
        let mut i = 0;
        while i < N && table[i] as u8 != parents[p] as u8 {
            i += 1;
        }
        if i == N || !placed[i] {
            return false;
        }
        p += 1;
    }
    true
}

crds::kind_table!(kind_ids);

/// What a kind shares its implementation with (the table's `Family` column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Zones, groups and teams: the organization every other kind belongs to.
    Organization,
    /// Applications and what belongs to one application alone (permission sets).
    Application,
    /// Catalogue entries, searchable by every viewer of their environment (`crate::catalogue`).
    Catalogue,
    /// Exposures: an application offers an API, event, file or agentic endpoint
    /// (`kinds::subscription_wiring::exposure_kind!`, `kinds::agentic_catalogue`).
    Exposure,
    /// Subscriptions: an application uses an exposure (`kinds::subscription_wiring::subscription_kind!`).
    Subscription,
    /// Approvals and approval requests of a subscription (`kinds::approval_common`).
    Approval,
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

/// The associated items of a [`Kind`] impl that every kind of a family writes alike: the
/// record's status, the id from the table of kinds, the `VERSION`, the CR type of the same name
/// in `crds`, `meta`, the translation (a function of the kind's module) and `created_at` from
/// the record's metadata. Used inside the families' impls (`agentic_catalogue_kind!`, `subscription_kind!`,
/// `exposure_kind!`, `approval_kind!`).
macro_rules! family_kind_items {
    ($kind:ident, $record:ident, $version:literal, $translate:path) => {
        fn status(rec: &Self::Record) -> Option<&$crate::common::Status> {
            Some(&rec.status)
        }

        const ID: $crate::kind::KindId = $crate::kind::KindId::$kind;
        const VERSION: u32 = $version;
        type Cr = crds::$kind;
        type Record = $record;

        fn meta(cr: &crds::$kind) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            &cr.metadata
        }

        fn translate(cr: &crds::$kind, ctx: &$crate::kind::Context) -> Result<$record, $crate::kind::Skip> {
            $translate(cr, ctx)
        }

        fn created_at(rec: &$record) -> Option<$crate::time::Timestamp> {
            rec.meta.creation_timestamp
        }
    };
}

pub(crate) use family_kind_items;

#[cfg(test)]
mod tests {
    use super::KindId;

    /// The table's facts hold together: codes unique and `ALL` sorted by them, the registration
    /// order a permutation of `ALL`, labels the lower-cased names, plurals the labels' plurals.
    #[test]
    fn the_table_of_kinds_holds_together() {
        let codes: Vec<u8> = KindId::ALL.iter().map(|k| k.code()).collect();
        assert!(codes.windows(2).all(|w| w[0] < w[1]), "ALL by code, codes unique: {codes:?}");
        let mut registration = KindId::REGISTRATION_ORDER.to_vec();
        registration.sort();
        assert_eq!(registration, KindId::ALL, "the registration order holds every kind once");
        let position = |kind: KindId| KindId::REGISTRATION_ORDER.iter().position(|k| *k == kind).unwrap();
        for kind in KindId::ALL {
            for parent in kind.parents() {
                assert!(position(*parent) < position(*kind), "{kind:?} registers after its parent {parent:?}");
            }
        }
        assert_eq!(KindId::TABLE_ORDER.len(), KindId::ALL.len());
        for kind in KindId::ALL {
            assert_eq!(kind.module(), kind.name().to_lowercase(), "{kind:?}: the metrics label");
            assert!(kind.plural().starts_with(kind.module()), "{kind:?}: the plural");
            assert_eq!(KindId::from_code(kind.code()), Some(*kind));
            assert_eq!(KindId::from_name(kind.name()), Some(*kind));
        }
    }

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
