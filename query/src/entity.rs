//! The generic GraphQL layer: one [`Entity`] impl per kind describes its object fields and
//! filters; everything else — Node, connections, edges, order inputs, where inputs, root
//! queries, `node`/`nodes`, isolation — is built here once for every kind.

use crate::column::Column;
use crate::error::{bad_input, internal, not_found};
use crate::filter::{FilterField, Predicate, WhereType};
use crate::relay::{encode_cursor, paginate, OrderSpec, PageArgs, Row, RowIter, Rows, VecRows};
use crate::viewer::Viewer;
use crate::QueryError;
use async_graphql::dynamic::{
    Enum, Field, FieldFuture, FieldValue, InputObject, InputValue, Interface, InterfaceField, Object, ResolverContext, TypeRef,
};
use async_graphql::{Error, Name, Value};
use schema::common::StatusPhase;
use schema::GraphqlEnum;
use schema::{GlobalId, Key, Kind, Scope, Timestamp};
use std::any::Any;
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use storage::{OrderField, ReadView, Stored};

/// Per-request data: one consistent read view, the viewer, the clock.
pub struct RequestContext {
    /// The read transaction every resolver of this request uses.
    pub view: ReadView,
    /// The caller (group teams resolved).
    pub viewer: Viewer,
    /// The time used for time-dependent fields (secret rotation phase).
    pub now: Timestamp,
    /// Maximum page size.
    pub max_page_size: usize,
    /// The catalogue search index (`search` arguments, `catalogueSearch`); `None` when the
    /// store has none open (those fields then fail with `INTERNAL`).
    pub catalogue: Option<storage::search::Catalogue>,
    /// The request's limits (search texts are checked again where they are used).
    pub limits: Arc<crate::limits::Limits>,
    /// When the request must stop; long loops ask it.
    pub deadline: crate::deadline::Deadline,
}

impl RequestContext {
    /// Whether the viewer may see the record of kind `K`.
    pub fn visible<K: Kind>(&self, s: &Stored<K::Record>) -> bool {
        self.viewer.can_see(&K::scopes(&s.record, &s.links))
    }

    /// A storage failure as a GraphQL error: the deadline's error when the read was stopped
    /// for it, else `INTERNAL`.
    pub fn storage_error(&self, e: storage::StorageError) -> Error {
        match e {
            storage::StorageError::Interrupted => self.deadline.error(),
            e => crate::error::storage(e),
        }
    }

    /// Loads a record of kind `K` if the viewer may see it.
    ///
    /// # Errors
    /// Storage failures as `INTERNAL`.
    pub fn load_visible<K: Kind>(&self, key: &Key) -> Result<Option<Stored<K::Record>>, Error> {
        Ok(self.view.get::<K>(key).map_err(crate::error::storage)?.filter(|s| self.visible::<K>(s)))
    }

    /// Loads a record of kind `K` regardless of the viewer (only for reduced `…Info` views).
    ///
    /// # Errors
    /// Storage failures as `INTERNAL`.
    pub fn load_system<K: Kind>(&self, key: &Key) -> Result<Option<Stored<K::Record>>, Error> {
        self.view.get::<K>(key).map_err(crate::error::storage)
    }
}

/// How a kind appears in GraphQL.
pub trait Entity: Kind {
    /// The GraphQL object type name.
    const TYPE: &'static str;
    /// The root connection field (`applications`), if any.
    const ROOT: Option<&'static str>;
    /// Records are owned by teams (scanned per viewer team) rather than visible to the whole
    /// environment (catalogue, zones, groups).
    const TEAM_OWNED: bool;
    /// `orderBy: [XOrder!]` instead of `orderBy: XOrder`.
    const MULTI_ORDER: bool = false;
    /// A record can be listed under several of one viewer's team scopes (approvals: subscriber
    /// and provider team). When false, counts over several scopes add up counters.
    const SHARED_SCOPES: bool = false;

    /// Scalar fields that are both object fields and `where` fields, each declared once
    /// ([`Column`]); listed after [`Entity::fields`]. The `where` input has `id`, these and
    /// the [`Entity::edge_filters`]: nothing is filterable that is not also a field.
    fn columns() -> Vec<Column<Self::Record>> {
        Vec::new()
    }

    /// Object fields besides `id` and the [`Entity::columns`]. May register helper types in `b`.
    fn fields(builder: &mut Builder) -> Vec<Field>;

    /// Edges usable in `where` (`has<Edge>`, `has<Edge>With`).
    fn edge_filters() -> Vec<crate::filter::EdgeFilter<Self::Record>> {
        Vec::new()
    }
}

/// Collects the types of the schema while entities register themselves.
#[derive(Default)]
pub struct Builder {
    pub(crate) objects: Vec<Object>,
    pub(crate) enums: Vec<Enum>,
    pub(crate) inputs: Vec<InputObject>,
    pub(crate) interfaces: Vec<Interface>,
    pub(crate) unions: Vec<async_graphql::dynamic::Union>,
    pub(crate) query_fields: Vec<Field>,
    /// Node loaders by GraphQL type name.
    pub(crate) loaders: HashMap<&'static str, Loader>,
    /// Each registered kind's GraphQL object type.
    pub(crate) type_names: HashMap<schema::KindId, &'static str>,
    /// Subscription fields of the registered kinds (`<type>Changes`).
    pub(crate) subscription_fields: Vec<async_graphql::dynamic::SubscriptionField>,
    /// Object types listed as records (for the node estimate, `crate::limits`), by type name.
    pub(crate) records: HashMap<String, crate::limits::RecordList>,
    registered: std::collections::HashSet<String>,
    wheres: crate::filter::WhereRegistry,
    extras: HashMap<String, Vec<Field>>,
    /// [`crate::QueryConfig::file_manager_base_url`].
    pub(crate) file_manager_base_url: Option<Arc<str>>,
    /// [`crate::QueryConfig::secret_resolver`].
    pub(crate) secret_resolver: Option<Arc<dyn crate::secrets::SecretResolver>>,
}

/// Loads a node of one type by key, `None` when absent or invisible.
pub(crate) type Loader = Arc<dyn Fn(&RequestContext, &Key) -> Result<Option<FieldValue<'static>>, Error> + Send + Sync>;

impl Builder {
    /// A nullable secret field of entity `K` ([`crate::secrets`]); `site` gives the owner's
    /// environment and team and the stored value.
    pub fn secret_field<K: Entity>(&self, name: &'static str, site: crate::secrets::RecordSecret<K::Record>) -> Field {
        crate::secrets::secret_field::<Stored<K::Record>>(
            name,
            TypeRef::named(TypeRef::STRING),
            None,
            self.secret_resolver.clone(),
            move |p| {
                let (env, team, value) = site(&p.record);
                crate::secrets::SecretSite { env, team, record: global_id::<K>(&p.key).into(), value }
            },
        )
    }

    /// The `specificationUrl: String` field of a catalogue kind `K` whose specification (a
    /// file-manager ID) `spec` reads: `<fileManager.baseUrl>/files/<specification>`, the ID
    /// percent-encoded as one path segment; null when either is unset or empty
    /// (as the Go server computes it).
    pub fn specification_url_field<K: Kind>(&self, spec: fn(&K::Record) -> Option<&str>) -> Field {
        let base = self.file_manager_base_url.clone();
        record_field::<K>("specificationUrl", TypeRef::named(TypeRef::STRING), move |r| {
            let (base, spec) = (base.as_deref()?, spec(r).filter(|s| !s.is_empty())?);
            string(&format!("{base}/files/{}", crate::kinds::common::path_escape(spec)))
        })
    }

    /// Registers an object once (by name).
    pub fn object(&mut self, o: Object) {
        if self.registered.insert(o.type_name().to_string()) {
            self.objects.push(o);
        }
    }

    /// Adds fields to the object `type_name`, registered by another module (e.g. the
    /// `Application.exposedApis` connection is defined next to ApiExposure).
    pub fn extend(&mut self, type_name: &str, fields: Vec<Field>) {
        self.extras.entry(type_name.to_string()).or_default().extend(fields);
    }

    /// The finished objects, with the fields added by [`Builder::extend`].
    pub(crate) fn take_objects(&mut self) -> Vec<Object> {
        let mut extras = std::mem::take(&mut self.extras);
        std::mem::take(&mut self.objects)
            .into_iter()
            .map(|mut o| {
                for f in extras.remove(o.type_name()).unwrap_or_default() {
                    o = o.field(f);
                }
                o
            })
            .collect()
    }

    /// Declares that lists of the object type `type_name` hold records: at most
    /// `bound` of them (see [`crate::limits`]). Entity types are declared by [`register`];
    /// reduced `…Info` views and lists derived from records declare themselves.
    pub fn record_list(&mut self, type_name: &str, bound: crate::limits::RecordList) {
        self.records.insert(type_name.to_string(), bound);
    }

    /// Registers an enum once (by name).
    pub fn enumeration(&mut self, name: &str, items: &[&str]) {
        if self.registered.insert(name.to_string()) {
            self.enums.push(Enum::new(name).items(items.iter().copied()));
        }
    }

    /// Registers the GraphQL enum `name` with the values of `E` ([`GraphqlEnum::VALUES`]) once.
    pub fn enumeration_of<E: GraphqlEnum>(&mut self, name: &str) {
        self.enumeration(name, E::VALUES);
    }

    /// Registers an input once (by name).
    pub fn input(&mut self, i: InputObject) {
        if self.registered.insert(i.type_name().to_string()) {
            self.inputs.push(i);
        }
    }

    /// The compiled where type of entity `K` (registering it on first use).
    pub fn where_type<K: Entity>(&mut self) -> Arc<WhereType<K::Record>> {
        let name = format!("{}WhereInput", K::TYPE);
        if let Some(w) = self.wheres.get::<K::Record>(&name) {
            return w;
        }
        let mut fields = vec![FilterField::new("id", crate::filter::FilterType::Id, false, |s: &Stored<K::Record>| {
            crate::filter::FilterValue::Str(Some(GlobalId::new(K::TYPE, &s.key).encode()))
        })];
        fields.extend(K::columns().iter().map(Column::filter_field));
        let w = WhereType::new(name, fields, K::edge_filters(), &self.wheres);
        self.input(w.input_object());
        w
    }
}

// ---- value helpers -------------------------------------------------------------------------

/// A string value.
pub fn string(v: &str) -> Option<FieldValue<'static>> {
    Some(FieldValue::value(Value::String(v.to_string())))
}

/// A nullable string value (`None` → null).
pub fn nullable_string(v: Option<&str>) -> Option<FieldValue<'static>> {
    v.map(|v| FieldValue::value(Value::String(v.to_string())))
}

/// A boolean.
pub fn boolean(v: bool) -> Option<FieldValue<'static>> {
    Some(FieldValue::value(Value::Boolean(v)))
}

/// An integer.
pub fn integer(v: i64) -> Option<FieldValue<'static>> {
    Some(FieldValue::value(Value::Number(v.into())))
}

/// An enum value.
pub fn enum_item(v: &str) -> Option<FieldValue<'static>> {
    Some(FieldValue::value(Value::Enum(Name::new(v))))
}

/// A time (RFC 3339).
pub fn time(v: Timestamp) -> Option<FieldValue<'static>> {
    string(&v.to_rfc3339())
}

/// A list of strings.
pub fn string_list<S: AsRef<str>>(v: &[S]) -> Option<FieldValue<'static>> {
    Some(FieldValue::value(Value::List(v.iter().map(|x| Value::String(x.as_ref().to_string())).collect())))
}

/// A list of enum values.
pub fn enums<S: AsRef<str>>(v: &[S]) -> Option<FieldValue<'static>> {
    Some(FieldValue::value(Value::List(v.iter().map(|x| Value::Enum(Name::new(x.as_ref()))).collect())))
}

/// An object backed by `v` (its fields downcast the parent to `T`).
pub fn object_value<T: Any + Send + Sync>(v: T) -> Option<FieldValue<'static>> {
    Some(FieldValue::owned_any(v))
}

/// A list of objects.
pub fn object_values<T: Any + Send + Sync>(v: impl IntoIterator<Item = T>) -> Option<FieldValue<'static>> {
    Some(FieldValue::list(v.into_iter().map(FieldValue::owned_any)))
}

/// A resolved field's result as async-graphql takes it: a value without a future (one
/// allocation less per field than `FieldFuture::new`), an error through one.
pub(crate) fn ready<'a>(result: Result<Option<FieldValue<'a>>, Error>) -> FieldFuture<'a> {
    match result {
        Ok(value) => FieldFuture::Value(value),
        Err(e) => FieldFuture::new(async move { Err::<Option<FieldValue<'a>>, Error>(e) }),
    }
}

/// A field of an object whose parent value is a `T`; `f` computes the value synchronously.
pub fn field<T: Any + Send + Sync>(
    name: &str,
    ty: TypeRef,
    f: impl Fn(&T, &RequestContext) -> Result<Option<FieldValue<'static>>, Error> + Send + Sync + 'static,
) -> Field {
    let f = Arc::new(f);
    // A non-null field whose value is absent (e.g. the owner of a record whose parent was
    // deleted and whose own delete has not arrived yet) is NOT_FOUND, not an internal error.
    let non_null = matches!(ty, TypeRef::NonNull(_));
    let field_name = name.to_string();
    Field::new(name, ty, move |ctx: ResolverContext<'_>| {
        let f = f.clone();
        let result = (|| {
            let parent = ctx.parent_value.try_downcast_ref::<T>()?;
            let request = ctx.data::<RequestContext>()?;
            request.deadline.tick()?;
            let v = f(parent, request)?;
            request.deadline.charge(field_name.len() + 4 + v.as_ref().map_or(4, answer_bytes))?;
            match v {
                None if non_null => Err(crate::error::not_projected(&field_name)),
                v => Ok(v),
            }
        })();
        crate::entity::ready(result)
    })
}

/// The bytes a resolved value adds to the answer, roughly as JSON: scalars their text, lists
/// and values their parts; an object its braces (its fields charge their own).
fn answer_bytes(v: &FieldValue<'_>) -> usize {
    fn value(v: &Value) -> usize {
        match v {
            Value::String(s) => s.len() + 2,
            Value::Enum(n) => n.len() + 2,
            Value::List(l) => 2 + l.iter().map(|i| value(i) + 1).sum::<usize>(),
            Value::Object(o) => 2 + o.iter().map(|(k, v)| k.len() + 4 + value(v)).sum::<usize>(),
            Value::Binary(b) => b.len() * 4 / 3 + 4,
            Value::Null | Value::Number(_) | Value::Boolean(_) => 8,
        }
    }
    match (v.as_list(), v.as_value()) {
        (Some(items), _) => 2 + items.iter().map(|i| answer_bytes(i) + 1).sum::<usize>(),
        (None, Some(v)) => value(v),
        (None, None) => 2,
    }
}

/// A field of an entity object (parent `Stored<K::Record>`) that only reads the record.
pub fn record_field<K: Kind>(
    name: &str,
    ty: TypeRef,
    f: impl Fn(&K::Record) -> Option<FieldValue<'static>> + Send + Sync + 'static,
) -> Field {
    field::<Stored<K::Record>>(name, ty, move |p, _| Ok(f(&p.record)))
}

/// A plain list root field (`zones`, `groups`): every visible record of `K` in key order,
/// filtered by an optional `where`.
pub fn list_field<K: Entity>(builder: &mut Builder, name: &str, with_where: bool) -> Field {
    let w = builder.where_type::<K>();
    let f = Field::new(name, TypeRef::named_nn_list_nn(K::TYPE), move |ctx: ResolverContext<'_>| {
        let w = w.clone();
        let result = (|| -> Result<Option<FieldValue<'static>>, Error> {
            let request = ctx.data::<RequestContext>()?;
            let pred = match ctx.args.get("where") {
                Some(v) if !v.is_null() => w.parse(&v.object()?)?,
                _ => Predicate::always(),
            };
            let rows = IndexRows::<K> { request, scopes: request.viewer.scopes(K::TEAM_OWNED), order: OrderField::Key, pred };
            let mut out = Vec::new();
            for r in rows.iter(Bound::Unbounded, false)? {
                out.push(node_value::<K>(r?.1));
            }
            Ok(Some(FieldValue::list(out)))
        })();
        crate::entity::ready(result)
    });
    if with_where {
        f.argument(InputValue::new("where", TypeRef::named(format!("{}WhereInput", K::TYPE))))
    } else {
        f
    }
}

/// The global ID of a record of entity `K`.
pub fn global_id<K: Entity>(key: &Key) -> String {
    GlobalId::new(K::TYPE, key).encode()
}

/// The value of a record of `K` in a field whose type is the object `K` itself (edges, lists,
/// links). Fields typed by an interface or union (`node`) need [`FieldValue::with_type`] on top:
/// async-graphql does not unwrap a typed value for object-typed fields, whose resolvers then
/// fail to downcast their parent.
pub fn node_value<K: Entity>(s: Stored<K::Record>) -> FieldValue<'static> {
    FieldValue::owned_any(s)
}

// ---- connections ---------------------------------------------------------------------------

/// A resolved connection.
pub struct ConnData<R> {
    edges: Vec<(String, Stored<R>)>,
    has_next: bool,
    has_previous: bool,
    total: u64,
    /// `phaseCounts`, when selected.
    phases: Vec<(StatusPhase, u64)>,
}

fn order_fields<K: Entity>() -> Vec<&'static str> {
    if K::ORDER_BY_NAME {
        vec!["CREATED_AT", "LAST_MODIFIED_AT", "NAME"]
    } else {
        vec!["CREATED_AT", "LAST_MODIFIED_AT"]
    }
}

/// Registers `XConnection`, `XEdge`, `XOrder`, `XOrderField`, `XWhereInput`, the object `X`
/// (implementing `Node`) and the root query of entity `K`.
pub fn register<K: Entity>(builder: &mut Builder) {
    let name = K::TYPE;
    builder.record_list(name, crate::limits::RecordList::Visible { kind: K::ID, team_owned: K::TEAM_OWNED });
    let mut o = Object::new(name)
        .implement("Node")
        .field(field::<Stored<K::Record>>("id", TypeRef::named_nn(TypeRef::ID), |p, _| Ok(string(&global_id::<K>(&p.key)))));
    let columns = K::columns();
    for (type_name, values) in columns.iter().filter_map(Column::enum_type) {
        builder.enumeration(type_name, values);
    }
    for f in K::fields(builder).into_iter().chain(columns.iter().map(Column::object_field)) {
        o = o.field(f);
    }
    builder.object(o);
    builder.object(
        Object::new(format!("{name}Edge"))
            .field(field::<(String, Stored<K::Record>)>("node", TypeRef::named(name), |p, _| Ok(Some(node_value::<K>(p.1.clone())))))
            .field(field::<(String, Stored<K::Record>)>("cursor", TypeRef::named_nn("Cursor"), |p, _| string(&p.0).map(Ok).transpose())),
    );
    let mut connection = Object::new(format!("{name}Connection"))
        .field(field::<ConnData<K::Record>>("edges", TypeRef::named_list(format!("{name}Edge")), |p, _| {
            Ok(object_values(p.edges.iter().cloned()))
        }))
        .field(field::<ConnData<K::Record>>("pageInfo", TypeRef::named_nn("PageInfo"), |p, _| {
            Ok(object_value(crate::PageInfo {
                has_next: p.has_next,
                has_previous: p.has_previous,
                start: p.edges.first().map(|e| e.0.clone()),
                end: p.edges.last().map(|e| e.0.clone()),
            }))
        }))
        .field(field::<ConnData<K::Record>>("totalCount", TypeRef::named_nn(TypeRef::INT), |p, _| Ok(integer(p.total as i64))));
    // Kinds with a status: how many of the connection's records (same viewer, `where` and
    // `search` as `totalCount`) are in each phase, every phase listed.
    if columns.iter().any(|c| c.name() == "statusPhase") {
        builder.object(
            Object::new(format!("{name}PhaseCount"))
                .field(field::<(StatusPhase, u64)>("phase", TypeRef::named_nn(format!("{name}StatusPhase")), |p, _| {
                    Ok(enum_item(p.0.as_str()))
                }))
                .field(field::<(StatusPhase, u64)>("count", TypeRef::named_nn(TypeRef::INT), |p, _| Ok(integer(p.1 as i64)))),
        );
        connection = connection.field(field::<ConnData<K::Record>>(
            "phaseCounts",
            TypeRef::named_nn_list_nn(format!("{name}PhaseCount")),
            |p, _| Ok(object_values(p.phases.iter().copied())),
        ));
    }
    builder.object(connection);
    builder.enumeration(&format!("{name}OrderField"), &order_fields::<K>());
    builder.input(
        InputObject::new(format!("{name}Order"))
            .field(InputValue::new("direction", TypeRef::named_nn("OrderDirection")).default_value(Value::Enum(Name::new("ASC"))))
            .field(InputValue::new("field", TypeRef::named_nn(format!("{name}OrderField")))),
    );
    let where_type = builder.where_type::<K>();
    builder.subscription_fields.push(crate::changes::kind_field::<K>(where_type.clone()));
    if let Some(root) = K::ROOT {
        let w = where_type.clone();
        let mut root_field = connection_field::<K, ()>(root, w, |request, _, order, pred| {
            Ok(Box::new(IndexRows::<K> { request, scopes: request.viewer.scopes(K::TEAM_OWNED), order, pred }))
        });
        if schema::catalogue::KINDS.contains(&K::ID) {
            // Full-text search, by relevance (read in `connection_field`, see `crate::search`).
            root_field = root_field.argument(
                InputValue::new("search", TypeRef::named(TypeRef::STRING)).description(crate::search::search_argument_description()),
            );
        }
        builder.query_fields.push(root_field);
    }
    let loader: Loader =
        Arc::new(|request: &RequestContext, key: &Key| Ok(request.load_visible::<K>(key)?.map(|s| node_value::<K>(s).with_type(K::TYPE))));
    builder.loaders.insert(K::TYPE, loader);
    builder.type_names.insert(K::ID, K::TYPE);
}

type MakeRows<K, P> = dyn for<'a> Fn(
        &'a RequestContext,
        &'a P,
        OrderField,
        Predicate<<K as Kind>::Record>,
    ) -> Result<Box<dyn Rows<<K as Kind>::Record> + 'a>, Error>
    + Send
    + Sync;

/// A connection field of entity `K` on a parent of type `P` (`()` for root queries), with the
/// standard arguments. `rows` produces the visible, filtered rows in the requested order.
pub fn connection_field<K: Entity, P: Any + Send + Sync>(
    name: &str,
    where_type: Arc<WhereType<K::Record>>,
    rows: impl for<'a> Fn(&'a RequestContext, &'a P, OrderField, Predicate<K::Record>) -> Result<Box<dyn Rows<K::Record> + 'a>, Error>
        + Send
        + Sync
        + 'static,
) -> Field {
    let rows: Arc<MakeRows<K, P>> = Arc::new(rows);
    let tn = K::TYPE;
    let order_ty = if K::MULTI_ORDER { TypeRef::named_nn_list(format!("{tn}Order")) } else { TypeRef::named(format!("{tn}Order")) };
    Field::new(name, TypeRef::named_nn(format!("{tn}Connection")), move |ctx: ResolverContext<'_>| {
        let rows = rows.clone();
        let where_type = where_type.clone();
        let result = (|| -> Result<Option<FieldValue<'static>>, Error> {
            let request = ctx.data::<RequestContext>()?;
            request.deadline.check()?;
            let parent: &P = match ctx.parent_value.downcast_ref::<P>() {
                Some(p) => p,
                None => {
                    // Root query fields have no parent value; `P` is `()` for them.
                    static UNIT: () = ();
                    (&UNIT as &dyn Any).downcast_ref::<P>().ok_or_else(|| internal("connection parent type mismatch"))?
                }
            };
            let entries = parse_order(&ctx)?;
            // A `search` without a word (no letter or digit) lists as without it, as
            // `crate::search::SEARCH_TEXT_RULE` says.
            let search = ctx.args.get("search").filter(|v| !v.is_null()).map(|v| v.string().map(str::to_string)).transpose()?;
            if let Some(q) = &search {
                crate::limits::check_search(q, &request.limits).map_err(crate::limits::LimitError::into_error)?;
            }
            let search = search.filter(|q| !storage::analysis::words(q).is_empty());
            if search.is_some() && !entries.is_empty() {
                return Err(bad_input("`search` cannot be combined with `orderBy`: search results are ordered by relevance"));
            }
            // One field: scan the ordering index in its direction. Several: sort the visible,
            // filtered rows by their composite key (ascending; descending fields are inverted).
            let (order, desc, spec) = match entries.as_slice() {
                [] => (OrderField::Key, false, OrderSpec::Single(OrderField::Key)),
                [(o, d)] => (*o, *d, OrderSpec::Single(*o)),
                many => (OrderField::Key, false, OrderSpec::Multi(many.to_vec())),
            };
            let spec = match &search {
                Some(q) => OrderSpec::Search(crate::search::query_hash(q)),
                None => spec,
            };
            let pred = match ctx.args.get("where") {
                Some(w) if !w.is_null() => where_type.parse(&w.object()?)?,
                _ => Predicate::always(),
            };
            let arg_i = |n: &str| -> Result<Option<i64>, Error> { ctx.args.get(n).filter(|v| !v.is_null()).map(|v| v.i64()).transpose() };
            let arg_s = |n: &str| -> Result<Option<String>, Error> {
                ctx.args.get(n).filter(|v| !v.is_null()).map(|v| v.string().map(str::to_string)).transpose()
            };
            let args = PageArgs::new(
                arg_i("first")?,
                arg_i("last")?,
                arg_s("after")?.as_deref(),
                arg_s("before")?.as_deref(),
                K::ID,
                spec.clone(),
                desc,
                request.max_page_size,
            )?;
            let mut src = match &search {
                Some(q) => Box::new(crate::search::rows::<K>(request, q, &pred)?),
                None => rows(request, parent, order, pred)?,
            };
            if let OrderSpec::Multi(m) = &spec {
                let mut all = Vec::new();
                for r in src.iter(Bound::Unbounded, false)? {
                    let (_, st) = r?;
                    all.push((multi_suffix::<K>(&st, m), st));
                }
                all.sort_by(|a, b| a.0.cmp(&b.0));
                src = Box::new(VecRows(all));
            }
            // `{ totalCount }` alone reads no page (with counters, no record at all).
            let look = ctx.look_ahead();
            let page = if look.field("edges").exists() || look.field("pageInfo").exists() {
                paginate(src.as_ref(), &args)?
            } else {
                crate::relay::Page { edges: Vec::new(), has_next: false, has_previous: false }
            };
            let total = if look.field("totalCount").exists() { src.count()? } else { 0 };
            let phases =
                if look.field("phaseCounts").exists() { src.phase_counts(&|r| K::status(r).map(|s| s.phase))? } else { Vec::new() };
            let edges: Vec<_> = page.edges.into_iter().map(|(suffix, st)| (encode_cursor(K::ID, &spec, &suffix), st)).collect();
            // Each edge: its cursor when selected, the edge and node objects (their fields
            // charge their own).
            let cursors = look.field("edges").field("cursor").exists();
            request.deadline.charge(edges.iter().map(|(cursor, _)| if cursors { cursor.len() + 24 } else { 24 }).sum::<usize>() + 64)?;
            Ok(object_value(ConnData::<K::Record> { edges, has_next: page.has_next, has_previous: page.has_previous, total, phases }))
        })();
        crate::entity::ready(result)
    })
    .argument(InputValue::new("after", TypeRef::named("Cursor")))
    .argument(InputValue::new("first", TypeRef::named(TypeRef::INT)))
    .argument(InputValue::new("before", TypeRef::named("Cursor")))
    .argument(InputValue::new("last", TypeRef::named(TypeRef::INT)))
    .argument(InputValue::new("orderBy", order_ty))
    .argument(InputValue::new("where", TypeRef::named(format!("{tn}WhereInput"))))
}

/// Reads `orderBy`: `(field, descending)` entries in list order (empty = natural key order).
/// Two adjacent entries with the same field are an error, as in the reference.
fn parse_order(ctx: &ResolverContext<'_>) -> Result<Vec<(OrderField, bool)>, Error> {
    let Some(v) = ctx.args.get("orderBy").filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
    let entries: Vec<async_graphql::indexmap::IndexMap<Name, Value>> = match v.list() {
        Ok(list) => list.iter().map(|e| e.object().map(|o| o.as_index_map().clone())).collect::<Result<_, _>>()?,
        Err(_) => vec![v.object()?.as_index_map().clone()],
    };
    let mut out: Vec<(OrderField, bool)> = Vec::new();
    for one in entries {
        let field = input_enum_name(one.get("field")).ok_or_else(|| bad_input("orderBy.field is required"))?.to_string();
        let desc = match input_enum_name(one.get("direction")) {
            None | Some("ASC") => false,
            Some("DESC") => true,
            Some(other) => return Err(bad_input(format!("unknown order direction {other}"))),
        };
        let order = match field.as_str() {
            "CREATED_AT" => OrderField::CreatedAt,
            "LAST_MODIFIED_AT" => OrderField::LastModifiedAt,
            "NAME" => OrderField::Name,
            other => return Err(bad_input(format!("unknown order field {other}"))),
        };
        if out.last().is_some_and(|(o, _)| *o == order) {
            return Err(bad_input(format!("duplicate order field {field}")));
        }
        out.push((order, desc));
    }
    Ok(out)
}

/// The name of an enum input value: written inline it is an enum, sent in the request's
/// variables a string.
fn input_enum_name(v: Option<&Value>) -> Option<&str> {
    match v {
        Some(Value::Enum(n)) => Some(n.as_str()),
        Some(Value::String(s)) => Some(s.as_str()),
        _ => None,
    }
}

/// The composite sort key of a record for a multi-field order: each field's sort bytes
/// (byte-inverted for descending fields, which reverses their order because every encoding is
/// prefix-free) followed by the natural key.
fn multi_suffix<K: Kind>(s: &Stored<K::Record>, spec: &[(OrderField, bool)]) -> Vec<u8> {
    let mut v = Vec::new();
    for (o, desc) in spec {
        let mut part = suffix_of::<K>(s, *o);
        part.truncate(part.len() - s.key.as_bytes().len());
        if *desc {
            part.iter_mut().for_each(|b| *b = !*b);
        }
        v.extend_from_slice(&part);
    }
    v.extend_from_slice(s.key.as_bytes());
    v
}

/// The cursor suffix of a record for `order` (same layout as the store's ordering index).
pub fn suffix_of<K: Kind>(s: &Stored<K::Record>, order: OrderField) -> Vec<u8> {
    let mut v = Vec::new();
    match order {
        OrderField::Key => {}
        OrderField::CreatedAt => v.extend_from_slice(&s.created_at.to_sort_bytes()),
        OrderField::LastModifiedAt => v.extend_from_slice(&s.last_modified_at.to_sort_bytes()),
        OrderField::Name => v.extend_from_slice(Key::new(&[K::name(&s.record).unwrap_or("")]).as_bytes()),
    }
    v.extend_from_slice(s.key.as_bytes());
    v
}

/// Rows of a nested connection: `candidates` filtered by visibility and `pred`, sorted.
pub fn nested_rows<K: Kind>(
    request: &RequestContext,
    candidates: Vec<Stored<K::Record>>,
    order: OrderField,
    pred: &Predicate<K::Record>,
) -> VecRows<K::Record> {
    // Once the deadline passed, nothing more is kept: the request ends with TIMEOUT.
    let mut rows: Vec<Row<K::Record>> = candidates
        .into_iter()
        .filter(|s| request.deadline.tick().is_ok() && request.visible::<K>(s) && pred.eval(s, request))
        .map(|s| (suffix_of::<K>(&s, order), s))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    VecRows(rows)
}

/// Rows of a root connection: a k-way merge of the viewer's scope ranges of the ordering index.
struct IndexRows<'a, K: Entity> {
    request: &'a RequestContext,
    scopes: Vec<Scope>,
    order: OrderField,
    pred: Predicate<K::Record>,
}

impl<K: Entity> Rows<K::Record> for IndexRows<'_, K> {
    fn iter(&self, from: Bound<&[u8]>, reverse: bool) -> Result<RowIter<'_, K::Record>, Error> {
        let mut heads = Vec::new();
        for scope in &self.scopes {
            let it = self.request.view.scan(K::ID, self.order, scope, from, reverse).map_err(|e| self.request.storage_error(e))?;
            heads.push(it.peekable());
        }
        let merged = Merge { heads, reverse };
        let request = self.request;
        let pred = &self.pred;
        Ok(Box::new(merged.filter_map(move |item| {
            if let Err(e) = request.deadline.tick() {
                return Some(Err(e));
            }
            let (suffix, key) = match item {
                Ok(x) => x,
                Err(e) => return Some(Err(request.storage_error(e))),
            };
            match request.view.get::<K>(&key) {
                Err(e) => Some(Err(request.storage_error(e))),
                Ok(None) => None,
                Ok(Some(s)) => pred.eval(&s, request).then_some(Ok((suffix, s))),
            }
        })))
    }

    fn phase_counts(&self, phase: &dyn Fn(&K::Record) -> Option<StatusPhase>) -> Result<Vec<(StatusPhase, u64)>, Error> {
        // As `count`: maintained counters when nothing filters and no record is counted twice.
        if self.pred.is_trivial() && (self.scopes.len() == 1 || !K::SHARED_SCOPES) {
            let mut counts: Vec<(StatusPhase, u64)> = StatusPhase::ALL.iter().map(|&p| (p, 0)).collect();
            for scope in &self.scopes {
                for (slot, (_, n)) in counts.iter_mut().zip(self.request.view.phase_counts(K::ID, scope).map_err(crate::error::storage)?) {
                    slot.1 += n;
                }
            }
            return Ok(counts);
        }
        crate::relay::scan_phase_counts(self, phase)
    }

    fn count(&self) -> Result<u64, Error> {
        // Without a filter, maintained counters answer: one scope, or several scopes that no
        // record shares (every kind but the approvals, which are listed for two teams).
        if self.pred.is_trivial() && (self.scopes.len() == 1 || !K::SHARED_SCOPES) {
            let mut n = 0;
            for scope in &self.scopes {
                n += self.request.view.count(K::ID, scope).map_err(crate::error::storage)?;
            }
            return Ok(n);
        }
        let mut n = 0;
        for r in self.iter(Bound::Unbounded, false)? {
            r?;
            n += 1;
        }
        Ok(n)
    }
}

/// Merges sorted index streams by suffix, dropping duplicates (a record visible through two
/// of the viewer's teams appears once).
struct Merge<I: Iterator<Item = Result<storage::OrderEntry, storage::StorageError>>> {
    heads: Vec<std::iter::Peekable<I>>,
    reverse: bool,
}

impl<I: Iterator<Item = Result<storage::OrderEntry, storage::StorageError>>> Iterator for Merge<I> {
    type Item = Result<storage::OrderEntry, storage::StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut best: Option<(usize, Vec<u8>)> = None;
        for (i, h) in self.heads.iter_mut().enumerate() {
            match h.peek() {
                None => {}
                Some(Err(_)) => return h.next(),
                Some(Ok((suffix, _))) => {
                    let better = match &best {
                        None => true,
                        Some((_, b)) => {
                            if self.reverse {
                                suffix > b
                            } else {
                                suffix < b
                            }
                        }
                    };
                    if better {
                        best = Some((i, suffix.clone()));
                    }
                }
            }
        }
        let (i, suffix) = best?;
        let item = self.heads[i].next();
        for h in self.heads.iter_mut() {
            while matches!(h.peek(), Some(Ok((s, _))) if *s == suffix) {
                h.next();
            }
        }
        item
    }
}

// ---- node / nodes --------------------------------------------------------------------------

/// Registers the `Node` interface and the `node`/`nodes` query fields; returns the node loaders
/// (for [`crate::changes`]).
pub fn register_node(builder: &mut Builder) -> Arc<HashMap<&'static str, Loader>> {
    builder.interfaces.push(Interface::new("Node").field(InterfaceField::new("id", TypeRef::named_nn(TypeRef::ID))));
    let loaders = Arc::new(std::mem::take(&mut builder.loaders));
    let returned = loaders.clone();
    let l1 = loaders.clone();
    builder.query_fields.push(
        Field::new("node", TypeRef::named("Node"), move |ctx| {
            let loaders = l1.clone();
            let result = (|| {
                let request = ctx.data::<RequestContext>()?;
                let id = ctx.args.try_get("id")?.string()?.to_string();
                load_node(&loaders, request, &id)
            })();
            crate::entity::ready(result.map(Some))
        })
        .argument(InputValue::new("id", TypeRef::named_nn(TypeRef::ID))),
    );
    builder.query_fields.push(
        Field::new("nodes", TypeRef::named_list_nn("Node"), move |ctx| {
            let loaders = loaders.clone();
            let result = (|| -> Result<Option<FieldValue<'static>>, Error> {
                let request = ctx.data::<RequestContext>()?;
                let ids: Vec<String> =
                    ctx.args.try_get("ids")?.list()?.iter().map(|v| v.string().map(str::to_string)).collect::<Result<_, _>>()?;
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    request.deadline.tick()?;
                    match load_node(&loaders, request, &id) {
                        Ok(v) => out.push(v),
                        Err(e) => {
                            let mut err = e.into_server_error(ctx.item.pos);
                            err.path = vec![
                                async_graphql::PathSegment::Field(ctx.item.node.response_key().node.to_string()),
                                async_graphql::PathSegment::Index(out.len()),
                            ];
                            ctx.add_error(err);
                            // Rendered as null by `NullableNodes` (the dynamic schema cannot
                            // put null into a list of an interface type by itself).
                            out.push(FieldValue::NULL);
                        }
                    }
                }
                Ok(Some(FieldValue::list(out)))
            })();
            crate::entity::ready(result)
        })
        .argument(InputValue::new("ids", TypeRef::named_nn_list_nn(TypeRef::ID))),
    );
    returned
}

fn load_node(loaders: &HashMap<&'static str, Loader>, request: &RequestContext, id: &str) -> Result<FieldValue<'static>, Error> {
    let gid = GlobalId::decode(id).map_err(|_| not_found(id))?;
    let loader = loaders.get(gid.type_name.as_str()).ok_or_else(|| not_found(id))?;
    loader(request, &gid.key)?.ok_or_else(|| not_found(id))
}

impl From<QueryError> for Error {
    fn from(e: QueryError) -> Error {
        e.0
    }
}
