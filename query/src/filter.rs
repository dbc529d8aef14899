//! `where` inputs (the Go server's, ARCHITECTURE.md "GraphQL compatibility"): `<field><Suffix>` operators generated from one
//! table of filterable fields per entity, `and`/`or`/`not`, evaluated per record.
//!
//! Edge predicates `has<Edge>: Boolean` and `has<Edge>With: [<Target>WhereInput!]` come from
//! [`EdgeFilter`]s. **Isolation inside edges:** `has<Edge>With` only ever evaluates neighbours the
//! viewer may see, so a team filtering its own records through an edge into another team's
//! records gets an answer that never depends on that team's values (the Go server did not filter
//! inside edges: a team could probe another team's values, e.g. a team token by prefix).
//! `has<Edge>: true` holds when a neighbour the viewer may see exists, as `has<Edge>With: [{}]`
//! (it counted every neighbour: a team could tell whether another group had teams, which the
//! group's `teams` list does not show it), unless the edge's field shows every neighbour as its
//! reduced `…Info` view ([`EdgeFilter::shown_as_info`]).
//!
//! Secrets (`teamToken`, client secrets, hidden `specification`) never appear in a filter
//! table. Empty `In`/`NotIn` lists and `IsNil: false` are ignored; an empty input object
//! (also nested) is a no-op.

use crate::error::bad_input;
use crate::request::RequestContext;
use async_graphql::dynamic::{InputObject, InputValue, ObjectAccessor, TypeRef};
use async_graphql::indexmap::IndexMap;
use async_graphql::Error;
use async_graphql::{Name, Value};
use schema::Timestamp;
use std::sync::Arc;
use storage::Stored;

/// The value of a filterable field of one record.
#[derive(Clone, Debug, PartialEq)]
pub enum FilterValue {
    /// A string (also IDs and enum values, as their GraphQL spelling); `None` = null.
    Str(Option<String>),
    /// A boolean; `None` = null.
    Bool(Option<bool>),
    /// A time; `None` = null.
    Time(Option<Timestamp>),
}

impl FilterValue {
    /// Whether it is null.
    pub fn is_null(&self) -> bool {
        matches!(self, FilterValue::Str(None) | FilterValue::Bool(None) | FilterValue::Time(None))
    }
}

/// The GraphQL type family of a filterable field, deciding its operators.
#[derive(Clone, Debug)]
pub enum FilterType {
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

/// Getter of a filterable value (the request gives time-dependent values their `now`).
pub type Getter<R> = Arc<dyn Fn(&Stored<R>, &RequestContext) -> FilterValue + Send + Sync>;

/// One filterable field of an entity.
pub struct FilterField<R> {
    /// GraphQL field name (`basePath`).
    pub name: &'static str,
    /// Type family.
    pub ty: FilterType,
    /// Whether `IsNil`/`NotNil` exist.
    pub nillable: bool,
    /// Reads the value.
    pub get: Getter<R>,
}

impl<R> FilterField<R> {
    /// A field.
    pub fn new(
        name: &'static str,
        ty: FilterType,
        nillable: bool,
        get: impl Fn(&Stored<R>) -> FilterValue + Send + Sync + 'static,
    ) -> FilterField<R> {
        FilterField { name, ty, nillable, get: Arc::new(move |s, _| get(s)) }
    }

    /// A field whose value depends on the request (e.g. the secret rotation phase, computed at
    /// the request's `now`).
    pub fn with_request(
        name: &'static str,
        ty: FilterType,
        nillable: bool,
        get: impl Fn(&Stored<R>, &RequestContext) -> FilterValue + Send + Sync + 'static,
    ) -> FilterField<R> {
        FilterField { name, ty, nillable, get: Arc::new(get) }
    }

    fn ops(&self) -> Vec<Op> {
        let mut ops = match self.ty {
            FilterType::Id | FilterType::Time => vec![Op::Eq, Op::Neq, Op::In, Op::NotIn, Op::Gt, Op::Gte, Op::Lt, Op::Lte],
            FilterType::Str => vec![
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
            FilterType::Enum(_) => vec![Op::Eq, Op::Neq, Op::In, Op::NotIn],
            FilterType::Bool => vec![Op::Eq, Op::Neq],
        };
        if self.nillable {
            ops.extend([Op::IsNil, Op::NotNil]);
        }
        ops
    }

    fn scalar(&self) -> String {
        match &self.ty {
            FilterType::Id => "ID".into(),
            FilterType::Str => "String".into(),
            FilterType::Enum(e) => e.clone(),
            FilterType::Bool => "Boolean".into(),
            FilterType::Time => "Time".into(),
        }
    }
}

/// A compiled where-input type: its fields, and the input object to register.
pub struct WhereType<R> {
    /// GraphQL input type name (`ApplicationWhereInput`).
    pub name: String,
    fields: Vec<Arc<FilterField<R>>>,
    edges: Vec<Arc<EdgeFilter<R>>>,
    registry: WhereRegistry,
}

/// Every compiled where type by GraphQL type name, so edge predicates can parse their target's
/// input at request time (the types reference each other cyclically).
#[derive(Clone, Default)]
pub struct WhereRegistry(Arc<std::sync::RwLock<std::collections::HashMap<String, Arc<dyn std::any::Any + Send + Sync>>>>);

impl WhereRegistry {
    /// Registers a where type under its name.
    pub fn insert<R: 'static>(&self, w: Arc<WhereType<R>>) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).insert(w.name.clone(), w);
    }

    /// The where type named `name` over records `R`.
    pub fn get<R: 'static>(&self, name: &str) -> Option<Arc<WhereType<R>>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).get(name).cloned().and_then(|a| a.downcast::<WhereType<R>>().ok())
    }
}

/// Evaluates a compiled `has<Edge>With` on one record.
pub type EdgeEval<R> = Arc<dyn Fn(&RequestContext, &Stored<R>) -> bool + Send + Sync>;

/// Compiles the entries of a `has<Edge>With`; `nested` = inside another `has<Edge>With`.
type EdgeCompile<R> = Arc<dyn Fn(&WhereRegistry, Vec<&Input>, bool) -> Result<EdgeEval<R>, Error> + Send + Sync>;

/// A `where` input object's fields, as GraphQL coerced them (or as a plan holds them,
/// [`crate::plan`]).
pub type Input = IndexMap<Name, Value>;

/// An edge of an entity usable in `where` (`hasOwner`, `hasOwnerWith`).
pub struct EdgeFilter<R> {
    /// The edge name as it follows `has` (`Owner`, `ExposedApis`, `API`).
    pub name: &'static str,
    /// The target's where-input type name (`ApplicationWhereInput`).
    pub target_input: String,
    /// Whether `has<Edge>` counts every neighbour ([`EdgeFilter::shown_as_info`]), not only
    /// those the viewer may see.
    pub shown_as_info: bool,
    exists: EdgeEval<R>,
    exists_any: EdgeEval<R>,
    compile: EdgeCompile<R>,
}

/// The description of a `has<Edge>` that counts every neighbour ([`EdgeFilter::shown_as_info`]).
pub const SHOWN_AS_INFO: &str = "True when a neighbour exists, also one of another team: its reduced `…Info` view shows it.";

impl<R: 'static> EdgeFilter<R> {
    /// An edge to records of kind `T`, of the GraphQL type `target_type` (filtered by its
    /// `<target_type>WhereInput`), listed by `neighbours` (all of them, visible or not:
    /// visibility is applied here).
    pub fn new<T: schema::Kind>(
        name: &'static str,
        target_type: &'static str,
        neighbours: impl Fn(&RequestContext, &Stored<R>) -> Vec<Stored<T::Record>> + Send + Sync + 'static,
    ) -> EdgeFilter<R> {
        let neighbours = Arc::new(neighbours);
        let n2 = neighbours.clone();
        let target_input = format!("{target_type}WhereInput");
        let target = target_input.clone();
        EdgeFilter {
            name,
            target_input,
            // Only the neighbours the viewer sees count: `has<Edge>: true` selects exactly what
            // `has<Edge>With: [{}]` selects.
            shown_as_info: false,
            exists: Arc::new({
                let neighbours = neighbours.clone();
                move |request, row| neighbours(request, row).iter().any(|x| request.visible::<T>(x))
            }),
            exists_any: Arc::new(move |request, row| !neighbours(request, row).is_empty()),
            compile: Arc::new(move |registry, inputs, nested| {
                let w = registry
                    .get::<T::Record>(&target)
                    .ok_or_else(|| crate::error::internal(format!("where type {target} not registered")))?;
                let preds = inputs.iter().map(|o| w.parse_at(o, true)).collect::<Result<Vec<_>, _>>()?;
                let n = n2.clone();
                // Once the deadline passed, no neighbour matches: the request ends with TIMEOUT.
                let test = move |request: &RequestContext, row: &Stored<R>| {
                    n(request, row)
                        .iter()
                        .filter(|x| request.visible::<T>(x))
                        .any(|x| request.deadline.tick().is_ok() && preds.iter().all(|p| p.eval(x, request)))
                };
                if !nested {
                    return Ok(Arc::new(test) as EdgeEval<R>);
                }
                // Inside another `has<Edge>With`, the same record is tested once per neighbour
                // that reaches it: each answer is kept for the request, so nested filters cost
                // each target record once instead of multiplying along the nesting.
                let memo: std::sync::Mutex<std::collections::HashMap<Vec<u8>, bool>> = Default::default();
                let eval: EdgeEval<R> = Arc::new(move |request, row| {
                    let key = row.key.as_bytes();
                    if let Some(hit) = memo.lock().unwrap_or_else(|e| e.into_inner()).get(key) {
                        return *hit;
                    }
                    let answer = test(request, row);
                    memo.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_vec(), answer);
                    answer
                });
                Ok(eval)
            }),
        }
    }
}

impl<R> EdgeFilter<R> {
    /// The edge, its `has<Edge>` counting every neighbour: for an edge whose field shows every
    /// neighbour, another team's too, as its reduced `…Info` view (`target: ApiExposureInfo`), so
    /// its existence is no secret. `has<Edge>With` still only ever tests visible neighbours.
    pub fn shown_as_info(mut self) -> Self {
        self.shown_as_info = true;
        self
    }
}

/// A parsed predicate.
pub enum Predicate<R> {
    /// All must hold (an empty list holds).
    All(Vec<Predicate<R>>),
    /// One must hold (an empty list is ignored: holds).
    Any(Vec<Predicate<R>>),
    /// Negation.
    Not(Box<Predicate<R>>),
    /// A comparison.
    Cmp(Arc<FilterField<R>>, Op, Arg),
    /// `has<Edge>` (existence of a link) or a compiled `has<Edge>With`.
    Edge(EdgeTest<R>),
}

impl<R> Predicate<R> {
    /// The predicate every record satisfies: no `where` given.
    pub fn always() -> Predicate<R> {
        Predicate::All(Vec::new())
    }
}

/// An edge predicate.
pub enum EdgeTest<R> {
    /// `has<Edge>: true|false`.
    Has(Arc<EdgeFilter<R>>, bool),
    /// `has<Edge>With: [...]`: some visible neighbour satisfies all entries.
    With(EdgeEval<R>),
}

/// A parsed operand.
#[derive(Clone, Debug)]
pub enum Arg {
    /// No operand (IsNil/NotNil).
    None,
    /// One value.
    One(FilterValue),
    /// A list (In/NotIn).
    List(Vec<FilterValue>),
}

impl<R: 'static> WhereType<R> {
    /// A where type named `name` over `fields` and `edges`, registered in `registry`.
    pub fn new(
        name: impl Into<String>,
        fields: Vec<FilterField<R>>,
        edges: Vec<EdgeFilter<R>>,
        registry: &WhereRegistry,
    ) -> Arc<WhereType<R>> {
        let w = Arc::new(WhereType {
            name: name.into(),
            fields: fields.into_iter().map(Arc::new).collect(),
            edges: edges.into_iter().map(Arc::new).collect(),
            registry: registry.clone(),
        });
        registry.insert(w.clone());
        w
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
        for e in &self.edges {
            let has = InputValue::new(format!("has{}", e.name), TypeRef::named(TypeRef::BOOLEAN));
            o = o
                .field(if e.shown_as_info { has.description(SHOWN_AS_INFO) } else { has })
                .field(InputValue::new(format!("has{}With", e.name), TypeRef::named_nn_list(&e.target_input)));
        }
        o
    }

    /// Parses an input value into a predicate.
    ///
    /// # Errors
    /// `BAD_USER_INPUT` for values of the wrong shape (e.g. a malformed time).
    pub fn parse(&self, input: &ObjectAccessor<'_>) -> Result<Predicate<R>, Error> {
        self.parse_at(input.as_index_map(), false)
    }

    /// [`WhereType::parse`] of an input's fields.
    ///
    /// # Errors
    /// As [`WhereType::parse`].
    pub fn parse_input(&self, input: &Input) -> Result<Predicate<R>, Error> {
        self.parse_at(input, false)
    }

    /// [`WhereType::parse`] of an input inside a `has<Edge>With` (`nested`), whose edge
    /// predicates remember their answers per record.
    ///
    /// # Errors
    /// As [`WhereType::parse`].
    pub fn parse_at(&self, input: &Input, nested: bool) -> Result<Predicate<R>, Error> {
        let mut all = Vec::new();
        for (name, value) in input.iter() {
            if *value == Value::Null {
                continue;
            }
            match name.as_str() {
                "not" => {
                    // An empty nested input is a no-op, also under `not`.
                    let inner = self.parse_at(object(value)?, nested)?;
                    if !inner.is_empty() {
                        all.push(Predicate::Not(Box::new(inner)));
                    }
                }
                "and" => {
                    let parts = list(value)?.iter().map(|v| self.parse_at(object(v)?, nested)).collect::<Result<Vec<_>, _>>()?;
                    all.push(Predicate::All(parts));
                }
                "or" => {
                    let parts = list(value)?.iter().map(|v| self.parse_at(object(v)?, nested)).collect::<Result<Vec<_>, _>>()?;
                    if !parts.is_empty() {
                        all.push(Predicate::Any(parts));
                    }
                }
                other if self.edge(other).is_some() => {
                    let (edge, with) = self.edge(other).expect("checked by the guard");
                    if with {
                        let inputs = list(value)?.iter().map(object).collect::<Result<Vec<_>, _>>()?;
                        if !inputs.is_empty() {
                            all.push(Predicate::Edge(EdgeTest::With((edge.compile)(&self.registry, inputs, nested)?)));
                        }
                    } else {
                        all.push(Predicate::Edge(EdgeTest::Has(edge, boolean(value)?)));
                    }
                }
                other => {
                    let (field, op) = self.resolve(other).ok_or_else(|| bad_input(format!("unknown filter field {other:?}")))?;
                    match op {
                        Op::IsNil | Op::NotNil => {
                            if boolean(value)? {
                                all.push(Predicate::Cmp(field, op, Arg::None));
                            }
                        }
                        Op::In | Op::NotIn => {
                            let items = list(value)?.iter().map(|v| operand(&field.ty, v)).collect::<Result<Vec<_>, _>>()?;
                            if !items.is_empty() {
                                all.push(Predicate::Cmp(field, op, Arg::List(items)));
                            }
                        }
                        Op::Contains | Op::HasPrefix | Op::HasSuffix | Op::EqualFold | Op::ContainsFold => {
                            all.push(Predicate::Cmp(field, op, Arg::One(FilterValue::Str(Some(string(value)?.to_string())))));
                        }
                        _ => all.push(Predicate::Cmp(field.clone(), op, Arg::One(operand(&field.ty, value)?))),
                    }
                }
            }
        }
        Ok(Predicate::All(all))
    }

    /// The edge named by `has<Edge>` (`false`) or `has<Edge>With` (`true`).
    fn edge(&self, name: &str) -> Option<(Arc<EdgeFilter<R>>, bool)> {
        let rest = name.strip_prefix("has")?;
        self.edges.iter().find_map(|e| match rest.strip_prefix(e.name) {
            Some("") => Some((e.clone(), false)),
            Some("With") => Some((e.clone(), true)),
            _ => None,
        })
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

fn operand(ty: &FilterType, v: &Value) -> Result<FilterValue, Error> {
    Ok(match ty {
        FilterType::Id | FilterType::Str => FilterValue::Str(Some(string(v)?.to_string())),
        FilterType::Enum(_) => FilterValue::Str(Some(enum_name(v)?.to_string())),
        FilterType::Bool => FilterValue::Bool(Some(boolean(v)?)),
        FilterType::Time => {
            let s = string(v)?;
            FilterValue::Time(Some(Timestamp::parse_rfc3339(s).map_err(|_| bad_input(format!("invalid time {s:?}")))?))
        }
    })
}

// A coerced input's values, read as async-graphql's `ValueAccessor` reads them (same messages:
// only a value GraphQL did not coerce can be of another type).

fn object(v: &Value) -> Result<&Input, Error> {
    match v {
        Value::Object(o) => Ok(o),
        _ => Err(Error::new("internal: not an object")),
    }
}

fn list(v: &Value) -> Result<&[Value], Error> {
    match v {
        Value::List(l) => Ok(l),
        _ => Err(Error::new("internal: not a list")),
    }
}

fn boolean(v: &Value) -> Result<bool, Error> {
    match v {
        Value::Boolean(b) => Ok(*b),
        _ => Err(Error::new("internal: not a boolean")),
    }
}

fn string(v: &Value) -> Result<&str, Error> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(Error::new("internal: not a string")),
    }
}

fn enum_name(v: &Value) -> Result<&str, Error> {
    match v {
        Value::Enum(n) => Ok(n.as_str()),
        Value::String(s) => Ok(s),
        _ => Err(Error::new("internal: not an enum name")),
    }
}

impl<R> Predicate<R> {
    /// Whether the predicate holds for `row`, as seen by the request's viewer.
    pub fn eval(&self, row: &Stored<R>, request: &RequestContext) -> bool {
        match self {
            Predicate::All(ps) => ps.iter().all(|p| p.eval(row, request)),
            Predicate::Any(ps) => ps.iter().any(|p| p.eval(row, request)),
            Predicate::Not(p) => !p.eval(row, request),
            Predicate::Cmp(field, op, arg) => compare(&(field.get)(row, request), *op, arg),
            Predicate::Edge(EdgeTest::Has(edge, want)) => {
                let exists = if edge.shown_as_info { &edge.exists_any } else { &edge.exists };
                exists(request, row) == *want
            }
            Predicate::Edge(EdgeTest::With(eval)) => eval(request, row),
        }
    }

    /// Whether the predicate is an empty input (`{}`, or only empty lists): a no-op.
    pub fn is_empty(&self) -> bool {
        match self {
            Predicate::All(ps) => ps.iter().all(Predicate::is_empty),
            _ => false,
        }
    }

    /// Whether the predicate is trivially true (no comparisons).
    pub fn is_trivial(&self) -> bool {
        match self {
            Predicate::All(ps) | Predicate::Any(ps) => ps.iter().all(Predicate::is_trivial),
            Predicate::Not(_) | Predicate::Cmp(..) | Predicate::Edge(_) => false,
        }
    }
}

fn is_nil(v: &FilterValue) -> bool {
    matches!(v, FilterValue::Str(None) | FilterValue::Bool(None) | FilterValue::Time(None))
}

fn ord(a: &FilterValue, b: &FilterValue) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (FilterValue::Str(Some(a)), FilterValue::Str(Some(b))) => Some(a.cmp(b)),
        (FilterValue::Bool(Some(a)), FilterValue::Bool(Some(b))) => Some(a.cmp(b)),
        (FilterValue::Time(Some(a)), FilterValue::Time(Some(b))) => Some(a.cmp(b)),
        _ => None,
    }
}

fn compare(value: &FilterValue, op: Op, arg: &Arg) -> bool {
    use std::cmp::Ordering::*;
    let one = match arg {
        Arg::One(v) => Some(v),
        _ => None,
    };
    let text = |v: &FilterValue| match v {
        FilterValue::Str(Some(s)) => Some(s.clone()),
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
        compare(&FilterValue::Str(Some(v.into())), op, &Arg::One(FilterValue::Str(Some(o.into()))))
    }

    #[test]
    fn string_operators() {
        assert!(cmp("/payments/checkout/v1", Op::HasPrefix, "/payments"));
        assert!(!cmp("/payments/checkout/v1", Op::HasPrefix, "/logistics"));
        assert!(cmp("Checkout-API", Op::ContainsFold, "api"));
        assert!(!cmp("Checkout-API", Op::Contains, "api"));
        assert!(cmp("abc", Op::EqualFold, "ABC"));
        assert!(cmp("b", Op::Gt, "a") && cmp("a", Op::Lte, "a") && cmp("a", Op::Neq, "b"));
        assert!(!compare(&FilterValue::Str(None), Op::Neq, &Arg::One(FilterValue::Str(Some("x".into())))));
        assert!(compare(&FilterValue::Str(None), Op::IsNil, &Arg::None));
        let list = Arg::List(vec![FilterValue::Str(Some("a".into())), FilterValue::Str(Some("b".into()))]);
        assert!(compare(&FilterValue::Str(Some("b".into())), Op::In, &list));
        assert!(!compare(&FilterValue::Str(Some("b".into())), Op::NotIn, &list));
        assert!(compare(&FilterValue::Str(Some("c".into())), Op::NotIn, &list));
    }
}
