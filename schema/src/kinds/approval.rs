//! Approval (its target: a subscription of any family): the standing decision on a
//! subscription. Natural key `(environment, namespace, name)`; requires its subscription; visible
//! to the subscriber's team and to the target exposure's team. Skip rules, value types and the
//! linking rules are shared with ApprovalRequest in [`super::approval_common`].

use super::approval_common::{self as shared, approval_kind, approval_source, ApprovalFields, Flavor};
use crate::common::{Meta, Status};
use crate::keys::index;
use crate::kind::{Context, Skip};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// The Approval kind.
pub struct Approval;

/// A projected Approval.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    /// Common metadata of the Approval itself.
    pub meta: Meta,
    /// From `status.conditions`; `UNKNOWN` when the CR has no status.
    pub status: Status,
    /// Action, strategy, state, subscription, requester, decider, decisions, transitions
    /// (without those to `Expired`) and requested scopes.
    pub fields: ApprovalFields,
    /// `status.expiresAt` (GraphQL `expiresat`); `None` when absent (also clearing an earlier
    /// value, unlike the reference).
    pub expires_at: Option<Timestamp>,
}

/// The translation of an Approval ([`Kind::translate`](crate::kind::Kind::translate)).
fn translate(cr: &crds::Approval, ctx: &Context) -> Result<ApprovalRecord, Skip> {
    let (meta, status, fields) = shared::translate(&approval_source!(cr), ctx, Flavor::Approval)?;
    let expires_at = cr.status.as_ref().and_then(|s| s.expires_at.as_ref()).map(Timestamp::from);
    Ok(ApprovalRecord { meta, status, fields, expires_at })
}

approval_kind!(Approval, ApprovalRecord {
    const VERSION: u32 = 1;
    by_subscription: index::APPROVAL_BY_SUBSCRIPTION,
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
    use crate::kinds::approval_common::{
        ApprovalAction, ApprovalState, AvailableTransition, DeciderInfo, Decision, RequesterInfo, SubscriptionKind, SubscriptionRef,
    };
    use crate::kinds::testing::{ctx, world_object};
    use crate::time::Timestamp;

    fn approval(env: &str, name: &str) -> crds::Approval {
        world_object("Approval", env, name)
    }

    fn translate(cr: &crds::Approval) -> Result<ApprovalRecord, Skip> {
        Approval::translate(cr, &ctx())
    }

    fn ts(s: &str) -> Option<Timestamp> {
        Some(Timestamp::parse_rfc3339(s).unwrap())
    }

    #[test]
    fn four_eyes_semigranted_full_mapping() {
        let rec = translate(&approval("poc", "apisubscription--copilot-gateway--payments-ledger-v2")).unwrap();
        assert_eq!(rec.meta.namespace, "poc--assist--copilot");
        assert_eq!(rec.status.phase, StatusPhase::Pending);
        assert_eq!(rec.status.message, "Approval has been partially granted");
        let f = &rec.fields;
        assert_eq!(f.action, "subscribe");
        assert_eq!(f.strategy, ApprovalStrategy::FourEyes);
        assert_eq!(f.state, ApprovalState::Semigranted);
        assert_eq!(
            f.subscription,
            SubscriptionRef {
                kind: SubscriptionKind::ApiSubscription,
                namespace: "poc--assist--copilot".into(),
                name: "copilot-gateway--payments-ledger-v2".into(),
            }
        );
        assert_eq!(
            f.requester,
            RequesterInfo {
                team_name: "assist--copilot".into(),
                team_email: "copilot-team@example.com".into(),
                reason: Some("Team assist--copilot requested access to your API payments-ledger-v2 from zone aws-eu1".into()),
                application_name: Some("copilot-gateway".into()),
            }
        );
        assert_eq!(f.decider, DeciderInfo { team_name: "payments--ledger".into(), team_email: Some("ledger-team@example.com".into()) });
        let decisions: Vec<_> = f.decisions.iter().map(|d| (d.name.as_str(), d.resulting_state)).collect();
        assert_eq!(
            decisions,
            vec![
                ("Aylin Demir", Some(ApprovalState::Semigranted)),
                ("Piet van Dijk", Some(ApprovalState::Granted)),
                ("Sofia Marchetti", Some(ApprovalState::Rejected)),
                ("Aylin Demir", Some(ApprovalState::Semigranted)),
            ]
        );
        assert_eq!(
            f.decisions[2],
            Decision {
                name: "Sofia Marchetti".into(),
                email: Some("sofia.marchetti@example.com".into()),
                comment: Some("Rejected after data-protection review".into()),
                timestamp: ts("2026-04-24T04:27:00Z"),
                resulting_state: Some(ApprovalState::Rejected),
            }
        );
        assert_eq!(
            f.available_transitions,
            vec![
                AvailableTransition { action: ApprovalAction::Deny, to_state: ApprovalState::Rejected },
                AvailableTransition { action: ApprovalAction::Allow, to_state: ApprovalState::Granted },
            ]
        );
        assert_eq!(f.requested_scopes, None);
        assert_eq!(rec.expires_at, None);
        assert_eq!(Approval::created_at(&rec), ts("2026-04-21T06:57:00Z"));
    }

    #[test]
    fn granted_approval_drops_expire_transition_and_snapshots_scopes() {
        let rec = translate(&approval("poc", "apisubscription--knowledge-base--logistics-fleet-positions-v1")).unwrap();
        let f = &rec.fields;
        assert_eq!((f.strategy, f.state), (ApprovalStrategy::Simple, ApprovalState::Granted));
        assert_eq!(f.decider.team_name, "logistics--fleet");
        // The CR lists Deny→Rejected, Suspend→Suspended, Expire→Expired; the last is dropped.
        let shown: Vec<_> = f.available_transitions.iter().map(|t| (t.action.as_str(), t.to_state.as_str())).collect();
        assert_eq!(shown, vec![("DENY", "REJECTED"), ("SUSPEND", "SUSPENDED")]);
        // The approved snapshot has one scope, while the subscription now requests two.
        assert_eq!(f.requested_scopes, Some(vec!["fleet:read".to_string()]));
        assert_eq!(rec.expires_at, ts("2027-04-12T19:52:00Z"));
        assert_eq!(rec.status.phase, StatusPhase::Ready);
    }

    #[test]
    fn suspended_and_expired_states() {
        let rec = translate(&approval("poc", "apisubscription--ledger-reports--logistics-fleet-positions-v1")).unwrap();
        assert_eq!(rec.fields.state, ApprovalState::Suspended);
        assert_eq!(
            rec.fields.available_transitions,
            vec![AvailableTransition { action: ApprovalAction::Resume, to_state: ApprovalState::Granted }]
        );
        let rec = translate(&approval("poc", "apisubscription--checkout-web--logistics-fleet-positions-v1")).unwrap();
        assert_eq!(rec.fields.state, ApprovalState::Expired);
        assert_eq!(rec.fields.state.as_str(), "EXPIRED");
    }

    #[test]
    fn every_world_approval_translates_with_all_features_on() {
        for name in [
            "agenticsubscription--copilot-gateway--agents-copilot-v1",
            "eventsubscription--checkout-batch--de-telekom-payments-orderplaced-v1",
            "poc--payments--ledger/filesubscription--de-telekom-payments-settlementreport-v1--ledger-core",
        ] {
            let rec = translate(&approval("poc", name)).unwrap();
            assert!(rec.fields.available_transitions.iter().all(|t| t.to_state != ApprovalState::Expired));
        }
    }

    #[test]
    fn event_approval_with_null_scopes() {
        let rec = translate(&approval("poc", "eventsubscription--checkout-batch--de-telekom-payments-orderplaced-v1")).unwrap();
        assert_eq!(rec.fields.subscription.kind, SubscriptionKind::EventSubscription);
        assert_eq!(rec.fields.requested_scopes, None);
        let rec = translate(&approval("poc", "eventsubscription--ledger-core--de-telekom-payments-orderplaced-v1")).unwrap();
        assert_eq!(rec.fields.requested_scopes, Some(vec!["eu-orders".to_string()]));
    }

    #[test]
    fn file_approval_has_empty_requester_email_and_no_decider_email() {
        let rec =
            translate(&approval("poc", "poc--payments--ledger/filesubscription--de-telekom-payments-settlementreport-v1--ledger-core"))
                .unwrap();
        assert_eq!(rec.fields.subscription.kind, SubscriptionKind::FileSubscription);
        assert_eq!(rec.fields.requester.team_email, "");
        assert_eq!(rec.fields.decider.team_email, None);
        assert_eq!(rec.fields.requested_scopes, None);
    }

    #[test]
    fn keys_requires_links_scopes_and_refs() {
        let rec = translate(&approval("poc", "apisubscription--copilot-gateway--payments-ledger-v2")).unwrap();
        let ns = "poc--assist--copilot";
        let sub = Key::new(&["poc", ns, "copilot-gateway--payments-ledger-v2"]);
        assert_eq!(Approval::key(&rec), Key::new(&["poc", ns, "apisubscription--copilot-gateway--payments-ledger-v2"]));
        assert_eq!(Approval::requires(&rec), vec![Parent { kind: KindId::ApiSubscription, key: sub.clone() }]);
        assert_eq!(Approval::links(&rec), vec![Link::Via { kind: KindId::ApiSubscription, key: sub, slot: 0 }]);
        let subscriber = Scope::Team { env: "poc".into(), team: "assist--copilot".into() };
        assert_eq!(Approval::scopes(&rec, &[None]), vec![subscriber.clone()]);
        let target = natural::api_exposure("poc", "payments--ledger", "ledger-core", "/payments/ledger/v2");
        assert_eq!(
            Approval::scopes(&rec, &[Some(target)]),
            vec![subscriber, Scope::Team { env: "poc".into(), team: "payments--ledger".into() }]
        );
        assert_eq!(
            Approval::index_entries(&rec, &[None]),
            vec![(index::APPROVAL_BY_SUBSCRIPTION, Key::new(&["ApiSubscription", "poc", ns, "copilot-gateway--payments-ledger-v2"]))]
        );
    }

    #[test]
    fn same_team_approval_has_one_scope_and_kind_specific_keys() {
        let rec = translate(&approval("poc", "agenticsubscription--copilot-gateway--agents-copilot-v1")).unwrap();
        let sub = SubscriptionRef {
            kind: SubscriptionKind::AgenticSubscription,
            namespace: "poc--assist--copilot".into(),
            name: "copilot-gateway--agents-copilot-v1".into(),
        };
        assert_eq!(rec.fields.subscription, sub);
        assert_eq!(Approval::requires(&rec)[0].kind, KindId::AgenticSubscription);
        assert_eq!(Approval::links(&rec)[0], Link::Via { kind: KindId::AgenticSubscription, key: sub.key("poc"), slot: 0 });
        let target = Key::new(&["poc", "assist--copilot", "copilot-agent", "/agents/copilot/v1"]);
        assert_eq!(Approval::scopes(&rec, &[Some(target)]), vec![Scope::Team { env: "poc".into(), team: "assist--copilot".into() }]);
        assert_eq!(
            Approval::index_entries(&rec, &[None])[0].1,
            Key::new(&["AgenticSubscription", "poc", "poc--assist--copilot", "copilot-gateway--agents-copilot-v1"])
        );
    }

    #[test]
    fn empty_target_namespace_falls_back_to_own_namespace() {
        let mut cr = approval("qa", "apisubscription--ledger-core--payments-checkout-v1");
        cr.spec.target.namespace.clear();
        let rec = translate(&cr).unwrap();
        assert_eq!(rec.fields.subscription.namespace, "qa--payments--ledger");
        assert_eq!(Approval::requires(&rec)[0].key, Key::new(&["qa", "qa--payments--ledger", "ledger-core--payments-checkout-v1"]));
    }

    #[test]
    fn skip_rules_in_order() {
        let base = approval("poc", "eventsubscription--checkout-batch--de-telekom-payments-orderplaced-v1");

        // 1. target name — reported even when everything else is wrong too.
        let mut cr = base.clone();
        cr.spec.target.name.clear();
        cr.spec.action.clear();
        cr.spec.target.kind = "Deployment".into();
        cr.spec.decider = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.target.name")));
        // 2. action.
        cr.spec.target.name = "x".into();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.action")));
        // 3. target kind.
        cr.spec.action = "subscribe".into();
        let unsupported = Skip::NotProjected("spec.target.kind is not a supported subscription kind".into());
        assert_eq!(translate(&cr), Err(unsupported.clone()));
        cr.spec.target.kind = "apisubscription".into(); // kind names are exact
        assert_eq!(translate(&cr), Err(unsupported));
        // 5. decider team (after the feature rule: see below).
        cr.spec.target.kind = "EventSubscription".into();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.decider.teamName")));
        cr.spec.decider = Some(crds::approval::Decider { team_name: Some(String::new()), ..Default::default() });
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.decider.teamName")));
    }

    #[test]
    fn disabled_features_skip_their_subscription_kinds() {
        let off = |f: fn(&mut Features)| {
            let mut c = ctx();
            f(&mut c.features);
            c
        };
        let event = approval("poc", "eventsubscription--checkout-batch--de-telekom-payments-orderplaced-v1");
        let agentic = approval("poc", "agenticsubscription--copilot-gateway--agents-copilot-v1");
        let file = approval("poc", "poc--payments--ledger/filesubscription--de-telekom-payments-settlementreport-v1--ledger-core");
        let api = approval("poc", "apisubscription--copilot-gateway--payments-ledger-v2");

        let no_pubsub = off(|f| f.pubsub = false);
        assert_eq!(Approval::translate(&event, &no_pubsub), Err(Skip::NotProjected("pubsub feature is disabled".into())));
        // 4 comes before 5: the feature rule wins over a missing decider.
        let mut no_decider = event.clone();
        no_decider.spec.decider = None;
        assert_eq!(Approval::translate(&no_decider, &no_pubsub), Err(Skip::NotProjected("pubsub feature is disabled".into())));
        assert!(Approval::translate(&api, &no_pubsub).is_ok());
        assert!(Approval::translate(&agentic, &no_pubsub).is_ok());

        let no_ai = off(|f| f.ai_gateway = false);
        assert_eq!(Approval::translate(&agentic, &no_ai), Err(Skip::NotProjected("ai gateway feature is disabled".into())));
        assert!(Approval::translate(&event, &no_ai).is_ok());

        let no_files = off(|f| f.file_manager = false);
        assert_eq!(Approval::translate(&file, &no_files), Err(Skip::NotProjected("file manager feature is disabled".into())));
        assert!(Approval::translate(&api, &no_files).is_ok());
    }

    #[test]
    fn bad_enums_and_properties_are_skipped() {
        let base = approval("poc", "apisubscription--copilot-gateway--payments-ledger-v2");

        let mut cr = base.clone();
        cr.spec.strategy = "TwoEyes".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.strategy", .. })));

        let mut cr = base.clone();
        cr.spec.state = "Approved".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.state", .. })));

        let mut cr = base.clone();
        cr.spec.state = "granted".into();
        cr.spec.strategy = "foureyes".into();
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.fields.state, rec.fields.strategy), (ApprovalState::Granted, ApprovalStrategy::FourEyes));

        let mut cr = base.clone();
        cr.spec.decisions[0].resulting_state = "Maybe".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.decisions[].resultingState", .. })));

        let mut cr = base.clone();
        cr.status.as_mut().unwrap().available_transitions[0].action = "Escalate".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "status.availableTransitions[].action", .. })));

        let mut cr = base.clone();
        cr.spec.requester.properties = Some(serde_json::json!(["scopes"]));
        assert!(matches!(translate(&cr), Err(Skip::Invalid { field: "spec.requester.properties", .. })));

        let mut cr = base.clone();
        cr.spec.requester.properties = None;
        cr.spec.requester.reason.clear();
        cr.spec.requester.application_ref = None;
        cr.spec.decisions.clear();
        cr.status = None;
        let rec = translate(&cr).unwrap();
        assert_eq!(rec.fields.requested_scopes, None);
        assert_eq!((rec.fields.requester.reason.as_deref(), rec.fields.requester.application_name.as_deref()), (None, None));
        assert!(rec.fields.decisions.is_empty() && rec.fields.available_transitions.is_empty());
        assert_eq!((rec.status.phase, rec.expires_at), (StatusPhase::Unknown, None));

        let mut cr = base;
        cr.metadata.namespace = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.namespace")));
    }
}
