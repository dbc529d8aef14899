//! PermissionSet (feature `permission`): the permissions of one
//! Application. Natural key `(environment, team, application)` — the owner Application's key
//! tuple, one set per application; owned by (and visible to) the team of its namespace. The owner
//! application is named by the label `cp.ei.telekom.de/application` (the CR name need not equal
//! it); without that label the object is skipped.

use crate::common::{self, Meta, Status};
use crate::keys::{natural, Key};
use crate::kind::{Context, Kind, KindId, Parent, Scope, Skip};
use crate::time::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The PermissionSet kind.
pub struct PermissionSet;

/// A projected PermissionSet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionSetRecord {
    /// Common metadata; the owner team is `meta.team()` (from `metadata.namespace`).
    pub meta: Meta,
    /// From `status.conditions`; `UNKNOWN` when the CR has no status.
    pub status: Status,
    /// The owner Application's name: label `cp.ei.telekom.de/application` (required,
    /// non-empty).
    pub application: String,
    /// `spec.permissions[]`, in CR order; `[]` when none (GraphQL `permissions`).
    pub permissions: Vec<Permission>,
}

/// `spec.permissions[]` (GraphQL `Permission`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permission {
    /// `spec.permissions[].role`.
    pub role: String,
    /// `spec.permissions[].resource`.
    pub resource: String,
    /// `spec.permissions[].actions[]`, in CR order.
    pub actions: Vec<String>,
}

impl Kind for PermissionSet {
    fn status(rec: &Self::Record) -> Option<&crate::common::Status> {
        Some(&rec.status)
    }

    const ID: KindId = KindId::PermissionSet;
    const VERSION: u32 = 1;
    type Cr = crds::PermissionSet;
    type Record = PermissionSetRecord;

    fn meta(cr: &crds::PermissionSet) -> &ObjectMeta {
        &cr.metadata
    }

    /// # Errors
    /// [`Skip::Missing`] for an absent or empty label `cp.ei.telekom.de/application` (the Go
    /// projector's skip rule) or metadata.
    fn translate(cr: &crds::PermissionSet, _ctx: &Context) -> Result<PermissionSetRecord, Skip> {
        let application =
            common::required("metadata.labels[cp.ei.telekom.de/application]", common::label(&cr.metadata, common::APPLICATION_LABEL))?
                .to_string();
        let meta = Meta::from_object(&cr.metadata)?;
        let conditions = cr.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
        Ok(PermissionSetRecord {
            meta,
            status: common::status_from_conditions(conditions),
            application,
            permissions: cr
                .spec
                .permissions
                .iter()
                .map(|p| Permission { role: p.role.clone(), resource: p.resource.clone(), actions: p.actions.clone() })
                .collect(),
        })
    }

    fn key(rec: &PermissionSetRecord) -> Key {
        natural::permission_set(&rec.meta.environment, rec.meta.team(), &rec.application)
    }

    fn requires(rec: &PermissionSetRecord) -> Vec<Parent> {
        vec![Parent { kind: KindId::Application, key: natural::application(&rec.meta.environment, rec.meta.team(), &rec.application) }]
    }

    fn scopes(rec: &PermissionSetRecord, _links: &[Option<Key>]) -> Vec<Scope> {
        vec![Scope::Team { env: rec.meta.environment.clone(), team: rec.meta.team().to_string() }]
    }

    fn created_at(rec: &PermissionSetRecord) -> Option<Timestamp> {
        rec.meta.creation_timestamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::kinds::testing::{ctx, world_object};

    fn permission_set(env: &str, name: &str) -> crds::PermissionSet {
        world_object("PermissionSet", env, name)
    }

    fn translate(cr: &crds::PermissionSet) -> Result<PermissionSetRecord, Skip> {
        PermissionSet::translate(cr, &ctx())
    }

    #[test]
    fn checkout_api_permissions_in_order() {
        let rec = translate(&permission_set("poc", "poc--payments--checkout/checkout-api")).unwrap();
        assert_eq!(rec.meta.namespace, "poc--payments--checkout");
        assert_eq!(rec.meta.team(), "payments--checkout");
        assert_eq!(rec.application, "checkout-api");
        assert_eq!(rec.status.phase, StatusPhase::Ready);
        assert_eq!(rec.status.message, "External PermissionSet created successfully");
        assert_eq!(
            rec.permissions,
            vec![
                Permission {
                    role: "order-admin".into(),
                    resource: "orders".into(),
                    actions: vec!["read".into(), "write".into(), "refund".into()]
                },
                Permission { role: "order-viewer".into(), resource: "orders".into(), actions: vec!["read".into()] },
            ]
        );
        assert_eq!(PermissionSet::created_at(&rec), Some(Timestamp::parse_rfc3339("2026-03-16T15:25:00Z").unwrap()));
    }

    #[test]
    fn key_is_the_owner_applications_tuple() {
        let rec = translate(&permission_set("poc", "poc--payments--checkout/checkout-api")).unwrap();
        let app = Key::new(&["poc", "payments--checkout", "checkout-api"]);
        assert_eq!(PermissionSet::key(&rec), app);
        assert_eq!(PermissionSet::key(&rec), natural::application("poc", "payments--checkout", "checkout-api"));
        assert_eq!(PermissionSet::requires(&rec), vec![Parent { kind: KindId::Application, key: app }]);
        assert!(PermissionSet::links(&rec).is_empty());
        assert!(PermissionSet::index_entries(&rec, &[]).is_empty());
        assert!(PermissionSet::dependents(&rec, &[]).is_empty());
        assert_eq!(PermissionSet::scopes(&rec, &[]), vec![Scope::Team { env: "poc".into(), team: "payments--checkout".into() }]);
    }

    #[test]
    fn failed_provisioning_is_pending() {
        let rec = translate(&permission_set("poc", "ledger-core")).unwrap();
        assert_eq!(rec.status.phase, StatusPhase::Pending);
        assert_eq!(rec.status.message, "Failed to create external PermissionSet");
        assert_eq!(rec.permissions[0].actions, vec!["read", "book"]);
    }

    #[test]
    fn qa_set_keys_stay_in_qa() {
        let rec = translate(&permission_set("qa", "checkout-api")).unwrap();
        assert_eq!(PermissionSet::key(&rec), Key::new(&["qa", "payments--checkout", "checkout-api"]));
        assert_eq!(rec.permissions.len(), 1);
    }

    #[test]
    fn owner_comes_from_the_label_not_the_name() {
        let mut cr = permission_set("poc", "copilot-gateway");
        cr.metadata.name = Some("gateway-permissions".into());
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.application.as_str(), rec.meta.name.as_str()), ("copilot-gateway", "gateway-permissions"));
        assert_eq!(PermissionSet::key(&rec), Key::new(&["poc", "assist--copilot", "copilot-gateway"]));
    }

    #[test]
    fn missing_or_empty_application_label_is_skipped() {
        let mut cr = permission_set("poc", "ledger-core");
        let missing = Skip::Missing("metadata.labels[cp.ei.telekom.de/application]");
        cr.metadata.labels.as_mut().unwrap().insert(common::APPLICATION_LABEL.into(), String::new());
        assert_eq!(translate(&cr), Err(missing.clone()));
        cr.metadata.labels.as_mut().unwrap().remove(common::APPLICATION_LABEL);
        assert_eq!(translate(&cr), Err(missing.clone()));
        assert!(missing.to_string().contains("cp.ei.telekom.de/application"));
        cr.metadata.labels = None;
        assert_eq!(translate(&cr), Err(missing));
    }

    /// The repository sample (`tests/fixtures/samples/PermissionSet/`) has neither the label nor a
    /// namespace: skipped for the label, the rule checked first.
    #[test]
    fn repository_sample_is_skipped() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/samples/PermissionSet");
        let path = std::fs::read_dir(dir).unwrap().next().unwrap().unwrap().path();
        let doc: serde_json::Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let cr: crds::PermissionSet = serde_json::from_value(doc).unwrap();
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.labels[cp.ei.telekom.de/application]")));
    }

    #[test]
    fn bad_input_is_skipped_with_its_reason() {
        let base = permission_set("poc", "copilot-gateway");
        let mut cr = base.clone();
        cr.metadata.namespace = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.namespace")));
        let mut cr = base.clone();
        cr.status = None;
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.status.phase, rec.status.message.as_str()), (StatusPhase::Unknown, ""));
        let mut cr = base;
        cr.spec.permissions.clear();
        assert_eq!(translate(&cr).unwrap().permissions, vec![]);
    }
}
