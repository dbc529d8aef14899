//! `EventType`, the catalogue entry of an event type (reference-graphql.md §1.4): visible to
//! every viewer of its environment; root connection `eventTypes` (`orderBy: EventTypeOrder`),
//! `owner: TeamInfo!`, and the edge `Team.eventTypes`. `activeExposure` is added next to
//! EventExposure ([`super::event_exposure`]).
//!
//! The file-manager ID `specification` is neither a field nor filterable.

use super::common::{meta_filters, status_filters, str_filter};
use super::info::team_info;
use crate::entity::{
    boolean, connection_field, field, nested_rows, register, rf, status_fields, string, time_fields, time_filters, Builder, Entity,
};
use crate::error::internal;
use crate::filter::{FilterField, FilterType, FilterValue};
use async_graphql::dynamic::{Field, TypeRef};
use schema::kinds::event_type::{EventType, EventTypeRecord};
use schema::kinds::team::TeamRecord;
use storage::Stored;

impl Entity for EventType {
    const TYPE: &'static str = "EventType";
    const ROOT: Option<&'static str> = Some("eventTypes");
    const TEAM_OWNED: bool = false;

    fn fields(bld: &mut Builder) -> Vec<Field> {
        let mut v = time_fields::<EventType>();
        v.extend(status_fields::<EventType>(bld, |r| &r.status));
        v.extend([
            rf::<EventType>("environment", TypeRef::named(TypeRef::STRING), |r| string(&r.meta.environment)),
            rf::<EventType>("namespace", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.meta.namespace)),
            rf::<EventType>("eventType", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.event_type)),
            rf::<EventType>("version", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.version)),
            rf::<EventType>("description", TypeRef::named(TypeRef::STRING), |r| r.description.as_deref().and_then(string)),
            rf::<EventType>("active", TypeRef::named_nn(TypeRef::BOOLEAN), |r| boolean(r.active)),
            // `<fileManager.baseUrl>/files/<specification>` in the reference. No file-manager
            // base URL is configurable yet, so this is always null (as for `Api`).
            rf::<EventType>("specificationUrl", TypeRef::named(TypeRef::STRING), |_| None),
            field::<Stored<EventTypeRecord>>("owner", TypeRef::named_nn("TeamInfo"), |p, rq| {
                team_info(rq, &p.record.meta.environment, &p.record.team)
            }),
        ]);
        v
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<EventTypeRecord>> {
        use crate::kinds::edges;
        #[allow(unused_imports)]
        use schema::keys::{index, natural};
        #[allow(unused_imports)]
        use schema::Key;
        vec![
            edges::by_key::<EventTypeRecord, schema::kinds::team::Team>("Owner", |s| {
                Some(natural::team(&s.record.meta.environment, &s.record.team))
            }),
            edges::by_index::<EventTypeRecord, schema::kinds::event_exposure::EventExposure>(
                "Exposures",
                index::EVENT_EXPOSURE_ACTIVE_BY_TYPE,
                |s| s.record.active.then(|| natural::in_env(&s.record.meta.environment, &s.record.event_type)),
            ),
        ]
    }

    fn filters() -> Vec<FilterField<EventTypeRecord>> {
        // `specification` (hidden file ID) is filterable in the reference; not here.
        let mut v = time_filters();
        v.extend(status_filters("EventTypeStatusPhase", |r: &EventTypeRecord| &r.status));
        v.extend(meta_filters(|r: &EventTypeRecord| &r.meta));
        v.extend([
            str_filter::<EventTypeRecord>("eventType", false, |r| Some(r.event_type.as_str())),
            str_filter::<EventTypeRecord>("version", false, |r| Some(r.version.as_str())),
            str_filter::<EventTypeRecord>("description", true, |r| r.description.as_deref()),
            FilterField::new("active", FilterType::Bool, false, |x: &Stored<EventTypeRecord>| FilterValue::Bool(Some(x.record.active))),
        ]);
        v
    }
}

/// Registers `EventType` (with the root `eventTypes`) and the edge `Team.eventTypes`.
pub fn register_all(bld: &mut Builder) {
    register::<EventType>(bld);
    let w = bld.where_type::<EventType>();
    bld.extend(
        "Team",
        vec![connection_field::<EventType, Stored<TeamRecord>>("eventTypes", w, |rq, team, order, pred| {
            // EventType keys are (env, team, type): the team's key is their prefix.
            let rows = rq.view.with_prefix::<EventType>(&team.key).map_err(internal)?;
            Ok(Box::new(nested_rows::<EventType>(rq, rows, order, &pred)))
        })],
    );
}
