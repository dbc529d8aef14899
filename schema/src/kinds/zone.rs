//! Zone. Natural key `(environment, name)`; visible to every viewer
//! of its environment. Zone and Group store no status (their tables have none).
//!
//! The gateway URL comes from the zone's default preset: of the newer typed `spec.presets[]` the
//! first default preset of type `API` when one exists (ARCHITECTURE.md "Fields newer than the
//! CRDs"), else the first default preset of `spec.gateway.presets`. Its first URL with
//! `hidden: false` is rendered as `<scheme>://<hostname>[:<port>]<basePath>`. Quirk fixed
//! (ARCHITECTURE.md "The Go projector's quirks, fixed"): a default preset whose URLs are all hidden gives `None`, not `""`.

use crate::common::{parse_enum, Meta};
use crate::graphql_enum::graphql_enum;
use crate::keys::{natural, Key};
use crate::kind::{Context, Kind, KindId, Scope, Skip};
use crate::time::Timestamp;
use crds::zone::{ZoneGateway, ZoneTypedPreset};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The Zone kind.
pub struct Zone;

graphql_enum! {
    /// `ZoneVisibility`: upper-case of `spec.visibility`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ZoneVisibility {
        /// `World`.
        World = "WORLD",
        /// `Enterprise`.
        Enterprise = "ENTERPRISE",
    }
}

impl ZoneVisibility {
    /// Parses the CR value case-insensitively.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for values other than `World`/`Enterprise`.
    pub fn parse(field: &'static str, value: &str) -> Result<ZoneVisibility, Skip> {
        parse_enum(field, value, "World, Enterprise", &[("World", ZoneVisibility::World), ("Enterprise", ZoneVisibility::Enterprise)])
    }
}

/// A projected Zone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneRecord {
    /// Common metadata; `meta.name` is the zone name (`metadata.name`).
    pub meta: Meta,
    /// `spec.visibility`; required.
    pub visibility: ZoneVisibility,
    /// `gatewayURL`: the first non-hidden URL of the default `API` preset of `spec.presets[]`, else
    /// of the default preset of `spec.gateway.presets`; `None` when there is no default preset or
    /// all its URLs are hidden.
    pub gateway_url: Option<String>,
    /// The AI gateway's URL, by the same rule from the default `AI` preset of `spec.presets[]`,
    /// else from `spec.aiGateway.presets`; `None` when the zone has no AI gateway.
    pub ai_gateway_url: Option<String>,
    /// `issuerURL`: `status.links.gatewayIssuer`; `None` when absent or empty.
    pub issuer_url: Option<String>,
    /// `permissionsURL`: `status.links.permissionsUrl`; `None` when absent or empty.
    pub permissions_url: Option<String>,
}

/// Renders `<scheme>://<hostname>[:<port>]<basePath>`: scheme `https` when absent or empty, port
/// only when non-zero.
fn render_url(scheme: Option<&str>, hostname: &str, port: Option<i32>, base_path: &str) -> String {
    let scheme = scheme.filter(|s| !s.is_empty()).unwrap_or("https");
    match port {
        Some(p) if p != 0 => format!("{scheme}://{hostname}:{p}{base_path}"),
        _ => format!("{scheme}://{hostname}{base_path}"),
    }
}

/// The URL of the first default preset of a legacy gateway (`spec.gateway` / `spec.aiGateway`).
/// `None` without default preset or when all its URLs are hidden.
fn legacy_url(gateway: Option<&ZoneGateway>) -> Option<String> {
    let preset = gateway?.presets.iter().find(|p| p.default)?;
    let url = preset.urls.iter().find(|u| !u.hidden)?;
    Some(render_url(url.scheme.as_deref(), &url.hostname, url.port, &url.base_path))
}

/// The URL of the first default preset of `type_` (case-insensitive) in `spec.presets[]`, or
/// `None` when there is no such preset or all its URLs are hidden. Presets of other types are
/// ignored.
fn typed_url(presets: &[ZoneTypedPreset], type_: &str) -> Option<String> {
    let preset = presets.iter().find(|p| p.default && p.type_.eq_ignore_ascii_case(type_))?;
    let url = preset.urls.iter().find(|u| !u.hidden)?;
    Some(render_url(url.scheme.as_deref(), &url.hostname, url.port, &url.base_path))
}

/// `Some(value)` unless it is absent or empty.
fn non_empty(value: Option<&str>) -> Option<String> {
    value.filter(|v| !v.is_empty()).map(str::to_string)
}

impl Kind for Zone {
    const ID: KindId = KindId::Zone;
    const VERSION: u32 = 1;
    type Cr = crds::Zone;
    type Record = ZoneRecord;

    fn meta(cr: &crds::Zone) -> &ObjectMeta {
        &cr.metadata
    }

    fn translate(cr: &crds::Zone, _ctx: &Context) -> Result<ZoneRecord, Skip> {
        let meta = Meta::from_object(&cr.metadata)?;
        let visibility = crate::common::required("spec.visibility", &cr.spec.visibility)?;
        let visibility = ZoneVisibility::parse("spec.visibility", visibility)?;
        let spec = &cr.spec;
        let gateway_url = typed_url(&spec.presets, "API").or_else(|| legacy_url(spec.gateway.as_ref()));
        let ai_gateway_url = typed_url(&spec.presets, "AI").or_else(|| legacy_url(spec.ai_gateway.as_ref()));
        let links = cr.status.as_ref().and_then(|s| s.links.as_ref());
        Ok(ZoneRecord {
            meta,
            visibility,
            gateway_url,
            ai_gateway_url,
            issuer_url: non_empty(links.map(|l| l.gateway_issuer.as_str())),
            permissions_url: non_empty(links.and_then(|l| l.permissions_url.as_deref())),
        })
    }

    fn key(rec: &ZoneRecord) -> Key {
        natural::zone(&rec.meta.environment, &rec.meta.name)
    }

    fn scopes(rec: &ZoneRecord, _links: &[Option<Key>]) -> Vec<Scope> {
        vec![Scope::Env { env: rec.meta.environment.clone() }]
    }

    fn created_at(rec: &ZoneRecord) -> Option<Timestamp> {
        rec.meta.creation_timestamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::testing::{ctx, world_object};

    fn zone(env: &str, name: &str) -> ZoneRecord {
        Zone::translate(&world_object::<crds::Zone>("Zone", env, name), &ctx()).unwrap()
    }

    #[test]
    fn world_zones_match_facts() {
        let aws = zone("poc", "aws-eu1");
        assert_eq!(aws.visibility, ZoneVisibility::World);
        assert_eq!(aws.visibility.as_str(), "WORLD");
        assert_eq!(aws.gateway_url.as_deref(), Some("https://api.aws-eu1.poc.example.com/"));
        assert_eq!(aws.ai_gateway_url.as_deref(), Some("https://ai.aws-eu1.poc.example.com/"));
        assert_eq!(aws.issuer_url.as_deref(), Some("https://iris.aws-eu1.poc.example.com/auth/realms/poc"));
        assert_eq!(aws.permissions_url.as_deref(), Some("https://api.aws-eu1.poc.example.com/permissions/v1"));
        assert_eq!(aws.meta.namespace, "poc");
        assert_eq!(Zone::created_at(&aws), Some(Timestamp::parse_rfc3339("2026-02-04T00:37:00Z").unwrap()));

        // Hidden first URL skipped, port rendered.
        let cetus = zone("poc", "caas-cetus");
        assert_eq!(cetus.visibility.as_str(), "ENTERPRISE");
        assert_eq!(cetus.gateway_url.as_deref(), Some("https://api.caas-cetus.poc.example.com:8443/gw"));
        assert_eq!(cetus.ai_gateway_url, None);
        assert_eq!(cetus.issuer_url.as_deref(), Some("https://iris.caas-cetus.poc.example.com/auth/realms/poc"));
        assert_eq!(cetus.permissions_url, None);

        // Only a non-default preset, no status links.
        let lab = zone("poc", "otc-lab");
        assert_eq!((lab.gateway_url, lab.issuer_url, lab.permissions_url), (None, None, None));

        let qa = zone("qa", "aws-eu1");
        assert_eq!(qa.gateway_url.as_deref(), Some("https://api.aws-eu1.qa.example.com/"));
        assert_eq!(qa.ai_gateway_url, None);
        assert_eq!(qa.permissions_url, None);
    }

    #[test]
    fn key_and_scopes() {
        let rec = zone("qa", "aws-eu1");
        assert_eq!(Zone::key(&rec), natural::zone("qa", "aws-eu1"));
        assert_eq!(Zone::key(&rec).parts().unwrap(), vec!["qa", "aws-eu1"]);
        assert_eq!(Zone::scopes(&rec, &[]), vec![Scope::Env { env: "qa".into() }]);
        assert!(Zone::requires(&rec).is_empty());
        assert!(Zone::index_entries(&rec, &[]).is_empty());
    }

    #[test]
    fn all_hidden_default_preset_gives_none_and_scheme_defaults() {
        let mut cr: crds::Zone = world_object("Zone", "poc", "caas-cetus");
        let urls = &mut cr.spec.gateway.as_mut().unwrap().presets[0].urls;
        urls[1].hidden = true;
        assert_eq!(Zone::translate(&cr, &ctx()).unwrap().gateway_url, None);
        let urls = &mut cr.spec.gateway.as_mut().unwrap().presets[0].urls;
        urls[0].hidden = false;
        urls[0].scheme = None;
        urls[0].port = Some(0);
        assert_eq!(Zone::translate(&cr, &ctx()).unwrap().gateway_url.as_deref(), Some("https://gw-legacy.caas-cetus.poc.example.com/"));
    }

    #[test]
    fn typed_presets_take_precedence() {
        let mut cr: crds::Zone = world_object("Zone", "poc", "otc-lab");
        let url = |host: &str, hidden: bool| crds::zone::ZoneTypedPresetUrl {
            hostname: host.into(),
            base_path: "/".into(),
            hidden,
            ..Default::default()
        };
        cr.spec.gateway = None;
        cr.spec.presets = vec![
            ZoneTypedPreset {
                name: "ai".into(),
                type_: "AI".into(),
                default: true,
                urls: vec![url("ai.example.com", false)],
                ..Default::default()
            },
            ZoneTypedPreset {
                name: "other".into(),
                type_: "api".into(),
                default: false,
                urls: vec![url("no.example.com", false)],
                ..Default::default()
            },
            ZoneTypedPreset {
                name: "default".into(),
                type_: "api".into(),
                default: true,
                urls: vec![url("hidden.example.com", true), url("api.example.com", false)],
                ..Default::default()
            },
        ];
        let rec = Zone::translate(&cr, &ctx()).unwrap();
        assert_eq!(rec.gateway_url.as_deref(), Some("https://api.example.com/"));
        assert_eq!(rec.ai_gateway_url.as_deref(), Some("https://ai.example.com/"));

        // Without a default API preset the legacy gateway still answers.
        let mut cr: crds::Zone = world_object("Zone", "poc", "aws-eu1");
        cr.spec.presets =
            vec![ZoneTypedPreset { type_: "AI".into(), default: true, urls: vec![url("ai2.example.com", false)], ..Default::default() }];
        let rec = Zone::translate(&cr, &ctx()).unwrap();
        assert_eq!(rec.gateway_url.as_deref(), Some("https://api.aws-eu1.poc.example.com/"));
        assert_eq!(rec.ai_gateway_url.as_deref(), Some("https://ai2.example.com/"));
    }

    #[test]
    fn emptied_links_clear_values() {
        let mut cr: crds::Zone = world_object("Zone", "poc", "aws-eu1");
        let links = cr.status.as_mut().unwrap().links.as_mut().unwrap();
        links.gateway_issuer.clear();
        links.permissions_url = Some(String::new());
        let rec = Zone::translate(&cr, &ctx()).unwrap();
        assert_eq!((rec.issuer_url, rec.permissions_url), (None, None));
    }

    #[test]
    fn bad_input_is_skipped() {
        let mut cr: crds::Zone = world_object("Zone", "poc", "aws-eu1");
        cr.spec.visibility = "world".into();
        assert_eq!(Zone::translate(&cr, &ctx()).unwrap().visibility, ZoneVisibility::World);
        cr.spec.visibility = "Zone".into();
        assert_eq!(
            Zone::translate(&cr, &ctx()),
            Err(Skip::InvalidEnum { field: "spec.visibility", value: "Zone".into(), expected: "World, Enterprise" })
        );
        cr.spec.visibility.clear();
        assert_eq!(Zone::translate(&cr, &ctx()), Err(Skip::Missing("spec.visibility")));
        let mut cr: crds::Zone = world_object("Zone", "poc", "aws-eu1");
        cr.metadata.namespace = None;
        assert_eq!(Zone::translate(&cr, &ctx()), Err(Skip::Missing("metadata.namespace")));
    }
}
