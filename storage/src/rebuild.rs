//! Re-deriving a kind from the volume (ARCHITECTURE.md, `storage`: upgrades keep serving): a build whose derivation of a kind
//! changed ([`schema::Kind::VERSION`]) translates the kind's source documents
//! ([`crate::documents`]) again, in the background, without the source, and switches to the new
//! records in one commit.
//!
//! **When.** On open ([`crate::versions::reconcile`]), a kind stored under another version
//! whose every source entry has its document is marked *rebuilding* (`meta`
//! `rebuilding:<plural>` = the target version); its records, their version in `meta` and
//! everything derived from them stay as they are. Any other kind of another version (a store
//! written before documents were kept) takes the older path: purged, brought back by the source.
//!
//! **Serving meanwhile.** When every stored record of the kind decodes as this build's record
//! and encodes back to the same bytes ([`crate::Store::rebuilding`] says so per kind), the
//! stored records are served as they are — the previous derivation, whole and consistent. A kind
//! whose record changed shape cannot be read by this build: its queries answer
//! [`crate::StorageError::Rederiving`] until the switch (only for as long as the translation of
//! its documents takes).
//!
//! **Staging** (table `rederivation`, not read-model data, not in snapshots):
//!
//! | key | value |
//! |---|---|
//! | `kind u8 · 0` | the cursor: the `Key(namespace, name)` of the last document translated |
//! | `kind u8 · 1 · Key(namespace, name)` | postcard [`Staged`]: source version, new record (none: not projected or deleted), and for a change that came meanwhile its document |
//!
//! [`crate::Store::rebuild_step`] translates the next documents after the cursor (at most a
//! given number, or for a given time) in one commit: the writer runs it between batches, so a
//! change waits for one step at most. Meanwhile the kind is frozen: the source's changes of it
//! are staged (`live`: the build does not translate that object's older document again) and
//! its deletes staged as deletes; the stored records, their source entries and documents do
//! not move, so no answer mixes the two derivations.
//!
//! **The switch** ([`crate::Store::switch_rebuilt`]), once the cursor passed the last document:
//! one batch writes every staged record through the write path (a record whose bytes and links
//! are unchanged writes nothing, so a re-derivation that changes nothing is not a change of
//! any object: no revision, no event), deletes what is staged as deleted, not projected, or
//! has no staged entry, stores the documents that came meanwhile, records the new version and
//! drops the staging. Previous records this build cannot read are removed first, undecoded
//! (told to the feed as records no viewer saw), and the new ones written anew. Dependents are re-linked through the write path's cascade of each record
//! written. The search index and the subscriptions follow the commit as any other.
//!
//! A restart goes on from the cursor; a build of another target version (a rollback, or the
//! next release) discards the staging and starts again.

use crate::write::SourceRef;
use crate::{tables, StorageError};
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use schema::{Key, KindId};
use serde::{Deserialize, Serialize};

/// Translates a source document of a kind into its record's bytes, or says why it cannot.
pub type TranslateDocument<'a> = dyn FnMut(KindId, &[u8]) -> Result<Vec<u8>, String> + 'a;

/// `rederivation`: the staging of kinds being re-derived from the volume (see the module docs).
pub const REBUILD: TableDefinition<&[u8], &[u8]> = TableDefinition::new("rederivation");

/// One object of a kind being re-derived, as the new derivation has it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Staged {
    /// The source version.
    pub version: String,
    /// The new record's encoding; `None`: not projected (translation skipped it) or deleted.
    pub record: Option<Vec<u8>>,
    /// The document of a change that came while the kind was frozen (stored at the switch).
    pub document: Option<Vec<u8>>,
    /// Staged from a change of the source while frozen: newer than the stored document, so
    /// the build does not translate that document over it.
    pub live: bool,
    /// The stored document could not be read (a damaged volume): the switch keeps the
    /// object's previous record when this build reads it (else removes the object, which its
    /// source hands over again) and drops the document, so the next start fills it in.
    pub damaged: bool,
}

/// The `meta` key of a kind being re-derived from the volume: its target version.
pub(crate) fn mark_key(kind: KindId) -> String {
    format!("rebuilding:{}", kind.plural())
}

fn cursor_key(kind: KindId) -> [u8; 2] {
    [kind.code(), 0]
}

/// The staging key of the object `namespace/name` of `kind`.
fn staged_key(kind: KindId, source: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + source.len());
    k.extend_from_slice(&[kind.code(), 1]);
    k.extend_from_slice(source);
    k
}

/// Stages `staged` for the object `src` (a change that came while its kind is frozen).
///
/// # Errors
/// [`StorageError`] on redb failures.
pub(crate) fn stage(txn: &WriteTransaction, src: &SourceRef, staged: &Staged) -> Result<(), StorageError> {
    let key = staged_key(src.kind, Key::new(&[src.namespace.as_str(), src.name.as_str()]).as_bytes());
    txn.open_table(REBUILD)?.insert(key.as_slice(), crate::codec::encode(staged).as_slice())?;
    Ok(())
}

/// The change of the object `src` staged while its kind is frozen (`live`), if any.
///
/// # Errors
/// [`StorageError`] on redb or decoding failures.
pub(crate) fn staged_change(txn: &WriteTransaction, src: &SourceRef) -> Result<Option<Staged>, StorageError> {
    let key = staged_key(src.kind, Key::new(&[src.namespace.as_str(), src.name.as_str()]).as_bytes());
    let staging = txn.open_table(REBUILD)?;
    let staged = staging.get(key.as_slice())?.map(|v| crate::codec::decode::<Staged>(v.value(), "staged record")).transpose()?;
    Ok(staged.filter(|s| s.live))
}

/// Removes the staging and the cursor of `kind`.
///
/// # Errors
/// [`StorageError`] on redb failures.
pub(crate) fn clear(txn: &WriteTransaction, kind: KindId) -> Result<(), StorageError> {
    let (start, end) = ([kind.code()], [kind.code() + 1]);
    txn.open_table(REBUILD)?.retain_in::<&[u8], _>(&start[..]..&end[..], |_, _| false)?;
    Ok(())
}

/// Whether every source entry of `kind` has its document (the kind can be re-derived from the
/// volume).
///
/// # Errors
/// [`StorageError`] on redb failures.
pub(crate) fn documents_complete(txn: &WriteTransaction, kind: KindId) -> Result<bool, StorageError> {
    let sources = txn.open_table(tables::SOURCES)?;
    let documents = txn.open_table(crate::documents::DOCUMENTS)?;
    let (start, end) = ([kind.code()], [kind.code() + 1]);
    for item in sources.range(&start[..]..&end[..])? {
        let (k, _) = item?;
        if documents.get(k.value())?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether every stored record of `kind` round-trips through this build's record type.
///
/// # Errors
/// [`StorageError`] on redb failures.
pub(crate) fn servable(txn: &WriteTransaction, kinds: &crate::write::KindTable, kind: KindId) -> Result<bool, StorageError> {
    let Some(ops) = kinds.get(kind) else { return Ok(false) };
    for item in txn.open_table(tables::records(kind))?.iter()? {
        let (_, v) = item?;
        let env: crate::Envelope = crate::codec::decode(v.value(), kind.name())?;
        if !ops.round_trips(&env.record) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What one [`crate::Store::rebuild_step`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RebuildStep {
    /// The kind stepped.
    pub kind: Option<KindId>,
    /// Documents translated in this step.
    pub documents: usize,
    /// Of those, the ones translation did not project (their records go at the switch).
    pub skipped: usize,
    /// Of those, the ones whose stored document could not be read ([`Staged`]`::damaged`).
    pub damaged: usize,
    /// Whether every document of the kind is translated: the switch is next.
    pub complete: bool,
}

/// What [`crate::Store::switch_rebuilt`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Switched {
    /// The kind switched.
    pub kind: Option<KindId>,
    /// Records written (their new derivation differs from the previous one).
    pub written: usize,
    /// Objects deleted (deleted meanwhile, no longer projected, or without a document).
    pub deleted: usize,
    /// Records kept in their previous derivation because the new one could not be written
    /// (a required parent missing, its key held by another object, or its document damaged):
    /// logged.
    pub kept: usize,
    /// The revision of the commit, when a record changed.
    pub revision: Option<u64>,
}

impl crate::Store {
    /// The kinds being re-derived from the volume, each with whether its stored records are
    /// served meanwhile (see the module docs).
    pub fn rebuilding(&self) -> Vec<(KindId, bool)> {
        self.rebuilding.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every kind being re-derived, from the source or from the volume, in [`KindId::ALL`]
    /// order: what `/readyz` and `extensions.freshness` name under `rederiving`.
    pub fn rederivations(&self) -> Vec<KindId> {
        let (source, volume) = (self.rederiving(), self.rebuilding());
        KindId::ALL.iter().copied().filter(|k| source.contains(k) || volume.iter().any(|(v, _)| v == k)).collect()
    }

    /// The kinds queries may not read now: those purged and waiting for their source
    /// ([`crate::Store::rederiving`]), and those re-derived from the volume whose stored
    /// records this build cannot serve.
    pub fn unavailable(&self) -> Vec<KindId> {
        let mut kinds = self.rederiving();
        kinds.extend(self.rebuilding().into_iter().filter(|(_, served)| !served).map(|(k, _)| k));
        kinds
    }

    /// Translates the next documents of the first kind being re-derived from the volume: at
    /// most `max_documents` (at least one), reading no more once `max_time` has passed, each
    /// handed to `translate` (the kind and the document's JSON; the new record's encoding, or
    /// the reason it is not projected), staged in one commit with the cursor. `None` when no
    /// kind is being re-derived. Call it where writes are made (the writer thread), between
    /// batches; once a step says `complete`, call [`crate::Store::switch_rebuilt`].
    ///
    /// # Errors
    /// [`StorageError`] on redb failures or a damaged document; nothing of the step is kept.
    pub fn rebuild_step(
        &self,
        max_documents: usize,
        max_time: std::time::Duration,
        translate: &mut TranslateDocument<'_>,
    ) -> Result<Option<RebuildStep>, StorageError> {
        let Some((kind, _)) = self.rebuilding().first().copied() else { return Ok(None) };
        let began = std::time::Instant::now();
        let txn = self.database()?.begin_write()?;
        let mut step = RebuildStep { kind: Some(kind), ..RebuildStep::default() };
        {
            let mut staging = txn.open_table(REBUILD)?;
            let cursor = staging.get(cursor_key(kind).as_slice())?.map(|v| v.value().to_vec());
            let documents = txn.open_table(crate::documents::DOCUMENTS)?;
            let sources = txn.open_table(tables::SOURCES)?;
            let mut from = vec![kind.code()];
            from.extend_from_slice(cursor.as_deref().unwrap_or_default());
            let end = [kind.code() + 1];
            let mut last = None;
            let mut range = documents.range(from.as_slice()..&end[..])?;
            loop {
                if step.documents > 0 && (step.documents >= max_documents || began.elapsed() >= max_time) {
                    break;
                }
                let Some(item) = range.next() else {
                    step.complete = true;
                    break;
                };
                let (k, v) = item?;
                let source = &k.value()[1..];
                if cursor.as_deref() == Some(source) {
                    continue;
                }
                last = Some(source.to_vec());
                step.documents += 1;
                let key = staged_key(kind, source);
                let newer = staging.get(key.as_slice())?.map(|v| crate::codec::decode::<Staged>(v.value(), "staged record")).transpose()?;
                if newer.is_some_and(|s| s.live) {
                    continue;
                }
                let version = match sources.get(k.value())? {
                    Some(e) => crate::write::decode_source_entry(e.value(), kind)?.1,
                    None => continue,
                };
                // A damaged document is one object the new derivation cannot have, never a step
                // that fails for ever.
                let (record, damaged) = match self.dictionaries.decode(kind, v.value()) {
                    Err(e) => {
                        tracing::error!(kind = kind.name(), object = %Key::from_bytes(source.to_vec()), error = %e, "a stored source document is damaged: the object keeps its previous record where this build reads it; the document is read again from the source on the next start");
                        step.damaged += 1;
                        (None, true)
                    }
                    Ok(json) => match translate(kind, &json) {
                        Ok(bytes) => (Some(bytes), false),
                        Err(reason) => {
                            tracing::warn!(kind = kind.name(), object = %Key::from_bytes(source.to_vec()), %reason, "not projected by the new derivation: its record goes at the switch");
                            step.skipped += 1;
                            (None, false)
                        }
                    },
                };
                let staged = Staged { version, record, document: None, live: false, damaged };
                staging.insert(key.as_slice(), crate::codec::encode(&staged).as_slice())?;
            }
            drop(range);
            if let Some(last) = last {
                staging.insert(cursor_key(kind).as_slice(), last.as_slice())?;
            }
        }
        txn.commit()?;
        Ok(Some(step))
    }

    /// Switches the first kind being re-derived from the volume to its new derivation in one
    /// commit (see the module docs) and ends its re-derivation. Nothing when no kind is.
    ///
    /// # Errors
    /// [`StorageError`] on redb or decoding failures; nothing is kept and the kind stays
    /// marked (the call can be repeated).
    pub fn switch_rebuilt(&self, now: schema::Timestamp) -> Result<Switched, StorageError> {
        let Some((kind, served)) = self.rebuilding().first().copied() else { return Ok(Switched::default()) };
        let target = self.kinds.get(kind).map(|ops| ops.version()).unwrap_or_default();
        let kinds = self.kinds.clone();
        let ops = kinds.get(kind).ok_or_else(|| StorageError::Corrupt(format!("{} is not registered", kind.name())))?;
        let (mut switched, revision) = self.write(now, |batch| {
            batch.rebuilding.retain(|&k| k != kind);
            batch.unreadable.retain(|&k| k != kind);
            let mut switched = Switched { kind: Some(kind), ..Switched::default() };
            if !served {
                // This build cannot read the previous records: they go without being decoded,
                // and every staged record is written anew.
                batch.forget_records(kind)?;
            }
            let staged = staged_records(batch, kind)?;
            let mut seen = std::collections::HashSet::with_capacity(staged.len());
            for (raw, s) in &staged {
                let src = staged_source(kind, raw)?;
                seen.insert(raw.clone());
                if s.damaged && served {
                    // The previous record stays; the document is filled in by the next start.
                    let skey = tables::source_key(kind, &src.namespace, &src.name);
                    batch.drop_document(&skey)?;
                    switched.kept += 1;
                    continue;
                }
                // A change the source made meanwhile is a revision of its object; a record
                // translated again is none ([`crate::history`]).
                batch.history_revisions(s.live);
                match &s.record {
                    Some(record) => match ops.upsert_bytes(batch, &src, &s.version, record, now)? {
                        crate::Outcome::Written | crate::Outcome::Unlinked { written: true } => switched.written += 1,
                        crate::Outcome::DependencyMissing(_) | crate::Outcome::Conflict(_) => {
                            tracing::warn!(object = %src, "the new derivation cannot be written (parent missing or key held): the previous record stays");
                            switched.kept += 1;
                        }
                        _ => {}
                    },
                    None => {
                        if batch.delete(&src, now)? == crate::Outcome::Deleted {
                            switched.deleted += 1;
                        }
                    }
                }
                if let (Some(doc), Some(_)) = (&s.document, &s.record) {
                    let skey = tables::source_key(kind, &src.namespace, &src.name);
                    batch.put_document(&skey, doc)?;
                }
            }
            // Defensive: an object without a staged entry had no document.
            batch.history_revisions(false);
            for (src, _) in batch.sources(kind)? {
                let raw = Key::new(&[src.namespace.as_str(), src.name.as_str()]).as_bytes().to_vec();
                if !seen.contains(&raw) && batch.delete(&src, now)? == crate::Outcome::Deleted {
                    switched.deleted += 1;
                }
            }
            let txn = batch.txn_for_other_tables();
            if staged.iter().any(|(_, s)| s.damaged) {
                txn.open_table(tables::META)?.remove(crate::documents::COMPLETE)?;
            }
            clear(txn, kind)?;
            let mut meta = txn.open_table(tables::META)?;
            meta.insert(crate::versions::version_key(kind).as_str(), u64::from(target))?;
            meta.remove(mark_key(kind).as_str())?;
            Ok(switched)
        })?;
        switched.revision = revision;
        self.rebuilding.lock().unwrap_or_else(|e| e.into_inner()).retain(|(k, _)| *k != kind);
        Ok(switched)
    }
}

/// The staged records of `kind`: (the source's key bytes, the staged entry), in key order.
fn staged_records(batch: &mut crate::write::WriteBatch<'_>, kind: KindId) -> Result<Vec<(Vec<u8>, Staged)>, StorageError> {
    let staging = batch.txn_for_other_tables().open_table(REBUILD)?;
    let (start, end) = (staged_key(kind, &[]), [kind.code(), 2]);
    let mut all = Vec::new();
    for item in staging.range(start.as_slice()..&end[..])? {
        let (k, v) = item?;
        all.push((k.value()[2..].to_vec(), crate::codec::decode::<Staged>(v.value(), "staged record")?));
    }
    Ok(all)
}

/// The object a staged entry's key bytes (`namespace · name`) name.
fn staged_source(kind: KindId, raw: &[u8]) -> Result<SourceRef, StorageError> {
    let parts = Key::from_bytes(raw.to_vec()).parts().map_err(|_| StorageError::Corrupt("staged source".into()))?;
    match parts.as_slice() {
        [ns, name] => Ok(SourceRef { kind, namespace: ns.clone(), name: name.clone() }),
        _ => Err(StorageError::Corrupt("staged source".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Encoded, Outcome, Store};
    use schema::kind::{Context, Features};
    use schema::kinds::api_exposure::{ApiExposure, ApiExposureRecord};
    use schema::registry::{self, KindVisitor};
    use schema::{Kind, Timestamp};
    use serde_json::Value;

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap()
    }

    fn ctx() -> Context {
        Context { now: now(), features: Features::default() }
    }

    /// Writes `doc` (of any registered kind) with its document, as the writer does.
    struct Apply<'a, 'txn> {
        batch: &'a mut crate::WriteBatch<'txn>,
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
            let version = m["resourceVersion"].as_str().unwrap_or("1").to_string();
            let cr: K::Cr = serde_json::from_value(self.doc.clone()).unwrap();
            let rec = Encoded::<K>::new(K::translate(&cr, &ctx()).unwrap()).with_document(crate::documents::encode(self.doc));
            self.out = Some(self.batch.upsert_encoded::<K>(&src, &version, &rec, now()).unwrap());
        }
    }

    fn apply(store: &Store, docs: &[Value]) -> Vec<Outcome> {
        store
            .write(now(), |batch| {
                Ok(docs
                    .iter()
                    .map(|doc| {
                        let mut a = Apply { batch: &mut *batch, doc, out: None };
                        registry::visit(&mut a);
                        a.out.unwrap()
                    })
                    .collect())
            })
            .unwrap()
            .0
    }

    /// The new derivation of a document, as the writer's handlers translate it.
    fn translate(kind: KindId, json: &[u8]) -> Result<Vec<u8>, String> {
        struct T<'a>(KindId, &'a [u8], Option<Result<Vec<u8>, String>>);
        impl KindVisitor for T<'_> {
            fn visit<K: Kind>(&mut self) {
                if K::ID == self.0 {
                    let out = serde_json::from_slice::<K::Cr>(self.1)
                        .map_err(|e| e.to_string())
                        .and_then(|cr| K::translate(&cr, &ctx()).map_err(|e| e.to_string()))
                        .map(|r| crate::codec::encode(&r));
                    self.2 = Some(out);
                }
            }
        }
        let mut t = T(kind, json, None);
        registry::visit(&mut t);
        t.2.unwrap()
    }

    /// The status messages of every stored ApiExposure, in key order.
    fn messages(store: &Store) -> Vec<String> {
        let view = store.read().unwrap();
        view.with_prefix::<ApiExposure>(&Key::new::<&str>(&[])).unwrap().into_iter().map(|s| s.record.status.message).collect()
    }

    /// A store of the example world, with documents, whose ApiExposures were written by a
    /// build of version 0 whose rule set every status message to `previous derivation`.
    fn previous_build(dir: &std::path::Path) -> Vec<String> {
        let store = Store::open(dir).unwrap();
        apply(&store, &crate::versions::tests::world_docs());
        let clean = messages(&store);
        drop(store);
        crate::versions::downgrade_for_tests(dir, KindId::ApiExposure, 0, |bytes| {
            let mut r: ApiExposureRecord = crate::codec::decode(bytes, "ApiExposure").unwrap();
            r.status.message = "previous derivation".into();
            crate::codec::encode(&r)
        })
        .unwrap();
        clean
    }

    /// A kind of another version whose every object has its document is re-derived from the
    /// volume: its previous records are served, whole, step after step and across a restart;
    /// changes of the source meanwhile are staged (the stored records do not move); the switch
    /// is one commit after which the store holds exactly the new derivation, the change and the
    /// delete included, with its invariants.
    #[test]
    fn a_kind_is_re_derived_from_its_documents_while_its_previous_records_are_served() {
        let dir = tempfile::tempdir().unwrap();
        let clean = previous_build(dir.path());
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.rebuilding(), vec![(KindId::ApiExposure, true)], "served meanwhile: the record's shape is this build's");
        assert!(store.rederiving().is_empty() && store.unavailable().is_empty());
        let previous = vec!["previous derivation".to_string(); clean.len()];
        assert_eq!(messages(&store), previous);
        let revision = store.read().unwrap().revision().unwrap();

        // One step of two documents, then a restart: the cursor stays.
        let step = store.rebuild_step(2, std::time::Duration::MAX, &mut translate).unwrap().unwrap();
        assert_eq!((step.kind, step.documents, step.complete), (Some(KindId::ApiExposure), 2, false));
        assert_eq!(messages(&store), previous, "staged, not served");
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.rebuilding(), vec![(KindId::ApiExposure, true)]);

        // Meanwhile the source changes one exposure and deletes another: staged.
        let docs = crate::versions::tests::world_docs();
        let exposures: Vec<&Value> = docs.iter().filter(|d| d["kind"] == "ApiExposure").collect();
        let mut changed = exposures[0].clone();
        changed["metadata"]["resourceVersion"] = Value::from("2");
        changed["status"]["conditions"] = serde_json::json!([{"type": "Ready", "status": "True", "message": "changed meanwhile"}]);
        assert_eq!(apply(&store, &[changed.clone()]), vec![Outcome::Staged]);
        let gone = &exposures[1]["metadata"];
        let gone = SourceRef {
            kind: KindId::ApiExposure,
            namespace: gone["namespace"].as_str().unwrap().into(),
            name: gone["name"].as_str().unwrap().into(),
        };
        store.write(now(), |b| b.delete(&gone, now())).unwrap();
        assert_eq!(messages(&store), previous, "the stored records do not move");
        // The versions the writer compares with are the staged ones: the change's, and none for
        // the delete.
        let changed_src = SourceRef {
            kind: KindId::ApiExposure,
            namespace: changed["metadata"]["namespace"].as_str().unwrap().into(),
            name: changed["metadata"]["name"].as_str().unwrap().into(),
        };
        let versions = store.write(now(), |b| Ok((b.source_version(&changed_src)?, b.source_version(&gone)?))).unwrap().0;
        assert_eq!(versions, (Some("2".to_string()), None));
        assert_eq!(store.read().unwrap().revision().unwrap(), revision, "staging is no change of the read model");

        let mut steps = 1;
        loop {
            let step = store.rebuild_step(3, std::time::Duration::MAX, &mut translate).unwrap().unwrap();
            assert!(step.documents <= 3);
            assert_eq!(messages(&store).len(), previous.len());
            steps += 1;
            if step.complete {
                break;
            }
        }
        assert!(steps > 2, "in bounded steps");
        let switched = store.switch_rebuilt(now()).unwrap();
        assert_eq!(switched.kind, Some(KindId::ApiExposure));
        assert_eq!((switched.deleted, switched.kept), (1, 0));
        assert_eq!(switched.written, clean.len() - 1, "every record of the previous derivation differs, but the deleted one");
        assert!(store.rebuilding().is_empty());
        let view = store.read().unwrap();
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        assert_eq!(view.kind_versions().unwrap().iter().find(|(k, _)| *k == KindId::ApiExposure).unwrap().1, ApiExposure::VERSION);
        drop(view);
        let now_messages = messages(&store);
        assert_eq!(now_messages.len(), clean.len() - 1);
        assert!(now_messages.iter().any(|m| m == "changed meanwhile"), "{now_messages:?}");
        assert!(now_messages.iter().all(|m| m != "previous derivation"));
        // The switch logs every record it wrote, for subscriptions, but only the source's changes
        // made meanwhile (the changed and the deleted exposure) are revisions of their objects:
        // a re-derivation writes no revision.
        let switch = switched.revision.expect("the switch changed records");
        let logged = store.read().unwrap().log_after(crate::history::LogPosition::end_of(switch - 1), usize::MAX).unwrap().unwrap();
        let of_switch: Vec<_> = logged.iter().filter(|e| e.position.revision == switch).collect();
        assert!(of_switch.iter().filter(|e| e.kind == KindId::ApiExposure).count() == clean.len(), "every exposure written or removed");
        let revisions: Vec<&Key> = of_switch.iter().filter(|e| e.is_revision).map(|e| &e.key).collect();
        assert_eq!(revisions.len(), 2, "the changed and the deleted exposure: {revisions:?}");

        // The store equals a clean load of the same documents.
        let clean_dir = tempfile::tempdir().unwrap();
        let fresh = Store::open(clean_dir.path()).unwrap();
        let mut now_docs: Vec<Value> = docs
            .iter()
            .filter(|d| d["metadata"]["name"] != exposures[1]["metadata"]["name"] || d["kind"] != "ApiExposure")
            .cloned()
            .collect();
        for d in now_docs.iter_mut() {
            if d["kind"] == "ApiExposure"
                && d["metadata"]["name"] == changed["metadata"]["name"]
                && d["metadata"]["namespace"] == changed["metadata"]["namespace"]
            {
                *d = changed.clone();
            }
        }
        apply(&fresh, &now_docs);
        let records = |s: &Store| {
            let view = s.read().unwrap();
            view.with_prefix::<ApiExposure>(&Key::new::<&str>(&[]))
                .unwrap()
                .into_iter()
                .map(|s| (s.key, s.record, s.links))
                .collect::<Vec<_>>()
        };
        assert_eq!(records(&store), records(&fresh));
        drop(store);
        assert!(Store::open(dir.path()).unwrap().rebuilding().is_empty(), "the switch is durable");
    }

    /// A re-derivation that changes nothing writes nothing: no revision, no event.
    #[test]
    fn a_re_derivation_that_changes_nothing_is_no_change() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        apply(&store, &crate::versions::tests::world_docs());
        drop(store);
        crate::versions::downgrade_for_tests(dir.path(), KindId::ApiExposure, 0, <[u8]>::to_vec).unwrap();
        let store = Store::open(dir.path()).unwrap();
        let revision = store.read().unwrap().revision().unwrap();
        let feed = store.subscribe();
        while !store.rebuild_step(1000, std::time::Duration::MAX, &mut translate).unwrap().unwrap().complete {}
        let switched = store.switch_rebuilt(now()).unwrap();
        assert_eq!((switched.written, switched.deleted, switched.revision), (0, 0, None));
        assert_eq!(store.read().unwrap().revision().unwrap(), revision);
        assert!(feed.try_recv().is_err(), "no commit told");
    }

    /// A record this build cannot decode is not served while its kind is re-derived; a store
    /// without documents (written before they were kept) takes the source's path.
    #[test]
    fn a_changed_shape_is_unavailable_until_the_switch_and_a_store_without_documents_is_purged() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        apply(&store, &crate::versions::tests::world_docs());
        drop(store);
        crate::versions::downgrade_for_tests(dir.path(), KindId::ApiExposure, 0, |b| b[..b.len() - 1].to_vec()).unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.rebuilding(), vec![(KindId::ApiExposure, false)]);
        assert_eq!(store.unavailable(), vec![KindId::ApiExposure]);
        while !store.rebuild_step(1000, std::time::Duration::MAX, &mut translate).unwrap().unwrap().complete {}
        store.switch_rebuilt(now()).unwrap();
        assert!(store.unavailable().is_empty());
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
        drop(store);

        // The same store without its ApiExposure documents.
        let db = redb::Database::open(dir.path().join(crate::DB_FILE)).unwrap();
        let txn = db.begin_write().unwrap();
        let (start, end) = ([KindId::ApiExposure.code()], [KindId::ApiExposure.code() + 1]);
        txn.open_table(crate::documents::DOCUMENTS).unwrap().retain_in::<&[u8], _>(&start[..]..&end[..], |_, _| false).unwrap();
        txn.commit().unwrap();
        drop(db);
        crate::versions::downgrade_for_tests(dir.path(), KindId::ApiExposure, 0, <[u8]>::to_vec).unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.rebuilding().is_empty());
        assert_eq!(store.rederiving(), vec![KindId::ApiExposure], "purged: the source brings it back");
    }

    /// Runs every step and switch until no kind is re-derived from the volume.
    /// `store` exported (then closed) and restored into a new directory.
    fn restored_copy(store: Store) -> (tempfile::TempDir, Store) {
        let mut bytes = Vec::new();
        crate::snapshot::export(&store.read().unwrap(), now(), &mut bytes).unwrap();
        drop(store);
        let snap = crate::snapshot::decode_file(&bytes).unwrap();
        let restored = tempfile::tempdir().unwrap();
        let store = Store::open(restored.path()).unwrap();
        store.restore(&snap).unwrap();
        (restored, store)
    }

    fn rebuild_all(store: &Store) {
        while !store.rebuilding().is_empty() {
            while !store.rebuild_step(1000, std::time::Duration::MAX, &mut translate).unwrap().unwrap().complete {}
            store.switch_rebuilt(now()).unwrap();
        }
    }

    /// Two linked kinds whose records changed shape (an exposure and its subscriptions) are
    /// both re-derived: the first switch re-links no record of the other, which it cannot read,
    /// and the store ends as a clean load with its invariants.
    #[test]
    fn linked_kinds_that_changed_shape_are_re_derived_one_after_the_other() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        apply(&store, &crate::versions::tests::world_docs());
        let records = |s: &Store| {
            let view = s.read().unwrap();
            let exposures: Vec<_> =
                view.with_prefix::<ApiExposure>(&Key::new::<&str>(&[])).unwrap().into_iter().map(|s| (s.key, s.record, s.links)).collect();
            let subs: Vec<_> = view
                .with_prefix::<schema::kinds::api_subscription::ApiSubscription>(&Key::new::<&str>(&[]))
                .unwrap()
                .into_iter()
                .map(|s| (s.key, s.record, s.links))
                .collect();
            (exposures, subs)
        };
        let clean = records(&store);
        drop(store);
        for kind in [KindId::ApiExposure, KindId::ApiSubscription] {
            crate::versions::downgrade_for_tests(dir.path(), kind, 0, |b| b[..b.len() / 2].to_vec()).unwrap();
        }
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.rebuilding(), vec![(KindId::ApiExposure, false), (KindId::ApiSubscription, false)]);
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new(), "the unreadable kinds are left out");
        rebuild_all(&store);
        assert_eq!(records(&store), clean);
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    }

    /// A snapshot exported while a kind this build cannot read is re-derived restores (its
    /// records as they are, marked), and the restored store re-derives it from the volume.
    #[test]
    fn a_snapshot_of_an_unreadable_kind_restores_and_is_re_derived() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        apply(&store, &crate::versions::tests::world_docs());
        let clean = messages(&store);
        drop(store);
        // Version 7: a real one (0 means unknown in a snapshot's header).
        crate::versions::downgrade_for_tests(dir.path(), KindId::ApiExposure, 7, |b| b[..b.len() - 1].to_vec()).unwrap();
        let (restored, store) = restored_copy(Store::open(dir.path()).unwrap());
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
        drop(store);
        let store = Store::open(restored.path()).unwrap();
        assert_eq!(store.rebuilding(), vec![(KindId::ApiExposure, false)]);
        rebuild_all(&store);
        assert_eq!(messages(&store), clean);
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    }

    /// Documents compressed with their kind's dictionary travel in a snapshot with it: the
    /// restored store reads them and re-derives the kind from them (a record the dictionary
    /// could not decode would keep its previous derivation, and differ from the clean load).
    #[test]
    fn documents_with_a_dictionary_restore_and_re_derive() {
        use schema::kinds::zone::{Zone, ZoneRecord};
        let zones = |store: &Store| -> Vec<(Key, Vec<u8>)> {
            let view = store.read().unwrap();
            view.with_prefix::<Zone>(&Key::new::<&str>(&[]))
                .unwrap()
                .into_iter()
                .map(|s| (s.key, crate::codec::encode(&s.record)))
                .collect()
        };
        let dir = tempfile::tempdir().unwrap();
        let store = crate::documents::tests::store_with_dictionary(dir.path());
        let clean = zones(&store);
        let (restored, store) = restored_copy(store);
        assert!(store.dictionaries().has(KindId::Zone), "restored with the store");
        drop(store);
        crate::versions::downgrade_for_tests(restored.path(), KindId::Zone, 7, |b| {
            let mut r: ZoneRecord = crate::codec::decode(b, "Zone").unwrap();
            r.gateway_url = Some("https://previous.example".into());
            crate::codec::encode(&r)
        })
        .unwrap();
        let store = Store::open(restored.path()).unwrap();
        assert_eq!(store.rebuilding(), vec![(KindId::Zone, true)]);
        assert!(zones(&store) != clean, "the previous derivation is served");
        rebuild_all(&store);
        let rederived = zones(&store);
        assert_eq!(rederived.len(), clean.len());
        assert!(rederived == clean, "the re-derivation equals the clean load");
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    }

    /// A damaged source document: the object keeps its previous record (this build reads it),
    /// the document is dropped, and the store is marked as lacking documents (the next start
    /// fills it in).
    #[test]
    fn a_damaged_document_keeps_its_previous_record() {
        let dir = tempfile::tempdir().unwrap();
        previous_build(dir.path());
        let damaged = {
            let db = redb::Database::open(dir.path().join(crate::DB_FILE)).unwrap();
            let txn = db.begin_write().unwrap();
            let key = {
                let mut t = txn.open_table(crate::documents::DOCUMENTS).unwrap();
                let start = [KindId::ApiExposure.code()];
                let key = t.range(&start[..]..).unwrap().next().unwrap().unwrap().0.value().to_vec();
                t.insert(key.as_slice(), b"damaged".as_slice()).unwrap();
                key
            };
            txn.commit().unwrap();
            key
        };
        let store = Store::open(dir.path()).unwrap();
        assert!(!store.filling_documents());
        rebuild_all(&store);
        let now_messages = messages(&store);
        assert_eq!(now_messages.iter().filter(|m| *m == "previous derivation").count(), 1, "{now_messages:?}");
        let view = store.read().unwrap();
        assert!(view.txn().open_table(crate::documents::DOCUMENTS).unwrap().get(damaged.as_slice()).unwrap().is_none(), "dropped");
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        drop(view);
        assert!(store.filling_documents(), "the next start fills it in");
    }
}
