//! One module per kind: its GraphQL object fields and filters ([`crate::entity::Entity`]).

use crate::entity::{register, Builder};

pub mod group;

/// Registers every entity type.
pub fn register_all(b: &mut Builder) {
    register::<schema::kinds::group::Group>(b);
}
