//! Every Zone, Team, Application and Api of the example world (`examples/world/`) deserializes
//! into the typed custom resources, with the values the world's FACTS.md states.

mod support;

use crds::{Api, Application, Team, Zone};
use kube::Resource;
use support::world_objects;

/// The object of `items` in environment `env` (label) with the given namespace and name.
fn find<'a, T: Resource>(items: &'a [T], env: &str, ns: &str, name: &str) -> &'a T {
    items
        .iter()
        .find(|o| {
            let m = o.meta();
            let label = m.labels.as_ref().and_then(|l| l.get("cp.ei.telekom.de/environment"));
            label.map(String::as_str) == Some(env) && m.namespace.as_deref() == Some(ns) && m.name.as_deref() == Some(name)
        })
        .unwrap_or_else(|| panic!("no {env} {ns}/{name}"))
}

#[test]
fn zones() {
    let zones: Vec<Zone> = world_objects("Zone");
    assert_eq!(zones.len(), 4);

    let aws = find(&zones, "poc", "poc", "aws-eu1");
    assert_eq!(aws.spec.visibility, "World");
    let gw = aws.spec.gateway.as_ref().unwrap();
    assert_eq!(gw.presets.len(), 2);
    assert_eq!((gw.presets[0].name.as_str(), gw.presets[0].default), ("default", true));
    assert_eq!(gw.presets[0].urls[0].hostname, "api.aws-eu1.poc.example.com");
    assert_eq!(gw.presets[0].urls[0].base_path, "/");
    assert!(!gw.presets[0].urls[0].hidden);
    assert_eq!(gw.presets[0].urls[0].scheme.as_deref(), Some("https"));
    assert!(!gw.presets[1].default);
    assert_eq!(gw.presets[1].features[0].name, "ConsumerFailover");
    let ai = aws.spec.ai_gateway.as_ref().unwrap();
    assert_eq!(ai.presets[0].urls[0].hostname, "ai.aws-eu1.poc.example.com");
    assert_eq!(aws.spec.permissions.as_ref().unwrap().api_base_path, "/permissions/v1");
    assert_eq!(aws.spec.external_id_policies[0].scheme, "psa");
    assert_eq!(aws.spec.external_id_policies[0].pattern, "^PSA-[0-9]{5}$");
    assert!(aws.spec.gateways.is_empty() && aws.spec.presets.is_empty());
    let status = aws.status.as_ref().unwrap();
    assert_eq!(status.namespace.as_deref(), Some("poc--aws-eu1"));
    let links = status.links.as_ref().unwrap();
    assert_eq!(links.gateway_issuer, "https://iris.aws-eu1.poc.example.com/auth/realms/poc");
    assert_eq!(links.permissions_url.as_deref(), Some("https://api.aws-eu1.poc.example.com/permissions/v1"));
    assert_eq!(status.features.len(), 3);
    assert_eq!(status.conditions[0].type_, "Ready");

    let cetus = find(&zones, "poc", "poc", "caas-cetus");
    assert_eq!(cetus.spec.visibility, "Enterprise");
    let urls = &cetus.spec.gateway.as_ref().unwrap().presets[0].urls;
    assert!(urls[0].hidden);
    assert_eq!(
        (urls[1].hostname.as_str(), urls[1].port, urls[1].base_path.as_str()),
        ("api.caas-cetus.poc.example.com", Some(8443), "/gw")
    );
    assert!(cetus.spec.ai_gateway.is_none());
    assert_eq!(cetus.status.as_ref().unwrap().links.as_ref().unwrap().permissions_url, None);

    let lab = find(&zones, "poc", "poc", "otc-lab");
    assert!(!lab.spec.gateway.as_ref().unwrap().presets[0].default);
    assert!(lab.status.as_ref().unwrap().links.is_none());
    assert_eq!(lab.status.as_ref().unwrap().conditions[0].reason, "Blocked");

    let qa = find(&zones, "qa", "qa", "aws-eu1");
    assert_eq!(qa.spec.gateway.as_ref().unwrap().presets[0].urls[0].hostname, "api.aws-eu1.qa.example.com");
}

#[test]
fn newer_zone_shape_deserializes_without_spec_gateway() {
    let doc = serde_json::json!({
        "apiVersion": "admin.cp.ei.telekom.de/v1", "kind": "Zone",
        "metadata": {"name": "next", "namespace": "poc"},
        "spec": {
            "visibility": "World",
            "gateways": [{"name": "standard", "admin": {"identityProviderRef": "primary", "url": "https://gateway-admin.example.com"}}],
            "presets": [
                {"name": "default", "type": "API", "default": true, "gatewayRef": "standard", "urls": [{"hostname": "api.gateway.example.com", "basePath": "/"}]},
                {"name": "ai", "type": "AI", "default": true, "gatewayRef": "standard", "urls": [{"hostname": "ai.gateway.example.com", "basePath": "/"}]}
            ]
        }
    });
    let zone: Zone = serde_json::from_value(doc).unwrap();
    assert!(zone.spec.gateway.is_none());
    assert_eq!(zone.spec.gateways[0].admin.as_ref().unwrap().identity_provider_ref.as_deref(), Some("primary"));
    assert_eq!(zone.spec.presets[1].type_, "AI");
    assert!(!zone.spec.presets[0].urls[0].hidden);
}

#[test]
fn teams() {
    let teams: Vec<Team> = world_objects("Team");
    assert_eq!(teams.len(), 8);

    let ledger = find(&teams, "poc", "poc", "payments--ledger");
    assert_eq!((ledger.spec.group.as_str(), ledger.spec.name.as_str()), ("payments", "ledger"));
    assert_eq!(ledger.spec.email, "ledger-team@example.com");
    assert_eq!(ledger.spec.category, "Customer");
    let members: Vec<(&str, &str)> = ledger.spec.members.iter().map(|m| (m.name.as_str(), m.email.as_str())).collect();
    assert_eq!(
        members,
        vec![
            ("Aylin Demir", "aylin.demir@example.com"),
            ("Piet van Dijk", "piet.vandijk@example.com"),
            ("Sofia Marchetti", "sofia.marchetti@example.com"),
        ]
    );
    assert_eq!(ledger.spec.display_name.as_deref(), Some("Ledger"));
    assert_eq!(ledger.spec.description.as_deref(), Some("Bookkeeping, settlement reports and reconciliation."));
    assert_eq!(ledger.spec.team_token.as_deref(), Some("$<poc:payments--ledger::teamToken:2e3aa2b7e2>"));
    let status = ledger.status.as_ref().unwrap();
    assert_eq!(status.namespace, "poc--payments--ledger");
    assert_eq!(status.gateway_consumer_ref.as_ref().unwrap().namespace, "poc--payments--ledger");

    let fleet = find(&teams, "poc", "poc", "logistics--fleet");
    assert_eq!(fleet.spec.category, "Infrastructure");
    let ready = &fleet.status.as_ref().unwrap().conditions[0];
    assert_eq!((ready.type_.as_str(), ready.status.as_str(), ready.reason.as_str()), ("Ready", "False", "Error"));

    let knowledge = find(&teams, "poc", "poc", "assist--knowledge");
    assert_eq!(knowledge.spec.team_token, None);
    assert_eq!(knowledge.spec.description, None);

    let qa = find(&teams, "qa", "qa", "payments--ledger");
    assert_eq!(qa.spec.members.len(), 2);
}

#[test]
fn team_category_defaults_to_customer() {
    let doc = serde_json::json!({
        "apiVersion": "organization.cp.ei.telekom.de/v1", "kind": "Team",
        "metadata": {"name": "phoenix--firebirds", "namespace": "dev"},
        "spec": {"name": "firebirds", "group": "phoenix", "email": "f@example.com", "members": []}
    });
    let team: Team = serde_json::from_value(doc).unwrap();
    assert_eq!(team.spec.category, "Customer");
}

#[test]
fn applications() {
    let apps: Vec<Application> = world_objects("Application");
    assert_eq!(apps.len(), 15);

    let web = find(&apps, "poc", "poc--payments--checkout", "checkout-web");
    assert_eq!(web.spec.team, "payments--checkout");
    assert_eq!(web.spec.team_email, "checkout-team@example.com");
    assert_eq!((web.spec.zone.name.as_str(), web.spec.zone.namespace.as_str()), ("aws-eu1", "poc"));
    assert!(web.spec.needs_client && web.spec.needs_consumer && !web.spec.failover.enabled);
    assert_eq!(web.spec.secret, "$<poc:payments--checkout:checkout-web:clientSecret:bec2c9fcd0>");
    assert_eq!((web.spec.external_ids[0].scheme.as_str(), web.spec.external_ids[0].id.as_str()), ("psa", "PSA-10442"));
    let ip = web.spec.security.as_ref().unwrap().ip_restrictions.as_ref().unwrap();
    assert_eq!(ip.allow, vec!["10.20.0.0/16", "192.0.2.0/24"]);
    assert!(ip.deny.is_empty());
    let status = web.status.as_ref().unwrap();
    assert_eq!(status.client_id, "payments--checkout--checkout-web");
    assert_eq!(status.rotated_client_secret.as_deref(), Some("$<poc:payments--checkout:checkout-web:rotatedClientSecret:7938d38255>"));
    assert_eq!(status.rotated_expires_at.as_ref().unwrap().0.to_string(), "2026-09-24T09:00:00Z");
    assert_eq!(status.current_expires_at.as_ref().unwrap().0.to_string(), "2026-11-23T09:00:00Z");
    let rotation = status.conditions.iter().find(|c| c.type_ == "SecretRotation").unwrap();
    assert_eq!((rotation.status.as_str(), rotation.reason.as_str()), ("True", "Success"));

    let agent = find(&apps, "poc", "poc--assist--copilot", "copilot-agent");
    assert!(!agent.spec.needs_client && !agent.spec.needs_consumer);
    assert!(agent.spec.external_ids.is_empty() && agent.spec.security.is_none());

    let core = find(&apps, "poc", "poc--payments--ledger", "ledger-core");
    assert_eq!(core.spec.zone.name, "caas-cetus");
    assert_eq!(core.spec.security.as_ref().unwrap().ip_restrictions.as_ref().unwrap().deny, vec!["198.51.100.0/24"]);
    assert_eq!(core.status.as_ref().unwrap().consumers[0].namespace, "poc--caas-cetus");

    let qa = find(&apps, "qa", "qa--payments--ledger", "ledger-core");
    assert_eq!(qa.spec.zone.namespace, "qa");
    assert_eq!(qa.status.as_ref().unwrap().client_id, "payments--ledger--ledger-core");
}

#[test]
fn apis() {
    let apis: Vec<Api> = world_objects("Api");
    assert_eq!(apis.len(), 7);

    let positions = find(&apis, "poc", "poc--logistics--fleet", "logistics-fleet-positions-v1");
    assert_eq!(positions.spec.base_path, "/logistics/fleet/positions/v1");
    assert_eq!(positions.spec.version, "1.2.0");
    assert_eq!(positions.spec.category, "other");
    assert!(!positions.spec.x_vendor);
    assert_eq!(positions.spec.oauth2_scopes, vec!["fleet:read", "fleet:history", "fleet:write"]);
    assert_eq!(positions.spec.specification.as_deref(), Some("3f1c9a52-7d0e-4b4f-9c5e-1a2b3c4d5e05"));
    assert!(positions.status.as_ref().unwrap().active);

    let legacy = find(&apis, "poc", "poc--logistics--fleet", "logistics-fleet-legacy-v1");
    assert!(legacy.spec.x_vendor);
    assert!(legacy.spec.oauth2_scopes.is_empty() && legacy.spec.specification.is_none());

    let shadow = find(&apis, "poc", "poc--payments--ledger", "payments-checkout-v1");
    assert_eq!(shadow.spec.base_path, "/payments/checkout/v1");
    assert!(!shadow.status.as_ref().unwrap().active);
    assert_eq!(shadow.status.as_ref().unwrap().conditions[0].reason, "PreconditionNotMet");

    let active: Vec<_> = apis.iter().filter(|a| a.status.as_ref().is_some_and(|s| s.active)).collect();
    assert_eq!(active.len(), 6);

    let qa = find(&apis, "qa", "qa--payments--checkout", "payments-checkout-v1");
    assert_eq!(qa.spec.version, "1.5.0-rc.1");
}

#[test]
fn missing_required_field_fails_naming_it() {
    let doc = serde_json::json!({
        "apiVersion": "api.cp.ei.telekom.de/v1", "kind": "Api",
        "metadata": {"name": "x", "namespace": "poc--a--b"},
        "spec": {"version": "1", "category": "other", "xVendor": false}
    });
    let err = serde_json::from_value::<Api>(doc).unwrap_err().to_string();
    assert!(err.contains("basePath"), "{err}");
}
