//! Request cost decided before execution (ARCHITECTURE.md, `query`: every request has a bounded
//! cost): every request is measured against
//! [`Limits`] before a resolver runs, and refused with one error whose `extensions.code` names
//! the limit (`extensions.limit` names its setting, `extensions.max` its value).
//!
//! Three passes, each bounded by what it measures:
//! 1. [`scan_text`] reads the query text once, before it is parsed, and refuses selection sets
//!    nested deeper than `maxDepth` and argument values (lists, input objects) nested deeper
//!    than `maxInputDepth`. No input reaches the recursive parser, validation or execution
//!    nested deeper than that, so none can overflow a stack. Variables are checked by
//!    [`check_variables`] (depth, and list lengths).
//! 2. [`analyze`] walks the parsed operation with its fragments expanded. It stops at the first
//!    field beyond `maxComplexity` (every selected field counts once per expansion, so a
//!    doubling fragment chain is refused after `maxComplexity` steps) and refuses a field nested
//!    deeper than `maxDepth` through fragments.
//! 3. The same walk computes a worst-case **node estimate**, the way GitHub's GraphQL API
//!    computes its node limit: every connection counts `first`/`last` (or `maxPageSize` when
//!    neither is given) nodes per parent, but never more than the records of its kind the
//!    viewer can see; every list of records counts its largest possible length (the records of
//!    that kind the viewer can see; for the reduced `…Info` views across tenants, every record
//!    for an admin and `maxPageSize` for others, so no refusal reveals a count of records the
//!    viewer cannot see) per parent;
//!    and a nested field is multiplied by every connection and list above it. Aliases and fragments count like written-out fields. Each
//!    `has<Edge>With` filter costs every record of its target kind the viewer can see, per
//!    resolution of the filtered field (its neighbours are evaluated at most once each, see
//!    `crate::filter`), and nests at most `maxFilterDepth` deep. Lists inside arguments hold at
//!    most `maxPageSize` items; search texts are bounded in bytes and words; the operands of all
//!    `where` filters together take at most `maxFilterBytes` (a variable counts at every use,
//!    since every use is parsed into a predicate of its own).
//!
//! Which lists hold records is declared once: entity types register themselves
//! ([`crate::connection::register_entity`]), reduced views and derived lists name their kind
//! ([`crate::entity::Builder::record_list`]), and every other object list is a value held inside
//! one record ([`EMBEDDED`]); a test checks that every list of the schema is one of these.

use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, FragmentDefinition, OperationDefinition, Selection, SelectionSet, TypeKind,
};
use async_graphql::{ErrorExtensionValues, Name, Positioned, ServerError, Variables};
use async_graphql_value::{ConstValue, Value};
use foldhash::HashMap;
use schema::KindId;

/// The bounds of one request: the `graphql.*` limit settings themselves (the README's limits
/// table), held as they are by the configuration (`GraphqlConfig::limits`) and the query layer
/// ([`crate::QueryConfig::limits`]); the defaults are [`Limits::DEFAULT`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `graphql.maxDepth`: levels of nested fields, fragments expanded (at most
    /// [`MAX_DEPTH_CEILING`]).
    pub max_depth: usize,
    /// `graphql.maxComplexity`: selected fields, fragments expanded.
    pub max_complexity: usize,
    /// `graphql.maxInputDepth`: nesting of lists and input objects in one argument or variable
    /// value.
    pub max_input_depth: usize,
    /// `graphql.maxNodes`: worst-case node estimate.
    pub max_nodes: u64,
    /// `graphql.maxFilterDepth`: `has<Edge>With` filters nested in one `where`.
    pub max_filter_depth: usize,
    /// `graphql.maxPageSize`: the page size when neither `first` nor `last` is given, the most
    /// of either, and the most items of a list argument (`idIn`, `nodes(ids:)`).
    pub max_page_size: usize,
    /// `graphql.maxSearchLength`: bytes of a `search` / `catalogueSearch(query:)` text.
    pub max_search_length: usize,
    /// `graphql.maxSearchTerms`: words of a search text.
    pub max_search_terms: usize,
    /// `graphql.maxDefinitions`: operations and fragments defined in one document, used or not
    /// (GraphQL validation's work grows with their square).
    pub max_definitions: usize,
    /// `graphql.maxVariableUses`: `$` variables written in one document, definitions included
    /// (validation checks each use once per operation).
    pub max_variable_uses: usize,
    /// `graphql.maxNameBytes`: bytes of one name (field, alias, argument, fragment, type,
    /// variable) or number in a document (an unknown name is compared with every known one).
    pub max_name_bytes: usize,
    /// `graphql.maxFilterBytes`: the operands of every `where` of the request together, in
    /// bytes (strings by their length, other scalars 8 bytes), each use of a variable counted
    /// again.
    pub max_filter_bytes: usize,
    /// `graphql.maxResponseBytes`: the answer's size, counted while it is resolved (see
    /// [`crate::deadline::Deadline::charge`]).
    pub max_response_bytes: usize,
    /// `graphql.maxInFlightBytes`: what the requests in flight may hold together beyond
    /// [`crate::deadline::FREE_BYTES`] each (see [`crate::deadline::MemoryPool`]). Below
    /// `max_response_bytes`, the largest answers meet this bound before that one.
    pub max_in_flight_bytes: usize,
}

/// The highest accepted `graphql.maxDepth`: the GraphQL parser refuses documents nested deeper
/// than 32 selection levels with a message of its own.
pub const MAX_DEPTH_CEILING: usize = 30;

impl Limits {
    /// The defaults: the one declaration of the `graphql.*` limit settings' defaults (the
    /// configuration's table shows them from here).
    pub const DEFAULT: Limits = Limits {
        max_depth: 20,
        max_complexity: 5000,
        max_input_depth: 16,
        max_nodes: 2_500_000,
        max_filter_depth: 3,
        max_page_size: 1000,
        max_search_length: 256,
        max_search_terms: 8,
        max_definitions: 256,
        max_variable_uses: 1000,
        max_name_bytes: 1024,
        max_filter_bytes: 1_048_576,
        max_response_bytes: 16 << 20,
        max_in_flight_bytes: 32 << 20,
    };
}

impl Default for Limits {
    fn default() -> Limits {
        Limits::DEFAULT
    }
}

/// A request beyond a limit: the error code, its setting and the one message of that limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitError {
    /// `extensions.code`: `QUERY_TOO_DEEP`, `INPUT_TOO_DEEP`, `QUERY_TOO_COMPLEX`,
    /// `TOO_MANY_NODES`, `FILTER_TOO_DEEP`, `FILTER_TOO_LARGE`, or `BAD_USER_INPUT` (list
    /// arguments, search texts).
    pub code: &'static str,
    /// `extensions.limit`: the setting (`graphql.maxNodes`).
    pub setting: &'static str,
    /// `extensions.max`: the setting's value.
    pub max: u64,
    /// The message.
    pub message: String,
}

/// One limit: its error code and its setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limit {
    /// `extensions.code`.
    pub code: &'static str,
    /// The setting (`extensions.limit`).
    pub setting: &'static str,
}

const DEPTH: Limit = Limit { code: "QUERY_TOO_DEEP", setting: "graphql.maxDepth" };
const INPUT_DEPTH: Limit = Limit { code: "INPUT_TOO_DEEP", setting: "graphql.maxInputDepth" };
const LIST_ITEMS: Limit = Limit { code: "BAD_USER_INPUT", setting: "graphql.maxPageSize" };
const SEARCH_BYTES: Limit = Limit { code: "BAD_USER_INPUT", setting: "graphql.maxSearchLength" };
const SEARCH_TERMS: Limit = Limit { code: "BAD_USER_INPUT", setting: "graphql.maxSearchTerms" };
const DEFINITIONS: Limit = Limit { code: "QUERY_TOO_COMPLEX", setting: "graphql.maxDefinitions" };
const VARIABLE_USES: Limit = Limit { code: "QUERY_TOO_COMPLEX", setting: "graphql.maxVariableUses" };
const NAME_BYTES: Limit = Limit { code: "BAD_USER_INPUT", setting: "graphql.maxNameBytes" };
const FIELDS: Limit = Limit { code: "QUERY_TOO_COMPLEX", setting: "graphql.maxComplexity" };
const NODES: Limit = Limit { code: "TOO_MANY_NODES", setting: "graphql.maxNodes" };
const FILTER_DEPTH: Limit = Limit { code: "FILTER_TOO_DEEP", setting: "graphql.maxFilterDepth" };
const FILTER_BYTES: Limit = Limit { code: "FILTER_TOO_LARGE", setting: "graphql.maxFilterBytes" };
/// Checked while the answer is resolved ([`crate::deadline::Deadline::charge`]).
const RESPONSE_BYTES: Limit = Limit { code: "RESPONSE_TOO_LARGE", setting: "graphql.maxResponseBytes" };
const IN_FLIGHT_BYTES: Limit = Limit { code: "OVERLOADED", setting: "graphql.maxInFlightBytes" };
/// A query that alone needs more than the whole memory budget: retrying cannot help.
const QUERY_MEMORY: Limit = Limit { code: "MEMORY_BUDGET_EXCEEDED", setting: "graphql.maxInFlightBytes" };

/// Every limit of a request (the README's limits table lists each); all but the response size
/// and the memory budget of the queries in flight are checked before execution.
pub const LIMITS: &[Limit] = &[
    DEPTH,
    FIELDS,
    NODES,
    INPUT_DEPTH,
    FILTER_DEPTH,
    FILTER_BYTES,
    RESPONSE_BYTES,
    IN_FLIGHT_BYTES,
    QUERY_MEMORY,
    LIST_ITEMS,
    SEARCH_BYTES,
    SEARCH_TERMS,
];

impl LimitError {
    fn new(limit: &Limit, max: impl TryInto<u64>, message: String) -> LimitError {
        LimitError { code: limit.code, setting: limit.setting, max: max.try_into().unwrap_or(u64::MAX), message }
    }

    fn depth(max: usize) -> LimitError {
        LimitError::new(&DEPTH, max, format!("the query nests fields deeper than {max} levels"))
    }

    /// An argument or variable nested deeper than `max` (also when the request's JSON itself
    /// is too deep to read).
    pub fn input_depth(max: usize) -> LimitError {
        LimitError::new(&INPUT_DEPTH, max, format!("an argument or variable nests lists and input objects deeper than {max} levels"))
    }

    fn list(max: usize) -> LimitError {
        LimitError::new(&LIST_ITEMS, max, format!("a list argument or variable holds more than {max} items"))
    }

    /// An answer larger than `max` bytes (`graphql.maxResponseBytes`, checked while it is
    /// resolved, see [`crate::deadline::Deadline::charge`]).
    pub fn response_too_large(max: usize) -> LimitError {
        LimitError::new(
            &RESPONSE_BYTES,
            max,
            format!("the answer would take more than {max} bytes: select fewer fields, or paginate with a smaller `first`/`last`"),
        )
    }

    /// The requests in flight hold the whole memory budget of `max` bytes
    /// (`graphql.maxInFlightBytes`, [`crate::deadline::MemoryPool`]).
    pub fn in_flight_bytes(max: usize) -> LimitError {
        LimitError::new(
            &IN_FLIGHT_BYTES,
            max,
            format!("the requests in flight hold the server's memory budget of {max} bytes for answers and sorts; retry later"),
        )
    }

    /// A query that alone holds more than the whole memory budget of `max` bytes beyond what
    /// each query holds free: it would never fit, however long it waited.
    pub fn query_memory(max: usize) -> LimitError {
        LimitError::new(
            &QUERY_MEMORY,
            max,
            format!(
                "the query alone needs more than the server's memory budget of {max} bytes for answers and sorts; narrow it with `where` or a smaller `first`"
            ),
        )
    }

    /// The GraphQL error.
    pub fn into_server_error(self) -> ServerError {
        let mut e = ServerError::new(self.message, None);
        let mut ext = ErrorExtensionValues::default();
        ext.set("code", self.code);
        ext.set("limit", self.setting);
        ext.set("max", self.max);
        e.extensions = Some(ext);
        e
    }

    /// As an error of a resolver.
    pub fn into_error(self) -> async_graphql::Error {
        use async_graphql::ErrorExtensions;
        let (code, setting, max) = (self.code, self.setting, self.max);
        async_graphql::Error::new(self.message).extend_with(move |_, e| {
            e.set("code", code);
            e.set("limit", setting);
            e.set("max", max);
        })
    }
}

/// Checks a search text (`search:` of the catalogue connections, `catalogueSearch(query:)`):
/// at most `max_search_length` bytes and `max_search_terms` words (as the index splits them).
///
/// # Errors
/// [`LimitError`] with code `BAD_USER_INPUT`.
pub fn check_search(text: &str, limits: &Limits) -> Result<(), LimitError> {
    if text.len() > limits.max_search_length {
        let max = limits.max_search_length;
        return Err(LimitError::new(&SEARCH_BYTES, max, format!("a search text is longer than {max} bytes")));
    }
    if storage::analysis::words(text).len() > limits.max_search_terms {
        let max = limits.max_search_terms;
        return Err(LimitError::new(&SEARCH_TERMS, max, format!("a search text has more than {max} words")));
    }
    Ok(())
}

// ---- pass 1: the text ------------------------------------------------------------------------

fn is_name_byte(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphanumeric()
}

/// The index of the last byte of the name (or number) starting at `start` in `b`.
///
/// # Errors
/// [`LimitError`] `BAD_USER_INPUT` for a name longer than `max_name_bytes`.
fn name_end(b: &[u8], start: usize, max_name_bytes: usize) -> Result<usize, LimitError> {
    let length = b[start..].iter().take_while(|&&c| is_name_byte(c)).count();
    if length > max_name_bytes {
        let max = max_name_bytes;
        return Err(LimitError::new(&NAME_BYTES, max, format!("a name or number in the document is longer than {max} bytes")));
    }
    Ok(start + length - 1)
}

/// Scans a query text before it is parsed: selection sets (braces outside parentheses) nested
/// deeper than `max_depth`, or values (brackets and braces inside parentheses: arguments,
/// variable definitions and their defaults) nested deeper than `max_input_depth`, are refused.
/// Strings, block strings and comments are skipped. Unbalanced brackets are left to the parser.
/// One pass, constant memory.
///
/// # Errors
/// [`LimitError`] `QUERY_TOO_DEEP` or `INPUT_TOO_DEEP`.
pub fn scan_text(text: &str, limits: &Limits) -> Result<(), LimitError> {
    let b = text.as_bytes();
    let (mut i, mut parens, mut selection, mut value) = (0usize, 0usize, 0usize, 0usize);
    // Each operation and fragment has one selection set at the document's top level.
    let (mut definitions, mut variable_uses) = (0usize, 0usize);
    // What each open `{`/`[` was: a value (inside parentheses) or a selection set.
    let mut opened_as_value: Vec<bool> = Vec::new();
    while i < b.len() {
        match b[i] {
            b'#' => {
                while i < b.len() && b[i] != b'\n' && b[i] != b'\r' {
                    i += 1;
                }
            }
            b'"' if b[i..].starts_with(b"\"\"\"") => {
                i += 3;
                while i < b.len() && !b[i..].starts_with(b"\"\"\"") {
                    i += if b[i..].starts_with(b"\\\"\"\"") { 4 } else { 1 };
                }
                i += 2;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'(' => parens += 1,
            b')' => parens = parens.saturating_sub(1),
            b'$' => {
                variable_uses += 1;
                if variable_uses > limits.max_variable_uses {
                    let max = limits.max_variable_uses;
                    return Err(LimitError::new(&VARIABLE_USES, max, format!("the document writes more than {max} variables ($)")));
                }
            }
            c if is_name_byte(c) => i = name_end(b, i, limits.max_name_bytes)?,
            b'{' | b'[' => {
                let is_value = parens > 0 || b[i] == b'[';
                if is_value {
                    value += 1;
                    if value > limits.max_input_depth {
                        return Err(LimitError::input_depth(limits.max_input_depth));
                    }
                } else {
                    selection += 1;
                    if selection > limits.max_depth {
                        return Err(LimitError::depth(limits.max_depth));
                    }
                    if opened_as_value.is_empty() {
                        definitions += 1;
                        if definitions > limits.max_definitions {
                            let max = limits.max_definitions;
                            return Err(LimitError::new(
                                &DEFINITIONS,
                                max,
                                format!("the document defines more than {max} operations and fragments"),
                            ));
                        }
                    }
                }
                opened_as_value.push(is_value);
            }
            b'}' | b']' => match opened_as_value.pop() {
                Some(true) => value -= 1,
                Some(false) => selection -= 1,
                None => {}
            },
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Checks the request's variables: nesting at most `max_input_depth`, lists at most
/// `max_page_size` items.
///
/// # Errors
/// [`LimitError`] `INPUT_TOO_DEEP` or `BAD_USER_INPUT`.
pub fn check_variables(variables: &Variables, limits: &Limits) -> Result<(), LimitError> {
    fn walk(v: &ConstValue, depth: usize, limits: &Limits) -> Result<(), LimitError> {
        match v {
            ConstValue::List(items) => {
                if depth + 1 > limits.max_input_depth {
                    return Err(LimitError::input_depth(limits.max_input_depth));
                }
                if items.len() > limits.max_page_size {
                    return Err(LimitError::list(limits.max_page_size));
                }
                items.iter().try_for_each(|i| walk(i, depth + 1, limits))
            }
            ConstValue::Object(fields) => {
                if depth + 1 > limits.max_input_depth {
                    return Err(LimitError::input_depth(limits.max_input_depth));
                }
                fields.values().try_for_each(|i| walk(i, depth + 1, limits))
            }
            _ => Ok(()),
        }
    }
    variables.values().try_for_each(|v| walk(v, 0, limits))
}

// ---- the schema's shapes -----------------------------------------------------------------------

/// What a list of records may hold at most (see [`analyze`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordList {
    /// Records of the kind the viewer may see (`team_owned`: counted over the viewer's teams).
    Visible {
        /// The kind.
        kind: KindId,
        /// Whether the kind's records are owned by teams (else visible per environment).
        team_owned: bool,
    },
    /// Reduced views across tenants: every record of the kind for an admin; for other viewers
    /// the maximum page size (a count of other tenants' records is never used).
    All(KindId),
}

/// Object types that appear in lists but hold values of one record (their length is bounded by
/// the record, itself bounded by the source's document size limit) or of one mutation's payload
/// (its errors), not records of their own.
pub const EMBEDDED: &[&str] = &[
    "AvailableTransition",
    "CatalogueHighlight",
    "Decision",
    "EventScope",
    "ExternalId",
    "Member",
    "MutationError",
    "Permission",
    "RateLimitOverrides",
    "SSHPublicKey",
    "Upstream",
];

/// How a field multiplies what is below it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Multiplier {
    /// A Relay connection: `first`/`last`, else the maximum page size; never more than the
    /// records of its kind.
    Connection(Option<RecordList>),
    /// The `edges` of a connection, or a list of values of one record: ×1.
    Same,
    /// A list of records.
    Records(RecordList),
    /// `nodes(ids:)`: as many as IDs.
    Ids,
    /// One object or a scalar.
    One,
}

#[derive(Clone, Debug)]
struct FieldShape {
    /// The named type (lists and non-null unwrapped).
    ty: String,
    multiplier: Multiplier,
    /// Argument name → named input type.
    args: HashMap<String, String>,
}

/// The schema as [`analyze`] needs it: per output type its fields, per input type the named
/// type of each field. Built once from the SDL.
#[derive(Debug, Default)]
pub struct Shapes {
    outputs: HashMap<String, HashMap<String, FieldShape>>,
    inputs: HashMap<String, HashMap<String, String>>,
    /// Lists of records, by item type.
    records: HashMap<String, RecordList>,
    /// Object lists whose item type is neither a record list nor [`EMBEDDED`] (must be empty;
    /// checked by a test).
    pub(crate) undeclared: Vec<String>,
    /// What one `__schema` selection counts toward `graphql.maxComplexity`: half the lines of
    /// the SDL (about 2,000), as it can list the whole schema; so one request holds at most two.
    pub(crate) schema_weight: usize,
}

fn named(ty: &async_graphql::parser::types::Type) -> (&str, bool) {
    use async_graphql::parser::types::BaseType;
    match &ty.base {
        BaseType::Named(n) => (n.as_str(), false),
        BaseType::List(inner) => (named(inner).0, true),
    }
}

impl Shapes {
    /// Builds the shapes from the schema's SDL and the record lists the builder collected.
    ///
    /// # Errors
    /// The SDL does not parse (a bug: the SDL is generated).
    pub fn new(sdl: &str, records: std::collections::HashMap<String, RecordList>) -> Result<Shapes, String> {
        let doc = async_graphql::parser::parse_schema(sdl).map_err(|e| e.to_string())?;
        let mut objects = std::collections::HashSet::new();
        for d in &doc.definitions {
            if let async_graphql::parser::types::TypeSystemDefinition::Type(t) = d {
                if matches!(t.node.kind, TypeKind::Object(_) | TypeKind::Interface(_) | TypeKind::Union(_)) {
                    objects.insert(t.node.name.node.to_string());
                }
            }
        }
        let mut shapes = Shapes { records: records.into_iter().collect(), schema_weight: sdl.lines().count() / 2, ..Shapes::default() };
        for d in &doc.definitions {
            let async_graphql::parser::types::TypeSystemDefinition::Type(t) = d else { continue };
            let type_name = t.node.name.node.as_str();
            let fields = match &t.node.kind {
                TypeKind::Object(o) => &o.fields,
                TypeKind::Interface(i) => &i.fields,
                TypeKind::InputObject(i) => {
                    let m = i.fields.iter().map(|f| (f.node.name.node.to_string(), named(&f.node.ty.node).0.to_string())).collect();
                    shapes.inputs.insert(type_name.to_string(), m);
                    continue;
                }
                _ => continue,
            };
            let mut out = HashMap::default();
            for f in fields {
                let (ty, list) = named(&f.node.ty.node);
                let name = f.node.name.node.as_str();
                let multiplier = if ty.ends_with("Connection") && objects.contains(ty) {
                    Multiplier::Connection(ty.strip_suffix("Connection").and_then(|node| shapes.records.get(node)).copied())
                } else if !list || !objects.contains(ty) {
                    Multiplier::One
                } else if type_name == "Query" && name == "nodes" {
                    Multiplier::Ids
                } else if type_name.ends_with("Connection") || EMBEDDED.contains(&ty) {
                    Multiplier::Same
                } else if let Some(r) = shapes.records.get(ty) {
                    Multiplier::Records(*r)
                } else {
                    shapes.undeclared.push(format!("{type_name}.{name}: [{ty}]"));
                    Multiplier::Same
                };
                let args = f.node.arguments.iter().map(|a| (a.node.name.node.to_string(), named(&a.node.ty.node).0.to_string())).collect();
                out.insert(name.to_string(), FieldShape { ty: ty.to_string(), multiplier, args });
            }
            shapes.outputs.insert(type_name.to_string(), out);
        }
        Ok(shapes)
    }
}

impl Shapes {
    /// How an export walks the root query field `field` ([`crate::export`]): `Some(true)` a
    /// Relay connection (paged with `first`/`after`: its type has `edges { node }` and
    /// `pageInfo`), `Some(false)` a list of objects (read at once), `None` neither.
    pub(crate) fn exported_root(&self, field: &str) -> Option<bool> {
        let shape = self.outputs.get("Query")?.get(field)?;
        match shape.multiplier {
            Multiplier::Connection(_) => {
                let connection = self.outputs.get(&shape.ty)?;
                let edge = self.outputs.get(&connection.get("edges")?.ty)?;
                let pages = shape.args.contains_key("first") && shape.args.contains_key("after");
                (pages && edge.contains_key("node") && connection.contains_key("pageInfo")).then_some(true)
            }
            Multiplier::Records(_) | Multiplier::Ids | Multiplier::Same => Some(false),
            Multiplier::One => None,
        }
    }

    /// Whether the schema's `Query` has the field `field`.
    pub(crate) fn has_root_field(&self, field: &str) -> bool {
        self.outputs.get("Query").is_some_and(|q| q.contains_key(field))
    }

    /// The node type of the root connection `field` (`applications` → `Application`).
    pub(crate) fn node_type(&self, field: &str) -> Option<&str> {
        let connection = &self.outputs.get("Query")?.get(field)?.ty;
        let edge = &self.outputs.get(connection)?.get("edges")?.ty;
        Some(&self.outputs.get(edge)?.get("node")?.ty)
    }
}

// ---- pass 2 and 3: the operation ---------------------------------------------------------------

/// What [`analyze`] measured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Selected fields, fragments expanded.
    pub fields: usize,
    /// Worst-case node estimate.
    pub nodes: u64,
    /// The request searches (`search:`, `catalogueSearch`).
    pub searches: bool,
    /// The request filters through edges (`has<Edge>With`).
    pub edge_filters: bool,
    /// Bytes of every `where` operand (see [`Limits::max_filter_bytes`]).
    pub filter_bytes: usize,
}

/// Largest possible length of a list of records, for the request's viewer.
pub type Bound<'a> = &'a mut dyn FnMut(RecordList) -> u64;

/// Measures the operation `operation_name` (or the only one) of `doc` with `variables`;
/// `bound` gives a list of records its largest possible length. An operation that is not found
/// is left to the executor (it reports it).
///
/// # Errors
/// The first limit exceeded, as [`LimitError`].
pub fn analyze(
    doc: &ExecutableDocument,
    operation_name: Option<&str>,
    variables: &Variables,
    shapes: &Shapes,
    limits: &Limits,
    bound: Bound<'_>,
) -> Result<Cost, LimitError> {
    let operation: Option<&Positioned<OperationDefinition>> = match (&doc.operations, operation_name) {
        (DocumentOperations::Single(op), _) => Some(op),
        (DocumentOperations::Multiple(ops), Some(name)) => ops.get(name),
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next(),
        (DocumentOperations::Multiple(_), None) => None,
    };
    let Some(operation) = operation else { return Ok(Cost::default()) };
    let root = match operation.node.ty {
        async_graphql::parser::types::OperationType::Query => "Query",
        async_graphql::parser::types::OperationType::Mutation => "Mutation",
        async_graphql::parser::types::OperationType::Subscription => "Subscription",
    };
    let defaults: std::collections::HashMap<&str, &ConstValue> = operation
        .node
        .variable_definitions
        .iter()
        .filter_map(|v| v.node.default_value.as_ref().map(|d| (v.node.name.node.as_str(), &d.node)))
        .collect();
    let mut walk = Walk { doc, variables, defaults, shapes, limits, bound, cost: Cost::default(), expanding: Vec::new() };
    walk.selection_set(&operation.node.selection_set.node, Some(root), 1, 1)?;
    Ok(walk.cost)
}

/// Fragment spreads nested in one another at most, as async-graphql's executor counts them with
/// the fields around them (its recursion limit, 32): the walk over a query recurses once per
/// spread, so a chain of thousands of fragments must not reach it.
pub const MAX_FRAGMENT_NESTING: usize = 32;

/// The fragments `names` for a message: the first two and the last when there are more, each
/// cut to 64 bytes (a message does not grow with the query).
fn fragment_path(names: &[&str]) -> String {
    let quoted = |n: &&str| format!("`{}`", short(n));
    match names {
        [first, second, .., last] if names.len() > 3 => {
            format!("{} → {} → … ({} more) → {}", quoted(first), quoted(second), names.len() - 3, quoted(last))
        }
        _ => names.iter().map(quoted).collect::<Vec<_>>().join(" → "),
    }
}

/// `name` cut to at most 64 bytes, at a character boundary.
fn short(name: &str) -> &str {
    let mut end = name.len().min(64);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

struct Walk<'a, 'b> {
    doc: &'a ExecutableDocument,
    variables: &'a Variables,
    defaults: std::collections::HashMap<&'a str, &'a ConstValue>,
    shapes: &'a Shapes,
    limits: &'a Limits,
    bound: Bound<'b>,
    cost: Cost,
    /// Fragments being expanded (a spread of one of them is a cycle, refused).
    expanding: Vec<&'a str>,
}

/// An argument value with its variables resolved, borrowed.
#[derive(Clone, Copy)]
enum Arg<'a> {
    Doc(&'a Value),
    Const(&'a ConstValue),
}

impl<'a> Arg<'a> {
    fn resolve(self, walk: &Walk<'a, '_>) -> Option<Arg<'a>> {
        match self {
            Arg::Doc(Value::Variable(name)) => {
                walk.variables.get(name).or_else(|| walk.defaults.get(name.as_str()).copied()).map(Arg::Const)
            }
            other => Some(other),
        }
    }

    fn int(self) -> Option<i64> {
        match self {
            Arg::Doc(Value::Number(n)) | Arg::Const(ConstValue::Number(n)) => n.as_i64(),
            _ => None,
        }
    }

    fn string(self) -> Option<&'a str> {
        match self {
            Arg::Doc(Value::String(s)) | Arg::Const(ConstValue::String(s)) => Some(s),
            _ => None,
        }
    }

    /// The bytes an operand takes once parsed: a string its length, any other scalar 8.
    fn bytes(self) -> usize {
        self.string().map_or(8, |s| s.len().max(8))
    }

    fn list(self) -> Option<Vec<Arg<'a>>> {
        match self {
            Arg::Doc(Value::List(l)) => Some(l.iter().map(Arg::Doc).collect()),
            Arg::Const(ConstValue::List(l)) => Some(l.iter().map(Arg::Const).collect()),
            _ => None,
        }
    }

    fn fields(self) -> Option<Vec<(&'a Name, Arg<'a>)>> {
        match self {
            Arg::Doc(Value::Object(o)) => Some(o.iter().map(|(k, v)| (k, Arg::Doc(v))).collect()),
            Arg::Const(ConstValue::Object(o)) => Some(o.iter().map(|(k, v)| (k, Arg::Const(v))).collect()),
            _ => None,
        }
    }
}

impl<'a> Walk<'a, '_> {
    fn selection_set(&mut self, set: &'a SelectionSet, ty: Option<&'a str>, depth: usize, path: u64) -> Result<(), LimitError> {
        for item in &set.items {
            match &item.node {
                Selection::Field(f) => self.field(&f.node, ty, depth, path)?,
                Selection::InlineFragment(fr) => {
                    let on = fr.node.type_condition.as_ref().map(|c| c.node.on.node.as_str()).or(ty);
                    self.selection_set(&fr.node.selection_set.node, on, depth, path)?;
                }
                Selection::FragmentSpread(sp) => {
                    let name = sp.node.fragment_name.node.as_str();
                    let Some(fragment) = self.doc.fragments.get(name) else { continue };
                    if let Some(at) = self.expanding.iter().position(|n| *n == name) {
                        // Expanded, it nests without end: deeper than any `maxDepth`.
                        let message = format!(
                            "fragment `{}` spreads itself (through {}): a cycle of fragments nests without end",
                            short(name),
                            fragment_path(&self.expanding[at..])
                        );
                        return Err(LimitError::new(&DEPTH, self.limits.max_depth, message));
                    }
                    // A chain of spreads nests without braces (the text scan does not see it);
                    // the executor refuses it beyond this anyway.
                    if self.expanding.len() >= MAX_FRAGMENT_NESTING {
                        let message = format!(
                            "fragment spreads nest more than {MAX_FRAGMENT_NESTING} deep (through {})",
                            fragment_path(&self.expanding)
                        );
                        return Err(LimitError::new(&DEPTH, self.limits.max_depth, message));
                    }
                    let FragmentDefinition { type_condition, selection_set, .. } = &fragment.node;
                    self.expanding.push(name);
                    self.selection_set(&selection_set.node, Some(type_condition.node.on.node.as_str()), depth, path)?;
                    self.expanding.pop();
                }
            }
        }
        Ok(())
    }

    fn field(
        &mut self,
        f: &'a async_graphql::parser::types::Field,
        parent: Option<&'a str>,
        depth: usize,
        path: u64,
    ) -> Result<(), LimitError> {
        // Arguments and directives count like fields: each can become an error of its own.
        self.cost.fields += 1 + f.arguments.len() + f.directives.len();
        if f.name.node == "__schema" {
            // Introspection is answered by async-graphql itself, outside the response budget.
            self.cost.fields += self.shapes.schema_weight;
        }
        if self.cost.fields > self.limits.max_complexity {
            let max = self.limits.max_complexity;
            return Err(LimitError::new(&FIELDS, max, format!("the query selects more than {max} fields (fragments expanded)")));
        }
        if depth > self.limits.max_depth {
            return Err(LimitError::depth(self.limits.max_depth));
        }
        let name = f.name.node.as_str();
        let shapes: &'a Shapes = self.shapes;
        let shape = parent.and_then(|p| shapes.outputs.get(p)).and_then(|fields| fields.get(name));
        for (arg_name, value) in &f.arguments {
            let declared = shape.and_then(|s| s.args.get(arg_name.node.as_str())).map(String::as_str);
            self.argument(name, arg_name.node.as_str(), declared, Arg::Doc(&value.node), path)?;
        }
        let Some(shape) = shape else {
            // `__typename`, introspection, or an unknown field (reported by validation): no
            // nodes below that this estimate knows; still counted as fields.
            return self.selection_set(&f.selection_set.node, None, depth + 1, path);
        };
        let arg = |n: &str| f.get_argument(n).and_then(|v| Arg::Doc(&v.node).resolve(self));
        let max_page = self.limits.max_page_size as u64;
        let m = match &shape.multiplier {
            Multiplier::Connection(records) => {
                let given = arg("first").and_then(Arg::int).or_else(|| arg("last").and_then(Arg::int));
                let page = given.map_or(max_page, |n| (n.max(0) as u64).min(max_page));
                Some(match records {
                    Some(r) => page.min((self.bound)(*r)),
                    None => page,
                })
            }
            Multiplier::Records(r) => Some((self.bound)(*r)),
            Multiplier::Ids => Some(arg("ids").and_then(Arg::list).map_or(0, |l| l.len() as u64)),
            Multiplier::Same | Multiplier::One => None,
        };
        let below = match m {
            Some(m) => {
                let here = path.saturating_mul(m);
                self.cost.nodes = self.cost.nodes.saturating_add(here);
                self.check_nodes()?;
                here
            }
            None => path,
        };
        let ty: &'a str = &shape.ty;
        self.selection_set(&f.selection_set.node, Some(ty), depth + 1, below)
    }

    fn check_nodes(&self) -> Result<(), LimitError> {
        if self.cost.nodes > self.limits.max_nodes {
            let max = self.limits.max_nodes;
            return Err(LimitError::new(&NODES,
                max,
                format!(
                    "the query may return up to {} nodes, more than {max}: give nested connections a smaller `first`/`last`, or nest fewer lists",
                    self.cost.nodes
                ),
            ));
        }
        Ok(())
    }

    /// One argument of field `field`: list lengths, search texts, and `where` filters.
    fn argument(&mut self, field: &str, name: &str, declared: Option<&'a str>, value: Arg<'a>, path: u64) -> Result<(), LimitError> {
        let Some(value) = value.resolve(self) else { return Ok(()) };
        self.lists(value)?;
        if (name == "search" && declared == Some("String")) || (field == "catalogueSearch" && name == "query") {
            if let Some(text) = value.string() {
                check_search(text, self.limits)?;
                self.cost.searches = true;
            }
        }
        if let Some(input) = declared.filter(|t| t.ends_with("WhereInput")) {
            self.filter(input, value, 0, path)?;
        }
        Ok(())
    }

    /// Lists inside an argument value hold at most `max_page_size` items (variables were
    /// checked as a whole by [`check_variables`]).
    fn lists(&self, value: Arg<'a>) -> Result<(), LimitError> {
        let Arg::Doc(v) = value else { return Ok(()) };
        match v {
            Value::List(items) => {
                if items.len() > self.limits.max_page_size {
                    return Err(LimitError::list(self.limits.max_page_size));
                }
                items.iter().try_for_each(|i| self.lists(Arg::Doc(i)))
            }
            Value::Object(o) => o.values().try_for_each(|i| self.lists(Arg::Doc(i))),
            _ => Ok(()),
        }
    }

    /// A `where` value of input type `input`, `edges` `has<Edge>With` levels deep, evaluated
    /// `path` times.
    fn filter(&mut self, input: &'a str, value: Arg<'a>, edges: usize, path: u64) -> Result<(), LimitError> {
        let Some(value) = value.resolve(self) else { return Ok(()) };
        let items = match value.list() {
            Some(items) => items,
            None => vec![value],
        };
        for item in items {
            let Some(item) = item.resolve(self) else { continue };
            let Some(fields) = item.fields() else { continue };
            for (key, v) in fields {
                let key = key.as_str();
                if matches!(key, "and" | "or" | "not") {
                    self.filter(input, v, edges, path)?;
                } else if key.starts_with("has") && key.ends_with("With") {
                    let shapes: &'a Shapes = self.shapes;
                    let Some(target) = shapes.inputs.get(input).and_then(|f| f.get(key)) else { continue };
                    if edges + 1 > self.limits.max_filter_depth {
                        let max = self.limits.max_filter_depth;
                        return Err(LimitError::new(
                            &FILTER_DEPTH,
                            max,
                            format!("a `where` nests has…With filters deeper than {max} levels"),
                        ));
                    }
                    self.cost.edge_filters = true;
                    let target: &'a str = target;
                    if let Some(r) = target.strip_suffix("WhereInput").and_then(|t| shapes.records.get(t)) {
                        self.cost.nodes = self.cost.nodes.saturating_add(path.saturating_mul((self.bound)(*r)));
                        self.check_nodes()?;
                    }
                    self.filter(target, v, edges + 1, path)?;
                } else {
                    self.operand(v)?;
                }
            }
        }
        Ok(())
    }

    /// One operand of a `where` (`name: "x"`, `idIn: [...]`): its bytes count against
    /// `maxFilterBytes`, so a large variable used in many predicates (each parsed into its own
    /// copy) is refused before it is copied.
    fn operand(&mut self, value: Arg<'a>) -> Result<(), LimitError> {
        let Some(value) = value.resolve(self) else { return Ok(()) };
        let bytes = match value.list() {
            Some(items) => items.into_iter().map(|i| i.resolve(self).map_or(8, Arg::bytes)).sum(),
            None => value.bytes(),
        };
        self.cost.filter_bytes = self.cost.filter_bytes.saturating_add(bytes);
        if self.cost.filter_bytes > self.limits.max_filter_bytes {
            let max = self.limits.max_filter_bytes;
            return Err(LimitError::new(
                &FILTER_BYTES,
                max,
                format!("the operands of the query's `where` filters take more than {max} bytes (each use of a variable counts)"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits { max_depth: 5, max_input_depth: 4, ..Limits::default() }
    }

    #[test]
    fn text_scan_refuses_deep_selections_and_values_before_parsing() {
        let l = limits();
        assert_eq!(scan_text("{ a { b { c { d { e } } } } }", &l), Ok(()));
        assert_eq!(scan_text("{ a { b { c { d { e { f } } } } } }", &l).unwrap_err().code, "QUERY_TOO_DEEP");
        assert_eq!(scan_text("{ a(x: [[[[1]]]]) { b } }", &l), Ok(()));
        assert_eq!(scan_text("{ a(x: [[[[[1]]]]]) { b } }", &l).unwrap_err().code, "INPUT_TOO_DEEP");
        assert_eq!(scan_text("{ a(x: {a: {b: {c: {d: 1}}}}) }", &l), Ok(()));
        assert_eq!(scan_text("{ a(x: {a: {b: {c: {d: {e: 1}}}}}) }", &l).unwrap_err().code, "INPUT_TOO_DEEP");
        // Brackets inside strings, block strings and comments do not count.
        assert_eq!(
            scan_text(
                r#"{ a(x: "[[[[[[[[{{{{{{{{\"") # {{{{{{{{{{{{
               { b(y: """ [[[[[[[[[[ \""" {{{{{{{{{{ """) } }"#,
                &l
            ),
            Ok(())
        );
        // Thousands of levels: refused at the limit, whatever the length.
        let deep = format!("{{ nodes(ids: {}\"x\"{}) {{ id }} }}", "[".repeat(2000), "]".repeat(2000));
        assert_eq!(scan_text(&deep, &Limits::default()).unwrap_err().code, "INPUT_TOO_DEEP");
        let deep = format!("{}{}", "{ a ".repeat(3000), "}".repeat(3000));
        assert_eq!(scan_text(&deep, &Limits::default()).unwrap_err().code, "QUERY_TOO_DEEP");
        // Unbalanced input is the parser's to report.
        assert_eq!(scan_text("}}}]]] { a", &l), Ok(()));
    }

    #[test]
    fn variables_are_bounded_in_depth_and_list_length() {
        let l = limits();
        let vars = |v: serde_json::Value| Variables::from_json(v);
        assert_eq!(check_variables(&vars(serde_json::json!({"w": {"a": [{"b": 1}]}})), &l), Ok(()));
        let deep = vars(serde_json::json!({"w": {"a": [{"b": [[1]]}]}}));
        assert_eq!(check_variables(&deep, &l).unwrap_err().code, "INPUT_TOO_DEEP");
        let long = vars(serde_json::json!({"ids": vec!["x"; 1001]}));
        assert_eq!(check_variables(&long, &Limits::default()).unwrap_err().setting, "graphql.maxPageSize");
    }

    #[test]
    fn search_texts_are_bounded_in_bytes_and_words() {
        let l = Limits::default();
        assert_eq!(check_search("payments checkout", &l), Ok(()));
        let e = check_search(&"a".repeat(257), &l).unwrap_err();
        assert_eq!((e.code, e.setting, e.max), ("BAD_USER_INPUT", "graphql.maxSearchLength", 256));
        let e = check_search("a b c d e f g h i", &l).unwrap_err();
        assert_eq!((e.code, e.setting, e.max), ("BAD_USER_INPUT", "graphql.maxSearchTerms", 8));
        // Punctuation is not a word.
        assert_eq!(check_search("/payments/checkout/v1 -- ++ ** ..", &l), Ok(()));
    }
}
