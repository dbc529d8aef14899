//! AgenticExposure (a kind the Go projector does not project): an Application exposing an MCP server or
//! an agent on the AI gateway. Natural key `(environment, team, application, spec.basePath)`;
//! owned by (and visible to) the team of its namespace; requires the owner Application. The
//! *active* exposure of a base path is indexed in [`index::AGENTIC_EXPOSURE_ACTIVE_BY_BASE_PATH`]
//! so that AgenticSubscriptions link to it; every write re-links the subscriptions of its base
//! path ([`index::AGENTIC_SUBSCRIPTION_BY_BASE_PATH`]).
//!
//! The owner application is the `cp.ei.telekom.de/application` label, or `spec.provider.name`
//! when the label is absent or empty (the operator sets the label to the provider's name). The
//! value types are those of ApiExposure: upstreams, approval config, security and
//! traffic.

use crate::common::{self, Meta, Status, Visibility};
use crate::graphql_enum::graphql_enum;
use crate::keys::{index, natural};
use crate::kind::{Context, Skip};
use crate::kinds::api_exposure::{
    self, ApiExposureSecurity, ApprovalConfig, BasicAuthCredentials, ExternalIdentityProvider, Machine2MachineAuthentication,
    OAuth2ClientCredentials, TokenRequestMethod, Traffic, Upstream,
};
use crate::kinds::subscription_wiring::{exposure_kind, ExposureWiring};
use crds::agentic_exposure as cr;
use serde::{Deserialize, Serialize};

/// The AgenticExposure kind.
pub struct AgenticExposure;

/// A projected AgenticExposure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgenticExposureRecord {
    /// Common metadata; the owner team is `meta.team()` (from `metadata.namespace`).
    pub meta: Meta,
    /// From `status.conditions`; `UNKNOWN` when the CR has no status.
    pub status: Status,
    /// The owner Application's name: label `cp.ei.telekom.de/application`, else
    /// `spec.provider.name` (one of them required, non-empty).
    pub application: String,
    /// `spec.basePath` (required, non-empty).
    pub base_path: String,
    /// `spec.visibility`, matched case-insensitively (CRD default `Enterprise`).
    pub visibility: Visibility,
    /// `spec.variant`, matched case-insensitively (CRD default `MCP`): decides whether the
    /// catalogue entry is an McpServer or an AgentCard.
    pub variant: AgenticVariant,
    /// `status.active`; `false` when the CR has no status.
    pub active: bool,
    /// `spec.upstreams[]`, in CR order; weight `0` when absent.
    pub upstreams: Vec<Upstream>,
    /// `spec.approval` (strategy matched case-insensitively, `trustedTeams` `[]` when absent).
    pub approval_config: ApprovalConfig,
    /// `spec.security`; `m2m` is `None` when `spec.security` or its `m2m` is absent.
    pub security: ApiExposureSecurity,
    /// `spec.traffic` without the circuit breaker; both parts `None` when `spec.traffic` is
    /// absent or has neither failover nor rate limit.
    pub traffic: Traffic,
}

graphql_enum! {
    /// What an AgenticExposure exposes (GraphQL `AgenticExposureVariant`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum AgenticVariant {
        /// `MCP`: an MCP server (catalogue: McpServer).
        Mcp = "MCP",
        /// `TELECONTEXTMCP`: an MCP server with Telecontext (catalogue: McpServer).
        TelecontextMcp = "TELECONTEXTMCP",
        /// `AGENT`: an A2A agent (catalogue: AgentCard).
        Agent = "AGENT",
    }
}

impl AgenticVariant {
    /// Parses the CR value case-insensitively.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse(field: &'static str, value: &str) -> Result<AgenticVariant, Skip> {
        common::parse_enum(
            field,
            value,
            "MCP, TELECONTEXTMCP, AGENT",
            &[("MCP", AgenticVariant::Mcp), ("TELECONTEXTMCP", AgenticVariant::TelecontextMcp), ("AGENT", AgenticVariant::Agent)],
        )
    }

    /// Whether the exposed thing is an agent (catalogue AgentCard) rather than an MCP server
    /// (catalogue McpServer).
    pub fn is_agent(self) -> bool {
        self == AgenticVariant::Agent
    }
}

/// `spec.security` mapped as ApiExposure maps it (`tokenRequest` matched case-insensitively, `None` when
/// absent or empty; `grantType` `""` when absent; scopes `None` when absent or empty).
fn security(spec: &cr::AgenticExposureSpec) -> Result<ApiExposureSecurity, Skip> {
    let Some(m2m) = spec.security.as_ref().and_then(|s| s.m2m.as_ref()) else {
        return Ok(ApiExposureSecurity { m2m: None });
    };
    let external_idp = match &m2m.external_idp {
        None => None,
        Some(idp) => Some(ExternalIdentityProvider {
            token_endpoint: idp.token_endpoint.clone(),
            token_request: match idp.token_request.as_deref().unwrap_or("") {
                "" => None,
                v => Some(TokenRequestMethod::parse("spec.security.m2m.externalIDP.tokenRequest", v)?),
            },
            grant_type: idp.grant_type.clone().unwrap_or_default(),
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

/// Scopes and indexes of the AgenticExposure family (see [`ExposureWiring`]).
const WIRING: ExposureWiring =
    ExposureWiring { active: index::AGENTIC_EXPOSURE_ACTIVE_BY_BASE_PATH, subscriptions_by_key: index::AGENTIC_SUBSCRIPTION_BY_BASE_PATH };

/// The translation of an AgenticExposure ([`Kind::translate`](crate::kind::Kind::translate)).
fn translate(cr: &crds::AgenticExposure, _ctx: &Context) -> Result<AgenticExposureRecord, Skip> {
    let meta = Meta::from_object(&cr.metadata)?;
    let spec = &cr.spec;
    let application = match common::label(&cr.metadata, common::APPLICATION_LABEL) {
        "" => common::required("spec.provider.name", &spec.provider.name)?,
        label => label,
    }
    .to_string();
    let base_path = common::required("spec.basePath", &spec.base_path)?.to_string();
    let visibility = Visibility::parse("spec.visibility", &spec.visibility)?;
    let variant = AgenticVariant::parse("spec.variant", &spec.variant)?;
    let approval_config = ApprovalConfig::from_cr(&spec.approval)?;
    let security = security(spec)?;
    let (status, active) = match &cr.status {
        Some(s) => (common::status_from_conditions(&s.conditions), s.active),
        None => (common::status_from_conditions(&[]), false),
    };
    Ok(AgenticExposureRecord {
        meta,
        status,
        application,
        base_path,
        visibility,
        variant,
        active,
        upstreams: spec.upstreams.iter().map(|u| Upstream { url: u.url.clone(), weight: u.weight.unwrap_or(0) }).collect(),
        approval_config,
        security,
        traffic: spec.traffic.as_ref().map(api_exposure::traffic).unwrap_or_default(),
    })
}

exposure_kind!(AgenticExposure, AgenticExposureRecord {
    const VERSION: u32 = 1;
    wiring: WIRING,
    natural_key: natural::agentic_exposure,
    target: base_path,
    translate: translate,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::ApprovalStrategy;
    use crate::common::StatusPhase;
    use crate::keys::Key;
    use crate::kind::{Kind, KindId, Parent, Scope};
    use crate::kinds::api_exposure::{Limits, RateLimit, RateLimitConfig, RateLimitOptions};
    use crate::kinds::testing::{ctx, world_object};
    use crate::time::Timestamp;

    fn exposure(name: &str) -> crds::AgenticExposure {
        world_object("AgenticExposure", "poc", name)
    }

    fn translate(cr: &crds::AgenticExposure) -> Result<AgenticExposureRecord, Skip> {
        AgenticExposure::translate(cr, &ctx())
    }

    #[test]
    fn copilot_agent_exposure() {
        let rec = translate(&exposure("copilot-agent--agents-copilot-v1")).unwrap();
        assert_eq!(rec.meta.namespace, "poc--assist--copilot");
        assert_eq!(rec.meta.team(), "assist--copilot");
        assert_eq!(rec.application, "copilot-agent");
        assert_eq!(rec.base_path, "/agents/copilot/v1");
        assert_eq!(rec.visibility, Visibility::Enterprise);
        assert_eq!(rec.variant, AgenticVariant::Agent);
        assert!(rec.variant.is_agent());
        assert!(rec.active);
        assert_eq!(rec.status, Status { phase: StatusPhase::Ready, message: "Successfully provisioned subresources".into() });
        assert_eq!(
            rec.upstreams,
            vec![
                Upstream { url: "https://copilot-a.assist.poc.example.com/a2a".into(), weight: 50 },
                Upstream { url: "https://copilot-b.assist.poc.example.com/a2a".into(), weight: 50 },
            ]
        );
        assert_eq!(
            rec.approval_config,
            ApprovalConfig { strategy: ApprovalStrategy::FourEyes, trusted_teams: vec!["assist--copilot".into()] }
        );
        assert_eq!(rec.security, ApiExposureSecurity { m2m: None });
        // A circuit breaker alone produces no traffic.
        assert_eq!(rec.traffic, Traffic::default());
        assert_eq!(AgenticExposure::created_at(&rec), Some(Timestamp::parse_rfc3339("2026-05-23T08:05:00Z").unwrap()));
    }

    #[test]
    fn knowledge_base_telecontext_rate_limit() {
        let rec = translate(&exposure("knowledge-base--mcp-knowledge-v1")).unwrap();
        assert_eq!((rec.variant, rec.variant.as_str()), (AgenticVariant::TelecontextMcp, "TELECONTEXTMCP"));
        assert!(!rec.variant.is_agent());
        assert_eq!(rec.visibility, Visibility::World);
        assert_eq!(rec.approval_config.strategy, ApprovalStrategy::Auto);
        assert_eq!(rec.upstreams, vec![Upstream { url: "https://kb-mcp.assist.poc.example.com/mcp".into(), weight: 0 }]);
        assert_eq!(
            rec.traffic,
            Traffic {
                failover: None,
                rate_limit: Some(RateLimit {
                    provider: Some(RateLimitConfig {
                        limits: Limits { second: 0, minute: 600, hour: 0 },
                        options: RateLimitOptions { hide_client_headers: true, fault_tolerant: true },
                    }),
                    subscriber_rate_limit: None,
                }),
            }
        );
    }

    #[test]
    fn parcel_tracker_scopes_keys_and_indexes() {
        let rec = translate(&exposure("parcel-tracker--mcp-parcels-v1")).unwrap();
        assert_eq!(rec.variant, AgenticVariant::Mcp);
        assert_eq!(rec.approval_config.strategy, ApprovalStrategy::Simple);
        let m2m = rec.security.m2m.clone().unwrap();
        assert_eq!((m2m.scopes, m2m.basic, m2m.external_idp), (Some(vec!["parcels:read".to_string()]), None, None));
        assert_eq!(rec.status.phase, StatusPhase::Ready);

        let key = Key::new(&["poc", "logistics--parcel-tracking", "parcel-tracker", "/mcp/parcels/v1"]);
        assert_eq!(AgenticExposure::key(&rec), key);
        assert_eq!(AgenticExposure::key(&rec).part(1), "logistics--parcel-tracking", "component 1 is the owner team");
        assert_eq!(
            AgenticExposure::requires(&rec),
            vec![Parent { kind: KindId::Application, key: natural::application("poc", "logistics--parcel-tracking", "parcel-tracker") }]
        );
        assert!(AgenticExposure::links(&rec).is_empty());
        assert_eq!(AgenticExposure::scopes(&rec, &[]), vec![Scope::Team { env: "poc".into(), team: "logistics--parcel-tracking".into() }]);
        let bp = natural::in_env("poc", "/mcp/parcels/v1");
        assert_eq!(AgenticExposure::index_entries(&rec, &[]), vec![(index::AGENTIC_EXPOSURE_ACTIVE_BY_BASE_PATH, bp.clone())]);
        assert_eq!(AgenticExposure::dependents(&rec, &[]), vec![(index::AGENTIC_SUBSCRIPTION_BY_BASE_PATH, bp)]);
    }

    #[test]
    fn inactive_duplicate_is_not_indexed_as_active_but_still_relinks_subscriptions() {
        let rec = translate(&exposure("fleet-planner--mcp-parcels-v1")).unwrap();
        assert!(!rec.active);
        assert_eq!(rec.status.phase, StatusPhase::Pending);
        assert_eq!(rec.application, "fleet-planner");
        assert!(AgenticExposure::index_entries(&rec, &[]).is_empty());
        assert_eq!(
            AgenticExposure::dependents(&rec, &[]),
            vec![(index::AGENTIC_SUBSCRIPTION_BY_BASE_PATH, natural::in_env("poc", "/mcp/parcels/v1"))]
        );

        let mut cr = exposure("parcel-tracker--mcp-parcels-v1");
        cr.status = None;
        let rec = translate(&cr).unwrap();
        assert_eq!((rec.active, rec.status.phase), (false, StatusPhase::Unknown));
        assert!(AgenticExposure::index_entries(&rec, &[]).is_empty());
    }

    #[test]
    fn owner_application_falls_back_to_the_provider() {
        let mut cr = exposure("knowledge-base--mcp-knowledge-v1");
        cr.metadata.labels.as_mut().unwrap().remove(common::APPLICATION_LABEL);
        assert_eq!(translate(&cr).unwrap().application, "knowledge-base");
        cr.metadata.labels.as_mut().unwrap().insert(common::APPLICATION_LABEL.into(), String::new());
        cr.spec.provider.name = "kb-provider".into();
        assert_eq!(translate(&cr).unwrap().application, "kb-provider");
        cr.spec.provider.name.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.provider.name")));
        // The label wins when both are set.
        let mut cr = exposure("knowledge-base--mcp-knowledge-v1");
        cr.spec.provider.name = "other".into();
        assert_eq!(translate(&cr).unwrap().application, "knowledge-base");
    }

    #[test]
    fn external_idp_maps_like_api_exposures() {
        let mut cr = exposure("parcel-tracker--mcp-parcels-v1");
        cr.spec.security = Some(cr::AgenticSecurity {
            m2m: Some(cr::AgenticMachine2MachineAuthentication {
                external_idp: Some(cr::AgenticExternalIdentityProvider {
                    token_endpoint: "https://idp.example.com/token".into(),
                    token_request: Some("CLIENT_SECRET_BASIC".into()),
                    grant_type: None,
                    basic: None,
                    client: Some(crds::api_exposure::ClientCredentials {
                        client_id: "gw".into(),
                        client_secret: Some("$<secret>".into()),
                        ..Default::default()
                    }),
                }),
                basic: Some(crds::api_exposure::BasicAuth { username: "u".into(), password: "p".into() }),
                scopes: vec![],
            }),
        });
        let m2m = translate(&cr).unwrap().security.m2m.unwrap();
        assert_eq!(m2m.scopes, None);
        assert_eq!(m2m.basic, Some(BasicAuthCredentials { username: "u".into(), password: "p".into() }));
        assert_eq!(
            m2m.external_idp,
            Some(ExternalIdentityProvider {
                token_endpoint: "https://idp.example.com/token".into(),
                token_request: Some(TokenRequestMethod::ClientSecretBasic),
                grant_type: String::new(),
                basic: None,
                client: Some(OAuth2ClientCredentials {
                    client_id: "gw".into(),
                    client_secret: "$<secret>".into(),
                    client_key: String::new()
                }),
            })
        );
        let idp = cr.spec.security.as_mut().unwrap().m2m.as_mut().unwrap().external_idp.as_mut().unwrap();
        idp.token_request = Some("private_key_jwt".into());
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.security.m2m.externalIDP.tokenRequest", .. })));
    }

    #[test]
    fn bad_input_is_skipped_with_its_reason() {
        let base = exposure("parcel-tracker--mcp-parcels-v1");

        let mut cr = base.clone();
        cr.spec.base_path.clear();
        assert_eq!(translate(&cr), Err(Skip::Missing("spec.basePath")));

        let mut cr = base.clone();
        cr.metadata.namespace = None;
        assert_eq!(translate(&cr), Err(Skip::Missing("metadata.namespace")));

        let mut cr = base.clone();
        cr.spec.variant = "A2A".into();
        assert_eq!(
            translate(&cr),
            Err(Skip::InvalidEnum { field: "spec.variant", value: "A2A".into(), expected: "MCP, TELECONTEXTMCP, AGENT" })
        );

        let mut cr = base.clone();
        cr.spec.variant = "agent".into();
        cr.spec.visibility = "zone".into();
        cr.spec.approval.strategy = "foureyes".into();
        let rec = translate(&cr).unwrap();
        assert_eq!(
            (rec.variant, rec.visibility, rec.approval_config.strategy),
            (AgenticVariant::Agent, Visibility::Zone, ApprovalStrategy::FourEyes)
        );

        let mut cr = base.clone();
        cr.spec.visibility = "Galaxy".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.visibility", .. })));

        let mut cr = base;
        cr.spec.approval.strategy = "Manual".into();
        assert!(matches!(translate(&cr), Err(Skip::InvalidEnum { field: "spec.approval.strategy", .. })));
    }
}
