//! `agentic.cp.ei.telekom.de/v1` `McpServer` (CRD `agentic.cp.ei.telekom.de_mcpservers.yaml`): a
//! catalogue entry of an MCP server.
//!
//! Its `spec` and `status` are those of the family ([`crate::agentic_catalogue`]).

crate::agentic_catalogue::agentic_catalogue_cr!(McpServerSpec, McpServerStatus, kind = "McpServer", status = "McpServerStatus");
