//! Field resolvers and answer values: the helpers every object type builds its fields with
//! (a field whose parent is a `T`, a field of a record, scalar and list values), and the answer
//! budget each resolved value is charged to.

use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldFuture, FieldValue, ResolverContext, TypeRef};
use async_graphql::{Error, Name, Value};
use schema::{Kind, Timestamp};
use std::any::Any;
use std::sync::Arc;
use storage::Stored;

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

/// A field's resolver over its parent as `&dyn Any` (a `T` for a field made by [`field`]):
/// deadline tick, value, answer budget, `NOT_FOUND` for a missing non-null value. The GraphQL
/// field calls it, and so do plans ([`crate::plan`]).
pub(crate) type Resolve =
    Arc<dyn Fn(&(dyn Any + Send + Sync), &RequestContext) -> Result<Option<FieldValue<'static>>, Error> + Send + Sync>;

/// The parent value a [`FieldValue`] holds, when it holds a value of one Rust type (one function
/// per type: a `FieldValue` only downcasts to a named type).
pub(crate) type Unwrap = for<'a> fn(&'a FieldValue<'_>) -> Option<&'a (dyn Any + Send + Sync)>;

fn unwrap<'a, T: Any + Send + Sync>(v: &'a FieldValue<'_>) -> Option<&'a (dyn Any + Send + Sync)> {
    v.downcast_ref::<T>().map(|t| t as &(dyn Any + Send + Sync))
}

/// The resolvers of the fields made by [`field`] while a schema was built ([`collecting`]):
/// by the parent's Rust type and the field's name, and how to find a parent of each type in a
/// [`FieldValue`].
#[derive(Default)]
pub(crate) struct FieldTable {
    resolvers: std::collections::HashMap<(std::any::TypeId, String), Resolve>,
    /// Fields of one name made twice for one parent type: two object types over one Rust type
    /// (`McpServer` and `AgentCard`), or one object made twice. Which one an object has is not
    /// known here, so plans use neither.
    ambiguous: std::collections::HashSet<(std::any::TypeId, String)>,
    types: std::collections::HashMap<std::any::TypeId, Unwrap>,
}

impl FieldTable {
    /// The resolver of field `name` of parents of type `parent`.
    pub(crate) fn resolver(&self, parent: std::any::TypeId, name: &str) -> Option<&Resolve> {
        let key = (parent, name.to_string());
        self.resolvers.get(&key).filter(|_| !self.ambiguous.contains(&key))
    }

    /// Whether some parent type has an unambiguous resolver of a field `name`.
    pub(crate) fn resolves(&self, name: &str) -> bool {
        self.resolvers.keys().any(|key| key.1 == name && !self.ambiguous.contains(key))
    }

    /// The parent type a value of `v` holds, with its [`Unwrap`], among the types of the table.
    pub(crate) fn learn(&self, v: &FieldValue<'_>) -> Option<(std::any::TypeId, Unwrap)> {
        self.types.iter().find(|(_, unwrap)| unwrap(v).is_some()).map(|(id, unwrap)| (*id, *unwrap))
    }

    /// The [`Unwrap`] of parents of type `parent`.
    pub(crate) fn unwrap_of(&self, parent: std::any::TypeId) -> Option<Unwrap> {
        self.types.get(&parent).copied()
    }
}

std::thread_local! {
    /// The table being collected on this thread ([`collecting`]); `None` outside a build.
    static COLLECTING: std::cell::RefCell<Option<FieldTable>> = const { std::cell::RefCell::new(None) };
}

/// Runs `build` (a schema build, on this thread) and returns what it built with the resolvers
/// of every field it made with [`field`]. A thread-local, because [`field`] is a free function
/// every object type calls, and a build runs on one thread.
pub(crate) fn collecting<R>(build: impl FnOnce() -> R) -> (R, FieldTable) {
    let outer = COLLECTING.with(|c| c.replace(Some(FieldTable::default())));
    let built = build();
    let table = COLLECTING.with(|c| c.replace(outer)).unwrap_or_default();
    (built, table)
}

/// A field of an object whose parent value is a `T`; `f` computes the value synchronously.
pub fn field<T: Any + Send + Sync>(
    name: &str,
    ty: TypeRef,
    f: impl Fn(&T, &RequestContext) -> Result<Option<FieldValue<'static>>, Error> + Send + Sync + 'static,
) -> Field {
    // A non-null field whose value is absent (e.g. the owner of a record whose parent was
    // deleted and whose own delete has not arrived yet) is NOT_FOUND, not an internal error.
    let non_null = matches!(ty, TypeRef::NonNull(_));
    let field_name = name.to_string();
    let resolve: Resolve = Arc::new(move |parent: &(dyn Any + Send + Sync), request: &RequestContext| {
        let parent = parent.downcast_ref::<T>().ok_or_else(|| crate::error::internal("a field's parent has another type"))?;
        request.deadline.tick()?;
        let v = f(parent, request)?;
        request.deadline.charge(field_name.len() + 4 + v.as_ref().map_or(4, answer_bytes))?;
        match v {
            None if non_null => Err(crate::error::not_projected(&field_name)),
            v => Ok(v),
        }
    });
    COLLECTING.with(|c| {
        if let Some(table) = c.borrow_mut().as_mut() {
            let parent = std::any::TypeId::of::<T>();
            match table.resolvers.entry((parent, name.to_string())) {
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(resolve.clone());
                }
                std::collections::hash_map::Entry::Occupied(e) => {
                    table.ambiguous.insert(e.key().clone());
                }
            }
            table.types.insert(parent, unwrap::<T>);
        }
    });
    Field::new(name, ty, move |ctx: ResolverContext<'_>| {
        let result = (|| {
            let parent = ctx.parent_value.try_downcast_ref::<T>()?;
            resolve(parent, ctx.data::<RequestContext>()?)
        })();
        crate::fields::ready(result)
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
