//! Every table and key layout of the store (the storage contract).
//!
//! | table | key | value |
//! |---|---|---|
//! | `meta` | `"schema_version"`, `"revision"`, `"last_commit"`, `"kind_version:<plural>"`, `"rederiving:<plural>"` ([`crate::versions`]) | `u64` (last_commit: ns since epoch) |
//! | one per kind, named by the kind's plural (`apisubscriptions`) | natural key ([`schema::Key`]) | postcard [`crate::Envelope`] |
//! | `order_index` | `kind u8 · order u8 · scope key · sort value · natural key` | `()` |
//! | `ref_index` | `Key(index name) · lookup key · kind u8 · natural key` | `()` |
//! | `sources` | `kind u8 · Key(namespace, name)` | postcard `SourceEntry` (natural key, source version) |
//! | `counts` | `kind u8 · scope key` | `u64` number of records of the kind in the scope |
//! | `source_checkpoints` | source-chosen string | opaque bytes ([`crate::checkpoint`]; not read-model data) |
//! | `built_orders` | `kind u8 · order u8` | `u64` store revision when the ordering index was built |
//! | `building_orders` | `kind u8 · order u8` | the natural key of the last record the build has covered (empty: none yet) |
//! | `source_documents` | the `sources` key | zstd of the source document's JSON ([`crate::documents`]) |
//! | `document_dictionaries` | `kind u8` | postcard (id, bytes): the zstd dictionary of the kind's documents |
//! | `sync_state` | `"source"`, `"synced"` | the source followed and the revision of its completed initial sync ([`crate::sync`]; not read-model data) |
//!
//! The natural-key order of [`Scope::All`] has no `order_index` entries: every record is in that
//! scope and the records table is already in that order, so [`crate::ReadView::scan`] reads it
//! there ([`derived_from_records`]).
//!
//! **Ordering indexes are built on first use.** The natural-key order ([`OrderField::Key`]) of
//! every scope is always indexed: it is the default order, and the one a team's page is read
//! in. The entries of the other orders of a kind (`createdAt`, `lastModifiedAt`, `name`) are
//! written only once that (kind, order) is listed in `built_orders` ([`OrderSet`]): the first
//! query that sorts by it is answered by sorting the scope's records in memory
//! ([`crate::ReadView::scan`]) and asks the writer to build the index
//! ([`crate::Store::build_orders`]); from then on every write maintains it. A load
//! therefore writes about half as many index entries per record. After the initial sync the
//! server asks for every order of every kind (`storage.prebuildOrders`), so the first sorted
//! query finds its index.
//!
//! **Builds run in chunks** (layout version 6): an order asked for is listed in
//! `building_orders` with a cursor, the natural key of the last record whose entries are written.
//! Each [`crate::Store::build_orders`] call writes the entries of the next records after the
//! cursor (at most the number it is given) and commits, so a write never waits longer than one
//! chunk. Meanwhile every write maintains the entries of the records up to the cursor and leaves
//! those after it to the build ([`Maintained::for_key`]); once the cursor has passed the last
//! record, the order moves to `built_orders` and reads use it. A build cut short by a restart
//! goes on from its cursor.
//!
//! Sort values: [`OrderField::Key`] none (the natural key itself orders); `CreatedAt` /
//! `LastModifiedAt` 8 bytes ([`schema::Timestamp::to_sort_bytes`]); `Name` one escaped,
//! terminated key component. The `sort value · natural key` part is the *suffix* that cursors
//! carry.

use crate::StorageError;
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use schema::common::StatusPhase;
use schema::{GraphqlEnum, IndexName, Key, KindId, Scope};

/// `meta`: layout version, revision, last commit time.
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// The `meta` key counting every insert and removal of a `sources` entry ever committed: it
/// moves whenever a source entry changes (a [`crate::checkpoint`] seal compares it). Absent: 0.
pub const SOURCES_GENERATION: &str = "sources_generation";

/// Adds `writes` inserts or removals of `sources` entries to [`SOURCES_GENERATION`], in `txn`.
///
/// # Errors
/// [`StorageError`] on redb failures.
pub(crate) fn add_source_writes(txn: &WriteTransaction, writes: u64) -> Result<(), StorageError> {
    if writes > 0 {
        let mut meta = txn.open_table(META)?;
        let generation = meta.get(SOURCES_GENERATION)?.map(|v| v.value()).unwrap_or(0);
        meta.insert(SOURCES_GENERATION, generation.saturating_add(writes))?;
    }
    Ok(())
}

/// `order_index`: ordering entries per scope.
pub const ORDER: TableDefinition<&[u8], ()> = TableDefinition::new("order_index");
/// `ref_index`: secondary index entries.
pub const INDEX_ENTRIES: TableDefinition<&[u8], ()> = TableDefinition::new("ref_index");
/// `sources`: source object → natural key.
pub const SOURCES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sources");
/// `counts`: records per (kind, scope).
pub const COUNTS: TableDefinition<&[u8], u64> = TableDefinition::new("counts");

/// `built_orders`: the ordering indexes beyond the natural-key order that are built and
/// maintained ([`OrderSet`]).
pub const BUILT: TableDefinition<&[u8], u64> = TableDefinition::new("built_orders");

/// `building_orders`: the ordering indexes being built, each with its cursor ([`Maintained`]).
pub const BUILDING: TableDefinition<&[u8], &[u8]> = TableDefinition::new("building_orders");

/// The records table of `kind`.
pub fn records(kind: KindId) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    TableDefinition::new(kind.plural())
}

/// Creates every table (idempotent).
pub(crate) fn open_all(txn: &WriteTransaction) -> Result<(), StorageError> {
    txn.open_table(ORDER)?;
    txn.open_table(INDEX_ENTRIES)?;
    txn.open_table(SOURCES)?;
    txn.open_table(COUNTS)?;
    txn.open_table(BUILT)?;
    txn.open_table(BUILDING)?;
    txn.open_table(crate::checkpoint::CHECKPOINTS)?;
    txn.open_table(crate::sync::SYNC_STATE)?;
    txn.open_table(crate::documents::DOCUMENTS)?;
    txn.open_table(crate::documents::DICTIONARIES)?;
    for &k in KindId::ALL {
        txn.open_table(records(k))?;
    }
    Ok(())
}

/// The orders a connection can be sorted by. Every record has an ordering entry for each field
/// its kind supports, in each of its scopes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OrderField {
    /// Natural key order (the default, and the tie-breaker of every other order).
    Key = 0,
    /// `createdAt`.
    CreatedAt = 1,
    /// `lastModifiedAt`.
    LastModifiedAt = 2,
    /// `name` (kinds with [`schema::Kind::ORDER_BY_NAME`]).
    Name = 3,
}

impl OrderField {
    /// Inverse of `as u8`.
    pub fn from_code(c: u8) -> Option<OrderField> {
        [OrderField::Key, OrderField::CreatedAt, OrderField::LastModifiedAt, OrderField::Name].into_iter().find(|o| *o as u8 == c)
    }

    /// Splits an index suffix into (sort value, natural key).
    ///
    /// # Errors
    /// [`StorageError::Corrupt`] when the suffix is too short or unterminated.
    pub fn split_suffix(self, suffix: &[u8]) -> Result<(&[u8], Key), StorageError> {
        let at = match self {
            OrderField::Key => 0,
            OrderField::CreatedAt | OrderField::LastModifiedAt => {
                if suffix.len() < 8 {
                    return Err(StorageError::Corrupt("short order suffix".into()));
                }
                8
            }
            OrderField::Name => component_end(suffix).ok_or_else(|| StorageError::Corrupt("unterminated name".into()))?,
        };
        Ok((&suffix[..at], Key::from_bytes(suffix[at..].to_vec())))
    }
}

/// The ordering indexes a store maintains: (kind, order) pairs. The natural-key order
/// ([`OrderField::Key`]) of every kind is always in the set; the others are in it once built
/// (the `built_orders` table, see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrderSet(u128);

impl OrderSet {
    /// Only the natural-key orders (a store that built nothing else).
    pub const KEYS_ONLY: OrderSet = OrderSet(0);

    fn bit(kind: KindId, order: OrderField) -> Option<u128> {
        let at = u32::from(kind.code()) * 4 + order as u32;
        (order != OrderField::Key && at < 128).then(|| 1u128 << at)
    }

    /// Whether entries of `kind` by `order` are maintained.
    pub fn contains(self, kind: KindId, order: OrderField) -> bool {
        order == OrderField::Key || OrderSet::bit(kind, order).is_some_and(|b| self.0 & b != 0)
    }

    /// Adds (kind, order); returns whether it was new.
    pub fn insert(&mut self, kind: KindId, order: OrderField) -> bool {
        let Some(b) = OrderSet::bit(kind, order) else { return false };
        let new = self.0 & b == 0;
        self.0 |= b;
        new
    }

    /// Whether no order beyond the natural-key ones is in the set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The (kind, order) pairs beyond the natural-key orders, in [`KindId::ALL`] order, then by
    /// order field.
    pub fn iter(self) -> impl Iterator<Item = (KindId, OrderField)> {
        KindId::ALL.iter().flat_map(move |&k| {
            [OrderField::CreatedAt, OrderField::LastModifiedAt, OrderField::Name]
                .into_iter()
                .filter(move |&o| self.contains(k, o))
                .map(move |o| (k, o))
        })
    }

    /// Reads the set from the `built_orders` table `t`; unknown rows are ignored.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub(crate) fn read(t: &impl redb::ReadableTable<&'static [u8], u64>) -> Result<OrderSet, StorageError> {
        let mut set = OrderSet::KEYS_ONLY;
        for item in t.iter()? {
            let (k, _) = item?;
            if let Some((kind, order)) = parse_built_key(k.value()) {
                set.insert(kind, order);
            }
        }
        Ok(set)
    }
}

/// The `built_orders` (and `building_orders`) key of (kind, order).
pub fn built_key(kind: KindId, order: OrderField) -> [u8; 2] {
    [kind.code(), order as u8]
}

/// The (kind, order) of a `built_orders` or `building_orders` key; `None` for an unknown one.
pub fn parse_built_key(key: &[u8]) -> Option<(KindId, OrderField)> {
    match *key {
        [kind, order] => Some((KindId::from_code(kind)?, OrderField::from_code(order)?)),
        _ => None,
    }
}

/// An ordering index being built (`building_orders`): the entries of the records of `kind` up to
/// `covered` (a natural key, inclusive; empty: none yet) are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Building {
    /// The kind.
    pub kind: KindId,
    /// The order.
    pub order: OrderField,
    /// The natural key of the last record covered; empty before the first chunk.
    pub covered: Vec<u8>,
}

/// The ordering entries a write maintains: those of every order built ([`OrderSet`]), and those
/// of each order being built for the records its build has covered (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Maintained {
    /// The orders built (`built_orders`).
    pub built: OrderSet,
    /// The orders being built (`building_orders`), in key order.
    pub building: Vec<Building>,
}

impl Maintained {
    /// Reads the `built_orders` table `built` and the `building_orders` table `building`;
    /// unknown rows are ignored.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub(crate) fn read(
        built: &impl redb::ReadableTable<&'static [u8], u64>,
        building: &impl redb::ReadableTable<&'static [u8], &'static [u8]>,
    ) -> Result<Maintained, StorageError> {
        let mut in_progress = Vec::new();
        for item in building.iter()? {
            let (k, v) = item?;
            if let Some((kind, order)) = parse_built_key(k.value()) {
                in_progress.push(Building { kind, order, covered: v.value().to_vec() });
            }
        }
        Ok(Maintained { built: OrderSet::read(built)?, building: in_progress })
    }

    /// The orders whose entries the record `key` of `kind` has: the built ones, and those being
    /// built whose cursor is at or past `key`.
    pub fn for_key(&self, kind: KindId, key: &Key) -> OrderSet {
        let mut set = self.built;
        for b in self.building.iter().filter(|b| b.kind == kind && key.as_bytes() <= b.covered.as_slice()) {
            set.insert(kind, b.order);
        }
        set
    }
}

/// The sort value of a time order (`CreatedAt`, `LastModifiedAt`) of a record whose envelope
/// holds `created_at` and `last_modified_at`; `None` for the other orders.
pub fn time_sort_value(order: OrderField, created_at: schema::Timestamp, last_modified_at: schema::Timestamp) -> Option<[u8; 8]> {
    match order {
        OrderField::CreatedAt => Some(created_at.to_sort_bytes()),
        OrderField::LastModifiedAt => Some(last_modified_at.to_sort_bytes()),
        OrderField::Key | OrderField::Name => None,
    }
}

/// Length of the first escaped, terminated key component of `bytes` (terminator included).
fn component_end(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0 => return Some(i + 1),
            1 => i += 2,
            _ => i += 1,
        }
    }
    None
}

/// Whether the ordering of `order` in `scope` is the records table itself (no `order_index`
/// entries): the natural-key order of [`Scope::All`].
pub fn derived_from_records(order: OrderField, scope: &Scope) -> bool {
    order == OrderField::Key && *scope == Scope::All
}

/// Prefix of the ordering entries of `kind` by `order` in `scope`.
pub fn order_prefix(kind: KindId, order: OrderField, scope: &Scope) -> Vec<u8> {
    let mut v = vec![kind.code(), order as u8];
    v.extend_from_slice(scope.key().as_bytes());
    v
}

/// Prefix of the secondary entries of `index` under `lookup`.
pub fn ref_prefix(index: IndexName, lookup: &Key) -> Vec<u8> {
    ref_bytes(index, lookup, 0)
}

/// A full secondary entry key.
pub fn index_entry(index: IndexName, lookup: &Key, kind: KindId, key: &Key) -> Vec<u8> {
    let mut v = ref_bytes(index, lookup, 1 + key.as_bytes().len());
    v.push(kind.code());
    v.extend_from_slice(key.as_bytes());
    v
}

/// Whether the secondary-index entry `entry` ([`index_entry`]) belongs to a record of `kind`
/// whose natural key is in `keys`: read without knowing the lookup key's length, by trying the
/// kind byte at each component boundary after the index name. A lookup component can start
/// with the kind's byte only if it holds a control character, and then the rest must still be
/// one of `keys` exactly.
pub fn ref_entry_of(entry: &[u8], kind: KindId, keys: &std::collections::HashSet<Vec<u8>>) -> bool {
    let Some(mut at) = component_end(entry) else { return false };
    while at < entry.len() {
        if entry[at] == kind.code() && keys.contains(&entry[at + 1..]) {
            return true;
        }
        match component_end(&entry[at..]) {
            Some(n) => at += n,
            None => return false,
        }
    }
    false
}

/// [`ref_prefix`] with room for `extra` more bytes.
fn ref_bytes(index: IndexName, lookup: &Key, extra: usize) -> Vec<u8> {
    let name = Key::new(&[index.0]);
    let mut v = Vec::with_capacity(name.as_bytes().len() + lookup.as_bytes().len() + extra);
    v.extend_from_slice(name.as_bytes());
    v.extend_from_slice(lookup.as_bytes());
    v
}

/// The `sources` key of object `namespace/name` of `kind`.
pub fn source_key(kind: KindId, namespace: &str, name: &str) -> Vec<u8> {
    let key = Key::new(&[namespace, name]);
    let mut v = Vec::with_capacity(1 + key.as_bytes().len());
    v.push(kind.code());
    v.extend_from_slice(key.as_bytes());
    v
}

/// The `counts` key of `kind` in `scope`.
pub fn count_key(kind: KindId, scope: &Scope) -> Vec<u8> {
    let key = scope.key();
    let mut v = Vec::with_capacity(1 + key.as_bytes().len());
    v.push(kind.code());
    v.extend_from_slice(key.as_bytes());
    v
}

/// The `counts` key of the records of `kind` in `scope` whose status phase is `phase`: the
/// scope's [`count_key`], then `0xFF` (never part of a key: its parts are UTF-8) and the phase's
/// position in [`StatusPhase::ALL`]. Within the kind's key range, so purging a kind purges them.
pub fn phase_count_key(kind: KindId, scope: &Scope, phase: StatusPhase) -> Vec<u8> {
    let mut v = count_key(kind, scope);
    let position = StatusPhase::ALL.iter().position(|&p| p == phase).unwrap_or(0);
    v.extend_from_slice(&[0xFF, position as u8]);
    v
}

/// Every `counts` key a record of `kind` with `scopes` and status `phase` counts under: one per
/// scope, and one per scope and phase.
pub fn counter_keys<'a>(kind: KindId, scopes: &'a [Scope], phase: Option<StatusPhase>) -> impl Iterator<Item = Vec<u8>> + 'a {
    scopes
        .iter()
        .map(move |s| count_key(kind, s))
        .chain(phase.into_iter().flat_map(move |p| scopes.iter().map(move |s| phase_count_key(kind, s, p))))
}

/// The exclusive upper bound of all keys starting with `prefix` (`None` = unbounded).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_suffix_splits_at_the_first_unescaped_terminator() {
        let mut suffix = Key::new(&["a\u{0}b"]).as_bytes().to_vec();
        let key = Key::new(&["poc", "t", "app"]);
        suffix.extend_from_slice(key.as_bytes());
        let (sort, k) = OrderField::Name.split_suffix(&suffix).unwrap();
        assert_eq!(sort, Key::new(&["a\u{0}b"]).as_bytes());
        assert_eq!(k, key);
    }

    #[test]
    fn an_order_set_always_holds_the_key_orders_and_what_was_inserted() {
        let mut set = OrderSet::KEYS_ONLY;
        assert!(set.is_empty());
        assert!(set.contains(KindId::Approval, OrderField::Key));
        assert!(!set.contains(KindId::Approval, OrderField::CreatedAt));
        assert!(set.insert(KindId::Approval, OrderField::CreatedAt));
        assert!(!set.insert(KindId::Approval, OrderField::CreatedAt));
        assert!(!set.insert(KindId::Team, OrderField::Key), "the key order is always there");
        assert!(set.contains(KindId::Approval, OrderField::CreatedAt));
        assert!(!set.contains(KindId::ApprovalRequest, OrderField::CreatedAt));
        assert!(!set.contains(KindId::Approval, OrderField::LastModifiedAt));
        set.insert(KindId::Zone, OrderField::Name);
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![(KindId::Zone, OrderField::Name), (KindId::Approval, OrderField::CreatedAt)]);
    }

    /// A record's entries of an order being built exist once the cursor is at or past its key.
    #[test]
    fn an_order_being_built_is_maintained_up_to_its_cursor() {
        let (a, b, c) = (Key::new(&["poc", "a"]), Key::new(&["poc", "b"]), Key::new(&["poc", "c"]));
        let mut built = OrderSet::KEYS_ONLY;
        built.insert(KindId::Zone, OrderField::CreatedAt);
        let maintained = Maintained {
            built,
            building: vec![
                Building { kind: KindId::Zone, order: OrderField::LastModifiedAt, covered: b.as_bytes().to_vec() },
                Building { kind: KindId::Team, order: OrderField::Name, covered: Vec::new() },
            ],
        };
        for (key, expected) in [(&a, true), (&b, true), (&c, false)] {
            let set = maintained.for_key(KindId::Zone, key);
            assert!(set.contains(KindId::Zone, OrderField::CreatedAt), "built orders always");
            assert_eq!(set.contains(KindId::Zone, OrderField::LastModifiedAt), expected, "{key}");
        }
        assert!(!maintained.for_key(KindId::Team, &a).contains(KindId::Team, OrderField::Name), "an empty cursor covers nothing");
        assert!(!maintained.for_key(KindId::Approval, &a).contains(KindId::Approval, OrderField::LastModifiedAt));
    }

    #[test]
    fn prefix_end_bounds_the_prefix() {
        assert_eq!(prefix_end(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff]), None);
    }
}
