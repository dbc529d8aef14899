//! `PermissionSet` (its permissions are the value type `Permission`): the permissions of one
//! application. Root query `permissionSets`; visible to the owner application's team. The owner
//! edge is hidden, as in the reference; the set is reached from `Application.permissionSet`
//! (defined here, visible records only).

use super::common::mixin_columns;
use crate::column::Column;
use crate::connection::register_entity;
use crate::entity::{Builder, Entity, node_value};
use crate::fields::{field, object_values, record_field, string, string_list};
use async_graphql::dynamic::{Field, Object, TypeRef};
use schema::keys::natural;
use schema::kinds::application::ApplicationRecord;
use schema::kinds::permission_set::{Permission, PermissionSet, PermissionSetRecord};
use storage::Stored;

impl Entity for PermissionSet {
    const TYPE: &'static str = "PermissionSet";
    const ROOT: Option<&'static str> = Some("permissionSets");
    const TEAM_OWNED: bool = true;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        builder.object(
            Object::new("Permission")
                .field(field::<Permission>("role", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.role))))
                .field(field::<Permission>("resource", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.resource))))
                .field(field::<Permission>("actions", TypeRef::named_nn_list_nn(TypeRef::STRING), |p, _| Ok(string_list(&p.actions)))),
        );
        // `permissions` is a JSON column in the Go system: not filterable there either.
        vec![record_field::<PermissionSet>("permissions", TypeRef::named_list("Permission"), |r| object_values(r.permissions.clone()))]
    }

    fn columns() -> Vec<Column<PermissionSetRecord>> {
        mixin_columns::<PermissionSet>(|r| &r.meta)
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<PermissionSetRecord>> {
        use crate::kinds::edges;
        use schema::keys::natural;
        vec![edges::by_key::<PermissionSetRecord, schema::kinds::application::Application>("OwnerApplication", |s| {
            Some(natural::application(&s.record.meta.environment, s.record.meta.team(), &s.record.application))
        })]
    }
}

/// Registers `PermissionSet` with its root query, and the edge `Application.permissionSet`
/// (null when the application has none or the viewer may not see it).
pub fn register(builder: &mut Builder) {
    register_entity::<PermissionSet>(builder);
    builder.extend(
        "Application",
        vec![field::<Stored<ApplicationRecord>>("permissionSet", TypeRef::named(PermissionSet::TYPE), |p, request| {
            let r = &p.record;
            let key = natural::permission_set(&r.meta.environment, &r.team, &r.meta.name);
            Ok(request.load_visible::<PermissionSet>(&key)?.map(node_value::<PermissionSet>))
        })],
    );
}
