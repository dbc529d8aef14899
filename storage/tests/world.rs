//! The write path on the example world: counts, links (subscription targets, approval
//! visibility), invariants, unchanged re-application, deletes and re-links, restart.

use schema::keys::natural;
use schema::kind::{Context, Features};
use schema::kinds::api_exposure::ApiExposure;
use schema::kinds::api_subscription::ApiSubscription;
use schema::kinds::approval::Approval;
use schema::registry::{self, KindVisitor};
use schema::{Kind, KindId, Scope, Timestamp};
use serde_json::Value;
use std::path::Path;
use storage::{Outcome, SourceRef, Store};

fn now() -> Timestamp {
    Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap()
}

fn world_docs() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .flat_map(|p| serde_saphyr::from_multiple::<Value>(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}

fn source(doc: &Value, kind: KindId) -> SourceRef {
    SourceRef {
        kind,
        namespace: doc["metadata"]["namespace"].as_str().unwrap().to_string(),
        name: doc["metadata"]["name"].as_str().unwrap().to_string(),
    }
}

/// Applies `doc` if it is of kind `K`; returns the outcome.
struct Apply<'a, 'txn> {
    batch: &'a mut storage::WriteBatch<'txn>,
    doc: &'a Value,
    version: &'a str,
    out: Option<Outcome>,
}

impl KindVisitor for Apply<'_, '_> {
    fn visit<K: Kind>(&mut self) {
        if self.doc["kind"] != K::ID.name() {
            return;
        }
        let cr: K::Cr = serde_json::from_value(self.doc.clone()).unwrap();
        let ctx = Context { now: now(), features: Features::default() };
        let rec = K::translate(&cr, &ctx).unwrap();
        self.out = Some(self.batch.upsert::<K>(&source(self.doc, K::ID), self.version, &rec, now()).unwrap());
    }
}

fn apply(store: &Store, docs: &[Value], version: &str) -> Vec<Option<Outcome>> {
    store
        .write(now(), |batch| {
            let outs = docs
                .iter()
                .map(|d| {
                    let mut a = Apply { batch: &mut *batch, doc: d, version, out: None };
                    registry::visit(&mut a);
                    a.out
                })
                .collect();
            Ok(outs)
        })
        .unwrap()
        .0
}

fn facts() -> Value {
    serde_json::from_str(&std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/world.facts.json")).unwrap())
        .unwrap()
}

#[test]
fn world_projects_with_facts_counts_links_and_invariants() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let docs = world_docs();
    // Files are in dependency order: one pass applies everything but approvals of unregistered
    // subscription kinds.
    let outs = apply(&store, &docs, "v1");
    let facts = facts();
    let view = store.read().unwrap();
    for kind in registry::registered() {
        let mut total = 0;
        for env in ["poc", "qa"] {
            let expected = facts["env"][env]["counts"][kind.name()].as_u64().unwrap_or(0);
            let n: usize = view.with_prefix_count(kind, env);
            total += expected;
            if matches!(kind, KindId::Approval | KindId::ApprovalRequest) {
                assert!(n as u64 <= expected, "{kind:?} {env}");
            } else {
                assert_eq!(n as u64, expected, "{kind:?} in {env}");
            }
        }
        if !matches!(kind, KindId::Approval | KindId::ApprovalRequest) {
            assert_eq!(view.count(kind, &Scope::All).unwrap(), total, "{kind:?} counter");
        }
    }
    // Exactly the approvals (and requests) of unregistered subscription kinds wait.
    let registered = registry::registered();
    let unregistered_target =
        |d: &Value| d["spec"]["target"]["kind"].as_str().and_then(KindId::from_name).is_some_and(|k| !registered.contains(&k));
    let waiting: Vec<&Value> =
        docs.iter().zip(&outs).filter(|(_, o)| matches!(o, Some(Outcome::DependencyMissing(_)))).map(|(d, _)| d).collect();
    let expected = docs.iter().filter(|d| unregistered_target(d)).count();
    assert_eq!(waiting.len(), expected, "approvals of unregistered subscription kinds wait, nothing else");
    assert!(waiting.iter().all(|d| unregistered_target(d)));
    assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());

    // Every ApiSubscription's target equals the facts.
    for env in ["poc", "qa"] {
        for (team, t) in facts["env"][env]["teams"].as_object().unwrap() {
            for sub in t["subscriptions"]["ApiSubscription"].as_array().unwrap() {
                let ns = format!("{env}--{team}");
                let key = natural::namespaced(env, &ns, sub["name"].as_str().unwrap());
                let stored = view.get::<ApiSubscription>(&key).unwrap().unwrap();
                let target = stored.links[0].as_ref().map(|k| {
                    let e = view.get::<ApiExposure>(k).unwrap().unwrap();
                    format!("{}/{}", e.record.meta.namespace, e.record.meta.name)
                });
                assert_eq!(target.as_deref(), sub["target"].as_str(), "{ns}/{}", sub["name"]);
            }
        }
    }

    // An approval is visible to the subscriber's and the provider's team.
    let key = natural::namespaced("poc", "poc--assist--copilot", "apisubscription--copilot-gateway--payments-ledger-v2");
    let approval = view.get::<Approval>(&key).unwrap().unwrap();
    let scopes = Approval::scopes(&approval.record, &approval.links);
    assert!(scopes.contains(&Scope::Team { env: "poc".into(), team: "assist--copilot".into() }));
    assert!(scopes.contains(&Scope::Team { env: "poc".into(), team: "payments--ledger".into() }));
    let revision = view.revision().unwrap();
    drop(view);

    // Re-applying the same documents writes nothing.
    let outs = apply(&store, &docs, "v1");
    assert!(outs
        .iter()
        .flatten()
        .all(|o| matches!(o, Outcome::Unchanged | Outcome::Unlinked { written: false } | Outcome::DependencyMissing(_))));
    assert_eq!(store.read().unwrap().revision().unwrap(), revision);

    // Deleting the active exposure unlinks its subscriptions and the approval's provider side;
    // re-adding it links them again.
    let exposure = docs.iter().find(|d| d["kind"] == "ApiExposure" && d["metadata"]["name"] == "ledger-core--payments-ledger-v2").unwrap();
    let src = source(exposure, KindId::ApiExposure);
    store
        .write(now(), |batch| {
            assert_eq!(batch.delete(&src, now()).unwrap(), Outcome::Deleted);
            assert_eq!(batch.delete(&src, now()).unwrap(), Outcome::NotFound);
            Ok(())
        })
        .unwrap();
    let view = store.read().unwrap();
    let sub = natural::namespaced("poc", "poc--assist--copilot", "copilot-gateway--payments-ledger-v2");
    assert_eq!(view.get::<ApiSubscription>(&sub).unwrap().unwrap().links, vec![None]);
    let approval = view.get::<Approval>(&key).unwrap().unwrap();
    assert!(
        !Approval::scopes(&approval.record, &approval.links).contains(&Scope::Team { env: "poc".into(), team: "payments--ledger".into() })
    );
    assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
    drop(view);
    let outs = apply(&store, std::slice::from_ref(exposure), "v2");
    assert_eq!(outs, vec![Some(Outcome::Written)]);
    let view = store.read().unwrap();
    assert!(view.get::<ApiSubscription>(&sub).unwrap().unwrap().links[0].is_some());
    assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
    let revision = view.revision().unwrap();
    drop(view);
    drop(store);

    // Restart: same data, same revision.
    let store = Store::open(dir.path()).unwrap();
    let view = store.read().unwrap();
    assert_eq!(view.revision().unwrap(), revision);
    assert!(view.get::<ApiSubscription>(&sub).unwrap().is_some());
}

#[test]
fn missing_parent_is_not_written_and_a_second_open_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let docs = world_docs();
    let app = docs.iter().find(|d| d["kind"] == "Application").unwrap();
    let outs = apply(&store, std::slice::from_ref(app), "v1");
    match &outs[0] {
        Some(Outcome::DependencyMissing(parents)) => {
            assert_eq!(parents.iter().map(|r| r.kind).collect::<Vec<_>>(), vec![KindId::Team, KindId::Zone])
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(store.read().unwrap().count(KindId::Application, &Scope::All).unwrap(), 0);
    assert!(matches!(Store::open(dir.path()), Err(storage::StorageError::Locked(_))));
}

#[test]
fn source_versions_read_before_a_write_are_never_served_stale() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let docs = world_docs();
    apply(&store, &docs, "v1");
    let zone = docs.iter().find(|d| d["kind"] == "Zone").unwrap().clone();
    let src = source(&zone, KindId::Zone);

    let other = source(docs.iter().find(|d| d["kind"] == "Group").unwrap(), KindId::Group);
    // In one batch: read (remembered), write a new version, read again; then delete and read.
    store
        .write(now(), |batch| {
            assert_eq!(batch.source_version(&src).unwrap().as_deref(), Some("v1"));
            let mut a = Apply { batch, doc: &zone, version: "v2", out: None };
            registry::visit(&mut a);
            assert!(matches!(a.out, Some(Outcome::Unchanged | Outcome::Written)), "{:?}", a.out);
            assert_eq!(batch.source_version(&src).unwrap().as_deref(), Some("v2"));
            assert_eq!(batch.source_version(&src).unwrap().as_deref(), Some("v2"), "read twice");
            // Another object read in between does not answer for this one.
            assert_eq!(batch.source_version(&other).unwrap().as_deref(), Some("v1"));
            assert_eq!(batch.source_version(&src).unwrap().as_deref(), Some("v2"));
            assert_eq!(batch.delete(&src, now()).unwrap(), Outcome::Deleted);
            assert_eq!(batch.source_version(&src).unwrap(), None);
            Ok(())
        })
        .unwrap();
    store
        .write(now(), |batch| {
            assert_eq!(batch.source_version(&src).unwrap(), None);
            assert_eq!(batch.source_version(&other).unwrap().as_deref(), Some("v1"));
            Ok(())
        })
        .unwrap();
}

/// Two source objects whose records have the same natural key (an Api's key is its team and
/// base path, not its name): the first keeps the key, the second waits (`Conflict`) and is
/// written once the first is gone; deleting the second never removes the first's record (found
/// by the user test: a copy's delete took the original's record with it).
#[test]
fn the_first_object_with_a_natural_key_keeps_it_until_it_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let docs = world_docs();
    let retry = apply(&store, &docs, "1");
    // Parents first, as the projector's retries would.
    let pending: Vec<Value> =
        docs.iter().zip(&retry).filter(|(_, o)| matches!(o, Some(Outcome::DependencyMissing(_)))).map(|(d, _)| d.clone()).collect();
    apply(&store, &pending, "1");
    let api = docs.iter().find(|d| d["kind"] == "Api").unwrap().clone();
    let mut copy = api.clone();
    copy["metadata"]["name"] = Value::from(format!("{}-copy", api["metadata"]["name"].as_str().unwrap()));
    let (orig, dup) = (source(&api, KindId::Api), source(&copy, KindId::Api));
    let apis = |store: &Store| store.read().unwrap().count(KindId::Api, &Scope::All).unwrap();
    let before = apis(&store);

    assert_eq!(apply(&store, std::slice::from_ref(&copy), "2"), vec![Some(Outcome::Conflict(orig.clone()))]);
    store
        .write(now(), |batch| {
            assert_eq!(batch.delete(&dup, now()).unwrap(), Outcome::NotFound, "the copy never held the key");
            Ok(())
        })
        .unwrap();
    assert_eq!(apis(&store), before);
    assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());

    // The original goes: the copy takes the key over.
    store
        .write(now(), |batch| {
            assert_eq!(batch.delete(&orig, now()).unwrap(), Outcome::Deleted);
            Ok(())
        })
        .unwrap();
    assert_eq!(apply(&store, std::slice::from_ref(&copy), "2"), vec![Some(Outcome::Written)]);
    assert_eq!(apis(&store), before);
    assert_eq!(apply(&store, std::slice::from_ref(&api), "1"), vec![Some(Outcome::Conflict(dup.clone()))]);
    assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
}

/// Everything a reader of the change log can ask, by position: every object's revisions in both
/// orders and each one's previous revision, every team scope's revisions in both orders, whole
/// and in pages of 7, and the counters.
fn log_reads(store: &Store) -> Vec<String> {
    use std::ops::Bound::{Excluded, Unbounded};
    let view = store.read().unwrap();
    let entries = view.log_after(view.history_stats().unwrap().floor, usize::MAX).unwrap().unwrap();
    let mut out = vec![format!("{} entries", entries.len())];
    let mut objects: Vec<(KindId, schema::Key)> = entries.iter().map(|e| (e.kind, e.key.clone())).collect();
    objects.sort();
    objects.dedup();
    for (kind, key) in &objects {
        for newest_first in [true, false] {
            let positions = view.revisions(*kind, key, (Unbounded, Unbounded), newest_first, usize::MAX).unwrap();
            let previous: Vec<_> = positions
                .iter()
                .map(|p| view.previous_revision(&view.log_entry(*p).unwrap().unwrap()).unwrap().map(|e| e.position))
                .collect();
            out.push(format!("{kind:?} {key:?} {newest_first}: {positions:?} after {previous:?}"));
        }
        out.push(format!("{kind:?} count {}", view.revision_count(*kind).unwrap()));
    }
    let mut scopes: Vec<Scope> = entries
        .iter()
        .flat_map(|e| e.before.iter().chain(e.after.iter()).flatten().cloned())
        .filter(|s| matches!(s, Scope::Team { .. }))
        .collect();
    scopes.sort_by_key(|s| s.key());
    scopes.dedup();
    assert!(scopes.len() > 3, "the world has team scopes");
    for scope in &scopes {
        for newest_first in [true, false] {
            let whole = view.team_revisions(scope, (Unbounded, Unbounded), newest_first, usize::MAX, |_| true).unwrap();
            let mut paged = Vec::new();
            let mut range = (Unbounded, Unbounded);
            loop {
                let page = view.team_revisions(scope, range, newest_first, 7, |k| k != KindId::Zone).unwrap();
                let Some(&(last, _)) = page.last() else { break };
                paged.extend(page);
                range = if newest_first { (Unbounded, Excluded(last)) } else { (Excluded(last), Unbounded) };
            }
            out.push(format!("{scope:?} {newest_first}: {whole:?} paged {paged:?}"));
        }
        for kind in registry::registered() {
            out.push(format!("{scope:?} {kind:?} count {}", view.team_revision_count(scope, kind).unwrap()));
        }
    }
    out
}

/// A load whose batches leave their revisions' index to `index_history` (the writer's initial
/// sync) answers every read of the change log as one that indexes as it goes: before the index
/// step, between its steps and after; a later update indexes what waits first.
#[test]
fn a_load_that_leaves_its_history_index_for_later_reads_the_same_log() {
    let docs = world_docs();
    let load = |loading: bool| {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.set_loading(loading);
        for chunk in docs.chunks(40) {
            apply(&store, chunk, "v1");
        }
        (dir, store)
    };
    let (_eager_dir, eager) = load(false);
    let expected = log_reads(&eager);
    let (_dir, deferred) = load(true);
    assert!(deferred.read().unwrap().unindexed_after().unwrap().is_some());
    assert_eq!(log_reads(&deferred), expected, "before the index step");
    assert_eq!(deferred.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    let mut steps = 0;
    while deferred.index_history(1).unwrap() {
        steps += 1;
        assert_eq!(log_reads(&deferred), expected, "after {steps} index steps");
        assert_eq!(deferred.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    }
    assert!(steps > 2, "the index is written in steps, a commit each ({steps})");
    assert_eq!(deferred.read().unwrap().unindexed_after().unwrap(), None);
    assert_eq!(log_reads(&deferred), expected, "once indexed");

    // A delete while revisions wait indexes them first.
    let (_dir2, waiting) = load(true);
    let deleted: Vec<SourceRef> =
        docs.iter().filter(|d| d["kind"] == "Application").take(3).map(|d| source(d, KindId::Application)).collect();
    for store in [&eager, &waiting] {
        store.write(now(), |b| deleted.iter().try_for_each(|s| b.delete(s, now()).map(drop))).unwrap();
    }
    assert_eq!(waiting.read().unwrap().unindexed_after().unwrap(), None);
    assert_eq!(log_reads(&waiting), log_reads(&eager), "after a delete");
    assert_eq!(waiting.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
}
