//! `api.cp.ei.telekom.de/v1` `ApiExposure` (CRD `api.cp.ei.telekom.de_apiexposures.yaml`).
//!
//! Also home of the credential types ApiSubscription shares with it where the two CRDs agree
//! ([`BasicAuth`], [`ClientCredentials`]).

use crate::common::{Condition, ObjectRef};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// `spec` of an ApiExposure.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(group = "api.cp.ei.telekom.de", version = "v1", kind = "ApiExposure", namespaced, status = "ApiExposureStatus", schema = "disabled")]
#[serde(rename_all = "camelCase")]
pub struct ApiExposureSpec {
    /// `spec.apiBasePath` (required by the CRD), e.g. `/payments/checkout/v1`.
    pub api_base_path: String,
    /// `spec.upstreams[]` (required by the CRD).
    pub upstreams: Vec<Upstream>,
    /// `spec.visibility` (required by the CRD): `World`, `Zone` or `Enterprise`.
    pub visibility: String,
    /// `spec.approval` (required by the CRD).
    pub approval: ApprovalConfig,
    /// `spec.zone` (required by the CRD): the zone the API is exposed in.
    pub zone: ObjectRef,
    /// `spec.traffic` (required by the CRD; `{}` when no traffic feature is configured).
    pub traffic: Traffic,
    /// `spec.security` (optional).
    #[serde(default)]
    pub security: Option<Security>,
    /// `spec.transformation` (optional).
    #[serde(default)]
    pub transformation: Option<Transformation>,
}

/// `spec.upstreams[]`: one backend of the exposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Upstream {
    /// `spec.upstreams[].url` (required by the CRD).
    pub url: String,
    /// `spec.upstreams[].weight` (optional): load-balancing weight.
    #[serde(default)]
    pub weight: Option<i64>,
}

/// `spec.approval`: how subscriptions to the exposure are approved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalConfig {
    /// `spec.approval.strategy` (required by the CRD, defaulted to `Auto` by the API server and
    /// so here too): `Auto`, `Simple` or `FourEyes`.
    #[serde(default = "default_strategy")]
    pub strategy: String,
    /// `spec.approval.trustedTeams[]` (optional): teams whose subscriptions are auto-approved.
    #[serde(default)]
    pub trusted_teams: Vec<String>,
}

fn default_strategy() -> String {
    "Auto".to_string()
}

/// `spec.security` of an ApiExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Security {
    /// `spec.security.m2m` (optional): machine-to-machine authentication towards the upstream.
    #[serde(default)]
    pub m2m: Option<Machine2MachineAuthentication>,
}

/// `spec.security.m2m` of an ApiExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine2MachineAuthentication {
    /// `spec.security.m2m.externalIDP` (optional).
    #[serde(default, rename = "externalIDP")]
    pub external_idp: Option<ExternalIdentityProvider>,
    /// `spec.security.m2m.basic` (optional).
    #[serde(default)]
    pub basic: Option<BasicAuth>,
    /// `spec.security.m2m.scopes[]` (optional).
    #[serde(default)]
    pub scopes: Vec<String>,
    /// `spec.security.m2m.claims` (optional; not projected).
    #[serde(default)]
    pub claims: Option<Claims>,
}

/// `spec.security.m2m.externalIDP`: an external identity provider the gateway fetches tokens
/// from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalIdentityProvider {
    /// `spec.security.m2m.externalIDP.tokenEndpoint` (required by the CRD, a URI).
    pub token_endpoint: String,
    /// `spec.security.m2m.externalIDP.tokenRequest` (required by the CRD):
    /// `client_secret_basic` or `client_secret_post`.
    pub token_request: String,
    /// `spec.security.m2m.externalIDP.grantType` (required by the CRD): `client_credentials`,
    /// `authorization_code`, `password` or `refresh_token`.
    pub grant_type: String,
    /// `spec.security.m2m.externalIDP.basic` (optional).
    #[serde(default)]
    pub basic: Option<BasicAuth>,
    /// `spec.security.m2m.externalIDP.client` (optional).
    #[serde(default)]
    pub client: Option<ClientCredentials>,
}

/// Basic credentials: `spec.security.m2m.basic` and `spec.security.m2m.externalIDP.basic` of an
/// ApiExposure, `spec.security.m2m.basic` of an ApiSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BasicAuth {
    /// `…basic.username` (required by the CRD).
    pub username: String,
    /// `…basic.password` (required by the CRD; usually a secret reference `$<…>`).
    pub password: String,
}

/// OAuth2 client credentials: `spec.security.m2m.externalIDP.client` of an ApiExposure,
/// `spec.security.m2m.client` of an ApiSubscription.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCredentials {
    /// `…client.clientId` (required by the CRD).
    pub client_id: String,
    /// `…client.clientSecret` (optional; usually a secret reference `$<…>`).
    #[serde(default)]
    pub client_secret: Option<String>,
    /// `…client.clientKey` (optional).
    #[serde(default)]
    pub client_key: Option<String>,
    /// `…client.refreshToken` (optional; not projected).
    #[serde(default)]
    pub refresh_token: Option<String>,
}

/// `spec.security.m2m.claims` (not projected).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// `spec.security.m2m.claims.aud` (optional).
    #[serde(default)]
    pub aud: Option<AudienceClaim>,
}

/// `spec.security.m2m.claims.aud`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AudienceClaim {
    /// `spec.security.m2m.claims.aud.value` (optional).
    #[serde(default)]
    pub value: Option<String>,
    /// `spec.security.m2m.claims.aud.valueFrom` (optional): `ProviderClientId`,
    /// `ConsumerClientId` or `BasePath`.
    #[serde(default)]
    pub value_from: Option<String>,
}

/// `spec.traffic` of an ApiExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Traffic {
    /// `spec.traffic.failover` (optional).
    #[serde(default)]
    pub failover: Option<Failover>,
    /// `spec.traffic.rateLimit` (optional).
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
    /// `spec.traffic.circuitBreaker` (optional).
    #[serde(default)]
    pub circuit_breaker: Option<CircuitBreaker>,
}

/// `spec.traffic.failover` of an ApiExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Failover {
    /// `spec.traffic.failover.zones[]` (optional): zones taking over when the primary fails.
    #[serde(default)]
    pub zones: Vec<ObjectRef>,
}

/// `spec.traffic.circuitBreaker`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CircuitBreaker {
    /// `spec.traffic.circuitBreaker.enabled` (optional).
    #[serde(default)]
    pub enabled: Option<bool>,
}

/// `spec.traffic.rateLimit`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    /// `spec.traffic.rateLimit.provider` (optional): limits protecting the provider.
    #[serde(default)]
    pub provider: Option<ProviderRateLimit>,
    /// `spec.traffic.rateLimit.subscriberRateLimit` (optional): limits per subscriber.
    #[serde(default)]
    pub subscriber_rate_limit: Option<SubscriberRateLimit>,
}

/// `spec.traffic.rateLimit.provider`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderRateLimit {
    /// `spec.traffic.rateLimit.provider.limits` (required by the CRD).
    pub limits: Limits,
    /// `spec.traffic.rateLimit.provider.options` (optional).
    #[serde(default)]
    pub options: Option<RateLimitOptions>,
}

/// Request limits per time window (`…limits`); each absent window is unlimited.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// `…limits.second` (optional): requests per second.
    #[serde(default)]
    pub second: Option<i64>,
    /// `…limits.minute` (optional): requests per minute.
    #[serde(default)]
    pub minute: Option<i64>,
    /// `…limits.hour` (optional): requests per hour.
    #[serde(default)]
    pub hour: Option<i64>,
}

/// `spec.traffic.rateLimit.provider.options`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RateLimitOptions {
    /// `…options.hideClientHeaders` (optional; CRD default `false`).
    #[serde(default)]
    pub hide_client_headers: Option<bool>,
    /// `…options.faultTolerant` (optional; CRD default `true`).
    #[serde(default)]
    pub fault_tolerant: Option<bool>,
}

/// `spec.traffic.rateLimit.subscriberRateLimit`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscriberRateLimit {
    /// `spec.traffic.rateLimit.subscriberRateLimit.default` (optional): limits of every
    /// subscriber without an override.
    #[serde(default)]
    pub default: Option<SubscriberRateLimitDefault>,
    /// `spec.traffic.rateLimit.subscriberRateLimit.overrides[]` (optional).
    #[serde(default)]
    pub overrides: Vec<RateLimitOverride>,
}

/// `spec.traffic.rateLimit.subscriberRateLimit.default`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SubscriberRateLimitDefault {
    /// `…default.limits` (required by the CRD).
    pub limits: Limits,
}

/// `spec.traffic.rateLimit.subscriberRateLimit.overrides[]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RateLimitOverride {
    /// `…overrides[].subscriber` (required by the CRD): the subscriber's client id.
    pub subscriber: String,
    /// `…overrides[].limits` (required by the CRD).
    pub limits: Limits,
}

/// `spec.transformation`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Transformation {
    /// `spec.transformation.request` (optional).
    #[serde(default)]
    pub request: Option<RequestTransformation>,
}

/// `spec.transformation.request`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestTransformation {
    /// `spec.transformation.request.headers` (optional).
    #[serde(default)]
    pub headers: Option<HeaderTransformation>,
}

/// `spec.transformation.request.headers`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HeaderTransformation {
    /// `spec.transformation.request.headers.add[]` (optional), `Name: value` strings.
    #[serde(default)]
    pub add: Vec<String>,
    /// `spec.transformation.request.headers.remove[]` (optional), header names.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// `status` of an ApiExposure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiExposureStatus {
    /// `status.active` (required by the CRD): whether this is the one active exposure of its
    /// base path (oldest wins).
    pub active: bool,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// `status.route` (optional).
    #[serde(default)]
    pub route: Option<ObjectRef>,
    /// `status.proxyRoutes[]` (optional).
    #[serde(default)]
    pub proxy_routes: Vec<ObjectRef>,
    /// `status.failoverRoutes[]` (optional).
    #[serde(default)]
    pub failover_routes: Vec<ObjectRef>,
}
