//! `Zone` (reference-graphql.md §1.4): `id`, `environment`, `name`, `gatewayURL`, `issuerURL`,
//! `permissionsURL`, `visibility`, the computed `tokenURL` and `applications` (the viewer's
//! applications in the zone). Visible to every viewer of its environment; listed by the root
//! `zones: [Zone!]!` (no pagination, no ordering guarantee beyond key order).

use super::common::str_filter;
use crate::entity::{field, list_field, node_value, nullable_string, register, rf, string, Builder, Entity};
use crate::error::internal;
use crate::filter::{FilterField, FilterType, FilterValue};
use async_graphql::dynamic::{Field, FieldValue, TypeRef};
use schema::keys::{index, natural};
use schema::kinds::application::Application;
use schema::kinds::zone::{Zone, ZoneRecord};
use storage::Stored;

/// The path appended to the issuer URL to form `tokenURL` (Keycloak's token endpoint).
const TOKEN_PATH: &str = "/protocol/openid-connect/token";

impl Entity for Zone {
    const TYPE: &'static str = "Zone";
    const ROOT: Option<&'static str> = None;
    const TEAM_OWNED: bool = false;

    fn fields(b: &mut Builder) -> Vec<Field> {
        b.enumeration("ZoneVisibility", &["WORLD", "ENTERPRISE"]);
        vec![
            rf::<Zone>("environment", TypeRef::named(TypeRef::STRING), |r| string(&r.meta.environment)),
            rf::<Zone>("name", TypeRef::named_nn(TypeRef::STRING), |r| string(&r.meta.name)),
            rf::<Zone>("gatewayURL", TypeRef::named(TypeRef::STRING), |r| nullable_string(r.gateway_url.as_deref())),
            rf::<Zone>("issuerURL", TypeRef::named(TypeRef::STRING), |r| nullable_string(r.issuer_url.as_deref())),
            rf::<Zone>("permissionsURL", TypeRef::named(TypeRef::STRING), |r| nullable_string(r.permissions_url.as_deref())),
            rf::<Zone>("visibility", TypeRef::named_nn("ZoneVisibility"), |r| crate::entity::enum_item(r.visibility.as_str())),
            // `issuerURL` + the token path; null when the zone has no issuer.
            rf::<Zone>("tokenURL", TypeRef::named(TypeRef::STRING), |r| {
                r.issuer_url.as_ref().and_then(|u| string(&format!("{u}{TOKEN_PATH}")))
            }),
            field::<Stored<ZoneRecord>>("applications", TypeRef::named_nn_list("Application"), |p, rq| {
                let lookup = natural::in_env(&p.record.meta.environment, &p.record.meta.name);
                let apps = rq.view.lookup_records::<Application>(index::APPLICATION_BY_ZONE, &lookup).map_err(internal)?;
                Ok(Some(FieldValue::list(apps.into_iter().filter(|a| rq.visible::<Application>(a)).map(node_value::<Application>))))
            }),
        ]
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<ZoneRecord>> {
        use crate::kinds::edges;
        #[allow(unused_imports)]
        use schema::keys::{index, natural};
        #[allow(unused_imports)]
        use schema::Key;
        vec![edges::by_index::<ZoneRecord, schema::kinds::application::Application>("Applications", index::APPLICATION_BY_ZONE, |s| {
            Some(natural::in_env(&s.record.meta.environment, &s.record.meta.name))
        })]
    }

    fn filters() -> Vec<FilterField<ZoneRecord>> {
        vec![
            str_filter("environment", true, |r| Some(r.meta.environment.as_str())),
            str_filter("name", false, |r| Some(r.meta.name.as_str())),
            str_filter("gatewayURL", true, |r| r.gateway_url.as_deref()),
            str_filter("issuerURL", true, |r| r.issuer_url.as_deref()),
            str_filter("permissionsURL", true, |r| r.permissions_url.as_deref()),
            FilterField::new("visibility", FilterType::Enum("ZoneVisibility".into()), false, |x: &Stored<ZoneRecord>| {
                FilterValue::Str(Some(x.record.visibility.as_str().to_string()))
            }),
        ]
    }
}

/// Registers `Zone` and the root `zones`.
pub fn register_zone(b: &mut Builder) {
    register::<Zone>(b);
    let zones = list_field::<Zone>(b, "zones", false);
    b.query_fields.push(zones);
}
