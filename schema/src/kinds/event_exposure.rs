//! EventExposure: an Application publishing an event type. Natural key `(environment, team, application, spec.eventType)`; the owner application is the label
//! `cp.ei.telekom.de/application` (like ApiExposure), its team the namespace's; owned by (and
//! visible to) that team. The *active* exposure of an event type is indexed so that
//! subscriptions can link to it; every change re-links the subscriptions of its type.
//!
//! Also home of the trigger value types EventSubscription shares ([`EventTrigger`],
//! [`ResponseFilter`], [`SelectionFilter`]), mapped as the Go projector maps them, with enum
//! values normalised to their GraphQL spelling (`Include` → `INCLUDE`; the Go server passed the
//! CR's spelling through).
//!
//! The link to the catalogue EventType (GraphQL `eventTypeDef`) is not stored: it is the active
//! EventType of the same environment and type, looked up at query time, so the Go projector's
//! stale link (ARCHITECTURE.md "The Go projector's quirks, fixed") cannot occur.

use crate::common::{self, Meta, Status, Visibility};
use crate::graphql_enum::graphql_enum;
use crate::keys::{index, natural};
use crate::kind::{Context, Skip};
use crate::kinds::api_exposure::ApprovalConfig;
use crate::kinds::subscription_wiring::{exposure_kind, ExposureWiring};
use crds::event_exposure as cr;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The EventExposure kind.
pub struct EventExposure;

/// A projected EventExposure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventExposureRecord {
    /// Common metadata; the owner team is `meta.team()` (from `metadata.namespace`).
    pub meta: Meta,
    /// From `status.conditions`; `UNKNOWN` when the CR has no status.
    pub status: Status,
    /// The owner Application's name: label `cp.ei.telekom.de/application` (required, non-empty).
    pub application: String,
    /// `spec.eventType` (required, non-empty).
    pub event_type: String,
    /// `spec.visibility`, matched case-insensitively.
    pub visibility: Visibility,
    /// `status.active`; `false` when the CR has no status.
    pub active: bool,
    /// `spec.approval`.
    pub approval_config: ApprovalConfig,
    /// `spec.scopes[]`, in CR order; `[]` when none.
    pub event_scopes: Vec<EventScope>,
    /// `status.publishURL`: where the provider publishes; `""` when absent.
    pub gateway_publishing_url: String,
}

/// `spec.scopes[]` of an exposure (GraphQL `EventScope`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventScope {
    /// `spec.scopes[].name`.
    pub name: String,
    /// `spec.scopes[].trigger`.
    pub trigger: EventTrigger,
}

/// An event trigger (GraphQL `EventTrigger`): `spec.scopes[].trigger` of exposures,
/// `spec.trigger` of subscriptions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventTrigger {
    /// `…trigger.responseFilter`; `None` when absent.
    pub response_filter: Option<ResponseFilter>,
    /// `…trigger.selectionFilter`; `None` when absent.
    pub selection_filter: Option<SelectionFilter>,
}

/// `…trigger.responseFilter` (GraphQL `ResponseFilter`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseFilter {
    /// `…responseFilter.paths[]` in CR order; `[]` when absent.
    pub paths: Vec<String>,
    /// `…responseFilter.mode`, matched case-insensitively; the CRD default `Include` when absent
    /// or empty.
    pub mode: ResponseFilterMode,
}

graphql_enum! {
    /// `…responseFilter.mode` (GraphQL `ResponseFilterMode`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ResponseFilterMode {
        /// `Include`: deliver only the listed paths.
        Include = "INCLUDE",
        /// `Exclude`: deliver everything but the listed paths.
        Exclude = "EXCLUDE",
    }
}

impl ResponseFilterMode {
    /// Parses the CR value case-insensitively; `""` is the CRD default `Include`.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse(field: &'static str, value: &str) -> Result<ResponseFilterMode, Skip> {
        if value.is_empty() {
            return Ok(ResponseFilterMode::Include);
        }
        common::parse_enum(
            field,
            value,
            "Include, Exclude",
            &[("Include", ResponseFilterMode::Include), ("Exclude", ResponseFilterMode::Exclude)],
        )
    }
}

/// `…trigger.selectionFilter` (GraphQL `SelectionFilter`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectionFilter {
    /// `…selectionFilter.attributes`: CloudEvents attribute equality matches; `None` when absent.
    pub attributes: Option<BTreeMap<String, String>>,
    /// `…selectionFilter.expression` as compact JSON text; `""` when absent or JSON `null`.
    pub expression: String,
}

impl EventTrigger {
    /// Maps a CR trigger; `field` is the JSON path of the trigger (for skip reasons).
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for a response filter mode other than `Include`/`Exclude`.
    pub fn from_cr(field: &'static str, t: &cr::EventTrigger) -> Result<EventTrigger, Skip> {
        Ok(EventTrigger {
            response_filter: match &t.response_filter {
                None => None,
                Some(r) => Some(ResponseFilter {
                    paths: r.paths.clone(),
                    mode: ResponseFilterMode::parse(field, r.mode.as_deref().unwrap_or(""))?,
                }),
            },
            selection_filter: t.selection_filter.as_ref().map(|s| SelectionFilter {
                attributes: s.attributes.clone(),
                expression: match &s.expression {
                    None | Some(serde_json::Value::Null) => String::new(),
                    Some(v) => v.to_string(),
                },
            }),
        })
    }
}

/// Scopes and indexes of the EventExposure family (see [`ExposureWiring`]).
const WIRING: ExposureWiring =
    ExposureWiring { active: index::EVENT_EXPOSURE_ACTIVE_BY_TYPE, subscriptions_by_key: index::EVENT_SUBSCRIPTION_BY_TYPE };

/// The translation of an EventExposure ([`Kind::translate`](crate::kind::Kind::translate)).
fn translate(cr: &crds::EventExposure, _ctx: &Context) -> Result<EventExposureRecord, Skip> {
    let meta = Meta::from_object(&cr.metadata)?;
    let application =
        common::required("metadata.labels[cp.ei.telekom.de/application]", common::label(&cr.metadata, common::APPLICATION_LABEL))?
            .to_string();
    let spec = &cr.spec;
    let event_type = common::required("spec.eventType", &spec.event_type)?.to_string();
    let visibility = Visibility::parse("spec.visibility", &spec.visibility)?;
    let approval_config = ApprovalConfig::from_cr(&spec.approval)?;
    let event_scopes = spec
        .scopes
        .iter()
        .map(|s| {
            Ok(EventScope {
                name: s.name.clone(),
                trigger: EventTrigger::from_cr("spec.scopes[].trigger.responseFilter.mode", &s.trigger)?,
            })
        })
        .collect::<Result<Vec<_>, Skip>>()?;
    let status = cr.status.as_ref();
    Ok(EventExposureRecord {
        meta,
        status: common::status_from_conditions(status.map(|s| s.conditions.as_slice()).unwrap_or_default()),
        application,
        event_type,
        visibility,
        active: status.is_some_and(|s| s.active),
        approval_config,
        event_scopes,
        gateway_publishing_url: status.and_then(|s| s.publish_url.clone()).unwrap_or_default(),
    })
}

exposure_kind!(EventExposure, EventExposureRecord {
    const VERSION: u32 = 1;
    wiring: WIRING,
    natural_key: natural::event_exposure,
    target: event_type,
    translate: translate,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::ApprovalStrategy;
    use crate::common::StatusPhase;
    use crate::keys::Key;
    use crate::kind::{Kind, KindId, Parent, Scope};
    use crate::kinds::testing::{ctx, world_object};
    use crate::time::Timestamp;

    const ORDERS: &str = "de.telekom.payments.orderplaced.v1";

    fn exposure(env: &str, name: &str) -> crds::EventExposure {
        world_object("EventExposure", env, name)
    }

    fn translate(cr: &crds::EventExposure) -> Result<EventExposureRecord, Skip> {
        EventExposure::translate(cr, &ctx())
    }

    #[test]
    fn checkout_orders_with_scopes_and_triggers() {
        let rec = translate(&exposure("poc", "checkout-api--de-telekom-payments-orderplaced-v1")).unwrap();
        assert_eq!(rec.meta.namespace, "poc--payments--checkout");
        assert_eq!(rec.meta.team(), "payments--checkout");
        assert_eq!(rec.application, "checkout-api");
        assert_eq!(rec.event_type, ORDERS);
        assert_eq!(rec.visibility, Visibility::World);
        assert!(rec.active);
        assert_eq!(rec.status, Status { phase: StatusPhase::Ready, message: "Successfully provisioned subresources".into() });
        assert_eq!(
            rec.approval_config,
            ApprovalConfig { strategy: ApprovalStrategy::Auto, trusted_teams: vec!["payments--checkout".into()] }
        );
        assert_eq!(rec.gateway_publishing_url, "https://api.aws-eu1.poc.example.com/horizon/events/v1");
        assert_eq!(
            rec.event_scopes,
            vec![
                EventScope {
                    name: "eu-orders".into(),
                    trigger: EventTrigger {
                        response_filter: Some(ResponseFilter {
                            paths: vec!["$.orderId".into(), "$.amount".into(), "$.currency".into()],
                            mode: ResponseFilterMode::Include,
                        }),
                        selection_filter: Some(SelectionFilter {
                            attributes: Some(BTreeMap::from([("region".to_string(), "eu".to_string())])),
                            expression: r#"{"and":[{"eq":{"field":"$.channel","value":"web"}}]}"#.into(),
                        }),
                    },
                },
                EventScope {
                    name: "all-orders-redacted".into(),
                    trigger: EventTrigger {
                        response_filter: Some(ResponseFilter { paths: vec!["$.customer.email".into()], mode: ResponseFilterMode::Exclude }),
                        selection_filter: None,
                    },
                },
            ]
        );
        assert_eq!(rec.event_scopes[1].trigger.response_filter.as_ref().unwrap().mode.as_str(), "EXCLUDE");
        assert_eq!(EventExposure::created_at(&rec), Some(Timestamp::parse_rfc3339("2026-04-27T22:50:00Z").unwrap()));
    }

    #[test]
    fn keys_requires_scopes_refs_and_dependents() {
        let rec = translate(&exposure("poc", "checkout-api--de-telekom-payments-orderplaced-v1")).unwrap();
        assert_eq!(EventExposure::key(&rec), Key::new(&["poc", "payments--checkout", "checkout-api", ORDERS]));
        assert_eq!(EventExposure::key(&rec), natural::event_exposure("poc", "payments--checkout", "checkout-api", ORDERS));
        assert_eq!(
            EventExposure::requires(&rec),
            vec![Parent { kind: KindId::Application, key: Key::new(&["poc", "payments--checkout", "checkout-api"]) }]
        );
        assert!(EventExposure::links(&rec).is_empty());
        assert_eq!(EventExposure::scopes(&rec, &[]), vec![Scope::Team { env: "poc".into(), team: "payments--checkout".into() }]);
        let by_type = natural::in_env("poc", ORDERS);
        assert_eq!(EventExposure::index_entries(&rec, &[]), vec![(index::EVENT_EXPOSURE_ACTIVE_BY_TYPE, by_type.clone())]);
        assert_eq!(EventExposure::dependents(&rec, &[]), vec![(index::EVENT_SUBSCRIPTION_BY_TYPE, by_type)]);
    }

    #[test]
    fn other_world_exposures() {
        let fleet = translate(&exposure("poc", "fleet-telemetry--de-telekom-logistics-fleetposition-v2")).unwrap();
        assert_eq!(fleet.visibility, Visibility::Zone);
        assert_eq!(fleet.approval_config.strategy, ApprovalStrategy::FourEyes);
        assert_eq!(fleet.approval_config.trusted_teams, vec!["logistics--fleet"]);
        assert!(fleet.event_scopes.is_empty());
        assert_eq!(fleet.gateway_publishing_url, "https://api.caas-cetus.poc.example.com:8443/gw/horizon/events/v1");

        let parcels = translate(&exposure("poc", "parcel-notifier--de-telekom-logistics-parceldelivered-v1")).unwrap();
        assert_eq!((parcels.visibility, parcels.approval_config.strategy), (Visibility::Enterprise, ApprovalStrategy::Simple));
        assert_eq!(parcels.application, "parcel-notifier");

        let qa = translate(&exposure("qa", "checkout-api--de-telekom-payments-orderplaced-v1")).unwrap();
        assert_eq!(EventExposure::key(&qa), Key::new(&["qa", "payments--checkout", "checkout-api", ORDERS]));
        assert_eq!(EventExposure::index_entries(&qa, &[])[0].1, natural::in_env("qa", ORDERS));
    }

    #[test]
    fn no_status_is_unknown_inactive_and_not_indexed_but_still_relinks() {
        let mut cr = exposure("poc", "checkout-api--de-telekom-payments-orderplaced-v1");
        cr.status = None;
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.status.phase, rec.active, rec.gateway_publishing_url.as_str()), (StatusPhase::Unknown, false, ""));
        assert!(EventExposure::index_entries(&rec, &[]).is_empty());
        assert_eq!(EventExposure::dependents(&rec, &[]), vec![(index::EVENT_SUBSCRIPTION_BY_TYPE, natural::in_env("poc", ORDERS))]);
    }

    #[test]
    fn trigger_edge_cases() {
        let mut cr = exposure("poc", "checkout-api--de-telekom-payments-orderplaced-v1");
        // A response filter without mode takes the CRD default; a selection filter without
        // expression has expression ""; a bare trigger has neither filter.
        cr.spec.scopes[0].trigger.response_filter.as_mut().unwrap().mode = None;
        cr.spec.scopes[0].trigger.selection_filter.as_mut().unwrap().expression = None;
        cr.spec.scopes[1].trigger = Default::default();
        let rec = translate(&cr).unwrap();
        let t = &rec.event_scopes[0].trigger;
        assert_eq!(t.response_filter.as_ref().unwrap().mode, ResponseFilterMode::Include);
        assert_eq!(t.selection_filter.as_ref().unwrap().expression, "");
        assert_eq!(rec.event_scopes[1].trigger, EventTrigger::default());

        cr.spec.scopes[0].trigger.response_filter.as_mut().unwrap().mode = Some("exclude".into());
        let rec = translate(&cr).unwrap();
        assert_eq!(rec.event_scopes[0].trigger.response_filter.as_ref().unwrap().mode, ResponseFilterMode::Exclude);
    }

    #[test]
    fn missing_or_empty_application_label_is_skipped() {
        let mut cr = exposure("poc", "checkout-api--de-telekom-payments-orderplaced-v1");
        let missing = Skip::Missing("metadata.labels[cp.ei.telekom.de/application]");
        cr.metadata.labels.as_mut().unwrap().insert(common::APPLICATION_LABEL.into(), String::new());
        assert_eq!(translate(&cr), Err(missing.clone()));
        cr.metadata.labels.as_mut().unwrap().remove(common::APPLICATION_LABEL);
        assert_eq!(translate(&cr), Err(missing));
    }

    #[test]
    fn bad_input_is_skipped_with_its_reason() {
        let base = exposure("poc", "checkout-api--de-telekom-payments-orderplaced-v1");

        let mut cr = base.clone();
        cr.spec.event_type.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.eventType")));

        let mut cr = base.clone();
        cr.metadata.namespace = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.namespace")));

        let mut cr = base.clone();
        cr.spec.visibility = "Galaxy".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.visibility", .. })));

        let mut cr = base.clone();
        cr.spec.visibility = "zone".into();
        cr.spec.approval.strategy = "foureyes".into();
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.visibility, rec.approval_config.strategy), (Visibility::Zone, ApprovalStrategy::FourEyes));

        let mut cr = base.clone();
        cr.spec.approval.strategy = "Manual".into();
        assert_eq!(
            translate(&cr),
            Err(Skip::InvalidEnum { field: "spec.approval.strategy", value: "Manual".into(), expected: "Auto, Simple, FourEyes" })
        );

        let mut cr = base;
        cr.spec.scopes[0].trigger.response_filter.as_mut().unwrap().mode = Some("Redact".into());
        assert_eq!(
            translate(&cr),
            Err(Skip::InvalidEnum {
                field: "spec.scopes[].trigger.responseFilter.mode",
                value: "Redact".into(),
                expected: "Include, Exclude"
            })
        );
    }
}
