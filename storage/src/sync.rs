//! Which source the store follows, and whether an initial sync of it completed (table
//! `sync_state`): what decides, on a start, whether the stored read model can be served at once
//! (a *warm* start: the relist catches up behind it) or must wait for the initial sync (a *cold*
//! start: an empty store, or one synced from another source).
//!
//! | key | value |
//! |---|---|
//! | `source` | the source's identity, UTF-8 ([`SyncState::source`]) |
//! | `synced` | `u64` LE: the store revision when the initial sync of that source first completed |
//!
//! Written by [`crate::Store::follow_source`] (on every start, before the source runs: a new
//! identity removes `synced`, so a start cut short stays cold), [`crate::Store::mark_synced`]
//! (by the writer, once the initial sync is processed) and a restore (a snapshot names the
//! source its store was synced from). Not read-model data: no revision. The table is additive
//! (layout 6): a build before it ignores it, and a store without it is cold once.

use crate::{tables, StorageError};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};

/// `sync_state`: the source followed, and the revision of its completed initial sync.
pub const SYNC_STATE: TableDefinition<&str, &[u8]> = TableDefinition::new("sync_state");

const SOURCE: &str = "source";
const SYNCED: &str = "synced";

/// The longest source identity stored, in bytes (a longer one is cut, which only makes two
/// sources that share a long prefix look alike).
pub const MAX_SOURCE_BYTES: usize = 4096;

/// What the store records of its source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncState {
    /// The identity of the source the store follows (`manifests:/abs/dir`,
    /// `kube:https://host:6443`); `None` for a new store or one written before it was recorded.
    pub source: Option<String>,
    /// The store revision when an initial sync of that source completed; `None`: never.
    pub synced_at: Option<u64>,
}

impl SyncState {
    /// Whether a start with the source `identity` is warm: the store completed an initial sync
    /// of that same source.
    pub fn warm_for(&self, identity: &str) -> bool {
        self.synced_at.is_some() && self.source.as_deref() == Some(bounded(identity))
    }
}

/// `identity` cut to [`MAX_SOURCE_BYTES`] at a character boundary.
fn bounded(identity: &str) -> &str {
    if identity.len() <= MAX_SOURCE_BYTES {
        return identity;
    }
    let mut end = MAX_SOURCE_BYTES;
    while !identity.is_char_boundary(end) {
        end -= 1;
    }
    &identity[..end]
}

/// Reads the state from `t`.
pub(crate) fn read(t: &impl ReadableTable<&'static str, &'static [u8]>) -> Result<SyncState, StorageError> {
    let source = match t.get(SOURCE)? {
        Some(v) => Some(String::from_utf8(v.value().to_vec()).map_err(|_| StorageError::Corrupt("sync_state source: not UTF-8".into()))?),
        None => None,
    };
    let synced_at = match t.get(SYNCED)? {
        Some(v) => Some(u64::from_le_bytes(v.value().try_into().map_err(|_| StorageError::Corrupt("sync_state synced".into()))?)),
        None => None,
    };
    Ok(SyncState { source, synced_at })
}

/// Writes `state` into `t` (a `None` removes its row).
pub(crate) fn write(t: &mut redb::Table<&'static str, &'static [u8]>, state: &SyncState) -> Result<(), StorageError> {
    match &state.source {
        Some(s) => t.insert(SOURCE, bounded(s).as_bytes())?,
        None => t.remove(SOURCE)?,
    };
    match state.synced_at {
        Some(r) => t.insert(SYNCED, r.to_le_bytes().as_slice())?,
        None => t.remove(SYNCED)?,
    };
    Ok(())
}

impl crate::Store {
    /// What the store records of its source ([`SyncState`]).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures or a corrupt row.
    pub fn sync_state(&self) -> Result<SyncState, StorageError> {
        let txn = self.database()?.begin_read()?;
        match txn.open_table(SYNC_STATE) {
            Ok(t) => read(&t),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(SyncState::default()),
            Err(e) => Err(e.into()),
        }
    }

    /// Records that the store follows the source `identity` from now on and returns whether
    /// this start is warm ([`SyncState::warm_for`]). A new identity forgets the completed sync
    /// of the previous one, durably, before any object of the new source is written; a damaged
    /// record is rewritten (the start is cold).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn follow_source(&self, identity: &str) -> Result<bool, StorageError> {
        let state = match self.sync_state() {
            Ok(state) => state,
            // Bookkeeping, not read-model data: a damaged row only makes this start cold.
            Err(StorageError::Corrupt(what)) => {
                tracing::warn!(%what, "the store's record of its source is damaged: this start is cold (ready once the source is read)");
                SyncState::default()
            }
            Err(e) => return Err(e),
        };
        if state.warm_for(identity) {
            return Ok(true);
        }
        if state.source.as_deref() != Some(bounded(identity)) {
            let txn = self.database()?.begin_write()?;
            write(&mut txn.open_table(SYNC_STATE)?, &SyncState { source: Some(identity.to_string()), synced_at: None })?;
            txn.commit()?;
        }
        Ok(false)
    }

    /// Records that the initial sync of the source followed ([`crate::Store::follow_source`])
    /// completed, at the current revision; the next start with that source is warm. Nothing
    /// when it is recorded already.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn mark_synced(&self) -> Result<(), StorageError> {
        if self.sync_state()?.synced_at.is_some() {
            return Ok(());
        }
        let txn = self.database()?.begin_write()?;
        {
            let revision = txn.open_table(tables::META)?.get("revision")?.map(|r| r.value()).unwrap_or(0);
            let mut t = txn.open_table(SYNC_STATE)?;
            let mut state = read(&t)?;
            state.synced_at = Some(revision);
            write(&mut t, &state)?;
        }
        txn.commit()?;
        Ok(())
    }
}

impl crate::ReadView {
    /// What the store records of its source, as of this view ([`SyncState`]).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures or a corrupt row.
    pub fn sync_state(&self) -> Result<SyncState, StorageError> {
        match self.txn().open_table(SYNC_STATE) {
            Ok(t) => read(&t),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(SyncState::default()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    /// A start is warm only with the source whose initial sync completed; another source makes
    /// the store cold until its own sync completes, and that survives a reopen.
    #[test]
    fn a_store_is_warm_only_for_the_source_it_completed_a_sync_of() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.sync_state().unwrap(), SyncState::default());
        assert!(!store.follow_source("manifests:/a").unwrap(), "a new store is cold");
        assert!(!store.follow_source("manifests:/a").unwrap(), "not synced yet");
        store.mark_synced().unwrap();
        assert_eq!(store.sync_state().unwrap(), SyncState { source: Some("manifests:/a".into()), synced_at: Some(0) });
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(store.follow_source("manifests:/a").unwrap(), "warm after a completed sync");
        assert!(!store.follow_source("kube:https://k:6443").unwrap(), "another source is cold");
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert!(!store.follow_source("manifests:/a").unwrap(), "the first source's sync was forgotten");
        assert_eq!(store.sync_state().unwrap().synced_at, None);
    }

    /// A damaged record of the source makes the start cold, never a store that cannot open.
    #[test]
    fn a_damaged_record_of_the_source_makes_the_start_cold() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.follow_source("manifests:/a").unwrap();
        store.mark_synced().unwrap();
        let txn = store.database().unwrap().begin_write().unwrap();
        txn.open_table(SYNC_STATE).unwrap().insert(SYNCED, b"xyz".as_slice()).unwrap();
        txn.commit().unwrap();
        assert!(matches!(store.sync_state(), Err(StorageError::Corrupt(_))));
        assert!(!store.follow_source("manifests:/a").unwrap(), "cold");
        assert_eq!(store.sync_state().unwrap(), SyncState { source: Some("manifests:/a".into()), synced_at: None });
    }

    /// A hostile identity (megabytes, multi-byte characters at the cut) is stored bounded and
    /// still compares equal to itself.
    #[test]
    fn a_long_identity_is_stored_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let long = format!("manifests:/{}", "é".repeat(1 << 20));
        store.follow_source(&long).unwrap();
        store.mark_synced().unwrap();
        let state = store.sync_state().unwrap();
        assert!(state.source.as_ref().unwrap().len() <= MAX_SOURCE_BYTES);
        assert!(store.follow_source(&long).unwrap());
    }
}
