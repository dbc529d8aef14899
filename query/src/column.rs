//! A kind's scalar field declared once ([`Column`]): its GraphQL name and type, how its value is
//! read from the record, and whether `where` can test it for null. The object field and the
//! `where` input field are both generated from it ([`crate::entity::register`],
//! [`crate::entity::Builder::where_type`]), so the two cannot disagree.

use crate::filter::{FilterField, FilterType, FilterValue};
use async_graphql::dynamic::{Field, FieldValue, TypeRef};
use async_graphql::{Name, Value};
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
    get: Arc<dyn Fn(&R) -> FilterValue + Send + Sync>,
}

impl<R: Send + Sync + 'static> Column<R> {
    /// A `String!` field.
    pub fn string(name: &'static str, get: impl Fn(&R) -> &str + Send + Sync + 'static) -> Column<R> {
        Column {
            name,
            ty: FilterType::Str,
            nullable: false,
            nillable: false,
            get: Arc::new(move |r| FilterValue::Str(Some(get(r).to_string()))),
        }
    }

    /// A `String` field, null when `get` gives `None`.
    pub fn optional_string(name: &'static str, get: impl Fn(&R) -> Option<&str> + Send + Sync + 'static) -> Column<R> {
        Column {
            name,
            ty: FilterType::Str,
            nullable: true,
            nillable: true,
            get: Arc::new(move |r| FilterValue::Str(get(r).map(str::to_string))),
        }
    }

    /// A non-null value of the enum type `type_name` (`get` gives the value's GraphQL name).
    pub fn enumeration(name: &'static str, type_name: &str, get: impl Fn(&R) -> &str + Send + Sync + 'static) -> Column<R> {
        let ty = FilterType::Enum(type_name.to_string());
        Column { name, ty, nullable: false, nillable: false, get: Arc::new(move |r| FilterValue::Str(Some(get(r).to_string()))) }
    }

    /// A `Boolean!` field.
    pub fn boolean(name: &'static str, get: impl Fn(&R) -> bool + Send + Sync + 'static) -> Column<R> {
        Column { name, ty: FilterType::Bool, nullable: false, nillable: false, get: Arc::new(move |r| FilterValue::Bool(Some(get(r)))) }
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

    /// The GraphQL name.
    pub fn name(&self) -> &'static str {
        self.name
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
        crate::entity::field::<Stored<R>>(self.name, ty, move |p, _| Ok(field_value(get(&p.record), is_enum)))
    }

    /// The `where` input field.
    pub fn filter_field(&self) -> FilterField<R> {
        let get = self.get.clone();
        FilterField::new(self.name, self.ty.clone(), self.nillable, move |s: &Stored<R>| get(&s.record))
    }
}

/// The GraphQL value of a column's value (`None` is null).
fn field_value(v: FilterValue, is_enum: bool) -> Option<FieldValue<'static>> {
    let value = match v {
        FilterValue::Str(Some(s)) if is_enum => Value::Enum(Name::new(s)),
        FilterValue::Str(Some(s)) => Value::String(s),
        FilterValue::Bool(Some(b)) => Value::Boolean(b),
        FilterValue::Time(Some(t)) => Value::String(t.to_rfc3339()),
        FilterValue::Str(None) | FilterValue::Bool(None) | FilterValue::Time(None) => return None,
    };
    Some(FieldValue::value(value))
}
