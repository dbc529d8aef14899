//! Identity: natural keys and Relay global IDs. **The single source of truth for key encodings.**
//!
//! A [`Key`] is an ordered tuple of strings, environment first (ARCHITECTURE.md "Environments in
//! one store"), encoded so
//! that byte order equals tuple order: every component is escaped (`0x00` → `0x01 0x01`,
//! `0x01` → `0x01 0x02`) and terminated by `0x00`. A key of a prefix tuple is therefore a byte
//! prefix of every longer key, which the store uses for range scans.
//!
//! A [`GlobalId`] is the URL-safe base64 (no padding) of `<TypeName> 0x00 <key bytes>`: opaque to
//! clients, stable across restarts, rebuilds and snapshot restores, and decodable without a
//! lookup.

use base64::Engine;
use serde::{Deserialize, Serialize};
use std::fmt;

/// An encoded natural key (see the module docs for the layout).
///
/// Serialized as bytes (`serde_bytes`: one length and a copy, not an element-wise sequence;
/// postcard's wire format is the same either way).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct Key(#[serde(with = "serde_bytes")] Vec<u8>);

impl Key {
    /// Builds a key from its components, in order.
    pub fn new<S: AsRef<str>>(parts: &[S]) -> Key {
        let mut k = Key(Vec::with_capacity(parts.iter().map(|p| p.as_ref().len() + 1).sum()));
        for p in parts {
            k.push(p.as_ref());
        }
        k
    }

    /// Appends one component.
    pub fn push(&mut self, part: &str) {
        let bytes = part.as_bytes();
        // Components almost never hold 0x00 or 0x01: copied in one go instead of byte by byte
        // (keys are built for every translated record).
        if bytes.iter().all(|&b| b > 1) {
            self.0.extend_from_slice(bytes);
        } else {
            for &b in bytes {
                match b {
                    0 => self.0.extend_from_slice(&[1, 1]),
                    1 => self.0.extend_from_slice(&[1, 2]),
                    b => self.0.push(b),
                }
            }
        }
        self.0.push(0);
    }

    /// Wraps bytes produced by [`Key::as_bytes`]. No validation: [`Key::parts`] reports malformed
    /// input.
    pub fn from_bytes(bytes: Vec<u8>) -> Key {
        Key(bytes)
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Decodes the components.
    ///
    /// # Errors
    /// [`KeyError`] when the bytes are not a valid encoding (bad escape, missing terminator,
    /// invalid UTF-8).
    pub fn parts(&self) -> Result<Vec<String>, KeyError> {
        let mut out = Vec::new();
        let mut cur = Vec::new();
        let mut it = self.0.iter();
        while let Some(&b) = it.next() {
            match b {
                0 => out.push(String::from_utf8(std::mem::take(&mut cur)).map_err(|_| KeyError)?),
                1 => match it.next() {
                    Some(1) => cur.push(0),
                    Some(2) => cur.push(1),
                    _ => return Err(KeyError),
                },
                b => cur.push(b),
            }
        }
        if !cur.is_empty() {
            return Err(KeyError);
        }
        Ok(out)
    }

    /// Component `i`, or `""` when absent or malformed. For display and for reading a known key
    /// layout (e.g. the team of an ApiExposure key).
    pub fn part(&self, i: usize) -> String {
        self.parts().ok().and_then(|p| p.into_iter().nth(i)).unwrap_or_default()
    }

    /// The environment (first component).
    pub fn environment(&self) -> String {
        self.part(0)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts() {
            Ok(p) => write!(f, "Key({})", p.join("/")),
            Err(_) => write!(f, "Key(<malformed {:?}>)", self.0),
        }
    }
}

impl fmt::Display for Key {
    /// Components joined by `/` (for logs and error messages).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts() {
            Ok(p) => f.write_str(&p.join("/")),
            Err(_) => f.write_str("<malformed key>"),
        }
    }
}

/// A malformed key or global ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed key")]
pub struct KeyError;

/// A Relay global ID: GraphQL type name plus natural key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GlobalId {
    /// The GraphQL type name (`Application`, `ApiExposure`, …).
    pub type_name: String,
    /// The record's natural key.
    pub key: Key,
}

impl GlobalId {
    /// Builds an ID.
    pub fn new(type_name: &str, key: &Key) -> GlobalId {
        GlobalId { type_name: type_name.to_string(), key: key.clone() }
    }

    /// The opaque string form.
    pub fn encode(&self) -> String {
        let mut out = Vec::new();
        GlobalId::encode_into(&self.type_name, &self.key, &mut out);
        // Base64 is ASCII.
        String::from_utf8(out).unwrap_or_default()
    }

    /// Appends the opaque string form of the ID of `type_name`'s record under `key` to `out`
    /// (what [`GlobalId::encode`] returns, `[A-Za-z0-9_-]` only), without building the ID: an
    /// export writes one per row.
    pub fn encode_into(type_name: &str, key: &Key, out: &mut Vec<u8>) {
        let mut raw = [0u8; 256];
        let len = type_name.len() + 1 + key.0.len();
        let mut spilled = Vec::new();
        let raw: &mut [u8] = if len <= raw.len() {
            &mut raw[..len]
        } else {
            spilled.resize(len, 0);
            &mut spilled
        };
        raw[..type_name.len()].copy_from_slice(type_name.as_bytes());
        raw[type_name.len()] = 0;
        raw[type_name.len() + 1..].copy_from_slice(&key.0);
        let start = out.len();
        let encoded = base64::encoded_len(len, false).unwrap_or(0);
        out.resize(start + encoded, 0);
        let written = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode_slice(&*raw, &mut out[start..]).unwrap_or(0);
        out.truncate(start + written);
    }

    /// Parses the opaque string form.
    ///
    /// # Errors
    /// [`KeyError`] for anything that is not an ID produced by [`GlobalId::encode`].
    pub fn decode(s: &str) -> Result<GlobalId, KeyError> {
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).map_err(|_| KeyError)?;
        let sep = raw.iter().position(|&b| b == 0).ok_or(KeyError)?;
        let type_name = std::str::from_utf8(&raw[..sep]).map_err(|_| KeyError)?.to_string();
        if type_name.is_empty() {
            return Err(KeyError);
        }
        let key = Key(raw[sep + 1..].to_vec());
        key.parts()?;
        Ok(GlobalId { type_name, key })
    }
}

/// Natural-key constructors, one per kind (environment first). Record keys are built only here.
pub mod natural {
    use super::Key;
    use crate::kind::KindId;

    /// Zone: `(env, name)`.
    pub fn zone(env: &str, name: &str) -> Key {
        Key::new(&[env, name])
    }
    /// Group: `(env, name)`.
    pub fn group(env: &str, name: &str) -> Key {
        Key::new(&[env, name])
    }
    /// Team: `(env, name)`, name = `<group>--<team>`.
    pub fn team(env: &str, name: &str) -> Key {
        Key::new(&[env, name])
    }
    /// Application: `(env, team, name)`.
    pub fn application(env: &str, team: &str, name: &str) -> Key {
        Key::new(&[env, team, name])
    }
    /// Api (catalogue): `(env, team, basePath)`.
    pub fn api(env: &str, team: &str, base_path: &str) -> Key {
        Key::new(&[env, team, base_path])
    }
    /// ApiExposure: `(env, team, application, basePath)`. Component 1 is the owner team.
    pub fn api_exposure(env: &str, team: &str, app: &str, base_path: &str) -> Key {
        Key::new(&[env, team, app, base_path])
    }
    /// EventType (catalogue): `(env, team, spec.type)`.
    pub fn event_type(env: &str, team: &str, event_type: &str) -> Key {
        Key::new(&[env, team, event_type])
    }
    /// EventExposure: `(env, team, application, spec.eventType)`. Component 1 is the owner team.
    pub fn event_exposure(env: &str, team: &str, app: &str, event_type: &str) -> Key {
        Key::new(&[env, team, app, event_type])
    }
    /// PermissionSet: `(env, team, application)` — one per application, so the same tuple as the
    /// owner Application's key.
    pub fn permission_set(env: &str, team: &str, app: &str) -> Key {
        Key::new(&[env, team, app])
    }
    /// McpServer (catalogue): `(env, team, spec.basePath)`.
    pub fn mcp_server(env: &str, team: &str, base_path: &str) -> Key {
        Key::new(&[env, team, base_path])
    }
    /// AgentCard (catalogue): `(env, team, spec.basePath)`.
    pub fn agent_card(env: &str, team: &str, base_path: &str) -> Key {
        Key::new(&[env, team, base_path])
    }
    /// AgenticExposure: `(env, team, application, spec.basePath)`. Component 1 is the owner team.
    pub fn agentic_exposure(env: &str, team: &str, app: &str, base_path: &str) -> Key {
        Key::new(&[env, team, app, base_path])
    }
    /// FileExposure: `(env, team, application, spec.fileType)`. Component 1 is the owner team.
    pub fn file_exposure(env: &str, team: &str, app: &str, file_type: &str) -> Key {
        Key::new(&[env, team, app, file_type])
    }
    /// Objects identified by namespace and name (subscriptions, approvals, approval requests):
    /// `(env, namespace, name)`.
    pub fn namespaced(env: &str, namespace: &str, name: &str) -> Key {
        Key::new(&[env, namespace, name])
    }
    /// The lookup key of a subscription of any family in the `*_by_subscription` indexes:
    /// `(kind, env, namespace, name)`.
    pub fn subscription_ref(kind: KindId, env: &str, namespace: &str, name: &str) -> Key {
        Key::new(&[kind.name(), env, namespace, name])
    }
    /// `(env, value)`: lookup key of the per-environment indexes (base path, event type, group,
    /// zone).
    pub fn in_env(env: &str, value: &str) -> Key {
        Key::new(&[env, value])
    }
}

/// Names of the secondary indexes ([`crate::kind::IndexName`]). Part of the storage layout.
pub mod index {
    use crate::kind::IndexName;

    /// Teams by `(env, spec.group)`.
    pub const TEAM_BY_GROUP: IndexName = IndexName("team_by_group");
    /// Applications by `(env, spec.zone.name)`.
    pub const APPLICATION_BY_ZONE: IndexName = IndexName("application_by_zone");
    /// Active Apis by `(env, spec.basePath)` (only `status.active = true` entries).
    pub const API_ACTIVE_BY_BASE_PATH: IndexName = IndexName("api_active_by_basepath");
    /// Active ApiExposures by `(env, spec.apiBasePath)`.
    pub const API_EXPOSURE_ACTIVE_BY_BASE_PATH: IndexName = IndexName("apiexposure_active_by_basepath");
    /// ApiSubscriptions by `(env, spec.apiBasePath)` (relinked when an exposure changes).
    pub const API_SUBSCRIPTION_BY_BASE_PATH: IndexName = IndexName("apisubscription_by_basepath");
    /// ApiSubscriptions by owner application key `(env, team, app)`.
    pub const API_SUBSCRIPTION_BY_OWNER: IndexName = IndexName("apisubscription_by_owner");
    /// ApiSubscriptions by the natural key of their linked target exposure.
    pub const API_SUBSCRIPTION_BY_TARGET: IndexName = IndexName("apisubscription_by_target");
    /// Active EventTypes by `(env, spec.type)`.
    pub const EVENT_TYPE_ACTIVE_BY_TYPE: IndexName = IndexName("eventtype_active_by_type");
    /// Active EventExposures by `(env, spec.eventType)`.
    pub const EVENT_EXPOSURE_ACTIVE_BY_TYPE: IndexName = IndexName("eventexposure_active_by_type");
    /// EventSubscriptions by `(env, spec.eventType)`.
    pub const EVENT_SUBSCRIPTION_BY_TYPE: IndexName = IndexName("eventsubscription_by_type");
    /// EventSubscriptions by owner application key.
    pub const EVENT_SUBSCRIPTION_BY_OWNER: IndexName = IndexName("eventsubscription_by_owner");
    /// EventSubscriptions by the natural key of their linked target exposure.
    pub const EVENT_SUBSCRIPTION_BY_TARGET: IndexName = IndexName("eventsubscription_by_target");
    /// Active McpServers by `(env, spec.basePath)`.
    pub const MCP_SERVER_ACTIVE_BY_BASE_PATH: IndexName = IndexName("mcpserver_active_by_basepath");
    /// Active AgentCards by `(env, spec.basePath)`.
    pub const AGENT_CARD_ACTIVE_BY_BASE_PATH: IndexName = IndexName("agentcard_active_by_basepath");
    /// Active AgenticExposures by `(env, spec.basePath)`.
    pub const AGENTIC_EXPOSURE_ACTIVE_BY_BASE_PATH: IndexName = IndexName("agenticexposure_active_by_basepath");
    /// AgenticSubscriptions by `(env, spec.basePath)`.
    pub const AGENTIC_SUBSCRIPTION_BY_BASE_PATH: IndexName = IndexName("agenticsubscription_by_basepath");
    /// AgenticSubscriptions by owner application key.
    pub const AGENTIC_SUBSCRIPTION_BY_OWNER: IndexName = IndexName("agenticsubscription_by_owner");
    /// AgenticSubscriptions by the natural key of their linked target exposure.
    pub const AGENTIC_SUBSCRIPTION_BY_TARGET: IndexName = IndexName("agenticsubscription_by_target");
    /// Active FileExposures by `(env, spec.fileType)`.
    pub const FILE_EXPOSURE_ACTIVE_BY_TYPE: IndexName = IndexName("fileexposure_active_by_type");
    /// FileSubscriptions by `(env, spec.fileType)`.
    pub const FILE_SUBSCRIPTION_BY_TYPE: IndexName = IndexName("filesubscription_by_type");
    /// FileSubscriptions by owner application key.
    pub const FILE_SUBSCRIPTION_BY_OWNER: IndexName = IndexName("filesubscription_by_owner");
    /// FileSubscriptions by the natural key of their linked target exposure.
    pub const FILE_SUBSCRIPTION_BY_TARGET: IndexName = IndexName("filesubscription_by_target");
    /// Approvals by [`super::natural::subscription_ref`].
    pub const APPROVAL_BY_SUBSCRIPTION: IndexName = IndexName("approval_by_subscription");
    /// ApprovalRequests by [`super::natural::subscription_ref`].
    pub const APPROVAL_REQUEST_BY_SUBSCRIPTION: IndexName = IndexName("approvalrequest_by_subscription");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_round_trip_with_escapes() {
        let k = Key::new(&["poc", "a\u{0}b", "c\u{1}", ""]);
        assert_eq!(k.parts().unwrap(), vec!["poc", "a\u{0}b", "c\u{1}", ""]);
    }

    #[test]
    fn prefix_tuple_is_byte_prefix_and_order_is_tuple_order() {
        let team = Key::new(&["poc", "payments--checkout"]);
        let app = Key::new(&["poc", "payments--checkout", "checkout-api"]);
        assert!(app.as_bytes().starts_with(team.as_bytes()));
        // "ab" < "ab-x" as strings, and the terminator keeps ("ab","z") < ("ab-x","a").
        assert!(Key::new(&["ab", "z"]) < Key::new(&["ab-x", "a"]));
        // A shorter first component never interleaves with a longer one.
        assert!(!Key::new(&["poc", "team-b"]).as_bytes().starts_with(Key::new(&["poc", "team"]).as_bytes()));
    }

    #[test]
    fn global_id_round_trip_and_rejects_garbage() {
        let id = GlobalId::new("Application", &Key::new(&["poc", "payments--checkout", "checkout-api"]));
        let s = id.encode();
        assert_eq!(GlobalId::decode(&s).unwrap(), id);
        assert!(GlobalId::decode("not base64!").is_err());
        assert!(GlobalId::decode("QQ").is_err()); // "A" without separator
        assert!(GlobalId::decode("").is_err());
    }

    #[test]
    fn malformed_key_is_an_error() {
        assert!(Key::from_bytes(vec![b'a']).parts().is_err());
        assert!(Key::from_bytes(vec![1, 9, 0]).parts().is_err());
    }
}
