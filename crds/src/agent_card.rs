//! `agentic.cp.ei.telekom.de/v1` `AgentCard` (CRD `agentic.cp.ei.telekom.de_agentcards.yaml`): a
//! catalogue entry of an (A2A) agent.
//!
//! Its `spec` and `status` are those of the family ([`crate::agentic_catalogue`]).

crate::agentic_catalogue::agentic_catalogue_cr!(AgentCardSpec, AgentCardStatus, kind = "AgentCard", status = "AgentCardStatus");
