//! What the GraphQL types of the two agentic catalogue kinds share (reference-graphql.md §10.1):
//! `McpServer` and `AgentCard` have the same fields and filters over the same record
//! ([`AgenticCatalogueRecord`]), visible to every viewer of their environment, with
//! `owner: TeamInfo!` and the `Team.mcpServers` / `Team.agentCards` connections.
//!
//! `activeExposure` is added by `agentic_exposure` (next to `AgenticExposureInfo`). The
//! file-manager ID `specification` is neither a field nor filterable; `hash` and `oauth2Scopes`
//! are not filterable.

use super::common::{meta_filters, status_filters, str_filter};
use super::info::team_info;
use crate::entity::{
    boolean, connection_field, field, nested_rows, nullable_string, rf, status_fields, string, strs, time_fields, time_filters, Builder,
    Entity,
};
use crate::error::internal;
use crate::filter::{FilterField, FilterType, FilterValue};
use async_graphql::dynamic::{Field, TypeRef};
use schema::kinds::agentic_catalogue::AgenticCatalogueRecord;
use schema::kinds::team::TeamRecord;
use storage::Stored;

type S = Stored<AgenticCatalogueRecord>;

/// The object fields of catalogue kind `K` (besides `id`), in reference order.
pub fn fields<K: Entity<Record = AgenticCatalogueRecord>>(bld: &mut Builder) -> Vec<Field> {
    let mut v = time_fields::<K>();
    v.extend(status_fields::<K>(bld, |r| &r.status));
    v.extend([
        rf::<K>("environment", TypeRef::named(TypeRef::STRING), |r| string(&r.meta.environment)),
        rf::<K>("namespace", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.meta.namespace)),
        rf::<K>("basePath", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.base_path)),
        rf::<K>("version", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.version)),
        rf::<K>("name", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.meta.name)),
        rf::<K>("displayName", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.display_name)),
        rf::<K>("description", TypeRef::named(TypeRef::STRING), |r| nullable_string(r.description.as_deref())),
        rf::<K>("hash", TypeRef::named(TypeRef::STRING), |r| string(&r.hash)),
        rf::<K>("category", TypeRef::named(TypeRef::STRING), |r| nullable_string(r.category.as_deref())),
        rf::<K>("oauth2Scopes", TypeRef::named_nn_list(TypeRef::STRING), |r| strs(&r.oauth2_scopes)),
        rf::<K>("active", TypeRef::named_nn(TypeRef::BOOLEAN), |r| boolean(r.active)),
        // `<fileManager.baseUrl>/files/<specification>` in the reference. No file-manager base
        // URL is configurable yet, so this is always null (as `Api.specificationUrl`).
        rf::<K>("specificationUrl", TypeRef::named(TypeRef::STRING), |_| None),
        field::<S>("owner", TypeRef::named_nn("TeamInfo"), |p, rq| team_info(rq, &p.record.meta.environment, &p.record.team)),
    ]);
    v
}

/// The filters of catalogue kind `K` (besides `id`).
pub fn filters<K: Entity<Record = AgenticCatalogueRecord>>() -> Vec<FilterField<AgenticCatalogueRecord>> {
    let mut v = time_filters();
    v.extend(status_filters(&format!("{}StatusPhase", K::TYPE), |r: &AgenticCatalogueRecord| &r.status));
    v.extend(meta_filters(|r: &AgenticCatalogueRecord| &r.meta));
    v.extend([
        str_filter::<AgenticCatalogueRecord>("basePath", false, |r| Some(r.base_path.as_str())),
        str_filter::<AgenticCatalogueRecord>("version", false, |r| Some(r.version.as_str())),
        str_filter::<AgenticCatalogueRecord>("name", false, |r| Some(r.meta.name.as_str())),
        str_filter::<AgenticCatalogueRecord>("displayName", false, |r| Some(r.display_name.as_str())),
        str_filter::<AgenticCatalogueRecord>("description", true, |r| r.description.as_deref()),
        str_filter::<AgenticCatalogueRecord>("category", true, |r| r.category.as_deref()),
        FilterField::new("active", FilterType::Bool, false, |x: &S| FilterValue::Bool(Some(x.record.active))),
    ]);
    v
}

/// Registers `K` (with its root connection) and the connection `Team.<team_field>` over the
/// team's entries of `K`.
pub fn register_all<K: Entity<Record = AgenticCatalogueRecord>>(bld: &mut Builder, team_field: &str) {
    crate::entity::register::<K>(bld);
    let w = bld.where_type::<K>();
    bld.extend(
        "Team",
        vec![connection_field::<K, Stored<TeamRecord>>(team_field, w, |rq, team, order, pred| {
            // Catalogue keys are (env, team, basePath): the team's key is their prefix.
            let candidates = rq.view.with_prefix::<K>(&team.key).map_err(internal)?;
            Ok(Box::new(nested_rows::<K>(rq, candidates, order, &pred)))
        })],
    );
}
