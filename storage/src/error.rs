//! The storage error type.

/// A storage failure. None of these is caused by bad input: input problems are
/// [`crate::Outcome`]s or [`schema::Skip`]s.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The data directory cannot be created or read. Reaction: fix permissions / the volume.
    #[error("I/O error: {0}")]
    Io(String),
    /// Another process holds the database file. Reaction: stop it, or use its online export.
    #[error("the database {0} is held by another process (is a server running on this data directory?)")]
    Locked(String),
    /// The store was written with another layout version. Reaction: delete the data directory
    /// (the read model is rebuilt from the source) or restore a matching snapshot.
    #[error(
        "the store has read-model layout version {found}, and this build reads layout {expected} and older: \
         it was written by a newer release. Go back to that release, or (the store is derived data) delete the data \
         directory to re-project it from the source, or restore a snapshot of layout {expected} into it"
    )]
    VersionMismatch {
        /// Version found in the file.
        found: u64,
        /// Version this build writes.
        expected: u64,
    },
    /// A stored value cannot be decoded: the file is corrupt or from an incompatible build.
    #[error("corrupt stored value: {0}")]
    Corrupt(String),
    /// redb reported an error. Reaction: retry the batch; persistent failures need an operator.
    #[error("database error: {0}")]
    Database(String),
    /// [`crate::Store::close`] waited in vain: other handles of the store are still alive.
    /// Reaction: a bug of the caller (something outlived its owner); the file is released when
    /// they are dropped.
    #[error("the store is still open: {handles} handle(s) remain")]
    StillOpen {
        /// Handles alive when the wait ended.
        handles: usize,
    },
    /// The kind's records are being re-derived after an upgrade changed its derivation version
    /// ([`crate::versions`]); a view handed to queries refuses to read them until that ends
    /// ([`crate::ReadView::refuse_while_rederiving`]). Reaction: retry shortly.
    #[error("{} is being re-derived after an upgrade changed its derivation version; retry shortly", .0.name())]
    Rederiving(schema::KindId),
    /// A long read stopped because its reader asked it to ([`crate::ReadView::interrupt_when`]).
    /// Reaction: the reader's own (its request's deadline passed).
    #[error("the read was interrupted by its reader")]
    Interrupted,
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StorageError {
            fn from(e: $t) -> StorageError {
                StorageError::Database(e.to_string())
            }
        }
    )*};
}

from_redb!(redb::Error, redb::DatabaseError, redb::TransactionError, redb::TableError, redb::StorageError, redb::CommitError);
