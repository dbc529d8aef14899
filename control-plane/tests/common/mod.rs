//! Shared constants and helpers of the control-plane integration tests.

#![allow(dead_code)]

/// A mock-mode admin token (`clientId platform--ops--console`, scope `tardis:admin:all`, env
/// `poc`); unsigned, accepted only with `--auth mock`.
pub const ADMIN: &str = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJjbGllbnRJZCI6InBsYXRmb3JtLS1vcHMtLWNvbnNvbGUiLCJzY29wZSI6InRhcmRpczphZG1pbjphbGwiLCJlbnYiOiJwb2MifQ.mock";

/// What the server logs as the last step of its start (`app::start`), once the initial sync is
/// applied: when `/readyz` turns 200 on a cold start, when catching up ends on a warm one.
pub const READY_LINE: &str = "the initial sync is applied";

/// A child server's stderr, read line by line on a thread of its own, so a test waits on what
/// the server says (the product's barrier) instead of polling.
#[derive(Clone)]
pub struct ServerLog {
    state: std::sync::Arc<(std::sync::Mutex<(String, bool)>, std::sync::Condvar)>,
}

impl ServerLog {
    /// Follows `child`'s stderr, which must be piped; everything read is kept.
    pub fn follow(child: &mut std::process::Child) -> ServerLog {
        use std::io::BufRead;
        let stderr = child.stderr.take().expect("the child's stderr is piped");
        let log = ServerLog { state: Default::default() };
        let state = log.state.clone();
        std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(stderr);
            let mut line = String::new();
            loop {
                line.clear();
                let n = reader.read_line(&mut line).unwrap_or(0);
                let (lock, changed) = &*state;
                // A test that failed while holding the lock poisoned it: keep reading.
                let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
                if n == 0 {
                    s.1 = true;
                } else {
                    s.0.push_str(&line);
                }
                changed.notify_all();
                if n == 0 {
                    return;
                }
            }
        });
        log
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        self.state.0.lock().unwrap().0.clone()
    }

    /// Waits until `done(everything logged so far)` holds; panics with the log when the server
    /// closed its stderr (exited) first, or after `limit` (which only turns a hang into a
    /// failure).
    pub fn wait_until(&self, what: &str, limit: std::time::Duration, done: impl Fn(&str) -> bool) {
        let (lock, changed) = &*self.state;
        let (s, timeout) = changed.wait_timeout_while(lock.lock().unwrap(), limit, |s| !done(&s.0) && !s.1).unwrap();
        assert!(done(&s.0), "the server did not log {what} ({}):\n{}", if timeout.timed_out() { "timed out" } else { "it exited" }, s.0);
    }

    /// How many bytes have been logged so far (for [`ServerLog::wait_for_more`]).
    pub fn len(&self) -> usize {
        self.state.0.lock().unwrap().0.len()
    }

    /// Waits until more than `seen` bytes are logged (the server said something new); panics as
    /// [`ServerLog::wait_until`] does.
    pub fn wait_for_more(&self, seen: usize, limit: std::time::Duration) {
        self.wait_until("anything new", limit, |log| log.len() > seen);
    }

    /// Waits until a line contains `what`; panics with the log when the server closed its
    /// stderr (exited) first, or after `limit` (which only turns a hang into a failure).
    pub fn wait_for(&self, what: &str, limit: std::time::Duration) {
        self.wait_until(&format!("{what:?}"), limit, |log| log.contains(what));
    }

    /// Waits until the server closed its stderr (it exited), at most 60 s.
    pub fn wait_for_end(&self) {
        let (lock, changed) = &*self.state;
        let (s, _) = changed.wait_timeout_while(lock.lock().unwrap(), std::time::Duration::from_secs(60), |s| !s.1).unwrap();
        assert!(s.1, "the server's stderr stayed open");
    }

    /// [`ServerLog::wait_for`] from async code (on the blocking pool).
    pub async fn wait_for_async(&self, what: &str, limit: std::time::Duration) {
        let (log, what) = (self.clone(), what.to_string());
        tokio::task::spawn_blocking(move || log.wait_for(&what, limit)).await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    }
}

/// Waits for `child` to exit, at most `limit` (then kills it and panics).
pub fn wait_exit(child: &mut std::process::Child, limit: std::time::Duration) -> std::process::ExitStatus {
    let pid = child.id();
    let (done, waited) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if waited.recv_timeout(limit).is_err() {
            let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            return true;
        }
        false
    });
    let status = child.wait().unwrap();
    let _ = done.send(());
    assert!(!watchdog.join().unwrap(), "the server did not exit within {limit:?}");
    status
}

/// How many objects of the bundled example world are projected: the sum of the counts per kind
/// and environment in `examples/world.facts.json`.
pub fn world_projected_count() -> usize {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world.facts.json");
    let facts: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let envs = facts["environments"].as_array().unwrap();
    envs.iter()
        .flat_map(|env| facts["env"][env.as_str().unwrap()]["counts"].as_object().unwrap().values())
        .map(|n| n.as_u64().unwrap() as usize)
        .sum()
}

/// The answer of /graphql/query to `body`, as the admin.
pub async fn query(client: &reqwest::Client, base: &str, body: serde_json::Value) -> serde_json::Value {
    client.post(format!("{base}/graphql/query")).bearer_auth(ADMIN).json(&body).send().await.unwrap().json().await.unwrap()
}

/// Waits until `condition` holds of the server's metrics (re-checked at each change they
/// announce); two minutes at most, so a failure does not hang the suite.
pub async fn wait(running: &control_plane::app::Running, condition: impl FnMut(&control_plane::metrics::Metrics) -> bool) {
    assert!(running.app().metrics().wait_until(std::time::Duration::from_secs(120), condition).await, "the metrics did not get there");
}

/// Sends an export request on a connection that never reads (a small receive buffer, so the
/// server's rows wait for it instead of filling this machine's socket buffers).
pub async fn stalled_export(addr: std::net::SocketAddr, token: &str, query: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let body = serde_json::json!({"query": query}).to_string();
    let request = format!(
        "POST /graphql/export HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes()).await.unwrap();
    stream
}
