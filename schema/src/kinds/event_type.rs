//! EventType, the catalogue entry of an event type. Natural key
//! `(environment, team, spec.type)` with team = [`team_from_namespace`]; requires the owner Team
//! (the Go projector requires it too, although its README says "no FK"); visible to every viewer of its environment
//! (catalogue). Active entries (`status.active`, oldest wins per type) are indexed under
//! `(environment, type)` in [`index::EVENT_TYPE_ACTIVE_BY_TYPE`].
//!
//! Quirk fixed (ARCHITECTURE.md "The Go projector's quirks, fixed"): an emptied `spec.description` or `spec.specification`
//! clears the stored value instead of keeping the old one. `spec.category` is not projected.
//!
//! [`team_from_namespace`]: crate::common::team_from_namespace

use crate::common::{required, status_from_conditions, Meta, Status};
use crate::keys::{index, natural, Key};
use crate::kind::{Context, IndexName, Kind, KindId, Parent, Scope, Skip};
use crate::time::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The EventType kind.
pub struct EventType;

/// A projected EventType.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventTypeRecord {
    /// Common metadata; `meta.name` is the object name (`metadata.name`, the type with dots
    /// replaced by hyphens, e.g. `de-telekom-payments-orderplaced-v1`).
    pub meta: Meta,
    /// The owner team: `metadata.namespace` after its first `--`
    /// ([`team_from_namespace`](crate::common::team_from_namespace)); must be non-empty.
    pub team: String,
    /// `spec.type`; must be non-empty, e.g. `de.telekom.payments.orderplaced.v1`.
    pub event_type: String,
    /// `spec.version`; must be non-empty.
    pub version: String,
    /// `spec.description`; `None` when absent or empty.
    pub description: Option<String>,
    /// `spec.specification`: file-manager file ID of the payload's JSON schema; `None` when
    /// absent or empty.
    pub specification: Option<String>,
    /// `status.active`; `false` without status.
    pub active: bool,
    /// From `status.conditions`; `UNKNOWN` without status.
    pub status: Status,
}

impl Kind for EventType {
    fn status(rec: &Self::Record) -> Option<&crate::common::Status> {
        Some(&rec.status)
    }

    const ID: KindId = KindId::EventType;
    const VERSION: u32 = 1;
    type Cr = crds::EventType;
    type Record = EventTypeRecord;

    fn meta(cr: &crds::EventType) -> &ObjectMeta {
        &cr.metadata
    }

    fn translate(cr: &crds::EventType, _ctx: &Context) -> Result<EventTypeRecord, Skip> {
        let meta = Meta::from_object(&cr.metadata)?;
        let team = required("metadata.namespace", meta.team())?.to_string();
        let spec = &cr.spec;
        let event_type = required("spec.type", &spec.type_)?.to_string();
        let version = required("spec.version", &spec.version)?.to_string();
        let status = cr.status.as_ref();
        Ok(EventTypeRecord {
            team,
            event_type,
            version,
            description: spec.description.clone().filter(|d| !d.is_empty()),
            specification: spec.specification.clone().filter(|s| !s.is_empty()),
            active: status.is_some_and(|s| s.active),
            status: status_from_conditions(status.map(|s| s.conditions.as_slice()).unwrap_or_default()),
            meta,
        })
    }

    fn key(rec: &EventTypeRecord) -> Key {
        natural::event_type(&rec.meta.environment, &rec.team, &rec.event_type)
    }

    fn requires(rec: &EventTypeRecord) -> Vec<Parent> {
        vec![Parent { kind: KindId::Team, key: natural::team(&rec.meta.environment, &rec.team) }]
    }

    fn scopes(rec: &EventTypeRecord, _links: &[Option<Key>]) -> Vec<Scope> {
        vec![Scope::Env { env: rec.meta.environment.clone() }]
    }

    fn index_entries(rec: &EventTypeRecord, _links: &[Option<Key>]) -> Vec<(IndexName, Key)> {
        if rec.active {
            vec![(index::EVENT_TYPE_ACTIVE_BY_TYPE, natural::in_env(&rec.meta.environment, &rec.event_type))]
        } else {
            Vec::new()
        }
    }

    fn created_at(rec: &EventTypeRecord) -> Option<Timestamp> {
        rec.meta.creation_timestamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::kinds::testing::{ctx, world_object};

    const ORDERS: &str = "de.telekom.payments.orderplaced.v1";

    fn event_type(env: &str, name: &str) -> EventTypeRecord {
        EventType::translate(&world_object::<crds::EventType>("EventType", env, name), &ctx()).unwrap()
    }

    #[test]
    fn key_requires_scopes_and_active_index() {
        let rec = event_type("poc", "poc--payments--checkout/de-telekom-payments-orderplaced-v1");
        assert_eq!(EventType::key(&rec), natural::event_type("poc", "payments--checkout", ORDERS));
        assert_eq!(EventType::key(&rec).parts().unwrap(), vec!["poc", "payments--checkout", ORDERS]);
        assert_eq!(EventType::requires(&rec), vec![Parent { kind: KindId::Team, key: natural::team("poc", "payments--checkout") }]);
        assert!(EventType::links(&rec).is_empty());
        assert_eq!(EventType::scopes(&rec, &[]), vec![Scope::Env { env: "poc".into() }]);
        assert_eq!(EventType::index_entries(&rec, &[]), vec![(index::EVENT_TYPE_ACTIVE_BY_TYPE, natural::in_env("poc", ORDERS))]);
        assert!(EventType::dependents(&rec, &[]).is_empty());

        let shadow = event_type("poc", "poc--payments--ledger/de-telekom-payments-orderplaced-v1");
        assert_eq!(EventType::key(&shadow), natural::event_type("poc", "payments--ledger", ORDERS));
        assert!(EventType::index_entries(&shadow, &[]).is_empty());

        let qa = event_type("qa", "de-telekom-payments-orderplaced-v1");
        assert_eq!(EventType::key(&qa), natural::event_type("qa", "payments--checkout", ORDERS));
        assert_eq!(EventType::index_entries(&qa, &[])[0].1, natural::in_env("qa", ORDERS));
        assert_eq!(qa.specification, None);
    }

    #[test]
    fn emptied_fields_clear_values() {
        let mut cr: crds::EventType = world_object("EventType", "poc", "poc--payments--checkout/de-telekom-payments-orderplaced-v1");
        cr.spec.description = Some(String::new());
        cr.spec.specification = Some(String::new());
        cr.status = None;
        let rec = EventType::translate(&cr, &ctx()).unwrap();
        assert!(EventType::index_entries(&rec, &[]).is_empty());
        assert_eq!(rec.status.phase, StatusPhase::Unknown);
        assert_eq!((rec.description, rec.specification, rec.active), (None, None, false));
    }

    #[test]
    fn bad_input_is_skipped() {
        let base: crds::EventType = world_object("EventType", "poc", "de-telekom-logistics-fleetposition-v2");
        let mut cr = base.clone();
        cr.spec.type_.clear();
        assert_eq!(EventType::translate(&cr, &ctx()), Err(Skip::Missing("spec.type")));
        let mut cr = base.clone();
        cr.spec.version.clear();
        assert_eq!(EventType::translate(&cr, &ctx()), Err(Skip::Missing("spec.version")));
        let mut cr = base.clone();
        cr.metadata.namespace = Some("poc--".into());
        assert_eq!(EventType::translate(&cr, &ctx()), Err(Skip::Missing("metadata.namespace")));
        let mut cr = base;
        cr.metadata.namespace = None;
        assert_eq!(EventType::translate(&cr, &ctx()), Err(Skip::Missing("metadata.namespace")));
    }
}
