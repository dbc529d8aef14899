//! Derivation versions: which [`schema::Kind::VERSION`] the records of each kind were written
//! with, and the re-derivation of a kind whose version differs from this build's.
//!
//! A record is a postcard encoding of its kind's `Record` struct, a format that does not
//! describe itself, translated by that kind's rules: a record written under another version can
//! neither be decoded nor trusted. So the store keeps, per kind, in `meta`:
//!
//! | key | value |
//! |---|---|
//! | `kind_version:<plural>` | the [`schema::Kind::VERSION`] its records were written with |
//! | `rederiving:<plural>` | `1` while the kind waits for its records to come back from the source |
//!
//! **On open** ([`crate::Store::open`]), every kind whose stored version is not this build's
//! (older, newer, or missing) is *purged* in the open's write transaction, without decoding a
//! single record: its records table, its `sources` entries, its counters and ordering entries
//! (key prefix `kind u8`), and its secondary-index entries (the entries ending in `kind u8 ·
//! natural key` of one of its records). The kind's version is then this build's and it is
//! marked *re-deriving*; the revision is bumped. A kind whose version did not change is not
//! touched. Layout 1–3 stores and format 2 snapshots predate versions: their records are
//! version 1 of every kind.
//!
//! **The source brings the records back.** The kube source lists every kind on every start;
//! the manifests source reads again every file that holds a document of the kind (no source
//! entry confirms those documents any more). The writer treats the purged objects as new
//! (their source entries are gone).
//!
//! While a kind is re-deriving, no link is resolved again: its writes re-link no dependents, and
//! a record of another kind that arrives unchanged keeps the links it holds, so a record whose
//! link target has not come back yet is not rewritten to an unresolved link and back. Views
//! handed to queries refuse the kind's reads meanwhile ([`crate::ReadView::refuse_while_rederiving`]);
//! the other kinds answer.
//!
//! **Then the re-derivation ends** ([`crate::Store::finish_rederivation`], called by the writer
//! once the initial sync is processed): every record of every kind that holds links resolves
//! them again — a link into a purged record that did not come back becomes unresolved, as
//! after a delete; a link that resolves as before writes nothing — and the marks are removed.
//! A kill at any point is safe: a kind stays marked until
//! its re-derivation ended, and the next start reads its source again.
//!
//! A snapshot carries the versions of its kinds (format version 3); [`crate::Store::restore`]
//! writes no record of a kind whose version differs and marks that kind re-deriving, so a
//! restored store ends its re-derivation the same way.

use crate::write::KindTable;
use crate::{tables, StorageError};
use redb::{ReadableTable, Table, WriteTransaction};
use schema::KindId;
use std::collections::HashSet;

/// The version every kind had before versions were stored (layouts 1–3, snapshot format 2).
pub const IMPLICIT_VERSION: u32 = 1;

/// The version a snapshot lists for a kind whose re-derivation had not ended when it was
/// exported (its records are incomplete): never a kind's version, so a restore re-derives it.
pub const UNKNOWN_VERSION: u32 = 0;

/// The `meta` key of a kind's stored version.
pub(crate) fn version_key(kind: KindId) -> String {
    format!("kind_version:{}", kind.plural())
}

/// The `meta` key marking a kind as re-deriving.
pub(crate) fn rederiving_key(kind: KindId) -> String {
    format!("rederiving:{}", kind.plural())
}

/// Stores `version` as the version of every kind (a new store, or a migration from a layout
/// that predates versions with [`IMPLICIT_VERSION`]).
pub(crate) fn record_all(meta: &mut Table<&str, u64>, kinds: &KindTable, version: impl Fn(u32) -> u32) -> Result<(), StorageError> {
    for (kind, v) in kinds.versions() {
        meta.insert(version_key(kind).as_str(), u64::from(version(v)))?;
    }
    Ok(())
}

/// What [`reconcile`] did to one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Purged {
    /// The kind.
    pub kind: KindId,
    /// The version its records had (`None`: not recorded).
    pub from: Option<u64>,
    /// This build's version.
    pub to: u32,
    /// Records removed.
    pub records: u64,
}

/// What [`reconcile`] found.
pub(crate) struct Reconciled {
    /// The kinds purged now.
    pub purged: Vec<Purged>,
    /// Every kind marked re-deriving from the source (including kinds marked by an earlier open
    /// whose re-derivation did not end).
    pub rederiving: Vec<KindId>,
    /// Every kind re-derived from the volume ([`crate::rebuild`]), with whether its stored
    /// records are served meanwhile.
    pub rebuilding: Vec<(KindId, bool)>,
}

/// Reconciles each kind's stored version with this build's (see the module docs): a kind of
/// another version whose every source entry has its document is re-derived from the volume
/// ([`crate::rebuild`]: marked, its records kept); any other is purged and marked re-deriving
/// from the source. A kind of this build's version keeps its records, and loses the staging a
/// build of another version left.
///
/// # Errors
/// [`StorageError`] on redb failures (the transaction should then be dropped).
pub(crate) fn reconcile(txn: &WriteTransaction, kinds: &KindTable) -> Result<Reconciled, StorageError> {
    let mut purged = Vec::new();
    let mut rebuilding = Vec::new();
    for (kind, version) in kinds.versions() {
        let (stored, target, waiting) = {
            let meta = txn.open_table(tables::META)?;
            let stored = meta.get(version_key(kind).as_str())?.map(|v| v.value());
            let target = meta.get(crate::rebuild::mark_key(kind).as_str())?.map(|v| v.value());
            let waiting = meta.get(rederiving_key(kind).as_str())?.is_some();
            (stored, target, waiting)
        };
        if stored == Some(u64::from(version)) {
            if target.is_some() {
                // A build of another version began re-deriving it: this build's records stand.
                crate::rebuild::clear(txn, kind)?;
                txn.open_table(tables::META)?.remove(crate::rebuild::mark_key(kind).as_str())?;
            }
            continue;
        }
        if target == Some(u64::from(version)) {
            rebuilding.push(kind);
            continue;
        }
        crate::rebuild::clear(txn, kind)?;
        let mut meta = txn.open_table(tables::META)?;
        if stored.is_some() && !waiting && crate::rebuild::documents_complete(txn, kind)? {
            meta.insert(crate::rebuild::mark_key(kind).as_str(), u64::from(version))?;
            rebuilding.push(kind);
            continue;
        }
        meta.remove(crate::rebuild::mark_key(kind).as_str())?;
        drop(meta);
        let records = purge(txn, kind)?;
        let mut meta = txn.open_table(tables::META)?;
        meta.insert(version_key(kind).as_str(), u64::from(version))?;
        meta.insert(rederiving_key(kind).as_str(), 1)?;
        purged.push(Purged { kind, from: stored, to: version, records });
    }
    let mut meta = txn.open_table(tables::META)?;
    if !purged.is_empty() {
        let revision = meta.get("revision")?.map(|r| r.value()).unwrap_or(0);
        meta.insert("revision", revision + 1)?;
    }
    let mut rederiving = Vec::new();
    for (kind, _) in kinds.versions() {
        if meta.get(rederiving_key(kind).as_str())?.is_some() {
            rederiving.push(kind);
        }
    }
    drop(meta);
    let rebuilding = rebuilding
        .into_iter()
        .map(|kind| Ok((kind, crate::rebuild::servable(txn, kinds, kind)?)))
        .collect::<Result<Vec<_>, StorageError>>()?;
    Ok(Reconciled { purged, rederiving, rebuilding })
}

/// Marks `kind` re-deriving (a restore that left its records out).
pub(crate) fn mark_rederiving(txn: &WriteTransaction, kind: KindId) -> Result<(), StorageError> {
    txn.open_table(tables::META)?.insert(rederiving_key(kind).as_str(), 1)?;
    Ok(())
}

/// Removes the re-deriving marks of `kinds`.
pub(crate) fn clear_rederiving(txn: &WriteTransaction, kinds: &[KindId]) -> Result<(), StorageError> {
    let mut meta = txn.open_table(tables::META)?;
    for &kind in kinds {
        meta.remove(rederiving_key(kind).as_str())?;
    }
    Ok(())
}

/// Removes every record of `kind` and everything derived from them, without decoding any;
/// returns the number of records removed.
fn purge(txn: &WriteTransaction, kind: KindId) -> Result<u64, StorageError> {
    let keys: HashSet<Vec<u8>> = {
        let t = txn.open_table(tables::records(kind))?;
        t.iter()?.map(|item| item.map(|(k, _)| k.value().to_vec())).collect::<Result<_, _>>()?
    };
    txn.delete_table(tables::records(kind))?;
    txn.open_table(tables::records(kind))?;
    let (start, end) = ([kind.code()], [kind.code() + 1]);
    let range = &start[..]..&end[..];
    txn.open_table(tables::ORDER)?.retain_in::<&[u8], _>(range.clone(), |_, _| false)?;
    txn.open_table(tables::COUNTS)?.retain_in::<&[u8], _>(range.clone(), |_, _| false)?;
    let mut removed = 0;
    txn.open_table(tables::SOURCES)?.retain_in::<&[u8], _>(range.clone(), |_, _| {
        removed += 1;
        false
    })?;
    tables::add_source_writes(txn, removed)?;
    txn.open_table(crate::documents::DOCUMENTS)?.retain_in::<&[u8], _>(range, |_, _| false)?;
    if !keys.is_empty() {
        txn.open_table(tables::INDEX_ENTRIES)?.retain(|entry, _| !tables::ref_entry_of(entry, kind, &keys))?;
    }
    Ok(keys.len() as u64)
}

/// Test support: rewrites the store in the closed data directory `dir` as a build whose `kind`
/// had derivation `version` would have left it: that version in `meta`, and every record of
/// `kind` re-encoded by `reencode` (given the record's bytes as this build encodes them).
///
/// # Errors
/// [`StorageError`] on redb or decoding failures.
#[doc(hidden)]
pub fn downgrade_for_tests(
    dir: &std::path::Path,
    kind: KindId,
    version: u32,
    reencode: impl Fn(&[u8]) -> Vec<u8>,
) -> Result<(), StorageError> {
    let db = redb::Database::open(dir.join(crate::DB_FILE)).map_err(|e| StorageError::Database(e.to_string()))?;
    let txn = db.begin_write()?;
    {
        let mut records = txn.open_table(tables::records(kind))?;
        let mut rewritten = Vec::new();
        for item in records.iter()? {
            let (k, v) = item?;
            let mut env: crate::Envelope = crate::codec::decode(v.value(), kind.name())?;
            env.record = reencode(&env.record);
            rewritten.push((k.value().to_vec(), crate::codec::encode(&env)));
        }
        for (k, v) in &rewritten {
            records.insert(k.as_slice(), v.as_slice())?;
        }
        txn.open_table(tables::META)?.insert(version_key(kind).as_str(), u64::from(version))?;
    }
    txn.commit()?;
    Ok(())
}

/// Test support: removes the source documents of `kind` from the store in the closed data
/// directory `dir`, as a build before documents were kept would have left it.
///
/// # Errors
/// [`StorageError`] on redb failures.
#[doc(hidden)]
pub fn forget_documents_for_tests(dir: &std::path::Path, kind: KindId) -> Result<(), StorageError> {
    let db = redb::Database::open(dir.join(crate::DB_FILE)).map_err(|e| StorageError::Database(e.to_string()))?;
    let txn = db.begin_write()?;
    let (start, end) = ([kind.code()], [kind.code() + 1]);
    txn.open_table(crate::documents::DOCUMENTS)?.retain_in::<&[u8], _>(&start[..]..&end[..], |_, _| false)?;
    txn.commit()?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{Outcome, SourceRef, Store, WriteBatch};
    use schema::kind::{Context, Features};
    use schema::registry::{self, KindVisitor};
    use schema::{Kind, Timestamp};
    use serde_json::Value;
    use std::path::Path;

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap()
    }

    /// Copies the (closed) store of data directory `from` into `to`.
    fn copy_store(from: &Path, to: &Path) {
        std::fs::copy(from.join(crate::DB_FILE), to.join(crate::DB_FILE)).unwrap();
    }

    /// Every document of the example world, in file order.
    pub(crate) fn world_docs() -> Vec<Value> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world");
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .flat_map(|p| serde_saphyr::from_multiple::<Value>(&std::fs::read_to_string(p).unwrap()).unwrap())
            .collect()
    }

    /// Upserts `doc` when it is of kind `K`, as the writer does (an unchanged source version
    /// writes nothing).
    struct Apply<'a, 'txn> {
        batch: &'a mut WriteBatch<'txn>,
        doc: &'a Value,
        out: Option<Outcome>,
    }

    impl KindVisitor for Apply<'_, '_> {
        fn visit<K: Kind>(&mut self) {
            if self.doc["kind"] != K::ID.name() {
                return;
            }
            let m = &self.doc["metadata"];
            let src =
                SourceRef { kind: K::ID, namespace: m["namespace"].as_str().unwrap().into(), name: m["name"].as_str().unwrap().into() };
            if self.batch.source_version(&src).unwrap().as_deref() == Some("1") {
                self.out = Some(Outcome::Unchanged);
                return;
            }
            let cr: K::Cr = serde_json::from_value(self.doc.clone()).unwrap();
            let rec = K::translate(&cr, &Context { now: now(), features: Features::default() }).unwrap();
            self.out = Some(self.batch.upsert::<K>(&src, "1", &rec, now()).unwrap());
        }
    }

    fn apply(store: &Store, docs: &[&Value]) -> Vec<Outcome> {
        store
            .write(now(), |batch| {
                let outs = docs
                    .iter()
                    .map(|doc| {
                        let mut a = Apply { batch: &mut *batch, doc, out: None };
                        registry::visit(&mut a);
                        a.out.unwrap()
                    })
                    .collect();
                Ok(outs)
            })
            .unwrap()
            .0
    }

    /// The derived tables, raw: ordering entries, secondary-index entries, counters.
    type Derived = (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<(Vec<u8>, u64)>);

    fn derived(store: &Store) -> Derived {
        let view = store.read().unwrap();
        let txn = view.txn();
        let keys = |t: redb::ReadOnlyTable<&[u8], ()>| t.iter().unwrap().map(|i| i.unwrap().0.value().to_vec()).collect::<Vec<_>>();
        let counts_t = txn.open_table(tables::COUNTS).unwrap();
        let counts = counts_t.iter().unwrap().map(|i| i.map(|(k, v)| (k.value().to_vec(), v.value())).unwrap()).collect();
        (keys(txn.open_table(tables::ORDER).unwrap()), keys(txn.open_table(tables::INDEX_ENTRIES).unwrap()), counts)
    }

    /// The old shape of an ApiExposure record, as a build before its last field was added wrote
    /// it: the record's encoding without its last byte (a `None` or `false` at the end).
    fn without_last_field(bytes: &[u8]) -> Vec<u8> {
        bytes[..bytes.len() - 1].to_vec()
    }

    /// A kind stored under another version is purged on open without decoding a record, comes
    /// back from the source, and ends re-derived exactly as a clean load; no other kind's record
    /// is rewritten; one that did not come back leaves no link behind.
    #[test]
    fn a_kind_of_another_version_is_purged_on_open_and_re_derived_from_the_source() {
        let docs = world_docs();
        let all: Vec<&Value> = docs.iter().collect();
        let clean_dir = tempfile::tempdir().unwrap();
        let clean = Store::open(clean_dir.path()).unwrap();
        apply(&clean, &all);
        let digests = |s: &Store| KindId::ALL.iter().map(|&k| s.read().unwrap().digest(k).unwrap()).collect::<Vec<_>>();
        let (clean_digests, clean_derived) = (digests(&clean), derived(&clean));
        let old_revision = clean.read().unwrap().revision().unwrap();
        drop(clean);

        let dir = tempfile::tempdir().unwrap();
        copy_store(clean_dir.path(), dir.path());
        downgrade_for_tests(dir.path(), KindId::ApiExposure, 0, without_last_field).unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.rederiving(), vec![KindId::ApiExposure]);
        let view = store.read().unwrap();
        assert_eq!(view.count(KindId::ApiExposure, &schema::Scope::All).unwrap(), 0);
        assert_eq!(view.revision().unwrap(), old_revision + 1, "the purge is a change");
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        let (order, index_entries, _) = derived(&store);
        assert!(order.iter().all(|e| e[0] != KindId::ApiExposure.code()), "no ordering entry of the purged kind");
        assert!(index_entries.len() < clean_derived.1.len(), "its secondary-index entries are gone");
        drop(view);
        // Reopening does not purge again: the kind keeps waiting for the source.
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.rederiving(), vec![KindId::ApiExposure]);
        assert_eq!(store.read().unwrap().revision().unwrap(), old_revision + 1);

        // The source hands over everything again: only the purged kind is written.
        let outs = apply(&store, &all);
        for (doc, out) in docs.iter().zip(&outs) {
            let expected = if doc["kind"] == "ApiExposure" { Outcome::Written } else { Outcome::Unchanged };
            assert_eq!(out, &expected, "{} {}", doc["kind"], doc["metadata"]["name"]);
        }
        let done = store.finish_rederivation(now()).unwrap().unwrap();
        assert_eq!(done.kinds, vec![KindId::ApiExposure]);
        assert!(done.relinked > 0);
        assert_eq!(done.revision, None, "every link resolves as stored: nothing is rewritten");
        assert_eq!(store.rederiving(), Vec::<KindId>::new());
        assert_eq!(store.finish_rederivation(now()).unwrap(), None);
        let got = digests(&store);
        for (i, &kind) in KindId::ALL.iter().enumerate() {
            if kind != KindId::ApiExposure {
                assert_eq!(got[i], clean_digests[i], "{kind:?} is not rewritten");
            }
        }
        assert_eq!(derived(&store), clean_derived, "indexes and counters as after a clean load");
        let view = store.read().unwrap();
        for a in clean_dir_records(&all) {
            let stored = view.get::<schema::kinds::api_exposure::ApiExposure>(&a.0).unwrap().unwrap();
            assert_eq!(stored.record, a.1);
        }
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        drop(view);
        drop(store);
        assert_eq!(Store::open(dir.path()).unwrap().rederiving(), Vec::<KindId>::new(), "the end is durable");

        // An exposure that does not come back: the subscriptions that linked it lose the link.
        let dir = tempfile::tempdir().unwrap();
        copy_store(clean_dir.path(), dir.path());
        downgrade_for_tests(dir.path(), KindId::ApiExposure, 0, without_last_field).unwrap();
        let store = Store::open(dir.path()).unwrap();
        let gone = all.iter().position(|d| d["kind"] == "ApiExposure").unwrap();
        let rest: Vec<&Value> = all.iter().enumerate().filter(|(i, _)| *i != gone).map(|(_, d)| *d).collect();
        apply(&store, &rest);
        assert!(store.finish_rederivation(now()).unwrap().unwrap().revision.is_some(), "links changed");
        let expected_dir = tempfile::tempdir().unwrap();
        let expected = Store::open(expected_dir.path()).unwrap();
        apply(&expected, &rest);
        let (mut a, mut b) = (derived(&store), derived(&expected));
        // Ordering entries hold no revision: equal. Counters and references too.
        a.0.sort();
        b.0.sort();
        assert_eq!(a, b, "as a clean load of the objects that remain");
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    }

    /// The ApiExposure records of a clean translation of `docs`: (natural key, record).
    fn clean_dir_records(docs: &[&Value]) -> Vec<(schema::Key, <schema::kinds::api_exposure::ApiExposure as Kind>::Record)> {
        use schema::kinds::api_exposure::ApiExposure;
        docs.iter()
            .filter(|d| d["kind"] == "ApiExposure")
            .map(|d| {
                let cr = serde_json::from_value((*d).clone()).unwrap();
                let rec = ApiExposure::translate(&cr, &Context { now: now(), features: Features::default() }).unwrap();
                (ApiExposure::key(&rec), rec)
            })
            .collect()
    }

    /// `reconcile` finds secondary-index entries by component boundary, not by byte search.
    #[test]
    fn a_secondary_index_entry_belongs_to_the_kind_and_key_it_ends_with() {
        let key = schema::Key::new(&["poc", "a"]);
        let keys: HashSet<Vec<u8>> = [key.as_bytes().to_vec()].into();
        let lookup = schema::Key::new(&["poc", "/base"]);
        let entry = tables::index_entry(schema::IndexName("x_by_y"), &lookup, KindId::ApiExposure, &key);
        assert!(tables::ref_entry_of(&entry, KindId::ApiExposure, &keys));
        assert!(!tables::ref_entry_of(&entry, KindId::Api, &keys));
        let other = tables::index_entry(schema::IndexName("x_by_y"), &lookup, KindId::ApiExposure, &schema::Key::new(&["poc", "b"]));
        assert!(!tables::ref_entry_of(&other, KindId::ApiExposure, &keys));
        assert!(!tables::ref_entry_of(b"", KindId::Zone, &keys));
        assert!(!tables::ref_entry_of(b"\x05\x05\x05", KindId::Zone, &keys), "unterminated");
    }
}

/// Golden encodings: a test per kind that fails when a record's encoding changes while its
/// [`schema::Kind::VERSION`] does not.
#[cfg(test)]
mod golden {
    use schema::kind::{Context, Features};
    use schema::registry::{self, KindVisitor};
    use schema::{Kind, KindId, Timestamp};
    use serde_json::Value;
    use sha2::Digest;
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    /// The committed encodings: one line per kind, `<Kind> version=<v> records=<n> sha256=<hex>`.
    fn golden_file() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/record-encodings.txt")
    }

    /// Per kind: its version, and the number and SHA-256 of the encodings of the example world's
    /// objects of that kind, translated at the world's reference time, in file order.
    struct Encodings<'a> {
        docs: &'a [Value],
        out: BTreeMap<&'static str, (u32, usize, String)>,
    }

    impl KindVisitor for Encodings<'_> {
        fn visit<K: Kind>(&mut self) {
            let ctx = Context { now: Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap(), features: Features::default() };
            let mut h = sha2::Sha256::new();
            let mut n = 0;
            for doc in self.docs.iter().filter(|d| d["kind"] == K::ID.name()) {
                let cr: K::Cr = serde_json::from_value(doc.clone()).unwrap();
                let bytes = crate::codec::encode(&K::translate(&cr, &ctx).unwrap());
                h.update((bytes.len() as u64).to_le_bytes());
                h.update(&bytes);
                n += 1;
            }
            let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            self.out.insert(K::ID.name(), (K::VERSION, n, hex));
        }
    }

    fn line(kind: &str, (version, n, hex): &(u32, usize, String)) -> String {
        format!("{kind} version={version} records={n} sha256={hex}")
    }

    /// Fails, per kind, when the world's records of a kind encode differently from the committed
    /// encodings while the kind's version is the same (bump the version), or when the version
    /// changed (record the new encodings: `UPDATE_EXPECT=1 cargo test -p storage golden`).
    #[test]
    fn a_record_encoding_changes_only_with_its_kind_version() {
        let docs = super::tests::world_docs();
        let mut e = Encodings { docs: &docs, out: BTreeMap::new() };
        registry::visit(&mut e);
        assert_eq!(e.out.len(), KindId::ALL.len());
        let lines: Vec<String> = KindId::ALL.iter().map(|k| line(k.name(), &e.out[k.name()])).collect();
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            std::fs::write(golden_file(), format!("{}\n", lines.join("\n"))).unwrap();
        }
        let committed = std::fs::read_to_string(golden_file()).unwrap();
        let committed: BTreeMap<&str, &str> = committed.lines().filter_map(|l| l.split_once(' ')).collect();
        let mut wrong = Vec::new();
        for &kind in KindId::ALL {
            let (version, n, hex) = &e.out[kind.name()];
            assert!(*n > 0, "{kind:?}: the example world has no object of this kind, so its encoding is not covered");
            let now = line(kind.name(), &e.out[kind.name()]);
            let Some(was) = committed.get(kind.name()) else {
                wrong.push(format!("{kind:?}: no committed encoding; record it with `UPDATE_EXPECT=1 cargo test -p storage golden`"));
                continue;
            };
            let was_version = was.split(' ').next().and_then(|v| v.strip_prefix("version=")).unwrap_or("");
            if format!("{kind:?} {was}") == now {
                continue;
            }
            if was_version == version.to_string() {
                wrong.push(format!(
                    "{kind:?}: its records encode differently ({n} records, sha256 {hex}; committed: {was}) but {kind:?}::VERSION is still {version}: \
                     bump `const VERSION` in {} (ARCHITECTURE.md, \"Changing a record or a rule\"), then record the new \
                     encodings with UPDATE_EXPECT=1",
                    kind.source_path()
                ));
            } else {
                wrong.push(format!(
                    "{kind:?}: VERSION changed from {was_version} to {version}: record the new encodings with UPDATE_EXPECT=1 \
                     (and a stored store for the release, tests/fixtures/stores/README.md)"
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
