//! `Group` (reference-graphql.md §1.4): `id`, `environment`, `namespace`, `name`,
//! `displayName`, `description`, `teams`. Visible to every viewer of its environment.

use crate::entity::{rf, string, Builder, Entity};
use crate::filter::{FilterField, FilterType, FilterValue};
use async_graphql::dynamic::{Field, TypeRef};
use schema::kinds::group::{Group, GroupRecord};
use storage::Stored;

impl Entity for Group {
    const TYPE: &'static str = "Group";
    const ROOT: Option<&'static str> = None;
    const TEAM_OWNED: bool = false;

    fn fields(_b: &mut Builder) -> Vec<Field> {
        vec![
            rf::<Group>("environment", TypeRef::named(TypeRef::STRING), |r| string(&r.meta.environment)),
            rf::<Group>("namespace", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.meta.namespace)),
            rf::<Group>("name", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.meta.name)),
            rf::<Group>("displayName", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.display_name)),
            rf::<Group>("description", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.description)),
        ]
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<GroupRecord>> {
        use crate::kinds::edges;
        #[allow(unused_imports)]
        use schema::keys::{index, natural};
        #[allow(unused_imports)]
        use schema::Key;
        vec![edges::by_index::<GroupRecord, schema::kinds::team::Team>("Teams", index::TEAM_BY_GROUP, |s| {
            Some(natural::in_env(&s.record.meta.environment, &s.record.meta.name))
        })]
    }

    fn filters() -> Vec<FilterField<GroupRecord>> {
        vec![
            FilterField::new("environment", FilterType::Str, true, |x: &Stored<GroupRecord>| {
                FilterValue::Str(Some(x.record.meta.environment.clone()))
            }),
            FilterField::new("namespace", FilterType::Str, false, |x: &Stored<GroupRecord>| {
                FilterValue::Str(Some(x.record.meta.namespace.clone()))
            }),
            FilterField::new("name", FilterType::Str, false, |x: &Stored<GroupRecord>| FilterValue::Str(Some(x.record.meta.name.clone()))),
            FilterField::new("displayName", FilterType::Str, false, |x: &Stored<GroupRecord>| {
                FilterValue::Str(Some(x.record.display_name.clone()))
            }),
            FilterField::new("description", FilterType::Str, false, |x: &Stored<GroupRecord>| {
                FilterValue::Str(Some(x.record.description.clone()))
            }),
        ]
    }
}
