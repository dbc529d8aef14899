//! `Zone`: `id`, `environment`, `name`, `gatewayURL`, `issuerURL`,
//! `permissionsURL`, `visibility`, the computed `tokenURL` and `applications` (the viewer's
//! applications in the zone). Visible to every viewer of its environment; listed by the root
//! `zones: [Zone!]!` (no pagination, no ordering guarantee beyond key order).

use crate::column::Column;
use crate::connection::{list_field, register_entity};
use crate::entity::{Builder, Entity, node_value};
use crate::fields::{field, record_field, string};
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

    fn fields(_: &mut Builder) -> Vec<Field> {
        vec![
            // `issuerURL` + the token path; null when the zone has no issuer.
            record_field::<Zone>("tokenURL", TypeRef::named(TypeRef::STRING), |r| {
                r.issuer_url.as_ref().and_then(|u| string(&format!("{u}{TOKEN_PATH}")))
            }),
            field::<Stored<ZoneRecord>>("applications", TypeRef::named_nn_list("Application"), |p, request| {
                let lookup = natural::in_env(&p.record.meta.environment, &p.record.meta.name);
                let apps =
                    request.view.lookup_records::<Application>(index::APPLICATION_BY_ZONE, &lookup).map_err(crate::error::storage)?;
                Ok(Some(FieldValue::list(apps.into_iter().filter(|a| request.visible::<Application>(a)).map(node_value::<Application>))))
            }),
        ]
    }

    fn edge_filters() -> Vec<crate::filter::EdgeFilter<ZoneRecord>> {
        use crate::kinds::edges;
        use schema::keys::{index, natural};
        vec![edges::by_index::<ZoneRecord, schema::kinds::application::Application>("Applications", index::APPLICATION_BY_ZONE, |s| {
            Some(natural::in_env(&s.record.meta.environment, &s.record.meta.name))
        })]
    }

    fn columns() -> Vec<Column<ZoneRecord>> {
        type C = Column<ZoneRecord>;
        vec![
            C::optional_string("environment", |r| Some(r.meta.environment.as_str())),
            C::string("name", |r| &r.meta.name),
            C::optional_string("gatewayURL", |r| r.gateway_url.as_deref()),
            C::optional_string("issuerURL", |r| r.issuer_url.as_deref()),
            C::optional_string("permissionsURL", |r| r.permissions_url.as_deref()),
            C::enumeration("visibility", "ZoneVisibility", |r| r.visibility),
        ]
    }
}

/// Registers `Zone` and the root `zones`.
pub fn register(builder: &mut Builder) {
    register_entity::<Zone>(builder);
    let zones = list_field::<Zone>(builder, "zones", false);
    builder.query_fields.push(zones);
}
