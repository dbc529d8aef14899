//! Api, the catalogue entry of an API. Natural key
//! `(environment, team, spec.basePath)` with team = [`team_from_namespace`]; requires the owner
//! Team; visible to every viewer of its environment (catalogue). Active entries (`status.active`)
//! are indexed under `(environment, basePath)` in [`index::API_ACTIVE_BY_BASE_PATH`].
//!
//! Quirk fixed (ARCHITECTURE.md "The Go projector's quirks, fixed"): an emptied `spec.category` or `spec.specification`
//! clears the stored value instead of keeping the old one.
//!
//! [`team_from_namespace`]: crate::common::team_from_namespace

use crate::common::{required, status_from_conditions, Meta, Status};
use crate::keys::{index, natural, Key};
use crate::kind::{Context, IndexName, Kind, KindId, Parent, Scope, Skip};
use crate::time::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The Api kind.
pub struct Api;

/// A projected Api.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiRecord {
    /// Common metadata; `meta.name` is the object name (`metadata.name`, derived from the base
    /// path, e.g. `payments-checkout-v1`).
    pub meta: Meta,
    /// The owner team: `metadata.namespace` after its first `--`
    /// ([`team_from_namespace`](crate::common::team_from_namespace)); must be non-empty.
    pub team: String,
    /// `spec.basePath`; must be non-empty.
    pub base_path: String,
    /// `spec.version`; must be non-empty.
    pub version: String,
    /// `spec.category`; `None` when empty.
    pub category: Option<String>,
    /// `spec.oauth2Scopes[]` in order; empty when absent.
    pub oauth2_scopes: Vec<String>,
    /// `spec.xVendor`.
    pub x_vendor: bool,
    /// `spec.specification`: file-manager file ID of the OpenAPI document; `None` when absent or
    /// empty.
    pub specification: Option<String>,
    /// `status.active`; `false` without status.
    pub active: bool,
    /// From `status.conditions`; `UNKNOWN` without status.
    pub status: Status,
}

impl Kind for Api {
    fn status(rec: &Self::Record) -> Option<&crate::common::Status> {
        Some(&rec.status)
    }

    const ID: KindId = KindId::Api;
    const VERSION: u32 = 1;
    type Cr = crds::Api;
    type Record = ApiRecord;

    fn meta(cr: &crds::Api) -> &ObjectMeta {
        &cr.metadata
    }

    fn translate(cr: &crds::Api, _ctx: &Context) -> Result<ApiRecord, Skip> {
        let meta = Meta::from_object(&cr.metadata)?;
        let team = required("metadata.namespace", meta.team())?.to_string();
        let spec = &cr.spec;
        let base_path = required("spec.basePath", &spec.base_path)?.to_string();
        let version = required("spec.version", &spec.version)?.to_string();
        let status = cr.status.as_ref();
        Ok(ApiRecord {
            team,
            base_path,
            version,
            category: Some(spec.category.clone()).filter(|c| !c.is_empty()),
            oauth2_scopes: spec.oauth2_scopes.clone(),
            x_vendor: spec.x_vendor,
            specification: spec.specification.clone().filter(|s| !s.is_empty()),
            active: status.is_some_and(|s| s.active),
            status: status_from_conditions(status.map(|s| s.conditions.as_slice()).unwrap_or_default()),
            meta,
        })
    }

    fn key(rec: &ApiRecord) -> Key {
        natural::api(&rec.meta.environment, &rec.team, &rec.base_path)
    }

    fn requires(rec: &ApiRecord) -> Vec<Parent> {
        vec![Parent { kind: KindId::Team, key: natural::team(&rec.meta.environment, &rec.team) }]
    }

    fn scopes(rec: &ApiRecord, _links: &[Option<Key>]) -> Vec<Scope> {
        vec![Scope::Env { env: rec.meta.environment.clone() }]
    }

    fn index_entries(rec: &ApiRecord, _links: &[Option<Key>]) -> Vec<(IndexName, Key)> {
        if rec.active {
            vec![(index::API_ACTIVE_BY_BASE_PATH, natural::in_env(&rec.meta.environment, &rec.base_path))]
        } else {
            Vec::new()
        }
    }

    fn created_at(rec: &ApiRecord) -> Option<Timestamp> {
        rec.meta.creation_timestamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::kinds::testing::{ctx, world_object};

    fn api(env: &str, name: &str) -> ApiRecord {
        Api::translate(&world_object::<crds::Api>("Api", env, name), &ctx()).unwrap()
    }

    #[test]
    fn key_requires_scopes_and_active_index() {
        let rec = api("poc", "poc--payments--checkout/payments-checkout-v1");
        assert_eq!(Api::key(&rec), natural::api("poc", "payments--checkout", "/payments/checkout/v1"));
        assert_eq!(Api::key(&rec).parts().unwrap(), vec!["poc", "payments--checkout", "/payments/checkout/v1"]);
        assert_eq!(Api::requires(&rec), vec![Parent { kind: KindId::Team, key: natural::team("poc", "payments--checkout") }]);
        assert_eq!(Api::scopes(&rec, &[]), vec![Scope::Env { env: "poc".into() }]);
        assert_eq!(Api::index_entries(&rec, &[]), vec![(index::API_ACTIVE_BY_BASE_PATH, natural::in_env("poc", "/payments/checkout/v1"))]);
        assert_eq!(Api::name(&rec), None);

        let shadow = api("poc", "poc--payments--ledger/payments-checkout-v1");
        assert_eq!(Api::key(&shadow), natural::api("poc", "payments--ledger", "/payments/checkout/v1"));
        assert!(Api::index_entries(&shadow, &[]).is_empty());

        let qa = api("qa", "payments-checkout-v1");
        assert_eq!(Api::key(&qa), natural::api("qa", "payments--checkout", "/payments/checkout/v1"));
        assert_eq!(qa.specification, None);
    }

    #[test]
    fn emptied_fields_clear_values() {
        let mut cr: crds::Api = world_object("Api", "poc", "logistics-fleet-positions-v1");
        cr.spec.category.clear();
        cr.spec.specification = Some(String::new());
        cr.status = None;
        let rec = Api::translate(&cr, &ctx()).unwrap();
        assert!(Api::index_entries(&rec, &[]).is_empty());
        assert_eq!(rec.status.phase, StatusPhase::Unknown);
        assert_eq!((rec.category, rec.specification, rec.active), (None, None, false));
    }

    #[test]
    fn bad_input_is_skipped() {
        let mut cr: crds::Api = world_object("Api", "poc", "logistics-fleet-positions-v1");
        cr.spec.base_path.clear();
        assert_eq!(Api::translate(&cr, &ctx()), Err(Skip::Missing("spec.basePath")));
        let mut cr: crds::Api = world_object("Api", "poc", "logistics-fleet-positions-v1");
        cr.spec.version.clear();
        assert_eq!(Api::translate(&cr, &ctx()), Err(Skip::Missing("spec.version")));
        let mut cr: crds::Api = world_object("Api", "poc", "logistics-fleet-positions-v1");
        cr.metadata.namespace = Some("poc--".into());
        assert_eq!(Api::translate(&cr, &ctx()), Err(Skip::Missing("metadata.namespace")));
    }
}
