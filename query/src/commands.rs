//! The command side's boundary (mutations write to Kubernetes and the read model follows through
//! the projector: ARCHITECTURE.md, `query` "Mutations"): what a mutation asks the server
//! to write to Kubernetes, and what comes back. The query layer decides *whether* a mutation may
//! run (the viewer loads the entity, the Go server's permission rule of each mutation) and *what*
//! to write; the server's [`CommandSink`] writes it through its Kubernetes client, stamps the
//! environment label, maps the API server's errors and waits until the projector has applied
//! the write. Nothing here knows HTTP or a Kubernetes client.

use schema::KindId;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// The label every written object carries: the environment of its natural key.
pub const ENVIRONMENT_LABEL: &str = "cp.ei.telekom.de/environment";

/// The codes of a mutation's payload errors (`MutationError.code`, the reference's
/// `ErrorCode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorCode {
    /// The entity is not there, or not visible to the caller.
    NotFound,
    /// The caller may not do this, or the cluster's policy refused it.
    Forbidden,
    /// The object changed since it was read, or already exists.
    Conflict,
    /// The input, or the object it would produce, is invalid.
    ValidationFailed,
    /// The state does not allow it (disabled, a transition not available, children left), or
    /// an unexpected failure.
    PreconditionFailed,
}

impl ErrorCode {
    /// Every code, in the schema's order.
    pub const ALL: [ErrorCode; 5] =
        [ErrorCode::NotFound, ErrorCode::Forbidden, ErrorCode::Conflict, ErrorCode::ValidationFailed, ErrorCode::PreconditionFailed];

    /// The GraphQL enum value (`NOT_FOUND`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::Forbidden => "FORBIDDEN",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::ValidationFailed => "VALIDATION_FAILED",
            ErrorCode::PreconditionFailed => "PRECONDITION_FAILED",
        }
    }
}

/// One error of a mutation's payload (`MutationError`): domain failures are answered here, not
/// as GraphQL errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MutationError {
    /// What kind of failure.
    pub code: ErrorCode,
    /// For people; never a secret, never an upstream body.
    pub message: String,
    /// The input field it concerns, if one.
    pub field: Option<String>,
}

impl MutationError {
    /// An error without a field.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> MutationError {
        MutationError { code, message: message.into(), field: None }
    }
}

/// One custom resource: kind, namespace, name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The kind (its API group, version and plural come from the CR type).
    pub kind: KindId,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The environment of the entity: the value of [`ENVIRONMENT_LABEL`] on the written object.
    pub environment: String,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind.name(), self.namespace, self.name)
    }
}

/// Changes an object read from the cluster before it is written back; an error stops the
/// mutation without a write (a transition that is not available).
pub type Edit = Box<dyn FnOnce(&mut Value) -> Result<(), MutationError> + Send>;

/// What to write.
pub enum Command {
    /// Create the object, or update the existing one's `spec` (createTeam, createGroup): `spec`
    /// is the whole new spec.
    CreateOrUpdate {
        /// The object.
        target: Target,
        /// Its `spec`.
        spec: Value,
    },
    /// Read the object, change it with `edit`, write it back with the `resourceVersion` read:
    /// a change in between is `CONFLICT` (never retried).
    Update {
        /// The object.
        target: Target,
        /// The change.
        edit: Edit,
    },
    /// Delete the object (already gone: success, not accepted).
    Delete {
        /// The object.
        target: Target,
    },
}

impl Command {
    /// The object written.
    pub fn target(&self) -> &Target {
        match self {
            Command::CreateOrUpdate { target, .. } | Command::Update { target, .. } | Command::Delete { target } => target,
        }
    }

    /// `create-or-update`, `update` or `delete` (for the log).
    pub fn verb(&self) -> &'static str {
        match self {
            Command::CreateOrUpdate { .. } => "create-or-update",
            Command::Update { .. } => "update",
            Command::Delete { .. } => "delete",
        }
    }
}

/// A write the API server accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applied {
    /// `false` when the object was already gone (a delete): nothing was written.
    pub accepted: bool,
    /// Whether the projector applied the write (its `resourceVersion`, or the delete) within the
    /// server's projection timeout; `false`: reads still show the state before it.
    pub projected: bool,
}

/// A write in flight.
pub type Writing = Pin<Box<dyn Future<Output = Result<Applied, MutationError>> + Send>>;

/// Who asks for a write: recorded in approval decisions and in the mutation log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The token's `clientId`.
    pub client_id: String,
    /// The decision's `name`.
    pub name: String,
    /// The decision's `email` (may be empty).
    pub email: String,
}

/// Writes custom resources to the cluster (the server's Kubernetes client).
///
/// Implementations stamp [`ENVIRONMENT_LABEL`] with [`Target::environment`], never retry a write
/// on their own, map the API server's answers to [`MutationError`]s (NotFound → `NOT_FOUND`,
/// Conflict and AlreadyExists → `CONFLICT`, Forbidden → `FORBIDDEN`, Invalid →
/// `VALIDATION_FAILED`, anything else → `PRECONDITION_FAILED`), and wait (bounded) until the
/// store holds the written version before they answer.
pub trait CommandSink: Send + Sync + std::fmt::Debug {
    /// Writes `command` for `caller`, giving up at `until` (the request's deadline; `None`: no
    /// deadline): a write that did not finish by then is `PRECONDITION_FAILED` with its outcome
    /// unknown, and the wait for its projection ends there at the latest.
    fn execute(&self, command: Command, caller: Caller, until: Option<std::time::Instant>) -> Writing;

    /// Before a team is deleted: `Err` when the team still has resources elsewhere (the rover
    /// server's answer, as the Go server asks it), or they cannot be checked; `Ok` when none, or
    /// when no such check is configured.
    fn check_team_resources(
        &self,
        environment: &str,
        group: &str,
        team: &str,
    ) -> Pin<Box<dyn Future<Output = Result<(), MutationError>> + Send>>;
}
