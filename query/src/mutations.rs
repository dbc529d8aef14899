//! Mutations (the Go server's twelve, with its input and payload types; ARCHITECTURE.md, `query`
//! "Mutations"): the console's commands, written to Kubernetes through the server's [`CommandSink`] and
//! answered once the projector has applied them.
//!
//! **Flow of every mutation field**, in this order (each failure is a payload error, never a
//! GraphQL error):
//! 1. no command sink (`mutations.enabled` off, or the manifests source) → `PRECONDITION_FAILED`
//!    "mutations are disabled";
//! 2. a token without access `all` → `FORBIDDEN`;
//! 3. the input's bounds ([`MAX_TEXT_BYTES`], [`MAX_MEMBERS`], names that are DNS labels) →
//!    `VALIDATION_FAILED` with the input field;
//! 4. the entity loaded **with the caller's viewer** (`node(id:)`'s rules): absent, hidden or of
//!    another type → `NOT_FOUND` ("team not found", …), so a hidden entity is not told apart
//!    from an absent one;
//! 5. the mutation's permission rule (the Go server's) → `FORBIDDEN` with the reason;
//! 6. the write ([`Command`]) and the sink's answer, its errors mapped as the Go server maps
//!    Kubernetes' (`control_plane::commands`).
//!
//! **Answered after the write is projected.** A mutation request runs twice
//! ([`crate::Api::run`]): the first pass executes the writes in document order (each waits,
//! bounded, until the store holds the written `resourceVersion`, [`Applied::projected`]), the
//! second resolves the same selection on a read view opened after them, with the outcomes of
//! the first. So the payload's entity is the record **after** the write (the reference answers
//! the state before it); when the projector had not applied it in time the payload still says
//! `accepted: true`, the entity is the last projected state and `note` says so.
//!
//! Every mutation field is logged (target `mutation`): the operation, the caller's `clientId`,
//! the target and the outcome; never secret values.

use crate::commands::{Applied, Caller, Command, CommandSink, ErrorCode, MutationError, Target};
use crate::entity::Builder;
use crate::fields::{boolean, enum_item, field, nullable_string, string};
use crate::request::RequestContext;
use crate::viewer::{Access, Viewer, ViewerKind};
use async_graphql::dynamic::{Field, FieldFuture, FieldValue, InputObject, InputValue, Object, ObjectAccessor, TypeRef};
use async_graphql::Error;
use schema::keys::{index, natural};
use schema::kinds::{application::Application, approval::Approval, approval_request::ApprovalRequest, group::Group, team::Team};
use schema::{GlobalId, Key, KindId};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The most mutation fields one request may hold (more: `TOO_MANY_MUTATIONS` before anything
/// runs); each is a write to the cluster and a wait for its projection.
pub const MAX_MUTATIONS: usize = 10;

/// The longest text input (an email, a display name, a comment, …), in bytes.
pub const MAX_TEXT_BYTES: usize = 4096;

/// The most members a team may get through `createTeam` or `addTeamMember`.
pub const MAX_MEMBERS: usize = 500;

/// The part of the request's time kept for answering after the writes: a write and the wait for
/// its projection end this long before the request's deadline.
pub const ANSWER_RESERVE: std::time::Duration = std::time::Duration::from_millis(500);

/// What the payloads' `note` says when the write was not projected in time.
pub const NOT_PROJECTED: &str =
    "the write was accepted, but the read model had not applied it when this answer was built: the entity shows its last projected state";

/// The pass of a mutation request (request data, set by [`crate::Api::run`]).
#[derive(Clone)]
pub(crate) struct MutationRun {
    /// `true` in the second pass: answer with the outcomes of the first.
    answer: bool,
    outcomes: Arc<Mutex<VecDeque<Outcome>>>,
}

impl MutationRun {
    /// The first pass: mutations write and keep their outcomes.
    pub(crate) fn execute() -> MutationRun {
        MutationRun { answer: false, outcomes: Arc::default() }
    }

    /// The second pass over the outcomes of `self` (the first).
    pub(crate) fn answer(&self) -> MutationRun {
        MutationRun { answer: true, outcomes: self.outcomes.clone() }
    }

    /// Whether a mutation field ran.
    pub(crate) fn ran(&self) -> bool {
        !lock(&self.outcomes).is_empty()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The entity a payload shows.
#[derive(Clone, Debug)]
enum EntityRef {
    /// A record by natural key.
    Record { type_name: &'static str, key: Key },
    /// The record the store holds of a source object (a created one).
    Source { type_name: &'static str, kind: KindId, namespace: String, name: String },
}

/// What one mutation field did.
#[derive(Clone, Debug)]
struct Outcome {
    accepted: bool,
    errors: Vec<MutationError>,
    entity: Option<EntityRef>,
    projected: bool,
}

impl Outcome {
    fn refused(e: MutationError) -> Outcome {
        Outcome { accepted: false, errors: vec![e], entity: None, projected: true }
    }
}

/// A payload as resolved.
struct Payload {
    outcome: Outcome,
    /// Second pass: the entity is read.
    answer: bool,
}

/// What a mutation field writes, once it may.
struct Plan {
    command: Command,
    entity: Option<EntityRef>,
    /// Checked with the rover server first: `(environment, group, team)`.
    team_resources: Option<(String, String, String)>,
}

/// What a mutation's planning reads and decides with.
struct Ask<'a> {
    request: &'a RequestContext,
    args: &'a ObjectAccessor<'a>,
}

type Planner = fn(&Ask<'_>) -> Result<Plan, MutationError>;

/// One mutation: name, arguments (name and type in SDL notation), payload and planner.
struct Spec {
    name: &'static str,
    description: &'static str,
    payload: &'static str,
    args: &'static [(&'static str, &'static str)],
    plan: Planner,
}

/// The mutations, in the `Mutation` type's field order.
const MUTATIONS: [Spec; 12] = [
    Spec {
        name: "createTeam",
        description: "Create a new Team in Kubernetes",
        payload: "CreateTeamPayload",
        args: &[("input", "CreateTeamInput!")],
        plan: create_team,
    },
    Spec {
        name: "updateTeam",
        description: "Update team metadata (email, description, displayName). Does not manage members.",
        payload: "UpdateTeamPayload",
        args: &[("input", "UpdateTeamInput!")],
        plan: update_team,
    },
    Spec {
        name: "deleteTeam",
        description: "Delete a Team. Fails if the team still has resources (Rovers, ApiSpecs, etc.).",
        payload: "DeleteTeamPayload",
        args: &[("input", "DeleteTeamInput!")],
        plan: delete_team,
    },
    Spec {
        name: "addTeamMember",
        description: "Add a member to a team.",
        payload: "AddTeamMemberPayload",
        args: &[("teamId", "ID!"), ("member", "MemberInput!")],
        plan: add_team_member,
    },
    Spec {
        name: "removeTeamMember",
        description: "Remove a member from a team by email.",
        payload: "RemoveTeamMemberPayload",
        args: &[("teamId", "ID!"), ("memberEmail", "String!")],
        plan: remove_team_member,
    },
    Spec {
        name: "rotateTeamToken",
        description: "Rotate the token for a team. Triggers async secret regeneration.",
        payload: "RotateTeamTokenPayload",
        args: &[("teamId", "ID!")],
        plan: rotate_team_token,
    },
    Spec {
        name: "rotateApplicationSecret",
        description: "Rotate the client secret for an application. Triggers async secret regeneration.",
        payload: "RotateApplicationSecretPayload",
        args: &[("applicationId", "ID!")],
        plan: rotate_application_secret,
    },
    Spec {
        name: "createGroup",
        description: "Create a new Group in Kubernetes",
        payload: "CreateGroupPayload",
        args: &[("input", "CreateGroupInput!")],
        plan: create_group,
    },
    Spec {
        name: "updateGroup",
        description: "Update group metadata (displayName, description).",
        payload: "UpdateGroupPayload",
        args: &[("input", "UpdateGroupInput!")],
        plan: update_group,
    },
    Spec {
        name: "deleteGroup",
        description: "Delete a Group. Fails if the group still has teams.",
        payload: "DeleteGroupPayload",
        args: &[("input", "DeleteGroupInput!")],
        plan: delete_group,
    },
    Spec {
        name: "decideApprovalRequest",
        description: "Decide on an ApprovalRequest (approve or deny initial access).",
        payload: "DecideApprovalRequestPayload",
        args: &[("approvalRequestId", "ID!"), ("input", "DecisionInput!")],
        plan: decide_approval_request,
    },
    Spec {
        name: "decideApproval",
        description: "Decide on an existing Approval (suspend, resume, deny, or re-allow ongoing access).",
        payload: "DecideApprovalPayload",
        args: &[("approvalId", "ID!"), ("input", "DecisionInput!")],
        plan: decide_approval,
    },
];

/// The input types of the mutations: name and fields (name and type in SDL notation).
const INPUTS: [(&str, &[(&str, &str)]); 8] = [
    ("MemberInput", &[("name", "String!"), ("email", "String!")]),
    ("DecisionInput", &[("action", "ApprovalAction!"), ("comment", "String")]),
    (
        "CreateTeamInput",
        &[
            ("environment", "String!"),
            ("group", "String!"),
            ("name", "String!"),
            ("email", "String!"),
            ("members", "[MemberInput!]!"),
            ("displayName", "String"),
            ("description", "String"),
        ],
    ),
    ("UpdateTeamInput", &[("teamId", "ID!"), ("email", "String"), ("displayName", "String"), ("description", "String")]),
    ("DeleteTeamInput", &[("teamId", "ID!")]),
    ("CreateGroupInput", &[("environment", "String!"), ("name", "String!"), ("displayName", "String!"), ("description", "String")]),
    ("UpdateGroupInput", &[("groupId", "ID!"), ("displayName", "String"), ("description", "String")]),
    ("DeleteGroupInput", &[("groupId", "ID!")]),
];

/// A payload type: its name, its entity field and type, whether it has `accepted`.
type PayloadShape = (&'static str, Option<(&'static str, &'static str)>, bool);

/// The payload types of the mutations.
const PAYLOADS: [PayloadShape; 12] = [
    ("CreateTeamPayload", Some(("team", "Team")), true),
    ("UpdateTeamPayload", Some(("team", "Team")), true),
    ("DeleteTeamPayload", None, true),
    ("AddTeamMemberPayload", Some(("team", "Team")), false),
    ("RemoveTeamMemberPayload", Some(("team", "Team")), false),
    ("RotateTeamTokenPayload", Some(("team", "Team")), true),
    ("CreateGroupPayload", Some(("group", "Group")), true),
    ("UpdateGroupPayload", Some(("group", "Group")), true),
    ("DeleteGroupPayload", None, true),
    ("RotateApplicationSecretPayload", Some(("application", "Application")), true),
    ("DecideApprovalRequestPayload", Some(("approvalRequest", "ApprovalRequest")), true),
    ("DecideApprovalPayload", Some(("approval", "Approval")), true),
];

/// A type reference written in SDL notation: `T`, `T!`, `[T!]!`, ….
fn type_ref(sdl: &'static str) -> TypeRef {
    if let Some(inner) = sdl.strip_suffix('!') {
        return TypeRef::NonNull(Box::new(type_ref(inner)));
    }
    match sdl.strip_prefix('[').and_then(|list| list.strip_suffix(']')) {
        Some(item) => TypeRef::List(Box::new(type_ref(item))),
        None => TypeRef::named(sdl),
    }
}

/// Registers the mutation types (`ErrorCode`, `MutationError`, the inputs and payloads) and
/// returns the `Mutation` root object. `sink` writes (`None`: every mutation answers "mutations
/// are disabled").
pub(crate) fn register(builder: &mut Builder, sink: Option<Arc<dyn CommandSink>>) -> Object {
    builder.enumeration("ErrorCode", &ErrorCode::ALL.map(ErrorCode::name));
    builder.object(
        Object::new("MutationError")
            .description("A failure of a mutation (domain failures are answered here, not as GraphQL errors).")
            .field(field::<MutationError>("code", TypeRef::named_nn("ErrorCode"), |e, _| Ok(enum_item(e.code.name()))))
            .field(field::<MutationError>("message", TypeRef::named_nn(TypeRef::STRING), |e, _| Ok(string(&e.message))))
            .field(field::<MutationError>("field", TypeRef::named(TypeRef::STRING), |e, _| Ok(nullable_string(e.field.as_deref())))),
    );
    for (name, fields) in INPUTS {
        let mut input = InputObject::new(name);
        for (field, ty) in fields {
            input = input.field(InputValue::new(*field, type_ref(ty)));
        }
        builder.inputs.push(input);
    }
    for (name, entity, accepted) in PAYLOADS {
        builder.object(payload_object(name, entity, accepted));
    }
    let mut root = Object::new("Mutation");
    for spec in &MUTATIONS {
        root = root.field(mutation_field(spec, sink.clone()));
    }
    root
}

/// A payload object: its entity field (`entity`: field name and type), `accepted` when asked,
/// `errors` and `note`.
fn payload_object(name: &str, entity: Option<(&'static str, &'static str)>, accepted: bool) -> Object {
    let mut o = Object::new(name);
    if let Some((field_name, type_name)) = entity {
        o = o.field(
            field::<Payload>(field_name, TypeRef::named(type_name), move |p, request| {
                if !p.answer {
                    return Ok(None);
                }
                entity_value(request, p.outcome.entity.as_ref())
            })
            .description("The entity after the mutation (its last projected state when `note` is set); null when it is not visible."),
        );
    }
    if accepted {
        o = o.field(
            field::<Payload>("accepted", TypeRef::named_nn(TypeRef::BOOLEAN), |p, _| Ok(boolean(p.outcome.accepted)))
                .description("Whether the Kubernetes API server accepted the write."),
        );
    }
    o.field(field::<Payload>("errors", TypeRef::named_nn_list_nn("MutationError"), |p, _| {
        Ok(Some(FieldValue::list(p.outcome.errors.iter().cloned().map(FieldValue::owned_any))))
    }))
    .field(
        field::<Payload>("note", TypeRef::named(TypeRef::STRING), |p, _| {
            Ok(nullable_string((p.outcome.accepted && !p.outcome.projected).then_some(NOT_PROJECTED)))
        })
        .description("Set when the write was accepted but not yet projected: the entity shows its last projected state."),
    )
}

fn entity_value(request: &RequestContext, entity: Option<&EntityRef>) -> Result<Option<FieldValue<'static>>, Error> {
    let (type_name, key) = match entity {
        None => return Ok(None),
        Some(EntityRef::Record { type_name, key }) => (*type_name, key.clone()),
        Some(EntityRef::Source { type_name, kind, namespace, name }) => {
            match request.view.source_version(*kind, namespace, name).map_err(|e| request.storage_error(e))? {
                Some((key, _)) => (*type_name, key),
                None => return Ok(None),
            }
        }
    };
    fn visible<K: crate::entity::Entity>(request: &RequestContext, key: &Key) -> Result<Option<FieldValue<'static>>, Error> {
        Ok(request.load_visible::<K>(key)?.map(crate::entity::node_value::<K>))
    }
    match type_name {
        "Team" => visible::<Team>(request, &key),
        "Group" => visible::<Group>(request, &key),
        "Application" => visible::<Application>(request, &key),
        "Approval" => visible::<Approval>(request, &key),
        "ApprovalRequest" => visible::<ApprovalRequest>(request, &key),
        other => Err(crate::error::internal(format!("a mutation payload of type {other}"))),
    }
}

/// The root field of one mutation; `sink` writes (`None`: it answers "mutations are disabled").
fn mutation_field(spec: &Spec, sink: Option<Arc<dyn CommandSink>>) -> Field {
    let Spec { name, description, payload, args, plan } = *spec;
    let mut f = Field::new(name, TypeRef::named_nn(payload), move |ctx| {
        let sink = sink.clone();
        FieldFuture::new(async move {
            let request = ctx.data::<RequestContext>()?;
            let run = ctx.data::<MutationRun>()?;
            let outcome = if run.answer {
                lock(&run.outcomes).pop_front().ok_or_else(|| crate::error::internal("a mutation of the request did not run"))?
            } else {
                let outcome = execute(name, plan, sink.as_deref(), request, &ctx.args).await;
                lock(&run.outcomes).push_back(outcome.clone());
                outcome
            };
            Ok(Some(FieldValue::owned_any(Payload { outcome, answer: run.answer })))
        })
    })
    .description(description);
    for (arg, ty) in args {
        f = f.argument(InputValue::new(*arg, type_ref(ty)));
    }
    f
}

/// Runs one mutation field's flow (see the module documentation) and logs its outcome.
async fn execute(
    name: &'static str,
    plan: Planner,
    sink: Option<&dyn CommandSink>,
    request: &RequestContext,
    args: &ObjectAccessor<'_>,
) -> Outcome {
    let viewer = &request.viewer;
    // Until the target is known: the ID the caller named (a hidden entity's ID is the caller's own input).
    let mut target = given_id(args).map(|id| format!("id {id}"));
    let outcome = async {
        let Some(sink) = sink else { return Outcome::refused(MutationError::new(ErrorCode::PreconditionFailed, "mutations are disabled")) };
        if viewer.access != Access::All {
            return Outcome::refused(MutationError::new(ErrorCode::Forbidden, "forbidden: mutations need a token with access `all`"));
        }
        let plan = match plan(&Ask { request, args }) {
            Ok(p) => p,
            Err(e) => return Outcome::refused(e),
        };
        target = Some(plan.command.target().to_string());
        if let Some((env, group, team)) = &plan.team_resources {
            let check = sink.check_team_resources(env, group, team);
            let checked = match request.deadline.at() {
                Some(at) => request.deadline.wait_outside(tokio::time::timeout_at(at.into(), check)).await.unwrap_or_else(|_| {
                    Err(MutationError::new(ErrorCode::PreconditionFailed, "unable to verify team resources, please try again"))
                }),
                None => request.deadline.wait_outside(check).await,
            };
            if let Err(e) = checked {
                return Outcome::refused(e);
            }
        }
        let caller = Caller {
            client_id: viewer.client_id.clone(),
            name: viewer.name.clone().unwrap_or_else(|| viewer.client_id.clone()),
            email: viewer.email.clone().unwrap_or_default(),
        };
        // The answer's second pass needs a moment of the request's time after the writes.
        let until = request.deadline.at().map(|at| at.checked_sub(ANSWER_RESERVE).unwrap_or(at));
        match request.deadline.wait_outside(sink.execute(plan.command, caller, until)).await {
            Ok(Applied { accepted, projected }) => Outcome { accepted, errors: Vec::new(), entity: plan.entity, projected },
            Err(e) => Outcome { entity: plan.entity, ..Outcome::refused(e) },
        }
    }
    .await;
    let result = match (outcome.errors.first(), outcome.accepted) {
        (Some(e), _) => e.code.name(),
        (None, true) if outcome.projected => "accepted",
        (None, true) => "accepted, not projected yet",
        (None, false) => "already gone",
    };
    tracing::info!(target: "mutation", operation = name, viewer = %viewer.client_id, target = target.as_deref().unwrap_or("-"), outcome = result, "mutation");
    outcome
}

// ------------------------------------------------------------------------------ inputs and checks

/// The entity ID a mutation's arguments name (`teamId`, or `input.groupId`), for the log.
fn given_id(args: &ObjectAccessor<'_>) -> Option<String> {
    let id_of = |o: &ObjectAccessor<'_>| {
        o.iter().find_map(|(k, v)| (k.as_str().ends_with("Id")).then(|| v.string().ok().map(str::to_string)).flatten())
    };
    id_of(args).or_else(|| args.get("input").and_then(|i| i.object().ok()).and_then(|i| id_of(&i)))
}

fn invalid(field: &str, message: impl Into<String>) -> MutationError {
    MutationError { code: ErrorCode::ValidationFailed, message: message.into(), field: Some(field.to_string()) }
}

fn forbidden(message: impl Into<String>) -> MutationError {
    MutationError::new(ErrorCode::Forbidden, message)
}

fn not_found(what: &str) -> MutationError {
    MutationError::new(ErrorCode::NotFound, format!("{what} not found"))
}

/// A text argument (`None` when absent or null), within [`MAX_TEXT_BYTES`].
fn text(args: &ObjectAccessor<'_>, name: &str, field: &str) -> Result<Option<String>, MutationError> {
    match args.get(name) {
        Some(v) if !v.is_null() => {
            let s = v.string().map_err(|_| invalid(field, "must be a string"))?;
            if s.len() > MAX_TEXT_BYTES {
                return Err(invalid(field, format!("is longer than {MAX_TEXT_BYTES} bytes")));
            }
            Ok(Some(s.to_string()))
        }
        _ => Ok(None),
    }
}

fn required(args: &ObjectAccessor<'_>, name: &str, field: &str) -> Result<String, MutationError> {
    text(args, name, field)?.ok_or_else(|| invalid(field, "is required"))
}

/// A name that must be a DNS label (lowercase letters, digits and `-`, at most 63, starting and
/// ending with a letter or digit): it becomes part of object and namespace names.
fn dns_label(args: &ObjectAccessor<'_>, name: &str, field: &str) -> Result<String, MutationError> {
    let v = required(args, name, field)?;
    let ok = !v.is_empty()
        && v.len() <= 63
        && v.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !v.starts_with('-')
        && !v.ends_with('-');
    if !ok {
        return Err(invalid(
            field,
            "must be a DNS label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
        ));
    }
    Ok(v)
}

fn email(v: &str, field: &str) -> Result<(), MutationError> {
    if v.len() > 254 || !v.contains('@') || v.chars().any(char::is_whitespace) {
        return Err(invalid(field, "must be an email address (at most 254 bytes)"));
    }
    Ok(())
}

fn object<'a>(args: &'a ObjectAccessor<'a>, name: &str) -> Result<ObjectAccessor<'a>, MutationError> {
    args.try_get(name).and_then(|v| v.object()).map_err(|_| invalid(name, "is required"))
}

/// A member input: `{name, email}` within bounds.
fn member(m: &ObjectAccessor<'_>, field: &str) -> Result<Value, MutationError> {
    let name = required(m, "name", &format!("{field}.name"))?;
    if name.trim().is_empty() {
        return Err(invalid(&format!("{field}.name"), "is empty"));
    }
    let mail = required(m, "email", &format!("{field}.email"))?;
    email(&mail, &format!("{field}.email"))?;
    Ok(json!({"name": name, "email": mail}))
}

/// The record of kind `K` behind `id` as the caller's viewer sees it (`NOT_FOUND` as `what`
/// otherwise: absent, hidden, malformed or of another type).
fn load<K: crate::entity::Entity>(request: &RequestContext, id: &str, what: &str) -> Result<storage::Stored<K::Record>, MutationError> {
    let gid = GlobalId::decode(id).map_err(|_| not_found(what))?;
    if gid.type_name != K::TYPE {
        return Err(not_found(what));
    }
    match request.load_visible::<K>(&gid.key) {
        Ok(Some(s)) => Ok(s),
        Ok(None) => Err(not_found(what)),
        Err(e) => {
            tracing::error!(error = %e.message, "a mutation's entity could not be read");
            Err(MutationError::new(ErrorCode::PreconditionFailed, "internal error while processing request"))
        }
    }
}

fn id_arg(args: &ObjectAccessor<'_>, name: &str) -> Result<String, MutationError> {
    args.try_get(name).and_then(|v| v.string().map(str::to_string)).map_err(|_| invalid(name, "is required"))
}

/// Whether `viewer` is a group viewer of `group` in `env`.
fn group_viewer_of(viewer: &Viewer, env: &str, group: &str) -> bool {
    viewer.kind == ViewerKind::Group && viewer.env == env && viewer.group == group
}

/// Whether `viewer` acts for team `team` of `env` (a team viewer of it, or a group viewer whose
/// teams hold it).
fn acts_for(viewer: &Viewer, env: &str, team: &str) -> bool {
    viewer.env == env && viewer.teams.iter().any(|t| t == team)
}

fn target(kind: KindId, meta: &schema::common::Meta) -> Target {
    Target { kind, namespace: meta.namespace.clone(), name: meta.name.clone(), environment: meta.environment.clone() }
}

/// The `spec` object of `object_value`, created when missing.
fn spec(object_value: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !object_value.get("spec").is_some_and(Value::is_object) {
        object_value["spec"] = json!({});
    }
    object_value["spec"].as_object_mut().expect("invariant: spec was just made an object")
}

// ------------------------------------------------------------------------------------ the teams

/// The team of `teamId` for an update: admin; a group viewer of its group; its team viewer.
fn team_for_update(ask: &Ask<'_>, id: &str) -> Result<storage::Stored<schema::kinds::team::TeamRecord>, MutationError> {
    let team = load::<Team>(ask.request, id, "team")?;
    let (v, r) = (&ask.request.viewer, &team.record);
    let own_team = v.kind == ViewerKind::Team && acts_for(v, &r.meta.environment, &r.meta.name);
    if !(v.is_admin() || group_viewer_of(v, &r.meta.environment, &r.group) || own_team) {
        return Err(forbidden(format!("forbidden: insufficient permissions to update team {:?}", r.meta.name)));
    }
    Ok(team)
}

/// The plan that changes the object of the record `s` of entity `K` with `edit` and shows the
/// record after it.
fn edit_record<K: crate::entity::Entity>(
    s: &storage::Stored<K::Record>,
    meta: &schema::common::Meta,
    edit: impl FnOnce(&mut Value) -> Result<(), MutationError> + Send + 'static,
) -> Plan {
    Plan {
        command: Command::Update { target: target(K::ID, meta), edit: Box::new(edit) },
        entity: Some(EntityRef::Record { type_name: K::TYPE, key: s.key.clone() }),
        team_resources: None,
    }
}

/// The plan that creates (or updates) object `namespace/name` of entity `K` with `spec` and shows
/// its record once projected.
fn create<K: crate::entity::Entity>(namespace: String, name: String, spec: Value) -> Plan {
    let target = Target { kind: K::ID, namespace: namespace.clone(), name: name.clone(), environment: namespace.clone() };
    Plan {
        command: Command::CreateOrUpdate { target, spec },
        entity: Some(EntityRef::Source { type_name: K::TYPE, kind: K::ID, namespace, name }),
        team_resources: None,
    }
}

/// An edit that sets the given fields of `spec` (the absent ones stay as they are).
fn set_fields(fields: Vec<(&'static str, Option<String>)>) -> impl FnOnce(&mut Value) -> Result<(), MutationError> + Send + 'static {
    move |object_value: &mut Value| {
        let spec = spec(object_value);
        for (field, value) in fields {
            if let Some(v) = value {
                spec.insert(field.to_string(), json!(v));
            }
        }
        Ok(())
    }
}

/// The edit of the rotations: `spec.secret` set to the keyword the operators' webhooks read as
/// "generate a new secret".
fn rotate_secret(object_value: &mut Value) -> Result<(), MutationError> {
    spec(object_value).insert("secret".into(), json!("rotate"));
    Ok(())
}

fn create_team(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let input = object(ask.args, "input")?;
    let env = dns_label(&input, "environment", "input.environment")?;
    let group = dns_label(&input, "group", "input.group")?;
    let name = dns_label(&input, "name", "input.name")?;
    if env.len() + group.len() + name.len() + 4 > 63 {
        return Err(invalid("input.name", format!("the team's namespace {env}--{group}--{name} would be longer than 63 characters")));
    }
    let mail = required(&input, "email", "input.email")?;
    email(&mail, "input.email")?;
    let list = input.try_get("members").and_then(|v| v.list()).map_err(|_| invalid("input.members", "is required"))?;
    if list.len() > MAX_MEMBERS {
        return Err(invalid("input.members", format!("more than {MAX_MEMBERS} members")));
    }
    let mut members = Vec::with_capacity(list.len());
    for (i, m) in list.iter().enumerate() {
        let m = m.object().map_err(|_| invalid(&format!("input.members[{i}]"), "must be a member"))?;
        members.push(member(&m, &format!("input.members[{i}]"))?);
    }
    let display_name = text(&input, "displayName", "input.displayName")?;
    let description = text(&input, "description", "input.description")?;
    let v = &ask.request.viewer;
    if !(v.is_admin() || group_viewer_of(v, &env, &group)) {
        return Err(forbidden(format!("forbidden: insufficient permissions to create team in group {group:?}")));
    }
    let resource = format!("{group}--{name}");
    let mut object_value = json!({"spec": {"name": name, "group": group, "email": mail, "members": members, "category": "Customer"}});
    set_fields(vec![("displayName", display_name), ("description", description)])(&mut object_value)?;
    Ok(create::<Team>(env, resource, object_value["spec"].take()))
}

fn update_team(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let input = object(ask.args, "input")?;
    let mail = text(&input, "email", "input.email")?;
    if let Some(m) = &mail {
        email(m, "input.email")?;
    }
    let display_name = text(&input, "displayName", "input.displayName")?;
    let description = text(&input, "description", "input.description")?;
    let team = team_for_update(ask, &id_arg(&input, "teamId")?)?;
    let edit = set_fields(vec![("email", mail), ("displayName", display_name), ("description", description)]);
    Ok(edit_record::<Team>(&team, &team.record.meta, edit))
}

fn delete_team(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let input = object(ask.args, "input")?;
    let team = load::<Team>(ask.request, &id_arg(&input, "teamId")?, "team")?;
    let (v, r) = (&ask.request.viewer, &team.record);
    if !(v.is_admin() || group_viewer_of(v, &r.meta.environment, &r.group)) {
        return Err(forbidden(format!("forbidden: insufficient permissions to delete team in group {:?}", r.group)));
    }
    let short = r.meta.name.strip_prefix(&format!("{}--", r.group)).unwrap_or(&r.meta.name).to_string();
    Ok(Plan {
        command: Command::Delete { target: target(KindId::Team, &r.meta) },
        entity: None,
        team_resources: Some((r.meta.environment.clone(), r.group.clone(), short)),
    })
}

fn add_team_member(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let new = member(&object(ask.args, "member")?, "member")?;
    let team = team_for_update(ask, &id_arg(ask.args, "teamId")?)?;
    let edit = move |object_value: &mut Value| {
        let spec = spec(object_value);
        let members = spec.entry("members").or_insert_with(|| json!([]));
        if !members.is_array() {
            *members = json!([]);
        }
        let list = members.as_array_mut().expect("invariant: members was just made an array");
        if list.len() >= MAX_MEMBERS {
            return Err(invalid("member", format!("the team has {MAX_MEMBERS} members already")));
        }
        list.push(new);
        Ok(())
    };
    Ok(edit_record::<Team>(&team, &team.record.meta, edit))
}

fn remove_team_member(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let mail = required(ask.args, "memberEmail", "memberEmail")?;
    let team = team_for_update(ask, &id_arg(ask.args, "teamId")?)?;
    let edit = move |object_value: &mut Value| {
        if let Some(list) = spec(object_value).get_mut("members").and_then(Value::as_array_mut) {
            list.retain(|m| m.get("email").and_then(Value::as_str) != Some(mail.as_str()));
        }
        Ok(())
    };
    Ok(edit_record::<Team>(&team, &team.record.meta, edit))
}

fn rotate_team_token(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let team = team_for_update(ask, &id_arg(ask.args, "teamId")?)?;
    Ok(edit_record::<Team>(&team, &team.record.meta, rotate_secret))
}

fn rotate_application_secret(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let app = load::<Application>(ask.request, &id_arg(ask.args, "applicationId")?, "application")?;
    let (v, r) = (&ask.request.viewer, &app.record);
    if !(v.is_admin() || acts_for(v, &r.meta.environment, &r.team)) {
        return Err(forbidden(format!("forbidden: insufficient permissions for application owned by team {:?}", r.team)));
    }
    Ok(edit_record::<Application>(&app, &r.meta, rotate_secret))
}

// ----------------------------------------------------------------------------------- the groups

fn create_group(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let input = object(ask.args, "input")?;
    let env = dns_label(&input, "environment", "input.environment")?;
    let name = dns_label(&input, "name", "input.name")?;
    let display_name = required(&input, "displayName", "input.displayName")?;
    let description = text(&input, "description", "input.description")?;
    if !ask.request.viewer.is_admin() {
        return Err(forbidden("forbidden: only admins can create groups"));
    }
    let mut object_value = json!({"spec": {"displayName": display_name}});
    set_fields(vec![("description", description)])(&mut object_value)?;
    Ok(create::<Group>(env, name, object_value["spec"].take()))
}

fn update_group(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let input = object(ask.args, "input")?;
    let display_name = text(&input, "displayName", "input.displayName")?;
    let description = text(&input, "description", "input.description")?;
    let group = load::<Group>(ask.request, &id_arg(&input, "groupId")?, "group")?;
    let (v, r) = (&ask.request.viewer, &group.record);
    if !(v.is_admin() || group_viewer_of(v, &r.meta.environment, &r.meta.name)) {
        return Err(forbidden(format!("forbidden: insufficient permissions to update group {:?}", r.meta.name)));
    }
    Ok(edit_record::<Group>(&group, &r.meta, set_fields(vec![("displayName", display_name), ("description", description)])))
}

fn delete_group(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let input = object(ask.args, "input")?;
    let group = load::<Group>(ask.request, &id_arg(&input, "groupId")?, "group")?;
    if !ask.request.viewer.is_admin() {
        return Err(forbidden("forbidden: only admins can delete groups"));
    }
    let r = &group.record;
    let teams = ask.request.view.lookup(index::TEAM_BY_GROUP, &natural::in_env(&r.meta.environment, &r.meta.name)).map_err(|e| {
        tracing::error!(error = %e, "the teams of a group could not be counted");
        MutationError::new(ErrorCode::PreconditionFailed, "internal error while processing request")
    })?;
    if !teams.is_empty() {
        return Err(MutationError::new(
            ErrorCode::PreconditionFailed,
            format!("cannot delete group: {} team(s) still exist — delete all teams first", teams.len()),
        ));
    }
    Ok(Plan { command: Command::Delete { target: target(KindId::Group, &r.meta) }, entity: None, team_resources: None })
}

// -------------------------------------------------------------------------------- the approvals

/// The decision of `input` on an approval (request) object: the action must be one of the
/// object's `status.availableTransitions` (read from the cluster); its target state becomes
/// `spec.state`, and the decision is appended to `spec.decisions`.
fn decide_in(
    ask: &Ask<'_>,
    meta: &schema::common::Meta,
    fields: &schema::kinds::approval_common::ApprovalFields,
) -> Result<crate::commands::Edit, MutationError> {
    let input = object(ask.args, "input")?;
    let action =
        input.try_get("action").and_then(|v| v.enum_name().map(str::to_string)).map_err(|_| invalid("input.action", "is required"))?;
    let action = match action.as_str() {
        "ALLOW" => "Allow",
        "DENY" => "Deny",
        "SUSPEND" => "Suspend",
        "RESUME" => "Resume",
        other => return Err(invalid("input.action", format!("unknown approval action: {other}"))),
    };
    let comment = text(&input, "comment", "input.comment")?;
    let v = &ask.request.viewer;
    let (env, decider) = (&meta.environment, &fields.decider.team_name);
    if !(v.is_admin() || acts_for(v, env, decider)) {
        return Err(forbidden(format!(
            "forbidden: insufficient permissions — only the decider team {decider:?} can decide on this approval"
        )));
    }
    let (name, email, at) = (v.name.clone().unwrap_or_else(|| v.client_id.clone()), v.email.clone(), ask.request.now.to_rfc3339());
    Ok(Box::new(move |object_value: &mut Value| {
        let to = object_value
            .pointer("/status/availableTransitions")
            .and_then(Value::as_array)
            .and_then(|ts| ts.iter().find(|t| t.get("action").and_then(Value::as_str).is_some_and(|a| a.eq_ignore_ascii_case(action))))
            .and_then(|t| t.get("to").and_then(Value::as_str))
            .map(str::to_string)
            .ok_or_else(|| {
                MutationError::new(ErrorCode::PreconditionFailed, format!("action {action:?} is not available for the current state"))
            })?;
        let mut decision = json!({"name": name, "timestamp": at, "resultingState": to});
        if let Some(e) = email {
            decision["email"] = json!(e);
        }
        if let Some(c) = comment {
            decision["comment"] = json!(c);
        }
        let spec = spec(object_value);
        spec.insert("state".into(), json!(to));
        let decisions = spec.entry("decisions").or_insert_with(|| json!([]));
        if !decisions.is_array() {
            *decisions = json!([]);
        }
        decisions.as_array_mut().expect("invariant: decisions was just made an array").push(decision);
        Ok(())
    }))
}

fn decide_approval_request(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let ar = load::<ApprovalRequest>(ask.request, &id_arg(ask.args, "approvalRequestId")?, "approval request")?;
    let edit = decide_in(ask, &ar.record.meta, &ar.record.fields)?;
    Ok(edit_record::<ApprovalRequest>(&ar, &ar.record.meta, edit))
}

fn decide_approval(ask: &Ask<'_>) -> Result<Plan, MutationError> {
    let a = load::<Approval>(ask.request, &id_arg(ask.args, "approvalId")?, "approval")?;
    let edit = decide_in(ask, &a.record.meta, &a.record.fields)?;
    Ok(edit_record::<Approval>(&a, &a.record.meta, edit))
}
