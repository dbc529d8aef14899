//! `where` inputs (reference-graphql.md §2.2): `<field><Suffix>` operators generated from one
//! table of filterable fields per entity, `and`/`or`/`not`, evaluated per record.
//!
//! Secrets (`teamToken`, client secrets, hidden `specification`) never appear in a filter
//! table. Empty `In`/`NotIn` lists and `IsNil: false` are ignored; an empty input object
//! (also nested) is a no-op.

use crate::error::bad_input;
use async_graphql::dynamic::{InputObject, InputValue, ObjectAccessor, TypeRef, ValueAccessor};
use async_graphql::Error;
use schema::Timestamp;
use std::sync::Arc;
use storage::Stored;

/// The value of a filterable field of one record.
#[derive(Clone, Debug, PartialEq)]
pub enum FVal {
    /// A string (also IDs and enum values, as their GraphQL spelling); `None` = null.
    Str(Option<String>),
    /// A boolean; `None` = null.
    Bool(Option<bool>),
    /// A time; `None` = null.
    Time(Option<Timestamp>),
}

/// The GraphQL type family of a filterable field, deciding its operators.
#[derive(Clone, Debug)]
pub enum FType {
    /// `ID`: EQ, NEQ, In, NotIn, GT, GTE, LT, LTE.
    Id,
    /// `String`: ORD + Contains, HasPrefix, HasSuffix, EqualFold, ContainsFold.
    Str,
    /// An enum type (by name): EQ, NEQ, In, NotIn.
    Enum(String),
    /// `Boolean`: EQ, NEQ.
    Bool,
    /// `Time`: ORD.
    Time,
}

/// Operators (suffix of the input field name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// (no suffix)
    Eq,
    /// `NEQ`
    Neq,
    /// `In`
    In,
    /// `NotIn`
    NotIn,
    /// `GT`
    Gt,
    /// `GTE`
    Gte,
    /// `LT`
    Lt,
    /// `LTE`
    Lte,
    /// `Contains`
    Contains,
    /// `HasPrefix`
    HasPrefix,
    /// `HasSuffix`
    HasSuffix,
    /// `EqualFold`
    EqualFold,
    /// `ContainsFold`
    ContainsFold,
    /// `IsNil`
    IsNil,
    /// `NotNil`
    NotNil,
}

impl Op {
    fn suffix(self) -> &'static str {
        match self {
            Op::Eq => "",
            Op::Neq => "NEQ",
            Op::In => "In",
            Op::NotIn => "NotIn",
            Op::Gt => "GT",
            Op::Gte => "GTE",
            Op::Lt => "LT",
            Op::Lte => "LTE",
            Op::Contains => "Contains",
            Op::HasPrefix => "HasPrefix",
            Op::HasSuffix => "HasSuffix",
            Op::EqualFold => "EqualFold",
            Op::ContainsFold => "ContainsFold",
            Op::IsNil => "IsNil",
            Op::NotNil => "NotNil",
        }
    }
}

/// Getter of a filterable value.
pub type Getter<R> = Arc<dyn Fn(&Stored<R>) -> FVal + Send + Sync>;

/// One filterable field of an entity.
pub struct FilterField<R> {
    /// GraphQL field name (`basePath`).
    pub name: &'static str,
    /// Type family.
    pub ty: FType,
    /// Whether `IsNil`/`NotNil` exist.
    pub nillable: bool,
    /// Reads the value.
    pub get: Getter<R>,
}

impl<R> FilterField<R> {
    /// A field.
    pub fn new(name: &'static str, ty: FType, nillable: bool, get: impl Fn(&Stored<R>) -> FVal + Send + Sync + 'static) -> FilterField<R> {
        FilterField { name, ty, nillable, get: Arc::new(get) }
    }

    fn ops(&self) -> Vec<Op> {
        let mut ops = match self.ty {
            FType::Id | FType::Time => vec![Op::Eq, Op::Neq, Op::In, Op::NotIn, Op::Gt, Op::Gte, Op::Lt, Op::Lte],
            FType::Str => vec![
                Op::Eq,
                Op::Neq,
                Op::In,
                Op::NotIn,
                Op::Gt,
                Op::Gte,
                Op::Lt,
                Op::Lte,
                Op::Contains,
                Op::HasPrefix,
                Op::HasSuffix,
                Op::EqualFold,
                Op::ContainsFold,
            ],
            FType::Enum(_) => vec![Op::Eq, Op::Neq, Op::In, Op::NotIn],
            FType::Bool => vec![Op::Eq, Op::Neq],
        };
        if self.nillable {
            ops.extend([Op::IsNil, Op::NotNil]);
        }
        ops
    }

    fn scalar(&self) -> String {
        match &self.ty {
            FType::Id => "ID".into(),
            FType::Str => "String".into(),
            FType::Enum(e) => e.clone(),
            FType::Bool => "Boolean".into(),
            FType::Time => "Time".into(),
        }
    }
}

/// A compiled where-input type: its fields, and the input object to register.
pub struct WhereType<R> {
    /// GraphQL input type name (`ApplicationWhereInput`).
    pub name: String,
    fields: Vec<Arc<FilterField<R>>>,
}

/// A parsed predicate.
pub enum Pred<R> {
    /// All must hold (an empty list holds).
    All(Vec<Pred<R>>),
    /// One must hold (an empty list is ignored: holds).
    Any(Vec<Pred<R>>),
    /// Negation.
    Not(Box<Pred<R>>),
    /// A comparison.
    Cmp(Arc<FilterField<R>>, Op, Arg),
}

/// A parsed operand.
#[derive(Clone, Debug)]
pub enum Arg {
    /// No operand (IsNil/NotNil).
    None,
    /// One value.
    One(FVal),
    /// A list (In/NotIn).
    List(Vec<FVal>),
}

impl<R: 'static> WhereType<R> {
    /// A where type named `name` over `fields`.
    pub fn new(name: impl Into<String>, fields: Vec<FilterField<R>>) -> WhereType<R> {
        WhereType { name: name.into(), fields: fields.into_iter().map(Arc::new).collect() }
    }

    /// The GraphQL input object.
    pub fn input_object(&self) -> InputObject {
        let mut o = InputObject::new(&self.name)
            .field(InputValue::new("not", TypeRef::named(&self.name)))
            .field(InputValue::new("and", TypeRef::named_nn_list(&self.name)))
            .field(InputValue::new("or", TypeRef::named_nn_list(&self.name)));
        for f in &self.fields {
            for op in f.ops() {
                let name = format!("{}{}", f.name, op.suffix());
                let ty = match op {
                    Op::In | Op::NotIn => TypeRef::named_nn_list(f.scalar()),
                    Op::IsNil | Op::NotNil => TypeRef::named(TypeRef::BOOLEAN),
                    Op::Contains | Op::HasPrefix | Op::HasSuffix | Op::EqualFold | Op::ContainsFold => TypeRef::named(TypeRef::STRING),
                    _ => TypeRef::named(f.scalar()),
                };
                o = o.field(InputValue::new(name, ty));
            }
        }
        o
    }

    /// Parses an input value into a predicate.
    ///
    /// # Errors
    /// `BAD_USER_INPUT` for values of the wrong shape (e.g. a malformed time).
    pub fn parse(&self, input: &ObjectAccessor<'_>) -> Result<Pred<R>, Error> {
        let mut all = Vec::new();
        for (name, value) in input.iter() {
            if value.is_null() {
                continue;
            }
            match name.as_str() {
                "not" => all.push(Pred::Not(Box::new(self.parse(&value.object()?)?))),
                "and" => {
                    let list = value.list()?;
                    let parts = list.iter().map(|v| self.parse(&v.object()?)).collect::<Result<Vec<_>, _>>()?;
                    all.push(Pred::All(parts));
                }
                "or" => {
                    let list = value.list()?;
                    let parts = list.iter().map(|v| self.parse(&v.object()?)).collect::<Result<Vec<_>, _>>()?;
                    if !parts.is_empty() {
                        all.push(Pred::Any(parts));
                    }
                }
                other => {
                    let (field, op) = self.resolve(other).ok_or_else(|| bad_input(format!("unknown filter field {other:?}")))?;
                    match op {
                        Op::IsNil | Op::NotNil => {
                            if value.boolean()? {
                                all.push(Pred::Cmp(field, op, Arg::None));
                            }
                        }
                        Op::In | Op::NotIn => {
                            let items = value.list()?.iter().map(|v| operand(&field.ty, &v)).collect::<Result<Vec<_>, _>>()?;
                            if !items.is_empty() {
                                all.push(Pred::Cmp(field, op, Arg::List(items)));
                            }
                        }
                        Op::Contains | Op::HasPrefix | Op::HasSuffix | Op::EqualFold | Op::ContainsFold => {
                            all.push(Pred::Cmp(field, op, Arg::One(FVal::Str(Some(value.string()?.to_string())))));
                        }
                        _ => all.push(Pred::Cmp(field.clone(), op, Arg::One(operand(&field.ty, &value)?))),
                    }
                }
            }
        }
        Ok(Pred::All(all))
    }

    fn resolve(&self, name: &str) -> Option<(Arc<FilterField<R>>, Op)> {
        // Longest field name first so `nameIn` never resolves to a field `nam` + `eIn`.
        let mut best: Option<(Arc<FilterField<R>>, Op)> = None;
        for f in &self.fields {
            if let Some(rest) = name.strip_prefix(f.name) {
                if let Some(op) = f.ops().into_iter().find(|op| op.suffix() == rest) {
                    if best.as_ref().is_none_or(|(b, _)| b.name.len() < f.name.len()) {
                        best = Some((f.clone(), op));
                    }
                }
            }
        }
        best
    }
}

fn operand(ty: &FType, v: &ValueAccessor<'_>) -> Result<FVal, Error> {
    Ok(match ty {
        FType::Id | FType::Str => FVal::Str(Some(v.string()?.to_string())),
        FType::Enum(_) => FVal::Str(Some(v.enum_name()?.to_string())),
        FType::Bool => FVal::Bool(Some(v.boolean()?)),
        FType::Time => {
            let s = v.string()?;
            FVal::Time(Some(Timestamp::parse_rfc3339(s).map_err(|_| bad_input(format!("invalid time {s:?}")))?))
        }
    })
}

impl<R> Pred<R> {
    /// Whether the predicate holds for `row`.
    pub fn eval(&self, row: &Stored<R>) -> bool {
        match self {
            Pred::All(ps) => ps.iter().all(|p| p.eval(row)),
            Pred::Any(ps) => ps.iter().any(|p| p.eval(row)),
            Pred::Not(p) => !p.eval(row),
            Pred::Cmp(field, op, arg) => compare(&(field.get)(row), *op, arg),
        }
    }

    /// Whether the predicate is trivially true (no comparisons).
    pub fn is_trivial(&self) -> bool {
        match self {
            Pred::All(ps) | Pred::Any(ps) => ps.iter().all(Pred::is_trivial),
            Pred::Not(_) | Pred::Cmp(..) => false,
        }
    }
}

fn is_nil(v: &FVal) -> bool {
    matches!(v, FVal::Str(None) | FVal::Bool(None) | FVal::Time(None))
}

fn ord(a: &FVal, b: &FVal) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (FVal::Str(Some(a)), FVal::Str(Some(b))) => Some(a.cmp(b)),
        (FVal::Bool(Some(a)), FVal::Bool(Some(b))) => Some(a.cmp(b)),
        (FVal::Time(Some(a)), FVal::Time(Some(b))) => Some(a.cmp(b)),
        _ => None,
    }
}

fn compare(value: &FVal, op: Op, arg: &Arg) -> bool {
    use std::cmp::Ordering::*;
    let one = match arg {
        Arg::One(v) => Some(v),
        _ => None,
    };
    let text = |v: &FVal| match v {
        FVal::Str(Some(s)) => Some(s.clone()),
        _ => None,
    };
    match op {
        Op::IsNil => is_nil(value),
        Op::NotNil => !is_nil(value),
        Op::Eq => one.and_then(|o| ord(value, o)) == Some(Equal),
        // NEQ: SQL semantics — null never matches.
        Op::Neq => one.and_then(|o| ord(value, o)).is_some_and(|c| c != Equal),
        Op::Gt => one.and_then(|o| ord(value, o)) == Some(Greater),
        Op::Gte => matches!(one.and_then(|o| ord(value, o)), Some(Greater | Equal)),
        Op::Lt => one.and_then(|o| ord(value, o)) == Some(Less),
        Op::Lte => matches!(one.and_then(|o| ord(value, o)), Some(Less | Equal)),
        Op::In => matches!(arg, Arg::List(l) if l.iter().any(|o| ord(value, o) == Some(Equal))),
        Op::NotIn => !is_nil(value) && matches!(arg, Arg::List(l) if !l.iter().any(|o| ord(value, o) == Some(Equal))),
        Op::Contains | Op::HasPrefix | Op::HasSuffix | Op::EqualFold | Op::ContainsFold => {
            let (Some(v), Some(o)) = (text(value), one.and_then(text)) else { return false };
            match op {
                Op::Contains => v.contains(&o),
                Op::HasPrefix => v.starts_with(&o),
                Op::HasSuffix => v.ends_with(&o),
                Op::EqualFold => v.to_lowercase() == o.to_lowercase(),
                _ => v.to_lowercase().contains(&o.to_lowercase()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmp(v: &str, op: Op, o: &str) -> bool {
        compare(&FVal::Str(Some(v.into())), op, &Arg::One(FVal::Str(Some(o.into()))))
    }

    #[test]
    fn string_operators() {
        assert!(cmp("/payments/checkout/v1", Op::HasPrefix, "/payments"));
        assert!(!cmp("/payments/checkout/v1", Op::HasPrefix, "/logistics"));
        assert!(cmp("Checkout-API", Op::ContainsFold, "api"));
        assert!(!cmp("Checkout-API", Op::Contains, "api"));
        assert!(cmp("abc", Op::EqualFold, "ABC"));
        assert!(cmp("b", Op::Gt, "a") && cmp("a", Op::Lte, "a") && cmp("a", Op::Neq, "b"));
        assert!(!compare(&FVal::Str(None), Op::Neq, &Arg::One(FVal::Str(Some("x".into())))));
        assert!(compare(&FVal::Str(None), Op::IsNil, &Arg::None));
        let list = Arg::List(vec![FVal::Str(Some("a".into())), FVal::Str(Some("b".into()))]);
        assert!(compare(&FVal::Str(Some("b".into())), Op::In, &list));
        assert!(!compare(&FVal::Str(Some("b".into())), Op::NotIn, &list));
        assert!(compare(&FVal::Str(Some("c".into())), Op::NotIn, &list));
    }
}
