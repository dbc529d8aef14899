//! Every PermissionSet, FileExposure and FileSubscription of the example world
//! (`examples/world/`) deserializes into its typed custom resource, with the values the
//! manifests carry (counts per `examples/world/FACTS.md`).

mod support;

use crds::{FileExposure, FileSubscription, PermissionSet};
use kube::ResourceExt;
use support::world_objects;

/// The object named `namespace/name` in `objects`.
fn find<'a, T: ResourceExt>(objects: &'a [T], namespace: &str, name: &str) -> &'a T {
    objects
        .iter()
        .find(|o| o.namespace().as_deref() == Some(namespace) && o.name_any() == name)
        .unwrap_or_else(|| panic!("no object {namespace}/{name}"))
}

const APPLICATION_LABEL: &str = "cp.ei.telekom.de/application";

#[test]
fn permission_sets() {
    let all: Vec<PermissionSet> = world_objects("PermissionSet");
    // FACTS.md: 3 in poc, 1 in qa.
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|p| !p.spec.permissions.is_empty() && p.labels().contains_key(APPLICATION_LABEL)));

    let checkout = find(&all, "poc--payments--checkout", "checkout-api");
    assert_eq!(checkout.labels()[APPLICATION_LABEL], "checkout-api");
    let perms: Vec<_> = checkout.spec.permissions.iter().map(|p| (p.role.as_str(), p.resource.as_str(), p.actions.join(","))).collect();
    assert_eq!(perms, vec![("order-admin", "orders", "read,write,refund".to_string()), ("order-viewer", "orders", "read".to_string())]);
    let status = checkout.status.as_ref().unwrap();
    assert_eq!((status.conditions[0].type_.as_str(), status.conditions[0].status.as_str()), ("Ready", "True"));
    assert_eq!(status.permission_set.as_ref().unwrap().namespace, "poc--aws-eu1");

    let ledger = find(&all, "poc--payments--ledger", "ledger-core");
    assert_eq!(ledger.spec.permissions[0].resource, "ledger/entries");
    assert_eq!(ledger.spec.permissions[0].actions, vec!["read", "book"]);
    let status = ledger.status.as_ref().unwrap();
    assert_eq!((status.conditions[0].status.as_str(), status.conditions[0].reason.as_str()), ("False", "ProvisioningFailed"));
    assert_eq!(status.permission_set, None);

    let qa = find(&all, "qa--payments--checkout", "checkout-api");
    assert_eq!(qa.spec.permissions[0].actions, vec!["read", "write"]);
    assert_eq!(qa.labels()["cp.ei.telekom.de/environment"], "qa");

    let copilot = find(&all, "poc--assist--copilot", "copilot-gateway");
    assert_eq!(copilot.spec.permissions[0].actions, vec!["read", "annotate"]);
}

#[test]
fn file_exposures() {
    let all: Vec<FileExposure> = world_objects("FileExposure");
    // FACTS.md: 3 in poc, none in qa.
    assert_eq!(all.len(), 3);
    assert!(all.iter().all(|e| e.spec.variant == "sftp" && e.status.is_some()));

    let ledger = find(&all, "poc--payments--ledger", "de-telekom-payments-settlementreport-v1--ledger-reports");
    assert_eq!(ledger.spec.file_type, "de-telekom-payments-settlementreport-v1");
    assert_eq!(ledger.spec.visibility, "Enterprise");
    assert_eq!(ledger.spec.approval.as_ref().unwrap().strategy, "Simple");
    assert!(ledger.spec.approval.as_ref().unwrap().trusted_teams.is_empty());
    assert_eq!((ledger.spec.zone.name.as_str(), ledger.spec.zone.namespace.as_str()), ("caas-cetus", "poc"));
    assert_eq!(
        (ledger.spec.provider.kind.as_str(), ledger.spec.provider.name.as_str(), ledger.spec.provider.namespace.as_str()),
        ("Application", "ledger-reports", "poc--payments--ledger")
    );
    assert_eq!(ledger.labels()[APPLICATION_LABEL], "ledger-reports");
    let keys = &ledger.spec.sftp.as_ref().unwrap().public_keys;
    assert_eq!(keys.len(), 1);
    assert!(keys[0].key.starts_with("ssh-ed25519 ") && keys[0].key.ends_with(" ledger-reports@poc"));
    let status = ledger.status.as_ref().unwrap();
    assert!(status.active);
    assert_eq!(status.service_url.as_deref(), Some("sftp://sftp.caas-cetus.poc.example.com:22/de-telekom-payments-settlementreport-v1"));
    assert_eq!(status.service_external_url.as_deref(), Some("sftp://files.poc.example.com:2222/de-telekom-payments-settlementreport-v1"));
    assert_eq!(status.file_type_ref.as_ref().unwrap().namespace, "poc--payments--ledger");
    assert_eq!(status.conditions[0].reason, "Provisioned");

    // Internal service URL only, two keys, World, Auto.
    let fleet = find(&all, "poc--logistics--fleet", "de-telekom-logistics-manifest-v1--fleet-planner");
    assert_eq!((fleet.spec.visibility.as_str(), fleet.spec.approval.as_ref().unwrap().strategy.as_str()), ("World", "Auto"));
    assert_eq!(fleet.spec.sftp.as_ref().unwrap().public_keys.len(), 2);
    let status = fleet.status.as_ref().unwrap();
    assert_eq!(status.service_url.as_deref(), Some("sftp://sftp.aws-eu1.poc.example.com:22/de-telekom-logistics-manifest-v1"));
    assert_eq!(status.service_external_url, None);

    // The inactive duplicate: no URLs, no file type reference.
    let parcel = find(&all, "poc--logistics--parcel-tracking", "de-telekom-logistics-manifest-v1--parcel-tracker");
    assert_eq!(parcel.spec.file_type, fleet.spec.file_type);
    let status = parcel.status.as_ref().unwrap();
    assert!(!status.active);
    assert_eq!((status.service_url.as_deref(), status.service_external_url.as_deref()), (None, None));
    assert_eq!(status.file_type_ref, None);
    assert_eq!(status.conditions[0].reason, "PreconditionNotMet");
}

#[test]
fn file_subscriptions() {
    let all: Vec<FileSubscription> = world_objects("FileSubscription");
    // FACTS.md: 5 in poc, none in qa.
    assert_eq!(all.len(), 5);
    assert!(all.iter().all(|s| s.spec.requestor.name == s.labels()[APPLICATION_LABEL]));

    let batch = find(&all, "poc--payments--checkout", "de-telekom-payments-settlementreport-v1--checkout-batch");
    assert_eq!(batch.spec.file_type, "de-telekom-payments-settlementreport-v1");
    assert_eq!(batch.spec.zone.name, "caas-cetus");
    assert_eq!(
        (batch.spec.requestor.name.as_str(), batch.spec.requestor.namespace.as_str()),
        ("checkout-batch", "poc--payments--checkout")
    );
    assert!(batch.spec.sftp.as_ref().unwrap().public_keys[0].key.ends_with(" checkout-batch@poc"));
    let status = batch.status.as_ref().unwrap();
    assert_eq!(status.service_url.as_deref(), Some("sftp://sftp.caas-cetus.poc.example.com:22/de-telekom-payments-settlementreport-v1"));
    assert_eq!(status.service_external_url.as_deref(), Some("sftp://files.poc.example.com:2222/de-telekom-payments-settlementreport-v1"));
    assert_eq!(status.approval.as_ref().unwrap().name, "filesubscription--de-telekom-payments-settlementreport-v1--checkout-batch");
    assert_eq!(status.approval_request.as_ref().unwrap().name, "de-telekom-payments-settlementreport-v1--checkout-batch--7b986fc5c");
    assert_eq!(status.file_type_ref.as_ref().unwrap().namespace, "poc--payments--ledger");

    let notifier = find(&all, "poc--logistics--parcel-tracking", "de-telekom-logistics-manifest-v1--parcel-notifier");
    let status = notifier.status.as_ref().unwrap();
    assert_eq!(status.service_url.as_deref(), Some("sftp://sftp.aws-eu1.poc.example.com:22/de-telekom-logistics-manifest-v1"));
    assert_eq!(status.service_external_url, None);

    // Failed provisioning, pending approval and no target: no service URLs.
    let core = find(&all, "poc--payments--ledger", "de-telekom-payments-settlementreport-v1--ledger-core");
    let status = core.status.as_ref().unwrap();
    assert_eq!(
        (status.conditions[0].reason.as_str(), status.conditions[0].message.as_str()),
        ("Failed", "SFTP user provisioning failed: public key rejected")
    );
    assert_eq!((status.service_url.as_deref(), status.service_external_url.as_deref()), (None, None));

    let knowledge = find(&all, "poc--assist--knowledge", "de-telekom-payments-settlementreport-v1--knowledge-base");
    let status = knowledge.status.as_ref().unwrap();
    assert_eq!(status.approval, None);
    assert_eq!(status.approval_request.as_ref().unwrap().namespace, "poc--assist--knowledge");
    assert_eq!(status.conditions[0].reason, "ApprovalPending");
    assert_eq!(status.service_url, None);

    let chargebacks = find(&all, "poc--logistics--fleet", "de-telekom-payments-chargebacks-v1--fleet-planner");
    assert_eq!(chargebacks.spec.file_type, "de-telekom-payments-chargebacks-v1");
    let status = chargebacks.status.as_ref().unwrap();
    assert_eq!((status.approval.as_ref(), status.approval_request.as_ref(), status.file_type_ref.as_ref()), (None, None, None));
    assert_eq!(status.conditions[0].message, "No active FileExposure found for FileType de-telekom-payments-chargebacks-v1");
}

/// The repository samples of the file kinds lack required fields: deserialization fails naming
/// them (the projector reports such documents and skips them). The PermissionSet sample is valid.
#[test]
fn samples_missing_required_fields_are_rejected() {
    let samples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/samples");
    let doc = |kind: &str| -> serde_json::Value {
        let dir = samples.join(kind);
        let path = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
        serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let err = serde_json::from_value::<FileExposure>(doc("FileExposure")).unwrap_err().to_string();
    assert!(err.contains("provider"), "{err}");
    let err = serde_json::from_value::<FileSubscription>(doc("FileSubscription")).unwrap_err().to_string();
    assert!(err.contains("requestor"), "{err}");
    let set: PermissionSet = serde_json::from_value(doc("PermissionSet")).unwrap();
    assert_eq!(set.spec.permissions.len(), 2);
    assert_eq!(set.metadata.namespace, None);
    assert!(!set.labels().contains_key(APPLICATION_LABEL));
}
