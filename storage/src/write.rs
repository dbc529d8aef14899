//! The write path: [`WriteBatch`] applies upserts and deletes of any kind inside one redb write
//! transaction, resolves required parents and links, maintains every index and counter, and
//! re-links dependent records (e.g. subscriptions when an exposure becomes active).

use crate::codec::{decode, encode};
use crate::tables::{self, Maintained, OrderField, OrderSet};
use crate::{Envelope, StorageError};
use redb::{ReadableTable, Table, WriteTransaction};
use schema::registry::{self, KindVisitor};
use schema::{Key, Kind, KindId, Link, Parent, Scope, Timestamp};
use serde::{Deserialize, Serialize};
use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::marker::PhantomData;
use std::sync::Arc;

/// Identity of a source object: (kind, namespace, name). Never namespace/name alone.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SourceRef {
    /// The kind.
    pub kind: KindId,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl std::fmt::Display for SourceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind.name(), self.namespace, self.name)
    }
}

/// What an upsert or delete did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The record was created or changed.
    Written,
    /// Nothing changed (same source version, or the same record and links).
    Unchanged,
    /// The record is stored (written now if `written`) but its first link is unresolved and the
    /// kind asks for a retry ([`schema::Kind::RETRY_UNLINKED`]): outcome `dependency_missing`.
    Unlinked {
        /// Whether this call changed the stored record.
        written: bool,
    },
    /// Required parents are missing: nothing was written (an older version stays).
    DependencyMissing(Vec<Parent>),
    /// Another source object (of the same kind) holds the record's natural key: nothing was
    /// written (an older version of this object, under another key, stays). The first object to
    /// hold a key keeps it until it is deleted or moves to another key; retry until then.
    Conflict(SourceRef),
    /// The record was deleted.
    Deleted,
    /// Delete of an object the store does not know (already gone): success.
    NotFound,
    /// The kind is being re-derived from the volume ([`crate::rebuild`]): the change is kept
    /// with the new derivation and the stored record (of the previous one) stays until the
    /// switch.
    Staged,
}

#[derive(Serialize, Deserialize)]
struct SourceEntry {
    key: Key,
    version: String,
}

/// The natural key and source version of a stored `sources` entry of `kind`.
pub(crate) fn decode_source_entry(bytes: &[u8], kind: KindId) -> Result<(Key, String), StorageError> {
    let entry: SourceEntry = crate::codec::decode(bytes, kind.name())?;
    Ok((entry.key, entry.version))
}

/// Calls `f(namespace, name, version)` for every entry of `kind` in the `sources` table `t`, in
/// key order (the one decoder of source entries, for reads and writes).
///
/// # Errors
/// [`StorageError::Corrupt`] for an entry whose key or version is not UTF-8 or does not decode.
pub(crate) fn for_each_source_in(
    t: &impl ReadableTable<&'static [u8], &'static [u8]>,
    kind: KindId,
    mut f: impl FnMut(&str, &str, &str),
) -> Result<(), StorageError> {
    for_each_source_bytes_in(t, kind, |ns, name, version| {
        let (Ok(ns), Ok(name), Ok(version)) = (std::str::from_utf8(ns), std::str::from_utf8(name), std::str::from_utf8(version)) else {
            return Err(StorageError::Corrupt("source entry: not UTF-8".into()));
        };
        f(ns, name, version);
        Ok(())
    })
}

/// [`for_each_source_in`] without checking that namespace, name and version are UTF-8: for
/// readers that only hash or compare their bytes (a restart's check of a million objects).
/// `f` may stop the walk with an error.
///
/// # Errors
/// [`StorageError::Corrupt`] for an entry that does not decode, or `f`'s error.
pub(crate) fn for_each_source_bytes_in(
    t: &impl ReadableTable<&'static [u8], &'static [u8]>,
    kind: KindId,
    mut f: impl FnMut(&[u8], &[u8], &[u8]) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let start = [kind.code()];
    let end = [kind.code() + 1];
    /// [`SourceEntry`] borrowing from the stored bytes (the same encoding: postcard writes a
    /// string as its length and bytes).
    #[derive(Deserialize)]
    struct SourceEntryRef<'a> {
        #[allow(dead_code)]
        key: &'a [u8],
        version: &'a [u8],
    }
    let corrupt = || StorageError::Corrupt("source key".into());
    for item in t.range(&start[..]..&end[..])? {
        let (k, v) = item?;
        let raw = &k.value()[1..];
        let entry: SourceEntryRef = crate::codec::decode_borrowed(v.value(), "source entry")?;
        // Names hold no escaped byte (0x00, 0x01): then the components are the slices between
        // the terminators, read without a copy.
        match raw.contains(&1) {
            false => {
                let mut parts = raw.split(|&b| b == 0);
                let (Some(ns), Some(name), Some(b""), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
                    return Err(corrupt());
                };
                f(ns, name, entry.version)?;
            }
            true => {
                let parts = Key::from_bytes(raw.to_vec()).parts().map_err(|_| corrupt())?;
                if let [ns, name] = parts.as_slice() {
                    f(ns.as_bytes(), name.as_bytes(), entry.version)?;
                }
            }
        }
    }
    Ok(())
}

/// Type-erased operations on records of one kind, for code that only knows a [`KindId`]
/// (re-linking dependents, deletes, invariant checks).
pub(crate) trait ErasedKind: Send + Sync {
    fn relink(&self, b: &mut WriteBatch<'_>, key: &Key, depth: u8) -> Result<(), StorageError>;
    fn remove(&self, b: &mut WriteBatch<'_>, key: &Key, depth: u8) -> Result<(), StorageError>;
    /// The entries of a record in a store that maintains the orders `built`.
    fn entries(&self, key: &Key, env: &Envelope, built: OrderSet) -> Result<Entries, StorageError>;
    /// The ordering entries of a record by `order` alone (building that index).
    fn order_entries(&self, key: &Key, env: &Envelope, order: OrderField) -> Result<Vec<Vec<u8>>, StorageError>;
    /// The sort value of a record by `order` ([`ReadView::scan`](crate::ReadView::scan) of an
    /// index not built yet).
    fn sort_value(&self, env: &Envelope, order: OrderField) -> Result<Vec<u8>, StorageError>;
    /// The orders the kind's records can be sorted by ([`orders`]).
    fn orders(&self) -> &'static [OrderField];
    /// The kind's derivation version ([`Kind::VERSION`]).
    fn version(&self) -> u32;
    /// Whether a stored record decodes as this build's record and encodes back to the same
    /// bytes (a record of another derivation version that this build can serve as it is).
    fn round_trips(&self, record: &[u8]) -> bool;
    /// [`WriteBatch::upsert`] of an encoded record of this kind.
    fn upsert_bytes(
        &self,
        b: &mut WriteBatch<'_>,
        src: &SourceRef,
        version: &str,
        record: &[u8],
        now: Timestamp,
    ) -> Result<Outcome, StorageError>;
}

/// The index entries and scopes of one record.
pub(crate) struct Entries {
    pub order: Vec<Vec<u8>>,
    pub index_entries: Vec<Vec<u8>>,
    pub scopes: Vec<Scope>,
    /// The status phase ([`Kind::status`]), counted per scope.
    pub phase: Option<schema::common::StatusPhase>,
}

impl Entries {
    /// The `counts` keys the record counts under ([`tables::counter_keys`]).
    pub fn counter_keys(&self, kind: KindId) -> impl Iterator<Item = Vec<u8>> + '_ {
        tables::counter_keys(kind, &self.scopes, self.phase)
    }
}

struct Erased<K>(PhantomData<K>);

/// Erased operations of every registered kind.
pub(crate) struct KindTable(HashMap<KindId, Box<dyn ErasedKind>>);

impl KindTable {
    pub(crate) fn new() -> KindTable {
        struct V(HashMap<KindId, Box<dyn ErasedKind>>);
        impl KindVisitor for V {
            fn visit<K: Kind>(&mut self) {
                self.0.insert(K::ID, Box::new(Erased::<K>(PhantomData)));
            }
        }
        let mut v = V(HashMap::new());
        registry::visit(&mut v);
        KindTable(v.0)
    }

    pub(crate) fn get(&self, kind: KindId) -> Option<&dyn ErasedKind> {
        self.0.get(&kind).map(|b| b.as_ref())
    }

    /// The registered `kind`, when it can be sorted by `order`.
    pub(crate) fn sorted_by(&self, kind: KindId, order: OrderField) -> Option<&dyn ErasedKind> {
        self.get(kind).filter(|ops| ops.orders().contains(&order))
    }

    /// Every registered kind with its derivation version ([`Kind::VERSION`]), in
    /// [`KindId::ALL`] order.
    pub(crate) fn versions(&self) -> Vec<(KindId, u32)> {
        KindId::ALL.iter().filter_map(|&k| self.get(k).map(|ops| (k, ops.version()))).collect()
    }
}

/// Orders a kind's records are indexed by.
pub(crate) fn orders<K: Kind>() -> &'static [OrderField] {
    if K::ORDER_BY_NAME {
        &[OrderField::Key, OrderField::CreatedAt, OrderField::LastModifiedAt, OrderField::Name]
    } else {
        &[OrderField::Key, OrderField::CreatedAt, OrderField::LastModifiedAt]
    }
}

/// The index entries and scopes of a record, with the ordering entries of the orders in `built`
/// (the natural-key order always; see [`tables::OrderSet`]).
pub(crate) fn entries_of<K: Kind>(key: &Key, rec: &K::Record, env: &Envelope, built: OrderSet) -> Entries {
    entries_by::<K>(key, rec, env, |o| built.contains(K::ID, o))
}

/// The index entries and scopes of a record, with the ordering entries of the orders `include`
/// accepts.
fn entries_by<K: Kind>(key: &Key, rec: &K::Record, env: &Envelope, include: impl Fn(OrderField) -> bool) -> Entries {
    let mut scopes: Vec<Scope> = Vec::new();
    // First occurrence wins; the lists are short, so a linear check beats a set of clones.
    for s in K::scopes(rec, &env.links).into_iter().chain([Scope::All]) {
        if !scopes.contains(&s) {
            scopes.push(s);
        }
    }
    // Each order's sort value once per record, whatever the number of scopes.
    let sorts: Vec<(OrderField, Vec<u8>)> =
        orders::<K>().iter().filter(|&&o| include(o)).map(|&o| (o, sort_value_of::<K>(o, env, Some(rec)))).collect();
    let mut order = Vec::with_capacity(scopes.len() * sorts.len());
    for scope in &scopes {
        // Same bytes as `tables::order_prefix` + sort value + natural key, built in one buffer.
        let scope_key = scope.key();
        for (o, sort) in &sorts {
            if tables::derived_from_records(*o, scope) {
                continue;
            }
            let mut e = Vec::with_capacity(2 + scope_key.as_bytes().len() + sort.len() + key.as_bytes().len());
            e.extend_from_slice(&[K::ID.code(), *o as u8]);
            e.extend_from_slice(scope_key.as_bytes());
            e.extend_from_slice(sort);
            e.extend_from_slice(key.as_bytes());
            order.push(e);
        }
    }
    let index_entries =
        K::index_entries(rec, &env.links).iter().map(|(idx, lookup)| tables::index_entry(*idx, lookup, K::ID, key)).collect();
    Entries { order, index_entries, scopes, phase: K::status(rec).map(|s| s.phase) }
}

/// The sort value of a record by `order`: the part of its ordering entry between the scope and
/// the natural key ([`tables`]). The decoded record `rec` is read for [`OrderField::Name`] only
/// (the times are in the envelope), so callers without it pass `None` for the other orders.
fn sort_value_of<K: Kind>(order: OrderField, env: &Envelope, rec: Option<&K::Record>) -> Vec<u8> {
    if let Some(time) = tables::time_sort_value(order, env.created_at, env.last_modified_at) {
        return time.to_vec();
    }
    match order {
        OrderField::Name => Key::new(&[rec.and_then(K::name).unwrap_or("")]).as_bytes().to_vec(),
        OrderField::Key | OrderField::CreatedAt | OrderField::LastModifiedAt => Vec::new(),
    }
}

/// What an upsert derives from the record alone.
struct Parts<'a> {
    key: &'a Key,
    bytes: &'a [u8],
    requires: &'a [Parent],
    links: &'a [Link],
    /// The source document, as stored ([`crate::documents::encode`]).
    document: Option<&'a [u8]>,
    /// Who made the change ([`Encoded::with_manager`]).
    manager: Option<&'a str>,
}

/// A record of kind `K` with what its write derives from the record alone: its natural key,
/// its encoding, its required parents and its links ([`Kind::key`], [`Kind::requires`],
/// [`Kind::links`]). Built where records are translated ([`Encoded::new`], on any thread), so
/// the one writer does not spend its time on it ([`WriteBatch::upsert_encoded`]).
pub struct Encoded<K: Kind> {
    record: K::Record,
    key: Key,
    bytes: Vec<u8>,
    requires: Vec<Parent>,
    links: Vec<Link>,
    document: Option<Vec<u8>>,
    manager: Option<String>,
}

impl<K: Kind> Encoded<K> {
    /// Derives the natural key, encoding, parents and links of `record`.
    pub fn new(record: K::Record) -> Encoded<K> {
        let (key, bytes, requires, links) = (K::key(&record), encode(&record), K::requires(&record), K::links(&record));
        Encoded { key, bytes, requires, links, record, document: None, manager: None }
    }

    /// The record with the document it was translated from, as stored
    /// ([`crate::documents::encode`]): the upsert keeps it with the object's source entry.
    pub fn with_document(mut self, document: Vec<u8>) -> Encoded<K> {
        self.document = Some(document);
        self
    }

    /// The record with the manager of its change: the kube source's `managedFields` entry of
    /// it (kept with the object's revision, [`crate::history`]; one longer than
    /// [`crate::history::MAX_MANAGER_BYTES`] is not kept).
    pub fn with_manager(mut self, manager: Option<String>) -> Encoded<K> {
        self.manager = manager;
        self
    }

    /// The record.
    pub fn record(&self) -> &K::Record {
        &self.record
    }

    /// Its natural key ([`Kind::key`]).
    pub fn key(&self) -> &Key {
        &self.key
    }

    /// Its required parents ([`Kind::requires`]).
    pub fn requires(&self) -> &[Parent] {
        &self.requires
    }

    /// Its encoding, as stored.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The source document it was translated from, as stored ([`Encoded::with_document`]).
    pub fn document(&self) -> Option<&[u8]> {
        self.document.as_deref()
    }
}

/// Re-linking cascades at most this deep (exposure → subscription → approval needs 2).
const MAX_DEPTH: u8 = 8;

impl<K: Kind> ErasedKind for Erased<K> {
    fn relink(&self, b: &mut WriteBatch<'_>, key: &Key, depth: u8) -> Result<(), StorageError> {
        let Some(env) = b.envelope(K::ID, key)? else { return Ok(()) };
        let rec: K::Record = decode(&env.record, K::ID.name())?;
        let links = b.resolve_links(&K::links(&rec))?;
        if links == env.links {
            return Ok(());
        }
        let mut new_env = env.clone();
        new_env.links = links;
        new_env.last_modified_at = b.now;
        new_env.revision = b.revision;
        b.replace::<K>(key, &rec, Some((&rec, &env)), &new_env, depth)
    }

    fn remove(&self, b: &mut WriteBatch<'_>, key: &Key, depth: u8) -> Result<(), StorageError> {
        let Some(env) = b.envelope(K::ID, key)? else { return Ok(()) };
        let rec: K::Record = decode(&env.record, K::ID.name())?;
        let old = entries_of::<K>(key, &rec, &env, b.maintained.for_key(K::ID, key));
        b.apply_entries(K::ID, Some(&old), None)?;
        b.existing.borrow_mut().clear();
        b.tables.records_mut(K::ID)?.remove(key.as_bytes())?;
        b.changed = true;
        b.touch::<K>(key, Some((&rec, &env)), None);
        let deps = K::dependents(&rec, &env.links);
        b.cascade(&deps, depth)
    }

    fn entries(&self, key: &Key, env: &Envelope, built: OrderSet) -> Result<Entries, StorageError> {
        let rec: K::Record = decode(&env.record, K::ID.name())?;
        Ok(entries_of::<K>(key, &rec, env, built))
    }

    fn order_entries(&self, key: &Key, env: &Envelope, order: OrderField) -> Result<Vec<Vec<u8>>, StorageError> {
        let rec: K::Record = decode(&env.record, K::ID.name())?;
        Ok(entries_by::<K>(key, &rec, env, |o| o == order).order)
    }

    fn sort_value(&self, env: &Envelope, order: OrderField) -> Result<Vec<u8>, StorageError> {
        let rec: Option<K::Record> = (order == OrderField::Name).then(|| decode(&env.record, K::ID.name())).transpose()?;
        Ok(sort_value_of::<K>(order, env, rec.as_ref()))
    }

    fn orders(&self) -> &'static [OrderField] {
        orders::<K>()
    }

    fn version(&self) -> u32 {
        K::VERSION
    }

    fn round_trips(&self, record: &[u8]) -> bool {
        decode::<K::Record>(record, K::ID.name()).is_ok_and(|r| encode(&r) == record)
    }

    fn upsert_bytes(
        &self,
        b: &mut WriteBatch<'_>,
        src: &SourceRef,
        version: &str,
        record: &[u8],
        now: Timestamp,
    ) -> Result<Outcome, StorageError> {
        let rec: K::Record = decode(record, K::ID.name())?;
        b.upsert::<K>(src, version, &rec, now)
    }
}

/// A group of changes applied in one redb write transaction (of the one writer), handed to the
/// closure of [`crate::Store::write`], which owns the transaction: committed when the closure
/// returns `Ok`, discarded when it returns an error.
pub struct WriteBatch<'txn> {
    tables: OpenTables<'txn>,
    kinds: Arc<KindTable>,
    revision: u64,
    changed: bool,
    sources_changed: bool,
    /// Inserts and removals of `sources` entries so far: what the batch adds to
    /// [`tables::SOURCES_GENERATION`] when it commits.
    pub(crate) source_writes: u64,
    now: Timestamp,
    feed: Arc<Feed>,
    /// Records written or removed, when someone subscribed to the feed.
    touched: Option<Vec<RecordChange>>,
    /// Changes of the `counts` table (count key → delta), written once at commit.
    counts: BTreeMap<Vec<u8>, i64>,
    /// The source entry last read by [`WriteBatch::source_version`], by `sources` key: the
    /// writer asks for it right before the upsert of the same object, which reads it again.
    /// Cleared by every write of `sources`.
    source_memo: std::cell::RefCell<Option<(Vec<u8>, Option<SourceEntry>)>>,
    /// Parents found by [`WriteBatch::exists`] lately (at most [`RECENT_PARENTS`]): the children
    /// of one parent mostly come together. Cleared by every record removal.
    existing: std::cell::RefCell<Vec<(KindId, Key)>>,
    /// The ordering entries this store maintains (`built_orders` and `building_orders`, read
    /// when the batch starts).
    maintained: Maintained,
    /// The kinds being re-derived ([`crate::Store::rederiving`]): while any is, no write
    /// re-links dependents (see [`WriteBatch::relink_all`]).
    rederiving: Vec<KindId>,
    /// The kinds being re-derived from the volume ([`crate::Store::rebuilding`]): their
    /// changes are staged, their stored records stay until the switch.
    pub(crate) rebuilding: Vec<KindId>,
    /// Of those, the kinds whose stored records this build cannot read: no write re-links one
    /// of their records (their switch writes every one of them anew, links resolved).
    pub(crate) unreadable: Vec<KindId>,
    /// The store's document dictionaries: a document compressed alone is stored compressed with
    /// its kind's ([`WriteBatch::document_as_stored`]), but while loading.
    pub(crate) dictionaries: crate::documents::Dictionaries,
    /// Whether the writer is loading ([`crate::Store::set_loading`]): a document compressed
    /// alone is then stored as it is.
    pub(crate) loading: bool,
    /// What the batch notes for the change log while history is on ([`crate::history`]).
    pub(crate) history: Option<crate::history::Recorder>,
}

/// How many found parents a batch remembers ([`WriteBatch::exists`]).
const RECENT_PARENTS: usize = 8;

type Bytes = &'static [u8];

/// The read-model tables a batch keeps open from its first to its last change, borrowing the
/// transaction [`crate::Store::write`] owns: opening a redb table costs about as much as an
/// insert, and one upsert touches a dozen of them. While a batch lives, these tables cannot be
/// opened through its transaction elsewhere (redb refuses a second open); `counts` and `meta`
/// are written only when the batch ends and are not held.
struct OpenTables<'txn> {
    txn: &'txn WriteTransaction,
    order: Table<'txn, Bytes, ()>,
    index_entries: Table<'txn, Bytes, ()>,
    sources: Table<'txn, Bytes, Bytes>,
    /// `source_documents` ([`crate::documents`]).
    documents: Table<'txn, Bytes, Bytes>,
    /// The records tables, indexed by [`KindId::code`], each opened on first use.
    records: Vec<OnceCell<Table<'txn, Bytes, Bytes>>>,
}

impl<'txn> OpenTables<'txn> {
    fn new(txn: &'txn WriteTransaction) -> Result<OpenTables<'txn>, StorageError> {
        let records = (0..=KindId::ALL.iter().map(|k| k.code()).max().unwrap_or(0)).map(|_| OnceCell::new()).collect();
        Ok(OpenTables {
            txn,
            order: txn.open_table(tables::ORDER)?,
            index_entries: txn.open_table(tables::INDEX_ENTRIES)?,
            sources: txn.open_table(tables::SOURCES)?,
            documents: txn.open_table(crate::documents::DOCUMENTS)?,
            records,
        })
    }

    /// The records table of `kind`, opened on first use.
    fn records(&self, kind: KindId) -> Result<&Table<'txn, Bytes, Bytes>, StorageError> {
        let cell = &self.records[kind.code() as usize];
        if let Some(t) = cell.get() {
            return Ok(t);
        }
        let t = self.txn.open_table(tables::records(kind))?;
        Ok(cell.get_or_init(|| t))
    }

    fn records_mut(&mut self, kind: KindId) -> Result<&mut Table<'txn, Bytes, Bytes>, StorageError> {
        self.records(kind)?;
        Ok(self.records[kind.code() as usize].get_mut().expect("invariant: opened just above"))
    }
}

/// One committed batch, as told to [`crate::Store::subscribe`]rs: the new revision and every
/// record the batch wrote or removed, once each, in the order they were first written.
#[derive(Clone, Debug, PartialEq)]
pub struct Committed {
    /// The revision of the commit.
    pub revision: u64,
    /// The records written or removed.
    pub changes: Arc<[RecordChange]>,
}

/// One record written or removed by a committed batch: who could see it before the batch and
/// who can after ([`Kind::scopes`] of the record and its links then; `None` when it did not
/// exist). A record written and removed within one batch is not listed.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordChange {
    /// The record's kind.
    pub kind: KindId,
    /// The record's natural key.
    pub key: Key,
    /// The record's scopes before the batch; `None`: it was created.
    pub before: Option<Vec<Scope>>,
    /// The record's scopes after the batch; `None`: it was removed.
    pub after: Option<Vec<Scope>>,
}

/// Merges the writes of one batch into one [`RecordChange`] per record: the scopes before its
/// first write and after its last, in the order records were first written.
fn merge_changes(touched: Vec<RecordChange>) -> Vec<RecordChange> {
    let mut at: std::collections::HashMap<(KindId, Key), usize> = std::collections::HashMap::with_capacity(touched.len());
    let mut out: Vec<RecordChange> = Vec::with_capacity(touched.len());
    for c in touched {
        match at.get(&(c.kind, c.key.clone())) {
            Some(&i) => out[i].after = c.after,
            None => {
                at.insert((c.kind, c.key.clone()), out.len());
                out.push(c);
            }
        }
    }
    out.retain(|c| c.before.is_some() || c.after.is_some());
    out
}

/// The subscribers of committed batches. Sent after the commit is durable, in commit order (the
/// writer is serialized by redb); a subscriber whose receiver is gone is dropped.
#[derive(Default)]
pub(crate) struct Feed(std::sync::Mutex<Vec<std::sync::mpsc::Sender<Committed>>>);

impl Feed {
    pub(crate) fn subscribe(&self) -> std::sync::mpsc::Receiver<Committed> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(tx);
        rx
    }

    fn active(&self) -> bool {
        !self.0.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }

    fn send(&self, c: Committed) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).retain(|tx| tx.send(c.clone()).is_ok());
    }
}

impl<'txn> WriteBatch<'txn> {
    pub(crate) fn new(
        txn: &'txn WriteTransaction,
        kinds: Arc<KindTable>,
        feed: Arc<Feed>,
        rederiving: Vec<KindId>,
    ) -> Result<WriteBatch<'txn>, StorageError> {
        let current = txn.open_table(tables::META)?.get("revision")?.map(|v| v.value()).unwrap_or(0);
        let maintained = Maintained::read(&txn.open_table(tables::BUILT)?, &txn.open_table(tables::BUILDING)?)?;
        // Sized for a typical batch of a load: growing it a doubling at a time copied it often.
        let touched = feed.active().then(|| Vec::with_capacity(4096));
        Ok(WriteBatch {
            tables: OpenTables::new(txn)?,
            kinds,
            revision: current + 1,
            changed: false,
            sources_changed: false,
            source_writes: 0,
            now: Timestamp(0),
            feed,
            touched,
            counts: BTreeMap::new(),
            source_memo: std::cell::RefCell::new(None),
            existing: std::cell::RefCell::new(Vec::with_capacity(RECENT_PARENTS)),
            maintained,
            rederiving,
            rebuilding: Vec::new(),
            unreadable: Vec::new(),
            dictionaries: crate::documents::Dictionaries::default(),
            loading: false,
            history: None,
        })
    }

    /// Notes for the feed that the record `key` of `K` went from `before` to `after` (record and
    /// envelope; `None`: absent).
    fn touch<K: Kind>(&mut self, key: &Key, before: Option<(&K::Record, &Envelope)>, after: Option<(&K::Record, &Envelope)>) {
        if let Some(t) = &mut self.touched {
            let scopes = |v: Option<(&K::Record, &Envelope)>| v.map(|(rec, env)| K::scopes(rec, &env.links));
            t.push(RecordChange { kind: K::ID, key: key.clone(), before: scopes(before), after: scopes(after) });
        }
        if let Some(h) = &mut self.history {
            fn side<'a, R>(v: Option<(&R, &'a Envelope)>) -> Option<crate::history::Side<'a>> {
                v.map(|(_, env)| crate::history::Side { source: &env.source, created_at: env.created_at, links: &env.links })
            }
            let (documents, sources) = (&self.tables.documents, &self.tables.sources);
            h.note(K::ID, key, side(before), side(after), self.rederiving.contains(&K::ID), |(namespace, name)| {
                let skey = tables::source_key(K::ID, namespace, name);
                let entry = sources.get(skey.as_slice()).ok().flatten()?;
                let (_, version) = decode_source_entry(entry.value(), K::ID).ok()?;
                Some((documents.get(skey.as_slice()).ok().flatten()?.value().to_vec(), version))
            });
        }
    }

    /// The version recorded for a source object by its last successful upsert (while its kind
    /// is re-derived from the volume, by the change staged meanwhile; `None` when that was a
    /// delete).
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn source_version(&self, src: &SourceRef) -> Result<Option<String>, StorageError> {
        if self.rebuilding.contains(&src.kind) {
            // A change staged while the kind is frozen is the version the store holds now.
            if let Some(staged) = crate::rebuild::staged_change(self.tables.txn, src)? {
                return Ok(staged.record.map(|_| staged.version));
            }
        }
        let skey = tables::source_key(src.kind, &src.namespace, &src.name);
        let entry = self.source_at(&skey)?;
        let version = entry.as_ref().map(|e| e.version.clone());
        *self.source_memo.borrow_mut() = Some((skey, entry));
        Ok(version)
    }

    fn source(&self, src: &SourceRef) -> Result<Option<SourceEntry>, StorageError> {
        self.source_at(&tables::source_key(src.kind, &src.namespace, &src.name))
    }

    /// The source entry under `sources` key `skey` ([`tables::source_key`]).
    fn source_at(&self, skey: &[u8]) -> Result<Option<SourceEntry>, StorageError> {
        if let Some((k, entry)) = self.source_memo.borrow_mut().take() {
            if k == skey {
                return Ok(entry);
            }
        }
        let v = self.tables.sources.get(skey)?;
        v.map(|v| decode(v.value(), "source entry")).transpose()
    }

    /// The natural key of the record `src` produced, if the store holds one.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn natural_key(&self, src: &SourceRef) -> Result<Option<Key>, StorageError> {
        Ok(self.source(src)?.map(|e| e.key))
    }

    /// Every source object of `kind` the store holds a record for, with its version.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn sources(&self, kind: KindId) -> Result<Vec<(SourceRef, String)>, StorageError> {
        let mut out = Vec::new();
        for_each_source_in(&self.tables.sources, kind, |ns, name, version| {
            out.push((SourceRef { kind, namespace: ns.to_string(), name: name.to_string() }, version.to_string()));
        })?;
        Ok(out)
    }

    fn envelope(&self, kind: KindId, key: &Key) -> Result<Option<Envelope>, StorageError> {
        let v = self.tables.records(kind)?.get(key.as_bytes())?;
        v.map(|v| decode(v.value(), kind.name())).transpose()
    }

    fn exists(&self, r: &Parent) -> Result<bool, StorageError> {
        if self.existing.borrow().iter().any(|(k, key)| *k == r.kind && *key == r.key) {
            return Ok(true);
        }
        if self.kinds.get(r.kind).is_none() {
            return Ok(false);
        }
        let found = self.tables.records(r.kind)?.get(r.key.as_bytes())?.is_some();
        if found {
            let mut recent = self.existing.borrow_mut();
            if recent.len() == RECENT_PARENTS {
                recent.remove(0);
            }
            recent.push((r.kind, r.key.clone()));
        }
        Ok(found)
    }

    fn resolve_links(&self, links: &[Link]) -> Result<Vec<Option<Key>>, StorageError> {
        links.iter().map(|l| self.resolve(l)).collect()
    }

    fn resolve(&self, link: &Link) -> Result<Option<Key>, StorageError> {
        match link {
            Link::First { index, key } => {
                let prefix = tables::ref_prefix(*index, key);
                let t = &self.tables.index_entries;
                let mut range = match tables::prefix_end(&prefix) {
                    Some(end) => t.range(prefix.as_slice()..end.as_slice())?,
                    None => t.range(prefix.as_slice()..)?,
                };
                let found = match range.next() {
                    None => None,
                    Some(item) => {
                        let (k, _) = item?;
                        // Entry = prefix · kind u8 · natural key.
                        Some(Key::from_bytes(k.value()[prefix.len() + 1..].to_vec()))
                    }
                };
                Ok(found)
            }
            Link::Via { kind, key, slot } => Ok(self.envelope(*kind, key)?.and_then(|e| e.links.get(*slot).cloned().flatten())),
        }
    }

    /// Writes `rec` of kind `K` produced by source `src` at `version`.
    ///
    /// Required parents ([`schema::Kind::requires`]) must exist, else nothing is written and
    /// [`Outcome::DependencyMissing`] lists them. Links are resolved in this transaction. A record
    /// whose source version is unchanged, or whose record and links are unchanged, causes no
    /// write. When the object's natural key changed, the record under the old key is removed.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures (the batch should then be dropped).
    pub fn upsert<K: Kind>(&mut self, src: &SourceRef, version: &str, rec: &K::Record, now: Timestamp) -> Result<Outcome, StorageError> {
        let parts = Parts {
            key: &K::key(rec),
            bytes: &encode(rec),
            requires: &K::requires(rec),
            links: &K::links(rec),
            document: None,
            manager: None,
        };
        self.upsert_parts::<K>(src, version, rec, parts, now)
    }

    /// [`WriteBatch::upsert`] of a record whose key, encoding, parents and links were derived
    /// beforehand ([`Encoded::new`]).
    ///
    /// # Errors
    /// As [`WriteBatch::upsert`].
    pub fn upsert_encoded<K: Kind>(
        &mut self,
        src: &SourceRef,
        version: &str,
        rec: &Encoded<K>,
        now: Timestamp,
    ) -> Result<Outcome, StorageError> {
        let parts = Parts {
            key: &rec.key,
            bytes: &rec.bytes,
            requires: &rec.requires,
            links: &rec.links,
            document: rec.document.as_deref(),
            manager: rec.manager.as_deref(),
        };
        self.upsert_parts::<K>(src, version, &rec.record, parts, now)
    }

    fn upsert_parts<K: Kind>(
        &mut self,
        src: &SourceRef,
        version: &str,
        rec: &K::Record,
        parts: Parts<'_>,
        now: Timestamp,
    ) -> Result<Outcome, StorageError> {
        self.begin_source_change(src, Some(version), parts.manager);
        let outcome = self.upsert_source::<K>(src, version, rec, parts, now);
        self.begin_source_change_end();
        outcome
    }

    /// Tells the history that the changes until [`WriteBatch::begin_source_change_end`] are
    /// those of the source object `src` ([`crate::history::Recorder::begin`]).
    fn begin_source_change(&mut self, src: &SourceRef, version: Option<&str>, manager: Option<&str>) {
        if let Some(h) = &mut self.history {
            h.begin(Some(crate::history::SourceChange {
                kind: src.kind,
                namespace: src.namespace.clone(),
                name: src.name.clone(),
                version: version.map(str::to_string),
                manager: manager.filter(|m| m.len() <= crate::history::MAX_MANAGER_BYTES).map(str::to_string),
            }));
        }
    }

    fn begin_source_change_end(&mut self) {
        if let Some(h) = &mut self.history {
            h.begin(None);
        }
    }

    fn upsert_source<K: Kind>(
        &mut self,
        src: &SourceRef,
        version: &str,
        rec: &K::Record,
        parts: Parts<'_>,
        now: Timestamp,
    ) -> Result<Outcome, StorageError> {
        self.now = now;
        if self.rebuilding.contains(&K::ID) {
            let staged = crate::rebuild::Staged {
                version: version.to_string(),
                record: Some(parts.bytes.to_vec()),
                document: parts.document.map(<[u8]>::to_vec),
                live: true,
                damaged: false,
            };
            crate::rebuild::stage(self.tables.txn, src, &staged)?;
            self.sources_changed = true;
            return Ok(Outcome::Staged);
        }
        let key = parts.key.clone();
        let skey = tables::source_key(src.kind, &src.namespace, &src.name);
        let previous = self.source_at(&skey)?;
        let missing: Vec<Parent> = parts.requires.iter().filter(|r| !self.exists(r).unwrap_or(false)).cloned().collect();
        if !missing.is_empty() {
            return Ok(Outcome::DependencyMissing(missing));
        }
        let old = self.envelope(K::ID, &key)?;
        if let Some(holder) = old.as_ref().and_then(|o| self.holder(src, o, &key).transpose()) {
            return Ok(Outcome::Conflict(holder?));
        }
        if let Some(prev) = &previous {
            if prev.key != key {
                self.remove_owned(src, &prev.key, 0)?;
            }
        }
        let links = match old.as_ref().filter(|o| !self.rederiving.is_empty() && o.record == parts.bytes) {
            // While a kind is re-deriving, a record whose encoding did not change keeps the
            // links it holds: they are resolved once that kind is whole (`relink_all`).
            Some(o) => o.links.clone(),
            None => self.resolve_links(parts.links)?,
        };
        let unlinked = K::RETRY_UNLINKED && links.first().is_some_and(Option::is_none);
        let old = match previous.as_ref().is_some_and(|p| p.key != key) {
            // The removal of the previous key may have re-linked (rewritten) records.
            true => self.envelope(K::ID, &key)?,
            false => old,
        };
        let bytes = parts.bytes;
        let same =
            old.as_ref().is_some_and(|o| o.record == bytes && o.links == links && o.source.0 == src.namespace && o.source.1 == src.name);
        let written = if same {
            self.keep_replaced_document(K::ID, &key, &skey, previous.as_ref(), version)?;
            false
        } else {
            let old_rec: Option<K::Record> = old.as_ref().map(|o| decode(&o.record, K::ID.name())).transpose()?;
            let env = Envelope {
                created_at: K::created_at(rec).or(old.as_ref().map(|o| o.created_at)).unwrap_or(now),
                last_modified_at: now,
                revision: self.revision,
                links,
                source: (src.namespace.clone(), src.name.clone()),
                record: bytes.to_vec(),
            };
            let old_pair = old_rec.as_ref().zip(old.as_ref());
            self.replace::<K>(&key, rec, old_pair, &env, 0)?;
            true
        };
        if previous.as_ref().is_none_or(|p| p.key != key || p.version != version) {
            let same_version = previous.as_ref().is_some_and(|p| p.version == version);
            self.put_source(K::ID, &skey, SourceEntry { key, version: version.to_string() }, same_version, parts.document)?;
        }
        Ok(match (unlinked, written) {
            (true, w) => Outcome::Unlinked { written: w },
            (false, true) => Outcome::Written,
            (false, false) => Outcome::Unchanged,
        })
    }

    /// The source of the record `key` moves from `previous` to `version` without changing the
    /// record: no revision, but the newest one keeps the document it was written from
    /// ([`crate::history::Recorder::keep_document`]).
    fn keep_replaced_document(
        &mut self,
        kind: KindId,
        key: &Key,
        skey: &[u8],
        previous: Option<&SourceEntry>,
        version: &str,
    ) -> Result<(), StorageError> {
        let (Some(h), Some(previous)) = (&mut self.history, previous) else { return Ok(()) };
        if previous.key == *key && previous.version != version {
            if let Some(document) = self.tables.documents.get(skey)? {
                h.keep_document(kind, key, document.value().to_vec(), previous.version.clone());
            }
        }
        Ok(())
    }

    /// Writes the source entry `entry` at `skey` and its document: `document` when given, else
    /// the stored one goes unless it is of the same version (`same_version`): a document of an
    /// older version never stays.
    fn put_source(
        &mut self,
        kind: KindId,
        skey: &[u8],
        entry: SourceEntry,
        same_version: bool,
        document: Option<&[u8]>,
    ) -> Result<(), StorageError> {
        self.source_memo.replace(None);
        self.tables.sources.insert(skey, encode(&entry).as_slice())?;
        self.source_writes += 1;
        match document {
            Some(doc) => {
                let doc = self.document_as_stored(kind, doc);
                self.tables.documents.insert(skey, &*doc)?;
            }
            None if !same_version => {
                self.tables.documents.remove(skey)?;
            }
            None => {}
        }
        self.sources_changed = true;
        Ok(())
    }

    /// The other source object that holds `key` with the stored record `env`, if `src` is not
    /// its source and that object's source entry still points to `key`.
    fn holder(&self, src: &SourceRef, env: &Envelope, key: &Key) -> Result<Option<SourceRef>, StorageError> {
        if env.source.0 == src.namespace && env.source.1 == src.name {
            return Ok(None);
        }
        let holder = SourceRef { kind: src.kind, namespace: env.source.0.clone(), name: env.source.1.clone() };
        Ok(self.source(&holder)?.is_some_and(|e| e.key == *key).then_some(holder))
    }

    /// Stores `new_env` for `rec` under `key`, replacing `old` (record + envelope) if any:
    /// indexes, counters, then dependents.
    fn replace<K: Kind>(
        &mut self,
        key: &Key,
        rec: &K::Record,
        old: Option<(&K::Record, &Envelope)>,
        new_env: &Envelope,
        depth: u8,
    ) -> Result<(), StorageError> {
        let orders = self.maintained.for_key(K::ID, key);
        let old_entries = old.map(|(r, e)| entries_of::<K>(key, r, e, orders));
        let new_entries = entries_of::<K>(key, rec, new_env, orders);
        self.apply_entries(K::ID, old_entries.as_ref(), Some(&new_entries))?;
        self.tables.records_mut(K::ID)?.insert(key.as_bytes(), encode(new_env).as_slice())?;
        self.changed = true;
        self.touch::<K>(key, old, Some((rec, new_env)));
        let mut deps = K::dependents(rec, &new_env.links);
        if let Some((r, e)) = old {
            deps.extend(K::dependents(r, &e.links));
        }
        self.cascade(&deps, depth)
    }

    fn apply_entries(&mut self, kind: KindId, old: Option<&Entries>, new: Option<&Entries>) -> Result<(), StorageError> {
        // Entries both in `old` and `new` stay as they are (a relink or an edit moves a few).
        let t = &mut self.tables;
        let (old_order, new_order) = (old.map_or(&[][..], |o| &o.order), new.map_or(&[][..], |n| &n.order));
        for e in old_order.iter().filter(|e| !new_order.contains(e)) {
            t.order.remove(e.as_slice())?;
        }
        for e in new_order.iter().filter(|e| !old_order.contains(e)) {
            t.order.insert(e.as_slice(), ())?;
        }
        let (old_entries, new_entries) = (old.map_or(&[][..], |o| &o.index_entries), new.map_or(&[][..], |n| &n.index_entries));
        for e in old_entries.iter().filter(|e| !new_entries.contains(e)) {
            t.index_entries.remove(e.as_slice())?;
        }
        for e in new_entries.iter().filter(|e| !old_entries.contains(e)) {
            t.index_entries.insert(e.as_slice(), ())?;
        }
        for k in old.iter().flat_map(|o| o.counter_keys(kind)) {
            *self.counts.entry(k).or_default() -= 1;
        }
        for k in new.iter().flat_map(|n| n.counter_keys(kind)) {
            *self.counts.entry(k).or_default() += 1;
        }
        Ok(())
    }

    /// Writes the counter deltas of the batch into `counts` (a counter reaching 0 is removed).
    fn write_counts(txn: &WriteTransaction, deltas: BTreeMap<Vec<u8>, i64>) -> Result<(), StorageError> {
        let mut counts = txn.open_table(tables::COUNTS)?;
        for (k, d) in deltas.into_iter().filter(|(_, d)| *d != 0) {
            let cur = counts.get(k.as_slice())?.map(|v| v.value()).unwrap_or(0) as i64;
            let next = (cur + d).max(0) as u64;
            if next == 0 {
                counts.remove(k.as_slice())?;
            } else {
                counts.insert(k.as_slice(), next)?;
            }
        }
        Ok(())
    }

    /// Re-links every record listed under the given secondary-index ranges.
    fn cascade(&mut self, deps: &[(schema::IndexName, Key)], depth: u8) -> Result<(), StorageError> {
        // While kinds are re-deriving, links are resolved once they are whole (`relink_all`):
        // resolved record by record, a link could move to a record that comes back first and
        // then back again, rewriting its holder twice.
        if deps.is_empty() || !self.rederiving.is_empty() {
            return Ok(());
        }
        if depth >= MAX_DEPTH {
            tracing::warn!(depth, "link cascade too deep; stopping (a kind declares cyclic dependents)");
            return Ok(());
        }
        let mut targets: BTreeSet<(KindId, Key)> = BTreeSet::new();
        {
            let t = &self.tables.index_entries;
            for (index, lookup) in deps {
                let prefix = tables::ref_prefix(*index, lookup);
                let range = match tables::prefix_end(&prefix) {
                    Some(end) => t.range(prefix.as_slice()..end.as_slice())?,
                    None => t.range(prefix.as_slice()..)?,
                };
                for item in range {
                    let (k, _) = item?;
                    let rest = &k.value()[prefix.len()..];
                    if let Some(kind) = rest.first().and_then(|c| KindId::from_code(*c)) {
                        targets.insert((kind, Key::from_bytes(rest[1..].to_vec())));
                    }
                }
            }
        }
        let kinds = self.kinds.clone();
        let unreadable = self.unreadable.clone();
        for (kind, key) in targets.into_iter().filter(|(kind, _)| !unreadable.contains(kind)) {
            if let Some(ops) = kinds.get(kind) {
                ops.relink(self, &key, depth + 1)?;
            }
        }
        Ok(())
    }

    /// Deletes the record produced by `src`.
    ///
    /// Resolves the natural key through the `sources` table (never through a cache), so it works
    /// on a cold start. Deleting a parent never deletes children; dependents are re-linked.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn delete(&mut self, src: &SourceRef, now: Timestamp) -> Result<Outcome, StorageError> {
        self.now = now;
        if self.rebuilding.contains(&src.kind) {
            let gone = crate::rebuild::Staged { version: String::new(), record: None, document: None, live: true, damaged: false };
            crate::rebuild::stage(self.tables.txn, src, &gone)?;
            self.sources_changed = true;
            return Ok(Outcome::Deleted);
        }
        let Some(entry) = self.source(src)? else { return Ok(Outcome::NotFound) };
        self.begin_source_change(src, None, None);
        let removed = self.remove_owned(src, &entry.key, 0);
        self.begin_source_change_end();
        removed?;
        self.source_memo.replace(None);
        let skey = tables::source_key(src.kind, &src.namespace, &src.name);
        self.tables.sources.remove(skey.as_slice())?;
        self.source_writes += 1;
        self.tables.documents.remove(skey.as_slice())?;
        self.changed = true;
        Ok(Outcome::Deleted)
    }

    /// Removes the record under `key` if `src` produced it.
    fn remove_owned(&mut self, src: &SourceRef, key: &Key, depth: u8) -> Result<(), StorageError> {
        let owned = self.envelope(src.kind, key)?.is_some_and(|e| e.source.0 == src.namespace && e.source.1 == src.name);
        if !owned {
            return Ok(());
        }
        let kinds = self.kinds.clone();
        match kinds.get(src.kind) {
            Some(ops) => ops.remove(self, key, depth),
            None => Ok(()),
        }
    }

    /// Resolves the links of every stored record that has any, of every kind, again (the end
    /// of a re-derivation, [`crate::versions`]; the writes of a re-deriving kind re-link no
    /// dependents until then): a record whose links resolve as stored is not written. Returns
    /// the number of records checked.
    pub(crate) fn relink_all(&mut self, now: Timestamp) -> Result<u64, StorageError> {
        self.now = now;
        self.rederiving.clear();
        let kinds = self.kinds.clone();
        let mut checked = 0;
        let unreadable = self.unreadable.clone();
        for (kind, _) in kinds.versions().into_iter().filter(|(kind, _)| !unreadable.contains(kind)) {
            let Some(ops) = kinds.get(kind) else { continue };
            let mut linked = Vec::new();
            for item in self.tables.records(kind)?.iter()? {
                let (k, v) = item?;
                let env: Envelope = decode(v.value(), kind.name())?;
                if !env.links.is_empty() {
                    linked.push(Key::from_bytes(k.value().to_vec()));
                }
            }
            for key in &linked {
                ops.relink(self, key, 0)?;
            }
            checked += linked.len() as u64;
        }
        Ok(checked)
    }

    /// Stores `document` for the source object `src` when the store has none for it (a store
    /// written before documents were kept, [`crate::Store::filling_documents`]): called for an
    /// object the source hands over unchanged.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn fill_document(&mut self, src: &SourceRef, document: &[u8]) -> Result<(), StorageError> {
        let skey = tables::source_key(src.kind, &src.namespace, &src.name);
        if self.tables.documents.get(skey.as_slice())?.is_none() && self.tables.sources.get(skey.as_slice())?.is_some() {
            let document = self.document_as_stored(src.kind, document);
            self.tables.documents.insert(skey.as_slice(), &*document)?;
            self.sources_changed = true;
        }
        Ok(())
    }

    /// `document` (of `kind`, as a source encoded it) as the documents table keeps it: compressed
    /// with its kind's dictionary ([`crate::documents::Dictionaries::with_dictionary`]), but
    /// while loading, when a document compressed alone is kept as it is and left to
    /// [`crate::Store::recompress_documents`] once the load has ended.
    fn document_as_stored<'d>(&self, kind: KindId, document: &'d [u8]) -> std::borrow::Cow<'d, [u8]> {
        match self.loading {
            true => std::borrow::Cow::Borrowed(document),
            false => self.dictionaries.with_dictionary(kind, document),
        }
    }

    /// Removes every record of `kind` and what is derived from them (ordering and secondary
    /// entries, counters) without decoding any, keeping the kind's source entries and documents:
    /// the switch of a kind whose previous records this build cannot read
    /// ([`crate::rebuild`]). Each removal is told to the feed as a record no viewer could see
    /// (its scopes are unknown). Returns how many were removed.
    pub(crate) fn forget_records(&mut self, kind: KindId) -> Result<usize, StorageError> {
        let keys: std::collections::HashSet<Vec<u8>> = {
            let t = self.tables.records(kind)?;
            t.iter()?.map(|item| item.map(|(k, _)| k.value().to_vec())).collect::<Result<_, _>>()?
        };
        let t = self.tables.records_mut(kind)?;
        for k in &keys {
            t.remove(k.as_slice())?;
        }
        let (start, end) = ([kind.code()], [kind.code() + 1]);
        self.tables.order.retain_in::<&[u8], _>(&start[..]..&end[..], |_, _| false)?;
        self.tables.index_entries.retain(|entry, _| !tables::ref_entry_of(entry, kind, &keys))?;
        self.tables.txn.open_table(tables::COUNTS)?.retain_in::<&[u8], _>(&start[..]..&end[..], |_, _| false)?;
        self.counts.retain(|k, _| k.first() != Some(&kind.code()));
        self.existing.borrow_mut().clear();
        if let Some(t) = &mut self.touched {
            t.extend(keys.iter().map(|k| RecordChange { kind, key: Key::from_bytes(k.clone()), before: Some(Vec::new()), after: None }));
        }
        self.changed |= !keys.is_empty();
        Ok(keys.len())
    }

    /// Stores `document` as the source document of the `sources` key `skey`.
    pub(crate) fn put_document(&mut self, skey: &[u8], document: &[u8]) -> Result<(), StorageError> {
        let document = match skey.first().and_then(|c| KindId::from_code(*c)) {
            Some(kind) => self.dictionaries.with_dictionary(kind, document),
            None => std::borrow::Cow::Borrowed(document),
        };
        self.tables.documents.insert(skey, &*document)?;
        self.sources_changed = true;
        Ok(())
    }

    /// Removes the source document of the `sources` key `skey`.
    pub(crate) fn drop_document(&mut self, skey: &[u8]) -> Result<(), StorageError> {
        self.tables.documents.remove(skey)?;
        self.sources_changed = true;
        Ok(())
    }

    /// The store's revision as of this point of the batch: the new one once a record changed.
    pub(crate) fn revision_so_far(&self) -> u64 {
        if self.changed {
            self.revision
        } else {
            self.revision - 1
        }
    }

    /// Whether anything was written so far.
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// Ends the batch: closes its tables and, when anything changed, writes the counters, the
    /// new revision and the commit time, for [`crate::Store::write`] to commit.
    pub(crate) fn finish(self, now: Timestamp) -> Result<Finished, StorageError> {
        let txn = self.tables.txn;
        drop(self.tables);
        tables::add_source_writes(txn, self.source_writes)?;
        if !self.changed {
            // Only source versions moved (an edited document that projects to the same record):
            // keep them, so the next pass sees the object as unchanged, and the documents they
            // replaced in the revisions they were written from. Nothing at all: no durable
            // write (retries of unlinked records stay cheap).
            if let (Some(mut recorder), true) = (self.history, self.sources_changed) {
                crate::history::keep_documents(txn, &mut recorder)?;
            }
            return Ok(Finished { keep: self.sources_changed, revision: None, changed: None, feed: self.feed });
        }
        WriteBatch::write_counts(txn, self.counts)?;
        {
            let mut meta = txn.open_table(tables::META)?;
            meta.insert("revision", self.revision)?;
            meta.insert("last_commit", now.0.max(0) as u64)?;
        }
        let changed = self.touched.map(merge_changes);
        match (self.history, &changed) {
            (Some(recorder), Some(changes)) => crate::history::append(txn, self.revision, now, changes, recorder)?,
            _ => crate::history::skip(txn, self.revision)?,
        }
        Ok(Finished { keep: true, revision: Some(self.revision), changed, feed: self.feed })
    }
}

/// What an ended batch leaves to commit ([`WriteBatch::finish`]).
pub(crate) struct Finished {
    /// Whether to commit (else abort: nothing was written).
    keep: bool,
    revision: Option<u64>,
    changed: Option<Vec<RecordChange>>,
    feed: Arc<Feed>,
}

impl Finished {
    /// Commits `txn` durably (or aborts it when nothing was written) and tells the feed; the new
    /// revision, `None` when no record changed. The dictionaries of `dictionaries` not stored
    /// yet are committed with it (the batch's documents may be compressed with them).
    pub(crate) fn commit(self, txn: WriteTransaction, dictionaries: &crate::documents::Dictionaries) -> Result<Option<u64>, StorageError> {
        match self.keep {
            true => {
                let stored = dictionaries.store_new(&txn)?;
                txn.commit()?;
                dictionaries.mark_stored(&stored);
            }
            false => txn.abort()?,
        }
        if let (Some(revision), Some(changed)) = (self.revision, self.changed) {
            self.feed.send(Committed { revision, changes: changed.into() });
        }
        Ok(self.revision)
    }
}

impl WriteBatch<'_> {
    /// Logs the batch's changes ([`crate::history`]) with `settings`.
    /// With `defer_index`, a batch of creations only leaves its revisions' index to
    /// [`crate::Store::index_history`].
    pub(crate) fn record_history(&mut self, settings: crate::history::HistorySettings, defer_index: bool) {
        if self.touched.is_none() {
            self.touched = Some(Vec::with_capacity(4096));
        }
        self.history = Some(crate::history::Recorder::new(settings, defer_index));
    }

    /// Whether the changes of sources are revisions of their objects from now on
    /// ([`crate::history`]): off while a re-derivation switches records it translated again.
    pub(crate) fn history_revisions(&mut self, on: bool) {
        if let Some(h) = &mut self.history {
            h.revisions = on;
        }
    }

    /// The transaction, for tables the batch does not hold open ([`OpenTables`]): checkpoints
    /// ([`crate::checkpoint`]), the re-derivation marks in `meta`. Marks the batch as worth
    /// committing even when no record changed (neither bumps the revision).
    pub(crate) fn txn_for_other_tables(&mut self) -> &WriteTransaction {
        self.sources_changed = true;
        self.tables.txn
    }
}
