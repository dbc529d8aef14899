//! A plan's tree ([`crate::plan`]): what each selected field writes, in answer order; the
//! resolved connection ([`ConnData`], which the resolvers answer too); and the connections
//! plans can read ([`PlannedConnection`], registered with each connection field by
//! [`crate::connection`]).

use crate::fields::{FieldTable, Resolve, Unwrap};
use crate::request::RequestContext;
use async_graphql::{Error, Name, Value};
use async_graphql_value::Value as InputValue;
use schema::common::StatusPhase;
use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use storage::Stored;

/// A resolved connection.
pub struct ConnData<R> {
    /// `(cursor, record)` in connection order.
    pub(crate) edges: Vec<(String, Stored<R>)>,
    pub(crate) has_next: bool,
    pub(crate) has_previous: bool,
    /// `totalCount`, when selected (else 0).
    pub(crate) total: u64,
    /// `phaseCounts`, when selected.
    pub(crate) phases: Vec<(StatusPhase, u64)>,
}

/// A connection's arguments, as GraphQL values (`None` when not given): read
/// from a resolver's context, or from a plan's arguments ([`crate::plan`]).
#[derive(Default)]
pub(crate) struct ConnectionArgs<'a> {
    /// `where`, read by the connection's where type ([`crate::filter::WhereType::parse_input`]).
    pub where_input: Option<&'a Value>,
    pub search: Option<&'a Value>,
    pub order_by: Option<&'a Value>,
    pub first: Option<&'a Value>,
    pub last: Option<&'a Value>,
    pub after: Option<&'a Value>,
    pub before: Option<&'a Value>,
}

/// The parts of a connection its selection asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Wanted {
    /// `edges` or `pageInfo`: the page is read.
    pub page: bool,
    /// `totalCount`.
    pub total: bool,
    /// `phaseCounts`.
    pub phases: bool,
    /// `edges { cursor }`: the cursors are charged to the answer budget.
    pub cursors: bool,
}

/// A connection field of records of one kind (`K`) under parents of one Rust type (`P`; `()`
/// for a root field), as plans read it: registered by [`crate::connection::connection_field`]
/// with the same rows as its GraphQL field.
pub(crate) trait PlannedConnection: Send + Sync {
    /// The GraphQL object type of the nodes (`Application`).
    fn type_name(&self) -> &'static str;
    /// The Rust type of the nodes' values (`Stored<K::Record>`).
    fn record_type(&self) -> TypeId;
    /// The index of the column `name` among the kind's columns.
    fn column(&self, name: &str) -> Option<usize>;
    /// Whether the connection has `phaseCounts`.
    fn has_phase_counts(&self) -> bool;
    /// Writes a record of the kind (a `Stored<K::Record>`) as `plan` selects it, its `id` and
    /// columns directly.
    ///
    /// # Errors
    /// The resolvers' errors; `INTERNAL` for a value of another type.
    fn write_record(&self, run: &Run<'_>, record: &(dyn Any + Send + Sync), plan: &ObjectPlan, out: &mut Vec<u8>) -> Result<(), Error>;
    /// Writes the connection's JSON object under `parent` for `args` and `selection`.
    ///
    /// # Errors
    /// The resolvers' errors (arguments, deadline, answer budget, storage).
    fn write(
        &self,
        run: &Run<'_>,
        parent: &(dyn Any + Send + Sync),
        args: &ConnectionArgs<'_>,
        selection: &ConnectionSelection,
        out: &mut Vec<u8>,
    ) -> Result<(), Error>;
}

/// Loads a visible record of one kind by its natural key, as `node(id:)` does (`None` when
/// absent or invisible).
pub(crate) type RecordLoader =
    Arc<dyn Fn(&RequestContext, &schema::Key) -> Result<Option<Box<dyn Any + Send + Sync>>, Error> + Send + Sync>;

/// The connections plans read, by the parent's Rust type and the field's name.
pub(crate) type PlannedConnections = HashMap<(TypeId, String), Arc<dyn PlannedConnection>>;

/// One run of a plan: the request, the variables' coerced values and the field resolvers.
pub(crate) struct Run<'a> {
    pub(crate) request: &'a RequestContext,
    pub(crate) variables: &'a HashMap<Name, Value>,
    pub(crate) fields: &'a FieldTable,
    /// Set when the plan met a field it cannot resolve (no resolver for a learned type): the
    /// plan is not used again.
    pub(crate) broken: std::cell::Cell<bool>,
}

/// A JSON object key with its colon, written ahead (`"name":`).
pub(crate) type Key = Box<[u8]>;

/// What a connection's selection writes, in answer order.
pub(crate) struct ConnectionSelection {
    pub(crate) items: Vec<ConnectionItem>,
    pub(crate) wanted: Wanted,
}

pub(crate) enum ConnectionItem {
    Typename(Key, String),
    TotalCount(Key),
    PageInfo(Key, Vec<PageInfoItem>),
    Edges(Key, Vec<EdgeItem>),
    PhaseCounts(Key, Vec<PhaseItem>),
}

pub(crate) enum PageInfoItem {
    Typename(Key),
    HasNext(Key),
    HasPrevious(Key),
    Start(Key),
    End(Key),
}

pub(crate) enum EdgeItem {
    Typename(Key, String),
    Cursor(Key),
    Node(Key, ObjectPlan),
}

/// What the selection of one object writes.
pub(crate) struct ObjectPlan {
    /// The GraphQL object type.
    pub(crate) type_name: String,
    pub(crate) items: Vec<ObjectItem>,
    /// The Rust type of the object's values.
    pub(crate) parent: Parent,
}

/// The Rust type of an object's values: known when planned (a connection's records), or
/// learned from the first value (the values of one object type are of one Rust type).
pub(crate) enum Parent {
    Known(TypeId),
    Learned(OnceLock<Option<(TypeId, Unwrap)>>),
}

pub(crate) enum ObjectItem {
    Typename(Key),
    /// A record's `id` (only in a connection's nodes).
    Id(Key),
    /// A record's column, by index (only in a connection's nodes).
    Column(Key, usize),
    /// A field resolved by its resolver ([`crate::fields::field`]).
    Field(Key, FieldPlan),
    /// A connection field.
    Connection(Key, ConnectionField),
    /// `node(id:)` (a root field): the plan of each entity type whose selection a plan covers.
    Node(Key, NodeField),
}

/// `node(id:)`: its argument, and per entity type the loader, the kind and the plan of the
/// selection on that type (`None`: that type's selection is not planned; such an ID runs on
/// async-graphql).
pub(crate) struct NodeField {
    pub(crate) id: InputValue,
    pub(crate) types: HashMap<String, Option<NodeType>>,
}

/// The plan of `node(id:)` for one entity type: how its records load, their kind, the selection.
pub(crate) type NodeType = (RecordLoader, Arc<dyn PlannedConnection>, ObjectPlan);

/// A field resolved by its resolver, and the plan of its object (or list of objects) value.
pub(crate) struct FieldPlan {
    pub(crate) name: String,
    pub(crate) resolve: FieldResolve,
    pub(crate) child: Option<Box<ObjectPlan>>,
}

/// A field's resolver: found when planned, or once the parent's type is learned.
pub(crate) enum FieldResolve {
    Known(Resolve),
    Learned(OnceLock<Option<Resolve>>),
}

/// A connection field with its arguments (literals and variables) and selection.
pub(crate) struct ConnectionField {
    pub(crate) connection: Arc<dyn PlannedConnection>,
    pub(crate) arguments: Vec<(Name, InputValue)>,
    pub(crate) selection: ConnectionSelection,
}

impl ConnectionField {
    /// The arguments' values for `variables` (a variable without a value is null).
    pub(crate) fn values(&self, variables: &HashMap<Name, Value>) -> Vec<(&Name, Value)> {
        let value_of = |var: Name| Ok::<_, ()>(variables.get(&var).cloned().unwrap_or(Value::Null));
        self.arguments.iter().map(|(name, v)| (name, v.clone().into_const_with(value_of).unwrap_or(Value::Null))).collect()
    }
}

/// The connection arguments among `values` (by name).
pub(crate) fn connection_args<'a>(values: &'a [(&Name, Value)]) -> ConnectionArgs<'a> {
    let arg = |n: &str| values.iter().find(|(name, _)| name.as_str() == n).map(|(_, v)| v);
    ConnectionArgs {
        where_input: arg("where"),
        search: arg("search"),
        order_by: arg("orderBy"),
        first: arg("first"),
        last: arg("last"),
        after: arg("after"),
        before: arg("before"),
    }
}

pub(crate) enum PhaseItem {
    Typename(Key, String),
    Phase(Key),
    Count(Key),
}
