//! Live updates: the `changes` subscription over a bounded, in-memory change log.
//!
//! **The log.** [`ChangeLog::follow`] follows the store's commits ([`storage::Store::subscribe`])
//! on a thread of its own and keeps, for each record a commit wrote or removed, its kind, key
//! and the scopes that could see it before and after ([`storage::RecordChange`]), under a
//! [`Position`]: the commit's revision and the record's index in it. It keeps at most
//! [`ChangeLogSettings::max_entries`] entries, none older than [`ChangeLogSettings::retention`];
//! what falls out of it moves the log's *floor*.
//!
//! **Positions** are opaque strings (`RecordChange.position`): the log's identity, revision and
//! index. `changes(after: P)` replays every entry after `P`, then follows live. With history on
//! (`history.enabled`, [`storage::history`]) the identity is the store's durable log, the same
//! positions are written there in the same commit, and a position below the memory's floor is
//! read from it ([`ChangeLog::read_after_in`]): a subscription resumes across restarts. Without
//! history the identity is random per process. A position below the floor of both, of another
//! log (another store, a restored one) or of a future revision gets one error with code `GONE`
//! (the subscription ends): the client refetches and subscribes anew without `after`, as with
//! Kubernetes' `410 Gone`.
//!
//! **Isolation per event.** A viewer gets an entry only when it could see the record before or
//! can after ([`Viewer::can_see`] of the scopes then; a group viewer's teams are resolved again
//! from the store for every batch of entries): seen before and after → `UPDATED`, after only →
//! `CREATED`, before only → `DELETED` (a record that left its scope). `node` is the record now,
//! loaded as `node(id:)` loads it (null once deleted or invisible); nested fields follow the
//! rules of queries, `…Info` included.
//!
//! **Resolution.** Each event is resolved on a read view and deadline of its own
//! ([`ChangeEvents`], an extension of the subscription schema): a subscription holds no read
//! transaction between events. Subscriptions of the same operation and viewer resolve each
//! entry once and share the answer ([`answers`]).

use crate::deadline::Deadline;
use crate::entity::Loader;
use crate::fields::{enum_item, field, integer, string};
use crate::request::RequestContext;
use crate::viewer::Viewer;
use async_graphql::dynamic::{FieldValue, InputValue, SubscriptionField, SubscriptionFieldFuture, TypeRef};
use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextExecute};
use async_graphql::{Error, ErrorExtensions};
use base64::Engine;
use schema::{Key, KindId, Scope};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use storage::Store;

pub mod answers;

/// Bounds of the change log (`subscriptions.changeLogSize`, `subscriptions.changeLogRetention`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChangeLogSettings {
    /// Most entries kept (one per record written or removed).
    pub max_entries: usize,
    /// Longest an entry is kept.
    pub retention: Duration,
}

impl Default for ChangeLogSettings {
    fn default() -> ChangeLogSettings {
        ChangeLogSettings { max_entries: 10_000, retention: Duration::from_secs(3600) }
    }
}

/// Where an entry sits in the log: the commit's revision, then the record's index in the
/// commit (the store's durable log uses the same positions). Ordered; `(R, u32::MAX)` is
/// "everything of revision R".
pub use storage::history::LogPosition as Position;

/// One record written or removed, as kept in the log.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Where it sits.
    pub position: Position,
    /// The record's kind.
    pub kind: KindId,
    /// The record's natural key.
    pub key: Key,
    /// Scopes that could see the record before (`None`: it did not exist).
    pub before: Option<Vec<Scope>>,
    /// Scopes that can see it after (`None`: it was removed).
    pub after: Option<Vec<Scope>>,
    at: Instant,
}

/// Why entries cannot be read from a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gone;

struct Ring {
    entries: VecDeque<Arc<Entry>>,
    /// Every entry after this position is kept.
    floor: Position,
}

struct ChangeLogState {
    identity: u64,
    /// Whether positions below the ring's floor are read from the store's durable log
    /// ([`storage::history`]; `history.enabled`).
    durable: bool,
    settings: ChangeLogSettings,
    ring: Mutex<Ring>,
    /// The position of the newest entry (or the floor): changed after each append.
    head: tokio::sync::watch::Sender<Position>,
    /// The groups of subscriptions that share answers.
    groups: Arc<answers::Groups>,
}

/// The bounded change log of one store (see the module documentation). Cheap to clone.
#[derive(Clone)]
pub struct ChangeLog(Arc<ChangeLogState>);

impl std::fmt::Debug for ChangeLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeLog").field("identity", &self.0.identity).field("settings", &self.0.settings).finish_non_exhaustive()
    }
}

impl ChangeLog {
    /// Starts following `store`'s commits from its current revision, on a thread of its own
    /// that ends with the store's last handle.
    ///
    /// # Errors
    /// The store's revision cannot be read, or the thread cannot be started.
    pub fn follow(store: &Store, settings: ChangeLogSettings) -> std::io::Result<ChangeLog> {
        // Subscribed before the revision is read: no commit falls between the two.
        let commits = store.subscribe();
        let view = store.read().map_err(std::io::Error::other)?;
        let revision = view.revision().map_err(std::io::Error::other)?;
        let mut log = ChangeLog::empty(revision, settings);
        if store.history_settings().enabled {
            // Positions name the store's log: they stay valid across restarts.
            let identity = view.log_identity().map_err(std::io::Error::other)?;
            let state = Arc::get_mut(&mut log.0).expect("invariant: the log was just made");
            (state.identity, state.durable) = (identity, true);
        }
        drop(view);
        let shared = log.0.clone();
        std::thread::Builder::new().name("change-log".into()).spawn(move || loop {
            match commits.recv_timeout(Duration::from_secs(1)) {
                Ok(c) => shared.append(c.revision, &c.changes),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => shared.expire(Instant::now()),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
            }
        })?;
        Ok(log)
    }

    /// An empty log whose floor is the end of `revision` (tests feed it with
    /// [`ChangeLog::append`]).
    pub fn empty(revision: u64, settings: ChangeLogSettings) -> ChangeLog {
        use std::hash::{BuildHasher, Hasher};
        let identity = std::collections::hash_map::RandomState::new().build_hasher().finish();
        let floor = Position::end_of(revision);
        ChangeLog(Arc::new(ChangeLogState {
            identity,
            durable: false,
            settings: ChangeLogSettings { max_entries: settings.max_entries.max(1), ..settings },
            ring: Mutex::new(Ring { entries: VecDeque::new(), floor }),
            head: tokio::sync::watch::Sender::new(floor),
            groups: Arc::default(),
        }))
    }

    /// Appends the changes of the commit of `revision` (ignored when not newer than the log).
    pub fn append(&self, revision: u64, changes: &[storage::RecordChange]) {
        self.0.append(revision, changes);
    }

    /// The newest position (nothing after it yet).
    pub fn head(&self) -> Position {
        *self.0.head.borrow()
    }

    /// Entries kept now.
    pub fn len(&self) -> usize {
        self.0.lock().entries.len()
    }

    /// Whether no entry is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the subscriptions of this log share ([`answers`]).
    pub fn sharing(&self) -> answers::Sharing {
        self.0.groups.sharing()
    }

    /// Up to `max` entries after `from`, oldest first.
    ///
    /// # Errors
    /// [`Gone`] when entries after `from` were dropped (`from` is below the floor) or `from`
    /// is beyond the head.
    pub fn read_after(&self, from: Position, max: usize) -> Result<Vec<Arc<Entry>>, Gone> {
        let ring = self.0.lock();
        let head = ring.entries.back().map_or(ring.floor, |e| e.position);
        if from < ring.floor || from > head {
            return Err(Gone);
        }
        let start = ring.entries.partition_point(|e| e.position <= from);
        Ok(ring.entries.range(start..).take(max).cloned().collect())
    }

    /// [`ChangeLog::read_after`], reading a position below the memory's floor from `store`'s
    /// durable log when it keeps one (entries up to this log's head).
    ///
    /// # Errors
    /// [`Gone`] when neither keeps every entry after `from`, or `from` is beyond the head.
    pub fn read_after_in(&self, store: &Store, from: Position, max: usize) -> Result<Vec<Arc<Entry>>, Gone> {
        let head = {
            let ring = self.0.lock();
            let head = ring.entries.back().map_or(ring.floor, |e| e.position);
            if from > head {
                return Err(Gone);
            }
            if from >= ring.floor || !self.0.durable {
                drop(ring);
                return self.read_after(from, max);
            }
            head
        };
        let logged = store.read().and_then(|v| v.log_after(from, max)).map_err(|e| {
            tracing::warn!(error = %e, "reading the durable change log failed");
            Gone
        })?;
        let now = Instant::now();
        let entries = logged.ok_or(Gone)?.into_iter().map(|e| Entry {
            position: e.position,
            kind: e.kind,
            key: e.key,
            before: e.before,
            after: e.after,
            at: now,
        });
        Ok(entries.filter(|e| e.position <= head).map(Arc::new).collect())
    }

    /// Waits until the head moves past `seen`.
    pub async fn wait_after(&self, seen: Position) {
        let mut head = self.0.head.subscribe();
        // The sender lives as long as the log.
        let _ = head.wait_for(|h| *h > seen).await;
    }

    /// The opaque form of `p` (`RecordChange.position`).
    pub fn encode(&self, p: Position) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{:016x}.{}.{}", self.0.identity, p.revision, p.index))
    }

    /// The position `text` encodes.
    ///
    /// # Errors
    /// `None` when it is not a position; `Some(Err(Gone))` when it is one of another log.
    pub fn decode(&self, text: &str) -> Option<Result<Position, Gone>> {
        if text.len() > MAX_POSITION_BYTES {
            return None;
        }
        // Padded or not: the position is base64url, and a client's encoder may pad it.
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()?;
        let raw = std::str::from_utf8(&raw).ok()?;
        let mut parts = raw.split('.');
        let identity = u64::from_str_radix(parts.next()?, 16).ok()?;
        let revision = parts.next()?.parse().ok()?;
        let index = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(if identity == self.0.identity { Ok(Position { revision, index }) } else { Err(Gone) })
    }
}

/// The longest position text accepted in `after`.
pub const MAX_POSITION_BYTES: usize = 128;

impl ChangeLogState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ring> {
        // A panic while holding the lock cannot leave the ring inconsistent: recover.
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn append(&self, revision: u64, changes: &[storage::RecordChange]) {
        let now = Instant::now();
        let head = {
            let mut ring = self.lock();
            let newest = ring.entries.back().map_or(ring.floor, |e| e.position);
            if revision <= newest.revision {
                return;
            }
            for (i, c) in changes.iter().enumerate() {
                let position = Position { revision, index: u32::try_from(i).unwrap_or(u32::MAX - 1) };
                ring.entries.push_back(Arc::new(Entry {
                    position,
                    kind: c.kind,
                    key: c.key.clone(),
                    before: c.before.clone(),
                    after: c.after.clone(),
                    at: now,
                }));
            }
            self.trim(&mut ring, now);
            ring.entries.back().map_or(ring.floor, |e| e.position)
        };
        self.head.send_replace(head);
    }

    fn expire(&self, now: Instant) {
        let mut ring = self.lock();
        self.trim(&mut ring, now);
    }

    fn trim(&self, ring: &mut Ring, now: Instant) {
        while let Some(front) = ring.entries.front() {
            let old = now.saturating_duration_since(front.at) > self.settings.retention;
            if ring.entries.len() <= self.settings.max_entries && !old {
                break;
            }
            ring.floor = front.position;
            ring.entries.pop_front();
        }
    }
}

/// What happened to a record for one viewer, or `None` when the viewer sees it neither before
/// nor after.
pub fn operation_for(viewer: &Viewer, e: &Entry) -> Option<&'static str> {
    let sees = |scopes: &Option<Vec<Scope>>| scopes.as_deref().is_some_and(|s| viewer.can_see(s));
    match (sees(&e.before), sees(&e.after)) {
        (true, true) => Some("UPDATED"),
        (false, true) => Some("CREATED"),
        (true, false) => Some("DELETED"),
        (false, false) => None,
    }
}

/// The request data of a subscription ([`crate::Api::prepare_subscription`]).
pub struct SubscriptionData {
    pub(crate) store: Store,
    pub(crate) viewer: Viewer,
    pub(crate) log: ChangeLog,
    /// Where a subscription without `after` starts: the log's head when it was prepared.
    pub(crate) start: Position,
    /// A fresh deadline for each event (the server's request timeout and shutdown flag).
    pub(crate) deadline: Arc<dyn Fn() -> Deadline + Send + Sync>,
    pub(crate) now: Option<schema::Timestamp>,
    pub(crate) limits: Arc<crate::limits::Limits>,
    /// The process's memory budget for requests in flight (each event is one).
    pub(crate) pool: Arc<crate::deadline::MemoryPool>,
    /// The subscriptions this one shares answers with.
    pub(crate) group: Arc<answers::Group>,
    /// The event about to be answered ([`ChangeEvents`] takes it).
    pub(crate) next: Mutex<Option<NextEvent>>,
}

/// How the next event of a subscription is answered.
pub(crate) enum NextEvent {
    /// Resolved on this context; the answer is kept for the group when it has no error.
    Resolve(Box<RequestContext>, Option<Share>),
    /// The answer another subscription of the group resolved.
    ChangeLogState(async_graphql::Value),
}

/// Where a resolved answer is kept for the other members of a group.
pub(crate) struct Share {
    group: Arc<answers::Group>,
    position: Position,
    teams: Vec<String>,
}

impl SubscriptionData {
    /// The data of a subscription of `request` by `viewer` following `log` from its head.
    pub(crate) fn new(
        store: &Store,
        viewer: Viewer,
        request: &async_graphql::Request,
        log: &ChangeLog,
        deadline: Arc<dyn Fn() -> Deadline + Send + Sync>,
        now: Option<schema::Timestamp>,
        (limits, pool): (Arc<crate::limits::Limits>, Arc<crate::deadline::MemoryPool>),
    ) -> SubscriptionData {
        let group = log.0.groups.join(answers::GroupKey::new(request, &viewer));
        SubscriptionData {
            store: store.clone(),
            viewer,
            log: log.clone(),
            start: log.head(),
            deadline,
            now,
            limits,
            pool,
            group,
            next: Mutex::new(None),
        }
    }

    /// The viewer with a group viewer's teams resolved from the store now.
    fn viewer_now(&self) -> Result<Viewer, Error> {
        let mut viewer = self.viewer.clone();
        if viewer.kind == crate::viewer::ViewerKind::Group {
            viewer.resolve(&self.store.read().map_err(crate::error::storage)?).map_err(crate::error::storage)?;
        }
        Ok(viewer)
    }

    /// A read view and deadline for one event of `viewer`.
    fn context(&self, viewer: Viewer) -> Result<RequestContext, Error> {
        let view = self.store.read().map_err(crate::error::storage)?;
        Ok(RequestContext::new(&self.store, view, viewer, (self.deadline)(), self.now, &self.limits, &self.pool))
    }
}

/// The subscription schema's extension: each event is executed with the [`RequestContext`]
/// its stream prepared ([`SubscriptionData::next`]), so resolvers read a view of that moment.
pub(crate) struct ChangeEvents;

impl ExtensionFactory for ChangeEvents {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(ChangeEvents)
    }
}

#[async_graphql::async_trait::async_trait]
impl Extension for ChangeEvents {
    async fn execute(&self, ctx: &ExtensionContext<'_>, operation_name: Option<&str>, next: NextExecute<'_>) -> async_graphql::Response {
        let prepared = ctx.data_opt::<SubscriptionData>().and_then(|d| d.next.lock().unwrap_or_else(|e| e.into_inner()).take());
        match prepared {
            Some(NextEvent::ChangeLogState(data)) => async_graphql::Response::new(data),
            Some(NextEvent::Resolve(request, share)) => {
                let deadline = request.deadline.clone();
                let mut data = async_graphql::Data::default();
                data.insert(*request);
                let response = next.run_with_data(ctx, operation_name, data).await;
                if let Some(s) = share.filter(|_| response.errors.is_empty()) {
                    s.group.keep(s.position, &s.teams, answers::Answer::Sent(response.data.clone()), deadline.spent());
                }
                response
            }
            None => next.run(ctx, operation_name).await,
        }
    }
}

/// One event of `changes`.
struct ChangeEvent {
    position: String,
    revision: u64,
    operation: &'static str,
    kind: KindId,
    type_name: &'static str,
    key: Key,
}

/// The GraphQL enum value of a kind (`ApiSubscription` → `API_SUBSCRIPTION`).
pub fn kind_value(kind: KindId) -> String {
    let mut out = String::new();
    for (i, c) in kind.name().char_indices() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Entries read from the log at once by one subscription.
const READ_BATCH: usize = 256;

/// `GONE`: the position cannot be resumed from.
pub fn gone() -> Error {
    Error::new("the position is no longer in the change log, or is of another server: refetch, then subscribe again without `after`")
        .extend_with(|_, e| e.set("code", "GONE"))
}

/// Registers `RecordKind`, `ChangeOperation`, `RecordChange` and returns the `changes`
/// subscription field; `loaders` load a node by type name (`node(id:)`'s), `types` give each
/// kind's GraphQL type.
pub(crate) fn register(builder: &mut crate::entity::Builder, loaders: Arc<HashMap<&'static str, Loader>>) -> SubscriptionField {
    let types: Arc<HashMap<KindId, &'static str>> = Arc::new(builder.type_names.clone());
    let served: Vec<KindId> = KindId::ALL.iter().copied().filter(|k| types.contains_key(k)).collect();
    let values: Vec<String> = served.iter().map(|k| kind_value(*k)).collect();
    builder.enumeration("RecordKind", &values.iter().map(String::as_str).collect::<Vec<_>>());
    builder.enumeration("ChangeOperation", &["CREATED", "UPDATED", "DELETED"]);
    let node_loaders = loaders.clone();
    builder.object(
        async_graphql::dynamic::Object::new("RecordChange")
            .description("A record written or removed, as the viewer sees it (subscription `changes`).")
            .field(
                field::<ChangeEvent>("position", TypeRef::named_nn(TypeRef::STRING), |e, _| Ok(string(&e.position)))
                    .description("Opaque: `changes(after: position)` resumes after this event."),
            )
            .field(
                field::<ChangeEvent>("revision", TypeRef::named_nn(TypeRef::INT), |e, _| {
                    Ok(integer(i64::try_from(e.revision).unwrap_or(i64::MAX)))
                })
                .description("The store revision of the commit."),
            )
            .field(field::<ChangeEvent>("operation", TypeRef::named_nn("ChangeOperation"), |e, _| Ok(enum_item(e.operation))))
            .field(field::<ChangeEvent>("kind", TypeRef::named_nn("RecordKind"), |e, _| Ok(enum_item(&kind_value(e.kind)))))
            .field(field::<ChangeEvent>("id", TypeRef::named_nn(TypeRef::ID), |e, _| {
                Ok(string(&schema::GlobalId::new(e.type_name, &e.key).encode()))
            }))
            .field(
                field::<ChangeEvent>("node", TypeRef::named("Node"), move |e, request| {
                    if e.operation == "DELETED" {
                        return Ok(None);
                    }
                    match node_loaders.get(e.type_name) {
                        Some(load) => load(request, &e.key),
                        None => Ok(None),
                    }
                })
                .description("The record now (null once deleted or out of the viewer's sight)."),
            ),
    );
    SubscriptionField::new("changes", TypeRef::named_nn("RecordChange"), move |ctx| {
        let types = types.clone();
        SubscriptionFieldFuture::new(async move {
            let data = ctx.data::<SubscriptionData>()?;
            let kinds: Option<Vec<KindId>> = match ctx.args.get("kinds") {
                Some(v) if !v.is_null() => {
                    let kind = |name: &str| {
                        KindId::ALL.iter().copied().find(|id| kind_value(*id) == name).ok_or_else(|| crate::error::bad_input("unknown kind"))
                    };
                    // A single value stands for a list of one (GraphQL's input coercion).
                    let kinds: Vec<KindId> = match v.list() {
                        Ok(list) => list.iter().map(|k| kind(k.enum_name()?)).collect::<Result<_, Error>>()?,
                        Err(_) => vec![kind(v.enum_name()?)?],
                    };
                    if kinds.is_empty() {
                        return Err(crate::error::bad_input("`kinds` is empty: give at least one kind, or leave it out for every kind"));
                    }
                    Some(kinds)
                }
                _ => None,
            };
            start(data, ctx.args.get("after"), kinds, None, types)
        })
    })
    .description("Changes of the records the viewer may see, as they are committed: every kind, or those of `kinds`; after the event at `after` (a `RecordChange.position` of this server) or from now.")
    .argument(InputValue::new("kinds", TypeRef::named_nn_list("RecordKind")))
    .argument(InputValue::new("after", TypeRef::named(TypeRef::STRING)))
}

/// Whether the record `key` now matches a `where` filter, on the event's context.
type EventFilter = Arc<dyn Fn(&RequestContext, &Key) -> bool + Send + Sync>;

/// The position a subscription starts after: `after` decoded, or the log's head when it was
/// prepared; then the stream.
fn start<'a>(
    data: &'a SubscriptionData,
    after: Option<async_graphql::dynamic::ValueAccessor<'_>>,
    kinds: Option<Vec<KindId>>,
    filter: Option<EventFilter>,
    types: Arc<HashMap<KindId, &'static str>>,
) -> Result<impl async_graphql::futures_util::Stream<Item = Result<FieldValue<'a>, Error>> + 'a, Error> {
    let from = match after {
        Some(v) if !v.is_null() => {
            let text = v.string()?;
            match data.log.decode(text) {
                None => return Err(crate::error::bad_input("`after` is not a position of `RecordChange.position`")),
                Some(Err(Gone)) => return Err(gone()),
                Some(Ok(p)) => p,
            }
        }
        _ => data.start,
    };
    // Checked now, so that a bad position fails the subscribe itself.
    data.log.read_after_in(&data.store, from, 0).map_err(|Gone| gone())?;
    let follow = Follow { data, kinds, filter, types, from, pending: VecDeque::new(), viewer: None, done: false };
    Ok(async_graphql::futures_util::stream::unfold(follow, Follow::next))
}

/// The `<type>Changes(where:, after:)` subscription of entity `K` (`applicationChanges`): the
/// changes of `K` only, those created or updated kept when the record matches `where` now
/// (deletes are always sent: the old record is not kept to be matched).
pub(crate) fn kind_field<K: crate::entity::Entity>(where_type: Arc<crate::filter::WhereType<K::Record>>) -> SubscriptionField {
    let mut name = K::TYPE.to_string();
    name[..1].make_ascii_lowercase();
    let field_name = format!("{name}Changes");
    let types: Arc<HashMap<KindId, &'static str>> = Arc::new(HashMap::from([(K::ID, K::TYPE)]));
    SubscriptionField::new(field_name, TypeRef::named_nn("RecordChange"), move |ctx| {
        let (types, where_type) = (types.clone(), where_type.clone());
        SubscriptionFieldFuture::new(async move {
            let data = ctx.data::<SubscriptionData>()?;
            let filter: Option<EventFilter> = match ctx.args.get("where") {
                Some(w) if !w.is_null() => {
                    let pred = Arc::new(where_type.parse(&w.object()?)?);
                    Some(Arc::new(move |request: &RequestContext, key: &Key| {
                        matches!(request.load_visible::<K>(key), Ok(Some(s)) if pred.eval(&s, request))
                    }))
                }
                _ => None,
            };
            start(data, ctx.args.get("after"), Some(vec![K::ID]), filter, types)
        })
    })
    .description(format!("Changes of the `{}` records the viewer may see, as `changes` gives them; `where` applies to the record as it is after the change (a delete is always sent).", K::TYPE))
    .argument(InputValue::new("where", TypeRef::named(format!("{}WhereInput", K::TYPE))))
    .argument(InputValue::new("after", TypeRef::named(TypeRef::STRING)))
}

/// The state of one `changes` stream.
struct Follow<'a> {
    data: &'a SubscriptionData,
    kinds: Option<Vec<KindId>>,
    /// `where` of a `<type>Changes` field: applies to the record as it is now (deletes pass).
    filter: Option<EventFilter>,
    types: Arc<HashMap<KindId, &'static str>>,
    /// The last entry handled.
    from: Position,
    /// Entries read, not handled yet.
    pending: VecDeque<Arc<Entry>>,
    /// The viewer entries are judged for: a group viewer's teams are resolved again after a
    /// change of a team (only teams' records decide them).
    viewer: Option<Viewer>,
    done: bool,
}

impl<'a> Follow<'a> {
    async fn next(mut self) -> Option<(Result<FieldValue<'a>, Error>, Follow<'a>)> {
        if self.done {
            return None;
        }
        loop {
            if self.pending.is_empty() {
                match self.data.log.read_after_in(&self.data.store, self.from, READ_BATCH) {
                    Err(Gone) => {
                        self.done = true;
                        return Some((Err(gone()), self));
                    }
                    Ok(entries) if entries.is_empty() => {
                        self.data.log.wait_after(self.from).await;
                        continue;
                    }
                    Ok(entries) => {
                        if self.data.viewer.kind == crate::viewer::ViewerKind::Group && entries.iter().any(|e| e.kind == KindId::Team) {
                            self.viewer = None;
                        }
                        self.pending.extend(entries);
                    }
                }
            }
            let viewer = match self.viewer.take().map_or_else(|| self.data.viewer_now(), Ok) {
                Ok(v) => self.viewer.insert(v).clone(),
                Err(e) => {
                    self.done = true;
                    return Some((Err(e), self));
                }
            };
            let shared = self.data.group.shared();
            while let Some(e) = self.pending.pop_front() {
                self.from = e.position;
                if self.kinds.as_ref().is_some_and(|k| !k.contains(&e.kind)) {
                    continue;
                }
                let (Some(operation), Some(&type_name)) = (operation_for(&viewer, &e), self.types.get(&e.kind)) else { continue };
                if shared {
                    match self.data.group.find(e.position, &viewer.teams) {
                        Some(answers::Answer::Skipped) => continue,
                        Some(answers::Answer::Sent(data)) => {
                            *self.data.next.lock().unwrap_or_else(|e| e.into_inner()) = Some(NextEvent::ChangeLogState(data));
                            return Some((Ok(FieldValue::NULL), self));
                        }
                        None => {}
                    }
                }
                let request = match self.data.context(viewer.clone()) {
                    Ok(request) => request,
                    Err(e) => {
                        self.done = true;
                        return Some((Err(e), self));
                    }
                };
                if operation != "DELETED" && self.filter.as_ref().is_some_and(|f| !f(&request, &e.key)) {
                    if shared {
                        self.data.group.keep(e.position, &viewer.teams, answers::Answer::Skipped, 0);
                    }
                    continue;
                }
                let event = ChangeEvent {
                    position: self.data.log.encode(e.position),
                    revision: e.position.revision,
                    operation,
                    kind: e.kind,
                    type_name,
                    key: e.key.clone(),
                };
                let share = shared.then(|| Share { group: self.data.group.clone(), position: e.position, teams: viewer.teams.clone() });
                *self.data.next.lock().unwrap_or_else(|e| e.into_inner()) = Some(NextEvent::Resolve(Box::new(request), share));
                return Some((Ok(FieldValue::owned_any(event)), self));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(kind: KindId, key: &str, before: Option<Vec<Scope>>, after: Option<Vec<Scope>>) -> storage::RecordChange {
        storage::RecordChange { kind, key: Key::new(&[key]), before, after }
    }

    #[test]
    fn keeps_at_most_its_bound_and_answers_gone_below_the_floor() {
        let log = ChangeLog::empty(10, ChangeLogSettings { max_entries: 3, retention: Duration::from_secs(60) });
        let start = log.head();
        assert_eq!(start, Position::end_of(10));
        assert_eq!(log.read_after(start, 10).unwrap().len(), 0);
        log.append(11, &[change(KindId::Team, "a", None, Some(vec![Scope::All])), change(KindId::Team, "b", None, None)]);
        log.append(12, &[change(KindId::Team, "c", None, Some(vec![]))]);
        assert_eq!(log.len(), 3);
        let all = log.read_after(start, 10).unwrap();
        assert_eq!(all.iter().map(|e| (e.position.revision, e.position.index)).collect::<Vec<_>>(), vec![(11, 0), (11, 1), (12, 0)]);
        assert_eq!(log.read_after(all[0].position, 10).unwrap().len(), 2, "resumes after a position");
        log.append(13, &[change(KindId::Team, "d", None, Some(vec![]))]);
        assert_eq!(log.len(), 3, "bounded");
        assert_eq!(log.read_after(start, 10).err(), Some(Gone), "the first entry is gone");
        assert_eq!(log.read_after(all[0].position, 10).unwrap().len(), 3, "the floor itself is still resumable");
        assert_eq!(log.read_after(Position::end_of(99), 10).err(), Some(Gone), "a future position");
        log.append(12, &[change(KindId::Team, "old", None, None)]);
        assert_eq!(log.len(), 3, "an older revision is ignored");
    }

    #[test]
    fn entries_older_than_the_retention_are_dropped() {
        let log = ChangeLog::empty(0, ChangeLogSettings { max_entries: 100, retention: Duration::ZERO });
        log.append(1, &[change(KindId::Team, "a", None, Some(vec![]))]);
        log.0.expire(Instant::now() + Duration::from_millis(1));
        assert_eq!(log.len(), 0);
        assert_eq!(log.read_after(Position::end_of(0), 10).err(), Some(Gone));
        assert_eq!(log.read_after(Position { revision: 1, index: 0 }, 10).unwrap().len(), 0);
    }

    #[test]
    fn positions_round_trip_and_name_their_log() {
        let log = ChangeLog::empty(0, ChangeLogSettings::default());
        let other = ChangeLog::empty(0, ChangeLogSettings::default());
        let p = Position { revision: 42, index: 7 };
        assert_eq!(log.decode(&log.encode(p)), Some(Ok(p)));
        assert_eq!(other.decode(&log.encode(p)), Some(Err(Gone)), "another process's position");
        // Of 20 bytes: a padding encoder ends it with `=`.
        let short = Position { revision: 4, index: 0 };
        let padded = base64::engine::general_purpose::URL_SAFE.encode(format!("{:016x}.4.0", log.0.identity));
        assert!(padded.ends_with('='), "{padded}");
        assert_eq!(log.decode(&padded), Some(Ok(short)));
        for bad in
            ["", "x", "!!!", &"A".repeat(MAX_POSITION_BYTES + 1), &base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("1.2.3.4")]
        {
            assert_eq!(log.decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_viewer_gets_what_it_saw_or_sees() {
        let claims = serde_json::json!({"clientId": "payments--checkout--app", "scope": "tardis:team:all", "env": "poc"});
        let viewer = Viewer::from_claims(&claims, "tardis").unwrap();
        let mine = vec![Scope::Team { env: "poc".into(), team: "payments--checkout".into() }];
        let theirs = vec![Scope::Team { env: "poc".into(), team: "other--team".into() }];
        let entry = |before: Option<Vec<Scope>>, after: Option<Vec<Scope>>| Entry {
            position: Position { revision: 1, index: 0 },
            kind: KindId::Application,
            key: Key::new(&["k"]),
            before,
            after,
            at: Instant::now(),
        };
        assert_eq!(operation_for(&viewer, &entry(None, Some(mine.clone()))), Some("CREATED"));
        assert_eq!(operation_for(&viewer, &entry(Some(mine.clone()), Some(mine.clone()))), Some("UPDATED"));
        assert_eq!(operation_for(&viewer, &entry(Some(mine.clone()), None)), Some("DELETED"));
        assert_eq!(operation_for(&viewer, &entry(Some(mine.clone()), Some(theirs.clone()))), Some("DELETED"), "left its scope");
        assert_eq!(operation_for(&viewer, &entry(Some(theirs.clone()), Some(mine))), Some("CREATED"), "entered it");
        assert_eq!(operation_for(&viewer, &entry(Some(theirs.clone()), Some(theirs.clone()))), None);
        assert_eq!(operation_for(&viewer, &entry(Some(theirs), None)), None, "a delete it never saw");
        assert_eq!(kind_value(KindId::ApiSubscription), "API_SUBSCRIPTION");
    }
}
