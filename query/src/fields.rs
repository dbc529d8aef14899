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
