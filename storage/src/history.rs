//! History: the durable change log and every object's past revisions (tables `history`,
//! `history_index`, `history_counts`; ARCHITECTURE.md, `storage`: history).
//!
//! | table | key | value |
//! |---|---|---|
//! | `history` | position: `revision u64 BE · index u32 BE` | `0x02 ·` postcard `EntryRecord` ([`LogEntry`]; `0x01`: the format before origins were left to the record) |
//! | `history_index` | `'o' · object digest · position` (an object's revisions); `'t' · scope digest · position · kind u8` (a team's revisions) | `()` |
//! | `history_counts` | `'T' · scope key · kind u8`, `'A' · kind u8` | `u64` revisions kept |
//! | `history_meta` | `"history_bytes"`, `"history_entries"`, `"history_floor_revision"`, `"history_floor_index"`, `"history_revision"`, `"history_last_at"`, `"log_identity"`, `"history_pruned"`, `"history_index_salt"`, `"history_index_format"`, `"history_indexed_revision"` | `u64` |
//!
//! **Index keys are digests**: SHA-256 of the store's random salt and what is indexed, cut
//! short — for an object, 3 bytes of its kind and *cluster* (its natural key without the last
//! part: the environment and namespace or team it lives in, so a load's objects land together)
//! then 5 bytes of its kind and natural key ([`object_prefix`]); for a team scope, 8 bytes of
//! its key. 21 and 22 bytes a key in place of about 100 and 45. Digests of two objects may
//! collide (salted, so no one can make them): whoever acts on an entry found by digest checks
//! its kind and key first ([`ReadView::previous_revision`], the writer's pruning), and a
//! team's entries pass the viewer's visibility check anyway. A store whose index has the older
//! layout (`'O' · kind · natural key`, format 1) is re-indexed when it opens.
//!
//! **A load's index waits** ([`crate::Store::set_loading`]): while asked, a batch of
//! creations only writes its entries and counters, and leaves their index keys and per-object
//! bound to [`crate::Store::index_history`] (revisions after `history_indexed_revision` wait);
//! any other batch indexes every waiting revision first, so what waits is always newer than
//! what is indexed and is at most one creation per object. Readers add it: an object's from the
//! commit that last wrote its record, a team's from the log's tail, read once by scope for every
//! view of the same tail ([`UnindexedTail`]).
//!
//! **The log.** The writer appends, in the commit of each batch, one entry per record the batch
//! wrote or removed — the same changes, in the same order, as the commit feed tells
//! ([`crate::Committed`]), so an entry's *position* (revision, index) is the position the
//! `changes` subscription hands out. Each entry holds the kind, the natural key, the scopes
//! before and after, and the commit time. The log is complete after its *floor*
//! ([`ReadView::log_floor`]): pruning moves the floor, and so does a batch committed without
//! history (history switched off, or an older build that does not know the tables: a store
//! whose `history_revision` is not its revision is told so on open).
//!
//! **Revisions.** An entry is a *revision of its object* when the object's source changed it
//! (an upsert or delete of that source object). Its record then also holds the source's
//! version (`resourceVersion`), the manager (the kube source's `managedFields` entry of the
//! change), and the record's *origin* at that revision: its `createdAt`, links and source
//! object. The newest revision of an object that exists leaves its origin to the object's
//! record (the same values; links resolved since show as resolved), and gets it written in
//! when a later change supersedes it or the record goes. Only revisions are indexed (by object; by team scope) and counted. Entries that
//! are no revision — a record whose links were resolved again, a re-derivation's switch, a
//! kind purged and brought back by the source — are kept for subscriptions only.
//!
//! **What shows a revision.** The source document it was translated from: the newest revision
//! of an object that exists reads its source's document (`source_documents`, never copied);
//! when a later change supersedes it (an update or the delete), the writer moves that document
//! into the revision's entry first. So a load writes no document twice, and a revision is shown
//! by translating its document with this build's rules (a re-derived kind keeps its history).
//!
//! **Retention** ([`HistorySettings`]): at most `max_revisions_per_object` revisions per object
//! (the oldest go as the writer appends), none older than `retention`, at most `max_bytes` over
//! all entries (the oldest go first) — these two pruned by the writer between batches in steps
//! ([`crate::Store::prune_history`]). Every entry removed moves the floor above it.

use crate::codec::{decode, encode};
use crate::StorageError;
use foldhash::HashMap;
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use schema::{Key, KindId, Scope, Timestamp};
use serde::{Deserialize, Serialize};
use std::ops::RangeBounds;
use std::sync::Arc;
use std::time::Duration;

/// `history`: the change log, by position.
pub const LOG: TableDefinition<&[u8], &[u8]> = TableDefinition::new("history");
/// `history_index`: revisions by object and by team scope.
pub const INDEX: TableDefinition<&[u8], ()> = TableDefinition::new("history_index");
/// `history_counts`: revisions kept per (team scope, kind) and per kind.
pub const COUNTS: TableDefinition<&[u8], u64> = TableDefinition::new("history_counts");
/// `history_meta`: the log's own state ([`meta`]).
pub const META: TableDefinition<&str, u64> = TableDefinition::new("history_meta");

/// The keys of `history_meta`.
mod meta {
    /// Bytes of every entry and index key kept.
    pub const BYTES: &str = "history_bytes";
    /// Entries kept.
    pub const ENTRIES: &str = "history_entries";
    /// The floor's revision and index.
    pub const FLOOR_REVISION: &str = "history_floor_revision";
    pub const FLOOR_INDEX: &str = "history_floor_index";
    /// The revision of the last batch whose changes were logged.
    pub const LOGGED: &str = "history_revision";
    /// The commit time of the newest entry (ns): entries' times never go back.
    pub const LAST_AT: &str = "history_last_at";
    /// The log's identity: random per store, new after a restore.
    pub const IDENTITY: &str = "log_identity";
    /// Entries pruned since the store was created.
    pub const PRUNED: &str = "history_pruned";
    /// The random salt of the index's digests.
    pub const SALT: &str = "history_index_salt";
    /// The index's layout: [`super::INDEX_FORMAT`] (absent: the first, by natural key).
    pub const INDEX_FORMAT: &str = "history_index_format";
    /// While revisions wait for their index: every revision of a commit up to this revision is
    /// indexed, none after it (absent: all are).
    pub const INDEXED: &str = "history_indexed_revision";
}

/// The format tag of an entry's value.
const FORMAT: u8 = 2;

/// The format tag of entries written before origins were left to the record.
const FORMAT_WITH_ORIGIN: u8 = 1;

/// The layout of `history_index`: keys by digest.
const INDEX_FORMAT: u64 = 2;

/// The longest `manager` kept, in bytes (Kubernetes' own limit of a field manager's name); a
/// longer one is not recorded.
pub const MAX_MANAGER_BYTES: usize = 128;

/// The longest source version kept with a revision, in bytes; a longer one is not recorded.
pub const MAX_VERSION_BYTES: usize = 256;

/// The largest `max_revisions_per_object` accepted: an object's revisions are counted by
/// reading them as the writer appends one.
pub const MAX_REVISIONS_PER_OBJECT: u32 = 10_000;

/// Settings of the history (`history.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistorySettings {
    /// `history.enabled`: whether changes are logged.
    pub enabled: bool,
    /// `history.retention`: the longest an entry is kept.
    pub retention: Duration,
    /// `history.maxRevisionsPerObject` (1 to [`MAX_REVISIONS_PER_OBJECT`]).
    pub max_revisions_per_object: u32,
    /// `history.maxBytes`: the most bytes of entries and index keys kept.
    pub max_bytes: u64,
}

impl HistorySettings {
    /// The most revisions kept per object: `max_revisions_per_object` within 1 to
    /// [`MAX_REVISIONS_PER_OBJECT`].
    fn max_per_object(&self) -> usize {
        self.max_revisions_per_object.clamp(1, MAX_REVISIONS_PER_OBJECT) as usize
    }
}

impl Default for HistorySettings {
    fn default() -> HistorySettings {
        HistorySettings { enabled: true, retention: Duration::from_secs(720 * 3600), max_revisions_per_object: 100, max_bytes: 1 << 30 }
    }
}

/// Where an entry sits in the log: the commit's revision, then the change's index in the
/// commit (the order of [`crate::Committed::changes`]). Ordered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LogPosition {
    /// The store revision of the commit.
    pub revision: u64,
    /// The change's index in the commit.
    pub index: u32,
}

impl LogPosition {
    /// Everything of `revision` and before.
    pub fn end_of(revision: u64) -> LogPosition {
        LogPosition { revision, index: u32::MAX }
    }

    /// The key bytes: revision and index, big-endian.
    pub fn to_bytes(self) -> [u8; 12] {
        let mut out = [0u8; 12];
        out[..8].copy_from_slice(&self.revision.to_be_bytes());
        out[8..].copy_from_slice(&self.index.to_be_bytes());
        out
    }

    /// The position of key bytes ([`LogPosition::to_bytes`]).
    pub fn from_bytes(bytes: &[u8]) -> Option<LogPosition> {
        let revision = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
        let index = u32::from_be_bytes(bytes.get(8..12)?.try_into().ok()?);
        Some(LogPosition { revision, index })
    }
}

/// What a change did to its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// The record did not exist before.
    Created,
    /// It existed before and after.
    Updated,
    /// It does not exist after.
    Deleted,
}

impl Operation {
    /// The GraphQL `ChangeOperation` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Created => "CREATED",
            Operation::Updated => "UPDATED",
            Operation::Deleted => "DELETED",
        }
    }
}

/// Where the document a revision was translated from is.
#[derive(Clone, Debug, PartialEq)]
pub enum RevisionDocument {
    /// None: a delete, an entry that is no revision, or a revision whose document was never
    /// stored (a store written before documents were kept).
    None,
    /// In the entry (as stored in `source_documents`: [`crate::documents`]).
    Stored(Vec<u8>),
    /// The source object's document, while this is its newest revision.
    Source {
        /// `metadata.namespace` of the source object.
        namespace: String,
        /// `metadata.name`.
        name: String,
        /// Whether the entry is known to be its object's newest revision (it leaves its origin
        /// to the record: a change that supersedes it writes it in); else a reader checks.
        newest: bool,
    },
}

/// One entry of the log.
#[derive(Clone, Debug, PartialEq)]
pub struct LogEntry {
    /// Where it sits.
    pub position: LogPosition,
    /// The record's kind.
    pub kind: KindId,
    /// Its natural key.
    pub key: Key,
    /// Scopes that could see it before (`None`: it did not exist).
    pub before: Option<Vec<Scope>>,
    /// Scopes that can see it after (`None`: it was removed).
    pub after: Option<Vec<Scope>>,
    /// Whether this is a revision of the object (its source changed it; see the module docs).
    pub is_revision: bool,
    /// The commit time.
    pub at: Timestamp,
    /// The source's version of the object (`metadata.resourceVersion` of the kube source), for
    /// a revision that is no delete.
    pub resource_version: Option<String>,
    /// Who made the change: the kube source's `managedFields` entry of it.
    pub manager: Option<String>,
    /// The record's `createdAt` at this revision.
    pub created_at: Timestamp,
    /// The record's resolved links at this revision ([`schema::Kind::links`] order).
    pub links: Vec<Option<Key>>,
    /// The source object (`metadata.namespace`, `metadata.name`) of a revision.
    pub source: Option<(String, String)>,
    /// Where its document is.
    pub document: RevisionDocument,
}

impl LogEntry {
    /// What the change did.
    pub fn operation(&self) -> Operation {
        match (&self.before, &self.after) {
            (None, _) => Operation::Created,
            (Some(_), None) => Operation::Deleted,
            (Some(_), Some(_)) => Operation::Updated,
        }
    }
}

/// An entry as stored (format [`FORMAT`]).
#[derive(Serialize, Deserialize)]
struct EntryRecord {
    kind: u8,
    key: Vec<u8>,
    revision: bool,
    before: Option<Vec<Vec<u8>>>,
    after: Option<Vec<Vec<u8>>>,
    at: i64,
    resource_version: Option<String>,
    manager: Option<String>,
    /// `None` for an entry that is no revision, and while the object's record holds it.
    origin: Option<Origin>,
    document: Option<Vec<u8>>,
}

/// A revision's record beside its data: `createdAt`, resolved links, source object.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Origin {
    created_at: i64,
    links: Vec<Option<Vec<u8>>>,
    source: Option<(String, String)>,
}

/// An entry as stored in format [`FORMAT_WITH_ORIGIN`]: frozen, field for field, as the build
/// before format 2 wrote it (its first eight fields are [`EntryRecord`]'s).
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct EntryRecordWithOrigin {
    kind: u8,
    key: Vec<u8>,
    revision: bool,
    before: Option<Vec<Vec<u8>>>,
    after: Option<Vec<Vec<u8>>>,
    at: i64,
    resource_version: Option<String>,
    manager: Option<String>,
    created_at: i64,
    links: Vec<Option<Vec<u8>>>,
    source: Option<(String, String)>,
    document: Option<Vec<u8>>,
}

impl EntryRecord {
    fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT];
        out.extend_from_slice(&encode(self));
        out
    }

    fn decode(bytes: &[u8]) -> Result<EntryRecord, StorageError> {
        match bytes.split_first() {
            Some((&FORMAT, rest)) => decode(rest, "history entry"),
            Some((&FORMAT_WITH_ORIGIN, rest)) => {
                let e: EntryRecordWithOrigin = decode(rest, "history entry")?;
                Ok(EntryRecord {
                    kind: e.kind,
                    key: e.key,
                    revision: e.revision,
                    before: e.before,
                    after: e.after,
                    at: e.at,
                    resource_version: e.resource_version,
                    manager: e.manager,
                    origin: Some(Origin { created_at: e.created_at, links: e.links, source: e.source }),
                    document: e.document,
                })
            }
            _ => Err(StorageError::Corrupt("history entry: unknown format".into())),
        }
    }

    /// Whether `bytes`, an entry's value, is of the object `key` of `kind` (its first fields).
    fn is_of(bytes: &[u8], kind: u8, key: &[u8]) -> bool {
        #[derive(Deserialize)]
        struct Head<'a> {
            kind: u8,
            #[serde(borrow)]
            key: &'a [u8],
        }
        matches!(bytes.split_first(), Some((&(FORMAT | FORMAT_WITH_ORIGIN), rest))
            if crate::codec::decode_borrowed::<Head>(rest, "history entry").is_ok_and(|h| h.kind == kind && h.key == key))
    }

    /// The entry at `position`; `origin` gives the record's origin when the entry leaves it to
    /// the record ([`crate::ReadView::origin_of`]).
    fn entry(
        self,
        position: LogPosition,
        origin: impl FnOnce(KindId, &Key) -> Result<Option<Origin>, StorageError>,
    ) -> Result<LogEntry, StorageError> {
        let kind = KindId::from_code(self.kind).ok_or_else(|| StorageError::Corrupt(format!("history entry: kind code {}", self.kind)))?;
        let key = Key::from_bytes(self.key);
        let scopes = |s: Option<Vec<Vec<u8>>>| s.map(|s| s.into_iter().filter_map(|k| scope_of(&k)).collect::<Vec<_>>());
        let newest = self.origin.is_none();
        let origin = match self.origin {
            Some(o) => o,
            None if self.revision && self.after.is_some() => origin(kind, &key)?.unwrap_or_default(),
            None => Origin::default(),
        };
        let document = match (self.document, &origin.source) {
            (Some(d), _) => RevisionDocument::Stored(d),
            (None, Some((namespace, name))) if self.revision && self.after.is_some() => {
                RevisionDocument::Source { namespace: namespace.clone(), name: name.clone(), newest }
            }
            (None, _) => RevisionDocument::None,
        };
        Ok(LogEntry {
            position,
            kind,
            key,
            before: scopes(self.before),
            after: scopes(self.after),
            is_revision: self.revision,
            at: Timestamp(self.at),
            resource_version: self.resource_version,
            manager: self.manager,
            created_at: Timestamp(origin.created_at),
            links: origin.links.into_iter().map(|l| l.map(Key::from_bytes)).collect(),
            source: origin.source,
            document,
        })
    }

    /// The team scope keys of a revision (before and after, each once).
    fn team_scopes(&self) -> Vec<&[u8]> {
        let mut out: Vec<&[u8]> = Vec::new();
        for s in self.before.iter().chain(self.after.iter()).flatten() {
            if s.first() == Some(&b'T') && !out.contains(&s.as_slice()) {
                out.push(s);
            }
        }
        out
    }
}

/// The scope whose key is `bytes` ([`Scope::key`]).
fn scope_of(bytes: &[u8]) -> Option<Scope> {
    let parts = Key::from_bytes(bytes.to_vec()).parts().ok()?;
    match parts.as_slice() {
        [t, env, team] if t == "T" => Some(Scope::Team { env: env.clone(), team: team.clone() }),
        [e, env] if e == "E" => Some(Scope::Env { env: env.clone() }),
        [a] if a == "A" => Some(Scope::All),
        _ => None,
    }
}

/// The first 8 bytes of the SHA-256 of `salt` and `parts` (each length-prefixed).
fn digest(salt: u64, parts: &[&[u8]]) -> [u8; 8] {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(salt.to_be_bytes());
    for part in parts {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    let mut out = [0u8; 8];
    out.copy_from_slice(&h.finalize()[..8]);
    out
}

/// The index key prefix of an object's revisions: `'o' ·` 3 bytes of the digest of its kind
/// and *cluster* (its natural key without the last part: the environment and namespace or team
/// the object lives in) `·` 5 bytes of the digest of its kind and natural key. Objects of one
/// cluster sit together, so a load, which writes them together, touches few of the index's
/// pages.
fn object_prefix(salt: u64, kind: u8, key: &[u8]) -> Vec<u8> {
    // Each part of a natural key ends with a 0 byte (an escaped 0 is `1 1`).
    let last_part = key[..key.len().saturating_sub(1)].iter().rposition(|b| *b == 0).map_or(0, |i| i + 1);
    let mut out = Vec::with_capacity(9 + 12);
    out.push(b'o');
    out.extend_from_slice(&digest(salt, &[&[kind], &key[..last_part]])[..3]);
    out.extend_from_slice(&digest(salt, &[&[kind], key])[..5]);
    out
}

/// The index key prefix of a team scope's revisions: `'t' ·` the scope's digest.
fn team_prefix(salt: u64, scope_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + 13);
    out.push(b't');
    out.extend_from_slice(&digest(salt, &[scope_key]));
    out
}

fn team_count_key(scope_key: &[u8], kind: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + scope_key.len());
    out.push(b'T');
    out.extend_from_slice(scope_key);
    out.push(kind);
    out
}

fn kind_count_key(kind: u8) -> [u8; 2] {
    [b'A', kind]
}

/// What the writer noted about one record of a batch, for its entry ([`Recorder::note`]).
#[derive(Default)]
pub(crate) struct Note {
    revision: bool,
    resource_version: Option<String>,
    manager: Option<String>,
    /// The record's origin before its removal (the origin a delete keeps).
    origin: Origin,
    /// The record's origin before the batch, when the object existed: it goes into the
    /// object's newest revision, which this batch supersedes (a revision, or the record's
    /// removal).
    superseded_origin: Option<Origin>,
    /// The source document before the batch and the source version it is of, when the object
    /// existed: it goes into the object's newest revision, which this batch supersedes, when
    /// that revision is of the same version.
    superseded: Option<(Vec<u8>, String)>,
    /// Whether the object existed before the batch (its first note saw it).
    existed: bool,
}

/// The source change the writer is applying ([`Recorder::begin`]): the changes of its object
/// are revisions.
pub(crate) struct SourceChange {
    pub kind: KindId,
    pub namespace: String,
    pub name: String,
    pub version: Option<String>,
    pub manager: Option<String>,
}

/// The history side of one write batch: what the writer noted per record.
pub(crate) struct Recorder {
    settings: HistorySettings,
    /// By kind, then natural key (looked up without a copy of the key).
    notes: HashMap<KindId, HashMap<Key, Note>>,
    current: Option<SourceChange>,
    /// Source documents replaced by a version that changed nothing in their record (no
    /// revision): (kind, natural key, document, its version), for the object's newest revision.
    kept_documents: Vec<(KindId, Key, Vec<u8>, String)>,
    /// Whether changes of the source are revisions now (off while a re-derivation switches).
    pub revisions: bool,
    /// Whether a batch of creations only leaves its revisions' index to
    /// [`crate::Store::index_history`].
    defer_index: bool,
}

/// A record's state on one side of a change, as the writer sees it.
pub(crate) struct Side<'a> {
    pub source: &'a (String, String),
    pub created_at: Timestamp,
    pub links: &'a [Option<Key>],
}

impl Side<'_> {
    fn origin(&self) -> Origin {
        Origin {
            created_at: self.created_at.0,
            links: self.links.iter().map(|l| l.as_ref().map(|k| k.as_bytes().to_vec())).collect(),
            source: Some(self.source.clone()),
        }
    }
}

impl Recorder {
    pub(crate) fn new(settings: HistorySettings, defer_index: bool) -> Recorder {
        Recorder { settings, notes: HashMap::default(), current: None, kept_documents: Vec::new(), revisions: true, defer_index }
    }

    /// Notes that the source document of the object `key` of `kind`, of source `version`, is
    /// replaced by one of another version that changes nothing in its record: the object's
    /// newest revision, if of that version, keeps it.
    pub(crate) fn keep_document(&mut self, kind: KindId, key: &Key, document: Vec<u8>, version: String) {
        self.kept_documents.push((kind, key.clone(), document, version));
    }

    /// The writer starts applying `change` (`None`: it is done).
    pub(crate) fn begin(&mut self, change: Option<SourceChange>) {
        self.current = change;
    }

    /// Notes that the record `key` of `kind` goes from `before` to `after`; `document` reads
    /// the source document of the object now (called only for the first note of an object that
    /// existed, when the change is a revision or removes the record).
    pub(crate) fn note(
        &mut self,
        kind: KindId,
        key: &Key,
        before: Option<Side<'_>>,
        after: Option<Side<'_>>,
        rederiving: bool,
        document: impl FnOnce(&(String, String)) -> Option<(Vec<u8>, String)>,
    ) {
        let side = after.as_ref().or(before.as_ref());
        let revision = self.revisions
            && !rederiving
            && self
                .current
                .as_ref()
                .is_some_and(|c| c.kind == kind && side.is_some_and(|s| s.source.0 == c.namespace && s.source.1 == c.name));
        let notes = self.notes.entry(kind).or_default();
        let first = !notes.contains_key(key);
        let note = match notes.get_mut(key) {
            Some(note) => note,
            None => notes.entry(key.clone()).or_default(),
        };
        if first {
            note.existed = before.is_some();
            if let Some(b) = &before {
                note.superseded_origin = Some(b.origin());
                if revision || after.is_none() {
                    note.superseded = document(b.source);
                }
            }
        }
        note.revision |= revision;
        // Only a delete keeps its origin: the record keeps any other's.
        if let (None, Some(b)) = (&after, &before) {
            note.origin = b.origin();
        }
        if revision {
            let c = self.current.as_ref().expect("invariant: a revision has a current change");
            note.resource_version = c.version.clone().filter(|v| v.len() <= MAX_VERSION_BYTES);
            note.manager = c.manager.clone();
        }
    }
}

fn scope_keys(scopes: &Option<Vec<Scope>>) -> Option<Vec<Vec<u8>>> {
    scopes.as_ref().map(|s| s.iter().map(|s| s.key().as_bytes().to_vec()).collect())
}

/// Adds `delta` to the counter `key` of `history_counts` (removed at 0).
fn add_count(counts: &mut redb::Table<'_, &'static [u8], u64>, key: &[u8], delta: i64) -> Result<(), StorageError> {
    let current = counts.get(key)?.map(|v| v.value()).unwrap_or(0) as i64;
    let next = (current + delta).max(0) as u64;
    match next {
        0 => counts.remove(key)?,
        n => counts.insert(key, n)?,
    };
    Ok(())
}

/// Adds `delta` to the counters of the revision `record`: its kind's, and its kind's under each
/// of its team scopes.
fn count_revision(deltas: &mut HashMap<Vec<u8>, i64>, record: &EntryRecord, delta: i64) {
    for scope in record.team_scopes() {
        *deltas.entry(team_count_key(scope, record.kind)).or_default() += delta;
    }
    *deltas.entry(kind_count_key(record.kind).to_vec()).or_default() += delta;
}

/// The tables of the log, open in one write transaction.
struct Tables<'txn> {
    log: redb::Table<'txn, &'static [u8], &'static [u8]>,
    index: redb::Table<'txn, &'static [u8], ()>,
    counts: redb::Table<'txn, &'static [u8], u64>,
    /// Changes of `history_counts`, written once when the tables close (a batch of a load
    /// touches the same few counters thousands of times).
    deltas: HashMap<Vec<u8>, i64>,
    bytes: i64,
    entries: i64,
    floor: LogPosition,
    pruned: u64,
    /// The salt of the index's digests.
    salt: u64,
    /// The revision up to which revisions are indexed, while later ones wait ([`meta::INDEXED`];
    /// `None`: all are indexed).
    indexed: Option<u64>,
}

impl<'txn> Tables<'txn> {
    fn open(txn: &'txn WriteTransaction) -> Result<Tables<'txn>, StorageError> {
        let salt = salt(txn)?;
        let (floor, bytes, entries, pruned, indexed) = {
            let meta = txn.open_table(META)?;
            let get = |k: &str| -> Result<u64, StorageError> { Ok(meta.get(k)?.map(|v| v.value()).unwrap_or(0)) };
            let floor = LogPosition { revision: get(meta::FLOOR_REVISION)?, index: get(meta::FLOOR_INDEX)? as u32 };
            let indexed = meta.get(meta::INDEXED)?.map(|v| v.value());
            (floor, get(meta::BYTES)? as i64, get(meta::ENTRIES)? as i64, get(meta::PRUNED)?, indexed)
        };
        Ok(Tables {
            log: txn.open_table(LOG)?,
            index: txn.open_table(INDEX)?,
            counts: txn.open_table(COUNTS)?,
            deltas: HashMap::default(),
            bytes,
            entries,
            floor,
            pruned,
            salt,
            indexed,
        })
    }

    fn close(self, txn: &WriteTransaction) -> Result<(), StorageError> {
        let Tables { log, index, mut counts, deltas, bytes, entries, floor, pruned, salt: _, indexed } = self;
        for (key, delta) in deltas.into_iter().filter(|(_, d)| *d != 0) {
            add_count(&mut counts, &key, delta)?;
        }
        drop((log, index, counts));
        let mut meta = txn.open_table(META)?;
        meta.insert(meta::BYTES, bytes.max(0) as u64)?;
        meta.insert(meta::ENTRIES, entries.max(0) as u64)?;
        meta.insert(meta::FLOOR_REVISION, floor.revision)?;
        meta.insert(meta::FLOOR_INDEX, u64::from(floor.index))?;
        meta.insert(meta::PRUNED, pruned)?;
        match indexed {
            Some(revision) => meta.insert(meta::INDEXED, revision)?,
            None => meta.remove(meta::INDEXED)?,
        };
        Ok(())
    }

    /// Whether the entry at `position` has its index entries (else it waits for them).
    fn is_indexed(&self, position: LogPosition) -> bool {
        self.indexed.is_none_or(|w| position.revision <= w)
    }

    /// Writes `record` at `position` with its counters, and its index entries when `indexed`
    /// (else [`Tables::index_pending`] writes them).
    fn insert(&mut self, position: LogPosition, record: &EntryRecord, indexed: bool) -> Result<(), StorageError> {
        let value = record.encode();
        self.log.insert(position.to_bytes().as_slice(), value.as_slice())?;
        self.bytes += (12 + value.len()) as i64;
        self.entries += 1;
        if record.revision {
            if indexed {
                self.index_entry(position, record)?;
            }
            count_revision(&mut self.deltas, record, 1);
        }
        Ok(())
    }

    /// Removes the entry at `position` (read as `value`) with its index entries and counters,
    /// and moves the floor above it.
    fn remove(&mut self, position: LogPosition, value: &[u8]) -> Result<(), StorageError> {
        self.log.remove(position.to_bytes().as_slice())?;
        self.bytes -= (12 + value.len()) as i64;
        self.entries -= 1;
        self.pruned += 1;
        self.floor = self.floor.max(position);
        let Ok(record) = EntryRecord::decode(value) else { return Ok(()) };
        if record.revision {
            if self.is_indexed(position) {
                for key in index_keys_of(self.salt, &record, position) {
                    self.index.remove(key.as_slice())?;
                    self.bytes -= key.len() as i64;
                }
            }
            count_revision(&mut self.deltas, &record, -1);
        }
        Ok(())
    }

    /// Writes the index entries of the revision `record` at `position`.
    fn index_entry(&mut self, position: LogPosition, record: &EntryRecord) -> Result<(), StorageError> {
        for key in index_keys_of(self.salt, record, position) {
            self.index.insert(key.as_slice(), ())?;
            self.bytes += key.len() as i64;
        }
        Ok(())
    }

    /// Indexes the revisions that wait for it, oldest commit first, whole commits of at least
    /// `max_entries` entries in all (`usize::MAX`: every one), and drops each object's revisions
    /// beyond `max_per_object` as it goes; returns whether some still wait.
    fn index_pending(&mut self, max_entries: usize, max_per_object: usize) -> Result<bool, StorageError> {
        let Some(indexed) = self.indexed else { return Ok(false) };
        let start = LogPosition { revision: indexed.saturating_add(1), index: 0 };
        let mut pending: Vec<(LogPosition, EntryRecord)> = Vec::new();
        let mut more = false;
        for item in self.log.range(start.to_bytes().as_slice()..)? {
            let (k, v) = item?;
            let position = LogPosition::from_bytes(k.value()).ok_or_else(|| StorageError::Corrupt("history key".into()))?;
            if pending.len() >= max_entries && pending.last().is_some_and(|(p, _)| p.revision != position.revision) {
                more = true;
                break;
            }
            pending.push((position, EntryRecord::decode(v.value())?));
        }
        for (position, record) in pending.iter().filter(|(_, r)| r.revision) {
            self.indexed = Some(position.revision);
            self.index_entry(*position, record)?;
            let kept = self.revisions_of(record.kind, &record.key)?;
            for old in &kept[..kept.len().saturating_sub(max_per_object)] {
                if let Some(value) = self.revision_value(*old, record.kind, &record.key)? {
                    self.remove(*old, &value)?;
                }
            }
        }
        self.indexed = match (more, pending.last()) {
            (true, Some((p, _))) => Some(p.revision),
            _ => None,
        };
        Ok(more)
    }

    /// The positions under an object's digest, oldest first: its revisions kept, and those of
    /// an object whose digest collides with its own (checked by whoever acts on one).
    fn revisions_of(&self, kind: u8, key: &[u8]) -> Result<Vec<LogPosition>, StorageError> {
        let prefix = object_prefix(self.salt, kind, key);
        let (start, end) = bounded(&prefix, (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded));
        let mut out = Vec::new();
        for item in self.index.range(start.as_slice()..end.as_slice())? {
            let (k, _) = item?;
            out.extend(LogPosition::from_bytes(&k.value()[prefix.len()..]));
        }
        Ok(out)
    }

    /// The object's revision at `position` as stored, if it is one of the object `key` of
    /// `kind`.
    fn revision_value(&self, position: LogPosition, kind: u8, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        let value = self.log.get(position.to_bytes().as_slice())?.map(|v| v.value().to_vec());
        Ok(value.filter(|v| EntryRecord::is_of(v, kind, key)))
    }

    /// Writes each document the recorder kept ([`Recorder::keep_document`]) into its object's
    /// newest revision.
    fn keep_documents(&mut self, recorder: &mut Recorder) -> Result<(), StorageError> {
        for (kind, key, document, version) in std::mem::take(&mut recorder.kept_documents) {
            let kept = self.revisions_of(kind.code(), key.as_bytes())?;
            self.supersede((kind.code(), key.as_bytes()), &kept, None, Some((document, version)))?;
        }
        Ok(())
    }

    /// Writes into the newest kept revision of the object `key` of `kind` (`positions` under its
    /// digest, oldest first), which a change of the object supersedes: its `origin` when it
    /// leaves it to the record, and the source `document` of `version` when it has none, is no
    /// delete and is of that version. (A document of another version was written while history
    /// was off: the revision's own is lost.)
    fn supersede(
        &mut self,
        (kind, key): (u8, &[u8]),
        positions: &[LogPosition],
        origin: Option<Origin>,
        document: Option<(Vec<u8>, String)>,
    ) -> Result<(), StorageError> {
        let mut newest = None;
        for p in positions.iter().rev() {
            if let Some(value) = self.revision_value(*p, kind, key)? {
                newest = Some((*p, value));
                break;
            }
        }
        let Some((position, value)) = newest else { return Ok(()) };
        let mut record = EntryRecord::decode(&value)?;
        let mut changed = false;
        if record.origin.is_none() {
            record.origin = origin;
            changed = record.origin.is_some();
        }
        if let Some((document, version)) = document {
            if record.document.is_none() && record.after.is_some() && record.resource_version.as_deref() == Some(version.as_str()) {
                record.document = Some(document);
                changed = true;
            }
        }
        if changed {
            let updated = record.encode();
            self.log.insert(position.to_bytes().as_slice(), updated.as_slice())?;
            self.bytes += updated.len() as i64 - value.len() as i64;
        }
        Ok(())
    }
}

/// Gives each object whose source document a batch that changed no record replaced its
/// document ([`Recorder::keep_document`]), in the batch's transaction.
pub(crate) fn keep_documents(txn: &WriteTransaction, recorder: &mut Recorder) -> Result<(), StorageError> {
    if recorder.kept_documents.is_empty() {
        return Ok(());
    }
    let mut t = Tables::open(txn)?;
    t.index_pending(usize::MAX, recorder.settings.max_per_object())?;
    t.keep_documents(recorder)?;
    t.close(txn)
}

/// Rebuilds `history_index` in this layout from the log's entries (a store whose index has an
/// older layout), adjusting the bytes kept; returns the revisions indexed.
fn reindex(txn: &WriteTransaction) -> Result<u64, StorageError> {
    let mut old_bytes = 0i64;
    for item in txn.open_table(INDEX)?.iter()? {
        old_bytes += item?.0.value().len() as i64;
    }
    txn.delete_table(INDEX)?;
    let mut t = Tables::open(txn)?;
    let mut new_bytes = 0i64;
    let mut revisions = 0u64;
    for item in t.log.iter()? {
        let (k, v) = item?;
        let record = EntryRecord::decode(v.value())?;
        if !record.revision {
            continue;
        }
        let position = LogPosition::from_bytes(k.value()).ok_or_else(|| StorageError::Corrupt("history key".into()))?;
        for key in index_keys_of(t.salt, &record, position) {
            t.index.insert(key.as_slice(), ())?;
            new_bytes += key.len() as i64;
        }
        revisions += 1;
    }
    t.bytes += new_bytes - old_bytes;
    t.indexed = None;
    t.close(txn)?;
    txn.open_table(META)?.insert(meta::INDEX_FORMAT, INDEX_FORMAT)?;
    Ok(revisions)
}

/// The index keys of a revision ([`object_prefix`], [`team_prefix`]).
fn index_keys_of(salt: u64, record: &EntryRecord, position: LogPosition) -> Vec<Vec<u8>> {
    let p = position.to_bytes();
    let mut object = object_prefix(salt, record.kind, &record.key);
    object.extend_from_slice(&p);
    let mut out = vec![object];
    for scope in record.team_scopes() {
        let mut k = team_prefix(salt, scope);
        k.extend_from_slice(&p);
        k.push(record.kind);
        out.push(k);
    }
    out
}

/// Appends the changes of the batch committing `revision` at `at` (merged, in feed order) to the
/// log, with what `recorder` noted, in the batch's transaction; prunes each changed object's
/// revisions beyond the bound.
pub(crate) fn append(
    txn: &WriteTransaction,
    revision: u64,
    at: Timestamp,
    changes: &[crate::RecordChange],
    mut recorder: Recorder,
) -> Result<(), StorageError> {
    let at = {
        let mut meta = txn.open_table(META)?;
        let last = meta.get(meta::LAST_AT)?.map(|v| v.value() as i64).unwrap_or(i64::MIN);
        let at = Timestamp(at.0.max(last));
        meta.insert(meta::LAST_AT, at.0.max(0) as u64)?;
        at
    };
    let mut t = Tables::open(txn)?;
    let max = recorder.settings.max_per_object();
    // A load's batch (creations only) leaves its index to `Store::index_history`; any other
    // first indexes every revision that waits, as its own reads of the index need them.
    let deferred = recorder.defer_index && recorder.kept_documents.is_empty() && changes.iter().all(|c| c.before.is_none());
    if deferred {
        t.indexed = Some(t.indexed.unwrap_or(revision - 1));
    } else {
        t.index_pending(usize::MAX, max)?;
    }
    // Before the batch's revisions: a revision of the same object supersedes the one that keeps
    // the document.
    t.keep_documents(&mut recorder)?;
    for (i, c) in changes.iter().enumerate() {
        let position = LogPosition { revision, index: u32::try_from(i).unwrap_or(u32::MAX - 1) };
        let note = recorder.notes.get_mut(&c.kind).and_then(|n| n.remove(&c.key)).unwrap_or_default();
        let record = EntryRecord {
            kind: c.kind.code(),
            key: c.key.as_bytes().to_vec(),
            revision: note.revision,
            before: scope_keys(&c.before),
            after: scope_keys(&c.after),
            at: at.0,
            resource_version: note.resource_version.filter(|_| c.after.is_some()),
            manager: note.manager,
            // A revision that leaves a record leaves its origin to it; a delete keeps its own.
            origin: (note.revision && c.after.is_none()).then_some(note.origin),
            document: None,
        };
        let object = (record.kind, record.key.as_slice());
        if deferred {
            t.insert(position, &record, false)?;
        } else if record.revision {
            let mut kept = t.revisions_of(object.0, object.1)?;
            if note.existed {
                t.supersede(object, &kept, note.superseded_origin, note.superseded)?;
            }
            t.insert(position, &record, true)?;
            kept.push(position);
            let excess = kept.len().saturating_sub(max);
            for old in &kept[..excess] {
                if let Some(value) = t.revision_value(*old, object.0, object.1)? {
                    t.remove(*old, &value)?;
                }
            }
        } else {
            if note.existed && c.after.is_none() {
                // The record goes without a revision (its kind purged or re-derived): its newest
                // revision keeps its origin and document.
                let kept = t.revisions_of(object.0, object.1)?;
                t.supersede(object, &kept, note.superseded_origin, note.superseded)?;
            }
            t.insert(position, &record, true)?;
        }
    }
    t.close(txn)?;
    txn.open_table(META)?.insert(meta::LOGGED, revision)?;
    Ok(())
}

/// Marks the log incomplete up to the end of `revision` (a batch committed without history).
pub(crate) fn skip(txn: &WriteTransaction, revision: u64) -> Result<(), StorageError> {
    let mut meta = txn.open_table(META)?;
    let floor = LogPosition {
        revision: meta.get(meta::FLOOR_REVISION)?.map(|v| v.value()).unwrap_or(0),
        index: meta.get(meta::FLOOR_INDEX)?.map(|v| v.value()).unwrap_or(0) as u32,
    };
    let end = LogPosition::end_of(revision).max(floor);
    meta.insert(meta::FLOOR_REVISION, end.revision)?;
    meta.insert(meta::FLOOR_INDEX, u64::from(end.index))?;
    meta.insert(meta::LOGGED, revision)?;
    Ok(())
}

/// On open of a store at `revision`: gives the log an identity when it has none (a new store,
/// or one of an earlier build) and moves the floor to the end of `revision` when batches were
/// committed that the log lacks (written by a build without history).
pub(crate) fn open(txn: &WriteTransaction, revision: u64) -> Result<(), StorageError> {
    txn.open_table(LOG)?;
    txn.open_table(INDEX)?;
    txn.open_table(COUNTS)?;
    let mut meta = txn.open_table(META)?;
    if meta.get(meta::IDENTITY)?.is_none() {
        meta.insert(meta::IDENTITY, new_identity())?;
    }
    let logged = meta.get(meta::LOGGED)?.map(|v| v.value());
    let index_format = meta.get(meta::INDEX_FORMAT)?.map(|v| v.value());
    drop(meta);
    if logged != Some(revision) {
        skip(txn, revision)?;
    }
    if index_format != Some(INDEX_FORMAT) {
        let revisions = reindex(txn)?;
        if revisions > 0 {
            tracing::info!(revisions, "history index rebuilt by digest");
        }
    }
    Ok(())
}

/// Gives the log a new identity (a restore: positions of the store it came from mean nothing
/// here) and marks it empty up to the end of `revision`.
pub(crate) fn restart(txn: &WriteTransaction, revision: u64) -> Result<(), StorageError> {
    txn.open_table(META)?.insert(meta::IDENTITY, new_identity())?;
    skip(txn, revision)
}

fn new_identity() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new().build_hasher().finish()
}

/// The team scopes' revisions that wait for their index ([`crate::Store::set_loading`]),
/// read from the log's tail by the first view that needs them and shared by every view of the
/// same tail: a team's (or a group's) `activity` reads them by scope, not the whole tail each
/// time. Held only while revisions wait (a view that finds none waiting empties it).
#[derive(Default)]
pub(crate) struct UnindexedTail(std::sync::Mutex<Option<Arc<TailByTeam>>>);

impl UnindexedTail {
    fn clear(&self) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.is_some() {
            *kept = None;
        }
    }
}

/// The revisions after `indexed` of a log logged up to `logged`, by team scope key, oldest
/// first.
pub(crate) struct TailByTeam {
    logged: u64,
    indexed: u64,
    by_scope: HashMap<Vec<u8>, Vec<(LogPosition, KindId)>>,
}

/// What a snapshot keeps of the log besides its entries ([`crate::snapshot`], format 6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogState {
    /// Everything after this position is kept.
    pub floor: LogPosition,
    /// The newest entry's commit time (ns).
    pub last_at: i64,
    /// Entries pruned since the store was created.
    pub pruned: u64,
}

/// Checks an entry of a snapshot: a position key, a value that decodes.
pub(crate) fn check_entry(key: &[u8], value: &[u8]) -> Result<(), String> {
    if key.len() != 12 {
        return Err(format!("a position of {} bytes", key.len()));
    }
    let record = EntryRecord::decode(value).map_err(|e| e.to_string())?;
    KindId::from_code(record.kind).ok_or_else(|| format!("kind code {}", record.kind))?;
    Ok(())
}

/// The salt of the log's index digests in `txn`'s store, chosen (and written) on first use.
pub(crate) fn salt(txn: &WriteTransaction) -> Result<u64, StorageError> {
    let mut meta = txn.open_table(META)?;
    let stored = meta.get(meta::SALT)?.map(|v| v.value());
    match stored {
        Some(salt) => Ok(salt),
        None => {
            let salt = new_identity();
            meta.insert(meta::SALT, salt)?;
            Ok(salt)
        }
    }
}

/// What a restore writes of a snapshot's log besides its entries, derived from them
/// ([`derive_restored`]) while the store's records are written.
pub(crate) struct RestoredLog {
    /// Each entry's value as this build encodes it, when that differs from the snapshot's.
    reencoded: Vec<Option<Vec<u8>>>,
    /// Every entry's index keys, sorted and free of duplicates.
    index: Vec<Vec<u8>>,
    deltas: HashMap<Vec<u8>, i64>,
    bytes: i64,
}

/// Decodes a snapshot's log `entries` (position order, each checked by [`check_entry`]) and
/// derives their index keys (digests salted with `salt`, [`salt`]) and counters.
///
/// # Errors
/// [`StorageError::Corrupt`] for a position or an entry that does not decode.
pub(crate) fn derive_restored(salt: u64, entries: &[(Vec<u8>, Vec<u8>)]) -> Result<RestoredLog, StorageError> {
    let mut log = RestoredLog { reencoded: Vec::with_capacity(entries.len()), index: Vec::new(), deltas: HashMap::default(), bytes: 0 };
    for (k, v) in entries {
        let position = LogPosition::from_bytes(k).ok_or_else(|| StorageError::Corrupt("history key".into()))?;
        let record = EntryRecord::decode(v)?;
        let value = record.encode();
        log.bytes += (12 + value.len()) as i64;
        if record.revision {
            for key in index_keys_of(salt, &record, position) {
                log.bytes += key.len() as i64;
                log.index.push(key);
            }
            count_revision(&mut log.deltas, &record, 1);
        }
        log.reencoded.push((value != *v).then_some(value));
    }
    log.index.sort_unstable();
    log.index.dedup();
    Ok(log)
}

/// Writes a snapshot's log `entries` (position order) into the restored store's `txn`, with
/// what [`derive_restored`] derived of them (`derived`, with this store's [`salt`]) and the
/// snapshot's `state` (without one, a file of an older format: the floor at the end of
/// `revision`). The restored log has an identity of its own ([`restart`]).
///
/// # Errors
/// [`StorageError::Corrupt`] when positions do not ascend, other variants on redb failures.
pub(crate) fn restore(
    txn: &WriteTransaction,
    entries: &[(Vec<u8>, Vec<u8>)],
    derived: RestoredLog,
    state: Option<LogState>,
    revision: u64,
) -> Result<(), StorageError> {
    let mut t = Tables::open(txn)?;
    let values = entries.iter().zip(&derived.reencoded).map(|((k, v), re)| (k.as_slice(), re.as_deref().unwrap_or(v)));
    crate::bulk::append(&mut t.log, "change log", values)?;
    crate::bulk::append(&mut t.index, "change log index", derived.index.iter().map(|k| (k.as_slice(), ())))?;
    t.deltas = derived.deltas;
    t.bytes += derived.bytes;
    t.entries += entries.len() as i64;
    t.indexed = None;
    // The snapshot's floor: no position of the new identity lies below it, and the restored
    // store exports the same log again.
    t.floor = state.map_or(LogPosition::end_of(revision), |s| s.floor);
    if let Some(state) = state {
        t.pruned = state.pruned;
    }
    t.close(txn)?;
    let mut meta = txn.open_table(META)?;
    meta.insert(meta::LAST_AT, state.map_or(0, |s| s.last_at.max(0) as u64))?;
    meta.insert(meta::INDEX_FORMAT, INDEX_FORMAT)?;
    Ok(())
}

impl crate::ReadView {
    /// Whether [`crate::Store::prune_history`] would remove an entry: the oldest is older than
    /// `oldest_kept`, or the log's bytes exceed `max_bytes`.
    fn prune_due(&self, oldest_kept: i64, max_bytes: u64) -> Result<bool, StorageError> {
        let bytes = self.txn().open_table(META)?.get(meta::BYTES)?.map_or(0, |v| v.value());
        let log = self.txn().open_table(LOG)?;
        let Some((_, oldest)) = log.first()? else { return Ok(false) };
        Ok(bytes > max_bytes || EntryRecord::decode(oldest.value()).map_or(i64::MIN, |r| r.at) < oldest_kept)
    }

    /// The log's floor, newest commit time and pruned count ([`LogState`]).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn log_state(&self) -> Result<LogState, StorageError> {
        let stats = self.history_stats()?;
        Ok(LogState { floor: stats.floor, last_at: self.meta_value(meta::LAST_AT)? as i64, pruned: stats.pruned })
    }
}

/// What one pruning step removed ([`crate::Store::prune_history`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Entries removed by this step.
    pub entries: u64,
    /// Whether entries beyond the bounds remain (call again).
    pub more: bool,
}

/// The log's size, as kept in `meta` ([`crate::ReadView::history_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HistoryStats {
    /// Entries kept.
    pub entries: u64,
    /// Bytes of entries and index keys kept.
    pub bytes: u64,
    /// Entries pruned since the store was created.
    pub pruned: u64,
    /// Everything after this position is kept.
    pub floor: LogPosition,
}

impl crate::Store {
    /// Sets the history's settings for the batches and pruning steps that start after.
    pub fn set_history(&self, settings: HistorySettings) {
        *self.history.write().unwrap_or_else(|e| e.into_inner()) = settings;
    }

    /// The history's settings ([`crate::Store::set_history`]).
    pub fn history_settings(&self) -> HistorySettings {
        *self.history.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Removes, oldest first, at most `max_entries` entries older than the retention or beyond
    /// the byte bound, in one durable commit (no new revision); the writer calls it between
    /// batches until it reports nothing more.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn prune_history(&self, now: Timestamp, max_entries: usize) -> Result<Pruned, StorageError> {
        let settings = self.history_settings();
        let oldest_kept = now.0.saturating_sub(i64::try_from(settings.retention.as_nanos()).unwrap_or(i64::MAX));
        // Nothing due: no write transaction (the writer asks every second; a write would count
        // for `Store::release_write_buffer` and take the write lock for nothing).
        if !self.read()?.prune_due(oldest_kept, settings.max_bytes)? {
            return Ok(Pruned { entries: 0, more: false });
        }
        self.noting_failure(|| {
            let txn = self.database()?.begin_write()?;
            let pruned;
            {
                let mut t = Tables::open(&txn)?;
                let mut removed = Vec::new();
                let mut bytes = t.bytes;
                let mut more = false;
                for item in t.log.iter()? {
                    let (k, v) = item?;
                    let at = EntryRecord::decode(v.value()).map(|r| r.at).unwrap_or(i64::MIN);
                    if at >= oldest_kept && bytes.max(0) as u64 <= settings.max_bytes {
                        break;
                    }
                    if removed.len() == max_entries {
                        more = true;
                        break;
                    }
                    bytes -= (k.value().len() + v.value().len()) as i64;
                    if let Some(p) = LogPosition::from_bytes(k.value()) {
                        removed.push((p, v.value().to_vec()));
                    }
                }
                for (p, v) in &removed {
                    t.remove(*p, v)?;
                }
                pruned = Pruned { entries: removed.len() as u64, more };
                t.close(&txn)?;
            }
            match pruned.entries {
                0 => txn.abort()?,
                _ => txn.commit()?,
            }
            Ok(pruned)
        })
    }
}

impl crate::Store {
    /// Indexes the revisions that wait for it (see [`crate::Store::set_loading`]),
    /// whole commits of about `max_entries` entries, in one durable commit (no new revision);
    /// returns whether some still wait. The writer calls it between batches once its initial
    /// sync is processed; any other batch indexes every waiting revision first.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn index_history(&self, max_entries: usize) -> Result<bool, StorageError> {
        if self.read()?.unindexed_after()?.is_none() {
            return Ok(false);
        }
        let max_per_object = self.history_settings().max_per_object();
        self.noting_failure(|| {
            let txn = self.database()?.begin_write()?;
            let more = {
                let mut t = Tables::open(&txn)?;
                let more = t.index_pending(max_entries.max(1), max_per_object)?;
                t.close(&txn)?;
                more
            };
            txn.commit()?;
            Ok(more)
        })
    }
}

impl crate::ReadView {
    /// The revision after which revisions wait for their index entries
    /// ([`crate::Store::set_loading`]); `None`: every revision is indexed.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn unindexed_after(&self) -> Result<Option<u64>, StorageError> {
        if let Some(indexed) = self.history_unindexed.get() {
            return Ok(*indexed);
        }
        let indexed = self.txn().open_table(META)?.get(meta::INDEXED)?.map(|v| v.value());
        Ok(*self.history_unindexed.get_or_init(|| indexed))
    }

    /// The position of the object's revision that waits for its index entries, if any: its
    /// creation, in the commit that last wrote its record (a batch that waits holds creations
    /// only, and any later batch that touches the object indexes it first).
    fn unindexed_revision(&self, kind: KindId, key: &Key) -> Result<Option<LogPosition>, StorageError> {
        let Some(indexed) = self.unindexed_after()? else { return Ok(None) };
        let Some(revision) = self.revision_of(kind, key)?.filter(|r| *r > indexed) else { return Ok(None) };
        let log = self.txn().open_table(LOG)?;
        let (start, end) = (LogPosition { revision, index: 0 }, LogPosition::end_of(revision));
        for item in log.range(start.to_bytes().as_slice()..=end.to_bytes().as_slice())? {
            let (k, v) = item?;
            if EntryRecord::is_of(v.value(), kind.code(), key.as_bytes()) && EntryRecord::decode(v.value())?.revision {
                return Ok(LogPosition::from_bytes(k.value()));
            }
        }
        Ok(None)
    }

    /// The revisions of records in the team scope `scope_key` that wait for their index
    /// entries, in `range`, in the order asked, at most `max` accepted by `keep`: from the
    /// store's [`UnindexedTail`], read from the log once for every view.
    fn unindexed_team_revisions(
        &self,
        scope_key: &[u8],
        range: (std::ops::Bound<LogPosition>, std::ops::Bound<LogPosition>),
        newest_first: bool,
        max: usize,
        keep: &impl Fn(KindId) -> bool,
    ) -> Result<Vec<(LogPosition, KindId)>, StorageError> {
        let Some(indexed) = self.unindexed_after()? else {
            self.unindexed_tail.clear();
            return Ok(Vec::new());
        };
        let tail = self.unindexed_tail(indexed)?;
        let floor = self.history_stats()?.floor;
        let Some(revisions) = tail.by_scope.get(scope_key) else { return Ok(Vec::new()) };
        // Entries pruned since the tail was read lie at or below the floor.
        let wanted = |(p, k): &&(LogPosition, KindId)| p.revision > indexed && *p > floor && range.contains(p) && keep(*k);
        Ok(match newest_first {
            true => revisions.iter().rev().filter(wanted).take(max).copied().collect(),
            false => revisions.iter().filter(wanted).take(max).copied().collect(),
        })
    }

    /// The store's [`UnindexedTail`] for this view (revisions after `indexed` wait): the one
    /// read already when it holds this view's tail, else read from this view's log.
    fn unindexed_tail(&self, indexed: u64) -> Result<Arc<TailByTeam>, StorageError> {
        let logged = self.meta_value(meta::LOGGED)?;
        let mut kept = self.unindexed_tail.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(tail) = kept.as_ref().filter(|t| t.logged == logged && t.indexed <= indexed) {
            return Ok(tail.clone());
        }
        let mut by_scope: HashMap<Vec<u8>, Vec<(LogPosition, KindId)>> = HashMap::default();
        let log = self.txn().open_table(LOG)?;
        let start = LogPosition { revision: indexed.saturating_add(1), index: 0 };
        for (i, item) in log.range(start.to_bytes().as_slice()..)?.enumerate() {
            if i % 1024 == 1023 && self.interrupted() {
                return Err(StorageError::Interrupted);
            }
            let (k, v) = item?;
            let record = EntryRecord::decode(v.value())?;
            let (Some(p), Some(kind)) = (LogPosition::from_bytes(k.value()), KindId::from_code(record.kind)) else { continue };
            if record.revision {
                for scope in record.team_scopes() {
                    by_scope.entry(scope.to_vec()).or_default().push((p, kind));
                }
            }
        }
        let tail = Arc::new(TailByTeam { logged, indexed, by_scope });
        *kept = Some(tail.clone());
        Ok(tail)
    }

    fn meta_value(&self, key: &str) -> Result<u64, StorageError> {
        Ok(self.txn().open_table(META)?.get(key)?.map(|v| v.value()).unwrap_or(0))
    }

    /// The salt of the index's digests (read once per view).
    fn salt(&self) -> Result<u64, StorageError> {
        if let Some(salt) = self.history_salt.get() {
            return Ok(*salt);
        }
        let salt = self.meta_value(meta::SALT)?;
        Ok(*self.history_salt.get_or_init(|| salt))
    }

    /// The stored entry as a [`LogEntry`], its origin read from the record when it leaves it
    /// there.
    fn log_entry_of(&self, record: EntryRecord, position: LogPosition) -> Result<LogEntry, StorageError> {
        record.entry(position, |kind, key| {
            Ok(self.origin_of(kind, key)?.map(|(created_at, links, source)| Origin {
                created_at: created_at.0,
                links: links.into_iter().map(|l| l.map(|k| k.as_bytes().to_vec())).collect(),
                source: Some(source),
            }))
        })
    }

    /// The log's identity: random per store, new after a restore.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn log_identity(&self) -> Result<u64, StorageError> {
        self.meta_value(meta::IDENTITY)
    }

    /// The log's size and floor.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn history_stats(&self) -> Result<HistoryStats, StorageError> {
        Ok(HistoryStats {
            entries: self.meta_value(meta::ENTRIES)?,
            bytes: self.meta_value(meta::BYTES)?,
            pruned: self.meta_value(meta::PRUNED)?,
            floor: LogPosition { revision: self.meta_value(meta::FLOOR_REVISION)?, index: self.meta_value(meta::FLOOR_INDEX)? as u32 },
        })
    }

    /// Up to `max` entries after `from`, oldest first; `None` when the log lacks some entry
    /// after `from` (it is below the floor) or `from` is past this view's revision.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn log_after(&self, from: LogPosition, max: usize) -> Result<Option<Vec<LogEntry>>, StorageError> {
        let floor = self.history_stats()?.floor;
        if from < floor || from.revision > self.revision()? {
            return Ok(None);
        }
        let log = self.txn().open_table(LOG)?;
        let start = LogPosition { revision: from.revision, index: from.index.saturating_add(1) };
        let start = if from.index == u32::MAX { LogPosition { revision: from.revision.saturating_add(1), index: 0 } } else { start };
        let mut out = Vec::new();
        for item in log.range(start.to_bytes().as_slice()..)?.take(max) {
            let (k, v) = item?;
            let position = LogPosition::from_bytes(k.value()).ok_or_else(|| StorageError::Corrupt("history key".into()))?;
            out.push(self.log_entry_of(EntryRecord::decode(v.value())?, position)?);
        }
        Ok(Some(out))
    }

    /// The entry at `position`.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn log_entry(&self, position: LogPosition) -> Result<Option<LogEntry>, StorageError> {
        let log = self.txn().open_table(LOG)?;
        let value = log.get(position.to_bytes().as_slice())?;
        value.map(|v| self.log_entry_of(EntryRecord::decode(v.value())?, position)).transpose()
    }

    /// The revision of `entry`'s object kept just before it, if any.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn previous_revision(&self, entry: &LogEntry) -> Result<Option<LogEntry>, StorageError> {
        let mut upper = entry.position;
        loop {
            let older = self.revisions(entry.kind, &entry.key, (std::ops::Bound::Unbounded, std::ops::Bound::Excluded(upper)), true, 1)?;
            let Some(&p) = older.first() else { return Ok(None) };
            match self.log_entry(p)? {
                Some(e) if e.kind == entry.kind && e.key == entry.key => return Ok(Some(e)),
                // Another object's revision under the same digest.
                _ => upper = p,
            }
        }
    }

    /// The positions of the revisions of the object `key` of `kind` kept, in `range`
    /// (positions), newest first when `newest_first`; at most `max`. They are found by the
    /// object's digest: the caller checks an entry's kind and key before it shows it.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn revisions(
        &self,
        kind: KindId,
        key: &Key,
        range: (std::ops::Bound<LogPosition>, std::ops::Bound<LogPosition>),
        newest_first: bool,
        max: usize,
    ) -> Result<Vec<LogPosition>, StorageError> {
        let prefix = object_prefix(self.salt()?, kind.code(), key.as_bytes());
        // A revision that waits for its index is newer than every indexed one.
        let unindexed = self.unindexed_revision(kind, key)?.filter(|p| range.contains(p));
        let mut out = Vec::new();
        if let (true, Some(p)) = (newest_first && max > 0, unindexed) {
            out.push(p);
        }
        out.extend(self.positions_under(&prefix, range, newest_first, max - out.len(), LogPosition::from_bytes)?);
        if let (false, Some(p), true) = (newest_first, unindexed, out.len() < max) {
            out.push(p);
        }
        Ok(out)
    }

    /// The positions of the revisions of records in the team scope `scope` kept, with their
    /// kinds, in `range`, newest first when `newest_first`; at most `max` accepted by `keep`
    /// (which sees each kind). They are found by the scope's digest: the caller checks an
    /// entry's scopes before it shows it.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn team_revisions(
        &self,
        scope: &Scope,
        range: (std::ops::Bound<LogPosition>, std::ops::Bound<LogPosition>),
        newest_first: bool,
        max: usize,
        keep: impl Fn(KindId) -> bool,
    ) -> Result<Vec<(LogPosition, KindId)>, StorageError> {
        let prefix = team_prefix(self.salt()?, scope.key().as_bytes());
        // Revisions that wait for their index are newer than every indexed one.
        let mut out = match newest_first {
            true => self.unindexed_team_revisions(scope.key().as_bytes(), range, true, max, &keep)?,
            false => Vec::new(),
        };
        if out.len() >= max {
            return Ok(out);
        }
        let index = self.txn().open_table(INDEX)?;
        let (start, end) = bounded(&prefix, range);
        let iter = index.range(start.as_slice()..end.as_slice())?;
        let mut visit = |k: &[u8]| -> bool {
            let rest = &k[prefix.len()..];
            if let (Some(p), Some(kind)) = (LogPosition::from_bytes(rest), rest.get(12).and_then(|c| KindId::from_code(*c))) {
                if keep(kind) {
                    out.push((p, kind));
                }
            }
            out.len() < max
        };
        if newest_first {
            for item in iter.rev() {
                if !visit(item?.0.value()) {
                    break;
                }
            }
        } else {
            for item in iter {
                if !visit(item?.0.value()) {
                    break;
                }
            }
        }
        if !newest_first && out.len() < max {
            let rest = max - out.len();
            out.extend(self.unindexed_team_revisions(scope.key().as_bytes(), range, false, rest, &keep)?);
        }
        Ok(out)
    }

    fn positions_under(
        &self,
        prefix: &[u8],
        range: (std::ops::Bound<LogPosition>, std::ops::Bound<LogPosition>),
        newest_first: bool,
        max: usize,
        position: impl Fn(&[u8]) -> Option<LogPosition>,
    ) -> Result<Vec<LogPosition>, StorageError> {
        let index = self.txn().open_table(INDEX)?;
        let (start, end) = bounded(prefix, range);
        let iter = index.range(start.as_slice()..end.as_slice())?;
        let mut out = Vec::new();
        let positions = |k: redb::AccessGuard<'_, &'static [u8]>| position(&k.value()[prefix.len()..]);
        if newest_first {
            for item in iter.rev() {
                out.extend(positions(item?.0));
                if out.len() >= max {
                    break;
                }
            }
        } else {
            for item in iter {
                out.extend(positions(item?.0));
                if out.len() >= max {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// Revisions kept of records of `kind` in the team scope `scope`.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn team_revision_count(&self, scope: &Scope, kind: KindId) -> Result<u64, StorageError> {
        let counts = self.txn().open_table(COUNTS)?;
        Ok(counts.get(team_count_key(scope.key().as_bytes(), kind.code()).as_slice())?.map(|v| v.value()).unwrap_or(0))
    }

    /// Revisions kept of records of `kind`.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn revision_count(&self, kind: KindId) -> Result<u64, StorageError> {
        let counts = self.txn().open_table(COUNTS)?;
        Ok(counts.get(kind_count_key(kind.code()).as_slice())?.map(|v| v.value()).unwrap_or(0))
    }

    /// Revisions of every kind, newest first from `range`'s end: the log's entries that are
    /// revisions and whose kind `keep` accepts, at most `max`, reading at most `max_read`
    /// entries (`None` in place of the list when that bound stopped the scan first).
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures.
    pub fn all_revisions(
        &self,
        range: (std::ops::Bound<LogPosition>, std::ops::Bound<LogPosition>),
        newest_first: bool,
        max: usize,
        keep: impl Fn(KindId) -> bool,
        mut stop: impl FnMut() -> bool,
    ) -> Result<Vec<LogEntry>, StorageError> {
        let log = self.txn().open_table(LOG)?;
        let (start, end) = bounded(&[], range);
        let iter = log.range(start.as_slice()..end.as_slice())?;
        let mut out = Vec::new();
        let mut visit = |k: &[u8], v: &[u8]| -> Result<bool, StorageError> {
            // The kind code is the first field after the format tag: no need to decode more
            // of an entry of another kind.
            let kind = v.get(1).and_then(|c| KindId::from_code(*c));
            if kind.is_some_and(&keep) {
                let record = EntryRecord::decode(v)?;
                if record.revision {
                    let p = LogPosition::from_bytes(k).ok_or_else(|| StorageError::Corrupt("history key".into()))?;
                    out.push(self.log_entry_of(record, p)?);
                }
            }
            Ok(out.len() < max && !stop())
        };
        if newest_first {
            for item in iter.rev() {
                let (k, v) = item?;
                if !visit(k.value(), v.value())? {
                    break;
                }
            }
        } else {
            for item in iter {
                let (k, v) = item?;
                if !visit(k.value(), v.value())? {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// The JSON text of the document `entry` was translated from, if kept: stored in it, or
    /// its source object's document while it is the object's newest revision.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures, or a document that does not decode.
    pub fn revision_document(&self, entry: &LogEntry) -> Result<Option<Vec<u8>>, StorageError> {
        let stored = match &entry.document {
            RevisionDocument::None => return Ok(None),
            RevisionDocument::Stored(d) => d.clone(),
            RevisionDocument::Source { namespace, name, newest } => {
                if !newest {
                    let kept = self.revisions(entry.kind, &entry.key, (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded), true, 1)?;
                    if kept.first() != Some(&entry.position) {
                        return Ok(None);
                    }
                }
                // The source's document is this revision's only while the source is at its version
                // (it moved while history was off, or the version was too long to keep: unknown).
                match self.source_document(entry.kind, namespace, name)? {
                    Some((d, version)) if entry.resource_version.as_deref() == Some(version.as_str()) => d,
                    _ => return Ok(None),
                }
            }
        };
        self.dictionaries().decode(entry.kind, &stored).map(Some)
    }
}

impl crate::ReadView {
    /// What breaks the log's invariants ([`crate::ReadView::check_invariants`]): every
    /// revision has exactly its index entries, the counters count them, the bytes and entries
    /// kept are those in `meta`.
    pub(crate) fn history_problems(&self) -> Result<Vec<String>, StorageError> {
        let mut problems = Vec::new();
        let (mut bytes, mut entries) = (0u64, 0u64);
        let mut index_keys = std::collections::BTreeSet::new();
        let mut counts = std::collections::BTreeMap::<Vec<u8>, u64>::new();
        let stats = self.history_stats()?;
        let salt = self.salt()?;
        let indexed = self.unindexed_after()?;
        for item in self.txn().open_table(LOG)?.iter()? {
            let (k, v) = item?;
            let position = LogPosition::from_bytes(k.value()).ok_or_else(|| StorageError::Corrupt("history key".into()))?;
            let record = EntryRecord::decode(v.value())?;
            bytes += (k.value().len() + v.value().len()) as u64;
            entries += 1;
            if record.revision && indexed.is_none_or(|w| position.revision <= w) {
                for key in index_keys_of(salt, &record, position) {
                    bytes += key.len() as u64;
                    index_keys.insert(key);
                }
            }
            if record.revision {
                for scope in record.team_scopes() {
                    *counts.entry(team_count_key(scope, record.kind)).or_default() += 1;
                }
                *counts.entry(kind_count_key(record.kind).to_vec()).or_default() += 1;
            }
        }
        let mut actual = std::collections::BTreeSet::new();
        for item in self.txn().open_table(INDEX)?.iter()? {
            actual.insert(item?.0.value().to_vec());
        }
        if actual != index_keys {
            let (missing, dangling) = (index_keys.difference(&actual).count(), actual.difference(&index_keys).count());
            problems.push(format!("history index: {missing} missing, {dangling} dangling"));
        }
        let mut actual_counts = std::collections::BTreeMap::new();
        for item in self.txn().open_table(COUNTS)?.iter()? {
            let (k, v) = item?;
            actual_counts.insert(k.value().to_vec(), v.value());
        }
        if actual_counts != counts {
            problems.push("history counters differ from the revisions kept".to_string());
        }
        if (bytes, entries) != (stats.bytes, stats.entries) {
            problems.push(format!("history: {entries} entries of {bytes} bytes kept, meta says {} of {}", stats.entries, stats.bytes));
        }
        Ok(problems)
    }
}

/// The key range of `prefix · position` for positions in `range`.
fn bounded(prefix: &[u8], range: (std::ops::Bound<LogPosition>, std::ops::Bound<LogPosition>)) -> (Vec<u8>, Vec<u8>) {
    use std::ops::Bound;
    let with = |p: LogPosition| {
        let mut k = prefix.to_vec();
        k.extend_from_slice(&p.to_bytes());
        k
    };
    let start = match range.0 {
        Bound::Unbounded => prefix.to_vec(),
        Bound::Included(p) => with(p),
        // Keys of `p` may carry a kind byte after the position: start after all of them.
        Bound::Excluded(p) => {
            let mut k = with(p);
            k.push(0xff);
            k
        }
    };
    let end = match range.1 {
        // Every key under a prefix is the prefix and a position (and a kind): at most 13 bytes
        // more, none of them all 0xff (no revision reaches u64::MAX).
        Bound::Unbounded => {
            let mut k = prefix.to_vec();
            k.extend_from_slice(&[0xff; 13]);
            k
        }
        Bound::Excluded(p) => with(p),
        Bound::Included(p) => {
            let mut k = with(p);
            k.push(0xff);
            k
        }
    };
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{zone_compressed, zone_version};
    use crate::{SourceRef, Store};
    use std::ops::Bound::Unbounded;

    fn at(i: i64) -> Timestamp {
        Timestamp(1_000_000_000 * i)
    }

    fn write_zone(store: &Store, name: &str, version: &str, time: i64) {
        crate::test_support::zone_at(store, name, version, at(time).0);
    }

    fn delete_zone(store: &Store, name: &str, time: i64) {
        let src = SourceRef { kind: KindId::Zone, namespace: "poc".into(), name: name.into() };
        store.write(at(time), |b| b.delete(&src, at(time))).unwrap();
    }

    fn zone_key(name: &str) -> Key {
        Key::new(&["poc", name])
    }

    /// The revisions of zone `name`, newest first.
    fn revisions(store: &Store, name: &str) -> Vec<LogEntry> {
        let view = store.read().unwrap();
        let positions = view.revisions(KindId::Zone, &zone_key(name), (Unbounded, Unbounded), true, usize::MAX).unwrap();
        positions.into_iter().map(|p| view.log_entry(p).unwrap().unwrap()).collect()
    }

    /// The `resourceVersion` in the document each revision shows (`None`: none kept).
    fn shown_versions(store: &Store, entries: &[LogEntry]) -> Vec<Option<String>> {
        let view = store.read().unwrap();
        entries
            .iter()
            .map(|e| {
                let json = view.revision_document(e).unwrap()?;
                let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
                Some(doc["metadata"]["resourceVersion"].as_str().unwrap().to_string())
            })
            .collect()
    }

    fn invariants(store: &Store) {
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    }

    /// `entries` with their documents left out (the newest revision's moves into its entry
    /// when it is superseded).
    fn document_aside(entries: &[LogEntry]) -> Vec<LogEntry> {
        entries.iter().map(|e| LogEntry { document: RevisionDocument::None, ..e.clone() }).collect()
    }

    /// The store's log as the build before digests and origins wrote it: every entry in format
    /// 1 with its origin, the index by kind and natural key, no index format in `meta`.
    fn to_first_layout(store: &Store) {
        let txn = store.database().unwrap().begin_write().unwrap();
        let entries: Vec<(Vec<u8>, LogEntry)> = {
            let view = store.read().unwrap();
            let log = view.txn().open_table(LOG).unwrap();
            let positions: Vec<LogPosition> = log.iter().unwrap().map(|i| LogPosition::from_bytes(i.unwrap().0.value()).unwrap()).collect();
            positions.into_iter().map(|p| (p.to_bytes().to_vec(), view.log_entry(p).unwrap().unwrap())).collect()
        };
        txn.delete_table(INDEX).unwrap();
        let mut bytes = 0;
        {
            let mut log = txn.open_table(LOG).unwrap();
            let mut index = txn.open_table(INDEX).unwrap();
            for (k, e) in &entries {
                let old = EntryRecordWithOrigin {
                    kind: e.kind.code(),
                    key: e.key.as_bytes().to_vec(),
                    revision: e.is_revision,
                    before: scope_keys(&e.before),
                    after: scope_keys(&e.after),
                    at: e.at.0,
                    resource_version: e.resource_version.clone(),
                    manager: e.manager.clone(),
                    created_at: e.created_at.0,
                    links: e.links.iter().map(|l| l.as_ref().map(|k| k.as_bytes().to_vec())).collect(),
                    source: e.source.clone(),
                    document: match &e.document {
                        RevisionDocument::Stored(d) => Some(d.clone()),
                        _ => None,
                    },
                };
                let mut value = vec![FORMAT_WITH_ORIGIN];
                value.extend_from_slice(&encode(&old));
                log.insert(k.as_slice(), value.as_slice()).unwrap();
                bytes += (k.len() + value.len()) as u64;
                if e.is_revision {
                    let mut object = vec![b'O', e.kind.code()];
                    object.extend_from_slice(e.key.as_bytes());
                    object.extend_from_slice(k);
                    index.insert(object.as_slice(), ()).unwrap();
                    bytes += object.len() as u64;
                    for scope in e.before.iter().chain(e.after.iter()).flatten().filter(|s| matches!(s, Scope::Team { .. })) {
                        let mut team = vec![b'T'];
                        team.extend_from_slice(scope.key().as_bytes());
                        team.extend_from_slice(k);
                        team.push(e.kind.code());
                        index.insert(team.as_slice(), ()).unwrap();
                        bytes += team.len() as u64;
                    }
                }
            }
        }
        let mut meta = txn.open_table(META).unwrap();
        meta.remove(meta::INDEX_FORMAT).unwrap();
        meta.insert(meta::BYTES, bytes).unwrap();
        drop(meta);
        txn.commit().unwrap();
    }

    /// A log written by the build before digests (entries holding their origins, the index by
    /// natural key) is re-indexed when the store opens: every revision reads as before, the
    /// invariants hold (bytes and entries included), and the log goes on from there.
    #[test]
    fn a_log_of_the_first_layout_is_re_indexed_on_open_and_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write_zone(&store, "z", "1", 1);
        write_zone(&store, "z", "2", 2);
        delete_zone(&store, "z", 3);
        write_zone(&store, "z", "3", 4);
        write_zone(&store, "y", "1", 5);
        let (z, y) = (revisions(&store, "z"), revisions(&store, "y"));
        let shown = shown_versions(&store, &z);
        to_first_layout(&store);
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        invariants(&store);
        // The same entries (a newest revision of the first format, whose origin is its own, is
        // not known to be the newest: its reader checks).
        assert_eq!(document_aside(&revisions(&store, "z")), document_aside(&z));
        assert_eq!(document_aside(&revisions(&store, "y")), document_aside(&y));
        assert_eq!(shown_versions(&store, &z), shown);
        write_zone(&store, "z", "4", 6);
        let after = revisions(&store, "z");
        assert_eq!(after.len(), 5);
        assert_eq!(document_aside(&after[1..]), document_aside(&z), "the superseded revision now holds its document");
        assert_eq!(shown_versions(&store, &after)[..2], [Some("4".to_string()), Some("3".to_string())]);
        invariants(&store);
    }

    /// The newest revision of an object that exists keeps no origin of its own (its record has
    /// it); the change that supersedes it writes it in, so it reads the same before and after.
    #[test]
    fn a_revision_gets_its_origin_written_in_when_it_is_superseded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write_zone(&store, "z", "1", 1);
        let first = revisions(&store, "z");
        let stored_origin = |store: &Store, p: LogPosition| {
            let view = store.read().unwrap();
            let log = view.txn().open_table(LOG).unwrap();
            let value = log.get(p.to_bytes().as_slice()).unwrap().unwrap().value().to_vec();
            EntryRecord::decode(&value).unwrap().origin.is_some()
        };
        assert!(!stored_origin(&store, first[0].position), "the newest revision leaves its origin to the record");
        assert_eq!(first[0].source, Some(("poc".to_string(), "z".to_string())));
        assert!(first[0].created_at.0 != 0);
        write_zone(&store, "z", "2", 2);
        let second = revisions(&store, "z");
        assert!(stored_origin(&store, first[0].position), "superseded: its origin is its own");
        assert_eq!(document_aside(&second[1..]), document_aside(&first));
        assert!(matches!(second[1].document, RevisionDocument::Stored(_)), "and its document");
        delete_zone(&store, "z", 3);
        let third = revisions(&store, "z");
        assert!(stored_origin(&store, third[0].position), "a delete keeps the origin of what went");
        assert_eq!(third[0].source, Some(("poc".to_string(), "z".to_string())));
        assert_eq!(document_aside(&third[1..]), document_aside(&second));
        invariants(&store);
    }

    /// An index entry under an object's digest that belongs to another object (a collision) is
    /// never taken for one of its revisions: not as the revision before, and the writer's
    /// per-object bound never prunes it.
    #[test]
    fn another_objects_revision_under_the_same_digest_is_never_taken_for_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.set_history(HistorySettings { max_revisions_per_object: 1, ..HistorySettings::default() });
        write_zone(&store, "b", "1", 1);
        write_zone(&store, "a", "1", 2);
        let b = revisions(&store, "b");
        {
            // b's revision, also under a's digest, older than a's.
            let txn = store.database().unwrap().begin_write().unwrap();
            let salt = txn.open_table(META).unwrap().get(meta::SALT).unwrap().unwrap().value();
            let mut key = object_prefix(salt, KindId::Zone.code(), zone_key("a").as_bytes());
            key.extend_from_slice(&b[0].position.to_bytes());
            txn.open_table(INDEX).unwrap().insert(key.as_slice(), ()).unwrap();
            txn.commit().unwrap();
        }
        let a = revisions(&store, "a");
        assert_eq!(a.len(), 2, "both are found by a's digest");
        assert_eq!(store.read().unwrap().previous_revision(&a[0]).unwrap(), None, "b's is not a's revision before");
        write_zone(&store, "a", "2", 3);
        assert_eq!(revisions(&store, "b"), b, "pruning a's revisions left b's");
        let a = revisions(&store, "a");
        assert!(a.iter().all(|e| e.key == zone_key("a") || e.key == zone_key("b")));
        assert_eq!(a.iter().filter(|e| e.key == zone_key("a")).count(), 1, "a keeps one revision");
        let problems = store.read().unwrap().check_invariants().unwrap();
        assert_eq!(problems, vec!["history index: 0 missing, 1 dangling".to_string()], "only the planted key");
    }

    /// A source version that changes nothing in the record writes no revision, and the newest
    /// revision keeps showing the document it was written from (a trial saw its node go null
    /// after an edit of a field no record holds).
    #[test]
    fn a_source_change_that_leaves_the_record_as_it_was_keeps_the_revisions_document() {
        use schema::kinds::zone::{Zone, ZoneRecord, ZoneVisibility};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write_zone(&store, "z", "1", 1);
        let first = revisions(&store, "z");
        // Version 1b: the same record, a document with an annotation no record holds.
        store
            .write(at(2), |b| {
                let meta =
                    schema::common::Meta { environment: "poc".into(), namespace: "poc".into(), name: "z".into(), creation_timestamp: None };
                let rec = ZoneRecord {
                    meta,
                    visibility: ZoneVisibility::World,
                    gateway_url: None,
                    ai_gateway_url: None,
                    issuer_url: None,
                    permissions_url: None,
                };
                let doc = serde_json::json!({"apiVersion": "admin.cp.ei.telekom.de/v1", "kind": "Zone",
                    "metadata": {"name": "z", "namespace": "poc", "resourceVersion": "1b", "annotations": {"note": "hello"}},
                    "spec": {"visibility": "World"}});
                let encoded =
                    crate::Encoded::<Zone>::new(rec).with_document(crate::documents::Dictionaries::default().encode(KindId::Zone, &doc));
                let src = SourceRef { kind: KindId::Zone, namespace: "poc".into(), name: "z".into() };
                b.upsert_encoded::<Zone>(&src, "1b", &encoded, at(2)).map(|_| ())
            })
            .unwrap();
        let after = revisions(&store, "z");
        assert_eq!(after.len(), 1, "no revision");
        assert_eq!(shown_versions(&store, &after), vec![Some("1".to_string())], "the revision still shows its own document");
        assert_eq!(document_aside(&after), document_aside(&first));
        write_zone(&store, "z", "2", 3);
        let last = revisions(&store, "z");
        assert_eq!(shown_versions(&store, &last), vec![Some("2".to_string()), Some("1".to_string())]);
        invariants(&store);
    }

    /// A load's creations wait for their index; a later change of the object indexes them
    /// first, and indexing applies the per-object bound.
    #[test]
    fn revisions_that_wait_for_their_index_read_the_same_and_get_their_bound_when_indexed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.set_history(HistorySettings { max_revisions_per_object: 2, ..HistorySettings::default() });
        store.set_loading(true);
        write_zone(&store, "a", "1", 1);
        write_zone(&store, "b", "1", 2);
        assert_eq!(store.read().unwrap().unindexed_after().unwrap(), Some(0));
        // Found before they are indexed, with their documents.
        let b = revisions(&store, "b");
        assert_eq!((b.len(), b[0].operation()), (1, Operation::Created));
        assert_eq!(shown_versions(&store, &b), vec![Some("1".to_string())]);
        invariants(&store);
        // An update is no load's batch: it indexes what waits first, then supersedes.
        write_zone(&store, "a", "2", 3);
        assert_eq!(store.read().unwrap().unindexed_after().unwrap(), None);
        let a = revisions(&store, "a");
        assert_eq!(a.iter().map(LogEntry::operation).collect::<Vec<_>>(), vec![Operation::Updated, Operation::Created]);
        assert_eq!(shown_versions(&store, &a), vec![Some("2".to_string()), Some("1".to_string())]);
        assert_eq!(store.read().unwrap().previous_revision(&a[0]).unwrap().map(|e| e.position), Some(a[1].position));
        // Deleted (the bound keeps the update and the delete), then created again by a load's
        // batch: three revisions until the index step trims them to the bound.
        delete_zone(&store, "a", 4);
        write_zone(&store, "a", "5", 5);
        assert!(store.read().unwrap().unindexed_after().unwrap().is_some());
        let before = revisions(&store, "a");
        let operations = before.iter().map(LogEntry::operation).collect::<Vec<_>>();
        assert_eq!(operations, vec![Operation::Created, Operation::Deleted, Operation::Updated]);
        invariants(&store);
        assert!(!store.index_history(1).unwrap());
        assert_eq!(store.read().unwrap().unindexed_after().unwrap(), None);
        assert_eq!(revisions(&store, "a"), before[..2]);
        assert_eq!(revisions(&store, "b"), b);
        invariants(&store);
    }

    /// An object created, updated twice, deleted and created again has five revisions, newest
    /// first, each showing the document it was written from (the newest from the source's
    /// document, the others from the document moved into them), its version and time; a
    /// reopen keeps them and the log's identity.
    #[test]
    fn an_objects_revisions_are_kept_newest_first_each_showing_its_document() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write_zone(&store, "z", "1", 1);
        write_zone(&store, "other", "1", 2);
        write_zone(&store, "z", "2", 3);
        write_zone(&store, "z", "3", 4);
        delete_zone(&store, "z", 5);
        write_zone(&store, "z", "4", 6);
        let entries = revisions(&store, "z");
        let ops: Vec<Operation> = entries.iter().map(LogEntry::operation).collect();
        use Operation::*;
        assert_eq!(ops, vec![Created, Deleted, Updated, Updated, Created]);
        assert_eq!(entries.iter().map(|e| e.at).collect::<Vec<_>>(), vec![at(6), at(5), at(4), at(3), at(1)]);
        let versions: Vec<Option<&str>> = entries.iter().map(|e| e.resource_version.as_deref()).collect();
        assert_eq!(versions, vec![Some("4"), None, Some("3"), Some("2"), Some("1")]);
        let shown = vec![Some("4".to_string()), None, Some("3".to_string()), Some("2".to_string()), Some("1".to_string())];
        assert_eq!(shown_versions(&store, &entries), shown);
        assert!(entries.iter().all(|e| e.is_revision && e.manager.is_none()));
        assert_eq!(entries[0].document, RevisionDocument::Source { namespace: "poc".into(), name: "z".into(), newest: true });
        invariants(&store);
        let identity = store.read().unwrap().log_identity().unwrap();
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(revisions(&store, "z"), entries, "kept across a reopen");
        assert_eq!(shown_versions(&store, &entries), shown);
        assert_eq!(store.read().unwrap().log_identity().unwrap(), identity);
        assert_eq!(revisions(&store, "other").len(), 1);
    }

    /// The log holds every change the feed told, at the same positions and in the same order,
    /// and reads from any position after the floor; a position before the floor is refused.
    #[test]
    fn the_log_holds_every_change_the_feed_told_in_its_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let feed = store.subscribe();
        let start = store.read().unwrap().history_stats().unwrap().floor;
        store
            .write(at(1), |b| {
                ["a", "b", "c"].iter().for_each(|n| zone_version(b, n, "1", at(1)));
                Ok(())
            })
            .unwrap();
        write_zone(&store, "b", "2", 2);
        delete_zone(&store, "a", 3);
        let mut told = Vec::new();
        while let Ok(c) = feed.try_recv() {
            for (i, change) in c.changes.iter().enumerate() {
                told.push((LogPosition { revision: c.revision, index: i as u32 }, change.clone()));
            }
        }
        assert_eq!(told.len(), 5);
        let view = store.read().unwrap();
        let logged = view.log_after(start, 100).unwrap().unwrap();
        let as_told: Vec<_> = logged
            .iter()
            .map(|e| {
                (e.position, crate::RecordChange { kind: e.kind, key: e.key.clone(), before: e.before.clone(), after: e.after.clone() })
            })
            .collect();
        assert_eq!(as_told, told);
        assert_eq!(
            view.log_after(told[1].0, 2).unwrap().unwrap().iter().map(|e| e.position).collect::<Vec<_>>(),
            vec![told[2].0, told[3].0]
        );
        assert_eq!(view.log_after(told[4].0, 10).unwrap().unwrap(), Vec::new(), "nothing after the newest");
        assert_eq!(view.log_after(LogPosition::end_of(99), 10).unwrap(), None, "a future position");
        drop(view);
        store.set_history(HistorySettings { enabled: false, ..HistorySettings::default() });
        write_zone(&store, "c", "2", 4);
        let view = store.read().unwrap();
        assert_eq!(view.log_after(told[4].0, 10).unwrap(), None, "a batch without history moves the floor");
        assert_eq!(view.log_after(LogPosition::end_of(view.revision().unwrap()), 10).unwrap(), Some(Vec::new()));
        drop(view);
        invariants(&store);
    }

    /// A store committed to by a build without history (here: history off, then the `meta`
    /// mark of the last logged batch lost) opens with its floor at its revision.
    #[test]
    fn a_store_written_without_history_opens_with_the_floor_at_its_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let floor = store.read().unwrap().history_stats().unwrap().floor;
        assert_eq!(floor, LogPosition::end_of(0), "a new store's log is complete from its start");
        write_zone(&store, "a", "1", 1);
        let first = store.read().unwrap().log_after(floor, 10).unwrap().unwrap();
        assert_eq!(first.len(), 1);
        {
            let txn = store.database().unwrap().begin_write().unwrap();
            txn.open_table(META).unwrap().remove(meta::LOGGED).unwrap();
            txn.commit().unwrap();
        }
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        let view = store.read().unwrap();
        assert_eq!(view.log_after(LogPosition::default(), 10).unwrap(), None);
        assert_eq!(view.history_stats().unwrap().floor, LogPosition::end_of(view.revision().unwrap()));
        assert_eq!(revisions(&store, "a").len(), 1, "its revisions stay");
    }

    /// A change made while history was off is no revision, and the document it left is never
    /// shown as another revision's: the newest revision before it shows nothing once the source
    /// moved past its version, and a later change does not move the newer document into it.
    #[test]
    fn a_change_made_with_history_off_is_never_shown_as_another_revision() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        write_zone(&store, "z", "1", 1);
        store.set_history(HistorySettings { enabled: false, ..HistorySettings::default() });
        write_zone(&store, "z", "2", 2);
        store.set_history(HistorySettings::default());
        let entries = revisions(&store, "z");
        assert_eq!(entries.len(), 1);
        assert_eq!(shown_versions(&store, &entries), vec![None], "the source moved past the revision's version");
        write_zone(&store, "z", "3", 3);
        let entries = revisions(&store, "z");
        assert_eq!(entries.iter().map(LogEntry::operation).collect::<Vec<_>>(), vec![Operation::Updated, Operation::Created]);
        assert_eq!(shown_versions(&store, &entries), vec![Some("3".to_string()), None], "version 2's document is no revision's");
        invariants(&store);
    }

    /// Hostile values from a source are not kept: a manager longer than Kubernetes allows, a
    /// version longer than the bound.
    #[test]
    fn an_oversized_manager_or_version_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let long_version = "9".repeat(MAX_VERSION_BYTES + 1);
        for (name, manager, version) in [
            ("ok", "kubectl".to_string(), "7"),
            ("long-manager", "m".repeat(MAX_MANAGER_BYTES + 1), "7"),
            ("long-version", "kubectl".into(), &long_version),
        ] {
            store
                .write(at(1), |b| {
                    let meta = schema::common::Meta {
                        environment: "poc".into(),
                        namespace: "poc".into(),
                        name: name.into(),
                        creation_timestamp: None,
                    };
                    let rec = schema::kinds::zone::ZoneRecord {
                        meta,
                        visibility: schema::kinds::zone::ZoneVisibility::World,
                        gateway_url: None,
                        ai_gateway_url: None,
                        issuer_url: None,
                        permissions_url: None,
                    };
                    let src = SourceRef { kind: KindId::Zone, namespace: "poc".into(), name: name.into() };
                    let encoded = crate::Encoded::<schema::kinds::zone::Zone>::new(rec).with_manager(Some(manager.clone()));
                    b.upsert_encoded(&src, version, &encoded, at(1))
                })
                .unwrap();
        }
        let kept = |name: &str| {
            let e = &revisions(&store, name)[0];
            (e.manager.clone(), e.resource_version.clone())
        };
        assert_eq!(kept("ok"), (Some("kubectl".into()), Some("7".into())));
        assert_eq!(kept("long-manager"), (None, Some("7".into())));
        assert_eq!(kept("long-version"), (Some("kubectl".into()), None));
    }

    /// Retention: at most `max_revisions_per_object` revisions of an object, the byte bound
    /// kept by pruning steps, entries past the retention pruned; the invariants hold and the
    /// floor moves above what went. Under 300 rewrites of 200 objects the file stops growing.
    #[test]
    fn retention_keeps_its_bounds_and_the_file_stops_growing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let settings = HistorySettings { max_revisions_per_object: 3, max_bytes: 256 << 10, ..HistorySettings::default() };
        store.set_history(settings);
        let dictionaries = crate::documents::Dictionaries::default();
        let mut sizes = Vec::new();
        for round in 1..=300i64 {
            store
                .write(at(round), |b| {
                    for i in 0..200 {
                        zone_compressed(b, &format!("zone-{i:03}"), &format!("{}", round + 1), at(round), &dictionaries);
                    }
                    Ok(())
                })
                .unwrap();
            while store.prune_history(at(round), 1000).unwrap().more {}
            if round % 50 == 0 {
                sizes.push(std::fs::metadata(store.path()).unwrap().len());
            }
        }
        let view = store.read().unwrap();
        let stats = view.history_stats().unwrap();
        assert!(stats.bytes <= settings.max_bytes, "{} bytes kept", stats.bytes);
        assert!(stats.pruned > 0 && stats.entries > 0);
        for i in [0, 117, 199] {
            let n =
                view.revisions(KindId::Zone, &zone_key(&format!("zone-{i:03}")), (Unbounded, Unbounded), true, usize::MAX).unwrap().len();
            assert!((1..=3).contains(&n), "zone-{i:03}: {n} revisions");
        }
        assert_eq!(view.log_after(LogPosition::default(), 1).unwrap(), None, "the oldest are gone");
        drop(view);
        invariants(&store);
        // Once the bounds are reached, freed pages are reused: the file is no larger after 300
        // rounds than after 150.
        assert!(sizes[5] <= sizes[2], "file sizes every 50 rounds: {sizes:?}");
        // Past the retention, everything but nothing newer goes.
        let later = HistorySettings { retention: Duration::from_secs(10), ..settings };
        store.set_history(later);
        while store.prune_history(at(305), 1000).unwrap().more {}
        let view = store.read().unwrap();
        let left = view.log_after(view.history_stats().unwrap().floor, usize::MAX).unwrap().unwrap();
        assert!(!left.is_empty() && left.iter().all(|e| e.at >= at(295)), "{} left", left.len());
        drop(view);
        invariants(&store);
    }
}
