//! AgenticSubscription (a kind the Go projector does not project; scopes as ApiSubscription's): an
//! Application
//! subscribing to an MCP server or agent by base path. Natural key `(environment, namespace,
//! name)`; owned by (and visible to) the team of its namespace; requires the owner Application.
//! Its target is the *active* AgenticExposure of the same environment and base path, linked by
//! the writer (link 0); while there is none the record is written without target and retried
//! (ARCHITECTURE.md "References by natural key"). Approvals of the subscription re-resolve their provider scope when the
//! target changes.
//!
//! The security block has the shape of ApiSubscription's, so it maps to the same value types.

use crate::common::{self, Meta, Status};
use crate::keys::index;
use crate::kind::{Context, KindId, Skip};
use crate::kinds::api_exposure::{BasicAuthCredentials, OAuth2ClientCredentials};
use crate::kinds::api_subscription::{ApiSubscriptionSecurity, SubscriberMachine2MachineAuthentication};
use crate::kinds::subscription_wiring::{subscription_kind, SubscriptionWiring};
use serde::{Deserialize, Serialize};

/// The AgenticSubscription kind.
pub struct AgenticSubscription;

/// A projected AgenticSubscription.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgenticSubscriptionRecord {
    /// Common metadata; the owner team is `meta.team()` (from `metadata.namespace`).
    pub meta: Meta,
    /// From `status.conditions` (reasons other than `Error`/`Failed` are `PENDING`);
    /// `UNKNOWN` when the CR has no status or no Ready condition.
    pub status: Status,
    /// The owner Application's name: `spec.requestor.application.name` (required, non-empty).
    pub application: String,
    /// `spec.basePath` (required, non-empty).
    pub base_path: String,
    /// `spec.security`; `None` when absent, `Some` with `m2m: None` when it has no `m2m`.
    pub security: Option<ApiSubscriptionSecurity>,
    /// `status.gatewayUrl`: the path-specific AI gateway URL; `""` when absent.
    pub gateway_url: String,
    /// `spec.security.m2m.scopes[]`: the latest requested scopes; `None` when absent or empty.
    pub requested_scopes: Option<Vec<String>>,
    /// `status.activeScopes[]`: the last approved scopes written downstream; `None` when absent
    /// (`Some(vec![])` when the operator cleared them).
    pub active_scopes: Option<Vec<String>>,
}

fn security(spec: &crds::agentic_subscription::AgenticSubscriptionSpec) -> Option<ApiSubscriptionSecurity> {
    let sec = spec.security.as_ref()?;
    Some(ApiSubscriptionSecurity {
        m2m: sec.m2m.as_ref().map(|m2m| SubscriberMachine2MachineAuthentication {
            client: m2m.client.as_ref().map(OAuth2ClientCredentials::from_cr),
            basic: m2m.basic.as_ref().map(BasicAuthCredentials::from_cr),
            scopes: (!m2m.scopes.is_empty()).then(|| m2m.scopes.clone()),
        }),
    })
}

/// Keys, links, scopes and indexes of the AgenticSubscription family (see [`SubscriptionWiring`]).
const WIRING: SubscriptionWiring = SubscriptionWiring {
    kind: KindId::AgenticSubscription,
    target_active: index::AGENTIC_EXPOSURE_ACTIVE_BY_BASE_PATH,
    by_key: index::AGENTIC_SUBSCRIPTION_BY_BASE_PATH,
    by_owner: index::AGENTIC_SUBSCRIPTION_BY_OWNER,
    by_target: index::AGENTIC_SUBSCRIPTION_BY_TARGET,
};

/// The translation of an AgenticSubscription ([`Kind::translate`](crate::kind::Kind::translate)).
fn translate(cr: &crds::AgenticSubscription, _ctx: &Context) -> Result<AgenticSubscriptionRecord, Skip> {
    let meta = Meta::from_object(&cr.metadata)?;
    let spec = &cr.spec;
    let application = common::required("spec.requestor.application.name", &spec.requestor.application.name)?.to_string();
    let base_path = common::required("spec.basePath", &spec.base_path)?.to_string();
    let security = security(spec);
    let requested_scopes = security.as_ref().and_then(|s| s.m2m.as_ref()).and_then(|m| m.scopes.clone());
    let status = cr.status.as_ref();
    Ok(AgenticSubscriptionRecord {
        meta,
        status: common::status_from_conditions(status.map(|s| s.conditions.as_slice()).unwrap_or_default()),
        application,
        base_path,
        security,
        gateway_url: status.and_then(|s| s.gateway_url.clone()).unwrap_or_default(),
        requested_scopes,
        active_scopes: status.and_then(|s| s.active_scopes.clone()),
    })
}

subscription_kind!(AgenticSubscription, AgenticSubscriptionRecord {
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
    use crate::time::Timestamp;

    // A subscription without target is written and retried until linked (ARCHITECTURE.md "References by natural key").
    const _: () = assert!(AgenticSubscription::RETRY_UNLINKED);

    fn subscription(name: &str) -> crds::AgenticSubscription {
        world_object("AgenticSubscription", "poc", name)
    }

    fn translate(cr: &crds::AgenticSubscription) -> Result<AgenticSubscriptionRecord, Skip> {
        AgenticSubscription::translate(cr, &ctx())
    }

    #[test]
    fn provisioned_subscription_without_security() {
        let rec = translate(&subscription("copilot-gateway--agents-copilot-v1")).unwrap();
        assert_eq!(rec.meta.namespace, "poc--assist--copilot");
        assert_eq!(rec.meta.team(), "assist--copilot");
        assert_eq!(rec.application, "copilot-gateway");
        assert_eq!(rec.base_path, "/agents/copilot/v1");
        assert_eq!(rec.security, None);
        assert_eq!((rec.requested_scopes.clone(), rec.active_scopes.clone()), (None, None));
        assert_eq!(rec.gateway_url, "https://ai.aws-eu1.poc.example.com/agents/copilot/v1");
        assert_eq!(rec.status, Status { phase: StatusPhase::Ready, message: "Successfully provisioned subresources".into() });
        assert_eq!(AgenticSubscription::created_at(&rec), Some(Timestamp::parse_rfc3339("2026-05-30T02:33:00Z").unwrap()));
    }

    #[test]
    fn requested_scopes_from_the_security_block() {
        let rec = translate(&subscription("checkout-web--mcp-knowledge-v1")).unwrap();
        assert_eq!(rec.requested_scopes, Some(vec!["kb:search".to_string()]));
        let m2m = rec.security.unwrap().m2m.unwrap();
        assert_eq!((m2m.scopes, m2m.client, m2m.basic), (Some(vec!["kb:search".to_string()]), None, None));
        assert_eq!(rec.gateway_url, "https://ai.aws-eu1.poc.example.com/mcp/knowledge/v1");
    }

    #[test]
    fn status_phases_of_the_world() {
        let pending = translate(&subscription("knowledge-base--agents-copilot-v1")).unwrap();
        assert_eq!(pending.status, Status { phase: StatusPhase::Pending, message: "Approval has not been approved".into() });
        assert_eq!(pending.gateway_url, "");
        let targetless = translate(&subscription("fleet-planner--mcp-weather-v1")).unwrap();
        assert_eq!(targetless.status.phase, StatusPhase::Pending);
        assert_eq!(targetless.status.message, "No active AgenticExposure found for basePath /mcp/weather/v1");
        let unknown = translate(&subscription("parcel-notifier--mcp-knowledge-v1")).unwrap();
        assert_eq!(unknown.status, Status { phase: StatusPhase::Unknown, message: String::new() });
        let mut cr = subscription("parcel-notifier--mcp-knowledge-v1");
        cr.status = None;
        assert_eq!(translate(&cr).unwrap().status.phase, StatusPhase::Unknown);
    }

    #[test]
    fn credentials_and_active_scopes_when_present() {
        let mut cr = subscription("checkout-web--mcp-knowledge-v1");
        let m2m = cr.spec.security.as_mut().unwrap().m2m.as_mut().unwrap();
        m2m.client =
            Some(crds::api_exposure::ClientCredentials { client_id: "c".into(), client_secret: Some("$<s>".into()), ..Default::default() });
        m2m.scopes.push("kb:read".into());
        cr.status.as_mut().unwrap().active_scopes = Some(vec!["kb:search".into()]);
        let rec = translate(&cr).unwrap();
        assert_eq!(rec.requested_scopes, Some(vec!["kb:search".to_string(), "kb:read".to_string()]));
        assert_eq!(rec.active_scopes, Some(vec!["kb:search".to_string()]));
        assert_eq!(
            rec.security.unwrap().m2m.unwrap().client,
            Some(OAuth2ClientCredentials { client_id: "c".into(), client_secret: "$<s>".into(), client_key: String::new() })
        );
        cr.status.as_mut().unwrap().active_scopes = Some(vec![]);
        assert_eq!(translate(&cr).unwrap().active_scopes, Some(vec![]));
        cr.spec.security.as_mut().unwrap().m2m = None;
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.security, rec.requested_scopes), (Some(ApiSubscriptionSecurity { m2m: None }), None));
    }

    #[test]
    fn keys_requires_links_scopes_refs_and_dependents() {
        let rec = translate(&subscription("copilot-gateway--mcp-parcels-v1")).unwrap();
        let ns = "poc--assist--copilot";
        assert_eq!(AgenticSubscription::key(&rec), Key::new(&["poc", ns, "copilot-gateway--mcp-parcels-v1"]));
        assert_eq!(
            AgenticSubscription::requires(&rec),
            vec![Parent { kind: KindId::Application, key: Key::new(&["poc", "assist--copilot", "copilot-gateway"]) }]
        );
        let bp = Key::new(&["poc", "/mcp/parcels/v1"]);
        assert_eq!(
            AgenticSubscription::links(&rec),
            vec![Link::First { index: index::AGENTIC_EXPOSURE_ACTIVE_BY_BASE_PATH, key: bp.clone() }]
        );
        assert_eq!(AgenticSubscription::scopes(&rec, &[None]), vec![Scope::Team { env: "poc".into(), team: "assist--copilot".into() }]);
        let owner = Key::new(&["poc", "assist--copilot", "copilot-gateway"]);
        let unlinked = vec![(index::AGENTIC_SUBSCRIPTION_BY_BASE_PATH, bp.clone()), (index::AGENTIC_SUBSCRIPTION_BY_OWNER, owner.clone())];
        assert_eq!(AgenticSubscription::index_entries(&rec, &[None]), unlinked);
        assert_eq!(AgenticSubscription::index_entries(&rec, &[]), unlinked);
        let target = natural::agentic_exposure("poc", "logistics--parcel-tracking", "parcel-tracker", "/mcp/parcels/v1");
        let mut linked = unlinked.clone();
        linked.push((index::AGENTIC_SUBSCRIPTION_BY_TARGET, target.clone()));
        assert_eq!(AgenticSubscription::index_entries(&rec, &[Some(target)]), linked);
        let sub = Key::new(&["AgenticSubscription", "poc", ns, "copilot-gateway--mcp-parcels-v1"]);
        assert_eq!(
            AgenticSubscription::dependents(&rec, &[None]),
            vec![(index::APPROVAL_BY_SUBSCRIPTION, sub.clone()), (index::APPROVAL_REQUEST_BY_SUBSCRIPTION, sub)]
        );
    }

    #[test]
    fn bad_input_is_skipped_with_its_reason() {
        let base = subscription("copilot-gateway--agents-copilot-v1");
        let mut cr = base.clone();
        cr.spec.requestor.application.name.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.requestor.application.name")));
        let mut cr = base.clone();
        cr.spec.base_path.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.basePath")));
        let mut cr = base;
        cr.metadata.namespace = Some(String::new());
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.namespace")));
    }
}
