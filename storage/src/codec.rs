//! The record codec: postcard, behind this one module so it can be swapped with a format
//! version bump.

use crate::StorageError;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Encodes a value.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing plain data structs into a Vec cannot fail (no maps with non-string keys,
    // no I/O); a failure would be a broken invariant of the record types.
    postcard::to_stdvec(value).expect("invariant: records are postcard-serializable")
}

/// Decodes a value.
///
/// # Errors
/// [`StorageError::Corrupt`] naming `what` when the bytes do not decode.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, StorageError> {
    postcard::from_bytes(bytes).map_err(|e| StorageError::Corrupt(format!("{what}: {e}")))
}

/// Decodes a value that borrows from `bytes` (e.g. `&[u8]` fields).
///
/// # Errors
/// [`StorageError::Corrupt`] naming `what` when the bytes do not decode.
pub fn decode_borrowed<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, StorageError> {
    postcard::from_bytes(bytes).map_err(|e| StorageError::Corrupt(format!("{what}: {e}")))
}

/// Decodes the leading fields of a value: `T` is a struct of the first fields of the encoded
/// type, in order (the rest of `bytes` is not read).
///
/// # Errors
/// [`StorageError::Corrupt`] naming `what` when the bytes do not decode.
pub fn decode_prefix<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, StorageError> {
    postcard::take_from_bytes(bytes).map(|(value, _rest)| value).map_err(|e| StorageError::Corrupt(format!("{what}: {e}")))
}
