//! Authentication in `jwt` mode, end to end: a discovery + JWKS server on 127.0.0.1
//! (`support::jwt::Issuer`), real RS256/PS256/ES256 tokens, the server on the bundled world.
//!
//! Every attack is its own test and must get HTTP 401 with the one body that says nothing but
//! "invalid token" (or 403 naming the claim when a *verified* token's claims make no viewer).

mod support;

use serde_json::{json, Value};
use support::jwt::{self, jwt_server, Issuer, Key, Publish};
use support::{facts, names, Server};

const Q: &str = "{ applications { totalCount edges { node { name } } } }";
const TEAM: &str = "payments--checkout--console";
const READ: &str = "tardis:team:read";

/// An issuer publishing `rsa-1` (RS256) and `ec-1` (ES256) through discovery, and a server on
/// the world trusting only it, with the issuer's keys fetched.
async fn setup() -> (Issuer, Server) {
    let issuer = Issuer::start("cp", Publish::Discovery, &[&Key::rsa1(), &Key::ec1()]).await;
    let server = jwt_server(&[&issuer.url]).await;
    issuer.wait_for_jwks_hits(1).await;
    (issuer, server)
}

/// The request is rejected with 401 and the canonical body.
async fn assert_rejected(server: &Server, token: &str) {
    let resp = server.post(Some(token), Q).await;
    assert_eq!(resp.status(), 401, "token {token}");
    assert_eq!(resp.headers()["www-authenticate"], r#"Bearer error="invalid_token""#);
    assert_eq!(resp.headers()["content-type"], "application/problem+json");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body,
        json!({
            "type": "Unauthorized", "status": 401, "title": "Unauthorized", "detail": "invalid token", "instance": "",
            "errors": [{"message": "invalid token", "extensions": {"code": "UNAUTHENTICATED"}}]
        }),
        "a 401 says nothing about which check failed"
    );
}

/// The request is answered with 403 naming `detail`.
async fn assert_forbidden(server: &Server, token: &str, detail: &str) {
    let resp = server.post(Some(token), Q).await;
    assert_eq!(resp.status(), 403);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["detail"], detail);
}

/// The request succeeds; returns `data`.
async fn assert_accepted(server: &Server, token: &str, query: &str) -> Value {
    let resp = server.post(Some(token), query).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert!(body["errors"].is_null(), "{body}");
    body["data"].clone()
}

fn set(v: Vec<String>) -> std::collections::BTreeSet<String> {
    v.into_iter().collect()
}

fn team_apps(team: &str) -> std::collections::BTreeSet<String> {
    facts()["env"]["poc"]["teams"][team]["applications"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

// ---- accepted ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn valid_tokens_of_each_viewer_kind_are_accepted() {
    let issuer = Issuer::start(
        "cp",
        Publish::Discovery,
        &[&Key::rsa1(), &Key::ec1(), &Key::rsa2().with_kid("rsa-ps").with_alg(jsonwebtoken::Algorithm::PS256)],
    )
    .await;
    let server = jwt_server(&[&issuer.url]).await;

    // Team (RS256): exactly its applications.
    let data = assert_accepted(&server, &issuer.token(&Key::rsa1(), TEAM, READ, "poc"), Q).await;
    assert_eq!(set(names(&data["applications"], "name")), team_apps("payments--checkout"));

    // Group (ES256): every team of the group.
    let token = issuer.token(&Key::ec1(), TEAM, "tardis:group:read", "poc");
    let data = assert_accepted(&server, &token, "{ teams { edges { node { name } } } }").await;
    let group: Vec<String> =
        facts()["env"]["poc"]["groups"]["payments"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect();
    assert_eq!(set(names(&data["teams"], "name")), set(group));

    // Admin (PS256): every environment.
    let token = issuer.token(
        &Key::rsa2().with_kid("rsa-ps").with_alg(jsonwebtoken::Algorithm::PS256),
        "platform--ops--console",
        "tardis:admin:all",
        "poc",
    );
    let data = assert_accepted(&server, &token, "{ applications { totalCount } }").await;
    let total =
        facts()["env"]["poc"]["counts"]["Application"].as_u64().unwrap() + facts()["env"]["qa"]["counts"]["Application"].as_u64().unwrap();
    assert_eq!(data["applications"]["totalCount"], json!(total));

    // Within the leeway (30 s) an expired token still counts.
    let mut c = issuer.claims(TEAM, READ, "poc");
    c["exp"] = json!(jwt::now() - 5);
    assert_accepted(&server, &Key::rsa1().sign(&c), Q).await;

    // GET works the same way.
    let resp = reqwest::Client::new()
        .get(format!("{}/graphql/query", server.base()))
        .query(&[("query", "{ zones { name } }")])
        .bearer_auth(issuer.token(&Key::rsa1(), TEAM, READ, "poc"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    let metrics = server.get_text("/metrics").await;
    assert!(metrics.contains(r#"controlplane_auth_requests_total{outcome="ok"}"#), "{metrics}");
    assert!(metrics.contains(&format!(r#"controlplane_auth_jwks_keys{{issuer="{}"}} 3"#, issuer.url)), "{metrics}");
    assert!(issuer.discovery_hits() >= 1, "keys were found through OIDC discovery");
    let ready = server.get_text("/readyz").await;
    assert!(ready.contains(r#""notes":[]"#), "{ready}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keycloak_certs_path_is_the_fallback_without_discovery() {
    let issuer = Issuer::start("keycloak", Publish::KeycloakPath, &[&Key::rsa1()]).await;
    let server = jwt_server(&[&issuer.url]).await;
    let data = assert_accepted(&server, &issuer.token(&Key::rsa1(), TEAM, READ, "poc"), Q).await;
    assert_eq!(set(names(&data["applications"], "name")), team_apps("payments--checkout"));
    assert!(issuer.discovery_hits() >= 1 && issuer.jwks_hits() >= 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_rotation_at_the_issuer_needs_no_restart() {
    let (issuer, server) = setup().await;
    let old = issuer.token(&Key::rsa1(), TEAM, READ, "poc");
    assert_accepted(&server, &old, Q).await;

    // The issuer rotates: rsa-2 replaces rsa-1. A token with the new kid triggers one refresh.
    issuer.set_keys(&[&Key::rsa2(), &Key::ec1()]);
    let hits = issuer.jwks_hits();
    let new = issuer.token(&Key::rsa2(), TEAM, READ, "poc");
    let data = assert_accepted(&server, &new, Q).await;
    assert_eq!(set(names(&data["applications"], "name")), team_apps("payments--checkout"));
    assert_eq!(issuer.jwks_hits(), hits + 1, "one refresh");
    assert_accepted(&server, &new, Q).await;
    assert_eq!(issuer.jwks_hits(), hits + 1, "then served from the cache");

    // The retired key is gone with the refresh.
    assert_rejected(&server, &old).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_outage_spares_tokens_signed_with_cached_keys() {
    let (issuer, server) = setup().await;
    let token = issuer.token(&Key::rsa1(), TEAM, READ, "poc");
    assert_accepted(&server, &token, Q).await;

    issuer.set_down(true);
    // A key that is not cached cannot be fetched: 503 (retry later), counted and logged.
    let unknown = issuer.token(&Key::rsa2().with_kid("rsa-new"), TEAM, READ, "poc");
    let resp = server.post(Some(&unknown), Q).await;
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().contains_key("retry-after"));
    // Cached keys keep working during the outage.
    assert_accepted(&server, &token, Q).await;
    assert_accepted(&server, &issuer.token(&Key::ec1(), TEAM, READ, "poc"), Q).await;
    let metrics = server.get_text("/metrics").await;
    let failure = format!(r#"controlplane_auth_jwks_fetch_total{{issuer="{}",outcome="failure",trigger="unknown_key"}} 1"#, issuer.url);
    assert!(metrics.contains(&failure), "{failure} in\n{metrics}");
    assert!(metrics.contains(&format!(r#"controlplane_auth_jwks_up{{issuer="{}"}} 0"#, issuer.url)), "{metrics}");
    assert!(metrics.contains(r#"controlplane_auth_requests_total{outcome="unavailable"} 1"#), "{metrics}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_does_not_need_the_issuer_and_keys_arrive_when_it_does() {
    // Reserve a port, free it: the issuer is configured but not running yet.
    let address = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let url = format!("http://{address}/realms/late");
    let server = jwt_server(&[&url]).await;
    let token = jwt::Key::rsa1().sign(&jwt::claims(&url, TEAM, READ, "poc"));
    assert_eq!(server.post(Some(&token), Q).await.status(), 503, "no keys yet: retry later");

    let issuer = Issuer::start_at(&address, "late", Publish::Discovery, &[&Key::rsa1()]).await;
    assert_eq!(issuer.url, url);
    // The background task retries with backoff (1 s, 2 s, 4 s, …): wait for its first load.
    let mut loads = server.running().app().authenticator().key_loads().expect("jwt mode");
    let loaded = tokio::time::timeout(std::time::Duration::from_secs(20), loads.wait_for(|&n| n > 0)).await;
    assert!(loaded.is_ok(), "keys not fetched after the issuer came up");
    assert_eq!(server.post(Some(&token), Q).await.status(), 200, "keys loaded: the token verifies");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audience_is_checked_when_configured() {
    let issuer = Issuer::start("cp", Publish::Discovery, &[&Key::rsa1()]).await;
    let url = issuer.url.clone();
    let server = Server::start_with(&support::world_dir(), None, move |c| {
        c.security.mode = control_plane::config::AuthMode::Jwt;
        c.security.trusted_issuers = vec![url];
        c.security.audience = Some("control-plane".into());
    })
    .await;
    let mut c = issuer.claims(TEAM, READ, "poc");
    assert_rejected(&server, &Key::rsa1().sign(&c)).await;
    c["aud"] = json!(["account", "control-plane"]);
    assert_accepted(&server, &Key::rsa1().sign(&c), Q).await;
    c["aud"] = json!("account");
    assert_rejected(&server, &Key::rsa1().sign(&c)).await;
    server.stop().await;
}

// ---- rejected: 401 ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_is_rejected() {
    let (_issuer, server) = setup().await;
    let resp = server.post(None, Q).await;
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    assert_rejected(&server, "not-a-jwt").await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alg_none_is_rejected() {
    let (issuer, server) = setup().await;
    let claims = issuer.claims(TEAM, READ, "poc");
    for header in [json!({"alg": "none"}), json!({"alg": "none", "kid": "rsa-1", "typ": "JWT"}), json!({"alg": "NONE", "kid": "rsa-1"})] {
        assert_rejected(&server, &format!("{}.{}.", jwt::b64(&header), jwt::b64(&claims))).await;
        // With the signature of a genuine token appended.
        let genuine = issuer.token(&Key::rsa1(), TEAM, READ, "poc");
        let sig = genuine.rsplit('.').next().unwrap();
        assert_rejected(&server, &format!("{}.{}.{sig}", jwt::b64(&header), jwt::b64(&claims))).await;
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hs256_signed_with_the_rsa_public_key_as_secret_is_rejected() {
    let (issuer, server) = setup().await;
    let claims = issuer.claims(TEAM, READ, "poc");
    let secret = jsonwebtoken::EncodingKey::from_secret(&jwt::rsa1_public_pem()).unwrap();
    for alg in [jsonwebtoken::Algorithm::HS256, jsonwebtoken::Algorithm::HS384, jsonwebtoken::Algorithm::HS512] {
        let mut header = jsonwebtoken::Header::new(alg);
        header.kid = Some("rsa-1".into());
        assert_rejected(&server, &jsonwebtoken::encode(&header, &claims, &secret).unwrap()).await;
    }
    // The JWK's base64 modulus as the secret, too.
    let n = Key::rsa1().jwk()["n"].as_str().unwrap().to_string();
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    header.kid = Some("rsa-1".into());
    let token = jsonwebtoken::encode(&header, &claims, &jsonwebtoken::EncodingKey::from_secret(n.as_bytes()).unwrap()).unwrap();
    assert_rejected(&server, &token).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_iss_is_rejected() {
    let (issuer, server) = setup().await;
    let hits = issuer.jwks_hits();
    // Signed with the trusted issuer's key, but `iss` is not exactly the trusted URL.
    for iss in [format!("{}/", issuer.url), issuer.url.to_uppercase(), issuer.url.replace("/realms/cp", "/realms/other"), String::new()] {
        let mut c = issuer.claims(TEAM, READ, "poc");
        c["iss"] = json!(iss);
        assert_rejected(&server, &Key::rsa1().sign(&c)).await;
    }
    let mut c = issuer.claims(TEAM, READ, "poc");
    c.as_object_mut().unwrap().remove("iss");
    assert_rejected(&server, &Key::rsa1().sign(&c)).await;
    c["iss"] = json!([issuer.url]);
    assert_rejected(&server, &Key::rsa1().sign(&c)).await;
    assert_eq!(issuer.jwks_hits(), hits, "no fetch for a token of another issuer");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_issuer_that_is_not_trusted_is_rejected_and_never_contacted() {
    let (_issuer, server) = setup().await;
    // A perfectly valid token of a live issuer the server does not trust, with the trusted
    // issuer's kid.
    let stranger = Issuer::start("stranger", Publish::Discovery, &[&Key::rsa2().with_kid("rsa-1")]).await;
    let token = stranger.token(&Key::rsa2().with_kid("rsa-1"), TEAM, READ, "poc");
    assert_rejected(&server, &token).await;
    let token = stranger.token(&Key::rsa2(), "platform--ops--console", "tardis:admin:all", "poc");
    assert_rejected(&server, &token).await;
    assert_eq!((stranger.discovery_hits(), stranger.jwks_hits()), (0, 0), "the untrusted issuer was never contacted");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_rejected() {
    let (issuer, server) = setup().await;
    let mut c = issuer.claims(TEAM, READ, "poc");
    c["exp"] = json!(jwt::now() - 120);
    assert_rejected(&server, &Key::rsa1().sign(&c)).await;
    c.as_object_mut().unwrap().remove("exp");
    assert_rejected(&server, &Key::rsa1().sign(&c)).await;
    c["exp"] = json!("tomorrow");
    assert_rejected(&server, &Key::rsa1().sign(&c)).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_not_valid_yet_is_rejected() {
    let (issuer, server) = setup().await;
    let mut c = issuer.claims(TEAM, READ, "poc");
    c["nbf"] = json!(jwt::now() + 120);
    assert_rejected(&server, &Key::rsa1().sign(&c)).await;
    assert_rejected(&server, &Key::ec1().sign(&c)).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_kid_is_rejected_after_one_refresh() {
    let (issuer, server) = setup().await;
    let hits = issuer.jwks_hits();
    // A key the issuer never published.
    let rogue = Key::rsa2().with_kid("rsa-rogue");
    assert_rejected(&server, &issuer.token(&rogue, TEAM, READ, "poc")).await;
    assert_eq!(issuer.jwks_hits(), hits + 1, "exactly one refresh");
    // More unknown kids right after: rate-limited, no further fetch.
    for kid in ["rsa-rogue", "rsa-rogue-2", "rsa-rogue-3"] {
        assert_rejected(&server, &issuer.token(&Key::rsa2().with_kid(kid), TEAM, READ, "poc")).await;
    }
    assert_eq!(issuer.jwks_hits(), hits + 1, "refreshes are rate-limited");
    // A published kid signed with another key: the signature does not verify.
    assert_rejected(&server, &issuer.token(&Key::rsa2().with_kid("rsa-1"), TEAM, READ, "poc")).await;
    // The EC key's kid with an RSA algorithm.
    assert_rejected(&server, &issuer.token(&Key::rsa1().with_kid("ec-1"), TEAM, READ, "poc")).await;
    assert_eq!(issuer.jwks_hits(), hits + 1);
    // Valid tokens are unaffected.
    assert_accepted(&server, &issuer.token(&Key::rsa1(), TEAM, READ, "poc"), Q).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_payload_is_rejected() {
    let (issuer, server) = setup().await;
    for key in [Key::rsa1(), Key::ec1()] {
        let genuine = issuer.token(&key, TEAM, READ, "poc");
        assert_accepted(&server, &genuine, Q).await;
        let parts: Vec<&str> = genuine.split('.').collect();
        // Escalate to admin, keep header and signature.
        let mut c = issuer.claims(TEAM, READ, "poc");
        c["scope"] = json!("tardis:admin:all");
        assert_rejected(&server, &format!("{}.{}.{}", parts[0], jwt::b64(&c), parts[2])).await;
        // Another team's clientId.
        let c = issuer.claims("payments--ledger--console", READ, "poc");
        assert_rejected(&server, &format!("{}.{}.{}", parts[0], jwt::b64(&c), parts[2])).await;
        // A flipped signature byte.
        let mut sig = parts[2].as_bytes().to_vec();
        sig[5] = if sig[5] == b'A' { b'B' } else { b'A' };
        assert_rejected(&server, &format!("{}.{}.{}", parts[0], parts[1], String::from_utf8(sig).unwrap())).await;
        // No signature.
        assert_rejected(&server, &format!("{}.{}.", parts[0], parts[1])).await;
    }
    server.stop().await;
}

// ---- rejected: 403 (verified tokens whose claims make no viewer) ----

async fn without_claim(claim: &str) {
    let (issuer, server) = setup().await;
    let mut c = issuer.claims(TEAM, READ, "poc");
    c.as_object_mut().unwrap().remove(claim);
    assert_forbidden(&server, &Key::rsa1().sign(&c), &format!("claim '{claim}' is missing or not a non-empty string")).await;
    c[claim] = json!("");
    assert_forbidden(&server, &Key::rsa1().sign(&c), &format!("claim '{claim}' is missing or not a non-empty string")).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_client_id_is_forbidden() {
    without_claim("clientId").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_scope_is_forbidden() {
    without_claim("scope").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_env_is_forbidden() {
    without_claim("env").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_client_id_is_forbidden() {
    let (issuer, server) = setup().await;
    for client_id in ["payments--checkout", "payments--checkout--console--x", "--checkout--console", "payments----console", "x"] {
        assert_forbidden(
            &server,
            &issuer.token(&Key::rsa1(), client_id, READ, "poc"),
            "claim 'clientId' is not <group>--<team>--<app> (three non-empty parts)",
        )
        .await;
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_with_the_wrong_prefix_is_forbidden() {
    let (issuer, server) = setup().await;
    for scope in ["other:team:read", "TARDIS:team:read", "tardis-x:admin:all", "openid profile", "tardis:team:write"] {
        assert_forbidden(
            &server,
            &issuer.token(&Key::rsa1(), TEAM, scope, "poc"),
            "claim 'scope' holds no scope <prefix>:<team|group|admin>:<read|obfuscated|all> with the configured prefix",
        )
        .await;
    }
    // The first scope with the right prefix decides.
    assert_accepted(&server, &issuer.token(&Key::rsa1(), TEAM, "other:admin:all tardis:team:read", "poc"), Q).await;
    server.stop().await;
}
