//! A plan's JSON writer ([`crate::plan`]): connections of one kind ([`Writer`], their records'
//! `id` and columns written directly) and objects through their fields' resolvers
//! ([`write_object`]), charging the answer budget and ticking the deadline as the resolvers do.

use super::tree::*;
use crate::column::Column;
use crate::filter::FilterValue;
use crate::request::RequestContext;
use async_graphql::dynamic::FieldValue;
use async_graphql::{Error, Value};
use schema::common::StatusPhase;
use std::any::Any;
use storage::Stored;

/// Writes a connection's JSON, charging the answer budget as the resolvers do
/// ([`crate::fields::field`]: the field's name, 4, and the value's bytes).
pub(crate) struct Writer<'a, R> {
    pub(crate) run: &'a Run<'a>,
    pub(crate) columns: &'a [Column<R>],
    /// The nodes' GraphQL type.
    pub(crate) type_name: &'static str,
}

/// The budget a resolved object value adds (its braces; its fields charge their own).
const OBJECT: usize = 2;
/// The budget of a number, a boolean or a null.
const SCALAR: usize = 8;

impl<R: Send + Sync + 'static> Writer<'_, R> {
    /// Ticks the deadline and charges the field `name` with a value of `bytes`.
    fn charge(&self, name: &str, bytes: usize) -> Result<(), Error> {
        charge(self.run.request, name, bytes)
    }

    /// Writes the JSON object of `data` as `selection` selects it.
    ///
    /// # Errors
    /// The deadline's error (or the answer budget's), `not_projected` for a missing non-null value.
    pub(crate) fn connection(&self, data: &ConnData<R>, selection: &ConnectionSelection, out: &mut Vec<u8>) -> Result<(), Error> {
        out.push(b'{');
        for (i, item) in selection.items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match item {
                ConnectionItem::Typename(key, name) => write_pair(out, key, name),
                ConnectionItem::TotalCount(key) => {
                    self.charge("totalCount", SCALAR)?;
                    out.extend_from_slice(key);
                    write_int(out, data.total);
                }
                ConnectionItem::PageInfo(key, items) => {
                    self.charge("pageInfo", OBJECT)?;
                    out.extend_from_slice(key);
                    self.page_info(data, items, out)?;
                }
                ConnectionItem::Edges(key, items) => {
                    self.charge("edges", 2 + data.edges.iter().map(|_| OBJECT + 1).sum::<usize>())?;
                    out.extend_from_slice(key);
                    out.push(b'[');
                    for (j, (cursor, record)) in data.edges.iter().enumerate() {
                        if j > 0 {
                            out.push(b',');
                        }
                        self.edge(cursor, record, items, out)?;
                    }
                    out.push(b']');
                }
                ConnectionItem::PhaseCounts(key, items) => {
                    self.charge("phaseCounts", 2 + data.phases.iter().map(|_| OBJECT + 1).sum::<usize>())?;
                    out.extend_from_slice(key);
                    self.phase_counts(&data.phases, items, out)?;
                }
            }
        }
        out.push(b'}');
        Ok(())
    }

    fn page_info(&self, data: &ConnData<R>, items: &[PageInfoItem], out: &mut Vec<u8>) -> Result<(), Error> {
        fn cursor<R>(edge: Option<&(String, Stored<R>)>) -> Option<&str> {
            edge.map(|e| e.0.as_str())
        }
        out.push(b'{');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match item {
                PageInfoItem::Typename(key) => write_pair(out, key, "PageInfo"),
                PageInfoItem::HasNext(key) => {
                    self.charge("hasNextPage", SCALAR)?;
                    out.extend_from_slice(key);
                    write_bool(out, data.has_next);
                }
                PageInfoItem::HasPrevious(key) => {
                    self.charge("hasPreviousPage", SCALAR)?;
                    out.extend_from_slice(key);
                    write_bool(out, data.has_previous);
                }
                PageInfoItem::Start(key) => self.nullable_string("startCursor", key, cursor(data.edges.first()), out)?,
                PageInfoItem::End(key) => self.nullable_string("endCursor", key, cursor(data.edges.last()), out)?,
            }
        }
        out.push(b'}');
        Ok(())
    }

    fn nullable_string(&self, name: &str, key: &[u8], value: Option<&str>, out: &mut Vec<u8>) -> Result<(), Error> {
        self.charge(name, value.map_or(4, |v| v.len() + 2))?;
        out.extend_from_slice(key);
        match value {
            Some(v) => write_str(out, v),
            None => out.extend_from_slice(b"null"),
        }
        Ok(())
    }

    fn edge(&self, cursor: &str, record: &Stored<R>, items: &[EdgeItem], out: &mut Vec<u8>) -> Result<(), Error> {
        out.push(b'{');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match item {
                EdgeItem::Typename(key, name) => write_pair(out, key, name),
                EdgeItem::Cursor(key) => self.nullable_string("cursor", key, Some(cursor), out)?,
                EdgeItem::Node(key, plan) => {
                    self.charge("node", OBJECT)?;
                    out.extend_from_slice(key);
                    self.node(record, plan, out)?;
                }
            }
        }
        out.push(b'}');
        Ok(())
    }

    /// Writes `record` as `plan` selects it: its `id` and columns directly, other fields by
    /// their resolvers.
    ///
    /// # Errors
    /// The resolvers' errors.
    pub(crate) fn node(&self, record: &Stored<R>, plan: &ObjectPlan, out: &mut Vec<u8>) -> Result<(), Error> {
        out.push(b'{');
        for (i, item) in plan.items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match item {
                ObjectItem::Id(key) => {
                    let id = schema::GlobalId::new(self.type_name, &record.key).encode();
                    self.nullable_string("id", key, Some(&id), out)?;
                }
                ObjectItem::Column(key, index) => self.column(&self.columns[*index], record, key, out)?,
                item => write_item(self.run, record, &plan.type_name, item, out)?,
            }
        }
        out.push(b'}');
        Ok(())
    }

    fn column(&self, column: &Column<R>, record: &Stored<R>, key: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
        let name = column.name();
        match column.value(record, self.run.request) {
            FilterValue::Str(Some(s)) => self.nullable_string(name, key, Some(&s), out),
            FilterValue::Bool(Some(b)) => {
                self.charge(name, SCALAR)?;
                out.extend_from_slice(key);
                write_bool(out, b);
                Ok(())
            }
            FilterValue::Time(Some(t)) => self.nullable_string(name, key, Some(&t.to_rfc3339()), out),
            FilterValue::Str(None) | FilterValue::Bool(None) | FilterValue::Time(None) if column.is_nullable() => {
                self.nullable_string(name, key, None, out)
            }
            _ => Err(crate::error::not_projected(name)),
        }
    }

    fn phase_counts(&self, phases: &[(StatusPhase, u64)], items: &[PhaseItem], out: &mut Vec<u8>) -> Result<(), Error> {
        out.push(b'[');
        for (j, (phase, count)) in phases.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            out.push(b'{');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match item {
                    PhaseItem::Typename(key, name) => write_pair(out, key, name),
                    PhaseItem::Phase(key) => self.nullable_string("phase", key, Some(phase.as_str()), out)?,
                    PhaseItem::Count(key) => {
                        self.charge("count", SCALAR)?;
                        out.extend_from_slice(key);
                        write_int(out, *count);
                    }
                }
            }
            out.push(b'}');
        }
        out.push(b']');
        Ok(())
    }
}

/// An error of a plan that gives way to async-graphql (not an error of the request: it is
/// not logged, and the request is answered again).
fn unplanned(cause: impl std::fmt::Display) -> Error {
    Error::new(format!("not planned: {cause}"))
}

/// Ticks the deadline and charges the field `name` with a value of `bytes` (as
/// [`crate::fields::field`] does: the name, 4, and the value).
fn charge(request: &RequestContext, name: &str, bytes: usize) -> Result<(), Error> {
    request.deadline.tick()?;
    request.deadline.charge(name.len() + 4 + bytes)
}

/// Writes the JSON object of `parent` (a value of `plan`'s Rust type) as `plan` selects it.
///
/// # Errors
/// The resolvers' errors; `INTERNAL` (and the run marked broken) for a field without a
/// resolver for the parent's type.
pub(crate) fn write_object(run: &Run<'_>, parent: &(dyn Any + Send + Sync), plan: &ObjectPlan, out: &mut Vec<u8>) -> Result<(), Error> {
    out.push(b'{');
    for (i, item) in plan.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_item(run, parent, &plan.type_name, item, out)?;
    }
    out.push(b'}');
    Ok(())
}

/// Writes one field of an object (not a record's `id` or column: only a connection's nodes
/// have those).
fn write_item(run: &Run<'_>, parent: &(dyn Any + Send + Sync), type_name: &str, item: &ObjectItem, out: &mut Vec<u8>) -> Result<(), Error> {
    match item {
        ObjectItem::Typename(key) => write_pair(out, key, type_name),
        ObjectItem::Field(key, field) => {
            let Some(resolve) = field.resolver(run, parent) else {
                run.broken.set(true);
                return Err(unplanned(format!("no resolver of {type_name}.{}", field.name)));
            };
            let value = resolve(parent, run.request)?;
            out.extend_from_slice(key);
            match value {
                None => out.extend_from_slice(b"null"),
                Some(v) => write_value(run, &v, field.child.as_deref(), out)?,
            }
        }
        ObjectItem::Connection(key, c) => {
            let values = c.values(run.variables);
            out.extend_from_slice(key);
            c.connection.write(run, parent, &connection_args(&values), &c.selection, out)?;
        }
        ObjectItem::Node(key, node) => {
            out.extend_from_slice(key);
            write_node(run, node, out)?;
        }
        ObjectItem::Id(_) | ObjectItem::Column(..) => return Err(unplanned("a record field outside a connection's nodes")),
    }
    Ok(())
}

/// Writes `node(id:)`: the record of the ID's type, loaded as the resolver loads it. An ID that
/// does not decode, names another type or is not found (`NOT_FOUND` on the resolvers' path), or
/// a type whose selection is not planned, is an error here: async-graphql answers.
fn write_node(run: &Run<'_>, node: &NodeField, out: &mut Vec<u8>) -> Result<(), Error> {
    let id = node.id.clone().into_const_with(|var| Ok::<_, ()>(run.variables.get(&var).cloned().unwrap_or(Value::Null)));
    let Ok(Value::String(id)) = id else { return Err(unplanned("`node` without a string ID")) };
    let gid = schema::GlobalId::decode(&id).map_err(|_| crate::error::not_found(&id))?;
    let Some(Some((load, records, plan))) = node.types.get(gid.type_name.as_str()) else {
        return Err(crate::error::not_found(&id));
    };
    let record = load(run.request, &gid.key)?.ok_or_else(|| crate::error::not_found(&id))?;
    records.write_record(run, record.as_ref(), plan, out)
}

/// Writes a resolved value: a list item by item, a GraphQL value as async-graphql writes it, an
/// object as `child` selects it.
fn write_value(run: &Run<'_>, v: &FieldValue<'_>, child: Option<&ObjectPlan>, out: &mut Vec<u8>) -> Result<(), Error> {
    if let Some(items) = v.as_list() {
        out.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_value(run, item, child, out)?;
        }
        out.push(b']');
        return Ok(());
    }
    if let Some(value) = v.as_value() {
        // Writing into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, value);
        return Ok(());
    }
    let plan = child.ok_or_else(|| unplanned("an object value of a scalar field"))?;
    let Some(parent) = plan.unwrap(run, v) else {
        run.broken.set(true);
        return Err(unplanned(format!("a value of {} of another type", plan.type_name)));
    };
    write_object(run, parent, plan, out)
}

impl ObjectPlan {
    /// The parent value `v` holds, of the plan's Rust type (learned from the first value).
    fn unwrap<'v>(&self, run: &Run<'_>, v: &'v FieldValue<'_>) -> Option<&'v (dyn Any + Send + Sync)> {
        let unwrap = match &self.parent {
            Parent::Known(id) => run.fields.unwrap_of(*id)?,
            Parent::Learned(learned) => learned.get_or_init(|| run.fields.learn(v)).as_ref()?.1,
        };
        unwrap(v)
    }
}

impl FieldPlan {
    /// The field's resolver for parents like `parent` (found once for a learned parent type).
    fn resolver<'p>(&'p self, run: &Run<'_>, parent: &(dyn Any + Send + Sync)) -> Option<&'p crate::fields::Resolve> {
        match &self.resolve {
            FieldResolve::Known(resolve) => Some(resolve),
            FieldResolve::Learned(found) => found.get_or_init(|| run.fields.resolver(Any::type_id(parent), &self.name).cloned()).as_ref(),
        }
    }
}

/// `"key":"value"`.
fn write_pair(out: &mut Vec<u8>, key: &[u8], value: &str) {
    out.extend_from_slice(key);
    write_str(out, value);
}

/// A JSON string, escaped as serde_json escapes it (as async-graphql's answers are written).
fn write_str(out: &mut Vec<u8>, value: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

fn write_int(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(value.to_string().as_bytes());
}

fn write_bool(out: &mut Vec<u8>, value: bool) {
    out.extend_from_slice(if value { b"true" } else { b"false" });
}
