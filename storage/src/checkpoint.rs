//! Source checkpoints: what a source remembers next to the read model so that a restart can skip
//! work it already did (the manifests source keeps, per file, its length, modification time,
//! content hash and the identities and versions of its documents).
//!
//! The `source_checkpoints` table maps a string key chosen by the source (`manifests/…`) to opaque
//! bytes. Checkpoints are not part of the read model: they are not exported in snapshots, do not
//! bump the revision, and a store without them (new, restored, or written by an older version)
//! only makes the next start slower. A source must never trust a checkpoint more than the records
//! themselves: the manifests source checks every remembered version against [`ReadView::for_each_source`]
//! before it relies on it.

use crate::codec;
use crate::tables;
use crate::write::{for_each_source_bytes_in, for_each_source_in};
use crate::{ReadView, StorageError, WriteBatch};
use redb::{ReadableTable, TableDefinition, TableError};
use schema::KindId;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// `source_checkpoints`: source-chosen key → opaque bytes.
pub const CHECKPOINTS: TableDefinition<&str, &[u8]> = TableDefinition::new("source_checkpoints");

/// Encodes a checkpoint value with the store's codec (postcard).
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    codec::encode(value)
}

/// Decodes a checkpoint value written by [`encode`].
///
/// # Errors
/// [`StorageError::Corrupt`] naming `what` when the bytes do not decode (e.g. written by a version
/// with another layout: callers treat that as "no checkpoint").
pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, StorageError> {
    codec::decode(bytes, what)
}

/// Decodes a checkpoint value written by [`encode`] into a type that borrows from `bytes`
/// (`&str` fields decode without copying).
///
/// # Errors
/// As [`decode`].
pub fn decode_borrowed<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, StorageError> {
    codec::decode_borrowed(bytes, what)
}

impl WriteBatch<'_> {
    /// Stores (`Some`) or removes (`None`) the checkpoint `key`, committed with the batch. Does
    /// not count as a read-model change: a batch holding only checkpoints commits without a new
    /// revision.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn put_checkpoint(&mut self, key: &str, value: Option<&[u8]>) -> Result<(), StorageError> {
        let txn = self.txn_for_other_tables();
        let mut t = txn.open_table(CHECKPOINTS)?;
        match value {
            Some(v) => {
                t.insert(key, v)?;
            }
            None => {
                t.remove(key)?;
            }
        }
        Ok(())
    }
}

/// What a seal ([`WriteBatch::seal_checkpoints`]) records: the store's
/// [`tables::SOURCES_GENERATION`] and revision at its point of the batch that wrote it.
#[derive(serde::Serialize, serde::Deserialize, PartialEq, Eq, Debug)]
struct Seal {
    sources_generation: u64,
    revision: u64,
}

impl WriteBatch<'_> {
    /// Seals a source's checkpoints at `key`: records the store's count of source-entry writes
    /// and its revision as they are at this point of the batch (counting its changes applied so
    /// far). The seal stays current ([`ReadView::checkpoints_sealed`]) until a later change of
    /// any source entry, by this batch or another, or of any record: the caller seals only when
    /// its checkpoints describe exactly the store's source entries, and must remove the seal
    /// (`put_checkpoint(key, None)`) with any checkpoint write that breaks that. A build that
    /// predates seals moves the revision when it changes a record, not the count.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn seal_checkpoints(&mut self, key: &str) -> Result<(), StorageError> {
        let (writes, revision) = (self.source_writes, self.revision_so_far());
        let txn = self.txn_for_other_tables();
        let generation = txn.open_table(tables::META)?.get(tables::SOURCES_GENERATION)?.map(|v| v.value()).unwrap_or(0);
        let seal = Seal { sources_generation: generation.saturating_add(writes), revision };
        txn.open_table(CHECKPOINTS)?.insert(key, encode(&seal).as_slice())?;
        Ok(())
    }
}

impl crate::Store {
    /// Removes every checkpoint whose key starts with `prefix`, in one commit (a source whose
    /// checkpoints must not be trusted then reads everything again). No revision.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn drop_checkpoints(&self, prefix: &str) -> Result<usize, StorageError> {
        let txn = self.database()?.begin_write()?;
        let mut dropped = 0;
        {
            let mut t = txn.open_table(CHECKPOINTS)?;
            t.retain_in::<&str, _>(prefix.., |k, _| {
                let keep = !k.starts_with(prefix);
                dropped += usize::from(!keep);
                keep
            })?;
        }
        txn.commit()?;
        Ok(dropped)
    }
}

impl ReadView {
    /// Calls `f(key, bytes)` for every checkpoint whose key starts with `prefix`, in key order,
    /// without copying the values. Calls nothing for a store that has none (also one created
    /// before checkpoints existed).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn for_each_checkpoint(&self, prefix: &str, mut f: impl FnMut(&str, &[u8])) -> Result<(), StorageError> {
        let t = match self.txn().open_table(CHECKPOINTS) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        for item in t.range(prefix..)? {
            let (k, v) = item?;
            let key = k.value();
            if !key.starts_with(prefix) {
                break;
            }
            f(key, v.value());
        }
        Ok(())
    }

    /// The checkpoint stored under exactly `key`, if any (`None` also for a store that has no
    /// checkpoints at all).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn checkpoint(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let t = match self.txn().open_table(CHECKPOINTS) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(t.get(key)?.map(|v| v.value().to_vec()))
    }

    /// Whether the seal at `key` ([`WriteBatch::seal_checkpoints`]) is current: no source entry
    /// and no record changed since the point of the batch that wrote it. `false` without a seal
    /// or with one that does not decode.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn checkpoints_sealed(&self, key: &str) -> Result<bool, StorageError> {
        let Some(bytes) = self.checkpoint(key)? else { return Ok(false) };
        let Ok(seal) = decode::<Seal>(&bytes, "checkpoint seal") else { return Ok(false) };
        let meta = self.txn().open_table(tables::META)?;
        let generation = meta.get(tables::SOURCES_GENERATION)?.map(|v| v.value()).unwrap_or(0);
        Ok(seal == Seal { sources_generation: generation, revision: self.revision()? })
    }

    /// Every checkpoint whose key starts with `prefix`, in key order, as (key, bytes) (see
    /// [`ReadView::for_each_checkpoint`]).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn checkpoints(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        let mut out = Vec::new();
        self.for_each_checkpoint(prefix, |k, v| out.push((k.to_string(), v.to_vec())))?;
        Ok(out)
    }

    /// Calls `f(namespace, name, version)` for every source object of `kind` the store holds a
    /// record for, in key order, without collecting them. `version` is the source version the
    /// record was written at (manifests: hex SHA-256 of the document).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures, [`StorageError::Corrupt`] for an undecodable entry.
    pub fn for_each_source(&self, kind: KindId, f: impl FnMut(&str, &str, &str)) -> Result<(), StorageError> {
        for_each_source_in(&self.txn().open_table(tables::SOURCES)?, kind, f)
    }

    /// [`ReadView::for_each_source`] with namespace, name and version as the stored bytes (not
    /// checked to be UTF-8), for callers that only hash or compare them; `f` may stop the walk
    /// with an error, which is returned.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures, [`StorageError::Corrupt`] for an undecodable entry,
    /// `f`'s error.
    pub fn for_each_source_bytes(
        &self,
        kind: KindId,
        f: impl FnMut(&[u8], &[u8], &[u8]) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        for_each_source_bytes_in(&self.txn().open_table(tables::SOURCES)?, kind, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    #[test]
    fn checkpoints_commit_without_a_revision_and_read_back_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.read().unwrap().checkpoints("manifests/").unwrap().is_empty());
        let (_, wb_revision) = store
            .write(schema::Timestamp(1), |wb| {
                wb.put_checkpoint("manifests/file/a.yaml", Some(b"A")).unwrap();
                wb.put_checkpoint("manifests/file/b.yaml", Some(b"B")).unwrap();
                wb.put_checkpoint("other/x", Some(b"X")).unwrap();
                Ok(())
            })
            .unwrap();
        assert_eq!(wb_revision, None, "checkpoints are not read-model changes");
        let view = store.read().unwrap();
        assert_eq!(view.revision().unwrap(), 0);
        let got = view.checkpoints("manifests/").unwrap();
        assert_eq!(got, vec![("manifests/file/a.yaml".to_string(), b"A".to_vec()), ("manifests/file/b.yaml".to_string(), b"B".to_vec())]);
        drop(view);
        store
            .write(schema::Timestamp(2), |wb| {
                wb.put_checkpoint("manifests/file/a.yaml", None).unwrap();
                Ok(())
            })
            .unwrap();
        let keys: Vec<String> = store.read().unwrap().checkpoints("").unwrap().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec!["manifests/file/b.yaml", "other/x"]);
        // Reopening keeps them (they are durable like the records).
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.read().unwrap().checkpoints("manifests/").unwrap().len(), 1);
    }

    #[test]
    fn source_entries_read_as_bytes_equal_those_read_as_strings() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        // A name with bytes the natural key escapes (0x00, 0x01) takes the decoding path.
        store
            .write(schema::Timestamp(5), |wb| {
                for (name, version) in [("a", "1"), ("b\u{1}c", "2"), ("d\u{0}", "3")] {
                    crate::test_support::zone_version(wb, name, version, schema::Timestamp(5));
                }
                Ok(())
            })
            .unwrap();
        let view = store.read().unwrap();
        let mut as_str = Vec::new();
        view.for_each_source(KindId::Zone, |ns, name, v| {
            as_str.push((ns.as_bytes().to_vec(), name.as_bytes().to_vec(), v.as_bytes().to_vec()))
        })
        .unwrap();
        let mut as_bytes = Vec::new();
        view.for_each_source_bytes(KindId::Zone, |ns, name, v| {
            as_bytes.push((ns.to_vec(), name.to_vec(), v.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(as_str.len(), 3);
        assert_eq!(as_bytes, as_str);
        assert!(as_bytes.iter().any(|(_, name, v)| name == b"b\x01c" && v == b"2"), "{as_bytes:?}");
        // The reader stops at the callback's error and returns it.
        let mut seen = 0;
        let err = view
            .for_each_source_bytes(KindId::Zone, |_, _, _| {
                seen += 1;
                Err(StorageError::Corrupt("stop".into()))
            })
            .unwrap_err();
        assert_eq!((seen, err.to_string().contains("stop")), (1, true), "{err}");
    }

    /// A seal stays current across batches that write only checkpoints, and stops being current
    /// with any later write of a source entry: an upsert at a new version, one in the same batch
    /// after the seal, a delete.
    #[test]
    fn a_seal_is_current_until_a_source_entry_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let sealed = |store: &Store| store.read().unwrap().checkpoints_sealed("m/seal").unwrap();
        let write = |store: &Store, f: &dyn Fn(&mut WriteBatch<'_>)| {
            store
                .write(schema::Timestamp(5), |wb| {
                    f(wb);
                    Ok(())
                })
                .unwrap()
        };
        assert!(!sealed(&store), "no seal");
        write(&store, &|wb| {
            crate::test_support::zone_version(wb, "a", "1", schema::Timestamp(5));
            wb.seal_checkpoints("m/seal").unwrap();
        });
        assert!(sealed(&store), "sealed after the batch's own source write");
        write(&store, &|wb| wb.put_checkpoint("m/file", Some(b"F")).unwrap());
        assert!(sealed(&store), "a checkpoint is no source change");
        write(&store, &|wb| crate::test_support::zone_version(wb, "a", "2", schema::Timestamp(5)));
        assert!(!sealed(&store), "a new version of a source entry");
        write(&store, &|wb| wb.seal_checkpoints("m/seal").unwrap());
        assert!(sealed(&store));
        write(&store, &|wb| {
            wb.seal_checkpoints("m/seal").unwrap();
            crate::test_support::zone_version(wb, "b", "1", schema::Timestamp(5));
        });
        assert!(!sealed(&store), "a source written after the seal in the same batch");
        write(&store, &|wb| wb.seal_checkpoints("m/seal").unwrap());
        let src = crate::SourceRef { kind: KindId::Zone, namespace: "poc".into(), name: "b".into() };
        write(&store, &|wb| assert_eq!(wb.delete(&src, schema::Timestamp(6)).unwrap(), crate::Outcome::Deleted));
        assert!(!sealed(&store), "a delete");
        write(&store, &|wb| wb.put_checkpoint("m/seal", Some(b"garbage")).unwrap());
        assert!(!sealed(&store), "a seal that does not decode");
        drop(store);
        // Durable: the count and the seal survive a reopen.
        let store = Store::open(dir.path()).unwrap();
        write(&store, &|wb| wb.seal_checkpoints("m/seal").unwrap());
        drop(store);
        assert!(sealed(&Store::open(dir.path()).unwrap()));
    }

    #[test]
    fn encode_and_decode_round_trip_and_refuse_garbage() {
        let bytes = encode(&("dir", 7u64));
        assert_eq!(decode::<(String, u64)>(&bytes, "state").unwrap(), ("dir".to_string(), 7));
        let err = decode::<(String, u64)>(&[0xff, 0xff, 0xff], "state").unwrap_err();
        assert!(err.to_string().contains("state"), "{err}");
    }
}
