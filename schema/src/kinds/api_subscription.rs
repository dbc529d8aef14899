//! ApiSubscription (scopes: `requested_scopes` from the spec, `active_scopes` from the newer
//! `status.activeScopes`): an Application subscribing to
//! an API base path. Natural key `(environment, namespace, name)`; owned by (and visible to) the
//! team of its namespace. Its target is the *active* ApiExposure of the same environment and base
//! path, linked by the writer; while there is none the record is written without target and
//! retried (ARCHITECTURE.md "References by natural key").

use crate::common::{self, Meta, Status};
use crate::graphql_enum::graphql_enum;
use crate::keys::index;
use crate::kind::{Context, KindId, Skip};
use crate::kinds::api_exposure::{BasicAuthCredentials, OAuth2ClientCredentials};
use crate::kinds::subscription_wiring::{subscription_kind, SubscriptionWiring};
use serde::{Deserialize, Serialize};

/// The ApiSubscription kind.
pub struct ApiSubscription;

/// A projected ApiSubscription.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiSubscriptionRecord {
    /// Common metadata; the owner team is `meta.team()` (from `metadata.namespace`).
    pub meta: Meta,
    /// From `status.conditions`; `UNKNOWN` when the CR has no status.
    pub status: Status,
    /// The owner Application's name: `spec.requestor.application.name` (required, non-empty).
    pub application: String,
    /// `spec.apiBasePath` (required, non-empty).
    pub base_path: String,
    /// Derived from `spec.security.m2m` (precedence client > basic > scopes).
    pub m2m_auth_method: M2mAuthMethod,
    /// `spec.security`; `None` when absent, `Some` with `m2m: None` when it has no `m2m`.
    pub security: Option<ApiSubscriptionSecurity>,
    /// `status.gatewayUrl`; `""` when absent.
    pub gateway_url: String,
    /// `spec.security.m2m.scopes[]`: the latest requested scopes; `None` when absent or empty.
    pub requested_scopes: Option<Vec<String>>,
    /// `status.activeScopes[]`: the last approved scopes written downstream; `None` when absent
    /// (`Some(vec![])` when the operator cleared them).
    pub active_scopes: Option<Vec<String>>,
}

graphql_enum! {
    /// How the subscriber authenticates (GraphQL `ApiSubscriptionM2mAuthMethod`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum M2mAuthMethod {
        /// No `spec.security.m2m`, or one without client, basic and scopes.
        None = "NONE",
        /// `spec.security.m2m.basic` (and no client).
        BasicAuth = "BASIC_AUTH",
        /// `spec.security.m2m.client`.
        Oauth2Client = "OAUTH2_CLIENT",
        /// Only `spec.security.m2m.scopes`.
        ScopesOnly = "SCOPES_ONLY",
    }
}

/// `spec.security` of a subscription (GraphQL `ApiSubscriptionSecurity`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiSubscriptionSecurity {
    /// `spec.security.m2m`; `None` when absent.
    pub m2m: Option<SubscriberMachine2MachineAuthentication>,
}

/// `spec.security.m2m` of a subscription (GraphQL `SubscriberMachine2MachineAuthentication`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriberMachine2MachineAuthentication {
    /// `spec.security.m2m.client`; `None` when absent.
    pub client: Option<OAuth2ClientCredentials>,
    /// `spec.security.m2m.basic`; `None` when absent.
    pub basic: Option<BasicAuthCredentials>,
    /// `spec.security.m2m.scopes[]`; `None` when absent or empty.
    pub scopes: Option<Vec<String>>,
}

fn security(spec: &crds::api_subscription::ApiSubscriptionSpec) -> (M2mAuthMethod, Option<ApiSubscriptionSecurity>) {
    let Some(sec) = &spec.security else { return (M2mAuthMethod::None, None) };
    let Some(m2m) = &sec.m2m else { return (M2mAuthMethod::None, Some(ApiSubscriptionSecurity { m2m: None })) };
    let method = if m2m.client.is_some() {
        M2mAuthMethod::Oauth2Client
    } else if m2m.basic.is_some() {
        M2mAuthMethod::BasicAuth
    } else if !m2m.scopes.is_empty() {
        M2mAuthMethod::ScopesOnly
    } else {
        M2mAuthMethod::None
    };
    let m2m = SubscriberMachine2MachineAuthentication {
        client: m2m.client.as_ref().map(OAuth2ClientCredentials::from_cr),
        basic: m2m.basic.as_ref().map(BasicAuthCredentials::from_cr),
        scopes: (!m2m.scopes.is_empty()).then(|| m2m.scopes.clone()),
    };
    (method, Some(ApiSubscriptionSecurity { m2m: Some(m2m) }))
}

/// Keys, links, scopes and indexes of the ApiSubscription family (see [`SubscriptionWiring`]).
const WIRING: SubscriptionWiring = SubscriptionWiring {
    kind: KindId::ApiSubscription,
    target_active: index::API_EXPOSURE_ACTIVE_BY_BASE_PATH,
    by_key: index::API_SUBSCRIPTION_BY_BASE_PATH,
    by_owner: index::API_SUBSCRIPTION_BY_OWNER,
    by_target: index::API_SUBSCRIPTION_BY_TARGET,
};

/// The translation of an ApiSubscription ([`Kind::translate`](crate::kind::Kind::translate)).
fn translate(cr: &crds::ApiSubscription, _ctx: &Context) -> Result<ApiSubscriptionRecord, Skip> {
    let meta = Meta::from_object(&cr.metadata)?;
    let spec = &cr.spec;
    let application = common::required("spec.requestor.application.name", &spec.requestor.application.name)?.to_string();
    let base_path = common::required("spec.apiBasePath", &spec.api_base_path)?.to_string();
    let (m2m_auth_method, security) = security(spec);
    let requested_scopes = security.as_ref().and_then(|s| s.m2m.as_ref()).and_then(|m| m.scopes.clone());
    let status = cr.status.as_ref();
    Ok(ApiSubscriptionRecord {
        meta,
        status: common::status_from_conditions(status.map(|s| s.conditions.as_slice()).unwrap_or_default()),
        application,
        base_path,
        m2m_auth_method,
        security,
        gateway_url: status.and_then(|s| s.gateway_url.clone()).unwrap_or_default(),
        requested_scopes,
        active_scopes: status.and_then(|s| s.active_scopes.clone()),
    })
}

subscription_kind!(ApiSubscription, ApiSubscriptionRecord {
    const VERSION: u32 = 1;
    wiring: WIRING,
    target: base_path,
    translate: translate,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::keys::natural;
    use crate::keys::Key;
    use crate::kind::{Kind, Link, Parent, Scope};
    use crate::kinds::testing::{ctx, world_object};

    // A subscription without target is written and retried until linked (ARCHITECTURE.md "References by natural key").
    const _: () = assert!(ApiSubscription::RETRY_UNLINKED);

    fn subscription(env: &str, name: &str) -> crds::ApiSubscription {
        world_object("ApiSubscription", env, name)
    }

    fn translate(cr: &crds::ApiSubscription) -> Result<ApiSubscriptionRecord, Skip> {
        ApiSubscription::translate(cr, &ctx())
    }

    #[test]
    fn without_security_the_method_is_none() {
        let rec = translate(&subscription("poc", "checkout-web--payments-checkout-v1")).unwrap();
        assert_eq!(rec.meta.namespace, "poc--payments--checkout");
        assert_eq!(rec.application, "checkout-web");
        assert_eq!(rec.base_path, "/payments/checkout/v1");
        assert_eq!(rec.m2m_auth_method, M2mAuthMethod::None);
        assert_eq!(rec.security, None);
        assert_eq!(rec.requested_scopes, None);
        assert_eq!(rec.active_scopes, None);
        assert_eq!(rec.gateway_url, "https://api.aws-eu1.poc.example.com/payments/checkout/v1");
        assert_eq!(rec.status.phase, StatusPhase::Ready);
        assert_eq!(ApiSubscription::created_at(&rec), rec.meta.creation_timestamp);
        assert!(rec.meta.creation_timestamp.is_some());
    }

    #[test]
    fn oauth2_client_method_and_error_status() {
        let rec = translate(&subscription("poc", "checkout-batch--payments-ledger-v2")).unwrap();
        assert_eq!(rec.m2m_auth_method, M2mAuthMethod::Oauth2Client);
        assert_eq!(rec.m2m_auth_method.as_str(), "OAUTH2_CLIENT");
        let m2m = rec.security.unwrap().m2m.unwrap();
        assert_eq!(
            m2m.client,
            Some(OAuth2ClientCredentials {
                client_id: "checkout-batch-ledger".into(),
                client_secret: "$<poc:payments--checkout:checkout-batch:externalSecrets/ledger/clientSecret:7311365994>".into(),
                client_key: String::new(),
            })
        );
        assert_eq!((m2m.basic, m2m.scopes), (None, None));
        assert_eq!(rec.status.phase, StatusPhase::Error);
        assert_eq!(rec.gateway_url, "");
    }

    #[test]
    fn scopes_only_method_and_requested_scopes() {
        let rec = translate(&subscription("poc", "parcel-tracker--payments-checkout-v1")).unwrap();
        assert_eq!(rec.m2m_auth_method, M2mAuthMethod::ScopesOnly);
        assert_eq!(rec.requested_scopes, Some(vec!["orders:read".to_string()]));
        assert_eq!(rec.security.unwrap().m2m.unwrap().scopes, Some(vec!["orders:read".to_string()]));

        let rec = translate(&subscription("poc", "knowledge-base--logistics-fleet-positions-v1")).unwrap();
        assert_eq!(rec.requested_scopes, Some(vec!["fleet:read".to_string(), "fleet:history".to_string()]));
        assert_eq!(rec.active_scopes, None);
        assert_eq!(rec.status.phase, StatusPhase::Pending);
        assert_eq!(rec.status.message, "Approval is not for the current ApprovalRequest");
    }

    #[test]
    fn method_precedence_client_basic_scopes() {
        let mut cr = subscription("poc", "checkout-batch--payments-ledger-v2");
        let m2m = cr.spec.security.as_mut().unwrap().m2m.as_mut().unwrap();
        m2m.basic = Some(crds::api_exposure::BasicAuth { username: "u".into(), password: "p".into() });
        m2m.scopes = vec!["s".into()];
        assert_eq!(translate(&cr).unwrap().m2m_auth_method, M2mAuthMethod::Oauth2Client);
        cr.spec.security.as_mut().unwrap().m2m.as_mut().unwrap().client = None;
        let rec = translate(&cr).unwrap();
        assert_eq!(rec.m2m_auth_method, M2mAuthMethod::BasicAuth);
        assert_eq!(rec.security.unwrap().m2m.unwrap().basic, Some(BasicAuthCredentials { username: "u".into(), password: "p".into() }));
        cr.spec.security.as_mut().unwrap().m2m.as_mut().unwrap().basic = None;
        assert_eq!(translate(&cr).unwrap().m2m_auth_method, M2mAuthMethod::ScopesOnly);
        cr.spec.security.as_mut().unwrap().m2m.as_mut().unwrap().scopes.clear();
        let rec = translate(&cr).unwrap();
        assert_eq!(rec.m2m_auth_method, M2mAuthMethod::None);
        assert_eq!(
            rec.security,
            Some(ApiSubscriptionSecurity {
                m2m: Some(SubscriberMachine2MachineAuthentication { client: None, basic: None, scopes: None })
            })
        );
        cr.spec.security.as_mut().unwrap().m2m = None;
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.m2m_auth_method, rec.security), (M2mAuthMethod::None, Some(ApiSubscriptionSecurity { m2m: None })));
    }

    #[test]
    fn active_scopes_are_read_when_present() {
        let mut cr = subscription("poc", "knowledge-base--logistics-fleet-positions-v1");
        cr.status.as_mut().unwrap().active_scopes = Some(vec!["fleet:read".into()]);
        let rec = translate(&cr).unwrap();
        assert_eq!(rec.active_scopes, Some(vec!["fleet:read".to_string()]));
        assert_eq!(rec.requested_scopes, Some(vec!["fleet:read".to_string(), "fleet:history".to_string()]));
        cr.status.as_mut().unwrap().active_scopes = Some(vec![]);
        assert_eq!(translate(&cr).unwrap().active_scopes, Some(vec![]));
    }

    #[test]
    fn keys_requires_links_scopes_refs_and_dependents() {
        let rec = translate(&subscription("poc", "parcel-tracker--payments-checkout-v1")).unwrap();
        let ns = "poc--logistics--parcel-tracking";
        assert_eq!(ApiSubscription::key(&rec), Key::new(&["poc", ns, "parcel-tracker--payments-checkout-v1"]));
        assert_eq!(
            ApiSubscription::requires(&rec),
            vec![Parent { kind: KindId::Application, key: Key::new(&["poc", "logistics--parcel-tracking", "parcel-tracker"]) }]
        );
        let bp = Key::new(&["poc", "/payments/checkout/v1"]);
        assert_eq!(ApiSubscription::links(&rec), vec![Link::First { index: index::API_EXPOSURE_ACTIVE_BY_BASE_PATH, key: bp.clone() }]);
        assert_eq!(
            ApiSubscription::scopes(&rec, &[None]),
            vec![Scope::Team { env: "poc".into(), team: "logistics--parcel-tracking".into() }]
        );
        let owner = Key::new(&["poc", "logistics--parcel-tracking", "parcel-tracker"]);
        let unlinked = vec![(index::API_SUBSCRIPTION_BY_BASE_PATH, bp.clone()), (index::API_SUBSCRIPTION_BY_OWNER, owner.clone())];
        assert_eq!(ApiSubscription::index_entries(&rec, &[None]), unlinked);
        assert_eq!(ApiSubscription::index_entries(&rec, &[]), unlinked);
        let target = natural::api_exposure("poc", "payments--checkout", "checkout-api", "/payments/checkout/v1");
        let mut linked = unlinked.clone();
        linked.push((index::API_SUBSCRIPTION_BY_TARGET, target.clone()));
        assert_eq!(ApiSubscription::index_entries(&rec, &[Some(target)]), linked);
        let sub = Key::new(&["ApiSubscription", "poc", ns, "parcel-tracker--payments-checkout-v1"]);
        assert_eq!(
            ApiSubscription::dependents(&rec, &[None]),
            vec![(index::APPROVAL_BY_SUBSCRIPTION, sub.clone()), (index::APPROVAL_REQUEST_BY_SUBSCRIPTION, sub)]
        );
    }

    #[test]
    fn qa_subscription_links_in_qa() {
        let rec = translate(&subscription("qa", "ledger-core--payments-checkout-v1")).unwrap();
        assert_eq!(
            ApiSubscription::links(&rec),
            vec![Link::First { index: index::API_EXPOSURE_ACTIVE_BY_BASE_PATH, key: Key::new(&["qa", "/payments/checkout/v1"]) }]
        );
        assert_eq!(ApiSubscription::requires(&rec)[0].key, Key::new(&["qa", "payments--ledger", "ledger-core"]));
    }

    #[test]
    fn bad_input_is_skipped_with_its_reason() {
        let base = subscription("poc", "checkout-web--payments-checkout-v1");
        let mut cr = base.clone();
        cr.spec.requestor.application.name.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.requestor.application.name")));
        let mut cr = base.clone();
        cr.spec.api_base_path.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.apiBasePath")));
        let mut cr = base.clone();
        cr.metadata.name = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.name")));
        let mut cr = base;
        cr.status = None;
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.status.phase, rec.gateway_url.as_str()), (StatusPhase::Unknown, ""));
    }
}
