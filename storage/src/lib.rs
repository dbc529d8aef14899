//! The redb read model: tables, secondary and ordering indexes, counters and the write path.
//!
//! Start at [`Store`] (open a data directory's `readmodel.redb`), [`Store::read`] (a consistent
//! [`ReadView`] for queries) and [`Store::write`] (runs a closure on a [`WriteBatch`]: upserts
//! and deletes applied in one redb write transaction, committed durably when it returns `Ok`).
//!
//! **Architecture invariant:** nothing here knows about HTTP, GraphQL or Kubernetes clients. The
//! store is generic over [`schema::Kind`]; no kind has code of its own here.
//!
//! # Layout
//! See [`tables`] for every table and key layout. Records of each kind live in their own table
//! keyed by natural key; the value is an [`Envelope`] (times, links, source, postcard record).
//!
//! # Invariants (checked by [`ReadView::check_invariants`])
//! 1. Every record has exactly its index entries: one ordering entry per scope and order field
//!    the store maintains ([`tables::OrderSet`]: the natural-key order, and the others once
//!    built), but the natural-key order of [`schema::Scope::All`] (the records table itself), and one
//!    secondary entry per [`schema::Kind::index_entries`] item; no entry points to a missing record.
//! 2. Counters equal the number of records per (kind, scope).
//! 3. The revision strictly increases: every commit that changed something bumps it by one.
//! 4. Every source entry points to a record whose envelope names that source.
//! 5. Every source document ([`documents`]) belongs to a source entry.
//!
//! # Derivation versions
//! The records of each kind are written under its [`schema::Kind::VERSION`]; a kind stored
//! under another version is purged on open and re-derived from the source ([`versions`]).
//!
//! # Snapshots
//! See [`snapshot`] for the snapshot file format and its *Version changes* list.

#![forbid(unsafe_code)]

pub mod analysis;
mod bulk;
pub mod checkpoint;
mod codec;
pub mod documents;
mod error;
pub mod history;
mod read;
mod read_ahead;
pub mod rebuild;
pub mod search;
pub mod snapshot;
pub mod sync;
pub mod tables;
pub mod throttle;
pub mod versions;
mod write;

pub use error::{StorageError, PREVIOUS_FAULT};
pub use read::{OrderEntry, ReadView, Stored};
pub use sync::SyncState;
pub use tables::{Maintained, OrderField, OrderSet};
pub use write::{Committed, Encoded, Outcome, RecordChange, SourceRef, WriteBatch};

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata};
use schema::{Key, Timestamp};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// redb's page cache size unless configured ([`Store::open_with_cache`]): 64 MiB. Pages that miss
/// it are read from the file (the OS page cache). Measured at 1M objects against redb's own
/// default of 1 GiB (BENCHMARKS.md): the same restart time and query latencies, a faster initial
/// load, and about 550 MB less memory.
pub const DEFAULT_CACHE_SIZE: usize = 64 << 20;

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
/// * 2 → 3: ordering indexes beyond the natural-key order are built on first use
///   ([`tables::OrderSet`], table `built_orders`). A layout 2 store holds every one of them, so
///   the migration lists them all as built.
/// * 3 → 4: each kind's derivation version is stored ([`versions`]). The records of a layout 3
///   store are version 1 ([`versions::IMPLICIT_VERSION`]) of every kind, which the migration
///   records; kinds whose version is no longer 1 are then re-derived.
/// * 4 → 5: `counts` also counts records per scope and status phase
///   ([`tables::phase_count_key`]); the migration counts them from the records.
/// * 5 → 6: ordering indexes are built in chunks, each build's cursor in `building_orders`
///   ([`tables::Maintained`]); the migration creates the empty table. A layout 5 build would
///   not maintain the entries of an order half built, so it must not open the store.
///
/// The layout version says how tables are laid out; [`schema::Kind::VERSION`] says how one
/// kind's records are encoded and derived. A change of a record or a translation rule bumps
/// that kind's version, not this one.
pub const SCHEMA_VERSION: u64 = 6;

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

/// The embedded read model. Cheap to clone (shared handle). The database file stays open (and
/// locked against other processes) until the last handle is dropped; [`Store::close`] waits
/// for that.
#[derive(Clone)]
pub struct Store {
    db: Arc<OpenDatabase>,
    /// Told when the last handle is dropped ([`Store::close`]).
    released: Arc<std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>>,
    kinds: Arc<write::KindTable>,
    feed: Arc<write::Feed>,
    search: Arc<search::Slot>,
    wanted: Arc<Wanted>,
    /// The kinds whose re-derivation has not ended ([`versions`]).
    rederiving: Arc<std::sync::Mutex<Vec<schema::KindId>>>,
    /// The kinds re-derived from the volume, with whether their records are served meanwhile
    /// ([`rebuild`]).
    rebuilding: Arc<std::sync::Mutex<Vec<(schema::KindId, bool)>>>,
    /// The dictionaries source documents are compressed with ([`documents`]).
    dictionaries: documents::Dictionaries,
    /// The history's settings ([`history`]).
    history: Arc<std::sync::RwLock<history::HistorySettings>>,
    /// Whether the writer is loading ([`Store::set_loading`]).
    loading: Arc<std::sync::atomic::AtomicBool>,
    /// The team scopes' revisions that wait for their index, read once for every view.
    unindexed_tail: Arc<history::UnindexedTail>,
}

/// The read views of one open database handle, counted so that [`Store::reopen`] can wait for
/// them to end (told by the last one, never polled).
#[derive(Default)]
pub(crate) struct Readers {
    alive: std::sync::atomic::AtomicUsize,
    lock: std::sync::Mutex<()>,
    gone: std::sync::Condvar,
}

/// Held by a read view ([`ReadView`]) while it lives: one of [`Readers`].
pub(crate) struct ReaderGuard(Arc<Readers>);

impl Readers {
    /// Counts a new read view.
    fn enter(self: &Arc<Readers>) -> ReaderGuard {
        self.alive.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        ReaderGuard(self.clone())
    }

    /// Waits until no read view is alive, at most `timeout`; returns how many still are.
    fn wait_gone(&self, timeout: std::time::Duration) -> usize {
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let alive = |_: &mut ()| self.alive.load(std::sync::atomic::Ordering::Acquire) > 0;
        drop(self.gone.wait_timeout_while(guard, timeout, alive).unwrap_or_else(|e| e.into_inner()));
        self.alive.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Drop for ReaderGuard {
    fn drop(&mut self) {
        if self.0.alive.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            // Under the lock, so a waiter between its check and its wait is not missed.
            let _guard = self.0.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.0.gone.notify_all();
        }
    }
}

/// The open database — `None` while [`Store::reopen`] could not open it again — and the signal
/// that it was closed: fields drop in declaration order, so the sender goes (and
/// [`Store::close`] returns) only once the database file is released.
struct OpenDatabase {
    database: std::sync::RwLock<Option<Database>>,
    /// Held by every read view of the database open now; [`Store::reopen`] waits for the
    /// views of the database it closes.
    readers: std::sync::Mutex<Arc<Readers>>,
    path: PathBuf,
    cache_size: usize,
    /// Whether a write of the open handle failed on the volume ([`Store::noting_failure`]):
    /// redb refuses its reads too, so new reads wait (bounded) for [`Store::reopen`].
    failed: std::sync::Mutex<bool>,
    /// `failed`, read without the lock.
    failing: std::sync::atomic::AtomicBool,
    /// Told when `failed` is cleared.
    reopened: std::sync::Condvar,
    /// A write transaction began since the last [`Store::release_write_buffer`].
    written: std::sync::atomic::AtomicBool,
    _released: std::sync::mpsc::Sender<()>,
}

/// How long a new read waits for the reopen that follows a failed write before it tries the
/// failed handle anyway.
pub const READ_WAITS_FOR_REOPEN: std::time::Duration = std::time::Duration::from_secs(10);

/// The database open now, borrowed for one call ([`Store::database`]).
struct Opened<'a>(std::sync::RwLockReadGuard<'a, Option<Database>>, &'a std::sync::atomic::AtomicBool);

impl Opened<'_> {
    /// [`Database::begin_write`], noted for [`Store::release_write_buffer`].
    fn begin_write(&self) -> Result<redb::WriteTransaction, redb::TransactionError> {
        self.1.store(true, std::sync::atomic::Ordering::Release);
        (**self).begin_write()
    }
}

impl std::ops::Deref for Opened<'_> {
    type Target = Database;

    fn deref(&self) -> &Database {
        match self.0.as_ref() {
            Some(database) => database,
            None => unreachable!("Store::database hands out open databases only"),
        }
    }
}

/// What [`Store::reopen`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Reopened {
    /// Read views of the closed database still alive when the wait for them ended (their later
    /// reads fail with [`StorageError::Volume`]).
    pub readers_cut: usize,
    /// Seconds the database file took to open again (redb recovers a file whose last commit
    /// failed).
    pub seconds: f64,
}

/// What [`Store::finish_rederivation`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct Rederived {
    /// The kinds whose re-derivation ended.
    pub kinds: Vec<schema::KindId>,
    /// Records whose links were resolved again (every stored record that has links).
    pub relinked: u64,
    /// The revision of the commit, when a link changed.
    pub revision: Option<u64>,
    /// Time spent, in seconds.
    pub seconds: f64,
}

/// The ordering indexes asked for that are not being built yet, who to tell, and the builds in
/// progress.
#[derive(Default)]
pub(crate) struct Wanted {
    set: std::sync::Mutex<tables::OrderSet>,
    waker: std::sync::Mutex<Option<Waker>>,
    /// Whether `building_orders` holds a build that is not finished (set on open and by each
    /// [`Store::build_orders`]).
    building: std::sync::atomic::AtomicBool,
    /// Per build in progress: when this process wrote its first chunk, and the entries written
    /// since (for [`BuiltOrder`]).
    progress: std::sync::Mutex<std::collections::HashMap<(schema::KindId, OrderField), (std::time::Instant, usize)>>,
}

type Waker = Box<dyn Fn() + Send + Sync>;

impl Wanted {
    /// Notes that a read sorted `kind` by `order` without its index; the first time, wakes
    /// whoever builds indexes ([`Store::on_order_wanted`]).
    pub(crate) fn want(&self, kind: schema::KindId, order: OrderField) {
        let new = self.set.lock().unwrap_or_else(|e| e.into_inner()).insert(kind, order);
        if new {
            if let Some(wake) = self.waker.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                wake();
            }
        }
    }

    /// Takes the orders asked for; while a build call handles them, `building` says so (set
    /// under the same lock, so [`Wanted::any`] never sees neither).
    fn take(&self) -> tables::OrderSet {
        let mut set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        let taken = std::mem::take(&mut *set);
        if !taken.is_empty() {
            self.building.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        taken
    }

    /// Puts back orders taken by a build call that failed, to be tried again.
    fn put_back(&self, orders: tables::OrderSet) {
        let mut set = self.set.lock().unwrap_or_else(|e| e.into_inner());
        for (kind, order) in orders.iter() {
            set.insert(kind, order);
        }
    }

    fn any(&self) -> bool {
        !self.set.lock().unwrap_or_else(|e| e.into_inner()).is_empty() || self.building.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// An ordering index whose build ended in a [`Store::build_orders`] call.
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltOrder {
    /// The kind.
    pub kind: schema::KindId,
    /// The order.
    pub order: OrderField,
    /// Ordering entries written by this process (one per record and scope; a build that a
    /// restart cut short wrote the others before).
    pub entries: usize,
    /// Seconds from the first chunk this process wrote to the end of the last (the writes
    /// between chunks included).
    pub seconds: f64,
}

/// What one [`Store::build_orders`] call did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrderBuildStep {
    /// Records read (and their entries written) in this call.
    pub records: usize,
    /// The builds this call began (asked for and neither built nor being built).
    pub started: Vec<(schema::KindId, OrderField)>,
    /// The builds this call ended: these orders are now read from their index.
    pub built: Vec<BuiltOrder>,
    /// Builds left for later calls (asked for, not finished).
    pub left: usize,
    /// Whether a build is left for a later call (`left > 0`).
    pub pending: bool,
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
        Store::open_with_cache(dir, DEFAULT_CACHE_SIZE)
    }

    /// Like [`Store::open`], with redb's page cache limited to `cache_size` (reads beyond it
    /// come from the operating system's page cache).
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_with_cache(dir: &Path, cache_size: usize) -> Result<Store, StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| StorageError::Io(format!("creating {}: {e}", dir.display())))?;
        let path = dir.join(DB_FILE);
        match std::fs::metadata(&path) {
            Err(_) => Store::create(dir, &path)?,
            Ok(m) if m.len() == 0 => {
                // Not something this store writes (a new store is created aside and renamed into
                // place): say so, since everything is projected again.
                tracing::warn!(file = %path.display(), "the store file is empty: starting a new store; every object is projected again");
                std::fs::remove_file(&path).map_err(|e| StorageError::Io(format!("removing {}: {e}", path.display())))?;
                Store::create(dir, &path)?;
            }
            Ok(_) => {}
        }
        Store::open_file(&path, cache_size)
    }

    fn open_database(path: &Path, cache_size: usize) -> Result<Database, StorageError> {
        redb::Builder::new().set_cache_size(cache_size).create(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StorageError::Locked(path.display().to_string()),
            e @ redb::DatabaseError::Storage(_) => StorageError::from(e),
            e => StorageError::Database(e.to_string()),
        })
    }

    fn open_file(path: &Path, cache_size: usize) -> Result<Store, StorageError> {
        let db = Store::open_database(path, cache_size)?;
        let (released, on_release) = std::sync::mpsc::channel();
        let store = Store {
            db: Arc::new(OpenDatabase {
                database: std::sync::RwLock::new(Some(db)),
                readers: std::sync::Mutex::default(),
                path: path.to_path_buf(),
                cache_size,
                failed: std::sync::Mutex::new(false),
                failing: std::sync::atomic::AtomicBool::new(false),
                reopened: std::sync::Condvar::new(),
                written: std::sync::atomic::AtomicBool::new(false),
                _released: released,
            }),
            released: Arc::new(std::sync::Mutex::new(Some(on_release))),
            kinds: Arc::new(write::KindTable::new()),
            feed: Arc::default(),
            search: Arc::default(),
            wanted: Arc::default(),
            rederiving: Arc::default(),
            rebuilding: Arc::default(),
            dictionaries: documents::Dictionaries::sampling(),
            history: Arc::default(),
            loading: Arc::default(),
            unindexed_tail: Arc::default(),
        };
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
        drop(Store::open_file(&fresh, DEFAULT_CACHE_SIZE)?);
        std::fs::File::open(&fresh).and_then(|f| f.sync_all()).map_err(|e| io("syncing", &fresh, e))?;
        std::fs::rename(&fresh, path).map_err(|e| io("renaming into", path, e))?;
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io("syncing", dir, e))
    }

    /// Adds the per-phase counters ([`tables::phase_count_key`]) of every stored record (the
    /// 4 → 5 migration; a store of layout 4 has none).
    fn count_phases(&self, txn: &redb::WriteTransaction) -> Result<(), StorageError> {
        let mut counts = std::collections::BTreeMap::<Vec<u8>, u64>::new();
        for &kind in schema::KindId::ALL {
            let Some(ops) = self.kinds.get(kind) else { continue };
            let records = txn.open_table(tables::records(kind))?;
            for item in records.iter()? {
                let (k, v) = item?;
                let key = schema::Key::from_bytes(k.value().to_vec());
                let envelope: Envelope = codec::decode(v.value(), kind.name())?;
                let entries = ops.entries(&key, &envelope, tables::OrderSet::KEYS_ONLY)?;
                if let Some(phase) = entries.phase {
                    for scope in &entries.scopes {
                        *counts.entry(tables::phase_count_key(kind, scope, phase)).or_default() += 1;
                    }
                }
            }
        }
        let mut table = txn.open_table(tables::COUNTS)?;
        for (k, n) in counts {
            table.insert(k.as_slice(), n)?;
        }
        Ok(())
    }

    fn init(&self) -> Result<(), StorageError> {
        let txn = self.database()?.begin_write()?;
        {
            let mut meta = txn.open_table(tables::META)?;
            let version = meta.get("schema_version")?.map(|v| v.value());
            match version {
                None => {
                    meta.insert("schema_version", SCHEMA_VERSION)?;
                    meta.insert("revision", 0)?;
                    // A new store keeps every document from its first write.
                    meta.insert(documents::COMPLETE, 1)?;
                    versions::record_all(&mut meta, &self.kinds, |v| v)?;
                }
                Some(v) if v == SCHEMA_VERSION => {}
                Some(v @ 1..SCHEMA_VERSION) => {
                    if v == 1 {
                        let mut order = txn.open_table(tables::ORDER)?;
                        for &kind in schema::KindId::ALL {
                            let prefix = tables::order_prefix(kind, OrderField::Key, &schema::Scope::All);
                            let end = tables::prefix_end(&prefix).unwrap_or_default();
                            order.retain_in::<&[u8], _>(prefix.as_slice()..end.as_slice(), |_, _| false)?;
                        }
                    }
                    if v <= 2 {
                        // Layouts 1 and 2 maintained every order of every kind.
                        let revision = meta.get("revision")?.map(|r| r.value()).unwrap_or(0);
                        let mut built = txn.open_table(tables::BUILT)?;
                        for &kind in schema::KindId::ALL {
                            let Some(ops) = self.kinds.get(kind) else { continue };
                            for &order in ops.orders().iter().filter(|&&o| o != OrderField::Key) {
                                built.insert(tables::built_key(kind, order).as_slice(), revision)?;
                            }
                        }
                    }
                    if v <= 3 {
                        versions::record_all(&mut meta, &self.kinds, |_| versions::IMPLICIT_VERSION)?;
                    }
                    if v <= 4 {
                        self.count_phases(&txn)?;
                    }
                    meta.insert("schema_version", SCHEMA_VERSION)?;
                    tracing::info!(from = v, to = SCHEMA_VERSION, "store layout migrated");
                }
                Some(v) => return Err(StorageError::VersionMismatch { found: v, expected: SCHEMA_VERSION }),
            }
            tables::open_all(&txn)?;
        }
        let revision = txn.open_table(tables::META)?.get("revision")?.map(|v| v.value()).unwrap_or(0);
        history::open(&txn, revision)?;
        let versions::Reconciled { purged, rederiving, rebuilding } = versions::reconcile(&txn, &self.kinds)?;
        if !purged.is_empty() {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
            txn.open_table(tables::META)?.insert("last_commit", now)?;
        }
        txn.commit()?;
        for p in &purged {
            tracing::warn!(
                kind = p.kind.name(),
                stored_version = ?p.from,
                version = p.to,
                records = p.records,
                "the store holds this kind under another derivation version: its records were removed and are re-derived from the source"
            );
        }
        for &(kind, served) in &rebuilding {
            tracing::warn!(
                kind = kind.name(),
                served_meanwhile = served,
                "the store holds this kind under another derivation version: it is re-derived from its stored source documents"
            );
        }
        *self.rederiving.lock().unwrap_or_else(|e| e.into_inner()) = rederiving;
        *self.rebuilding.lock().unwrap_or_else(|e| e.into_inner()) = rebuilding;
        self.load_after_open()
    }

    /// Reads what the handle keeps beside the file: the document dictionaries, whether order
    /// builds are under way.
    fn load_after_open(&self) -> Result<(), StorageError> {
        let read = self.database()?.begin_read()?;
        for (kind, id, bytes) in documents::Dictionaries::read(&read.open_table(documents::DICTIONARIES)?)?.all() {
            self.dictionaries.insert(kind, id, bytes)?;
        }
        let building = !read.open_table(tables::BUILDING)?.is_empty()?;
        self.wanted.building.store(building, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Drops this handle and waits, at most `timeout`, until every other handle is dropped too
    /// and the database file is closed (another process, or a new [`Store::open`], can then
    /// open it). While one call waits, another returns at once.
    ///
    /// # Errors
    /// [`StorageError::StillOpen`] when handles remain after `timeout`, with their number.
    pub fn close(self, timeout: std::time::Duration) -> Result<(), StorageError> {
        let released = self.released.clone();
        let on_release = released.lock().unwrap_or_else(|e| e.into_inner()).take();
        let handles = Arc::downgrade(&self.db);
        drop(self);
        let Some(on_release) = on_release else { return Ok(()) };
        match on_release.recv_timeout(timeout) {
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) | Ok(()) => Ok(()),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                // A later call may wait again.
                *released.lock().unwrap_or_else(|e| e.into_inner()) = Some(on_release);
                Err(StorageError::StillOpen { handles: handles.strong_count() })
            }
        }
    }

    /// The database open now.
    ///
    /// # Errors
    /// [`StorageError::Volume`] when it is closed: a [`Store::reopen`] failed to open it again.
    fn database(&self) -> Result<Opened<'_>, StorageError> {
        let guard = self.db.database.read().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            return Err(StorageError::Volume(format!(
                "the store {} is closed after a volume fault and is being reopened",
                self.db.path.display()
            )));
        }
        Ok(Opened(guard, &self.db.written))
    }

    /// Whether the database is open: `false` after a [`Store::reopen`] that could not open it
    /// again (reads and writes fail with [`StorageError::Volume`] until one succeeds).
    pub fn is_open(&self) -> bool {
        self.db.database.read().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// The database file (`DIR/readmodel.redb`).
    pub fn path(&self) -> &Path {
        &self.db.path
    }

    /// The data directory: the database file's directory.
    pub fn dir(&self) -> &Path {
        self.db.path.parent().unwrap_or(Path::new("."))
    }

    /// Bytes available to this process on the volume of the database file (`statvfs`).
    ///
    /// # Errors
    /// [`StorageError::Io`] when the file system cannot be asked.
    pub fn available_space(&self) -> Result<u64, StorageError> {
        let dir = self.dir();
        fs4::available_space(dir).map_err(|e| StorageError::Io(format!("asking the free space of {}: {e}", dir.display())))
    }

    /// Closes the database file and opens it again: after a failed write redb refuses every
    /// later write of its handle (`Previous I/O error occurred`) until the file is reopened,
    /// and opening it recovers the last durable commit. New reads and writes wait while it
    /// runs; read views of the closed database are waited for at most `readers_wait`, then cut
    /// off (their next read fails with [`StorageError::Volume`]). The in-memory state (kinds,
    /// dictionaries, subscribers) is kept: a failed commit changed none of it. Call it from the
    /// thread that writes, with no write transaction of its own alive.
    ///
    /// # Errors
    /// The error of opening the file again ([`StorageError::Volume`] when the volume still
    /// fails); the store then stays closed — reads and writes fail with
    /// [`StorageError::Volume`] — until a later call succeeds.
    pub fn reopen(&self, readers_wait: std::time::Duration) -> Result<Reopened, StorageError> {
        let mut slot = self.db.database.write().unwrap_or_else(|e| e.into_inner());
        let readers = std::mem::take(&mut *self.db.readers.lock().unwrap_or_else(|e| e.into_inner()));
        let readers_cut = readers.wait_gone(readers_wait);
        // A handle whose write failed cannot record a clean shutdown: its file is recovered
        // by the open below.
        drop(slot.take());
        let started = std::time::Instant::now();
        let opened = Store::open_database(&self.db.path, self.db.cache_size);
        // Opened or closed, waiting readers go on (a closed store fails them at once).
        *self.db.failed.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.db.failing.store(false, std::sync::atomic::Ordering::Release);
        self.db.reopened.notify_all();
        *slot = Some(opened?);
        Ok(Reopened { readers_cut, seconds: started.elapsed().as_secs_f64() })
    }

    /// Whether a write of the handle open now failed on the volume: redb refuses its later
    /// writes, and the reads its cache cannot answer, until [`Store::reopen`] (which clears it).
    pub fn write_failed(&self) -> bool {
        self.db.failing.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Notes a failed write of the open handle, as a write that fails on the volume does: for
    /// tests of what reacts to one ([`Store::write_failed`]).
    #[doc(hidden)]
    pub fn note_write_failure_for_tests(&self) {
        self.note_write_failure();
    }

    fn note_write_failure(&self) {
        *self.db.failed.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.db.failing.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Commits a write that changes no record (the time, in `meta`): whether the volume takes
    /// writes again after a fault.
    ///
    /// # Errors
    /// The [`StorageError`] of the failed write.
    pub fn check_writable(&self) -> Result<(), StorageError> {
        self.noting_failure(|| {
            let txn = self.database()?.begin_write()?;
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
            txn.open_table(tables::META)?.insert("last_write_check", now)?;
            txn.commit()?;
            Ok(())
        })
    }

    /// Commits an empty write transaction when a write began since the last call; returns
    /// whether it did. The writer calls it when it has nothing left to do.
    ///
    /// Why: a commit that frees pages ends with redb's own cleanup commit, whose pages stay in
    /// redb's write buffer until the next durable commit (redb 4.6). Until then, every read that
    /// misses redb's page cache walks that buffer's 131 stripes first, which made a scan larger
    /// than the cache (an export, a cold list at 1M) spend a third of its time there. The empty
    /// commit writes them out and frees no page, so no cleanup commit follows it.
    ///
    /// # Errors
    /// [`StorageError`] of the commit (a volume fault is noted as for every write).
    pub fn release_write_buffer(&self) -> Result<bool, StorageError> {
        if !self.db.written.swap(false, std::sync::atomic::Ordering::AcqRel) {
            return Ok(false);
        }
        let released = self.noting_failure(|| {
            let database = self.database()?;
            // Database's own begin_write: this commit is no write to release again.
            let txn = (*database).begin_write()?;
            txn.commit()?;
            Ok(())
        });
        if released.is_err() {
            self.db.written.store(true, std::sync::atomic::Ordering::Release);
        }
        released.map(|()| true)
    }

    /// Runs the write `write`; when it fails on the volume, new reads wait for the reopen that
    /// must follow ([`READ_WAITS_FOR_REOPEN`] at most): the failed handle refuses them.
    pub(crate) fn noting_failure<R>(&self, write: impl FnOnce() -> Result<R, StorageError>) -> Result<R, StorageError> {
        let written = write();
        if matches!(&written, Err(e) if e.is_volume_fault()) {
            self.note_write_failure();
        }
        written
    }

    /// The kinds whose re-derivation has not ended ([`versions`]): purged on open because their
    /// derivation version changed (or left out of a restored snapshot for that reason), waiting
    /// for the source to bring their records back. Empty normally.
    pub fn rederiving(&self) -> Vec<schema::KindId> {
        self.rederiving.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Ends the re-derivation of [`Store::rederiving`], once the source has handed over every
    /// object again (the initial sync): every stored record with links resolves them again in
    /// one write batch (one that resolves as stored is not rewritten), which also removes the
    /// marks. `None` when nothing is re-deriving. Call it where writes are made (the writer
    /// thread).
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures; the kinds stay marked and the call can be
    /// repeated.
    pub fn finish_rederivation(&self, now: Timestamp) -> Result<Option<Rederived>, StorageError> {
        let kinds = self.rederiving();
        if kinds.is_empty() {
            return Ok(None);
        }
        let started = std::time::Instant::now();
        let (relinked, revision) = self.write(now, |batch| {
            let relinked = batch.relink_all(now)?;
            versions::clear_rederiving(batch.txn_for_other_tables(), &kinds)?;
            Ok(relinked)
        })?;
        self.rederiving.lock().unwrap_or_else(|e| e.into_inner()).retain(|k| !kinds.contains(k));
        Ok(Some(Rederived { kinds, relinked, revision, seconds: started.elapsed().as_secs_f64() }))
    }

    /// A consistent read view (one redb read transaction).
    ///
    /// # Errors
    /// [`StorageError`] when redb cannot start the transaction.
    pub fn read(&self) -> Result<ReadView, StorageError> {
        // Every request reads: the lock is taken only after a failed write.
        if self.db.failing.load(std::sync::atomic::Ordering::Acquire) {
            let failed = self.db.failed.lock().unwrap_or_else(|e| e.into_inner());
            drop(self.db.reopened.wait_timeout_while(failed, READ_WAITS_FOR_REOPEN, |failed| *failed).unwrap_or_else(|e| e.into_inner()));
        }
        let database = self.database()?;
        let reader = self.db.readers.lock().unwrap_or_else(|e| e.into_inner()).enter();
        let tail = self.unindexed_tail.clone();
        ReadView::new(database.begin_read()?, self.kinds.clone(), self.wanted.clone(), reader, self.dictionaries.clone(), tail)
    }

    /// Calls `wake` (on the reading thread, so it should only signal) when a read first sorts
    /// by an ordering index that is not built ([`tables::OrderSet`]); the writer then calls
    /// [`Store::build_orders`]. Replaces an earlier waker.
    pub fn on_order_wanted(&self, wake: impl Fn() + Send + Sync + 'static) {
        *self.wanted.waker.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(wake));
    }

    /// Whether an ordering index was asked for or is being built and [`Store::build_orders`] has
    /// work to do.
    pub fn orders_pending(&self) -> bool {
        self.wanted.any()
    }

    /// The ordering indexes asked for or being built and not built yet (what
    /// [`OrderBuildStep::left`] says after a call), e.g. right after [`Store::want_every_order`].
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn order_builds_left(&self) -> Result<usize, StorageError> {
        let view = self.read()?;
        let maintained = tables::Maintained::read(&view.txn().open_table(tables::BUILT)?, &view.txn().open_table(tables::BUILDING)?)?;
        let mut left = tables::OrderSet::KEYS_ONLY;
        for b in &maintained.building {
            left.insert(b.kind, b.order);
        }
        let wanted = *self.wanted.set.lock().unwrap_or_else(|e| e.into_inner());
        for (kind, order) in wanted.iter().filter(|&(k, o)| !maintained.built.contains(k, o)) {
            if self.kinds.sorted_by(kind, order).is_some() {
                left.insert(kind, order);
            }
        }
        Ok(left.iter().count())
    }

    /// Asks for every ordering index of every kind (`createdAt`, `lastModifiedAt`, and `name`
    /// where the kind has it) that is not built; [`Store::build_orders`] then builds them. Does
    /// not wake the [`Store::on_order_wanted`] waker: call it where indexes are built.
    pub fn want_every_order(&self) {
        let mut set = self.wanted.set.lock().unwrap_or_else(|e| e.into_inner());
        for &kind in schema::KindId::ALL {
            let Some(ops) = self.kinds.get(kind) else { continue };
            for &order in ops.orders().iter().filter(|&&o| o != OrderField::Key) {
                set.insert(kind, order);
            }
        }
    }

    /// One step of building ordering indexes (see [`tables`]): lists the orders asked for that
    /// are neither built nor being built in `building_orders`, then writes the ordering entries
    /// of at most `max_records` records (at least one) after the builds' cursors, in one durable
    /// transaction, and moves each build that reached its kind's last record to `built_orders`;
    /// every later write maintains those. The revision does not change (the read model's data
    /// does not). Call it where writes are made (the writer thread), again while
    /// [`OrderBuildStep::pending`]: a write waits for one call at most.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures: nothing of the call is kept; the orders
    /// asked for stay asked for and the builds in progress listed, for the next call.
    pub fn build_orders(&self, max_records: usize) -> Result<OrderBuildStep, StorageError> {
        self.build_orders_within(max_records, std::time::Duration::MAX)
    }

    /// [`Store::build_orders`], reading no more records once `max_time` has passed since the
    /// call began (at least one record is read; the commit comes after).
    ///
    /// # Errors
    /// As [`Store::build_orders`].
    pub fn build_orders_within(&self, max_records: usize, max_time: std::time::Duration) -> Result<OrderBuildStep, StorageError> {
        let wanted = self.wanted.take();
        let step = self.build_orders_from(wanted, max_records, max_time);
        if step.is_err() {
            self.wanted.put_back(wanted);
        }
        step
    }

    /// [`Store::build_orders_within`] with the orders asked for taken.
    fn build_orders_from(
        &self,
        wanted: tables::OrderSet,
        max_records: usize,
        max_time: std::time::Duration,
    ) -> Result<OrderBuildStep, StorageError> {
        use std::ops::Bound;
        let began = std::time::Instant::now();
        let out_of_time = || began.elapsed() >= max_time;
        let mut step = OrderBuildStep::default();
        let txn = self.database()?.begin_write()?;
        let mut chunks = Vec::new();
        {
            let revision = txn.open_table(tables::META)?.get("revision")?.map(|r| r.value()).unwrap_or(0);
            let mut built_t = txn.open_table(tables::BUILT)?;
            let mut building_t = txn.open_table(tables::BUILDING)?;
            let tables::Maintained { built, mut building } = tables::Maintained::read(&built_t, &building_t)?;
            for (kind, order) in wanted.iter().filter(|&(k, o)| !built.contains(k, o)) {
                let listed = building.iter().any(|b| (b.kind, b.order) == (kind, order));
                if !listed && self.kinds.sorted_by(kind, order).is_some() {
                    building_t.insert(tables::built_key(kind, order).as_slice(), &[][..])?;
                    building.push(tables::Building { kind, order, covered: Vec::new() });
                    step.started.push((kind, order));
                }
            }
            let mut order_t = txn.open_table(tables::ORDER)?;
            let mut budget = max_records.max(1);
            step.left = building.len();
            for b in &building {
                if budget == 0 || (step.records > 0 && out_of_time()) {
                    break;
                }
                let key = tables::built_key(b.kind, b.order);
                let Some(ops) = self.kinds.sorted_by(b.kind, b.order) else {
                    building_t.remove(key.as_slice())?;
                    step.left -= 1;
                    continue;
                };
                let records = txn.open_table(tables::records(b.kind))?;
                let lower = if b.covered.is_empty() { Bound::Unbounded } else { Bound::Excluded(b.covered.as_slice()) };
                let mut items = records.range::<&[u8]>((lower, Bound::Unbounded))?;
                let mut entries = Vec::new();
                let mut last: Option<Vec<u8>> = None;
                let (mut read, mut done) = (0, false);
                while read < budget && !(read > 0 && out_of_time()) {
                    let Some(item) = items.next() else {
                        done = true;
                        break;
                    };
                    let (k, v) = item?;
                    let env: Envelope = codec::decode(v.value(), b.kind.name())?;
                    let natural = Key::from_bytes(k.value().to_vec());
                    entries.extend(ops.order_entries(&natural, &env, b.order)?);
                    last = Some(natural.as_bytes().to_vec());
                    read += 1;
                }
                done = done || items.next().is_none();
                // In key order: each insert lands next to the previous one.
                entries.sort_unstable();
                for e in &entries {
                    order_t.insert(e.as_slice(), ())?;
                }
                if done {
                    building_t.remove(key.as_slice())?;
                    built_t.insert(key.as_slice(), revision)?;
                    step.left -= 1;
                } else {
                    building_t.insert(key.as_slice(), last.as_deref().unwrap_or(&b.covered))?;
                }
                chunks.push((b.kind, b.order, entries.len(), done));
                budget -= read;
                step.records += read;
            }
        }
        txn.commit()?;
        step.pending = step.left > 0;
        self.wanted.building.store(step.pending, std::sync::atomic::Ordering::SeqCst);
        step.built = self.orders_progressed(chunks);
        Ok(step)
    }

    /// Adds each committed chunk (kind, order, entries written, whether the order is complete)
    /// to the orders' progress; returns the orders a chunk completed, with their totals.
    fn orders_progressed(&self, chunks: Vec<(schema::KindId, OrderField, usize, bool)>) -> Vec<BuiltOrder> {
        let mut built = Vec::new();
        let mut progress = self.wanted.progress.lock().unwrap_or_else(|e| e.into_inner());
        for (kind, order, entries, done) in chunks {
            let now = std::time::Instant::now();
            let at = progress.entry((kind, order)).or_insert((now, 0));
            at.1 += entries;
            if done {
                let (started, entries) = progress.remove(&(kind, order)).unwrap_or((now, entries));
                built.push(BuiltOrder { kind, order, entries, seconds: started.elapsed().as_secs_f64() });
            }
        }
        built
    }

    /// Whether the writer is loading: it says so when it starts, until its initial sync is
    /// processed (or its sources fall silent before; control-plane's `WriterThread::note_loading`).
    /// Meanwhile batches of creations only leave their revisions' index entries, and their
    /// per-object bound, to [`Store::index_history`], so a load writes each revision's entry
    /// alone; and a document the source compressed alone (before its kind's dictionary was
    /// trained) is stored as it is, left to [`Store::recompress_documents`] once the load has
    /// ended, so the writer compresses no document of a load twice.
    pub fn set_loading(&self, loading: bool) {
        self.loading.store(loading, std::sync::atomic::Ordering::Release);
    }

    /// What the writer last said with [`Store::set_loading`] (`false` until it does).
    pub fn loading(&self) -> bool {
        self.loading.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Runs `apply` on a new write batch, then commits what it wrote durably, stamped `now`: the
    /// revision is bumped when a record changed (a batch that only moved source versions or
    /// checkpoints commits without a new revision; one that wrote nothing is aborted). When
    /// `apply` returns an error nothing of the batch is kept. Only one batch runs at a time
    /// (redb serializes writers). Returns what `apply` returned and the new revision.
    ///
    /// The store owns the transaction for the batch's whole life; the batch borrows it, and so
    /// do the tables it keeps open.
    ///
    /// # Errors
    /// The error of `apply`, or a [`StorageError`] when redb cannot start or commit the
    /// transaction (nothing of the batch is visible then).
    pub fn write<R>(
        &self,
        now: Timestamp,
        apply: impl FnOnce(&mut WriteBatch<'_>) -> Result<R, StorageError>,
    ) -> Result<(R, Option<u64>), StorageError> {
        self.noting_failure(|| {
            let txn = self.database()?.begin_write()?;
            let (result, finished) = {
                let mut batch = WriteBatch::new(&txn, self.kinds.clone(), self.feed.clone(), self.rederiving())?;
                let rebuilding = self.rebuilding();
                batch.rebuilding = rebuilding.iter().map(|(k, _)| *k).collect();
                batch.unreadable = rebuilding.iter().filter(|(_, served)| !served).map(|(k, _)| *k).collect();
                batch.dictionaries = self.dictionaries.clone();
                let loading = self.loading();
                batch.loading = loading;
                let history = self.history_settings();
                if history.enabled {
                    batch.record_history(history, loading);
                }
                let result = apply(&mut batch)?;
                (result, batch.finish(now)?)
            };
            Ok((result, finished.commit(txn, &self.dictionaries)?))
        })
    }

    /// Subscribes to committed batches: every later commit that changed something is sent as a
    /// [`Committed`] once durable, in revision order. Used by the search index
    /// ([`search::Catalogue`]) to follow the store. Dropping the receiver unsubscribes.
    pub fn subscribe(&self) -> std::sync::mpsc::Receiver<Committed> {
        self.feed.subscribe()
    }

    /// Blocks until a commit has moved the store's revision past `revision`, or `timeout` has
    /// passed; returns the revision then (still `<= revision` after a timeout). Woken by each
    /// commit ([`Store::subscribe`]), so it returns as soon as that commit is durable.
    ///
    /// # Errors
    /// A [`StorageError`] when the current revision cannot be read.
    pub fn wait_for_revision_after(&self, revision: u64, timeout: std::time::Duration) -> Result<u64, StorageError> {
        let commits = self.subscribe();
        let deadline = std::time::Instant::now() + timeout;
        let mut current = self.read()?.revision()?;
        while current <= revision {
            match commits.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
                Ok(commit) => current = commit.revision,
                Err(_) => break,
            }
        }
        Ok(current)
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
        zone_version(batch, name, "1", Timestamp(5));
    }

    /// Writes zone `name` (source `poc/name`) at source version `version` and time `now`; a
    /// version other than `1` also changes the record (its gateway URL names the version).
    pub(crate) fn zone_version(batch: &mut WriteBatch, name: &str, version: &str, now: Timestamp) {
        zone_compressed(batch, name, version, now, &crate::documents::Dictionaries::default());
    }

    /// Upserts zone `name` (source `poc/name`) at version `version` and time `at` (ns), in a
    /// batch of its own.
    pub(crate) fn zone_at(store: &crate::Store, name: &str, version: &str, at: i64) {
        store
            .write(Timestamp(at), |batch| {
                zone_version(batch, name, version, Timestamp(at));
                Ok(())
            })
            .unwrap();
    }

    /// [`zone_version`], its document compressed with `dictionaries`.
    pub(crate) fn zone_compressed(
        batch: &mut WriteBatch,
        name: &str,
        version: &str,
        now: Timestamp,
        dictionaries: &crate::documents::Dictionaries,
    ) {
        let meta = Meta { environment: "poc".into(), namespace: "poc".into(), name: name.into(), creation_timestamp: None };
        let rec = ZoneRecord {
            meta,
            visibility: ZoneVisibility::World,
            gateway_url: (version != "1").then(|| format!("https://{version}.example")),
            ai_gateway_url: None,
            issuer_url: None,
            permissions_url: None,
        };
        let src = SourceRef { kind: KindId::Zone, namespace: "poc".into(), name: name.into() };
        // The document a source hands over for it (what a re-derivation translates again).
        let doc = serde_json::json!({
            "apiVersion": "admin.cp.ei.telekom.de/v1",
            "kind": "Zone",
            "metadata": {"name": name, "namespace": "poc", "resourceVersion": version},
            "spec": {"visibility": "World"},
        });
        let mut doc = doc;
        if version != "1" {
            let url = serde_json::json!({"hostname": format!("{version}.example"), "basePath": "", "hidden": false});
            doc["spec"]["gateway"] = serde_json::json!({"presets": [{"name": "default", "default": true, "urls": [url]}]});
        }
        let encoded = crate::Encoded::<Zone>::new(rec).with_document(dictionaries.encode(KindId::Zone, &doc));
        batch.upsert_encoded::<Zone>(&src, version, &encoded, now).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use test_support::zone_at;

    /// Zone names in the order a scan by `order` yields them.
    fn zones_by(view: &ReadView, order: OrderField, from: std::ops::Bound<&[u8]>, reverse: bool) -> Vec<String> {
        view.scan(schema::KindId::Zone, order, &schema::Scope::All, from, reverse)
            .unwrap()
            .map(|e| e.unwrap().1.parts().unwrap().last().unwrap().to_string())
            .collect()
    }

    /// A reopen keeps what was committed and the in-memory state, waits for read views (cut off
    /// after the wait), and every clone of the store reads and writes the reopened database;
    /// `close` still releases the file.
    #[test]
    fn a_reopened_store_keeps_its_data_and_serves_every_handle() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let clone = store.clone();
        zone_at(&store, "a", "1", 10);
        let view = store.read().unwrap();
        let r = store.reopen(std::time::Duration::ZERO).unwrap();
        assert_eq!(r.readers_cut, 1, "the view alive during the reopen");
        drop(view);
        let view = clone.read().unwrap();
        let r = store.reopen(std::time::Duration::from_millis(50)).unwrap();
        assert_eq!(r.readers_cut, 1);
        drop(view);
        assert_eq!(store.reopen(std::time::Duration::from_secs(5)).unwrap().readers_cut, 0, "no view alive");
        assert_eq!(clone.read().unwrap().revision().unwrap(), 1);
        zone_at(&clone, "b", "1", 11);
        assert_eq!(store.read().unwrap().revision().unwrap(), 2);
        assert_eq!(zones_by(&store.read().unwrap(), OrderField::Key, std::ops::Bound::Unbounded, false), vec!["a", "b"]);
        drop(clone);
        store.close(std::time::Duration::from_secs(5)).unwrap();
        assert_eq!(Store::open(dir.path()).unwrap().read().unwrap().revision().unwrap(), 2);
    }

    /// `release_write_buffer` commits once after writes and not again without one; the records
    /// read the same after it.
    #[test]
    fn the_write_buffer_is_released_once_after_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.release_write_buffer().unwrap();
        assert!(!store.release_write_buffer().unwrap(), "nothing written since");
        zone_at(&store, "a", "1", 10);
        zone_at(&store, "a", "2", 11);
        assert!(store.release_write_buffer().unwrap(), "written since");
        assert!(!store.release_write_buffer().unwrap(), "released already");
        // The writer prunes the change log every second: with nothing due, that is no write.
        assert_eq!(store.prune_history(Timestamp(12), 100).unwrap().entries, 0);
        assert!(!store.release_write_buffer().unwrap(), "a prune with nothing due writes nothing");
        let view = store.read().unwrap();
        assert_eq!(
            (view.revision().unwrap(), zones_by(&view, OrderField::Key, std::ops::Bound::Unbounded, false)),
            (2, vec!["a".to_string()])
        );
    }

    /// Volume faults are told apart from the rest: they are retried after a reopen.
    #[test]
    fn failures_of_the_volume_are_volume_faults() {
        let full = redb::Error::Io(std::io::Error::from_raw_os_error(28));
        assert!(StorageError::from(full).is_volume_fault());
        let previous = StorageError::from(redb::Error::PreviousIo);
        assert!(previous.is_volume_fault());
        assert_eq!(previous.to_string(), PREVIOUS_FAULT);
        assert!(!StorageError::from(redb::Error::DatabaseAlreadyOpen).is_volume_fault());
        let cut = StorageError::from(redb::Error::DatabaseClosed);
        assert!(matches!(cut, StorageError::Reopened) && !cut.is_volume_fault(), "a read of a handle closed by a reopen: retried");
        assert!(!StorageError::Corrupt("x".into()).is_volume_fault());
    }

    /// An empty store file (a volume that lost its data) opens as a new store, which is written.
    #[test]
    fn an_empty_store_file_opens_as_a_new_store() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(DB_FILE), b"").unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.read().unwrap().revision().unwrap(), 0);
        zone_at(&store, "a", "1", 10);
        assert_eq!(store.read().unwrap().revision().unwrap(), 1);
        assert!(std::fs::metadata(dir.path().join(DB_FILE)).unwrap().len() > 0);
    }

    /// Waiting for a revision returns at once when the store is past it, with the current
    /// revision when the time is up, and with the new revision once another thread commits.
    #[test]
    fn waiting_for_a_revision_returns_after_the_commit_that_passes_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        zone_at(&store, "a", "1", 10);
        assert_eq!(store.wait_for_revision_after(0, std::time::Duration::ZERO).unwrap(), 1);
        assert_eq!(store.wait_for_revision_after(1, std::time::Duration::ZERO).unwrap(), 1, "timed out");
        let waiter = {
            let store = store.clone();
            std::thread::spawn(move || store.wait_for_revision_after(1, std::time::Duration::from_secs(60)).unwrap())
        };
        zone_at(&store, "b", "1", 20);
        assert_eq!(waiter.join().unwrap(), 2);
    }

    /// An order without an index is sorted in memory and asked for; once built, the index gives
    /// the same answers and every later write maintains it.
    #[test]
    fn an_ordering_index_is_built_on_first_use_and_then_maintained() {
        use std::ops::Bound;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        zone_at(&store, "b", "1", 30);
        zone_at(&store, "a", "1", 20);
        zone_at(&store, "c", "1", 10);
        let woken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let w = woken.clone();
        store.on_order_wanted(move || {
            w.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        assert!(!store.orders_pending());
        let answers = |view: &ReadView| {
            let a: Vec<u8> = view
                .scan(schema::KindId::Zone, OrderField::LastModifiedAt, &schema::Scope::All, Bound::Unbounded, false)
                .unwrap()
                .nth(1)
                .unwrap()
                .unwrap()
                .0;
            (
                zones_by(view, OrderField::LastModifiedAt, Bound::Unbounded, false),
                zones_by(view, OrderField::LastModifiedAt, Bound::Unbounded, true),
                zones_by(view, OrderField::LastModifiedAt, Bound::Excluded(&a), false),
                zones_by(view, OrderField::LastModifiedAt, Bound::Included(&a), true),
            )
        };
        let view = store.read().unwrap();
        let sorted = answers(&view);
        assert_eq!(sorted.0, ["c", "a", "b"]);
        assert_eq!(sorted.1, ["b", "a", "c"]);
        assert_eq!(sorted.2, ["b"]);
        assert_eq!(sorted.3, ["a", "c"]);
        drop(view);
        assert!(store.orders_pending());
        assert_eq!(woken.load(std::sync::atomic::Ordering::SeqCst), 1, "woken once, however often it was asked");
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());

        let step = store.build_orders(usize::MAX).unwrap();
        assert_eq!((step.records, step.pending), (3, false));
        assert_eq!(step.started, vec![(schema::KindId::Zone, OrderField::LastModifiedAt)]);
        let built: Vec<_> = step.built.iter().map(|b| (b.kind, b.order, b.entries)).collect();
        assert_eq!(built, vec![(schema::KindId::Zone, OrderField::LastModifiedAt, 6)]);
        assert!(!store.orders_pending());
        let view = store.read().unwrap();
        assert!(view.built_orders().unwrap().contains(schema::KindId::Zone, OrderField::LastModifiedAt));
        assert!(!view.built_orders().unwrap().contains(schema::KindId::Zone, OrderField::CreatedAt));
        assert_eq!(answers(&view), sorted);
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        drop(view);
        assert!(!store.orders_pending(), "a built index is not asked for");

        zone_at(&store, "a", "2", 40);
        let view = store.read().unwrap();
        assert_eq!(zones_by(&view, OrderField::LastModifiedAt, Bound::Unbounded, false), ["c", "b", "a"]);
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        drop(view);
        store
            .write(Timestamp(50), |batch| {
                batch.delete(&SourceRef { kind: schema::KindId::Zone, namespace: "poc".into(), name: "c".into() }, Timestamp(50)).unwrap();
                Ok(())
            })
            .unwrap();
        let view = store.read().unwrap();
        assert_eq!(zones_by(&view, OrderField::LastModifiedAt, Bound::Unbounded, false), ["b", "a"]);
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        drop(view);
        // Built indexes stay built across a restart.
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(store.read().unwrap().built_orders().unwrap().contains(schema::KindId::Zone, OrderField::LastModifiedAt));
    }

    /// A build runs in chunks of at most the records it is given; writes between chunks keep the
    /// entries of the records the build has covered and leave the others to it, a restart goes
    /// on from the cursor, and the finished index answers as the in-memory sort did.
    #[test]
    fn an_ordering_index_is_built_in_chunks_between_writes_and_across_a_restart() {
        use std::ops::Bound;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for i in 0..10 {
            zone_at(&store, &format!("z{i:02}"), "1", 100 - i);
        }
        let order = OrderField::LastModifiedAt;
        let clean = |store: &Store| assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
        assert_eq!(zones_by(&store.read().unwrap(), order, Bound::Unbounded, false)[0], "z09", "sorted in memory");
        assert!(store.orders_pending());

        let first = store.build_orders(3).unwrap();
        assert_eq!((first.records, first.pending), (3, true));
        assert_eq!(first.started, vec![(schema::KindId::Zone, order)]);
        assert!(first.built.is_empty());
        assert!(!store.read().unwrap().built_orders().unwrap().contains(schema::KindId::Zone, order), "not read before it is whole");
        clean(&store);

        // z00..z02 are covered: their entries move with them; z08 and z10 are left to the build.
        zone_at(&store, "z01", "2", 200);
        zone_at(&store, "z08", "2", 201);
        zone_at(&store, "z10", "1", 202);
        store
            .write(Timestamp(203), |batch| {
                batch.delete(&SourceRef { kind: schema::KindId::Zone, namespace: "poc".into(), name: "z02".into() }, Timestamp(203))
            })
            .unwrap();
        clean(&store);
        let expected = zones_by(&store.read().unwrap(), order, Bound::Unbounded, false);
        assert_eq!(expected[..3], ["z09", "z07", "z06"]);
        assert_eq!(expected[7..], ["z01", "z08", "z10"]);

        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(store.orders_pending(), "a build cut short goes on after a restart");
        clean(&store);
        let mut steps = Vec::new();
        while store.orders_pending() {
            let step = store.build_orders(3).unwrap();
            assert!(step.records <= 3 && step.started.is_empty(), "{step:?}");
            clean(&store);
            steps.push(step);
        }
        // z03..z10 without z02: 8 records, in chunks of 3.
        assert_eq!(steps.iter().map(|s| s.records).collect::<Vec<_>>(), [3, 3, 2]);
        let built = &steps.last().unwrap().built;
        assert_eq!(built.iter().map(|b| (b.kind, b.order)).collect::<Vec<_>>(), [(schema::KindId::Zone, order)]);
        let view = store.read().unwrap();
        assert!(view.built_orders().unwrap().contains(schema::KindId::Zone, order));
        assert_eq!(zones_by(&view, order, Bound::Unbounded, false), expected, "the index answers as the in-memory sort did");
        assert_eq!(view.txn().open_table(tables::BUILDING).unwrap().len().unwrap(), 0);
    }

    /// A step reads no more records once its time is up, but always at least one.
    #[test]
    fn a_build_step_stops_reading_when_its_time_is_up() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        for i in 0..5 {
            zone_at(&store, &format!("z{i}"), "1", 10 + i);
        }
        store.want_every_order();
        let mut reads = Vec::new();
        while store.orders_pending() {
            reads.push(store.build_orders_within(usize::MAX, std::time::Duration::ZERO).unwrap().records);
        }
        // Two zone orders of five records each, one record a step; the kinds without records
        // need no reading and end in one more step.
        assert_eq!(reads, [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]);
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    }

    /// Every order of every kind can be asked for at once; one call with room for every record
    /// builds them all, and nothing is asked again afterwards.
    #[test]
    fn every_order_can_be_asked_for_and_built() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        zone_at(&store, "a", "1", 10);
        assert_eq!(store.order_builds_left().unwrap(), 0);
        store.want_every_order();
        assert!(store.orders_pending());
        // Two times for each kind, and names for teams and applications.
        let orders = 2 * schema::KindId::ALL.len() + 2;
        assert_eq!(store.order_builds_left().unwrap(), orders);
        let first = store.build_orders(0).unwrap();
        assert_eq!(store.order_builds_left().unwrap(), first.left);
        let step = store.build_orders(usize::MAX).unwrap();
        assert!(!step.pending && !store.orders_pending());
        let view = store.read().unwrap();
        let built = view.built_orders().unwrap();
        for &kind in schema::KindId::ALL {
            for order in [OrderField::CreatedAt, OrderField::LastModifiedAt] {
                assert!(built.contains(kind, order), "{kind:?} {order:?}");
            }
        }
        assert!(built.contains(schema::KindId::Application, OrderField::Name));
        assert!(!built.contains(schema::KindId::Zone, OrderField::Name), "zones have no name order");
        assert_eq!(first.built.len() + step.built.len(), first.started.len());
        assert_eq!((first.started.len(), first.built.len()), (orders, 1), "the first call reads one record: one zone order");
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        drop(view);
        store.want_every_order();
        assert!(store.build_orders(usize::MAX).unwrap().started.is_empty(), "nothing built twice");
    }

    /// A reader can stop the in-memory sort of an order not built yet: it is asked every 1024
    /// records, and the scan ends with `Interrupted`.
    #[test]
    fn a_long_in_memory_sort_stops_when_its_reader_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .write(Timestamp(3000), |batch| {
                for i in 0..2100 {
                    test_support::zone_version(batch, &format!("z{i:04}"), "1", Timestamp(i));
                }
                Ok(())
            })
            .unwrap();
        let view = store.read().unwrap();
        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let a = asked.clone();
        view.interrupt_when(move || a.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 1);
        let scan = view.scan(schema::KindId::Zone, OrderField::CreatedAt, &schema::Scope::All, std::ops::Bound::Unbounded, false);
        assert!(matches!(scan.map(|_| ()), Err(StorageError::Interrupted)));
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 2, "asked at the 1024th and the 2048th record");
        // Without an interrupt, the same scan answers every zone.
        let view = store.read().unwrap();
        assert_eq!(zones_by(&view, OrderField::CreatedAt, std::ops::Bound::Unbounded, false).len(), 2100);
    }

    /// Turns `store` into what layout `version` (1 or 2) wrote: every order of every kind
    /// indexed, no `built_orders` rows, and for 1 the natural-key entries of `Scope::All`.
    fn downgrade(store: &Store, version: u64) {
        use schema::{KindId, Scope};
        for &o in &[OrderField::CreatedAt, OrderField::LastModifiedAt] {
            store.wanted.want(KindId::Zone, o);
        }
        store.build_orders(usize::MAX).unwrap();
        let keys: Vec<Vec<u8>> = store
            .read()
            .unwrap()
            .scan(KindId::Zone, OrderField::Key, &Scope::All, std::ops::Bound::Unbounded, false)
            .unwrap()
            .map(|e| e.unwrap().1.as_bytes().to_vec())
            .collect();
        let txn = store.database().unwrap().begin_write().unwrap();
        {
            if version == 1 {
                let mut order = txn.open_table(tables::ORDER).unwrap();
                for k in &keys {
                    let mut e = tables::order_prefix(KindId::Zone, OrderField::Key, &Scope::All);
                    e.extend_from_slice(k);
                    order.insert(e.as_slice(), ()).unwrap();
                }
            }
            txn.open_table(tables::BUILT).unwrap().retain(|_, _| false).unwrap();
            txn.open_table(tables::META).unwrap().insert("schema_version", version).unwrap();
        }
        txn.commit().unwrap();
    }

    /// Stores of layout versions 1 and 2 open as the current one: the natural-key entries of
    /// `Scope::All` are deleted (1), every order is listed as built (their entries are there), the
    /// invariants hold, and scans list every record in order.
    #[test]
    fn stores_of_layouts_1_and_2_are_migrated_on_open() {
        use schema::KindId;
        for version in [1, 2] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            zone_at(&store, "b", "1", 20);
            zone_at(&store, "a", "1", 30);
            downgrade(&store, version);
            let problems = store.read().unwrap().check_invariants().unwrap();
            let expected = if version == 1 { "ordering index: 0 missing, 10 dangling" } else { "ordering index: 0 missing, 8 dangling" };
            assert_eq!(problems, vec![expected.to_string()], "layout {version}");
            drop(store);

            let store = Store::open(dir.path()).unwrap();
            let view = store.read().unwrap();
            assert_eq!(view.txn().open_table(tables::META).unwrap().get("schema_version").unwrap().unwrap().value(), SCHEMA_VERSION);
            assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new(), "layout {version}");
            let built = view.built_orders().unwrap();
            for kind in [KindId::Zone, KindId::Approval] {
                assert!(built.contains(kind, OrderField::CreatedAt) && built.contains(kind, OrderField::LastModifiedAt));
            }
            assert!(built.contains(KindId::Application, OrderField::Name));
            assert!(!built.contains(KindId::Zone, OrderField::Name), "zones have no name order");
            assert_eq!(zones_by(&view, OrderField::Key, std::ops::Bound::Unbounded, false), ["a", "b"]);
            assert_eq!(zones_by(&view, OrderField::LastModifiedAt, std::ops::Bound::Unbounded, false), ["b", "a"]);
            drop(view);
            assert!(!store.orders_pending(), "layout {version}: the migrated indexes are used");
        }
    }

    /// A store of a newer layout is refused, never rewritten.
    #[test]
    fn a_store_of_a_newer_layout_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let txn = store.database().unwrap().begin_write().unwrap();
        txn.open_table(tables::META).unwrap().insert("schema_version", SCHEMA_VERSION + 1).unwrap();
        txn.commit().unwrap();
        drop(store);
        let refused = Store::open(dir.path());
        assert!(matches!(&refused, Err(StorageError::VersionMismatch { found, expected: SCHEMA_VERSION }) if *found == SCHEMA_VERSION + 1));
        // The message names both versions and the ways back.
        let message = refused.err().unwrap().to_string();
        for part in [
            format!("layout version {}", SCHEMA_VERSION + 1),
            format!("reads layout {SCHEMA_VERSION}"),
            "delete the data directory".into(),
            "restore a snapshot".into(),
        ] {
            assert!(message.contains(&part), "{message}");
        }
    }

    /// `close` returns once the last handle is gone, and the file can be opened again then; a
    /// handle kept alive is reported, with their number.
    #[test]
    fn close_waits_for_the_last_handle_and_releases_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let kept = store.clone();
        match store.clone().close(std::time::Duration::from_millis(1)) {
            Err(StorageError::StillOpen { handles }) => assert_eq!(handles, 2),
            other => panic!("{other:?}"),
        }
        assert!(matches!(Store::open(dir.path()), Err(StorageError::Locked(_))));
        let holder = std::thread::spawn(move || drop(kept));
        store.close(std::time::Duration::from_secs(30)).unwrap();
        holder.join().unwrap();
        let reopened = Store::open(dir.path()).unwrap();
        reopened.close(std::time::Duration::from_secs(30)).unwrap();
        Store::open(dir.path()).unwrap();
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
