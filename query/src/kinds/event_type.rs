//! `EventType`, the catalogue entry of an event type visible to
//! every viewer of its environment; root connection `eventTypes` (`orderBy: EventTypeOrder`),
//! `owner: TeamInfo!`, and the edge `Team.eventTypes`. `activeExposure` is added next to
//! EventExposure ([`super::event_exposure`]).
//!
//! The file-manager ID `specification` is neither a field nor filterable.

use super::common::mixin_columns;
use super::info::team_info;
use crate::column::Column;
use crate::connection::{connection_field, nested_rows, register_entity};
use crate::entity::{Builder, Entity};
use crate::fields::field;
use async_graphql::dynamic::{Field, TypeRef};
use schema::kinds::event_type::{EventType, EventTypeRecord};
use schema::kinds::team::TeamRecord;
use storage::Stored;

impl Entity for EventType {
    const TYPE: &'static str = "EventType";
    const ROOT: Option<&'static str> = Some("eventTypes");
    const TEAM_OWNED: bool = false;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        vec![
            builder.specification_url_field::<EventType>(|r| r.specification.as_deref()),
            field::<Stored<EventTypeRecord>>("owner", TypeRef::named_nn("TeamInfo"), |p, request| {
                team_info(request, &p.record.meta.environment, &p.record.team)
            }),
        ]
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<EventTypeRecord>> {
        use crate::kinds::edges;
        use schema::keys::{index, natural};
        vec![
            edges::by_key::<EventTypeRecord, schema::kinds::team::Team>("Owner", |s| {
                Some(natural::team(&s.record.meta.environment, &s.record.team))
            }).shown_as_info(),
            edges::by_index::<EventTypeRecord, schema::kinds::event_exposure::EventExposure>(
                "Exposures",
                index::EVENT_EXPOSURE_ACTIVE_BY_TYPE,
                |s| s.record.active.then(|| natural::in_env(&s.record.meta.environment, &s.record.event_type)),
            ).shown_as_info(),
        ]
    }

    fn columns() -> Vec<Column<EventTypeRecord>> {
        // `specification` (hidden file ID) is filterable in the reference; not here.
        type C = Column<EventTypeRecord>;
        let mut c = mixin_columns::<EventType>(|r| &r.meta);
        c.extend([
            C::string("eventType", |r| &r.event_type),
            C::string("version", |r| &r.version),
            C::optional_string("description", |r| r.description.as_deref()),
            C::boolean("active", |r| r.active),
        ]);
        c
    }
}

/// Registers `EventType` (with the root `eventTypes`) and the edge `Team.eventTypes`.
pub fn register(builder: &mut Builder) {
    register_entity::<EventType>(builder);
    let w = builder.where_type::<EventType>();
    let field = connection_field::<EventType, Stored<TeamRecord>>(builder, "eventTypes", w, |request, team, order, pred| {
        // EventType keys are (env, team, type): the team's key is their prefix.
        let rows = request.view.with_prefix::<EventType>(&team.key).map_err(crate::error::storage)?;
        Ok(Box::new(nested_rows::<EventType>(request, rows, order, &pred)))
    });
    builder.extend("Team", vec![field]);
}
