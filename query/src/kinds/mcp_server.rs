//! `McpServer`, the catalogue entry of an MCP server (reference-graphql.md §10.1): visible to
//! every viewer of its environment; root connection `mcpServers` (`orderBy: McpServerOrder`),
//! `Team.mcpServers`, `owner: TeamInfo!`, `activeExposure: AgenticExposureInfo` (the active MCP
//! exposure of its base path). Fields and filters are shared with `AgentCard`
//! ([`super::agentic_catalogue`]).

use super::agentic_catalogue;
use crate::entity::{Builder, Entity};
use crate::filter::FilterField;
use async_graphql::dynamic::Field;
use schema::kinds::mcp_server::{McpServer, McpServerRecord};

impl Entity for McpServer {
    const TYPE: &'static str = "McpServer";
    const ROOT: Option<&'static str> = Some("mcpServers");
    const TEAM_OWNED: bool = false;

    fn fields(b: &mut Builder) -> Vec<Field> {
        agentic_catalogue::fields::<McpServer>(b)
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<McpServerRecord>> {
        use crate::kinds::edges;
        #[allow(unused_imports)]
        use schema::keys::{index, natural};
        #[allow(unused_imports)]
        use schema::Key;
        vec![
            edges::by_key::<McpServerRecord, schema::kinds::team::Team>("Owner", |s| {
                Some(natural::team(&s.record.meta.environment, &s.record.team))
            }),
            edges::by_index::<McpServerRecord, schema::kinds::agentic_exposure::AgenticExposure>(
                "Exposures",
                index::AGENTIC_EXPOSURE_ACTIVE_BY_BASE_PATH,
                |s| s.record.active.then(|| natural::in_env(&s.record.meta.environment, &s.record.base_path)),
            ),
        ]
    }

    fn filters() -> Vec<FilterField<McpServerRecord>> {
        agentic_catalogue::filters::<McpServer>()
    }
}

/// Registers `McpServer` (with the root `mcpServers`) and `Team.mcpServers`.
pub fn register_all(b: &mut Builder) {
    agentic_catalogue::register_all::<McpServer>(b, "mcpServers");
}
