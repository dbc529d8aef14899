//! The read side: [`ReadView`], one consistent redb read transaction.

use crate::codec::decode;
use crate::tables::{self, OrderField, OrderSet};
use crate::write::KindTable;
use crate::{Envelope, StorageError, Wanted};
use redb::{ReadTransaction, ReadableTable};
use schema::common::StatusPhase;
use schema::{GraphqlEnum, IndexName, Key, Kind, KindId, Scope, Timestamp};
use std::sync::Arc;
use std::sync::OnceLock;

/// The record keys of one kind.
type RecordKeys = std::collections::HashSet<Vec<u8>>;

/// A record with what the store keeps next to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored<R> {
    /// Natural key.
    pub key: Key,
    /// The record.
    pub record: R,
    /// `createdAt`.
    pub created_at: Timestamp,
    /// `lastModifiedAt`.
    pub last_modified_at: Timestamp,
    /// Resolved links, in [`schema::Kind::links`] order.
    pub links: Vec<Option<Key>>,
    /// The log position of the revision this value shows, for a past version of the record
    /// ([`crate::history`]); `None`: the record as stored now.
    pub as_of: Option<crate::history::LogPosition>,
}

/// A consistent snapshot of the store for reading. Cheap to create; hold it for one request.
pub struct ReadView {
    txn: ReadTransaction,
    order: redb::ReadOnlyTable<&'static [u8], ()>,
    index_entries: redb::ReadOnlyTable<&'static [u8], ()>,
    /// Records tables opened by this view, by [`KindId::code`]: opening a table looks it up in
    /// redb's table tree, and one console request reads the same few tables dozens of times.
    records: Box<[OnceLock<RecordsTable>]>,
    kinds: Arc<KindTable>,
    /// The ordering indexes built in this view's snapshot (`built_orders`), read on first use.
    built: OnceLock<OrderSet>,
    /// The counters table, opened on first use (a request reads several counters).
    counts: OnceLock<CountsTable>,
    /// Asked in long reads (in-memory sorts); `true` stops them ([`ReadView::interrupt_when`]).
    interrupt: OnceLock<Box<dyn Fn() -> bool + Send + Sync>>,
    /// Kinds whose records this view refuses to read ([`ReadView::refuse_while_rederiving`]).
    refused: OnceLock<Vec<KindId>>,
    wanted: Arc<Wanted>,
    dictionaries: crate::documents::Dictionaries,
    /// The salt of the history index's digests, read on first use.
    pub(crate) history_salt: OnceLock<u64>,
    /// The revision after which revisions wait for their history index entries, read on first
    /// use ([`ReadView::unindexed_after`]).
    pub(crate) history_unindexed: OnceLock<Option<u64>>,
    /// The team scopes' revisions that wait for their index, shared by the store's views.
    pub(crate) unindexed_tail: Arc<crate::history::UnindexedTail>,
    /// The helper reading ahead of this view's scans of records tables, when asked for
    /// ([`ReadView::read_ahead`]). Declared before `_reader`: dropping it waits for the helper,
    /// which holds a table of this view's transaction.
    pub(crate) read_ahead: OnceLock<Option<crate::read_ahead::ReadAhead>>,
    /// Counted by [`crate::Store::reopen`], which waits for the views of the database it closes.
    _reader: crate::ReaderGuard,
}

type RecordsTable = redb::ReadOnlyTable<&'static [u8], &'static [u8]>;

/// A record's `createdAt`, resolved links and source object (`namespace`, `name`).
pub(crate) type RecordOrigin = (Timestamp, Vec<Option<Key>>, (String, String));
type CountsTable = redb::ReadOnlyTable<&'static [u8], u64>;

/// One ordering-index entry: the cursor suffix (sort value · natural key) and the natural key.
pub type OrderEntry = (Vec<u8>, Key);

/// The rows of [`ReadView::scan_records`]: `(cursor suffix, record)`, lazily, item errors yielded.
pub type RecordRows<'a, R> = Box<dyn Iterator<Item = Result<(Vec<u8>, Stored<R>), StorageError>> + 'a>;

/// An entry of a records table as redb yields it: natural key and envelope.
type RawEntry = (redb::AccessGuard<'static, &'static [u8]>, redb::AccessGuard<'static, &'static [u8]>);

impl ReadView {
    pub(crate) fn new(
        txn: ReadTransaction,
        kinds: Arc<KindTable>,
        wanted: Arc<Wanted>,
        reader: crate::ReaderGuard,
        dictionaries: crate::documents::Dictionaries,
        unindexed_tail: Arc<crate::history::UnindexedTail>,
    ) -> Result<ReadView, StorageError> {
        let order = txn.open_table(tables::ORDER)?;
        let index_entries = txn.open_table(tables::INDEX_ENTRIES)?;
        let codes = KindId::ALL.iter().map(|k| usize::from(k.code())).max().unwrap_or(0) + 1;
        let records = (0..codes).map(|_| OnceLock::new()).collect();
        Ok(ReadView {
            txn,
            order,
            index_entries,
            records,
            kinds,
            built: OnceLock::new(),
            counts: OnceLock::new(),
            interrupt: OnceLock::new(),
            refused: OnceLock::new(),
            wanted,
            dictionaries,
            history_salt: OnceLock::new(),
            history_unindexed: OnceLock::new(),
            unindexed_tail,
            read_ahead: OnceLock::new(),
            _reader: reader,
        })
    }

    /// The store's document dictionaries ([`crate::documents`]).
    pub(crate) fn dictionaries(&self) -> &crate::documents::Dictionaries {
        &self.dictionaries
    }

    /// Makes long reads of this view (the in-memory sort of an order not built yet) ask `stop`
    /// every 1024 records and end with [`StorageError::Interrupted`] once it says `true` (a
    /// request whose deadline passed). Set once; later calls are ignored.
    pub fn interrupt_when(&self, stop: impl Fn() -> bool + Send + Sync + 'static) {
        let _ = self.interrupt.set(Box::new(stop));
    }

    /// Makes the reads queries use ([`ReadView::get`], [`ReadView::scan`], [`ReadView::count`],
    /// [`ReadView::phase_counts`], [`ReadView::with_prefix`], [`ReadView::lookup_records`],
    /// [`ReadView::contains`]) of the kinds in `kinds` fail with [`StorageError::Rederiving`]:
    /// a view handed to a query while those kinds are re-derived ([`crate::Store::rederiving`])
    /// answers for them with a clear error rather than with incomplete records. Set once; later
    /// calls are ignored.
    pub fn refuse_while_rederiving(&self, kinds: Vec<KindId>) {
        let _ = self.refused.set(kinds);
    }

    /// `Ok` when queries may read `kind` ([`ReadView::refuse_while_rederiving`]).
    fn serving(&self, kind: KindId) -> Result<(), StorageError> {
        match self.refused.get() {
            Some(refused) if refused.contains(&kind) => Err(StorageError::Rederiving(kind)),
            _ => Ok(()),
        }
    }

    /// Makes a helper thread read the records ahead of this view's scans of a records table in
    /// key order ([`ReadView::scan_records`] of the natural-key order of [`Scope::All`]), at most
    /// `window` entries ahead of what the scan took, so that the scan finds its pages in redb's
    /// cache: for a view that walks a whole table page after page (an export). The helper
    /// follows the latest such scan and ends with the view (its drop waits for it). Set once;
    /// later calls are ignored; without a thread (the system refused one) scans read as before.
    pub fn read_ahead(&self, window: usize) {
        let _ = self.read_ahead.get_or_init(|| crate::read_ahead::ReadAhead::start(window));
    }

    pub(crate) fn interrupted(&self) -> bool {
        self.interrupt.get().is_some_and(|stop| stop())
    }

    /// The ordering indexes this view's store maintains ([`OrderSet`]).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn built_orders(&self) -> Result<OrderSet, StorageError> {
        if let Some(b) = self.built.get() {
            return Ok(*b);
        }
        let b = OrderSet::read(&self.txn.open_table(tables::BUILT)?)?;
        Ok(*self.built.get_or_init(|| b))
    }

    /// The records table of `kind`, opened once per view.
    fn records(&self, kind: KindId) -> Result<&RecordsTable, StorageError> {
        let slot = &self.records[usize::from(kind.code())];
        if let Some(t) = slot.get() {
            return Ok(t);
        }
        let t = self.txn.open_table(tables::records(kind))?;
        // Another reader of this view may have opened it meanwhile: either is the same table.
        Ok(slot.get_or_init(|| t))
    }

    /// The underlying redb read transaction.
    pub(crate) fn txn(&self) -> &ReadTransaction {
        &self.txn
    }

    /// The store revision this view reflects (0 for an empty store).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn revision(&self) -> Result<u64, StorageError> {
        Ok(self.txn.open_table(tables::META)?.get("revision")?.map(|v| v.value()).unwrap_or(0))
    }

    /// Who may see the record of `kind` under `key` ([`schema::Kind::scopes`]); `None` when
    /// there is none.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn scopes_of(&self, kind: KindId, key: &Key) -> Result<Option<Vec<schema::Scope>>, StorageError> {
        self.serving(kind)?;
        let Some(ops) = self.kinds.get(kind) else { return Ok(None) };
        let Some(v) = self.records(kind)?.get(key.as_bytes())? else { return Ok(None) };
        let env: Envelope = decode(v.value(), kind.name())?;
        Ok(Some(ops.entries(key, &env, tables::OrderSet::KEYS_ONLY)?.scopes))
    }

    /// The record of kind `K` under `key`.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn get<K: Kind>(&self, key: &Key) -> Result<Option<Stored<K::Record>>, StorageError> {
        self.serving(K::ID)?;
        match self.records(K::ID)?.get(key.as_bytes())? {
            None => Ok(None),
            Some(v) => Ok(Some(stored::<K>(key.clone(), v.value())?)),
        }
    }

    /// The SHA-256 of everything stored for the records of `kind`: every natural key and
    /// envelope (times, revision, links, source, record bytes), in key order. Two stores with
    /// equal digests hold byte-identical records of that kind (a re-derivation that must not
    /// touch a kind, two restores of one snapshot).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn digest(&self, kind: KindId) -> Result<[u8; 32], StorageError> {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        for item in self.records(kind)?.iter()? {
            let (k, v) = item?;
            for part in [k.value(), v.value()] {
                h.update((part.len() as u64).to_le_bytes());
                h.update(part);
            }
        }
        Ok(h.finalize().into())
    }

    /// The source object `(namespace, name)` that produced the record of `kind` under `key`;
    /// `None` when there is no such record.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn source_of(&self, kind: KindId, key: &Key) -> Result<Option<(String, String)>, StorageError> {
        match self.records(kind)?.get(key.as_bytes())? {
            None => Ok(None),
            Some(v) => {
                let env: EnvelopeRef = crate::codec::decode_borrowed(v.value(), kind.name())?;
                Ok(Some((env.source.0.to_string(), env.source.1.to_string())))
            }
        }
    }

    /// What the record of `kind` under `key` holds besides its data: `createdAt`, its resolved
    /// links and its source object (`namespace`, `name`); `None` when there is no such record.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub(crate) fn origin_of(&self, kind: KindId, key: &Key) -> Result<Option<RecordOrigin>, StorageError> {
        match self.records(kind)?.get(key.as_bytes())? {
            None => Ok(None),
            Some(v) => {
                let env: EnvelopeRef = crate::codec::decode_borrowed(v.value(), kind.name())?;
                Ok(Some((env.created_at, env.links, (env.source.0.to_string(), env.source.1.to_string()))))
            }
        }
    }

    /// The store revision that last wrote the record of `kind` under `key`; `None` when there
    /// is no such record.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub(crate) fn revision_of(&self, kind: KindId, key: &Key) -> Result<Option<u64>, StorageError> {
        match self.records(kind)?.get(key.as_bytes())? {
            None => Ok(None),
            Some(v) => Ok(Some(crate::codec::decode_borrowed::<EnvelopeRef>(v.value(), kind.name())?.revision)),
        }
    }

    /// What the store holds of source object `namespace/name` of `kind`: the natural key of
    /// its record and the source version (`metadata.resourceVersion`) it was projected from;
    /// `None` when the store holds nothing of it.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn source_version(&self, kind: KindId, namespace: &str, name: &str) -> Result<Option<(Key, String)>, StorageError> {
        let t = self.txn.open_table(tables::SOURCES)?;
        let Some(v) = t.get(tables::source_key(kind, namespace, name).as_slice())? else { return Ok(None) };
        let entry = crate::write::decode_source_entry(v.value(), kind)?;
        Ok(Some(entry))
    }

    /// Whether a record of `kind` exists under `key`.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn contains(&self, kind: KindId, key: &Key) -> Result<bool, StorageError> {
        self.serving(kind)?;
        Ok(self.records(kind)?.get(key.as_bytes())?.is_some())
    }

    /// Records of kind `K` whose natural key starts with the tuple `prefix`, in key order.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn with_prefix<K: Kind>(&self, prefix: &Key) -> Result<Vec<Stored<K::Record>>, StorageError> {
        self.serving(K::ID)?;
        let t = self.records(K::ID)?;
        let p = prefix.as_bytes();
        let range = match tables::prefix_end(p) {
            Some(end) => t.range(p..end.as_slice())?,
            None => t.range(p..)?,
        };
        let mut out = Vec::new();
        for item in range {
            let (k, v) = item?;
            out.push(stored::<K>(Key::from_bytes(k.value().to_vec()), v.value())?);
        }
        Ok(out)
    }

    /// Number of records of `kind` whose natural key starts with the environment `env`
    /// (0 when the table cannot be read). A range count: O(records of the environment).
    pub fn with_prefix_count(&self, kind: KindId, env: &str) -> usize {
        let Ok(t) = self.txn.open_table(tables::records(kind)) else { return 0 };
        let p = Key::new(&[env]);
        let p = p.as_bytes();
        let end = tables::prefix_end(p);
        let range = match &end {
            Some(end) => t.range(p..end.as_slice()),
            None => t.range(p..),
        };
        range.map(|r| r.count()).unwrap_or(0)
    }

    /// Natural keys of the records listed in secondary index `index` under `lookup`, in
    /// key order, with their kind.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn lookup(&self, index: IndexName, lookup: &Key) -> Result<Vec<(KindId, Key)>, StorageError> {
        let prefix = tables::ref_prefix(index, lookup);
        let range = match tables::prefix_end(&prefix) {
            Some(end) => self.index_entries.range(prefix.as_slice()..end.as_slice())?,
            None => self.index_entries.range(prefix.as_slice()..)?,
        };
        let mut out = Vec::new();
        for item in range {
            let (k, _) = item?;
            let rest = &k.value()[prefix.len()..];
            if let Some(kind) = rest.first().and_then(|c| KindId::from_code(*c)) {
                out.push((kind, Key::from_bytes(rest[1..].to_vec())));
            }
        }
        Ok(out)
    }

    /// Records of kind `K` listed in `index` under `lookup`.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn lookup_records<K: Kind>(&self, index: IndexName, lookup: &Key) -> Result<Vec<Stored<K::Record>>, StorageError> {
        let mut out = Vec::new();
        for (kind, key) in self.lookup(index, lookup)? {
            if kind == K::ID {
                if let Some(s) = self.get::<K>(&key)? {
                    out.push(s);
                }
            }
        }
        Ok(out)
    }

    /// Ordering-index entries of `kind` by `order` in `scope`, lazily in index order (descending
    /// when `reverse`), starting at the cursor suffix `from`: for a forward scan `from` is the
    /// lower bound, for a reverse scan the upper bound (`Included` or `Excluded`).
    ///
    /// The natural-key order of [`Scope::All`] has no ordering entries (every record is in that
    /// scope, and the records table is that order): it is read from the records table, with the
    /// same suffixes (the natural key).
    ///
    /// An order whose index is not built yet ([`OrderSet`]) is answered from the scope's
    /// natural-key entries: every record of the scope is read, and the entries are sorted in
    /// memory (the same suffixes, the same order); the store is asked to build the index
    /// ([`crate::Store::build_orders`]).
    ///
    /// # Errors
    /// [`StorageError`] when the range cannot be opened; item errors are yielded.
    pub fn scan(
        &self,
        kind: KindId,
        order: OrderField,
        scope: &Scope,
        from: std::ops::Bound<&[u8]>,
        reverse: bool,
    ) -> Result<impl Iterator<Item = Result<OrderEntry, StorageError>> + use<>, StorageError> {
        self.serving(kind)?;
        // The natural-key order is always indexed: no need to read `built_orders` for it.
        if order != OrderField::Key && !self.built_orders()?.contains(kind, order) {
            self.wanted.want(kind, order);
            let sorted = self.sorted_in_memory(kind, order, scope, from, reverse)?;
            return Ok(Box::new(sorted.into_iter().map(Ok)) as Box<dyn Iterator<Item = _>>);
        }
        let in_records = tables::derived_from_records(order, scope);
        let prefix = if in_records { Vec::new() } else { tables::order_prefix(kind, order, scope) };
        let plen = prefix.len();
        let entry = move |k: &[u8]| -> Result<OrderEntry, StorageError> {
            let suffix = k[plen..].to_vec();
            let (_, key) = order.split_suffix(&suffix)?;
            Ok((suffix, key))
        };
        Ok(if in_records {
            entries(scan_range(self.records(kind)?, &prefix, from, reverse)?, reverse, entry)
        } else {
            entries(scan_range(&self.order, &prefix, from, reverse)?, reverse, entry)
        })
    }

    /// [`ReadView::scan`] with each entry's record: `(suffix, record)` in the same order, an entry
    /// whose record is gone skipped. The natural-key order of [`Scope::All`] decodes each record
    /// from the records table as the scan passes it (the table is that order); every other scan
    /// reads the record of each entry ([`ReadView::get`]).
    ///
    /// # Errors
    /// [`StorageError`] when the range cannot be opened; item errors (redb, decoding) are yielded.
    pub fn scan_records<K: Kind>(
        &self,
        order: OrderField,
        scope: &Scope,
        from: std::ops::Bound<&[u8]>,
        reverse: bool,
    ) -> Result<RecordRows<'_, K::Record>, StorageError> {
        if !tables::derived_from_records(order, scope) {
            let entries = self.scan(K::ID, order, scope, from, reverse)?;
            return Ok(Box::new(
                entries
                    .filter_map(move |entry| entry.and_then(|(suffix, key)| Ok(self.get::<K>(&key)?.map(|st| (suffix, st)))).transpose()),
            ));
        }
        self.serving(K::ID)?;
        let range = scan_range(self.records(K::ID)?, &[], from, reverse)?;
        let taken = match self.read_ahead.get() {
            Some(Some(ahead)) => {
                Some(ahead.follow(crate::read_ahead::Follow { range: scan_range(self.records(K::ID)?, &[], from, reverse)?, reverse }))
            }
            _ => None,
        };
        let row = move |item: Result<RawEntry, redb::StorageError>| {
            if let Some(taken) = &taken {
                taken.one();
            }
            let (k, v) = item?;
            let suffix = k.value().to_vec();
            let st = stored::<K>(Key::from_bytes(suffix.clone()), v.value())?;
            Ok((suffix, st))
        };
        Ok(if reverse { Box::new(range.rev().map(row)) } else { Box::new(range.map(row)) })
    }

    /// The ordering entries of `kind` by `order` in `scope`, built from the scope's natural-key
    /// entries and the records (an index not built yet; see [`ReadView::scan`]).
    fn sorted_in_memory(
        &self,
        kind: KindId,
        order: OrderField,
        scope: &Scope,
        from: std::ops::Bound<&[u8]>,
        reverse: bool,
    ) -> Result<Vec<OrderEntry>, StorageError> {
        use std::ops::Bound as B;
        let ops = self.kinds.get(kind).ok_or_else(|| StorageError::Corrupt(format!("kind {} is not registered", kind.name())))?;
        let records = self.records(kind)?;
        /// The leading fields of an [`Envelope`]: what a time order sorts by, read without the
        /// record's bytes.
        #[derive(serde::Deserialize)]
        struct Times {
            created_at: Timestamp,
            last_modified_at: Timestamp,
        }
        let mut rows: Vec<OrderEntry> = Vec::new();
        let mut add = |i: usize, key: Key, envelope: &[u8]| -> Result<(), StorageError> {
            if i % 1024 == 1023 && self.interrupted() {
                return Err(StorageError::Interrupted);
            }
            let mut suffix = match order {
                OrderField::CreatedAt | OrderField::LastModifiedAt => {
                    let t: Times = crate::codec::decode_prefix(envelope, kind.name())?;
                    let mut v = Vec::with_capacity(8 + key.as_bytes().len());
                    v.extend_from_slice(&tables::time_sort_value(order, t.created_at, t.last_modified_at).unwrap_or_default());
                    v
                }
                _ => ops.sort_value(&decode::<Envelope>(envelope, kind.name())?, order)?,
            };
            suffix.extend_from_slice(key.as_bytes());
            rows.push((suffix, key));
            Ok(())
        };
        if tables::derived_from_records(OrderField::Key, scope) {
            // The records table is this scope's natural-key order: one pass, no second lookup.
            for (i, item) in records.iter()?.enumerate() {
                let (k, v) = item?;
                add(i, Key::from_bytes(k.value().to_vec()), v.value())?;
            }
        } else {
            for (i, item) in self.scan(kind, OrderField::Key, scope, B::Unbounded, false)?.enumerate() {
                let (_, key) = item?;
                let Some(v) = records.get(key.as_bytes())? else { continue };
                add(i, key, v.value())?;
            }
        }
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        rows.retain(|(s, _)| match (from, reverse) {
            (B::Unbounded, _) => true,
            (B::Included(f), false) => s.as_slice() >= f,
            (B::Excluded(f), false) => s.as_slice() > f,
            (B::Included(f), true) => s.as_slice() <= f,
            (B::Excluded(f), true) => s.as_slice() < f,
        });
        if reverse {
            rows.reverse();
        }
        Ok(rows)
    }

    /// The `counts` table, opened once per view.
    fn counts_table(&self) -> Result<&CountsTable, StorageError> {
        match self.counts.get() {
            Some(t) => Ok(t),
            None => {
                let t = self.txn.open_table(tables::COUNTS)?;
                Ok(self.counts.get_or_init(|| t))
            }
        }
    }

    /// Number of records of `kind` in `scope` (maintained counter, O(1)).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn count(&self, kind: KindId, scope: &Scope) -> Result<u64, StorageError> {
        self.serving(kind)?;
        let counts = self.counts_table()?;
        Ok(counts.get(tables::count_key(kind, scope).as_slice())?.map(|v| v.value()).unwrap_or(0))
    }

    /// Records of `kind` in `scope` per status phase, every phase of [`StatusPhase::ALL`] in
    /// that order, zeros included (maintained counters, O(1)); all zero for a kind without
    /// status ([`schema::Kind::status`]).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn phase_counts(&self, kind: KindId, scope: &Scope) -> Result<Vec<(StatusPhase, u64)>, StorageError> {
        self.serving(kind)?;
        let counts = self.counts_table()?;
        StatusPhase::ALL
            .iter()
            .map(|&p| Ok((p, counts.get(tables::phase_count_key(kind, scope, p).as_slice())?.map(|v| v.value()).unwrap_or(0))))
            .collect()
    }

    /// The kinds re-derived from the volume, with their record keys: such a kind may hold
    /// records this build cannot read (its switch rewrites them), so [`Self::check_invariants`]
    /// leaves its records and their entries out.
    fn rederiving_records(&self) -> Result<Vec<(KindId, RecordKeys)>, StorageError> {
        let meta = self.txn.open_table(tables::META)?;
        let mut rederiving = Vec::new();
        for &kind in KindId::ALL {
            if meta.get(crate::rebuild::mark_key(kind).as_str())?.is_some() {
                let t = self.txn.open_table(tables::records(kind))?;
                let keys = t.iter()?.map(|i| i.map(|(k, _)| k.value().to_vec())).collect::<Result<_, _>>()?;
                rederiving.push((kind, keys));
            }
        }
        Ok(rederiving)
    }

    /// How many stored source documents have no source entry.
    fn documents_without_source(&self) -> Result<u64, StorageError> {
        let sources = self.txn.open_table(tables::SOURCES)?;
        let mut orphans = 0;
        for item in self.txn.open_table(crate::documents::DOCUMENTS)?.iter()? {
            let (k, _) = item?;
            if sources.get(k.value())?.is_none() {
                orphans += 1;
            }
        }
        Ok(orphans)
    }

    /// Checks the store invariants listed in the crate docs; returns every violation found.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn check_invariants(&self) -> Result<Vec<String>, StorageError> {
        let kinds = &self.kinds;
        let maintained = tables::Maintained::read(&self.txn.open_table(tables::BUILT)?, &self.txn.open_table(tables::BUILDING)?)?;
        let mut problems = Vec::new();
        let mut expected_order = std::collections::BTreeSet::new();
        let mut expected_entries = std::collections::BTreeSet::new();
        let mut expected_counts = std::collections::BTreeMap::<Vec<u8>, u64>::new();
        let unchecked = self.rederiving_records()?;
        for &kind in KindId::ALL {
            let Some(ops) = kinds.get(kind) else { continue };
            if unchecked.iter().any(|(k, _)| *k == kind) {
                continue;
            }
            let t = self.txn.open_table(tables::records(kind))?;
            for item in t.iter()? {
                let (k, v) = item?;
                let key = Key::from_bytes(k.value().to_vec());
                let env: Envelope = decode(v.value(), kind.name())?;
                let e = ops.entries(&key, &env, maintained.for_key(kind, &key))?;
                expected_order.extend(e.order);
                expected_entries.extend(e.index_entries);
                for k in tables::counter_keys(kind, &e.scopes, e.phase) {
                    *expected_counts.entry(k).or_default() += 1;
                }
                let src = tables::source_key(kind, &env.source.0, &env.source.1);
                if self.txn.open_table(tables::SOURCES)?.get(src.as_slice())?.is_none() {
                    problems.push(format!("{} {key}: no source entry for {}/{}", kind.name(), env.source.0, env.source.1));
                }
            }
        }
        problems.extend(self.history_problems()?);
        let orphans = self.documents_without_source()?;
        if orphans > 0 {
            problems.push(format!("source documents: {orphans} without a source entry"));
        }
        let skipped = |entry: &[u8]| unchecked.iter().any(|(k, _)| entry.first() == Some(&k.code()));
        let skipped_ref = |entry: &[u8]| unchecked.iter().any(|(k, keys)| tables::ref_entry_of(entry, *k, keys));
        let mut actual_order = std::collections::BTreeSet::new();
        for item in self.order.iter()? {
            let (k, _) = item?;
            if !skipped(k.value()) {
                actual_order.insert(k.value().to_vec());
            }
        }
        let mut actual_refs = std::collections::BTreeSet::new();
        for item in self.index_entries.iter()? {
            let (k, _) = item?;
            if !skipped_ref(k.value()) {
                actual_refs.insert(k.value().to_vec());
            }
        }
        if actual_order != expected_order {
            problems.push(format!(
                "ordering index: {} missing, {} dangling",
                expected_order.difference(&actual_order).count(),
                actual_order.difference(&expected_order).count()
            ));
        }
        if actual_refs != expected_entries {
            problems.push(format!(
                "secondary index: {} missing, {} dangling",
                expected_entries.difference(&actual_refs).count(),
                actual_refs.difference(&expected_entries).count()
            ));
        }
        let counts = self.txn.open_table(tables::COUNTS)?;
        let mut actual_counts = std::collections::BTreeMap::new();
        for item in counts.iter()? {
            let (k, v) = item?;
            if !skipped(k.value()) {
                actual_counts.insert(k.value().to_vec(), v.value());
            }
        }
        if actual_counts != expected_counts {
            problems.push("counters differ from record counts".to_string());
        }
        Ok(problems)
    }
}

/// The ordering entries of the keys of `range` (a records table's or `order_index`'s), in key
/// order or reversed.
fn entries<V: redb::Value + 'static>(
    range: redb::Range<'static, &'static [u8], V>,
    reverse: bool,
    entry: impl Fn(&[u8]) -> Result<OrderEntry, StorageError> + 'static,
) -> Box<dyn Iterator<Item = Result<OrderEntry, StorageError>>> {
    let items = range.map(move |item| entry(item?.0.value()));
    if reverse {
        Box::new(items.rev())
    } else {
        Box::new(items)
    }
}

/// The entries of `table` of a scan of the entries under `prefix` from the cursor suffix `from`
/// ([`scan_bounds`]), in key order.
fn scan_range<V: redb::Value + 'static>(
    table: &redb::ReadOnlyTable<&'static [u8], V>,
    prefix: &[u8],
    from: std::ops::Bound<&[u8]>,
    reverse: bool,
) -> Result<redb::Range<'static, &'static [u8], V>, StorageError> {
    use std::ops::Bound;
    let (lo, hi) = scan_bounds(prefix, from, reverse);
    let upper = hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    Ok(table.range::<&[u8]>((Bound::Included(lo.as_slice()), upper))?)
}

/// The key range `[lo, hi)` (`hi` `None` = unbounded) of a scan of the entries under `prefix`
/// from the cursor suffix `from` (see [`ReadView::scan`]).
fn scan_bounds(prefix: &[u8], from: std::ops::Bound<&[u8]>, reverse: bool) -> (Vec<u8>, Option<Vec<u8>>) {
    use std::ops::Bound as B;
    let at = |f: &[u8]| {
        let mut at = prefix.to_vec();
        at.extend_from_slice(f);
        at
    };
    let (mut lo, mut hi) = (prefix.to_vec(), tables::prefix_end(prefix));
    // A suffix ends with a terminated natural key, so no suffix is a proper prefix of
    // another: prefix_end(at) is the smallest key greater than `at`.
    match (from, reverse) {
        (B::Unbounded, _) => {}
        (B::Included(f), false) => lo = at(f),
        (B::Excluded(f), false) => lo = tables::prefix_end(&at(f)).unwrap_or_else(|| at(f)),
        (B::Included(f), true) => hi = tables::prefix_end(&at(f)),
        (B::Excluded(f), true) => hi = Some(at(f)),
    }
    (lo, hi)
}

/// [`Envelope`] borrowing its strings and record bytes from the stored value (the same
/// encoding, field for field): a read decodes the record straight from the page, without
/// copying it or the source name first.
#[derive(serde::Deserialize)]
struct EnvelopeRef<'a> {
    created_at: Timestamp,
    last_modified_at: Timestamp,
    revision: u64,
    links: Vec<Option<Key>>,
    #[serde(borrow)]
    source: (&'a str, &'a str),
    record: &'a [u8],
}

/// The record of kind `K` under `key` from its stored envelope bytes.
pub(crate) fn stored<K: Kind>(key: Key, bytes: &[u8]) -> Result<Stored<K::Record>, StorageError> {
    let env: EnvelopeRef = crate::codec::decode_borrowed(bytes, K::ID.name())?;
    Ok(Stored {
        record: decode(env.record, K::ID.name())?,
        key,
        created_at: env.created_at,
        last_modified_at: env.last_modified_at,
        links: env.links,
        as_of: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use schema::kinds::zone::Zone;

    /// A borrowed decode of a stored envelope gives what the owned one does.
    #[test]
    fn envelopes_decode_borrowed_as_owned() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path()).unwrap();
        store
            .write(Timestamp(11), |batch| {
                crate::test_support::zone_version(batch, "a\u{0}b", "7", Timestamp(11));
                Ok(())
            })
            .unwrap();
        let view = store.read().unwrap();
        let key = Key::new(&["poc", "a\u{0}b"]);
        let owned: Envelope = decode(view.records(KindId::Zone).unwrap().get(key.as_bytes()).unwrap().unwrap().value(), "zone").unwrap();
        let s = view.get::<Zone>(&key).unwrap().unwrap();
        assert_eq!(s.record, decode::<schema::kinds::zone::ZoneRecord>(&owned.record, "zone").unwrap());
        assert_eq!(s.record.gateway_url.as_deref(), Some("https://7.example"));
        assert_eq!((s.created_at, s.last_modified_at, &s.links), (owned.created_at, owned.last_modified_at, &owned.links));
        assert_eq!(s.created_at, Timestamp(11));
        assert_eq!(view.with_prefix::<Zone>(&Key::new(&["poc"])).unwrap(), vec![s]);
    }
}
