//! GraphQL over the read model: the schema (built once from one [`entity::Entity`] description
//! per kind), Relay connections, `where`/`orderBy`, the viewer model and team isolation.
//!
//! **Architecture invariants.** Every read passes the viewer filter ([`viewer`]). GraphQL error
//! codes are produced here only ([`error`]). Nothing here knows HTTP or tokens: the server hands
//! in a [`viewer::Viewer`] built from verified claims and a [`storage::Store`].
//!
//! Start at [`build_schema`] and [`execute`].

#![forbid(unsafe_code)]

pub mod changes;
pub mod column;
pub mod commands;
pub mod connection;
pub mod deadline;
pub mod entity;
pub mod error;
pub mod export;
pub mod fields;
pub mod filter;
pub mod history;
mod kinds;
pub use kinds::team_owned;
pub mod limits;
pub mod mutations;
pub mod node;
mod nodes_ext;
pub mod persisted;
pub mod plan;
pub mod relay;
pub mod request;
mod search;
pub mod secrets;
mod url;
pub mod viewer;

use async_graphql::dynamic::{Object, Scalar, Schema, SchemaError, TypeRef};
use async_graphql::parser::types::{ExecutableDocument, OperationType};
use async_graphql::ValidationMode;
use entity::Builder;
use fields::{boolean, field, nullable_string};
use request::RequestContext;
use schema::Timestamp;
use std::sync::Arc;
use storage::Store;
use viewer::Viewer;

/// An error that already carries its GraphQL presentation.
#[derive(Debug)]
pub struct QueryError(pub async_graphql::Error);

impl From<QueryError> for async_graphql::Error {
    fn from(e: QueryError) -> async_graphql::Error {
        e.0
    }
}

/// Settings of the GraphQL layer.
#[derive(Clone, Debug)]
pub struct QueryConfig {
    /// The bounds of every request (`graphql.*` limit settings; see [`limits::Limits`]).
    pub limits: limits::Limits,
    /// A pinned clock for time-dependent fields (`--now`); `None` = wall clock per request.
    pub now: Option<Timestamp>,
    /// Whether introspection is enabled (default true).
    pub introspection: bool,
    /// Whether a text answered once runs by its plan ([`plan`]; default true).
    pub planned_execution: bool,
    /// Query texts kept for automatic persisted queries ([`persisted`]; default
    /// [`persisted::DEFAULT_CAPACITY`]), at least 1.
    pub persisted_queries: usize,
    /// The file manager's base URL (`https://files.example`, no trailing `/`):
    /// `specificationUrl` is `<this>/files/<specification>`; `None` = always null.
    pub file_manager_base_url: Option<String>,
    /// Resolves secret references `$<id>` ([`secrets`]); `None` = references are answered as
    /// stored.
    pub secret_resolver: Option<Arc<dyn secrets::SecretResolver>>,
    /// Writes the mutations' commands to the cluster ([`commands`]); `None` = every mutation
    /// answers `PRECONDITION_FAILED` "mutations are disabled".
    pub command_sink: Option<Arc<dyn commands::CommandSink>>,
}

impl Default for QueryConfig {
    fn default() -> QueryConfig {
        QueryConfig {
            limits: limits::Limits::default(),
            now: None,
            introspection: true,
            planned_execution: true,
            file_manager_base_url: None,
            persisted_queries: persisted::DEFAULT_CAPACITY,
            secret_resolver: None,
            command_sink: None,
        }
    }
}

/// A request heavier than this node estimate runs as heavy work ([`Prepared::is_heavy`]).
pub const LIGHT_NODES: u64 = 10_000;

/// The executable schema plus the settings requests need.
///
/// Two builds of the same schema: `nodes` with the [`nodes_ext::NullableNodes`] extension that
/// lets `nodes(ids:)` answer `null` elements, and `plain` without it. An extension wraps every
/// field's resolution in a boxed future, so requests that cannot select `nodes` run on `plain`.
pub struct Api {
    plain: Validating,
    nodes: Validating,
    /// The schema subscriptions run on: each event on a context of its own
    /// ([`changes::ChangeEvents`]).
    subscriptions: Schema,
    config: QueryConfig,
    limits: Arc<limits::Limits>,
    /// The memory budget of the requests in flight (`graphql.maxInFlightBytes`).
    pool: Arc<deadline::MemoryPool>,
    shapes: limits::Shapes,
    parsed: ParseCache,
    persisted: persisted::PersistedQueries,
    /// The column names of each entity type ([`entity::Entity::columns`]; exports write rows of
    /// columns directly, [`export`]).
    columns: std::collections::HashMap<&'static str, Vec<&'static str>>,
    /// What plans are made from ([`plan`]).
    catalog: plan::Catalog,
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
/// [`ParseCache::MAX_TEXT`] bytes are not kept; a full cache ([`ParseCache::MAX_ENTRIES`]
/// documents or [`ParseCache::MAX_TEXT_BYTES`] of texts) is emptied (the working set is small
/// and refills at once). A concurrent map: every request looks its text up, and one lock
/// would serialize them.
#[derive(Default)]
struct ParseCache {
    texts: dashmap::DashMap<String, Arc<Parsed>, foldhash::fast::RandomState>,
    /// The estimated bytes of the kept documents' plans (at most [`plan::MAX_PLAN_BYTES`]).
    plan_bytes: std::sync::atomic::AtomicUsize,
    /// The bytes of the kept texts (at most [`ParseCache::MAX_TEXT_BYTES`]).
    text_bytes: std::sync::atomic::AtomicUsize,
}

/// A cached parsed document.
struct Parsed {
    doc: ExecutableDocument,
    /// No operation of the document declares a variable.
    variable_free: bool,
    /// A request of this text without an operation name was answered without errors on the
    /// strict schema (see [`Validating`]); only set when `variable_free`.
    validated: std::sync::atomic::AtomicBool,
    /// The document's plan ([`plan`]), made once a request of it was answered without errors;
    /// `None` inside when the plan does not cover it (or the plans' byte bound was reached).
    plan: std::sync::OnceLock<Option<Arc<plan::Plan>>>,
}

impl ParseCache {
    /// Most documents kept.
    const MAX_ENTRIES: usize = 256;
    /// Longest query text kept, in bytes: a wide text (hundreds of aliases) is kept too, so
    /// that it is planned, and a plan writes its answer as bytes rather than a tree of values.
    const MAX_TEXT: usize = 64 * 1024;
    /// The kept texts' bytes together (their parsed documents take some tens of times more).
    const MAX_TEXT_BYTES: usize = 1 << 20;

    /// The parsed document of `query`, parsed now when not cached; `None` when it does not
    /// parse (the executor then reports the syntax error as usual) or is too long to keep.
    fn get(&self, query: &str) -> Option<Arc<Parsed>> {
        if query.len() > Self::MAX_TEXT {
            return None;
        }
        self.texts.get(query).map(|hit| hit.value().clone())
    }

    /// Parses `query` and keeps it (when short enough); `None` when it does not parse (the
    /// executor then reports the syntax error as usual).
    fn parse(&self, query: &str) -> Option<Arc<Parsed>> {
        let doc = async_graphql::parser::parse_query(query).ok()?;
        let variable_free = doc.operations.iter().all(|(_, op)| op.node.variable_definitions.is_empty());
        let parsed = Arc::new(Parsed { doc, variable_free, validated: Default::default(), plan: Default::default() });
        if query.len() > Self::MAX_TEXT {
            return Some(parsed);
        }
        use std::sync::atomic::Ordering;
        if self.texts.len() >= Self::MAX_ENTRIES || self.text_bytes.load(Ordering::Relaxed) + query.len() > Self::MAX_TEXT_BYTES {
            self.texts.clear();
            self.plan_bytes.store(0, Ordering::Relaxed);
            self.text_bytes.store(0, Ordering::Relaxed);
        }
        if self.texts.insert(query.to_string(), parsed.clone()).is_none() {
            self.text_bytes.fetch_add(query.len(), Ordering::Relaxed);
        }
        Some(parsed)
    }

    /// The plan of `parsed` (made now if not yet), `None` when the plan does not cover it or
    /// the plans' byte bound is reached. Only for a document answered once without errors.
    fn plan(&self, parsed: &Parsed, catalog: &plan::Catalog) -> Option<Arc<plan::Plan>> {
        use std::sync::atomic::Ordering;
        parsed
            .plan
            .get_or_init(|| {
                let plan = plan::Plan::build(&parsed.doc, catalog)?;
                let before = self.plan_bytes.fetch_add(plan.bytes, Ordering::Relaxed);
                if before + plan.bytes > plan::MAX_PLAN_BYTES {
                    self.plan_bytes.fetch_sub(plan.bytes, Ordering::Relaxed);
                    return None;
                }
                Some(Arc::new(plan))
            })
            .clone()
    }
}

/// Builds the GraphQL schema.
///
/// # Errors
/// [`SchemaError`] when the generated schema is inconsistent (a bug, caught by the SDL test).
pub fn build_schema(config: QueryConfig) -> Result<Api, SchemaError> {
    let (mut records, mut columns, mut connections, mut loaders, mut resolvers) = Default::default();
    // Every build has the same object types (the extensions and the validation mode differ):
    // their fields are read from the first build's SDL.
    let object_types = std::sync::OnceLock::new();
    let mut both = |nodes| -> Result<Validating, SchemaError> {
        let extras = Extras { nullable_nodes: nodes, change_events: false };
        let (built, table) = fields::collecting(|| build(&config, extras, ValidationMode::Strict, &object_types));
        let (strict, (r, c, p, l)) = built?;
        (records, columns, connections, loaders, resolvers) = (r, c, p, l, table);
        Ok(Validating { strict, fast: build(&config, extras, ValidationMode::Fast, &object_types)?.0 })
    };
    let plain = both(false)?;
    let nodes = both(true)?;
    let subscriptions = build(&config, Extras { nullable_nodes: false, change_events: true }, ValidationMode::Strict, &object_types)?.0;
    let sdl = plain.strict.sdl();
    let shapes = limits::Shapes::new(&sdl, records).map_err(|e| SchemaError(format!("the generated SDL does not parse: {e}")))?;
    let limits = Arc::new(limits::Limits { max_depth: config.limits.max_depth.min(limits::MAX_DEPTH_CEILING), ..config.limits.clone() });
    let persisted = persisted::PersistedQueries::new(config.persisted_queries);
    let catalog = plan::Catalog::new(&sdl, resolvers, connections, loaders)
        .ok_or_else(|| SchemaError("the generated SDL does not parse".to_string()))?;
    let pool = deadline::MemoryPool::new(limits.max_in_flight_bytes);
    Ok(Api { plain, nodes, subscriptions, config, limits, pool, shapes, parsed: ParseCache::default(), persisted, columns, catalog })
}

/// The extensions of one build of the schema.
#[derive(Clone, Copy)]
struct Extras {
    /// [`nodes_ext::NullableNodes`].
    nullable_nodes: bool,
    /// [`changes::ChangeEvents`] (the subscription schema).
    change_events: bool,
}

/// The column names of each entity type.
type ColumnNames = std::collections::HashMap<&'static str, Vec<&'static str>>;

/// What a schema build learns besides the schema: each record list's shape, the columns of
/// each type ([`Api::columns_of`]), the connections and record loaders plans read.
type BuiltShapes = (
    std::collections::HashMap<String, limits::RecordList>,
    ColumnNames,
    plan::tree::PlannedConnections,
    std::collections::HashMap<&'static str, plan::tree::RecordLoader>,
);

/// The fields of every object type, by type name ([`history::object_fields_of`]).
type ObjectTypes = std::collections::HashMap<String, Vec<String>>;

/// Builds one schema; `object_types` is filled from its SDL by the first build and shared.
fn build(
    config: &QueryConfig,
    extras: Extras,
    validation: ValidationMode,
    object_types: &std::sync::OnceLock<ObjectTypes>,
) -> Result<(Schema, BuiltShapes), SchemaError> {
    let mut builder = Builder::default();
    builder.file_manager_base_url = config.file_manager_base_url.as_deref().map(Arc::from);
    builder.secret_resolver = config.secret_resolver.clone();
    builder.enumeration("OrderDirection", &["ASC", "DESC"]);
    builder.object(
        Object::new("PageInfo")
            .field(field::<relay::PageInfo>("hasNextPage", TypeRef::named_nn(TypeRef::BOOLEAN), |p, _| Ok(boolean(p.has_next))))
            .field(field::<relay::PageInfo>("hasPreviousPage", TypeRef::named_nn(TypeRef::BOOLEAN), |p, _| Ok(boolean(p.has_previous))))
            .field(field::<relay::PageInfo>("startCursor", TypeRef::named("Cursor"), |p, _| Ok(nullable_string(p.start.as_deref()))))
            .field(field::<relay::PageInfo>("endCursor", TypeRef::named("Cursor"), |p, _| Ok(nullable_string(p.end.as_deref())))),
    );
    kinds::register_all(&mut builder);
    search::register(&mut builder);
    let loaders = node::register_node(&mut builder);
    let mutation = mutations::register(&mut builder, config.command_sink.clone());
    let mut subscription = async_graphql::dynamic::Subscription::new("Subscription").field(changes::register(&mut builder, loaders));
    history::register(&mut builder);
    let object_fields = builder.object_fields.clone();
    for f in std::mem::take(&mut builder.subscription_fields) {
        subscription = subscription.field(f);
    }

    let mut query = Object::new("Query");
    for f in std::mem::take(&mut builder.query_fields) {
        query = query.field(f);
    }
    let mut sb = Schema::build("Query", Some("Mutation"), Some("Subscription"))
        .register(mutation)
        .register(subscription)
        .register(Scalar::new("Time").description("RFC 3339 date-time"))
        .register(Scalar::new("Cursor").description("An opaque pagination cursor"))
        .register(Scalar::new("Map").description("A JSON object"))
        .register(query)
        .limit_depth(config.limits.max_depth.min(limits::MAX_DEPTH_CEILING))
        .limit_complexity(config.limits.max_complexity)
        .validation_mode(validation);
    for o in builder.take_objects() {
        sb = sb.register(o);
    }
    for e in builder.enums {
        sb = sb.register(e);
    }
    for i in builder.inputs {
        sb = sb.register(i);
    }
    for i in builder.interfaces {
        sb = sb.register(i);
    }
    for u in builder.unions {
        sb = sb.register(u);
    }
    if !config.introspection {
        sb = sb.disable_introspection();
    }
    if extras.nullable_nodes {
        sb = sb.extension(nodes_ext::NullableNodes);
    }
    if extras.change_events {
        sb = sb.extension(changes::ChangeEvents);
    }
    let schema = sb.finish()?;
    let _ = object_fields.set(object_types.get_or_init(|| history::object_fields_of(&schema.sdl())).clone());
    Ok((schema, (builder.records, builder.column_names, builder.planned_connections, builder.record_loaders)))
}

impl Api {
    /// The schema in SDL.
    pub fn sdl(&self) -> String {
        self.plain.strict.sdl()
    }

    /// The limits every request is measured against.
    pub fn limits(&self) -> &limits::Limits {
        &self.limits
    }

    /// Executes one GraphQL request for `viewer` on a consistent read view of `store`, without
    /// a deadline: [`Api::prepare`] then [`Api::run`].
    pub async fn execute(&self, store: &Store, viewer: Viewer, graphql_request: async_graphql::Request) -> async_graphql::Response {
        match self.prepare(store, viewer, graphql_request, deadline::Deadline::none()) {
            Ok(p) => self.run(p).await,
            Err(refused) => *refused,
        }
    }

    /// Everything before execution, bounded by the request's size: the text is scanned and
    /// parsed (parsed documents are cached by text), the variables checked, a read view opened
    /// (group viewers' teams resolved from it), and the operation measured against the
    /// [`limits`] (fields, depth, node estimate, filters, search texts).
    ///
    /// # Errors
    /// The answer to send instead: one error with the limit's code, or `INTERNAL` for a
    /// storage failure.
    pub fn prepare(
        &self,
        store: &Store,
        mut viewer: Viewer,
        mut graphql_request: async_graphql::Request,
        deadline: deadline::Deadline,
    ) -> Result<Prepared, Box<async_graphql::Response>> {
        let refuse = |e: limits::LimitError| Box::new(async_graphql::Response::from_errors(vec![e.into_server_error()]));
        self.persisted.resolve(&mut graphql_request).map_err(|e| Box::new(async_graphql::Response::from_errors(vec![e])))?;
        let parsed = match self.parsed.get(&graphql_request.query) {
            Some(hit) => Some(hit),
            None => {
                limits::scan_text(&graphql_request.query, &self.limits).map_err(refuse)?;
                self.parsed.parse(&graphql_request.query)
            }
        };
        limits::check_variables(&graphql_request.variables, &self.limits).map_err(refuse)?;
        let unreadable = |e: storage::StorageError| async_graphql::Response::from_errors(vec![error::storage_request_error(e)]);
        let view = store.read().map_err(unreadable)?;
        viewer.resolve(&view).map_err(unreadable)?;
        let op = parsed.as_ref().and_then(|p| operation_type(&p.doc, graphql_request.operation_name.as_deref()));
        if op == Some(OperationType::Subscription) {
            return Err(Box::new(async_graphql::Response::from_errors(vec![error::subscription_over_http()])));
        }
        let mutation = op == Some(OperationType::Mutation);
        if let Some(p) = parsed.as_ref().filter(|_| mutation) {
            // `__typename` writes nothing: it does not count.
            let writes = root_fields(&p.doc, graphql_request.operation_name.as_deref(), mutations::MAX_MUTATIONS, false);
            if writes > mutations::MAX_MUTATIONS {
                return Err(Box::new(async_graphql::Response::from_errors(vec![error::too_many_mutations(mutations::MAX_MUTATIONS)])));
            }
        }
        let mut cost = limits::Cost::default();
        if let Some(p) = &parsed {
            cost = self.measure(&p.doc, &graphql_request, &view, &viewer).map_err(refuse)?;
            graphql_request.set_parsed_query(p.doc.clone());
        }
        let request = RequestContext::new(store, view, viewer, deadline, self.config.now, &self.limits, &self.pool);
        Ok(Prepared { request, graphql_request, parsed, cost, store: store.clone(), mutation })
    }

    /// The operation of `request` in `doc` measured against the [`limits`], lists of records
    /// bounded by what `viewer` can see on `view`.
    fn measure(
        &self,
        doc: &ExecutableDocument,
        graphql_request: &async_graphql::Request,
        view: &storage::ReadView,
        viewer: &Viewer,
    ) -> Result<limits::Cost, limits::LimitError> {
        let mut counts = std::collections::HashMap::new();
        let mut bound =
            |r: limits::RecordList| *counts.entry(r).or_insert_with(|| list_bound(view, viewer, r, self.config.limits.max_page_size));
        limits::analyze(doc, graphql_request.operation_name.as_deref(), &graphql_request.variables, &self.shapes, &self.limits, &mut bound)
    }

    /// Everything before a subscription runs, as [`Api::prepare`] measures a query: the text,
    /// the variables and the operation against the [`limits`] (its selection is what each
    /// event resolves). `log` is the change log it follows; `deadline` gives each event's
    /// deadline. The read view used to measure it is closed again: a subscription holds none
    /// between events.
    ///
    /// # Errors
    /// The answer to send instead (one error): a limit's code, `SUBSCRIPTION_TOO_HEAVY` for a
    /// selection heavier than light work (a node estimate over [`LIGHT_NODES`] per event, a
    /// search or an edge filter), `BAD_REQUEST` for an operation that is not a subscription,
    /// `INTERNAL` for a storage failure.
    pub fn prepare_subscription(
        &self,
        store: &Store,
        viewer: Viewer,
        mut graphql_request: async_graphql::Request,
        log: &changes::ChangeLog,
        deadline: Arc<dyn Fn() -> deadline::Deadline + Send + Sync>,
    ) -> Result<async_graphql::Request, Box<async_graphql::Response>> {
        let refuse = |e: limits::LimitError| Box::new(async_graphql::Response::from_errors(vec![e.into_server_error()]));
        self.persisted.resolve(&mut graphql_request).map_err(|e| Box::new(async_graphql::Response::from_errors(vec![e])))?;
        limits::scan_text(&graphql_request.query, &self.limits).map_err(refuse)?;
        limits::check_variables(&graphql_request.variables, &self.limits).map_err(refuse)?;
        let doc = match async_graphql::parser::parse_query(&graphql_request.query) {
            Ok(doc) => doc,
            // The executor reports the syntax error as usual.
            Err(_) => return Ok(graphql_request),
        };
        if operation_type(&doc, graphql_request.operation_name.as_deref()) != Some(OperationType::Subscription) {
            return Err(Box::new(async_graphql::Response::from_errors(vec![error::not_a_subscription()])));
        }
        // GraphQL's "single root field" rule (which the executor does not check): one stream
        // per subscription, so the subscription limits count what runs.
        if root_fields(&doc, graphql_request.operation_name.as_deref(), 1, true) != 1 {
            return Err(Box::new(async_graphql::Response::from_errors(vec![error::not_one_root_field()])));
        }
        let unreadable = |e: storage::StorageError| async_graphql::Response::from_errors(vec![error::storage_request_error(e)]);
        {
            let view = store.read().map_err(unreadable)?;
            let mut measured = viewer.clone();
            measured.resolve(&view).map_err(unreadable)?;
            let cost = self.measure(&doc, &graphql_request, &view, &measured).map_err(refuse)?;
            // Events are resolved as they come, on the connection's task: light work only.
            if cost.nodes > LIGHT_NODES || cost.searches || cost.edge_filters {
                return Err(Box::new(async_graphql::Response::from_errors(vec![error::subscription_too_heavy(cost.nodes, LIGHT_NODES)])));
            }
        }
        graphql_request.set_parsed_query(doc);
        let data = changes::SubscriptionData::new(
            store,
            viewer,
            &graphql_request,
            log,
            deadline,
            self.config.now,
            (self.limits.clone(), self.pool.clone()),
        );
        Ok(graphql_request.data(data))
    }

    /// Runs a prepared subscription: one answer per event (errors with their codes, as
    /// [`Api::run`] gives them); the stream ends after an answer with errors.
    pub fn subscribe(
        &self,
        graphql_request: async_graphql::Request,
    ) -> async_graphql::futures_util::stream::BoxStream<'static, async_graphql::Response> {
        use async_graphql::futures_util::StreamExt;
        let limits = self.limits.clone();
        self.subscriptions.execute_stream(graphql_request).map(move |r| with_codes(cap_errors(r), &limits)).boxed()
    }

    /// Executes a prepared request. Resolvers run synchronously inside this future (they read
    /// the store): run it off the async workers. Once the request's deadline passed, the
    /// answer is one `TIMEOUT` error (`UNAVAILABLE` when the server shuts down), without data.
    pub async fn run(&self, prepared: Prepared) -> async_graphql::Response {
        if prepared.mutation {
            return self.run_mutation(prepared).await;
        }
        let Prepared { request, graphql_request, parsed, .. } = prepared;
        // The same deadline stays readable after `request` moved into the GraphQL request.
        let deadline = request.deadline.clone();
        if deadline.passed() {
            return async_graphql::Response::from_errors(vec![deadline.server_error()]);
        }
        let schemas = self.schemas_for(&graphql_request.query);
        let unnamed = graphql_request.operation_name.is_none();
        let validated = parsed.as_ref().is_some_and(|p| unnamed && p.validated.load(std::sync::atomic::Ordering::Relaxed));
        let response = if validated {
            schemas.fast.execute(graphql_request.data(request)).await
        } else {
            let response = schemas.strict.execute(graphql_request.data(request)).await;
            if let Some(p) = parsed.as_ref().filter(|p| unnamed && p.variable_free && response.errors.is_empty()) {
                p.validated.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            response
        };
        // Answered without errors, or stopped only by the size of its answer (which comes after
        // validation): the text parses and validates; later requests may run its plan. A plan
        // writes bytes, not a tree of values, so a large answer costs its size.
        let valid = response.errors.is_empty() || (deadline.answer_too_large() && !deadline.shutting_down());
        if let Some(p) = parsed.filter(|_| self.config.planned_execution && valid) {
            self.parsed.plan(&p, &self.catalog);
        }
        if deadline.passed() {
            return async_graphql::Response::from_errors(vec![deadline.server_error()]);
        }
        with_codes(cap_errors(response), &self.limits)
    }

    /// Answers a prepared request: by its text's plan when there is one ([`plan`]), else (or
    /// when the plan gives way: a variable it does not coerce, an error) as [`Api::run`] does.
    pub async fn answer(&self, prepared: Prepared) -> Answer {
        let planned = prepared.parsed.as_ref().and_then(|p| p.plan.get().cloned().flatten());
        if let Some(plan) = planned.filter(|p| !prepared.mutation && p.runs(prepared.graphql_request.operation_name.as_deref())) {
            let deadline = prepared.request.deadline.clone();
            let spent = deadline.spent();
            let data = plan.execute(&prepared.request, &prepared.graphql_request.variables, &self.catalog);
            if deadline.passed() {
                return Answer::Response(async_graphql::Response::from_errors(vec![deadline.server_error()]));
            }
            match data {
                Ok(data) => return Answer::Planned(data),
                // Charged again by the resolvers.
                Err(_) => deadline.restore_spent(spent),
            }
        }
        Answer::Response(self.run(prepared).await)
    }

    /// [`Api::prepare`] then [`Api::answer`], without a deadline.
    pub async fn execute_answer(&self, store: &Store, viewer: Viewer, graphql_request: async_graphql::Request) -> Answer {
        match self.prepare(store, viewer, graphql_request, deadline::Deadline::none()) {
            Ok(p) => self.answer(p).await,
            Err(refused) => Answer::Response(*refused),
        }
    }
}

/// The answer to a request ([`Api::answer`]).
pub enum Answer {
    /// async-graphql's response.
    Response(async_graphql::Response),
    /// The JSON of the answer's `data`, written by a plan: an answer without errors.
    Planned(Vec<u8>),
}

impl Answer {
    /// Whether a plan wrote the answer.
    pub fn is_planned(&self) -> bool {
        matches!(self, Answer::Planned(_))
    }

    /// The answer as JSON, as async-graphql writes a response (`data`, `extensions`,
    /// `errors`), with `extensions` added.
    pub fn into_json(self, extensions: std::collections::BTreeMap<String, async_graphql::Value>) -> Vec<u8> {
        match self {
            Answer::Response(mut r) => {
                r.extensions.extend(extensions);
                serde_json::to_vec(&r).unwrap_or_default()
            }
            Answer::Planned(data) => {
                let mut out = Vec::with_capacity(data.len() + 16);
                out.extend_from_slice(b"{\"data\":");
                out.extend_from_slice(&data);
                if !extensions.is_empty() {
                    out.extend_from_slice(b",\"extensions\":");
                    out.extend_from_slice(&serde_json::to_vec(&extensions).unwrap_or_default());
                }
                out.push(b'}');
                out
            }
        }
    }
}

impl Api {
    /// The builds a request of text `query` runs on: `nodes(ids:)` can only be selected by a
    /// text that contains the word (see [`Api`]).
    fn schemas_for(&self, query: &str) -> &Validating {
        if query.contains("nodes") {
            &self.nodes
        } else {
            &self.plain
        }
    }

    /// Runs a mutation request in two passes ([`mutations`]): the first executes the writes in
    /// document order (each answered once projected, or its projection timeout passed) and keeps
    /// their outcomes; the second resolves the same selection on a read view opened after them.
    async fn run_mutation(&self, prepared: Prepared) -> async_graphql::Response {
        let Prepared { request, graphql_request, parsed, store, .. } = prepared;
        let deadline = request.deadline.clone();
        let timeout = |deadline: &deadline::Deadline| async_graphql::Response::from_errors(vec![deadline.server_error()]);
        if deadline.passed() {
            return timeout(&deadline);
        }
        let mut again = async_graphql::Request::new(graphql_request.query.clone()).variables(graphql_request.variables.clone());
        if let Some(name) = &graphql_request.operation_name {
            again = again.operation_name(name.clone());
        }
        if let Some(p) = &parsed {
            again.set_parsed_query(p.doc.clone());
        }
        let viewer = request.viewer.clone();
        let run = mutations::MutationRun::execute();
        let first = self.plain.strict.execute(graphql_request.data(request).data(run.clone())).await;
        if deadline.passed() {
            return timeout(&deadline);
        }
        if !run.ran() {
            return with_codes(cap_errors(first), &self.limits);
        }
        let unreadable = |e: storage::StorageError| async_graphql::Response::from_errors(vec![error::storage_request_error(e)]);
        let view = match store.read() {
            Ok(v) => v,
            Err(e) => return unreadable(e),
        };
        let mut viewer = viewer;
        if let Err(e) = viewer.resolve(&view) {
            return unreadable(e);
        }
        let request = RequestContext::new(&store, view, viewer, deadline.clone(), self.config.now, &self.limits, &self.pool);
        let answer = self.plain.strict.execute(again.data(request).data(run.answer())).await;
        if deadline.passed() {
            return timeout(&deadline);
        }
        with_codes(cap_errors(answer), &self.limits)
    }
}

/// The fields of the root selection of the operation `name` (or the only one) of `doc`, through
/// fragment spreads and inline fragments (a fragment cycle counts as many; counting stops past
/// `cap`: the caller asks whether there are more); `__typename` counts only when `typename`.
fn root_fields(doc: &ExecutableDocument, name: Option<&str>, cap: usize, typename: bool) -> usize {
    use async_graphql::parser::types::{DocumentOperations, Selection, SelectionSet};
    let op = match (&doc.operations, name) {
        (DocumentOperations::Single(op), None) => op,
        (DocumentOperations::Multiple(ops), Some(name)) => match ops.get(name) {
            Some(op) => op,
            None => return 0,
        },
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next().expect("one operation"),
        _ => return 0,
    };
    /// The walk: `visits` bounds its work (a doubling chain of fragments of `__typename`
    /// would be exponential); past it the answer is "more than `cap`".
    struct Walk<'a> {
        doc: &'a ExecutableDocument,
        cap: usize,
        typename: bool,
        visits: usize,
    }
    impl Walk<'_> {
        fn count(&mut self, set: &SelectionSet, depth: usize) -> usize {
            let mut n = 0;
            for item in &set.items {
                self.visits += 1;
                if n > self.cap || depth > 32 || self.visits > ROOT_WALK_VISITS {
                    return self.cap + 1;
                }
                n += match &item.node {
                    Selection::Field(f) => usize::from(self.typename || f.node.name.node != "__typename"),
                    Selection::InlineFragment(f) => self.count(&f.node.selection_set.node, depth + 1),
                    Selection::FragmentSpread(s) => match self.doc.fragments.get(&s.node.fragment_name.node) {
                        Some(f) => self.count(&f.node.selection_set.node, depth + 1),
                        None => 0,
                    },
                };
            }
            n
        }
    }
    Walk { doc, cap, typename, visits: 0 }.count(&op.node.selection_set.node, 0)
}

/// The most selections [`root_fields`] visits.
const ROOT_WALK_VISITS: usize = 10_000;

/// The type of the operation of `doc` a request runs: the one named `name`, or the only one.
fn operation_type(doc: &ExecutableDocument, name: Option<&str>) -> Option<OperationType> {
    use async_graphql::parser::types::DocumentOperations;
    match (&doc.operations, name) {
        (DocumentOperations::Single(op), None) => Some(op.node.ty),
        (DocumentOperations::Single(_), Some(_)) => None,
        (DocumentOperations::Multiple(ops), Some(name)) => ops.get(name).map(|op| op.node.ty),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next().map(|op| op.node.ty),
        (DocumentOperations::Multiple(_), None) => None,
    }
}

/// The most errors one answer lists; the rest are counted in one last error.
pub const MAX_ERRORS: usize = 1000;

/// Keeps the first [`MAX_ERRORS`] errors of an answer and says how many more there were.
fn cap_errors(mut response: async_graphql::Response) -> async_graphql::Response {
    if response.errors.len() > MAX_ERRORS {
        let more = response.errors.len() - MAX_ERRORS;
        response.errors.truncate(MAX_ERRORS);
        let mut last = async_graphql::ServerError::new(format!("{more} more errors are not listed"), None);
        let mut ext = async_graphql::ErrorExtensionValues::default();
        ext.set("code", "TOO_MANY_ERRORS");
        last.extensions = Some(ext);
        response.errors.push(last);
    }
    response
}

/// Gives the executor's own request errors an `extensions.code`: its backstop limits the code
/// of the same limit here (with `limit` and `max`), the rest of a request answered without data
/// (a syntax or validation error) `GRAPHQL_VALIDATION_FAILED`, as Apollo names it.
fn with_codes(mut response: async_graphql::Response, limits: &limits::Limits) -> async_graphql::Response {
    let request_level = response.data == async_graphql::Value::Null;
    for e in &mut response.errors {
        if e.extensions.as_ref().is_some_and(|x| x.get("code").is_some()) {
            continue;
        }
        let (code, limit) = match e.message.as_str() {
            "Query is too complex." => ("QUERY_TOO_COMPLEX", Some(("graphql.maxComplexity", limits.max_complexity))),
            "Query is nested too deep." => ("QUERY_TOO_DEEP", Some(("graphql.maxDepth", limits.max_depth))),
            _ if request_level => ("GRAPHQL_VALIDATION_FAILED", None),
            _ => continue,
        };
        let ext = e.extensions.get_or_insert_with(Default::default);
        ext.set("code", code);
        if let Some((setting, max)) = limit {
            ext.set("limit", setting);
            ext.set("max", max as u64);
        }
    }
    response
}

/// A request measured and ready to run ([`Api::prepare`], [`Api::run`]).
pub struct Prepared {
    /// The request's context (viewer, read view, deadline, limits), handed to the resolvers.
    request: RequestContext,
    /// The GraphQL request itself (query, variables, operation name).
    graphql_request: async_graphql::Request,
    parsed: Option<Arc<Parsed>>,
    cost: limits::Cost,
    /// Where a mutation's answer is read again after its writes.
    store: Store,
    mutation: bool,
}

impl Prepared {
    /// Whether the operation is a mutation (over GET the server refuses it:
    /// [`error::mutation_over_get`]).
    pub fn is_mutation(&self) -> bool {
        self.mutation
    }

    /// What the request was measured at.
    pub fn cost(&self) -> &limits::Cost {
        &self.cost
    }

    /// Whether the request is heavy work: a node estimate above [`LIGHT_NODES`], a search, or
    /// filters through edges. The server runs heavy requests with bounded concurrency.
    pub fn is_heavy(&self) -> bool {
        self.cost.nodes > LIGHT_NODES || self.cost.searches || self.cost.edge_filters
    }

    /// The request's deadline.
    pub fn deadline(&self) -> &deadline::Deadline {
        &self.request.deadline
    }
}

/// The largest possible length of a list of records for `viewer`: the records of the kind it
/// may see (counters, summed over its scopes). A reduced view (`…Info`) crosses tenants: an
/// admin's bound is every record of the kind, anyone else's the maximum page size — never a
/// count of records the viewer cannot see (which a refusal would reveal).
fn list_bound(view: &storage::ReadView, viewer: &Viewer, r: limits::RecordList, max_page_size: usize) -> u64 {
    let (kind, scopes) = match r {
        limits::RecordList::Visible { kind, team_owned } => (kind, viewer.scopes(team_owned)),
        limits::RecordList::All(kind) if viewer.is_admin() => (kind, vec![schema::Scope::All]),
        limits::RecordList::All(_) => return max_page_size as u64,
    };
    // A counter that cannot be read counts as unbounded: the request is refused, not guessed.
    scopes.iter().map(|s| view.count(kind, s).unwrap_or(u64::MAX)).fold(0u64, u64::saturating_add)
}

#[cfg(test)]
mod parse_cache_tests {
    use super::ParseCache;

    fn len(c: &ParseCache) -> usize {
        c.texts.len()
    }

    #[test]
    fn keeps_parsed_documents_up_to_its_bounds() {
        let c = ParseCache::default();
        let q = "query Q($n: Int) { teams(first: $n) { totalCount } }";
        assert!(c.get(q).is_none(), "not parsed yet");
        let first = c.parse(q).expect("parses");
        let again = c.get(q).expect("cached");
        assert!(std::sync::Arc::ptr_eq(&first, &again), "the cached document is the parsed one");
        assert!(!first.variable_free);
        assert!(c.parse("query { teams { totalCount } }").unwrap().variable_free);
        assert_eq!(len(&c), 2);
        c.texts.clear();
        c.parse(q).unwrap();
        assert_eq!(len(&c), 1);
        assert!(c.parse("{ teams(first: ").is_none(), "a syntax error is left to the executor");
        assert_eq!(len(&c), 1);
        let long = format!("{{ teams {{ totalCount }} }} #{}", "x".repeat(ParseCache::MAX_TEXT));
        assert!(c.parse(&long).is_some(), "parsed");
        assert!(c.get(&long).is_none(), "too long to keep");
        assert_eq!(len(&c), 1);
        for i in 0..ParseCache::MAX_ENTRIES {
            c.parse(&format!("{{ teams(first: {i}) {{ totalCount }} }}")).unwrap();
        }
        assert!(len(&c) <= ParseCache::MAX_ENTRIES, "bounded: {}", len(&c));
        assert!(len(&c) >= 1);
        // Wide texts are kept up to MAX_TEXT_BYTES together: past it, the cache starts over.
        c.texts.clear();
        c.text_bytes.store(0, std::sync::atomic::Ordering::Relaxed);
        let wide = |i: usize| format!("{{ teams {{ totalCount }} }} # {i} {}", "x".repeat(ParseCache::MAX_TEXT - 64));
        let per_text = ParseCache::MAX_TEXT_BYTES / wide(0).len();
        for i in 0..=per_text {
            c.parse(&wide(i)).unwrap();
            let kept = c.text_bytes.load(std::sync::atomic::Ordering::Relaxed);
            assert!(kept <= ParseCache::MAX_TEXT_BYTES, "{kept} bytes kept");
            assert_eq!(kept, c.texts.iter().map(|e| e.key().len()).sum::<usize>());
        }
        assert!(c.get(&wide(per_text)).is_some(), "the newest wide text is kept");
        assert!(c.get(&wide(0)).is_none(), "the cache started over");
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

#[cfg(test)]
mod limits_tests {
    use super::*;

    /// Every list of objects in the schema is declared: records of a kind (their length is
    /// counted in the node estimate) or values held inside one record (`limits::EMBEDDED`).
    #[test]
    fn every_object_list_of_the_schema_is_declared() {
        let api = build_schema(QueryConfig::default()).unwrap();
        assert_eq!(api.shapes.undeclared, Vec::<String>::new(), "declare these with Builder::record_list or limits::EMBEDDED");
    }

    /// The five builds share the object types read from the first one's SDL: each has the same.
    #[test]
    fn every_build_of_the_schema_has_the_same_object_types() {
        let api = build_schema(QueryConfig::default()).unwrap();
        let first = history::object_fields_of(&api.plain.strict.sdl());
        assert!(first.get("Team").is_some_and(|f| f.iter().any(|n| n == "name")), "{:?}", first.get("Team"));
        for (which, schema) in [
            ("plain, fast", &api.plain.fast),
            ("nodes, strict", &api.nodes.strict),
            ("nodes, fast", &api.nodes.fast),
            ("subscriptions", &api.subscriptions),
        ] {
            assert_eq!(history::object_fields_of(&schema.sdl()), first, "{which}");
        }
    }
}

#[cfg(test)]
mod plan_bounds_tests {
    use super::*;

    fn parsed(query: &str) -> Parsed {
        let doc = async_graphql::parser::parse_query(query).unwrap();
        Parsed { doc, variable_free: true, validated: Default::default(), plan: Default::default() }
    }

    /// `n` aliased `totalCount`s of the root `teams`.
    fn wide(n: usize) -> String {
        format!("{{ teams {{ {} }} }}", (0..n).map(|i| format!("t{i}: totalCount")).collect::<Vec<_>>().join(" "))
    }

    /// An operation over [`plan::MAX_PLAN_NODES`] nodes is not planned (it runs on the
    /// resolvers); one just under is.
    #[test]
    fn a_plan_has_at_most_its_nodes() {
        let api = build_schema(QueryConfig::default()).unwrap();
        assert!(plan::Plan::build(&parsed(&wide(plan::MAX_PLAN_NODES - 1)).doc, &api.catalog).is_some());
        assert!(plan::Plan::build(&parsed(&wide(plan::MAX_PLAN_NODES)).doc, &api.catalog).is_none());
        // Fragments spread in many places count every time they are written.
        let fragments = format!(
            "{{ teams {{ ...A ...B }} }} fragment A on TeamConnection {{ {} }} fragment B on TeamConnection {{ {} }}",
            (0..plan::MAX_PLAN_NODES / 2 + 1).map(|i| format!("a{i}: totalCount")).collect::<Vec<_>>().join(" "),
            (0..plan::MAX_PLAN_NODES / 2 + 1).map(|i| format!("b{i}: totalCount")).collect::<Vec<_>>().join(" ")
        );
        assert!(plan::Plan::build(&parsed(&fragments).doc, &api.catalog).is_none());
    }

    /// The plans of one schema hold at most [`plan::MAX_PLAN_BYTES`] together; past it, a new
    /// text is not planned, and emptying the parse cache makes room again.
    #[test]
    fn the_plans_hold_at_most_their_bytes() {
        let api = build_schema(QueryConfig::default()).unwrap();
        let cache = ParseCache::default();
        let mut kept = 0;
        for i in 0..200 {
            let p = parsed(&format!("{} # {i}", wide(1023)));
            kept += usize::from(cache.plan(&p, &api.catalog).is_some());
        }
        let bytes = cache.plan_bytes.load(std::sync::atomic::Ordering::Relaxed);
        assert!(bytes <= plan::MAX_PLAN_BYTES, "{bytes} bytes");
        assert!(kept > 10 && kept < 200, "{kept} plans kept");
        cache.texts.clear();
        cache.plan_bytes.store(0, std::sync::atomic::Ordering::Relaxed);
        assert!(cache.plan(&parsed(&wide(3)), &api.catalog).is_some());
    }
}
