//! Snapshots: a portable, checksummed copy of the whole read model (DESIGN decision 12).
//!
//! [`export`] writes every record of every kind exactly as stored (natural key + [`Envelope`]
//! bytes, which carry times, links and source) and the `sources` table, all read from ONE
//! [`ReadView`], so a snapshot is one consistent revision. [`Store::restore`] writes them into an
//! empty store and rebuilds every index and counter from the records through the same erased
//! per-kind code as the write path, so a restored store answers queries byte-identically (same
//! global IDs, same times). [`verify`] checks structure, checksum and decodability.
//!
//! # File format (format version 1)
//!
//! All integers little-endian.
//!
//! | part | bytes |
//! |---|---|
//! | magic | 8: `CPSNAP\r\n` |
//! | format version | `u32` ([`FORMAT_VERSION`]) |
//! | header length | `u32` |
//! | header | postcard [`Header`]: read-model [`crate::SCHEMA_VERSION`], revision, creation time, per-kind record counts |
//! | body length | `u64` |
//! | body | zstd-compressed postcard `Body`: per kind (by name) its records as (natural key bytes, envelope bytes) in key order, then its `sources` entries as (`Key(namespace, name)` bytes, source entry bytes) |
//! | trailer | 32: SHA-256 of every byte before it |
//!
//! Checks, in this order, each with its own message: magic ("not a snapshot file"), format
//! version ("snapshot format version N is not supported"), lengths ("truncated"), checksum
//! ("checksum mismatch: the file is corrupt"), read-model schema version ("written by read-model
//! schema version N"), decodability of the body and of every envelope.
//!
//! The search index is not part of a snapshot: it is derived data. `control-plane snapshot
//! restore` builds it right after the records (and any start rebuilds a missing or stale one).
//!
//! # Version changes
//! - Format version 1: first version.
//!
//! A snapshot of another read-model schema version is refused on restore (no migration exists
//! yet); a future layout change either adds a migration here or bumps the refusal message.

use crate::codec::{decode, encode};
use crate::read::ReadView;
use crate::tables;
use crate::write::KindTable;
use crate::{Envelope, StorageError, Store, SCHEMA_VERSION};
use redb::ReadableTable;
use schema::{Key, KindId, Timestamp};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// The magic bytes that open every snapshot file.
pub const MAGIC: &[u8; 8] = b"CPSNAP\r\n";
/// The snapshot file format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;
const TRAILER: usize = 32;
const ZSTD_LEVEL: i32 = 3;

/// The uncompressed header of a snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The read-model schema version ([`crate::SCHEMA_VERSION`]) of the exporting store.
    pub schema_version: u64,
    /// The store revision the snapshot reflects.
    pub revision: u64,
    /// When the snapshot was taken.
    pub created_at: Timestamp,
    /// Records per kind (kind name, count), in [`KindId::ALL`] order.
    pub counts: Vec<(String, u64)>,
}

#[derive(Serialize, Deserialize)]
struct Section {
    kind: String,
    records: Vec<(Vec<u8>, Vec<u8>)>,
    sources: Vec<(Vec<u8>, Vec<u8>)>,
}

#[derive(Serialize, Deserialize)]
struct Body {
    sections: Vec<Section>,
}

/// Why a snapshot cannot be read. Each variant has its own message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The file does not start with [`MAGIC`].
    #[error("not a snapshot file (bad magic bytes)")]
    NotASnapshot,
    /// The file is shorter than its lengths say.
    #[error("snapshot is truncated: {0}")]
    Truncated(String),
    /// The SHA-256 trailer does not match the content.
    #[error("snapshot checksum mismatch: the file is corrupt (bit flip or partial overwrite)")]
    Checksum,
    /// A format version this build does not read.
    #[error("snapshot format version {found} is not supported (this build reads version {expected})")]
    FormatVersion {
        /// Version in the file.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
    /// A read-model schema version this build cannot restore (no migration).
    #[error(
        "snapshot was written by read-model schema version {found}; this build uses version {expected} and has no migration: \
         rebuild the data directory from the source instead"
    )]
    SchemaVersion {
        /// Version in the header.
        found: u64,
        /// [`crate::SCHEMA_VERSION`].
        expected: u64,
    },
    /// The checksum matches but the content does not decode (a writer bug or a foreign file).
    #[error("snapshot content is malformed: {0}")]
    Malformed(String),
    /// Restoring into a store that is not empty.
    #[error("the target store is not empty")]
    NotEmpty,
    /// The store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// Reading or writing the snapshot stream failed.
    #[error("I/O error: {0}")]
    Io(String),
}

/// What [`export`] wrote or [`verify`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The header.
    pub header: Header,
    /// Total file size in bytes.
    pub bytes: u64,
}

/// A verified, decoded snapshot, ready for [`Store::restore`].
pub struct Snapshot {
    /// The header.
    pub header: Header,
    body: Body,
}

/// Writes a snapshot of `view` (one consistent revision) to `out`, stamped `created_at`.
///
/// Holds the whole snapshot in memory while writing (a 100k-object world is tens of MB).
///
/// # Errors
/// [`SnapshotError::Storage`] on read failures, [`SnapshotError::Io`] when writing fails.
pub fn export(view: &ReadView, created_at: Timestamp, out: &mut impl std::io::Write) -> Result<Summary, SnapshotError> {
    let (revision, sections) = view.raw_sections()?;
    let mut counts = Vec::new();
    let mut body = Body { sections: Vec::new() };
    for (kind, records, sources) in sections {
        counts.push((kind.name().to_string(), records.len() as u64));
        body.sections.push(Section { kind: kind.name().to_string(), records, sources });
    }
    let header = Header { schema_version: SCHEMA_VERSION, revision, created_at, counts };
    let bytes = encode_file(FORMAT_VERSION, &header, &body)?;
    out.write_all(&bytes).map_err(|e| SnapshotError::Io(e.to_string()))?;
    out.flush().map_err(|e| SnapshotError::Io(e.to_string()))?;
    Ok(Summary { header, bytes: bytes.len() as u64 })
}

fn encode_file(format: u32, header: &Header, body: &Body) -> Result<Vec<u8>, SnapshotError> {
    let h = encode(header);
    let b = zstd::bulk::compress(&encode(body), ZSTD_LEVEL).map_err(|e| SnapshotError::Io(format!("compressing: {e}")))?;
    let mut v = Vec::with_capacity(8 + 4 + 4 + h.len() + 8 + b.len() + TRAILER);
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(&format.to_le_bytes());
    v.extend_from_slice(&(h.len() as u32).to_le_bytes());
    v.extend_from_slice(&h);
    v.extend_from_slice(&(b.len() as u64).to_le_bytes());
    v.extend_from_slice(&b);
    let sum = Sha256::digest(&v);
    v.extend_from_slice(&sum);
    Ok(v)
}

/// Checks and decodes a snapshot file's bytes: magic, format version, lengths, checksum,
/// read-model schema version, and that the body and every envelope decode.
///
/// # Errors
/// The [`SnapshotError`] variant naming the first failed check.
pub fn decode_file(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    if bytes.len() < MAGIC.len() {
        return if MAGIC.starts_with(bytes) && !bytes.is_empty() {
            Err(SnapshotError::Truncated(format!("{} bytes, shorter than the magic", bytes.len())))
        } else {
            Err(SnapshotError::NotASnapshot)
        };
    }
    if &bytes[..8] != MAGIC {
        return Err(SnapshotError::NotASnapshot);
    }
    let short = |what: &str| SnapshotError::Truncated(format!("{} bytes end inside the {what}", bytes.len()));
    let format = u32::from_le_bytes(bytes.get(8..12).ok_or_else(|| short("format version"))?.try_into().expect("4 bytes"));
    if format != FORMAT_VERSION {
        return Err(SnapshotError::FormatVersion { found: format, expected: FORMAT_VERSION });
    }
    let hlen = u32::from_le_bytes(bytes.get(12..16).ok_or_else(|| short("header length"))?.try_into().expect("4 bytes")) as usize;
    let hend = 16usize.checked_add(hlen).ok_or_else(|| short("header"))?;
    let header_bytes = bytes.get(16..hend).ok_or_else(|| short("header"))?;
    let blen_bytes = bytes.get(hend..hend + 8).ok_or_else(|| short("body length"))?;
    let blen = u64::from_le_bytes(blen_bytes.try_into().expect("8 bytes"));
    let bstart = hend + 8;
    let bend = usize::try_from(blen).ok().and_then(|l| bstart.checked_add(l)).ok_or_else(|| short("body"))?;
    if bytes.len() < bend {
        return Err(short("body"));
    }
    let expected_len = bend + TRAILER;
    if bytes.len() < expected_len {
        return Err(short("checksum trailer"));
    }
    if bytes.len() > expected_len {
        return Err(SnapshotError::Malformed(format!("{} bytes after the checksum trailer", bytes.len() - expected_len)));
    }
    if Sha256::digest(&bytes[..bend]).as_slice() != &bytes[bend..] {
        return Err(SnapshotError::Checksum);
    }
    let header: Header = decode(header_bytes, "snapshot header").map_err(|e| SnapshotError::Malformed(e.to_string()))?;
    if header.schema_version != SCHEMA_VERSION {
        return Err(SnapshotError::SchemaVersion { found: header.schema_version, expected: SCHEMA_VERSION });
    }
    let raw = zstd::stream::decode_all(&bytes[bstart..bend]).map_err(|e| SnapshotError::Malformed(format!("decompressing: {e}")))?;
    let body: Body = decode(&raw, "snapshot body").map_err(|e| SnapshotError::Malformed(e.to_string()))?;
    let kinds = KindTable::new();
    for s in &body.sections {
        let kind = KindId::from_name(&s.kind).ok_or_else(|| SnapshotError::Malformed(format!("unknown kind {}", s.kind)))?;
        let ops = kinds.get(kind).ok_or_else(|| SnapshotError::Malformed(format!("kind {} is not registered", s.kind)))?;
        let counted = header.counts.iter().find(|(k, _)| k == &s.kind).map(|(_, c)| *c);
        if counted != Some(s.records.len() as u64) {
            return Err(SnapshotError::Malformed(format!("{}: header count {counted:?}, {} records", s.kind, s.records.len())));
        }
        for (k, v) in &s.records {
            let env: Envelope = decode(v, kind.name()).map_err(|e| SnapshotError::Malformed(e.to_string()))?;
            ops.entries(&Key::from_bytes(k.clone()), &env).map_err(|e| SnapshotError::Malformed(e.to_string()))?;
        }
    }
    Ok(Snapshot { header, body })
}

/// [`decode_file`], returning the summary only.
///
/// # Errors
/// As [`decode_file`].
pub fn verify(bytes: &[u8]) -> Result<Summary, SnapshotError> {
    let s = decode_file(bytes)?;
    Ok(Summary { header: s.header, bytes: bytes.len() as u64 })
}

impl ReadView {
    /// The time of the last commit that changed something (`None` for an empty store).
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn last_commit(&self) -> Result<Option<Timestamp>, StorageError> {
        let meta = self.txn().open_table(tables::META)?;
        let v = meta.get("last_commit")?.map(|v| v.value());
        Ok(v.map(|ns| Timestamp(ns as i64)))
    }

    /// Every record and source entry, raw, per kind in [`KindId::ALL`] order, with the revision.
    #[allow(clippy::type_complexity)]
    pub(crate) fn raw_sections(&self) -> Result<(u64, Vec<(KindId, Vec<(Vec<u8>, Vec<u8>)>, Vec<(Vec<u8>, Vec<u8>)>)>), StorageError> {
        let revision = self.revision()?;
        let sources = self.txn().open_table(tables::SOURCES)?;
        let mut out = Vec::new();
        for &kind in KindId::ALL {
            let t = self.txn().open_table(tables::records(kind))?;
            let mut records = Vec::new();
            for item in t.iter()? {
                let (k, v) = item?;
                records.push((k.value().to_vec(), v.value().to_vec()));
            }
            let mut srcs = Vec::new();
            let (start, end) = ([kind.code()], [kind.code() + 1]);
            for item in sources.range(&start[..]..&end[..])? {
                let (k, v) = item?;
                srcs.push((k.value()[1..].to_vec(), v.value().to_vec()));
            }
            out.push((kind, records, srcs));
        }
        Ok((revision, out))
    }
}

impl Store {
    /// Writes a decoded snapshot into this store, which must be empty (revision 0, no records),
    /// in one write transaction: records and source entries as stored, every ordering and
    /// secondary index entry and counter rebuilt from the records, the snapshot's revision. Then
    /// checks the store invariants.
    ///
    /// # Errors
    /// [`SnapshotError::NotEmpty`] for a store with data, [`SnapshotError::Malformed`] when a
    /// record does not decode or the invariants fail afterwards, [`SnapshotError::Storage`] on
    /// redb failures (nothing is committed then).
    pub fn restore(&self, snap: &Snapshot) -> Result<(), SnapshotError> {
        {
            let view = self.read()?;
            let (revision, sections) = view.raw_sections()?;
            if revision != 0 || sections.iter().any(|(_, r, s)| !r.is_empty() || !s.is_empty()) {
                return Err(SnapshotError::NotEmpty);
            }
        }
        let kinds = KindTable::new();
        let txn = self.db.begin_write().map_err(StorageError::from)?;
        {
            let mut order = txn.open_table(tables::ORDER).map_err(StorageError::from)?;
            let mut refs = txn.open_table(tables::REFS).map_err(StorageError::from)?;
            let mut sources = txn.open_table(tables::SOURCES).map_err(StorageError::from)?;
            let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
            for s in &snap.body.sections {
                let kind = KindId::from_name(&s.kind).ok_or_else(|| SnapshotError::Malformed(format!("unknown kind {}", s.kind)))?;
                let ops = kinds.get(kind).ok_or_else(|| SnapshotError::Malformed(format!("kind {} is not registered", s.kind)))?;
                let mut table = txn.open_table(tables::records(kind)).map_err(StorageError::from)?;
                for (k, v) in &s.records {
                    let key = Key::from_bytes(k.clone());
                    let env: Envelope = decode(v, kind.name())?;
                    let e = ops.entries(&key, &env)?;
                    table.insert(k.as_slice(), v.as_slice()).map_err(StorageError::from)?;
                    for o in &e.order {
                        order.insert(o.as_slice(), ()).map_err(StorageError::from)?;
                    }
                    for r in &e.refs {
                        refs.insert(r.as_slice(), ()).map_err(StorageError::from)?;
                    }
                    for sc in &e.scopes {
                        *counts.entry(tables::count_key(kind, sc)).or_default() += 1;
                    }
                }
                for (k, v) in &s.sources {
                    let mut sk = vec![kind.code()];
                    sk.extend_from_slice(k);
                    sources.insert(sk.as_slice(), v.as_slice()).map_err(StorageError::from)?;
                }
            }
            let mut ct = txn.open_table(tables::COUNTS).map_err(StorageError::from)?;
            for (k, n) in counts {
                ct.insert(k.as_slice(), n).map_err(StorageError::from)?;
            }
            let mut meta = txn.open_table(tables::META).map_err(StorageError::from)?;
            meta.insert("revision", snap.header.revision).map_err(StorageError::from)?;
            meta.insert("last_commit", snap.header.created_at.0.max(0) as u64).map_err(StorageError::from)?;
        }
        txn.commit().map_err(StorageError::from)?;
        let problems = self.read()?.check_invariants()?;
        if !problems.is_empty() {
            return Err(SnapshotError::Malformed(format!("restored store violates invariants: {}", problems.join("; "))));
        }
        Ok(())
    }
}

#[doc(hidden)]
/// Test support: encodes a snapshot with an arbitrary format version and header (valid
/// checksum), to exercise the version checks.
pub fn encode_for_tests(format: u32, bytes: &[u8], schema_version: u64) -> Vec<u8> {
    let snap = decode_file(bytes).expect("a valid snapshot");
    let header = Header { schema_version, ..snap.header };
    encode_file(format, &header, &snap.body).expect("encodes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty_snapshot() -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut out = Vec::new();
        export(&store.read().unwrap(), Timestamp(7), &mut out).unwrap();
        out
    }

    #[test]
    fn empty_store_round_trips() {
        let bytes = empty_snapshot();
        let s = verify(&bytes).unwrap();
        assert_eq!(s.header.revision, 0);
        assert_eq!(s.header.counts.len(), KindId::ALL.len());
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.restore(&decode_file(&bytes).unwrap()).unwrap();
    }

    #[test]
    fn damaged_files_have_distinct_errors() {
        let bytes = empty_snapshot();
        assert!(matches!(decode_file(b"hello world, not a snapshot"), Err(SnapshotError::NotASnapshot)));
        assert!(matches!(decode_file(&bytes[..bytes.len() - 1]), Err(SnapshotError::Truncated(_))));
        assert!(matches!(decode_file(&bytes[..20]), Err(SnapshotError::Truncated(_))));
        let mut flipped = bytes.clone();
        let at = flipped.len() - 40;
        flipped[at] ^= 0x10;
        assert!(matches!(decode_file(&flipped), Err(SnapshotError::Checksum)));
        assert!(matches!(decode_file(&encode_for_tests(2, &bytes, SCHEMA_VERSION)), Err(SnapshotError::FormatVersion { found: 2, .. })));
        assert!(matches!(
            decode_file(&encode_for_tests(FORMAT_VERSION, &bytes, SCHEMA_VERSION + 1)),
            Err(SnapshotError::SchemaVersion { .. })
        ));
    }
}
