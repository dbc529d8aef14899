//! Catalogue full-text search (derived data: ARCHITECTURE.md, `storage`, "Catalogue search"): a tantivy index over the
//! catalogue kinds ([`schema::catalogue`]: Api, EventType, McpServer, AgentCard) in
//! `DATA_DIR/search/`, next to `readmodel.redb`.
//!
//! **The index is derived data.** redb is the truth; the index follows it:
//! - One long-lived [`IndexWriter`] lives on the indexer thread ([`Catalogue::open`]). It follows
//!   the store through [`Store::subscribe`]: every commit names the records it wrote or removed
//!   ([`crate::Committed`]); the thread re-reads those records from a fresh [`crate::ReadView`]
//!   (deleting the document, re-adding it when the record still exists) and commits at most
//!   every [`COMMIT_INTERVAL`], so a change is searchable well within one second.
//! - Each tantivy commit's payload ([`tantivy::indexer::PreparedCommit::set_payload`]) is
//!   `cp-search-v2:<revision>`: the store revision whose changes it contains.
//! - On open, a missing, unreadable or stale index (payload ≠ the store's revision) is rebuilt
//!   from one read view. A crash between a store commit and the index commit therefore costs a
//!   rebuild, never a wrong answer after restart.
//! - Between commits the index may still list a deleted record: callers resolve every hit
//!   against their own read view and drop what is gone (the GraphQL layer does).
//!
//! **Matching.** Texts and queries become words by one rule, [`crate::analysis`] (letters and
//! digits, accents and case folded, long words cut to 64 bytes). Every query
//! word must match (AND) one of three field classes (title ×4, tag ×2, body ×1): exactly (×1.0),
//! as a prefix when it is the last word (search-as-you-type, ×0.6), or within an edit distance
//! that grows with its length (×0.3; [`edit_distance`]: 0 for ≤ 2 characters, 1 for 3–5, 2
//! for longer; a transposition counts one; only the first [`MAX_FUZZY_WORDS`] words). Scores are constant per tier, so an exact match
//! always outranks a fuzzy one in the same field class. A query equal to an entry's base path or
//! event type (case-insensitive) adds [`PATH_BONUS`]: that entry ranks first. A query without
//! a word (no letter or digit: empty, blank, `*`, punctuation, emoji) does not narrow: every
//! entry that passes the request's filters matches, with score 0.
//!
//! **Architecture invariant:** generic over [`Catalogued`]; no kind has code here.

use crate::analysis::{analyze, words, WordTokenizer};
use crate::{Committed, ReadView, StorageError, Store};
use schema::catalogue::{self, CatalogueDoc, CatalogueVisitor, Catalogued, FieldClass};
use schema::{Key, KindId};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{
    AllQuery, AutomatonWeight, BooleanQuery, ConstScoreQuery, DfaWrapper, DisjunctionMaxQuery, EnableScoring, FuzzyTermQuery, Occur, Query,
    TermQuery, Weight,
};
use tantivy::schema::{Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING};
use tantivy::tokenizer::{LowerCaser, RawTokenizer, TextAnalyzer};
use tantivy::{DocAddress, Index, IndexReader, IndexWriter, ReloadPolicy, Score, TantivyDocument, Term};

/// The index directory inside a data directory.
pub const SEARCH_DIR: &str = "search";

/// Longest time between a store commit and the index commit that contains it (plus the
/// commit itself, typically a few milliseconds).
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(250);

/// How many words of a query (the first ones) may match within an edit distance; later words
/// match exactly or, the last one, as a prefix. Callers bound the number of words
/// (`graphql.maxSearchTerms`).
pub const MAX_FUZZY_WORDS: usize = 4;

/// Added to the score of the entry whose base path / event type equals the whole query.
pub const PATH_BONUS: Score = 1000.0;

/// Payload prefix; another prefix (an older layout) means rebuild.
/// v2: words analysed by [`crate::analysis`] (accents folded, long words cut instead of dropped).
const PAYLOAD_PREFIX: &str = "cp-search-v2:";
/// Memory budget of the index writer (bytes).
const WRITER_HEAP: usize = 50_000_000;
const WORDS: &str = "cp_words";
const RAW: &str = "cp_raw";
/// Hits asked of the first collector pass at most (more only when the caller wants more).
const FIRST_PASS: usize = 1024;
const W_TITLE: Score = 4.0;
const W_TAG: Score = 2.0;
const W_BODY: Score = 1.0;
const EXACT: Score = 1.0;
const PREFIX: Score = 0.6;
const FUZZY: Score = 0.3;

/// A search index failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// tantivy failed (I/O in the index directory, a corrupt index). Reaction: delete
    /// `DATA_DIR/search/`; it is rebuilt on the next start.
    #[error("search index error: {0}")]
    Index(String),
    /// Reading the store failed while (re)building the index.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Writing the index failed on the volume (no space left, an I/O error; a writer thread
    /// killed by one). Reaction: the index keeps its last commit and the write is retried.
    #[error("search index write failed: {0}")]
    Io(String),
}

impl From<tantivy::TantivyError> for SearchError {
    fn from(e: tantivy::TantivyError) -> SearchError {
        match e {
            tantivy::TantivyError::IoError(_) | tantivy::TantivyError::ErrorInThread(_) | tantivy::TantivyError::OpenWriteError(_) => {
                SearchError::Io(e.to_string())
            }
            e => SearchError::Index(e.to_string()),
        }
    }
}

#[derive(Clone, Copy)]
struct Fields {
    /// hex(kind code · natural key): unique per record, stored.
    id: Field,
    kind: Field,
    env: Field,
    active: Field,
    path: Field,
    title: Field,
    tag: Field,
    body: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let words = TextOptions::default()
        .set_indexing_options(TextFieldIndexing::default().set_tokenizer(WORDS).set_index_option(IndexRecordOption::Basic));
    let raw = TextOptions::default()
        .set_indexing_options(TextFieldIndexing::default().set_tokenizer(RAW).set_index_option(IndexRecordOption::Basic));
    let f = Fields {
        id: b.add_text_field("id", STRING | STORED),
        kind: b.add_text_field("kind", STRING),
        env: b.add_text_field("env", STRING),
        active: b.add_text_field("active", STRING),
        path: b.add_text_field("path", raw),
        title: b.add_text_field("title", words.clone()),
        tag: b.add_text_field("tag", words.clone()),
        body: b.add_text_field("body", words),
    };
    (b.build(), f)
}

fn register_tokenizers(index: &Index) {
    index.tokenizers().register(WORDS, TextAnalyzer::builder(WordTokenizer).build());
    index.tokenizers().register(RAW, TextAnalyzer::builder(RawTokenizer::default()).filter(LowerCaser).build());
}

fn doc_id(kind: KindId, key: &Key) -> String {
    let mut s = String::with_capacity(2 + 2 * key.as_bytes().len());
    for b in std::iter::once(kind.code()).chain(key.as_bytes().iter().copied()) {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn parse_id(s: &str) -> Option<(KindId, Key)> {
    if !s.len().is_multiple_of(2) || s.len() < 2 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect();
    let bytes = bytes?;
    Some((KindId::from_code(bytes[0])?, Key::from_bytes(bytes[1..].to_vec())))
}

fn document(f: &Fields, kind: KindId, key: &Key, doc: &CatalogueDoc) -> TantivyDocument {
    let mut d = TantivyDocument::default();
    d.add_text(f.id, doc_id(kind, key));
    d.add_text(f.kind, kind.name());
    d.add_text(f.env, &doc.environment);
    d.add_text(f.active, if doc.active { "true" } else { "false" });
    d.add_text(f.path, &doc.path);
    for field in &doc.fields {
        let target = match field.class {
            FieldClass::Title => f.title,
            FieldClass::Tag => f.tag,
            FieldClass::Body => f.body,
        };
        d.add_text(target, &field.text);
    }
    d
}

type LoadFn = fn(&ReadView, &Key) -> Result<Option<CatalogueDoc>, StorageError>;

fn load<K: Catalogued>(view: &ReadView, key: &Key) -> Result<Option<CatalogueDoc>, StorageError> {
    Ok(view.get::<K>(key)?.map(|s| K::catalogue_doc(&s.record)))
}

/// The loader of each catalogue kind.
fn loaders() -> Vec<(KindId, LoadFn)> {
    struct V(Vec<(KindId, LoadFn)>);
    impl CatalogueVisitor for V {
        fn visit<K: Catalogued>(&mut self) {
            self.0.push((K::ID, load::<K>));
        }
    }
    let mut v = V(Vec::new());
    catalogue::visit(&mut v);
    v.0
}

/// Where a catalogue index's entries are read from.
#[derive(Clone, Copy)]
enum Records<'a> {
    /// A store, as of a read view.
    Store(&'a ReadView),
    /// A snapshot being restored: the records its store will hold.
    Snapshot(&'a crate::snapshot::Snapshot),
}

/// Adds every catalogue entry of `records` to `writer` (which must be empty). Returns the count.
fn add_all(writer: &IndexWriter, f: &Fields, records: Records<'_>) -> Result<usize, SearchError> {
    struct V<'a> {
        writer: &'a IndexWriter,
        f: &'a Fields,
        records: Records<'a>,
        n: usize,
        err: Option<SearchError>,
    }
    impl CatalogueVisitor for V<'_> {
        fn visit<K: Catalogued>(&mut self) {
            if self.err.is_some() {
                return;
            }
            let all = match self.records {
                Records::Store(view) => view.with_prefix::<K>(&Key::from_bytes(Vec::new())),
                Records::Snapshot(snap) => snap.stored::<K>(),
            };
            let all = match all {
                Ok(all) => all,
                Err(e) => return self.err = Some(e.into()),
            };
            for s in all {
                if let Err(e) = self.writer.add_document(document(self.f, K::ID, &s.key, &K::catalogue_doc(&s.record))) {
                    return self.err = Some(e.into());
                }
                self.n += 1;
            }
        }
    }
    let mut v = V { writer, f, records, n: 0, err: None };
    catalogue::visit(&mut v);
    match v.err {
        Some(e) => Err(e),
        None => Ok(v.n),
    }
}

/// What a search asks for.
#[derive(Clone, Debug, Default)]
pub struct SearchRequest<'a> {
    /// The user's query text.
    pub query: &'a str,
    /// Only these kinds (empty = every catalogue kind).
    pub kinds: &'a [KindId],
    /// Only this environment (`None` = every environment, for admins).
    pub environment: Option<&'a str>,
    /// Only active entries (one per base path / event type and environment).
    pub active_only: bool,
}

/// One hit.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// The record's kind.
    pub kind: KindId,
    /// Its natural key.
    pub key: Key,
    /// Relevance (higher first).
    pub score: Score,
}

/// The best hits of a search.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hits {
    /// Hits ordered by score (descending), then kind code, then natural key. Closed under ties:
    /// every matching document not listed scores strictly lower than every listed one.
    pub hits: Vec<Hit>,
    /// Number of matching documents (may include records deleted since the last commit).
    pub total: usize,
}

/// The catalogue search index of one data directory. Cheap to clone (shared handle).
#[derive(Clone)]
pub struct Catalogue(Arc<CatalogueState>);

/// Where a [`Store`] finds its open [`Catalogue`] (held weakly: no reference cycle, since the
/// catalogue holds the store).
#[derive(Default)]
pub(crate) struct Slot(std::sync::RwLock<Option<std::sync::Weak<CatalogueState>>>);

impl Slot {
    pub(crate) fn get(&self) -> Option<Catalogue> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|w| w.upgrade()).map(Catalogue)
    }

    fn set(&self, shared: &Arc<CatalogueState>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::downgrade(shared));
    }
}

struct CatalogueState {
    reader: IndexReader,
    f: Fields,
    dir: PathBuf,
    indexer: Mutex<Option<Indexer>>,
    /// Revision of the last index commit.
    committed: Arc<CommittedRevision>,
    /// Why the last commit failed, until one succeeds ([`Catalogue::failure`]).
    failure: Arc<Mutex<Option<String>>>,
}

/// Called with the revision after each index commit ([`Catalogue::on_commit`]).
type CommitHook = Box<dyn Fn(u64) + Send + Sync>;

/// The revision of the last index commit, which readers can wait on.
struct CommittedRevision {
    revision: Mutex<u64>,
    grew: Condvar,
    hooks: Mutex<Vec<CommitHook>>,
}

impl CommittedRevision {
    fn new(revision: u64) -> CommittedRevision {
        CommittedRevision { revision: Mutex::new(revision), grew: Condvar::new(), hooks: Mutex::new(Vec::new()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, u64> {
        // A plain number: a panic while holding the lock cannot leave it inconsistent.
        self.revision.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get(&self) -> u64 {
        *self.lock()
    }

    fn set(&self, revision: u64) {
        *self.lock() = revision;
        self.grew.notify_all();
        for hook in self.hooks.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            hook(revision);
        }
    }

    /// Waits until the revision is above `revision` or `timeout` passed; the revision then.
    fn wait_after(&self, revision: u64, timeout: Duration) -> u64 {
        let guard = self.lock();
        let (guard, _) = self.grew.wait_timeout_while(guard, timeout, |now| *now <= revision).unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

struct Indexer {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

/// What [`Catalogue::open`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opened {
    /// The index matched the store revision.
    UpToDate,
    /// The index was missing, unreadable or stale and was rebuilt with this many entries.
    Rebuilt(usize),
    /// The index is stale and its rebuild failed on the volume (a full disk): it answers as of
    /// its last commit, and the indexer thread rebuilds it once it can (retried like a failed
    /// commit; readiness waits for it on a first start).
    RebuildPending,
}

impl Catalogue {
    /// Opens (creating) the index in `dir` (normally `DATA_DIR/search/`), rebuilds it from
    /// `store` when it is missing, unreadable or stale, and starts the indexer thread that
    /// follows the store. Blocks for the rebuild (seconds for 100k entries).
    ///
    /// # Errors
    /// [`SearchError::Index`] when the directory cannot be created or written,
    /// [`SearchError::Storage`] when the store cannot be read.
    pub fn open(dir: &Path, store: &Store) -> Result<(Catalogue, Opened), SearchError> {
        // Subscribe before reading the revision, so no commit falls between the two.
        let feed = store.subscribe();
        std::fs::create_dir_all(dir).map_err(|e| SearchError::Index(format!("creating {}: {e}", dir.display())))?;
        let (schema, f) = schema();
        let (writer, reader, revision, opened) = match open_at_revision(dir, &schema, f, store) {
            Ok(opened) => opened,
            Err(SearchError::Index(e)) => {
                // Derived data: a damaged index (a file cut short, a foreign schema) is rebuilt
                // from the store rather than keeping the server from starting.
                tracing::warn!(dir = %dir.display(), error = %e, "search index unreadable: recreating it");
                std::fs::remove_dir_all(dir).map_err(|e| SearchError::Index(format!("removing {}: {e}", dir.display())))?;
                std::fs::create_dir_all(dir).map_err(|e| SearchError::Index(format!("creating {}: {e}", dir.display())))?;
                open_at_revision(dir, &schema, f, store)?
            }
            Err(e) => return Err(e),
        };
        let committed = Arc::new(CommittedRevision::new(revision));
        let stop = Arc::new(AtomicBool::new(false));
        let failure = Arc::new(Mutex::new((opened == Opened::RebuildPending).then(|| "its rebuild failed on the volume".to_string())));
        let mut job = Job {
            writer,
            f,
            reader: reader.clone(),
            store: store.clone(),
            loaders: loaders(),
            done: revision,
            pending: Vec::new(),
            pending_rev: revision,
            stop: stop.clone(),
            committed: committed.clone(),
            failures: crate::throttle::LogThrottle::new(FAILURE_LOG_INTERVAL),
            rebuild: opened == Opened::RebuildPending,
            failure: failure.clone(),
        };
        if job.rebuild {
            // Whatever the store holds now is what the rebuild must reach.
            job.pending_rev = store.read()?.revision()?.max(revision + 1);
        }
        let thread = std::thread::Builder::new()
            .name("cp-search".into())
            .spawn(move || job.run(feed))
            .map_err(|e| SearchError::Index(format!("starting the indexer thread: {e}")))?;
        let shared =
            CatalogueState { reader, f, dir: dir.to_path_buf(), indexer: Mutex::new(Some(Indexer { stop, thread })), committed, failure };
        let shared = Arc::new(shared);
        store.search.set(&shared);
        Ok((Catalogue(shared), opened))
    }

    /// Builds the index of the store that `snap` restores into the new directory `dir`, as of
    /// the snapshot's revision, from the snapshot's records: what [`Catalogue::open`] would
    /// rebuild on that store, built while the store is written. Only for a snapshot whose every
    /// kind is restored as it is (no [`crate::snapshot::Header::rederived_kinds`]); the next
    /// open finds it up to date.
    ///
    /// `dir` is made if missing, but not its parent: a restore's staging directory removed
    /// meanwhile (by a signal) is not made again.
    ///
    /// # Errors
    /// [`SearchError::Index`] when `dir` cannot be created or written, [`SearchError::Storage`]
    /// for a catalogue record that does not decode.
    pub fn build_for_restore(dir: &Path, snap: &crate::snapshot::Snapshot) -> Result<usize, SearchError> {
        let started = Instant::now();
        match std::fs::create_dir(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                return Err(SearchError::Index(format!("creating {}: {e}", dir.display())));
            }
            _ => {}
        }
        let (schema, f) = schema();
        let index = open_index(dir, &schema)?;
        register_tokenizers(&index);
        let mut writer: IndexWriter = index.writer_with_num_threads(1, WRITER_HEAP)?;
        let n = rebuild(&mut writer, &f, Records::Snapshot(snap), snap.header.revision)?;
        writer.wait_merging_threads()?;
        tracing::info!(
            entries = n,
            revision = snap.header.revision,
            seconds = started.elapsed().as_secs_f64(),
            "search index built from the snapshot"
        );
        Ok(n)
    }

    /// Why the index's last commit failed (a full volume), until one succeeds: it answers as of
    /// its last commit meanwhile. `None` normally.
    pub fn failure(&self) -> Option<String> {
        self.0.failure.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.0.dir
    }

    /// The store revision of the last index commit.
    pub fn revision(&self) -> u64 {
        self.0.committed.get()
    }

    /// Calls `hook` with the revision after each later index commit (on the indexer thread: it
    /// must not block).
    pub fn on_commit(&self, hook: impl Fn(u64) + Send + Sync + 'static) {
        self.0.committed.hooks.lock().unwrap_or_else(|e| e.into_inner()).push(Box::new(hook));
    }

    /// Blocks until an index commit has moved [`Catalogue::revision`] past `revision`, or
    /// `timeout` has passed; returns the revision then (still `<= revision` after a timeout).
    /// Woken by each index commit.
    pub fn wait_for_revision_after(&self, revision: u64, timeout: Duration) -> u64 {
        self.0.committed.wait_after(revision, timeout)
    }

    /// Commits what is pending, then stops the indexer thread (blocking). Later searches still
    /// work on the last commit. Idempotent.
    pub fn shutdown(&self) {
        let indexer = self.0.indexer.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(i) = indexer {
            i.stop.store(true, Ordering::SeqCst);
            if i.thread.join().is_err() {
                tracing::error!("the search indexer thread panicked");
            }
        }
    }

    /// Searches. Returns at least `at_least` hits when that many match (more when scores tie at
    /// the cut), all of them when fewer match. A query without a word (no letter or digit, see
    /// [`crate::analysis`]) does not narrow: every entry passing the request's kinds,
    /// environment and `active_only` matches with score 0.
    ///
    /// # Errors
    /// [`SearchError::Index`] when tantivy fails.
    pub fn search(&self, req: &SearchRequest<'_>, at_least: usize) -> Result<Hits, SearchError> {
        let words = words(req.query);
        let query = self.query(&words, req)?;
        let searcher = self.0.reader.searcher();
        // One pass for the common case (a page): the best `limit + 1` and the count. The extra
        // hit tells whether the cut falls between two equal scores; then widen.
        let mut limit = at_least.clamp(1, FIRST_PASS);
        let (mut top, total) = searcher.search(&query, &(TopDocs::with_limit(limit + 1).order_by_score(), Count))?;
        let top: Vec<(Score, DocAddress)> = loop {
            if top.len() <= limit {
                break top; // every match
            }
            let cut = top[limit].0;
            let n = top.iter().take_while(|(s, _)| *s > cut).count();
            if n >= at_least.min(total) {
                top.truncate(n);
                break top;
            }
            limit = limit.saturating_mul(4).max(at_least.min(total)).min(total);
            top = searcher.search(&query, &TopDocs::with_limit(limit + 1).order_by_score())?;
        };
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
            if let Some((kind, key)) = doc.get_first(self.0.f.id).and_then(|v| v.as_str()).and_then(parse_id) {
                hits.push(Hit { kind, key, score });
            }
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.kind.code().cmp(&b.kind.code())).then_with(|| a.key.cmp(&b.key)));
        Ok(Hits { hits, total })
    }

    fn query(&self, words: &[String], req: &SearchRequest<'_>) -> Result<BooleanQuery, SearchError> {
        let f = &self.0.f;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (i, word) in words.iter().enumerate() {
            let last = i + 1 == words.len();
            // Fuzzy automata are the costly part of a query: only the first words get one.
            let d = if i < MAX_FUZZY_WORDS { edit_distance(word) } else { 0 };
            // Each automaton is built once per word and shared by the three fields.
            let dfa = |prefix: bool, d: u8| -> Result<Arc<DfaWrapper>, SearchError> {
                let term = Term::from_field_text(f.title, word);
                let q = if prefix { FuzzyTermQuery::new_prefix(term, d, true) } else { FuzzyTermQuery::new(term, d, true) };
                Ok(Arc::new(q.automaton()?))
            };
            let prefix = if last { Some(dfa(true, 0)?) } else { None };
            let fuzzy = if d > 0 { Some(dfa(false, d)?) } else { None };
            let mut alts: Vec<Box<dyn Query>> = Vec::new();
            for (field, w) in [(f.title, W_TITLE), (f.tag, W_TAG), (f.body, W_BODY)] {
                let term = Term::from_field_text(field, word);
                alts.push(Box::new(ConstScoreQuery::new(Box::new(TermQuery::new(term, IndexRecordOption::Basic)), EXACT * w)));
                if let Some(dfa) = &prefix {
                    alts.push(Box::new(ConstScoreQuery::new(Box::new(SharedDfa { field, dfa: dfa.clone() }), PREFIX * w)));
                }
                if let Some(dfa) = &fuzzy {
                    alts.push(Box::new(ConstScoreQuery::new(Box::new(SharedDfa { field, dfa: dfa.clone() }), FUZZY * w)));
                }
            }
            clauses.push((Occur::Must, Box::new(DisjunctionMaxQuery::with_tie_breaker(alts, 0.1))));
        }
        if words.is_empty() {
            clauses.push((Occur::Must, Box::new(ConstScoreQuery::new(Box::new(AllQuery), 0.0))));
        }
        let whole = req.query.trim().to_lowercase();
        clauses.push((
            Occur::Should,
            Box::new(ConstScoreQuery::new(
                Box::new(TermQuery::new(Term::from_field_text(f.path, &whole), IndexRecordOption::Basic)),
                PATH_BONUS,
            )),
        ));
        let filter = |q: Box<dyn Query>| -> (Occur, Box<dyn Query>) { (Occur::Must, Box::new(ConstScoreQuery::new(q, 0.0))) };
        let term = |field: Field, v: &str| -> Box<dyn Query> {
            Box::new(TermQuery::new(Term::from_field_text(field, v), IndexRecordOption::Basic))
        };
        if !req.kinds.is_empty() {
            let kinds: Vec<(Occur, Box<dyn Query>)> = req.kinds.iter().map(|k| (Occur::Should, term(f.kind, k.name()))).collect();
            clauses.push(filter(Box::new(BooleanQuery::new(kinds))));
        }
        if let Some(env) = req.environment {
            clauses.push(filter(term(f.env, env)));
        }
        if req.active_only {
            clauses.push(filter(term(f.active, "true")));
        }
        Ok(BooleanQuery::new(clauses))
    }
}

/// A Levenshtein automaton over one field, built once and shared between fields.
#[derive(Clone)]
struct SharedDfa {
    field: Field,
    dfa: Arc<DfaWrapper>,
}

impl std::fmt::Debug for SharedDfa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedDfa").field("field", &self.field).finish_non_exhaustive()
    }
}

impl Query for SharedDfa {
    fn weight(&self, _scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(AutomatonWeight::<DfaWrapper>::new(self.field, self.dfa.clone())))
    }
}

/// Opens the index in `dir` (creating it when absent) with a writer and a reader, rebuilt from
/// `store` unless its commit payload names the store's revision. Returns the writer, the
/// reader, that revision and whether it was rebuilt.
fn open_at_revision(dir: &Path, schema: &Schema, f: Fields, store: &Store) -> Result<(IndexWriter, IndexReader, u64, Opened), SearchError> {
    let index = open_index(dir, schema)?;
    register_tokenizers(&index);
    let mut writer: IndexWriter = index.writer_with_num_threads(1, WRITER_HEAP)?;
    let view = store.read()?;
    let revision = view.revision()?;
    let payload = index.load_metas()?.payload;
    let opened = if payload.as_deref() == Some(payload_of(revision).as_str()) {
        Opened::UpToDate
    } else {
        let t0 = Instant::now();
        match rebuild(&mut writer, &f, Records::Store(&view), revision) {
            Ok(n) => {
                tracing::info!(entries = n, revision, seconds = t0.elapsed().as_secs_f64(), found = ?payload, "search index rebuilt");
                Opened::Rebuilt(n)
            }
            // The volume refused the new segments: the index stays as committed, and the
            // indexer thread rebuilds it later.
            Err(SearchError::Io(e)) => {
                tracing::error!(error = %e, revision, "rebuilding the search index failed; it answers as of its last commit and is rebuilt once the volume takes it");
                let _ = writer.rollback();
                Opened::RebuildPending
            }
            Err(e) => return Err(e),
        }
    };
    drop(view);
    // Opening the reader opens every segment's files: a damaged one fails here.
    let reader: IndexReader = index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
    let revision = match opened {
        Opened::RebuildPending => payload.as_deref().and_then(|p| p.strip_prefix(PAYLOAD_PREFIX)?.parse().ok()).unwrap_or(0),
        _ => revision,
    };
    Ok((writer, reader, revision, opened))
}

/// Replaces every entry of the index by the catalogue of `records` (at `revision`) in one
/// commit; returns the entries written.
fn rebuild(writer: &mut IndexWriter, f: &Fields, records: Records<'_>, revision: u64) -> Result<usize, SearchError> {
    writer.delete_all_documents()?;
    let n = add_all(writer, f, records)?;
    let mut prepared = writer.prepare_commit()?;
    prepared.set_payload(&payload_of(revision));
    prepared.commit()?;
    Ok(n)
}

fn open_index(dir: &Path, schema: &Schema) -> Result<Index, SearchError> {
    let index = if Index::exists(&tantivy::directory::MmapDirectory::open(dir).map_err(|e| SearchError::Index(e.to_string()))?)
        .map_err(|e| SearchError::Index(e.to_string()))?
    {
        Index::open_in_dir(dir)?
    } else {
        Index::create_in_dir(dir, schema.clone())?
    };
    if index.schema() != *schema {
        return Err(SearchError::Index("the index was written with another schema".into()));
    }
    Ok(index)
}

fn payload_of(revision: u64) -> String {
    format!("{PAYLOAD_PREFIX}{revision}")
}

/// The indexer thread's state.
struct Job {
    writer: IndexWriter,
    f: Fields,
    reader: IndexReader,
    store: Store,
    loaders: Vec<(KindId, LoadFn)>,
    /// Revision of the last index commit.
    done: u64,
    /// Records changed since, and the newest revision told.
    pending: Vec<(KindId, Key)>,
    pending_rev: u64,
    stop: Arc<AtomicBool>,
    committed: Arc<CommittedRevision>,
    /// Failed commits, logged once per cause and [`FAILURE_LOG_INTERVAL`].
    failures: crate::throttle::LogThrottle,
    /// The index must be rebuilt from the store (its rebuild at open failed): the next flush
    /// rebuilds it instead of applying `pending`.
    rebuild: bool,
    /// Why the last commit failed ([`Catalogue::failure`]).
    failure: Arc<Mutex<Option<String>>>,
}

/// How often the same failure of the index's commits is logged again (with the count since).
const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(60);

impl Job {
    fn run(&mut self, feed: Receiver<Committed>) {
        let mut first_pending: Option<Instant> = None;
        // Consecutive failed commits.
        let mut failed: u32 = 0;
        loop {
            let stopping = self.stop.load(Ordering::SeqCst);
            let wait = match first_pending {
                Some(t) => COMMIT_INTERVAL.saturating_sub(t.elapsed()),
                None => Duration::from_millis(100),
            };
            let mut disconnected = false;
            match feed.recv_timeout(if stopping { Duration::ZERO } else { wait }) {
                Ok(c) => {
                    self.accept(c);
                    while let Ok(c) = feed.try_recv() {
                        self.accept(c);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => disconnected = true,
            }
            if self.pending_rev > self.done && first_pending.is_none() {
                first_pending = Some(Instant::now());
            }
            let due = first_pending.is_some_and(|t| t.elapsed() >= COMMIT_INTERVAL);
            if (due || stopping || disconnected) && self.pending_rev > self.done {
                match self.flush() {
                    Ok(()) => {
                        first_pending = None;
                        self.failures.reset();
                        failed = 0;
                        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = None;
                    }
                    Err(e) => {
                        let cause = crate::throttle::without_quoted(&e.to_string());
                        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(cause);
                        // The pending changes stay; the next flush retries them. A persistent
                        // failure leaves the index stale, which the next start repairs.
                        let cause = e.to_string();
                        if let Some(since) = self.failures.admit(&cause) {
                            tracing::error!(error = %cause, failures_since_last_line = since, "search index commit failed; retrying");
                        }
                        // Backs off (doubling to about 4 s): a full volume fails every try, and
                        // a rebuild reads the whole catalogue.
                        failed = (failed + 1).min(4);
                        first_pending = Some(Instant::now() + COMMIT_INTERVAL * ((1 << failed) - 1));
                        let _ = self.writer.rollback();
                    }
                }
            }
            if stopping || disconnected {
                break;
            }
        }
    }

    fn accept(&mut self, c: Committed) {
        if c.revision <= self.done {
            return; // already in the index (the rebuild read a later view)
        }
        let kinds: Vec<KindId> = self.loaders.iter().map(|(k, _)| *k).collect();
        self.pending.extend(c.changes.iter().filter(|c| kinds.contains(&c.kind)).map(|c| (c.kind, c.key.clone())));
        self.pending_rev = self.pending_rev.max(c.revision);
    }

    fn flush(&mut self) -> Result<(), SearchError> {
        let view = self.store.read()?;
        if self.rebuild {
            let revision = view.revision()?;
            let n = rebuild(&mut self.writer, &self.f, Records::Store(&view), revision)?;
            tracing::info!(entries = n, revision, "search index rebuilt");
            self.reader.reload()?;
            self.rebuild = false;
            self.done = revision.max(self.pending_rev);
            self.pending_rev = self.done;
            self.committed.set(self.done);
            self.pending.clear();
            return Ok(());
        }
        let mut seen = std::collections::HashSet::new();
        for (kind, key) in &self.pending {
            if !seen.insert((*kind, key.clone())) {
                continue;
            }
            self.writer.delete_term(Term::from_field_text(self.f.id, &doc_id(*kind, key)));
            let Some((_, load)) = self.loaders.iter().find(|(k, _)| k == kind) else { continue };
            if let Some(doc) = load(&view, key)? {
                self.writer.add_document(document(&self.f, *kind, key, &doc))?;
            }
        }
        let mut prepared = self.writer.prepare_commit()?;
        prepared.set_payload(&payload_of(self.pending_rev));
        prepared.commit()?;
        self.reader.reload()?;
        self.done = self.pending_rev;
        self.committed.set(self.done);
        self.pending.clear();
        Ok(())
    }
}

impl Drop for CatalogueState {
    fn drop(&mut self) {
        if let Some(i) = self.indexer.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            i.stop.store(true, Ordering::SeqCst);
            let _ = i.thread.join();
        }
    }
}

/// The edit distance a query word may be away from an indexed word: 0 for words of at most
/// 2 characters, 1 for 3–5, 2 for longer ones.
pub fn edit_distance(word: &str) -> u8 {
    match word.chars().count() {
        0..=2 => 0,
        3..=5 => 1,
        _ => 2,
    }
}

/// Optimal-string-alignment distance (a transposition of neighbours counts one), as tantivy's
/// automaton with `transposition_cost_one`.
fn alignment_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}

/// Whether indexed word `w` matches query word `q` (the last query word also as a prefix).
fn word_matches(q: &str, w: &str, last: bool) -> bool {
    q == w || (last && w.starts_with(q)) || {
        let d = edit_distance(q) as usize;
        d > 0 && w.chars().count().abs_diff(q.chars().count()) <= d && alignment_distance(q, w) <= d
    }
}

/// One highlighted field of a hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Highlight {
    /// The GraphQL field name ([`schema::catalogue::DocField::name`]).
    pub field: &'static str,
    /// The field's text, HTML-escaped, with every matching word wrapped in `<em></em>`; long
    /// texts are cut to about 160 characters around the first match (`…` marks a cut).
    pub snippet: String,
}

/// The fields of `doc` that match `query`, with snippets, in field order.
pub fn highlights(doc: &CatalogueDoc, query: &str) -> Vec<Highlight> {
    let q = words(query);
    let mut out = Vec::new();
    if q.is_empty() {
        return out;
    }
    for field in &doc.fields {
        let text = field.text.as_str();
        let mut spans: Vec<(usize, usize)> = analyze(text)
            .into_iter()
            .filter(|w| q.iter().enumerate().any(|(i, qw)| word_matches(qw, &w.text, i + 1 == q.len())))
            .map(|w| (w.span.start, w.span.end))
            .collect();
        // Words that one run of the text splits into share its span.
        spans.dedup();
        let Some(&(first, _)) = spans.first() else { continue };
        const WINDOW: usize = 160;
        let (mut from, mut to) = (0, text.len());
        if text.len() > WINDOW {
            from = floor_char(text, first.saturating_sub(40));
            to = floor_char(text, (from + WINDOW).min(text.len()));
        }
        let mut snippet = String::new();
        if from > 0 {
            snippet.push('…');
        }
        let mut at = from;
        for &(a, b) in spans.iter().filter(|(a, b)| *a >= from && *b <= to) {
            escape_into(&text[at..a], &mut snippet);
            snippet.push_str("<em>");
            escape_into(&text[a..b], &mut snippet);
            snippet.push_str("</em>");
            at = b;
        }
        escape_into(&text[at..to], &mut snippet);
        if to < text.len() {
            snippet.push('…');
        }
        out.push(Highlight { field: field.name, snippet });
    }
    out
}

fn floor_char(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schema::catalogue::DocField;

    #[test]
    fn distances_grow_with_word_length() {
        assert_eq!([edit_distance("ab"), edit_distance("abc"), edit_distance("abcde"), edit_distance("abcdef")], [0, 1, 1, 2]);
        assert_eq!(alignment_distance("payments", "paymnets"), 1);
        assert!(word_matches("paymnets", "payments", false));
        assert!(word_matches("pay", "payments", true));
        assert!(!word_matches("pay", "payments", false));
        assert!(!word_matches("v2", "v1", false));
    }

    #[test]
    fn ids_round_trip() {
        let key = Key::new(&["poc", "team", "/a/b"]);
        assert_eq!(parse_id(&doc_id(KindId::Api, &key)), Some((KindId::Api, key)));
        assert_eq!(parse_id("zz"), None);
    }

    #[test]
    fn highlights_escape_and_mark_matches() {
        let doc = CatalogueDoc {
            environment: "poc".into(),
            active: true,
            path: "/a".into(),
            fields: vec![
                DocField { name: "description", class: FieldClass::Body, text: "Orders <b>& payments</b> for checkout".into() },
                DocField { name: "version", class: FieldClass::Tag, text: "1.0.0".into() },
            ],
        };
        let h = highlights(&doc, "paymnets check");
        assert_eq!(
            h,
            vec![Highlight {
                field: "description",
                snippet: "Orders &lt;b&gt;&amp; <em>payments</em>&lt;/b&gt; for <em>checkout</em>".into()
            }]
        );
    }
}
