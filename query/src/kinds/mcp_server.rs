//! `McpServer`, the catalogue entry of an MCP server visible to
//! every viewer of its environment; root connection `mcpServers` (`orderBy: McpServerOrder`),
//! `Team.mcpServers`, `owner: TeamInfo!`, `activeExposure: AgenticExposureInfo` (the active MCP
//! exposure of its base path). Fields and filters are shared with `AgentCard`
//! ([`super::agentic_catalogue`]).

use super::agentic_catalogue;
use crate::column::Column;
use crate::entity::{Builder, Entity};
use crate::filter::EdgeFilter;
use async_graphql::dynamic::Field;
use schema::kinds::mcp_server::{McpServer, McpServerRecord};

impl Entity for McpServer {
    const TYPE: &'static str = "McpServer";
    const ROOT: Option<&'static str> = Some("mcpServers");
    const TEAM_OWNED: bool = false;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        agentic_catalogue::fields::<McpServer>(builder)
    }

    fn columns() -> Vec<Column<McpServerRecord>> {
        agentic_catalogue::columns::<McpServer>()
    }

    fn edge_filters() -> Vec<EdgeFilter<McpServerRecord>> {
        agentic_catalogue::edge_filters(false)
    }
}

/// Registers `McpServer` (with the root `mcpServers`) and `Team.mcpServers`.
pub fn register(builder: &mut Builder) {
    agentic_catalogue::register_all::<McpServer>(builder, "mcpServers");
}
