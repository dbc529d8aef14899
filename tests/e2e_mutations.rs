//! Mutations end to end: the server in process on the kube source against the fake
//! Kubernetes API server (`support/fake_k8s.rs`) holding the bundled world, with
//! `mutations.enabled`; GraphQL over HTTP; what reached the cluster read back from the fake.
//!
//! Barriers: a mutation answers once its write is projected (the payload's `note` is null
//! then), so a later query sees it; "nothing was written" is the fake's count of write requests.

#[path = "support/fake_k8s.rs"]
mod fake_k8s;
mod support;

use base64::Engine;
use control_plane::config::Config;
use control_plane::Running;
use fake_k8s::FakeK8s;
use schema::{KindId, Timestamp};
use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Everything the process logs (one subscriber for the test binary).
fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = Capture(buffer.clone());
        let subscriber =
            tracing_subscriber::fmt().with_ansi(false).with_max_level(tracing::Level::INFO).with_writer(move || writer.clone()).finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber of this test binary");
        buffer
    })
}

#[derive(Clone)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The mutation log lines so far.
fn mutation_log() -> Vec<String> {
    String::from_utf8_lossy(&logs().lock().unwrap()).lines().filter(|l| l.contains(" mutation: ")).map(str::to_string).collect()
}

const PENDING_REQUEST: (&str, &str) = ("poc--logistics--parcel-tracking", "parcel-tracker--payments-checkout-v1--55658d68f8");

/// A mock token with `claims` besides `clientId`, `scope` and `env`.
fn token_with(client_id: &str, scope: &str, extra: Value) -> String {
    let enc = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let mut claims = json!({"clientId": client_id, "scope": scope, "env": "poc"});
    claims.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    format!("{}.{}.mock", enc(json!({"alg": "none"})), enc(claims))
}

/// A team viewer of `team` with access `all`.
fn team(team: &str) -> String {
    token_with(&format!("{team}--console"), "tardis:team:all", json!({}))
}

fn group(group: &str) -> String {
    token_with(&format!("{group}--probe--console"), "tardis:group:all", json!({}))
}

fn admin() -> String {
    token_with("platform--ops--console", "tardis:admin:all", json!({}))
}

struct Cp {
    fake: FakeK8s,
    running: Running,
    http: reqwest::Client,
    _data: tempfile::TempDir,
}

impl Cp {
    async fn start(tune: impl FnOnce(&mut Config)) -> Cp {
        logs();
        let fake = FakeK8s::start_world().await;
        let data = tempfile::tempdir().unwrap();
        let mut config = Config::for_kube(&fake.url(), data.path());
        config.now = Some(Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap());
        config.projector.dependency_delay = Duration::from_millis(50);
        config.projector.dependency_delay_jitter = Duration::from_millis(50);
        config.mutations.enabled = true;
        config.mutations.projection_timeout = Duration::from_secs(20);
        config.graphql.request_timeout = Duration::from_secs(30);
        tune(&mut config);
        let running = control_plane::start(config).await.unwrap();
        assert!(running.app().wait_caught_up(Duration::from_secs(60)).await, "ready");
        Cp { fake, running, http: reqwest::Client::new(), _data: data }
    }

    async fn post(&self, token: &str, query: &str, variables: Value) -> Value {
        let url = format!("http://{}/graphql/query", self.running.local_addr());
        let r = self.http.post(url).bearer_auth(token).json(&json!({"query": query, "variables": variables})).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    }

    /// The global ID of the record of `root` (a root connection) named `name`, as the admin sees it.
    async fn id(&self, root: &str, name: &str) -> String {
        // `groups` is a list, the other roots are connections.
        let (selection, path) = if root == "groups" { ("{ id }", "/0/id") } else { ("{ edges { node { id } } }", "/edges/0/node/id") };
        let v = self.post(&admin(), &format!("{{ {root}(where: {{name: \"{name}\"}}) {selection} }}"), json!({})).await;
        v["data"][root].pointer(path).and_then(Value::as_str).unwrap_or_else(|| panic!("{root} {name}: {v}")).to_string()
    }

    fn object(&self, kind: KindId, ns: &str, name: &str) -> Value {
        self.fake.get(kind, ns, name).unwrap_or_else(|| panic!("{} {ns}/{name} on the fake", kind.name()))
    }
}

const DECIDE_REQUEST: &str = "mutation($id: ID!, $action: ApprovalAction!, $comment: String) {
  decideApprovalRequest(approvalRequestId: $id, input: {action: $action, comment: $comment}) {
    accepted note errors { code message field }
    approvalRequest { id state decisions { name email comment resultingState } }
  }
}";

/// The acceptance line: the provider team allows a pending approval request; the answer shows
/// the new state, the CR holds the decision with the viewer's identity, another team gets
/// NOT_FOUND for the same id and the requester team FORBIDDEN; nothing of those was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_team_allows_a_pending_approval_request_and_reads_its_write() {
    let cp = Cp::start(|_| {}).await;
    let id = cp.id("approvalRequests", PENDING_REQUEST.1).await;
    let writes = cp.fake.writes();

    for (who, token, code) in [
        ("another team", team("assist--copilot"), "NOT_FOUND"),
        ("another team's group", group("assist"), "NOT_FOUND"),
        ("the requester team, which sees it", team("logistics--parcel-tracking"), "FORBIDDEN"),
        ("a read token of the provider", token_with("payments--checkout--console", "tardis:team:read", json!({})), "FORBIDDEN"),
    ] {
        let v = cp.post(&token, DECIDE_REQUEST, json!({"id": id, "action": "ALLOW"})).await;
        let p = &v["data"]["decideApprovalRequest"];
        assert_eq!((p["accepted"].as_bool(), p["errors"][0]["code"].as_str()), (Some(false), Some(code)), "{who}: {v}");
        assert_eq!(p["approvalRequest"], Value::Null, "{who} sees nothing of it: {v}");
    }
    let v = cp.post(&team("assist--copilot"), DECIDE_REQUEST, json!({"id": id, "action": "ALLOW"})).await;
    assert_eq!(v["data"]["decideApprovalRequest"]["errors"][0]["message"], "approval request not found");
    assert_eq!(cp.fake.writes(), writes, "no refused mutation reached the cluster");

    // A transition the request does not offer: refused after reading it, nothing written.
    let provider =
        token_with("payments--checkout--console", "tardis:team:all", json!({"name": "Jana Jansen", "email": "jana.jansen@example.com"}));
    let v = cp.post(&provider, DECIDE_REQUEST, json!({"id": id, "action": "RESUME"})).await;
    let p = &v["data"]["decideApprovalRequest"];
    assert_eq!(p["errors"][0]["code"], "PRECONDITION_FAILED", "{v}");
    assert_eq!(p["errors"][0]["message"], "action \"Resume\" is not available for the current state");
    assert_eq!(cp.fake.writes(), writes);

    let v = cp.post(&provider, DECIDE_REQUEST, json!({"id": id, "action": "ALLOW", "comment": "ok for parcels"})).await;
    let p = &v["data"]["decideApprovalRequest"];
    assert_eq!((p["accepted"].as_bool(), &p["errors"], &p["note"]), (Some(true), &json!([]), &Value::Null), "{v}");
    let cr = cp.object(KindId::ApprovalRequest, PENDING_REQUEST.0, PENDING_REQUEST.1);
    let to = cr["status"]["availableTransitions"].as_array().unwrap().iter().find(|t| t["action"] == "Allow").unwrap()["to"].clone();
    assert_eq!(cr["spec"]["state"], to, "{cr}");
    let last = cr["spec"]["decisions"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        last,
        json!({"name": "Jana Jansen", "email": "jana.jansen@example.com", "comment": "ok for parcels",
               "timestamp": "2026-09-01T00:00:00Z", "resultingState": to}),
    );
    assert_eq!(cr["metadata"]["labels"]["cp.ei.telekom.de/environment"], "poc");
    // The answer is the projected state after the write.
    let ar = &p["approvalRequest"];
    assert_eq!(ar["id"], json!(id));
    assert_eq!(ar["state"].as_str().map(str::to_ascii_lowercase), to.as_str().map(str::to_ascii_lowercase), "{v}");
    assert_eq!(ar["decisions"].as_array().unwrap().last().unwrap()["name"], "Jana Jansen");
    assert_eq!(cp.fake.writes(), writes + 1, "one write");
    // Another team still gets NOT_FOUND for it after the write.
    let v = cp.post(&team("assist--copilot"), DECIDE_REQUEST, json!({"id": id, "action": "DENY"})).await;
    assert_eq!(v["data"]["decideApprovalRequest"]["errors"][0]["code"], "NOT_FOUND");
    // Every mutation is logged: operation, caller, target, outcome; never a token.
    let lines = mutation_log();
    let target = format!("ApprovalRequest {}/{}", PENDING_REQUEST.0, PENDING_REQUEST.1);
    let logged = |client: &str, outcome: &str| {
        lines.iter().any(|l| {
            l.contains("operation=\"decideApprovalRequest\"")
                && l.contains(&format!("viewer={client} "))
                && l.contains(&format!("outcome=\"{outcome}\""))
                && (["NOT_FOUND", "FORBIDDEN"].contains(&outcome) || l.contains(&target))
        })
    };
    assert!(logged("payments--checkout--console", "accepted"), "{lines:#?}");
    assert!(logged("payments--checkout--console", "PRECONDITION_FAILED"), "{lines:#?}");
    assert!(logged("assist--copilot--console", "NOT_FOUND"), "{lines:#?}");
    assert!(logged("logistics--parcel-tracking--console", "FORBIDDEN"), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.contains(&provider) || l.contains("Jana")), "no token or person in the log: {lines:#?}");
    cp.running.shutdown().await.unwrap();
}

const ROTATE_APP: &str =
    "mutation($id: ID!) { rotateApplicationSecret(applicationId: $id) { accepted note errors { code message } application { name } } }";

/// Kubernetes' conflict goes back as CONFLICT, without a retry; its other refusals map as the
/// reference maps them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_refusals_are_answered_with_their_codes_and_never_retried() {
    let cp = Cp::start(|_| {}).await;
    let id = cp.id("applications", "checkout-web").await;
    let owner = team("payments--checkout");
    let writes = cp.fake.writes();
    cp.fake.change_after_next_get(KindId::Application, "poc--payments--checkout", "checkout-web");
    let v = cp.post(&owner, ROTATE_APP, json!({"id": id})).await;
    let p = &v["data"]["rotateApplicationSecret"];
    assert_eq!(
        (p["accepted"].as_bool(), p["errors"][0]["code"].as_str(), p["errors"][0]["message"].as_str()),
        (Some(false), Some("CONFLICT"), Some("resource was modified concurrently, please retry")),
        "{v}"
    );
    assert_eq!(cp.fake.writes(), writes + 1, "the conflicting PUT, no retry");
    assert_ne!(cp.object(KindId::Application, "poc--payments--checkout", "checkout-web")["spec"]["secret"], "rotate");
    for (code, reason, expected) in
        [(403, "Forbidden", "FORBIDDEN"), (422, "Invalid", "VALIDATION_FAILED"), (500, "InternalError", "PRECONDITION_FAILED")]
    {
        cp.fake.refuse_writes(Some((code, reason)));
        let v = cp.post(&owner, ROTATE_APP, json!({"id": id})).await;
        assert_eq!(v["data"]["rotateApplicationSecret"]["errors"][0]["code"], expected, "{v}");
    }
    cp.fake.refuse_writes(None);
    let v = cp.post(&owner, ROTATE_APP, json!({"id": id})).await;
    assert_eq!(v["data"]["rotateApplicationSecret"]["accepted"], true, "{v}");
    assert_eq!(cp.object(KindId::Application, "poc--payments--checkout", "checkout-web")["spec"]["secret"], "rotate");
    let other = cp.post(&team("payments--ledger"), ROTATE_APP, json!({"id": id})).await;
    assert_eq!(other["data"]["rotateApplicationSecret"]["errors"][0]["code"], "NOT_FOUND");
    cp.running.shutdown().await.unwrap();
}

const TEAM_FIELDS: &str = "accepted note errors { code message field } team { name email displayname members { name email } }";

/// Every team and group mutation with who may and may not call it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn team_and_group_mutations_follow_the_references_permission_rules() {
    let cp = Cp::start(|_| {}).await;
    let create = format!("mutation($in: CreateTeamInput!) {{ createTeam(input: $in) {{ {TEAM_FIELDS} }} }}");
    let input = json!({"environment": "poc", "group": "assist", "name": "newcomer", "email": "newcomer@example.com",
                       "members": [{"name": "Ada", "email": "ada@example.com"}], "displayName": "Newcomers"});
    // A team viewer and a group viewer of another group may not create a team in `assist`.
    for token in [team("assist--copilot"), group("payments")] {
        let v = cp.post(&token, &create, json!({"in": input})).await;
        assert_eq!(v["data"]["createTeam"]["errors"][0]["code"], "FORBIDDEN", "{v}");
    }
    let v = cp.post(&group("assist"), &create, json!({"in": input})).await;
    let p = &v["data"]["createTeam"];
    assert_eq!((p["accepted"].as_bool(), &p["note"]), (Some(true), &Value::Null), "{v}");
    assert_eq!(p["team"]["name"], "assist--newcomer", "the created team, projected: {v}");
    assert_eq!(p["team"]["displayname"], "Newcomers");
    let cr = cp.object(KindId::Team, "poc", "assist--newcomer");
    assert_eq!(cr["spec"]["category"], "Customer");
    assert_eq!(cr["metadata"]["labels"]["cp.ei.telekom.de/environment"], "poc");
    let team_id = cp.id("teams", "assist--newcomer").await;

    // Updates: its team viewer, its group viewer, the admin; not another team or group.
    let update = format!("mutation($in: UpdateTeamInput!) {{ updateTeam(input: $in) {{ {TEAM_FIELDS} }} }}");
    for (token, code) in [(team("assist--copilot"), "NOT_FOUND"), (group("payments"), "NOT_FOUND")] {
        let v = cp.post(&token, &update, json!({"in": {"teamId": team_id, "email": "x@example.com"}})).await;
        assert_eq!(v["data"]["updateTeam"]["errors"][0]["code"], code, "{v}");
    }
    for (i, token) in [team("assist--newcomer"), group("assist"), admin()].into_iter().enumerate() {
        let mail = format!("team{i}@example.com");
        let v = cp.post(&token, &update, json!({"in": {"teamId": team_id, "email": mail}})).await;
        assert_eq!(v["data"]["updateTeam"]["team"]["email"], json!(mail), "{v}");
    }
    let add = "mutation($id: ID!, $m: MemberInput!) { addTeamMember(teamId: $id, member: $m) { note errors { code } team { members { email } } } }";
    let v = cp.post(&team("assist--newcomer"), add, json!({"id": team_id, "m": {"name": "Bo", "email": "bo@example.com"}})).await;
    let emails: Vec<&str> =
        v["data"]["addTeamMember"]["team"]["members"].as_array().unwrap().iter().map(|m| m["email"].as_str().unwrap()).collect();
    assert_eq!(emails, ["ada@example.com", "bo@example.com"], "{v}");
    let remove =
        "mutation($id: ID!, $e: String!) { removeTeamMember(teamId: $id, memberEmail: $e) { errors { code } team { members { email } } } }";
    let v = cp.post(&group("assist"), remove, json!({"id": team_id, "e": "ada@example.com"})).await;
    assert_eq!(v["data"]["removeTeamMember"]["team"]["members"], json!([{"email": "bo@example.com"}]), "{v}");
    let rotate = "mutation($id: ID!) { rotateTeamToken(teamId: $id) { accepted errors { code } } }";
    let v = cp.post(&team("assist--newcomer"), rotate, json!({"id": team_id})).await;
    assert_eq!(v["data"]["rotateTeamToken"]["accepted"], true, "{v}");
    assert_eq!(cp.object(KindId::Team, "poc", "assist--newcomer")["spec"]["secret"], "rotate");

    // Groups: only the admin creates and deletes; the group viewer updates its own.
    let group_id = cp.id("groups", "assist").await;
    let create_group =
        "mutation($in: CreateGroupInput!) { createGroup(input: $in) { accepted errors { code } group { name displayName } } }";
    let gin = json!({"in": {"environment": "poc", "name": "research", "displayName": "Research"}});
    assert_eq!(cp.post(&group("assist"), create_group, gin.clone()).await["data"]["createGroup"]["errors"][0]["code"], "FORBIDDEN");
    let v = cp.post(&admin(), create_group, gin).await;
    assert_eq!(v["data"]["createGroup"]["group"], json!({"name": "research", "displayName": "Research"}), "{v}");
    let update_group = "mutation($in: UpdateGroupInput!) { updateGroup(input: $in) { accepted errors { code } group { displayName } } }";
    let v = cp.post(&group("payments"), update_group, json!({"in": {"groupId": group_id, "displayName": "x"}})).await;
    assert_eq!(v["data"]["updateGroup"]["errors"][0]["code"], "FORBIDDEN", "a group it sees but does not lead: {v}");
    let v = cp.post(&group("assist"), update_group, json!({"in": {"groupId": group_id, "displayName": "Assistants"}})).await;
    assert_eq!(v["data"]["updateGroup"]["group"]["displayName"], "Assistants", "{v}");
    let delete_group = "mutation($id: ID!) { deleteGroup(input: {groupId: $id}) { accepted errors { code message } } }";
    let v = cp.post(&admin(), delete_group, json!({"id": group_id})).await;
    let e = &v["data"]["deleteGroup"]["errors"][0];
    assert_eq!(e["code"], "PRECONDITION_FAILED", "{v}");
    assert!(e["message"].as_str().unwrap().starts_with("cannot delete group: "), "{v}");
    let research = cp.id("groups", "research").await;
    assert_eq!(
        cp.post(&group("assist"), delete_group, json!({"id": research})).await["data"]["deleteGroup"]["errors"][0]["code"],
        "FORBIDDEN"
    );
    let v = cp.post(&admin(), delete_group, json!({"id": research})).await;
    assert_eq!(v["data"]["deleteGroup"]["accepted"], true, "{v}");
    assert!(cp.fake.get(KindId::Group, "poc", "research").is_none());
    let gone = cp.post(&admin(), "{ groups(where: {name: \"research\"}) { id } }", json!({})).await;
    assert_eq!(gone["data"]["groups"], json!([]), "the delete is projected before the answer: {gone}");

    // Deleting a team: its group viewer or the admin, not its team viewer.
    let delete = "mutation($id: ID!) { deleteTeam(input: {teamId: $id}) { accepted errors { code } } }";
    assert_eq!(
        cp.post(&team("assist--newcomer"), delete, json!({"id": team_id})).await["data"]["deleteTeam"]["errors"][0]["code"],
        "FORBIDDEN"
    );
    let v = cp.post(&group("assist"), delete, json!({"id": team_id})).await;
    assert_eq!(v["data"]["deleteTeam"]["accepted"], true, "{v}");
    let v = cp.post(&admin(), delete, json!({"id": team_id})).await;
    assert_eq!(v["data"]["deleteTeam"]["errors"][0]["code"], "NOT_FOUND", "gone from the read model too: {v}");
    cp.running.shutdown().await.unwrap();
}

/// Hostile and out-of-bounds input: refused with VALIDATION_FAILED and the field, before any
/// write; a request of more than 10 mutation fields, and a mutation over GET, refused whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_is_refused_before_anything_is_written() {
    let cp = Cp::start(|_| {}).await;
    let writes = cp.fake.writes();
    let create = "mutation($in: CreateTeamInput!) { createTeam(input: $in) { accepted errors { code field } } }";
    let base = json!({"environment": "poc", "group": "assist", "name": "x", "email": "x@example.com", "members": []});
    let with = |field: &str, value: Value| {
        let mut v = base.clone();
        v[field] = value;
        json!({"in": v})
    };
    let many: Vec<Value> = (0..1000).map(|i| json!({"name": "m", "email": format!("m{i}@example.com")})).collect();
    for (vars, field) in [
        (with("name", json!("UPPER")), "input.name"),
        (with("name", json!("a".repeat(70))), "input.name"),
        (with("group", json!("../etc")), "input.group"),
        (with("email", json!("not an email")), "input.email"),
        (with("displayName", json!("d".repeat(5000))), "input.displayName"),
        (with("members", json!(many)), "input.members"),
        (with("members", json!([{"name": "", "email": "a@example.com"}])), "input.members[0].name"),
    ] {
        let v = cp.post(&admin(), create, vars).await;
        let p = &v["data"]["createTeam"];
        assert_eq!((p["errors"][0]["code"].as_str(), p["errors"][0]["field"].as_str()), (Some("VALIDATION_FAILED"), Some(field)), "{v}");
    }
    let id = cp.id("approvalRequests", PENDING_REQUEST.1).await;
    let v = cp.post(&admin(), DECIDE_REQUEST, json!({"id": id, "action": "ALLOW", "comment": "c".repeat(100_000)})).await;
    assert_eq!(v["data"]["decideApprovalRequest"]["errors"][0]["field"], "input.comment", "{v}");
    for bad in ["", "not base64 !", &"A".repeat(10_000)] {
        let v = cp.post(&admin(), ROTATE_APP, json!({"id": bad})).await;
        assert_eq!(v["data"]["rotateApplicationSecret"]["errors"][0]["code"], "NOT_FOUND", "{v}");
    }
    // An ID of another type.
    let v = cp.post(&admin(), ROTATE_APP, json!({"id": id})).await;
    assert_eq!(v["data"]["rotateApplicationSecret"]["errors"][0]["message"], "application not found");
    assert_eq!(cp.fake.writes(), writes, "nothing was written");

    let fields: Vec<String> = (0..11).map(|i| format!("m{i}: rotateTeamToken(teamId: \"x\") {{ accepted }}")).collect();
    let v = cp.post(&admin(), &format!("mutation {{ {} }}", fields.join(" ")), json!({})).await;
    assert_eq!(v["errors"][0]["extensions"]["code"], "TOO_MANY_MUTATIONS", "{v}");
    assert_eq!(v["data"], Value::Null);
    let url = format!("http://{}/graphql/query", cp.running.local_addr());
    let r = cp
        .http
        .get(&url)
        .bearer_auth(admin())
        .query(&[("query", "mutation { rotateTeamToken(teamId: \"x\") { accepted } }")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 406);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["errors"][0]["message"], "GET requests only allow query operations");
    // GraphQL over HTTP names the operation `operationName`: the query is chosen, the mutation refused.
    let two = "query A { a: __typename } query B { b: __typename } mutation M { rotateTeamToken(teamId: \"x\") { accepted } }";
    let r = cp.http.get(&url).bearer_auth(admin()).query(&[("query", two), ("operationName", "B")]).send().await.unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["data"], json!({"b": "Query"}));
    let r = cp.http.get(&url).bearer_auth(admin()).query(&[("query", two), ("operationName", "M")]).send().await.unwrap();
    assert_eq!(r.status(), 406);
    // `__typename` writes nothing and does not count; a doubling chain of fragments is cut.
    let typenames: Vec<String> = (0..1000).map(|i| format!("t{i}: __typename")).collect();
    let v = cp
        .post(
            &admin(),
            &format!("mutation {{ {} rotateTeamToken(teamId: \"x\") {{ errors {{ code }} }} }}", typenames.join(" ")),
            json!({}),
        )
        .await;
    assert_eq!(v["data"]["rotateTeamToken"]["errors"][0]["code"], "NOT_FOUND", "{}", v["errors"]);
    let mut chain = String::from("mutation { ...F26 } fragment F0 on Mutation { __typename }");
    for i in 1..=26 {
        chain.push_str(&format!(" fragment F{i} on Mutation {{ ...F{} ...F{} }}", i - 1, i - 1));
    }
    let v = cp.post(&admin(), &chain, json!({})).await;
    let code = v["errors"][0]["extensions"]["code"].as_str().unwrap_or_default().to_string();
    assert!(["TOO_MANY_MUTATIONS", "QUERY_TOO_COMPLEX"].contains(&code.as_str()), "{v}");
    assert_eq!(cp.fake.writes(), writes, "nothing was written");
    cp.running.shutdown().await.unwrap();
}

/// When the projector does not apply the write in time (the watch is down), the payload still
/// says accepted, shows the last projected state and a note.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_not_yet_projected_is_answered_with_the_last_state_and_a_note() {
    let cp = Cp::start(|c| c.mutations.projection_timeout = Duration::from_millis(300)).await;
    let id = cp.id("approvals", "apisubscription--checkout-web--payments-checkout-v1").await;
    cp.fake.block_watches(true);
    let decide = "mutation($id: ID!) { decideApproval(approvalId: $id, input: {action: SUSPEND}) { accepted note errors { code } approval { state } } }";
    let v = cp.post(&team("payments--checkout"), decide, json!({"id": id})).await;
    let p = &v["data"]["decideApproval"];
    assert_eq!(p["accepted"], true, "{v}");
    assert_eq!(p["note"], query::mutations::NOT_PROJECTED);
    assert_eq!(p["approval"]["state"], "GRANTED", "the last projected state: {v}");
    assert_eq!(
        cp.object(KindId::Approval, "poc--payments--checkout", "apisubscription--checkout-web--payments-checkout-v1")["spec"]["state"],
        "Suspended"
    );
    cp.running.shutdown().await.unwrap();
}

/// Off by default: every mutation answers PRECONDITION_FAILED, nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutations_are_disabled_by_default() {
    let cp = Cp::start(|c| c.mutations.enabled = control_plane::config::Config::default().mutations.enabled).await;
    let sdl = query::build_schema(query::QueryConfig::default()).unwrap().sdl();
    let mutations: Vec<String> = sdl
        .split("type Mutation {")
        .nth(1)
        .unwrap()
        .split('}')
        .next()
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().split_once('(').map(|(n, _)| n.to_string()))
        .filter(|n| n.starts_with(|c: char| c.is_ascii_lowercase()) && n.chars().all(|c| c.is_ascii_alphanumeric()))
        .collect();
    assert_eq!(mutations.len(), 12, "{mutations:?}");
    let id = cp.id("approvalRequests", PENDING_REQUEST.1).await;
    let v = cp.post(&admin(), DECIDE_REQUEST, json!({"id": id, "action": "ALLOW"})).await;
    let p = &v["data"]["decideApprovalRequest"];
    assert_eq!(
        (p["errors"][0]["code"].as_str(), p["errors"][0]["message"].as_str()),
        (Some("PRECONDITION_FAILED"), Some("mutations are disabled"))
    );
    let v = cp.post(&admin(), "mutation { deleteGroup(input: {groupId: \"x\"}) { accepted errors { code message } } }", json!({})).await;
    assert_eq!(v["data"]["deleteGroup"]["errors"][0]["message"], "mutations are disabled");
    assert_eq!(cp.fake.writes(), 0);
    cp.running.shutdown().await.unwrap();
}

/// `deleteTeam` asks the rover server first (`roverServer.*`): a team with resources is not
/// deleted, nor is one whose resources cannot be checked; the token file and the team's
/// environment go with the question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_team_asks_the_rover_server_first() {
    use poem::listener::{Acceptor, Listener};
    let asked: std::sync::Arc<std::sync::Mutex<Vec<(String, String, String)>>> = Default::default();
    let seen = asked.clone();
    let failing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let fails = failing.clone();
    let rover = poem::endpoint::make_sync(move |req: poem::Request| {
        if fails.load(std::sync::atomic::Ordering::SeqCst) {
            return poem::Response::builder().status(poem::http::StatusCode::SERVICE_UNAVAILABLE).body("down");
        }
        let url = reqwest::Url::parse(&format!("http://rover/?{}", req.uri().query().unwrap_or_default())).unwrap();
        let q: std::collections::BTreeMap<String, String> = url.query_pairs().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let header = |n: &str| req.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        seen.lock().unwrap().push((q.get("team").cloned().unwrap_or_default(), header("x-environment"), header("authorization")));
        let body = match q.get("team").map(String::as_str) {
            Some("copilot") => json!({"items": [{"kind": "Rover", "name": "copilot-agent"}]}).to_string(),
            Some("knowledge") => "x".repeat(2 << 20),
            _ => json!({"items": []}).to_string(),
        };
        poem::Response::builder().content_type("application/json").body(body)
    });
    let acceptor = poem::listener::TcpListener::bind("127.0.0.1:0").into_acceptor().await.unwrap();
    let addr = *acceptor.local_addr()[0].as_socket_addr().unwrap();
    let server = tokio::spawn(async move { poem::Server::new_with_acceptor(acceptor).run(rover).await });
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "rover-token\n").unwrap();
    let cp = Cp::start(|c| {
        c.rover_server.base_url = Some(format!("http://{addr}"));
        c.rover_server.token_file = token_file.clone();
    })
    .await;
    let delete = "mutation($id: ID!) { deleteTeam(input: {teamId: $id}) { accepted errors { code message } } }";
    let v = cp.post(&group("assist"), delete, json!({"id": cp.id("teams", "assist--copilot").await})).await;
    let e = &v["data"]["deleteTeam"]["errors"][0];
    assert_eq!(
        (e["code"].as_str(), e["message"].as_str()),
        (Some("PRECONDITION_FAILED"), Some("cannot delete team: team still has resources — delete all resources first")),
        "{v}"
    );
    let v = cp.post(&group("assist"), delete, json!({"id": cp.id("teams", "assist--knowledge").await})).await;
    assert_eq!(v["data"]["deleteTeam"]["errors"][0]["message"], "unable to verify team resources, please try again", "a 2 MiB answer: {v}");
    assert!(
        cp.fake.get(KindId::Team, "poc", "assist--copilot").is_some() && cp.fake.get(KindId::Team, "poc", "assist--knowledge").is_some()
    );
    let v = cp.post(&admin(), delete, json!({"id": cp.id("teams", "logistics--fleet").await})).await;
    assert_eq!(v["data"]["deleteTeam"]["accepted"], true, "{v}");
    assert_eq!(
        asked.lock().unwrap().clone(),
        [("copilot", "poc", "Bearer rover-token"), ("knowledge", "poc", "Bearer rover-token"), ("fleet", "poc", "Bearer rover-token")]
            .map(|(t, e, a)| (t.to_string(), e.to_string(), a.to_string()))
    );
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let v = cp.post(&admin(), delete, json!({"id": cp.id("teams", "payments--ledger").await})).await;
    assert_eq!(v["data"]["deleteTeam"]["errors"][0]["message"], "unable to verify team resources, please try again", "rover failing: {v}");
    assert!(cp.fake.get(KindId::Team, "poc", "payments--ledger").is_some());
    server.abort();
    cp.running.shutdown().await.unwrap();
}

/// decideApproval: the decider team resumes a suspended approval and reads the new state; the
/// requester team, which sees the approval, may not; another team does not see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decider_team_resumes_a_suspended_approval() {
    let cp = Cp::start(|_| {}).await;
    let (ns, name) = ("poc--payments--ledger", "apisubscription--ledger-reports--logistics-fleet-positions-v1");
    let id = cp.id("approvals", name).await;
    let decide = "mutation($id: ID!, $a: ApprovalAction!) { decideApproval(approvalId: $id, input: {action: $a}) { accepted note errors { code } approval { state decisions { name resultingState } } } }";
    for (token, code) in [(team("payments--ledger"), "FORBIDDEN"), (team("assist--copilot"), "NOT_FOUND"), (group("payments"), "FORBIDDEN")]
    {
        let v = cp.post(&token, decide, json!({"id": id, "a": "RESUME"})).await;
        assert_eq!(v["data"]["decideApproval"]["errors"][0]["code"], code, "{v}");
    }
    let v = cp.post(&team("logistics--fleet"), decide, json!({"id": id, "a": "RESUME"})).await;
    let p = &v["data"]["decideApproval"];
    assert_eq!((p["accepted"].as_bool(), &p["note"]), (Some(true), &Value::Null), "{v}");
    let cr = cp.object(KindId::Approval, ns, name);
    let to = cr["status"]["availableTransitions"].as_array().unwrap().iter().find(|t| t["action"] == "Resume").unwrap()["to"].clone();
    assert_eq!(cr["spec"]["state"], to);
    assert_eq!(p["approval"]["state"].as_str().map(str::to_ascii_lowercase), to.as_str().map(str::to_ascii_lowercase), "{v}");
    let last = p["approval"]["decisions"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["name"], "logistics--fleet--console", "without a name claim, the clientId: {v}");
    cp.running.shutdown().await.unwrap();
}
