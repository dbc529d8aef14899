//! One module per kind: its GraphQL object fields and filters ([`crate::entity::Entity`]).

use crate::entity::{Builder, Entity};

pub mod agentic_catalogue;
pub mod common;
pub mod edges;
pub mod info;
pub mod reduced;
pub mod subscription_common;
pub mod subscription_info;
pub mod values;

/// The kinds' registration, generated from the table of kinds ([`schema::kind_table!`]): each
/// kind's module is declared here and registered by its `register`, in the table's order (the
/// order of the `Query` fields).
macro_rules! kind_modules {
    ($( $variant:ident = $code:literal, $module:ident, $label:literal, $plural:literal, $group:literal, $feature:ident, $family:ident, [$($parent:ident),*]; )*) => {
        $( pub mod $module; )*

        /// Whether the records of `kind` belong to a team (visible to its viewers) rather than
        /// to every viewer of their environment ([`Entity::TEAM_OWNED`]).
        pub fn team_owned(kind: schema::KindId) -> bool {
            match kind { $( schema::KindId::$variant => <schema::kinds::$module::$variant as Entity>::TEAM_OWNED, )* }
        }

        /// Registers every entity type: `info` first, then every kind of the table of kinds.
        pub fn register_all(builder: &mut Builder) {
            info::register(builder);
            subscription_info::register(builder);
            $( $module::register(builder); )*
        }
    };
}

schema::kind_table!(kind_modules);
