//! What the GraphQL types of the two agentic catalogue kinds share:
//! `McpServer` and `AgentCard` have the same fields and filters over the same record
//! ([`AgenticCatalogueRecord`]), visible to every viewer of their environment, with
//! `owner: TeamInfo!` and the `Team.mcpServers` / `Team.agentCards` connections.
//!
//! `activeExposure` is added by `agentic_exposure` (next to `AgenticExposureInfo`). The
//! file-manager ID `specification` is neither a field nor filterable; `hash` and `oauth2Scopes`
//! are not filterable.

use super::common::mixin_columns;
use super::edges;
use super::info::team_info;
use crate::column::Column;
use crate::connection::{connection_field, nested_rows};
use crate::entity::{Builder, Entity};
use crate::fields::{field, record_field, string, string_list};
use crate::filter::EdgeFilter;
use async_graphql::dynamic::{Field, TypeRef};
use schema::keys::{index, natural};
use schema::kinds::agentic_catalogue::AgenticCatalogueRecord;
use schema::kinds::agentic_exposure::AgenticExposure;
use schema::kinds::team::{Team, TeamRecord};
use storage::Stored;

type S = Stored<AgenticCatalogueRecord>;

/// The object fields of catalogue kind `K` besides `id` and its [`columns`].
pub fn fields<K: Entity<Record = AgenticCatalogueRecord>>(builder: &Builder) -> Vec<Field> {
    vec![
        record_field::<K>("hash", TypeRef::named(TypeRef::STRING), |r| string(&r.hash)),
        record_field::<K>("oauth2Scopes", TypeRef::named_nn_list(TypeRef::STRING), |r| string_list(&r.oauth2_scopes)),
        builder.specification_url_field::<K>(|r| r.specification.as_deref()),
        field::<S>("owner", TypeRef::named_nn("TeamInfo"), |p, request| team_info(request, &p.record.meta.environment, &p.record.team)),
    ]
}

/// The exposed and filterable fields of catalogue kind `K`.
pub fn columns<K: Entity<Record = AgenticCatalogueRecord>>() -> Vec<Column<AgenticCatalogueRecord>> {
    type C = Column<AgenticCatalogueRecord>;
    let mut c = mixin_columns::<K>(|r| &r.meta);
    c.extend([
        C::string("basePath", |r| &r.base_path),
        C::string("version", |r| &r.version),
        C::string("name", |r| &r.meta.name),
        C::string("displayName", |r| &r.display_name),
        C::optional_string("description", |r| r.description.as_deref()),
        C::optional_string("category", |r| r.category.as_deref()),
        C::boolean("active", |r| r.active),
    ]);
    c
}

/// The edges of a catalogue kind usable in `where`: its owner team and the active exposures of
/// its base path of its own variant (`agent`: an agent card's are agents, an MCP server's are
/// not), the ones its `activeExposure` shows: an exposure of the other variant at the same path
/// is not shown, and must not count for `hasExposures` either.
pub fn edge_filters(agent: bool) -> Vec<EdgeFilter<AgenticCatalogueRecord>> {
    vec![
        edges::by_key::<AgenticCatalogueRecord, Team>("Owner", |s| Some(natural::team(&s.record.meta.environment, &s.record.team)))
            .shown_as_info(),
        edges::by_index_keeping::<AgenticCatalogueRecord, AgenticExposure>(
            "Exposures",
            index::AGENTIC_EXPOSURE_ACTIVE_BY_BASE_PATH,
            |s| s.record.active.then(|| natural::in_env(&s.record.meta.environment, &s.record.base_path)),
            move |x| x.record.variant.is_agent() == agent,
        )
        .shown_as_info(),
    ]
}

/// Registers `K` (with its root connection) and the connection `Team.<team_field>` over the
/// team's entries of `K`.
pub fn register_all<K: Entity<Record = AgenticCatalogueRecord>>(builder: &mut Builder, team_field: &str) {
    crate::connection::register_entity::<K>(builder);
    let w = builder.where_type::<K>();
    let field = connection_field::<K, Stored<TeamRecord>>(builder, team_field, w, |request, team, order, pred| {
        // Catalogue keys are (env, team, basePath): the team's key is their prefix.
        let candidates = request.view.with_prefix::<K>(&team.key).map_err(crate::error::storage)?;
        Ok(Box::new(nested_rows::<K>(request, candidates, order, &pred)))
    });
    builder.extend("Team", vec![field]);
}
