//! Planned execution: the operations consoles repeat, answered without GraphQL's resolution of
//! one field at a time.
//!
//! A text that async-graphql answered once without errors (so it parsed and validated) is
//! planned once ([`Plan::build`]): its selection, through fragments and literal
//! `@skip`/`@include`, becomes a tree of what to write ([`tree`]). A later request of the text
//! ([`Plan::execute`]) reads the store through the code the resolvers use and writes the JSON of
//! `data` directly ([`write`]): no boxed value, future, context or map per field.
//!
//! - **The same resolvers.** A connection is read by its field's own rows
//!   ([`crate::connection::connection_data`]); a record's `id` and columns by the kind's
//!   [`crate::column::Column`]s; every other field by the resolver its GraphQL field calls
//!   ([`crate::fields::field`], collected while the schema is built:
//!   [`crate::fields::FieldTable`]). Fields that are not synchronous resolvers (secrets,
//!   `node`, search hits, history, mutations) are not planned: such texts run on async-graphql.
//! - **One plan for every viewer.** The viewer enters at execution through the same scopes and
//!   visibility; limits were measured before ([`crate::Api::prepare`]); the plan charges the
//!   answer budget and ticks the deadline as the resolvers do.
//! - **Errors are async-graphql's.** A plan that meets an error (an invalid argument, a missing
//!   record) gives way: the request runs on async-graphql, whose answer carries the error as
//!   always. So does a variable the plan does not coerce exactly as GraphQL would.
//! - **Not `{}` for `null`.** A selection whose every field is skipped is not planned
//!   (async-graphql answers such an object `null`), nor is a fragment on a type a plan cannot
//!   tell applies (a union): it is skipped, as async-graphql skips it.
//! - **Bounds.** [`MAX_PLAN_NODES`] per plan, [`MAX_PLAN_BYTES`] for all plans of a schema;
//!   plans live with their parsed document (in the parse cache) and with the schema: a new
//!   schema starts without plans.
//!
//! What a plan covers: connections (`first`, `last`, `after`, `before`, `orderBy`, `search`,
//! `where`) with `totalCount`, `phaseCounts`, `pageInfo`, `edges { cursor node }`; object
//! fields without arguments; `__typename`; variables of scalar types (`Int`, `String`, `ID`,
//! `Cursor`, `Boolean`). The differential test (`query/tests/planned.rs`) runs generated and
//! suite queries through both paths.

pub(crate) mod tree;
pub(crate) mod write;

use crate::fields::FieldTable;
use crate::request::RequestContext;
use async_graphql::parser::types::{
    BaseType, DocumentOperations, ExecutableDocument, Field, OperationDefinition, OperationType, Selection, SelectionSet, TypeKind,
};
use async_graphql::{Name, Positioned, Value, Variables};
use async_graphql_value::Value as InputValue;
use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use tree::*;

/// The most nodes (fields written) one plan has; a larger operation is not planned. Above the
/// default `graphql.maxComplexity` (5,000 selected fields), so every operation the default
/// limits admit can be planned: a wide one is where a plan saves most memory (bytes written
/// instead of a tree of values).
pub const MAX_PLAN_NODES: usize = 8192;

/// The most bytes the plans of one schema hold together (estimated: [`Plan::bytes`]); past it,
/// new texts are not planned until the parse cache is emptied.
pub const MAX_PLAN_BYTES: usize = 8 * 1024 * 1024;

/// The estimated bytes of one node of a plan (its item, key and arguments), for
/// [`MAX_PLAN_BYTES`].
const NODE_BYTES: usize = 128;

/// What plans are made from: the schema's types (from its SDL), the fields' resolvers and the
/// connections.
pub(crate) struct Catalog {
    /// Output types by name: their fields' named types, and the interfaces they implement.
    types: HashMap<String, OutputType>,
    /// The kind of every named type.
    kinds: HashMap<String, NamedKind>,
    fields: FieldTable,
    connections: PlannedConnections,
    /// A connection of each entity type (its records' Rust type and columns).
    entities: HashMap<String, Arc<dyn PlannedConnection>>,
    /// Each entity type's record loader (`node(id:)`).
    loaders: HashMap<String, RecordLoader>,
}

#[derive(Default)]
struct OutputType {
    fields: HashMap<String, String>,
    interfaces: Vec<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum NamedKind {
    Object,
    Leaf,
    Other,
}

impl Catalog {
    /// The catalog of a schema of SDL `sdl`, with the resolvers and connections its build
    /// collected; `None` when the SDL does not parse (a bug: it is generated).
    pub(crate) fn new(
        sdl: &str,
        fields: FieldTable,
        connections: PlannedConnections,
        loaders: HashMap<&'static str, RecordLoader>,
    ) -> Option<Catalog> {
        let doc = async_graphql::parser::parse_schema(sdl).ok()?;
        let (mut types, mut kinds) = (HashMap::new(), HashMap::new());
        for d in &doc.definitions {
            let async_graphql::parser::types::TypeSystemDefinition::Type(t) = d else { continue };
            let name = t.node.name.node.to_string();
            let kind = match &t.node.kind {
                TypeKind::Object(o) => {
                    let fields = o.fields.iter().map(|f| (f.node.name.node.to_string(), named(&f.node.ty.node.base).to_string())).collect();
                    let interfaces = o.implements.iter().map(|i| i.node.to_string()).collect();
                    types.insert(name.clone(), OutputType { fields, interfaces });
                    NamedKind::Object
                }
                TypeKind::Scalar | TypeKind::Enum(_) => NamedKind::Leaf,
                _ => NamedKind::Other,
            };
            kinds.insert(name, kind);
        }
        for leaf in ["Int", "Float", "String", "Boolean", "ID"] {
            kinds.insert(leaf.to_string(), NamedKind::Leaf);
        }
        let entities = connections.values().map(|c| (c.type_name().to_string(), c.clone())).collect();
        let loaders = loaders.into_iter().map(|(name, load)| (name.to_string(), load)).collect();
        Some(Catalog { types, kinds, fields, connections, entities, loaders })
    }
}

/// The named type of a type (lists and non-null unwrapped).
fn named(ty: &BaseType) -> &str {
    match ty {
        BaseType::Named(n) => n.as_str(),
        BaseType::List(inner) => named(&inner.base),
    }
}

/// A variable the plan coerces: its name, scalar type, nullability and default.
struct Variable {
    name: Name,
    scalar: Scalar,
    nullable: bool,
    default: Option<Value>,
}

#[derive(Clone, Copy)]
enum Scalar {
    Int,
    /// `String` and `Cursor`.
    Text,
    Id,
    Boolean,
}

/// A planned operation ([`Plan::build`], [`Plan::execute`]).
pub(crate) struct Plan {
    operation_name: Option<String>,
    variables: Vec<Variable>,
    root: ObjectPlan,
    /// The plan met a field it cannot resolve: it is not used again.
    broken: std::sync::atomic::AtomicBool,
    /// The plan's estimated size in bytes.
    pub(crate) bytes: usize,
}

/// Why a planned request was not answered by its plan.
#[derive(Debug)]
pub(crate) enum Unplanned {
    /// A variable's value is not one the plan coerces: async-graphql answers.
    Variables,
    /// The plan met an error: async-graphql answers (with the error, as it reports it).
    Failed,
}

impl Plan {
    /// The plan of the only operation of `doc` (a query), `None` when the plan does not cover
    /// it: another operation type or several operations, a variable of another type than the
    /// plan coerces, a field, argument, fragment or directive it does not cover, more than
    /// [`MAX_PLAN_NODES`] nodes.
    pub(crate) fn build(doc: &ExecutableDocument, catalog: &Catalog) -> Option<Plan> {
        let (name, op) = match &doc.operations {
            DocumentOperations::Single(op) => (None, op),
            DocumentOperations::Multiple(ops) if ops.len() == 1 => ops.iter().next().map(|(n, op)| (Some(n.to_string()), op))?,
            DocumentOperations::Multiple(_) => return None,
        };
        if op.node.ty != OperationType::Query || !op.node.directives.is_empty() {
            return None;
        }
        let variables = variables(&op.node)?;
        let mut planner = Planner { doc, catalog, nodes: 0 };
        let root = planner.object(&op.node.selection_set.node, "Query", Parent::Known(TypeId::of::<()>()), None)?;
        let bytes = std::mem::size_of::<Plan>() + (planner.nodes + variables.len()) * NODE_BYTES;
        Some(Plan { operation_name: name, variables, root, broken: Default::default(), bytes })
    }

    /// Whether a request naming `operation_name` (or none) runs this plan's operation, and the
    /// plan is still used.
    pub(crate) fn runs(&self, operation_name: Option<&str>) -> bool {
        (operation_name.is_none() || operation_name == self.operation_name.as_deref())
            && !self.broken.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The JSON of the answer's `data` for `request` and `variables`.
    ///
    /// # Errors
    /// [`Unplanned`]: the request is answered by async-graphql instead.
    pub(crate) fn execute(&self, request: &RequestContext, variables: &Variables, catalog: &Catalog) -> Result<Vec<u8>, Unplanned> {
        let values = self.coerce(variables).ok_or(Unplanned::Variables)?;
        let run = Run { request, variables: &values, fields: &catalog.fields, broken: Default::default() };
        let mut out = Vec::with_capacity(4096);
        let written = write::write_object(&run, &(), &self.root, &mut out);
        if run.broken.get() {
            self.broken.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        written.map_err(|_| Unplanned::Failed)?;
        Ok(out)
    }

    /// The variables' values as GraphQL coerces them, `None` when one is not of its declared
    /// scalar type exactly as the plan takes it (async-graphql then coerces or refuses it).
    fn coerce(&self, given: &Variables) -> Option<HashMap<Name, Value>> {
        let mut values = HashMap::with_capacity(self.variables.len());
        for v in &self.variables {
            let value = match (given.get(&v.name), &v.default) {
                (Some(value), _) => value.clone(),
                (None, Some(default)) => default.clone(),
                (None, None) if v.nullable => continue,
                (None, None) => return None,
            };
            let fits = match (&value, v.scalar) {
                (Value::Null, _) => v.nullable,
                (Value::Number(n), Scalar::Int) => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                (Value::String(_), Scalar::Text | Scalar::Id) => true,
                (Value::Boolean(_), Scalar::Boolean) => true,
                _ => false,
            };
            if !fits {
                return None;
            }
            values.insert(v.name.clone(), value);
        }
        Some(values)
    }
}

/// The variables of `op`, `None` when one is not of a scalar type the plan coerces.
fn variables(op: &OperationDefinition) -> Option<Vec<Variable>> {
    let mut out = Vec::new();
    for v in &op.variable_definitions {
        let ty = &v.node.var_type.node;
        let BaseType::Named(named) = &ty.base else { return None };
        let scalar = match named.as_str() {
            "Int" => Scalar::Int,
            "String" | "Cursor" => Scalar::Text,
            "ID" => Scalar::Id,
            "Boolean" => Scalar::Boolean,
            _ => return None,
        };
        if !v.node.directives.is_empty() {
            return None;
        }
        let default = v.node.default_value.as_ref().map(|d| d.node.clone());
        out.push(Variable { name: v.node.name.node.clone(), scalar, nullable: ty.nullable, default });
    }
    Some(out)
}

/// The arguments of a connection field, `None` for one a connection does not have.
fn connection_arguments(f: &Positioned<Field>) -> Option<Vec<(Name, InputValue)>> {
    let mut out = Vec::new();
    for (name, value) in &f.node.arguments {
        match name.node.as_str() {
            "first" | "last" | "after" | "before" | "orderBy" | "search" | "where" => out.push((name.node.clone(), value.node.clone())),
            _ => return None,
        }
    }
    Some(out)
}

/// The response key of `f` as a JSON key with its colon.
fn key(f: &Positioned<Field>) -> Key {
    let mut out = serde_json::to_vec(f.node.response_key().node.as_str()).unwrap_or_default();
    out.push(b':');
    out.into_boxed_slice()
}

/// Builds a plan's tree, counting its nodes.
struct Planner<'d> {
    doc: &'d ExecutableDocument,
    catalog: &'d Catalog,
    nodes: usize,
}

impl<'d> Planner<'d> {
    /// The fields `set` selects on an object of type `ty` (implementing `interfaces`), in answer
    /// order, through fragments whose type condition is `ty` or one of `interfaces`; `None` for
    /// a directive other than a literal `@skip`/`@include`, another type condition, a response
    /// key selected twice, or more than [`MAX_PLAN_NODES`] nodes.
    fn collect(&mut self, set: &'d SelectionSet, ty: &str, interfaces: &[&str]) -> Option<Vec<&'d Positioned<Field>>> {
        let mut all = Vec::new();
        self.collect_into(set, ty, interfaces, &mut all, 0)?;
        // A response key selected again is merged into its first place, as GraphQL merges
        // fields: a leaf without arguments selected twice (`id … on X { id }`); anything else
        // selected twice (merged sub-selections, arguments) is not planned.
        let mut out: Vec<&'d Positioned<Field>> = Vec::with_capacity(all.len());
        let mut placed: HashMap<&'d str, usize> = HashMap::with_capacity(all.len());
        for f in all {
            let key = f.node.response_key().node.as_str();
            match placed.get(key).map(|&i| out[i]) {
                None => {
                    placed.insert(key, out.len());
                    out.push(f);
                }
                Some(first) if is_plain_leaf(first) && is_plain_leaf(f) && first.node.name.node == f.node.name.node => {}
                Some(_) => return None,
            }
        }
        self.nodes += out.len();
        // Every field skipped: async-graphql answers such an object `null` (the plan would
        // write `{}`), so it is left to async-graphql.
        (!out.is_empty() && self.nodes <= MAX_PLAN_NODES).then_some(out)
    }

    fn collect_into(
        &self,
        set: &'d SelectionSet,
        ty: &str,
        interfaces: &[&str],
        out: &mut Vec<&'d Positioned<Field>>,
        depth: usize,
    ) -> Option<()> {
        if depth > 16 || out.len() > MAX_PLAN_NODES {
            return None;
        }
        let applies = |on: &Name| on.as_str() == ty || interfaces.contains(&on.as_str());
        for item in &set.items {
            match &item.node {
                Selection::Field(f) => {
                    if included(&f.node.directives)? {
                        out.push(f);
                    }
                }
                Selection::InlineFragment(f) => {
                    let on = f.node.type_condition.as_ref().map(|c| &c.node.on.node);
                    if on.is_some_and(|on| !applies(on)) || !included(&f.node.directives)? {
                        continue;
                    }
                    self.collect_into(&f.node.selection_set.node, ty, interfaces, out, depth + 1)?;
                }
                Selection::FragmentSpread(s) => {
                    let f = self.doc.fragments.get(&s.node.fragment_name.node)?;
                    if !applies(&f.node.type_condition.node.on.node) || !included(&s.node.directives)? || !f.node.directives.is_empty() {
                        continue;
                    }
                    self.collect_into(&f.node.selection_set.node, ty, interfaces, out, depth + 1)?;
                }
            }
        }
        Some(())
    }

    /// The plan of the selection `set` on an object of type `ty` whose values are of the Rust
    /// type `parent`; `records` when they are records of that connection (their `id` and
    /// columns are written directly). `None` for what a plan does not cover.
    fn object(&mut self, set: &'d SelectionSet, ty: &str, parent: Parent, records: Option<&dyn PlannedConnection>) -> Option<ObjectPlan> {
        let output = self.catalog.types.get(ty)?;
        let interfaces: Vec<&str> = output.interfaces.iter().map(String::as_str).collect();
        let mut items = Vec::new();
        for f in self.collect(set, ty, &interfaces)? {
            let key = key(f);
            let name = f.node.name.node.as_str();
            let column = records.and_then(|r| r.column(name));
            items.push(match (name, column) {
                ("__typename", _) => ObjectItem::Typename(key),
                ("id", _) if records.is_some() => ObjectItem::Id(key),
                (_, Some(index)) => ObjectItem::Column(key, index),
                _ => self.field(f, key, output, &parent)?,
            });
        }
        Some(ObjectPlan { type_name: ty.to_string(), items, parent })
    }

    /// A field of an object of type `output` (not `__typename`, a record's `id` or column).
    fn field(&mut self, f: &'d Positioned<Field>, key: Key, output: &OutputType, parent: &Parent) -> Option<ObjectItem> {
        let name = f.node.name.node.as_str();
        let ty = output.fields.get(name)?;
        let set = &f.node.selection_set.node;
        if name == "node" && matches!(parent, Parent::Known(id) if *id == TypeId::of::<()>()) {
            return Some(ObjectItem::Node(key, self.node(f)?));
        }
        if let Some(node) = ty.strip_suffix("Connection").filter(|_| self.catalog.kinds.get(ty) == Some(&NamedKind::Object)) {
            let Parent::Known(id) = parent else { return None };
            let connection = self.catalog.connections.get(&(*id, name.to_string()))?.clone();
            if connection.type_name() != node {
                return None;
            }
            let arguments = connection_arguments(f)?;
            let selection = self.connection(set, connection.as_ref())?;
            return Some(ObjectItem::Connection(key, ConnectionField { connection, arguments, selection }));
        }
        if !f.node.arguments.is_empty() {
            return None;
        }
        let child = match self.catalog.kinds.get(ty)? {
            NamedKind::Leaf => None,
            NamedKind::Object => {
                let child_parent = match self.catalog.entities.get(ty) {
                    Some(records) => Parent::Known(records.record_type()),
                    None => Parent::Learned(OnceLock::new()),
                };
                Some(Box::new(self.object(set, ty, child_parent, None)?))
            }
            NamedKind::Other => return None,
        };
        let resolve = match parent {
            Parent::Known(id) => FieldResolve::Known(self.catalog.fields.resolver(*id, name)?.clone()),
            // No parent type has an unambiguous resolver of this name: it cannot be learned.
            Parent::Learned(_) if !self.catalog.fields.resolves(name) => return None,
            Parent::Learned(_) => FieldResolve::Learned(OnceLock::new()),
        };
        Some(ObjectItem::Field(key, FieldPlan { name: name.to_string(), resolve, child }))
    }

    /// `node(id:)` at the root: the plan of its selection on each entity type (the types a
    /// plan does not cover are kept as `None`).
    fn node(&mut self, f: &'d Positioned<Field>) -> Option<NodeField> {
        let [(name, id)] = f.node.arguments.as_slice() else { return None };
        if name.node != "id" {
            return None;
        }
        let set = &f.node.selection_set.node;
        let mut types = HashMap::new();
        for (ty, load) in &self.catalog.loaders {
            let planned = self.catalog.entities.get(ty).and_then(|records| {
                let plan = self.object(set, ty, Parent::Known(records.record_type()), Some(records.as_ref()))?;
                Some((load.clone(), records.clone(), plan))
            });
            types.insert(ty.clone(), planned);
        }
        (self.nodes <= MAX_PLAN_NODES).then_some(NodeField { id: id.node.clone(), types })
    }

    /// The selection of a connection of `records`, `None` for a field the plan does not cover.
    fn connection(&mut self, set: &'d SelectionSet, records: &dyn PlannedConnection) -> Option<ConnectionSelection> {
        let ty = records.type_name();
        let mut wanted = Wanted::default();
        let mut items = Vec::new();
        for f in self.collect(set, &format!("{ty}Connection"), &[])? {
            let key = key(f);
            items.push(match f.node.name.node.as_str() {
                "__typename" => ConnectionItem::Typename(key, format!("{ty}Connection")),
                "totalCount" => {
                    wanted.total = true;
                    ConnectionItem::TotalCount(key)
                }
                "pageInfo" => {
                    wanted.page = true;
                    ConnectionItem::PageInfo(key, self.page_info(&f.node.selection_set.node)?)
                }
                "edges" => {
                    wanted.page = true;
                    let edges = self.edges(&f.node.selection_set.node, records)?;
                    wanted.cursors |= edges.iter().any(|e| matches!(e, EdgeItem::Cursor(_)));
                    ConnectionItem::Edges(key, edges)
                }
                "phaseCounts" if records.has_phase_counts() => {
                    wanted.phases = true;
                    ConnectionItem::PhaseCounts(key, self.phase_counts(&f.node.selection_set.node, ty)?)
                }
                _ => return None,
            });
        }
        Some(ConnectionSelection { items, wanted })
    }

    fn page_info(&mut self, set: &'d SelectionSet) -> Option<Vec<PageInfoItem>> {
        let mut items = Vec::new();
        for f in self.collect(set, "PageInfo", &[])? {
            let key = key(f);
            items.push(match f.node.name.node.as_str() {
                "__typename" => PageInfoItem::Typename(key),
                "hasNextPage" => PageInfoItem::HasNext(key),
                "hasPreviousPage" => PageInfoItem::HasPrevious(key),
                "startCursor" => PageInfoItem::Start(key),
                "endCursor" => PageInfoItem::End(key),
                _ => return None,
            });
        }
        Some(items)
    }

    fn edges(&mut self, set: &'d SelectionSet, records: &dyn PlannedConnection) -> Option<Vec<EdgeItem>> {
        let ty = records.type_name();
        let mut items = Vec::new();
        for f in self.collect(set, &format!("{ty}Edge"), &[])? {
            let key = key(f);
            items.push(match f.node.name.node.as_str() {
                "__typename" => EdgeItem::Typename(key, format!("{ty}Edge")),
                "cursor" => EdgeItem::Cursor(key),
                "node" => {
                    EdgeItem::Node(key, self.object(&f.node.selection_set.node, ty, Parent::Known(records.record_type()), Some(records))?)
                }
                _ => return None,
            });
        }
        Some(items)
    }

    fn phase_counts(&mut self, set: &'d SelectionSet, ty: &str) -> Option<Vec<PhaseItem>> {
        let mut items = Vec::new();
        for f in self.collect(set, &format!("{ty}PhaseCount"), &[])? {
            let key = key(f);
            items.push(match f.node.name.node.as_str() {
                "__typename" => PhaseItem::Typename(key, format!("{ty}PhaseCount")),
                "phase" => PhaseItem::Phase(key),
                "count" => PhaseItem::Count(key),
                _ => return None,
            });
        }
        Some(items)
    }
}

/// Whether `f` is a field without arguments, directives or sub-selection.
fn is_plain_leaf(f: &Positioned<Field>) -> bool {
    f.node.arguments.is_empty() && f.node.directives.is_empty() && f.node.selection_set.node.items.is_empty()
}

/// Whether literal `@skip`/`@include` directives keep a selection; `None` for another
/// directive or a variable condition.
fn included(directives: &[Positioned<async_graphql::parser::types::Directive>]) -> Option<bool> {
    let mut keep = true;
    for d in directives {
        let condition = match d.node.arguments.as_slice() {
            [(name, value)] if name.node == "if" => match &value.node {
                InputValue::Boolean(b) => *b,
                _ => return None,
            },
            _ => return None,
        };
        keep &= match d.node.name.node.as_str() {
            "skip" => !condition,
            "include" => condition,
            _ => return None,
        };
    }
    Some(keep)
}
