//! FileSubscription (a kind the Go projector does not project; feature `file_manager`): an Application subscribing to a file type. Natural key
//! `(environment, namespace, name)`; owned by (and visible to) the team of its namespace. Its
//! target is the *active* FileExposure of the same environment and file type, linked by the
//! writer; while there is none the record is written without target and retried
//! (ARCHITECTURE.md "References by natural key"), exactly like ApiSubscription by base path.

use crate::common::{self, Meta, Status};
use crate::keys::index;
use crate::kind::{Context, KindId, Skip};
use crate::kinds::file_exposure::{non_empty, owner_application, Sftp};
use crate::kinds::subscription_wiring::{subscription_kind, SubscriptionWiring};
use serde::{Deserialize, Serialize};

/// The FileSubscription kind.
pub struct FileSubscription;

/// A projected FileSubscription.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSubscriptionRecord {
    /// Common metadata; the owner team is `meta.team()` (from `metadata.namespace`).
    pub meta: Meta,
    /// From `status.conditions`; `UNKNOWN` when the CR has no status.
    pub status: Status,
    /// The owner Application's name: label `cp.ei.telekom.de/application`, else
    /// `spec.requestor.name` (see [`owner_application`]).
    pub application: String,
    /// `spec.fileType` (required, non-empty).
    pub file_type: String,
    /// `spec.zone.name` (required, non-empty): the zone the subscriber is located in.
    pub zone: String,
    /// `spec.sftp`; `None` when absent.
    pub sftp: Option<Sftp>,
    /// `status.serviceURL`: the internal SFTP endpoint; `None` when absent or empty.
    pub service_url: Option<String>,
    /// `status.serviceExternalURL`: the external SFTP endpoint; `None` when absent or empty.
    pub service_external_url: Option<String>,
}

/// Keys, links, scopes and indexes of the FileSubscription family (see [`SubscriptionWiring`]).
const WIRING: SubscriptionWiring = SubscriptionWiring {
    kind: KindId::FileSubscription,
    target_active: index::FILE_EXPOSURE_ACTIVE_BY_TYPE,
    by_key: index::FILE_SUBSCRIPTION_BY_TYPE,
    by_owner: index::FILE_SUBSCRIPTION_BY_OWNER,
    by_target: index::FILE_SUBSCRIPTION_BY_TARGET,
};

/// # Errors
/// [`Skip::Missing`] for empty metadata, owner application, `spec.fileType` or
/// `spec.zone.name`.
fn translate(cr: &crds::FileSubscription, _ctx: &Context) -> Result<FileSubscriptionRecord, Skip> {
    let meta = Meta::from_object(&cr.metadata)?;
    let spec = &cr.spec;
    let application = owner_application(&cr.metadata, "spec.requestor.name", &spec.requestor.name)?;
    let file_type = common::required("spec.fileType", &spec.file_type)?.to_string();
    let zone = common::required("spec.zone.name", &spec.zone.name)?.to_string();
    let status = cr.status.as_ref();
    Ok(FileSubscriptionRecord {
        meta,
        status: common::status_from_conditions(status.map(|s| s.conditions.as_slice()).unwrap_or_default()),
        application,
        file_type,
        zone,
        sftp: spec.sftp.as_ref().map(Sftp::from_cr),
        service_url: non_empty(status.and_then(|s| s.service_url.as_ref())),
        service_external_url: non_empty(status.and_then(|s| s.service_external_url.as_ref())),
    })
}

subscription_kind!(FileSubscription, FileSubscriptionRecord {
    const VERSION: u32 = 1;
    wiring: WIRING,
    target: file_type,
    translate: translate,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::keys::natural;
    use crate::keys::Key;
    use crate::kind::{Kind, Link, Parent, Scope};
    use crate::kinds::testing::{ctx, world_object};
    use crate::time::Timestamp;

    // A subscription without target is written and retried until linked (ARCHITECTURE.md "References by natural key").
    const _: () = assert!(FileSubscription::RETRY_UNLINKED);

    fn subscription(name: &str) -> crds::FileSubscription {
        world_object("FileSubscription", "poc", name)
    }

    fn translate(cr: &crds::FileSubscription) -> Result<FileSubscriptionRecord, Skip> {
        FileSubscription::translate(cr, &ctx())
    }

    const SETTLEMENT: &str = "de-telekom-payments-settlementreport-v1";

    #[test]
    fn checkout_batch_with_both_service_urls() {
        let rec = translate(&subscription("de-telekom-payments-settlementreport-v1--checkout-batch")).unwrap();
        assert_eq!(rec.meta.namespace, "poc--payments--checkout");
        assert_eq!(rec.meta.name, "de-telekom-payments-settlementreport-v1--checkout-batch");
        assert_eq!((rec.application.as_str(), rec.meta.team()), ("checkout-batch", "payments--checkout"));
        assert_eq!(rec.file_type, SETTLEMENT);
        assert_eq!(rec.zone, "caas-cetus");
        assert_eq!((rec.status.phase, rec.status.message.as_str()), (StatusPhase::Ready, "Successfully provisioned subresources"));
        assert_eq!(rec.sftp.as_ref().unwrap().public_keys.len(), 1);
        assert!(rec.sftp.as_ref().unwrap().public_keys[0].ends_with(" checkout-batch@poc"));
        assert_eq!(rec.service_url.as_deref(), Some("sftp://sftp.caas-cetus.poc.example.com:22/de-telekom-payments-settlementreport-v1"));
        assert_eq!(rec.service_external_url.as_deref(), Some("sftp://files.poc.example.com:2222/de-telekom-payments-settlementreport-v1"));
        assert_eq!(FileSubscription::created_at(&rec), Some(Timestamp::parse_rfc3339("2026-06-09T06:15:00Z").unwrap()));
    }

    #[test]
    fn service_urls_and_status_of_the_other_subscriptions() {
        let notifier = translate(&subscription("de-telekom-logistics-manifest-v1--parcel-notifier")).unwrap();
        assert_eq!(notifier.service_url.as_deref(), Some("sftp://sftp.aws-eu1.poc.example.com:22/de-telekom-logistics-manifest-v1"));
        assert_eq!(notifier.service_external_url, None);

        let core = translate(&subscription("de-telekom-payments-settlementreport-v1--ledger-core")).unwrap();
        assert_eq!(
            (core.status.phase, core.status.message.as_str()),
            (StatusPhase::Error, "SFTP user provisioning failed: public key rejected")
        );
        assert_eq!((core.service_url.as_deref(), core.service_external_url.as_deref()), (None, None));

        let knowledge = translate(&subscription("de-telekom-payments-settlementreport-v1--knowledge-base")).unwrap();
        assert_eq!(knowledge.status.phase, StatusPhase::Pending);
        assert_eq!(knowledge.service_url, None);

        let chargebacks = translate(&subscription("de-telekom-payments-chargebacks-v1--fleet-planner")).unwrap();
        assert_eq!(chargebacks.status.phase, StatusPhase::Pending);
        assert_eq!(
            (chargebacks.application.as_str(), chargebacks.file_type.as_str()),
            ("fleet-planner", "de-telekom-payments-chargebacks-v1")
        );
        assert_eq!(chargebacks.service_url, None);
    }

    #[test]
    fn keys_requires_links_scopes_refs_and_dependents() {
        let rec = translate(&subscription("de-telekom-payments-settlementreport-v1--knowledge-base")).unwrap();
        let (ns, name) = ("poc--assist--knowledge", "de-telekom-payments-settlementreport-v1--knowledge-base");
        assert_eq!(FileSubscription::key(&rec), Key::new(&["poc", ns, name]));
        let owner = Key::new(&["poc", "assist--knowledge", "knowledge-base"]);
        assert_eq!(FileSubscription::requires(&rec), vec![Parent { kind: KindId::Application, key: owner.clone() }]);
        let by_type = Key::new(&["poc", SETTLEMENT]);
        assert_eq!(FileSubscription::links(&rec), vec![Link::First { index: index::FILE_EXPOSURE_ACTIVE_BY_TYPE, key: by_type.clone() }]);
        assert_eq!(FileSubscription::scopes(&rec, &[None]), vec![Scope::Team { env: "poc".into(), team: "assist--knowledge".into() }]);
        let unlinked = vec![(index::FILE_SUBSCRIPTION_BY_TYPE, by_type), (index::FILE_SUBSCRIPTION_BY_OWNER, owner)];
        assert_eq!(FileSubscription::index_entries(&rec, &[None]), unlinked);
        assert_eq!(FileSubscription::index_entries(&rec, &[]), unlinked);
        let target = natural::file_exposure("poc", "payments--ledger", "ledger-reports", SETTLEMENT);
        let mut linked = unlinked.clone();
        linked.push((index::FILE_SUBSCRIPTION_BY_TARGET, target.clone()));
        assert_eq!(FileSubscription::index_entries(&rec, &[Some(target)]), linked);
        let sub = Key::new(&["FileSubscription", "poc", ns, name]);
        assert_eq!(sub, natural::subscription_ref(KindId::FileSubscription, "poc", ns, name));
        assert_eq!(
            FileSubscription::dependents(&rec, &[None]),
            vec![(index::APPROVAL_BY_SUBSCRIPTION, sub.clone()), (index::APPROVAL_REQUEST_BY_SUBSCRIPTION, sub)]
        );
    }

    /// The world's file approvals require this subscription, link through its link 0 and are
    /// indexed under the lookup key its `dependents` name.
    #[test]
    fn file_approvals_point_at_the_subscription() {
        use crate::kinds::approval::Approval;
        use crate::kinds::approval_request::ApprovalRequest;
        let rec = translate(&subscription("de-telekom-payments-settlementreport-v1--checkout-batch")).unwrap();
        let key = FileSubscription::key(&rec);
        let deps = FileSubscription::dependents(&rec, &[]);

        let approval: crds::Approval =
            world_object("Approval", "poc", "filesubscription--de-telekom-payments-settlementreport-v1--checkout-batch");
        let a = Approval::translate(&approval, &ctx()).unwrap();
        assert_eq!(Approval::requires(&a), vec![Parent { kind: KindId::FileSubscription, key: key.clone() }]);
        assert_eq!(Approval::links(&a), vec![Link::Via { kind: KindId::FileSubscription, key: key.clone(), slot: 0 }]);
        assert_eq!(Approval::index_entries(&a, &[]), vec![deps[0].clone()]);
        // Visible to the provider team once linked to the ledger exposure.
        let target = natural::file_exposure("poc", "payments--ledger", "ledger-reports", SETTLEMENT);
        assert_eq!(
            Approval::scopes(&a, &[Some(target)]),
            vec![
                Scope::Team { env: "poc".into(), team: "payments--checkout".into() },
                Scope::Team { env: "poc".into(), team: "payments--ledger".into() }
            ]
        );

        let request: crds::ApprovalRequest =
            world_object("ApprovalRequest", "poc", "de-telekom-payments-settlementreport-v1--checkout-batch--7b986fc5c");
        let r = ApprovalRequest::translate(&request, &ctx()).unwrap();
        assert_eq!(ApprovalRequest::requires(&r), vec![Parent { kind: KindId::FileSubscription, key }]);
        assert_eq!(ApprovalRequest::index_entries(&r, &[]), vec![deps[1].clone()]);

        // With the file manager switched off, file approvals are not projected.
        let mut off = ctx();
        off.features.file_manager = false;
        assert!(matches!(Approval::translate(&approval, &off), Err(Skip::NotProjected(_))));
    }

    #[test]
    fn owner_falls_back_to_the_requestor_without_label() {
        let mut cr = subscription("de-telekom-payments-chargebacks-v1--fleet-planner");
        cr.metadata.labels.as_mut().unwrap().remove(common::APPLICATION_LABEL);
        assert_eq!(translate(&cr).unwrap().application, "fleet-planner");
        cr.spec.requestor.name.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.requestor.name")));
    }

    #[test]
    fn bad_input_is_skipped_with_its_reason() {
        let base = subscription("de-telekom-payments-settlementreport-v1--checkout-batch");
        let mut cr = base.clone();
        cr.spec.file_type.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.fileType")));
        let mut cr = base.clone();
        cr.spec.zone.name.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.zone.name")));
        let mut cr = base.clone();
        cr.metadata.name = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.name")));
        let mut cr = base;
        cr.status = None;
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.status.phase, rec.service_url, rec.service_external_url), (StatusPhase::Unknown, None, None));
    }
}
