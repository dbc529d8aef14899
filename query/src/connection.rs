//! Connections and lists of records: the registration of an entity (its object, connection,
//! edge, order and where types, root query and change subscription), Relay connections over the
//! store's ordering indexes (one per scope of the viewer, merged), nested connections, and root
//! lists.

use crate::column::Column;
use crate::entity::{global_id, node_value, Builder, Entity, Loader};
use crate::error::{bad_input, internal};
use crate::fields::{enum_item, field, integer, object_value, object_values, string};
use crate::filter::{Predicate, WhereType};
use crate::plan::tree::{ConnData, ConnectionArgs, ConnectionSelection, ObjectPlan, PlannedConnection, RecordLoader, Run, Wanted};
use crate::plan::write::Writer;
use crate::relay::{encode_cursor, paginate, OrderSpec, PageArgs, Row, RowIter, Rows, VecRows};
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldValue, InputObject, InputValue, Object, ResolverContext, TypeRef};
use async_graphql::{Error, Name, Value};
use schema::common::StatusPhase;
use schema::GraphqlEnum;
use schema::{Key, Kind, Scope};
use std::any::Any;
use std::ops::Bound;
use std::sync::Arc;
use storage::{OrderField, Stored};

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
        crate::fields::ready(result)
    });
    if with_where {
        f.argument(InputValue::new("where", TypeRef::named(format!("{}WhereInput", K::TYPE))))
    } else {
        f
    }
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
pub fn register_entity<K: Entity>(builder: &mut Builder) {
    let name = K::TYPE;
    builder.record_list(name, crate::limits::RecordList::Visible { kind: K::ID, team_owned: K::TEAM_OWNED });
    let mut o = Object::new(name)
        .implement("Node")
        .field(field::<Stored<K::Record>>("id", TypeRef::named_nn(TypeRef::ID), |p, _| Ok(string(&global_id::<K>(&p.key)))));
    let columns = K::columns();
    builder.column_names.insert(name, columns.iter().map(Column::name).collect());
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
            Ok(object_value(crate::relay::PageInfo {
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
        let mut root_field = connection_field::<K, ()>(builder, root, w, root_rows::<K>);
        if schema::catalogue::KINDS.contains(&K::ID) {
            // Full-text search, by relevance (read in `connection_field`, see `crate::search`).
            root_field = root_field.argument(
                InputValue::new("search", TypeRef::named(TypeRef::STRING)).description(crate::search::search_argument_description()),
            );
        }
        builder.query_fields.push(root_field);
    }
    register_loaders::<K>(builder);
    builder.type_names.insert(K::ID, K::TYPE);
    let past = crate::history::Past::<K>::new(builder.object_fields.clone());
    builder.pasts.insert(K::ID, Arc::new(past));
}

/// Registers `K`'s record loader (a visible record by natural key, for plans of `node(id:)`)
/// and `node`'s loader built from it (the same record, typed for the `Node` interface).
fn register_loaders<K: Entity>(builder: &mut Builder) {
    let record_loader: RecordLoader = Arc::new(|request: &RequestContext, key: &Key| {
        Ok(request.load_visible::<K>(key)?.map(|s| Box::new(s) as Box<dyn Any + Send + Sync>))
    });
    let load = record_loader.clone();
    let loader: Loader = Arc::new(move |request: &RequestContext, key: &Key| {
        Ok(load(request, key)?.map(|record| FieldValue::boxed_any(record).with_type(K::TYPE)))
    });
    builder.loaders.insert(K::TYPE, loader);
    builder.record_loaders.insert(K::TYPE, record_loader);
}

/// The rows of the root connection of `K`: every record `request`'s viewer may see, in
/// `order`, filtered by `pred`.
///
/// # Errors
/// None yet: reading starts when the rows are iterated.
pub(crate) fn root_rows<'a, K: Entity>(
    request: &'a RequestContext,
    _: &'a (),
    order: OrderField,
    pred: Predicate<K::Record>,
) -> Result<Box<dyn Rows<K::Record> + 'a>, Error> {
    Ok(Box::new(IndexRows::<K> { request, scopes: request.viewer.scopes(K::TEAM_OWNED), order, pred }))
}

/// Makes the rows of a connection of `K` under a parent `P` ([`connection_field`]).
pub(crate) type MakeRows<K, P> = dyn for<'a> Fn(
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
    builder: &mut Builder,
    name: &str,
    where_type: Arc<WhereType<K::Record>>,
    rows: impl for<'a> Fn(&'a RequestContext, &'a P, OrderField, Predicate<K::Record>) -> Result<Box<dyn Rows<K::Record> + 'a>, Error>
        + Send
        + Sync
        + 'static,
) -> Field {
    let rows: Arc<MakeRows<K, P>> = Arc::new(rows);
    let planned = ConnectionPlan::<K, P> { rows: rows.clone(), columns: K::columns(), where_type: where_type.clone() };
    builder.planned_connections.insert((std::any::TypeId::of::<P>(), name.to_string()), Arc::new(planned));
    let tn = K::TYPE;
    let order_ty = if K::MULTI_ORDER { TypeRef::named_nn_list(format!("{tn}Order")) } else { TypeRef::named(format!("{tn}Order")) };
    Field::new(name, TypeRef::named_nn(format!("{tn}Connection")), move |ctx: ResolverContext<'_>| {
        crate::fields::ready(resolve_connection::<K, P>(&ctx, &where_type, rows.as_ref()))
    })
    .argument(InputValue::new("after", TypeRef::named("Cursor")))
    .argument(InputValue::new("first", TypeRef::named(TypeRef::INT)))
    .argument(InputValue::new("before", TypeRef::named("Cursor")))
    .argument(InputValue::new("last", TypeRef::named(TypeRef::INT)))
    .argument(InputValue::new("orderBy", order_ty))
    .argument(InputValue::new("where", TypeRef::named(format!("{tn}WhereInput"))))
}

/// The connection of `K` that `ctx` asks for: its arguments and selection read from the
/// resolver's context, then [`connection_data`].
fn resolve_connection<K: Entity, P: Any + Send + Sync>(
    ctx: &ResolverContext<'_>,
    where_type: &WhereType<K::Record>,
    rows: &MakeRows<K, P>,
) -> Result<Option<FieldValue<'static>>, Error> {
    let request = ctx.data::<RequestContext>()?;
    request.deadline.check()?;
    let parent = parent_value::<P>(ctx)?;
    let arg = |name: &str| ctx.args.get(name).map(|v| v.as_value());
    let args = ConnectionArgs {
        where_input: arg("where"),
        search: arg("search"),
        order_by: arg("orderBy"),
        first: arg("first"),
        last: arg("last"),
        after: arg("after"),
        before: arg("before"),
    };
    let look = ctx.look_ahead();
    let wanted = Wanted {
        page: look.field("edges").exists() || look.field("pageInfo").exists(),
        total: look.field("totalCount").exists(),
        phases: look.field("phaseCounts").exists(),
        cursors: look.field("edges").field("cursor").exists(),
    };
    let flat = ctx.data_opt::<Arc<crate::export::FlatRows>>().filter(|f| f.type_name() == K::TYPE);
    Ok(object_value(connection_data::<K, P>(request, parent, rows, where_type, &args, wanted, flat.map(|f| f.as_ref()))?))
}

/// The connection of `K` under `parent` for `args` (`where` read by `where_type`): its rows produced (`rows`, or
/// the search's hits), then paged, counted and charged to the request's answer budget as
/// `wanted` says (the edges' cursors and objects; their fields charge their own). An export's
/// page of columns (`flat`) writes its rows there and keeps only the last edge.
///
/// # Errors
/// `BAD_USER_INPUT` for invalid arguments, the deadline's error, storage failures.
pub(crate) fn connection_data<K: Entity, P: Any + Send + Sync>(
    request: &RequestContext,
    parent: &P,
    rows: &MakeRows<K, P>,
    where_type: &WhereType<K::Record>,
    args: &ConnectionArgs<'_>,
    wanted: Wanted,
    flat: Option<&crate::export::FlatRows>,
) -> Result<ConnData<K::Record>, Error> {
    let pred = match args.where_input {
        None | Some(Value::Null) => Predicate::always(),
        Some(Value::Object(input)) => where_type.parse_input(input)?,
        // As async-graphql's accessor says it: GraphQL coerced `where` to an input object.
        Some(_) => return Err(Error::new("internal: not an object")),
    };
    let search = search_text(args.search, request)?;
    let (order, desc, spec) = order_spec(parse_order(args.order_by, K::MULTI_ORDER)?, search.as_deref())?;
    let page_args = PageArgs::new(
        int_argument(args.first)?,
        int_argument(args.last)?,
        string_argument(args.after)?,
        string_argument(args.before)?,
        K::ID,
        spec.clone(),
        desc,
        request.max_page_size,
    )?;
    let mut src = match &search {
        Some(q) => Box::new(crate::search::rows::<K>(request, q, &pred)?),
        None => rows(request, parent, order, pred)?,
    };
    if let OrderSpec::Multi(fields) = &spec {
        src = Box::new(SortedKeys::<K>::new(request, src, fields)?);
    }
    connection_value::<K>(request, src.as_ref(), &page_args, &spec, wanted, flat)
}

/// The parent value of a connection field: the parent object's `P`, or `()` for a root field
/// (root query fields have no parent value). Another type is an internal error.
fn parent_value<'a, P: Any + Send + Sync>(ctx: &'a ResolverContext<'_>) -> Result<&'a P, Error> {
    if let Some(parent) = ctx.parent_value.downcast_ref::<P>() {
        return Ok(parent);
    }
    static UNIT: () = ();
    (&UNIT as &dyn Any).downcast_ref::<P>().ok_or_else(|| internal("connection parent type mismatch"))
}

/// An `Int` argument (`None` when absent or null).
fn int_argument(v: Option<&Value>) -> Result<Option<i64>, Error> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| bad_input(format!("{n} is not an integer"))),
        Some(other) => Err(bad_input(format!("{other} is not an integer"))),
    }
}

/// A `String` (or `Cursor`) argument (`None` when absent or null).
fn string_argument(v: Option<&Value>) -> Result<Option<&str>, Error> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(bad_input(format!("{other} is not a string"))),
    }
}

/// The `search` argument, checked against `graphql.maxSearchLength`; `None` when absent or when
/// it has no word (no letter or digit: it lists as without it, as
/// `crate::search::SEARCH_TEXT_RULE` says).
fn search_text(v: Option<&Value>, request: &RequestContext) -> Result<Option<String>, Error> {
    let search = string_argument(v)?.map(str::to_string);
    if let Some(q) = &search {
        crate::limits::check_search(q, &request.limits).map_err(crate::limits::LimitError::into_error)?;
    }
    Ok(search.filter(|q| !storage::analysis::words(q).is_empty()))
}

/// How the rows are ordered: `(index to scan, descending, cursor order)`. No entry scans the key
/// order; one entry scans its ordering index in its direction; several sort the visible, filtered
/// rows by their composite key (ascending; descending fields are inverted); a search orders by
/// relevance and cannot be combined with `orderBy` (`BAD_USER_INPUT`).
fn order_spec(entries: Vec<(OrderField, bool)>, search: Option<&str>) -> Result<(OrderField, bool, OrderSpec), Error> {
    if search.is_some() && !entries.is_empty() {
        return Err(bad_input("`search` cannot be combined with `orderBy`: search results are ordered by relevance"));
    }
    let (order, desc, spec) = match entries.as_slice() {
        [] => (OrderField::Key, false, OrderSpec::Single(OrderField::Key)),
        [(o, d)] => (*o, *d, OrderSpec::Single(*o)),
        many => (OrderField::Key, false, OrderSpec::Multi(many.to_vec())),
    };
    match search {
        Some(q) => Ok((order, desc, OrderSpec::Search(crate::search::query_hash(q)))),
        None => Ok((order, desc, spec)),
    }
}

/// The rows of `inner` sorted by the composite key of `fields` (an `orderBy` of several fields):
/// only each row's sort key and natural key are held (their bytes are held against the
/// request's memory budget, [`crate::deadline::Deadline::hold`]); a page's records are read
/// again from the request's view.
struct SortedKeys<'a, K: Entity> {
    request: &'a RequestContext,
    inner: Box<dyn Rows<K::Record> + 'a>,
    keys: Vec<(Vec<u8>, Key)>,
    /// The keys' bytes, counted against the memory budget while they are kept.
    _held: crate::deadline::Held,
}

/// What one row of [`SortedKeys`] holds besides its bytes: two vectors' headers.
const SORTED_ROW_OVERHEAD: usize = 2 * std::mem::size_of::<Vec<u8>>();

impl<'a, K: Entity> SortedKeys<'a, K> {
    fn new(request: &'a RequestContext, inner: Box<dyn Rows<K::Record> + 'a>, fields: &[(OrderField, bool)]) -> Result<Self, Error> {
        let mut keys = Vec::new();
        let mut held = request.deadline.hold(0)?;
        for r in inner.iter(Bound::Unbounded, false)? {
            let (_, st) = r?;
            let suffix = multi_suffix::<K>(&st, fields);
            held.join(request.deadline.hold(suffix.len() + st.key.as_bytes().len() + SORTED_ROW_OVERHEAD)?);
            keys.push((suffix, st.key));
        }
        keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(SortedKeys { request, inner, keys, _held: held })
    }
}

impl<K: Entity> Rows<K::Record> for SortedKeys<'_, K> {
    fn iter(&self, from: Bound<&[u8]>, reverse: bool) -> Result<RowIter<'_, K::Record>, Error> {
        let slice = crate::relay::rows_from(&self.keys, from, reverse);
        let request = self.request;
        let load = move |(suffix, key): &(Vec<u8>, Key)| match request.view.get::<K>(key) {
            Ok(Some(st)) => Some(Ok((suffix.clone(), st))),
            // The view is the one the keys were read from: the record is there.
            Ok(None) => None,
            Err(e) => Some(Err(request.storage_error(e))),
        };
        if reverse {
            Ok(Box::new(slice.iter().rev().filter_map(load)))
        } else {
            Ok(Box::new(slice.iter().filter_map(load)))
        }
    }

    fn phase_counts(&self, phase: &dyn Fn(&K::Record) -> Option<StatusPhase>) -> Result<Vec<(StatusPhase, u64)>, Error> {
        self.inner.phase_counts(phase)
    }

    fn count(&self) -> Result<u64, Error> {
        Ok(self.keys.len() as u64)
    }
}

/// The connection over `src`: the page when `wanted.page` (`{ totalCount }` alone reads no page,
/// with counters no record at all), `totalCount` and `phaseCounts` when wanted; the edges'
/// cursors and objects are charged to the answer budget (their fields charge their own).
fn connection_value<K: Entity>(
    request: &RequestContext,
    src: &dyn Rows<K::Record>,
    args: &PageArgs,
    spec: &OrderSpec,
    wanted: Wanted,
    flat: Option<&crate::export::FlatRows>,
) -> Result<ConnData<K::Record>, Error> {
    let page =
        if wanted.page { paginate(src, args)? } else { crate::relay::Page { edges: Vec::new(), has_next: false, has_previous: false } };
    let mut page_edges = page.edges;
    if let Some(flat) = flat {
        // An export's page of columns: its rows are written here; only the last edge is kept,
        // for the next page's cursor (`pageInfo { hasNextPage endCursor }` is all it selects).
        flat.write::<K>(request, page_edges.iter().map(|(_, st)| st))?;
        page_edges = page_edges.pop().into_iter().collect();
    }
    let total = if wanted.total { src.count()? } else { 0 };
    let phases = if wanted.phases { src.phase_counts(&|r| K::status(r).map(|s| s.phase))? } else { Vec::new() };
    let edges: Vec<_> = page_edges.into_iter().map(|(suffix, st)| (encode_cursor(K::ID, spec, &suffix), st)).collect();
    let cursors = wanted.cursors;
    request.deadline.charge(edges.iter().map(|(cursor, _)| if cursors { cursor.len() + 24 } else { 24 }).sum::<usize>() + 64)?;
    Ok(ConnData::<K::Record> { edges, has_next: page.has_next, has_previous: page.has_previous, total, phases })
}

/// Reads `orderBy`: `(field, descending)` entries in list order (empty = natural key order).
/// Two adjacent entries with the same field are an error, as in the reference. A connection of
/// one order (`multi` false: `orderBy: XOrder`) refuses a list (`BAD_USER_INPUT`), literal or
/// variable, as GraphQL's input coercion does; a list argument takes one value as a list of one.
fn parse_order(v: Option<&Value>, multi: bool) -> Result<Vec<(OrderField, bool)>, Error> {
    let not_an_order = || bad_input("an `orderBy` entry is not an input object");
    let entries: Vec<&async_graphql::indexmap::IndexMap<Name, Value>> = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::List(_)) if !multi => return Err(bad_input("`orderBy` of this connection takes one order, not a list")),
        Some(Value::List(list)) => {
            list.iter().map(|e| if let Value::Object(o) = e { Ok(o) } else { Err(not_an_order()) }).collect::<Result<_, _>>()?
        }
        Some(Value::Object(o)) => vec![o],
        Some(_) => return Err(not_an_order()),
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
    // Once the deadline passed, nothing more is kept: the request ends with TIMEOUT. (The rows
    // of one parent, bounded by the node estimate and freed with its connection, are not held
    // against the memory budget.)
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
            let it = self.request.view.scan_records::<K>(self.order, scope, from, reverse).map_err(|e| self.request.storage_error(e))?;
            heads.push(it.peekable());
        }
        let merged = Merge { heads, reverse };
        let request = self.request;
        let pred = &self.pred;
        Ok(Box::new(merged.filter_map(move |item| {
            if let Err(e) = request.deadline.tick() {
                return Some(Err(e));
            }
            match item {
                Err(e) => Some(Err(request.storage_error(e))),
                Ok((suffix, st)) => pred.eval(&st, request).then_some(Ok((suffix, st))),
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

/// Merges sorted streams of `(suffix, row)` by suffix, dropping duplicates (a record visible
/// through two scopes).
struct Merge<T, I: Iterator<Item = Result<(Vec<u8>, T), storage::StorageError>>> {
    heads: Vec<std::iter::Peekable<I>>,
    reverse: bool,
}

impl<T, I: Iterator<Item = Result<(Vec<u8>, T), storage::StorageError>>> Iterator for Merge<T, I> {
    type Item = Result<(Vec<u8>, T), storage::StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let [head] = self.heads.as_mut_slice() {
            return head.next();
        }
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

/// The plan side of a connection field of `K` under parents `P` ([`connection_field`]): the
/// same rows, and the kind's columns for its nodes.
struct ConnectionPlan<K: Entity, P> {
    rows: Arc<MakeRows<K, P>>,
    columns: Vec<Column<K::Record>>,
    where_type: Arc<WhereType<K::Record>>,
}

impl<K: Entity, P: Any + Send + Sync> PlannedConnection for ConnectionPlan<K, P> {
    fn type_name(&self) -> &'static str {
        K::TYPE
    }

    fn record_type(&self) -> std::any::TypeId {
        std::any::TypeId::of::<Stored<K::Record>>()
    }

    fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name() == name)
    }

    fn has_phase_counts(&self) -> bool {
        self.columns.iter().any(|c| c.name() == "statusPhase")
    }

    fn write_record(&self, run: &Run<'_>, record: &(dyn Any + Send + Sync), plan: &ObjectPlan, out: &mut Vec<u8>) -> Result<(), Error> {
        let record = record.downcast_ref::<Stored<K::Record>>().ok_or_else(|| Error::new("not planned: a record of another kind"))?;
        Writer { run, columns: &self.columns, type_name: K::TYPE }.node(record, plan, out)
    }

    fn write(
        &self,
        run: &Run<'_>,
        parent: &(dyn Any + Send + Sync),
        args: &ConnectionArgs<'_>,
        selection: &ConnectionSelection,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        run.request.deadline.check()?;
        let parent = parent.downcast_ref::<P>().ok_or_else(|| Error::new("not planned: a connection's parent of another type"))?;
        let data = connection_data::<K, P>(run.request, parent, self.rows.as_ref(), &self.where_type, args, selection.wanted, None)?;
        Writer { run, columns: &self.columns, type_name: K::TYPE }.connection(&data, selection, out)
    }
}
