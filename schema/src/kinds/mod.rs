//! One module per kind: record, natural key, declared parents, links, scopes, index keys and the
//! translation rule. Each module's doc cites the reference-projector.md section it implements.

pub mod group;

#[cfg(test)]
pub(crate) mod testing;
