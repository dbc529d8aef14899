//! A kind's scalar field declared once ([`Column`]): its GraphQL name and type, how its value is
//! read from the record, and whether `where` can test it for null. The object field and the
//! `where` input field are both generated from it ([`crate::connection::register_entity`],
//! [`crate::entity::Builder::where_type`]), so the two cannot disagree.

use crate::filter::{FilterField, FilterType, FilterValue, Getter};
use crate::request::RequestContext;
use async_graphql::dynamic::{Field, FieldValue, TypeRef};
use async_graphql::{Name, Value};
use schema::{GraphqlEnum, Timestamp};
use std::sync::Arc;
use storage::Stored;

/// One exposed and filterable scalar field of records `R`.
pub struct Column<R> {
    name: &'static str,
    ty: FilterType,
    /// Null in the object field.
    nullable: bool,
    /// `IsNil`/`NotNil` in `where` (as `nullable`, unless [`Column::nillable`]).
    nillable: bool,
    get: Getter<R>,
    /// The values of the enum type of an enum column, registered with the entity.
    enum_values: Option<&'static [&'static str]>,
}

impl<R: Send + Sync + 'static> Column<R> {
    /// A column of type `ty` whose value may depend on the request (e.g. on its `now`), null in
    /// the object field and nil in `where` when `nullable`.
    pub fn with_request(
        name: &'static str,
        ty: FilterType,
        nullable: bool,
        get: impl Fn(&Stored<R>, &RequestContext) -> FilterValue + Send + Sync + 'static,
    ) -> Column<R> {
        Column { name, ty, nullable, nillable: nullable, get: Arc::new(get), enum_values: None }
    }

    fn of_record(name: &'static str, ty: FilterType, nullable: bool, get: impl Fn(&R) -> FilterValue + Send + Sync + 'static) -> Column<R> {
        Column::with_request(name, ty, nullable, move |s, _| get(&s.record))
    }

    /// A `String!` field.
    pub fn string(name: &'static str, get: impl Fn(&R) -> &str + Send + Sync + 'static) -> Column<R> {
        Column::of_record(name, FilterType::Str, false, move |r| FilterValue::Str(Some(get(r).to_string())))
    }

    /// A `String` field, null when `get` gives `None`.
    pub fn optional_string(name: &'static str, get: impl Fn(&R) -> Option<&str> + Send + Sync + 'static) -> Column<R> {
        Column::of_record(name, FilterType::Str, true, move |r| FilterValue::Str(get(r).map(str::to_string)))
    }

    /// A non-null value of the GraphQL enum `type_name`, whose values are those of `E`
    /// (registered with the entity).
    pub fn enumeration<E: GraphqlEnum>(name: &'static str, type_name: &str, get: impl Fn(&R) -> E + Send + Sync + 'static) -> Column<R> {
        let column = Column::of_record(name, FilterType::Enum(type_name.to_string()), false, move |r| {
            FilterValue::Str(Some(get(r).as_graphql().to_string()))
        });
        Column { enum_values: Some(E::VALUES), ..column }
    }

    /// An enum column whose type has only the first `count` values of its schema enum (e.g.
    /// `ApprovalRequestState`).
    pub fn first_values(self, count: usize) -> Column<R> {
        let enum_values = self.enum_values.map(|values| &values[..count.min(values.len())]);
        Column { enum_values, ..self }
    }

    /// A `Boolean!` field.
    pub fn boolean(name: &'static str, get: impl Fn(&R) -> bool + Send + Sync + 'static) -> Column<R> {
        Column::of_record(name, FilterType::Bool, false, move |r| FilterValue::Bool(Some(get(r))))
    }

    /// A `Time` field, null when `get` gives `None`.
    pub fn optional_time(name: &'static str, get: impl Fn(&R) -> Option<Timestamp> + Send + Sync + 'static) -> Column<R> {
        Column::of_record(name, FilterType::Time, true, move |r| FilterValue::Time(get(r)))
    }

    /// A `Time!` field of the stored record's bookkeeping (`createdAt`, `lastModifiedAt`).
    pub fn stored_time(name: &'static str, get: impl Fn(&Stored<R>) -> Timestamp + Send + Sync + 'static) -> Column<R> {
        Column::with_request(name, FilterType::Time, false, move |s, _| FilterValue::Time(Some(get(s))))
    }

    /// The object field is nullable (though the value is always there) and `where` offers
    /// `IsNil`/`NotNil`: kept for fields the reference declares so.
    pub fn nullable(self) -> Column<R> {
        Column { nullable: true, nillable: true, ..self }
    }

    /// `where` also offers `IsNil`/`NotNil` (which never match a non-null field): kept for
    /// fields whose filter always had them.
    pub fn nillable(self) -> Column<R> {
        Column { nillable: true, ..self }
    }

    /// Whether the object field is nullable.
    pub fn is_nullable(&self) -> bool {
        self.nullable
    }

    /// The GraphQL name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The enum type of an enum column with its values (`None` for other columns).
    pub fn enum_type(&self) -> Option<(&str, &'static [&'static str])> {
        match (&self.ty, self.enum_values) {
            (FilterType::Enum(name), Some(values)) => Some((name, values)),
            _ => None,
        }
    }

    /// The object field.
    pub fn object_field(&self) -> Field {
        let type_name = match &self.ty {
            FilterType::Id => TypeRef::ID.to_string(),
            FilterType::Str => TypeRef::STRING.to_string(),
            FilterType::Enum(e) => e.clone(),
            FilterType::Bool => TypeRef::BOOLEAN.to_string(),
            FilterType::Time => "Time".to_string(),
        };
        let ty = if self.nullable { TypeRef::named(type_name) } else { TypeRef::named_nn(type_name) };
        let (get, is_enum) = (self.get.clone(), matches!(self.ty, FilterType::Enum(_)));
        crate::fields::field::<Stored<R>>(self.name, ty, move |p, request| {
            Ok(graphql_value(get(p, request), is_enum).map(FieldValue::value))
        })
    }

    /// The column's value of `s` for `request`: what its object field answers (`None` is null),
    /// what `changedFields` compares ([`crate::history`]) and an export's flat rows write
    /// ([`crate::export`]).
    pub(crate) fn value(&self, s: &Stored<R>, request: &RequestContext) -> FilterValue {
        (self.get)(s, request)
    }

    /// The `where` input field.
    pub fn filter_field(&self) -> FilterField<R> {
        FilterField::with_request(self.name, self.ty.clone(), self.nillable, {
            let get = self.get.clone();
            move |s: &Stored<R>, request| get(s, request)
        })
    }
}

/// The GraphQL value of a column's value (`None` is null).
fn graphql_value(v: FilterValue, is_enum: bool) -> Option<Value> {
    let value = match v {
        FilterValue::Str(Some(s)) if is_enum => Value::Enum(Name::new(s)),
        FilterValue::Str(Some(s)) => Value::String(s),
        FilterValue::Bool(Some(b)) => Value::Boolean(b),
        FilterValue::Time(Some(t)) => Value::String(t.to_rfc3339()),
        FilterValue::Str(None) | FilterValue::Bool(None) | FilterValue::Time(None) => return None,
    };
    Some(value)
}
