//! One module per kind: record, natural key, declared parents, links, scopes, index keys and the
//! translation rule. Each follows the Go projector's rules for its kind; its doc says where it
//! departs from them (ARCHITECTURE.md "The Go projector's quirks, fixed") or where the Go
//! projector has no such kind.

/// One module per kind of the table of kinds (`crds::kind_table!`).
macro_rules! kind_modules {
    ($( $variant:ident = $code:literal, $module:ident, $label:literal, $plural:literal, $group:literal, $feature:ident, $family:ident, [$($parent:ident),*]; )*) => {
        $( pub mod $module; )*
    };
}

crds::kind_table!(kind_modules);

pub mod agentic_catalogue;
pub mod approval_common;
pub mod subscription_wiring;

#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod translations;
