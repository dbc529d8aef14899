//! Constructors of the `where` edge predicates (`has<Edge>`, `has<Edge>With`), by how the
//! neighbours are found: one record by natural key, records under a natural-key prefix, or
//! records in a secondary index. Visibility is applied by [`crate::filter::EdgeFilter`].

use crate::entity::Entity;
use crate::error::internal;
use crate::filter::EdgeFilter;
use crate::request::RequestContext;
use schema::{IndexName, Key};
use storage::{StorageError, Stored};

fn logged<T>(r: Result<T, StorageError>, empty: T) -> T {
    r.unwrap_or_else(|e| {
        // Logged as an internal error; the edge then has no neighbours.
        let _ = internal(e);
        empty
    })
}

/// An edge to the record of `T` under the key `key` returns (none when `None`).
pub fn by_key<R: 'static, T: Entity>(name: &'static str, key: fn(&Stored<R>) -> Option<Key>) -> EdgeFilter<R> {
    EdgeFilter::new::<T>(name, T::TYPE, move |request: &RequestContext, row: &Stored<R>| match key(row) {
        None => Vec::new(),
        Some(k) => logged(request.view.get::<T>(&k).map(|o| o.into_iter().collect()), Vec::new()),
    })
}

/// An edge to the records of `T` whose natural key starts with the tuple `prefix` returns.
pub fn by_prefix<R: 'static, T: Entity>(name: &'static str, prefix: fn(&Stored<R>) -> Key) -> EdgeFilter<R> {
    EdgeFilter::new::<T>(name, T::TYPE, move |request: &RequestContext, row: &Stored<R>| {
        logged(request.view.with_prefix::<T>(&prefix(row)), Vec::new())
    })
}

/// An edge to the records of `T` listed in secondary index `index` under the key `lookup`
/// returns (none when `None`).
pub fn by_index<R: 'static, T: Entity>(name: &'static str, index: IndexName, lookup: fn(&Stored<R>) -> Option<Key>) -> EdgeFilter<R> {
    by_index_keeping::<R, T>(name, index, lookup, |_| true)
}

/// [`by_index`], keeping only the records `keep` accepts.
pub fn by_index_keeping<R: 'static, T: Entity>(
    name: &'static str,
    index: IndexName,
    lookup: fn(&Stored<R>) -> Option<Key>,
    keep: impl Fn(&Stored<T::Record>) -> bool + Send + Sync + 'static,
) -> EdgeFilter<R> {
    EdgeFilter::new::<T>(name, T::TYPE, move |request: &RequestContext, row: &Stored<R>| match lookup(row) {
        None => Vec::new(),
        Some(k) => {
            let mut found = logged(request.view.lookup_records::<T>(index, &k), Vec::new());
            found.retain(|x| keep(x));
            found
        }
    })
}
