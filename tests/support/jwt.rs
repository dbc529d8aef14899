//! A token issuer for the JWT tests: an OIDC discovery + JWKS server on 127.0.0.1 (poem) that
//! publishes the public halves of the test-only keys in `tests/fixtures/keys/`, and real RS256 /
//! ES256 signatures made with their private halves.

use super::world_dir;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{Request, Response};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn key_file(name: &str) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/keys");
    std::fs::read(dir.join(name)).unwrap()
}

/// The current Unix time in seconds.
pub fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A signing key with its `kid` and its public JWK.
#[derive(Clone)]
pub struct Key {
    /// `kid` in the JWKS and in token headers.
    pub kid: String,
    /// The algorithm tokens are signed with.
    pub alg: Algorithm,
    encoding: EncodingKey,
}

impl Key {
    /// RSA 2048 (`rsa-1.pem`), RS256, kid `rsa-1`.
    pub fn rsa1() -> Key {
        Key { kid: "rsa-1".into(), alg: Algorithm::RS256, encoding: EncodingKey::from_rsa_pem(&key_file("rsa-1.pem")).unwrap() }
    }

    /// Another RSA 2048 key (`rsa-2.pem`), RS256, kid `rsa-2`.
    pub fn rsa2() -> Key {
        Key { kid: "rsa-2".into(), alg: Algorithm::RS256, encoding: EncodingKey::from_rsa_pem(&key_file("rsa-2.pem")).unwrap() }
    }

    /// EC P-256 (`ec-p256.pem`), ES256, kid `ec-1`.
    pub fn ec1() -> Key {
        Key { kid: "ec-1".into(), alg: Algorithm::ES256, encoding: EncodingKey::from_ec_pem(&key_file("ec-p256.pem")).unwrap() }
    }

    /// The same key material signing with another algorithm of its family (`PS256` for RSA).
    pub fn with_alg(mut self, alg: Algorithm) -> Key {
        self.alg = alg;
        self
    }

    /// The same key material under another `kid`.
    pub fn with_kid(mut self, kid: &str) -> Key {
        self.kid = kid.into();
        self
    }

    /// The public JWK (`kid`, `alg`, `use: sig`).
    pub fn jwk(&self) -> Value {
        let mut jwk = serde_json::to_value(Jwk::from_encoding_key(&self.encoding, self.alg).unwrap()).unwrap();
        jwk["kid"] = json!(self.kid);
        jwk["use"] = json!("sig");
        jwk
    }

    /// A compact JWS of `claims` signed with this key (header `alg`, `kid`, `typ: JWT`).
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).unwrap()
    }
}

/// The PEM text of `rsa-1`'s public key (for the HS256 key-confusion attack).
pub fn rsa1_public_pem() -> Vec<u8> {
    key_file("rsa-1.pub.pem")
}

/// Claims of a viewer issued by `iss`, valid for five minutes.
pub fn claims(iss: &str, client_id: &str, scope: &str, env: &str) -> Value {
    let now = now();
    json!({"iss": iss, "iat": now, "exp": now + 300, "clientId": client_id, "scope": scope, "env": env, "azp": client_id})
}

/// Base64url (no padding) of a JSON value.
pub fn b64(v: &Value) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, v.to_string())
}

/// Where the issuer publishes its JWKS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    /// OIDC discovery at `<issuer>/.well-known/openid-configuration`, whose `jwks_uri` is
    /// `<origin>/jwks/<realm>` (not the Keycloak path, so following discovery is proven).
    Discovery,
    /// No discovery document; the keys at Keycloak's `<issuer>/protocol/openid-connect/certs`.
    KeycloakPath,
}

struct State {
    realm: String,
    issuer: String,
    origin: String,
    publish: Publish,
    keys: Vec<Value>,
    down: bool,
    discovery_hits: usize,
    jwks_hits: usize,
}

/// A running issuer: `http://127.0.0.1:PORT/realms/<realm>`. Stops when dropped.
pub struct Issuer {
    /// The issuer URL (the `iss` of its tokens).
    pub url: String,
    state: Arc<Mutex<State>>,
    /// Bumped after each request served.
    served: Arc<tokio::sync::watch::Sender<u64>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Issuer {
    /// Starts an issuer on a free port publishing `keys`.
    pub async fn start(realm: &str, publish: Publish, keys: &[&Key]) -> Issuer {
        Issuer::start_at("127.0.0.1:0", realm, publish, keys).await
    }

    /// Starts an issuer on `address` (`127.0.0.1:PORT`).
    pub async fn start_at(address: &str, realm: &str, publish: Publish, keys: &[&Key]) -> Issuer {
        let acceptor = TcpListener::bind(address.to_string()).into_acceptor().await.unwrap();
        let addr = acceptor.local_addr()[0].as_socket_addr().copied().unwrap();
        let origin = format!("http://{addr}");
        let url = format!("{origin}/realms/{realm}");
        let state = Arc::new(Mutex::new(State {
            realm: realm.into(),
            issuer: url.clone(),
            origin,
            publish,
            keys: keys.iter().map(|k| k.jwk()).collect(),
            down: false,
            discovery_hits: 0,
            jwks_hits: 0,
        }));
        let served = Arc::new(tokio::sync::watch::Sender::new(0));
        let endpoint = {
            let (state, served) = (state.clone(), served.clone());
            poem::endpoint::make_sync(move |req: Request| {
                let response = serve(&state, req.uri().path());
                served.send_modify(|n| *n += 1);
                response
            })
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(poem::Server::new_with_acceptor(acceptor).run_with_graceful_shutdown(
            endpoint,
            async move {
                let _ = stopped.await;
            },
            Some(Duration::from_secs(1)),
        ));
        Issuer { url, state, served, stop: Some(stop) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// Publishes `keys` from now on (key rotation).
    pub fn set_keys(&self, keys: &[&Key]) {
        self.lock().keys = keys.iter().map(|k| k.jwk()).collect();
    }

    /// Publishes raw JWKs.
    pub fn set_raw_keys(&self, keys: Vec<Value>) {
        self.lock().keys = keys;
    }

    /// Answers every request with 503 (an outage) while `down`.
    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
    }

    /// JWKS requests served so far (also while down).
    pub fn jwks_hits(&self) -> usize {
        self.lock().jwks_hits
    }

    /// Discovery requests served so far.
    pub fn discovery_hits(&self) -> usize {
        self.lock().discovery_hits
    }

    /// Waits until at least `n` JWKS requests were served (the server's background fetch).
    pub async fn wait_for_jwks_hits(&self, n: usize) {
        let mut served = self.served.subscribe();
        let waiting = async {
            while self.jwks_hits() < n {
                let _ = served.changed().await;
            }
        };
        assert!(
            tokio::time::timeout(Duration::from_secs(5), waiting).await.is_ok(),
            "the JWKS of {} was not fetched {n} time(s)",
            self.url
        );
    }

    /// Claims of a viewer issued here.
    pub fn claims(&self, client_id: &str, scope: &str, env: &str) -> Value {
        claims(&self.url, client_id, scope, env)
    }

    /// A token of a viewer issued here, signed with `key`.
    pub fn token(&self, key: &Key, client_id: &str, scope: &str, env: &str) -> String {
        key.sign(&self.claims(client_id, scope, env))
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn serve(state: &Mutex<State>, path: &str) -> Response {
    let json = |v: Value| Response::builder().content_type("application/json").body(v.to_string());
    let mut s = state.lock().unwrap();
    let realm_path = format!("/realms/{}", s.realm);
    let jwks_path = match s.publish {
        Publish::Discovery => format!("/jwks/{}", s.realm),
        Publish::KeycloakPath => format!("{realm_path}/protocol/openid-connect/certs"),
    };
    if path == format!("{realm_path}/.well-known/openid-configuration") {
        s.discovery_hits += 1;
        if s.down {
            return Response::builder().status(poem::http::StatusCode::SERVICE_UNAVAILABLE).finish();
        }
        if s.publish == Publish::Discovery {
            return json(json!({
                "issuer": s.issuer,
                "jwks_uri": format!("{}{jwks_path}", s.origin),
                "id_token_signing_alg_values_supported": ["RS256", "ES256"],
            }));
        }
    } else if path == jwks_path {
        s.jwks_hits += 1;
        if s.down {
            return Response::builder().status(poem::http::StatusCode::SERVICE_UNAVAILABLE).finish();
        }
        return json(json!({"keys": s.keys}));
    }
    Response::builder().status(poem::http::StatusCode::NOT_FOUND).finish()
}

/// A server on the bundled world in jwt mode trusting `issuers`.
pub async fn jwt_server(issuers: &[&str]) -> super::Server {
    let issuers: Vec<String> = issuers.iter().map(|s| s.to_string()).collect();
    super::Server::start_with(&world_dir(), None, move |c| {
        c.security.mode = control_plane::config::AuthMode::Jwt;
        c.security.trusted_issuers = issuers;
    })
    .await
}
