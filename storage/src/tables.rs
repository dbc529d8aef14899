//! Every table and key layout of the store (the storage contract).
//!
//! | table | key | value |
//! |---|---|---|
//! | `meta` | `"schema_version"`, `"revision"`, `"last_commit"` | `u64` (last_commit: ns since epoch) |
//! | one per kind, named by the kind's plural (`apisubscriptions`) | natural key ([`schema::Key`]) | postcard [`crate::Envelope`] |
//! | `order_index` | `kind u8 · order u8 · scope key · sort value · natural key` | `()` |
//! | `ref_index` | `Key(index name) · lookup key · kind u8 · natural key` | `()` |
//! | `sources` | `kind u8 · Key(namespace, name)` | postcard `SourceEntry` (natural key, source version) |
//! | `counts` | `kind u8 · scope key` | `u64` number of records of the kind in the scope |
//! | `source_checkpoints` | source-chosen string | opaque bytes ([`crate::checkpoint`]; not read-model data) |
//!
//! The natural-key order of [`Scope::All`] has no `order_index` entries: every record is in that
//! scope and the records table is already in that order, so [`crate::ReadView::scan`] reads it
//! there ([`derived_from_records`]).
//!
//! Sort values: [`OrderField::Key`] none (the natural key itself orders); `CreatedAt` /
//! `LastModifiedAt` 8 bytes ([`schema::Timestamp::to_sort_bytes`]); `Name` one escaped,
//! terminated key component. The `sort value · natural key` part is the *suffix* that cursors
//! carry.

use crate::StorageError;
use redb::{TableDefinition, WriteTransaction};
use schema::{Key, KindId, RefIndex, Scope};

/// `meta`: layout version, revision, last commit time.
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// `order_index`: ordering entries per scope.
pub const ORDER: TableDefinition<&[u8], ()> = TableDefinition::new("order_index");
/// `ref_index`: secondary index entries.
pub const REFS: TableDefinition<&[u8], ()> = TableDefinition::new("ref_index");
/// `sources`: source object → natural key.
pub const SOURCES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("sources");
/// `counts`: records per (kind, scope).
pub const COUNTS: TableDefinition<&[u8], u64> = TableDefinition::new("counts");

/// The records table of `kind`.
pub fn records(kind: KindId) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
    TableDefinition::new(kind.plural())
}

/// Creates every table (idempotent).
pub(crate) fn open_all(txn: &WriteTransaction) -> Result<(), StorageError> {
    txn.open_table(ORDER)?;
    txn.open_table(REFS)?;
    txn.open_table(SOURCES)?;
    txn.open_table(COUNTS)?;
    txn.open_table(crate::checkpoint::CHECKPOINTS)?;
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
pub fn ref_prefix(index: RefIndex, lookup: &Key) -> Vec<u8> {
    ref_bytes(index, lookup, 0)
}

/// A full secondary entry key.
pub fn ref_entry(index: RefIndex, lookup: &Key, kind: KindId, key: &Key) -> Vec<u8> {
    let mut v = ref_bytes(index, lookup, 1 + key.as_bytes().len());
    v.push(kind.code());
    v.extend_from_slice(key.as_bytes());
    v
}

/// [`ref_prefix`] with room for `extra` more bytes.
fn ref_bytes(index: RefIndex, lookup: &Key, extra: usize) -> Vec<u8> {
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
    fn prefix_end_bounds_the_prefix() {
        assert_eq!(prefix_end(&[1, 2]), Some(vec![1, 3]));
        assert_eq!(prefix_end(&[1, 0xff]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xff]), None);
    }
}
