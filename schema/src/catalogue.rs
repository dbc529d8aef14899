//! The catalogue document (ARCHITECTURE.md, `storage`, "Catalogue search"): what full-text
//! search indexes of each catalogue kind (Api, EventType, McpServer, AgentCard).
//! `storage::search` is generic over [`Catalogued`]; this module is the one place that says
//! which record field feeds which search field.
//!
//! Only fields the GraphQL types expose are indexed (a hit must be explained by what its reader
//! can see): an Api has no `name`, `displayName` or `description` in GraphQL, so none is
//! indexed for it. Field names are the
//! GraphQL field names; they name the highlights of a hit.

use crate::kind::{Family, Kind, KindId};
use crate::kinds::agent_card::AgentCard;
use crate::kinds::agentic_catalogue::AgenticCatalogueRecord;
use crate::kinds::api::{Api, ApiRecord};
use crate::kinds::event_type::{EventType, EventTypeRecord};
use crate::kinds::mcp_server::McpServer;

/// How much a match in a field counts (see `storage::search` for the weights).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldClass {
    /// Names: `name`, `displayName`, `basePath` / `eventType`.
    Title,
    /// Short labels: `category`, `version`, `oauth2Scopes`, the owner team.
    Tag,
    /// Prose: `description`.
    Body,
}

/// One searchable field of a catalogue entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocField {
    /// The GraphQL field name (`basePath`, `owner` for the owner team's name).
    pub name: &'static str,
    /// Its weight class.
    pub class: FieldClass,
    /// The text (list fields joined by spaces).
    pub text: String,
}

/// What search knows of one catalogue entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogueDoc {
    /// The environment (visibility: every viewer of it).
    pub environment: String,
    /// `status.active`.
    pub active: bool,
    /// The base path or event type: an exact match of the whole query ranks first.
    pub path: String,
    /// The searchable fields, in GraphQL order; empty texts are left out.
    pub fields: Vec<DocField>,
}

/// A kind whose records are catalogue entries.
pub trait Catalogued: Kind {
    /// The GraphQL type name (also the `CatalogueKind` it maps to, see [`catalogue_kind`]).
    const TYPE: &'static str;

    /// The search document of a record.
    fn catalogue_doc(rec: &Self::Record) -> CatalogueDoc;
}

/// Called once per catalogue kind by [`visit`].
pub trait CatalogueVisitor {
    /// Visits catalogue kind `K`.
    fn visit<K: Catalogued>(&mut self);
}

/// The catalogue kinds (family `Catalogue` of the table of kinds), in the table's order: the
/// `CatalogueKind` order.
pub const KINDS: &[KindId] = &family_members::<{ family_size(Family::Catalogue) }>(Family::Catalogue);

/// How many kinds of the table belong to `family`.
const fn family_size(family: Family) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < KindId::TABLE_ORDER.len() {
        if KindId::TABLE_ORDER[i].family() as u8 == family as u8 {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The `N` kinds of `family`, in the table's order.
const fn family_members<const N: usize>(family: Family) -> [KindId; N] {
    let mut members = [KindId::Zone; N];
    let (mut i, mut n) = (0, 0);
    while i < KindId::TABLE_ORDER.len() {
        if KindId::TABLE_ORDER[i].family() as u8 == family as u8 {
            members[n] = KindId::TABLE_ORDER[i];
            n += 1;
        }
        i += 1;
    }
    members
}

/// Visits `$kind` when `$family` is `Catalogue` (a row of the table of kinds).
macro_rules! visit_if_catalogue {
    ($v:ident, Catalogue, $module:ident, $kind:ident) => {
        $v.visit::<crate::kinds::$module::$kind>()
    };
    ($v:ident, $family:ident, $module:ident, $kind:ident) => {};
}

/// The catalogue's visit, generated from the rows of the table of kinds.
macro_rules! catalogue_visit {
    ($( $variant:ident = $code:literal, $module:ident, $label:literal, $plural:literal, $group:literal, $feature:ident, $family:ident, [$($parent:ident),*]; )*) => {
        /// Visits every catalogue kind, in [`KINDS`] order.
        pub fn visit(v: &mut impl CatalogueVisitor) {
            $( visit_if_catalogue!(v, $family, $module, $variant); )*
        }
    };
}

crds::kind_table!(catalogue_visit);

/// The GraphQL `CatalogueKind` value of a catalogue kind (`API`, `EVENT_TYPE`, …).
pub fn catalogue_kind(kind: KindId) -> Option<&'static str> {
    match kind {
        KindId::Api => Some("API"),
        KindId::EventType => Some("EVENT_TYPE"),
        KindId::McpServer => Some("MCP_SERVER"),
        KindId::AgentCard => Some("AGENT_CARD"),
        _ => None,
    }
}

fn push(fields: &mut Vec<DocField>, name: &'static str, class: FieldClass, text: impl Into<String>) {
    let text = text.into();
    if !text.is_empty() {
        fields.push(DocField { name, class, text });
    }
}

impl Catalogued for Api {
    const TYPE: &'static str = "Api";

    fn catalogue_doc(r: &ApiRecord) -> CatalogueDoc {
        let mut f = Vec::new();
        push(&mut f, "basePath", FieldClass::Title, r.base_path.as_str());
        push(&mut f, "version", FieldClass::Tag, r.version.as_str());
        push(&mut f, "category", FieldClass::Tag, r.category.clone().unwrap_or_default());
        push(&mut f, "oauth2Scopes", FieldClass::Tag, r.oauth2_scopes.join(" "));
        push(&mut f, "owner", FieldClass::Tag, r.team.as_str());
        CatalogueDoc { environment: r.meta.environment.clone(), active: r.active, path: r.base_path.clone(), fields: f }
    }
}

impl Catalogued for EventType {
    const TYPE: &'static str = "EventType";

    fn catalogue_doc(r: &EventTypeRecord) -> CatalogueDoc {
        let mut f = Vec::new();
        push(&mut f, "eventType", FieldClass::Title, r.event_type.as_str());
        push(&mut f, "description", FieldClass::Body, r.description.clone().unwrap_or_default());
        push(&mut f, "version", FieldClass::Tag, r.version.as_str());
        push(&mut f, "owner", FieldClass::Tag, r.team.as_str());
        CatalogueDoc { environment: r.meta.environment.clone(), active: r.active, path: r.event_type.clone(), fields: f }
    }
}

fn agentic_doc(r: &AgenticCatalogueRecord) -> CatalogueDoc {
    let mut f = Vec::new();
    push(&mut f, "name", FieldClass::Title, r.meta.name.as_str());
    if r.display_name != r.meta.name {
        push(&mut f, "displayName", FieldClass::Title, r.display_name.as_str());
    }
    push(&mut f, "basePath", FieldClass::Title, r.base_path.as_str());
    push(&mut f, "description", FieldClass::Body, r.description.clone().unwrap_or_default());
    push(&mut f, "category", FieldClass::Tag, r.category.clone().unwrap_or_default());
    push(&mut f, "version", FieldClass::Tag, r.version.as_str());
    push(&mut f, "oauth2Scopes", FieldClass::Tag, r.oauth2_scopes.join(" "));
    push(&mut f, "owner", FieldClass::Tag, r.team.as_str());
    CatalogueDoc { environment: r.meta.environment.clone(), active: r.active, path: r.base_path.clone(), fields: f }
}

impl Catalogued for McpServer {
    const TYPE: &'static str = "McpServer";

    fn catalogue_doc(r: &AgenticCatalogueRecord) -> CatalogueDoc {
        agentic_doc(r)
    }
}

impl Catalogued for AgentCard {
    const TYPE: &'static str = "AgentCard";

    fn catalogue_doc(r: &AgenticCatalogueRecord) -> CatalogueDoc {
        agentic_doc(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The catalogue is the `Catalogue` family of the table of kinds: each has its
    /// `CatalogueKind` value (the kind's name in SCREAMING_SNAKE_CASE), no other kind has one,
    /// and `visit` visits them in `KINDS` order.
    #[test]
    fn the_catalogue_is_the_catalogue_family() {
        assert_eq!(KINDS, [KindId::Api, KindId::EventType, KindId::McpServer, KindId::AgentCard]);
        for kind in KindId::ALL {
            let screaming: String = kind
                .name()
                .chars()
                .enumerate()
                .flat_map(|(i, c)| (i > 0 && c.is_uppercase()).then_some('_').into_iter().chain(c.to_uppercase()))
                .collect();
            let expected = (kind.family() == Family::Catalogue).then_some(screaming.as_str());
            assert_eq!(catalogue_kind(*kind), expected, "{kind:?}");
        }
        struct Order(Vec<KindId>);
        impl CatalogueVisitor for Order {
            fn visit<K: Catalogued>(&mut self) {
                self.0.push(K::ID);
            }
        }
        let mut order = Order(Vec::new());
        visit(&mut order);
        assert_eq!(order.0, KINDS);
    }
}
