//! What Approval and ApprovalRequest share: the skip rules,
//! the subscription reference, the requester/decider/decision/transition value types, the
//! requested scopes, and the linking and isolation rules of both kinds.
//!
//! An approval is visible to the subscriber's team (the team of the subscription's namespace) and
//! to the provider's team (the owner team of the subscription's target exposure, read through the
//! subscription's link 0: component 1 of every exposure family's natural key is its team).

use crate::common::{self, ApprovalStrategy, Meta, Status};
use crate::graphql_enum::graphql_enum;
use crate::keys::{natural, Key};
use crate::kind::{Context, IndexName, KindId, Link, Parent, Scope, Skip};
use crate::time::Timestamp;
use crds::approval as cr;
use crds::common::{Condition, TypedObjectRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The subscription kinds an approval may target (`spec.target.kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SubscriptionKind {
    /// `ApiSubscription`.
    ApiSubscription,
    /// `EventSubscription` (feature `pubsub`).
    EventSubscription,
    /// `AgenticSubscription` (feature `ai_gateway`).
    AgenticSubscription,
    /// `FileSubscription` (feature `file_manager`).
    FileSubscription,
}

impl SubscriptionKind {
    /// The kind's id.
    pub fn kind_id(self) -> KindId {
        match self {
            SubscriptionKind::ApiSubscription => KindId::ApiSubscription,
            SubscriptionKind::EventSubscription => KindId::EventSubscription,
            SubscriptionKind::AgenticSubscription => KindId::AgenticSubscription,
            SubscriptionKind::FileSubscription => KindId::FileSubscription,
        }
    }

    /// Reads `spec.target.kind` (exact Kubernetes kind name) and checks its feature flag.
    ///
    /// # Errors
    /// [`Skip::NotProjected`] for an unsupported kind or a kind whose feature is off.
    fn from_target(kind: &str, ctx: &Context) -> Result<SubscriptionKind, Skip> {
        let (kind, enabled, feature) = match KindId::from_name(kind) {
            Some(KindId::ApiSubscription) => (SubscriptionKind::ApiSubscription, true, ""),
            Some(KindId::EventSubscription) => (SubscriptionKind::EventSubscription, ctx.features.pubsub, "pubsub"),
            Some(KindId::AgenticSubscription) => (SubscriptionKind::AgenticSubscription, ctx.features.ai_gateway, "ai gateway"),
            Some(KindId::FileSubscription) => (SubscriptionKind::FileSubscription, ctx.features.file_manager, "file manager"),
            _ => return Err(Skip::NotProjected("spec.target.kind is not a supported subscription kind".into())),
        };
        if enabled {
            Ok(kind)
        } else {
            Err(Skip::NotProjected(format!("{feature} feature is disabled")))
        }
    }
}

/// The subscription an approval is for (GraphQL `subscription: SubscriptionInfo!`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionRef {
    /// `spec.target.kind`.
    pub kind: SubscriptionKind,
    /// `spec.target.namespace`, or the approval's own namespace when empty.
    pub namespace: String,
    /// `spec.target.name` (non-empty).
    pub name: String,
}

impl SubscriptionRef {
    /// The subscription's natural key in environment `env`.
    pub fn key(&self, env: &str) -> Key {
        natural::namespaced(env, &self.namespace, &self.name)
    }

    /// The lookup key of the `*_by_subscription` indexes.
    pub fn index_key(&self, env: &str) -> Key {
        natural::subscription_ref(self.kind.kind_id(), env, &self.namespace, &self.name)
    }

    /// The subscriber team (from the subscription's namespace).
    pub fn team(&self) -> &str {
        common::team_from_namespace(&self.namespace)
    }
}

graphql_enum! {
    /// `spec.state` (GraphQL `ApprovalState`; ApprovalRequest uses the first four values only).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ApprovalState {
        /// `Pending`.
        Pending = "PENDING",
        /// `Semigranted`: one of two FourEyes approvals given.
        Semigranted = "SEMIGRANTED",
        /// `Granted`.
        Granted = "GRANTED",
        /// `Rejected`.
        Rejected = "REJECTED",
        /// `Suspended` (Approval only).
        Suspended = "SUSPENDED",
        /// `Expired` (Approval only).
        Expired = "EXPIRED",
    }
}

/// How many of the states, from the first, an ApprovalRequest can be in.
const REQUEST_STATES: usize = 4;

const APPROVAL_STATES: &[(&str, ApprovalState)] = &[
    ("Pending", ApprovalState::Pending),
    ("Semigranted", ApprovalState::Semigranted),
    ("Granted", ApprovalState::Granted),
    ("Rejected", ApprovalState::Rejected),
    ("Suspended", ApprovalState::Suspended),
    ("Expired", ApprovalState::Expired),
];

impl ApprovalState {
    /// Parses any of the six states case-insensitively.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse(field: &'static str, value: &str) -> Result<ApprovalState, Skip> {
        common::parse_enum(field, value, "Pending, Semigranted, Granted, Rejected, Suspended, Expired", APPROVAL_STATES)
    }

    /// Parses the four states of an ApprovalRequest (`Pending`, `Semigranted`, `Granted`,
    /// `Rejected`) case-insensitively.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse_request(field: &'static str, value: &str) -> Result<ApprovalState, Skip> {
        common::parse_enum(field, value, "Pending, Semigranted, Granted, Rejected", &APPROVAL_STATES[..REQUEST_STATES])
    }

    /// The GraphQL values of an ApprovalRequest's states (GraphQL `ApprovalRequestState`): the
    /// first four.
    pub const REQUEST_VALUES: &'static [&'static str] = {
        let (request, _) = <ApprovalState as crate::GraphqlEnum>::VALUES.split_at(REQUEST_STATES);
        request
    };
}

graphql_enum! {
    /// `status.availableTransitions[].action` (GraphQL `ApprovalAction`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ApprovalAction {
        /// `Allow`.
        Allow = "ALLOW",
        /// `Deny`.
        Deny = "DENY",
        /// `Suspend`.
        Suspend = "SUSPEND",
        /// `Resume`.
        Resume = "RESUME",
    }
}

impl ApprovalAction {
    /// Parses the CR value case-insensitively.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse(field: &'static str, value: &str) -> Result<ApprovalAction, Skip> {
        common::parse_enum(
            field,
            value,
            "Allow, Deny, Suspend, Resume",
            &[
                ("Allow", ApprovalAction::Allow),
                ("Deny", ApprovalAction::Deny),
                ("Suspend", ApprovalAction::Suspend),
                ("Resume", ApprovalAction::Resume),
            ],
        )
    }
}

/// `spec.requester` (GraphQL `RequesterInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequesterInfo {
    /// `spec.requester.teamName`.
    pub team_name: String,
    /// `spec.requester.teamEmail` (may be `""`).
    pub team_email: String,
    /// `spec.requester.reason`; `None` when empty.
    pub reason: Option<String>,
    /// `spec.requester.applicationRef.name`; `None` when the reference is absent or its name
    /// empty.
    pub application_name: Option<String>,
}

/// `spec.decider` (GraphQL `DeciderInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeciderInfo {
    /// `spec.decider.teamName` (non-empty: a skip rule). Also GraphQL `deciderTeamName`.
    pub team_name: String,
    /// `spec.decider.teamEmail`; `None` when absent or empty.
    pub team_email: Option<String>,
}

/// `spec.decisions[]` (GraphQL `Decision`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// `spec.decisions[].name` (`System` for automatic decisions).
    pub name: String,
    /// `spec.decisions[].email`; `None` when absent or empty.
    pub email: Option<String>,
    /// `spec.decisions[].comment`; `None` when absent or empty.
    pub comment: Option<String>,
    /// `spec.decisions[].timestamp`; `None` when absent.
    pub timestamp: Option<Timestamp>,
    /// `spec.decisions[].resultingState`, matched case-insensitively; `None` when empty.
    pub resulting_state: Option<ApprovalState>,
}

/// `status.availableTransitions[]` (GraphQL `AvailableTransition`), normalised to the GraphQL
/// enums (the Go server passed the CR's spelling through unchanged, which its GraphQL enums do
/// not accept).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AvailableTransition {
    /// `status.availableTransitions[].action`.
    pub action: ApprovalAction,
    /// `status.availableTransitions[].to`.
    pub to_state: ApprovalState,
}

/// The fields Approval and ApprovalRequest records share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalFields {
    /// `spec.action` (non-empty: a skip rule), e.g. `subscribe`.
    pub action: String,
    /// `spec.strategy`, matched case-insensitively.
    pub strategy: ApprovalStrategy,
    /// `spec.state`, matched case-insensitively.
    pub state: ApprovalState,
    /// `spec.target`: the subscription.
    pub subscription: SubscriptionRef,
    /// `spec.requester`.
    pub requester: RequesterInfo,
    /// `spec.decider`.
    pub decider: DeciderInfo,
    /// `spec.decisions[]`, in CR order; `[]` when none.
    pub decisions: Vec<Decision>,
    /// `status.availableTransitions[]`, in CR order (for Approvals without those to `Expired`);
    /// `[]` when none or without status.
    pub available_transitions: Vec<AvailableTransition>,
    /// `spec.requester.properties.scopes`: the scopes requested when the approval was asked
    /// for; `None` when the properties, or their `scopes`, are absent or JSON `null`.
    pub requested_scopes: Option<Vec<String>>,
}

/// The parts of an Approval or ApprovalRequest translation reads, borrowed from either CR.
pub(crate) struct Source<'a> {
    /// `metadata`.
    pub meta: &'a ObjectMeta,
    /// `spec.action`.
    pub action: &'a str,
    /// `spec.strategy`.
    pub strategy: &'a str,
    /// `spec.state`.
    pub state: &'a str,
    /// `spec.target`.
    pub target: &'a TypedObjectRef,
    /// `spec.requester`.
    pub requester: &'a cr::Requester,
    /// `spec.decider`.
    pub decider: Option<&'a cr::Decider>,
    /// `spec.decisions`.
    pub decisions: &'a [cr::Decision],
    /// `status.availableTransitions` (`[]` without status).
    pub transitions: &'a [cr::AvailableTransition],
    /// `status.conditions` (`[]` without status).
    pub conditions: &'a [Condition],
}

/// Where Approval and ApprovalRequest translation differ.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Flavor {
    /// Six states; transitions to `Expired` are dropped.
    Approval,
    /// Four states (`spec.state`); transitions kept as they are.
    Request,
}

/// Applies the skip rules (in the Go projector's order; a target of any subscription family) and
/// translates
/// the shared fields.
///
/// # Errors
/// [`Skip::Missing`] for an empty `spec.target.name`, `spec.action`, `spec.decider.teamName` or
/// metadata; [`Skip::NotProjected`] for an unsupported or switched-off target kind;
/// [`Skip::InvalidEnum`] for a strategy, state, resulting state or transition outside its enum;
/// [`Skip::Invalid`] for properties that are not a JSON object or scopes that are not a list of
/// strings.
pub(crate) fn translate(src: &Source<'_>, ctx: &Context, flavor: Flavor) -> Result<(Meta, Status, ApprovalFields), Skip> {
    let target_name = common::required("spec.target.name", &src.target.name)?;
    let action = common::required("spec.action", src.action)?;
    let kind = SubscriptionKind::from_target(&src.target.kind, ctx)?;
    let decider_team = src.decider.and_then(|d| d.team_name.as_deref()).unwrap_or("");
    let decider_team = common::required("spec.decider.teamName", decider_team)?;

    let meta = Meta::from_object(src.meta)?;
    let namespace = match src.target.namespace.as_str() {
        "" => meta.namespace.clone(),
        ns => ns.to_string(),
    };
    let strategy = ApprovalStrategy::parse("spec.strategy", src.strategy)?;
    let state = match flavor {
        Flavor::Approval => ApprovalState::parse("spec.state", src.state)?,
        Flavor::Request => ApprovalState::parse_request("spec.state", src.state)?,
    };
    let requester = RequesterInfo {
        team_name: src.requester.team_name.clone(),
        team_email: src.requester.team_email.clone(),
        reason: non_empty(Some(&src.requester.reason)),
        application_name: non_empty(src.requester.application_ref.as_ref().map(|r| &r.name)),
    };
    let decider =
        DeciderInfo { team_name: decider_team.to_string(), team_email: non_empty(src.decider.and_then(|d| d.team_email.as_ref())) };
    let decisions = src
        .decisions
        .iter()
        .map(|d| {
            Ok(Decision {
                name: d.name.clone(),
                email: non_empty(d.email.as_ref()),
                comment: non_empty(d.comment.as_ref()),
                timestamp: d.timestamp.as_ref().map(Timestamp::from),
                resulting_state: match d.resulting_state.as_str() {
                    "" => None,
                    s => Some(ApprovalState::parse("spec.decisions[].resultingState", s)?),
                },
            })
        })
        .collect::<Result<Vec<_>, Skip>>()?;
    let available_transitions = src
        .transitions
        .iter()
        .filter(|t| matches!(flavor, Flavor::Request) || !t.to.eq_ignore_ascii_case("Expired"))
        .map(|t| {
            Ok(AvailableTransition {
                action: ApprovalAction::parse("status.availableTransitions[].action", &t.action)?,
                to_state: ApprovalState::parse("status.availableTransitions[].to", &t.to)?,
            })
        })
        .collect::<Result<Vec<_>, Skip>>()?;
    let requested_scopes = requested_scopes(src.requester.properties.as_ref())?;
    let status = common::status_from_conditions(src.conditions);
    let fields = ApprovalFields {
        action: action.to_string(),
        strategy,
        state,
        subscription: SubscriptionRef { kind, namespace, name: target_name.to_string() },
        requester,
        decider,
        decisions,
        available_transitions,
        requested_scopes,
    };
    Ok((meta, status, fields))
}

fn non_empty(s: Option<&String>) -> Option<String> {
    s.filter(|s| !s.is_empty()).cloned()
}

/// `scopes` of `spec.requester.properties`: `None` when the properties or the key are absent or
/// JSON `null`.
///
/// # Errors
/// [`Skip::Invalid`] when the properties are not a JSON object, or `scopes` is not a list of
/// strings.
fn requested_scopes(properties: Option<&serde_json::Value>) -> Result<Option<Vec<String>>, Skip> {
    let scopes = match properties {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(serde_json::Value::Object(map)) => map.get("scopes"),
        Some(other) => {
            return Err(Skip::Invalid {
                field: "spec.requester.properties",
                reason: format!("expected a JSON object, found {}", json_type(other)),
            })
        }
    };
    match scopes {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| Skip::Invalid { field: "spec.requester.properties.scopes", reason: "expected a list of strings".into() }),
        Some(other) => Err(Skip::Invalid {
            field: "spec.requester.properties.scopes",
            reason: format!("expected a list of strings, found {}", json_type(other)),
        }),
    }
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "an object",
    }
}

/// `Kind::key`: `(environment, namespace, name)` of the approval itself.
pub(crate) fn key(meta: &Meta) -> Key {
    natural::namespaced(&meta.environment, &meta.namespace, &meta.name)
}

/// `Kind::requires`: the subscription.
pub(crate) fn requires(meta: &Meta, sub: &SubscriptionRef) -> Vec<Parent> {
    vec![Parent { kind: sub.kind.kind_id(), key: sub.key(&meta.environment) }]
}

/// `Kind::links`: link 0 = the subscription's link 0, its target exposure.
pub(crate) fn links(meta: &Meta, sub: &SubscriptionRef) -> Vec<Link> {
    vec![Link::Via { kind: sub.kind.kind_id(), key: sub.key(&meta.environment), slot: 0 }]
}

/// `Kind::scopes`: the subscriber team, plus the provider team (component 1 of the target
/// exposure's key) when the subscription is linked and the teams differ.
pub(crate) fn scopes(meta: &Meta, sub: &SubscriptionRef, links: &[Option<Key>]) -> Vec<Scope> {
    let env = &meta.environment;
    let subscriber = sub.team();
    let mut scopes = vec![Scope::Team { env: env.clone(), team: subscriber.to_string() }];
    if let Some(Some(target)) = links.first() {
        let provider = target.part(1);
        if !provider.is_empty() && provider != subscriber {
            scopes.push(Scope::Team { env: env.clone(), team: provider });
        }
    }
    scopes
}

/// `Kind::index_entries`: the approval under its subscription in `index`.
pub(crate) fn index_entries(index: IndexName, meta: &Meta, sub: &SubscriptionRef) -> Vec<(IndexName, Key)> {
    vec![(index, sub.index_key(&meta.environment))]
}

/// The [`Source`] of an Approval or ApprovalRequest CR `$cr` (their `spec` and `status` have the
/// same fields).
macro_rules! approval_source {
    ($cr:expr) => {{
        let cr = $cr;
        let status = cr.status.as_ref();
        $crate::kinds::approval_common::Source {
            meta: &cr.metadata,
            action: &cr.spec.action,
            strategy: &cr.spec.strategy,
            state: &cr.spec.state,
            target: &cr.spec.target,
            requester: &cr.spec.requester,
            decider: cr.spec.decider.as_ref(),
            decisions: &cr.spec.decisions,
            transitions: status.map(|s| s.available_transitions.as_slice()).unwrap_or_default(),
            conditions: status.map(|s| s.conditions.as_slice()).unwrap_or_default(),
        }
    }};
}

pub(crate) use approval_source;

/// The [`crate::kind::Kind`] impl of an approval kind (Approval, ApprovalRequest): keyed,
/// required, linked and isolated by this module's rules; the kind says only its record,
/// `VERSION`, its index by subscription and its translation
/// (`fn(&crds::$kind, &Context) -> Result<$record, Skip>`).
macro_rules! approval_kind {
    (
        $kind:ident, $record:ident {
            const VERSION: u32 = $version:literal;
            by_subscription: $by_subscription:path,
            translate: $translate:path $(,)?
        }
    ) => {
        impl $crate::kind::Kind for $kind {
            $crate::kind::family_kind_items!($kind, $record, $version, $translate);

            fn key(rec: &$record) -> $crate::keys::Key {
                $crate::kinds::approval_common::key(&rec.meta)
            }

            fn requires(rec: &$record) -> Vec<$crate::kind::Parent> {
                $crate::kinds::approval_common::requires(&rec.meta, &rec.fields.subscription)
            }

            fn links(rec: &$record) -> Vec<$crate::kind::Link> {
                $crate::kinds::approval_common::links(&rec.meta, &rec.fields.subscription)
            }

            fn scopes(rec: &$record, links: &[Option<$crate::keys::Key>]) -> Vec<$crate::kind::Scope> {
                $crate::kinds::approval_common::scopes(&rec.meta, &rec.fields.subscription, links)
            }

            fn index_entries(rec: &$record, _links: &[Option<$crate::keys::Key>]) -> Vec<($crate::kind::IndexName, $crate::keys::Key)> {
                $crate::kinds::approval_common::index_entries($by_subscription, &rec.meta, &rec.fields.subscription)
            }
        }
    };
}

pub(crate) use approval_kind;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An approval may target exactly the kinds of the `Subscription` family of the table of
    /// kinds (the enum itself stays written out: its variants' order is part of the records'
    /// encoding).
    #[test]
    fn approvals_target_the_subscription_family() {
        let ctx = crate::kinds::testing::ctx();
        for kind in KindId::ALL {
            let target = SubscriptionKind::from_target(kind.name(), &ctx).map(SubscriptionKind::kind_id);
            if kind.family() == crate::kind::Family::Subscription {
                assert_eq!(target, Ok(*kind));
            } else {
                assert!(target.is_err(), "{kind:?}");
            }
        }
    }

    #[test]
    fn requested_scopes_from_properties() {
        assert_eq!(requested_scopes(None), Ok(None));
        assert_eq!(requested_scopes(Some(&json!(null))), Ok(None));
        assert_eq!(requested_scopes(Some(&json!({"basePath": "/a"}))), Ok(None));
        assert_eq!(requested_scopes(Some(&json!({"scopes": null}))), Ok(None));
        assert_eq!(requested_scopes(Some(&json!({"scopes": []}))), Ok(Some(vec![])));
        assert_eq!(requested_scopes(Some(&json!({"scopes": ["read", "write"]}))), Ok(Some(vec!["read".to_string(), "write".to_string()])));
    }

    #[test]
    fn malformed_properties_are_invalid() {
        let err = requested_scopes(Some(&json!("scopes"))).unwrap_err();
        assert_eq!(err.to_string(), "field `spec.requester.properties` is invalid: expected a JSON object, found a string");
        assert!(matches!(requested_scopes(Some(&json!([1]))), Err(Skip::Invalid { field: "spec.requester.properties", .. })));
        assert!(matches!(
            requested_scopes(Some(&json!({"scopes": "read"}))),
            Err(Skip::Invalid { field: "spec.requester.properties.scopes", .. })
        ));
        assert!(matches!(
            requested_scopes(Some(&json!({"scopes": ["read", 7]}))),
            Err(Skip::Invalid { field: "spec.requester.properties.scopes", .. })
        ));
    }

    #[test]
    fn states_and_actions_normalise_to_graphql_casing() {
        assert_eq!(ApprovalState::parse("f", "semigranted").unwrap().as_str(), "SEMIGRANTED");
        assert_eq!(ApprovalState::parse("f", "Expired").unwrap().as_str(), "EXPIRED");
        assert!(ApprovalState::parse_request("f", "Expired").is_err());
        assert!(ApprovalState::parse_request("f", "Suspended").is_err());
        assert_eq!(ApprovalState::parse_request("f", "GRANTED").unwrap(), ApprovalState::Granted);
        assert_eq!(ApprovalAction::parse("f", "allow").unwrap().as_str(), "ALLOW");
        assert_eq!(ApprovalAction::parse("f", "Resume").unwrap().as_str(), "RESUME");
        assert!(ApprovalAction::parse("f", "Expire").is_err());
    }

    #[test]
    fn scopes_add_the_provider_team_only_when_linked_and_different() {
        let meta = Meta { environment: "poc".into(), namespace: "poc--assist--copilot".into(), name: "a".into(), creation_timestamp: None };
        let sub = SubscriptionRef { kind: SubscriptionKind::ApiSubscription, namespace: "poc--assist--copilot".into(), name: "s".into() };
        let own = Scope::Team { env: "poc".into(), team: "assist--copilot".into() };
        assert_eq!(scopes(&meta, &sub, &[]), vec![own.clone()]);
        assert_eq!(scopes(&meta, &sub, &[None]), vec![own.clone()]);
        let same = natural::api_exposure("poc", "assist--copilot", "copilot-agent", "/x");
        assert_eq!(scopes(&meta, &sub, &[Some(same)]), vec![own.clone()]);
        let other = natural::api_exposure("poc", "payments--ledger", "ledger-core", "/payments/ledger/v2");
        assert_eq!(scopes(&meta, &sub, &[Some(other)]), vec![own, Scope::Team { env: "poc".into(), team: "payments--ledger".into() }]);
    }
}
