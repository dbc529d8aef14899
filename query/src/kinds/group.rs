//! `Group`: `id`, `environment`, `namespace`, `name`,
//! `displayName`, `description`, `teams`. Visible to every viewer of its environment. Root
//! query `groups` (a list of every group the viewer may see).

use super::common::meta_columns;
use crate::column::Column;
use crate::connection::{list_field, register_entity};
use crate::entity::{Builder, Entity};
use async_graphql::dynamic::Field;
use schema::kinds::group::{Group, GroupRecord};

impl Entity for Group {
    const TYPE: &'static str = "Group";
    const ROOT: Option<&'static str> = None;
    const TEAM_OWNED: bool = false;

    fn fields(_builder: &mut Builder) -> Vec<Field> {
        Vec::new()
    }

    fn columns() -> Vec<Column<GroupRecord>> {
        type C = Column<GroupRecord>;
        let mut c = meta_columns(|r: &GroupRecord| &r.meta);
        c.extend([
            C::string("name", |r| &r.meta.name),
            C::string("displayName", |r| &r.display_name),
            C::string("description", |r| &r.description),
        ]);
        c
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<GroupRecord>> {
        use crate::kinds::edges;
        use schema::keys::{index, natural};
        vec![edges::by_index::<GroupRecord, schema::kinds::team::Team>("Teams", index::TEAM_BY_GROUP, |s| {
            Some(natural::in_env(&s.record.meta.environment, &s.record.meta.name))
        })]
    }
}

/// Registers `Group` and the root list `groups`.
pub fn register(builder: &mut Builder) {
    register_entity::<Group>(builder);
    let groups = list_field::<Group>(builder, "groups", true);
    builder.query_fields.push(groups);
}
