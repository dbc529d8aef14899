//! The command side of mutations (they write to Kubernetes, and the read model follows through
//! the projector): [`KubeCommands`] writes the
//! custom resources the query layer's mutations ask for ([`query::commands`]) through the kube
//! source's Kubernetes client, then waits until the projector has applied the write.
//!
//! - **Writes.** Create-or-update (`GET`, then `POST` or `PUT` of the whole `spec`), update (`GET`,
//!   the edit, `PUT` with the `resourceVersion` read: a change in between is Kubernetes' `409
//!   Conflict`, answered as `CONFLICT` and never retried) and delete. Every written object gets
//!   the label `cp.ei.telekom.de/environment` of its entity's environment. Each call to the API
//!   server ends at the request's deadline at the latest.
//! - **Errors**, as the Go server maps them: NotFound → `NOT_FOUND` "resource not
//!   found", Conflict → `CONFLICT` "resource was modified concurrently, please retry",
//!   AlreadyExists → `CONFLICT` "resource already exists", Forbidden → `FORBIDDEN` "operation
//!   forbidden by cluster policy", Invalid → `VALIDATION_FAILED` "resource validation failed:
//!   <field: message; …>" (at most [`MAX_CAUSES_BYTES`]), anything else → `PRECONDITION_FAILED`
//!   "internal error while processing request" (the cause is logged).
//! - **Read your write.** After the API server accepted a write, the answer waits until the
//!   store holds the written `resourceVersion` of the object (the same, or a later one: versions
//!   are compared as numbers, etcd's revisions) or, after a delete, nothing of it; checked after
//!   every batch the writer processed, for at most `mutations.projectionTimeout` and never past
//!   the request's deadline.
//! - **The rover server** (`roverServer.*`): before a team is deleted,
//!   `GET <baseUrl>/resources?group=<group>&team=<team>&limit=1` with the bearer token of
//!   `roverServer.tokenFile` and `X-Environment: <the team's environment>`; any item refuses the
//!   delete, and so does a failed check. Unset: no check.
//!
//! Metrics: `controlplane_mutation_writes_total{result}` (`accepted`, `not_projected`, `gone`,
//! `conflict`, `not_found`, `forbidden`, `invalid`, `failed`).

use crate::config::{MutationsConfig, RoverServerConfig};
use crate::metrics::Metrics;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use prometheus::{IntCounterVec, Opts};
use query::commands::{Applied, Caller, Command, CommandSink, ErrorCode, MutationError, Target, Writing, ENVIRONMENT_LABEL};
use schema::KindId;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use storage::Store;

/// The most bytes of the API server's validation causes put into a `VALIDATION_FAILED` message.
pub const MAX_CAUSES_BYTES: usize = 1024;

/// The largest answer of the rover server read, in bytes.
pub const MAX_ROVER_ANSWER_BYTES: usize = 1 << 20;

/// The write access mutations need, per API group: (group, resources, verbs). The chart's
/// mutations ClusterRole grants exactly these (`tests/chart.rs`): the reference's role, plus
/// groups, which the group mutations write.
pub const WRITE_RULES: &[(&str, &[&str], &[&str])] = &[
    ("organization.cp.ei.telekom.de", &["groups", "teams"], &["get", "create", "update", "patch", "delete"]),
    ("application.cp.ei.telekom.de", &["applications"], &["get", "update", "patch"]),
    ("approval.cp.ei.telekom.de", &["approvalrequests", "approvals"], &["get", "update", "patch"]),
];

/// The results of `controlplane_mutation_writes_total`.
pub const RESULTS: &[&str] = &["accepted", "not_projected", "gone", "conflict", "not_found", "forbidden", "invalid", "failed"];

/// Writes mutations' commands to Kubernetes; see the module documentation. Cheap to clone.
#[derive(Clone)]
pub struct KubeCommands(Arc<KubeCommandsState>);

struct KubeCommandsState {
    client: kube::Client,
    resources: HashMap<KindId, ApiResource>,
    store: Store,
    metrics: Metrics,
    projection_timeout: Duration,
    rover: Option<Rover>,
    writes: IntCounterVec,
}

impl std::fmt::Debug for KubeCommands {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCommands").field("projection_timeout", &self.0.projection_timeout).finish_non_exhaustive()
    }
}

impl KubeCommands {
    /// The command side over `client`, reading projections from `store` (woken by `metrics`).
    ///
    /// # Errors
    /// [`crate::secrets::SetupError`] when the rover server's CA file cannot be read or its
    /// client built.
    pub fn new(
        client: kube::Client,
        store: Store,
        metrics: Metrics,
        settings: MutationsConfig,
        rover: &RoverServerConfig,
    ) -> Result<KubeCommands, crate::secrets::SetupError> {
        let writes = IntCounterVec::new(
            Opts::new("controlplane_mutation_writes_total", "Writes of mutations to Kubernetes, by result."),
            &["result"],
        )
        .expect("metric definition is valid");
        if let Err(e) = metrics.registry().register(Box::new(writes.clone())) {
            tracing::warn!(error = %e, "the mutation metric is not exported");
        }
        for r in RESULTS {
            writes.with_label_values(&[r]);
        }
        let resources = crate::source::kube::resources().into_iter().map(|w| (w.kind, w.resource)).collect();
        Ok(KubeCommands(Arc::new(KubeCommandsState {
            client,
            resources,
            store,
            metrics,
            projection_timeout: settings.projection_timeout,
            rover: Rover::new(rover)?,
            writes,
        })))
    }

    /// `self` as the query layer's command sink.
    pub fn sink(&self) -> Arc<dyn CommandSink> {
        Arc::new(self.clone())
    }
}

impl CommandSink for KubeCommands {
    fn execute(&self, command: Command, caller: Caller, until: Option<Instant>) -> Writing {
        let inner = self.0.clone();
        Box::pin(async move {
            let target = command.target().clone();
            let verb = command.verb();
            let written = match until {
                Some(at) => tokio::time::timeout_at(at.into(), inner.write(command)).await.unwrap_or_else(|_| {
                    Err(MutationError::new(
                        ErrorCode::PreconditionFailed,
                        "the Kubernetes API server did not answer before the request's deadline: the outcome is unknown, read the entity again",
                    ))
                }),
                None => inner.write(command).await,
            };
            let result = match &written {
                Ok(None) => Ok(Applied { accepted: false, projected: true }),
                Ok(Some(version)) => {
                    let projected = inner.projected(&target, version.as_deref(), until).await;
                    Ok(Applied { accepted: true, projected })
                }
                Err(e) => Err(e.clone()),
            };
            let label = match &result {
                Ok(Applied { accepted: false, .. }) => "gone",
                Ok(Applied { projected: true, .. }) => "accepted",
                Ok(_) => "not_projected",
                Err(e) => match e.code {
                    ErrorCode::Conflict => "conflict",
                    ErrorCode::NotFound => "not_found",
                    ErrorCode::Forbidden => "forbidden",
                    ErrorCode::ValidationFailed => "invalid",
                    ErrorCode::PreconditionFailed => "failed",
                },
            };
            inner.writes.with_label_values(&[label]).inc();
            tracing::debug!(target: "mutation", verb, %target, viewer = %caller.client_id, result = label, "write");
            result
        })
    }

    fn check_team_resources(
        &self,
        environment: &str,
        group: &str,
        team: &str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), MutationError>> + Send>> {
        let inner = self.0.clone();
        let (environment, group, team) = (environment.to_string(), group.to_string(), team.to_string());
        Box::pin(async move {
            match &inner.rover {
                None => Ok(()),
                Some(rover) => rover.check(&environment, &group, &team).await,
            }
        })
    }
}

impl KubeCommandsState {
    /// Writes `command`; the `resourceVersion` written (`Some(None)` when the server gave none),
    /// or `None` for a delete of an object already gone.
    async fn write(&self, command: Command) -> Result<Option<Option<String>>, MutationError> {
        let target = command.target().clone();
        let Some(resource) = self.resources.get(&target.kind) else {
            tracing::error!(kind = target.kind.name(), "a mutation writes a kind that is not registered");
            return Err(internal());
        };
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &target.namespace, resource);
        let params = PostParams::default();
        let written = match command {
            Command::CreateOrUpdate { spec, .. } => match api.get_opt(&target.name).await.map_err(|e| mapped(&target, e))? {
                Some(mut object) => {
                    object.data["spec"] = spec;
                    stamp(&mut object, &target);
                    api.replace(&target.name, &params, &object).await
                }
                None => {
                    let mut object = DynamicObject::new(&target.name, resource).within(&target.namespace);
                    object.data = serde_json::json!({ "spec": spec });
                    stamp(&mut object, &target);
                    api.create(&params, &object).await
                }
            },
            Command::Update { edit, .. } => {
                let object = api.get(&target.name).await.map_err(|e| mapped(&target, e))?;
                let mut value = serde_json::to_value(&object).map_err(|_| internal())?;
                edit(&mut value)?;
                let mut object: DynamicObject = serde_json::from_value(value).map_err(|_| internal())?;
                stamp(&mut object, &target);
                api.replace(&target.name, &params, &object).await
            }
            Command::Delete { .. } => {
                return match api.delete(&target.name, &DeleteParams::default()).await {
                    Ok(_) => Ok(Some(None)),
                    Err(kube::Error::Api(s)) if s.is_not_found() => Ok(None),
                    Err(e) => Err(mapped(&target, e)),
                };
            }
        };
        let object = written.map_err(|e| mapped(&target, e))?;
        Ok(Some(object.metadata.resource_version))
    }

    /// Whether the store holds `version` (or a later one) of `target` — nothing of it for a
    /// delete (`version` `None`) — waiting for it after each writer batch until the projection
    /// timeout or `until` passes.
    async fn projected(&self, target: &Target, version: Option<&str>, until: Option<Instant>) -> bool {
        let check = || {
            let held = self.store.read().and_then(|v| v.source_version(target.kind, &target.namespace, &target.name));
            match (held, version) {
                (Ok(None), None) => true,
                (Ok(Some((_, held))), Some(want)) => same_or_later(&held, want),
                _ => false,
            }
        };
        if check() {
            return true;
        }
        let mut wait = self.projection_timeout;
        if let Some(at) = until {
            wait = wait.min(at.saturating_duration_since(Instant::now()));
        }
        self.metrics.wait_until(wait, |_| check()).await
    }
}

/// Whether the stored source version `held` is `want` or later (both numbers: etcd revisions).
fn same_or_later(held: &str, want: &str) -> bool {
    held == want || matches!((held.parse::<u64>(), want.parse::<u64>()), (Ok(h), Ok(w)) if h >= w)
}

fn stamp(object: &mut DynamicObject, target: &Target) {
    object.metadata.labels.get_or_insert_with(Default::default).insert(ENVIRONMENT_LABEL.to_string(), target.environment.clone());
}

fn internal() -> MutationError {
    MutationError::new(ErrorCode::PreconditionFailed, "internal error while processing request")
}

/// An answer of the API server as the mutation's error (module documentation).
fn mapped(target: &Target, e: kube::Error) -> MutationError {
    let kube::Error::Api(status) = &e else {
        tracing::warn!(%target, error = %e, "a mutation's write failed");
        return internal();
    };
    match (status.reason.as_str(), status.code) {
        ("NotFound", _) | (_, 404) => MutationError::new(ErrorCode::NotFound, "resource not found"),
        ("AlreadyExists", _) => MutationError::new(ErrorCode::Conflict, "resource already exists"),
        ("Conflict", _) | (_, 409) => MutationError::new(ErrorCode::Conflict, "resource was modified concurrently, please retry"),
        ("Forbidden", _) | (_, 403) => MutationError::new(ErrorCode::Forbidden, "operation forbidden by cluster policy"),
        ("Invalid", _) | (_, 422) => {
            let causes = status.details.as_ref().map(|d| d.causes.as_slice()).unwrap_or_default();
            let mut text = causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect::<Vec<_>>().join("; ");
            if text.is_empty() {
                text = status.message.clone();
            }
            if text.len() > MAX_CAUSES_BYTES {
                let mut end = MAX_CAUSES_BYTES;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
                text.push('…');
            }
            MutationError::new(ErrorCode::ValidationFailed, format!("resource validation failed: {text}"))
        }
        _ => {
            tracing::warn!(%target, code = status.code, reason = %status.reason, message = %status.message, "the API server refused a mutation's write");
            internal()
        }
    }
}

/// The rover server client of the `deleteTeam` pre-check.
struct Rover {
    /// `<baseUrl>/resources`.
    url: String,
    token_file: std::path::PathBuf,
    timeout: Duration,
    client: reqwest::Client,
}

impl Rover {
    fn new(config: &RoverServerConfig) -> Result<Option<Rover>, crate::secrets::SetupError> {
        let Some(base) = &config.base_url else { return Ok(None) };
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .connect_timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("control-plane/", env!("CARGO_PKG_VERSION")));
        for certificate in crate::secrets::ca_certificates(&config.ca_file, "roverServer.caFile")? {
            builder = builder.add_root_certificate(certificate);
        }
        let client = builder.build().map_err(|e| crate::secrets::SetupError::HttpClient(crate::auth::jwks::error_chain(&e)))?;
        Ok(Some(Rover { url: format!("{base}/resources"), token_file: config.token_file.clone(), timeout: config.timeout, client }))
    }

    /// `Ok` when the team has no resources; the refusal otherwise (a failed check refuses too).
    async fn check(&self, environment: &str, group: &str, team: &str) -> Result<(), MutationError> {
        let unverified = |reason: String| {
            tracing::warn!(group, team, reason, "the rover server could not be asked whether a team has resources");
            MutationError::new(ErrorCode::PreconditionFailed, "unable to verify team resources, please try again")
        };
        let token = crate::secrets::read_token(&self.token_file, "roverServer.tokenFile").await.map_err(unverified)?;
        let asked = tokio::time::timeout(self.timeout, self.ask(environment, group, team, &token)).await;
        let items = match asked {
            Ok(Ok(items)) => items,
            Ok(Err(reason)) => return Err(unverified(reason)),
            Err(_) => return Err(unverified(format!("no answer within {:?} (roverServer.timeout)", self.timeout))),
        };
        if items > 0 {
            return Err(MutationError::new(
                ErrorCode::PreconditionFailed,
                "cannot delete team: team still has resources — delete all resources first",
            ));
        }
        Ok(())
    }

    /// The number of items the rover server lists for the team (at most 1 asked).
    async fn ask(&self, environment: &str, group: &str, team: &str, token: &str) -> Result<usize, String> {
        let chain = |e: reqwest::Error| crate::auth::jwks::error_chain(&e.without_url());
        let mut response = self
            .client
            .get(&self.url)
            .query(&[("group", group), ("team", team), ("limit", "1")])
            .bearer_auth(token)
            .header("X-Environment", environment)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(chain)?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(format!("the rover server answered HTTP {}", response.status()));
        }
        let body = crate::secrets::read_body(&mut response, MAX_ROVER_ANSWER_BYTES).await?;
        #[derive(serde::Deserialize)]
        struct Answer {
            items: Vec<serde::de::IgnoredAny>,
        }
        let answer: Answer = serde_json::from_slice(&body)
            .map_err(|e| format!("the answer is not {{\"items\": […]}} (line {}, column {})", e.line(), e.column()))?;
        Ok(answer.items.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_numbers_or_equal() {
        assert!(same_or_later("12", "12"));
        assert!(same_or_later("13", "12"));
        assert!(!same_or_later("9", "12"), "not a string order");
        assert!(same_or_later("abc", "abc"));
        assert!(!same_or_later("abd", "abc"), "opaque versions only when equal");
    }

    #[test]
    fn api_answers_map_to_the_references_codes() {
        let target = Target { kind: KindId::Team, namespace: "poc".into(), name: "a--b".into(), environment: "poc".into() };
        let status = |reason: &str, code: u16| kube::Error::Api(kube::core::Status::failure("m", reason).with_code(code).boxed());
        let code = |reason: &str, code: u16| {
            let e = mapped(&target, status(reason, code));
            (e.code, e.message)
        };
        assert_eq!(code("NotFound", 404), (ErrorCode::NotFound, "resource not found".into()));
        assert_eq!(code("Conflict", 409), (ErrorCode::Conflict, "resource was modified concurrently, please retry".into()));
        assert_eq!(code("AlreadyExists", 409), (ErrorCode::Conflict, "resource already exists".into()));
        assert_eq!(code("Forbidden", 403), (ErrorCode::Forbidden, "operation forbidden by cluster policy".into()));
        assert_eq!(code("InternalError", 500), (ErrorCode::PreconditionFailed, "internal error while processing request".into()));
        let mut invalid = kube::core::Status::failure("x", "Invalid").with_code(422);
        invalid.details = Some(
            serde_json::from_value(serde_json::json!({
                "causes": [{"reason": "FieldValueInvalid", "message": "bad".repeat(500), "field": "spec.email"}]
            }))
            .unwrap(),
        );
        let e = mapped(&target, kube::Error::Api(invalid.boxed()));
        assert_eq!(e.code, ErrorCode::ValidationFailed);
        assert!(e.message.starts_with("resource validation failed: spec.email: badbad"), "{}", e.message);
        assert!(e.message.len() <= MAX_CAUSES_BYTES + 40, "bounded: {}", e.message.len());
    }
}
