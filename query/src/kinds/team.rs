//! `Team` and `Member`, plus `Group.teams`.
//!
//! A Team is visible to viewers acting for it (team viewer, its group's viewers, admins); the
//! root connection `teams` takes `orderBy: [TeamOrder!]`. Its `teamToken` is a secret (never
//! filterable, masked for `obfuscated` callers). Nested edges (`group`, `members`,
//! `applications`, `apis`) only return what the viewer may see.
//!
//! Members are not records of their own: a `Member` is one entry of `spec.members[]`, identified
//! by its team and e-mail address (global ID of type `Member` over `(environment, team,
//! email)`), and resolved by `node(id)` through its team (so only for viewers who see the team).

use super::common::{mixin_columns, non_empty};
use crate::column::Column;
use crate::connection::{connection_field, nested_rows, register_entity};
use crate::entity::{Builder, Entity, Loader, node_value};
use crate::fields::{field, object_values, string};
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldValue, Object, TypeRef};
use schema::keys::{index, natural};
use schema::kinds::api::Api;
use schema::kinds::application::Application;
use schema::kinds::group::{Group, GroupRecord};
use schema::kinds::team::{Team, TeamMember, TeamRecord};
use schema::{GlobalId, Key};
use std::sync::Arc;
use storage::Stored;

/// The GraphQL type name of team members.
const MEMBER: &str = "Member";

/// The parent value of a `Member`: the (visible) team and the member entry.
pub struct MemberValue {
    team: Stored<TeamRecord>,
    member: TeamMember,
}

impl MemberValue {
    fn id(&self) -> String {
        let t = &self.team.record;
        GlobalId::new(MEMBER, &Key::new(&[t.meta.environment.as_str(), t.meta.name.as_str(), self.member.email.as_str()])).encode()
    }
}

fn members_of(team: &Stored<TeamRecord>) -> Vec<MemberValue> {
    team.record.members.iter().map(|m| MemberValue { team: team.clone(), member: m.clone() }).collect()
}

impl Entity for Team {
    const TYPE: &'static str = "Team";
    const ROOT: Option<&'static str> = Some("teams");
    const TEAM_OWNED: bool = true;
    const MULTI_ORDER: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        let mut v = vec![
            builder.secret_field::<Team>("teamToken", |r| (&r.meta.environment, &r.meta.name, r.team_token.as_deref())),
            field::<Stored<TeamRecord>>("group", TypeRef::named("Group"), |p, request| {
                let r = &p.record;
                if r.group.is_empty() {
                    return Ok(None);
                }
                Ok(request.load_visible::<Group>(&natural::group(&r.meta.environment, &r.group))?.map(node_value::<Group>))
            }),
            field::<Stored<TeamRecord>>("members", TypeRef::named_nn_list(MEMBER), |p, _| Ok(object_values(members_of(p)))),
        ];
        let apps = builder.where_type::<Application>();
        v.push(connection_field::<Application, Stored<TeamRecord>>(builder, "applications", apps, |request, p, order, pred| {
            let rows = request.view.with_prefix::<Application>(&p.key).map_err(crate::error::storage)?;
            Ok(Box::new(nested_rows::<Application>(request, rows, order, &pred)))
        }));
        let apis = builder.where_type::<Api>();
        v.push(connection_field::<Api, Stored<TeamRecord>>(builder, "apis", apis, |request, p, order, pred| {
            let rows = request.view.with_prefix::<Api>(&p.key).map_err(crate::error::storage)?;
            Ok(Box::new(nested_rows::<Api>(request, rows, order, &pred)))
        }));
        v
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<TeamRecord>> {
        use crate::kinds::edges;
        use schema::keys::natural;
        vec![
            edges::by_key::<TeamRecord, schema::kinds::group::Group>("Group", |s| {
                (!s.record.group.is_empty()).then(|| natural::group(&s.record.meta.environment, &s.record.group))
            }),
            edges::by_prefix::<TeamRecord, schema::kinds::application::Application>("Applications", |s| s.key.clone()),
            edges::by_prefix::<TeamRecord, schema::kinds::api::Api>("Apis", |s| s.key.clone()),
            edges::by_prefix::<TeamRecord, schema::kinds::event_type::EventType>("EventTypes", |s| s.key.clone()),
            edges::by_prefix::<TeamRecord, schema::kinds::mcp_server::McpServer>("McpServers", |s| s.key.clone()),
            edges::by_prefix::<TeamRecord, schema::kinds::agent_card::AgentCard>("AgentCards", |s| s.key.clone()),
        ]
    }

    fn columns() -> Vec<Column<TeamRecord>> {
        // `teamToken` is a secret: never filterable (ARCHITECTURE.md "Viewers and visibility").
        type C = Column<TeamRecord>;
        let mut c = mixin_columns::<Team>(|r| &r.meta);
        c.extend([
            C::string("name", |r| &r.meta.name),
            C::string("email", |r| &r.email),
            C::optional_string("displayname", |r| non_empty(&r.display_name)),
            C::optional_string("description", |r| non_empty(&r.description)),
            C::enumeration("category", "TeamCategory", |r| r.category),
        ]);
        c
    }
}

/// Loads a `Member` by key `(environment, team, email)` through its team (`None` when the team
/// is invisible or has no such member).
fn load_member(request: &RequestContext, key: &Key) -> Result<Option<FieldValue<'static>>, async_graphql::Error> {
    let Ok(parts) = key.parts() else { return Ok(None) };
    let [env, team, email] = parts.as_slice() else { return Ok(None) };
    let Some(t) = request.load_visible::<Team>(&natural::team(env, team))? else { return Ok(None) };
    Ok(members_of(&t).into_iter().find(|m| &m.member.email == email).map(|m| FieldValue::owned_any(m).with_type(MEMBER)))
}

/// Registers `Team` (with the root `teams`), `Member` and `Group.teams`.
pub fn register(builder: &mut Builder) {
    builder.object(
        Object::new(MEMBER)
            .implement("Node")
            .field(field::<MemberValue>("id", TypeRef::named_nn(TypeRef::ID), |p, _| Ok(string(&p.id()))))
            .field(field::<MemberValue>("environment", TypeRef::named(TypeRef::STRING), |p, _| Ok(string(&p.team.record.meta.environment))))
            .field(field::<MemberValue>("name", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.member.name))))
            .field(field::<MemberValue>("email", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.member.email))))
            .field(field::<MemberValue>("team", TypeRef::named(Team::TYPE), |p, _| Ok(Some(node_value::<Team>(p.team.clone()))))),
    );
    let loader: Loader = Arc::new(load_member);
    builder.loaders.insert(MEMBER, loader);
    register_entity::<Team>(builder);
    builder.extend(
        "Group",
        vec![field::<Stored<GroupRecord>>("teams", TypeRef::named_nn_list(Team::TYPE), |p, request| {
            let lookup = natural::in_env(&p.record.meta.environment, &p.record.meta.name);
            let teams = request.view.lookup_records::<Team>(index::TEAM_BY_GROUP, &lookup).map_err(crate::error::storage)?;
            Ok(Some(FieldValue::list(teams.into_iter().filter(|t| request.visible::<Team>(t)).map(node_value::<Team>))))
        })],
    );
}
