//! AgentCard, the catalogue entry of an (A2A) agent (a kind the Go projector does not
//! project; `hash` per [`super::agentic_catalogue::spec_hash`]). Natural key `(environment, team, spec.basePath)`; requires the owner Team;
//! visible to every viewer of its environment (catalogue). Active entries (`status.active`) are
//! indexed under `(environment, basePath)` in [`index::AGENT_CARD_ACTIVE_BY_BASE_PATH`]. The
//! fields and their translation are shared with McpServer ([`agentic_catalogue`]).
//!
//! Quirk fixed (ARCHITECTURE.md "The Go projector's quirks, fixed"): emptied optional fields clear the stored value.
//!
//! [`agentic_catalogue`]: crate::kinds::agentic_catalogue

use crate::keys::{index, natural};
use crate::kinds::agentic_catalogue::agentic_catalogue_kind;

agentic_catalogue_kind!(AgentCard, AgentCardRecord {
    const VERSION: u32 = 1;
    natural_key: natural::agent_card,
    active_index: index::AGENT_CARD_ACTIVE_BY_BASE_PATH,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Key;
    use crate::kind::{Kind, KindId, Parent, Scope, Skip};

    use crate::kinds::testing::{ctx, world_object};

    fn object(name: &str) -> crds::AgentCard {
        world_object("AgentCard", "poc", name)
    }

    fn translate(cr: &crds::AgentCard) -> Result<AgentCardRecord, Skip> {
        AgentCard::translate(cr, &ctx())
    }

    #[test]
    fn key_requires_scopes_and_active_index() {
        let rec = translate(&object("agents-copilot-v1")).unwrap();
        assert_eq!(AgentCard::key(&rec), Key::new(&["poc", "assist--copilot", "/agents/copilot/v1"]));
        assert_eq!(AgentCard::requires(&rec), vec![Parent { kind: KindId::Team, key: natural::team("poc", "assist--copilot") }]);
        assert_eq!(AgentCard::scopes(&rec, &[]), vec![Scope::Env { env: "poc".into() }]);
        assert_eq!(
            AgentCard::index_entries(&rec, &[]),
            vec![(index::AGENT_CARD_ACTIVE_BY_BASE_PATH, natural::in_env("poc", "/agents/copilot/v1"))]
        );
        let mut cr = object("agents-copilot-v1");
        cr.status.as_mut().unwrap().active = false;
        assert!(AgentCard::index_entries(&translate(&cr).unwrap(), &[]).is_empty());
    }

    #[test]
    fn bad_input_is_skipped() {
        let mut cr = object("agents-copilot-v1");
        cr.spec.base_path.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.basePath")));
        let mut cr = object("agents-copilot-v1");
        cr.spec.version.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.version")));
        let mut cr = object("agents-copilot-v1");
        cr.metadata.name = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.name")));
    }
}
