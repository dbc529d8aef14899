//! Bulk loads: an empty table filled in key order, as a restore fills every table of a new
//! store.

use crate::StorageError;

/// Fills the empty `table` with `items`, which must be in strictly ascending key order, through
/// one cursor at the table's end (redb buffers the run and packs it into full leaves).
///
/// # Errors
/// [`StorageError::Corrupt`] naming `what` when a key does not ascend, other variants on redb
/// failures.
pub(crate) fn append<'a, V: redb::Value + 'static>(
    table: &mut redb::Table<'_, &'static [u8], V>,
    what: &str,
    items: impl IntoIterator<Item = (&'a [u8], V::SelfType<'a>)>,
) -> Result<(), StorageError> {
    let mut cursor = table.upper_bound_mut(std::ops::Bound::<&[u8]>::Unbounded)?;
    for (k, v) in items {
        cursor.insert_before(k, v).map_err(|e| match e {
            redb::CursorError::UnorderedKey => StorageError::Corrupt(format!("{what}: keys not in strictly ascending order")),
            e => StorageError::Database(e.to_string()),
        })?;
    }
    cursor.close()?;
    Ok(())
}
