//! The redb read model: tables, secondary and ordering indexes, counters and the write path.
//!
//! Start at [`Store`] (open a data directory's `readmodel.redb`), [`Store::read`] (a consistent
//! [`ReadView`] for queries) and [`Store::write`] (a [`WriteBatch`]: upserts and deletes applied
//! in one redb write transaction, committed durably).
//!
//! **Architecture invariant:** nothing here knows about HTTP, GraphQL or Kubernetes clients. The
//! store is generic over [`schema::Kind`]; no kind has code of its own here.
//!
//! # Layout
//! See [`tables`] for every table and key layout. Records of each kind live in their own table
//! keyed by natural key; the value is an [`Envelope`] (times, links, source, postcard record).
//!
//! # Invariants (checked by [`ReadView::check_invariants`])
//! 1. Every record has exactly its index entries: one ordering entry per (order field, scope)
//!    but the natural-key order of [`schema::Scope::All`] (the records table itself), and one
//!    secondary entry per [`schema::Kind::refs`] item; no entry points to a missing record.
//! 2. Counters equal the number of records per (kind, scope).
//! 3. The revision strictly increases: every commit that changed something bumps it by one.
//! 4. Every source entry points to a record whose envelope names that source.
//!
//! # Snapshots
//! See [`snapshot`] for the snapshot file format and its *Version changes* list.

pub mod checkpoint;
mod codec;
mod error;
mod read;
pub mod search;
pub mod snapshot;
pub mod tables;
mod write;

pub use error::StorageError;
pub use read::{OrderEntry, ReadView, Stored};
pub use tables::OrderField;
pub use write::{Committed, Encoded, Outcome, SourceRef, WriteBatch};

use redb::{Database, ReadableDatabase, ReadableTable};
use schema::{Key, Timestamp};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// redb's page cache size unless configured ([`Store::open_with_cache`]): 64 MiB. Pages that miss
/// it are read from the file (the OS page cache). Measured at 1M objects against redb's own
/// default of 1 GiB (BENCHMARKS.md): the same restart time and query latencies, a faster initial
/// load, and about 550 MB less memory.
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// The file name of the store inside a data directory.
pub const DB_FILE: &str = "readmodel.redb";

/// The read-model layout version, stored in the `meta` table. A store of an older version is
/// migrated on open ([`Store::open`]); a store of a newer one is refused (the read model is
/// derived data: delete it and it is rebuilt).
///
/// # Version changes
/// * 1 → 2: the natural-key order of [`schema::Scope::All`] is read from the records tables
///   ([`tables::derived_from_records`]); its `order_index` entries are gone (the migration
///   deletes them).
pub const SCHEMA_VERSION: u64 = 2;

/// What the store keeps next to each record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// `createdAt`: `metadata.creationTimestamp`, else the first projection time.
    pub created_at: Timestamp,
    /// `lastModifiedAt`: when the projected record or its links last changed.
    pub last_modified_at: Timestamp,
    /// The store revision of that change.
    pub revision: u64,
    /// The resolved [`schema::Kind::links`], in order; `None` = unresolved.
    pub links: Vec<Option<Key>>,
    /// The source object (namespace, name) that produced the record.
    pub source: (String, String),
    /// The postcard-encoded record (serialized as bytes: same wire format, decoded in one copy).
    #[serde(with = "serde_bytes")]
    pub record: Vec<u8>,
}

/// The embedded read model. Cheap to clone (shared handle).
#[derive(Clone)]
pub struct Store {
    db: Arc<Database>,
    kinds: Arc<write::KindTable>,
    feed: Arc<write::Feed>,
    search: Arc<search::Slot>,
}

impl Store {
    /// Opens (creating when absent) `dir/readmodel.redb`; creates `dir` when missing. A new
    /// database is created under another name and renamed into place once initialised, so a
    /// kill during creation leaves no unreadable file behind.
    ///
    /// # Errors
    /// [`StorageError::Io`] when the directory cannot be created, [`StorageError::Locked`] when
    /// another process holds the database, [`StorageError::VersionMismatch`] for a store of
    /// another layout version, other variants for redb failures.
    pub fn open(dir: &Path) -> Result<Store, StorageError> {
        Store::open_with_cache(dir, DEFAULT_CACHE_BYTES)
    }

    /// Like [`Store::open`], with redb's page cache limited to `cache_bytes` (reads beyond it
    /// come from the operating system's page cache).
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_with_cache(dir: &Path, cache_bytes: usize) -> Result<Store, StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| StorageError::Io(format!("creating {}: {e}", dir.display())))?;
        let path = dir.join(DB_FILE);
        if !path.exists() {
            Store::create(dir, &path)?;
        }
        Store::open_file(&path, cache_bytes)
    }

    fn open_file(path: &Path, cache_bytes: usize) -> Result<Store, StorageError> {
        let db = redb::Builder::new().set_cache_size(cache_bytes).create(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StorageError::Locked(path.display().to_string()),
            e => StorageError::Database(e.to_string()),
        })?;
        let store = Store { db: Arc::new(db), kinds: Arc::new(write::KindTable::new()), feed: Arc::default(), search: Arc::default() };
        store.init()?;
        Ok(store)
    }

    /// Creates a new, initialised database at `path` atomically: built as a sibling file and
    /// renamed into place once complete, so a process killed while creating it never leaves a
    /// half-written database file at `path` (a leftover sibling is replaced on the next try).
    fn create(dir: &Path, path: &Path) -> Result<(), StorageError> {
        let io = |what: &str, p: &Path, e: std::io::Error| StorageError::Io(format!("{what} {}: {e}", p.display()));
        let fresh = dir.join(format!("{DB_FILE}.creating"));
        if fresh.exists() {
            std::fs::remove_file(&fresh).map_err(|e| io("removing", &fresh, e))?;
        }
        drop(Store::open_file(&fresh, DEFAULT_CACHE_BYTES)?);
        std::fs::File::open(&fresh).and_then(|f| f.sync_all()).map_err(|e| io("syncing", &fresh, e))?;
        std::fs::rename(&fresh, path).map_err(|e| io("renaming into", path, e))?;
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io("syncing", dir, e))
    }

    fn init(&self) -> Result<(), StorageError> {
        let txn = self.db.begin_write()?;
        {
            let mut meta = txn.open_table(tables::META)?;
            let version = meta.get("schema_version")?.map(|v| v.value());
            match version {
                None => {
                    meta.insert("schema_version", SCHEMA_VERSION)?;
                    meta.insert("revision", 0)?;
                }
                Some(v) if v == SCHEMA_VERSION => {}
                Some(1) => {
                    let mut order = txn.open_table(tables::ORDER)?;
                    for &kind in schema::KindId::ALL {
                        let prefix = tables::order_prefix(kind, OrderField::Key, &schema::Scope::All);
                        let end = tables::prefix_end(&prefix).unwrap_or_default();
                        order.retain_in::<&[u8], _>(prefix.as_slice()..end.as_slice(), |_, _| false)?;
                    }
                    meta.insert("schema_version", SCHEMA_VERSION)?;
                    tracing::info!(from = 1, to = SCHEMA_VERSION, "store layout migrated");
                }
                Some(v) => return Err(StorageError::VersionMismatch { found: v, expected: SCHEMA_VERSION }),
            }
            tables::open_all(&txn)?;
        }
        txn.commit()?;
        Ok(())
    }

    /// A consistent read view (one redb read transaction).
    ///
    /// # Errors
    /// [`StorageError`] when redb cannot start the transaction.
    pub fn read(&self) -> Result<ReadView, StorageError> {
        ReadView::new(self.db.begin_read()?)
    }

    /// Starts a write batch. Only one batch runs at a time (redb serializes writers).
    ///
    /// # Errors
    /// [`StorageError`] when redb cannot start the transaction.
    pub fn write(&self) -> Result<WriteBatch, StorageError> {
        WriteBatch::new(self.db.begin_write()?, self.kinds.clone(), self.feed.clone())
    }

    /// Subscribes to committed batches: every later commit that changed something is sent as a
    /// [`Committed`] once durable, in revision order. Used by the search index
    /// ([`search::Catalogue`]) to follow the store. Dropping the receiver unsubscribes.
    pub fn subscribe(&self) -> std::sync::mpsc::Receiver<Committed> {
        self.feed.subscribe()
    }

    /// The search index following this store, while one is open ([`search::Catalogue::open`]
    /// registers it; the store holds it weakly, so it lives as long as its opener keeps it).
    pub fn catalogue(&self) -> Option<search::Catalogue> {
        self.search.get()
    }
}

/// Records for the unit tests of this crate.
#[cfg(test)]
pub(crate) mod test_support {
    use crate::{SourceRef, WriteBatch};
    use schema::common::Meta;
    use schema::kinds::zone::{Zone, ZoneRecord, ZoneVisibility};
    use schema::{KindId, Timestamp};

    /// Writes zone `name` of environment `poc` (source `poc/name`, version `1`) into `batch`.
    pub(crate) fn zone(batch: &mut WriteBatch, name: &str) {
        let meta = Meta { environment: "poc".into(), namespace: "poc".into(), name: name.into(), creation_timestamp: None };
        let rec = ZoneRecord {
            meta,
            visibility: ZoneVisibility::World,
            gateway_url: None,
            ai_gateway_url: None,
            issuer_url: None,
            permissions_url: None,
        };
        let src = SourceRef { kind: KindId::Zone, namespace: "poc".into(), name: name.into() };
        batch.upsert::<Zone>(&src, "1", &rec, Timestamp(5)).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(store: &Store, name: &str) {
        let mut batch = store.write().unwrap();
        test_support::zone(&mut batch, name);
        batch.commit(Timestamp(5)).unwrap();
    }

    /// A store of layout version 1 (natural-key entries of `Scope::All` in `order_index`) opens
    /// as version 2: those entries are deleted, the invariants hold, and admin scans still list
    /// every record in key order.
    #[test]
    fn a_version_1_store_is_migrated_on_open() {
        use schema::{KindId, Scope};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        zone(&store, "b");
        zone(&store, "a");
        // Turn it into what version 1 wrote.
        let keys: Vec<Vec<u8>> = store
            .read()
            .unwrap()
            .scan(KindId::Zone, OrderField::Key, &Scope::All, std::ops::Bound::Unbounded, false)
            .unwrap()
            .map(|e| e.unwrap().1.as_bytes().to_vec())
            .collect();
        assert_eq!(keys.len(), 2);
        let txn = store.db.begin_write().unwrap();
        {
            let mut order = txn.open_table(tables::ORDER).unwrap();
            for k in &keys {
                let mut e = tables::order_prefix(KindId::Zone, OrderField::Key, &Scope::All);
                e.extend_from_slice(k);
                order.insert(e.as_slice(), ()).unwrap();
            }
            txn.open_table(tables::META).unwrap().insert("schema_version", 1).unwrap();
        }
        txn.commit().unwrap();
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), vec!["ordering index: 0 missing, 2 dangling".to_string()]);
        drop(store);

        let store = Store::open(dir.path()).unwrap();
        let view = store.read().unwrap();
        assert_eq!(view.txn().open_table(tables::META).unwrap().get("schema_version").unwrap().unwrap().value(), SCHEMA_VERSION);
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        let after: Vec<Vec<u8>> = view
            .scan(KindId::Zone, OrderField::Key, &Scope::All, std::ops::Bound::Unbounded, false)
            .unwrap()
            .map(|e| e.unwrap().1.as_bytes().to_vec())
            .collect();
        assert_eq!(after, keys);
        assert!(keys[0] < keys[1], "key order: a before b");
    }

    /// A store of a newer layout is refused, never rewritten.
    #[test]
    fn a_store_of_a_newer_layout_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let txn = store.db.begin_write().unwrap();
        txn.open_table(tables::META).unwrap().insert("schema_version", SCHEMA_VERSION + 1).unwrap();
        txn.commit().unwrap();
        drop(store);
        assert!(
            matches!(Store::open(dir.path()), Err(StorageError::VersionMismatch { found, expected: SCHEMA_VERSION }) if found == SCHEMA_VERSION + 1)
        );
    }

    #[test]
    fn a_creation_cut_short_is_redone_and_never_leaves_an_unreadable_store() {
        let dir = tempfile::tempdir().unwrap();
        // What a process killed while creating the database leaves behind.
        let leftover = dir.path().join(format!("{DB_FILE}.creating"));
        std::fs::write(&leftover, vec![0u8; 73728]).unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.read().unwrap().revision().unwrap(), 0);
        assert!(!leftover.exists());
        assert!(dir.path().join(DB_FILE).is_file());
        drop(store);
        // A file at the final name that is not a database is reported, never replaced.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join(DB_FILE), b"not a database").unwrap();
        assert!(matches!(Store::open(other.path()), Err(StorageError::Database(_))));
        assert_eq!(std::fs::read(other.path().join(DB_FILE)).unwrap(), b"not a database");
    }
}
