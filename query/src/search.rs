//! Catalogue search in GraphQL (ARCHITECTURE.md, `storage`, "Catalogue search"; the SDL is in `query/schema.graphql`): the `search`
//! argument of the root `apis`, `eventTypes`, `mcpServers` and `agentCards` connections, and the
//! root `catalogueSearch` across the four kinds with scores and highlighted snippets.
//!
//! The index ([`storage::search::Catalogue`]) only proposes candidates. **Every hit is resolved
//! against the request's read view and the viewer filter** (`RequestContext::load_visible`), so a record
//! deleted since the last index commit is never returned, and a non-admin viewer only gets
//! entries of their environment (the index is also asked for that environment only).
//!
//! Order and cursors: hits are ordered by score (descending), then kind, then natural key. A
//! cursor carries that position and a hash of the query's words, so it stays valid for the same
//! query (also after index commits: it marks a position, not an offset) and is refused
//! (`BAD_USER_INPUT`) for another query.

use crate::entity::Builder;
use crate::error::{bad_input, internal};
use crate::fields::{field, integer, object_value, string};
use crate::filter::Predicate;
use crate::relay::{Row, VecRows};
use crate::request::RequestContext;
use crate::viewer::Viewer;
use async_graphql::dynamic::{Field, FieldFuture, FieldValue, InputValue, Object, ResolverContext, TypeRef, Union};
use async_graphql::{Error, Value};
use base64::Engine;
use schema::catalogue::{self, CatalogueDoc, CatalogueVisitor, Catalogued};
use schema::{Key, Kind, KindId};
use std::collections::HashMap;
use std::sync::Arc;
use storage::analysis::words;
use storage::search::{highlights, Catalogue, Highlight, Hit, SearchRequest};

/// How a search text matches, in the SDL of every search (`search:` and `catalogueSearch`):
/// the one rule of [`storage::analysis`].
pub(crate) const SEARCH_TEXT_RULE: &str = "Words are runs of letters and digits, compared without accents and case \
(`á`, `a` + U+0301, `A` and `a` are the same word; words longer than 64 bytes are cut to 64). Every word must match a \
field: exactly, the last one also as a prefix, the first four also within a typo or two. A text without a letter \
or digit (empty, blank, `*`, `?`, punctuation, emoji) does not narrow:";

/// The description of the `search` argument of the catalogue kinds' root connections.
pub(crate) fn search_argument_description() -> String {
    format!(
        "Full-text search, by relevance (not combinable with `orderBy`; at most `graphql.maxSearchLength` bytes and \
         `graphql.maxSearchTerms` words). {SEARCH_TEXT_RULE} the connection lists as without `search`."
    )
}

/// First byte of a `catalogueSearch` cursor (format version).
const CURSOR_VERSION: u8 = 0xC1;

/// FNV-1a (32 bits) of the query's words: what makes two queries "the same" for cursors.
pub(crate) fn query_hash(query: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for (i, w) in words(query).iter().enumerate() {
        if i > 0 {
            h = (h ^ u32::from(b' ')).wrapping_mul(0x0100_0193);
        }
        for byte in w.bytes() {
            h = (h ^ u32::from(byte)).wrapping_mul(0x0100_0193);
        }
    }
    h
}

/// Sort bytes of a score: ascending bytes = descending score (scores are never negative).
fn score_bytes(score: f32) -> [u8; 4] {
    (!score.max(0.0).to_bits()).to_be_bytes()
}

fn index(request: &RequestContext) -> Result<&Catalogue, Error> {
    request.catalogue.as_ref().ok_or_else(|| internal("the catalogue search index is not open"))
}

fn environment(viewer: &Viewer) -> Option<&str> {
    (!viewer.is_admin()).then_some(viewer.env.as_str())
}

/// The rows of `<kinds>(search: query, where: …)` for catalogue kind `K`: every visible hit that
/// passes `pred`, by relevance. The cursor suffix is `score bytes · natural key`.
///
/// # Errors
/// `INTERNAL` when the index or the store fails.
pub(crate) fn rows<K: Kind>(request: &RequestContext, query: &str, pred: &Predicate<K::Record>) -> Result<VecRows<K::Record>, Error> {
    let req = SearchRequest { query, kinds: &[K::ID], environment: environment(&request.viewer), active_only: false };
    let hits = index(request)?.search(&req, usize::MAX).map_err(internal)?;
    let mut rows: Vec<Row<K::Record>> = Vec::with_capacity(hits.hits.len());
    for h in hits.hits {
        request.deadline.tick()?;
        if let Some(s) = request.load_visible::<K>(&h.key)? {
            if pred.eval(&s, request) {
                let mut suffix = score_bytes(h.score).to_vec();
                suffix.extend_from_slice(h.key.as_bytes());
                rows.push((suffix, s));
            }
        }
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(VecRows(rows))
}

/// Loads a catalogue entry of one kind (visible only) and its search document.
type DocLoader = fn(&RequestContext, &Key) -> Result<Option<CatalogueDoc>, Error>;

fn load_doc<K: Catalogued>(request: &RequestContext, key: &Key) -> Result<Option<CatalogueDoc>, Error> {
    Ok(request.load_visible::<K>(key)?.map(|s| K::catalogue_doc(&s.record)))
}

struct Kinds(Vec<(KindId, &'static str, DocLoader)>);

impl CatalogueVisitor for Kinds {
    fn visit<K: Catalogued>(&mut self) {
        self.0.push((K::ID, K::TYPE, load_doc::<K>));
    }
}

/// One edge of `catalogueSearch`.
struct SearchEdge {
    type_name: &'static str,
    key: Key,
    cursor: String,
    score: f32,
    highlights: Vec<Highlight>,
}

/// A `CatalogueSearchConnection`.
struct SearchConn {
    edges: Vec<SearchEdge>,
    has_next: bool,
    has_previous: bool,
    total: usize,
}

fn encode_cursor(hash: u32, suffix: &[u8]) -> String {
    let mut raw = vec![CURSOR_VERSION];
    raw.extend_from_slice(&hash.to_be_bytes());
    raw.extend_from_slice(suffix);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_cursor(c: &str, hash: u32) -> Result<Vec<u8>, Error> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(c).map_err(|_| bad_input("invalid cursor"))?;
    if raw.len() < 1 + 4 + 4 + 1 || raw[0] != CURSOR_VERSION || raw[1..5] != hash.to_be_bytes() {
        return Err(bad_input("invalid cursor"));
    }
    Ok(raw[5..].to_vec())
}

/// Registers `CatalogueKind`, `CatalogueEntry`, `CatalogueHighlight`, `CatalogueSearchEdge`,
/// `CatalogueSearchConnection` and the root `catalogueSearch`. Call after the four catalogue
/// entities are registered (it uses their node loaders).
pub(crate) fn register(builder: &mut Builder) {
    let mut kinds = Kinds(Vec::new());
    catalogue::visit(&mut kinds);
    let kinds = Arc::new(kinds.0);
    let names: Vec<&str> = catalogue::KINDS.iter().filter_map(|k| catalogue::catalogue_kind(*k)).collect();
    builder.enumeration("CatalogueKind", &names);
    let mut union = Union::new("CatalogueEntry");
    for (_, ty, _) in kinds.iter() {
        union = union.possible_type(*ty);
    }
    builder.unions.push(union);
    builder.object(
        Object::new("CatalogueHighlight")
            .field(field::<Highlight>("field", TypeRef::named_nn(TypeRef::STRING), |h, _| Ok(string(h.field))))
            .field(field::<Highlight>("snippet", TypeRef::named_nn(TypeRef::STRING), |h, _| Ok(string(&h.snippet)))),
    );
    register_connection_types(builder, &kinds);
    builder.query_fields.push(catalogue_search_field(kinds));
}

/// Registers `CatalogueSearchEdge` (its `node` resolved by the catalogue kinds' node loaders) and
/// `CatalogueSearchConnection`.
fn register_connection_types(builder: &mut Builder, kinds: &[(KindId, &'static str, DocLoader)]) {
    let loaders: HashMap<&'static str, crate::entity::Loader> =
        kinds.iter().filter_map(|(_, ty, _)| builder.loaders.get(ty).map(|l| (*ty, l.clone()))).collect();
    let loaders = Arc::new(loaders);
    builder.object(
        Object::new("CatalogueSearchEdge")
            .field(field::<SearchEdge>("node", TypeRef::named_nn("CatalogueEntry"), move |e, request| {
                let loader = loaders.get(e.type_name).ok_or_else(|| internal("no loader for a catalogue kind"))?;
                loader(request, &e.key)
            }))
            .field(field::<SearchEdge>("cursor", TypeRef::named_nn("Cursor"), |e, _| Ok(string(&e.cursor))))
            .field(field::<SearchEdge>("score", TypeRef::named_nn(TypeRef::FLOAT), |e, _| {
                Ok(Some(FieldValue::value(Value::from(f64::from(e.score)))))
            }))
            .field(field::<SearchEdge>("highlights", TypeRef::named_nn_list_nn("CatalogueHighlight"), |e, _| {
                Ok(Some(FieldValue::list(e.highlights.iter().cloned().map(FieldValue::owned_any))))
            })),
    );
    builder.object(
        Object::new("CatalogueSearchConnection")
            .field(Field::new("edges", TypeRef::named_nn_list_nn("CatalogueSearchEdge"), |ctx| {
                FieldFuture::new(async move {
                    let c = ctx.parent_value.try_downcast_ref::<SearchConn>()?;
                    Ok(Some(FieldValue::list(c.edges.iter().map(|e| FieldValue::borrowed_any(e)))))
                })
            }))
            .field(field::<SearchConn>("pageInfo", TypeRef::named_nn("PageInfo"), |c, _| {
                Ok(object_value(crate::relay::PageInfo {
                    has_next: c.has_next,
                    has_previous: c.has_previous,
                    start: c.edges.first().map(|e| e.cursor.clone()),
                    end: c.edges.last().map(|e| e.cursor.clone()),
                }))
            }))
            .field(field::<SearchConn>("totalCount", TypeRef::named_nn(TypeRef::INT), |c, _| Ok(integer(c.total as i64)))),
    );
}

/// The root `catalogueSearch(query, kinds, activeOnly, first, after)` field.
fn catalogue_search_field(kinds: Arc<Vec<(KindId, &'static str, DocLoader)>>) -> Field {
    Field::new("catalogueSearch", TypeRef::named_nn("CatalogueSearchConnection"), move |ctx: ResolverContext<'_>| {
        crate::fields::ready(resolve_catalogue_search(&ctx, &kinds))
    })
    .description(
        "Searches the catalogue (APIs, event types, MCP servers, agent cards) visible to the viewer, by score, then kind, then key.",
    )
    .argument(InputValue::new("query", TypeRef::named_nn(TypeRef::STRING)).description(format!(
        "At most `graphql.maxSearchLength` bytes and `graphql.maxSearchTerms` words. {SEARCH_TEXT_RULE} every entry of \
         `kinds` (and `activeOnly`) matches, with score 0."
    )))
    .argument(InputValue::new("kinds", TypeRef::named_nn_list("CatalogueKind")))
    .argument(InputValue::new("activeOnly", TypeRef::named(TypeRef::BOOLEAN)).default_value(Value::Boolean(false)))
    .argument(InputValue::new("first", TypeRef::named(TypeRef::INT)))
    .argument(InputValue::new("after", TypeRef::named("Cursor")))
}

/// Answers `catalogueSearch`: asks the index for enough hits (more, four times as many each round,
/// while visible hits are missing for the page), resolves each against the store and the viewer,
/// and pages them after the cursor. `BAD_USER_INPUT` for a hostile text, an unknown kind, a
/// negative or too large `first` or another query's cursor.
fn resolve_catalogue_search(
    ctx: &ResolverContext<'_>,
    kinds: &[(KindId, &'static str, DocLoader)],
) -> Result<Option<FieldValue<'static>>, Error> {
    let request = ctx.data::<RequestContext>()?;
    let query = ctx.args.try_get("query")?.string()?.to_string();
    crate::limits::check_search(&query, &request.limits).map_err(crate::limits::LimitError::into_error)?;
    let Some(wanted) = wanted_kinds(ctx)? else {
        // `kinds: []` asks for no kind at all.
        return Ok(object_value(SearchConn { edges: Vec::new(), has_next: false, has_previous: false, total: 0 }));
    };
    let active_only = ctx.args.get("activeOnly").filter(|v| !v.is_null()).map(|v| v.boolean()).transpose()?.unwrap_or(false);
    let hash = query_hash(&query);
    let after = match ctx.args.get("after").filter(|v| !v.is_null()) {
        Some(c) => Some(decode_cursor(c.string()?, hash)?),
        None => None,
    };
    let page = SearchPage {
        query: &query,
        hash,
        first: first_argument(ctx, request.max_page_size)?,
        after,
        want_total: ctx.look_ahead().field("totalCount").exists(),
    };
    let req = SearchRequest { query: &query, kinds: &wanted, environment: environment(&request.viewer), active_only };
    let cat = index(request)?;
    let mut at_least = if page.want_total { usize::MAX } else { page.first.saturating_add(1).saturating_add(8) };
    loop {
        let hits = cat.search(&req, at_least).map_err(internal)?;
        let complete = hits.hits.len() >= hits.total;
        if let Some(conn) = page.collect(request, kinds, &hits.hits, complete)? {
            return Ok(object_value(conn));
        }
        at_least = at_least.saturating_mul(4);
    }
}

/// The `kinds` argument: `Some(empty)` when absent (every kind), `None` for `kinds: []` (no kind).
fn wanted_kinds(ctx: &ResolverContext<'_>) -> Result<Option<Vec<KindId>>, Error> {
    let Some(list) = ctx.args.get("kinds").filter(|v| !v.is_null()) else { return Ok(Some(Vec::new())) };
    let mut out = Vec::new();
    for v in list.list()?.iter() {
        let name = v.enum_name()?;
        let kind = catalogue::KINDS
            .iter()
            .copied()
            .find(|k| catalogue::catalogue_kind(*k) == Some(name))
            .ok_or_else(|| bad_input(format!("unknown catalogue kind {name}")))?;
        out.push(kind);
    }
    Ok((!out.is_empty()).then_some(out))
}

/// The `first` argument: `graphql.maxPageSize` when absent; negative or larger is `BAD_USER_INPUT`.
fn first_argument(ctx: &ResolverContext<'_>, max_page_size: usize) -> Result<usize, Error> {
    match ctx.args.get("first").filter(|v| !v.is_null()).map(|v| v.i64()).transpose()? {
        None => Ok(max_page_size),
        Some(n) if n < 0 => Err(bad_input("`first` on a connection cannot be less than zero.")),
        Some(n) if n as u64 > max_page_size as u64 => {
            Err(bad_input(format!("`first` on a connection cannot exceed the maximum page size {max_page_size}.")))
        }
        Some(n) => Ok(n as usize),
    }
}

/// The page one `catalogueSearch` asks for.
struct SearchPage<'q> {
    query: &'q str,
    /// [`query_hash`] of `query`, carried by the cursors.
    hash: u32,
    first: usize,
    /// The decoded `after` cursor (score, kind code, key).
    after: Option<Vec<u8>>,
    /// `totalCount` is selected: every hit is resolved to count the visible ones.
    want_total: bool,
}

impl SearchPage<'_> {
    /// The page out of `hits` (in index order), or `None` when the index may hold more visible
    /// hits than it gave (`complete` false) and the page is not full yet. Each hit checks the
    /// request's deadline; deleted (not yet re-indexed) and invisible entries are dropped.
    fn collect(
        &self,
        request: &RequestContext,
        kinds: &[(KindId, &'static str, DocLoader)],
        hits: &[Hit],
        complete: bool,
    ) -> Result<Option<SearchConn>, Error> {
        let mut edges = Vec::new();
        let mut total = 0;
        let mut has_next = false;
        for h in hits {
            request.deadline.tick()?;
            let Some((_, ty, load)) = kinds.iter().find(|(k, _, _)| *k == h.kind) else { continue };
            let mut suffix = score_bytes(h.score).to_vec();
            suffix.push(h.kind.code());
            suffix.extend_from_slice(h.key.as_bytes());
            let after_cursor = self.after.as_ref().is_none_or(|a| suffix > *a);
            if !after_cursor && !self.want_total {
                continue;
            }
            let Some(doc) = load(request, &h.key)? else { continue };
            total += 1;
            if !after_cursor {
                continue;
            }
            if edges.len() == self.first {
                has_next = true;
                if !self.want_total {
                    break;
                }
                continue;
            }
            edges.push(SearchEdge {
                type_name: ty,
                key: h.key.clone(),
                cursor: encode_cursor(self.hash, &suffix),
                score: h.score,
                highlights: highlights(&doc, self.query),
            });
        }
        Ok((has_next || complete).then(|| SearchConn { edges, has_next, has_previous: self.after.is_some(), total }))
    }
}
