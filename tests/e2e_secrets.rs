//! Secret resolution over HTTP (ARCHITECTURE.md "Viewers and visibility"): the server resolves `$<id>`
//! references through a fake secret manager over HTTPS with its own CA
//! (`support::secret_manager`): resolved for the owner, cached, rotated, masked for obfuscated
//! callers without a lookup, never looked up for a team that cannot read the secret, failures
//! and timeouts answered "failed to resolve secret <field>" (`INTERNAL`) with nothing of the
//! upstream answer, and an audit line per access without the value.

mod support;

use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use support::secret_manager::{tls_file, Behaviour, FakeSecretManager};
use support::{team_token, token, world_dir, Server};

const PLANNER_SECRET: &str = "poc:logistics--fleet:fleet-planner:clientSecret:996c3cd79a";
const FLEET_TOKEN: &str = "poc:logistics--fleet::teamToken:d5df3d46e6";
/// Not in the world (`status.rotatedClientSecret` is unset): never asked for.
const PLANNER_ROTATED: &str = "poc:logistics--fleet:fleet-planner:rotatedClientSecret:81fad60257";
const VALUES: [(&str, &str); 3] =
    [(PLANNER_SECRET, "planner-secret-value"), (PLANNER_ROTATED, "planner-rotated-value"), (FLEET_TOKEN, "fleet-team-token-value")];

const PLANNER: &str = r#"{ applications(where: {name: "fleet-planner"}) { edges { node { id clientSecret rotatedClientSecret } } } }"#;
const TEAMS: &str = "{ teams { edges { node { name teamToken } } } }";

/// Everything the process logs, for the assertions on what the log says and never says.
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

fn log_text() -> String {
    String::from_utf8_lossy(&logs().lock().unwrap()).to_string()
}

/// The server on the example world, resolving through `fake` (token file and CA configured),
/// with `cache_ttl` and `timeout`.
async fn server(fake: &FakeSecretManager, token_dir: &tempfile::TempDir, cache_ttl: Duration, timeout: Duration) -> Server {
    logs();
    let token_file = token_dir.path().join("token");
    std::fs::write(&token_file, "manager-bearer-token\n").unwrap();
    let url = fake.url.clone();
    Server::start_with(&world_dir(), None, move |c| {
        c.secret_manager.url = Some(url);
        c.secret_manager.token_file = token_file;
        c.secret_manager.ca_file = tls_file("ca.pem");
        c.secret_manager.cache_ttl = cache_ttl;
        c.secret_manager.timeout = timeout;
    })
    .await
}

async fn post(server: &Server, token: &str, query: &str) -> Value {
    let response = server.post(Some(token), query).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn planner(answer: &Value) -> &Value {
    &answer["data"]["applications"]["edges"][0]["node"]
}

fn metric(text: &str, line_start: &str) -> f64 {
    text.lines().find(|l| l.starts_with(line_start)).and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).unwrap_or(0.0)
}

#[tokio::test]
async fn the_owner_reads_resolved_secrets_once_looked_up_then_cached_and_nobody_else_causes_a_lookup() {
    let fake = FakeSecretManager::start(&VALUES).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server(&fake, &dir, Duration::from_secs(600), Duration::from_secs(5)).await;
    let fleet = team_token("logistics--fleet", "poc");

    let answer = post(&server, &fleet, PLANNER).await;
    assert_eq!(answer.get("errors"), None, "{answer}");
    assert_eq!(planner(&answer)["clientSecret"], "planner-secret-value");
    assert_eq!(planner(&answer)["rotatedClientSecret"], Value::Null);
    let teams = post(&server, &fleet, TEAMS).await;
    let own = teams["data"]["teams"]["edges"].as_array().unwrap().iter().find(|e| e["node"]["name"] == "logistics--fleet").cloned();
    let own = own.unwrap_or_else(|| panic!("the team reads itself: {teams}"));
    assert_eq!(own["node"]["teamToken"], "fleet-team-token-value");
    let mut paths: Vec<String> = fake.received().iter().map(|r| r.path.clone()).collect();
    paths.sort();
    let mut expected: Vec<String> = [PLANNER_SECRET, FLEET_TOKEN].iter().map(|id| format!("/api/v1/secrets/{id}")).collect();
    expected.sort();
    assert_eq!(paths, expected, "one request per secret");
    assert!(fake.received().iter().all(|r| r.authorization.as_deref() == Some("Bearer manager-bearer-token")));

    // Cached: the same answer again, no request.
    assert_eq!(post(&server, &fleet, PLANNER).await, answer);
    let admin = token("platform--admins--console", "tardis:admin:all", "poc");
    let as_admin = post(&server, &admin, PLANNER).await;
    assert_eq!(planner(&as_admin)["clientSecret"], "planner-secret-value");
    assert_eq!(fake.received().len(), 2);

    // Obfuscated: the mask, no lookup, even with an empty cache for other ids.
    let obfuscated = token("logistics--fleet--console", "tardis:team:obfuscated", "poc");
    let masked = post(&server, &obfuscated, PLANNER).await;
    assert_eq!(planner(&masked)["clientSecret"], "**********");
    assert_eq!(planner(&masked)["rotatedClientSecret"], Value::Null, "nothing stored, nothing masked");

    // Other teams and groups: not visible, not looked up — by list, by ID and through the
    // subscription whose OAuth2 client secret belongs to payments--checkout.
    let id = planner(&answer)["id"].as_str().unwrap().to_string();
    for other in [
        team_token("payments--checkout", "poc"),
        token("payments--probe--console", "tardis:group:read", "poc"),
        team_token("logistics--fleet", "qa"),
    ] {
        let listed = post(&server, &other, "{ applications { edges { node { name clientSecret rotatedClientSecret } } } }").await;
        assert!(!listed.to_string().contains("planner-"), "{listed}");
        let by_id = post(&server, &other, &format!(r#"{{ node(id: "{id}") {{ ... on Application {{ clientSecret }} }} }}"#)).await;
        assert_eq!(by_id["errors"][0]["extensions"]["code"], "NOT_FOUND", "{by_id}");
    }
    let ledger = team_token("payments--ledger", "poc");
    let subscription = post(
        &server,
        &ledger,
        r#"{ apiSubscriptions(where: {name: "checkout-batch--payments-ledger-v2"}) { edges { node { security { m2m { client { clientSecret } } } } } } }"#,
    )
    .await;
    for edge in subscription["data"]["apiSubscriptions"]["edges"].as_array().unwrap() {
        assert_eq!(edge["node"]["security"]["m2m"]["client"]["clientSecret"], Value::Null, "{subscription}");
    }
    // They looked their own secrets up (unknown to the fake), never logistics--fleet's.
    let fleet_lookups = fake.received().iter().filter(|r| r.path.contains("poc:logistics--fleet:")).count();
    assert_eq!(fleet_lookups, 2, "no lookup for a viewer who cannot read the secret: {:?}", fake.received());

    let metrics = server.get_text("/metrics").await;
    assert_eq!(metric(&metrics, r#"controlplane_secret_lookups_total{outcome="fetched"}"#), 2.0, "{metrics}");
    assert_eq!(metric(&metrics, r#"controlplane_secret_lookups_total{outcome="cached"}"#), 2.0, "{metrics}");
    assert_eq!(metric(&metrics, r#"controlplane_secret_manager_requests_total{result="ok"}"#), 2.0, "{metrics}");
    // The others' own lookups: 404 from the fake, each a failed lookup and an error request.
    let others = fake.received().len() as f64 - 2.0;
    assert_eq!(metric(&metrics, r#"controlplane_secret_manager_requests_total{result="error"}"#), others, "{metrics}");

    // The audit log names viewer, field, record and outcome, and never a value.
    let log = log_text();
    let audit: Vec<&str> = log.lines().filter(|l| l.contains("secret field read")).collect();
    assert!(
        audit
            .iter()
            .any(|l| l.contains("logistics--fleet--console") && l.contains("clientSecret") && l.contains(&id) && l.contains("resolved")),
        "{log}"
    );
    assert!(audit.iter().any(|l| l.contains("logistics--fleet--console") && l.contains("masked")), "{log}");
    assert!(audit.iter().any(|l| l.contains("platform--admins--console") && l.contains("clientSecret")), "{log}");
    assert!(!audit.iter().any(|l| l.contains("payments--checkout--console") && l.contains(&id)), "a hidden secret is not an access: {log}");
    for (_, value) in VALUES {
        assert!(!log.contains(value), "the log holds a secret value");
    }
    server.stop().await;
}

#[tokio::test]
async fn a_rotated_secret_is_answered_once_the_cache_ttl_passed() {
    let fake = FakeSecretManager::start(&VALUES).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server(&fake, &dir, Duration::ZERO, Duration::from_secs(5)).await;
    let fleet = team_token("logistics--fleet", "poc");
    assert_eq!(planner(&post(&server, &fleet, PLANNER).await)["clientSecret"], "planner-secret-value");
    fake.set(PLANNER_SECRET, "planner-secret-rotated");
    assert_eq!(planner(&post(&server, &fleet, PLANNER).await)["clientSecret"], "planner-secret-rotated");
    assert_eq!(fake.received().iter().filter(|r| r.path.ends_with(PLANNER_SECRET)).count(), 2);
    server.stop().await;
}

#[tokio::test]
async fn a_failing_secret_manager_gives_failed_to_resolve_secret_with_no_upstream_detail() {
    let fake = FakeSecretManager::start(&VALUES).await;
    let dir = tempfile::tempdir().unwrap();
    let server = server(&fake, &dir, Duration::from_secs(600), Duration::from_secs(5)).await;
    let fleet = team_token("logistics--fleet", "poc");
    fake.behave(Behaviour::Fail(500, r#"{"error":"vault sealed","value":"leaked-upstream-value"}"#.into()));
    let answer =
        post(&server, &fleet, r#"{ applications(where: {name: "fleet-planner"}) { edges { node { name clientSecret } } } }"#).await;
    assert_eq!(planner(&answer)["name"], "fleet-planner");
    assert_eq!(planner(&answer)["clientSecret"], Value::Null);
    let errors = answer["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{answer}");
    assert_eq!(errors[0]["message"], "failed to resolve secret clientSecret");
    assert_eq!(errors[0]["extensions"], json!({"code": "INTERNAL"}));
    assert_eq!(errors[0]["path"], json!(["applications", "edges", 0, "node", "clientSecret"]), "{answer}");
    assert!(!answer.to_string().contains("vault") && !answer.to_string().contains("500"), "{answer}");

    // Not cached: once the manager answers again, the secret resolves.
    fake.behave(Behaviour::Answer);
    assert_eq!(planner(&post(&server, &fleet, PLANNER).await)["clientSecret"], "planner-secret-value");
    // An answer over 64 KiB is not read to its end: the same failure.
    fake.behave(Behaviour::Fail(200, format!(r#"{{"value":"{}"}}"#, "v".repeat(70_000))));
    let teams = post(&server, &fleet, TEAMS).await;
    assert_eq!(teams["errors"][0]["message"], "failed to resolve secret teamToken", "{teams}");
    assert_eq!(teams["data"]["teams"]["edges"][0]["node"]["teamToken"], Value::Null);
    let log = log_text();
    assert!(log.contains("larger than 65536 bytes"), "the log says the answer was too large");
    assert!(
        log.lines().any(|l| l.contains("a secret could not be resolved") && l.contains("clientSecret") && l.contains("HTTP 500")),
        "the log names the field and the reason: {log}"
    );
    assert!(!log.contains("leaked-upstream-value") && !log.contains("vault sealed"), "the log holds the upstream body");
    let metrics = server.get_text("/metrics").await;
    assert_eq!(metric(&metrics, r#"controlplane_secret_lookups_total{outcome="failed"}"#), 2.0, "{metrics}");
    assert_eq!(metric(&metrics, r#"controlplane_secret_manager_requests_total{result="error"}"#), 2.0, "{metrics}");
    server.stop().await;
}

#[tokio::test]
async fn a_secret_manager_that_never_answers_is_cut_at_the_timeout_and_the_server_keeps_serving() {
    let fake = FakeSecretManager::start(&VALUES).await;
    let dir = tempfile::tempdir().unwrap();
    let server = Arc::new(server(&fake, &dir, Duration::from_secs(600), Duration::from_millis(300)).await);
    fake.behave(Behaviour::Hang);
    let fleet = team_token("logistics--fleet", "poc");
    let slow = {
        let (server, fleet) = (server.clone(), fleet.clone());
        tokio::spawn(async move {
            post(&server, &fleet, r#"{ applications(where: {name: "fleet-planner"}) { edges { node { clientSecret } } } }"#).await
        })
    };
    // While the lookup hangs, the server answers health checks and queries without secrets.
    fake.wait_for_requests(1).await;
    assert_eq!(server.get_text("/healthz").await, "ok\n");
    let plain = post(&server, &fleet, r#"{ applications(where: {name: "fleet-planner"}) { edges { node { name } } } }"#).await;
    assert_eq!(planner(&plain)["name"], "fleet-planner");
    let answer = slow.await.unwrap();
    assert_eq!(answer["errors"][0]["message"], "failed to resolve secret clientSecret", "{answer}");
    assert_eq!(answer["errors"][0]["extensions"]["code"], "INTERNAL");
    let metrics = server.get_text("/metrics").await;
    assert_eq!(metric(&metrics, r#"controlplane_secret_manager_requests_total{result="timeout"}"#), 1.0, "{metrics}");
    assert!(log_text().contains("secretManager.timeout"), "the log says which limit cut the lookup");
    Arc::into_inner(server).unwrap().stop().await;
}

#[tokio::test]
async fn a_secret_manager_whose_certificate_is_not_trusted_is_never_sent_the_token() {
    let fake = FakeSecretManager::start(&VALUES).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "manager-bearer-token").unwrap();
    logs();
    let url = fake.url.clone();
    let server = Server::start_with(&world_dir(), None, move |c| {
        c.secret_manager.url = Some(url);
        c.secret_manager.token_file = token_file;
        // The in-cluster default, absent here: the system's CAs only, which do not include the
        // test CA.
        c.secret_manager.ca_file = control_plane::config::DEFAULT_SECRET_MANAGER_CA_FILE.into();
    })
    .await;
    let answer = post(&server, &team_token("logistics--fleet", "poc"), PLANNER).await;
    assert_eq!(answer["errors"][0]["message"], "failed to resolve secret clientSecret", "{answer}");
    assert!(fake.received().is_empty(), "a request passed an untrusted TLS handshake");
    server.stop().await;
}

#[tokio::test]
async fn a_configured_ca_file_that_is_missing_or_holds_no_certificate_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let big = dir.path().join("big.pem");
    std::fs::write(&big, vec![b'x'; (4 << 20) + 1]).unwrap();
    let cases = [
        (dir.path().join("missing.pem"), "No such file"),
        (empty, "no PEM certificate"),
        (dir.path().to_path_buf(), "not a regular file"),
        ("/dev/zero".into(), "not a regular file"),
        (big, "larger than 4194304 bytes"),
    ];
    for (ca_file, says) in cases {
        let mut config = control_plane::Config::for_manifests(&world_dir(), &dir.path().join("data"));
        config.secret_manager.url = Some("https://127.0.0.1:9/api".into());
        config.secret_manager.ca_file = ca_file.clone();
        let error = match control_plane::start(config).await {
            Ok(_) => panic!("started with secretManager.caFile {}", ca_file.display()),
            Err(e) => format!("{e:#}"),
        };
        assert!(error.contains("secretManager.caFile") && error.contains(says), "{error}");
    }
}

/// Concurrent lookups of one id are one request to the manager: eight lookups wait for the one
/// request the fake holds, which is answered only after it arrived.
#[tokio::test]
async fn concurrent_lookups_of_one_secret_are_one_request() {
    use query::secrets::{SecretLookup, SecretResolver};
    let fake = FakeSecretManager::start(&VALUES).await;
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "manager-bearer-token").unwrap();
    let mut config = control_plane::Config::default().secret_manager;
    config.url = Some(fake.url.clone());
    config.token_file = token_file;
    config.ca_file = tls_file("ca.pem");
    let metrics = control_plane::metrics::Metrics::new();
    let manager = control_plane::secrets::SecretManager::new(&config, metrics.registry()).unwrap().expect("a URL is set");
    fake.behave(Behaviour::Hold);
    let lookups =
        futures::future::join_all((0..8).map(|_| manager.resolve(SecretLookup { id: PLANNER_SECRET.to_string(), field: "clientSecret" })));
    let release = async {
        fake.wait_for_requests(1).await;
        fake.release();
    };
    let (values, ()) = tokio::join!(lookups, release);
    assert_eq!(values, vec![Ok("planner-secret-value".to_string()); 8]);
    assert_eq!(fake.received().len(), 1, "one request for eight concurrent lookups");
    let text = metrics.encode();
    assert_eq!(metric(&text, r#"controlplane_secret_lookups_total{outcome="fetched"}"#), 8.0, "{text}");
    assert_eq!(metric(&text, r#"controlplane_secret_manager_requests_total{result="ok"}"#), 1.0, "{text}");
}

/// A request waiting for the secret manager holds no worker: with 2 workers, four requests
/// wait for four different secrets at once (each reached the manager) while another team's
/// query is answered; all four resolve once the manager answers.
#[tokio::test]
async fn requests_waiting_for_the_secret_manager_hold_no_worker() {
    let fake = FakeSecretManager::start(&VALUES).await;
    fake.set("poc:logistics--fleet:fleet-telemetry:clientSecret:68d4d4daa7", "telemetry-secret-value");
    fake.set("poc:payments--checkout::teamToken:33e829c1a1", "checkout-team-token-value");
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "manager-bearer-token").unwrap();
    logs();
    let url = fake.url.clone();
    let server = Arc::new(
        Server::start_with(&world_dir(), None, move |c| {
            c.secret_manager.url = Some(url);
            c.secret_manager.token_file = token_file;
            c.secret_manager.ca_file = tls_file("ca.pem");
            c.graphql.workers = 2;
        })
        .await,
    );
    fake.behave(Behaviour::Hold);
    let (fleet, checkout) = (team_token("logistics--fleet", "poc"), team_token("payments--checkout", "poc"));
    let waiting: Vec<_> = [
        (fleet.clone(), r#"{ applications(where: {name: "fleet-planner"}) { edges { node { clientSecret } } } }"#),
        (fleet.clone(), r#"{ applications(where: {name: "fleet-telemetry"}) { edges { node { clientSecret } } } }"#),
        (fleet.clone(), TEAMS),
        (checkout.clone(), TEAMS),
    ]
    .into_iter()
    .map(|(token, query)| {
        let server = server.clone();
        tokio::spawn(async move { post(&server, &token, query).await })
    })
    .collect();
    // All four reached the manager: none waited for a worker the others held.
    fake.wait_for_requests(4).await;
    let other = post(&server, &team_token("payments--ledger", "poc"), "{ applications { totalCount } }").await;
    assert!(other["data"]["applications"]["totalCount"].as_u64().unwrap() > 0, "{other}");
    fake.release();
    let mut answers = Vec::new();
    for w in waiting {
        answers.push(w.await.unwrap().to_string());
    }
    for (answer, value) in
        answers.iter().zip(["planner-secret-value", "telemetry-secret-value", "fleet-team-token-value", "checkout-team-token-value"])
    {
        assert!(answer.contains(value) && !answer.contains("errors"), "{answer}");
    }
    Arc::into_inner(server).unwrap().stop().await;
}
