//! Snapshots: a portable, checksummed copy of the whole read model, for backups and analysis.
//!
//! [`export`] writes every record of every kind exactly as stored (natural key + [`Envelope`]
//! bytes, which carry times, links and source) and the `sources` table, all read from ONE
//! [`ReadView`], so a snapshot is one consistent revision. [`Store::restore`] writes them into an
//! empty store and rebuilds every index and counter from the records through the same erased
//! per-kind code as the write path, so a restored store answers queries byte-identically (same
//! global IDs, same times). [`verify`] checks structure, checksum and decodability.
//!
//! # File format (format version 4)
//!
//! All integers little-endian. The layout can be written front to back while records are read,
//! so an online export streams (nothing but zstd's window and the job its one worker thread
//! compresses are buffered: a few MiB at level 3).
//!
//! | part | bytes |
//! |---|---|
//! | magic | 8: `CPSNAP\r\n` |
//! | format version | `u32` ([`FORMAT_VERSION`]) |
//! | header length | `u32` |
//! | header | postcard [`Header`]: read-model [`crate::SCHEMA_VERSION`], revision, creation time, last commit time, per-kind record counts, per-kind derivation versions, the source the store completed an initial sync of |
//! | body | one zstd frame; decompressed, a sequence of frames, each a `u32` length and a postcard `Frame`: per kind (in [`KindId::ALL`] order) a `Section` naming it, its records as `Record(natural key bytes, envelope bytes)` in key order, its `sources` entries as `Source(Key(namespace, name) bytes, source entry bytes)`, its source documents as `Document(Key(namespace, name) bytes, stored document)` (after its `Dictionary(id, bytes)` when the kind has one); then one `End` |
//! | end marker | 8: `CPSNEND\n`, then `u64`: the offset of the end marker (file length − 48) |
//! | trailer | 32: SHA-256 of every byte before it |
//!
//! Checks, in this order, each with its own message: magic ("not a snapshot file"), format
//! version ("snapshot format version N is not supported"), header and end marker ("truncated":
//! a file cut anywhere lacks the end marker at its end), checksum ("checksum mismatch: the file
//! is corrupt"), read-model schema version ("written by read-model schema version N"),
//! decodability of the body, of every frame and of every envelope, and the header's counts.
//!
//! The search index is not part of a snapshot: it is derived data. `control-plane snapshot
//! restore` builds it right after the records (and any start rebuilds a missing or stale one).
//! Nor are the index entries: a restore derives them, with the natural-key orders only; the
//! other ordering indexes are built again by the server that opens the store, in the background
//! (see [`crate::tables`]).
//!
//! # Version changes
//! - Format version 1 (never released): a length-prefixed body; refused as unsupported.
//! - Format version 2: streamed body of frames, end marker before the trailer. Still read: its
//!   records are version 1 ([`crate::versions::IMPLICIT_VERSION`]) of every kind.
//! - Format version 3: the header lists each kind's derivation version
//!   ([`schema::Kind::VERSION`]). [`Store::restore`] writes the records of the kinds whose
//!   version is this build's and marks the others re-deriving ([`crate::versions`]): the source
//!   brings them back, as after opening an old data directory. [`verify`] does not decode them.
//! - Format version 4: the header names the source the exported store completed an initial sync
//!   of ([`Header::synced_from`], at most [`crate::sync::MAX_SOURCE_BYTES`]); a restore records
//!   it ([`crate::sync`]), so a server started on the restored store with that same source
//!   serves at once and catches up behind. Format 2 and 3 files restore as never synced: the
//!   first start waits for its initial sync. The body carries each kind's source documents
//!   (`Document` frames, [`crate::documents`]; each belongs to a source entry of its section),
//!   so a restored store re-derives a kind from the volume; older files have none.
//! - Format version 5: a section carries its kind's document dictionary (`Dictionary` frame,
//!   [`crate::documents::Dictionaries`]) when the kind has one; a document compressed with it
//!   names it, and a document naming a dictionary its section lacks is refused. Older files
//!   have none (their documents are compressed alone).
//! - Format version 6: after the sections, the change log ([`crate::history`]): its entries as
//!   `History(position, value)` frames in position order, then one `HistoryState(floor revision,
//!   floor index, newest commit time, pruned count)`; a restore writes them and derives their
//!   index entries and counters, under a new log identity (no position of the exporting server
//!   is valid on the restored store). Older files restore with an empty history.
//!
//! The header's read-model schema version says how records and source entries are encoded. A
//! snapshot from [`OLDEST_SCHEMA_VERSION`] up to [`crate::SCHEMA_VERSION`] is restored (the
//! layout changes between them are in derived tables only, which a restore rebuilds); any other
//! is refused. A future change of the record encoding raises [`OLDEST_SCHEMA_VERSION`] or adds a
//! conversion here.

use crate::codec::{decode as decode_record, encode};
use crate::read::ReadView;
use crate::tables;
use crate::write::KindTable;
use crate::{Envelope, StorageError, Store, SCHEMA_VERSION};
use redb::ReadableTable;
use schema::{Key, KindId, Timestamp};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Write;

/// The magic bytes that open every snapshot file.
pub const MAGIC: &[u8; 8] = b"CPSNAP\r\n";
/// The marker before the trailer; a file without it at `len - 48` is truncated.
pub const END_MAGIC: &[u8; 8] = b"CPSNEND\n";
/// The oldest read-model schema version ([`crate::SCHEMA_VERSION`]) whose snapshots this build
/// restores: versions 1 to 3 encode records and source entries alike (see the store's version
/// changes).
pub const OLDEST_SCHEMA_VERSION: u64 = 1;
/// The snapshot file format version this build writes.
pub const FORMAT_VERSION: u32 = 6;
/// The oldest snapshot file format version this build reads.
pub const OLDEST_FORMAT_VERSION: u32 = 2;
const TRAILER: usize = 32;
/// End marker + its offset + the SHA-256 trailer.
const TAIL: usize = 8 + 8 + TRAILER;
const ZSTD_LEVEL: i32 = 3;
/// Upper bound of one frame, in bytes (a record is a few KiB; this guards against garbage
/// lengths, and bounds `source.maxDocumentBytes`: [`MAX_SOURCE_DOCUMENT_BYTES`]).
const MAX_FRAME: usize = 64 << 20;
/// The largest `source.maxDocumentBytes` a configuration may set: half a snapshot's largest
/// frame, so that every document and record stored (about the size of its source document at
/// most) is exported in a frame a restore reads.
pub const MAX_SOURCE_DOCUMENT_BYTES: usize = MAX_FRAME / 2;
/// Upper bound of the decompressed body, as a multiple of the compressed body's size: exports
/// compress about 9 : 1 (145 MB for 1.3 GB of frames at 1M objects), and zstd can reach
/// 1000s : 1 on crafted input, which a header's counts alone (the file's own claim) do not bound.
const MAX_EXPANSION: u64 = 64;
/// The decompressed body a small file may always have, whatever its compressed size (bytes).
const MIN_BODY_LIMIT: u64 = 64 << 20;
/// What a frame costs in memory beyond its bytes, charged against the body's limit: the owned
/// pair of a record or source entry (48 bytes, up to twice that while its list grows) and the
/// allocator's share of its two buffers. A body of millions of empty frames is bounded too.
const FRAME_OVERHEAD: u64 = 160;

/// The uncompressed header of a snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// The read-model schema version ([`crate::SCHEMA_VERSION`]) of the exporting store.
    pub schema_version: u64,
    /// The store revision the snapshot reflects.
    pub revision: u64,
    /// When the snapshot was taken.
    pub created_at: Timestamp,
    /// When the exported store last committed a change (`None` for an empty store); a restored
    /// store reports it as its last commit.
    pub last_commit: Option<Timestamp>,
    /// Records per kind (kind name, count), in [`KindId::ALL`] order.
    pub counts: Vec<(String, u64)>,
    /// The derivation version ([`schema::Kind::VERSION`]) of each kind's records (kind name,
    /// version), in [`KindId::ALL`] order. Format 2 files: version 1 of every kind.
    pub kind_versions: Vec<(String, u32)>,
    /// The identity of the source the exported store had completed an initial sync of
    /// ([`crate::SyncState`]); `None` when it had not, and in format 2 and 3 files.
    pub synced_from: Option<String>,
}

impl Header {
    /// The derivation version of `kind`'s records in the snapshot (`None`: not listed).
    pub fn kind_version(&self, kind: KindId) -> Option<u32> {
        self.kind_versions.iter().find(|(k, _)| k == kind.name()).map(|(_, v)| *v)
    }

    /// The kinds whose records were written under another derivation version than this
    /// build's: restored by re-deriving them from the source.
    pub fn rederived_kinds(&self) -> Vec<KindId> {
        KindTable::new().versions().into_iter().filter(|&(k, v)| self.kind_version(k) != Some(v)).map(|(k, _)| k).collect()
    }
}

/// The header of format version 2 (no derivation versions).
#[derive(Serialize, Deserialize)]
struct HeaderV2 {
    schema_version: u64,
    revision: u64,
    created_at: Timestamp,
    last_commit: Option<Timestamp>,
    counts: Vec<(String, u64)>,
}

/// The header of format version 3 (no source).
#[derive(Serialize, Deserialize)]
struct HeaderV3 {
    schema_version: u64,
    revision: u64,
    created_at: Timestamp,
    last_commit: Option<Timestamp>,
    counts: Vec<(String, u64)>,
    kind_versions: Vec<(String, u32)>,
}

impl From<HeaderV2> for HeaderV3 {
    /// Format 2 predates derivation versions: version 1 of every kind.
    fn from(h: HeaderV2) -> HeaderV3 {
        let implicit = KindId::ALL.iter().map(|k| (k.name().to_string(), crate::versions::IMPLICIT_VERSION)).collect();
        HeaderV3 {
            schema_version: h.schema_version,
            revision: h.revision,
            created_at: h.created_at,
            last_commit: h.last_commit,
            counts: h.counts,
            kind_versions: implicit,
        }
    }
}

impl From<HeaderV3> for Header {
    /// Format 3 predates the source: never synced.
    fn from(h: HeaderV3) -> Header {
        Header {
            schema_version: h.schema_version,
            revision: h.revision,
            created_at: h.created_at,
            last_commit: h.last_commit,
            counts: h.counts,
            kind_versions: h.kind_versions,
            synced_from: None,
        }
    }
}

/// One unit of the decompressed body (see the module docs). Byte strings are written as one
/// slice (`serde_bytes`), which postcard encodes as it encodes a sequence of bytes: a length,
/// then the bytes.
#[derive(Serialize, Deserialize)]
enum Frame<'a> {
    Section(&'a str),
    Record(#[serde(with = "serde_bytes")] &'a [u8], #[serde(with = "serde_bytes")] &'a [u8]),
    Source(#[serde(with = "serde_bytes")] &'a [u8], #[serde(with = "serde_bytes")] &'a [u8]),
    End,
    /// A source document ([`crate::documents`]): `Key(namespace, name)` bytes and the stored
    /// value (format 4).
    Document(#[serde(with = "serde_bytes")] &'a [u8], #[serde(with = "serde_bytes")] &'a [u8]),
    /// The kind's document dictionary ([`crate::documents`]): its id and bytes (format 5).
    Dictionary(u32, #[serde(with = "serde_bytes")] &'a [u8]),
    /// An entry of the change log ([`crate::history`]): its position and value, after every
    /// section, in position order (format 6).
    History(#[serde(with = "serde_bytes")] &'a [u8], #[serde(with = "serde_bytes")] &'a [u8]),
    /// The change log's floor (revision, index), newest commit time and pruned count, after
    /// its entries (format 6).
    HistoryState(u64, u32, i64, u64),
}

#[derive(Clone)]
struct Section {
    kind: KindId,
    records: Vec<(Vec<u8>, Vec<u8>)>,
    sources: Vec<(Vec<u8>, Vec<u8>)>,
    documents: Vec<(Vec<u8>, Vec<u8>)>,
    /// The kind's document dictionary: id and bytes.
    dictionary: Option<(u32, Vec<u8>)>,
}

struct Body {
    sections: Vec<Section>,
    /// The change log's entries (position, value), in position order.
    history: Vec<(Vec<u8>, Vec<u8>)>,
    /// [`Frame::HistoryState`].
    history_state: Option<crate::history::LogState>,
}

/// Why a snapshot cannot be read. Each variant has its own message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The file does not start with [`MAGIC`].
    #[error("not a snapshot file (bad magic bytes)")]
    NotASnapshot,
    /// The file ends early (no end marker where it must be).
    #[error("snapshot is truncated: {0}")]
    Truncated(String),
    /// The SHA-256 trailer does not match the content.
    #[error("snapshot checksum mismatch: the file is corrupt (bit flip or partial overwrite)")]
    Checksum,
    /// A format version this build does not read.
    #[error("snapshot format version {found} is not supported (this build reads versions {OLDEST_FORMAT_VERSION} to {expected})")]
    FormatVersion {
        /// Version in the file.
        found: u32,
        /// The newest version this build reads.
        expected: u32,
    },
    /// A read-model schema version this build cannot restore (no migration).
    #[error(
        "snapshot was written by read-model schema version {found}; this build reads versions {OLDEST_SCHEMA_VERSION} to {expected}. \
         A newer snapshot needs the release that wrote it (or a newer one); otherwise rebuild the data directory from the source \
         (the read model is derived: start on an empty data directory)"
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

impl From<std::io::Error> for SnapshotError {
    fn from(e: std::io::Error) -> SnapshotError {
        SnapshotError::Io(e.to_string())
    }
}

/// What [`export`] wrote or [`verify`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The file format version ([`FORMAT_VERSION`] for what this build writes).
    pub format: u32,
    /// The header.
    pub header: Header,
    /// Total file size in bytes.
    pub bytes: u64,
}

/// A verified, decoded snapshot, ready for [`Store::restore`].
pub struct Snapshot {
    /// The file format version.
    pub format: u32,
    /// The header.
    pub header: Header,
    body: Body,
}

impl Snapshot {
    /// The records of kind `K` that a restore writes, decoded, in key order (none when the
    /// snapshot has no section of it).
    ///
    /// # Errors
    /// [`StorageError::Corrupt`] for a record that does not decode.
    pub(crate) fn stored<K: schema::Kind>(&self) -> Result<Vec<crate::Stored<K::Record>>, StorageError> {
        let section = self.body.sections.iter().find(|s| s.kind == K::ID);
        section.map_or(&[][..], |s| &s.records[..]).iter().map(|(k, v)| crate::read::stored::<K>(Key::from_bytes(k.clone()), v)).collect()
    }
}

/// A writer that hashes and counts what passes through it.
struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W: std::io::Write> std::io::Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn write_frame(out: &mut impl std::io::Write, frame: &Frame<'_>) -> std::io::Result<()> {
    let bytes = encode(frame);
    // A snapshot no restore reads is refused while it is written, not when it is needed.
    if bytes.len() > MAX_FRAME {
        let message = format!("a frame of {} bytes, longer than {MAX_FRAME}: no restore could read the snapshot", bytes.len());
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, message));
    }
    out.write_all(&(bytes.len() as u32).to_le_bytes())?;
    out.write_all(&bytes)
}

/// Streams a snapshot of `view` (one consistent revision) to `out`, stamped `created_at`,
/// reading records from the view's read transaction while writing; memory stays bounded
/// whatever the store's size. `out` is not buffered here (wrap files in a `BufWriter`).
///
/// # Errors
/// [`SnapshotError::Storage`] on read failures, [`SnapshotError::Io`] when writing fails (for
/// example a client that went away); whatever was written before is then incomplete and fails
/// [`verify`] as truncated.
pub fn export(view: &ReadView, created_at: Timestamp, out: impl std::io::Write) -> Result<Summary, SnapshotError> {
    let revision = view.revision()?;
    let counts = view.record_counts()?.into_iter().map(|(k, n)| (k.name().to_string(), n)).collect();
    let kind_versions = view.kind_versions()?.into_iter().map(|(k, v)| (k.name().to_string(), v)).collect();
    let sync = view.sync_state()?;
    let synced_from = sync.synced_at.and(sync.source);
    let header = Header {
        schema_version: SCHEMA_VERSION,
        revision,
        created_at,
        last_commit: view.last_commit()?,
        counts,
        kind_versions,
        synced_from,
    };
    let mut w = Hashing { inner: out, hasher: Sha256::new(), written: 0 };
    write_prefix(&mut w, FORMAT_VERSION, &header)?;
    let mut z = zstd::stream::Encoder::new(&mut w, ZSTD_LEVEL)?;
    // Compression on a worker thread of zstd's while this one reads the store: the same frame
    // format, whatever the number of workers.
    z.multithread(1)?;
    view.visit_raw(|frame| write_frame(&mut z, &frame).map_err(SnapshotError::from))?;
    write_frame(&mut z, &Frame::End)?;
    z.finish()?;
    finish(&mut w).map(|bytes| Summary { format: FORMAT_VERSION, header, bytes })
}

fn write_prefix(w: &mut impl std::io::Write, format: u32, header: &Header) -> std::io::Result<()> {
    let h = match format {
        2 => encode(&HeaderV2 {
            schema_version: header.schema_version,
            revision: header.revision,
            created_at: header.created_at,
            last_commit: header.last_commit,
            counts: header.counts.clone(),
        }),
        3 => encode(&HeaderV3 {
            schema_version: header.schema_version,
            revision: header.revision,
            created_at: header.created_at,
            last_commit: header.last_commit,
            counts: header.counts.clone(),
            kind_versions: header.kind_versions.clone(),
        }),
        _ => encode(header),
    };
    w.write_all(MAGIC)?;
    w.write_all(&format.to_le_bytes())?;
    w.write_all(&(h.len() as u32).to_le_bytes())?;
    w.write_all(&h)
}

/// Writes the end marker and the trailer; returns the file length.
fn finish<W: std::io::Write>(w: &mut Hashing<W>) -> Result<u64, SnapshotError> {
    let at = w.written;
    w.write_all(END_MAGIC)?;
    w.write_all(&at.to_le_bytes())?;
    let sum = std::mem::take(&mut w.hasher).finalize();
    w.inner.write_all(&sum)?;
    w.inner.flush()?;
    Ok(at + TAIL as u64)
}

/// Checks and decodes a snapshot file's bytes: magic, format version, header, end marker,
/// checksum, read-model schema version, that the body, every frame and every envelope decode
/// and the counts match the header, and every check a restore makes of a section
/// ([`check_section`]: key order, source entries).
///
/// # Errors
/// The [`SnapshotError`] variant naming the first failed check.
pub fn decode_file(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    decode(bytes, true)
}

/// [`decode_file`] without decoding every envelope: for [`Store::restore`], which decodes each
/// record anyway while it writes it (a malformed one fails the restore, before anything is
/// committed), so records are decoded once, not twice.
///
/// # Errors
/// As [`decode_file`], except malformed envelopes (reported by [`Store::restore`]).
pub fn decode_for_restore(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    decode(bytes, false)
}

fn decode(bytes: &[u8], check_records: bool) -> Result<Snapshot, SnapshotError> {
    if bytes.is_empty() {
        return Err(SnapshotError::Truncated("the file is empty".into()));
    }
    if bytes.len() < MAGIC.len() {
        return if MAGIC.starts_with(bytes) {
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
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&format) {
        return Err(SnapshotError::FormatVersion { found: format, expected: FORMAT_VERSION });
    }
    let hlen = u32::from_le_bytes(bytes.get(12..16).ok_or_else(|| short("header length"))?.try_into().expect("4 bytes")) as usize;
    let hend = 16usize.checked_add(hlen).ok_or_else(|| short("header"))?;
    let header_bytes = bytes.get(16..hend).ok_or_else(|| short("header"))?;
    let body_end = bytes.len().checked_sub(TAIL).filter(|&e| e >= hend).ok_or_else(|| short("end marker"))?;
    let marker_ok = &bytes[body_end..body_end + 8] == END_MAGIC
        && u64::from_le_bytes(bytes[body_end + 8..body_end + 16].try_into().expect("8 bytes")) == body_end as u64;
    if !marker_ok {
        return Err(SnapshotError::Truncated(format!(
            "{} bytes and no end marker before the checksum (the file is cut short, has bytes appended, or its last 48 bytes are damaged)",
            bytes.len()
        )));
    }
    let sum_at = bytes.len() - TRAILER;
    // Checked before anything is decompressed: a damaged file of a few kilobytes must not expand
    // into gigabytes before it is refused.
    if Sha256::digest(&bytes[..sum_at]).as_slice() != &bytes[sum_at..] {
        return Err(SnapshotError::Checksum);
    }
    let (header, body) = decode_header_and_body(format, header_bytes, &bytes[hend..body_end])?;
    let kinds = KindTable::new();
    let rederived = header.rederived_kinds();
    if body.sections.len() != header.counts.len() {
        return Err(SnapshotError::Malformed(format!("{} sections, header counts {} kinds", body.sections.len(), header.counts.len())));
    }
    for s in &body.sections {
        let ops = kinds.get(s.kind).ok_or_else(|| SnapshotError::Malformed(format!("kind {} is not registered", s.kind.name())))?;
        let counted = counted(&header.counts, s.kind);
        if counted != Some(s.records.len() as u64) {
            return Err(SnapshotError::Malformed(format!("{}: header count {counted:?}, {} records", s.kind.name(), s.records.len())));
        }
        // The restore's checks, without writing (`verify`). Records of another derivation version
        // are not decoded: a restore leaves them out.
        if check_records && !rederived.contains(&s.kind) {
            check_section(s, |key, env| {
                ops.entries(key, env, tables::OrderSet::KEYS_ONLY)
                    .map(|_| ())
                    .map_err(|e| SnapshotError::Malformed(format!("{} {key}: {e}", s.kind.name())))
            })?;
        }
        if check_records {
            check_documents(s)?;
        }
    }
    Ok(Snapshot { format, header, body })
}

/// The header (of snapshot format `format`) and the body, decompressed and split into sections.
///
/// # Errors
/// [`SnapshotError::Malformed`] for a header or body that does not decode,
/// [`SnapshotError::SchemaVersion`] for a store layout this build does not read.
fn decode_header_and_body(format: u32, header_bytes: &[u8], compressed: &[u8]) -> Result<(Header, Body), SnapshotError> {
    let malformed = |e: StorageError| SnapshotError::Malformed(e.to_string());
    let header: Header = match format {
        2 => Header::from(HeaderV3::from(decode_record::<HeaderV2>(header_bytes, "snapshot header").map_err(malformed)?)),
        3 => Header::from(decode_record::<HeaderV3>(header_bytes, "snapshot header").map_err(malformed)?),
        _ => decode_record(header_bytes, "snapshot header").map_err(malformed)?,
    };
    if header.synced_from.as_ref().is_some_and(|s| s.len() > crate::sync::MAX_SOURCE_BYTES) {
        return Err(SnapshotError::Malformed(format!("the header's source is longer than {} bytes", crate::sync::MAX_SOURCE_BYTES)));
    }
    if !(OLDEST_SCHEMA_VERSION..=SCHEMA_VERSION).contains(&header.schema_version) {
        return Err(SnapshotError::SchemaVersion { found: header.schema_version, expected: SCHEMA_VERSION });
    }
    check_counts(&header.counts)?;
    let decompressing = |e: std::io::Error| SnapshotError::Malformed(format!("decompressing: {e}"));
    let limit = (compressed.len() as u64).saturating_mul(MAX_EXPANSION).max(MIN_BODY_LIMIT);
    let body = decode_body(zstd::stream::read::Decoder::with_buffer(compressed).map_err(decompressing)?, &header.counts, limit)?;
    Ok((header, body))
}

/// Splits the body, decompressed as it is read (no copy of the whole body in memory), into
/// sections of owned records and sources. `counts` (the header's records per kind) bound what is
/// kept: each kind has at most one section, and a section with more records than the header
/// counts for its kind, or more source entries (each points to a record of its own, store
/// invariant 4), is refused at its first frame too many, so a body holds at most what its header
/// announces; and the frames together hold at most `limit` bytes (the header's counts are the
/// file's own claim).
///
/// # Errors
/// [`SnapshotError::Malformed`] when the stream does not decompress, a frame is longer than
/// [`MAX_FRAME`] or cut short, does not decode, a kind has a second section, a section exceeds
/// its count, the frames exceed `limit`, or bytes follow the End frame.
fn decode_body(mut raw: impl std::io::Read, counts: &[(String, u64)], limit: u64) -> Result<Body, SnapshotError> {
    let malformed = |m: String| SnapshotError::Malformed(m);
    let read = |raw: &mut dyn std::io::Read, buf: &mut [u8], short: &dyn Fn() -> String| {
        raw.read_exact(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => malformed(short()),
            _ => malformed(format!("decompressing: {e}")),
        })
    };
    let mut sections: Vec<Section> = Vec::new();
    let mut history: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut history_state = None;
    let mut frame_bytes = Vec::new();
    let mut body_bytes: u64 = 0;
    loop {
        let mut len = [0u8; 4];
        read(&mut raw, &mut len, &|| "the body ends without an End frame".into())?;
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(malformed(format!("a frame of {len} bytes, longer than {MAX_FRAME}")));
        }
        body_bytes += 4 + len as u64 + FRAME_OVERHEAD;
        if body_bytes > limit {
            return Err(malformed(format!(
                "the body expands to more than {limit} bytes ({MAX_EXPANSION} times its compressed size, at least {MIN_BODY_LIMIT}; \
                 each frame counted with {FRAME_OVERHEAD} bytes of overhead)"
            )));
        }
        frame_bytes.resize(len, 0);
        read(&mut raw, &mut frame_bytes, &|| format!("a frame of {len} bytes overruns the body"))?;
        let frame: Frame<'_> = crate::codec::decode_borrowed(&frame_bytes, "a frame").map_err(|e| match e {
            StorageError::Corrupt(what) => malformed(what),
            e => SnapshotError::Storage(e),
        })?;
        match frame {
            Frame::Section(name) => {
                let kind = KindId::from_name(name).ok_or_else(|| malformed(format!("unknown kind {name}")))?;
                if sections.iter().any(|s| s.kind == kind) {
                    return Err(malformed(format!("{name}: a second section")));
                }
                sections.push(Section { kind, records: Vec::new(), sources: Vec::new(), documents: Vec::new(), dictionary: None });
            }
            Frame::Record(k, v) => push_counted(&mut sections, counts, SectionPart::Records, k, v)?,
            Frame::Source(k, v) => push_counted(&mut sections, counts, SectionPart::Sources, k, v)?,
            Frame::Document(k, v) => push_counted(&mut sections, counts, SectionPart::Documents, k, v)?,
            Frame::Dictionary(id, bytes) => {
                let section = sections.last_mut().ok_or_else(|| malformed("a document dictionary before any section".into()))?;
                if section.dictionary.is_some() {
                    return Err(malformed(format!("{}: a second document dictionary", section.kind.name())));
                }
                if bytes.len() > crate::documents::MAX_DICTIONARY_BYTES {
                    return Err(malformed(format!(
                        "{}: a document dictionary of {} bytes, larger than {}",
                        section.kind.name(),
                        bytes.len(),
                        crate::documents::MAX_DICTIONARY_BYTES
                    )));
                }
                section.dictionary = Some((id, bytes.to_vec()))
            }
            Frame::History(k, v) => push_history(&mut history, history_state.is_some(), k, v)?,
            Frame::HistoryState(revision, index, last_at, pruned) => {
                if history_state.is_some() {
                    return Err(malformed("a second change log state".into()));
                }
                let floor = crate::history::LogPosition { revision, index };
                history_state = Some(crate::history::LogState { floor, last_at, pruned });
            }
            Frame::End => {
                let mut after = [0u8; 1];
                return match raw.read(&mut after).map_err(|e| malformed(format!("decompressing: {e}")))? {
                    0 => Ok(Body { sections, history, history_state }),
                    _ => Err(malformed("bytes after the End frame".into())),
                };
            }
        }
    }
}

/// Adds a change log entry of a body, refusing one that does not decode, comes after the log's
/// state (`ended`) or is not after the one before.
fn push_history(history: &mut Vec<(Vec<u8>, Vec<u8>)>, ended: bool, k: &[u8], v: &[u8]) -> Result<(), SnapshotError> {
    crate::history::check_entry(k, v).map_err(|e| SnapshotError::Malformed(format!("a change log entry: {e}")))?;
    if ended || history.last().is_some_and(|(last, _)| last.as_slice() >= k) {
        return Err(SnapshotError::Malformed("change log entries out of order".into()));
    }
    history.push((k.to_vec(), v.to_vec()));
    Ok(())
}

/// The entries of a section a frame adds to.
#[derive(Clone, Copy)]
enum SectionPart {
    Records,
    Sources,
    Documents,
}

/// Adds a record, source entry or source document to the last section, refusing one before any
/// section and more than the header counts records of its kind.
fn push_counted(sections: &mut [Section], counts: &[(String, u64)], part: SectionPart, k: &[u8], v: &[u8]) -> Result<(), SnapshotError> {
    let (one, more) = match part {
        SectionPart::Records => ("a record", "records than the header counts"),
        SectionPart::Sources => ("a source", "source entries than the header counts records"),
        SectionPart::Documents => ("a document", "source documents than the header counts records"),
    };
    let section = sections.last_mut().ok_or_else(|| SnapshotError::Malformed(format!("{one} before any section")))?;
    let counted = counted(counts, section.kind).unwrap_or(0);
    let entries = match part {
        SectionPart::Records => &mut section.records,
        SectionPart::Sources => &mut section.sources,
        SectionPart::Documents => &mut section.documents,
    };
    if entries.len() as u64 >= counted {
        return Err(SnapshotError::Malformed(format!("{}: more {more} ({counted})", section.kind.name())));
    }
    entries.push((k.to_vec(), v.to_vec()));
    Ok(())
}

/// Refuses a header whose counts name a kind this build does not have or a kind twice, so
/// they hold at most one entry per kind (looked up per frame while the body is split).
///
/// # Errors
/// [`SnapshotError::Malformed`] naming the first such entry.
fn check_counts(counts: &[(String, u64)]) -> Result<(), SnapshotError> {
    let mut seen = Vec::with_capacity(KindId::ALL.len());
    for (name, _) in counts {
        let kind = KindId::from_name(name).ok_or_else(|| SnapshotError::Malformed(format!("the header counts unknown kind {name:.64}")))?;
        if seen.contains(&kind) {
            return Err(SnapshotError::Malformed(format!("the header counts {name} twice")));
        }
        seen.push(kind);
    }
    Ok(())
}

/// The records the header counts for `kind` (`None` for a kind it does not name).
fn counted(counts: &[(String, u64)], kind: KindId) -> Option<u64> {
    counts.iter().find(|(name, _)| name == kind.name()).map(|(_, c)| *c)
}

/// [`decode_file`], returning the summary only.
///
/// # Errors
/// As [`decode_file`].
pub fn verify(bytes: &[u8]) -> Result<Summary, SnapshotError> {
    let s = decode_file(bytes)?;
    Ok(Summary { format: s.format, header: s.header, bytes: bytes.len() as u64 })
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

    /// Records per kind (the length of each kind's table), in [`KindId::ALL`] order.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn record_counts(&self) -> Result<Vec<(KindId, u64)>, StorageError> {
        use redb::ReadableTableMetadata;
        KindId::ALL.iter().map(|&kind| Ok((kind, self.txn().open_table(tables::records(kind))?.len()?))).collect()
    }

    /// Hands every record and source entry, raw, to `visit` as frames: per kind in
    /// [`KindId::ALL`] order a section, its records in key order, its sources.
    fn visit_raw(&self, mut visit: impl FnMut(Frame<'_>) -> Result<(), SnapshotError>) -> Result<(), SnapshotError> {
        let sources = self.txn().open_table(tables::SOURCES).map_err(StorageError::from)?;
        let documents = self.txn().open_table(crate::documents::DOCUMENTS).map_err(StorageError::from)?;
        let dictionaries = self.txn().open_table(crate::documents::DICTIONARIES).map_err(StorageError::from)?;
        for &kind in KindId::ALL {
            visit(Frame::Section(kind.name()))?;
            if let Some(v) = dictionaries.get(kind.code()).map_err(StorageError::from)? {
                let (id, bytes) = crate::codec::decode::<(u32, Vec<u8>)>(v.value(), "document dictionary")?;
                visit(Frame::Dictionary(id, &bytes))?;
            }
            let t = self.txn().open_table(tables::records(kind)).map_err(StorageError::from)?;
            for item in t.iter().map_err(StorageError::from)? {
                let (k, v) = item.map_err(StorageError::from)?;
                visit(Frame::Record(k.value(), v.value()))?;
            }
            let (start, end) = ([kind.code()], [kind.code() + 1]);
            for item in sources.range(&start[..]..&end[..]).map_err(StorageError::from)? {
                let (k, v) = item.map_err(StorageError::from)?;
                visit(Frame::Source(&k.value()[1..], v.value()))?;
            }
            for item in documents.range(&start[..]..&end[..]).map_err(StorageError::from)? {
                let (k, v) = item.map_err(StorageError::from)?;
                visit(Frame::Document(&k.value()[1..], v.value()))?;
            }
        }
        let log = self.txn().open_table(crate::history::LOG).map_err(StorageError::from)?;
        for item in log.iter().map_err(StorageError::from)? {
            let (k, v) = item.map_err(StorageError::from)?;
            visit(Frame::History(k.value(), v.value()))?;
        }
        let state = self.log_state()?;
        visit(Frame::HistoryState(state.floor.revision, state.floor.index, state.last_at, state.pruned))
    }

    /// The derivation version of each registered kind's records ([`crate::versions`]), in
    /// [`KindId::ALL`] order; [`crate::versions::UNKNOWN_VERSION`] for a kind whose
    /// re-derivation has not ended.
    ///
    /// # Errors
    /// [`StorageError`] on redb failures.
    pub fn kind_versions(&self) -> Result<Vec<(KindId, u32)>, StorageError> {
        let meta = self.txn().open_table(tables::META)?;
        let mut out = Vec::new();
        for (kind, build) in KindTable::new().versions() {
            let stored = meta.get(crate::versions::version_key(kind).as_str())?.map(|v| v.value());
            let rederiving = meta.get(crate::versions::rederiving_key(kind).as_str())?.is_some();
            let version = match rederiving {
                // Its records are not all back yet: a restore must re-derive it too.
                true => crate::versions::UNKNOWN_VERSION,
                false => stored.and_then(|v| u32::try_from(v).ok()).unwrap_or(build),
            };
            out.push((kind, version));
        }
        Ok(out)
    }

    /// Whether the store holds no record and no source entry.
    fn is_empty(&self) -> Result<bool, StorageError> {
        use redb::ReadableTableMetadata;
        Ok(self.record_counts()?.iter().all(|(_, n)| *n == 0) && self.txn().open_table(tables::SOURCES)?.is_empty()?)
    }
}

impl Store {
    /// Writes a decoded snapshot into this store, which must be empty (revision 0, no records),
    /// in one write transaction: records and source entries as stored, every secondary index
    /// entry, natural-key ordering entry and counter rebuilt from the records, the snapshot's
    /// revision. Other ordering indexes are built again later ([`crate::tables`]); any listed
    /// as built or being built in the empty store are unlisted.
    ///
    /// A kind whose derivation version in the snapshot is not this build's
    /// ([`Header::rederived_kinds`]) is not written: it is marked re-deriving
    /// ([`Store::rederiving`]) and comes back from the source ([`crate::versions`]).
    ///
    /// Every record is decoded and its entries derived before anything is written ([`derive`]),
    /// so the store invariants hold by construction and are not re-checked afterwards: the
    /// entries are exactly those of the records, the counters count them, and every record's
    /// source entry is present (checked here). Each table is then filled in ascending key order
    /// through one redb cursor, which packs full leaves instead of descending the tree per key.
    ///
    /// # Errors
    /// [`SnapshotError::NotEmpty`] for a store with data, [`SnapshotError::Malformed`] when a
    /// record does not decode, names a source entry the snapshot lacks, or a section's records
    /// or sources are not in strictly ascending key order, [`SnapshotError::Storage`] on redb
    /// failures (nothing is committed then).
    pub fn restore(&self, snap: &Snapshot) -> Result<(), SnapshotError> {
        self.restore_beside(snap, || ())
    }

    /// [`Store::restore`], running `beside` on the thread that derived the index entries once
    /// they are derived: work that needs a core the restore then leaves idle while this thread
    /// writes them and commits (a restore builds the catalogue search index there). Its result
    /// is returned once the store is committed.
    ///
    /// # Errors
    /// As [`Store::restore`]; `beside` has not run when its error came before the entries were
    /// derived.
    pub fn restore_beside<R: Send>(&self, snap: &Snapshot, beside: impl FnOnce() -> R + Send) -> Result<R, SnapshotError> {
        {
            let view = self.read()?;
            if view.revision()? != 0 || !view.is_empty()? {
                return Err(SnapshotError::NotEmpty);
            }
        }
        // A kind of another derivation version whose every object carries its document is
        // restored as it is and re-derived from the volume when the store is next opened
        // (`crate::rebuild`); any other is left out and brought back by the source.
        let (from_volume, rederived): (Vec<KindId>, Vec<KindId>) = snap.header.rederived_kinds().into_iter().partition(|&kind| {
            let version = snap.header.kind_version(kind).unwrap_or(crate::versions::UNKNOWN_VERSION);
            let section = snap.body.sections.iter().find(|s| s.kind == kind);
            version != crate::versions::UNKNOWN_VERSION && section.is_none_or(|s| s.documents.len() == s.sources.len())
        });
        let sections: Vec<&Section> = snap.body.sections.iter().filter(|s| !rederived.contains(&s.kind)).collect();
        // Of those kept, a kind whose records this build cannot read is written as it is, without
        // the entries derived from its records, and marked re-deriving from the volume: its
        // switch writes every record anew.
        let unreadable = self.unreadable_kinds(&from_volume, &sections);
        let derived_sections: Vec<&Section> = sections.iter().copied().filter(|s| !unreadable.contains(&s.kind)).collect();
        let restored = std::thread::scope(|scope| {
            let (stop, stopped) = std::sync::mpsc::channel::<()>();
            scope.spawn(|| write_back_early(&self.db.path, stopped));
            let kinds = (&rederived[..], &from_volume[..], &unreadable[..]);
            let restored = self.restore_in_one_transaction(snap, &sections, &derived_sections, kinds, beside);
            drop(stop);
            restored
        });
        let besides = restored?;
        for s in &snap.body.sections {
            if let Some((id, bytes)) = &s.dictionary {
                self.dictionaries.insert(s.kind, *id, bytes.clone())?;
            }
        }
        if !rederived.is_empty() {
            tracing::warn!(
                kinds = ?rederived.iter().map(|k| k.name()).collect::<Vec<_>>(),
                "the snapshot holds these kinds under another derivation version: they are re-derived from the source"
            );
            self.rederiving.lock().unwrap_or_else(|e| e.into_inner()).extend(rederived);
        }
        Ok(besides)
    }

    /// Writes the restore's one transaction and commits it: the kinds' version marks, then the
    /// records, sources and documents on this thread while two others derive the index entries
    /// and counters and the change log's; then those, while the thread that derived the entries
    /// runs `beside`, joined once the transaction is committed.
    fn restore_in_one_transaction<R: Send>(
        &self,
        snap: &Snapshot,
        sections: &[&Section],
        derived_sections: &[&Section],
        (rederived, from_volume, unreadable): (&[KindId], &[KindId], &[KindId]),
        beside: impl FnOnce() -> R + Send,
    ) -> Result<R, SnapshotError> {
        let txn = self.database()?.begin_write().map_err(StorageError::from)?;
        for &kind in rederived {
            crate::versions::mark_rederiving(&txn, kind)?;
        }
        for &kind in from_volume {
            let version = snap.header.kind_version(kind).unwrap_or(crate::versions::UNKNOWN_VERSION);
            let mut meta = txn.open_table(tables::META).map_err(StorageError::from)?;
            meta.insert(crate::versions::version_key(kind).as_str(), u64::from(version)).map_err(StorageError::from)?;
            if unreadable.contains(&kind) {
                let target = self.kinds.get(kind).map(|ops| ops.version()).unwrap_or_default();
                meta.insert(crate::rebuild::mark_key(kind).as_str(), u64::from(target)).map_err(StorageError::from)?;
            }
        }
        let started = std::time::Instant::now();
        let salt = crate::history::salt(&txn)?;
        std::thread::scope(|scope| -> Result<R, SnapshotError> {
            let (derived_tx, derived_rx) = std::sync::mpsc::sync_channel(1);
            let deriving = scope.spawn(move || {
                let derived = derive(&self.kinds, derived_sections);
                tracing::debug!(seconds = started.elapsed().as_secs_f64(), "restore: index entries derived and sorted");
                let sound = derived.is_ok();
                let _ = derived_tx.send(derived);
                sound.then(beside)
            });
            let logging = scope.spawn(|| crate::history::derive_restored(salt, &snap.body.history));
            let written = write_records(&txn, sections);
            tracing::debug!(seconds = started.elapsed().as_secs_f64(), "restore: records and sources written");
            let derived = derived_rx.recv().map_err(|_| SnapshotError::Malformed("the derivation of index entries stopped".into()));
            let log = logging.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            let (derived, log) = (derived??, log?);
            written?;
            write_derived(&txn, &derived, snap)?;
            drop(derived);
            tracing::debug!(seconds = started.elapsed().as_secs_f64(), "restore: index entries and counters written");
            crate::history::restore(&txn, &snap.body.history, log, snap.body.history_state, snap.header.revision)?;
            tracing::debug!(seconds = started.elapsed().as_secs_f64(), "restore: change log written");
            txn.commit().map_err(StorageError::from)?;
            tracing::debug!(seconds = started.elapsed().as_secs_f64(), "restore: committed");
            let besides = deriving.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            besides.ok_or_else(|| SnapshotError::Malformed("the index entries were not derived".into()))
        })
    }

    /// The kinds of `from_volume` whose records in `sections` this build cannot read (or does
    /// not have): they are restored as they are and re-derived.
    fn unreadable_kinds(&self, from_volume: &[KindId], sections: &[&Section]) -> Vec<KindId> {
        from_volume
            .iter()
            .copied()
            .filter(|&kind| {
                let Some(ops) = self.kinds.get(kind) else { return true };
                sections
                    .iter()
                    .filter(|s| s.kind == kind)
                    .flat_map(|s| &s.records)
                    .any(|(_, v)| decode_record::<Envelope>(v, kind.name()).map_or(true, |env| !ops.round_trips(&env.record)))
            })
            .collect()
    }
}

/// How often [`write_back_early`] flushes the file a restore is filling.
const WRITE_BACK_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// Flushes `path`'s written pages to the disk every [`WRITE_BACK_INTERVAL`] until `stop` is
/// dropped, through a handle of its own: a restore writes gigabytes in one transaction, and its
/// commit's flush then finds little left to write (the disk works while the restore computes).
/// A failure is logged at debug level and ends it (the commit's own flush is what counts).
fn write_back_early(path: &std::path::Path, stop: std::sync::mpsc::Receiver<()>) {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) => return tracing::debug!(file = %path.display(), error = %e, "restore: no early write-back"),
    };
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(WRITE_BACK_INTERVAL) {
        if let Err(e) = file.sync_data() {
            return tracing::debug!(file = %path.display(), error = %e, "restore: early write-back stopped");
        }
    }
}

/// Writes the index entries, ordering index and counters `derived` of the restored records,
/// then what a restored store knows besides ([`write_restored_meta`]).
fn write_derived(txn: &redb::WriteTransaction, derived: &Derived, snap: &Snapshot) -> Result<(), SnapshotError> {
    let mut order = txn.open_table(tables::ORDER).map_err(StorageError::from)?;
    append(&mut order, "ordering index", derived.order.iter().map(|k| (k.as_slice(), ())))?;
    let mut index_entries = txn.open_table(tables::INDEX_ENTRIES).map_err(StorageError::from)?;
    append(&mut index_entries, "secondary index", derived.index_entries.iter().map(|k| (k.as_slice(), ())))?;
    let mut ct = txn.open_table(tables::COUNTS).map_err(StorageError::from)?;
    append(&mut ct, "counters", derived.counts.iter().map(|(k, n)| (k.as_slice(), *n)))?;
    drop((order, index_entries, ct));
    write_restored_meta(txn, snap)
}

/// Writes what a restored store knows besides its records and entries: no order built beyond
/// the natural-key ones, the snapshot's revision and last commit, whether its documents are
/// complete, the document dictionaries of every section (those of a kind the source brings
/// again too: its revisions in the change log are compressed with it) and the sync state.
fn write_restored_meta(txn: &redb::WriteTransaction, snap: &Snapshot) -> Result<(), SnapshotError> {
    // The entries derived are those of the natural-key orders alone.
    txn.open_table(tables::BUILT).map_err(StorageError::from)?.retain(|_, _| false).map_err(StorageError::from)?;
    txn.open_table(tables::BUILDING).map_err(StorageError::from)?.retain(|_, _| false).map_err(StorageError::from)?;
    let mut meta = txn.open_table(tables::META).map_err(StorageError::from)?;
    meta.insert("revision", snap.header.revision).map_err(StorageError::from)?;
    let last_commit = snap.header.last_commit.unwrap_or(snap.header.created_at);
    meta.insert("last_commit", last_commit.0.max(0) as u64).map_err(StorageError::from)?;
    // The restored documents are complete when every section carries one per source entry
    // (a snapshot written before documents were kept carries none).
    match snap.body.sections.iter().all(|s| s.documents.len() == s.sources.len()) {
        true => meta.insert(crate::documents::COMPLETE, 1).map_err(StorageError::from)?,
        false => meta.remove(crate::documents::COMPLETE).map_err(StorageError::from)?,
    };
    let mut dictionaries = txn.open_table(crate::documents::DICTIONARIES).map_err(StorageError::from)?;
    for s in &snap.body.sections {
        if let Some((id, bytes)) = &s.dictionary {
            dictionaries.insert(s.kind.code(), encode(&(*id, bytes)).as_slice()).map_err(StorageError::from)?;
        }
    }
    let synced = crate::SyncState {
        synced_at: snap.header.synced_from.is_some().then_some(snap.header.revision),
        source: snap.header.synced_from.clone(),
    };
    crate::sync::write(&mut txn.open_table(crate::sync::SYNC_STATE).map_err(StorageError::from)?, &synced)?;
    drop(meta);
    // No position of the store the snapshot was taken from means anything here.
    crate::history::restart(txn, snap.header.revision)?;
    Ok(())
}

/// Writes every record and source entry of `body`, as stored, into `txn`.
///
/// # Errors
/// [`SnapshotError::Malformed`] when keys do not ascend, [`SnapshotError::Storage`] on redb
/// failures.
fn write_records(txn: &redb::WriteTransaction, sections: &[&Section]) -> Result<(), SnapshotError> {
    // Keyed `kind · Key(namespace, name)`: ascending per section, sorted across kinds.
    let mut sources: Vec<(Vec<u8>, &[u8])> = Vec::new();
    for s in sections {
        let mut table = txn.open_table(tables::records(s.kind)).map_err(StorageError::from)?;
        append(&mut table, s.kind.name(), s.records.iter().map(|(k, v)| (k.as_slice(), v.as_slice())))?;
        sources.extend(s.sources.iter().map(|(k, v)| {
            let mut sk = vec![s.kind.code()];
            sk.extend_from_slice(k);
            (sk, v.as_slice())
        }));
    }
    sources.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut table = txn.open_table(tables::SOURCES).map_err(StorageError::from)?;
    append(&mut table, "sources", sources.iter().map(|(k, v)| (k.as_slice(), *v)))?;
    // Kind by kind: the sections come in code order, so the keys ascend across them.
    let mut table = txn.open_table(crate::documents::DOCUMENTS).map_err(StorageError::from)?;
    let mut documents: Vec<(Vec<u8>, &[u8])> = Vec::new();
    for s in sections {
        documents.extend(s.documents.iter().map(|(k, v)| {
            let mut sk = vec![s.kind.code()];
            sk.extend_from_slice(k);
            (sk, v.as_slice())
        }));
    }
    documents.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    append(&mut table, "source documents", documents.iter().map(|(k, v)| (k.as_slice(), *v)))
}

/// The index entries and counters of a snapshot's records, each list sorted and free of
/// duplicates (the order the tables are filled in).
struct Derived {
    order: Vec<Vec<u8>>,
    index_entries: Vec<Vec<u8>>,
    counts: std::collections::BTreeMap<Vec<u8>, u64>,
}

/// Decodes every record of `body` and derives its entries through the write path's erased
/// per-kind code; checks that records and sources of each section are in strictly ascending key
/// order, that every record's source entry is present, and that every source entry decodes and
/// points to a record of its section (store invariant 4).
///
/// # Errors
/// [`SnapshotError::Malformed`] naming the first record or section that fails.
fn derive(kinds: &KindTable, sections: &[&Section]) -> Result<Derived, SnapshotError> {
    let malformed = |m: String| SnapshotError::Malformed(m);
    let mut order = Vec::new();
    let mut index_entries = Vec::new();
    let mut counts = HashMap::<Vec<u8>, u64>::new();
    for s in sections {
        let kind = s.kind;
        let ops = kinds.get(kind).ok_or_else(|| malformed(format!("kind {} is not registered", kind.name())))?;
        check_section(s, |key, env| {
            let e = ops.entries(key, env, tables::OrderSet::KEYS_ONLY).map_err(|e| malformed(format!("{} {key}: {e}", kind.name())))?;
            order.extend(e.order);
            index_entries.extend(e.index_entries);
            for k in tables::counter_keys(kind, &e.scopes, e.phase) {
                *counts.entry(k).or_default() += 1;
            }
            Ok(())
        })?;
    }
    let sort = |list: &mut Vec<Vec<u8>>| {
        list.sort_unstable();
        list.dedup();
    };
    std::thread::scope(|scope| {
        scope.spawn(|| sort(&mut index_entries));
        sort(&mut order);
    });
    Ok(Derived { order, index_entries, counts: counts.into_iter().collect() })
}

/// The checks a restore makes of one section, for [`derive`] and [`decode_file`] (`verify`):
/// records and source entries in strictly ascending key order, every record's envelope decodes
/// (then handed to `each` with its key) and its source entry is present, and every source entry
/// decodes (the writer reads them back on every change) and points to a record of the section
/// (store invariant 4).
///
/// # Errors
/// [`SnapshotError::Malformed`] naming the first record or source entry that fails, or `each`'s
/// error.
fn check_section(s: &Section, mut each: impl FnMut(&Key, &Envelope) -> Result<(), SnapshotError>) -> Result<(), SnapshotError> {
    let malformed = |m: String| SnapshotError::Malformed(m);
    let kind = s.kind;
    for (what, list) in [("records", &s.records), ("sources", &s.sources), ("source documents", &s.documents)] {
        if !list.windows(2).all(|w| w[0].0 < w[1].0) {
            return Err(malformed(format!("{} {what} are not in strictly ascending key order", kind.name())));
        }
    }
    for (k, v) in &s.records {
        let key = Key::from_bytes(k.clone());
        let env: Envelope = decode_record(v, kind.name()).map_err(|e| malformed(format!("{} {key}: {e}", kind.name())))?;
        let src = Key::new(&[env.source.0.as_str(), env.source.1.as_str()]);
        if s.sources.binary_search_by(|(sk, _)| sk.as_slice().cmp(src.as_bytes())).is_err() {
            return Err(malformed(format!("{} {key}: no source entry for {}/{}", kind.name(), env.source.0, env.source.1)));
        }
        each(&key, &env)?;
    }
    for (sk, v) in &s.sources {
        let (key, _version) = crate::write::decode_source_entry(v, kind)
            .map_err(|e| malformed(format!("{} source entry {}: {e}", kind.name(), Key::from_bytes(sk.clone()))))?;
        if s.records.binary_search_by(|(rk, _)| rk.as_slice().cmp(key.as_bytes())).is_err() {
            return Err(malformed(format!(
                "{} source entry {}: points to {key}, which has no record",
                kind.name(),
                Key::from_bytes(sk.clone())
            )));
        }
    }
    // Store invariant 5: a document belongs to a source entry; one compressed with a
    // dictionary names the section's.
    let dictionary = s.dictionary.as_ref().map(|(id, _)| *id);
    for (dk, dv) in &s.documents {
        if s.sources.binary_search_by(|(sk, _)| sk.as_slice().cmp(dk)).is_err() {
            return Err(malformed(format!("{} source document {}: no source entry", kind.name(), Key::from_bytes(dk.clone()))));
        }
        if let Some(id) = crate::documents::dictionary_of(dv).filter(|id| Some(*id) != dictionary) {
            return Err(malformed(format!(
                "{} source document {}: compressed with dictionary {id}, which the section does not carry",
                kind.name(),
                Key::from_bytes(dk.clone())
            )));
        }
    }
    if let Some((id, bytes)) = &s.dictionary {
        crate::documents::Dictionaries::default()
            .insert(kind, *id, bytes.clone())
            .map_err(|e| malformed(format!("{} document dictionary {id}: {e}", kind.name())))?;
    }
    Ok(())
}

/// `verify`'s check of a section's source documents: each decompresses (with the section's
/// dictionary when it names one). A restore does not decompress them (a document damaged
/// nonetheless is one object a later re-derivation lacks, filled in again from the source).
///
/// # Errors
/// [`SnapshotError::Malformed`] naming the first document that does not decompress.
fn check_documents(s: &Section) -> Result<(), SnapshotError> {
    let dictionaries = crate::documents::Dictionaries::default();
    if let Some((id, bytes)) = &s.dictionary {
        dictionaries
            .insert(s.kind, *id, bytes.clone())
            .map_err(|e| SnapshotError::Malformed(format!("{} document dictionary {id}: {e}", s.kind.name())))?;
    }
    for (k, v) in &s.documents {
        dictionaries
            .decode(s.kind, v)
            .map_err(|e| SnapshotError::Malformed(format!("{} source document {}: {e}", s.kind.name(), Key::from_bytes(k.clone()))))?;
    }
    Ok(())
}

/// [`crate::bulk::append`] for a restore: keys that do not ascend are a malformed snapshot.
///
/// # Errors
/// [`SnapshotError::Malformed`] naming `what` when a key does not ascend,
/// [`SnapshotError::Storage`] on redb failures.
fn append<'a, V: redb::Value + 'static>(
    table: &mut redb::Table<'_, &'static [u8], V>,
    what: &str,
    items: impl IntoIterator<Item = (&'a [u8], V::SelfType<'a>)>,
) -> Result<(), SnapshotError> {
    crate::bulk::append(table, what, items).map_err(|e| match e {
        StorageError::Corrupt(m) => SnapshotError::Malformed(m),
        e => SnapshotError::Storage(e),
    })
}

#[doc(hidden)]
/// Test support: re-encodes a valid snapshot with an arbitrary format version and read-model
/// schema version (valid checksum), to exercise the version checks.
pub fn encode_for_tests(format: u32, bytes: &[u8], schema_version: u64) -> Vec<u8> {
    let snap = decode_file(bytes).expect("a valid snapshot");
    let header = Header { schema_version, ..snap.header };
    write_body_for_tests(format, &header, &snap.body.sections, (&snap.body.history, snap.body.history_state))
}

#[doc(hidden)]
/// Test support: re-encodes a valid snapshot as a build whose `kind` had derivation `version`
/// would have written it: that version in the header, and every record of `kind` re-encoded by
/// `reencode` (given the record's bytes as this build encodes them).
pub fn downgrade_for_tests(bytes: &[u8], kind: KindId, version: u32, reencode: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let mut snap = decode_file(bytes).expect("a valid snapshot");
    for (k, v) in snap.header.kind_versions.iter_mut() {
        if k == kind.name() {
            *v = version;
        }
    }
    for s in snap.body.sections.iter_mut().filter(|s| s.kind == kind) {
        for (_, v) in s.records.iter_mut() {
            let mut env: Envelope = decode_record(v, kind.name()).expect("a valid envelope");
            env.record = reencode(&env.record);
            *v = encode(&env);
        }
    }
    write_for_tests(FORMAT_VERSION, &snap.header, &snap.body.sections)
}

fn write_for_tests(format: u32, header: &Header, sections: &[Section]) -> Vec<u8> {
    write_body_for_tests(format, header, sections, (&[], None))
}

/// A change log's entries and state, as [`write_body_for_tests`] writes them.
type LogForTests<'a> = (&'a [(Vec<u8>, Vec<u8>)], Option<crate::history::LogState>);

/// [`write_for_tests`] with a change log: entries and state (format 6).
fn write_body_for_tests(format: u32, header: &Header, sections: &[Section], (history, state): LogForTests<'_>) -> Vec<u8> {
    let mut w = Hashing { inner: Vec::new(), hasher: Sha256::new(), written: 0 };
    write_prefix(&mut w, format, header).expect("writes to memory");
    let mut z = zstd::stream::Encoder::new(&mut w, ZSTD_LEVEL).expect("zstd");
    for s in sections {
        write_frame(&mut z, &Frame::Section(s.kind.name())).expect("writes to memory");
        for (k, v) in &s.records {
            write_frame(&mut z, &Frame::Record(k, v)).expect("writes to memory");
        }
        for (k, v) in &s.sources {
            write_frame(&mut z, &Frame::Source(k, v)).expect("writes to memory");
        }
        // Format 3 had no documents (a format 3 file of this build's content leaves them out).
        if let Some((id, bytes)) = s.dictionary.as_ref().filter(|_| format >= 5) {
            write_frame(&mut z, &Frame::Dictionary(*id, bytes)).expect("writes to memory");
        }
        for (k, v) in s.documents.iter().filter(|_| format >= 4) {
            write_frame(&mut z, &Frame::Document(k, v)).expect("writes to memory");
        }
    }
    for (k, v) in history.iter().filter(|_| format >= 6) {
        write_frame(&mut z, &Frame::History(k, v)).expect("writes to memory");
    }
    if let Some(state) = state.filter(|_| format >= 6) {
        let frame = Frame::HistoryState(state.floor.revision, state.floor.index, state.last_at, state.pruned);
        write_frame(&mut z, &frame).expect("writes to memory");
    }
    write_frame(&mut z, &Frame::End).expect("writes to memory");
    z.finish().expect("zstd");
    finish(&mut w).expect("writes to memory");
    w.inner
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

    /// A snapshot with a valid checksum around `body` (uncompressed frames as the export writes
    /// them), with the empty store's header.
    fn with_body(body: &[u8]) -> Vec<u8> {
        let header = decode_file(&empty_snapshot()).unwrap().header;
        let mut w = Hashing { inner: Vec::new(), hasher: Sha256::new(), written: 0 };
        write_prefix(&mut w, FORMAT_VERSION, &header).unwrap();
        let mut z = zstd::stream::Encoder::new(&mut w, ZSTD_LEVEL).unwrap();
        std::io::Write::write_all(&mut z, body).unwrap();
        z.finish().unwrap();
        finish(&mut w).unwrap();
        w.inner
    }

    #[test]
    fn a_body_streamed_out_of_bounds_is_refused_with_what_is_wrong() {
        let frame = |f: &Frame<'_>| {
            let mut out = Vec::new();
            write_frame(&mut out, f).unwrap();
            out
        };
        let end = frame(&Frame::End);
        let section = frame(&Frame::Section(KindId::Zone.name()));
        let malformed = |body: Vec<u8>| match decode_file(&with_body(&body)) {
            Err(SnapshotError::Malformed(m)) => m,
            other => panic!("expected Malformed, got {:?}", other.map(|s| s.header)),
        };
        // Well framed, then checked against the header (which counts every kind of the store).
        assert!(malformed(end.clone()).contains("header counts"));
        assert!(malformed(Vec::new()).contains("without an End frame"));
        assert!(malformed(section.clone()).contains("without an End frame"));
        assert!(malformed([end.clone(), b"trailing".to_vec()].concat()).contains("after the End frame"));
        // A frame length beyond the bound is refused before anything is allocated for it.
        assert!(malformed(u32::MAX.to_le_bytes().to_vec()).contains("longer than"));
        let mut cut = frame(&Frame::Record(b"key", b"value"));
        cut.truncate(cut.len() - 2);
        assert!(malformed([section.clone(), cut].concat()).contains("overruns the body"));
        assert!(malformed([frame(&Frame::Record(b"key", b"value")), end.clone()].concat()).contains("before any section"));
        // A frame that does not decode is the file's fault, not the store's.
        let undecodable = [9u8, 1, 2, 3];
        let m = malformed([(undecodable.len() as u32).to_le_bytes().to_vec(), undecodable.to_vec(), end.clone()].concat());
        assert!(m.starts_with("a frame: "), "{m}");
        // A damaged checksum is reported first, whatever the body holds.
        let mut bytes = with_body(&[end, b"trailing".to_vec()].concat());
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(matches!(decode_file(&bytes), Err(SnapshotError::Checksum)));
    }

    #[test]
    fn a_small_file_that_expands_to_a_large_body_is_refused_before_it_is_kept() {
        // 200 records of 1 MiB of zeros compress to a few dozen kilobytes.
        let zeros = vec![0u8; 1 << 20];
        let mut body = Vec::new();
        write_frame(&mut body, &Frame::Section(KindId::Zone.name())).unwrap();
        let mut record = Vec::new();
        write_frame(&mut record, &Frame::Record(b"key", &zeros)).unwrap();
        let mut bomb = with_body(&[body, record.repeat(200)].concat());
        assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
        // The empty store's header counts no zone: the first record is one too many.
        match decode_file(&bomb) {
            Err(SnapshotError::Malformed(m)) => assert!(m.contains("more records than the header counts (0)"), "{m}"),
            other => panic!("expected Malformed, got {:?}", other.map(|s| s.header)),
        }
        // A header that claims as many zones as it likes does not lift the bound: the body may
        // expand to 64 times its compressed size (at least 64 MiB), and no more is kept.
        let mut header = decode_file(&empty_snapshot()).unwrap().header;
        for (kind, count) in &mut header.counts {
            if kind == KindId::Zone.name() {
                *count = u64::MAX;
            }
        }
        let section = Section {
            kind: KindId::Zone,
            records: (0..80u32).map(|i| (i.to_be_bytes().to_vec(), zeros.clone())).collect(),
            sources: Vec::new(),
            documents: Vec::new(),
            dictionary: None,
        };
        let lying = write_for_tests(FORMAT_VERSION, &header, &[section]);
        assert!(lying.len() < 1 << 20, "{} bytes", lying.len());
        match decode_file(&lying) {
            Err(SnapshotError::Malformed(m)) => {
                assert!(m.starts_with(&format!("the body expands to more than {MIN_BODY_LIMIT} bytes")), "{m}")
            }
            other => panic!("expected Malformed, got {:?}", other.map(|s| s.header)),
        }
        // With a damaged checksum nothing is decompressed.
        let last = bomb.len() - 1;
        bomb[last] ^= 1;
        assert!(matches!(decode_file(&bomb), Err(SnapshotError::Checksum)));
    }

    #[test]
    fn damaged_files_have_distinct_errors() {
        let bytes = empty_snapshot();
        assert!(matches!(decode_file(b"hello world, not a snapshot"), Err(SnapshotError::NotASnapshot)));
        for cut in [1, 10, 40, bytes.len() / 2, bytes.len() - 20] {
            assert!(matches!(decode_file(&bytes[..bytes.len() - cut]), Err(SnapshotError::Truncated(_))), "cut {cut}");
        }
        assert!(matches!(decode_file(&bytes[..20]), Err(SnapshotError::Truncated(_))));
        for at in [17, bytes.len() - 60, bytes.len() - 1] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x10;
            assert!(matches!(decode_file(&flipped), Err(SnapshotError::Checksum)), "flip at {at}");
        }
        assert!(matches!(decode_file(&encode_for_tests(1, &bytes, SCHEMA_VERSION)), Err(SnapshotError::FormatVersion { found: 1, .. })));
        assert!(matches!(
            decode_file(&encode_for_tests(FORMAT_VERSION, &bytes, SCHEMA_VERSION + 1)),
            Err(SnapshotError::SchemaVersion { .. })
        ));
        assert_eq!(encode_for_tests(FORMAT_VERSION, &bytes, SCHEMA_VERSION), bytes, "re-encoding is byte-identical");
    }

    #[test]
    fn a_kind_has_one_section_and_no_more_source_entries_than_records() {
        let snap = zones_snapshot();
        let zones = snap.body.sections.iter().find(|s| s.kind == KindId::Zone).unwrap();
        assert_eq!((zones.records.len(), zones.sources.len()), (2, 2));
        let malformed = |sections: &[Section]| match decode_file(&write_for_tests(FORMAT_VERSION, &snap.header, sections)) {
            Err(SnapshotError::Malformed(m)) => m,
            other => panic!("expected Malformed, got {:?}", other.map(|s| s.header)),
        };
        // The same section twice would hold twice the records the header counts.
        let mut repeated = snap.body.sections.clone();
        repeated.push(zones.clone());
        assert_eq!(malformed(&repeated), "Zone: a second section");
        // A third source entry for two records.
        let mut extra = snap.body.sections.clone();
        let at = extra.iter().position(|s| s.kind == KindId::Zone).unwrap();
        let (k, v) = extra[at].sources[1].clone();
        extra[at].sources.push(([k, b"z".to_vec()].concat(), v));
        assert_eq!(malformed(&extra), "Zone: more source entries than the header counts records (2)");
        // The export itself stays within both bounds.
        assert!(decode_file(&write_for_tests(FORMAT_VERSION, &snap.header, &snap.body.sections)).is_ok());
        // The header's counts hold one entry per kind of this build, each looked up per frame.
        let mut unknown = snap.header.clone();
        unknown.counts.push(("Bogus".into(), 1));
        assert_eq!(malformed_with(&unknown, &snap.body.sections), "the header counts unknown kind Bogus");
        let mut twice = snap.header.clone();
        twice.counts.push((KindId::Zone.name().into(), 2));
        assert_eq!(malformed_with(&twice, &snap.body.sections), "the header counts Zone twice");
    }

    fn malformed_with(header: &Header, sections: &[Section]) -> String {
        match decode_file(&write_for_tests(FORMAT_VERSION, header, sections)) {
            Err(SnapshotError::Malformed(m)) => m,
            other => panic!("expected Malformed, got {:?}", other.map(|s| s.header)),
        }
    }

    #[test]
    fn millions_of_empty_frames_are_charged_what_they_cost_in_memory() {
        // Empty records compress to almost nothing, and each costs a slot of its own: a header
        // that counts as many as it likes does not lift the bound.
        let mut header = decode_file(&empty_snapshot()).unwrap().header;
        for (kind, count) in &mut header.counts {
            if kind == KindId::Zone.name() {
                *count = u64::MAX;
            }
        }
        let frames = MIN_BODY_LIMIT / FRAME_OVERHEAD + 1;
        let mut body = Vec::new();
        write_frame(&mut body, &Frame::Section(KindId::Zone.name())).unwrap();
        let mut empty = Vec::new();
        write_frame(&mut empty, &Frame::Record(b"", b"")).unwrap();
        body.extend(empty.repeat(frames as usize));
        let mut w = Hashing { inner: Vec::new(), hasher: Sha256::new(), written: 0 };
        write_prefix(&mut w, FORMAT_VERSION, &header).unwrap();
        let mut z = zstd::stream::Encoder::new(&mut w, ZSTD_LEVEL).unwrap();
        std::io::Write::write_all(&mut z, &body).unwrap();
        z.finish().unwrap();
        finish(&mut w).unwrap();
        assert!(w.inner.len() < 1 << 20, "{} bytes", w.inner.len());
        match decode_file(&w.inner) {
            Err(SnapshotError::Malformed(m)) => {
                assert!(m.starts_with(&format!("the body expands to more than {MIN_BODY_LIMIT} bytes")), "{m}")
            }
            other => panic!("expected Malformed, got {:?}", other.map(|s| s.header)),
        }
    }

    /// A store holding two zones, with the temporary directory it lives in.
    fn zones_store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .write(Timestamp(5), |batch| {
                for name in ["a", "b"] {
                    crate::test_support::zone(batch, name);
                }
                Ok(())
            })
            .unwrap();
        (dir, store)
    }

    /// A decoded snapshot of a store holding two zones.
    fn zones_snapshot() -> Snapshot {
        let (_dir, store) = zones_store();
        let mut out = Vec::new();
        export(&store.read().unwrap(), Timestamp(7), &mut out).unwrap();
        decode_file(&out).unwrap()
    }

    fn zones(snap: &mut Snapshot) -> &mut Section {
        snap.body.sections.iter_mut().find(|s| s.kind == KindId::Zone).unwrap()
    }

    #[test]
    fn a_restored_store_keeps_the_invariants() {
        let mut snap = zones_snapshot();
        assert_eq!(zones(&mut snap).records.len(), 2);
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.restore(&snap).unwrap();
        let view = store.read().unwrap();
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        assert_eq!(view.revision().unwrap(), snap.header.revision);
        assert_eq!(view.count(KindId::Zone, &schema::Scope::All).unwrap(), 2);
    }

    /// A snapshot written by layout version 1 (same record and source encoding) restores into a
    /// version-2 store with every invariant.
    #[test]
    fn a_snapshot_of_layout_version_1_is_restored() {
        let mut bytes = Vec::new();
        let snap = zones_snapshot();
        let dir = tempfile::tempdir().unwrap();
        let source = Store::open(dir.path()).unwrap();
        source.restore(&snap).unwrap();
        export(&source.read().unwrap(), Timestamp(7), &mut bytes).unwrap();
        let old = decode_file(&encode_for_tests(FORMAT_VERSION, &bytes, 1)).unwrap();
        assert_eq!(old.header.schema_version, 1);
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.restore(&old).unwrap();
        let view = store.read().unwrap();
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        assert_eq!(view.count(KindId::Zone, &schema::Scope::All).unwrap(), 2);
    }

    /// A format 2 snapshot (no derivation versions) holds version 1 of every kind.
    #[test]
    fn a_format_2_snapshot_is_read_with_version_1_of_every_kind() {
        let mut bytes = Vec::new();
        let (_dir, source) = zones_store();
        export(&source.read().unwrap(), Timestamp(7), &mut bytes).unwrap();
        let old = decode_file(&encode_for_tests(2, &bytes, SCHEMA_VERSION)).unwrap();
        assert_eq!(old.header.kind_versions.len(), KindId::ALL.len());
        assert!(old.header.kind_versions.iter().all(|(_, v)| *v == crate::versions::IMPLICIT_VERSION));
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.restore(&old).unwrap();
        assert_eq!(store.read().unwrap().count(KindId::Zone, &schema::Scope::All).unwrap(), 2);
    }

    /// A kind of another derivation version is not decoded, not restored, and marked
    /// re-deriving (durably); the other kinds are restored as they are.
    #[test]
    fn a_kind_of_another_version_is_left_out_of_a_restore_and_re_derived() {
        let mut bytes = Vec::new();
        let (_dir, source) = zones_store();
        export(&source.read().unwrap(), Timestamp(7), &mut bytes).unwrap();
        let garbage = |_: &[u8]| b"an older shape".to_vec();
        let old = decode_file(&downgrade_for_tests(&bytes, KindId::Zone, 0, garbage)).unwrap();
        assert_eq!(old.header.kind_version(KindId::Zone), Some(0));
        assert_eq!(old.header.rederived_kinds(), vec![KindId::Zone]);
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.restore(&old).unwrap();
        assert_eq!(store.rederiving(), vec![KindId::Zone]);
        let view = store.read().unwrap();
        assert_eq!(view.count(KindId::Zone, &schema::Scope::All).unwrap(), 0);
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        // Exported while re-deriving, the kind is listed as unknown: a restore re-derives it too.
        let mut again = Vec::new();
        export(&view, Timestamp(8), &mut again).unwrap();
        assert_eq!(decode_file(&again).unwrap().header.kind_version(KindId::Zone), Some(crate::versions::UNKNOWN_VERSION));
        drop(view);
        drop(store);
        assert_eq!(Store::open(dir.path()).unwrap().rederiving(), vec![KindId::Zone], "the mark is durable");
    }

    /// A snapshot names the source its store completed a sync of (format 4); a restore records it,
    /// so a start with that source is warm. A store that never completed one, and a format 3
    /// file, restore as never synced; a header naming a source longer than the bound is refused.
    #[test]
    fn a_snapshot_carries_the_source_its_store_was_synced_from() {
        let (_dir, source) = zones_store();
        let restored = |bytes: &[u8]| {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            store.restore(&decode_file(bytes).unwrap()).unwrap();
            (dir, store.sync_state().unwrap())
        };
        let mut unsynced = Vec::new();
        export(&source.read().unwrap(), Timestamp(7), &mut unsynced).unwrap();
        assert_eq!(decode_file(&unsynced).unwrap().header.synced_from, None, "no completed sync");
        assert_eq!(restored(&unsynced).1, crate::SyncState::default());

        source.follow_source("manifests:/world").unwrap();
        source.mark_synced().unwrap();
        let mut synced = Vec::new();
        let summary = export(&source.read().unwrap(), Timestamp(8), &mut synced).unwrap();
        assert_eq!(summary.format, FORMAT_VERSION);
        assert_eq!(summary.header.synced_from.as_deref(), Some("manifests:/world"));
        let (_kept, state) = restored(&synced);
        assert!(state.warm_for("manifests:/world"), "{state:?}");
        assert_eq!(state.synced_at, Some(summary.header.revision));
        assert!(!state.warm_for("kube:https://elsewhere"));

        let v3 = write_for_tests(3, &summary.header, &decode_file(&synced).unwrap().body.sections);
        let old = decode_file(&v3).unwrap();
        assert_eq!((old.format, old.header.synced_from.clone()), (3, None), "format 3 has no source");
        assert_eq!(restored(&v3).1, crate::SyncState::default());

        let long = Header { synced_from: Some("x".repeat(crate::sync::MAX_SOURCE_BYTES + 1)), ..summary.header.clone() };
        let hostile = write_for_tests(FORMAT_VERSION, &long, &decode_file(&synced).unwrap().body.sections);
        assert!(matches!(decode_file(&hostile), Err(SnapshotError::Malformed(m)) if m.contains("source")));
    }

    /// Source documents travel with their section and are restored as stored; one without a
    /// source entry, or out of order, refuses the file.
    #[test]
    fn source_documents_round_trip_and_each_belongs_to_a_source_entry() {
        let mut snap = zones_snapshot();
        assert_eq!(zones(&mut snap).documents.len(), 2, "a document per zone");
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.restore(&snap).unwrap();
        let view = store.read().unwrap();
        assert_eq!(view.check_invariants().unwrap(), Vec::<String>::new());
        let stored: Vec<Vec<u8>> =
            view.txn().open_table(crate::documents::DOCUMENTS).unwrap().iter().unwrap().map(|i| i.unwrap().1.value().to_vec()).collect();
        assert_eq!(stored, zones(&mut snap).documents.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>());
        drop(view);
        let mut orphan = zones_snapshot();
        zones(&mut orphan).documents[0].0 = Key::new(&["poc", "nobody"]).as_bytes().to_vec();
        zones(&mut orphan).documents.sort();
        let mut unordered = zones_snapshot();
        zones(&mut unordered).documents.swap(0, 1);
        for (what, snap, expected) in
            [("orphan", orphan, "no source entry"), ("unordered", unordered, "not in strictly ascending key order")]
        {
            match decode_file(&write_for_tests(FORMAT_VERSION, &snap.header, &snap.body.sections)) {
                Err(SnapshotError::Malformed(m)) => assert!(m.contains(expected), "{what}: {m}"),
                other => panic!("{what}: {:?}", other.map(|_| ())),
            }
        }
    }

    /// A kind of another version whose every object carries its document is restored as it
    /// is, under its version, and re-derived from the volume when the store is next opened.
    #[test]
    fn a_kind_of_another_version_with_its_documents_is_restored_and_re_derived_from_the_volume() {
        let mut bytes = Vec::new();
        let (_dir, source) = zones_store();
        export(&source.read().unwrap(), Timestamp(7), &mut bytes).unwrap();
        let old = decode_file(&downgrade_for_tests(&bytes, KindId::Zone, 7, <[u8]>::to_vec)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store.restore(&old).unwrap();
        assert!(store.rederiving().is_empty());
        assert_eq!(store.read().unwrap().count(KindId::Zone, &schema::Scope::All).unwrap(), 2, "restored as it is");
        drop(store);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.rebuilding(), vec![(KindId::Zone, true)]);
        assert_eq!(store.read().unwrap().check_invariants().unwrap(), Vec::<String>::new());
    }

    /// Each broken snapshot is refused with its message and leaves the store empty.
    #[test]
    fn restore_refuses_records_that_do_not_decode_lack_a_source_or_do_not_ascend() {
        let mut undecodable = zones_snapshot();
        zones(&mut undecodable).records[1].1 = b"not an envelope".to_vec();
        let mut sourceless = zones_snapshot();
        zones(&mut sourceless).sources.remove(0);
        let mut unordered = zones_snapshot();
        zones(&mut unordered).records.swap(0, 1);
        let mut bad_source = zones_snapshot();
        zones(&mut bad_source).sources[1].1 = vec![0xff; 3];
        // The layout of the write path's source entry, pointing to a zone that has no record.
        #[derive(Serialize)]
        struct SourceEntry {
            key: Key,
            version: String,
        }
        let mut dangling = zones_snapshot();
        zones(&mut dangling).sources[1].1 = crate::codec::encode(&SourceEntry { key: Key::new(&["poc", "zz"]), version: "1".into() });
        let cases = [
            (undecodable, "corrupt stored value"),
            (sourceless, "no source entry for poc/a"),
            (unordered, "ascending key order"),
            (bad_source, "Zone source entry poc/b: corrupt stored value"),
            (dangling, "Zone source entry poc/b: points to poc/zz, which has no record"),
        ];
        for (snap, message) in cases {
            // `verify` refuses what a restore refuses, with the same message.
            match decode_file(&write_for_tests(FORMAT_VERSION, &snap.header, &snap.body.sections)) {
                Err(SnapshotError::Malformed(m)) => assert!(m.contains(message), "{message}: {m}"),
                other => panic!("{message}: expected Malformed, got {:?}", other.map(|s| s.header)),
            }
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open(dir.path()).unwrap();
            let err = store.restore(&snap).unwrap_err();
            assert!(matches!(err, SnapshotError::Malformed(ref m) if m.contains(message)), "{message}: {err}");
            let view = store.read().unwrap();
            assert!(view.revision().unwrap() == 0 && view.is_empty().unwrap(), "{message}: nothing is committed");
        }
    }

    /// A writer that fails after `left` bytes, like a client that goes away mid-download.
    struct FailAfter {
        out: Vec<u8>,
        left: usize,
    }

    impl std::io::Write for FailAfter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.left == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "client went away"));
            }
            let n = buf.len().min(self.left);
            self.out.extend_from_slice(&buf[..n]);
            self.left -= n;
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_interrupted_export_fails_and_its_partial_output_is_refused() {
        let full = empty_snapshot();
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let mut w = FailAfter { out: Vec::new(), left: full.len() - 10 };
        let err = export(&store.read().unwrap(), Timestamp(7), &mut w).unwrap_err();
        assert!(matches!(err, SnapshotError::Io(ref m) if m.contains("client went away")), "{err}");
        assert_eq!(w.out.len(), full.len() - 10);
        assert!(matches!(decode_file(&w.out), Err(SnapshotError::Truncated(_))));
    }

    /// A snapshot's document dictionary is checked as a restore needs it: a document naming a
    /// dictionary its section lacks, a second dictionary, or one too large is refused.
    #[test]
    fn early_write_back_flushes_until_told_to_stop_and_gives_up_on_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("filling");
        std::fs::write(&path, vec![7u8; 1 << 16]).unwrap();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (done_tx, done) = std::sync::mpsc::channel();
        let flushing = std::thread::spawn(move || {
            write_back_early(&path, stopped);
            done_tx.send(()).unwrap();
        });
        assert!(done.try_recv().is_err(), "it flushes until told to stop");
        drop(stop);
        flushing.join().unwrap();
        assert_eq!(done.try_recv(), Ok(()));
        let (_stop, stopped) = std::sync::mpsc::channel::<()>();
        write_back_early(&dir.path().join("missing"), stopped); // returns at once
    }

    /// A kind the source brings back (its records of an unknown derivation version) keeps its
    /// dictionary: its revisions in the change log are compressed with it, and the kind's
    /// documents are compressed with it again, never with one trained anew under its id.
    #[test]
    fn a_restore_keeps_the_dictionary_of_a_kind_the_source_brings_back() {
        let dir = tempfile::tempdir().unwrap();
        let (store, bytes) = exported_with_dictionary(dir.path());
        let dictionary = store.dictionaries().all()[0].2.clone();
        let unknown = downgrade_for_tests(&bytes, KindId::Zone, crate::versions::UNKNOWN_VERSION, <[u8]>::to_vec);
        let snap = decode_file(&unknown).unwrap();
        assert_eq!(snap.header.rederived_kinds(), vec![KindId::Zone]);
        let target = tempfile::tempdir().unwrap();
        let restored = crate::Store::open(target.path()).unwrap();
        restored.restore(&snap).unwrap();
        assert_eq!(restored.read().unwrap().count(KindId::Zone, &schema::Scope::All).unwrap(), 0, "left for the source");
        assert_eq!(restored.dictionaries().all(), vec![(KindId::Zone, 1, dictionary.clone())]);
        drop(restored);
        let reopened = crate::Store::open(target.path()).unwrap();
        assert_eq!(reopened.dictionaries().all(), vec![(KindId::Zone, 1, dictionary)], "stored");
    }

    /// A frame no restore would read is refused while the snapshot is written.
    #[test]
    fn a_frame_too_long_to_restore_is_refused_at_export() {
        let mut out = Vec::new();
        write_frame(&mut out, &Frame::Record(b"k", &vec![7; MAX_FRAME - 16])).unwrap();
        let err = write_frame(&mut Vec::new(), &Frame::Record(b"k", &vec![7; MAX_FRAME + 1])).unwrap_err();
        assert!(err.to_string().contains("longer than 67108864"), "{err}");
    }

    /// The store of [`crate::documents::tests::store_with_dictionary`] in `dir`, and its export.
    fn exported_with_dictionary(dir: &std::path::Path) -> (crate::Store, Vec<u8>) {
        let store = crate::documents::tests::store_with_dictionary(dir);
        let mut bytes = Vec::new();
        export(&store.read().unwrap(), Timestamp(9), &mut bytes).unwrap();
        (store, bytes)
    }

    #[test]
    fn a_document_dictionary_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, bytes) = exported_with_dictionary(dir.path());
        let snap = decode_file(&bytes).unwrap();
        assert_eq!(zones(&mut decode_file(&bytes).unwrap()).dictionary.as_ref().map(|(id, _)| *id), Some(1));
        let refused = |snap: &Snapshot| match decode_file(&write_for_tests(FORMAT_VERSION, &snap.header, &snap.body.sections)) {
            Err(SnapshotError::Malformed(m)) => m,
            other => panic!("{:?}", other.map(|s| s.header)),
        };
        let mut lacking = decode_file(&bytes).unwrap();
        zones(&mut lacking).dictionary = None;
        assert!(refused(&lacking).contains("which the section does not carry"));
        let mut garbage = decode_file(&bytes).unwrap();
        zones(&mut garbage).dictionary = Some((1, b"not a dictionary".to_vec()));
        assert!(refused(&garbage).contains("not a trained zstd dictionary"));
        let mut damaged = decode_file(&bytes).unwrap();
        let doc = zones(&mut damaged).documents.iter_mut().rev().find(|(_, v)| v[0] == 1).unwrap();
        doc.1.truncate(doc.1.len() - 8);
        assert!(refused(&damaged).contains("source document"), "verify decompresses every document");
        assert!(
            decode_for_restore(&write_for_tests(FORMAT_VERSION, &damaged.header, &damaged.body.sections)).is_ok(),
            "a restore does not"
        );
        let mut huge = decode_file(&bytes).unwrap();
        zones(&mut huge).dictionary = Some((1, vec![7; crate::documents::MAX_DICTIONARY_BYTES + 1]));
        assert!(refused(&huge).contains("larger than"));
        // A second Dictionary frame in one section.
        let mut w = Hashing { inner: Vec::new(), hasher: Sha256::new(), written: 0 };
        write_prefix(&mut w, FORMAT_VERSION, &snap.header).unwrap();
        let mut z = zstd::stream::Encoder::new(&mut w, ZSTD_LEVEL).unwrap();
        write_frame(&mut z, &Frame::Section(KindId::Zone.name())).unwrap();
        write_frame(&mut z, &Frame::Dictionary(1, b"one")).unwrap();
        write_frame(&mut z, &Frame::Dictionary(2, b"two")).unwrap();
        write_frame(&mut z, &Frame::End).unwrap();
        z.finish().unwrap();
        finish(&mut w).unwrap();
        assert!(matches!(decode_file(&w.inner), Err(SnapshotError::Malformed(m)) if m.contains("a second document dictionary")));
        // A format 4 file leaves the dictionary out: its documents written with it are refused.
        let old = write_for_tests(4, &snap.header, &snap.body.sections);
        assert!(matches!(decode_file(&old), Err(SnapshotError::Malformed(m)) if m.contains("which the section does not carry")));
    }
}
