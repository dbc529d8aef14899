//! McpServer, the catalogue entry of an MCP server (a kind the Go projector does not
//! project; `hash` per [`super::agentic_catalogue::spec_hash`]). Natural key `(environment, team, spec.basePath)`; requires the owner Team;
//! visible to every viewer of its environment (catalogue). Active entries (`status.active`) are
//! indexed under `(environment, basePath)` in [`index::MCP_SERVER_ACTIVE_BY_BASE_PATH`]. The
//! fields and their translation are shared with AgentCard ([`agentic_catalogue`]).
//!
//! Quirk fixed (ARCHITECTURE.md "The Go projector's quirks, fixed"): emptied optional fields clear the stored value.
//!
//! [`agentic_catalogue`]: crate::kinds::agentic_catalogue

use crate::keys::{index, natural};
use crate::kinds::agentic_catalogue::agentic_catalogue_kind;

agentic_catalogue_kind!(McpServer, McpServerRecord {
    const VERSION: u32 = 1;
    natural_key: natural::mcp_server,
    active_index: index::MCP_SERVER_ACTIVE_BY_BASE_PATH,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::keys::Key;
    use crate::kind::{Kind, KindId, Parent, Scope, Skip};
    use crate::kinds::agentic_catalogue as catalogue;
    use crate::kinds::testing::{ctx, world_object};

    fn object(name: &str) -> crds::McpServer {
        world_object("McpServer", "poc", name)
    }

    fn translate(cr: &crds::McpServer) -> Result<McpServerRecord, Skip> {
        McpServer::translate(cr, &ctx())
    }

    #[test]
    fn hash_is_the_spec_hash_unless_the_cr_carries_one() {
        // Computed independently: sha256 of the spec's canonical JSON (sorted keys, no whitespace).
        let rec = translate(&object("poc--logistics--parcel-tracking/mcp-parcels-v1")).unwrap();
        assert_eq!(rec.hash, "587b66b28b498962f0a9fb529095ba76fb0d7202c846bc9bb3e851fa04e028ff");
        let shadow = translate(&object("poc--logistics--fleet/mcp-parcels-v1")).unwrap();
        assert_eq!(shadow.hash, "b558a55a8cd0cc5e841fb773071066247f4934ece9c2c8bf8108ceea6001534b");
        assert_eq!(translate(&object("mcp-orders-v1")).unwrap().hash, "463864ca70b8a2b99bbaac5df8577f5dda31ef44851bd854d4cf61ea712bbc51");

        // The hash changes with the specification.
        let mut cr = object("mcp-orders-v1");
        cr.spec.specification = Some("c0ffee00-0000-4000-8000-000000000999".into());
        assert_ne!(translate(&cr).unwrap().hash, "463864ca70b8a2b99bbaac5df8577f5dda31ef44851bd854d4cf61ea712bbc51");
        // Status changes do not change it.
        let mut cr = object("mcp-orders-v1");
        cr.status = None;
        assert_eq!(translate(&cr).unwrap().hash, "463864ca70b8a2b99bbaac5df8577f5dda31ef44851bd854d4cf61ea712bbc51");

        // A newer CR carries its own hash.
        let mut cr = object("mcp-orders-v1");
        cr.spec.hash = Some("2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae".into());
        assert_eq!(translate(&cr).unwrap().hash, "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae");
        // An empty one counts as absent: the spec (with its empty `hash`) is hashed.
        cr.spec.hash = Some(String::new());
        assert_eq!(translate(&cr).unwrap().hash, catalogue::spec_hash(&cr.spec).unwrap());
    }

    #[test]
    fn key_requires_scopes_and_active_index() {
        let rec = translate(&object("poc--logistics--parcel-tracking/mcp-parcels-v1")).unwrap();
        assert_eq!(McpServer::key(&rec), Key::new(&["poc", "logistics--parcel-tracking", "/mcp/parcels/v1"]));
        assert_eq!(McpServer::requires(&rec), vec![Parent { kind: KindId::Team, key: natural::team("poc", "logistics--parcel-tracking") }]);
        assert!(McpServer::links(&rec).is_empty());
        assert_eq!(McpServer::scopes(&rec, &[]), vec![Scope::Env { env: "poc".into() }]);
        assert_eq!(
            McpServer::index_entries(&rec, &[]),
            vec![(index::MCP_SERVER_ACTIVE_BY_BASE_PATH, natural::in_env("poc", "/mcp/parcels/v1"))]
        );
        assert!(McpServer::dependents(&rec, &[]).is_empty());

        let shadow = translate(&object("poc--logistics--fleet/mcp-parcels-v1")).unwrap();
        assert_eq!(McpServer::key(&shadow), natural::mcp_server("poc", "logistics--fleet", "/mcp/parcels/v1"));
        assert!(McpServer::index_entries(&shadow, &[]).is_empty());
    }

    #[test]
    fn emptied_fields_clear_values_and_the_title_falls_back_to_the_name() {
        let mut cr = object("mcp-knowledge-v1");
        cr.spec.name.clear();
        cr.spec.description = Some(String::new());
        cr.spec.category = None;
        cr.spec.specification = Some(String::new());
        cr.spec.scopes.clear();
        cr.status = None;
        let rec = translate(&cr).unwrap();
        assert_eq!(rec.display_name, "mcp-knowledge-v1");
        assert_eq!((&rec.description, &rec.category, &rec.specification), (&None, &None, &None));
        assert!(rec.oauth2_scopes.is_empty());
        assert_eq!((rec.active, rec.status.phase), (false, StatusPhase::Unknown));
        assert!(McpServer::index_entries(&rec, &[]).is_empty());
    }

    #[test]
    fn bad_input_is_skipped() {
        let mut cr = object("mcp-orders-v1");
        cr.spec.base_path.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.basePath")));
        let mut cr = object("mcp-orders-v1");
        cr.spec.version.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.version")));
        let mut cr = object("mcp-orders-v1");
        cr.metadata.namespace = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.namespace")));
        let mut cr = object("mcp-orders-v1");
        cr.metadata.namespace = Some("poc--".into());
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.namespace")));
        // A document without the required spec fields does not even decode.
        let doc = serde_json::json!({"apiVersion": "agentic.cp.ei.telekom.de/v1", "kind": "McpServer",
            "metadata": {"name": "x", "namespace": "poc--a--b"}, "spec": {"basePath": "/x"}});
        let err = serde_json::from_value::<crds::McpServer>(doc).unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");
    }
}
