//! `AgentCard`, the catalogue entry of an (A2A) agent visible to
//! every viewer of its environment; root connection `agentCards` (`orderBy: AgentCardOrder`),
//! `Team.agentCards`, `owner: TeamInfo!`, `activeExposure: AgenticExposureInfo` (the active
//! `AGENT` exposure of its base path). Fields and filters are shared with `McpServer`
//! ([`super::agentic_catalogue`]), `displayName` and `hash` included.

use super::agentic_catalogue;
use crate::column::Column;
use crate::entity::{Builder, Entity};
use crate::filter::EdgeFilter;
use async_graphql::dynamic::Field;
use schema::kinds::agent_card::{AgentCard, AgentCardRecord};

impl Entity for AgentCard {
    const TYPE: &'static str = "AgentCard";
    const ROOT: Option<&'static str> = Some("agentCards");
    const TEAM_OWNED: bool = false;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        agentic_catalogue::fields::<AgentCard>(builder)
    }

    fn columns() -> Vec<Column<AgentCardRecord>> {
        agentic_catalogue::columns::<AgentCard>()
    }

    fn edge_filters() -> Vec<EdgeFilter<AgentCardRecord>> {
        agentic_catalogue::edge_filters(true)
    }
}

/// Registers `AgentCard` (with the root `agentCards`) and `Team.agentCards`.
pub fn register(builder: &mut Builder) {
    agentic_catalogue::register_all::<AgentCard>(builder, "agentCards");
}
