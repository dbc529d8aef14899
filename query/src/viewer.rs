//! The viewer model and team isolation (ARCHITECTURE.md "Viewers and visibility").
//!
//! **Invariant: every read passes the viewer filter.** Root connections scan only the index
//! ranges of the viewer's [`Scope`]s; every other way to reach a record (`node`, nested edges,
//! filters on edges) checks [`Viewer::can_see`] against the record's own scopes. Cross-tenant
//! hops return reduced `…Info` types, built from records the viewer may not otherwise read.

use schema::keys::{index, natural};
use schema::Scope;
use storage::{ReadView, StorageError};

/// Who the caller is, from the first usable scope of the token (`<prefix>:<kind>:<access>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ViewerKind {
    /// `team`: the team of the `clientId`.
    Team,
    /// `group` (legacy `hub`): every team of the `clientId`'s group.
    Group,
    /// `admin`: everything, every environment.
    Admin,
}

/// What the caller may see of secrets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// `read`: plain values.
    Read,
    /// `obfuscated`: every secret masked as `**********`.
    Obfuscated,
    /// `all`: plain values.
    All,
}

/// Why claims do not make a viewer. Mapped to HTTP 403 by the server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimsError {
    /// A required claim is missing or not a non-empty string.
    #[error("claim '{0}' is missing or not a non-empty string")]
    Missing(&'static str),
    /// `clientId` is not `<group>--<team>--<app>` with three non-empty parts.
    #[error("claim 'clientId' is not <group>--<team>--<app> (three non-empty parts)")]
    InvalidClientId,
    /// No scope of the form `<prefix>:<team|group|hub|admin>:<read|obfuscated|all>`.
    #[error("claim 'scope' holds no scope <prefix>:<team|group|admin>:<read|obfuscated|all> with the configured prefix")]
    NoValidScope,
}

/// An authenticated caller.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Viewer {
    /// Team, group or admin.
    pub kind: ViewerKind,
    /// Secret access.
    pub access: Access,
    /// `env` claim: the only environment a non-admin viewer sees.
    pub env: String,
    /// Group from `clientId`.
    pub group: String,
    /// The stored team names (`<group>--<team>`) the viewer acts for: the own team for a team
    /// viewer, the group's teams (resolved from the store per request) for a group viewer, empty
    /// for an admin.
    pub teams: Vec<String>,
    /// `clientId` claim (`<group>--<team>--<app>`): who the audit log names.
    pub client_id: String,
    /// `exp` claim (seconds since the Unix epoch), if any: when the token stops being valid
    /// (long-lived subscription connections are closed then).
    pub expires_at: Option<i64>,
    /// The person behind the token: the `name` claim, else `preferred_username` (each used
    /// only when non-empty and at most [`MAX_PERSON_CLAIM_BYTES`]); recorded in approval
    /// decisions, the `clientId` when absent.
    pub name: Option<String>,
    /// The `email` claim (non-empty, at most [`MAX_PERSON_CLAIM_BYTES`]); recorded in approval
    /// decisions.
    pub email: Option<String>,
}

/// The longest `name`, `preferred_username` or `email` claim used, in bytes (a longer one is
/// ignored).
pub const MAX_PERSON_CLAIM_BYTES: usize = 256;

impl Viewer {
    /// Builds a viewer from token claims (`clientId`, `scope`, `env`; ARCHITECTURE.md "Viewers and visibility"). Only scopes whose first segment equals `scope_prefix` count; the
    /// first such scope decides. Group viewers get their teams from [`Viewer::resolve`].
    ///
    /// # Errors
    /// [`ClaimsError`] for missing or malformed claims.
    pub fn from_claims(claims: &serde_json::Value, scope_prefix: &str) -> Result<Viewer, ClaimsError> {
        let get = |name: &'static str| -> Result<&str, ClaimsError> {
            claims.get(name).and_then(|v| v.as_str()).filter(|s| !s.is_empty()).ok_or(ClaimsError::Missing(name))
        };
        let env = get("env")?.to_string();
        let client_id = get("clientId")?;
        let parts: Vec<&str> = client_id.split("--").collect();
        if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
            return Err(ClaimsError::InvalidClientId);
        }
        let scope = get("scope")?;
        let prefix = scope_prefix.trim_matches(':');
        let (kind, access) = scope
            .split_whitespace()
            .find_map(|s| {
                let seg: Vec<&str> = s.split(':').collect();
                if seg.len() != 3 || seg[0] != prefix {
                    return None;
                }
                let kind = match seg[1] {
                    "team" => ViewerKind::Team,
                    "group" | "hub" => ViewerKind::Group,
                    "admin" => ViewerKind::Admin,
                    _ => return None,
                };
                let access = match seg[2] {
                    "read" => Access::Read,
                    "obfuscated" => Access::Obfuscated,
                    "all" => Access::All,
                    _ => return None,
                };
                Some((kind, access))
            })
            .ok_or(ClaimsError::NoValidScope)?;
        let group = parts[0].to_string();
        let teams = match kind {
            ViewerKind::Team => vec![format!("{}--{}", parts[0], parts[1])],
            _ => Vec::new(),
        };
        let expires_at = claims.get("exp").and_then(|e| e.as_i64().or_else(|| e.as_f64().map(|f| f as i64)));
        let person = |claim: &str| {
            claims
                .get(claim)
                .and_then(|v| v.as_str())
                .filter(|s| !s.trim().is_empty() && s.len() <= MAX_PERSON_CLAIM_BYTES)
                .map(str::to_string)
        };
        let name = person("name").or_else(|| person("preferred_username"));
        let email = person("email");
        Ok(Viewer { kind, access, env, group, teams, client_id: client_id.to_string(), expires_at, name, email })
    }

    /// Resolves a group viewer's teams from the store (teams whose `spec.group` is the
    /// viewer's group, in the viewer's environment).
    ///
    /// # Errors
    /// [`StorageError`] when the lookup fails.
    pub fn resolve(&mut self, view: &ReadView) -> Result<(), StorageError> {
        if self.kind == ViewerKind::Group {
            let mut teams: Vec<String> = view
                .lookup(index::TEAM_BY_GROUP, &natural::in_env(&self.env, &self.group))?
                .into_iter()
                .map(|(_, key)| key.part(1))
                .collect();
            teams.sort();
            teams.dedup();
            self.teams = teams;
        }
        Ok(())
    }

    /// Whether the viewer is an admin.
    pub fn is_admin(&self) -> bool {
        self.kind == ViewerKind::Admin
    }

    /// The index scopes to scan for a kind whose records are team-owned (`team_owned`) or
    /// visible to the whole environment.
    pub fn scopes(&self, team_owned: bool) -> Vec<Scope> {
        if self.is_admin() {
            vec![Scope::All]
        } else if team_owned {
            self.teams.iter().map(|t| Scope::Team { env: self.env.clone(), team: t.clone() }).collect()
        } else {
            vec![Scope::Env { env: self.env.clone() }]
        }
    }

    /// Whether a record with `scopes` (from [`schema::Kind::scopes`]) is visible.
    pub fn can_see(&self, scopes: &[Scope]) -> bool {
        self.is_admin()
            || scopes.iter().any(|s| match s {
                Scope::Team { env, team } => env == &self.env && self.teams.iter().any(|t| t == team),
                Scope::Env { env } => env == &self.env,
                Scope::All => false,
            })
    }

    /// Whether the viewer acts for team `team` of environment `env`.
    pub fn owns(&self, env: &str, team: &str) -> bool {
        self.is_admin() || (env == self.env && self.teams.iter().any(|t| t == team))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn team_group_admin_viewers() {
        let v = Viewer::from_claims(&json!({"clientId": "eni--hyperion--console", "scope": "tardis:team:read", "env": "poc"}), "tardis")
            .unwrap();
        assert_eq!((v.kind, v.access, v.teams.clone()), (ViewerKind::Team, Access::Read, vec!["eni--hyperion".to_string()]));
        let g =
            Viewer::from_claims(&json!({"clientId": "eni--x--y", "scope": "openid tardis:hub:obfuscated", "env": "qa"}), "tardis").unwrap();
        assert_eq!((g.kind, g.access, g.group.as_str()), (ViewerKind::Group, Access::Obfuscated, "eni"));
        let a = Viewer::from_claims(&json!({"clientId": "a--b--c", "scope": "tardis:admin:all", "env": "poc"}), "tardis").unwrap();
        assert!(a.is_admin() && a.can_see(&[]));
    }

    #[test]
    fn bad_claims_are_rejected() {
        let base = json!({"clientId": "a--b--c", "scope": "tardis:team:read", "env": "poc"});
        for (field, err) in
            [("env", ClaimsError::Missing("env")), ("clientId", ClaimsError::Missing("clientId")), ("scope", ClaimsError::Missing("scope"))]
        {
            let mut c = base.clone();
            c.as_object_mut().unwrap().remove(field);
            assert_eq!(Viewer::from_claims(&c, "tardis"), Err(err));
        }
        for bad in ["a--b", "a--b--c--d", "--b--c", "a----c"] {
            let mut c = base.clone();
            c["clientId"] = json!(bad);
            assert_eq!(Viewer::from_claims(&c, "tardis"), Err(ClaimsError::InvalidClientId), "{bad}");
        }
        for bad in ["other:team:read", "tardis:organization:read", "tardis:team:write", "tardis:team"] {
            let mut c = base.clone();
            c["scope"] = json!(bad);
            assert_eq!(Viewer::from_claims(&c, "tardis"), Err(ClaimsError::NoValidScope), "{bad}");
        }
    }

    #[test]
    fn visibility_is_per_environment_and_team() {
        let v = Viewer::from_claims(&json!({"clientId": "payments--checkout--web", "scope": "tardis:team:all", "env": "poc"}), "tardis")
            .unwrap();
        let own = Scope::Team { env: "poc".into(), team: "payments--checkout".into() };
        let same_team_other_env = Scope::Team { env: "qa".into(), team: "payments--checkout".into() };
        let other = Scope::Team { env: "poc".into(), team: "payments--ledger".into() };
        assert!(v.can_see(std::slice::from_ref(&own)));
        assert!(!v.can_see(&[same_team_other_env]));
        assert!(!v.can_see(std::slice::from_ref(&other)));
        assert!(v.can_see(&[other, own]));
        assert!(v.can_see(&[Scope::Env { env: "poc".into() }]));
        assert!(!v.can_see(&[Scope::Env { env: "qa".into() }]));
        assert!(!v.can_see(&[Scope::All]));
    }
}
