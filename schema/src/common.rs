//! Translation helpers shared by several kinds, as the Go projector shares them: status from
//! conditions, environment, team from namespace, case-insensitive enums, the common record
//! metadata.

use crate::graphql_enum::graphql_enum;
use crate::kind::Skip;
use crate::time::Timestamp;
use crds::common::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// The label holding an object's environment.
pub const ENVIRONMENT_LABEL: &str = "cp.ei.telekom.de/environment";
/// The label naming an exposure's owner application.
pub const APPLICATION_LABEL: &str = "cp.ei.telekom.de/application";

graphql_enum! {
    /// `statusPhase`, from the `Ready` condition ([`status_from_conditions`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    pub enum StatusPhase {
        /// Ready condition `True`.
        Ready = "READY",
        /// Ready condition `False` with a reason other than `Error`/`Failed`.
        Pending = "PENDING",
        /// Ready condition `False` with reason `Error` or `Failed`.
        Error = "ERROR",
        /// No Ready condition, or a status other than `True`/`False`.
        Unknown = "UNKNOWN",
    }
}

/// `statusPhase` + `statusMessage`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// From the `Ready` condition ([`status_from_conditions`]).
    pub phase: StatusPhase,
    /// The `Ready` condition's message; `""` when there is no Ready condition.
    pub message: String,
}

/// Status from `status.conditions` (first condition of type exactly `Ready`), as the Go projector
/// derives it.
pub fn status_from_conditions(conditions: &[Condition]) -> Status {
    match conditions.iter().find(|c| c.type_ == "Ready") {
        None => Status { phase: StatusPhase::Unknown, message: String::new() },
        Some(c) => {
            let phase = match c.status.as_str() {
                "True" => StatusPhase::Ready,
                "False" if c.reason == "Error" || c.reason == "Failed" => StatusPhase::Error,
                "False" => StatusPhase::Pending,
                _ => StatusPhase::Unknown,
            };
            Status { phase, message: c.message.clone() }
        }
    }
}

/// The owner team of a namespace (the Go projector's `TeamNameFromNamespace`): everything after
/// the first `--`, or the namespace itself.
pub fn team_from_namespace(ns: &str) -> &str {
    match ns.find("--") {
        Some(i) => &ns[i + 2..],
        None => ns,
    }
}

/// The environment (ARCHITECTURE.md "Environments in one store"): the `cp.ei.telekom.de/environment` label when present
/// and non-empty, else the namespace's first `--` segment (the whole namespace if it has none).
pub fn environment(meta: &ObjectMeta) -> String {
    if let Some(env) = meta.labels.as_ref().and_then(|l| l.get(ENVIRONMENT_LABEL)) {
        if !env.is_empty() {
            return env.clone();
        }
    }
    let ns = meta.namespace.as_deref().unwrap_or("");
    ns.split("--").next().unwrap_or("").to_string()
}

/// A label's value, `""` when absent.
pub fn label<'a>(meta: &'a ObjectMeta, key: &str) -> &'a str {
    meta.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str).unwrap_or("")
}

/// Matches `value` case-insensitively against `(input, output)` pairs.
///
/// # Errors
/// [`Skip::InvalidEnum`] naming `field` and the accepted inputs.
pub fn parse_enum<T: Copy>(field: &'static str, value: &str, expected: &'static str, table: &[(&str, T)]) -> Result<T, Skip> {
    table.iter().find(|(name, _)| name.eq_ignore_ascii_case(value)).map(|(_, v)| *v).ok_or_else(|| Skip::InvalidEnum {
        field,
        value: value.to_string(),
        expected,
    })
}

/// Returns `value` or [`Skip::Missing`] when it is empty.
///
/// # Errors
/// [`Skip::Missing`] naming `field`.
pub fn required<'a>(field: &'static str, value: &'a str) -> Result<&'a str, Skip> {
    if value.is_empty() {
        Err(Skip::Missing(field))
    } else {
        Ok(value)
    }
}

/// Fields every record carries (ARCHITECTURE.md "Viewers and visibility": environment and times).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// See [`environment`].
    pub environment: String,
    /// `metadata.namespace` (required for every kind: all are namespaced).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.creationTimestamp`; `None` when absent (the store then uses the first
    /// projection time as `createdAt`).
    pub creation_timestamp: Option<Timestamp>,
}

impl Meta {
    /// Reads the common metadata.
    ///
    /// # Errors
    /// [`Skip::Missing`] for an absent or empty `metadata.namespace` or `metadata.name`.
    pub fn from_object(meta: &ObjectMeta) -> Result<Meta, Skip> {
        let namespace = required("metadata.namespace", meta.namespace.as_deref().unwrap_or(""))?.to_string();
        let name = required("metadata.name", meta.name.as_deref().unwrap_or(""))?.to_string();
        Ok(Meta {
            environment: environment(meta),
            namespace,
            name,
            creation_timestamp: meta.creation_timestamp.as_ref().map(Timestamp::from),
        })
    }

    /// The owner team derived from the namespace ([`team_from_namespace`]).
    pub fn team(&self) -> &str {
        team_from_namespace(&self.namespace)
    }
}

graphql_enum! {
    /// Approval strategy mapping (the Go projector's): `Auto`→`AUTO`, `Simple`→`SIMPLE`, `FourEyes`→`FOUR_EYES`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum ApprovalStrategy {
        /// `Auto`.
        Auto = "AUTO",
        /// `Simple`.
        Simple = "SIMPLE",
        /// `FourEyes`.
        FourEyes = "FOUR_EYES",
    }
}

impl ApprovalStrategy {
    /// Parses the CR value case-insensitively.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse(field: &'static str, value: &str) -> Result<ApprovalStrategy, Skip> {
        parse_enum(
            field,
            value,
            "Auto, Simple, FourEyes",
            &[("Auto", ApprovalStrategy::Auto), ("Simple", ApprovalStrategy::Simple), ("FourEyes", ApprovalStrategy::FourEyes)],
        )
    }
}

graphql_enum! {
    /// Exposure visibility (upper-cased as the Go projector does): `World`/`Zone`/`Enterprise`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub enum Visibility {
        /// `World`.
        World = "WORLD",
        /// `Zone`.
        Zone = "ZONE",
        /// `Enterprise`.
        Enterprise = "ENTERPRISE",
    }
}

impl Visibility {
    /// Parses the CR value case-insensitively.
    ///
    /// # Errors
    /// [`Skip::InvalidEnum`] for other values.
    pub fn parse(field: &'static str, value: &str) -> Result<Visibility, Skip> {
        parse_enum(
            field,
            value,
            "World, Zone, Enterprise",
            &[("World", Visibility::World), ("Zone", Visibility::Zone), ("Enterprise", Visibility::Enterprise)],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(status: &str, reason: &str) -> Condition {
        Condition { type_: "Ready".into(), status: status.into(), reason: reason.into(), message: "m".into(), ..Default::default() }
    }

    #[test]
    fn status_table() {
        assert_eq!(status_from_conditions(&[]), Status { phase: StatusPhase::Unknown, message: String::new() });
        assert_eq!(status_from_conditions(&[cond("True", "Provisioned")]).phase, StatusPhase::Ready);
        assert_eq!(status_from_conditions(&[cond("False", "Error")]).phase, StatusPhase::Error);
        assert_eq!(status_from_conditions(&[cond("False", "Failed")]).phase, StatusPhase::Error);
        assert_eq!(status_from_conditions(&[cond("False", "error")]).phase, StatusPhase::Pending);
        assert_eq!(status_from_conditions(&[cond("False", "")]).phase, StatusPhase::Pending);
        let garbage = status_from_conditions(&[cond("Maybe", "")]);
        assert_eq!((garbage.phase, garbage.message.as_str()), (StatusPhase::Unknown, "m"));
        let other_type = Condition { type_: "Processing".into(), status: "True".into(), ..Default::default() };
        assert_eq!(status_from_conditions(&[other_type]).phase, StatusPhase::Unknown);
    }

    #[test]
    fn team_from_namespace_examples() {
        assert_eq!(team_from_namespace("prod--eni--narvi-regr"), "eni--narvi-regr");
        assert_eq!(team_from_namespace("dev--my-team"), "my-team");
        assert_eq!(team_from_namespace("simple-ns"), "simple-ns");
        assert_eq!(team_from_namespace(""), "");
        assert_eq!(team_from_namespace("--rest"), "rest");
        assert_eq!(team_from_namespace("prefix--"), "");
        assert_eq!(team_from_namespace("env--group--team"), "group--team");
    }

    #[test]
    fn environment_from_label_then_namespace() {
        let mut meta = ObjectMeta { namespace: Some("qa--payments--ledger".into()), ..Default::default() };
        assert_eq!(environment(&meta), "qa");
        meta.labels = Some([(ENVIRONMENT_LABEL.to_string(), "poc".to_string())].into());
        assert_eq!(environment(&meta), "poc");
        meta.labels = Some([(ENVIRONMENT_LABEL.to_string(), String::new())].into());
        assert_eq!(environment(&meta), "qa");
    }

    #[test]
    fn enums_are_case_insensitive_and_report_bad_values() {
        assert_eq!(Visibility::parse("spec.visibility", "enterprise").unwrap(), Visibility::Enterprise);
        assert_eq!(ApprovalStrategy::parse("spec.strategy", "FOUREYES").unwrap().as_str(), "FOUR_EYES");
        let err = Visibility::parse("spec.visibility", "Galaxy").unwrap_err();
        assert_eq!(err.to_string(), "field `spec.visibility` has invalid value \"Galaxy\" (expected one of World, Zone, Enterprise)");
    }
}
