//! Every ApiExposure, ApiSubscription, Approval and ApprovalRequest of the example world
//! deserializes into its typed custom resource, with the values the manifests carry.

mod support;

use crds::{ApiExposure, ApiSubscription, Approval, ApprovalRequest};
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
fn api_exposures() {
    let all: Vec<ApiExposure> = world_objects("ApiExposure");
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|e| e.status.is_some() && e.spec.api_base_path.starts_with('/')));

    let checkout = find(&all, "poc--payments--checkout", "checkout-api--payments-checkout-v1");
    assert_eq!(checkout.spec.api_base_path, "/payments/checkout/v1");
    assert_eq!(checkout.spec.visibility, "World");
    assert_eq!(checkout.spec.approval.strategy, "Simple");
    assert_eq!(checkout.spec.approval.trusted_teams, vec!["payments--checkout"]);
    assert_eq!(checkout.spec.zone.name, "aws-eu1");
    let upstreams: Vec<_> = checkout.spec.upstreams.iter().map(|u| (u.url.as_str(), u.weight)).collect();
    assert_eq!(
        upstreams,
        vec![
            ("https://checkout-api-blue.payments.poc.example.com/orders", Some(70)),
            ("https://checkout-api-green.payments.poc.example.com/orders", Some(30)),
        ]
    );
    let traffic = &checkout.spec.traffic;
    let zones: Vec<_> = traffic.failover.as_ref().unwrap().zones.iter().map(|z| z.name.as_str()).collect();
    assert_eq!(zones, vec!["caas-cetus"]);
    let rate = traffic.rate_limit.as_ref().unwrap();
    let provider = rate.provider.as_ref().unwrap();
    assert_eq!((provider.limits.second, provider.limits.minute, provider.limits.hour), (Some(50), Some(1000), Some(20000)));
    let options = provider.options.as_ref().unwrap();
    assert_eq!((options.hide_client_headers, options.fault_tolerant), (Some(false), Some(true)));
    let subscriber = rate.subscriber_rate_limit.as_ref().unwrap();
    assert_eq!(subscriber.default.as_ref().unwrap().limits.minute, Some(100));
    assert_eq!(subscriber.overrides[0].subscriber, "logistics--parcel-tracking--parcel-tracker");
    assert_eq!(subscriber.overrides[0].limits.minute, Some(300));
    assert_eq!(traffic.circuit_breaker.as_ref().unwrap().enabled, Some(true));
    assert!(checkout.spec.security.is_none());
    let status = checkout.status.as_ref().unwrap();
    assert!(status.active);
    assert_eq!(status.conditions[0].type_, "Ready");
    assert_eq!(status.route.as_ref().unwrap().namespace, "poc--aws-eu1");
    assert_eq!(status.failover_routes[0].namespace, "poc--caas-cetus");

    let ledger = find(&all, "poc--payments--ledger", "ledger-core--payments-ledger-v2");
    assert_eq!(ledger.spec.approval.strategy, "FourEyes");
    assert_eq!(ledger.spec.approval.trusted_teams, vec!["payments--checkout", "payments--ledger"]);
    let basic = ledger.spec.security.as_ref().unwrap().m2m.as_ref().unwrap().basic.as_ref().unwrap();
    assert_eq!(basic.username, "ledger-gw");
    assert!(basic.password.starts_with("$<poc:payments--ledger:ledger-core:"));
    let headers = ledger.spec.transformation.as_ref().unwrap().request.as_ref().unwrap().headers.as_ref().unwrap();
    assert_eq!(headers.remove, vec!["X-Internal-Debug"]);
    assert_eq!(headers.add, vec!["X-Ledger-Tenant: poc"]);
    assert_eq!(ledger.spec.traffic, Default::default());

    let parcels = find(&all, "poc--logistics--parcel-tracking", "parcel-tracker--logistics-parcels-v1");
    assert_eq!(parcels.spec.visibility, "Zone");
    assert_eq!(parcels.spec.approval.strategy, "Auto");
    let idp = parcels.spec.security.as_ref().unwrap().m2m.as_ref().unwrap().external_idp.as_ref().unwrap();
    assert_eq!(idp.token_endpoint, "https://idp.partner.example.com/oauth2/token");
    assert_eq!((idp.token_request.as_str(), idp.grant_type.as_str()), ("client_secret_post", "client_credentials"));
    let client = idp.client.as_ref().unwrap();
    assert_eq!(client.client_id, "parcel-gw");
    assert!(client.client_secret.as_deref().unwrap().starts_with("$<"));
    assert_eq!(client.client_key, None);

    let fleet = find(&all, "poc--logistics--fleet", "fleet-telemetry--logistics-fleet-positions-v1");
    assert_eq!(fleet.spec.security.as_ref().unwrap().m2m.as_ref().unwrap().scopes, vec!["fleet:read", "fleet:history"]);
    let fleet_rate = fleet.spec.traffic.rate_limit.as_ref().unwrap();
    assert!(fleet_rate.provider.is_none());
    assert_eq!(fleet_rate.subscriber_rate_limit.as_ref().unwrap().default.as_ref().unwrap().limits.second, Some(5));

    let inactive = find(&all, "poc--payments--ledger", "ledger-core--payments-checkout-v1");
    assert!(!inactive.status.as_ref().unwrap().active);
    assert_eq!(inactive.spec.api_base_path, "/payments/checkout/v1");
}

#[test]
fn api_subscriptions() {
    let all: Vec<ApiSubscription> = world_objects("ApiSubscription");
    assert_eq!(all.len(), 14);
    for s in &all {
        // The requestor lives in the subscription's own namespace throughout the world.
        assert_eq!(Some(s.spec.requestor.application.namespace.clone()), s.namespace());
        assert!(s.status.as_ref().is_some_and(|st| st.active_scopes.is_none()));
    }

    let none = find(&all, "poc--payments--checkout", "checkout-web--payments-checkout-v1");
    assert_eq!(none.spec.api_base_path, "/payments/checkout/v1");
    assert_eq!(none.spec.requestor.application.name, "checkout-web");
    assert_eq!(none.spec.zone.name, "aws-eu1");
    assert!(none.spec.security.is_none());
    let status = none.status.as_ref().unwrap();
    assert_eq!(status.gateway_url.as_deref(), Some("https://api.aws-eu1.poc.example.com/payments/checkout/v1"));

    let client = find(&all, "poc--payments--checkout", "checkout-batch--payments-ledger-v2");
    assert_eq!(client.spec.requestor.application.name, "checkout-batch");
    let m2m = client.spec.security.as_ref().unwrap().m2m.as_ref().unwrap();
    assert_eq!(m2m.client.as_ref().unwrap().client_id, "checkout-batch-ledger");
    assert!(m2m.basic.is_none() && m2m.scopes.is_empty());
    let st = client.status.as_ref().unwrap();
    assert_eq!(st.approval.as_ref().unwrap().name, "apisubscription--checkout-batch--payments-ledger-v2");
    assert_eq!(st.approval_request.as_ref().unwrap().name, "checkout-batch--payments-ledger-v2--bcbd9f59d");
    assert_eq!(st.conditions[0].reason, "Error");

    let scopes = find(&all, "poc--logistics--parcel-tracking", "parcel-tracker--payments-checkout-v1");
    let m2m = scopes.spec.security.as_ref().unwrap().m2m.as_ref().unwrap();
    assert!(m2m.client.is_none() && m2m.basic.is_none());
    assert_eq!(m2m.scopes, vec!["orders:read"]);

    let failover = find(&all, "poc--assist--copilot", "copilot-gateway--payments-ledger-v2");
    assert!(failover.spec.traffic.failover.as_ref().unwrap().enabled);

    let knowledge = find(&all, "poc--assist--knowledge", "knowledge-base--logistics-fleet-positions-v1");
    assert_eq!(knowledge.spec.requestor.application.name, "knowledge-base");
    assert_eq!(knowledge.spec.security.as_ref().unwrap().m2m.as_ref().unwrap().scopes, vec!["fleet:read", "fleet:history"]);

    let qa = find(&all, "qa--payments--ledger", "ledger-core--payments-checkout-v1");
    assert_eq!(qa.spec.requestor.application.name, "ledger-core");
    assert_eq!(qa.status.as_ref().unwrap().gateway_url.as_deref(), Some("https://api.aws-eu1.qa.example.com/payments/checkout/v1"));
}

#[test]
fn approvals() {
    let all: Vec<Approval> = world_objects("Approval");
    assert_eq!(all.len(), 20);
    for a in &all {
        assert_eq!(a.spec.action, "subscribe");
        assert!(!a.spec.target.name.is_empty());
        assert!(a.spec.decider.as_ref().is_some_and(|d| d.team_name.as_deref().is_some_and(|t| !t.is_empty())));
        assert!(a.spec.decisions.iter().all(|d| !d.resulting_state.is_empty()));
    }
    let kinds = |k: &str| all.iter().filter(|a| a.spec.target.kind == k).count();
    assert_eq!(
        (kinds("ApiSubscription"), kinds("EventSubscription"), kinds("AgenticSubscription"), kinds("FileSubscription")),
        (10, 4, 3, 3)
    );

    let semi = find(&all, "poc--assist--copilot", "apisubscription--copilot-gateway--payments-ledger-v2");
    assert_eq!((semi.spec.strategy.as_str(), semi.spec.state.as_str()), ("FourEyes", "Semigranted"));
    assert_eq!(semi.spec.target.kind, "ApiSubscription");
    assert_eq!(semi.spec.target.api_version, "api.cp.ei.telekom.de/v1");
    assert_eq!(semi.spec.target.name, "copilot-gateway--payments-ledger-v2");
    assert_eq!(semi.spec.target.namespace, "poc--assist--copilot");
    assert_eq!(semi.spec.requester.team_name, "assist--copilot");
    assert_eq!(semi.spec.requester.team_email, "copilot-team@example.com");
    assert_eq!(semi.spec.requester.application_ref.as_ref().unwrap().name, "copilot-gateway");
    assert_eq!(semi.spec.requester.properties.as_ref().unwrap()["basePath"], "/payments/ledger/v2");
    let decider = semi.spec.decider.as_ref().unwrap();
    assert_eq!(decider.team_name.as_deref(), Some("payments--ledger"));
    assert_eq!(decider.team_email.as_deref(), Some("ledger-team@example.com"));
    assert_eq!(decider.application_ref.as_ref().unwrap().name, "ledger-core");
    let decisions: Vec<_> = semi.spec.decisions.iter().map(|d| (d.name.as_str(), d.resulting_state.as_str())).collect();
    assert_eq!(
        decisions,
        vec![("Aylin Demir", "Semigranted"), ("Piet van Dijk", "Granted"), ("Sofia Marchetti", "Rejected"), ("Aylin Demir", "Semigranted")]
    );
    assert_eq!(semi.spec.decisions[2].comment.as_deref(), Some("Rejected after data-protection review"));
    assert_eq!(semi.spec.decisions[0].email.as_deref(), Some("aylin.demir@example.com"));
    assert!(semi.spec.decisions[0].timestamp.is_some());
    assert_eq!(semi.spec.approved_request.as_ref().unwrap().name, "copilot-gateway--payments-ledger-v2--bcbd9f59d");
    let status = semi.status.as_ref().unwrap();
    let transitions: Vec<_> = status.available_transitions.iter().map(|t| (t.action.as_str(), t.to.as_str())).collect();
    assert_eq!(transitions, vec![("Deny", "Rejected"), ("Allow", "Granted")]);
    assert_eq!(status.last_state.as_deref(), Some("Semigranted"));
    assert!(status.expires_at.is_none());

    let granted = find(&all, "poc--assist--knowledge", "apisubscription--knowledge-base--logistics-fleet-positions-v1");
    assert_eq!(granted.spec.requester.properties.as_ref().unwrap()["scopes"], serde_json::json!(["fleet:read"]));
    assert_eq!(granted.spec.decider.as_ref().unwrap().team_name.as_deref(), Some("logistics--fleet"));
    let status = granted.status.as_ref().unwrap();
    assert_eq!(status.available_transitions.len(), 3);
    assert_eq!(status.available_transitions[2].to, "Expired");
    assert_eq!(status.expires_at.as_ref().unwrap().0.to_string(), "2027-04-12T19:52:00Z");

    let event = find(&all, "poc--payments--checkout", "eventsubscription--checkout-batch--de-telekom-payments-orderplaced-v1");
    assert_eq!(event.spec.target.kind, "EventSubscription");
    assert_eq!(event.spec.requester.properties.as_ref().unwrap()["scopes"], serde_json::Value::Null);

    let file = find(&all, "poc--payments--ledger", "filesubscription--de-telekom-payments-settlementreport-v1--ledger-core");
    assert_eq!(file.spec.target.kind, "FileSubscription");
    assert_eq!(file.spec.requester.team_email, "");
    assert_eq!(file.spec.decider.as_ref().unwrap().team_email, None);
}

#[test]
fn approval_requests() {
    let all: Vec<ApprovalRequest> = world_objects("ApprovalRequest");
    assert_eq!(all.len(), 28);
    for r in &all {
        assert_eq!(r.spec.action, "subscribe");
        let status = r.status.as_ref().unwrap();
        // `status.approval` is always written: the subscription's Approval, or `{name: "",
        // namespace: ""}` while a first-time request has none yet.
        let approval = &status.approval.name;
        assert!(approval.is_empty() || approval.ends_with(&r.spec.target.name), "{}", r.name_any());
    }

    let pending = find(&all, "poc--assist--knowledge", "knowledge-base--logistics-fleet-positions-v1--7fdc89ff47");
    assert_eq!((pending.spec.strategy.as_str(), pending.spec.state.as_str()), ("Simple", "Pending"));
    assert_eq!(pending.spec.target.kind, "ApiSubscription");
    assert_eq!(pending.spec.target.name, "knowledge-base--logistics-fleet-positions-v1");
    assert_eq!(pending.spec.requester.properties.as_ref().unwrap()["scopes"], serde_json::json!(["fleet:read", "fleet:history"]));
    assert_eq!(pending.spec.decider.as_ref().unwrap().team_name.as_deref(), Some("logistics--fleet"));
    assert!(pending.spec.decisions.is_empty());
    let status = pending.status.as_ref().unwrap();
    let transitions: Vec<_> = status.available_transitions.iter().map(|t| (t.action.as_str(), t.to.as_str())).collect();
    assert_eq!(transitions, vec![("Allow", "Granted"), ("Deny", "Rejected")]);
    // Operator-written only for requests that have (or had) an Approval.
    assert_eq!(status.approval.name, "");

    let auto = find(&all, "poc--assist--copilot", "copilot-gateway--agents-copilot-v1--5df79bd48c");
    assert_eq!(auto.spec.target.kind, "AgenticSubscription");
    assert_eq!((auto.spec.strategy.as_str(), auto.spec.state.as_str()), ("Auto", "Granted"));
    assert_eq!(auto.spec.decisions[0].name, "System");
    assert_eq!(auto.spec.decisions[0].email, None);
    assert_eq!(auto.spec.decisions[0].resulting_state, "Granted");
    assert!(auto.status.as_ref().unwrap().available_transitions.is_empty());
    assert_eq!(auto.status.as_ref().unwrap().approval.name, "agenticsubscription--copilot-gateway--agents-copilot-v1");

    let first_time = find(&all, "poc--assist--copilot", "copilot-gateway--de-telekom-logistics-parceldelivered-v1--597986f486");
    assert_eq!(first_time.spec.target.kind, "EventSubscription");
    assert_eq!(first_time.status.as_ref().unwrap().approval, Default::default());

    let rejected = find(&all, "poc--logistics--fleet", "fleet-planner--payments-checkout-v1--794cdb79b6");
    assert_eq!(rejected.spec.state, "Rejected");
    assert_eq!(rejected.spec.decider.as_ref().unwrap().team_name.as_deref(), Some("payments--checkout"));

    let states = |s: &str| all.iter().filter(|r| r.spec.state == s).count();
    assert_eq!(states("Pending") + states("Semigranted") + states("Granted") + states("Rejected"), 28);
    assert!(states("Semigranted") >= 1 && states("Rejected") >= 1);
}
