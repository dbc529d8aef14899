//! `Api`, the catalogue entry of an API visible to every viewer of
//! its environment; root connection `apis` (`orderBy: ApiOrder`), `owner: TeamInfo!`, and the
//! root `apiCategories: [ApiCategory!]!` (distinct non-empty categories of the Apis the viewer
//! sees, sorted ascending).
//!
//! The file-manager ID `specification` is neither a field nor filterable.

use super::common::mixin_columns;
use super::info::team_info;
use crate::column::Column;
use crate::connection::register_entity;
use crate::entity::{Builder, Entity};
use crate::fields::{field, record_field, string, string_list};
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldValue, Object, ResolverContext, TypeRef};
use async_graphql::Error;
use schema::kinds::api::{Api, ApiRecord};
use schema::Kind;
use std::collections::BTreeSet;
use std::ops::Bound;
use storage::{OrderField, Stored};

impl Entity for Api {
    const TYPE: &'static str = "Api";
    const ROOT: Option<&'static str> = Some("apis");
    const TEAM_OWNED: bool = false;

    fn fields(builder: &mut Builder) -> Vec<Field> {
        vec![
            record_field::<Api>("oauth2Scopes", TypeRef::named_nn_list(TypeRef::STRING), |r| string_list(&r.oauth2_scopes)),
            builder.specification_url_field::<Api>(|r| r.specification.as_deref()),
            field::<Stored<ApiRecord>>("owner", TypeRef::named_nn("TeamInfo"), |p, request| {
                team_info(request, &p.record.meta.environment, &p.record.team)
            }),
        ]
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<ApiRecord>> {
        use crate::kinds::edges;
        use schema::keys::{index, natural};
        vec![
            edges::by_key::<ApiRecord, schema::kinds::team::Team>("Owner", |s| {
                Some(natural::team(&s.record.meta.environment, &s.record.team))
            }).shown_as_info(),
            edges::by_index::<ApiRecord, schema::kinds::api_exposure::ApiExposure>(
                "Exposures",
                index::API_EXPOSURE_ACTIVE_BY_BASE_PATH,
                |s| s.record.active.then(|| natural::in_env(&s.record.meta.environment, &s.record.base_path)),
            ).shown_as_info(),
        ]
    }

    fn columns() -> Vec<Column<ApiRecord>> {
        // `specification` (hidden file ID) is filterable in the reference; not here.
        type C = Column<ApiRecord>;
        let mut c = mixin_columns::<Api>(|r| &r.meta);
        c.extend([
            C::string("basePath", |r| &r.base_path),
            C::string("version", |r| &r.version),
            C::optional_string("category", |r| r.category.as_deref()),
            C::boolean("xVendor", |r| r.x_vendor),
            C::boolean("active", |r| r.active),
        ]);
        c
    }
}

/// The distinct non-empty categories of the Apis visible to the viewer, sorted ascending.
fn api_categories(request: &RequestContext) -> Result<Vec<String>, Error> {
    let mut out = BTreeSet::new();
    for scope in request.viewer.scopes(Api::TEAM_OWNED) {
        for entry in request.view.scan(Api::ID, OrderField::Key, &scope, Bound::Unbounded, false).map_err(crate::error::storage)? {
            let (_, key) = entry.map_err(crate::error::storage)?;
            if let Some(api) = request.load_visible::<Api>(&key)? {
                out.extend(api.record.category.filter(|c| !c.is_empty()));
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// A category of `apiCategories`.
struct ApiCategory(String);

/// Registers `Api` (with the root `apis`), `ApiCategory` and the root `apiCategories`.
pub fn register(builder: &mut Builder) {
    register_entity::<Api>(builder);
    // At most one category per visible Api.
    builder.record_list("ApiCategory", crate::limits::RecordList::Visible { kind: Api::ID, team_owned: Api::TEAM_OWNED });
    builder.object(
        Object::new("ApiCategory").field(field::<ApiCategory>("name", TypeRef::named_nn(TypeRef::STRING), |p, _| Ok(string(&p.0)))),
    );
    builder.query_fields.push(Field::new("apiCategories", TypeRef::named_nn_list_nn("ApiCategory"), |ctx: ResolverContext<'_>| {
        let result = (|| -> Result<Option<FieldValue<'static>>, Error> {
            let request = ctx.data::<RequestContext>()?;
            Ok(Some(FieldValue::list(api_categories(request)?.into_iter().map(|c| FieldValue::owned_any(ApiCategory(c))))))
        })();
        crate::fields::ready(result)
    }));
}
