//! Source documents (table `source_documents`): the document each stored object was translated
//! from, kept so that a build whose derivation of a kind changed re-derives it from the volume
//! alone, without the source (DESIGN decision 20).
//!
//! | key | value |
//! |---|---|
//! | `kind u8 · Key(namespace, name)` (the `sources` key) | zstd frame of the document's compact JSON ([`encode`]) |
//!
//! **What is kept.** The document as the source handed it to translation, without what no
//! translation reads and Kubernetes adds in bulk: `metadata.managedFields` and the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation ([`document_json`]). JSON is
//! the form every build reads: a document written by one build is translated by any later one.
//!
//! **When.** The write path stores an object's document with its source entry (a new or changed
//! source version) and removes both together, so a store written by this build holds a document
//! for every source entry of a kind once every object of it was written by it
//! ([`crate::ReadView::documents_complete`]); stores written before documents were kept hold
//! none. Documents are not read-model data: no revision moves for them alone.

use crate::StorageError;
use redb::TableDefinition;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

/// `source_documents`: the source document of each source entry.
pub const DOCUMENTS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("source_documents");

/// The largest document decoded, in bytes: far above what a source hands over
/// (`source.maxDocumentBytes` defaults to 1.5 MiB), it bounds what a damaged or hostile value may
/// expand to.
pub const MAX_DOCUMENT_BYTES: usize = 64 << 20;

/// zstd level of stored documents: the fastest, since documents are compressed on the sources'
/// threads for every object written.
const LEVEL: i32 = 1;

/// The compact JSON of `doc` as kept ([`document_json`]), compressed.
pub fn encode(doc: &Value) -> Vec<u8> {
    let json = document_json(doc);
    zstd::bulk::compress(&json, LEVEL).unwrap_or_else(|_| json.clone())
}

/// The JSON text of a stored document.
///
/// # Errors
/// [`StorageError::Corrupt`] when it does not decompress within [`MAX_DOCUMENT_BYTES`].
pub fn decode(bytes: &[u8]) -> Result<Vec<u8>, StorageError> {
    zstd::bulk::decompress(bytes, MAX_DOCUMENT_BYTES).map_err(|e| StorageError::Corrupt(format!("source document: {e}")))
}

/// The compact JSON of `doc` without `metadata.managedFields` and the
/// `kubectl.kubernetes.io/last-applied-configuration` annotation.
pub fn document_json(doc: &Value) -> Vec<u8> {
    serde_json::to_vec(&Kept(doc, Level::Document)).unwrap_or_default()
}

/// Where in a document a value sits, for what [`Kept`] leaves out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Document,
    Metadata,
    Annotations,
    Other,
}

/// A document (or a part of one) serialized without what [`document_json`] leaves out.
struct Kept<'a>(&'a Value, Level);

impl Serialize for Kept<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(map) = self.0 else { return self.0.serialize(s) };
        if self.1 == Level::Other {
            return self.0.serialize(s);
        }
        let dropped = |k: &str| match self.1 {
            Level::Metadata => k == "managedFields",
            Level::Annotations => k == "kubectl.kubernetes.io/last-applied-configuration",
            Level::Document | Level::Other => false,
        };
        let mut m = s.serialize_map(None)?;
        for (k, v) in map.iter().filter(|(k, _)| !dropped(k)) {
            let level = match (self.1, k.as_str()) {
                (Level::Document, "metadata") => Level::Metadata,
                (Level::Metadata, "annotations") => Level::Annotations,
                _ => Level::Other,
            };
            m.serialize_entry(k, &Kept(v, level))?;
        }
        m.end()
    }
}

/// The `meta` key present once every source entry of every kind has its document: set when a
/// store is created, after a restore of a snapshot that carries every document, and once the
/// documents of a store written before they were kept have been filled in
/// ([`crate::Store::complete_documents`]).
pub(crate) const COMPLETE: &str = "documents_complete";

/// Whether every source entry in `txn`'s store has its document.
///
/// # Errors
/// [`StorageError`] on redb failures.
pub(crate) fn all_present(txn: &redb::ReadTransaction) -> Result<bool, StorageError> {
    use redb::ReadableTable;
    let sources = txn.open_table(crate::tables::SOURCES)?;
    let documents = txn.open_table(DOCUMENTS)?;
    for item in sources.iter()? {
        let (k, _) = item?;
        if documents.get(k.value())?.is_none() {
            return Ok(false);
        }
    }
    Ok(true)
}

impl crate::Store {
    /// Whether documents are being filled in: the store was written before source documents
    /// were kept (or restored from such a snapshot), so some source entries lack theirs. The
    /// sources then hand over every object once more ([`crate::WriteBatch::fill_document`]),
    /// and [`crate::Store::complete_documents`] ends it.
    pub fn filling_documents(&self) -> bool {
        self.read()
            .and_then(|v| Ok(v.txn().open_table(crate::tables::META)?.get(COMPLETE)?.is_none()))
            .unwrap_or(false)
    }

    /// Ends the filling in of documents ([`crate::Store::filling_documents`]) when every source
    /// entry has its document now; returns whether it did.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn complete_documents(&self) -> Result<bool, StorageError> {
        if !self.filling_documents() {
            return Ok(true);
        }
        if !all_present(self.read()?.txn())? {
            return Ok(false);
        }
        let txn = self.db.begin_write()?;
        txn.open_table(crate::tables::META)?.insert(COMPLETE, 1)?;
        txn.commit()?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A document keeps everything translation may read and drops Kubernetes' bookkeeping; it
    /// reads back as the same JSON.
    #[test]
    fn a_document_is_kept_without_managed_fields_and_last_applied() {
        let doc = json!({
            "apiVersion": "organization.cp.ei.telekom.de/v1",
            "kind": "Group",
            "metadata": {
                "name": "payments",
                "namespace": "poc",
                "managedFields": [{"manager": "kubectl", "operation": "Update"}],
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{…}", "keep": "me"},
            },
            "spec": {"displayName": "Payments", "managedFields": "a spec field of that name stays"},
        });
        let stored = encode(&doc);
        let back: Value = serde_json::from_slice(&decode(&stored).unwrap()).unwrap();
        let mut expected = doc.clone();
        expected["metadata"].as_object_mut().unwrap().remove("managedFields");
        expected["metadata"]["annotations"].as_object_mut().unwrap().remove("kubectl.kubernetes.io/last-applied-configuration");
        assert_eq!(back, expected);
    }

    /// A stored value that is not a frame, or expands past the bound, is an error, never a panic.
    #[test]
    fn a_damaged_document_is_an_error() {
        assert!(matches!(decode(b"not zstd"), Err(StorageError::Corrupt(_))));
        let bomb = zstd::bulk::compress(&vec![b' '; MAX_DOCUMENT_BYTES + 1], 19).unwrap();
        assert!(matches!(decode(&bomb), Err(StorageError::Corrupt(_))));
    }
}
