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
    /// Objects whose winner must be sent but has no record even after reading its file again,
    /// with the winner's position.
    pub(super) unsent: Vec<(SourceRef, DocumentPosition)>,
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

    /// Reads the files `reread` again whole, with every record (winners to send whose records
    /// are not held), adding those not yet among `changed`. A changed file read without the
    /// records of its unchanged documents stays one change, from its entry before this refresh,
    /// reported once.
    fn reread(&mut self, reread: &BTreeSet<String>, changed: &mut Vec<Changed>, r: &mut Refresh) {
        for rel in reread {
            let path = self.dir.join(rel);
            let stamp = std::fs::metadata(&path).map(|m| Stamp::of(&m)).unwrap_or_default();
            let already = changed.iter().any(|c| &c.rel == rel);
            let reported = (r.new_skips.len(), r.new_ignored.len(), r.files_read);
            if let Some(old) = self.read_file(rel, &path, stamp, true, r, None) {
                if already {
                    r.new_skips.truncate(reported.0);
                    r.new_ignored.truncate(reported.1);
                    r.files_read = reported.2;
                } else {
                    changed.push(Changed { rel: rel.clone(), old });
                }
            }
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
            let mut news: Vec<Indexed> = changed.iter().zip(&olds).map(|(c, old)| self.take_new_docs(c, old)).collect();
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
            self.reread(&plan.reread, &mut changed, r);
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
        for (src, origin) in &plan.unsent {
            tracing::warn!(object = %src, origin = %origin, "record not available; sent when its file can be read");
        }
        self.unsent = plan.unsent.into_iter().map(|(src, _)| src).collect();
        let mut applies = plan.applies;
        applies.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let mut deletes = plan.deletes;
        deletes.sort_by(|a, b| match (a, b) {
            (Change::Delete { src: x, .. }, Change::Delete { src: y, .. }) => x.cmp(y),
            _ => std::cmp::Ordering::Equal,
        });
        r.changes = applies.into_iter().map(|(_, _, c)| c).chain(deletes).collect();
    }

    /// The documents changed file `c` declares now, taken from it (given back once the plan is
    /// made); a partially readable file also keeps, as retained documents, the objects of `old`
    /// it does not declare now.
    fn take_new_docs(&mut self, c: &Changed, old: &Indexed) -> Indexed {
        let Some(f) = self.files.get_mut(&c.rel) else { return Indexed::empty() };
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
        Indexed::new(docs, &self.ids)
    }

    /// Decides, for every object declared in a changed file before or now (and every object not
    /// sent yet), what to send; changes nothing. Reads the unchanged files that declare some of
    /// the same objects first, then decides for each object without further reads or logs
    /// ([`ManifestsState::decide`]). With `streamed`, only duplicates are computed.
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
        // Files declaring some of these objects too, read once each: the plan's only reads.
        let mut others: HashMap<u32, (String, Indexed)> = HashMap::default();
        for group in entries.chunk_by(|a, b| a.0 == b.0) {
            for id in self.claims.files(group[0].0) {
                if !changed_ids.contains(&id) && !others.contains_key(&id) {
                    if let Some(rel) = self.paths.get(&id) {
                        others.insert(id, (rel.clone(), self.indexed_by_id(id)));
                    }
                }
            }
        }
        let round = Round { changed, olds, news, others: &others, streamed, reread_once };
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
            for src in srcs {
                self.decide(h, src, group, &round, &mut plan);
            }
        }
        plan.examined = changed.len() + others.len();
        plan
    }

    /// [`ManifestsState::plan`] for one object `src` (identity hash `h`), without reads, writes
    /// or logs: gathers where it was
    /// declared before and is declared now (`group` lists the changed files that declare an
    /// object of that hash, `others` the unchanged files that do), then records its duplicates
    /// ([`duplicates`]) and what to send ([`action`]) in `plan`.
    pub(super) fn decide(&self, h: u64, src: &SourceRef, group: &[(u64, u32, bool)], round: &Round<'_>, plan: &mut Plan) {
        let Round { changed, olds, news, others, streamed, reread_once } = *round;
        let mut old_winner: Option<(&str, &Document)> = None;
        let mut new_winner: Option<(&str, &Document)> = None;
        // Where the object is declared now, for its duplicates: (path, changed file or other).
        let mut now: Vec<(&str, &Indexed)> = Vec::new();
        for id in self.claims.files(h) {
            let Some((rel, idx)) = others.get(&id) else { continue };
            if let Some(d) = idx.last(h, src) {
                keep_later(&mut old_winner, rel, d);
                keep_later(&mut new_winner, rel, d);
                now.push((rel, idx));
            }
        }
        for &(_, i, is_new) in group {
            let Some(c) = changed.get(i as usize) else { continue };
            let rel = c.rel.as_str();
            let idx = if is_new { &news[i as usize] } else { &olds[i as usize] };
            let Some(d) = idx.last(h, src) else { continue };
            if is_new {
                keep_later(&mut new_winner, rel, d);
                now.push((rel, idx));
            } else {
                keep_later(&mut old_winner, rel, d);
            }
        }
        let count: usize = now.iter().map(|(_, idx)| idx.all(h, src).count()).sum();
        if count > 1 || self.duplicates.contains_key(src) {
            let declared = now.iter().map(|(rel, idx)| (*rel, idx.all(h, src).collect())).collect();
            plan.duplicates.push((src.clone(), duplicates(src, declared)));
        }
        if streamed {
            return;
        }
        // Not told yet: never sent, or not confirmed by the store at start.
        let untold = self.unsent.contains(src) || self.stale_ids.contains(&h);
        match action(old_winner.map(|(_, d)| d), new_winner, untold, reread_once) {
            Action::Keep => {}
            Action::Delete(old) => {
                plan.deletes.push(Change::Delete { src: src.clone(), origin: Arc::from(old.origin.to_string()), token: None })
            }
            Action::Apply(d, record) => {
                plan.applies.push((self.handlers.position(src.kind), d.origin.clone(), apply_of(d, record.clone())))
            }
            Action::Reread(rel) => {
                plan.reread.insert(rel.to_string());
            }
            Action::Unsent(d) => plan.unsent.push((src.clone(), d.origin.clone())),
        }
    }
}

/// What [`ManifestsState::decide`] reads of one round of a refresh's [`ManifestsState::plan`].
#[derive(Clone, Copy)]
pub(super) struct Round<'a> {
    /// The files read, added or removed.
    pub(super) changed: &'a [Changed],
    /// Their documents before, by position in `changed`.
    pub(super) olds: &'a [Indexed],
    /// Their documents now, by position in `changed`.
    pub(super) news: &'a [Indexed],
    /// Unchanged files that declare some of the same objects: file id → (path, documents).
    pub(super) others: &'a HashMap<u32, (String, Indexed)>,
    /// After a streamed cold start: only duplicates are computed.
    pub(super) streamed: bool,
    /// The files of winners without records were read again already.
    pub(super) reread_once: bool,
}

/// Keeps in `winner` the declaration in the lexically later file (files never share a path, so
/// `>` decides): the document that wins among an object's declarations.
fn keep_later<'a>(winner: &mut Option<(&'a str, &'a Document)>, rel: &'a str, d: &'a Document) {
    if winner.is_none_or(|(w, _)| rel > w) {
        *winner = Some((rel, d));
    }
}

/// The duplicates of `src` from its declarations now (`(file, its documents of src in file
/// order)`, any order of files): in path order, each declaration loses to the next one.
pub(super) fn duplicates(src: &SourceRef, mut declared: Vec<(&str, Vec<&Document>)>) -> Vec<Duplicate> {
    declared.sort_by(|a, b| a.0.cmp(b.0));
    let all: Vec<&Document> = declared.into_iter().flat_map(|(_, docs)| docs).collect();
    all.windows(2).map(|p| Duplicate { src: src.clone(), loser: p[0].origin.clone(), winner: p[1].origin.clone() }).collect()
}

/// What a refresh does for one object ([`action`]).
pub(super) enum Action<'a> {
    /// Nothing to send: the store already has the winner, or the winner is skipped (the stored
    /// record, if any, stays under its previous version).
    Keep,
    /// Declared before and not now: delete it (the old winning document).
    Delete(&'a Document),
    /// Send the new winning document with its record.
    Apply(&'a Document, &'a Arc<dyn Prepared>),
    /// The new winner's record is not held: read its file (this path) again.
    Reread(&'a str),
    /// The record is not held even after reading its file again: sent when the file can be read.
    Unsent(&'a Document),
}

/// Decides what to send for one object from its winning document before (`old`) and now
/// (`new`, with its file). `untold`: the writer was never told of the object, or the store has
/// not confirmed it since the start, so an unchanged winner is sent anyway. `reread_once`: the
/// files of winners without records were read again already in this refresh.
pub(super) fn action<'a>(old: Option<&'a Document>, new: Option<(&'a str, &'a Document)>, untold: bool, reread_once: bool) -> Action<'a> {
    let Some((rel, d)) = new else {
        return old.map_or(Action::Keep, Action::Delete);
    };
    let told = !untold && old.is_some_and(|o| !o.skipped && o.version == d.version);
    if d.skipped || told {
        return Action::Keep;
    }
    match &d.record {
        Some(record) => Action::Apply(d, record),
        None if !reread_once => Action::Reread(rel),
        None => Action::Unsent(d),
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
    Change::Apply {
        src: (*d.src).clone(),
        version: d.version.hex(),
        record,
        origin: Arc::from(d.origin.to_string()),
        token: None,
        authoritative: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::manifests::{scan_text, Version};

    /// Group `g` as declared at document `n` of `file`, translated (its record held).
    fn declared(file: &str, n: usize, display: &str) -> Document {
        let handlers = Handlers::new(&Features::default());
        let ctx = Context { now: schema::Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap(), features: Features::default() };
        let text = format!("apiVersion: organization.cp.ei.telekom.de/v1\nkind: Group\nmetadata: {{name: g, namespace: poc}}\nspec: {{displayName: {display}}}\n");
        let mut d = scan_text(file, &text, false, &handlers, &ctx).docs.remove(0);
        d.origin.document = n;
        d
    }

    /// The action as `keep`, `delete <file>#<doc>`, `apply <file>#<doc>`, `reread <file>`,
    /// `unsent <file>#<doc>`.
    fn summary(a: Action<'_>) -> String {
        let at = |d: &Document| format!("{}#{}", d.origin.file, d.origin.document);
        match a {
            Action::Keep => "keep".into(),
            Action::Delete(d) => format!("delete {}", at(d)),
            Action::Apply(d, _) => format!("apply {}", at(d)),
            Action::Reread(rel) => format!("reread {rel}"),
            Action::Unsent(d) => format!("unsent {}", at(d)),
        }
    }

    #[test]
    fn an_object_is_sent_when_new_or_changed_and_kept_when_the_store_has_it() {
        let old = declared("a.yaml", 1, "G");
        let same = declared("a.yaml", 1, "G");
        let changed = declared("b.yaml", 2, "Other");
        assert_eq!(old.version, same.version);
        assert_ne!(old.version, changed.version);
        assert_eq!(summary(action(None, Some(("a.yaml", &same)), false, false)), "apply a.yaml#1", "new");
        assert_eq!(summary(action(Some(&old), Some(("a.yaml", &same)), false, false)), "keep", "unchanged and told");
        assert_eq!(summary(action(Some(&old), Some(("a.yaml", &same)), true, false)), "apply a.yaml#1", "unchanged but untold");
        assert_eq!(summary(action(Some(&old), Some(("b.yaml", &changed)), false, false)), "apply b.yaml#2", "changed");
        assert_eq!(summary(action(Some(&old), None, false, false)), "delete a.yaml#1", "no longer declared");
        assert_eq!(summary(action(None, None, true, false)), "keep", "never declared");
    }

    #[test]
    fn a_skipped_winner_keeps_the_stored_record_and_a_skipped_old_one_is_replaced() {
        let old = declared("a.yaml", 1, "G");
        let skipped = Document { record: None, skipped: true, ..declared("a.yaml", 1, "G") };
        assert_eq!(summary(action(Some(&old), Some(("a.yaml", &skipped)), false, false)), "keep");
        let was_skipped = Document { skipped: true, ..declared("a.yaml", 1, "G") };
        assert_eq!(summary(action(Some(&was_skipped), Some(("a.yaml", &old)), false, false)), "apply a.yaml#1");
    }

    #[test]
    fn a_winner_without_its_record_is_read_again_once_then_left_unsent() {
        let old = declared("a.yaml", 1, "G");
        let unread = Document { record: None, version: Version([7; 32]), ..declared("z.yaml", 3, "G") };
        assert_eq!(summary(action(Some(&old), Some(("z.yaml", &unread)), false, false)), "reread z.yaml");
        assert_eq!(summary(action(Some(&old), Some(("z.yaml", &unread)), false, true)), "unsent z.yaml#3");
    }

    #[test]
    fn the_declaration_in_the_later_file_wins() {
        let (a, b, c) = (declared("a.yaml", 1, "A"), declared("b.yaml", 1, "B"), declared("c.yaml", 1, "C"));
        let mut winner = None;
        for (rel, d) in [("b.yaml", &b), ("c.yaml", &c), ("a.yaml", &a)] {
            keep_later(&mut winner, rel, d);
        }
        assert_eq!(winner.map(|(rel, _)| rel), Some("c.yaml"));
    }

    #[test]
    fn duplicates_pair_each_declaration_with_the_next_in_path_order() {
        let src = SourceRef { kind: KindId::Group, namespace: "poc".into(), name: "g".into() };
        let (b1, b2, a1, c1) =
            (declared("b.yaml", 1, "B"), declared("b.yaml", 2, "B2"), declared("a.yaml", 1, "A"), declared("c.yaml", 4, "C"));
        let found = duplicates(&src, vec![("c.yaml", vec![&c1]), ("b.yaml", vec![&b1, &b2]), ("a.yaml", vec![&a1])]);
        let at = |p: &DocumentPosition| format!("{}#{}", p.file, p.document);
        let pairs: Vec<String> = found.iter().map(|d| format!("{} < {}", at(&d.loser), at(&d.winner))).collect();
        assert_eq!(pairs, ["a.yaml#1 < b.yaml#1", "b.yaml#1 < b.yaml#2", "b.yaml#2 < c.yaml#4"]);
        assert!(found.iter().all(|d| d.src == src));
        assert!(duplicates(&src, vec![("a.yaml", vec![&a1])]).is_empty(), "one declaration has no duplicate");
    }
}
