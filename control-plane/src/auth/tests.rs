//! Token parsing, mock-mode time checks, JWKS key selection and the `jwt` checks that need no
//! network (the end-to-end attack suite is `tests/auth_jwt.rs` at the workspace root).

use super::jwks::{parse_jwks, Jwks, JwksSettings, Lookup};
use super::*;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

fn key_file(name: &str) -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/keys").join(name)).unwrap()
}

fn rsa_jwk(kid: &str) -> Value {
    let key = EncodingKey::from_rsa_pem(&key_file("rsa-1.pem")).unwrap();
    let mut jwk = serde_json::to_value(Jwk::from_encoding_key(&key, Algorithm::RS256).unwrap()).unwrap();
    jwk["kid"] = json!(kid);
    jwk.as_object_mut().unwrap().remove("alg");
    jwk
}

fn ec_jwk(kid: &str) -> Value {
    let key = EncodingKey::from_ec_pem(&key_file("ec-p256.pem")).unwrap();
    let mut jwk = serde_json::to_value(Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap()).unwrap();
    jwk["kid"] = json!(kid);
    jwk
}

#[test]
fn bearer_header_values() {
    assert_eq!(bearer("Bearer abc"), Some("abc"));
    assert_eq!(bearer("bearer  abc "), Some("abc"));
    assert_eq!(bearer("BEARER abc"), Some("abc"));
    assert_eq!(bearer("Basic abc"), None);
    assert_eq!(bearer("Bearer "), None);
    assert_eq!(bearer("Bearer"), None);
}

#[test]
fn decodes_compact_jws_payloads_only() {
    let t = "eyJhbGciOiJub25lIn0.eyJlbnYiOiJwb2MifQ.sig";
    assert_eq!(decode_unverified(t), Some(json!({"env": "poc"})));
    assert_eq!(decode_unverified("a.b"), None);
    assert_eq!(decode_unverified("a.!!!.c"), None);
    assert_eq!(decode_unverified("a.b.c.d"), None);
    // A payload that is JSON but not an object.
    assert_eq!(decode_unverified("a.MQ.c"), None);
}

#[test]
fn mock_mode_honours_exp_and_nbf_with_leeway() {
    let enc = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let token = |claims: Value| format!("{}.{}.mock", enc(json!({"alg": "none"})), enc(claims));
    let now = 1_000_000;
    let leeway = Duration::from_secs(30);
    let ok = |claims: Value| mock_claims(&token(claims), leeway, now).is_some();
    assert!(ok(json!({})));
    assert!(ok(json!({"exp": now + 1, "nbf": now})));
    assert!(ok(json!({"exp": now - 30})), "expired within the leeway");
    assert!(!ok(json!({"exp": now - 31})));
    assert!(ok(json!({"nbf": now + 30})), "not yet valid within the leeway");
    assert!(!ok(json!({"nbf": now + 31})));
    assert!(!ok(json!({"exp": "soon"})), "exp that is not a number");
}

#[test]
fn jwks_keeps_asymmetric_signing_keys_only() {
    let mut rsa_oaep = rsa_jwk("enc-by-alg");
    rsa_oaep["alg"] = json!("RSA-OAEP");
    let mut rsa_enc = rsa_jwk("enc-by-use");
    rsa_enc["use"] = json!("enc");
    let mut rsa_ps = rsa_jwk("ps");
    rsa_ps["alg"] = json!("PS256");
    rsa_ps["use"] = json!("sig");
    let mut ec_claims_rsa = ec_jwk("ec-says-rs256");
    ec_claims_rsa["alg"] = json!("RS256");
    let doc = json!({"keys": [
        rsa_jwk("rsa"),
        ec_jwk("ec"),
        rsa_oaep,
        rsa_enc,
        rsa_ps,
        ec_claims_rsa,
        {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0", "alg": "HS256"},
        {"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"},
        {"kty": "EC", "kid": "p521", "crv": "P-521", "x": "AA", "y": "AA"},
        {"kty": "RSA", "kid": "broken"},
        "not an object",
    ]});
    let keys = parse_jwks(&doc).unwrap();
    let summary: Vec<(Option<&str>, &[Algorithm])> = keys.iter().map(|k| (k.kid.as_deref(), k.algorithms.as_slice())).collect();
    assert_eq!(
        summary,
        vec![
            (
                Some("rsa"),
                &[Algorithm::RS256, Algorithm::RS384, Algorithm::RS512, Algorithm::PS256, Algorithm::PS384, Algorithm::PS512][..]
            ),
            (Some("ec"), &[Algorithm::ES256][..]),
            (Some("ps"), &[Algorithm::PS256][..]),
        ]
    );
    assert!(parse_jwks(&json!({"no": "keys"})).is_err());
}

/// A `jwt` verifier for issuer `https://issuer.test/realms/a` whose JWKS URL cannot be reached
/// (port 9 on loopback: refused at once), with `keys` cached as if fetched.
fn verifier(keys: Value, audience: Option<&str>) -> (jwt::JwtVerifier, Arc<Jwks>, AuthMetrics) {
    let metrics = AuthMetrics::new(&Registry::new());
    let issuer = "https://issuer.test/realms/a".to_string();
    let settings = JwksSettings { timeout: Duration::from_millis(500), ..JwksSettings::default() };
    let jwks = Jwks::new(std::slice::from_ref(&issuer), settings, metrics.clone()).unwrap();
    jwks.seed(0, parse_jwks(&keys).unwrap(), "http://127.0.0.1:9/certs");
    let security = SecurityConfig {
        mode: AuthMode::Jwt,
        trusted_issuers: vec![issuer],
        scope_prefix: "tardis".into(),
        audience: audience.map(String::from),
        leeway: Duration::from_secs(5),
    };
    (jwt::JwtVerifier::new(&security, jwks.clone()), jwks, metrics)
}

fn claims(extra: Value) -> Value {
    let now = now_seconds();
    let mut c = json!({
        "iss": "https://issuer.test/realms/a", "exp": now + 300, "iat": now,
        "clientId": "eni--hyperion--console", "scope": "tardis:team:read", "env": "poc",
    });
    c.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    c
}

fn rs256(kid: &str, claims: &Value) -> String {
    let mut h = Header::new(Algorithm::RS256);
    h.kid = Some(kid.into());
    jsonwebtoken::encode(&h, claims, &EncodingKey::from_rsa_pem(&key_file("rsa-1.pem")).unwrap()).unwrap()
}

fn fetch_failures(metrics: &AuthMetrics) -> u64 {
    metrics.jwks_fetches.with_label_values(&["https://issuer.test/realms/a", "unknown_key", "failure"]).get()
}

#[tokio::test]
async fn jwt_checks_with_cached_keys() {
    let (v, _, metrics) = verifier(json!({"keys": [rsa_jwk("k1"), ec_jwk("e1")]}), None);
    let ok = v.verify(&rs256("k1", &claims(json!({})))).await.unwrap();
    assert_eq!(ok["clientId"], "eni--hyperion--console");

    let mut h = Header::new(Algorithm::ES256);
    h.kid = Some("e1".into());
    let es = jsonwebtoken::encode(&h, &claims(json!({})), &EncodingKey::from_ec_pem(&key_file("ec-p256.pem")).unwrap()).unwrap();
    assert!(v.verify(&es).await.is_ok());

    let now = now_seconds();
    for (what, token) in [
        ("expired beyond the leeway", rs256("k1", &claims(json!({"exp": now - 10})))),
        ("nbf beyond the leeway", rs256("k1", &claims(json!({"nbf": now + 60})))),
        (
            "no exp",
            rs256("k1", &{
                let mut c = claims(json!({}));
                c.as_object_mut().unwrap().remove("exp");
                c
            }),
        ),
        ("iss differs by a trailing slash", rs256("k1", &claims(json!({"iss": "https://issuer.test/realms/a/"})))),
        ("RS256 header on the EC key's kid", rs256("e1", &claims(json!({})))),
        ("garbage", "a.b.c".to_string()),
        ("two parts", "a.b".to_string()),
    ] {
        assert_eq!(v.verify(&token).await, Err(AuthError::Invalid), "{what}");
    }
    assert_eq!(v.verify(&rs256("k1", &claims(json!({"exp": now - 3})))).await.map(|_| ()), Ok(()), "expired within the leeway");
    assert_eq!(fetch_failures(&metrics), 0, "no check above needed the network");
}

#[tokio::test]
async fn alg_none_and_hmac_are_rejected_before_any_key_lookup() {
    let (v, _, metrics) = verifier(json!({"keys": [rsa_jwk("k1")]}), None);
    let enc = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let none = format!("{}.{}.", enc(json!({"alg": "none", "kid": "k1"})), enc(claims(json!({}))));
    assert_eq!(v.verify(&none).await, Err(AuthError::Invalid));
    let none = format!("{}.{}.x", enc(json!({"alg": "none", "kid": "k1"})), enc(claims(json!({}))));
    assert_eq!(v.verify(&none).await, Err(AuthError::Invalid));
    let mut h = Header::new(Algorithm::HS256);
    h.kid = Some("k1".into());
    let hs = jsonwebtoken::encode(&h, &claims(json!({})), &EncodingKey::from_secret(&key_file("rsa-1.pub.pem")).unwrap()).unwrap();
    assert_eq!(v.verify(&hs).await, Err(AuthError::Invalid));
    assert_eq!(fetch_failures(&metrics), 0);
}

#[tokio::test]
async fn audience_when_configured() {
    let (v, _, _) = verifier(json!({"keys": [rsa_jwk("k1")]}), Some("control-plane"));
    assert!(v.verify(&rs256("k1", &claims(json!({"aud": "control-plane"})))).await.is_ok());
    assert!(v.verify(&rs256("k1", &claims(json!({"aud": ["account", "control-plane"]})))).await.is_ok());
    assert_eq!(v.verify(&rs256("k1", &claims(json!({"aud": "account"})))).await, Err(AuthError::Invalid));
    assert_eq!(v.verify(&rs256("k1", &claims(json!({})))).await, Err(AuthError::Invalid), "aud required");
    let (v, _, _) = verifier(json!({"keys": [rsa_jwk("k1")]}), None);
    assert!(v.verify(&rs256("k1", &claims(json!({"aud": "anything"})))).await.is_ok(), "aud not checked without a setting");
}

#[tokio::test]
async fn unknown_kid_fetches_once_then_is_rate_limited() {
    let (v, jwks, metrics) = verifier(json!({"keys": [rsa_jwk("k1")]}), None);
    // The JWKS URL refuses connections: the one fetch fails, the key is unavailable (503).
    assert_eq!(v.verify(&rs256("k2", &claims(json!({})))).await, Err(AuthError::Unavailable));
    assert_eq!(fetch_failures(&metrics), 1);
    assert_eq!(v.verify(&rs256("k3", &claims(json!({})))).await, Err(AuthError::Unavailable));
    assert_eq!(fetch_failures(&metrics), 1, "rate-limited: no second fetch");
    // Cached keys keep working during the outage.
    assert!(v.verify(&rs256("k1", &claims(json!({})))).await.is_ok());
    assert!(matches!(jwks.lookup(0, Some("k1"), Algorithm::RS256).await, Lookup::Found(_)));
    assert!(matches!(jwks.lookup(0, Some("k1"), Algorithm::ES256).await, Lookup::Unknown), "known kid, wrong algorithm");
    assert_eq!(metrics.jwks_up.with_label_values(&["https://issuer.test/realms/a"]).get(), 0);
}

#[tokio::test]
async fn authenticator_maps_claims_to_viewers_or_forbidden() {
    let auth = Authenticator::new(
        &SecurityConfig {
            mode: AuthMode::Mock,
            trusted_issuers: vec![],
            scope_prefix: "tardis".into(),
            audience: None,
            leeway: Duration::from_secs(30),
        },
        &Registry::new(),
    )
    .unwrap();
    assert_eq!(auth.mode(), AuthMode::Mock);
    let enc = |v: Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let token = |c: Value| format!("Bearer {}.{}.mock", enc(json!({"alg": "none"})), enc(c));
    let v = auth.authenticate(Some(&token(json!({"clientId": "a--b--c", "scope": "tardis:team:read", "env": "poc"})))).await.unwrap();
    assert_eq!(v.teams, vec!["a--b"]);
    assert_eq!(auth.authenticate(None).await, Err(AuthError::Missing));
    assert_eq!(auth.authenticate(Some("Bearer x")).await, Err(AuthError::Invalid));
    assert_eq!(
        auth.authenticate(Some(&token(json!({"clientId": "a--b--c", "scope": "tardis:team:read"})))).await,
        Err(AuthError::Forbidden(ClaimsError::Missing("env")))
    );
    assert_eq!(auth.authenticate(Some(&format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1)))).await, Err(AuthError::Invalid));
}

#[test]
fn jwt_mode_needs_a_trusted_issuer() {
    let security = SecurityConfig {
        mode: AuthMode::Jwt,
        trusted_issuers: vec![],
        scope_prefix: "tardis".into(),
        audience: None,
        leeway: Duration::from_secs(30),
    };
    assert!(matches!(Authenticator::new(&security, &Registry::new()), Err(SetupError::Config(ConfigError::NoTrustedIssuer))));
    assert!(check_jwt_support().is_ok(), "the aws_lc_rs backend is compiled in");
}
