//! Exports: one query's root connection (or root list) walked to its end from one read view and
//! written as NDJSON or CSV rows, page by page (the server streams them, `POST /graphql/export`).
//!
//! **What is exported.** The operation selects exactly one root field, a Relay connection
//! (`applications(where:…) { edges { node { … } } }`, `search:` included) or a list of objects
//! (`zones`, `groups`); anything else is refused with `NOT_EXPORTABLE` before any row. The
//! connection's own `first`/`last`/`after`/`before` are ignored (nested connections keep
//! theirs), as are its other fields (`totalCount`, `pageInfo`, `cursor`): the export selects
//! `edges { node { <the nodes' selection> } } pageInfo { hasNextPage endCursor }` and pages
//! with `first`/`after`.
//!
//! **The same rules as every query.** Each page is one GraphQL execution of that rewritten
//! operation on the schema queries run on: validation, the limits (the node estimate is measured
//! for one page, [`Api::prepare_export`]), isolation, masking and secret resolution apply as
//! they do to any query. Every page reads the same [`storage::ReadView`] (one store revision);
//! a `search:` reads the search index as of its last commit at each page. The answer budget
//! (`graphql.maxResponseBytes`) does not apply: rows are streamed.
//!
//! **Rows.** NDJSON: one line per node, the node's JSON as GraphQL answers it. CSV (RFC 4180,
//! CRLF): a header of the nodes' leaf field paths in selection order, fragments expanded and
//! aliases naming columns (`name`, `ownerTeam.name`, `subscribedApis.edges.node.basePath`),
//! then one record per node; a cell whose path crosses a list joins its values with `;`, each
//! value's `\` and `;` escaped with `\`; null or absent is empty. An error after the first row
//! ends the rows with one line: NDJSON `{"error":{"message":…,"code":…}}`, CSV
//! `#error,CODE,message` ([`Format::error_line`]).

use crate::error::not_exportable;
use crate::filter::FilterValue;
use crate::limits::LimitError;
use crate::request::RequestContext;
use crate::viewer::Viewer;
use crate::Api;
use async_graphql::parser::types::{DocumentOperations, ExecutableDocument, Field, OperationType, Selection, SelectionSet};
use async_graphql::{Name, Positioned, Value};
use std::collections::HashSet;
use std::sync::Arc;
use storage::{Store, Stored};

/// Most CSV columns (leaf field paths) one export has.
pub const MAX_COLUMNS: usize = 1000;

/// Most selections read while finding an export's nodes and columns (fragments expanded).
const MAX_VISITS: usize = 10_000;

/// Most bytes one page of an export answers (at most `graphql.maxResponseBytes`): a larger page
/// is read again at half its size, down to one node.
pub const PAGE_BYTES: usize = 4 << 20;

/// How many records of the walked table an export's read view reads ahead of its pages, on a
/// thread of its own ([`storage::ReadView::read_ahead`]): about 1 MB of records of 1 KB, well
/// within redb's page cache.
const READ_AHEAD_ENTRIES: usize = 1024;

/// The alias of the page information the export adds to a connection's selection.
const PAGE_INFO: &str = "pageInfo";

/// How rows are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Newline-delimited JSON: one node per line.
    Ndjson,
    /// RFC 4180 comma-separated values with a header record.
    Csv,
}

impl Format {
    /// The format named `name` (`ndjson`, `csv`), `None` for another name.
    pub fn from_name(name: &str) -> Option<Format> {
        match name {
            "ndjson" => Some(Format::Ndjson),
            "csv" => Some(Format::Csv),
            _ => None,
        }
    }

    /// The format's name (`ndjson`, `csv`): its metrics label and file extension.
    pub fn name(self) -> &'static str {
        match self {
            Format::Ndjson => "ndjson",
            Format::Csv => "csv",
        }
    }

    /// The media type of the body.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Ndjson => "application/x-ndjson",
            Format::Csv => "text/csv; charset=utf-8; header=present",
        }
    }

    /// What ends a record: `\n` (NDJSON), `\r\n` (CSV).
    pub fn line_break(self) -> &'static [u8] {
        match self {
            Format::Ndjson => b"\n",
            Format::Csv => b"\r\n",
        }
    }

    /// The line that ends an export cut short by an error with `code` and `message`.
    pub fn error_line(self, code: &str, message: &str) -> Vec<u8> {
        match self {
            Format::Ndjson => {
                let line = serde_json::json!({"error": {"message": message, "code": code}});
                let mut out = line.to_string().into_bytes();
                out.push(b'\n');
                out
            }
            Format::Csv => {
                let mut out = b"#error,".to_vec();
                push_csv_field(&mut out, code);
                out.push(b',');
                push_csv_field(&mut out, message);
                out.extend_from_slice(b"\r\n");
                out
            }
        }
    }
}

/// An export being walked: its rewritten operation, its read view and where its next page starts.
pub struct Export {
    /// The rewritten operation (one), without the page arguments.
    doc: ExecutableDocument,
    graphql_request: async_graphql::Request,
    request: RequestContext,
    /// The exported root field's name and response key.
    field: String,
    key: String,
    connection: bool,
    /// Nodes per page: at most `max_page_size`, halved for a page over its bytes and doubled
    /// back after a page that used a quarter of them at most.
    page_size: usize,
    /// The largest page the limits allow (the node estimate, `graphql.maxPageSize`).
    max_page_size: usize,
    /// Where the next page starts; `None` before the first.
    after: Option<String>,
    done: bool,
    /// A page has been answered without errors (later ones skip the full validation).
    validated: bool,
    format: Format,
    /// CSV columns: leaf field paths.
    columns: Vec<Vec<String>>,
    revision: u64,
    search_revision: Option<u64>,
    /// The rows of a page, written by the root connection itself when the nodes select only
    /// columns ([`FlatRows`]).
    flat: Option<Arc<FlatRows>>,
}

/// What [`Api::export_page`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRows {
    /// Rows written.
    pub rows: usize,
    /// The page had more rows than the caller allowed (the export is over its bound).
    pub over: bool,
}

/// The rows of one page of an export whose nodes select only columns (`id`, `__typename` and
/// the kind's [`crate::column::Column`]s, through fragments on the type, without arguments or
/// directives): the root connection writes them from its records
/// (`crate::connection::connection_value`) with the values its object fields answer
/// (their [`crate::column::Column`]'s value, spelled as GraphQL answers it), instead of
/// answering edges whose fields GraphQL resolves one by one. The answer is the same (a test compares both for every kind).
pub struct FlatRows {
    type_name: String,
    /// `(response key, field name)` in selection order, each key once.
    fields: Vec<(String, String)>,
    format: Format,
    /// The page's rows and where each ends.
    page: std::sync::Mutex<(Vec<u8>, Vec<usize>)>,
}

impl FlatRows {
    /// The GraphQL type whose root connection writes the rows.
    pub(crate) fn type_name(&self) -> &str {
        &self.type_name
    }

    /// Writes the rows of `records` (a page of the root connection, visible and filtered),
    /// charging their bytes to the page's answer budget.
    ///
    /// # Errors
    /// `RESPONSE_TOO_LARGE` once the page's rows exceed the budget (the export reads the page
    /// again smaller, [`Api::export_page`]).
    pub(crate) fn write<'a, K: crate::entity::Entity>(
        &self,
        request: &RequestContext,
        records: impl Iterator<Item = &'a Stored<K::Record>>,
    ) -> Result<(), async_graphql::Error> {
        let columns = K::columns();
        let getters: Vec<Option<&crate::column::Column<K::Record>>> =
            self.fields.iter().map(|(_, name)| columns.iter().find(|c| c.name() == name.as_str())).collect();
        // NDJSON: what comes before each value (`{"key":`, `,"key":`), written once.
        let keys: Vec<Vec<u8>> = self
            .fields
            .iter()
            .enumerate()
            .map(|(i, (key, _))| {
                let mut k = if i == 0 { b"{".to_vec() } else { b",".to_vec() };
                let _ = serde_json::to_writer(&mut k, key);
                k.push(b':');
                k
            })
            .collect();
        let mut page = self.page.lock().unwrap_or_else(|e| e.into_inner());
        let (out, ends) = &mut *page;
        for st in records {
            for (i, ((_, name), getter)) in self.fields.iter().zip(&getters).enumerate() {
                match self.format {
                    Format::Ndjson => out.extend_from_slice(&keys[i]),
                    Format::Csv if i > 0 => out.push(b','),
                    Format::Csv => {}
                }
                match (name.as_str(), getter) {
                    // Spelled without a character JSON escapes or CSV quotes: written as they are.
                    ("__typename", _) => push_plain(out, self.format, K::TYPE),
                    ("id", _) => {
                        let quote = self.format == Format::Ndjson;
                        out.extend_from_slice(if quote { b"\"" } else { b"" });
                        schema::keys::GlobalId::encode_into(K::TYPE, &st.key, out);
                        out.extend_from_slice(if quote { b"\"" } else { b"" });
                    }
                    (_, Some(c)) => push_value(out, self.format, &c.value(st, request)),
                    (_, None) => push_value(out, self.format, &FilterValue::Str(None)),
                }
            }
            out.extend_from_slice(match self.format {
                Format::Ndjson if self.fields.is_empty() => b"{}\n",
                Format::Ndjson => b"}\n",
                Format::Csv => b"\r\n",
            });
            request.deadline.charge(out.len() - ends.last().copied().unwrap_or(0))?;
            ends.push(out.len());
        }
        Ok(())
    }
}

/// An export's operation rewritten to read pages ([`rewrite`]).
struct Rewritten {
    doc: ExecutableDocument,
    field: String,
    key: String,
    connection: bool,
    /// The nodes' selection (CSV columns are read from it).
    nodes: SelectionSet,
    searches: bool,
    /// The nodes select only columns of this type: `(type, [(response key, field)])`, and the
    /// operation selects only the connection's `pageInfo` ([`FlatRows`]).
    flat: Option<(String, Vec<(String, String)>)>,
}

impl Api {
    /// Everything before an export's first page, as [`Api::prepare`] for a query: the text
    /// scanned and parsed, the variables checked, the operation rewritten to read pages (see the
    /// module docs), a read view opened (the export's one revision) and one page measured
    /// against the limits — with the largest page size (`graphql.maxPageSize`, halved while the
    /// node estimate of a page exceeds `graphql.maxNodes`).
    ///
    /// # Errors
    /// The answer to send instead of rows: `NOT_EXPORTABLE` (not one query of one root
    /// connection or list, or more than [`MAX_COLUMNS`] CSV columns), a limit's code, a syntax
    /// error (`GRAPHQL_VALIDATION_FAILED`), or `INTERNAL` for a storage failure.
    pub fn prepare_export(
        &self,
        store: &Store,
        mut viewer: Viewer,
        mut graphql_request: async_graphql::Request,
        deadline: crate::deadline::Deadline,
        format: Format,
    ) -> Result<Export, Box<async_graphql::Response>> {
        let refuse = |e: async_graphql::ServerError| Box::new(async_graphql::Response::from_errors(vec![e]));
        self.persisted.resolve(&mut graphql_request).map_err(refuse)?;
        crate::limits::scan_text(&graphql_request.query, &self.limits).map_err(|e| refuse(e.into_server_error()))?;
        crate::limits::check_variables(&graphql_request.variables, &self.limits).map_err(|e| refuse(e.into_server_error()))?;
        let doc = async_graphql::parser::parse_query(&graphql_request.query).map_err(|e| refuse(validation_failed(e.to_string())))?;
        let rewritten = rewrite(&doc, graphql_request.operation_name.as_deref(), &self.shapes, &self.columns, &graphql_request.variables)
            .map_err(refuse)?;
        let columns = if format == Format::Csv { columns(&rewritten.nodes, &doc).map_err(refuse)? } else { Vec::new() };
        let unreadable = |e: storage::StorageError| refuse(crate::error::storage_request_error(e));
        let view = store.read().map_err(unreadable)?;
        view.read_ahead(READ_AHEAD_ENTRIES);
        viewer.resolve(&view).map_err(unreadable)?;
        let revision = view.revision().map_err(unreadable)?;
        graphql_request.operation_name = None;
        let page_size = self.page_size(&rewritten, &graphql_request, &view, &viewer).map_err(|e| refuse(e.into_server_error()))?;
        let request = RequestContext::unlimited(store, view, viewer, deadline, self.config.now, &self.limits);
        let search_revision = rewritten.searches.then(|| request.catalogue.as_ref().map(|c| c.revision())).flatten();
        let Rewritten { doc, field, key, connection, flat, .. } = rewritten;
        let flat = flat.map(|(type_name, fields)| Arc::new(FlatRows { type_name, fields, format, page: Default::default() }));
        Ok(Export {
            doc,
            graphql_request,
            request,
            field,
            key,
            connection,
            page_size,
            max_page_size: page_size,
            after: None,
            done: false,
            validated: false,
            format,
            columns,
            revision,
            search_revision,
            flat,
        })
    }

    /// The fields an export writes from the records of `type_name` without resolving them (its
    /// [`crate::column::Column`]s; `id` and `__typename` too), `None` for a type without columns.
    pub fn columns_of(&self, type_name: &str) -> Option<&[&'static str]> {
        self.columns.get(type_name).map(Vec::as_slice)
    }

    /// The largest page size (at most `graphql.maxPageSize`) whose page passes the limits.
    fn page_size(
        &self,
        rewritten: &Rewritten,
        graphql_request: &async_graphql::Request,
        view: &storage::ReadView,
        viewer: &Viewer,
    ) -> Result<usize, LimitError> {
        let mut size = self.limits.max_page_size.max(1);
        loop {
            let doc = page_document(&rewritten.doc, rewritten.connection.then_some((size, None)));
            match self.measure(&doc, graphql_request, view, viewer) {
                Ok(_) => return Ok(size),
                Err(e) if size == 1 || !rewritten.connection || e.code != "TOO_MANY_NODES" => return Err(e),
                Err(_) => size /= 2,
            }
        }
    }

    /// Writes the rows of the next page of `export` to `out`, at most `allowed`; `Ok(None)` once
    /// every page was read.
    ///
    /// A page is one answer of at most `graphql.maxResponseBytes` ([`PAGE_BYTES`] at most): a
    /// page over it is read again at half the size; after a page that used a quarter of it at
    /// most, the next page is twice as large (up to the first page's size).
    ///
    /// # Errors
    /// The page's answer when it has errors (a field's error, a limit, `TIMEOUT` once the
    /// export's deadline passed): the export ends there.
    pub async fn export_page(
        &self,
        export: &mut Export,
        out: &mut Vec<u8>,
        allowed: usize,
    ) -> Result<Option<PageRows>, Box<async_graphql::Response>> {
        if export.done {
            return Ok(None);
        }
        let deadline = export.request.deadline.clone();
        let timeout = || Box::new(async_graphql::Response::from_errors(vec![deadline.server_error()]));
        if deadline.passed() {
            return Err(timeout());
        }
        let budget = self.limits.max_response_bytes.min(PAGE_BYTES);
        let response = loop {
            // Each page is one answer, bounded like any (its tree of values is held until its rows
            // are written): a page over the budget is read again at half the size.
            let page_deadline = deadline.with_own_budget(budget);
            let mut request = export.request.clone();
            request.deadline = page_deadline.clone();
            let page = export.connection.then(|| (export.page_size, export.after.clone()));
            let mut graphql_request =
                async_graphql::Request::new(String::new()).variables(export.graphql_request.variables.clone()).data(request);
            if let Some(flat) = &export.flat {
                // The root connection finds it in the request's data and writes its rows there.
                graphql_request = graphql_request.data(flat.clone());
            }
            graphql_request.set_parsed_query(page_document(&export.doc, page));
            let schemas = self.schemas_for(&export.graphql_request.query);
            let schema = if export.validated { &schemas.fast } else { &schemas.strict };
            let response = schema.execute(graphql_request).await;
            if deadline.passed() {
                return Err(timeout());
            }
            if response.errors.is_empty() {
                // One tenant's large rows do not slow the rest: small pages grow back.
                if page_deadline.spent() <= budget / 4 {
                    export.page_size = (export.page_size * 2).min(export.max_page_size);
                }
                break response;
            }
            if let Some(flat) = &export.flat {
                *flat.page.lock().unwrap_or_else(|e| e.into_inner()) = Default::default();
            }
            if page_deadline.answer_too_large() && export.connection && export.page_size > 1 {
                export.page_size /= 2;
                continue;
            }
            return Err(Box::new(crate::with_codes(crate::cap_errors(response), &self.limits)));
        };
        export.validated = true;
        let (nodes, next) = page_nodes(response.data, &export.key, export.connection);
        export.after = next.clone();
        export.done = next.is_none();
        let written = match &export.flat {
            Some(flat) => {
                let mut page = flat.page.lock().unwrap_or_else(|e| e.into_inner());
                let (bytes, ends) = &mut *page;
                let rows = ends.len().min(allowed);
                out.extend_from_slice(&bytes[..if rows == 0 { 0 } else { ends[rows - 1] }]);
                let over = ends.len() > allowed;
                // Emptied, not dropped: the next page reuses the buffers.
                bytes.clear();
                ends.clear();
                PageRows { rows, over }
            }
            None => {
                let rows = nodes.len().min(allowed);
                nodes.iter().take(rows).for_each(|node| export.write_row(node, out));
                PageRows { rows, over: nodes.len() > allowed }
            }
        };
        Ok(Some(written))
    }
}

impl Export {
    /// The exported root field's name (`applications`).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The store revision every page reads.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// With `search:` (or `catalogueSearch`): the store revision the search index held when the
    /// export started (each page reads it as of its last commit); `None` without a search.
    pub fn search_revision(&self) -> Option<u64> {
        self.search_revision
    }

    /// The rows' format.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The export's deadline (`export.timeout`; stops its pages).
    pub fn deadline(&self) -> &crate::deadline::Deadline {
        &self.request.deadline
    }

    /// What comes before the rows: the CSV header record (nothing for NDJSON).
    pub fn preamble(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.format == Format::Csv {
            for (i, path) in self.columns.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                push_csv_field(&mut out, &path.join("."));
            }
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    /// Nodes the next page reads (a connection's; see [`Api::export_page`]).
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Whether the nodes select only columns: the rows are written by the root connection
    /// ([`FlatRows`]).
    pub fn is_flat(&self) -> bool {
        self.flat.is_some()
    }

    /// Appends the row of `node` to `out`.
    fn write_row(&self, node: &Value, out: &mut Vec<u8>) {
        match self.format {
            Format::Ndjson => {
                // A `Value` is always valid JSON (no non-string keys, no NaN).
                let _ = serde_json::to_writer(&mut *out, node);
                out.push(b'\n');
            }
            Format::Csv => {
                for (i, path) in self.columns.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    push_csv_field(out, &cell(node, path));
                }
                out.extend_from_slice(b"\r\n");
            }
        }
    }
}

/// The code and message of the first error of an answer (`INTERNAL` without a code).
pub fn first_error(response: &async_graphql::Response) -> (String, String) {
    let Some(e) = response.errors.first() else { return ("INTERNAL".into(), "internal error".into()) };
    let code = e.extensions.as_ref().and_then(|x| x.get("code")).and_then(|v| match v {
        Value::String(s) => Some(s.clone()),
        Value::Enum(n) => Some(n.to_string()),
        _ => None,
    });
    (code.unwrap_or_else(|| "INTERNAL".into()), e.message.clone())
}

/// `doc` with the page arguments `first` and `after` on its root field (`None`: a list, as is).
fn page_document(doc: &ExecutableDocument, page: Option<(usize, Option<String>)>) -> ExecutableDocument {
    let mut doc = doc.clone();
    let Some((first, after)) = page else { return doc };
    if let DocumentOperations::Single(op) = &mut doc.operations {
        if let Some(Selection::Field(f)) = op.node.selection_set.node.items.first_mut().map(|s| &mut s.node) {
            let pos = f.pos;
            let arg = |name: &str, value| (Positioned::new(Name::new(name), pos), Positioned::new(value, pos));
            f.node.arguments.push(arg("first", async_graphql_value::Value::Number((first as u64).into())));
            if let Some(after) = after {
                f.node.arguments.push(arg("after", async_graphql_value::Value::String(after)));
            }
        }
    }
    doc
}

/// A page's nodes and the cursor of the next page (`None`: this was the last).
fn page_nodes(data: Value, key: &str, connection: bool) -> (Vec<Value>, Option<String>) {
    let Value::Object(mut data) = data else { return (Vec::new(), None) };
    let root = data.shift_remove(key).unwrap_or(Value::Null);
    if !connection {
        let Value::List(nodes) = root else { return (Vec::new(), None) };
        return (nodes, None);
    }
    let Value::Object(mut conn) = root else { return (Vec::new(), None) };
    let next = match conn.shift_remove(PAGE_INFO) {
        Some(Value::Object(info)) if info.get("hasNextPage") == Some(&Value::Boolean(true)) => match info.get("endCursor") {
            Some(Value::String(c)) => Some(c.clone()),
            _ => None,
        },
        _ => None,
    };
    let nodes = match conn.shift_remove("edges") {
        Some(Value::List(edges)) => edges
            .into_iter()
            .filter_map(|e| match e {
                Value::Object(mut e) => e.shift_remove("node").filter(|n| *n != Value::Null),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    (nodes, next)
}

/// The operation `name` (or the only one) of `doc` rewritten to read an export's pages: the
/// only operation, its one root field without page arguments, a connection's selection
/// replaced by `edges { node { … } } pageInfo { hasNextPage endCursor }`, unused fragments and
/// variable definitions dropped (strict validation refuses them).
fn rewrite(
    doc: &ExecutableDocument,
    name: Option<&str>,
    shapes: &crate::limits::Shapes,
    columns: &std::collections::HashMap<&'static str, Vec<&'static str>>,
    variables: &async_graphql::Variables,
) -> Result<Rewritten, async_graphql::ServerError> {
    let op = match (&doc.operations, name) {
        (DocumentOperations::Single(op), None) => op,
        (DocumentOperations::Multiple(ops), Some(n)) => ops.get(n).ok_or_else(|| not_exportable(format!("no operation is named `{n}`")))?,
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next().expect("one operation"),
        (DocumentOperations::Multiple(_), None) => {
            return Err(not_exportable("the document has several operations: name one (`operationName`)"))
        }
        (DocumentOperations::Single(_), Some(n)) => return Err(not_exportable(format!("no operation is named `{n}`"))),
    };
    match op.node.ty {
        OperationType::Query => {}
        OperationType::Mutation => return Err(not_exportable("a mutation writes; only a query is exported")),
        OperationType::Subscription => return Err(not_exportable("a subscription streams over the WebSocket; only a query is exported")),
    }
    let root = match op.node.selection_set.node.items.as_slice() {
        [one] => match &one.node {
            Selection::Field(f) if f.node.name.node != "__typename" && f.node.directives.is_empty() => f,
            Selection::Field(f) if f.node.name.node != "__typename" => {
                return Err(not_exportable("the exported field takes no directives"))
            }
            Selection::Field(_) => return Err(not_exportable("`__typename` is not a connection or a list of records")),
            _ => return Err(not_exportable("select exactly one root field, without a fragment")),
        },
        _ => return Err(not_exportable("select exactly one root field (a connection or a list of records)")),
    };
    let field = root.node.name.node.to_string();
    if !shapes.has_root_field(&field) {
        return Err(validation_failed(format!("Unknown field \"{field}\" on type \"Query\".")));
    }
    let connection =
        shapes.exported_root(&field).ok_or_else(|| not_exportable(format!("`{field}` is neither a connection nor a list of records")))?;
    // What the query endpoint would refuse in what the rewrite drops: an unused variable, a page
    // argument of the wrong type.
    let (_, used) = used(&op.node.selection_set.node, doc);
    if let Some(unused) = op.node.variable_definitions.iter().find(|v| !used.contains(v.node.name.node.as_str())) {
        return Err(validation_failed(format!("Variable \"${}\" is not used.", unused.node.name.node)));
    }
    check_page_arguments(&root.node, op, variables)?;
    let mut new_root = root.node.clone();
    let searches = field == "catalogueSearch"
        || root.node.arguments.iter().any(|(n, v)| n.node == "search" && v.node != async_graphql_value::Value::Null);
    let mut flat = None;
    let nodes = if connection {
        new_root.arguments.retain(|(n, _)| !matches!(n.node.as_str(), "first" | "last" | "after" | "before"));
        let nodes = connection_nodes(&root.node.selection_set.node, doc)?;
        let node_type = shapes.node_type(&field).unwrap_or_default();
        flat = columns.get(node_type).and_then(|c| flat_fields(&nodes, doc, node_type, c)).map(|f| (node_type.to_string(), f));
        new_root.selection_set.node = connection_selection(nodes.clone(), root.pos, flat.is_none());
        nodes
    } else {
        root.node.selection_set.node.clone()
    };
    let mut new_op = op.clone();
    new_op.node.selection_set.node.items = vec![Positioned::new(Selection::Field(Positioned::new(new_root, root.pos)), root.pos)];
    let mut out = ExecutableDocument { operations: DocumentOperations::Single(new_op), fragments: Default::default() };
    keep_used(&mut out, doc);
    let key = root.node.response_key().node.to_string();
    Ok(Rewritten { doc: out, field, key, connection, nodes, searches, flat })
}

/// The nodes' selection of a connection's selection `set`: the items of every `edges { node }`
/// in it (fragments at the connection and edge levels expanded), in order.
fn connection_nodes(set: &SelectionSet, doc: &ExecutableDocument) -> Result<SelectionSet, async_graphql::ServerError> {
    let mut edges = Vec::new();
    let mut visits = 0;
    collect_fields(set, doc, "edges", &mut edges, &mut visits, 0)?;
    let mut nodes = Vec::new();
    for e in &edges {
        collect_fields(&e.selection_set.node, doc, "node", &mut nodes, &mut visits, 0)?;
    }
    if nodes.is_empty() {
        return Err(not_exportable("select the nodes to export: `edges { node { … } }`"));
    }
    let items = nodes.into_iter().flat_map(|n| n.selection_set.node.items).collect();
    Ok(SelectionSet { items })
}

/// The fields named `name` in `set` (through fragments), refusing directives on them and on
/// the fragments around them.
fn collect_fields(
    set: &SelectionSet,
    doc: &ExecutableDocument,
    name: &str,
    out: &mut Vec<Field>,
    visits: &mut usize,
    depth: usize,
) -> Result<(), async_graphql::ServerError> {
    for item in &set.items {
        *visits += 1;
        if *visits > MAX_VISITS || depth > 32 {
            return Err(not_exportable("the selection around the nodes expands to too many selections"));
        }
        let directives = match &item.node {
            Selection::Field(f) if f.node.name.node == name => {
                out.push(f.node.clone());
                &f.node.directives
            }
            Selection::Field(_) => continue,
            Selection::InlineFragment(f) => {
                collect_fields(&f.node.selection_set.node, doc, name, out, visits, depth + 1)?;
                &f.node.directives
            }
            Selection::FragmentSpread(s) => {
                if let Some(f) = doc.fragments.get(&s.node.fragment_name.node) {
                    collect_fields(&f.node.selection_set.node, doc, name, out, visits, depth + 1)?;
                }
                &s.node.directives
            }
        };
        if !directives.is_empty() {
            return Err(not_exportable("no directives around the nodes (`@skip`/`@include` on `edges`, `node` or their fragments)"));
        }
    }
    Ok(())
}

/// `edges { node { <nodes> } } pageInfo { hasNextPage endCursor }` (`pageInfo` alone without
/// `edges`: the rows are [`FlatRows`]).
fn connection_selection(nodes: SelectionSet, pos: async_graphql::Pos, edges: bool) -> SelectionSet {
    let field = |name: &str, items: Vec<Positioned<Selection>>| {
        let f = Field {
            alias: None,
            name: Positioned::new(Name::new(name), pos),
            arguments: Vec::new(),
            directives: Vec::new(),
            selection_set: Positioned::new(SelectionSet { items }, pos),
        };
        Positioned::new(Selection::Field(Positioned::new(f, pos)), pos)
    };
    let node = field("node", nodes.items);
    let page_info = field(PAGE_INFO, vec![field("hasNextPage", Vec::new()), field("endCursor", Vec::new())]);
    if edges {
        SelectionSet { items: vec![field("edges", vec![node]), page_info] }
    } else {
        SelectionSet { items: vec![page_info] }
    }
}

/// The `(response key, field)` pairs of a nodes' selection that selects only `id`,
/// `__typename` and `columns` of `type_name` (through fragments on the type or on `Node`),
/// without arguments, directives or sub-selections, each key naming one field; `None` otherwise.
fn flat_fields(set: &SelectionSet, doc: &ExecutableDocument, type_name: &str, columns: &[&str]) -> Option<Vec<(String, String)>> {
    fn walk(
        set: &SelectionSet,
        doc: &ExecutableDocument,
        on: &dyn Fn(&str) -> bool,
        columns: &[&str],
        out: &mut Vec<(String, String)>,
        depth: usize,
    ) -> Option<()> {
        if depth > 16 || out.len() > MAX_COLUMNS {
            return None;
        }
        for item in &set.items {
            match &item.node {
                Selection::Field(f) => {
                    let f = &f.node;
                    let name = f.name.node.as_str();
                    let plain = f.arguments.is_empty() && f.directives.is_empty() && f.selection_set.node.items.is_empty();
                    if !plain || !(name == "id" || name == "__typename" || columns.contains(&name)) {
                        return None;
                    }
                    let key = f.response_key().node.as_str();
                    match out.iter().find(|(k, _)| k == key) {
                        Some((_, n)) if n != name => return None,
                        Some(_) => {}
                        None => out.push((key.to_string(), name.to_string())),
                    }
                }
                Selection::InlineFragment(fr) => {
                    let typed = fr.node.type_condition.as_ref().is_none_or(|t| on(t.node.on.node.as_str()));
                    if !fr.node.directives.is_empty() || !typed {
                        return None;
                    }
                    walk(&fr.node.selection_set.node, doc, on, columns, out, depth + 1)?;
                }
                Selection::FragmentSpread(sp) => {
                    let fr = doc.fragments.get(&sp.node.fragment_name.node)?;
                    if !sp.node.directives.is_empty() || !on(fr.node.type_condition.node.on.node.as_str()) {
                        return None;
                    }
                    walk(&fr.node.selection_set.node, doc, on, columns, out, depth + 1)?;
                }
            }
        }
        Some(())
    }
    let mut out = Vec::new();
    walk(set, doc, &|t| t == type_name || t == "Node", columns, &mut out, 0)?;
    Some(out)
}

/// Copies into `out` the fragments of `from` its operation uses (transitively), and drops the
/// operation's variable definitions nothing uses any more.
fn keep_used(out: &mut ExecutableDocument, from: &ExecutableDocument) {
    let DocumentOperations::Single(op) = &mut out.operations else { return };
    let (fragments, variables) = used(&op.node.selection_set.node, from);
    out.fragments = from.fragments.iter().filter(|(n, _)| fragments.contains(*n)).map(|(n, f)| (n.clone(), f.clone())).collect();
    op.node.variable_definitions.retain(|v| variables.contains(v.node.name.node.as_str()));
}

/// The fragments (of `from`, transitively) and the variables a selection uses.
fn used(selection: &SelectionSet, from: &ExecutableDocument) -> (HashSet<Name>, HashSet<String>) {
    let mut fragments = HashSet::new();
    let mut variables = HashSet::new();
    let mut pending = vec![selection];
    let mut visits = 0;
    while let Some(set) = pending.pop() {
        for item in &set.items {
            visits += 1;
            if visits > MAX_VISITS * 10 {
                return (fragments, variables);
            }
            let (directives, inner) = match &item.node {
                Selection::Field(f) => {
                    f.node.arguments.iter().for_each(|(_, v)| variables_of(&v.node, &mut variables));
                    (&f.node.directives, Some(&f.node.selection_set.node))
                }
                Selection::InlineFragment(f) => (&f.node.directives, Some(&f.node.selection_set.node)),
                Selection::FragmentSpread(s) => {
                    let name = s.node.fragment_name.node.clone();
                    let fragment = from.fragments.get(&name).filter(|_| fragments.insert(name));
                    (&s.node.directives, fragment.map(|f| &f.node.selection_set.node))
                }
            };
            directives.iter().flat_map(|d| &d.node.arguments).for_each(|(_, v)| variables_of(&v.node, &mut variables));
            pending.extend(inner);
        }
    }
    (fragments, variables)
}

/// The page arguments the rewrite drops (`first`, `last`, `after`, `before`) hold values of
/// their types (`Int`, `Cursor`) or null, as the query endpoint's validation requires.
fn check_page_arguments(
    root: &Field,
    op: &Positioned<async_graphql::parser::types::OperationDefinition>,
    variables: &async_graphql::Variables,
) -> Result<(), async_graphql::ServerError> {
    use async_graphql_value::Value as V;
    for (name, value) in &root.arguments {
        let value = match &value.node {
            V::Variable(v) => variables.get(v).cloned().or_else(|| {
                let def = op.node.variable_definitions.iter().find(|d| d.node.name.node == *v)?;
                def.node.default_value.as_ref().map(|d| d.node.clone())
            }),
            other => other.clone().into_const(),
        }
        .unwrap_or(Value::Null);
        let (ok, ty) = match name.node.as_str() {
            "first" | "last" => (matches!(&value, Value::Null) || matches!(&value, Value::Number(n) if n.is_i64()), "Int"),
            "after" | "before" => (matches!(value, Value::Null | Value::String(_)), "Cursor"),
            _ => (true, ""),
        };
        if !ok {
            return Err(validation_failed(format!("Invalid value for argument \"{}\", expected type \"{ty}\"", name.node)));
        }
    }
    Ok(())
}

/// `GRAPHQL_VALIDATION_FAILED` with `message`.
fn validation_failed(message: String) -> async_graphql::ServerError {
    let mut error = async_graphql::ServerError::new(message, None);
    let mut ext = async_graphql::ErrorExtensionValues::default();
    ext.set("code", "GRAPHQL_VALIDATION_FAILED");
    error.extensions = Some(ext);
    error
}

/// Adds the names of the variables `value` refers to.
fn variables_of(value: &async_graphql_value::Value, out: &mut HashSet<String>) {
    use async_graphql_value::Value as V;
    match value {
        V::Variable(n) => {
            out.insert(n.to_string());
        }
        V::List(items) => items.iter().for_each(|v| variables_of(v, out)),
        V::Object(fields) => fields.values().for_each(|v| variables_of(v, out)),
        _ => {}
    }
}

/// The CSV columns of the nodes' selection `set`: leaf field paths by response key, in
/// selection order, fragments expanded (type conditions ignored: a column of another type's
/// fragment stays empty), each path once.
fn columns(set: &SelectionSet, doc: &ExecutableDocument) -> Result<Vec<Vec<String>>, async_graphql::ServerError> {
    struct Walk<'a> {
        doc: &'a ExecutableDocument,
        out: Vec<Vec<String>>,
        seen: HashSet<Vec<String>>,
        visits: usize,
    }
    impl Walk<'_> {
        fn set(&mut self, set: &SelectionSet, prefix: &mut Vec<String>, depth: usize) -> Result<(), async_graphql::ServerError> {
            for item in &set.items {
                self.visits += 1;
                if self.visits > MAX_VISITS || depth > 64 {
                    return Err(not_exportable("the nodes' selection expands to too many selections"));
                }
                match &item.node {
                    Selection::Field(f) => {
                        prefix.push(f.node.response_key().node.to_string());
                        if f.node.selection_set.node.items.is_empty() {
                            if self.seen.insert(prefix.clone()) {
                                self.out.push(prefix.clone());
                            }
                        } else {
                            self.set(&f.node.selection_set.node, prefix, depth + 1)?;
                        }
                        prefix.pop();
                    }
                    Selection::InlineFragment(f) => self.set(&f.node.selection_set.node, prefix, depth + 1)?,
                    Selection::FragmentSpread(s) => {
                        if let Some(f) = self.doc.fragments.get(&s.node.fragment_name.node) {
                            self.set(&f.node.selection_set.node, prefix, depth + 1)?;
                        }
                    }
                }
                if self.out.len() > MAX_COLUMNS {
                    return Err(not_exportable(format!("a CSV export has at most {MAX_COLUMNS} columns (leaf fields)")));
                }
            }
            Ok(())
        }
    }
    let mut walk = Walk { doc, out: Vec::new(), seen: HashSet::new(), visits: 0 };
    walk.set(set, &mut Vec::new(), 0)?;
    Ok(walk.out)
}

/// The CSV cell of `path` in `node` (see the module docs).
fn cell(node: &Value, path: &[String]) -> String {
    let mut values = Vec::new();
    let mut listed = false;
    leaf_values(node, path, &mut values, &mut listed);
    if !listed {
        return values.pop().unwrap_or_default();
    }
    let mut out = String::new();
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        for c in v.chars() {
            if c == ';' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out
}

/// The values at `path` under `value`, through lists (`listed` set when one was crossed).
fn leaf_values(value: &Value, path: &[String], out: &mut Vec<String>, listed: &mut bool) {
    match (value, path.split_first()) {
        (Value::Null, _) => {}
        (Value::List(items), _) => {
            *listed = true;
            items.iter().for_each(|v| leaf_values(v, path, out, listed));
        }
        (Value::Object(fields), Some((key, rest))) => {
            if let Some(v) = fields.get(key.as_str()) {
                leaf_values(v, rest, out, listed);
            }
        }
        (Value::String(s), None) => out.push(s.clone()),
        (Value::Enum(n), None) => out.push(n.to_string()),
        (Value::Boolean(b), None) => out.push(b.to_string()),
        (Value::Number(n), None) => out.push(n.to_string()),
        // A JSON object scalar (`Map`), or a value the path does not reach.
        (Value::Object(_), None) => out.push(serde_json::to_string(value).unwrap_or_default()),
        _ => {}
    }
}

/// Appends `value`, a string without a character that JSON escapes or CSV quotes (a type's name,
/// a global ID, a time), as a JSON string or a CSV field.
fn push_plain(out: &mut Vec<u8>, format: Format, value: &str) {
    debug_assert!(!value.contains(['"', '\\', ',', '\r', '\n']) && !value.starts_with('#') && !value.contains(char::is_control));
    match format {
        Format::Ndjson => {
            out.push(b'"');
            out.extend_from_slice(value.as_bytes());
            out.push(b'"');
        }
        Format::Csv => out.extend_from_slice(value.as_bytes()),
    }
}

/// Appends a column's value as GraphQL's JSON answer spells it (a string, enum values and
/// times too; `true`/`false`; `null`), or as a CSV field as [`cell`] writes the answered value
/// (null is empty).
fn push_value(out: &mut Vec<u8>, format: Format, value: &FilterValue) {
    match (value, format) {
        (FilterValue::Str(Some(s)), Format::Ndjson) => {
            let _ = serde_json::to_writer(&mut *out, s);
        }
        (FilterValue::Str(Some(s)), Format::Csv) => push_csv_field(out, s),
        (FilterValue::Time(Some(t)), Format::Ndjson) => {
            out.push(b'"');
            t.write_rfc3339(out);
            out.push(b'"');
        }
        (FilterValue::Time(Some(t)), Format::Csv) => t.write_rfc3339(out),
        (FilterValue::Bool(Some(b)), _) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        (FilterValue::Str(None) | FilterValue::Time(None) | FilterValue::Bool(None), Format::Ndjson) => out.extend_from_slice(b"null"),
        (FilterValue::Str(None) | FilterValue::Time(None) | FilterValue::Bool(None), Format::Csv) => {}
    }
}

/// Appends `value` as one RFC 4180 field: quoted (quotes doubled) when it holds a comma, a
/// quote or a line break, or starts with `#` (a record of values can never read as the error
/// record `#error,…`, [`Format::error_line`]).
fn push_csv_field(out: &mut Vec<u8>, value: &str) {
    if value.contains([',', '"', '\r', '\n']) || value.starts_with('#') {
        out.push(b'"');
        out.extend_from_slice(value.replace('"', "\"\"").as_bytes());
        out.push(b'"');
    } else {
        out.extend_from_slice(value.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: serde_json::Value) -> Value {
        Value::from_json(json).unwrap()
    }

    /// Values that would break a record or a list cell are quoted and escaped; paths through
    /// lists join, nulls and absent fields are empty, a `Map` is its JSON.
    #[test]
    fn cells_escape_what_would_break_a_record_or_a_list() {
        let n = node(serde_json::json!({
            "name": "a,b \"c\"\r\nd",
            "tags": ["x;y", "back\\slash", "plain"],
            "subs": {"edges": [{"node": {"path": "/p;1"}}, {"node": {"path": null}}, {"node": {"path": "/p2"}}]},
            "owner": null,
            "labels": {"k": "v"},
            "ready": true,
            "count": 3
        }));
        let path = |p: &str| p.split('.').map(str::to_string).collect::<Vec<_>>();
        assert_eq!(cell(&n, &path("name")), "a,b \"c\"\r\nd");
        assert_eq!(cell(&n, &path("tags")), "x\\;y;back\\\\slash;plain");
        assert_eq!(cell(&n, &path("subs.edges.node.path")), "/p\\;1;/p2");
        assert_eq!(cell(&n, &path("owner.name")), "");
        assert_eq!(cell(&n, &path("missing")), "");
        assert_eq!(cell(&n, &path("labels")), r#"{"k":"v"}"#);
        assert_eq!((cell(&n, &path("ready")), cell(&n, &path("count"))), ("true".to_string(), "3".to_string()));
        let mut out = Vec::new();
        push_csv_field(&mut out, &cell(&n, &path("name")));
        assert_eq!(String::from_utf8(out).unwrap(), "\"a,b \"\"c\"\"\r\nd\"");
        // A value can never make a record read as the error record.
        let mut out = Vec::new();
        push_csv_field(&mut out, "#error");
        assert_eq!(String::from_utf8(out).unwrap(), "\"#error\"");
    }

    #[test]
    fn the_error_line_is_one_json_line_or_one_csv_record() {
        let line = Format::Ndjson.error_line("TIMEOUT", "took \"too\" long\nreally");
        assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1);
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v, serde_json::json!({"error": {"message": "took \"too\" long\nreally", "code": "TIMEOUT"}}));
        let csv = Format::Csv.error_line("TIMEOUT", "a, b");
        assert_eq!(String::from_utf8(csv).unwrap(), "#error,TIMEOUT,\"a, b\"\r\n");
    }
}
