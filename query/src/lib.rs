//! GraphQL over the read model: the schema (built once from one [`entity::Entity`] description
//! per kind), Relay connections, `where`/`orderBy`, the viewer model and team isolation.
//!
//! **Architecture invariants.** Every read passes the viewer filter ([`viewer`]). GraphQL error
//! codes are produced here only ([`error`]). Nothing here knows HTTP or tokens: the server hands
//! in a [`viewer::Viewer`] built from verified claims and a [`storage::Store`].
//!
//! Start at [`build_schema`] and [`execute`].

pub mod entity;
pub mod error;
pub mod filter;
mod kinds;
mod nodes_ext;
pub mod relay;
mod search;
pub mod viewer;

use async_graphql::dynamic::{Object, Scalar, Schema, SchemaError, TypeRef};
use async_graphql::parser::types::ExecutableDocument;
use async_graphql::ValidationMode;
use entity::{b, field, os, Builder, Rq};
use schema::Timestamp;
use std::sync::Arc;
use storage::Store;
use viewer::Viewer;

/// An error that already carries its GraphQL presentation.
#[derive(Debug)]
pub struct QueryError(pub async_graphql::Error);

/// Settings of the GraphQL layer.
#[derive(Clone, Debug)]
pub struct QueryConfig {
    /// Maximum `first`/`last`, also the page size when neither is given (default 1000).
    pub max_page_size: usize,
    /// A pinned clock for time-dependent fields (`--now`); `None` = wall clock per request.
    pub now: Option<Timestamp>,
    /// Whether introspection is enabled (default true).
    pub introspection: bool,
    /// Maximum query depth (default 20).
    pub max_depth: usize,
    /// Maximum query complexity, counted as selected fields (default 5000).
    pub max_complexity: usize,
}

impl Default for QueryConfig {
    fn default() -> QueryConfig {
        QueryConfig { max_page_size: 1000, now: None, introspection: true, max_depth: 20, max_complexity: 5000 }
    }
}

/// `PageInfo` values.
pub(crate) struct PageInfo {
    pub has_next: bool,
    pub has_previous: bool,
    pub start: Option<String>,
    pub end: Option<String>,
}

/// The executable schema plus the settings requests need.
///
/// Two builds of the same schema: `nodes` with the [`nodes_ext::NullableNodes`] extension that
/// lets `nodes(ids:)` answer `null` elements, and `plain` without it. An extension wraps every
/// field's resolution in a boxed future, so requests that cannot select `nodes` run on `plain`.
pub struct Api {
    plain: Validating,
    nodes: Validating,
    config: QueryConfig,
    parsed: ParseCache,
}

/// One schema built twice: `strict` runs every validation rule of GraphQL, `fast` only the
/// depth and complexity limits and the fragment-cycle check (async-graphql's
/// [`async_graphql::ValidationMode::Fast`]).
///
/// The other rules look at the document and at the values of its variables only, so a text
/// that declares no variables and passed them once (an answer without errors) passes them
/// again: its later requests run on `fast` ([`Parsed::validated`]). Validation was about 4 % of
/// the server's CPU under the P6 mixed load (BENCHMARKS.md).
struct Validating {
    strict: Schema,
    fast: Schema,
}

/// Parsed query documents by query text: a console sends the same few queries with other
/// variables, and parsing is a tenth of a small query's time. Texts above
/// [`ParseCache::MAX_TEXT`] bytes are not kept; a full cache is emptied (the working set is
/// small and refills at once).
#[derive(Default)]
struct ParseCache(std::sync::Mutex<std::collections::HashMap<String, Arc<Parsed>>>);

/// A cached parsed document.
struct Parsed {
    doc: ExecutableDocument,
    /// No operation of the document declares a variable.
    variable_free: bool,
    /// A request of this text without an operation name was answered without errors on the
    /// strict schema (see [`Validating`]); only set when `variable_free`.
    validated: std::sync::atomic::AtomicBool,
}

impl ParseCache {
    /// Most documents kept.
    const MAX_ENTRIES: usize = 256;
    /// Longest query text kept, in bytes.
    const MAX_TEXT: usize = 16 * 1024;

    /// The parsed document of `query`, parsed now when not cached; `None` when it does not
    /// parse (the executor then reports the syntax error as usual) or is too long to keep.
    fn get(&self, query: &str) -> Option<Arc<Parsed>> {
        if query.len() > Self::MAX_TEXT {
            return None;
        }
        let hit = self.0.lock().unwrap_or_else(|e| e.into_inner()).get(query).cloned();
        if let Some(parsed) = hit {
            return Some(parsed);
        }
        let doc = async_graphql::parser::parse_query(query).ok()?;
        let variable_free = doc.operations.iter().all(|(_, op)| op.node.variable_definitions.is_empty());
        let parsed = Arc::new(Parsed { doc, variable_free, validated: Default::default() });
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= Self::MAX_ENTRIES {
            map.clear();
        }
        map.insert(query.to_string(), parsed.clone());
        Some(parsed)
    }
}

/// Builds the GraphQL schema.
///
/// # Errors
/// [`SchemaError`] when the generated schema is inconsistent (a bug, caught by the SDL test).
pub fn build_schema(config: QueryConfig) -> Result<Api, SchemaError> {
    let both = |nodes| -> Result<Validating, SchemaError> {
        Ok(Validating { strict: build(&config, nodes, ValidationMode::Strict)?, fast: build(&config, nodes, ValidationMode::Fast)? })
    };
    Ok(Api { plain: both(false)?, nodes: both(true)?, config, parsed: ParseCache::default() })
}

fn build(config: &QueryConfig, nullable_nodes: bool, validation: ValidationMode) -> Result<Schema, SchemaError> {
    let mut bld = Builder::default();
    bld.enumeration("OrderDirection", &["ASC", "DESC"]);
    bld.object(
        Object::new("PageInfo")
            .field(field::<PageInfo>("hasNextPage", TypeRef::named_nn(TypeRef::BOOLEAN), |p, _| Ok(b(p.has_next))))
            .field(field::<PageInfo>("hasPreviousPage", TypeRef::named_nn(TypeRef::BOOLEAN), |p, _| Ok(b(p.has_previous))))
            .field(field::<PageInfo>("startCursor", TypeRef::named("Cursor"), |p, _| Ok(os(p.start.as_deref()))))
            .field(field::<PageInfo>("endCursor", TypeRef::named("Cursor"), |p, _| Ok(os(p.end.as_deref())))),
    );
    kinds::register_all(&mut bld);
    search::register(&mut bld);
    entity::register_node(&mut bld);

    let mut query = Object::new("Query");
    for f in std::mem::take(&mut bld.query_fields) {
        query = query.field(f);
    }
    let mut sb = Schema::build("Query", None, None)
        .register(Scalar::new("Time").description("RFC 3339 date-time"))
        .register(Scalar::new("Cursor").description("An opaque pagination cursor"))
        .register(Scalar::new("Map").description("A JSON object"))
        .register(query)
        .limit_depth(config.max_depth)
        .limit_complexity(config.max_complexity)
        .validation_mode(validation);
    for o in bld.take_objects() {
        sb = sb.register(o);
    }
    for e in bld.enums {
        sb = sb.register(e);
    }
    for i in bld.inputs {
        sb = sb.register(i);
    }
    for i in bld.interfaces {
        sb = sb.register(i);
    }
    for u in bld.unions {
        sb = sb.register(u);
    }
    if !config.introspection {
        sb = sb.disable_introspection();
    }
    if nullable_nodes {
        sb = sb.extension(nodes_ext::NullableNodes);
    }
    sb.finish()
}

impl Api {
    /// The schema in SDL.
    pub fn sdl(&self) -> String {
        self.plain.strict.sdl()
    }

    /// Executes one GraphQL request for `viewer` on a consistent read view of `store`.
    ///
    /// Group viewers' teams are resolved from that same view. Storage failures become one
    /// `INTERNAL` error.
    pub async fn execute(&self, store: &Store, mut viewer: Viewer, mut request: async_graphql::Request) -> async_graphql::Response {
        let view = match store.read() {
            Ok(v) => v,
            Err(e) => return async_graphql::Response::from_errors(vec![error::internal(e).into_server_error(Default::default())]),
        };
        if let Err(e) = viewer.resolve(&view) {
            return async_graphql::Response::from_errors(vec![error::internal(e).into_server_error(Default::default())]);
        }
        let now = self.config.now.unwrap_or_else(|| Timestamp::from_datetime(chrono::Utc::now()));
        // The search index registered with the store, if one is open (catalogue search).
        let catalogue = store.catalogue();
        let rq = Rq { view, viewer, now, max_page_size: self.config.max_page_size, catalogue };
        // `nodes` can only be selected by a query whose text contains the word.
        let schemas = if request.query.contains("nodes") { &self.nodes } else { &self.plain };
        let parsed = self.parsed.get(&request.query);
        let unnamed = request.operation_name.is_none();
        let validated = parsed.as_ref().is_some_and(|p| unnamed && p.validated.load(std::sync::atomic::Ordering::Relaxed));
        if let Some(p) = &parsed {
            request.set_parsed_query(p.doc.clone());
        }
        if validated {
            return schemas.fast.execute(request.data(rq)).await;
        }
        let response = schemas.strict.execute(request.data(rq)).await;
        if let Some(p) = parsed.filter(|p| unnamed && p.variable_free && response.errors.is_empty()) {
            p.validated.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        response
    }
}

#[cfg(test)]
mod parse_cache_tests {
    use super::ParseCache;

    fn len(c: &ParseCache) -> usize {
        c.0.lock().unwrap().len()
    }

    #[test]
    fn keeps_parsed_documents_up_to_its_bounds() {
        let c = ParseCache::default();
        let q = "query Q($n: Int) { teams(first: $n) { totalCount } }";
        let first = c.get(q).expect("parses");
        let again = c.get(q).expect("cached");
        assert!(std::sync::Arc::ptr_eq(&first, &again), "the cached document is the parsed one");
        assert!(!first.variable_free);
        assert!(c.get("query { teams { totalCount } }").unwrap().variable_free);
        assert_eq!(len(&c), 2);
        c.0.lock().unwrap().clear();
        c.get(q).unwrap();
        assert_eq!(len(&c), 1);
        assert!(c.get("{ teams(first: ").is_none(), "a syntax error is left to the executor");
        assert_eq!(len(&c), 1);
        let long = format!("{{ teams {{ totalCount }} }} #{}", "x".repeat(ParseCache::MAX_TEXT));
        assert!(c.get(&long).is_none(), "too long to keep");
        assert_eq!(len(&c), 1);
        for i in 0..ParseCache::MAX_ENTRIES {
            c.get(&format!("{{ teams(first: {i}) {{ totalCount }} }}")).unwrap();
        }
        assert!(len(&c) <= ParseCache::MAX_ENTRIES, "bounded: {}", len(&c));
        assert!(len(&c) >= 1);
    }
}

#[cfg(test)]
mod validation_tests {
    use super::*;
    use async_graphql::{Request, Variables};

    fn admin() -> Viewer {
        Viewer::from_claims(
            &serde_json::json!({"clientId": "platform--admins--console", "scope": "tardis:admin:all", "env": "poc"}),
            "tardis",
        )
        .unwrap()
    }

    fn validated(api: &Api, query: &str) -> bool {
        api.parsed.get(query).is_some_and(|p| p.validated.load(std::sync::atomic::Ordering::Relaxed))
    }

    async fn errors(api: &Api, store: &Store, query: &str, variables: serde_json::Value) -> Vec<String> {
        let r = api.execute(store, admin(), Request::new(query).variables(Variables::from_json(variables))).await;
        r.errors.iter().map(|e| e.message.clone()).collect()
    }

    /// Only a variable-free text answered without errors skips the full validation later; a
    /// text with variables, or one that fails, is validated on every request, with the same
    /// messages as on a fresh schema.
    #[tokio::test]
    async fn only_texts_that_passed_without_variables_skip_the_full_validation() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let api = build_schema(QueryConfig::default()).unwrap();
        let plain = "{ teams { totalCount } }";
        assert_eq!(errors(&api, &store, plain, serde_json::json!({})).await, Vec::<String>::new());
        assert!(validated(&api, plain));
        assert_eq!(errors(&api, &store, plain, serde_json::json!({})).await, Vec::<String>::new(), "the fast path answers too");

        let bad = "{ teams { noSuchField } }";
        let fresh = errors(&build_schema(QueryConfig::default()).unwrap(), &store, bad, serde_json::json!({})).await;
        assert_eq!(fresh.len(), 1, "{fresh:?}");
        assert!(fresh[0].contains("noSuchField"), "{fresh:?}");
        for _ in 0..2 {
            assert_eq!(errors(&api, &store, bad, serde_json::json!({})).await, fresh);
            assert!(!validated(&api, bad));
        }

        let with_vars = "query($w: TeamWhereInput) { teams(where: $w) { totalCount } }";
        assert_eq!(errors(&api, &store, with_vars, serde_json::json!({"w": {"nameHasPrefix": "a"}})).await, Vec::<String>::new());
        assert!(!validated(&api, with_vars), "variables are checked per request");
        let bad_vars = serde_json::json!({"w": {"noSuchField": "a"}});
        let fresh = errors(&build_schema(QueryConfig::default()).unwrap(), &store, with_vars, bad_vars.clone()).await;
        assert!(!fresh.is_empty());
        assert_eq!(errors(&api, &store, with_vars, bad_vars).await, fresh);
    }
}
