//! What the two agentic catalogue kinds share (kinds the Go projector does not project):
//! McpServer and AgentCard carry the same fields, so they share one record type, its
//! translation and the catalogue hash.
//!
//! Natural key `(environment, team, spec.basePath)` with team = [`team_from_namespace`]; the owner
//! Team is required; visible to every viewer of its environment (catalogue). The active entry of a
//! base path (`status.active`, oldest wins, computed by the operator) is indexed per kind.
//!
//! [`team_from_namespace`]: crate::common::team_from_namespace

use crate::common::{required, status_from_conditions, Meta, Status};
use crate::keys::{natural, Key};
use crate::kind::{IndexName, KindId, Parent, Scope, Skip};
use crds::common::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A projected McpServer or AgentCard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgenticCatalogueRecord {
    /// Common metadata; `meta.name` is the object name (`metadata.name`, derived from the base
    /// path, e.g. `mcp-parcels-v1`), GraphQL `name`.
    pub meta: Meta,
    /// The owner team: `metadata.namespace` after its first `--`
    /// ([`team_from_namespace`](crate::common::team_from_namespace)); must be non-empty.
    pub team: String,
    /// `spec.basePath`; must be non-empty.
    pub base_path: String,
    /// `spec.version`; must be non-empty.
    pub version: String,
    /// GraphQL `displayName`: `spec.name` (the title), or `metadata.name` when it is empty.
    pub display_name: String,
    /// `spec.description`; `None` when absent or empty.
    pub description: Option<String>,
    /// `spec.category`; `None` when absent or empty.
    pub category: Option<String>,
    /// `spec.scopes[]` in order (GraphQL `oauth2Scopes`); empty when absent.
    pub oauth2_scopes: Vec<String>,
    /// `spec.specification`: file-manager file ID of the specification; `None` when absent or
    /// empty.
    pub specification: Option<String>,
    /// `spec.hash` when present and non-empty; otherwise [`spec_hash`] of the spec.
    pub hash: String,
    /// `status.active`; `false` without status.
    pub active: bool,
    /// From `status.conditions`; `UNKNOWN` without status.
    pub status: Status,
}

/// The parts of an McpServer or AgentCard translation reads, borrowed from either CR.
pub(crate) struct Source<'a, S: Serialize> {
    /// `metadata`.
    pub meta: &'a ObjectMeta,
    /// The whole `spec` (for the hash).
    pub spec: &'a S,
    /// `spec.basePath`.
    pub base_path: &'a str,
    /// `spec.version`.
    pub version: &'a str,
    /// `spec.name`.
    pub title: &'a str,
    /// `spec.description`.
    pub description: Option<&'a String>,
    /// `spec.category`.
    pub category: Option<&'a String>,
    /// `spec.scopes`.
    pub scopes: &'a [String],
    /// `spec.specification`.
    pub specification: Option<&'a String>,
    /// `spec.hash`.
    pub hash: Option<&'a String>,
    /// `status.active` (`false` without status).
    pub active: bool,
    /// `status.conditions` (`[]` without status).
    pub conditions: &'a [Condition],
}

fn non_empty(s: Option<&String>) -> Option<String> {
    s.filter(|s| !s.is_empty()).cloned()
}

/// Translates the shared fields.
///
/// # Errors
/// [`Skip::Missing`] for an empty `metadata.namespace` (or a namespace without team part),
/// `metadata.name`, `spec.basePath` or `spec.version`; [`Skip::Invalid`] when the spec cannot be
/// serialized for the hash (not expected for typed CRs).
pub(crate) fn translate<S: Serialize>(src: &Source<'_, S>) -> Result<AgenticCatalogueRecord, Skip> {
    let meta = Meta::from_object(src.meta)?;
    let team = required("metadata.namespace", meta.team())?.to_string();
    let base_path = required("spec.basePath", src.base_path)?.to_string();
    let version = required("spec.version", src.version)?.to_string();
    let hash = match non_empty(src.hash) {
        Some(h) => h,
        None => spec_hash(src.spec)?,
    };
    Ok(AgenticCatalogueRecord {
        team,
        base_path,
        version,
        display_name: if src.title.is_empty() { meta.name.clone() } else { src.title.to_string() },
        description: non_empty(src.description),
        category: non_empty(src.category),
        oauth2_scopes: src.scopes.to_vec(),
        specification: non_empty(src.specification),
        hash,
        active: src.active,
        status: status_from_conditions(src.conditions),
        meta,
    })
}

/// The catalogue hash when the CR carries no `spec.hash` (ARCHITECTURE.md "Fields newer than the
/// CRDs"): lowercase hex
/// SHA-256 of the canonical JSON (object keys sorted, no whitespace) of the spec as the typed CR
/// serializes it. Fields the CR type does not know (unknown to the CRD) are not part of it; absent
/// optional fields and an empty `scopes` list are left out, as in the document.
///
/// # Errors
/// [`Skip::Invalid`] when the spec does not serialize to JSON.
pub fn spec_hash<S: Serialize>(spec: &S) -> Result<String, Skip> {
    let value =
        serde_json::to_value(spec).map_err(|e| Skip::Invalid { field: "spec", reason: format!("cannot serialize the spec: {e}") })?;
    let mut canonical = String::new();
    write_canonical(&value, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    Ok(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// Appends the canonical JSON of `v`: object keys in byte order, no whitespace, scalars as
/// `serde_json` writes them.
fn write_canonical(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// `Kind::key`: `natural_key(environment, team, basePath)`.
pub(crate) fn key(rec: &AgenticCatalogueRecord, natural_key: fn(&str, &str, &str) -> Key) -> Key {
    natural_key(&rec.meta.environment, &rec.team, &rec.base_path)
}

/// `Kind::requires`: the owner Team.
pub(crate) fn requires(rec: &AgenticCatalogueRecord) -> Vec<Parent> {
    vec![Parent { kind: KindId::Team, key: natural::team(&rec.meta.environment, &rec.team) }]
}

/// `Kind::scopes`: every viewer of the environment.
pub(crate) fn scopes(rec: &AgenticCatalogueRecord) -> Vec<Scope> {
    vec![Scope::Env { env: rec.meta.environment.clone() }]
}

/// `Kind::index_entries`: active entries under `(environment, basePath)` in `active_index`.
pub(crate) fn index_entries(rec: &AgenticCatalogueRecord, active_index: IndexName) -> Vec<(IndexName, Key)> {
    if rec.active {
        vec![(active_index, natural::in_env(&rec.meta.environment, &rec.base_path))]
    } else {
        Vec::new()
    }
}

/// The [`crate::kind::Kind`] impl of an agentic catalogue kind: everything but what differs
/// between McpServer and AgentCard — the kind (its CR type in `crds` has the same name), the
/// record alias, the `VERSION`, the natural-key function and the index of active entries.
macro_rules! agentic_catalogue_kind {
    (
        $kind:ident, $record:ident {
            const VERSION: u32 = $version:literal;
            natural_key: $natural:path,
            active_index: $active:path $(,)?
        }
    ) => {
        #[doc = concat!("The ", stringify!($kind), " kind.")]
        pub struct $kind;

        #[doc = concat!("A projected ", stringify!($kind), " (fields as documented on [`AgenticCatalogueRecord`](crate::kinds::agentic_catalogue::AgenticCatalogueRecord)).")]
        pub type $record = $crate::kinds::agentic_catalogue::AgenticCatalogueRecord;

        /// The translation of this kind's CR: the family's [`Source`](crate::kinds::agentic_catalogue::Source).
        fn translate(cr: &crds::$kind, _ctx: &$crate::kind::Context) -> Result<$record, $crate::kind::Skip> {
            let spec = &cr.spec;
            let status = cr.status.as_ref();
            $crate::kinds::agentic_catalogue::translate(&$crate::kinds::agentic_catalogue::Source {
                meta: &cr.metadata,
                spec,
                base_path: &spec.base_path,
                version: &spec.version,
                title: &spec.name,
                description: spec.description.as_ref(),
                category: spec.category.as_ref(),
                scopes: &spec.scopes,
                specification: spec.specification.as_ref(),
                hash: spec.hash.as_ref(),
                active: status.is_some_and(|s| s.active),
                conditions: status.map(|s| s.conditions.as_slice()).unwrap_or_default(),
            })
        }

        impl $crate::kind::Kind for $kind {
            $crate::kind::family_kind_items!($kind, $record, $version, translate);

            fn key(rec: &$record) -> $crate::keys::Key {
                $crate::kinds::agentic_catalogue::key(rec, $natural)
            }

            fn requires(rec: &$record) -> Vec<$crate::kind::Parent> {
                $crate::kinds::agentic_catalogue::requires(rec)
            }

            fn scopes(rec: &$record, _links: &[Option<$crate::keys::Key>]) -> Vec<$crate::kind::Scope> {
                $crate::kinds::agentic_catalogue::scopes(rec)
            }

            fn index_entries(rec: &$record, _links: &[Option<$crate::keys::Key>]) -> Vec<($crate::kind::IndexName, $crate::keys::Key)> {
                $crate::kinds::agentic_catalogue::index_entries(rec, $active)
            }
        }
    };
}

pub(crate) use agentic_catalogue_kind;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_recursively_without_whitespace() {
        let mut out = String::new();
        write_canonical(&json!({"b": [1, {"z": null, "a": "x\"y"}], "a": true, "é": 1.5}), &mut out);
        assert_eq!(out, r#"{"a":true,"b":[1,{"a":"x\"y","z":null}],"é":1.5}"#);
    }

    #[test]
    fn spec_hash_is_sha256_hex_of_the_canonical_json() {
        // sha256("{}")
        assert_eq!(spec_hash(&json!({})).unwrap(), "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
        let a = spec_hash(&json!({"x": 1, "y": [2, 3]})).unwrap();
        assert_eq!(a, spec_hash(&json!({"y": [2, 3], "x": 1})).unwrap(), "key order does not matter");
        assert_ne!(a, spec_hash(&json!({"x": 1, "y": [3, 2]})).unwrap(), "list order does");
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }
}
