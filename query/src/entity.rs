//! The description of a kind in GraphQL: one [`Entity`] impl per kind gives its object fields,
//! columns and edge filters, and the [`Builder`] collects the schema's types while kinds
//! register. What is built from a description once for every kind lives beside: connections,
//! orders, where inputs and root queries in [`crate::connection`], `node`/`nodes` in
//! [`crate::node`], the request context in [`crate::request`], field values in
//! [`crate::fields`].

use crate::column::Column;
use crate::fields::{record_field, string};
use crate::filter::{FilterField, WhereType};
use crate::request::RequestContext;
use async_graphql::dynamic::{Enum, Field, FieldValue, InputObject, Interface, Object, TypeRef};
use async_graphql::Error;
use schema::GraphqlEnum;
use schema::{GlobalId, Key, Kind};
use std::collections::HashMap;
use std::sync::Arc;
use storage::Stored;

/// How a kind appears in GraphQL.
pub trait Entity: Kind {
    /// The GraphQL object type name.
    const TYPE: &'static str;
    /// The root connection field (`applications`), if any.
    const ROOT: Option<&'static str>;
    /// Records are owned by teams (scanned per viewer team) rather than visible to the whole
    /// environment (catalogue, zones, groups).
    const TEAM_OWNED: bool;
    /// `orderBy: [XOrder!]` instead of `orderBy: XOrder`.
    const MULTI_ORDER: bool = false;
    /// A record can be listed under several of one viewer's team scopes (approvals: subscriber
    /// and provider team). When false, counts over several scopes add up counters.
    const SHARED_SCOPES: bool = false;

    /// Scalar fields that are both object fields and `where` fields, each declared once
    /// ([`Column`]); listed after [`Entity::fields`]. The `where` input has `id`, these and
    /// the [`Entity::edge_filters`]: nothing is filterable that is not also a field.
    fn columns() -> Vec<Column<Self::Record>> {
        Vec::new()
    }

    /// Object fields besides `id` and the [`Entity::columns`]. May register helper types in `b`.
    fn fields(builder: &mut Builder) -> Vec<Field>;

    /// Edges usable in `where` (`has<Edge>`, `has<Edge>With`).
    fn edge_filters() -> Vec<crate::filter::EdgeFilter<Self::Record>> {
        Vec::new()
    }
}

/// Collects the types of the schema while entities register themselves.
#[derive(Default)]
pub struct Builder {
    pub(crate) objects: Vec<Object>,
    pub(crate) enums: Vec<Enum>,
    pub(crate) inputs: Vec<InputObject>,
    pub(crate) interfaces: Vec<Interface>,
    pub(crate) unions: Vec<async_graphql::dynamic::Union>,
    pub(crate) query_fields: Vec<Field>,
    /// Node loaders by GraphQL type name.
    pub(crate) loaders: HashMap<&'static str, Loader>,
    /// Each registered kind's GraphQL object type.
    pub(crate) type_names: HashMap<schema::KindId, &'static str>,
    /// Subscription fields of the registered kinds (`<type>Changes`).
    pub(crate) subscription_fields: Vec<async_graphql::dynamic::SubscriptionField>,
    /// Object types listed as records (for the node estimate, `crate::limits`), by type name.
    pub(crate) records: HashMap<String, crate::limits::RecordList>,
    registered: std::collections::HashSet<String>,
    /// The registering functions that ran ([`Builder::first_time`]).
    units: std::collections::HashSet<&'static str>,
    wheres: crate::filter::WhereRegistry,
    extras: HashMap<String, Vec<Field>>,
    /// [`crate::QueryConfig::file_manager_base_url`].
    pub(crate) file_manager_base_url: Option<Arc<str>>,
    /// [`crate::QueryConfig::secret_resolver`].
    pub(crate) secret_resolver: Option<Arc<dyn crate::secrets::SecretResolver>>,
    /// How each registered kind shows a past revision ([`crate::history`]).
    pub(crate) pasts: HashMap<schema::KindId, Arc<dyn PastKind>>,
    /// The finished schema's object fields ([`ObjectFields`]).
    pub(crate) object_fields: ObjectFields,
    /// Each entity type's column names ([`Entity::columns`]).
    pub(crate) column_names: HashMap<&'static str, Vec<&'static str>>,
    /// Record loaders by GraphQL type name, for plans of `node(id:)` ([`crate::plan`]).
    pub(crate) record_loaders: HashMap<&'static str, crate::plan::tree::RecordLoader>,
    /// The connections plans read ([`crate::plan`]), by parent type and field name.
    pub(crate) planned_connections: crate::plan::tree::PlannedConnections,
}

/// Loads a node of one type by key, `None` when absent or invisible.
pub(crate) type Loader = Arc<dyn Fn(&RequestContext, &Key) -> Result<Option<FieldValue<'static>>, Error> + Send + Sync>;

impl Builder {
    /// A nullable secret field of entity `K` ([`crate::secrets`]); `site` gives the owner's
    /// environment and team and the stored value.
    pub fn secret_field<K: Entity>(&self, name: &'static str, site: crate::secrets::RecordSecret<K::Record>) -> Field {
        crate::secrets::secret_field::<Stored<K::Record>>(
            name,
            TypeRef::named(TypeRef::STRING),
            None,
            self.secret_resolver.clone(),
            move |p| {
                let (env, team, value) = site(&p.record);
                crate::secrets::SecretSite { env, team, record: global_id::<K>(&p.key).into(), value, historical: p.as_of.is_some() }
            },
        )
    }

    /// The `specificationUrl: String` field of a catalogue kind `K` whose specification (a
    /// file-manager ID) `spec` reads: `<fileManager.baseUrl>/files/<specification>`, the ID
    /// percent-encoded as one path segment; null when either is unset or empty
    /// (as the Go server computes it).
    pub fn specification_url_field<K: Kind>(&self, spec: fn(&K::Record) -> Option<&str>) -> Field {
        let base = self.file_manager_base_url.clone();
        record_field::<K>("specificationUrl", TypeRef::named(TypeRef::STRING), move |r| {
            let (base, spec) = (base.as_deref()?, spec(r).filter(|s| !s.is_empty())?);
            string(&format!("{base}/files/{}", crate::url::path_escape(spec)))
        })
    }

    /// Whether `unit` (a function registering shared types) runs for the first time in this
    /// build; a later call returns at once. The fields it makes are made once: plans find
    /// each field's resolver by its parent type and name ([`crate::fields::FieldTable`]).
    pub fn first_time(&mut self, unit: &'static str) -> bool {
        self.units.insert(unit)
    }

    /// Registers an object once (by name).
    pub fn object(&mut self, o: Object) {
        if self.registered.insert(o.type_name().to_string()) {
            self.objects.push(o);
        }
    }

    /// Adds fields to the object `type_name`, registered by another module (e.g. the
    /// `Application.exposedApis` connection is defined next to ApiExposure).
    pub fn extend(&mut self, type_name: &str, fields: Vec<Field>) {
        self.extras.entry(type_name.to_string()).or_default().extend(fields);
    }

    /// The finished objects, with the fields added by [`Builder::extend`].
    pub(crate) fn take_objects(&mut self) -> Vec<Object> {
        let mut extras = std::mem::take(&mut self.extras);
        std::mem::take(&mut self.objects)
            .into_iter()
            .map(|mut o| {
                for f in extras.remove(o.type_name()).unwrap_or_default() {
                    o = o.field(f);
                }
                o
            })
            .collect()
    }

    /// Declares that lists of the object type `type_name` hold records: at most
    /// `bound` of them (see [`crate::limits`]). Entity types are declared by [`crate::connection::register_entity`];
    /// reduced `…Info` views and lists derived from records declare themselves.
    pub fn record_list(&mut self, type_name: &str, bound: crate::limits::RecordList) {
        self.records.insert(type_name.to_string(), bound);
    }

    /// Registers an enum once (by name).
    pub fn enumeration(&mut self, name: &str, items: &[&str]) {
        if self.registered.insert(name.to_string()) {
            self.enums.push(Enum::new(name).items(items.iter().copied()));
        }
    }

    /// Registers the GraphQL enum `name` with the values of `E` ([`GraphqlEnum::VALUES`]) once.
    pub fn enumeration_of<E: GraphqlEnum>(&mut self, name: &str) {
        self.enumeration(name, E::VALUES);
    }

    /// Registers an input once (by name).
    pub fn input(&mut self, i: InputObject) {
        if self.registered.insert(i.type_name().to_string()) {
            self.inputs.push(i);
        }
    }

    /// The compiled where type of entity `K` (registering it on first use).
    pub fn where_type<K: Entity>(&mut self) -> Arc<WhereType<K::Record>> {
        let name = format!("{}WhereInput", K::TYPE);
        if let Some(w) = self.wheres.get::<K::Record>(&name) {
            return w;
        }
        let mut fields = vec![FilterField::new("id", crate::filter::FilterType::Id, false, |s: &Stored<K::Record>| {
            crate::filter::FilterValue::Str(Some(GlobalId::new(K::TYPE, &s.key).encode()))
        })];
        fields.extend(K::columns().iter().map(Column::filter_field));
        let w = WhereType::new(name, fields, K::edge_filters(), &self.wheres);
        self.input(w.input_object());
        w
    }
}

/// How one kind shows a past revision: registered by every entity
/// ([`crate::connection::register_entity`]; `crate::history` shows them).
pub(crate) trait PastKind: Send + Sync {
    /// The kind's GraphQL object type.
    fn type_name(&self) -> &'static str;
    /// The record as of `entry` (a `Stored` of the kind's record), translated from its
    /// document's JSON; `None` when the document no longer decodes or translates (logged).
    fn translate(&self, json: &[u8], entry: &storage::history::LogEntry) -> Option<PastRecord>;
    /// The node of a record [`PastKind::translate`] made.
    fn node(&self, past: &PastRecord) -> Option<FieldValue<'static>>;
    /// `past`, translated for an entry of the same position, with the links and `createdAt`
    /// `entry` gives (the same record when they are equal).
    fn with_origin(&self, past: &PastRecord, entry: &storage::history::LogEntry) -> Option<PastRecord>;
    /// The GraphQL fields that differ between `before` (`None`: nothing before) and `after`,
    /// records [`PastKind::translate`] made.
    fn changed_fields(&self, request: &RequestContext, before: Option<&PastRecord>, after: &PastRecord) -> Vec<String>;
}

/// A record as of a past revision ([`PastKind::translate`]): a `Stored` of its kind's record.
pub(crate) type PastRecord = Arc<dyn std::any::Any + Send + Sync>;

/// The fields of every object type of the finished schema, by type name (filled from its SDL
/// once it is built: a dynamic schema's fields do not tell their names).
pub(crate) type ObjectFields = Arc<std::sync::OnceLock<HashMap<String, Vec<String>>>>;

/// The global ID of a record of entity `K`.
pub fn global_id<K: Entity>(key: &Key) -> String {
    GlobalId::new(K::TYPE, key).encode()
}

/// The value of a record of `K` in a field whose type is the object `K` itself (edges, lists,
/// links). Fields typed by an interface or union (`node`) need [`FieldValue::with_type`] on top:
/// async-graphql does not unwrap a typed value for object-typed fields, whose resolvers then
/// fail to downcast their parent.
pub fn node_value<K: Entity>(s: Stored<K::Record>) -> FieldValue<'static> {
    FieldValue::owned_any(s)
}
