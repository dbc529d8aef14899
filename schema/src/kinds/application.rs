//! Application. Natural key `(environment, spec.team, name)`;
//! visible to its owner team; requires its Team and its Zone (same environment).
//!
//! Quirks fixed (ARCHITECTURE.md "The Go projector's quirks, fixed"): emptied fields clear the stored value (client ID and secret
//! included), and a changed `spec.zone` is reflected. The secret-rotation *phase* depends on the
//! time, so the record keeps the raw `SecretRotation` condition and [`secret_rotation`] derives the
//! phase at query time from an explicit `now`.
//!
//! Not stored here: `permissionsURL`, which combines the zone's permissions URL with the
//! existence of the application's PermissionSet and is resolved when read.

use crate::common::{required, status_from_conditions, Meta, Status};
use crate::graphql_enum::graphql_enum;
use crate::keys::{index, natural, Key};
use crate::kind::{Context, IndexName, Kind, KindId, Parent, Scope, Skip};
use crate::time::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The Application kind.
pub struct Application;

/// The condition type holding the secret-rotation state.
pub const SECRET_ROTATION_CONDITION: &str = "SecretRotation";

graphql_enum! {
    /// `ApplicationSecretRotationPhase`, computed at time `now` ([`secret_rotation`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum SecretRotationPhase {
        /// No rotation running (also: the grace period is over).
        Done = "DONE",
        /// A rotation is in progress.
        Rotating = "ROTATING",
        /// The rotated (old) secret is still accepted, at least 20 % of the grace period remains.
        GracePeriodActive = "GRACE_PERIOD_ACTIVE",
        /// The rotated secret is still accepted, less than 20 % of the grace period remains.
        GracePeriodExpiring = "GRACE_PERIOD_EXPIRING",
        /// The rotation failed.
        Failed = "FAILED",
    }
}

/// `ExternalId` (`spec.externalIds[]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalId {
    /// `spec.externalIds[].id` (GraphQL `Id`).
    pub id: String,
    /// `spec.externalIds[].scheme` (GraphQL `Schema`).
    pub scheme: String,
}

/// `IpRestrictions` (`spec.security.ipRestrictions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpRestrictions {
    /// `allow[]`; empty when absent (GraphQL `Allow`).
    pub allow: Vec<String>,
    /// `deny[]`; empty when absent (GraphQL `Deny`).
    pub deny: Vec<String>,
}

/// The raw `SecretRotation` condition (first of that type in `status.conditions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretRotationCondition {
    /// `reason`: `InProgress`, `Success`, `Failed`, `Error` or anything else.
    pub reason: String,
    /// `message`; `""` when absent.
    pub message: String,
    /// `lastTransitionTime`: when the rotation reached this state (the grace period's start for
    /// `Success`); `None` when absent.
    pub last_transition_time: Option<Timestamp>,
}

/// A projected Application.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplicationRecord {
    /// Common metadata; `meta.name` is the application name (`metadata.name`).
    pub meta: Meta,
    /// `spec.team`: the owner team `<group>--<team>`; must be non-empty.
    pub team: String,
    /// `spec.zone.name`: the application's zone (same environment); must be non-empty.
    pub zone: String,
    /// `clientID`: `status.clientId`; `None` when absent or empty.
    pub client_id: Option<String>,
    /// `clientSecret`: `spec.secret`; `None` when empty. A secret (reference).
    pub client_secret: Option<String>,
    /// `rotatedClientSecret`: `status.rotatedClientSecret`; `None` when absent or empty. A secret.
    pub rotated_client_secret: Option<String>,
    /// `rotatedExpiresAt`: `status.rotatedExpiresAt`; `None` when absent.
    pub rotated_expires_at: Option<Timestamp>,
    /// `currentExpiresAt`: `status.currentExpiresAt`; `None` when absent.
    pub current_expires_at: Option<Timestamp>,
    /// `externalIds`: `spec.externalIds[]` in order; empty when none (GraphQL `null`).
    pub external_ids: Vec<ExternalId>,
    /// `ipRestrictions`: `spec.security.ipRestrictions`; `None` unless `allow` or `deny` is
    /// non-empty.
    pub ip_restrictions: Option<IpRestrictions>,
    /// From `status.conditions`; `UNKNOWN` without status.
    pub status: Status,
    /// The `SecretRotation` condition; `None` when absent. See [`secret_rotation`].
    pub secret_rotation: Option<SecretRotationCondition>,
}

/// `secretRotationPhase` and `secretRotationMessage` at time `now`, as the Go projector derives them:
///
/// | `SecretRotation` condition | phase | message |
/// |---|---|---|
/// | absent | `DONE` | `None` |
/// | reason `InProgress` | `ROTATING` | message |
/// | reason `Success`, `rotatedExpiresAt` after `now` | `GRACE_PERIOD_EXPIRING` when less than 20 % of the period `lastTransitionTime..rotatedExpiresAt` remains, the period is not positive, or `lastTransitionTime` is absent; else `GRACE_PERIOD_ACTIVE` | message |
/// | reason `Success` otherwise | `DONE` | `None` |
/// | reason `Failed` or `Error` | `FAILED` | message |
/// | any other reason | `ROTATING` | message |
///
/// Reasons match exactly (case-sensitive). The message is `None` when empty. Whether the rotated
/// secret is set does not matter, only `rotatedExpiresAt`.
pub fn secret_rotation(rec: &ApplicationRecord, now: Timestamp) -> (SecretRotationPhase, Option<String>) {
    let Some(cond) = &rec.secret_rotation else {
        return (SecretRotationPhase::Done, None);
    };
    let message = Some(cond.message.clone()).filter(|m| !m.is_empty());
    match cond.reason.as_str() {
        "InProgress" => (SecretRotationPhase::Rotating, message),
        "Success" => match rec.rotated_expires_at {
            Some(expires) if expires > now => {
                let remaining = i128::from(expires.0) - i128::from(now.0);
                let period = cond.last_transition_time.map(|start| i128::from(expires.0) - i128::from(start.0));
                // remaining / period < 0.2, in integers.
                let expiring = match period {
                    Some(period) if period > 0 => remaining * 5 < period,
                    _ => true,
                };
                let phase = if expiring { SecretRotationPhase::GracePeriodExpiring } else { SecretRotationPhase::GracePeriodActive };
                (phase, message)
            }
            _ => (SecretRotationPhase::Done, None),
        },
        "Failed" | "Error" => (SecretRotationPhase::Failed, message),
        _ => (SecretRotationPhase::Rotating, message),
    }
}

/// `Some(value)` unless it is absent or empty.
fn non_empty(value: Option<&str>) -> Option<String> {
    value.filter(|v| !v.is_empty()).map(str::to_string)
}

impl Kind for Application {
    fn status(rec: &Self::Record) -> Option<&crate::common::Status> {
        Some(&rec.status)
    }

    const ID: KindId = KindId::Application;
    const VERSION: u32 = 1;
    const ORDER_BY_NAME: bool = true;
    type Cr = crds::Application;
    type Record = ApplicationRecord;

    fn meta(cr: &crds::Application) -> &ObjectMeta {
        &cr.metadata
    }

    fn translate(cr: &crds::Application, _ctx: &Context) -> Result<ApplicationRecord, Skip> {
        let meta = Meta::from_object(&cr.metadata)?;
        let spec = &cr.spec;
        let team = required("spec.team", &spec.team)?.to_string();
        let zone = required("spec.zone.name", &spec.zone.name)?.to_string();
        let status = cr.status.as_ref();
        let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
        let ip_restrictions = spec
            .security
            .as_ref()
            .and_then(|s| s.ip_restrictions.as_ref())
            .filter(|ip| !ip.allow.is_empty() || !ip.deny.is_empty())
            .map(|ip| IpRestrictions { allow: ip.allow.clone(), deny: ip.deny.clone() });
        let secret_rotation = conditions.iter().find(|c| c.type_ == SECRET_ROTATION_CONDITION).map(|c| SecretRotationCondition {
            reason: c.reason.clone(),
            message: c.message.clone(),
            last_transition_time: c.last_transition_time.as_ref().map(Timestamp::from),
        });
        Ok(ApplicationRecord {
            meta,
            team,
            zone,
            client_id: non_empty(status.map(|s| s.client_id.as_str())),
            client_secret: non_empty(Some(&spec.secret)),
            rotated_client_secret: non_empty(status.and_then(|s| s.rotated_client_secret.as_deref())),
            rotated_expires_at: status.and_then(|s| s.rotated_expires_at.as_ref()).map(Timestamp::from),
            current_expires_at: status.and_then(|s| s.current_expires_at.as_ref()).map(Timestamp::from),
            external_ids: spec.external_ids.iter().map(|e| ExternalId { id: e.id.clone(), scheme: e.scheme.clone() }).collect(),
            ip_restrictions,
            status: status_from_conditions(conditions),
            secret_rotation,
        })
    }

    fn key(rec: &ApplicationRecord) -> Key {
        natural::application(&rec.meta.environment, &rec.team, &rec.meta.name)
    }

    fn requires(rec: &ApplicationRecord) -> Vec<Parent> {
        let env = &rec.meta.environment;
        vec![
            Parent { kind: KindId::Team, key: natural::team(env, &rec.team) },
            Parent { kind: KindId::Zone, key: natural::zone(env, &rec.zone) },
        ]
    }

    fn scopes(rec: &ApplicationRecord, _links: &[Option<Key>]) -> Vec<Scope> {
        vec![Scope::Team { env: rec.meta.environment.clone(), team: rec.team.clone() }]
    }

    fn index_entries(rec: &ApplicationRecord, _links: &[Option<Key>]) -> Vec<(IndexName, Key)> {
        vec![(index::APPLICATION_BY_ZONE, natural::in_env(&rec.meta.environment, &rec.zone))]
    }

    fn name(rec: &ApplicationRecord) -> Option<&str> {
        Some(&rec.meta.name)
    }

    fn created_at(rec: &ApplicationRecord) -> Option<Timestamp> {
        rec.meta.creation_timestamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::kinds::testing::{ctx, world_object};
    use SecretRotationPhase::*;

    fn app(env: &str, name: &str) -> ApplicationRecord {
        Application::translate(&world_object::<crds::Application>("Application", env, name), &ctx()).unwrap()
    }

    fn ts(s: &str) -> Timestamp {
        Timestamp::parse_rfc3339(s).unwrap()
    }

    /// The world's reference time (`examples/world/FACTS.md`).
    fn now() -> Timestamp {
        ctx().now
    }

    #[test]
    fn key_requires_scopes_refs() {
        let rec = app("qa", "qa--payments--ledger/ledger-core");
        assert_eq!(Application::key(&rec), natural::application("qa", "payments--ledger", "ledger-core"));
        assert_eq!(Application::key(&rec).parts().unwrap(), vec!["qa", "payments--ledger", "ledger-core"]);
        assert_eq!(
            Application::requires(&rec),
            vec![
                Parent { kind: KindId::Team, key: natural::team("qa", "payments--ledger") },
                Parent { kind: KindId::Zone, key: natural::zone("qa", "aws-eu1") },
            ]
        );
        assert_eq!(Application::scopes(&rec, &[]), vec![Scope::Team { env: "qa".into(), team: "payments--ledger".into() }]);
        assert_eq!(Application::index_entries(&rec, &[]), vec![(index::APPLICATION_BY_ZONE, natural::in_env("qa", "aws-eu1"))]);
        assert_eq!(Application::name(&rec), Some("ledger-core"));
        const { assert!(Application::ORDER_BY_NAME) };
    }

    #[test]
    fn world_rotation_phases_match_facts() {
        let facts = [
            ("poc", "copilot-agent", Done),
            ("poc", "copilot-gateway", Done),
            ("poc", "knowledge-base", Done),
            ("poc", "fleet-planner", Failed),
            ("poc", "fleet-telemetry", Done),
            ("poc", "parcel-notifier", Done),
            ("poc", "parcel-tracker", Done),
            ("poc", "checkout-api", Done),
            ("poc", "checkout-batch", Rotating),
            ("poc", "checkout-web", GracePeriodActive),
            ("poc", "ledger-core", Done),
            ("poc", "ledger-reports", GracePeriodExpiring),
            ("qa", "checkout-api", Done),
            ("qa", "checkout-web", Done),
            ("qa", "ledger-core", Done),
        ];
        for (env, name, phase) in facts {
            assert_eq!(secret_rotation(&app(env, name), now()).0, phase, "{env} {name}");
        }
        assert_eq!(
            secret_rotation(&app("poc", "fleet-planner"), now()),
            (Failed, Some("identity client rejected the rotated secret".into()))
        );
        assert_eq!(
            secret_rotation(&app("poc", "checkout-batch"), now()),
            (Rotating, Some("Secret rotation initiated, waiting for sub-resources to converge".into()))
        );
        assert_eq!(
            secret_rotation(&app("poc", "ledger-reports"), now()),
            (GracePeriodExpiring, Some("Secret rotation completed successfully".into()))
        );
        assert_eq!(secret_rotation(&app("poc", "checkout-api"), now()), (Done, None));
    }

    /// A record with a `SecretRotation` condition `reason`/`message` that transitioned at `since`
    /// and a rotated secret expiring at `expires`.
    fn rotating(reason: &str, message: &str, since: Option<&str>, expires: Option<&str>) -> ApplicationRecord {
        let mut rec = app("poc", "checkout-web");
        rec.secret_rotation =
            Some(SecretRotationCondition { reason: reason.into(), message: message.into(), last_transition_time: since.map(ts) });
        rec.rotated_expires_at = expires.map(ts);
        rec
    }

    #[test]
    fn rotation_table_rows() {
        let msg = Some("m".to_string());
        // absent
        let mut rec = app("poc", "checkout-web");
        rec.secret_rotation = None;
        assert_eq!(secret_rotation(&rec, now()), (Done, None));
        // InProgress (message, empty message → None)
        assert_eq!(secret_rotation(&rotating("InProgress", "m", None, None), now()), (Rotating, msg.clone()));
        assert_eq!(secret_rotation(&rotating("InProgress", "", None, None), now()), (Rotating, None));
        // Success, 30-day grace period: 25 days left (83 %) → active; 2.7 days left (9 %) → expiring.
        let active = rotating("Success", "m", Some("2026-08-27T00:00:00Z"), Some("2026-09-26T00:00:00Z"));
        assert_eq!(secret_rotation(&active, now()), (GracePeriodActive, msg.clone()));
        let expiring = rotating("Success", "m", Some("2026-08-04T16:00:00Z"), Some("2026-09-03T16:00:00Z"));
        assert_eq!(secret_rotation(&expiring, now()), (GracePeriodExpiring, msg.clone()));
        // Exactly 20 % left is still active.
        let edge = rotating("Success", "m", Some("2026-08-08T00:00:00Z"), Some("2026-09-07T00:00:00Z"));
        assert_eq!(secret_rotation(&edge, now()), (GracePeriodActive, msg.clone()));
        // Non-positive period, or unknown start → expiring.
        let inverted = rotating("Success", "m", Some("2026-09-10T00:00:00Z"), Some("2026-09-05T00:00:00Z"));
        assert_eq!(secret_rotation(&inverted, now()), (GracePeriodExpiring, msg.clone()));
        let no_start = rotating("Success", "m", None, Some("2026-09-05T00:00:00Z"));
        assert_eq!(secret_rotation(&no_start, now()), (GracePeriodExpiring, msg.clone()));
        // Success without rotatedExpiresAt, or expired (also exactly now) → done without message.
        assert_eq!(secret_rotation(&rotating("Success", "m", Some("2026-08-01T00:00:00Z"), None), now()), (Done, None));
        let expired = rotating("Success", "m", Some("2026-07-01T00:00:00Z"), Some("2026-08-31T23:59:59Z"));
        assert_eq!(secret_rotation(&expired, now()), (Done, None));
        let at_now = rotating("Success", "m", Some("2026-07-01T00:00:00Z"), Some("2026-09-01T00:00:00Z"));
        assert_eq!(secret_rotation(&at_now, now()), (Done, None));
        // Failed / Error
        assert_eq!(secret_rotation(&rotating("Failed", "m", None, None), now()), (Failed, msg.clone()));
        assert_eq!(secret_rotation(&rotating("Error", "m", None, None), now()), (Failed, msg.clone()));
        // any other reason (reasons are case-sensitive)
        assert_eq!(secret_rotation(&rotating("Pending", "m", None, None), now()), (Rotating, msg.clone()));
        assert_eq!(secret_rotation(&rotating("success", "m", None, None), now()), (Rotating, msg));
        assert_eq!(GracePeriodExpiring.as_str(), "GRACE_PERIOD_EXPIRING");
    }

    #[test]
    fn emptied_fields_clear_values() {
        let mut cr: crds::Application = world_object("Application", "poc", "checkout-web");
        cr.spec.secret.clear();
        let status = cr.status.as_mut().unwrap();
        status.client_id.clear();
        status.rotated_client_secret = Some(String::new());
        cr.spec.security.as_mut().unwrap().ip_restrictions.as_mut().unwrap().allow.clear();
        let rec = Application::translate(&cr, &ctx()).unwrap();
        assert_eq!((rec.client_id, rec.client_secret, rec.rotated_client_secret), (None, None, None));
        assert_eq!(rec.ip_restrictions, None);
        cr.status = None;
        let rec = Application::translate(&cr, &ctx()).unwrap();
        assert_eq!((rec.status.phase, rec.secret_rotation), (StatusPhase::Unknown, None));
    }

    #[test]
    fn bad_input_is_skipped() {
        let mut cr: crds::Application = world_object("Application", "poc", "checkout-web");
        cr.spec.team.clear();
        assert_eq!(Application::translate(&cr, &ctx()), Err(Skip::Missing("spec.team")));
        let mut cr: crds::Application = world_object("Application", "poc", "checkout-web");
        cr.spec.zone.name.clear();
        assert_eq!(Application::translate(&cr, &ctx()), Err(Skip::Missing("spec.zone.name")));
        let mut cr: crds::Application = world_object("Application", "poc", "checkout-web");
        cr.metadata.name = None;
        assert_eq!(Application::translate(&cr, &ctx()), Err(Skip::Missing("metadata.name")));
    }
}
