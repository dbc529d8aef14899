//! A fake secret manager for the secret resolution tests: HTTPS on 127.0.0.1 with the test-only
//! certificate in `tests/fixtures/tls/` (`server.pem` for `localhost` and `127.0.0.1`, signed by
//! `ca.pem`), answering `GET /api/v1/secrets/<id>` with `{"value": …}` as the reference's secret
//! manager does. It records every request (path and `Authorization`), and can be told to fail
//! or to never answer.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// `tests/fixtures/tls/<name>`.
pub fn tls_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls").join(name)
}

/// How the fake answers.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// 200 with the stored value, 404 for an unknown id.
    Answer,
    /// This status and body for every request.
    Fail(u16, String),
    /// Reads the request and never answers.
    Hang,
    /// Answers as [`Behaviour::Answer`] once [`FakeSecretManager::release`] was called.
    Hold,
}

/// One request the fake received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// The request path (`/api/v1/secrets/<id>`).
    pub path: String,
    /// The `Authorization` header, when sent.
    pub authorization: Option<String>,
}

#[derive(Default)]
struct State {
    values: Mutex<HashMap<String, String>>,
    behaviour: Mutex<Option<Behaviour>>,
    received: Mutex<Vec<Received>>,
    released: tokio::sync::Notify,
    is_released: std::sync::atomic::AtomicBool,
}

/// The running fake; it stops with the test's runtime.
pub struct FakeSecretManager {
    /// `https://127.0.0.1:PORT/api`: the `secretManager.url` to configure.
    pub url: String,
    state: Arc<State>,
    received: tokio::sync::watch::Sender<usize>,
}

impl FakeSecretManager {
    /// Starts the fake with `values` (secret id → value).
    pub async fn start(values: &[(&str, &str)]) -> FakeSecretManager {
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(tls_file("server.pem")).unwrap().collect::<Result<_, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_file(tls_file("server.key")).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://127.0.0.1:{}/api", listener.local_addr().unwrap().port());
        let state = Arc::new(State::default());
        *state.values.lock().unwrap() = values.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        *state.behaviour.lock().unwrap() = Some(Behaviour::Answer);
        let (received, _) = tokio::sync::watch::channel(0);
        let fake = FakeSecretManager { url, state: state.clone(), received: received.clone() };
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, state, received) = (acceptor.clone(), state.clone(), received.clone());
                tokio::spawn(async move {
                    // A client that does not trust the CA fails the handshake: nothing is received.
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        serve(tls, &state, &received).await;
                    }
                });
            }
        });
        fake
    }

    /// Sets the value of `id` (a rotation).
    pub fn set(&self, id: &str, value: &str) {
        self.state.values.lock().unwrap().insert(id.to_string(), value.to_string());
    }

    /// Changes how the fake answers from now on.
    pub fn behave(&self, behaviour: Behaviour) {
        *self.state.behaviour.lock().unwrap() = Some(behaviour);
    }

    /// Lets every held request ([`Behaviour::Hold`]) be answered, now and from now on.
    pub fn release(&self) {
        self.state.is_released.store(true, std::sync::atomic::Ordering::SeqCst);
        self.state.released.notify_waiters();
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Waits until at least `count` requests were received (30 s at most).
    pub async fn wait_for_requests(&self, count: usize) {
        let mut seen = self.received.subscribe();
        tokio::time::timeout(std::time::Duration::from_secs(30), seen.wait_for(|&n| n >= count))
            .await
            .unwrap_or_else(|_| panic!("the fake secret manager did not receive {count} requests"))
            .unwrap();
    }
}

/// Answers the one request of a connection (`Connection: close`).
async fn serve(
    mut tls: tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
    state: &State,
    received: &tokio::sync::watch::Sender<usize>,
) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match tls.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 64 << 10 {
            return;
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut lines = text.split("\r\n");
    let path = lines.next().unwrap_or_default().split(' ').nth(1).unwrap_or_default().to_string();
    let authorization = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v.trim().to_string());
    state.received.lock().unwrap().push(Received { path: path.clone(), authorization });
    received.send_modify(|n| *n += 1);
    let behaviour = state.behaviour.lock().unwrap().clone().unwrap_or(Behaviour::Answer);
    if matches!(behaviour, Behaviour::Hold) {
        let released = state.released.notified();
        if !state.is_released.load(std::sync::atomic::Ordering::SeqCst) {
            released.await;
        }
    }
    let (status, body) = match behaviour {
        Behaviour::Hang => return std::future::pending().await,
        Behaviour::Fail(status, body) => (status, body),
        Behaviour::Answer | Behaviour::Hold => {
            let id = path.strip_prefix("/api/v1/secrets/").unwrap_or_default().replace("%3A", ":");
            match state.values.lock().unwrap().get(&id) {
                Some(value) => (200, serde_json::json!({ "value": value }).to_string()),
                None => (404, r#"{"error":"not found"}"#.to_string()),
            }
        }
    };
    let answer = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tls.write_all(answer.as_bytes()).await;
    let _ = tls.shutdown().await;
}
