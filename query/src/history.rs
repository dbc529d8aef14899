//! `history(id:)` and `activity(...)`: the revisions the store's change log keeps
//! ([`storage::history`]), as the viewer may see them.
//!
//! **Isolation per revision.** A viewer sees a revision, and an activity entry, only when it could
//! see the object before or after that change (the scopes the log keeps with it), exactly as a
//! `changes` event is filtered; `totalCount` counts only those. `history` of an object the
//! viewer sees no revision of, and cannot see now, is `NOT_FOUND`, like `node(id:)`.
//!
//! **A past node** is its revision's source document translated with this build's rules
//! ([`PastKind`]): its scalar fields are those of that revision, its edges resolve the links it
//! had then against today's records (null once gone or not visible), and its secrets are masked
//! for every caller ([`storage::Stored::as_of`]).
//!
//! **`changedFields`** names the GraphQL fields of the kind whose values differ from the
//! object's revision before (scalar fields by their values, the others by the record's data
//! under the same name); a creation lists the fields that have a value, a delete none. For the
//! oldest revision kept, when the one before it was pruned, the fields that have a value.
//!
//! **`activity`** lists the changes of the objects the viewer's teams own (every object for an
//! admin), newest first; records visible to a whole environment (zones, groups, the catalogue)
//! are in an admin's activity and in their own `history`.

use crate::column::Column;
use crate::entity::{Builder, Entity, ObjectFields, PastKind, PastRecord};
use crate::error::{bad_input, not_found};
use crate::fields::{enum_item, field, integer, nullable_string, object_value, string, time};
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldValue, InputValue, Object, ResolverContext, TypeRef};
use async_graphql::{Error, ErrorExtensions};
use base64::Engine;
use schema::{GlobalId, Key, KindId, Scope, Timestamp};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use storage::history::{LogEntry, LogPosition, Operation};
use storage::Stored;

/// `HISTORY_DISABLED`: `history.enabled` is off.
pub fn history_disabled() -> Error {
    Error::new("history is not kept by this server (history.enabled is false)").extend_with(|_, e| e.set("code", "HISTORY_DISABLED"))
}

/// The fields of every object type of a finished schema's SDL, by type name (empty for an SDL
/// that does not parse: a bug, caught by the SDL test).
pub(crate) fn object_fields_of(sdl: &str) -> HashMap<String, Vec<String>> {
    use async_graphql::parser::types::{TypeKind, TypeSystemDefinition};
    let mut out = HashMap::new();
    let Ok(doc) = async_graphql::parser::parse_schema(sdl) else { return out };
    for d in &doc.definitions {
        if let TypeSystemDefinition::Type(t) = d {
            if let TypeKind::Object(o) = &t.node.kind {
                out.insert(t.node.name.node.to_string(), o.fields.iter().map(|f| f.node.name.node.to_string()).collect());
            }
        }
    }
    out
}

/// [`PastKind`] of entity `K`: its columns and the names of its object type's fields.
pub(crate) struct Past<K: Entity> {
    columns: Vec<Column<K::Record>>,
    fields: ObjectFields,
}

impl<K: Entity> Past<K> {
    /// The past view of `K`, whose object type's fields `fields` will name.
    pub(crate) fn new(fields: ObjectFields) -> Past<K> {
        Past { columns: K::columns(), fields }
    }

    /// The object fields that are no columns (`id` aside).
    fn others(&self) -> Vec<&str> {
        let Some(names) = self.fields.get().and_then(|f| f.get(K::TYPE)) else { return Vec::new() };
        names.iter().map(String::as_str).filter(|n| *n != "id" && !self.columns.iter().any(|c| c.name() == *n)).collect()
    }

    fn record(json: &[u8], entry: &LogEntry) -> Option<Stored<K::Record>> {
        let translated = serde_json::from_slice::<K::Cr>(json).map_err(|e| e.to_string()).and_then(|cr| {
            K::translate(&cr, &schema::kind::Context { now: entry.at, features: Default::default() }).map_err(|e| e.to_string())
        });
        match translated {
            Ok(record) => Some(Stored {
                key: entry.key.clone(),
                record,
                created_at: entry.created_at,
                last_modified_at: entry.at,
                links: entry.links.clone(),
                as_of: Some(entry.position),
            }),
            Err(e) => {
                tracing::warn!(kind = K::ID.name(), key = %entry.key, revision = entry.position.revision, error = %e, "a past revision no longer translates; shown as null");
                None
            }
        }
    }
}

/// The record's data by field name, the GraphQL way (`camelCase`), `meta`'s fields included.
fn data_by_field(record: &impl serde::Serialize) -> HashMap<String, serde_json::Value> {
    let mut out = HashMap::new();
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(record) else { return out };
    for (k, v) in fields {
        match (k.as_str(), v) {
            ("meta", serde_json::Value::Object(meta)) => out.extend(meta.into_iter().map(|(k, v)| (camel_case(&k), v))),
            (_, v) => {
                out.insert(camel_case(&k), v);
            }
        }
    }
    out
}

fn camel_case(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        match c {
            '_' => upper = true,
            c if upper => {
                out.push(c.to_ascii_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

/// Whether a value counts as set: not null, not an empty list, text or object.
fn has_value(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => false,
        serde_json::Value::Array(a) => !a.is_empty(),
        serde_json::Value::String(s) => !s.is_empty(),
        serde_json::Value::Object(o) => !o.is_empty(),
        _ => true,
    }
}

impl<K: Entity> PastKind for Past<K> {
    fn type_name(&self) -> &'static str {
        K::TYPE
    }

    fn translate(&self, json: &[u8], entry: &LogEntry) -> Option<PastRecord> {
        Past::<K>::record(json, entry).map(|s| Arc::new(s) as PastRecord)
    }

    fn node(&self, past: &PastRecord) -> Option<FieldValue<'static>> {
        let stored = past.downcast_ref::<Stored<K::Record>>()?.clone();
        Some(crate::entity::node_value::<K>(stored).with_type(K::TYPE))
    }

    fn with_origin(&self, past: &PastRecord, entry: &LogEntry) -> Option<PastRecord> {
        let stored = past.downcast_ref::<Stored<K::Record>>()?;
        if stored.links == entry.links && stored.created_at == entry.created_at {
            return Some(past.clone());
        }
        Some(Arc::new(Stored { links: entry.links.clone(), created_at: entry.created_at, ..stored.clone() }))
    }

    fn changed_fields(&self, request: &RequestContext, before: Option<&PastRecord>, after: &PastRecord) -> Vec<String> {
        let Some(after) = after.downcast_ref::<Stored<K::Record>>() else { return Vec::new() };
        let before = before.and_then(|b| b.downcast_ref::<Stored<K::Record>>());
        let mut out = Vec::new();
        for c in &self.columns {
            let now = c.value(after, request);
            let changed = match before {
                Some(b) => c.value(b, request) != now,
                None => !now.is_null(),
            };
            if changed {
                out.push(c.name().to_string());
            }
        }
        let (now, then) = (data_by_field(&after.record), before.map(|b| data_by_field(&b.record)));
        for name in self.others() {
            let Some(value) = now.get(name) else { continue };
            let changed = match &then {
                Some(then) => then.get(name) != Some(value),
                None => has_value(value),
            };
            if changed {
                out.push(name.to_string());
            }
        }
        out
    }
}

/// The most past records [`PastRecords`] keeps.
const PAST_RECORDS: usize = 4096;

/// Past records translated, shared by the requests of one schema, by (log identity, position);
/// `None`: no document kept, or it no longer translates. A kept position's document never
/// changes (a change that supersedes a revision moves the same bytes into its entry) and this
/// schema's rules are fixed, so an entry never goes stale; a record's links and `createdAt`
/// are those of its entry when read ([`PastKind::with_origin`]: the newest revision reads them
/// from the record). At most [`PAST_RECORDS`], the oldest inserted go first.
#[derive(Default)]
pub(crate) struct PastRecords(std::sync::Mutex<PastRecordsInner>);

#[derive(Default)]
struct PastRecordsInner {
    records: HashMap<(u64, LogPosition), Option<PastRecord>>,
    inserted: std::collections::VecDeque<(u64, LogPosition)>,
}

impl PastRecords {
    fn get(&self, key: (u64, LogPosition)) -> Option<Option<PastRecord>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).records.get(&key).cloned()
    }

    fn insert(&self, key: (u64, LogPosition), record: Option<PastRecord>) {
        let mut inner = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if inner.records.insert(key, record).is_none() {
            inner.inserted.push_back(key);
        }
        while inner.inserted.len() > PAST_RECORDS {
            if let Some(oldest) = inner.inserted.pop_front() {
                inner.records.remove(&oldest);
            }
        }
    }

    /// Records kept (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).records.len()
    }
}

/// A revision as a `Revision` or `Activity` value.
struct RevisionValue {
    entry: LogEntry,
    /// The kind's past view.
    past: Arc<dyn PastKind>,
    /// The cursor of its edge.
    cursor: String,
    /// The log's identity, for [`PastRecords`].
    log: u64,
    /// The object's revision kept before this one, when the page read it already
    /// (`history(id:)` reads them all); `None`: looked up when asked.
    previous: Option<Option<LogEntry>>,
    /// The past records translated.
    records: Arc<PastRecords>,
}

impl RevisionValue {
    /// The record as of `entry` (this revision or the one before it), translated once
    /// ([`PastRecords`]).
    fn record(&self, request: &RequestContext, entry: &LogEntry) -> Result<Option<PastRecord>, Error> {
        let key = (self.log, entry.position);
        if let Some(known) = self.records.get(key) {
            return Ok(known.and_then(|r| self.past.with_origin(&r, entry)));
        }
        let json = match entry.operation() {
            Operation::Deleted => None,
            _ => request.view.revision_document(entry).map_err(|e| request.storage_error(e))?,
        };
        let record = json.and_then(|json| self.past.translate(&json, entry));
        self.records.insert(key, record.clone());
        Ok(record)
    }

    fn node(&self, request: &RequestContext) -> Result<Option<FieldValue<'static>>, Error> {
        Ok(self.record(request, &self.entry)?.and_then(|r| self.past.node(&r)))
    }

    fn changed_fields(&self, request: &RequestContext) -> Result<Vec<String>, Error> {
        let Some(after) = self.record(request, &self.entry)? else { return Ok(Vec::new()) };
        let e = &self.entry;
        let storage = |x| request.storage_error(x);
        let previous = match (e.operation(), &self.previous) {
            (Operation::Updated, Some(known)) => known.clone(),
            (Operation::Updated, None) => request.view.previous_revision(e).map_err(storage)?,
            _ => None,
        };
        let before = match &previous {
            Some(p) => self.record(request, p)?,
            None => None,
        };
        Ok(self.past.changed_fields(request, before.as_ref(), &after))
    }
}

/// A page of revisions (`RevisionConnection`, `ActivityConnection`).
struct RevisionPage {
    edges: Vec<Arc<RevisionValue>>,
    has_next: bool,
    has_previous: bool,
    total: u64,
}

/// The longest cursor accepted, in bytes.
const MAX_CURSOR_BYTES: usize = 64;

fn encode_cursor(tag: char, p: LogPosition) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{tag}{}.{}", p.revision, p.index))
}

fn decode_cursor(tag: char, text: &str) -> Result<LogPosition, Error> {
    // Not echoed: a cursor is at most a few dozen bytes, a hostile one may be huge.
    let invalid = || bad_input(format!("invalid cursor (not one of this connection, {} bytes)", text.len()));
    if text.len() > MAX_CURSOR_BYTES {
        return Err(invalid());
    }
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).map_err(|_| invalid())?;
    let raw = std::str::from_utf8(&raw).map_err(|_| invalid())?;
    let (revision, index) = raw.strip_prefix(tag).and_then(|r| r.split_once('.')).ok_or_else(invalid)?;
    Ok(LogPosition { revision: revision.parse().map_err(|_| invalid())?, index: index.parse().map_err(|_| invalid())? })
}

/// `first`, `last`, `after`, `before` of a revision connection: positions, newest first.
struct Window {
    first: Option<usize>,
    last: Option<usize>,
    /// Only positions older than this.
    after: Option<LogPosition>,
    /// Only positions newer than this.
    before: Option<LogPosition>,
}

impl Window {
    fn read(ctx: &ResolverContext<'_>, tag: char, max: usize) -> Result<Window, Error> {
        let count = |name: &str| ctx.args.get(name).filter(|v| !v.is_null()).map(|v| v.i64()).transpose();
        let (first, last) = crate::relay::page_sizes(count("first")?, count("last")?, max)?;
        let cursor = |name: &str| -> Result<Option<LogPosition>, Error> {
            ctx.args.get(name).filter(|v| !v.is_null()).map(|v| decode_cursor(tag, v.string()?)).transpose()
        };
        let first = if first.is_none() && last.is_none() { Some(max) } else { first };
        Ok(Window { first, last, after: cursor("after")?, before: cursor("before")? })
    }

    /// The position range inside the cursors, (lower, upper): `after` an edge of a list newest
    /// first is older, `before` newer.
    fn range(&self) -> (Bound<LogPosition>, Bound<LogPosition>) {
        (self.before.map_or(Bound::Unbounded, Bound::Excluded), self.after.map_or(Bound::Unbounded, Bound::Excluded))
    }

    /// How many positions to read from the newest end (`first`) or the oldest (`last`): one
    /// more than the page, to know whether there is more.
    fn wanted(&self) -> (bool, usize) {
        match (self.first, self.last) {
            (_, Some(last)) => (false, last.saturating_add(1)),
            (first, None) => (true, first.unwrap_or(0).saturating_add(1)),
        }
    }

    /// The page of `items` (read newest first when `newest_first`, one more than the page at
    /// most), newest first, with whether more lie beyond each end.
    fn page<T>(&self, mut items: Vec<T>, newest_first: bool) -> (Vec<T>, bool, bool) {
        let size = self.first.or(self.last).unwrap_or(0);
        let more = items.len() > size;
        items.truncate(size);
        if !newest_first {
            items.reverse();
        }
        match newest_first {
            true => (items, more, self.after.is_some()),
            false => (items, self.before.is_some(), more),
        }
    }
}

fn register_types(builder: &mut Builder) {
    builder.object(
        Object::new("Revision")
            .description("One revision of an object, as the store's change log keeps it (`history.*` retention).")
            .field(
                field::<Arc<RevisionValue>>("revision", TypeRef::named_nn(TypeRef::INT), |r, _| {
                    Ok(integer(i64::try_from(r.entry.position.revision).unwrap_or(i64::MAX)))
                })
                .description("The store revision that committed it."),
            )
            .field(field::<Arc<RevisionValue>>("at", TypeRef::named_nn("Time"), |r, _| Ok(time(r.entry.at))).description("The commit time."))
            .field(field::<Arc<RevisionValue>>("operation", TypeRef::named_nn("ChangeOperation"), |r, _| Ok(enum_item(r.entry.operation().as_str()))))
            .field(
                field::<Arc<RevisionValue>>("changedFields", TypeRef::named_nn_list_nn(TypeRef::STRING), |r, request| {
                    Ok(crate::fields::string_list(&r.changed_fields(request)?))
                })
                .description(CHANGED_FIELDS),
            )
            .field(
                field::<Arc<RevisionValue>>("resourceVersion", TypeRef::named(TypeRef::STRING), |r, _| Ok(nullable_string(r.entry.resource_version.as_deref())))
                    .description("The source's version of the object (`metadata.resourceVersion`); null for a delete."),
            )
            .field(
                field::<Arc<RevisionValue>>("manager", TypeRef::named(TypeRef::STRING), |r, _| Ok(nullable_string(r.entry.manager.as_deref())))
                    .description("Who made the change: the manager of the object's `metadata.managedFields` entry of it (kube source); null from manifests and for deletes."),
            )
            .field(
                field::<Arc<RevisionValue>>("node", TypeRef::named("Node"), |r, request| r.node(request)).description(
                    "The object as of this revision (null for DELETED, or when its document was not kept): its scalar fields are \
                     this revision's; its edges resolve the links it had then to today's objects (null once gone or not visible); \
                     its secret fields are masked.",
                ),
            ),
    );
    register_activity(builder);
    register_connections(builder);
}

fn register_activity(builder: &mut Builder) {
    builder.object(
        Object::new("Activity")
            .description("A change of an object the viewer's teams own (every object for an admin).")
            .field(field::<Arc<RevisionValue>>("revision", TypeRef::named_nn(TypeRef::INT), |r, _| {
                Ok(integer(i64::try_from(r.entry.position.revision).unwrap_or(i64::MAX)))
            }))
            .field(field::<Arc<RevisionValue>>("at", TypeRef::named_nn("Time"), |r, _| Ok(time(r.entry.at))))
            .field(field::<Arc<RevisionValue>>("operation", TypeRef::named_nn("ChangeOperation"), |r, _| {
                Ok(enum_item(r.entry.operation().as_str()))
            }))
            .field(field::<Arc<RevisionValue>>("kind", TypeRef::named_nn("RecordKind"), |r, _| {
                Ok(enum_item(&crate::changes::kind_value(r.entry.kind)))
            }))
            .field(field::<Arc<RevisionValue>>("id", TypeRef::named_nn(TypeRef::ID), |r, _| {
                Ok(string(&GlobalId::new(r.past.type_name(), &r.entry.key).encode()))
            }))
            .field(
                field::<Arc<RevisionValue>>("name", TypeRef::named_nn(TypeRef::STRING), |r, _| {
                    Ok(string(r.entry.source.as_ref().map_or("", |(_, name)| name.as_str())))
                })
                .description("The object's `metadata.name`."),
            )
            .field(
                field::<Arc<RevisionValue>>("changedFields", TypeRef::named_nn_list_nn(TypeRef::STRING), |r, request| {
                    Ok(crate::fields::string_list(&r.changed_fields(request)?))
                })
                .description(CHANGED_FIELDS),
            )
            .field(field::<Arc<RevisionValue>>("manager", TypeRef::named(TypeRef::STRING), |r, _| {
                Ok(nullable_string(r.entry.manager.as_deref()))
            })),
    );
}

/// `RevisionEdge`, `RevisionConnection`, `ActivityEdge` and `ActivityConnection`.
fn register_connections(builder: &mut Builder) {
    for name in ["Revision", "Activity"] {
        builder.object(
            Object::new(format!("{name}Edge"))
                .field(field::<Arc<RevisionValue>>("node", TypeRef::named_nn(name), |r, _| Ok(object_value(r.clone()))))
                .field(field::<Arc<RevisionValue>>("cursor", TypeRef::named_nn("Cursor"), |r, _| Ok(string(&r.cursor)))),
        );
        builder.object(
            Object::new(format!("{name}Connection"))
                .field(field::<RevisionPage>("edges", TypeRef::named_nn_list_nn(format!("{name}Edge")), |p, _| {
                    Ok(crate::fields::object_values(p.edges.iter().cloned()))
                }))
                .field(field::<RevisionPage>("pageInfo", TypeRef::named_nn("PageInfo"), |p, _| {
                    Ok(object_value(crate::relay::PageInfo {
                        has_next: p.has_next,
                        has_previous: p.has_previous,
                        start: p.edges.first().map(|e| e.cursor.clone()),
                        end: p.edges.last().map(|e| e.cursor.clone()),
                    }))
                }))
                .field(field::<RevisionPage>("totalCount", TypeRef::named_nn(TypeRef::INT), |p, _| Ok(integer(p.total as i64)))),
        );
    }
}

const CHANGED_FIELDS: &str = "The GraphQL fields of the object's type whose values differ from its revision before. For CREATED, and for \
                              the oldest revision kept when the one before it was pruned, the fields that have a value; for DELETED, none.";

/// Registers `Revision`, `Activity`, their connections and the `history` and `activity` root
/// fields, over the kinds' past views `pasts`.
pub(crate) fn register(builder: &mut Builder) {
    register_types(builder);
    let pasts: Arc<HashMap<KindId, Arc<dyn PastKind>>> = Arc::new(std::mem::take(&mut builder.pasts));
    let by_type: Arc<HashMap<&'static str, KindId>> = Arc::new(builder.type_names.iter().map(|(k, t)| (*t, *k)).collect());
    let p = pasts.clone();
    let records = Arc::new(PastRecords::default());
    let r = records.clone();
    builder.query_fields.push(
        Field::new("history", TypeRef::named_nn("RevisionConnection"), move |ctx| {
            crate::fields::ready(resolve_history(&ctx, &p, &by_type, &r))
        })
        .description("Revisions of one object, newest first; works for deleted objects. Unknown or not visible: NOT_FOUND.")
        .argument(InputValue::new("id", TypeRef::named_nn(TypeRef::ID)))
        .argument(InputValue::new("after", TypeRef::named("Cursor")))
        .argument(InputValue::new("first", TypeRef::named(TypeRef::INT)))
        .argument(InputValue::new("before", TypeRef::named("Cursor")))
        .argument(InputValue::new("last", TypeRef::named(TypeRef::INT))),
    );
    builder.query_fields.push(
        Field::new("activity", TypeRef::named_nn("ActivityConnection"), move |ctx| {
            crate::fields::ready(resolve_activity(&ctx, &pasts, &records))
        })
        .description(
            "The viewer's changes across kinds, newest first: of the objects the viewer's teams own (every object for an admin), \
                 of `kinds` when given, committed from `since` to `until` (inclusive) when given.",
        )
        .argument(InputValue::new("kinds", TypeRef::named_nn_list("RecordKind")))
        .argument(InputValue::new("since", TypeRef::named("Time")))
        .argument(InputValue::new("until", TypeRef::named("Time")))
        .argument(InputValue::new("after", TypeRef::named("Cursor")))
        .argument(InputValue::new("first", TypeRef::named(TypeRef::INT)))
        .argument(InputValue::new("before", TypeRef::named("Cursor")))
        .argument(InputValue::new("last", TypeRef::named(TypeRef::INT))),
    );
}

fn sees(request: &RequestContext, e: &LogEntry) -> bool {
    let sees = |scopes: &Option<Vec<Scope>>| scopes.as_deref().is_some_and(|s| request.viewer.can_see(s));
    sees(&e.before) || sees(&e.after)
}

fn resolve_history(
    ctx: &ResolverContext<'_>,
    pasts: &HashMap<KindId, Arc<dyn PastKind>>,
    by_type: &HashMap<&'static str, KindId>,
    records: &Arc<PastRecords>,
) -> Result<Option<FieldValue<'static>>, Error> {
    let request = ctx.data::<RequestContext>()?;
    if !request.history_enabled {
        return Err(history_disabled());
    }
    let id = ctx.args.try_get("id")?.string()?;
    let gid = GlobalId::decode(id).map_err(|_| not_found(id))?;
    let kind = *by_type.get(gid.type_name.as_str()).ok_or_else(|| not_found(id))?;
    let past = pasts.get(&kind).cloned().ok_or_else(|| not_found(id))?;
    let window = Window::read(ctx, 'h', request.max_page_size)?;
    let storage = |e| request.storage_error(e);
    // Every revision kept of one object: at most `history.maxRevisionsPerObject`.
    let positions = request.view.revisions(kind, &gid.key, (Bound::Unbounded, Bound::Unbounded), true, usize::MAX).map_err(storage)?;
    // Each visible revision with the object's revision kept before it (visible or not: its
    // `changedFields` compare with it).
    let mut kept: Vec<LogEntry> = Vec::with_capacity(positions.len());
    for p in positions {
        request.deadline.tick()?;
        if let Some(e) = request.view.log_entry(p).map_err(storage)? {
            // Found by the object's digest: another object's revision may share it.
            if e.kind == kind && e.key == gid.key {
                kept.push(e);
            }
        }
    }
    let visible: Vec<(LogEntry, Option<LogEntry>)> =
        (0..kept.len()).filter(|&i| sees(request, &kept[i])).map(|i| (kept[i].clone(), kept.get(i + 1).cloned())).collect();
    if visible.is_empty() && !currently_visible(request, kind, &gid.key)? {
        return Err(not_found(id));
    }
    let total = visible.len() as u64;
    let (lower, upper) = window.range();
    let inside = |p: LogPosition| {
        let above = match lower {
            Bound::Excluded(o) => p > o,
            _ => true,
        };
        let below = match upper {
            Bound::Excluded(n) => p < n,
            _ => true,
        };
        above && below
    };
    let mut inside: Vec<(LogEntry, Option<LogEntry>)> = visible.into_iter().filter(|(e, _)| inside(e.position)).collect();
    let (newest_first, wanted) = window.wanted();
    if !newest_first {
        inside.reverse();
    }
    inside.truncate(wanted);
    let (entries, has_next, has_previous) = window.page(inside, newest_first);
    let log = request.view.log_identity().map_err(storage)?;
    let edges = entries
        .into_iter()
        .map(|(entry, previous)| {
            let cursor = encode_cursor('h', entry.position);
            Arc::new(RevisionValue { cursor, entry, past: past.clone(), log, previous: Some(previous), records: records.clone() })
        })
        .collect();
    Ok(object_value(RevisionPage { edges, has_next, has_previous, total }))
}

/// Whether the viewer sees the object `key` of `kind` now (`node(id:)` would load it).
fn currently_visible(request: &RequestContext, kind: KindId, key: &Key) -> Result<bool, Error> {
    let Some(scopes) = request.view.scopes_of(kind, key).map_err(|e| request.storage_error(e))? else { return Ok(false) };
    Ok(request.viewer.can_see(&scopes))
}

/// The most kinds `activity(kinds:)` takes (every kind once).
const MAX_KINDS: usize = 64;

fn resolve_activity(
    ctx: &ResolverContext<'_>,
    pasts: &HashMap<KindId, Arc<dyn PastKind>>,
    records: &Arc<PastRecords>,
) -> Result<Option<FieldValue<'static>>, Error> {
    let request = ctx.data::<RequestContext>()?;
    if !request.history_enabled {
        return Err(history_disabled());
    }
    let kinds = wanted_kinds(ctx, pasts)?;
    let time = |name: &str| -> Result<Option<Timestamp>, Error> {
        ctx.args
            .get(name)
            .filter(|v| !v.is_null())
            .map(|v| {
                let text = v.string().map_err(|_| bad_input(format!("`{name}` is not an RFC 3339 time")))?;
                if text.len() > 64 {
                    return Err(bad_input(format!("`{name}` is not an RFC 3339 time")));
                }
                Timestamp::parse_rfc3339(text).map_err(|_| bad_input(format!("`{name}` is not an RFC 3339 time: {text:?}")))
            })
            .transpose()
    };
    let (since, until) = (time("since")?, time("until")?);
    if let (Some(s), Some(u)) = (since, until) {
        if s > u {
            return Err(bad_input("`since` is after `until`"));
        }
    }
    let window = Window::read(ctx, 'a', request.max_page_size)?;
    let wants = |k: KindId| kinds.contains(&k);
    let in_time = |e: &LogEntry| since.is_none_or(|s| e.at >= s) && until.is_none_or(|u| e.at <= u);
    let newest_first = window.wanted().0;
    let storage = |e| request.storage_error(e);
    let entries: Vec<LogEntry> = if request.viewer.is_admin() {
        admin_entries(request, &window, &wants, in_time, (since, until))?
    } else {
        team_entries(request, &window, &wants, in_time, (since, until))?
    };
    let want_total = ctx.look_ahead().field("totalCount").exists();
    let total = if want_total { activity_total(request, &kinds, since, until)? } else { 0 };
    let (entries, has_next, has_previous) = window.page(entries, newest_first);
    let log = request.view.log_identity().map_err(storage)?;
    let edges = entries
        .into_iter()
        .filter_map(|entry| {
            let past = pasts.get(&entry.kind)?.clone();
            let cursor = encode_cursor('a', entry.position);
            Some(Arc::new(RevisionValue { cursor, entry, past, log, previous: None, records: records.clone() }))
        })
        .collect();
    Ok(object_value(RevisionPage { edges, has_next, has_previous, total }))
}

/// The kinds `activity(kinds:)` asks for (every served kind without it).
fn wanted_kinds(ctx: &ResolverContext<'_>, pasts: &HashMap<KindId, Arc<dyn PastKind>>) -> Result<Vec<KindId>, Error> {
    let Some(v) = ctx.args.get("kinds").filter(|v| !v.is_null()) else { return Ok(pasts.keys().copied().collect()) };
    let kind = |name: &str| {
        KindId::ALL
            .iter()
            .copied()
            .find(|id| crate::changes::kind_value(*id) == name && pasts.contains_key(id))
            .ok_or_else(|| bad_input("unknown kind"))
    };
    let kinds: Vec<KindId> = match v.list() {
        Ok(list) if list.len() > MAX_KINDS => return Err(bad_input(format!("`kinds` lists at most {MAX_KINDS} kinds"))),
        Ok(list) => list.iter().map(|k| kind(k.enum_name()?)).collect::<Result<_, Error>>()?,
        Err(_) => vec![kind(v.enum_name()?)?],
    };
    if kinds.is_empty() {
        return Err(bad_input("`kinds` is empty: give at least one kind, or leave it out for every kind"));
    }
    // A kind listed twice is asked for once (counters are added up per kind).
    let mut kinds = kinds;
    kinds.sort_unstable();
    kinds.dedup();
    Ok(kinds)
}

/// The viewer's teams' scopes.
fn team_scopes(request: &RequestContext) -> Vec<Scope> {
    request.viewer.teams.iter().map(|t| Scope::Team { env: request.viewer.env.clone(), team: t.clone() }).collect()
}

/// Whether `e` lies past the time bound the walk goes towards (`since` newest first, `until`
/// oldest first): commit times follow positions, so everything after it does too.
fn beyond_time(e: &LogEntry, newest_first: bool, (since, until): (Option<Timestamp>, Option<Timestamp>)) -> bool {
    match newest_first {
        true => since.is_some_and(|s| e.at < s),
        false => until.is_some_and(|u| e.at > u),
    }
}

/// The rest of `range` after a chunk that ended at `last`, in the walk's direction.
fn after_chunk(
    range: (Bound<LogPosition>, Bound<LogPosition>),
    newest_first: bool,
    last: LogPosition,
) -> (Bound<LogPosition>, Bound<LogPosition>) {
    match newest_first {
        true => (range.0, Bound::Excluded(last)),
        false => (Bound::Excluded(last), range.1),
    }
}

/// The page's entries of an admin: every kind's revisions in the window, in time.
fn admin_entries(
    request: &RequestContext,
    window: &Window,
    wants: &dyn Fn(KindId) -> bool,
    in_time: impl Fn(&LogEntry) -> bool,
    (since, until): (Option<Timestamp>, Option<Timestamp>),
) -> Result<Vec<LogEntry>, Error> {
    let (newest_first, wanted) = window.wanted();
    let storage = |e| request.storage_error(e);
    let mut out = Vec::new();
    let mut range = window.range();
    // Read in chunks so that a time bound stops the scan: commit times follow positions.
    loop {
        // No more entries than the page still needs: each is decoded and may read its record.
        let max = wanted.saturating_sub(out.len()).clamp(1, 256);
        let chunk = request.view.all_revisions(range, newest_first, max, wants, || request.deadline.passed()).map_err(storage)?;
        request.deadline.tick()?;
        let Some(last) = chunk.last().map(|e| e.position) else { break };
        let mut past_bound = false;
        for e in chunk {
            let beyond = beyond_time(&e, newest_first, (since, until));
            past_bound |= beyond;
            if in_time(&e) && !beyond {
                out.push(e);
            }
        }
        if out.len() >= wanted || past_bound {
            break;
        }
        range = after_chunk(range, newest_first, last);
    }
    out.truncate(wanted);
    Ok(out)
}

/// The page's entries of a team or group viewer: each team's revisions in the window, merged by
/// position (an entry of two of the viewer's teams once), in time.
fn team_entries(
    request: &RequestContext,
    window: &Window,
    wants: &dyn Fn(KindId) -> bool,
    in_time: impl Fn(&LogEntry) -> bool,
    (since, until): (Option<Timestamp>, Option<Timestamp>),
) -> Result<Vec<LogEntry>, Error> {
    let (newest_first, wanted) = window.wanted();
    let storage = |e| request.storage_error(e);
    let mut out: Vec<LogEntry> = Vec::new();
    let mut taken_positions = std::collections::HashSet::new();
    for scope in team_scopes(request) {
        let mut range = window.range();
        let mut taken = 0;
        loop {
            let chunk = request.view.team_revisions(&scope, range, newest_first, 256, wants).map_err(storage)?;
            request.deadline.tick()?;
            let Some(&(last, _)) = chunk.last() else { break };
            let mut past_bound = false;
            for (p, _) in chunk {
                // This scope's later entries lie beyond the page: none of them is read.
                if taken >= wanted {
                    break;
                }
                request.deadline.tick()?;
                let Some(e) = request.view.log_entry(p).map_err(storage)? else { continue };
                past_bound |= beyond_time(&e, newest_first, (since, until));
                if in_time(&e) && sees(request, &e) && taken_positions.insert(e.position) {
                    out.push(e);
                    taken += 1;
                }
            }
            if taken >= wanted || past_bound {
                break;
            }
            range = after_chunk(range, newest_first, last);
        }
    }
    match newest_first {
        true => out.sort_by_key(|e| std::cmp::Reverse(e.position)),
        false => out.sort_by_key(|e| e.position),
    }
    out.truncate(wanted);
    Ok(out)
}

/// `totalCount` of `activity`: from the counters for an admin or a team viewer without a time
/// bound, else by counting (a group's teams may share an entry).
fn activity_total(request: &RequestContext, kinds: &[KindId], since: Option<Timestamp>, until: Option<Timestamp>) -> Result<u64, Error> {
    let storage = |e| request.storage_error(e);
    let timeless = since.is_none() && until.is_none();
    if request.viewer.is_admin() && timeless {
        return kinds.iter().map(|k| request.view.revision_count(*k).map_err(storage)).sum();
    }
    let scopes = team_scopes(request);
    if scopes.len() == 1 && timeless && !request.viewer.is_admin() {
        return kinds.iter().map(|k| request.view.team_revision_count(&scopes[0], *k).map_err(storage)).sum();
    }
    let wants = |k: KindId| kinds.contains(&k);
    let in_time = |e: &LogEntry| since.is_none_or(|s| e.at >= s) && until.is_none_or(|u| e.at <= u);
    if request.viewer.is_admin() {
        let mut n = 0u64;
        let mut range = (Bound::Unbounded, Bound::Unbounded);
        loop {
            let chunk = request.view.all_revisions(range, true, 1024, wants, || request.deadline.passed()).map_err(storage)?;
            request.deadline.tick()?;
            let Some(last) = chunk.last().map(|e| e.position) else { break };
            n += chunk.iter().filter(|e| in_time(e)).count() as u64;
            if since.is_some_and(|s| chunk.last().is_some_and(|e| e.at < s)) {
                break;
            }
            range = (Bound::Unbounded, Bound::Excluded(last));
        }
        return Ok(n);
    }
    // A team's index lists exactly the revisions it may see: count their positions, once each
    // across the viewer's teams, reading an entry only for its time.
    let mut counted = std::collections::HashSet::new();
    for scope in &scopes {
        let mut range = (Bound::Unbounded, Bound::Unbounded);
        loop {
            let chunk = request.view.team_revisions(scope, range, true, 4096, wants).map_err(storage)?;
            request.deadline.tick()?;
            let Some(&(last, _)) = chunk.last() else { break };
            let mut past_since = false;
            for (p, _) in chunk {
                if !timeless {
                    request.deadline.tick()?;
                    let Some(e) = request.view.log_entry(p).map_err(storage)? else { continue };
                    past_since |= since.is_some_and(|s| e.at < s);
                    if !in_time(&e) {
                        continue;
                    }
                }
                counted.insert(p);
            }
            if past_since {
                break;
            }
            range = (Bound::Unbounded, Bound::Excluded(last));
        }
    }
    Ok(counted.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared past records keep at most [`PAST_RECORDS`], the oldest inserted going first,
    /// and a position inserted again takes no second place.
    #[test]
    fn past_records_are_bounded_and_the_oldest_go_first() {
        let records = PastRecords::default();
        let at = |i: usize| (7, LogPosition { revision: i as u64, index: 0 });
        for i in 0..PAST_RECORDS + 10 {
            records.insert(at(i), None);
            records.insert(at(i), Some(Arc::new(i) as PastRecord));
        }
        assert_eq!(records.len(), PAST_RECORDS);
        assert!(records.get(at(9)).is_none(), "the oldest went");
        let newest = records.get(at(PAST_RECORDS + 9)).expect("the newest is kept").expect("its record");
        assert_eq!(newest.downcast_ref::<usize>(), Some(&(PAST_RECORDS + 9)));
        assert!(records.get((8, at(PAST_RECORDS + 9).1)).is_none(), "another log's position is another record");
    }
}
