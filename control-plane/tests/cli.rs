//! The binary: exit codes, refusal messages, `check`, and a served process that becomes ready
//! and stops gracefully on SIGTERM.

mod common;

use common::ServerLog;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs the binary with a clean configuration environment.
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_control-plane"));
    cmd.args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("CP_") || k.starts_with("FEATURE_") || k == "DEPENDENCY_DELAY" || k == "SKIP_REQUEUE" {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    cmd.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(run(&["serve", "--bogus"], &[]).status.code(), Some(2));
    assert_eq!(run(&["serve", "--manifests", "x", "--source", "kube"], &[]).status.code(), Some(2));
    assert_eq!(run(&[], &[]).status.code(), Some(2));
    assert_eq!(run(&["--help"], &[]).status.code(), Some(0));
}

#[test]
fn serve_help_lists_the_settings() {
    let o = run(&["serve", "--help"], &[]);
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in ["CP_SERVER_ADDRESS", "security.trustedIssuers", "DEPENDENCY_DELAY", "FEATURE_PUBSUB_ENABLED"] {
        assert!(out.contains(needle), "{needle} missing in\n{out}");
    }
}

#[test]
fn refusals_exit_1_with_a_clear_message() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let data = data.to_str().unwrap();
    let world = repo().join("examples/world");
    let world = world.to_str().unwrap();

    // jwt mode (the default) without a trusted issuer, however none is given: exit 1, the reason.
    let o = run(&["serve", "--manifests", world, "--data-dir", data], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no trusted issuer") && stderr(&o).contains("--trusted-issuer"), "{}", stderr(&o));
    let o = run(&["serve", "--auth", "jwt", "--manifests", world, "--data-dir", data], &[("CP_SECURITY_TRUSTED_ISSUERS", " , ")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no trusted issuer"), "{}", stderr(&o));
    let issuer = ["--trusted-issuer", "http://127.0.0.1:9/realms/x"];
    let o = run(&[&["serve", "--manifests", world, "--data-dir", data][..], &issuer].concat(), &[("CP_SECURITY_LEEWAY", "1h")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("`security.leeway`") && stderr(&o).contains("CP_SECURITY_LEEWAY"), "{}", stderr(&o));

    // The kube source without a kubeconfig, outside a cluster: a clear message, exit 1.
    let o = run(
        &["serve", "--auth", "mock", "--listen", "127.0.0.1:0", "--data-dir", data],
        &[("KUBECONFIG", "/nonexistent/kubeconfig"), ("KUBERNETES_SERVICE_HOST", "")],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("kube source") && stderr(&o).contains("--manifests"), "{}", stderr(&o));

    // A value that starts with `-` is the setting's value, refused naming the setting.
    let o = run(&["serve", "--auth", "mock", "--manifests", world, "--data-dir", data, "--secret-manager-cache-ttl", "-1s"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("`secretManager.cacheTtl`") && stderr(&o).contains("--secret-manager-cache-ttl"), "{}", stderr(&o));

    let o = run(&["serve", "--auth", "mock", "--manifests", world, "--data-dir", data], &[("CP_GRAPHQL_MAX_PAGE_SIZE", "lots")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("`graphql.maxPageSize`") && stderr(&o).contains("CP_GRAPHQL_MAX_PAGE_SIZE"), "{}", stderr(&o));

    let o = run(&["serve", "--auth", "mock", "--listen", "127.0.0.1:0", "--manifests", "/nonexistent/manifests", "--data-dir", data], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/nonexistent/manifests") && stderr(&o).contains("source.manifests"), "{}", stderr(&o));
    let readme = repo().join("README.md");
    let readme = readme.to_str().unwrap();
    let o = run(&["serve", "--auth", "mock", "--listen", "127.0.0.1:0", "--manifests", readme, "--data-dir", data], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is not a directory (source.manifests)"), "{}", stderr(&o));
    let o = run(&["serve", "--auth", "mock", "--listen", "127.0.0.1:0", "--manifests", world, "--data-dir", readme], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("README.md is not a directory (storage.dataDir)"), "{}", stderr(&o));

    let cfg = tmp.path().join("cp.yaml");
    std::fs::write(&cfg, "server:\n  adress: 1\n").unwrap();
    let o = run(&["serve", "--config", cfg.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unknown key `server.adress`"), "{}", stderr(&o));
}

#[test]
fn check_exit_codes() {
    // `check --help` names every outcome a report line can start with.
    let o = run(&["check", "--help"], &[]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    for tag in ["OK", "SKIP", "FAIL", "IGNORED", "DUPLICATE", "CONFLICT"] {
        assert!(help.contains(tag), "{tag} missing in\n{help}");
    }
    for outcome in control_plane::check::Outcome::ALL {
        assert!(help.lines().any(|l| l.trim_start().starts_with(outcome.tag())), "{} has no line in\n{help}", outcome.tag());
    }
    let o = run(&["check", "--manifests", repo().join("examples/world").to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    // A dry run: one OK line per document, in file order, with key and required parents.
    let out = String::from_utf8_lossy(&o.stdout);
    let oks: Vec<&str> = out.lines().filter(|l| l.starts_with("OK ")).collect();
    let projected = common::world_projected_count();
    assert_eq!(oks.len(), projected, "{out}");
    assert!(oks[0].starts_with("OK 01-zones.yaml#1 (line "), "{}", oks[0]);
    assert!(oks[1].starts_with("OK 01-zones.yaml#2 (line "), "{}", oks[1]);
    assert!(
        out.lines().any(|l| l.starts_with("OK 04-applications.yaml#1 (line ")
            && l.ends_with("Application poc--assist--copilot/copilot-agent: key poc/assist--copilot/copilot-agent, needs Team poc/assist--copilot, Zone poc/aws-eu1")),
        "{out}"
    );
    assert!(out.contains(&format!("{projected} would be projected, 0 skipped (0 failed)")), "{out}");
    let o = run(&["check", "--manifests", repo().join("tests/fixtures/samples").to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("FAIL Group/organization-config-samples__organization_v1_group.yaml#1"), "{out}");
    assert!(out.contains("metadata.namespace"), "{out}");
    let o = run(&["check", "--manifests", "/nonexistent"], &[]);
    assert_eq!(o.status.code(), Some(1));
    // A file of many foreign documents and a broken one past those listed: counted in the
    // summary, and the broken one fails the run.
    let dir = tempfile::tempdir().unwrap();
    let kept = control_plane::source::manifests::KEPT_PER_FILE;
    std::fs::write(dir.path().join("many.yaml"), format!("{}---\nkind: [\n", "a: b\n---\n".repeat(kept + 1))).unwrap();
    let o = run(&["check", "--manifests", dir.path().to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().filter(|l| l.starts_with("IGNORED ")).count(), kept, "{out}");
    assert!(
        out.ends_with(&format!(
            "1 skipped (1 failed), {} ignored (0 skipped and 1 ignored not listed: at most {kept} of each are listed per file)\n",
            kept + 1
        )),
        "{}",
        out.lines().last().unwrap_or("")
    );
}

#[test]
fn schema_print_succeeds() {
    assert_eq!(run(&["schema", "print"], &[]).status.code(), Some(0));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A minimal HTTP GET (no client dependency needed): returns the status code.
fn http_status(addr: &str, path: &str) -> Option<u16> {
    http(addr, "GET", path, "").map(|(status, _)| status)
}

/// A minimal HTTP/1.1 request with an optional extra header line: `(status, whole response)`.
fn http(addr: &str, method: &str, path: &str, header: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let body = if method == "POST" { r#"{"query":"{ zones { name } }"}"# } else { "" };
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{header}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    Some((buf.split_whitespace().nth(1)?.parse().ok()?, buf))
}

#[cfg(unix)]
/// Starts `serve` with `args` on a free port (JSON logs) and waits until it logs that it is
/// ready.
fn serve_until_ready(args: &[&str], data: &Path) -> (std::process::Child, String, ServerLog) {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_control-plane"))
        .args(["serve", "--manifests", repo().join("examples/world").to_str().unwrap()])
        .args(args)
        .args(["--data-dir", data.to_str().unwrap(), "--listen", &addr, "--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = ServerLog::follow(&mut child);
    log.wait_for(common::READY_LINE, Duration::from_secs(60));
    assert_eq!(http_status(&addr, "/readyz"), Some(200), "ready as logged");
    (child, addr, log)
}

/// Sends SIGTERM; returns the log after a clean exit.
#[cfg(unix)]
fn terminate(mut child: std::process::Child, log: ServerLog) -> String {
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let status = common::wait_exit(&mut child, Duration::from_secs(60));
    // The log is whole once the server closed its stderr.
    log.wait_for_end();
    assert_eq!(status.code(), Some(0), "{}", log.text());
    log.text()
}

/// jwt mode starts although its issuer is unreachable (keys are fetched in the background and
/// the failure logged), and then rejects every token it cannot verify.
#[cfg(unix)]
#[test]
fn jwt_mode_starts_without_reaching_the_issuer() {
    let tmp = tempfile::tempdir().unwrap();
    let issuer = format!("http://127.0.0.1:{}/realms/unreachable", free_port());
    let (child, addr, log) = serve_until_ready(&["--trusted-issuer", &issuer], &tmp.path().join("d"));
    let (_, ready) = http(&addr, "GET", "/readyz", "").unwrap();
    assert!(ready.contains(r#""notes":[]"#), "no mock-mode note in jwt mode: {ready}");
    let mock = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJjbGllbnRJZCI6InBheW1lbnRzLS1jaGVja291dC0tY29uc29sZSIsInNjb3BlIjoidGFyZGlzOnRlYW06cmVhZCIsImVudiI6InBvYyJ9.mock";
    let (status, resp) = http(&addr, "POST", "/graphql/query", &format!("Authorization: Bearer {mock}\r\n")).unwrap();
    assert_eq!(status, 401, "{resp}");
    assert!(resp.contains("invalid token"), "{resp}");
    assert_eq!(http(&addr, "POST", "/graphql/query", "").unwrap().0, 401);
    let log = terminate(child, log);
    assert!(log.contains("JWT verification enabled"), "{log}");
    assert!(log.contains("cannot fetch the issuer's token signing keys") && log.contains("unreachable"), "the outage is logged: {log}");
    assert!(!log.contains("MOCK MODE"), "{log}");
}

#[cfg(unix)]
#[test]
fn serve_becomes_ready_and_stops_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let (child, addr, log) = serve_until_ready(&["--auth", "mock"], &tmp.path().join("d"));
    assert_eq!(http_status(&addr, "/healthz"), Some(200));
    assert_eq!(http_status(&addr, "/metrics"), Some(200));
    let (_, ready) = http(&addr, "GET", "/readyz", "").unwrap();
    assert!(ready.contains("authentication is in mock mode"), "mock mode is noted in /readyz: {ready}");
    let log = terminate(child, log);
    assert!(log.contains("MOCK MODE") && log.contains("\"level\":\"WARN\""), "mock mode is announced loudly (JSON logs): {log}");
    assert!(log.contains("stopped"), "{log}");
}

/// SIGTERM while the server starts (here as it announces mock mode, before the store is opened)
/// is taken once the start ends: a graceful stop, not the signal's default action (a warm start
/// answered `/readyz` before its handler was installed).
#[cfg(unix)]
#[test]
fn sigterm_during_the_start_stops_the_server_gracefully() {
    let tmp = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_control-plane"))
        .args(["serve", "--manifests", repo().join("examples/world").to_str().unwrap(), "--auth", "mock"])
        .args(["--data-dir", tmp.path().join("d").to_str().unwrap(), "--listen", &addr, "--log-format", "json"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = ServerLog::follow(&mut child);
    log.wait_for("MOCK MODE", Duration::from_secs(60));
    let log = terminate(child, log);
    assert!(log.contains("shutting down") && log.contains("stopped"), "{log}");
}

/// An environment value that is not UTF-8 is refused naming its variable (exit 1, as any invalid
/// value), never taken as unset: a manifests directory must not silently become the kube source.
#[test]
fn a_setting_that_is_not_utf8_is_refused_naming_its_variable() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    for (var, value) in [("CP_SOURCE_SERVE_WHILE_CATCHING_UP", &b"\xff\xfe"[..]), ("CP_GRAPHQL_MAX_PAGE_SIZE", &b"1\xff"[..])] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_control-plane"));
        cmd.args(["serve", "--auth", "mock", "--manifests"]).arg(repo().join("examples/world")).arg("--data-dir").arg(&data);
        cmd.env(var, std::ffi::OsStr::from_bytes(value));
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{var}: {}", stderr(&o));
        assert!(stderr(&o).contains(var), "{var}: {}", stderr(&o));
    }
}
