//! ApiExposure: an Application exposing an API base path on the
//! gateway. Natural key `(environment, team, application, basePath)`; owned by (and visible to) the
//! team of its namespace; the *active* exposure of a base path is indexed so that subscriptions can
//! link to it.
//!
//! Also home of the value types ApiSubscription shares ([`BasicAuthCredentials`],
//! [`OAuth2ClientCredentials`]), mapped as the Go projector's shared mappers map them.

use crate::common::{self, ApprovalStrategy, Meta, Status, Visibility};
use crate::graphql_enum::graphql_enum;
use crate::keys::{index, natural};
use crate::kind::{Context, Skip};
use crate::kinds::subscription_wiring::{exposure_kind, ExposureWiring};
use crds::api_exposure as cr;
use serde::{Deserialize, Serialize};

/// The ApiExposure kind.
pub struct ApiExposure;

/// A projected ApiExposure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiExposureRecord {
    /// Common metadata; the owner team is `meta.team()` (from `metadata.namespace`).
    pub meta: Meta,
    /// From `status.conditions`; `UNKNOWN` when the CR has no status.
    pub status: Status,
    /// The owner Application's name: label `cp.ei.telekom.de/application` (required, non-empty).
    pub application: String,
    /// `spec.apiBasePath` (required, non-empty).
    pub base_path: String,
    /// `spec.visibility`, matched case-insensitively.
    pub visibility: Visibility,
    /// `status.active`; `false` when the CR has no status.
    pub active: bool,
    /// Computed from security, traffic, upstreams and transformation, in the Go projector's order
    /// (`features` below).
    pub features: Vec<ApiExposureFeature>,
    /// `spec.upstreams[]`, in CR order; `[]` when none.
    pub upstreams: Vec<Upstream>,
    /// `spec.approval`.
    pub approval_config: ApprovalConfig,
    /// `spec.security`; `m2m` is `None` when `spec.security.m2m` is absent.
    pub security: ApiExposureSecurity,
    /// `spec.traffic` without the circuit breaker (which only shows as a feature); both parts
    /// `None` when neither failover nor rate limit is configured.
    pub traffic: Traffic,
}

graphql_enum! {
    /// A feature of an exposure (GraphQL `ApiExposureFeature`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ApiExposureFeature {
        /// Always present: the gateway secures the last mile.
        LastMileSecurity = "LAST_MILE_SECURITY",
        /// `spec.security.m2m.externalIDP` is set.
        ExternalIdp = "EXTERNAL_IDP",
        /// `spec.security.m2m.scopes` is non-empty.
        CustomScopes = "CUSTOM_SCOPES",
        /// `spec.security.m2m.basic` is set.
        BasicAuth = "BASIC_AUTH",
        /// `spec.traffic.rateLimit` is set.
        RateLimit = "RATE_LIMIT",
        /// `spec.traffic.failover` is set (even without zones).
        Failover = "FAILOVER",
        /// `spec.traffic.circuitBreaker` is set (whatever `enabled` says, as the reference does).
        CircuitBreaker = "CIRCUIT_BREAKER",
        /// More than one upstream.
        LoadBalancing = "LOAD_BALANCING",
        /// `spec.transformation` is set.
        HeaderTransformation = "HEADER_TRANSFORMATION",
    }
}

/// `spec.upstreams[]` (GraphQL `Upstream`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upstream {
    /// `spec.upstreams[].url`.
    pub url: String,
    /// `spec.upstreams[].weight`; `0` when absent.
    pub weight: i64,
}

/// `spec.approval` (GraphQL `ApprovalConfig`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalConfig {
    /// `spec.approval.strategy`, matched case-insensitively.
    pub strategy: ApprovalStrategy,
    /// `spec.approval.trustedTeams[]`; `[]` when absent.
    pub trusted_teams: Vec<String>,
}

impl ApprovalConfig {
    /// From `spec.approval` of an ApiExposure, EventExposure or AgenticExposure (one CRD type).
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for a strategy other than `Auto`, `Simple` or `FourEyes`.
    pub fn from_cr(approval: &cr::ApprovalConfig) -> Result<ApprovalConfig, Skip> {
        Ok(ApprovalConfig {
            strategy: ApprovalStrategy::parse("spec.approval.strategy", &approval.strategy)?,
            trusted_teams: approval.trusted_teams.clone(),
        })
    }
}

/// `spec.security` of an exposure (GraphQL `ApiExposureSecurity`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiExposureSecurity {
    /// `spec.security.m2m`; `None` when `spec.security` or its `m2m` is absent.
    pub m2m: Option<Machine2MachineAuthentication>,
}

/// `spec.security.m2m` of an exposure (GraphQL `Machine2MachineAuthentication`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine2MachineAuthentication {
    /// `spec.security.m2m.externalIDP`; `None` when absent.
    pub external_idp: Option<ExternalIdentityProvider>,
    /// `spec.security.m2m.basic`; `None` when absent.
    pub basic: Option<BasicAuthCredentials>,
    /// `spec.security.m2m.scopes[]`; `None` when absent or empty.
    pub scopes: Option<Vec<String>>,
}

/// `spec.security.m2m.externalIDP` (GraphQL `ExternalIdentityProvider`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalIdentityProvider {
    /// `…externalIDP.tokenEndpoint`.
    pub token_endpoint: String,
    /// `…externalIDP.tokenRequest`, matched case-insensitively; `None` when empty.
    pub token_request: Option<TokenRequestMethod>,
    /// `…externalIDP.grantType` verbatim (e.g. `client_credentials`); `""` when empty.
    pub grant_type: String,
    /// `…externalIDP.basic`; `None` when absent.
    pub basic: Option<BasicAuthCredentials>,
    /// `…externalIDP.client`; `None` when absent.
    pub client: Option<OAuth2ClientCredentials>,
}

graphql_enum! {
    /// `…externalIDP.tokenRequest` (GraphQL `TokenRequestMethod`, lower-case values).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum TokenRequestMethod {
        /// `client_secret_basic`.
        ClientSecretBasic = "client_secret_basic",
        /// `client_secret_post`.
        ClientSecretPost = "client_secret_post",
    }
}

impl TokenRequestMethod {
    /// Parses the CR value case-insensitively.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse(field: &'static str, value: &str) -> Result<TokenRequestMethod, Skip> {
        common::parse_enum(
            field,
            value,
            "client_secret_basic, client_secret_post",
            &[("client_secret_basic", TokenRequestMethod::ClientSecretBasic), ("client_secret_post", TokenRequestMethod::ClientSecretPost)],
        )
    }
}

/// Basic credentials (GraphQL `BasicAuthCredentials`): `…basic` of exposures and
/// subscriptions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BasicAuthCredentials {
    /// `…basic.username`.
    pub username: String,
    /// `…basic.password`: a secret or a secret reference `$<…>` (resolved at query time).
    pub password: String,
}

impl BasicAuthCredentials {
    /// Maps the CR type.
    pub fn from_cr(b: &cr::BasicAuth) -> BasicAuthCredentials {
        BasicAuthCredentials { username: b.username.clone(), password: b.password.clone() }
    }
}

/// OAuth2 client credentials (GraphQL `OAuth2ClientCredentials`): `…externalIDP.client` of
/// exposures, `spec.security.m2m.client` of subscriptions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuth2ClientCredentials {
    /// `…client.clientId`.
    pub client_id: String,
    /// `…client.clientSecret` (a secret or a reference `$<…>`); `""` when absent.
    pub client_secret: String,
    /// `…client.clientKey`; `""` when absent.
    pub client_key: String,
}

impl OAuth2ClientCredentials {
    /// Maps the CR type (`refreshToken` is not projected).
    pub fn from_cr(c: &cr::ClientCredentials) -> OAuth2ClientCredentials {
        OAuth2ClientCredentials {
            client_id: c.client_id.clone(),
            client_secret: c.client_secret.clone().unwrap_or_default(),
            client_key: c.client_key.clone().unwrap_or_default(),
        }
    }
}

/// `spec.traffic` of an exposure (GraphQL `Traffic`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Traffic {
    /// `spec.traffic.failover`; `None` when absent.
    pub failover: Option<Failover>,
    /// `spec.traffic.rateLimit`; `None` when absent.
    pub rate_limit: Option<RateLimit>,
}

/// `spec.traffic.failover` (GraphQL `Failover`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failover {
    /// Names of `spec.traffic.failover.zones[]`; `[]` when none.
    pub zones: Vec<String>,
}

/// `spec.traffic.rateLimit` (GraphQL `RateLimit`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimit {
    /// `spec.traffic.rateLimit.provider`; `None` when absent.
    pub provider: Option<RateLimitConfig>,
    /// `spec.traffic.rateLimit.subscriberRateLimit`; `None` when absent.
    pub subscriber_rate_limit: Option<SubscriberRateLimits>,
}

/// `spec.traffic.rateLimit.provider` (GraphQL `RateLimitConfig`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimitConfig {
    /// `…provider.limits`.
    pub limits: Limits,
    /// `…provider.options`; all `false` when absent.
    pub options: RateLimitOptions,
}

/// Request limits per window (GraphQL `Limits`); `0` = not limited (absent in the CR).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `…limits.second`, requests per second; `0` when absent.
    pub second: i64,
    /// `…limits.minute`, requests per minute; `0` when absent.
    pub minute: i64,
    /// `…limits.hour`, requests per hour; `0` when absent.
    pub hour: i64,
}

impl Limits {
    fn from_cr(l: &cr::Limits) -> Limits {
        Limits { second: l.second.unwrap_or(0), minute: l.minute.unwrap_or(0), hour: l.hour.unwrap_or(0) }
    }
}

/// `spec.traffic.rateLimit.provider.options` (GraphQL `RateLimitOptions`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimitOptions {
    /// `…options.hideClientHeaders`; `false` when absent (the CRD default).
    pub hide_client_headers: bool,
    /// `…options.faultTolerant`; when absent `true` inside a present `options` block (the CRD
    /// default), `false` when the whole block is absent (as the reference).
    pub fault_tolerant: bool,
}

/// `spec.traffic.rateLimit.subscriberRateLimit` (GraphQL `SubscriberRateLimits`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriberRateLimits {
    /// `…subscriberRateLimit.default.limits` (GraphQL `default { limits }`); `None` when absent.
    pub default: Option<Limits>,
    /// `…subscriberRateLimit.overrides[]`; `[]` when none.
    pub overrides: Vec<RateLimitOverride>,
}

/// `…subscriberRateLimit.overrides[]` (GraphQL `RateLimitOverrides`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimitOverride {
    /// `…overrides[].subscriber`: the subscriber's client id.
    pub subscriber: String,
    /// `…overrides[].limits`.
    pub limits: Limits,
}

fn security(spec: &cr::ApiExposureSpec) -> Result<ApiExposureSecurity, Skip> {
    let Some(m2m) = spec.security.as_ref().and_then(|s| s.m2m.as_ref()) else {
        return Ok(ApiExposureSecurity { m2m: None });
    };
    let external_idp = match &m2m.external_idp {
        None => None,
        Some(idp) => Some(ExternalIdentityProvider {
            token_endpoint: idp.token_endpoint.clone(),
            token_request: match idp.token_request.as_str() {
                "" => None,
                v => Some(TokenRequestMethod::parse("spec.security.m2m.externalIDP.tokenRequest", v)?),
            },
            grant_type: idp.grant_type.clone(),
            basic: idp.basic.as_ref().map(BasicAuthCredentials::from_cr),
            client: idp.client.as_ref().map(OAuth2ClientCredentials::from_cr),
        }),
    };
    Ok(ApiExposureSecurity {
        m2m: Some(Machine2MachineAuthentication {
            external_idp,
            basic: m2m.basic.as_ref().map(BasicAuthCredentials::from_cr),
            scopes: (!m2m.scopes.is_empty()).then(|| m2m.scopes.clone()),
        }),
    })
}

/// `spec.traffic` mapped to its record (also used by AgenticExposure, whose CRD shares the
/// type): the circuit breaker only shows as a feature.
pub(crate) fn traffic(t: &cr::Traffic) -> Traffic {
    Traffic {
        failover: t.failover.as_ref().map(|f| Failover { zones: f.zones.iter().map(|z| z.name.clone()).collect() }),
        rate_limit: t.rate_limit.as_ref().map(|r| RateLimit {
            provider: r.provider.as_ref().map(|p| RateLimitConfig {
                limits: Limits::from_cr(&p.limits),
                options: match &p.options {
                    None => RateLimitOptions::default(),
                    Some(o) => RateLimitOptions {
                        hide_client_headers: o.hide_client_headers.unwrap_or(false),
                        fault_tolerant: o.fault_tolerant.unwrap_or(true),
                    },
                },
            }),
            subscriber_rate_limit: r.subscriber_rate_limit.as_ref().map(|s| SubscriberRateLimits {
                default: s.default.as_ref().map(|d| Limits::from_cr(&d.limits)),
                overrides: s
                    .overrides
                    .iter()
                    .map(|o| RateLimitOverride { subscriber: o.subscriber.clone(), limits: Limits::from_cr(&o.limits) })
                    .collect(),
            }),
        }),
    }
}

/// The features list, in the Go projector's order (the order below).
fn features(spec: &cr::ApiExposureSpec) -> Vec<ApiExposureFeature> {
    use ApiExposureFeature as F;
    let m2m = spec.security.as_ref().and_then(|s| s.m2m.as_ref());
    let t = &spec.traffic;
    [
        (F::LastMileSecurity, true),
        (F::ExternalIdp, m2m.is_some_and(|m| m.external_idp.is_some())),
        (F::CustomScopes, m2m.is_some_and(|m| !m.scopes.is_empty())),
        (F::BasicAuth, m2m.is_some_and(|m| m.basic.is_some())),
        (F::RateLimit, t.rate_limit.is_some()),
        (F::Failover, t.failover.is_some()),
        (F::CircuitBreaker, t.circuit_breaker.is_some()),
        (F::LoadBalancing, spec.upstreams.len() > 1),
        (F::HeaderTransformation, spec.transformation.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, on)| on.then_some(f))
    .collect()
}

/// Scopes and indexes of the ApiExposure family (see [`ExposureWiring`]).
const WIRING: ExposureWiring =
    ExposureWiring { active: index::API_EXPOSURE_ACTIVE_BY_BASE_PATH, subscriptions_by_key: index::API_SUBSCRIPTION_BY_BASE_PATH };

/// The translation of an ApiExposure ([`Kind::translate`](crate::kind::Kind::translate)).
fn translate(cr: &crds::ApiExposure, _ctx: &Context) -> Result<ApiExposureRecord, Skip> {
    let meta = Meta::from_object(&cr.metadata)?;
    let application =
        common::required("metadata.labels[cp.ei.telekom.de/application]", common::label(&cr.metadata, common::APPLICATION_LABEL))?
            .to_string();
    let spec = &cr.spec;
    let base_path = common::required("spec.apiBasePath", &spec.api_base_path)?.to_string();
    let visibility = Visibility::parse("spec.visibility", &spec.visibility)?;
    let approval_config = ApprovalConfig::from_cr(&spec.approval)?;
    let security = security(spec)?;
    let (status, active) = match &cr.status {
        Some(s) => (common::status_from_conditions(&s.conditions), s.active),
        None => (common::status_from_conditions(&[]), false),
    };
    Ok(ApiExposureRecord {
        meta,
        status,
        application,
        base_path,
        visibility,
        active,
        features: features(spec),
        upstreams: spec.upstreams.iter().map(|u| Upstream { url: u.url.clone(), weight: u.weight.unwrap_or(0) }).collect(),
        approval_config,
        security,
        traffic: traffic(&spec.traffic),
    })
}

exposure_kind!(ApiExposure, ApiExposureRecord {
    const VERSION: u32 = 1;
    wiring: WIRING,
    natural_key: natural::api_exposure,
    target: base_path,
    translate: translate,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::keys::Key;
    use crate::kind::{Kind, KindId, Parent, Scope};
    use crate::kinds::testing::{ctx, world_object};
    use crate::time::Timestamp;
    use ApiExposureFeature as F;

    fn exposure(env: &str, name: &str) -> crds::ApiExposure {
        world_object("ApiExposure", env, name)
    }

    fn translate(cr: &crds::ApiExposure) -> Result<ApiExposureRecord, Skip> {
        ApiExposure::translate(cr, &ctx())
    }

    #[test]
    fn checkout_api_traffic_and_load_balancing() {
        let rec = translate(&exposure("poc", "checkout-api--payments-checkout-v1")).unwrap();
        assert_eq!(rec.meta.namespace, "poc--payments--checkout");
        assert_eq!(rec.meta.team(), "payments--checkout");
        assert_eq!(rec.application, "checkout-api");
        assert_eq!(rec.base_path, "/payments/checkout/v1");
        assert_eq!(rec.visibility, Visibility::World);
        assert!(rec.active);
        assert_eq!(rec.status.phase, StatusPhase::Ready);
        assert_eq!(rec.status.message, "Successfully provisioned subresources");
        assert_eq!(rec.features, vec![F::LastMileSecurity, F::RateLimit, F::Failover, F::CircuitBreaker, F::LoadBalancing]);
        let names: Vec<_> = rec.features.iter().map(|f| f.as_str()).collect();
        assert_eq!(names, ["LAST_MILE_SECURITY", "RATE_LIMIT", "FAILOVER", "CIRCUIT_BREAKER", "LOAD_BALANCING"]);
        assert_eq!(
            rec.upstreams,
            vec![
                Upstream { url: "https://checkout-api-blue.payments.poc.example.com/orders".into(), weight: 70 },
                Upstream { url: "https://checkout-api-green.payments.poc.example.com/orders".into(), weight: 30 },
            ]
        );
        assert_eq!(
            rec.approval_config,
            ApprovalConfig { strategy: ApprovalStrategy::Simple, trusted_teams: vec!["payments--checkout".into()] }
        );
        assert_eq!(rec.security, ApiExposureSecurity { m2m: None });
        assert_eq!(
            rec.traffic,
            Traffic {
                failover: Some(Failover { zones: vec!["caas-cetus".into()] }),
                rate_limit: Some(RateLimit {
                    provider: Some(RateLimitConfig {
                        limits: Limits { second: 50, minute: 1000, hour: 20000 },
                        options: RateLimitOptions { hide_client_headers: false, fault_tolerant: true },
                    }),
                    subscriber_rate_limit: Some(SubscriberRateLimits {
                        default: Some(Limits { second: 0, minute: 100, hour: 0 }),
                        overrides: vec![RateLimitOverride {
                            subscriber: "logistics--parcel-tracking--parcel-tracker".into(),
                            limits: Limits { second: 0, minute: 300, hour: 0 },
                        }],
                    }),
                }),
            }
        );
        assert_eq!(ApiExposure::created_at(&rec), Some(Timestamp::parse_rfc3339("2026-03-28T11:44:00Z").unwrap()));
    }

    #[test]
    fn checkout_api_keys_links_and_scopes() {
        let rec = translate(&exposure("poc", "checkout-api--payments-checkout-v1")).unwrap();
        assert_eq!(ApiExposure::key(&rec), Key::new(&["poc", "payments--checkout", "checkout-api", "/payments/checkout/v1"]));
        assert_eq!(
            ApiExposure::requires(&rec),
            vec![Parent { kind: KindId::Application, key: Key::new(&["poc", "payments--checkout", "checkout-api"]) }]
        );
        assert!(ApiExposure::links(&rec).is_empty());
        assert_eq!(ApiExposure::scopes(&rec, &[]), vec![Scope::Team { env: "poc".into(), team: "payments--checkout".into() }]);
        let bp = Key::new(&["poc", "/payments/checkout/v1"]);
        assert_eq!(ApiExposure::index_entries(&rec, &[]), vec![(index::API_EXPOSURE_ACTIVE_BY_BASE_PATH, bp.clone())]);
        assert_eq!(ApiExposure::dependents(&rec, &[]), vec![(index::API_SUBSCRIPTION_BY_BASE_PATH, bp)]);
    }

    #[test]
    fn inactive_duplicate_is_not_indexed_as_active_but_still_relinks_subscriptions() {
        let rec = translate(&exposure("poc", "poc--payments--ledger/ledger-core--payments-checkout-v1")).unwrap();
        assert!(!rec.active);
        assert_eq!(rec.status.phase, StatusPhase::Pending);
        assert_eq!(rec.features, vec![F::LastMileSecurity]);
        assert_eq!(rec.traffic, Traffic::default());
        assert!(ApiExposure::index_entries(&rec, &[]).is_empty());
        assert_eq!(
            ApiExposure::dependents(&rec, &[]),
            vec![(index::API_SUBSCRIPTION_BY_BASE_PATH, Key::new(&["poc", "/payments/checkout/v1"]))]
        );
    }

    #[test]
    fn ledger_basic_auth_transformation_and_four_eyes() {
        let rec = translate(&exposure("poc", "ledger-core--payments-ledger-v2")).unwrap();
        assert_eq!(rec.features, vec![F::LastMileSecurity, F::BasicAuth, F::HeaderTransformation]);
        assert_eq!(rec.approval_config.strategy, ApprovalStrategy::FourEyes);
        assert_eq!(rec.approval_config.strategy.as_str(), "FOUR_EYES");
        assert_eq!(rec.approval_config.trusted_teams, vec!["payments--checkout", "payments--ledger"]);
        let m2m = rec.security.m2m.unwrap();
        assert_eq!(m2m.external_idp, None);
        assert_eq!(m2m.scopes, None);
        let basic = m2m.basic.unwrap();
        assert_eq!(basic.username, "ledger-gw");
        assert_eq!(basic.password, "$<poc:payments--ledger:ledger-core:externalSecrets/ledger-gw/password:df1a02fad1>");
        assert_eq!(rec.visibility, Visibility::Enterprise);
    }

    #[test]
    fn parcel_tracker_external_idp() {
        let rec = translate(&exposure("poc", "parcel-tracker--logistics-parcels-v1")).unwrap();
        assert_eq!(rec.visibility, Visibility::Zone);
        assert_eq!(rec.approval_config.strategy, ApprovalStrategy::Auto);
        assert_eq!(rec.features, vec![F::LastMileSecurity, F::ExternalIdp]);
        let idp = rec.security.m2m.unwrap().external_idp.unwrap();
        assert_eq!(
            idp,
            ExternalIdentityProvider {
                token_endpoint: "https://idp.partner.example.com/oauth2/token".into(),
                token_request: Some(TokenRequestMethod::ClientSecretPost),
                grant_type: "client_credentials".into(),
                basic: None,
                client: Some(OAuth2ClientCredentials {
                    client_id: "parcel-gw".into(),
                    client_secret: "$<poc:logistics--parcel-tracking:parcel-tracker:externalSecrets/partner-idp/clientSecret:ec6e829064>"
                        .into(),
                    client_key: String::new(),
                }),
            }
        );
    }

    #[test]
    fn fleet_telemetry_custom_scopes_and_subscriber_rate_limit() {
        let rec = translate(&exposure("poc", "fleet-telemetry--logistics-fleet-positions-v1")).unwrap();
        assert_eq!(rec.features, vec![F::LastMileSecurity, F::CustomScopes, F::RateLimit]);
        assert_eq!(rec.security.m2m.unwrap().scopes, Some(vec!["fleet:read".into(), "fleet:history".into()]));
        let rate = rec.traffic.rate_limit.unwrap();
        assert_eq!(rate.provider, None);
        assert_eq!(
            rate.subscriber_rate_limit,
            Some(SubscriberRateLimits { default: Some(Limits { second: 5, minute: 200, hour: 0 }), overrides: vec![] })
        );
        assert_eq!(rec.traffic.failover, None);
        assert_eq!(rec.meta.team(), "logistics--fleet");
    }

    #[test]
    fn qa_exposure_keys_stay_in_qa() {
        let rec = translate(&exposure("qa", "checkout-api--payments-checkout-v1")).unwrap();
        assert_eq!(ApiExposure::key(&rec), Key::new(&["qa", "payments--checkout", "checkout-api", "/payments/checkout/v1"]));
        assert_eq!(ApiExposure::index_entries(&rec, &[])[0].1, Key::new(&["qa", "/payments/checkout/v1"]));
        assert_eq!(rec.features, vec![F::LastMileSecurity]);
    }

    #[test]
    fn options_block_applies_crd_defaults() {
        let mut cr = exposure("poc", "checkout-api--payments-checkout-v1");
        let provider = cr.spec.traffic.rate_limit.as_mut().unwrap().provider.as_mut().unwrap();
        provider.options = Some(Default::default());
        let opts = translate(&cr).unwrap().traffic.rate_limit.unwrap().provider.unwrap().options;
        assert_eq!(opts, RateLimitOptions { hide_client_headers: false, fault_tolerant: true });
        cr.spec.traffic.rate_limit.as_mut().unwrap().provider.as_mut().unwrap().options = None;
        let opts = translate(&cr).unwrap().traffic.rate_limit.unwrap().provider.unwrap().options;
        assert_eq!(opts, RateLimitOptions::default());
    }

    #[test]
    fn no_status_is_unknown_and_inactive() {
        let mut cr = exposure("poc", "checkout-api--payments-checkout-v1");
        cr.status = None;
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.status.phase, rec.active), (StatusPhase::Unknown, false));
        assert!(ApiExposure::index_entries(&rec, &[]).is_empty());
    }

    #[test]
    fn missing_or_empty_application_label_is_skipped() {
        let mut cr = exposure("poc", "checkout-api--payments-checkout-v1");
        let missing = Skip::Missing("metadata.labels[cp.ei.telekom.de/application]");
        cr.metadata.labels.as_mut().unwrap().insert(common::APPLICATION_LABEL.into(), String::new());
        assert_eq!(translate(&cr), Err(missing.clone()));
        cr.metadata.labels.as_mut().unwrap().remove(common::APPLICATION_LABEL);
        assert_eq!(translate(&cr), Err(missing));
    }

    #[test]
    fn bad_input_is_skipped_with_its_reason() {
        let base = exposure("poc", "parcel-tracker--logistics-parcels-v1");

        let mut cr = base.clone();
        cr.spec.api_base_path.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.apiBasePath")));

        let mut cr = base.clone();
        cr.metadata.namespace = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.namespace")));

        let mut cr = base.clone();
        cr.spec.visibility = "Galaxy".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.visibility", .. })));

        let mut cr = base.clone();
        cr.spec.visibility = "zone".into();
        cr.spec.approval.strategy = "FOUREYES".into();
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.visibility, rec.approval_config.strategy), (Visibility::Zone, ApprovalStrategy::FourEyes));

        let mut cr = base.clone();
        cr.spec.approval.strategy = "Manual".into();
        assert_eq!(
            translate(&cr),
            Err(Skip::InvalidEnum { field: "spec.approval.strategy", value: "Manual".into(), expected: "Auto, Simple, FourEyes" })
        );

        let mut cr = base;
        let idp = cr.spec.security.as_mut().unwrap().m2m.as_mut().unwrap().external_idp.as_mut().unwrap();
        idp.token_request = "private_key_jwt".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.security.m2m.externalIDP.tokenRequest", .. })));
    }
}
