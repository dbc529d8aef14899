//! FileExposure (a kind the Go projector does not project; feature `file_manager`): an Application providing a file type over SFTP. Natural key
//! `(environment, team, application, fileType)`; owned by (and visible to) the team of its
//! namespace; the *active* exposure of a file type is indexed so that FileSubscriptions can link
//! to it, exactly like ApiExposure by base path.
//!
//! Also home of the value type FileSubscription shares ([`Sftp`]) and of the owner rule of both
//! file kinds ([`owner_application`]).

use crate::common::{self, ApprovalStrategy, Meta, Status, Visibility};
use crate::graphql_enum::graphql_enum;
use crate::keys::{index, natural};
use crate::kind::{Context, Skip};
use crate::kinds::api_exposure::ApprovalConfig;
use crate::kinds::subscription_wiring::{exposure_kind, ExposureWiring};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The FileExposure kind.
pub struct FileExposure;

/// A projected FileExposure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileExposureRecord {
    /// Common metadata; the owner team is `meta.team()` (from `metadata.namespace`).
    pub meta: Meta,
    /// From `status.conditions`; `UNKNOWN` when the CR has no status.
    pub status: Status,
    /// The owner Application's name: label `cp.ei.telekom.de/application`, else
    /// `spec.provider.name` (see [`owner_application`]).
    pub application: String,
    /// `spec.fileType` (required, non-empty).
    pub file_type: String,
    /// `spec.variant`, matched case-insensitively.
    pub variant: FileVariant,
    /// `spec.visibility`, matched case-insensitively.
    pub visibility: Visibility,
    /// `status.active`; `false` when the CR has no status.
    pub active: bool,
    /// `spec.zone.name` (required, non-empty): the zone the file type is provided in.
    pub zone: String,
    /// `spec.approval`; when absent the CRD default (`Simple`, no trusted teams).
    pub approval_config: ApprovalConfig,
    /// `spec.sftp`; `None` when absent.
    pub sftp: Option<Sftp>,
    /// `status.serviceURL`: the internal SFTP endpoint; `None` when absent or empty.
    pub service_url: Option<String>,
    /// `status.serviceExternalURL`: the external SFTP endpoint; `None` when absent or empty.
    pub service_external_url: Option<String>,
}

graphql_enum! {
    /// `spec.variant` of a FileExposure (GraphQL `FileExposureVariant`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum FileVariant {
        /// `sftp`.
        Sftp = "SFTP",
    }
}

impl FileVariant {
    /// Parses the CR value case-insensitively.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse(field: &'static str, value: &str) -> Result<FileVariant, Skip> {
        common::parse_enum(field, value, "sftp", &[("sftp", FileVariant::Sftp)])
    }
}

/// `spec.sftp` of a FileExposure or FileSubscription (GraphQL `FileSFTP`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sftp {
    /// `spec.sftp.publicKeys[].key`, in CR order; `[]` when none.
    pub public_keys: Vec<String>,
}

impl Sftp {
    /// Maps the CR type.
    pub fn from_cr(s: &crds::file_exposure::Sftp) -> Sftp {
        Sftp { public_keys: s.public_keys.iter().map(|k| k.key.clone()).collect() }
    }
}

/// The owner Application of a file object: the label `cp.ei.telekom.de/application` when present
/// and non-empty, else `name` of the spec's application reference (`spec.provider` /
/// `spec.requestor`).
///
/// # Errors
/// [`Skip::Missing`] naming `spec_field` when both are absent or empty.
pub fn owner_application(meta: &ObjectMeta, spec_field: &'static str, spec_name: &str) -> Result<String, Skip> {
    match common::label(meta, common::APPLICATION_LABEL) {
        "" => Ok(common::required(spec_field, spec_name)?.to_string()),
        label => Ok(label.to_string()),
    }
}

/// `Some(v)` unless `v` is absent or empty.
pub(crate) fn non_empty(v: Option<&String>) -> Option<String> {
    v.filter(|v| !v.is_empty()).cloned()
}

/// Scopes and indexes of the FileExposure family (see [`ExposureWiring`]).
const WIRING: ExposureWiring =
    ExposureWiring { active: index::FILE_EXPOSURE_ACTIVE_BY_TYPE, subscriptions_by_key: index::FILE_SUBSCRIPTION_BY_TYPE };

/// # Errors
/// [`Skip::Missing`] for empty metadata, owner application, `spec.fileType` or
/// `spec.zone.name`; [`Skip::InvalidEnum`] for a variant, visibility or approval strategy
/// outside its enum.
fn translate(cr: &crds::FileExposure, _ctx: &Context) -> Result<FileExposureRecord, Skip> {
    let meta = Meta::from_object(&cr.metadata)?;
    let spec = &cr.spec;
    let application = owner_application(&cr.metadata, "spec.provider.name", &spec.provider.name)?;
    let file_type = common::required("spec.fileType", &spec.file_type)?.to_string();
    let zone = common::required("spec.zone.name", &spec.zone.name)?.to_string();
    let variant = FileVariant::parse("spec.variant", &spec.variant)?;
    let visibility = Visibility::parse("spec.visibility", &spec.visibility)?;
    let approval_config = match &spec.approval {
        None => ApprovalConfig { strategy: ApprovalStrategy::Simple, trusted_teams: Vec::new() },
        Some(a) => ApprovalConfig {
            strategy: ApprovalStrategy::parse("spec.approval.strategy", &a.strategy)?,
            trusted_teams: a.trusted_teams.clone(),
        },
    };
    let status = cr.status.as_ref();
    Ok(FileExposureRecord {
        meta,
        status: common::status_from_conditions(status.map(|s| s.conditions.as_slice()).unwrap_or_default()),
        application,
        file_type,
        variant,
        visibility,
        active: status.is_some_and(|s| s.active),
        zone,
        approval_config,
        sftp: spec.sftp.as_ref().map(Sftp::from_cr),
        service_url: non_empty(status.and_then(|s| s.service_url.as_ref())),
        service_external_url: non_empty(status.and_then(|s| s.service_external_url.as_ref())),
    })
}

exposure_kind!(FileExposure, FileExposureRecord {
    const VERSION: u32 = 1;
    wiring: WIRING,
    natural_key: natural::file_exposure,
    target: file_type,
    translate: translate,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::keys::Key;
    use crate::kind::{Kind, KindId, Parent, Scope};
    use crate::kinds::testing::{ctx, world_object};
    use crate::time::Timestamp;

    fn exposure(name: &str) -> crds::FileExposure {
        world_object("FileExposure", "poc", name)
    }

    fn translate(cr: &crds::FileExposure) -> Result<FileExposureRecord, Skip> {
        FileExposure::translate(cr, &ctx())
    }

    const SETTLEMENT: &str = "de-telekom-payments-settlementreport-v1";

    #[test]
    fn ledger_reports_with_both_service_urls() {
        let rec = translate(&exposure("de-telekom-payments-settlementreport-v1--ledger-reports")).unwrap();
        assert_eq!(rec.meta.namespace, "poc--payments--ledger");
        assert_eq!(rec.meta.team(), "payments--ledger");
        assert_eq!(rec.application, "ledger-reports");
        assert_eq!(rec.file_type, SETTLEMENT);
        assert_eq!(rec.variant, FileVariant::Sftp);
        assert_eq!(rec.variant.as_str(), "SFTP");
        assert_eq!(rec.visibility, Visibility::Enterprise);
        assert!(rec.active);
        assert_eq!(rec.zone, "caas-cetus");
        assert_eq!(rec.approval_config, ApprovalConfig { strategy: ApprovalStrategy::Simple, trusted_teams: vec![] });
        assert_eq!((rec.status.phase, rec.status.message.as_str()), (StatusPhase::Ready, "FileExposure is ready"));
        let keys = &rec.sftp.as_ref().unwrap().public_keys;
        assert_eq!(keys.len(), 1);
        assert!(keys[0].starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIINv0Bqk6u7QcSIVfg+2Ek4fDW9nN6Q4oBxJmmOrUdUT"));
        assert_eq!(rec.service_url.as_deref(), Some("sftp://sftp.caas-cetus.poc.example.com:22/de-telekom-payments-settlementreport-v1"));
        assert_eq!(rec.service_external_url.as_deref(), Some("sftp://files.poc.example.com:2222/de-telekom-payments-settlementreport-v1"));
        assert_eq!(FileExposure::created_at(&rec), Some(Timestamp::parse_rfc3339("2026-06-05T21:01:00Z").unwrap()));
    }

    #[test]
    fn fleet_planner_internal_url_only_world_auto() {
        let rec = translate(&exposure("de-telekom-logistics-manifest-v1--fleet-planner")).unwrap();
        assert_eq!((rec.application.as_str(), rec.meta.team()), ("fleet-planner", "logistics--fleet"));
        assert_eq!(rec.visibility, Visibility::World);
        assert_eq!(rec.approval_config.strategy, ApprovalStrategy::Auto);
        assert_eq!(rec.sftp.unwrap().public_keys.len(), 2);
        assert_eq!(rec.service_url.as_deref(), Some("sftp://sftp.aws-eu1.poc.example.com:22/de-telekom-logistics-manifest-v1"));
        assert_eq!(rec.service_external_url, None);
        assert_eq!(rec.zone, "aws-eu1");
    }

    #[test]
    fn keys_requires_scopes_refs_and_dependents() {
        let rec = translate(&exposure("de-telekom-payments-settlementreport-v1--ledger-reports")).unwrap();
        assert_eq!(FileExposure::key(&rec), Key::new(&["poc", "payments--ledger", "ledger-reports", SETTLEMENT]));
        assert_eq!(
            FileExposure::requires(&rec),
            vec![Parent { kind: KindId::Application, key: Key::new(&["poc", "payments--ledger", "ledger-reports"]) }]
        );
        assert!(FileExposure::links(&rec).is_empty());
        assert_eq!(FileExposure::scopes(&rec, &[]), vec![Scope::Team { env: "poc".into(), team: "payments--ledger".into() }]);
        let by_type = Key::new(&["poc", SETTLEMENT]);
        assert_eq!(FileExposure::index_entries(&rec, &[]), vec![(index::FILE_EXPOSURE_ACTIVE_BY_TYPE, by_type.clone())]);
        assert_eq!(FileExposure::dependents(&rec, &[]), vec![(index::FILE_SUBSCRIPTION_BY_TYPE, by_type)]);
    }

    #[test]
    fn inactive_duplicate_is_not_indexed_as_active_but_still_relinks_subscriptions() {
        let rec = translate(&exposure("de-telekom-logistics-manifest-v1--parcel-tracker")).unwrap();
        assert!(!rec.active);
        assert_eq!(rec.status.phase, StatusPhase::Pending);
        assert_eq!((rec.service_url.as_deref(), rec.service_external_url.as_deref()), (None, None));
        assert!(FileExposure::index_entries(&rec, &[]).is_empty());
        assert_eq!(
            FileExposure::dependents(&rec, &[]),
            vec![(index::FILE_SUBSCRIPTION_BY_TYPE, Key::new(&["poc", "de-telekom-logistics-manifest-v1"]))]
        );
    }

    #[test]
    fn no_status_is_unknown_inactive_and_without_urls() {
        let mut cr = exposure("de-telekom-payments-settlementreport-v1--ledger-reports");
        cr.status = None;
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.status.phase, rec.active), (StatusPhase::Unknown, false));
        assert_eq!((rec.service_url.as_deref(), rec.service_external_url.as_deref()), (None, None));
        assert!(FileExposure::index_entries(&rec, &[]).is_empty());
    }

    #[test]
    fn emptied_urls_clear_the_stored_value() {
        let mut cr = exposure("de-telekom-payments-settlementreport-v1--ledger-reports");
        let status = cr.status.as_mut().unwrap();
        status.service_url = Some(String::new());
        status.service_external_url = Some(String::new());
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.service_url, rec.service_external_url), (None, None));
    }

    #[test]
    fn owner_falls_back_to_the_provider_without_label() {
        let mut cr = exposure("de-telekom-payments-settlementreport-v1--ledger-reports");
        cr.metadata.labels.as_mut().unwrap().remove(common::APPLICATION_LABEL);
        assert_eq!(translate(&cr).unwrap().application, "ledger-reports");
        cr.metadata.labels.as_mut().unwrap().insert(common::APPLICATION_LABEL.into(), String::new());
        cr.spec.provider.name = "ledger-core".into();
        assert_eq!(translate(&cr).unwrap().application, "ledger-core");
        cr.spec.provider.name.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.provider.name")));
    }

    #[test]
    fn absent_approval_defaults_to_simple() {
        let mut cr = exposure("de-telekom-logistics-manifest-v1--fleet-planner");
        cr.spec.approval = None;
        assert_eq!(translate(&cr).unwrap().approval_config, ApprovalConfig { strategy: ApprovalStrategy::Simple, trusted_teams: vec![] });
    }

    #[test]
    fn bad_input_is_skipped_with_its_reason() {
        let base = exposure("de-telekom-logistics-manifest-v1--fleet-planner");

        let mut cr = base.clone();
        cr.spec.file_type.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.fileType")));

        let mut cr = base.clone();
        cr.spec.zone.name.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.zone.name")));

        let mut cr = base.clone();
        cr.metadata.namespace = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.namespace")));

        let mut cr = base.clone();
        cr.spec.variant = "ftps".into();
        assert_eq!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.variant", value: "ftps".into(), expected: "sftp" }));

        let mut cr = base.clone();
        cr.spec.visibility = "Galaxy".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.visibility", .. })));

        let mut cr = base.clone();
        cr.spec.approval.as_mut().unwrap().strategy = "Manual".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.approval.strategy", .. })));

        // Enums are matched case-insensitively.
        let mut cr = base;
        cr.spec.variant = "SFTP".into();
        cr.spec.visibility = "zone".into();
        cr.spec.approval.as_mut().unwrap().strategy = "foureyes".into();
        let rec = translate(&cr).unwrap();
        assert_eq!(
            (rec.variant, rec.visibility, rec.approval_config.strategy),
            (FileVariant::Sftp, Visibility::Zone, ApprovalStrategy::FourEyes)
        );
    }
}
