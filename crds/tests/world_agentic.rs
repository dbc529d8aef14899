//! Every McpServer, AgentCard, AgenticExposure and AgenticSubscription of the example world
//! deserializes into its typed custom resource, with the values the manifests carry (counts per
//! `examples/world/FACTS.md`).

mod support;

use crds::{AgentCard, AgenticExposure, AgenticSubscription, McpServer};
use kube::ResourceExt;
use support::world_objects;

/// The object named `namespace/name` in `objects`.
fn find<'a, T: ResourceExt>(objects: &'a [T], namespace: &str, name: &str) -> &'a T {
    objects
        .iter()
        .find(|o| o.namespace().as_deref() == Some(namespace) && o.name_any() == name)
        .unwrap_or_else(|| panic!("no object {namespace}/{name}"))
}

#[test]
fn mcp_servers() {
    let all: Vec<McpServer> = world_objects("McpServer");
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|m| m.status.is_some() && m.spec.base_path.starts_with("/mcp/") && m.spec.hash.is_none()));

    let parcels = find(&all, "poc--logistics--parcel-tracking", "mcp-parcels-v1");
    assert_eq!(parcels.spec.base_path, "/mcp/parcels/v1");
    assert_eq!(parcels.spec.name, "Parcel Tracking MCP");
    assert_eq!(parcels.spec.version, "1.0.0");
    assert_eq!(parcels.spec.description.as_deref(), Some("Look up parcel status and delivery windows."));
    assert_eq!(parcels.spec.category.as_deref(), Some("tool"));
    assert_eq!(parcels.spec.scopes, vec!["parcels:read"]);
    assert_eq!(parcels.spec.specification.as_deref(), Some("c0ffee00-0000-4000-8000-000000000101"));
    let status = parcels.status.as_ref().unwrap();
    assert!(status.active);
    assert_eq!((status.conditions[0].type_.as_str(), status.conditions[0].reason.as_str()), ("Ready", "McpServerActive"));
    assert_eq!(parcels.labels()["cp.ei.telekom.de/environment"], "poc");

    // The second registration of /mcp/parcels/v1 (newer, by logistics--fleet) is inactive.
    let shadow = find(&all, "poc--logistics--fleet", "mcp-parcels-v1");
    assert_eq!(shadow.spec.base_path, "/mcp/parcels/v1");
    assert_eq!(shadow.spec.name, "Fleet Parcels MCP");
    assert!(shadow.spec.scopes.is_empty());
    assert_eq!(shadow.spec.specification, None);
    assert!(!shadow.status.as_ref().unwrap().active);
    assert_eq!(shadow.status.as_ref().unwrap().conditions[0].status, "False");

    let knowledge = find(&all, "poc--assist--knowledge", "mcp-knowledge-v1");
    assert_eq!(knowledge.spec.scopes, vec!["kb:search", "kb:read"]);
    assert_eq!(knowledge.spec.version, "2.0.1");
}

#[test]
fn agent_cards() {
    let all: Vec<AgentCard> = world_objects("AgentCard");
    assert_eq!(all.len(), 2);
    assert!(all.iter().all(|a| a.status.as_ref().is_some_and(|s| s.active)));

    let copilot = find(&all, "poc--assist--copilot", "agents-copilot-v1");
    assert_eq!(copilot.spec.base_path, "/agents/copilot/v1");
    assert_eq!(copilot.spec.name, "Customer Copilot");
    assert_eq!(copilot.spec.version, "1.1.0");
    assert_eq!(copilot.spec.category.as_deref(), Some("assistant"));
    assert_eq!(copilot.spec.scopes, vec!["copilot:chat"]);
    assert_eq!(copilot.spec.specification.as_deref(), Some("c0ffee00-0000-4000-8000-000000000201"));
    assert_eq!(copilot.spec.description.as_deref(), Some("A2A agent answering customer questions."));

    let dispatch = find(&all, "poc--logistics--fleet", "agents-dispatch-v1");
    assert_eq!(dispatch.spec.name, "Dispatch Planner Agent");
    assert!(dispatch.spec.scopes.is_empty() && dispatch.spec.specification.is_none() && dispatch.spec.hash.is_none());
}

#[test]
fn agentic_exposures() {
    let all: Vec<AgenticExposure> = world_objects("AgenticExposure");
    assert_eq!(all.len(), 4);
    for e in &all {
        // The application label names the provider throughout the world.
        assert_eq!(e.labels().get("cp.ei.telekom.de/application"), Some(&e.spec.provider.name));
        assert_eq!(Some(e.spec.provider.namespace.clone()), e.namespace());
        assert_eq!((e.spec.zone.name.as_str(), e.spec.zone.namespace.as_str()), ("aws-eu1", "poc"));
    }

    let agent = find(&all, "poc--assist--copilot", "copilot-agent--agents-copilot-v1");
    assert_eq!(agent.spec.base_path, "/agents/copilot/v1");
    assert_eq!(agent.spec.variant, "AGENT");
    assert_eq!(agent.spec.visibility, "Enterprise");
    assert_eq!(agent.spec.approval.strategy, "FourEyes");
    assert_eq!(agent.spec.approval.trusted_teams, vec!["assist--copilot"]);
    let upstreams: Vec<_> = agent.spec.upstreams.iter().map(|u| (u.url.as_str(), u.weight)).collect();
    assert_eq!(
        upstreams,
        vec![("https://copilot-a.assist.poc.example.com/a2a", Some(50)), ("https://copilot-b.assist.poc.example.com/a2a", Some(50))]
    );
    let traffic = agent.spec.traffic.as_ref().unwrap();
    assert_eq!(traffic.circuit_breaker.as_ref().unwrap().enabled, Some(true));
    assert!(traffic.failover.is_none() && traffic.rate_limit.is_none());
    let headers = agent.spec.transformation.as_ref().unwrap().request.as_ref().unwrap().headers.as_ref().unwrap();
    assert_eq!((headers.remove.clone(), headers.add.clone()), (vec!["Cookie".to_string()], vec!["X-Agent-Channel: a2a".to_string()]));
    assert!(agent.spec.security.is_none());
    let status = agent.status.as_ref().unwrap();
    assert!(status.active);
    assert_eq!(status.route.as_ref().unwrap().name, "ai-gateway--agents-copilot-v1");
    assert!(status.proxy_routes.is_empty());

    let knowledge = find(&all, "poc--assist--knowledge", "knowledge-base--mcp-knowledge-v1");
    assert_eq!((knowledge.spec.variant.as_str(), knowledge.spec.visibility.as_str()), ("TELECONTEXTMCP", "World"));
    assert_eq!(knowledge.spec.upstreams[0].weight, None);
    let provider = knowledge.spec.traffic.as_ref().unwrap().rate_limit.as_ref().unwrap().provider.as_ref().unwrap();
    assert_eq!((provider.limits.second, provider.limits.minute, provider.limits.hour), (None, Some(600), None));
    let options = provider.options.as_ref().unwrap();
    assert_eq!((options.hide_client_headers, options.fault_tolerant), (Some(true), Some(true)));

    let tracker = find(&all, "poc--logistics--parcel-tracking", "parcel-tracker--mcp-parcels-v1");
    assert_eq!(tracker.spec.variant, "MCP");
    assert_eq!(tracker.spec.approval.strategy, "Simple");
    assert_eq!(tracker.spec.traffic.as_ref(), Some(&Default::default()));
    let m2m = tracker.spec.security.as_ref().unwrap().m2m.as_ref().unwrap();
    assert_eq!(m2m.scopes, vec!["parcels:read"]);
    assert!(m2m.basic.is_none() && m2m.external_idp.is_none());

    let inactive = find(&all, "poc--logistics--fleet", "fleet-planner--mcp-parcels-v1");
    assert_eq!(inactive.spec.base_path, "/mcp/parcels/v1");
    let status = inactive.status.as_ref().unwrap();
    assert!(!status.active);
    assert_eq!(status.conditions[0].reason, "PreconditionNotMet");
    assert!(status.route.is_none());
}

#[test]
fn agentic_exposure_crd_defaults_and_optional_idp_fields() {
    let doc = serde_json::json!({
        "apiVersion": "agentic.cp.ei.telekom.de/v1", "kind": "AgenticExposure",
        "metadata": {"name": "x", "namespace": "poc--a--b"},
        "spec": {"basePath": "/mcp/x/v1", "upstreams": [{"url": "https://x"}], "approval": {},
                 "zone": {"name": "z", "namespace": "poc"}, "provider": {"name": "app", "namespace": "poc--a--b"},
                 "security": {"m2m": {"externalIDP": {"tokenEndpoint": "https://idp/token"}}}}
    });
    let e: AgenticExposure = serde_json::from_value(doc).unwrap();
    assert_eq!((e.spec.variant.as_str(), e.spec.visibility.as_str(), e.spec.approval.strategy.as_str()), ("MCP", "Enterprise", "Auto"));
    let idp = e.spec.security.unwrap().m2m.unwrap().external_idp.unwrap();
    assert_eq!((idp.token_endpoint.as_str(), idp.token_request, idp.grant_type), ("https://idp/token", None, None));
    assert!(e.spec.traffic.is_none() && e.status.is_none());
}

#[test]
fn agentic_subscriptions() {
    let all: Vec<AgenticSubscription> = world_objects("AgenticSubscription");
    assert_eq!(all.len(), 7);
    for s in &all {
        assert_eq!(Some(s.spec.requestor.application.namespace.clone()), s.namespace());
        assert!(s.status.as_ref().is_some_and(|st| st.active_scopes.is_none()));
    }

    let agent = find(&all, "poc--assist--copilot", "copilot-gateway--agents-copilot-v1");
    assert_eq!(agent.spec.base_path, "/agents/copilot/v1");
    assert_eq!(agent.spec.requestor.application.name, "copilot-gateway");
    assert_eq!(agent.spec.zone.name, "aws-eu1");
    assert!(agent.spec.security.is_none());
    assert!(!agent.spec.traffic.as_ref().unwrap().failover.as_ref().unwrap().enabled);
    let st = agent.status.as_ref().unwrap();
    assert_eq!(st.gateway_url.as_deref(), Some("https://ai.aws-eu1.poc.example.com/agents/copilot/v1"));
    assert_eq!(st.approval.as_ref().unwrap().name, "agenticsubscription--copilot-gateway--agents-copilot-v1");
    assert_eq!(st.approval_request.as_ref().unwrap().name, "copilot-gateway--agents-copilot-v1--5df79bd48c");
    assert_eq!(st.consume_route.as_ref().unwrap().name, "aws-eu1--copilot-gateway--agents-copilot-v1");
    assert_eq!(st.conditions[0].reason, "Provisioned");

    let scoped = find(&all, "poc--payments--checkout", "checkout-web--mcp-knowledge-v1");
    let m2m = scoped.spec.security.as_ref().unwrap().m2m.as_ref().unwrap();
    assert_eq!(m2m.scopes, vec!["kb:search"]);
    assert!(m2m.client.is_none() && m2m.basic.is_none());
    assert!(scoped.spec.traffic.is_none());

    let pending = find(&all, "poc--assist--knowledge", "knowledge-base--agents-copilot-v1");
    let st = pending.status.as_ref().unwrap();
    assert_eq!((st.gateway_url.as_deref(), st.approval.as_ref()), (None, None));
    assert_eq!(st.conditions[0].reason, "ApprovalPending");

    let targetless = find(&all, "poc--logistics--fleet", "fleet-planner--mcp-weather-v1");
    assert_eq!(targetless.spec.base_path, "/mcp/weather/v1");
    assert_eq!(targetless.status.as_ref().unwrap().conditions[0].reason, "AgenticExposureNotFound");

    let no_conditions = find(&all, "poc--logistics--parcel-tracking", "parcel-notifier--mcp-knowledge-v1");
    assert!(no_conditions.status.as_ref().unwrap().conditions.is_empty());
}
