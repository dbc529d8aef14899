//! The read model's vocabulary: entity records, natural keys, enums, global IDs and the
//! translation from custom resource to record.
//!
//! **Architecture invariant: this crate is pure.** No I/O, no clock, no async, no randomness.
//! Everything that depends on the outside world (the current time, feature flags) arrives as an
//! argument ([`kind::Context`]). Translation never reads the store: it returns a record plus the
//! parents it requires ([`kind::Kind::requires`]) and the links it wants resolved
//! ([`kind::Kind::links`]); the writer in `storage` decides whether a dependency is missing.
//!
//! Start reading at [`kind::Kind`] (the contract every kind implements), then [`keys`] (identity)
//! and one file under [`kinds`].

#![forbid(unsafe_code)]

pub mod catalogue;
pub mod common;
pub mod graphql_enum;
pub mod keys;
pub mod kind;
pub mod kinds;
pub mod registry;
pub mod time;

pub use crds::kind_table;
pub use graphql_enum::GraphqlEnum;
pub use keys::{GlobalId, Key};
pub use kind::{Context, IndexName, Kind, KindId, Link, Parent, Scope, Skip};
pub use time::Timestamp;
