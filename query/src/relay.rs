//! Relay connections: opaque versioned cursors, the four argument
//! combinations per the Relay specification, a maximum page size, `totalCount`.
//!
//! Rows come from a [`Rows`] source that yields `(suffix, record)` pairs in index order; the
//! suffix (sort value · natural key, see `storage::tables`) is what a cursor carries, so root
//! connections (index scans) and nested connections (sorted vectors) share this code.

use crate::error::bad_input;
use async_graphql::Error;
use base64::Engine;
use schema::common::StatusPhase;
use schema::{GraphqlEnum, KindId};
use std::cmp::Ordering;
use std::ops::Bound;
use storage::{OrderField, Stored};

/// Cursor format version (first byte of the decoded cursor).
///
/// Version changes: 1 = `version · order · suffix`; 2 adds the kind, so a cursor of one
/// connection is refused by a connection of another kind; 3 replaces the order byte by an order
/// specification (`n · entries`), so multi-field orders get cursors of their own.
/// Search cursors use the specification `0xFF · query hash` (no older cursor has it).
const CURSOR_VERSION: u8 = 3;

/// What a connection is sorted by: one indexed field (the natural key breaks ties), or several
/// fields with their own directions (`orderBy: [XOrder!]` with more than one entry; the natural
/// key breaks the remaining ties).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OrderSpec {
    /// One field; the direction is applied when scanning.
    Single(OrderField),
    /// Several `(field, descending)` entries, compared in order.
    Multi(Vec<(OrderField, bool)>),
    /// Relevance of a full-text search (`search` argument), with the hash of the query's
    /// words: suffixes are `score bytes · natural key` (see `crate::search`).
    Search(u32),
}

impl OrderSpec {
    fn bytes(&self) -> Vec<u8> {
        match self {
            OrderSpec::Single(o) => vec![1, *o as u8],
            OrderSpec::Search(hash) => {
                let mut b = vec![0xFF];
                b.extend_from_slice(&hash.to_be_bytes());
                b
            }
            OrderSpec::Multi(v) => {
                let mut b = vec![v.len() as u8];
                b.extend(v.iter().map(|(o, desc)| *o as u8 | if *desc { 0x80 } else { 0 }));
                b
            }
        }
    }
}

/// Encodes a cursor: URL-safe base64 of `version · kind · order spec · suffix`.
pub fn encode_cursor(kind: KindId, order: &OrderSpec, suffix: &[u8]) -> String {
    let spec = order.bytes();
    let mut raw = Vec::with_capacity(suffix.len() + 2 + spec.len());
    raw.push(CURSOR_VERSION);
    raw.push(kind.code());
    raw.extend_from_slice(&spec);
    raw.extend_from_slice(suffix);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

/// Decodes a cursor produced for `kind` and `order`.
///
/// # Errors
/// `BAD_USER_INPUT` ("invalid cursor", without echoing the input) for malformed cursors, other
/// versions, and cursors of another kind or order.
pub fn decode_cursor(s: &str, kind: KindId, order: &OrderSpec) -> Result<Vec<u8>, Error> {
    let invalid = || bad_input("invalid cursor");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(s).map_err(|_| invalid())?;
    let spec = order.bytes();
    let head = 2 + spec.len();
    if raw.len() <= head || raw[0] != CURSOR_VERSION || raw[1] != kind.code() || raw[2..head] != spec[..] {
        return Err(invalid());
    }
    let suffix = &raw[head..];
    if let OrderSpec::Single(o) = order {
        o.split_suffix(suffix).map_err(|_| invalid())?.1.parts().map_err(|_| invalid())?;
    }
    Ok(suffix.to_vec())
}

/// Validated pagination arguments.
#[derive(Clone, Debug)]
pub struct PageArgs {
    /// `first`.
    pub first: Option<usize>,
    /// `last`.
    pub last: Option<usize>,
    /// Decoded `after` suffix.
    pub after: Option<Vec<u8>>,
    /// Decoded `before` suffix.
    pub before: Option<Vec<u8>>,
    /// Page size when neither `first` nor `last` is given: the maximum page size.
    pub default_limit: usize,
    /// Kind of the rows (cursors must match it).
    pub kind: KindId,
    /// Order of the rows (cursors must match it).
    pub order: OrderSpec,
    /// Descending order.
    pub desc: bool,
}

impl PageArgs {
    /// Validates raw arguments.
    ///
    /// # Errors
    /// `BAD_USER_INPUT` for `first` and `last` together, negative or larger than `max` values,
    /// invalid cursors.
    #[allow(clippy::too_many_arguments)] // the connection arguments as GraphQL names them
    pub fn new(
        first: Option<i64>,
        last: Option<i64>,
        after: Option<&str>,
        before: Option<&str>,
        kind: KindId,
        order: OrderSpec,
        desc: bool,
        max: usize,
    ) -> Result<PageArgs, Error> {
        let (first, last) = page_sizes(first, last, max)?;
        Ok(PageArgs {
            first,
            last,
            after: after.map(|c| decode_cursor(c, kind, &order)).transpose()?,
            before: before.map(|c| decode_cursor(c, kind, &order)).transpose()?,
            default_limit: max,
            kind,
            order,
            desc,
        })
    }
}

/// A connection's `first` and `last`, checked: not both, neither negative nor over `max`.
///
/// # Errors
/// `BAD_USER_INPUT` naming the argument.
pub(crate) fn page_sizes(first: Option<i64>, last: Option<i64>, max: usize) -> Result<(Option<usize>, Option<usize>), Error> {
    if first.is_some() && last.is_some() {
        return Err(bad_input("Passing both `first` and `last` to paginate a connection is not supported."));
    }
    let check = |name: &str, v: Option<i64>| -> Result<Option<usize>, Error> {
        match v {
            None => Ok(None),
            Some(n) if n < 0 => Err(bad_input(format!("`{name}` on a connection cannot be less than zero."))),
            Some(n) if n as u64 > max as u64 => {
                Err(bad_input(format!("`{name}` on a connection cannot exceed the maximum page size {max}.")))
            }
            Some(n) => Ok(Some(n as usize)),
        }
    };
    Ok((check("first", first)?, check("last", last)?))
}

/// A row: cursor suffix and record.
pub type Row<R> = (Vec<u8>, Stored<R>);

/// A boxed row iterator.
pub type RowIter<'a, R> = Box<dyn Iterator<Item = Result<Row<R>, Error>> + 'a>;

/// An ordered source of visible, filtered rows.
pub trait Rows<R> {
    /// Rows in ascending suffix order (descending when `reverse`), bounded by `from` (lower
    /// bound going forward, upper bound in reverse).
    ///
    /// # Errors
    /// Storage failures (as `INTERNAL`).
    fn iter(&self, from: Bound<&[u8]>, reverse: bool) -> Result<RowIter<'_, R>, Error>;

    /// The number of rows per status phase (ignoring cursors), every phase of
    /// [`StatusPhase::ALL`] in that order; `phase` reads a record's.
    ///
    /// # Errors
    /// Storage failures (as `INTERNAL`).
    fn phase_counts(&self, phase: &dyn Fn(&R) -> Option<StatusPhase>) -> Result<Vec<(StatusPhase, u64)>, Error> {
        scan_phase_counts(self, phase)
    }

    /// The number of rows (ignoring cursors).
    ///
    /// # Errors
    /// Storage failures (as `INTERNAL`).
    fn count(&self) -> Result<u64, Error> {
        let mut n = 0;
        for r in self.iter(Bound::Unbounded, false)? {
            r?;
            n += 1;
        }
        Ok(n)
    }
}

/// [`Rows::phase_counts`] by reading every row.
///
/// # Errors
/// Storage failures (as `INTERNAL`).
pub fn scan_phase_counts<R, T: Rows<R> + ?Sized>(
    rows: &T,
    phase: &dyn Fn(&R) -> Option<StatusPhase>,
) -> Result<Vec<(StatusPhase, u64)>, Error> {
    let mut counts: Vec<(StatusPhase, u64)> = StatusPhase::ALL.iter().map(|&p| (p, 0)).collect();
    for r in rows.iter(Bound::Unbounded, false)? {
        if let Some(p) = phase(&r?.1.record) {
            if let Some(slot) = counts.iter_mut().find(|(q, _)| *q == p) {
                slot.1 += 1;
            }
        }
    }
    Ok(counts)
}

/// One page of a connection.
pub struct Page<R> {
    /// Edges in connection order.
    pub edges: Vec<Row<R>>,
    /// `pageInfo.hasNextPage`.
    pub has_next: bool,
    /// `pageInfo.hasPreviousPage`.
    pub has_previous: bool,
}

/// The most edges a page reserves room for before reading (a page holds its size plus one):
/// growing the vector of records as it fills copies every record read so far.
const EDGES_RESERVED: usize = 4096;

/// Cuts one page out of `rows` per the Relay specification: `after`/`before` bound the edge
/// set, then `first` keeps the first n (`hasNextPage` = more remain) or `last` the last n
/// (`hasPreviousPage` = more remain). `hasPreviousPage` with `first`/`after` is true when a row
/// exists at or before `after`; `hasNextPage` with `last`/`before` when a row exists at or
/// after `before`.
///
/// # Errors
/// Storage failures.
pub fn paginate<R>(rows: &dyn Rows<R>, args: &PageArgs) -> Result<Page<R>, Error> {
    // Logical order: ascending suffix, or descending when `desc`. A "logical forward" scan is a
    // physical reverse scan when `desc`.
    let desc = args.desc;
    let cmp = |a: &[u8], b: &[u8]| if desc { b.cmp(a) } else { a.cmp(b) };
    let exists = |from: &[u8], logical_reverse: bool| -> Result<bool, Error> {
        let mut it = rows.iter(Bound::Included(from), logical_reverse ^ desc)?;
        Ok(it.next().transpose()?.is_some())
    };

    if let Some(last) = args.last {
        let from = match &args.before {
            Some(b) => Bound::Excluded(b.as_slice()),
            None => Bound::Unbounded,
        };
        let mut edges = Vec::with_capacity(last.min(EDGES_RESERVED) + 1);
        for row in rows.iter(from, !desc)? {
            let row = row?;
            if let Some(a) = &args.after {
                if cmp(&row.0, a) != Ordering::Greater {
                    break;
                }
            }
            edges.push(row);
            if edges.len() > last {
                break;
            }
        }
        let has_previous = edges.len() > last;
        edges.truncate(last);
        edges.reverse();
        let has_next = match &args.before {
            Some(b) => exists(b, false)?,
            None => false,
        };
        return Ok(Page { edges, has_next, has_previous });
    }

    let limit = args.first.unwrap_or(args.default_limit);
    let from = match &args.after {
        Some(a) => Bound::Excluded(a.as_slice()),
        None => Bound::Unbounded,
    };
    let mut edges = Vec::with_capacity(limit.min(EDGES_RESERVED) + 1);
    for row in rows.iter(from, desc)? {
        let row = row?;
        if let Some(b) = &args.before {
            if cmp(&row.0, b) != Ordering::Less {
                break;
            }
        }
        edges.push(row);
        if edges.len() > limit {
            break;
        }
    }
    let has_next = edges.len() > limit;
    edges.truncate(limit);
    let has_previous = match &args.after {
        Some(a) => exists(a, true)?,
        None => false,
    };
    Ok(Page { edges, has_next, has_previous })
}

/// Rows held in memory (nested connections), sorted by suffix ascending.
pub struct VecRows<R>(pub Vec<Row<R>>);

/// The part of `v` (sorted by suffix ascending) that a scan from `from` covers: going forward,
/// the rows from `from` on; in `reverse`, the rows up to it.
pub(crate) fn rows_from<'v, T>(v: &'v [(Vec<u8>, T)], from: Bound<&[u8]>, reverse: bool) -> &'v [(Vec<u8>, T)] {
    let (lo, hi) = match (from, reverse) {
        (Bound::Unbounded, _) => (0, v.len()),
        (Bound::Included(f), false) => (v.partition_point(|r| r.0.as_slice() < f), v.len()),
        (Bound::Excluded(f), false) => (v.partition_point(|r| r.0.as_slice() <= f), v.len()),
        (Bound::Included(f), true) => (0, v.partition_point(|r| r.0.as_slice() <= f)),
        (Bound::Excluded(f), true) => (0, v.partition_point(|r| r.0.as_slice() < f)),
    };
    &v[lo..hi]
}

impl<R: Clone> Rows<R> for VecRows<R> {
    fn iter(&self, from: Bound<&[u8]>, reverse: bool) -> Result<RowIter<'_, R>, Error> {
        let slice = rows_from(&self.0, from, reverse);
        if reverse {
            Ok(Box::new(slice.iter().rev().cloned().map(Ok)))
        } else {
            Ok(Box::new(slice.iter().cloned().map(Ok)))
        }
    }

    fn count(&self) -> Result<u64, Error> {
        Ok(self.0.len() as u64)
    }
}

/// `PageInfo` values.
pub(crate) struct PageInfo {
    pub has_next: bool,
    pub has_previous: bool,
    pub start: Option<String>,
    pub end: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use schema::{Key, Timestamp};

    fn rows(n: usize) -> VecRows<u32> {
        VecRows(
            (0..n)
                .map(|i| {
                    let key = Key::new(&[format!("k{i:03}")]);
                    (
                        key.as_bytes().to_vec(),
                        Stored {
                            key,
                            record: i as u32,
                            created_at: Timestamp(0),
                            last_modified_at: Timestamp(0),
                            links: vec![],
                            as_of: None,
                        },
                    )
                })
                .collect(),
        )
    }

    fn args(first: Option<i64>, last: Option<i64>, after: Option<&Row<u32>>, before: Option<&Row<u32>>, desc: bool) -> PageArgs {
        let a = after.map(|r| encode_cursor(KindId::Application, &OrderSpec::Single(OrderField::Key), &r.0));
        let b = before.map(|r| encode_cursor(KindId::Application, &OrderSpec::Single(OrderField::Key), &r.0));
        PageArgs::new(first, last, a.as_deref(), b.as_deref(), KindId::Application, OrderSpec::Single(OrderField::Key), desc, 100).unwrap()
    }

    fn ids(p: &Page<u32>) -> Vec<u32> {
        p.edges.iter().map(|e| e.1.record).collect()
    }

    #[test]
    fn four_argument_combinations() {
        let r = rows(10);
        let p = paginate(&r, &args(Some(3), None, Some(&r.0[2]), None, false)).unwrap();
        assert_eq!((ids(&p), p.has_next, p.has_previous), (vec![3, 4, 5], true, true));
        let p = paginate(&r, &args(None, Some(3), None, Some(&r.0[7]), false)).unwrap();
        assert_eq!((ids(&p), p.has_next, p.has_previous), (vec![4, 5, 6], true, true));
        // first + before: the first 3 of the rows before 5.
        let p = paginate(&r, &args(Some(3), None, None, Some(&r.0[5]), false)).unwrap();
        assert_eq!((ids(&p), p.has_next, p.has_previous), (vec![0, 1, 2], true, false));
        // last + after: the last 2 of the rows after 6.
        let p = paginate(&r, &args(None, Some(2), Some(&r.0[6]), None, false)).unwrap();
        assert_eq!((ids(&p), p.has_next, p.has_previous), (vec![8, 9], false, true));
        // after + before window, first larger than the window.
        let p = paginate(&r, &args(Some(10), None, Some(&r.0[1]), Some(&r.0[4]), false)).unwrap();
        assert_eq!((ids(&p), p.has_next), (vec![2, 3], false));
    }

    #[test]
    fn maximum_page_size_applies_without_first_or_last() {
        let r = rows(10);
        let a = PageArgs::new(None, None, None, None, KindId::Application, OrderSpec::Single(OrderField::Key), false, 4).unwrap();
        let p = paginate(&r, &a).unwrap();
        assert_eq!((ids(&p), p.has_next, p.has_previous), (vec![0, 1, 2, 3], true, false));
    }

    #[test]
    fn descending_and_defaults() {
        let r = rows(5);
        let p = paginate(&r, &args(Some(2), None, None, None, true)).unwrap();
        assert_eq!((ids(&p), p.has_next), (vec![4, 3], true));
        let p = paginate(&r, &args(Some(2), None, Some(&r.0[3]), None, true)).unwrap();
        assert_eq!((ids(&p), p.has_previous), (vec![2, 1], true));
        let p = paginate(&r, &args(None, None, None, None, false)).unwrap();
        assert_eq!((ids(&p), p.has_next), (vec![0, 1, 2, 3, 4], false));
        let p = paginate(&r, &args(Some(0), None, None, None, false)).unwrap();
        assert_eq!((ids(&p), p.has_next), (vec![], true));
    }

    #[test]
    fn invalid_arguments() {
        assert!(PageArgs::new(Some(1), Some(1), None, None, KindId::Application, OrderSpec::Single(OrderField::Key), false, 10).is_err());
        assert!(PageArgs::new(Some(-1), None, None, None, KindId::Application, OrderSpec::Single(OrderField::Key), false, 10).is_err());
        assert!(PageArgs::new(Some(11), None, None, None, KindId::Application, OrderSpec::Single(OrderField::Key), false, 10).is_err());
        assert!(
            PageArgs::new(None, None, Some("garbage"), None, KindId::Application, OrderSpec::Single(OrderField::Key), false, 10).is_err()
        );
        let other_kind = encode_cursor(KindId::Approval, &OrderSpec::Single(OrderField::Key), Key::new(&["poc", "ns", "n"]).as_bytes());
        assert!(
            PageArgs::new(None, None, Some(&other_kind), None, KindId::Application, OrderSpec::Single(OrderField::Key), false, 10).is_err(),
            "cursor of another kind"
        );
        let c = encode_cursor(KindId::Application, &OrderSpec::Single(OrderField::CreatedAt), &[0; 8]);
        assert!(
            PageArgs::new(None, None, Some(&c), None, KindId::Application, OrderSpec::Single(OrderField::Key), false, 10).is_err(),
            "cursor of another order"
        );
    }
}
