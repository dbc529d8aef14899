//! Configuration layering and validation.

use super::*;
use std::collections::HashMap;

/// Loads with the given flags, environment and optional file text.
fn check(args: &ServeArgs, env: &[(&str, &str)], file: Option<&str>) -> Result<Config, ConfigError> {
    let env: HashMap<String, String> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let lookup = move |k: &str| env.get(k).cloned();
    load(args, &lookup, file.map(|t| (Path::new("cp.yaml"), t)))
}

/// `serve`'s arguments parsed from `flags`, as the command line gives them.
fn serve(flags: &[&str]) -> ServeArgs {
    use clap::Parser;
    let argv = ["control-plane", "serve"].into_iter().chain(flags.iter().copied());
    match crate::cli::Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{flags:?}: {e}")).command {
        crate::cli::Command::Serve(args) => args,
        other => panic!("expected serve, got {other:?}"),
    }
}

fn mock() -> ServeArgs {
    serve(&["--auth", "mock"])
}

#[test]
fn defaults() {
    let c = check(&mock(), &[], None).unwrap();
    let mut expected = Config::default();
    expected.security.mode = AuthMode::Mock;
    assert_eq!(c, expected);
    assert_eq!(c.server.address, "0.0.0.0:8080");
    assert_eq!(c.storage.data_dir, PathBuf::from("./data"));
    assert_eq!(c.source, SourceConfig::Kube(KubeSourceConfig::default()));
    assert_eq!(c.security.scope_prefix, "tardis");
    assert_eq!(c.graphql.limits.max_page_size, 1000);
    assert!(c.graphql.playground_enabled);
    assert_eq!(c.projector.dependency_delay, Duration::from_secs(2));
    assert_eq!(c.projector.dependency_delay_jitter, Duration::from_secs(3));
    assert_eq!(c.projector.skip_requeue, Duration::from_secs(300));
    assert_eq!(c.projector.periodic_resync, Duration::ZERO);
    assert_eq!(c.features, Features::default());
    assert_eq!(c.storage.cache_size, 64 << 20, "64 MiB (storage::DEFAULT_CACHE_SIZE)");
    assert!(c.storage.prebuild_orders);
}

#[test]
fn prebuilding_orders_is_a_boolean_that_can_be_turned_off() {
    let c = check(&mock(), &[], Some("storage:\n  prebuildOrders: false\n")).unwrap();
    assert!(!c.storage.prebuild_orders);
    let c = check(&mock(), &[("CP_STORAGE_PREBUILD_ORDERS", "true")], Some("storage:\n  prebuildOrders: false\n")).unwrap();
    assert!(c.storage.prebuild_orders, "env beats file");
    let err = check(&mock(), &[("CP_STORAGE_PREBUILD_ORDERS", "sometimes")], None).unwrap_err().to_string();
    assert!(err.contains("CP_STORAGE_PREBUILD_ORDERS"), "{err}");
}

#[test]
fn the_store_cache_size_is_bytes_of_at_least_one_mebibyte() {
    let c = check(&mock(), &[("CP_STORAGE_CACHE_SIZE", "67108864")], Some("storage:\n  cacheSize: 268435456\n")).unwrap();
    assert_eq!(c.storage.cache_size, 64 << 20, "env beats file");
    let c = check(&mock(), &[], Some("storage:\n  cacheSize: 268435456\n")).unwrap();
    assert_eq!(c.storage.cache_size, 256 << 20);
    let err = check(&mock(), &[("CP_STORAGE_CACHE_SIZE", "1000")], None).unwrap_err().to_string();
    assert!(err.contains("CP_STORAGE_CACHE_SIZE") && err.contains("at least 1048576"), "{err}");
    assert!(check(&mock(), &[("CP_STORAGE_CACHE_SIZE", "64MiB")], None).is_err());
}

#[test]
fn precedence_flags_over_env_over_file_over_defaults() {
    let file = "server:\n  address: 127.0.0.1:1000\nstorage:\n  dataDir: /file\ngraphql:\n  maxPageSize: 10\n  playgroundEnabled: false\nsecurity:\n  scopePrefix: file\n";
    let env = [("CP_SERVER_ADDRESS", "127.0.0.1:2000"), ("CP_STORAGE_DATA_DIR", "/env"), ("CP_GRAPHQL_MAX_PAGE_SIZE", "20")];
    let args = serve(&["--auth", "mock", "--listen", "127.0.0.1:3000"]);

    let c = check(&args, &env, Some(file)).unwrap();
    assert_eq!(c.server.address, "127.0.0.1:3000", "flag wins");
    assert_eq!(c.storage.data_dir, PathBuf::from("/env"), "env beats file");
    assert_eq!(c.graphql.limits.max_page_size, 20, "env beats file");
    assert!(!c.graphql.playground_enabled, "file beats default");
    assert_eq!(c.security.scope_prefix, "file", "file beats default");

    let c = check(&mock(), &[], Some(file)).unwrap();
    assert_eq!(c.server.address, "127.0.0.1:1000");
}

#[test]
fn dotted_keys_and_lists_in_the_file() {
    let file = "security.mode: jwt\nsecurity:\n  trustedIssuers:\n  - https://iam.example.com/auth/realms/a\n  - https://iam.example.com/auth/realms/b\n";
    let c = check(&ServeArgs::default(), &[], Some(file)).unwrap();
    assert_eq!(c.security.mode, AuthMode::Jwt);
    assert_eq!(c.security.trusted_issuers.len(), 2);
}

#[test]
fn trusted_issuers_from_env_are_comma_separated_and_flags_replace_them() {
    let env = [("CP_SECURITY_TRUSTED_ISSUERS", "https://a.example.com, https://b.example.com,")];
    let c = check(&ServeArgs::default(), &env, None).unwrap();
    assert_eq!(c.security.trusted_issuers, vec!["https://a.example.com", "https://b.example.com"]);
    let args = serve(&["--trusted-issuer", "https://c.example.com"]);
    let c = check(&args, &env, None).unwrap();
    assert_eq!(c.security.trusted_issuers, vec!["https://c.example.com"]);
}

#[test]
fn jwt_without_issuer_refuses() {
    assert_eq!(check(&ServeArgs::default(), &[], None), Err(ConfigError::NoTrustedIssuer));
    let msg = ConfigError::NoTrustedIssuer.to_string();
    assert!(msg.contains("--auth mock") && msg.contains("trustedIssuers"), "{msg}");
}

#[test]
fn source_selection() {
    let args = serve(&["--auth", "mock", "--manifests", "w"]);
    assert_eq!(check(&args, &[], None).unwrap().source, SourceConfig::Manifests("w".into()));
    let env = [("CP_SOURCE_MANIFESTS", "/m")];
    assert_eq!(check(&mock(), &env, None).unwrap().source, SourceConfig::Manifests("/m".into()));
    let kube = serve(&["--auth", "mock", "--source", "kube"]);
    assert_eq!(check(&kube, &env, None).unwrap().source, SourceConfig::Kube(KubeSourceConfig::default()));
    let manifests = serve(&["--auth", "mock", "--source", "manifests"]);
    assert!(check(&manifests, &[], None).unwrap_err().to_string().contains("source.manifests"));
}

#[test]
fn kube_url_selects_the_api_server() {
    let url = |c: Config| match c.source {
        SourceConfig::Kube(k) => k.url,
        other => panic!("expected the kube source, got {other:?}"),
    };
    assert_eq!(url(check(&mock(), &[], None).unwrap()), None, "default: kubeconfig, else in cluster");
    let env = [("CP_SOURCE_KUBE_URL", "http://127.0.0.1:8001/")];
    assert_eq!(url(check(&mock(), &env, None).unwrap()).as_deref(), Some("http://127.0.0.1:8001"));
    let args = serve(&["--auth", "mock", "--kube-url", "https://api.example.com:6443"]);
    assert_eq!(url(check(&args, &env, None).unwrap()).as_deref(), Some("https://api.example.com:6443"), "flag beats env");
    let file = "source:\n  kubeUrl: http://localhost:8001\n";
    assert_eq!(url(check(&mock(), &[], Some(file)).unwrap()).as_deref(), Some("http://localhost:8001"));
    let err = check(&mock(), &[("CP_SOURCE_KUBE_URL", "localhost:8001")], None).unwrap_err().to_string();
    assert!(err.contains("source.kubeUrl") && err.contains("CP_SOURCE_KUBE_URL"), "{err}");
}

#[test]
fn invalid_values_name_the_key_and_origin() {
    /// (environment, file, flags, key named in the error, origin named in the error)
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>, ServeArgs, &'a str, &'a str);
    let cases: &[Case<'_>] = &[
        (&[("CP_GRAPHQL_MAX_PAGE_SIZE", "abc")], None, mock(), "graphql.maxPageSize", "CP_GRAPHQL_MAX_PAGE_SIZE"),
        (&[("CP_GRAPHQL_MAX_PAGE_SIZE", "0")], None, mock(), "graphql.maxPageSize", "CP_GRAPHQL_MAX_PAGE_SIZE"),
        (&[], Some("graphql:\n  maxPageSize: -3\n"), mock(), "graphql.maxPageSize", "config file cp.yaml"),
        (&[("CP_GRAPHQL_PLAYGROUND_ENABLED", "maybe")], None, mock(), "graphql.playgroundEnabled", "CP_GRAPHQL_PLAYGROUND_ENABLED"),
        (&[("CP_SERVER_ADDRESS", "localhost")], None, mock(), "server.address", "CP_SERVER_ADDRESS"),
        (&[], None, serve(&["--auth", "mock", "--listen", "host:99999"]), "server.address", "--listen"),
        (&[("CP_SERVER_HEADER_TIMEOUT", "0s")], None, mock(), "server.headerTimeout", "CP_SERVER_HEADER_TIMEOUT"),
        (&[("CP_SERVER_HEADER_TIMEOUT", "6m")], None, mock(), "server.headerTimeout", "CP_SERVER_HEADER_TIMEOUT"),
        (&[("CP_SERVER_BODY_TIMEOUT", "2h")], None, mock(), "server.bodyTimeout", "CP_SERVER_BODY_TIMEOUT"),
        (&[], Some("server:\n  idleTimeout: 500ms\n"), mock(), "server.idleTimeout", "config file cp.yaml"),
        (&[("CP_SERVER_MAX_CONNECTIONS", "15")], None, mock(), "server.maxConnections", "CP_SERVER_MAX_CONNECTIONS"),
        (
            &[],
            None,
            serve(&["--auth", "mock", "--server-max-connections", "99999999999999999999999"]),
            "server.maxConnections",
            "--server-max-connections",
        ),
        (&[], None, serve(&["--auth", "basic"]), "security.mode", "--auth"),
        (&[("CP_SECURITY_TRUSTED_ISSUERS", "not-a-url")], None, mock(), "security.trustedIssuers", "CP_SECURITY_TRUSTED_ISSUERS"),
        (&[("CP_SECURITY_SCOPE_PREFIX", "a:b")], None, mock(), "security.scopePrefix", "CP_SECURITY_SCOPE_PREFIX"),
        (&[("CP_SECRET_MANAGER_URL", "ftp://x")], None, mock(), "secretManager.url", "CP_SECRET_MANAGER_URL"),
        (&[("CP_SECRET_MANAGER_URL", "https://[::1")], None, mock(), "secretManager.url", "CP_SECRET_MANAGER_URL"),
        (&[("CP_SECRET_MANAGER_URL", "https://127.0.0.1:99999/api")], None, mock(), "secretManager.url", "CP_SECRET_MANAGER_URL"),
        (&[("CP_SECRET_MANAGER_URL", "https://127.0.0.1:0/api")], None, mock(), "secretManager.url", "CP_SECRET_MANAGER_URL"),
        (&[("CP_SECRET_MANAGER_URL", "https://user:pw@secrets.example/api")], None, mock(), "secretManager.url", "CP_SECRET_MANAGER_URL"),
        (&[("CP_SECRET_MANAGER_CACHE_TTL", "11m")], None, mock(), "secretManager.cacheTtl", "CP_SECRET_MANAGER_CACHE_TTL"),
        (&[("CP_SECRET_MANAGER_TIMEOUT", "0s")], None, mock(), "secretManager.timeout", "CP_SECRET_MANAGER_TIMEOUT"),
        (&[("CP_SUBSCRIPTIONS_CHANGE_LOG_SIZE", "0")], None, mock(), "subscriptions.changeLogSize", "CP_SUBSCRIPTIONS_CHANGE_LOG_SIZE"),
        (&[], Some("subscriptions:\n  changeLogSize: 99999999999\n"), mock(), "subscriptions.changeLogSize", "config file cp.yaml"),
        (
            &[("CP_SUBSCRIPTIONS_CHANGE_LOG_RETENTION", "25h")],
            None,
            mock(),
            "subscriptions.changeLogRetention",
            "CP_SUBSCRIPTIONS_CHANGE_LOG_RETENTION",
        ),
        (&[("CP_SUBSCRIPTIONS_MAX_CONNECTIONS", "0")], None, mock(), "subscriptions.maxConnections", "CP_SUBSCRIPTIONS_MAX_CONNECTIONS"),
        (
            &[("CP_SUBSCRIPTIONS_MAX_CONNECTIONS_PER_CLIENT", "-1")],
            None,
            mock(),
            "subscriptions.maxConnectionsPerClient",
            "CP_SUBSCRIPTIONS_MAX_CONNECTIONS_PER_CLIENT",
        ),
        (
            &[("CP_SUBSCRIPTIONS_MAX_PER_CONNECTION", "10001")],
            None,
            mock(),
            "subscriptions.maxPerConnection",
            "CP_SUBSCRIPTIONS_MAX_PER_CONNECTION",
        ),
        (&[("CP_SUBSCRIPTIONS_MAX_TOTAL", "x")], None, mock(), "subscriptions.maxTotal", "CP_SUBSCRIPTIONS_MAX_TOTAL"),
        (&[("CP_SUBSCRIPTIONS_IDLE_TIMEOUT", "0s")], None, mock(), "subscriptions.idleTimeout", "CP_SUBSCRIPTIONS_IDLE_TIMEOUT"),
        (&[("CP_SUBSCRIPTIONS_MAX_LIFETIME", "8760h")], None, mock(), "subscriptions.maxLifetime", "CP_SUBSCRIPTIONS_MAX_LIFETIME"),
        (&[("CP_SUBSCRIPTIONS_SEND_TIMEOUT", "1ms")], None, mock(), "subscriptions.sendTimeout", "CP_SUBSCRIPTIONS_SEND_TIMEOUT"),
        (
            &[("CP_FILE_MANAGER_BASE_URL", "file-manager.controlplane-system.svc")],
            None,
            mock(),
            "fileManager.baseUrl",
            "CP_FILE_MANAGER_BASE_URL",
        ),
        (&[], Some("fileManager:\n  baseUrl: https://files.example/?next=x\n"), mock(), "fileManager.baseUrl", "config file cp.yaml"),
        (
            &[],
            None,
            serve(&["--auth", "mock", "--file-manager-base-url", &format!("https://{}", "a".repeat(3000))]),
            "fileManager.baseUrl",
            "--file-manager-base-url",
        ),
        (&[("DEPENDENCY_DELAY", "2")], None, mock(), "DEPENDENCY_DELAY", "DEPENDENCY_DELAY"),
        (&[("SKIP_REQUEUE", "-1s")], None, mock(), "SKIP_REQUEUE", "SKIP_REQUEUE"),
        (&[("FEATURE_PUBSUB_ENABLED", "yes please")], None, mock(), "FEATURE_PUBSUB_ENABLED", "FEATURE_PUBSUB_ENABLED"),
        (&[], None, serve(&["--auth", "mock", "--now", "yesterday"]), "now", "--now"),
    ];
    for (env, file, args, key, origin) in cases {
        let err = check(args, env, *file).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(&err, ConfigError::Invalid { key: k, .. } if k == key), "{key}: {msg}");
        assert!(msg.contains(&format!("`{key}`")) && msg.contains(origin), "{msg}");
    }
}

#[test]
fn unknown_file_keys_and_bad_files_are_errors() {
    let err = check(&mock(), &[], Some("server:\n  adress: x\n")).unwrap_err();
    assert!(matches!(&err, ConfigError::UnknownKey { key, .. } if key == "server.adress"), "{err}");
    // Environment-only settings are not file keys.
    let err = check(&mock(), &[], Some("DEPENDENCY_DELAY: 1s\n")).unwrap_err();
    assert!(matches!(err, ConfigError::UnknownKey { .. }));
    assert!(matches!(check(&mock(), &[], Some("- a\n- b\n")).unwrap_err(), ConfigError::File { .. }));
    assert!(matches!(check(&mock(), &[], Some("a: [\n")).unwrap_err(), ConfigError::File { .. }));
    assert!(check(&mock(), &[], Some("# only a comment\n")).is_ok());
}

#[test]
fn projector_settings_and_features_from_env() {
    let env = [
        ("DEPENDENCY_DELAY", "10ms"),
        ("DEPENDENCY_DELAY_JITTER", "0s"),
        ("PERIODIC_RESYNC", "1h"),
        ("FEATURE_PUBSUB_ENABLED", "false"),
        ("FEATURE_AI_GATEWAY_ENABLED", "0"),
    ];
    let c = check(&mock(), &env, None).unwrap();
    assert_eq!(c.projector.dependency_delay, Duration::from_millis(10));
    assert_eq!(c.projector.dependency_delay_jitter, Duration::ZERO);
    assert_eq!(c.projector.periodic_resync, Duration::from_secs(3600));
    assert_eq!(c.features, Features { pubsub: false, permission: true, ai_gateway: false, file_manager: true });
}

#[test]
fn now_is_pinned() {
    let args = serve(&["--auth", "mock", "--now", "2026-09-01T00:00:00Z"]);
    let c = check(&args, &[], None).unwrap();
    assert_eq!(c.clock().now(), Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap());
}

#[test]
fn log_format_flag_then_env() {
    let env = |k: &str| (k == "CP_LOG_FORMAT").then(|| "json".to_string());
    assert_eq!(log_format(None, &env), Ok(LogFormat::Json));
    assert_eq!(log_format(Some("text"), &env), Ok(LogFormat::Text));
    assert!(log_format(Some("xml"), &env).is_err());
}

#[test]
fn token_leeway_is_a_small_duration() {
    assert_eq!(check(&mock(), &[], None).unwrap().security.leeway, Duration::from_secs(30));
    let c = check(&mock(), &[("CP_SECURITY_LEEWAY", "5s")], Some("security:\n  leeway: 1m\n")).unwrap();
    assert_eq!(c.security.leeway, Duration::from_secs(5), "env beats file");
    assert_eq!(check(&mock(), &[], Some("security:\n  leeway: 0s\n")).unwrap().security.leeway, Duration::ZERO);
    for bad in ["1h", "soon", "-1s"] {
        match check(&mock(), &[("CP_SECURITY_LEEWAY", bad)], None) {
            Err(ConfigError::Invalid { key: "security.leeway", .. }) => {}
            other => panic!("{bad}: {other:?}"),
        }
    }
}

#[test]
fn query_limits_are_bounded_settings() {
    let c = check(
        &mock(),
        &[
            ("CP_GRAPHQL_MAX_NODES", "10"),
            ("CP_GRAPHQL_MAX_DEPTH", "30"),
            ("CP_GRAPHQL_WORKERS", "3"),
            ("CP_SOURCE_MAX_DOCUMENT_BYTES", "1024"),
            ("CP_SOURCE_MAX_FILE_BYTES", "1048576"),
        ],
        Some("graphql:\n  maxInputDepth: 4\n  maxFilterDepth: 1\n  maxSearchLength: 64\n  maxSearchTerms: 2\n  maxFilterBytes: 99\n  maxResponseBytes: 2048\n  queueLength: 5\n"),
    )
    .unwrap();
    let g = &c.graphql;
    assert_eq!((g.limits.max_nodes, g.limits.max_depth, g.workers, c.max_document_bytes), (10, 30, 3, 1024));
    assert_eq!(c.max_file_bytes, 1 << 20);
    assert_eq!(
        (g.limits.max_input_depth, g.limits.max_filter_depth, g.limits.max_search_length, g.limits.max_search_terms, g.queue_length),
        (4, 1, 64, 2, 5)
    );
    assert_eq!((g.limits.max_filter_bytes, g.limits.max_response_bytes), (99, 2048));
    for (var, value, complaint) in [
        ("CP_GRAPHQL_MAX_DEPTH", "31", "from 1 to 30"),
        ("CP_GRAPHQL_MAX_DEPTH", "0", "from 1 to 30"),
        ("CP_GRAPHQL_MAX_NODES", "0", "at least 1"),
        ("CP_GRAPHQL_MAX_INPUT_DEPTH", "x", "at least 1"),
        ("CP_GRAPHQL_MAX_FILTER_DEPTH", "0", "at least 1"),
        ("CP_GRAPHQL_MAX_SEARCH_LENGTH", "-1", "at least 1"),
        ("CP_GRAPHQL_MAX_SEARCH_TERMS", "0", "at least 1"),
        ("CP_GRAPHQL_MAX_DEFINITIONS", "0", "at least 1"),
        ("CP_GRAPHQL_MAX_VARIABLE_USES", "0", "at least 1"),
        ("CP_GRAPHQL_MAX_NAME_BYTES", "-5", "at least 1"),
        ("CP_GRAPHQL_MAX_DEFINITIONS", "99999999999999999999999", "at least 1"),
        ("CP_GRAPHQL_MAX_FILTER_BYTES", "0", "at least 1"),
        ("CP_GRAPHQL_MAX_RESPONSE_BYTES", "1023", "at least 1024"),
        ("CP_GRAPHQL_MAX_IN_FLIGHT_BYTES", "1048575", "at least 1048576"),
        ("CP_GRAPHQL_MAX_IN_FLIGHT_BYTES", "-1", "at least 1048576"),
        ("CP_GRAPHQL_QUEUE_LENGTH", "0", "at least 1"),
        ("CP_GRAPHQL_WORKERS", "-1", "from 0 to 256"),
        ("CP_GRAPHQL_WORKERS", "1000000", "from 0 to 256"),
        ("CP_GRAPHQL_WORKERS", "99999999999999999999", "from 0 to 256"),
        ("CP_SOURCE_MAX_DOCUMENT_BYTES", "1023", "from 1024 to 33554432"),
        ("CP_SOURCE_MAX_DOCUMENT_BYTES", "33554433", "from 1024 to 33554432"),
        ("CP_SOURCE_MAX_DOCUMENT_BYTES", "99999999999999999999", "from 1024 to 33554432"),
        ("CP_SOURCE_MAX_FILE_BYTES", "1048575", "at least 1048576"),
        ("CP_SOURCE_MAX_FILE_BYTES", "99999999999999999999", "at least 1048576"),
        ("CP_MUTATIONS_ENABLED", "yes please", "true"),
        ("CP_MUTATIONS_PROJECTION_TIMEOUT", "61s", "0s to 1m"),
        ("CP_ROVER_SERVER_TIMEOUT", "0s", "1ms to 1m"),
        ("CP_ROVER_SERVER_BASE_URL", "ftp://rover.example", "http"),
    ] {
        let err = check(&mock(), &[(var, value)], None).unwrap_err().to_string();
        assert!(err.contains(var) && err.contains(complaint), "{var}={value}: {err}");
    }
}

/// The configuration's defaults are the query layer's defaults (one set of numbers, checked).
#[test]
fn the_default_limits_are_the_query_layers() {
    let from_config = crate::http::graphql::query_config(&Config::default());
    assert_eq!(from_config.limits, query::QueryConfig::default().limits);
    assert_eq!(Config::default().graphql.limits, query::limits::Limits::default());
    assert_eq!(Config::default().max_document_bytes, crate::projector::handlers::Handlers::new(&Features::default()).max_document_bytes());
}

/// A value of `s` other than its default, valid on its own.
fn sample(s: &Setting) -> String {
    let special = match s.key {
        "server.address" => Some("127.0.0.1:9"),
        "storage.dataDir" => Some("/tmp/cp-sample-data"),
        "source.manifests" => Some("/tmp/cp-sample-manifests"),
        "source.kubeUrl" => Some("https://k8s.example:6443"),
        "security.mode" => Some("mock"),
        "security.trustedIssuers" => Some("https://issuer.example/realms/x"),
        "security.scopePrefix" => Some("tenant"),
        "security.audience" => Some("console"),
        "secretManager.url" => Some("https://secrets.example"),
        "secretManager.tokenFile" => Some("/tmp/cp-sample-token"),
        "secretManager.caFile" => Some("/tmp/cp-sample-ca.pem"),
        "fileManager.baseUrl" => Some("https://files.example"),
        "roverServer.baseUrl" => Some("https://rover.example"),
        "roverServer.tokenFile" => Some("/tmp/cp-sample-rover-token"),
        "roverServer.caFile" => Some("/tmp/cp-sample-rover-ca.pem"),
        "server.maxConnections" => Some("100"),
        _ => None,
    };
    if let Some(v) = special {
        return v.to_string();
    }
    match s.default {
        "true" => "false".into(),
        "false" => "true".into(),
        d if d.parse::<u64>().is_ok() => (d.parse::<u64>().unwrap() + 1).to_string(),
        d if d.ends_with('s') || d.ends_with('m') => if d == "7s" { "8s" } else { "7s" }.into(),
        d if d.ends_with('h') => if d == "2h" { "3h" } else { "2h" }.into(),
        d => panic!("add a sample value for setting {} (default {d:?}) to this test", s.key),
    }
}

/// The config file text setting `key` (dotted) to `value`.
fn file_with(key: &str, value: &str, list: bool) -> String {
    let (section, name) = key.split_once('.').expect("file keys are `section.name`");
    let value = if list { format!("[{value}]") } else { value.to_string() };
    format!("{section}:\n  {name}: {value}\n")
}

/// Every setting, given through each way it can be given (flag, environment, file), reaches the
/// configuration: each changes it from the defaults, and all ways give the same configuration
/// (a flag declared but not applied, or a setting `load` never reads, fails here).
#[test]
fn every_setting_is_applied_from_its_flag_its_environment_variable_and_the_file() {
    let mut unapplied = Vec::new();
    for s in SETTINGS {
        // A valid configuration to start from: mock mode, or jwt with an issuer when the mode is
        // what is set.
        let base: Vec<(&str, &str)> = match s.key {
            "security.mode" => vec![("CP_SECURITY_TRUSTED_ISSUERS", "https://base.example")],
            _ => vec![("CP_SECURITY_MODE", "mock")],
        };
        let default = check(&ServeArgs::default(), &base, None).unwrap();
        let value = sample(s);
        let list = s.list;
        let mut ways: Vec<(&str, Config)> = Vec::new();
        fn with<'a>(base: &[(&'a str, &'a str)], extra: Option<(&'a str, &'a str)>) -> Vec<(&'a str, &'a str)> {
            base.iter().copied().chain(extra).collect()
        }
        let env = check(&ServeArgs::default(), &with(&base, Some((s.env, value.as_str()))), None)
            .unwrap_or_else(|e| panic!("{} from {}={value}: {e}", s.key, s.env));
        ways.push(("environment", env));
        if s.in_file {
            let text = file_with(s.key, &value, list);
            let file = check(&ServeArgs::default(), &with(&base, None), Some(&text))
                .unwrap_or_else(|e| panic!("{} from the file {text:?}: {e}", s.key));
            ways.push(("file", file));
        }
        match (s.in_file, s.flag()) {
            (true, Some(flag)) => {
                let args = serve(&[flag.as_str(), value.as_str()]);
                ways.push(("flag", check(&args, &with(&base, None), None).unwrap_or_else(|e| panic!("{} from {flag}: {e}", s.key))));
            }
            (false, None) => {}
            (in_file, flag) => panic!("{}: a setting of the file has a flag, an environment-only one none ({in_file}, {flag:?})", s.key),
        }
        for (way, config) in &ways {
            if *config == default {
                unapplied.push(format!("{} from its {way} ({value})", s.key));
            }
        }
        for (way, config) in &ways[1..] {
            assert_eq!(config, &ways[0].1, "{}: the {way} gives another configuration than the environment", s.key);
        }
    }
    assert!(unapplied.is_empty(), "settings that change nothing: {unapplied:?}");
}
