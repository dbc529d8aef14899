//! `AgentCard`, the catalogue entry of an (A2A) agent (reference-graphql.md §10.1): visible to
//! every viewer of its environment; root connection `agentCards` (`orderBy: AgentCardOrder`),
//! `Team.agentCards`, `owner: TeamInfo!`, `activeExposure: AgenticExposureInfo` (the active
//! `AGENT` exposure of its base path). Fields and filters are shared with `McpServer`
//! ([`super::agentic_catalogue`]), `displayName` and `hash` included.

use super::agentic_catalogue;
use crate::entity::{Builder, Entity};
use crate::filter::FilterField;
use async_graphql::dynamic::Field;
use schema::kinds::agent_card::{AgentCard, AgentCardRecord};

impl Entity for AgentCard {
    const TYPE: &'static str = "AgentCard";
    const ROOT: Option<&'static str> = Some("agentCards");
    const TEAM_OWNED: bool = false;

    fn fields(b: &mut Builder) -> Vec<Field> {
        agentic_catalogue::fields::<AgentCard>(b)
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<AgentCardRecord>> {
        use crate::kinds::edges;
        #[allow(unused_imports)]
        use schema::keys::{index, natural};
        #[allow(unused_imports)]
        use schema::Key;
        vec![
            edges::by_key::<AgentCardRecord, schema::kinds::team::Team>("Owner", |s| {
                Some(natural::team(&s.record.meta.environment, &s.record.team))
            }),
            edges::by_index::<AgentCardRecord, schema::kinds::agentic_exposure::AgenticExposure>(
                "Exposures",
                index::AGENTIC_EXPOSURE_ACTIVE_BY_BASE_PATH,
                |s| s.record.active.then(|| natural::in_env(&s.record.meta.environment, &s.record.base_path)),
            ),
        ]
    }

    fn filters() -> Vec<FilterField<AgentCardRecord>> {
        agentic_catalogue::filters::<AgentCard>()
    }
}

/// Registers `AgentCard` (with the root `agentCards`) and `Team.agentCards`.
pub fn register_all(b: &mut Builder) {
    agentic_catalogue::register_all::<AgentCard>(b, "agentCards");
}
