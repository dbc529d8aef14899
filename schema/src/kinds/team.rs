//! Team and its members. Natural key `(environment, name)` with
//! name = `metadata.name` = `<group>--<team>`; visible to the team itself. The Group is an
//! optional reference: the team is indexed under `(environment, spec.group)` in
//! [`index::TEAM_BY_GROUP`] and the Group is looked up by that name when read, so a team written
//! before its group links up as soon as the group exists (no stale link: ARCHITECTURE.md "The Go projector's quirks, fixed").

use crate::common::{parse_enum, required, status_from_conditions, Meta, Status};
use crate::graphql_enum::graphql_enum;
use crate::keys::{index, natural, Key};
use crate::kind::{Context, IndexName, Kind, KindId, Scope, Skip};
use crate::time::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The Team kind.
pub struct Team;

graphql_enum! {
    /// `TeamCategory`: upper-case of `spec.category`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum TeamCategory {
        /// `Customer`.
        Customer = "CUSTOMER",
        /// `Infrastructure`.
        Infrastructure = "INFRASTRUCTURE",
    }
}

impl TeamCategory {
    /// Parses the CR value case-insensitively.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for values other than `Customer`/`Infrastructure`.
    pub fn parse(field: &'static str, value: &str) -> Result<TeamCategory, Skip> {
        parse_enum(
            field,
            value,
            "Customer, Infrastructure",
            &[("Customer", TeamCategory::Customer), ("Infrastructure", TeamCategory::Infrastructure)],
        )
    }
}

/// A team member (`spec.members[]`), in CR order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamMember {
    /// `spec.members[].name`.
    pub name: String,
    /// `spec.members[].email` (unique within the team: the member's identity).
    pub email: String,
}

/// A projected Team.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamRecord {
    /// Common metadata; `meta.name` is the team name `<group>--<team>` (`metadata.name`), and
    /// `meta.namespace` the environment namespace the Team object lives in.
    pub meta: Meta,
    /// `spec.email`; must be non-empty.
    pub email: String,
    /// `spec.category` (`Customer` when absent, the CRD default).
    pub category: TeamCategory,
    /// `spec.displayName`; `""` when absent (GraphQL `displayname`).
    pub display_name: String,
    /// `spec.description`; `""` when absent.
    pub description: String,
    /// `spec.teamToken` when non-empty, else `status.teamToken`; `None` when both are absent or
    /// empty. A secret (reference): resolved and masked when read.
    pub team_token: Option<String>,
    /// `spec.group`: the Group's name; `""` when empty (then the team has no group).
    pub group: String,
    /// `spec.members[]`, in order; empty when none.
    pub members: Vec<TeamMember>,
    /// From `status.conditions`; `UNKNOWN` without status.
    pub status: Status,
}

impl Kind for Team {
    fn status(rec: &Self::Record) -> Option<&crate::common::Status> {
        Some(&rec.status)
    }

    const ID: KindId = KindId::Team;
    const VERSION: u32 = 1;
    const ORDER_BY_NAME: bool = true;
    type Cr = crds::Team;
    type Record = TeamRecord;

    fn meta(cr: &crds::Team) -> &ObjectMeta {
        &cr.metadata
    }

    fn translate(cr: &crds::Team, _ctx: &Context) -> Result<TeamRecord, Skip> {
        let meta = Meta::from_object(&cr.metadata)?;
        let spec = &cr.spec;
        let email = required("spec.email", &spec.email)?.to_string();
        let category = TeamCategory::parse("spec.category", required("spec.category", &spec.category)?)?;
        let status_token = cr.status.as_ref().and_then(|s| s.team_token.as_deref());
        let team_token = [spec.team_token.as_deref(), status_token].into_iter().flatten().find(|t| !t.is_empty()).map(str::to_string);
        let conditions = cr.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
        Ok(TeamRecord {
            meta,
            email,
            category,
            display_name: spec.display_name.clone().unwrap_or_default(),
            description: spec.description.clone().unwrap_or_default(),
            team_token,
            group: spec.group.clone(),
            members: spec.members.iter().map(|m| TeamMember { name: m.name.clone(), email: m.email.clone() }).collect(),
            status: status_from_conditions(conditions),
        })
    }

    fn key(rec: &TeamRecord) -> Key {
        natural::team(&rec.meta.environment, &rec.meta.name)
    }

    fn scopes(rec: &TeamRecord, _links: &[Option<Key>]) -> Vec<Scope> {
        vec![Scope::Team { env: rec.meta.environment.clone(), team: rec.meta.name.clone() }]
    }

    fn index_entries(rec: &TeamRecord, _links: &[Option<Key>]) -> Vec<(IndexName, Key)> {
        if rec.group.is_empty() {
            Vec::new()
        } else {
            vec![(index::TEAM_BY_GROUP, natural::in_env(&rec.meta.environment, &rec.group))]
        }
    }

    fn name(rec: &TeamRecord) -> Option<&str> {
        Some(&rec.meta.name)
    }

    fn created_at(rec: &TeamRecord) -> Option<Timestamp> {
        rec.meta.creation_timestamp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::StatusPhase;
    use crate::kinds::testing::{ctx, world_object};

    fn team(env: &str, name: &str) -> TeamRecord {
        Team::translate(&world_object::<crds::Team>("Team", env, name), &ctx()).unwrap()
    }

    #[test]
    fn key_scopes_refs_and_name() {
        let rec = team("qa", "payments--checkout");
        assert_eq!(Team::key(&rec), natural::team("qa", "payments--checkout"));
        assert_eq!(Team::key(&rec).parts().unwrap(), vec!["qa", "payments--checkout"]);
        assert_eq!(Team::scopes(&rec, &[]), vec![Scope::Team { env: "qa".into(), team: "payments--checkout".into() }]);
        assert_eq!(Team::index_entries(&rec, &[]), vec![(index::TEAM_BY_GROUP, natural::in_env("qa", "payments"))]);
        assert!(Team::requires(&rec).is_empty());
        assert_eq!(Team::name(&rec), Some("payments--checkout"));
        const { assert!(Team::ORDER_BY_NAME) };

        let mut cr: crds::Team = world_object("Team", "qa", "payments--checkout");
        cr.spec.group.clear();
        assert!(Team::index_entries(&Team::translate(&cr, &ctx()).unwrap(), &[]).is_empty());
    }

    #[test]
    fn team_token_falls_back_to_status_and_empty_clears() {
        let mut cr: crds::Team = world_object("Team", "poc", "assist--knowledge");
        cr.status.as_mut().unwrap().team_token = Some("$<legacy>".into());
        assert_eq!(Team::translate(&cr, &ctx()).unwrap().team_token.as_deref(), Some("$<legacy>"));
        cr.spec.team_token = Some(String::new());
        assert_eq!(Team::translate(&cr, &ctx()).unwrap().team_token.as_deref(), Some("$<legacy>"));
        cr.spec.team_token = Some("$<spec>".into());
        assert_eq!(Team::translate(&cr, &ctx()).unwrap().team_token.as_deref(), Some("$<spec>"));
        cr.spec.team_token = None;
        cr.status.as_mut().unwrap().team_token = Some(String::new());
        assert_eq!(Team::translate(&cr, &ctx()).unwrap().team_token, None);
        cr.status = None;
        let rec = Team::translate(&cr, &ctx()).unwrap();
        assert_eq!((rec.team_token, rec.status.phase, rec.status.message.as_str()), (None, StatusPhase::Unknown, ""));
    }

    #[test]
    fn bad_input_is_skipped() {
        let mut cr: crds::Team = world_object("Team", "poc", "logistics--fleet");
        cr.spec.category = "INFRASTRUCTURE".into();
        assert_eq!(Team::translate(&cr, &ctx()).unwrap().category, TeamCategory::Infrastructure);
        cr.spec.category = "Partner".into();
        assert_eq!(
            Team::translate(&cr, &ctx()),
            Err(Skip::InvalidEnum { field: "spec.category", value: "Partner".into(), expected: "Customer, Infrastructure" })
        );
        let mut cr: crds::Team = world_object("Team", "poc", "logistics--fleet");
        cr.spec.email.clear();
        assert_eq!(Team::translate(&cr, &ctx()), Err(Skip::Missing("spec.email")));
    }
}
