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
    /// The volume failed a write or a read — no space left, an I/O error, a read-only file
    /// system — or the database must be reopened after such a failure (redb refuses every
    /// later write of that handle). Nothing of the failed transaction is kept. Reaction: the
    /// writer keeps the change and reopens the store ([`crate::Store::reopen`]) until a write
    /// succeeds; an operator frees or grows the volume.
    #[error("{0}")]
    Volume(String),
    /// A read or write of a database handle that [`crate::Store::reopen`] closed meanwhile
    /// (it began before the reopen). Reaction: retry; the store is open again.
    #[error("the store was reopened while this read ran; retry")]
    Reopened,
    /// A long read stopped because its reader asked it to ([`crate::ReadView::interrupt_when`]).
    /// Reaction: the reader's own (its request's deadline passed).
    #[error("the read was interrupted by its reader")]
    Interrupted,
}

impl StorageError {
    /// Whether this is a fault of the volume rather than of the data or the caller
    /// ([`StorageError::Volume`], [`StorageError::Io`]): retrying after the store is reopened,
    /// once space or the volume is back, may succeed.
    pub fn is_volume_fault(&self) -> bool {
        matches!(self, StorageError::Volume(_) | StorageError::Io(_))
    }
}

/// The message of [`StorageError::Volume`] for a write refused because an earlier one of the
/// same database handle failed (redb's `PreviousIo`).
pub const PREVIOUS_FAULT: &str = "an earlier write of the store failed on the volume; the store must be reopened";

use std::io::ErrorKind;

/// A redb error as a [`StorageError`]: failures of the file ([`redb::Error::Io`] but for data
/// errors — a short or invalid file —, and
/// [`redb::Error::PreviousIo`] / [`redb::Error::DatabaseClosed`] that follow one) are
/// [`StorageError::Volume`], the rest [`StorageError::Database`].
fn from_redb(e: redb::Error) -> StorageError {
    match e {
        // What the file holds, not the volume: a file that is not a database, cut short.
        redb::Error::Io(io) if matches!(io.kind(), ErrorKind::UnexpectedEof | ErrorKind::InvalidData | ErrorKind::InvalidInput) => {
            StorageError::Database(io.to_string())
        }
        redb::Error::Io(io) => StorageError::Volume(io.to_string()),
        redb::Error::PreviousIo => StorageError::Volume(PREVIOUS_FAULT.into()),
        redb::Error::DatabaseClosed => StorageError::Reopened,
        e => StorageError::Database(e.to_string()),
    }
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StorageError {
            fn from(e: $t) -> StorageError {
                from_redb(e.into())
            }
        }
    )*};
}

from_redb!(redb::Error, redb::DatabaseError, redb::TransactionError, redb::TableError, redb::StorageError, redb::CommitError);
