//! The diff of a refresh: which documents of the files read, added or removed win, and the
//! changes sent for them (`plan` decides, `diff` applies).

use super::*;

/// A file read, added or removed in this refresh.
pub(super) struct Changed {
    pub(super) rel: String,
    /// The entry it replaced (`None`: a new file).
    pub(super) old: Option<FileEntry>,
}

/// What the diff decided, before anything is changed.
#[derive(Default)]
pub(super) struct Plan {
    pub(super) applies: Vec<(usize, DocumentPosition, Change)>,
    pub(super) deletes: Vec<Change>,
    /// Unchanged files to read again for records of winners to send.
    pub(super) reread: BTreeSet<String>,
    /// Per examined object, its duplicates in the new state.
    pub(super) duplicates: Vec<(SourceRef, Vec<Duplicate>)>,
    /// Objects whose winner must be sent but has no record even after reading its file again.
    pub(super) unsent: Vec<SourceRef>,
    pub(super) examined: usize,
}

impl ManifestsState {
    /// The documents of the entry a changed file replaced, the retained ones included.
    pub(super) fn old_docs(&self, c: &Changed) -> Vec<Document> {
        match &c.old {
            None => Vec::new(),
            Some(old) => self.effective_docs(&c.rel, old),
        }
    }

    /// Computes the changes of the files in `changed` (see the module docs), updates the claims
    /// index, the duplicates and the entries, and fills `r`. After a streamed cold start
    /// (`streamed`), every winner was sent while its file was read: only the index and the
    /// duplicates are brought up to date.
    pub(super) fn diff(&mut self, mut changed: Vec<Changed>, streamed: bool, r: &mut Refresh) {
        let mut reread_once = false;
        let (plan, olds, news) = loop {
            // The old and new documents of every changed file. A partially readable file keeps,
            // as retained documents, the objects it held before that it does not declare now.
            let olds: Vec<Indexed> = changed.iter().map(|c| Indexed::new(self.old_docs(c), &self.ids)).collect();
            let mut news: Vec<Indexed> = Vec::with_capacity(changed.len());
            for (c, old) in changed.iter().zip(&olds) {
                let Some(f) = self.files.get_mut(&c.rel) else {
                    news.push(Indexed::empty());
                    continue;
                };
                let mut docs = match std::mem::replace(&mut f.docs, Docs::Held { docs: Vec::new(), written: None }) {
                    Docs::Held { docs, .. } => docs,
                    Docs::Stored => Vec::new(),
                };
                f.retained.clear();
                if f.partial {
                    let now: HashSet<&SourceRef> = docs.iter().map(|d| d.src.as_ref()).collect();
                    let mut kept: Vec<Document> = Vec::new();
                    let mut done: HashSet<&SourceRef> = HashSet::default();
                    for d in &old.docs {
                        if now.contains(d.src.as_ref()) || !done.insert(d.src.as_ref()) {
                            continue;
                        }
                        if let Some(last) = old.last(self.ids.of(&d.src), &d.src) {
                            // Kept, but not sendable (its text cannot be read): like a skipped
                            // document, the stored record stays until the file is readable.
                            kept.push(Document { record: None, skipped: true, ..last.clone() });
                        }
                    }
                    f.retained = kept.clone();
                    docs.extend(kept);
                }
                news.push(Indexed::new(docs, &self.ids));
            }
            let plan = self.plan(&changed, &olds, &news, streamed, reread_once);
            // Give the new documents back before anything else reads the entries.
            for (c, new) in changed.iter().zip(news.iter_mut()) {
                if let Some(f) = self.files.get_mut(&c.rel) {
                    let mut docs = std::mem::take(&mut new.docs);
                    docs.truncate(docs.len() - f.retained.len());
                    f.docs = Docs::Held { docs, written: None };
                }
            }
            if plan.reread.is_empty() || reread_once {
                break (plan, olds, news);
            }
            // Winners to send live in files not read now: read them again (their records) and
            // decide once more with them among the changed files.
            reread_once = true;
            for rel in &plan.reread {
                let path = self.dir.join(rel);
                let stamp = std::fs::metadata(&path).map(|m| Stamp::of(&m)).unwrap_or_default();
                if let Some(old) = self.read_file(rel, &path, stamp, true, r, None) {
                    changed.push(Changed { rel: rel.clone(), old });
                }
            }
        };
        r.files_examined = plan.examined;
        // The claims index: each changed file's old identities out, its new ones in.
        for ((c, old), new) in changed.iter().zip(&olds).zip(&news) {
            let old_id = c.old.as_ref().map(|o| o.id);
            if let Some(id) = old_id {
                for h in old.hashes() {
                    self.claims.remove(h, id);
                }
            }
            if let Some(id) = self.files.get(&c.rel).map(|f| f.id) {
                for h in new.hashes() {
                    self.claims.add(h, id);
                }
            }
        }
        // Translated records are not kept: the changes hold them until they are written.
        for c in &changed {
            if let Some(Docs::Held { docs, .. }) = self.files.get_mut(&c.rel).map(|f| &mut f.docs) {
                for d in docs.iter_mut() {
                    d.record = None;
                }
            }
        }
        let mut new_duplicates = Vec::new();
        for (src, dups) in plan.duplicates {
            let before = self.duplicates.remove(&src).unwrap_or_default();
            new_duplicates.extend(dups.iter().filter(|d| !before.contains(d)).cloned());
            if !dups.is_empty() {
                self.duplicates.insert(src, dups);
            }
        }
        new_duplicates.sort_by(|a, b| a.winner.cmp(&b.winner));
        r.new_duplicates = new_duplicates;
        self.unsent = plan.unsent.into_iter().collect();
        let mut applies = plan.applies;
        applies.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let mut deletes = plan.deletes;
        deletes.sort_by(|a, b| match (a, b) {
            (Change::Delete { src: x, .. }, Change::Delete { src: y, .. }) => x.cmp(y),
            _ => std::cmp::Ordering::Equal,
        });
        r.changes = applies.into_iter().map(|(_, _, c)| c).chain(deletes).collect();
    }

    /// Decides, for every object declared in a changed file before or now (and every object not
    /// sent yet), what to send; changes nothing. With `streamed`, only duplicates are computed.
    pub(super) fn plan(&self, changed: &[Changed], olds: &[Indexed], news: &[Indexed], streamed: bool, reread_once: bool) -> Plan {
        let mut plan = Plan::default();
        let changed_ids: HashSet<u32> =
            changed.iter().flat_map(|c| c.old.as_ref().map(|o| o.id).into_iter().chain(self.files.get(&c.rel).map(|f| f.id))).collect();
        // (identity hash, changed file, whether in its new state), grouped by hash: for every
        // object, the changed files that declare it, without a pass over every file per object.
        let mut entries: Vec<(u64, u32, bool)> = Vec::new();
        for (i, (old, new)) in olds.iter().zip(news).enumerate() {
            entries.extend(old.hashes().map(|h| (h, i as u32, false)));
            entries.extend(new.hashes().map(|h| (h, i as u32, true)));
        }
        let unsent: Vec<(u64, &SourceRef)> = self.unsent.iter().map(|s| (self.ids.of(s), s)).collect();
        entries.extend(unsent.iter().map(|(h, _)| (*h, u32::MAX, false)));
        entries.sort_unstable();
        entries.dedup();
        // Files declaring some of these objects too, read once each.
        let mut others: HashMap<u32, (String, Indexed)> = HashMap::default();
        for group in entries.chunk_by(|a, b| a.0 == b.0) {
            let h = group[0].0;
            let side = |&(_, i, new): &(u64, u32, bool)| -> Option<&Indexed> {
                match (i, new) {
                    (u32::MAX, _) => None,
                    (i, true) => news.get(i as usize),
                    (i, false) => olds.get(i as usize),
                }
            };
            // The objects of this hash (more than one only for a hash collision).
            let mut srcs: Vec<&SourceRef> = Vec::with_capacity(1);
            for idx in group.iter().filter_map(side) {
                for d in idx.all_hash(h) {
                    if !srcs.contains(&d.src.as_ref()) {
                        srcs.push(d.src.as_ref());
                    }
                }
            }
            for (uh, src) in &unsent {
                if *uh == h && !srcs.contains(src) {
                    srcs.push(src);
                }
            }
            for id in self.claims.files(h) {
                if !changed_ids.contains(&id) && !others.contains_key(&id) {
                    if let Some(rel) = self.paths.get(&id) {
                        others.insert(id, (rel.clone(), self.indexed_by_id(id)));
                    }
                }
            }
            for src in srcs {
                self.decide(h, src, group, changed, olds, news, &others, streamed, reread_once, &mut plan);
            }
        }
        plan.examined = changed.len() + others.len();
        plan
    }

    /// [`ManifestsState::plan`] for one object `src` (identity hash `h`); `group` lists the
    /// changed files that declare an object of that hash (see `plan`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decide(
        &self,
        h: u64,
        src: &SourceRef,
        group: &[(u64, u32, bool)],
        changed: &[Changed],
        olds: &[Indexed],
        news: &[Indexed],
        others: &HashMap<u32, (String, Indexed)>,
        streamed: bool,
        reread_once: bool,
        plan: &mut Plan,
    ) {
        // The winning document of the old and of the new state: (path, document). Files never
        // share a path, so `>` decides.
        let mut old_w: Option<(&str, &Document)> = None;
        let mut new_w: Option<(&str, &Document)> = None;
        // Where the object is declared now, for its duplicates: (path, changed file or other).
        let mut now: Vec<(&str, &Indexed)> = Vec::new();
        for id in self.claims.files(h) {
            let Some((rel, idx)) = others.get(&id) else { continue };
            if let Some(d) = idx.last(h, src) {
                if old_w.is_none_or(|w| rel.as_str() > w.0) {
                    old_w = Some((rel, d));
                }
                if new_w.is_none_or(|w| rel.as_str() > w.0) {
                    new_w = Some((rel, d));
                }
                now.push((rel, idx));
            }
        }
        for &(_, i, is_new) in group {
            let Some(c) = changed.get(i as usize) else { continue };
            let rel = c.rel.as_str();
            if is_new {
                if let Some(d) = news[i as usize].last(h, src) {
                    if new_w.is_none_or(|w| rel > w.0) {
                        new_w = Some((rel, d));
                    }
                    now.push((rel, &news[i as usize]));
                }
            } else if let Some(d) = olds[i as usize].last(h, src) {
                if old_w.is_none_or(|w| rel > w.0) {
                    old_w = Some((rel, d));
                }
            }
        }
        let declared: usize = now.iter().map(|(_, idx)| idx.all(h, src).count()).sum();
        if declared > 1 || self.duplicates.contains_key(src) {
            now.sort_by(|a, b| a.0.cmp(b.0));
            let all: Vec<&Document> = now.iter().flat_map(|(_, idx)| idx.all(h, src)).collect();
            let dups =
                all.windows(2).map(|p| Duplicate { src: src.clone(), loser: p[0].origin.clone(), winner: p[1].origin.clone() }).collect();
            plan.duplicates.push((src.clone(), dups));
        }
        if streamed {
            return;
        }
        let Some((rel, d)) = new_w else {
            if let Some((_, d)) = old_w {
                plan.deletes.push(Change::Delete { src: src.clone(), origin: Arc::from(d.origin.to_string()), token: None });
            }
            return;
        };
        if d.skipped {
            // Skipped: the previous record (if any) stays, under its previous version.
            return;
        }
        // Not told: never sent yet, or not confirmed by the store at start.
        let told =
            !self.unsent.contains(src) && !self.stale_ids.contains(&h) && old_w.is_some_and(|(_, o)| !o.skipped && o.version == d.version);
        if told {
            return;
        }
        match &d.record {
            Some(record) => plan.applies.push((self.handlers.position(src.kind), d.origin.clone(), apply_of(d, record.clone()))),
            None if !reread_once => {
                plan.reread.insert(rel.to_string());
            }
            None => {
                // Only when its file could not be read again just now.
                tracing::warn!(object = %src, origin = %d.origin, "record not available; sent when its file can be read");
                plan.unsent.push(src.clone());
            }
        }
    }
}

/// Sends the objects of a block of just-scanned documents (the later document of an object
/// within the block wins), in registry order, and drops the block's translated records. Returns
/// how many changes were sent.
pub(super) fn send_docs(handlers: &Handlers, docs: &mut [Document], send: &mut dyn FnMut(Change)) -> usize {
    // Whether each document is the last of its object in the block, from the end.
    let mut seen: HashSet<&SourceRef> = HashSet::with_capacity_and_hasher(docs.len(), Default::default());
    let mut is_last: Vec<bool> = docs.iter().rev().map(|d| seen.insert(d.src.as_ref())).collect();
    is_last.reverse();
    let mut applies: Vec<(usize, usize, Change)> = Vec::with_capacity(seen.len());
    drop(seen);
    for (i, d) in docs.iter().enumerate() {
        if d.skipped || !is_last[i] {
            continue;
        }
        let Some(record) = &d.record else { continue };
        applies.push((handlers.position(d.src.kind), i, apply_of(d, record.clone())));
    }
    for d in docs.iter_mut() {
        d.record = None;
    }
    applies.sort_by_key(|a| (a.0, a.1));
    let n = applies.len();
    for (_, _, c) in applies {
        send(c);
    }
    n
}

/// The change that sends document `d` with its translated `record`.
pub(super) fn apply_of(d: &Document, record: Arc<dyn Prepared>) -> Change {
    Change::Apply { src: (*d.src).clone(), version: d.version.hex(), record, origin: Arc::from(d.origin.to_string()), token: None }
}
