//! A fake Kubernetes API server for the kube source's end-to-end tests: plain HTTP on
//! 127.0.0.1, one collection per registered kind (`/apis/<group>/v1/<plural>`, all namespaces),
//! speaking what kube-rs' default watcher (`ListWatch`) uses:
//!
//! * **List** (`GET …/<plural>?limit=N[&continue=T]`): `<Kind>List` with
//!   `metadata.resourceVersion` (the server's current revision) and `continue` for the next page:
//!   a quorum read. With `resourceVersion=0` (what kube-rs' `ListSemantic::Any` sends), the list
//!   is served from the *watch cache* in one page (`limit` ignored, as the API server's cache
//!   does): the current objects, or the snapshot [`FakeK8s::freeze_cache`] took (a cache that
//!   lags). Every list request's parameters are recorded ([`FakeK8s::list_requests`]) and each
//!   page can take a set time ([`FakeK8s::set_page_latency`]).
//! * **Watch** (`?watch=true&resourceVersion=R&allowWatchBookmarks=true&timeoutSeconds=S`):
//!   newline-delimited JSON events: the history after `R` (`ADDED`/`MODIFIED`/`DELETED`), then
//!   live events, `BOOKMARK`s every [`BOOKMARK_EVERY`] when asked for, the end after `S`
//!   seconds. A watch from a revision older than the last compaction answers `200` with one
//!   `ERROR` event (`410 Expired`), as the real API server does. `sendInitialEvents` (streaming
//!   lists) is answered `400`: the default watcher does not use it.
//! * **Writes** (what the mutations' client sends): `GET`, `PUT` and `DELETE` of
//!   `/apis/<group>/v1/namespaces/<ns>/<plural>/<name>` and `POST` to
//!   `/apis/<group>/v1/namespaces/<ns>/<plural>`. A `PUT` whose `metadata.resourceVersion` is not
//!   the stored one answers `409 Conflict`, a `POST` of an existing object `409 AlreadyExists`,
//!   an absent object `404 NotFound`; every accepted write gets a new resourceVersion and its
//!   watch event. [`FakeK8s::change_after_next_get`] changes an object right after it was read
//!   (a concurrent writer), [`FakeK8s::refuse_writes`] answers every write with a given status;
//!   [`FakeK8s::writes`] counts the write requests received.
//! * **On demand**: compaction ([`FakeK8s::compact`]), `410 Gone` into every open watch
//!   ([`FakeK8s::expire_watches`]), dropped connections ([`FakeK8s::drop_watches`]), refused
//!   watches ([`FakeK8s::block_watches`]: `500`), kinds that are "not installed" (`404` with a
//!   `NotFound` Status), held lists ([`FakeK8s::hold_lists`]: answered once released), and changes that produce no
//!   event ([`FakeK8s::silently`]).
//!
//! Every object gets `metadata.resourceVersion` (one counter for the whole server, like etcd)
//! and a `uid`. Seeded from `examples/world/*.yaml` ([`FakeK8s::start_world`]), or silently from
//! any directory of manifests such as a generated world of the benches ([`FakeK8s::seed_dir`]).
//!
//! Each object is kept as its JSON text (shared, never copied to answer) beside its key and
//! resourceVersion, and each history entry as its event line: a list answer is streamed from
//! the texts in chunks of [`LIST_CHUNK`] bytes, so a list of the benches' 1M world costs the
//! server a pointer per object, not a copy of the kind.

#![allow(dead_code)]

use control_plane::source::manifests::split_documents;
use poem::listener::{Acceptor, Listener, TcpListener};
use poem::{Body, Request, Response};
use schema::KindId;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// Interval of `BOOKMARK` events on watches that allow them.
pub const BOOKMARK_EVERY: Duration = Duration::from_millis(500);

/// The size of the pieces a list answer is streamed in (about: a piece ends after the object
/// that reaches it).
pub const LIST_CHUNK: usize = 64 * 1024;

/// A message to every open watch.
#[derive(Clone, Debug)]
enum Signal {
    /// One event line of `plural` at revision `rv`.
    Event { plural: String, rv: u64, line: Arc<str> },
    /// Send `ERROR 410` and end.
    Gone,
    /// Abort the connection (no clean end of the chunked body).
    Drop,
}

/// One stored object: its JSON text as served (with `metadata.resourceVersion` and `uid`), and
/// its resourceVersion. A collection keys it by `(namespace, name)`.
#[derive(Clone)]
struct Stored {
    json: Arc<str>,
    rv: u64,
}

impl Stored {
    /// The object as a JSON value (parsed anew).
    fn value(&self) -> Value {
        serde_json::from_str(&self.json).expect("a stored object is JSON")
    }
}

/// One collection.
struct Collection {
    group: String,
    kind: String,
    installed: bool,
    objects: BTreeMap<(String, String), Stored>,
    /// `(revision, event line)` since the last compaction: the line a watch sends.
    history: Vec<(u64, Arc<str>)>,
    /// `true` while list responses are held back ([`FakeK8s::hold_lists`]).
    lists_held: tokio::sync::watch::Sender<bool>,
    lists: u64,
    watches: u64,
    refused_watches: u64,
    /// The parameters of every list request answered, in order.
    list_requests: Vec<ListRequest>,
    /// What `resourceVersion=0` lists answer while frozen: the objects (in key order) and the
    /// revision then.
    cache: Option<(Vec<Arc<str>>, u64)>,
}

/// The parameters of one list request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListRequest {
    /// `resourceVersion` (`None`: absent, a quorum read).
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `limit`.
    pub limit: Option<String>,
    /// `continue`.
    pub continue_token: Option<String>,
}

impl ListRequest {
    /// Whether the list asked for the watch cache (`resourceVersion=0`), not a quorum read.
    pub fn reads_the_cache(&self) -> bool {
        self.resource_version.as_deref() == Some("0")
    }
}

struct State {
    /// Write requests received (`POST`, `PUT`, `DELETE`, `PATCH`), answered or not.
    writes: u64,
    /// Objects changed right after their next `GET` ([`FakeK8s::change_after_next_get`]).
    change_after_get: Vec<(String, String, String)>,
    /// When set, every write is answered with this `(code, reason)`.
    refuse_writes: Option<(u16, String)>,
    rv: u64,
    /// Watches from a revision below this answer 410.
    compacted: u64,
    collections: BTreeMap<String, Collection>,
    watches_blocked: bool,
    /// How long each list page takes to answer.
    page_latency: Duration,
}

struct Inner {
    state: Mutex<State>,
    signals: broadcast::Sender<Signal>,
    /// Bumped after each request is answered ([`FakeK8s::requests`]).
    answered: tokio::sync::watch::Sender<u64>,
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The running fake API server.
pub struct FakeK8s {
    addr: SocketAddr,
    inner: Arc<Inner>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeK8s {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn plural_of(group: &str, kind: &str) -> Option<&'static str> {
    KindId::ALL.iter().find(|k| k.group() == group && k.name() == kind).map(|k| k.plural())
}

impl FakeK8s {
    /// An empty server (every registered kind installed) on 127.0.0.1.
    pub async fn start() -> FakeK8s {
        let mut collections = BTreeMap::new();
        for k in KindId::ALL {
            collections.insert(
                k.plural().to_string(),
                Collection {
                    group: k.group().to_string(),
                    kind: k.name().to_string(),
                    installed: true,
                    objects: BTreeMap::new(),
                    history: Vec::new(),
                    lists_held: tokio::sync::watch::Sender::new(false),
                    lists: 0,
                    watches: 0,
                    refused_watches: 0,
                    list_requests: Vec::new(),
                    cache: None,
                },
            );
        }
        let (signals, _) = broadcast::channel(4096);
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                writes: 0,
                change_after_get: Vec::new(),
                refuse_writes: None,
                rv: 1,
                compacted: 0,
                collections,
                watches_blocked: false,
                page_latency: Duration::ZERO,
            }),
            signals,
            answered: tokio::sync::watch::Sender::new(0),
        });
        let acceptor = TcpListener::bind("127.0.0.1:0").into_acceptor().await.unwrap();
        let addr = *acceptor.local_addr()[0].as_socket_addr().unwrap();
        let endpoint = {
            let inner = inner.clone();
            poem::endpoint::make(move |req: Request| {
                let inner = inner.clone();
                async move {
                    let response = handle(inner.clone(), req).await;
                    inner.answered.send_modify(|n| *n += 1);
                    response
                }
            })
        };
        let server = tokio::spawn(async move {
            let _ = poem::Server::new_with_acceptor(acceptor).run(endpoint).await;
        });
        FakeK8s { addr, inner, server }
    }

    /// A server holding the bundled world (`examples/world/*.yaml`).
    pub async fn start_world() -> FakeK8s {
        let fake = FakeK8s::start().await;
        for doc in world_documents() {
            fake.apply(doc);
        }
        fake
    }

    /// Adds the registered kinds' objects of the manifests in `dir` (its `*.yaml` files in name
    /// order, e.g. a generated world `target/genworld/<size>/` of the benches) as
    /// [`FakeK8s::silently`] does: no events and no history, as if the server had held them
    /// before any watch started: the server keeps nothing but the objects (as their compact
    /// JSON text, about their size on disk, plus their keys). A document that is one JSON
    /// object is parsed as JSON, any other as YAML; documents of other kinds are left out.
    /// Returns the number of objects added or replaced.
    pub fn seed_dir(&self, dir: &Path) -> usize {
        let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let mut seeded = 0;
        self.silently(|objects| {
            for f in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
                for chunk in split_documents(&std::fs::read_to_string(&f).unwrap()) {
                    let text = chunk.text.trim();
                    let v: Value = if text.starts_with('{') {
                        serde_json::from_str(text).unwrap_or_else(|e| panic!("{}#{}: {e}", f.display(), chunk.document))
                    } else {
                        serde_saphyr::from_str(&chunk.text).unwrap_or_else(|e| panic!("{}#{}: {e}", f.display(), chunk.document))
                    };
                    let group = v["apiVersion"].as_str().and_then(|a| a.split_once('/')).map(|(g, _)| g).unwrap_or_default();
                    if plural_of(group, v["kind"].as_str().unwrap_or_default()).is_some() {
                        objects.apply(v);
                        seeded += 1;
                    }
                }
            }
        });
        seeded
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Creates or replaces an object (by group, kind, namespace, name); returns its new
    /// resourceVersion. Open watches get `ADDED` or `MODIFIED`.
    pub fn apply(&self, doc: Value) -> u64 {
        let mut s = self.inner.lock();
        let (plural, rv, ty, object) = upsert(&mut s, doc);
        record(&self.inner, &mut s, &plural, rv, ty, &object);
        rv
    }

    /// [`FakeK8s::apply`] of a change made by `manager`, recorded as an API server records it:
    /// the object's `metadata.managedFields` entry of that manager (operation `Update`, the time
    /// now) replaced and listed last.
    pub fn apply_by(&self, mut doc: Value, manager: &str) -> u64 {
        let mut s = self.inner.lock();
        let api_version = doc["apiVersion"].clone();
        let (ns, name) = (
            doc["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
            doc["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        );
        let plural = plural_of(
            api_version.as_str().unwrap_or_default().split('/').next().unwrap_or_default(),
            doc["kind"].as_str().unwrap_or_default(),
        );
        let stored = plural.and_then(|p| s.collections.get(p)).and_then(|c| c.objects.get(&(ns, name))).map(Stored::value);
        let mut entries: Vec<Value> = stored.and_then(|v| v["metadata"]["managedFields"].as_array().cloned()).unwrap_or_default();
        entries.retain(|e| e["manager"] != manager);
        let seconds = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let time = schema::Timestamp(seconds * 1_000_000_000).to_rfc3339();
        entries.push(json!({"manager": manager, "operation": "Update", "apiVersion": api_version, "time": time, "fieldsType": "FieldsV1", "fieldsV1": {}}));
        doc["metadata"]["managedFields"] = Value::Array(entries);
        let (plural, rv, ty, object) = upsert(&mut s, doc);
        record(&self.inner, &mut s, &plural, rv, ty, &object);
        rv
    }

    /// Deletes an object; returns whether it existed. Open watches get `DELETED`.
    pub fn delete(&self, kind: KindId, namespace: &str, name: &str) -> bool {
        let mut s = self.inner.lock();
        s.rv += 1;
        let rv = s.rv;
        let c = s.collections.get_mut(kind.plural()).unwrap();
        let Some(object) = c.objects.remove(&(namespace.to_string(), name.to_string())) else { return false };
        record(&self.inner, &mut s, kind.plural(), rv, "DELETED", &deleted(&object, rv));
        true
    }

    /// Runs `f` on the server's objects without producing events or history (changes a watch
    /// cannot see; use with [`FakeK8s::expire_watches`] or [`FakeK8s::compact`]). Objects `f`
    /// adds or changes get a new resourceVersion.
    pub fn silently(&self, f: impl FnOnce(&mut Objects<'_>)) {
        let mut s = self.inner.lock();
        f(&mut Objects { state: &mut s });
    }

    /// Forgets the event history: a watch resuming from any revision issued so far gets
    /// `410 Gone` and must re-list.
    pub fn compact(&self) {
        let mut s = self.inner.lock();
        s.rv += 1;
        s.compacted = s.rv;
        for c in s.collections.values_mut() {
            c.history.clear();
        }
    }

    /// [`FakeK8s::compact`], and `ERROR 410` into every open watch.
    pub fn expire_watches(&self) {
        self.compact();
        let _ = self.inner.signals.send(Signal::Gone);
    }

    /// Aborts every open watch connection (the client resumes from its last revision).
    pub fn drop_watches(&self) {
        let _ = self.inner.signals.send(Signal::Drop);
    }

    /// While `blocked`, open watches are dropped and new watch requests answer `500`.
    pub fn block_watches(&self, blocked: bool) {
        self.inner.lock().watches_blocked = blocked;
        if blocked {
            self.drop_watches();
        }
    }

    /// Installs or uninstalls a kind's CRD (uninstalled: every request answers `404`).
    pub fn set_installed(&self, kind: KindId, installed: bool) {
        self.inner.lock().collections.get_mut(kind.plural()).unwrap().installed = installed;
    }

    /// Holds back every list response of `kind` (the request waits) until
    /// [`FakeK8s::release_lists`]: a list that takes as long as the test needs.
    pub fn hold_lists(&self, kind: KindId) {
        self.inner.lock().collections[kind.plural()].lists_held.send_replace(true);
    }

    /// Answers the held list requests of `kind` and every later one at once.
    pub fn release_lists(&self, kind: KindId) {
        self.inner.lock().collections[kind.plural()].lists_held.send_replace(false);
    }

    /// Makes every list page (quorum or cached) take `latency` before it is answered: the time a
    /// real API server spends reading a page of 500 objects from etcd.
    pub fn set_page_latency(&self, latency: Duration) {
        self.inner.lock().page_latency = latency;
    }

    /// From now on, `resourceVersion=0` lists of `kind` answer the objects as they are now, at
    /// today's revision, whatever changes later: a watch cache that lags behind.
    pub fn freeze_cache(&self, kind: KindId) {
        let mut s = self.inner.lock();
        let rv = s.rv;
        let c = s.collections.get_mut(kind.plural()).unwrap();
        c.cache = Some((c.objects.values().map(|o| o.json.clone()).collect(), rv));
    }

    /// The parameters of every list request answered for `kind`, in order.
    pub fn list_requests(&self, kind: KindId) -> Vec<ListRequest> {
        self.inner.lock().collections[kind.plural()].list_requests.clone()
    }

    /// Write requests received so far (answered or refused).
    pub fn writes(&self) -> u64 {
        self.inner.lock().writes
    }

    /// After the next `GET` of this object, changes it (an annotation, a new resourceVersion and
    /// its event), as a concurrent writer would: a `PUT` of what was read then conflicts.
    pub fn change_after_next_get(&self, kind: KindId, namespace: &str, name: &str) {
        self.inner.lock().change_after_get.push((kind.plural().to_string(), namespace.to_string(), name.to_string()));
    }

    /// Answers every later write with HTTP `code` and Status `reason` (`None`: accept again).
    pub fn refuse_writes(&self, refusal: Option<(u16, &str)>) {
        self.inner.lock().refuse_writes = refusal.map(|(c, r)| (c, r.to_string()));
    }

    /// A receiver marked changed after each request the server answers (lists, watches and
    /// refusals are counted by then): what tests wait on for the fake's own counters.
    pub fn requests(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.answered.subscribe()
    }

    /// List requests served for `kind` (answered 200).
    pub fn lists(&self, kind: KindId) -> u64 {
        self.inner.lock().collections[kind.plural()].lists
    }

    /// Watch requests accepted for `kind`.
    pub fn watches(&self, kind: KindId) -> u64 {
        self.inner.lock().collections[kind.plural()].watches
    }

    /// Watch requests refused (blocked) for `kind`.
    pub fn refused_watches(&self, kind: KindId) -> u64 {
        self.inner.lock().collections[kind.plural()].refused_watches
    }

    /// Every object of the server, as stored (with resourceVersion and uid).
    pub fn objects(&self) -> Vec<Value> {
        self.inner.lock().collections.values().flat_map(|c| c.objects.values().map(Stored::value)).collect()
    }

    /// One object.
    pub fn get(&self, kind: KindId, namespace: &str, name: &str) -> Option<Value> {
        self.inner.lock().collections[kind.plural()].objects.get(&(namespace.to_string(), name.to_string())).map(Stored::value)
    }

    /// Writes every object as one JSON manifest into `dir` (for a reference projection with
    /// the manifests source).
    pub fn write_manifests(&self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        for (i, o) in self.objects().into_iter().enumerate() {
            std::fs::write(dir.join(format!("{i:05}.json")), serde_json::to_vec_pretty(&o).unwrap()).unwrap();
        }
    }
}

/// Silent access to the objects (see [`FakeK8s::silently`]).
pub struct Objects<'a> {
    state: &'a mut State,
}

impl Objects<'_> {
    /// Creates or replaces an object without an event.
    pub fn apply(&mut self, doc: Value) {
        upsert(self.state, doc);
    }

    /// Deletes an object without an event; returns whether it existed.
    pub fn delete(&mut self, kind: KindId, namespace: &str, name: &str) -> bool {
        self.state.rv += 1;
        self.state.collections.get_mut(kind.plural()).unwrap().objects.remove(&(namespace.to_string(), name.to_string())).is_some()
    }
}

/// Stores `doc` with a new revision; returns (plural, rv, event type, stored object's text).
fn upsert(s: &mut State, mut doc: Value) -> (String, u64, &'static str, Arc<str>) {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = doc["kind"].as_str().unwrap_or_default().to_string();
    let group = api_version.split_once('/').map(|(g, _)| g.to_string()).unwrap_or_default();
    let plural = plural_of(&group, &kind).unwrap_or_else(|| panic!("not a registered kind: {api_version} {kind}")).to_string();
    let ns = doc["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
    let name = doc["metadata"]["name"].as_str().unwrap().to_string();
    s.rv += 1;
    let rv = s.rv;
    doc["metadata"]["resourceVersion"] = json!(rv.to_string());
    if doc["metadata"]["uid"].is_null() {
        doc["metadata"]["uid"] = json!(format!("uid-{plural}-{ns}-{name}"));
    }
    let json: Arc<str> = Arc::from(doc.to_string());
    let c = s.collections.get_mut(&plural).unwrap();
    let ty = if c.objects.insert((ns, name), Stored { json: json.clone(), rv }).is_some() { "MODIFIED" } else { "ADDED" };
    (plural, rv, ty, json)
}

/// The text of a deleted object: `object` with the deletion's resourceVersion (what the `DELETED`
/// event and the `DELETE` answer carry).
fn deleted(object: &Stored, rv: u64) -> Arc<str> {
    let mut v = object.value();
    v["metadata"]["resourceVersion"] = json!(rv.to_string());
    Arc::from(v.to_string())
}

/// Appends an event (`object`: the object's JSON text) to the history and signals it to open
/// watches (under the state lock, so a bookmark never overtakes an event).
fn record(inner: &Inner, s: &mut State, plural: &str, rv: u64, ty: &'static str, object: &str) {
    let line: Arc<str> = Arc::from(format!("{{\"type\":\"{ty}\",\"object\":{object}}}\n"));
    s.collections.get_mut(plural).unwrap().history.push((rv, line.clone()));
    let _ = inner.signals.send(Signal::Event { plural: plural.to_string(), rv, line });
}

/// The registered kinds' documents of `examples/world` (found from the root package or from
/// `control-plane/`, whose tests include this file too).
pub fn world_documents() -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = [root.join("examples/world"), root.join("../examples/world")].into_iter().find(|d| d.is_dir()).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut out = Vec::new();
    for f in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
        for chunk in split_documents(&std::fs::read_to_string(&f).unwrap()) {
            let v: Value = serde_saphyr::from_str(&chunk.text).unwrap();
            let group = v["apiVersion"].as_str().and_then(|a| a.split_once('/')).map(|(g, _)| g).unwrap_or_default();
            if plural_of(group, v["kind"].as_str().unwrap_or_default()).is_some() {
                out.push(v);
            }
        }
    }
    out
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code})
}

fn respond(code: u16, body: Value) -> Response {
    respond_text(code, &body.to_string())
}

/// A JSON answer whose body is `json`, a stored object's text.
fn respond_text(code: u16, json: &str) -> Response {
    Response::builder().status(poem::http::StatusCode::from_u16(code).unwrap()).content_type("application/json").body(json.to_string())
}

/// A list answer (`<Kind>List` of `group` with `metadata`), streamed: the objects' texts are
/// shared with the store, and the body is written in pieces of about [`LIST_CHUNK`] bytes.
fn list_response(group: &str, kind: &str, metadata: Value, items: Vec<Arc<str>>) -> Response {
    let head = format!("{{\"apiVersion\":\"{group}/v1\",\"kind\":\"{kind}List\",\"metadata\":{metadata},\"items\":[");
    let body = ListBody { head: Some(head), items: items.into_iter(), first: true, done: false };
    Response::builder().content_type("application/json").body(Body::from_bytes_stream(futures::stream::iter(body)))
}

/// The pieces of a list answer's body (see [`list_response`]).
struct ListBody {
    head: Option<String>,
    items: std::vec::IntoIter<Arc<str>>,
    first: bool,
    done: bool,
}

impl Iterator for ListBody {
    type Item = Result<Vec<u8>, std::io::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut piece = self.head.take().map(String::into_bytes).unwrap_or_default();
        while piece.len() < LIST_CHUNK {
            let Some(item) = self.items.next() else {
                piece.extend_from_slice(b"]}");
                self.done = true;
                break;
            };
            if !std::mem::take(&mut self.first) {
                piece.push(b',');
            }
            piece.extend_from_slice(item.as_bytes());
        }
        Some(Ok(piece))
    }
}

async fn handle(inner: Arc<Inner>, mut req: Request) -> Response {
    let path = req.uri().path().to_string();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    if let ["apis", group, "v1", "namespaces", ns, plural, rest @ ..] = parts.as_slice() {
        let body = req.take_body().into_vec().await.unwrap_or_default();
        return object_request(&inner, req.method(), group, ns, plural, rest.first().copied(), &body);
    }
    let query: BTreeMap<String, String> = req
        .uri()
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, plural) = match parts.as_slice() {
        ["apis", group, "v1", plural] => (group.to_string(), plural.to_string()),
        _ => return respond(404, status(404, "NotFound", "the server could not find the requested resource")),
    };
    {
        let s = inner.lock();
        match s.collections.get(&plural) {
            Some(c) if c.group == group && c.installed => {}
            _ => return respond(404, status(404, "NotFound", "the server could not find the requested resource")),
        }
    }
    if query.get("watch").is_some_and(|v| v == "true" || v == "1") {
        watch(inner, &plural, &query)
    } else {
        list(inner, &plural, &query).await
    }
}

async fn list(inner: Arc<Inner>, plural: &str, query: &BTreeMap<String, String>) -> Response {
    let (mut held, latency) = {
        let s = inner.lock();
        (s.collections[plural].lists_held.subscribe(), s.page_latency)
    };
    // The sender lives as long as the server.
    let _ = held.wait_for(|held| !held).await;
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let mut s = inner.lock();
    let rv = s.rv;
    let c = s.collections.get_mut(plural).unwrap();
    if !c.installed {
        return respond(404, status(404, "NotFound", "the server could not find the requested resource"));
    }
    c.lists += 1;
    let request = ListRequest {
        resource_version: query.get("resourceVersion").cloned(),
        resource_version_match: query.get("resourceVersionMatch").cloned(),
        limit: query.get("limit").cloned(),
        continue_token: query.get("continue").cloned(),
    };
    let from_cache = request.reads_the_cache();
    c.list_requests.push(request);
    if from_cache {
        // The watch cache: one page, whatever the limit.
        let (items, cache_rv) = c.cache.clone().unwrap_or_else(|| (c.objects.values().map(|o| o.json.clone()).collect(), rv));
        let metadata = json!({"resourceVersion": cache_rv.to_string()});
        let (group, kind) = (c.group.clone(), c.kind.clone());
        drop(s);
        return list_response(&group, &kind, metadata, items);
    }
    let limit = query.get("limit").and_then(|l| l.parse::<usize>().ok()).filter(|l| *l > 0).unwrap_or(usize::MAX);
    // The continue token is "<list revision>-<offset>".
    let (list_rv, offset) = match query.get("continue").and_then(|t| t.split_once('-')) {
        Some((r, o)) => (r.parse().unwrap_or(rv), o.parse().unwrap_or(0)),
        None => (rv, 0),
    };
    let items: Vec<Arc<str>> = c.objects.values().skip(offset).take(limit).map(|o| o.json.clone()).collect();
    let next = offset + items.len();
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if next < c.objects.len() {
        metadata["continue"] = json!(format!("{list_rv}-{next}"));
    }
    let (group, kind) = (c.group.clone(), c.kind.clone());
    drop(s);
    list_response(&group, &kind, metadata, items)
}

/// One object request: `GET`, `PUT` or `DELETE` of `name`, or a `POST` to the collection.
fn object_request(
    inner: &Inner,
    method: &poem::http::Method,
    group: &str,
    ns: &str,
    plural: &str,
    name: Option<&str>,
    body: &[u8],
) -> Response {
    use poem::http::Method;
    let not_found = || respond(404, status(404, "NotFound", "the server could not find the requested resource"));
    let mut s = inner.lock();
    match s.collections.get(plural) {
        Some(c) if c.group == group && c.installed => {}
        _ => return not_found(),
    }
    if method != Method::GET {
        s.writes += 1;
        if let Some((code, reason)) = s.refuse_writes.clone() {
            return respond(code, status(code, &reason, &format!("refused by the fake ({reason})")));
        }
    }
    let key = |name: &str| (ns.to_string(), name.to_string());
    let parsed = || serde_json::from_slice::<Value>(body).ok().filter(Value::is_object);
    match (method.clone(), name) {
        (Method::GET, Some(name)) => {
            let Some(object) = s.collections[plural].objects.get(&key(name)).cloned() else { return not_found() };
            let pending = (plural.to_string(), ns.to_string(), name.to_string());
            if let Some(i) = s.change_after_get.iter().position(|p| *p == pending) {
                s.change_after_get.remove(i);
                let mut changed = object.value();
                changed["metadata"]["annotations"]["fake/concurrent-writer"] = json!(s.rv.to_string());
                let (plural, rv, ty, stored) = upsert(&mut s, changed);
                record(inner, &mut s, &plural, rv, ty, &stored);
            }
            respond_text(200, &object.json)
        }
        (Method::POST, None) => {
            let Some(mut doc) = parsed() else { return respond(400, status(400, "BadRequest", "the body is not an object")) };
            let Some(name) = doc["metadata"]["name"].as_str().map(str::to_string) else {
                return respond(422, status(422, "Invalid", "metadata.name: Required value"));
            };
            if s.collections[plural].objects.contains_key(&key(&name)) {
                return respond(409, status(409, "AlreadyExists", &format!("{plural} \"{name}\" already exists")));
            }
            doc["metadata"]["namespace"] = json!(ns);
            let (plural, rv, ty, stored) = upsert(&mut s, doc);
            record(inner, &mut s, &plural, rv, ty, &stored);
            respond_text(201, &stored)
        }
        (Method::PUT, Some(name)) => {
            let Some(mut doc) = parsed() else { return respond(400, status(400, "BadRequest", "the body is not an object")) };
            let Some(current) = s.collections[plural].objects.get(&key(name)).cloned() else { return not_found() };
            let sent = doc["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
            if !sent.is_empty() && sent != current.rv.to_string() {
                let message = format!("Operation cannot be fulfilled on {plural} \"{name}\": the object has been modified; please apply your changes to the latest version and try again");
                return respond(409, status(409, "Conflict", &message));
            }
            doc["metadata"]["namespace"] = json!(ns);
            doc["metadata"]["name"] = json!(name);
            doc["metadata"]["uid"] = current.value()["metadata"]["uid"].take();
            let (plural, rv, ty, stored) = upsert(&mut s, doc);
            record(inner, &mut s, &plural, rv, ty, &stored);
            respond_text(200, &stored)
        }
        (Method::DELETE, Some(name)) => {
            s.rv += 1;
            let rv = s.rv;
            let Some(object) = s.collections.get_mut(plural).unwrap().objects.remove(&key(name)) else { return not_found() };
            let object = deleted(&object, rv);
            record(inner, &mut s, plural, rv, "DELETED", &object);
            respond_text(200, &object)
        }
        _ => respond(405, status(405, "MethodNotAllowed", "not supported by the fake")),
    }
}

fn watch(inner: Arc<Inner>, plural: &str, query: &BTreeMap<String, String>) -> Response {
    if query.get("sendInitialEvents").is_some_and(|v| v == "true") {
        return respond(400, status(400, "BadRequest", "sendInitialEvents is not supported by this fake"));
    }
    let bookmarks = query.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let timeout = Duration::from_secs(query.get("timeoutSeconds").and_then(|t| t.parse().ok()).unwrap_or(1800));
    let from: u64 = query.get("resourceVersion").and_then(|r| r.parse().ok()).unwrap_or(0);
    let (tx, rx) = mpsc::unbounded_channel::<Result<Vec<u8>, std::io::Error>>();
    let mut s = inner.lock();
    if s.watches_blocked {
        s.collections.get_mut(plural).unwrap().refused_watches += 1;
        return respond(500, status(500, "InternalError", "watches are blocked (fake)"));
    }
    let compacted = s.compacted;
    let c = s.collections.get_mut(plural).unwrap();
    c.watches += 1;
    let (group, kind) = (c.group.clone(), c.kind.clone());
    if from != 0 && from < compacted {
        let gone = status(410, "Expired", &format!("too old resource version: {from} ({compacted})"));
        let _ = tx.send(Ok((json!({"type": "ERROR", "object": gone}).to_string() + "\n").into_bytes()));
    } else {
        for (_, line) in c.history.iter().filter(|(rv, _)| *rv > from) {
            let _ = tx.send(Ok(line.as_bytes().to_vec()));
        }
        let mut signals = inner.signals.subscribe();
        let plural = plural.to_string();
        let inner2 = inner.clone();
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            let mut tick = tokio::time::interval(BOOKMARK_EVERY);
            tick.tick().await;
            loop {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => return,
                    () = tx.closed() => return,
                    sig = signals.recv() => match sig {
                        Ok(Signal::Event { plural: p, line, .. }) => {
                            if p == plural && tx.send(Ok(line.as_bytes().to_vec())).is_err() {
                                return;
                            }
                        }
                        Ok(Signal::Gone) => {
                            let gone = status(410, "Expired", "too old resource version (compacted)");
                            let _ = tx.send(Ok((json!({"type": "ERROR", "object": gone}).to_string() + "\n").into_bytes()));
                            return;
                        }
                        Ok(Signal::Drop) | Err(_) => {
                            let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "dropped (fake)")));
                            return;
                        }
                    },
                    _ = tick.tick(), if bookmarks => {
                        // Under the state lock no event can be signalled: deliver the pending
                        // ones first, then bookmark the current revision.
                        let s = inner2.lock();
                        loop {
                            match signals.try_recv() {
                                Ok(Signal::Event { plural: p, line, .. }) => {
                                    if p == plural {
                                        let _ = tx.send(Ok(line.as_bytes().to_vec()));
                                    }
                                }
                                Ok(Signal::Gone) => {
                                    let gone = status(410, "Expired", "too old resource version (compacted)");
                                    let _ = tx.send(Ok((json!({"type": "ERROR", "object": gone}).to_string() + "\n").into_bytes()));
                                    return;
                                }
                                Ok(Signal::Drop) | Err(broadcast::error::TryRecvError::Lagged(_)) => {
                                    let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "dropped (fake)")));
                                    return;
                                }
                                Err(_) => break,
                            }
                        }
                        let bm = json!({"type": "BOOKMARK", "object": {
                            "apiVersion": format!("{group}/v1"), "kind": kind, "metadata": {"resourceVersion": s.rv.to_string()}
                        }});
                        drop(s);
                        if tx.send(Ok((bm.to_string() + "\n").into_bytes())).is_err() {
                            return;
                        }
                    }
                }
            }
        });
    }
    drop(s);
    let body = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) });
    Response::builder().content_type("application/json").body(Body::from_bytes_stream(body))
}
