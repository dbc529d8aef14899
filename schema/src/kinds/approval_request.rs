//! ApprovalRequest (its target: a subscription of any family): one request for approval
//! of a subscription's current spec. Same rules as Approval ([`super::approval_common`]) except:
//! four states only (`Pending`, `Semigranted`, `Granted`, `Rejected`), transitions are kept
//! unfiltered, and there is no expiry. Natural key `(environment, namespace, name)`.

use super::approval_common::{self as shared, approval_kind, approval_source, ApprovalFields, Flavor};
use crate::common::{Meta, Status};
use crate::keys::index;
use crate::kind::{Context, Skip};
use serde::{Deserialize, Serialize};

/// The ApprovalRequest kind.
pub struct ApprovalRequest;

/// A projected ApprovalRequest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequestRecord {
    /// Common metadata of the ApprovalRequest itself.
    pub meta: Meta,
    /// From `status.conditions`; `UNKNOWN` when the CR has no status.
    pub status: Status,
    /// Action, strategy, state (one of four), subscription, requester, decider, decisions,
    /// transitions (unfiltered) and requested scopes.
    pub fields: ApprovalFields,
}

/// The translation of an ApprovalRequest ([`Kind::translate`](crate::kind::Kind::translate)).
fn translate(cr: &crds::ApprovalRequest, ctx: &Context) -> Result<ApprovalRequestRecord, Skip> {
    let (meta, status, fields) = shared::translate(&approval_source!(cr), ctx, Flavor::Request)?;
    Ok(ApprovalRequestRecord { meta, status, fields })
}

approval_kind!(ApprovalRequest, ApprovalRequestRecord {
    const VERSION: u32 = 1;
    by_subscription: index::APPROVAL_REQUEST_BY_SUBSCRIPTION,
    translate: translate,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::{ApprovalStrategy, StatusPhase};
    use crate::keys::natural;
    use crate::keys::Key;
    use crate::kind::Features;
    use crate::kind::{Kind, KindId, Link, Parent, Scope};
    use crate::kinds::approval_common::{ApprovalAction, ApprovalState, AvailableTransition, SubscriptionKind};
    use crate::kinds::testing::{ctx, world_object};
    use crate::time::Timestamp;

    fn request(env: &str, name: &str) -> crds::ApprovalRequest {
        world_object("ApprovalRequest", env, name)
    }

    fn translate(cr: &crds::ApprovalRequest) -> Result<ApprovalRequestRecord, Skip> {
        ApprovalRequest::translate(cr, &ctx())
    }

    #[test]
    fn pending_request_requests_both_scopes() {
        let rec = translate(&request("poc", "knowledge-base--logistics-fleet-positions-v1--7fdc89ff47")).unwrap();
        let f = &rec.fields;
        assert_eq!(f.requested_scopes, Some(vec!["fleet:read".to_string(), "fleet:history".to_string()]));
        assert_eq!((f.strategy, f.state), (ApprovalStrategy::Simple, ApprovalState::Pending));
        assert_eq!(f.subscription.kind, SubscriptionKind::ApiSubscription);
        assert_eq!(f.subscription.namespace, "poc--assist--knowledge");
        assert_eq!(f.subscription.name, "knowledge-base--logistics-fleet-positions-v1");
        assert_eq!(f.requester.team_name, "assist--knowledge");
        assert_eq!(f.requester.application_name.as_deref(), Some("knowledge-base"));
        assert_eq!(f.decider.team_name, "logistics--fleet");
        assert!(f.decisions.is_empty());
        assert_eq!(
            f.available_transitions,
            vec![
                AvailableTransition { action: ApprovalAction::Allow, to_state: ApprovalState::Granted },
                AvailableTransition { action: ApprovalAction::Deny, to_state: ApprovalState::Rejected },
            ]
        );
        assert_eq!(ApprovalRequest::created_at(&rec), rec.meta.creation_timestamp);
    }

    #[test]
    fn auto_granted_request_with_system_decision() {
        let rec = translate(&request("poc", "copilot-gateway--agents-copilot-v1--5df79bd48c")).unwrap();
        let f = &rec.fields;
        assert_eq!((f.strategy, f.state), (ApprovalStrategy::Auto, ApprovalState::Granted));
        assert_eq!(f.subscription.kind, SubscriptionKind::AgenticSubscription);
        assert_eq!(f.decisions.len(), 1);
        assert_eq!(f.decisions[0].name, "System");
        assert_eq!(f.decisions[0].email, None);
        assert_eq!(f.decisions[0].resulting_state, Some(ApprovalState::Granted));
        assert_eq!(f.decisions[0].timestamp, Some(Timestamp::parse_rfc3339("2026-05-30T02:38:00Z").unwrap()));
        assert!(f.available_transitions.is_empty());
        assert_eq!(f.requested_scopes, None);
        assert_eq!(rec.status.phase, StatusPhase::Ready);
    }

    #[test]
    fn semigranted_and_rejected_requests() {
        let rec = translate(&request("poc", "fleet-planner--payments-ledger-v2--bcbd9f59d")).unwrap();
        assert_eq!((rec.fields.strategy, rec.fields.state), (ApprovalStrategy::FourEyes, ApprovalState::Semigranted));
        let rec = translate(&request("poc", "fleet-planner--payments-checkout-v1--794cdb79b6")).unwrap();
        assert_eq!(rec.fields.state, ApprovalState::Rejected);
        assert_eq!(rec.fields.decider.team_name, "payments--checkout");
        assert_eq!(
            rec.fields.available_transitions,
            vec![AvailableTransition { action: ApprovalAction::Allow, to_state: ApprovalState::Granted }]
        );
    }

    #[test]
    fn transitions_to_expired_are_kept_but_request_states_are_four() {
        let mut cr = request("poc", "checkout-web--payments-checkout-v1--794cdb79b6");
        cr.status.as_mut().unwrap().available_transitions =
            vec![crds::approval::AvailableTransition { action: "Suspend".into(), to: "Expired".into() }];
        assert_eq!(
            translate(&cr).unwrap().fields.available_transitions,
            vec![AvailableTransition { action: ApprovalAction::Suspend, to_state: ApprovalState::Expired }]
        );
        cr.spec.state = "Suspended".into();
        assert_eq!(
            translate(&cr),
            Err(Skip::InvalidEnum { field: "spec.state", value: "Suspended".into(), expected: "Pending, Semigranted, Granted, Rejected" })
        );
    }

    #[test]
    fn keys_requires_links_scopes_and_refs() {
        let rec = translate(&request("poc", "parcel-tracker--payments-checkout-v1--55658d68f8")).unwrap();
        let ns = "poc--logistics--parcel-tracking";
        let sub = Key::new(&["poc", ns, "parcel-tracker--payments-checkout-v1"]);
        assert_eq!(ApprovalRequest::key(&rec), Key::new(&["poc", ns, "parcel-tracker--payments-checkout-v1--55658d68f8"]));
        assert_eq!(ApprovalRequest::requires(&rec), vec![Parent { kind: KindId::ApiSubscription, key: sub.clone() }]);
        assert_eq!(ApprovalRequest::links(&rec), vec![Link::Via { kind: KindId::ApiSubscription, key: sub, slot: 0 }]);
        let subscriber = Scope::Team { env: "poc".into(), team: "logistics--parcel-tracking".into() };
        assert_eq!(ApprovalRequest::scopes(&rec, &[None]), vec![subscriber.clone()]);
        let target = natural::api_exposure("poc", "payments--checkout", "checkout-api", "/payments/checkout/v1");
        assert_eq!(
            ApprovalRequest::scopes(&rec, &[Some(target)]),
            vec![subscriber, Scope::Team { env: "poc".into(), team: "payments--checkout".into() }]
        );
        assert_eq!(
            ApprovalRequest::index_entries(&rec, &[None]),
            vec![(
                index::APPROVAL_REQUEST_BY_SUBSCRIPTION,
                Key::new(&["ApiSubscription", "poc", ns, "parcel-tracker--payments-checkout-v1"])
            )]
        );
    }

    #[test]
    fn event_and_file_requests_use_their_kinds() {
        let rec = translate(&request("qa", "ledger-core--de-telekom-payments-orderplaced-v1--7848b8d6bd")).unwrap();
        assert_eq!(rec.fields.subscription.kind, SubscriptionKind::EventSubscription);
        assert_eq!(ApprovalRequest::requires(&rec)[0].kind, KindId::EventSubscription);
        assert_eq!(
            ApprovalRequest::index_entries(&rec, &[None])[0].1,
            Key::new(&["EventSubscription", "qa", "qa--payments--ledger", "ledger-core--de-telekom-payments-orderplaced-v1"])
        );
        let rec = translate(&request("poc", "de-telekom-payments-settlementreport-v1--knowledge-base--6c65dcc579")).unwrap();
        assert_eq!(rec.fields.subscription.kind, SubscriptionKind::FileSubscription);
        assert_eq!(
            ApprovalRequest::links(&rec)[0],
            Link::Via {
                kind: KindId::FileSubscription,
                key: Key::new(&["poc", "poc--assist--knowledge", "de-telekom-payments-settlementreport-v1--knowledge-base"]),
                slot: 0
            }
        );
    }

    #[test]
    fn skip_rules_in_order() {
        let base = request("poc", "knowledge-base--mcp-parcels-v1--5d54cbcf99");
        let mut cr = base.clone();
        cr.spec.target.name.clear();
        cr.spec.action.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.target.name")));
        cr.spec.target.name = "knowledge-base--mcp-parcels-v1".into();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.action")));
        cr.spec.action = "subscribe".into();
        cr.spec.target.kind = "McpServer".into();
        assert_eq!(translate(&cr), Err(Skip::NotProjected("spec.target.kind is not a supported subscription kind".into())));
        cr.spec.target.kind = "AgenticSubscription".into();
        cr.spec.decider.as_mut().unwrap().team_name = None;
        let mut no_ai = ctx();
        no_ai.features = Features { ai_gateway: false, ..Features::default() };
        assert_eq!(ApprovalRequest::translate(&cr, &no_ai), Err(Skip::NotProjected("ai gateway feature is disabled".into())));
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.decider.teamName")));

        let mut cr = base.clone();
        cr.spec.requester.properties = Some(serde_json::json!("scopes=parcels:read"));
        assert!(matches!(translate(&cr), Err(Skip::Invalid { field: "spec.requester.properties", .. })));

        let mut cr = base;
        cr.spec.target.namespace.clear();
        assert_eq!(translate(&cr).unwrap().fields.subscription.namespace, "poc--assist--knowledge");
    }
}
