//! Embedded value types of exposures, subscriptions and approvals, and the enums they use. Objects are registered once by name, from every entity that
//! needs them ([`register`]).
//!
//! Security types carry their owner ([`Owned`]) so that secret fields (`password`,
//! `clientSecret`, `clientKey`) go through [`crate::entity::secret`]: plain values for the owning
//! team, `**********` for obfuscated callers (ARCHITECTURE.md "Viewers and visibility"), resolved when a
//! secret manager is configured ([`crate::secrets`]).

use crate::entity::Builder;
use crate::fields::{boolean, enum_item, enums, field, integer, nullable_string, object_value, object_values, string, string_list};
use crate::secrets::{secret_field, SecretSite};
use async_graphql::dynamic::{Object, TypeRef};
use schema::common::{ApprovalStrategy, Visibility};
use schema::kinds::api_exposure::TokenRequestMethod;
use schema::kinds::api_exposure::{
    ApiExposureFeature, ApiExposureSecurity, ApprovalConfig, BasicAuthCredentials, ExternalIdentityProvider, Failover, Limits,
    Machine2MachineAuthentication, OAuth2ClientCredentials, RateLimit, RateLimitConfig, RateLimitOptions, RateLimitOverride,
    SubscriberRateLimits, Traffic, Upstream,
};
use schema::kinds::api_subscription::M2mAuthMethod;
use schema::kinds::api_subscription::{ApiSubscriptionSecurity, SubscriberMachine2MachineAuthentication};
use schema::kinds::approval_common::{ApprovalAction, ApprovalState};
use schema::kinds::approval_common::{AvailableTransition, DeciderInfo, Decision, RequesterInfo};

/// The deprecation reason of `SubscriberMachine2MachineAuthentication.scopes` (still the
/// requested scopes).
pub const SCOPES_DEPRECATION: &str = "Use `requestedScopes` / `activeScopes` of the subscription.";

/// A value plus the (environment, team) owning the record it belongs to: secret fields below it
/// are shown in plain only to that team.
#[derive(Clone, Debug)]
pub struct Owned<T> {
    /// Environment of the owning record.
    pub env: String,
    /// Owner team (`<group>--<team>`).
    pub team: String,
    /// Global ID of the owning record (what the audit log names).
    pub record: String,
    /// The value.
    pub v: T,
    /// Whether the owning record is a past revision ([`storage::Stored::as_of`]): its secrets
    /// are masked.
    pub historical: bool,
}

impl<T> Owned<T> {
    /// Wraps `v` of the record `record` (a global ID) owned by `(env, team)`; `historical`:
    /// the record is a past revision ([`storage::Stored::as_of`]).
    pub fn new(env: &str, team: &str, record: &str, historical: bool, v: T) -> Owned<T> {
        Owned { env: env.to_string(), team: team.to_string(), record: record.to_string(), v, historical }
    }

    /// A part of the value, owned by the same record.
    pub fn child<U>(&self, v: U) -> Owned<U> {
        Owned { env: self.env.clone(), team: self.team.clone(), record: self.record.clone(), v, historical: self.historical }
    }

    fn site<'a>(&'a self, value: Option<&'a str>) -> SecretSite<'a> {
        SecretSite { env: &self.env, team: &self.team, record: (&*self.record).into(), value, historical: self.historical }
    }
}

/// `ApiExposureFeature` values of a feature list.
pub fn features(f: &[ApiExposureFeature]) -> Vec<&'static str> {
    f.iter().map(|f| f.as_str()).collect()
}

/// Registers the enums of this module's value types.
fn register_enums(builder: &mut Builder) {
    builder.enumeration_of::<ApprovalStrategy>("ApprovalStrategy");
    builder.enumeration_of::<ApprovalStrategy>("ApprovalRequestStrategy");
    builder.enumeration_of::<ApprovalState>("ApprovalState");
    builder.enumeration("ApprovalRequestState", ApprovalState::REQUEST_VALUES);
    builder.enumeration_of::<ApprovalAction>("ApprovalAction");
    builder.enumeration_of::<TokenRequestMethod>("TokenRequestMethod");
    builder.enumeration_of::<ApiExposureFeature>("ApiExposureFeature");
    builder.enumeration_of::<Visibility>("ApiExposureVisibility");
    builder.enumeration_of::<M2mAuthMethod>("ApiSubscriptionM2mAuthMethod");
}

/// Registers every value type and enum of this module, once per build (a later call returns
/// at once).
pub fn register(builder: &mut Builder) {
    if !builder.first_time("values::register") {
        return;
    }
    register_enums(builder);

    let string_type = || TypeRef::named(TypeRef::STRING);
    let string_nn = || TypeRef::named_nn(TypeRef::STRING);
    let strings = || TypeRef::named_nn_list(TypeRef::STRING);
    let int_ = || TypeRef::named(TypeRef::INT);
    let secrets = builder.secret_resolver.clone();

    builder.object(
        Object::new("Upstream").field(field::<Upstream>("url", string_nn(), |u, _| Ok(string(&u.url)))).field(field::<Upstream>(
            "weight",
            TypeRef::named_nn(TypeRef::INT),
            |u, _| Ok(integer(u.weight)),
        )),
    );
    builder.object(
        Object::new("ApprovalConfig")
            .field(field::<ApprovalConfig>("strategy", TypeRef::named_nn("ApprovalStrategy"), |c, _| Ok(enum_item(c.strategy.as_str()))))
            .field(field::<ApprovalConfig>("trustedTeams", TypeRef::named_nn_list_nn(TypeRef::STRING), |c, _| {
                Ok(string_list(&c.trusted_teams))
            })),
    );

    // ---- security (owned) ----
    builder.object(Object::new("ApiExposureSecurity").field(field::<Owned<ApiExposureSecurity>>(
        "m2m",
        TypeRef::named("Machine2MachineAuthentication"),
        |p, _| Ok(p.v.m2m.clone().and_then(|m| object_value(p.child(m)))),
    )));
    builder.object(
        Object::new("Machine2MachineAuthentication")
            .field(field::<Owned<Machine2MachineAuthentication>>("externalIDP", TypeRef::named("ExternalIdentityProvider"), |p, _| {
                Ok(p.v.external_idp.clone().and_then(|x| object_value(p.child(x))))
            }))
            .field(field::<Owned<Machine2MachineAuthentication>>("basic", TypeRef::named("BasicAuthCredentials"), |p, _| {
                Ok(p.v.basic.clone().and_then(|x| object_value(p.child(x))))
            }))
            .field(field::<Owned<Machine2MachineAuthentication>>("scopes", strings(), |p, _| {
                Ok(p.v.scopes.as_deref().and_then(string_list))
            })),
    );
    builder.object(
        Object::new("ExternalIdentityProvider")
            .field(field::<Owned<ExternalIdentityProvider>>("tokenEndpoint", string_nn(), |p, _| Ok(string(&p.v.token_endpoint))))
            .field(field::<Owned<ExternalIdentityProvider>>("tokenRequest", TypeRef::named("TokenRequestMethod"), |p, _| {
                Ok(p.v.token_request.and_then(|t| enum_item(t.as_str())))
            }))
            .field(field::<Owned<ExternalIdentityProvider>>("grantType", string_type(), |p, _| {
                Ok(nullable_string(Some(p.v.grant_type.as_str()).filter(|g| !g.is_empty())))
            }))
            .field(field::<Owned<ExternalIdentityProvider>>("basic", TypeRef::named("BasicAuthCredentials"), |p, _| {
                Ok(p.v.basic.clone().and_then(|x| object_value(p.child(x))))
            }))
            .field(field::<Owned<ExternalIdentityProvider>>("client", TypeRef::named("OAuth2ClientCredentials"), |p, _| {
                Ok(p.v.client.clone().and_then(|x| object_value(p.child(x))))
            })),
    );
    builder.object(
        Object::new("BasicAuthCredentials")
            .field(field::<Owned<BasicAuthCredentials>>("username", string_nn(), |p, _| Ok(string(&p.v.username))))
            // `String!`: a caller who may not read the secret gets "", as in the Go server.
            .field(secret_field::<Owned<BasicAuthCredentials>>("password", string_nn(), Some(""), secrets.clone(), |p| {
                p.site(Some(&p.v.password))
            })),
    );
    builder.object(
        Object::new("OAuth2ClientCredentials")
            .field(field::<Owned<OAuth2ClientCredentials>>("clientId", string_nn(), |p, _| Ok(string(&p.v.client_id))))
            .field(secret_field::<Owned<OAuth2ClientCredentials>>("clientSecret", string_type(), None, secrets.clone(), |p| {
                p.site(Some(p.v.client_secret.as_str()).filter(|v| !v.is_empty()))
            }))
            .field(secret_field::<Owned<OAuth2ClientCredentials>>("clientKey", string_type(), None, secrets.clone(), |p| {
                p.site(Some(p.v.client_key.as_str()).filter(|v| !v.is_empty()))
            })),
    );
    builder.object(Object::new("ApiSubscriptionSecurity").field(field::<Owned<ApiSubscriptionSecurity>>(
        "m2m",
        TypeRef::named("SubscriberMachine2MachineAuthentication"),
        |p, _| Ok(p.v.m2m.clone().and_then(|m| object_value(p.child(m)))),
    )));
    builder.object(
        Object::new("SubscriberMachine2MachineAuthentication")
            .field(field::<Owned<SubscriberMachine2MachineAuthentication>>("client", TypeRef::named("OAuth2ClientCredentials"), |p, _| {
                Ok(p.v.client.clone().and_then(|x| object_value(p.child(x))))
            }))
            .field(field::<Owned<SubscriberMachine2MachineAuthentication>>("basic", TypeRef::named("BasicAuthCredentials"), |p, _| {
                Ok(p.v.basic.clone().and_then(|x| object_value(p.child(x))))
            }))
            .field(
                field::<Owned<SubscriberMachine2MachineAuthentication>>("scopes", strings(), |p, _| {
                    Ok(p.v.scopes.as_deref().and_then(string_list))
                })
                .deprecation(Some(SCOPES_DEPRECATION)),
            ),
    );

    // ---- traffic ----
    builder.object(
        Object::new("Traffic")
            .field(field::<Traffic>("failover", TypeRef::named("Failover"), |t, _| Ok(t.failover.clone().and_then(object_value))))
            .field(field::<Traffic>("rateLimit", TypeRef::named("RateLimit"), |t, _| Ok(t.rate_limit.clone().and_then(object_value)))),
    );
    builder.object(Object::new("Failover").field(field::<Failover>("zones", strings(), |f, _| Ok(string_list(&f.zones)))));
    builder.object(
        Object::new("RateLimit")
            .field(field::<RateLimit>("provider", TypeRef::named("RateLimitConfig"), |r, _| Ok(r.provider.clone().and_then(object_value))))
            .field(field::<RateLimit>("subscriberRateLimit", TypeRef::named("SubscriberRateLimits"), |r, _| {
                Ok(r.subscriber_rate_limit.clone().and_then(object_value))
            })),
    );
    builder.object(
        Object::new("RateLimitConfig")
            .field(field::<RateLimitConfig>("limits", TypeRef::named_nn("Limits"), |c, _| Ok(object_value(c.limits))))
            .field(field::<RateLimitConfig>("options", TypeRef::named("RateLimitOptions"), |c, _| Ok(object_value(c.options)))),
    );
    builder.object(
        Object::new("Limits")
            .field(field::<Limits>("second", int_(), |l, _| Ok(integer(l.second))))
            .field(field::<Limits>("minute", int_(), |l, _| Ok(integer(l.minute))))
            .field(field::<Limits>("hour", int_(), |l, _| Ok(integer(l.hour)))),
    );
    builder.object(
        Object::new("RateLimitOptions")
            .field(field::<RateLimitOptions>("hideClientHeaders", TypeRef::named(TypeRef::BOOLEAN), |o, _| {
                Ok(boolean(o.hide_client_headers))
            }))
            .field(field::<RateLimitOptions>("faultTolerant", TypeRef::named(TypeRef::BOOLEAN), |o, _| Ok(boolean(o.fault_tolerant)))),
    );
    builder.object(
        Object::new("SubscriberRateLimitDefaults")
            .field(field::<Limits>("limits", TypeRef::named_nn("Limits"), |l, _| Ok(object_value(*l)))),
    );
    builder.object(
        Object::new("RateLimitOverrides")
            .field(field::<RateLimitOverride>("subscriber", string_nn(), |o, _| Ok(string(&o.subscriber))))
            .field(field::<RateLimitOverride>("limits", TypeRef::named_nn("Limits"), |o, _| Ok(object_value(o.limits)))),
    );
    builder.object(
        Object::new("SubscriberRateLimits")
            .field(field::<SubscriberRateLimits>("default", TypeRef::named("SubscriberRateLimitDefaults"), |r, _| {
                Ok(r.default.and_then(object_value))
            }))
            .field(field::<SubscriberRateLimits>("overrides", TypeRef::named_nn_list("RateLimitOverrides"), |r, _| {
                Ok(object_values(r.overrides.iter().cloned()))
            })),
    );

    // ---- approvals ----
    builder.object(
        Object::new("RequesterInfo")
            .field(field::<RequesterInfo>("teamName", string_nn(), |r, _| Ok(string(&r.team_name))))
            .field(field::<RequesterInfo>("teamEmail", string_nn(), |r, _| Ok(string(&r.team_email))))
            .field(field::<RequesterInfo>("reason", string_type(), |r, _| Ok(nullable_string(r.reason.as_deref()))))
            .field(field::<RequesterInfo>("applicationName", string_type(), |r, _| Ok(nullable_string(r.application_name.as_deref())))),
    );
    builder.object(
        Object::new("DeciderInfo").field(field::<DeciderInfo>("teamName", string_nn(), |d, _| Ok(string(&d.team_name)))).field(field::<
            DeciderInfo,
        >(
            "teamEmail",
            string_type(),
            |d, _| Ok(nullable_string(d.team_email.as_deref())),
        )),
    );
    builder.object(
        Object::new("Decision")
            .field(field::<Decision>("name", string_nn(), |d, _| Ok(string(&d.name))))
            .field(field::<Decision>("email", string_type(), |d, _| Ok(nullable_string(d.email.as_deref()))))
            .field(field::<Decision>("comment", string_type(), |d, _| Ok(nullable_string(d.comment.as_deref()))))
            .field(field::<Decision>("timestamp", string_type(), |d, _| Ok(d.timestamp.and_then(|t| string(&t.to_rfc3339())))))
            .field(field::<Decision>("resultingState", TypeRef::named("ApprovalState"), |d, _| {
                Ok(d.resulting_state.and_then(|st| enum_item(st.as_str())))
            })),
    );
    builder.object(
        Object::new("AvailableTransition")
            .field(field::<AvailableTransition>("action", TypeRef::named_nn("ApprovalAction"), |t, _| Ok(enum_item(t.action.as_str()))))
            .field(field::<AvailableTransition>("toState", TypeRef::named_nn("ApprovalState"), |t, _| Ok(enum_item(t.to_state.as_str())))),
    );
}

/// A list of feature enum values.
pub fn feature_list(f: &[ApiExposureFeature]) -> Option<async_graphql::dynamic::FieldValue<'static>> {
    enums(&features(f))
}
