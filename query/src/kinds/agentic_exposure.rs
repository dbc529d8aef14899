//! `AgenticExposure`, its reduced cross-tenant view `AgenticExposureInfo`, the value type `AgenticExposureSecurity`, and the edges defined
//! next to it: `Application.agenticExposures` and `McpServer.activeExposure` /
//! `AgentCard.activeExposure`. Root query `agenticExposures`; visible to the owner application's
//! team.
//!
//! `mcpServer` / `agentCard` are the active catalogue entry of the same environment and base path,
//! chosen by `variant` (`AGENT` → AgentCard, the MCP variants → McpServer; the other is null).
//! `subscriptions` lists every tenant's subscriptions linked to the exposure, reduced to
//! `AgenticSubscriptionInfo`.

use super::common::{register_with_application_edge, ApplicationEdge};
use super::reduced::{AgenticExposureInfo, AgenticSubscriptionInfo};
use super::common::mixin_columns;
use super::subscription_info::owner_fields;
use super::values::Owned;
use crate::column::Column;
use crate::entity::{Builder, Entity, global_id, node_value};
use crate::fields::{boolean, enum_item, field, object_value, object_values, record_field, string};
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldValue, Object, TypeRef};
use async_graphql::Error;
use schema::common::Visibility;
use schema::keys::{index, natural};
use schema::kinds::agent_card::AgentCard;
use schema::kinds::agentic_catalogue::AgenticCatalogueRecord;
use schema::kinds::agentic_exposure::AgenticVariant;
use schema::kinds::agentic_exposure::{AgenticExposure, AgenticExposureRecord};
use schema::kinds::agentic_subscription::AgenticSubscription;
use schema::kinds::api_exposure::ApiExposureSecurity;
use schema::kinds::application::Application;
use schema::kinds::mcp_server::McpServer;
use storage::Stored;

type S = Stored<AgenticExposureRecord>;

/// The GraphQL name of the visibility enum.
const VISIBILITY: &str = "AgenticExposureVisibility";
/// The GraphQL name of the variant enum.
const VARIANT: &str = "AgenticExposureVariant";

impl Entity for AgenticExposure {
    const TYPE: &'static str = "AgenticExposure";
    const ROOT: Option<&'static str> = Some("agenticExposures");
    const TEAM_OWNED: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        super::values::register(builder);
        register_info(builder);
        vec![
            record_field::<AgenticExposure>("upstreams", TypeRef::named_nn_list_nn("Upstream"), |r| object_values(r.upstreams.clone())),
            record_field::<AgenticExposure>("approvalConfig", TypeRef::named_nn("ApprovalConfig"), |r| {
                object_value(r.approval_config.clone())
            }),
            field::<S>("security", TypeRef::named("AgenticExposureSecurity"), |p, _| {
                let r = &p.record;
                Ok(r.security.m2m.as_ref().and_then(|_| {
                    object_value(Owned::new(&r.meta.environment, r.meta.team(), &global_id::<AgenticExposure>(&p.key), p.as_of.is_some(), r.security.clone()))
                }))
            }),
            record_field::<AgenticExposure>("traffic", TypeRef::named("Traffic"), |r| object_value(r.traffic.clone())),
            field::<S>("owner", TypeRef::named_nn("Application"), |p, request| {
                let r = &p.record;
                let key = natural::application(&r.meta.environment, r.meta.team(), &r.application);
                Ok(request.load_visible::<Application>(&key)?.map(node_value::<Application>))
            }),
            field::<S>("mcpServer", TypeRef::named("McpServer"), |p, request| {
                let r = &p.record;
                if r.variant.is_agent() {
                    return Ok(None);
                }
                let found = active_catalogue::<McpServer>(request, index::MCP_SERVER_ACTIVE_BY_BASE_PATH, r)?;
                Ok(found.map(node_value::<McpServer>))
            }),
            field::<S>("agentCard", TypeRef::named("AgentCard"), |p, request| {
                let r = &p.record;
                if !r.variant.is_agent() {
                    return Ok(None);
                }
                let found = active_catalogue::<AgentCard>(request, index::AGENT_CARD_ACTIVE_BY_BASE_PATH, r)?;
                Ok(found.map(node_value::<AgentCard>))
            }),
            field::<S>("subscriptions", TypeRef::named_nn_list_nn("AgenticSubscriptionInfo"), |p, request| {
                let subs = request
                    .view
                    .lookup_records::<AgenticSubscription>(index::AGENTIC_SUBSCRIPTION_BY_TARGET, &p.key)
                    .map_err(crate::error::storage)?;
                Ok(object_values(subs.into_iter().map(AgenticSubscriptionInfo)))
            }),
        ]
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<AgenticExposureRecord>> {
        use crate::kinds::edges;
        use schema::keys::{index, natural};
        vec![
            edges::by_key::<AgenticExposureRecord, schema::kinds::application::Application>("Owner", |s| {
                Some(natural::application(&s.record.meta.environment, s.record.meta.team(), &s.record.application))
            }),
            edges::by_index::<AgenticExposureRecord, schema::kinds::agentic_subscription::AgenticSubscription>(
                "Subscriptions",
                index::AGENTIC_SUBSCRIPTION_BY_TARGET,
                |s| Some(s.key.clone()),
            ).shown_as_info(),
        ]
    }

    fn columns() -> Vec<Column<AgenticExposureRecord>> {
        type C = Column<AgenticExposureRecord>;
        let mut c = mixin_columns::<AgenticExposure>(|r| &r.meta);
        c.extend([
            C::string("basePath", |r| &r.base_path),
            C::enumeration("visibility", VISIBILITY, |r| r.visibility),
            C::enumeration("variant", VARIANT, |r| r.variant),
            C::boolean("active", |r| r.active).nullable(),
        ]);
        c
    }
}

/// The active catalogue entry of kind `K` of the exposure's environment and base path, if the
/// viewer may see it (catalogue entries are visible to every viewer of their environment).
///
/// # Errors
/// Storage failures as `INTERNAL`.
fn active_catalogue<K: Entity<Record = AgenticCatalogueRecord>>(
    request: &RequestContext,
    active_index: schema::IndexName,
    r: &AgenticExposureRecord,
) -> Result<Option<Stored<AgenticCatalogueRecord>>, Error> {
    let found = request
        .view
        .lookup_records::<K>(active_index, &natural::in_env(&r.meta.environment, &r.base_path))
        .map_err(crate::error::storage)?;
    Ok(found.into_iter().find(|c| request.visible::<K>(c)))
}

/// Registers `AgenticExposure` with its root query, `AgenticExposureSecurity`, and the edges
/// `Application.agenticExposures`, `McpServer.activeExposure` and `AgentCard.activeExposure`.
pub fn register(builder: &mut Builder) {
    register_with_application_edge::<AgenticExposure>(builder, "agenticExposures", ApplicationEdge::KeyPrefix);
    builder.object(Object::new("AgenticExposureSecurity").field(field::<Owned<ApiExposureSecurity>>(
        "m2m",
        TypeRef::named("Machine2MachineAuthentication"),
        |p, _| Ok(p.v.m2m.clone().and_then(|m| object_value(p.child(m)))),
    )));
    for (type_name, agent) in [("McpServer", false), ("AgentCard", true)] {
        builder.extend(
            type_name,
            vec![field::<Stored<AgenticCatalogueRecord>>("activeExposure", TypeRef::named("AgenticExposureInfo"), move |p, request| {
                active_exposure(request, &p.record.meta.environment, &p.record.base_path, agent)
            })],
        );
    }
}

/// The `AgenticExposureInfo` of the active exposure of `base_path` in `env` whose variant is an
/// agent (`agent`) or an MCP server (`!agent`), regardless of the viewer; `None` when there is
/// none.
///
/// # Errors
/// Storage failures as `INTERNAL`.
pub fn active_exposure(request: &RequestContext, env: &str, base_path: &str, agent: bool) -> Result<Option<FieldValue<'static>>, Error> {
    let found = request
        .view
        .lookup_records::<AgenticExposure>(index::AGENTIC_EXPOSURE_ACTIVE_BY_BASE_PATH, &natural::in_env(env, base_path))
        .map_err(crate::error::storage)?;
    Ok(found.into_iter().find(|x| x.record.variant.is_agent() == agent).and_then(|x| object_value(AgenticExposureInfo(x))))
}

/// Registers `AgenticExposureInfo` and its enums: no upstreams, security or subscriber data of
/// the owner.
pub fn register_info(builder: &mut Builder) {
    if !builder.first_time("agentic_exposure::register_info") {
        return;
    }
    super::values::register(builder);
    builder.enumeration_of::<Visibility>(VISIBILITY);
    builder.enumeration_of::<AgenticVariant>(VARIANT);
    let mut o = Object::new("AgenticExposureInfo")
        .field(field::<AgenticExposureInfo>("id", TypeRef::named_nn(TypeRef::ID), |p, _| {
            Ok(string(&global_id::<AgenticExposure>(&p.0.key)))
        }))
        .field(field::<AgenticExposureInfo>("basePath", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.0.record.base_path))))
        .field(field::<AgenticExposureInfo>("visibility", TypeRef::named_nn(VISIBILITY), |p, _| {
            Ok(enum_item(p.0.record.visibility.as_str()))
        }))
        .field(field::<AgenticExposureInfo>("variant", TypeRef::named_nn(VARIANT), |p, _| Ok(enum_item(p.0.record.variant.as_str()))))
        .field(field::<AgenticExposureInfo>("active", TypeRef::named(TypeRef::BOOLEAN), |p, _| Ok(boolean(p.0.record.active))))
        .field(field::<AgenticExposureInfo>("approvalConfig", TypeRef::named_nn("ApprovalConfig"), |p, _| {
            Ok(object_value(p.0.record.approval_config.clone()))
        }))
        .field(field::<AgenticExposureInfo>("traffic", TypeRef::named("Traffic"), |p, _| Ok(object_value(p.0.record.traffic.clone()))));
    for f in owner_fields::<AgenticExposureInfo>(|p| (&p.0.record.meta.environment, p.0.record.meta.team(), &p.0.record.application)) {
        o = o.field(f);
    }
    builder.object(o);
}
