//! Reading a view's records ahead of its scans, on a thread of its own
//! ([`crate::ReadView::read_ahead`]).
//!
//! A long walk of a records table in key order (an export) misses redb's page cache on nearly
//! every page: each miss is a `pread`, a copy and a cache insertion on the walking thread. The
//! helper walks the same key range a little ahead of the scan, so that the scan finds its pages
//! cached and spends its time decoding. It reads entries without decoding them, stays at most a
//! window of entries ahead of what the scan has taken (so what it caches is used
//! before redb's cache evicts it), follows the view's latest scan only, and stops when the view
//! is dropped (which waits for it).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{JoinHandle, Thread};

/// One scan to follow: a range of the records table over the scan's keys (of the view's
/// transaction, opened by `scan_records` as its own) and its direction.
pub(crate) struct Follow {
    pub range: redb::Range<'static, &'static [u8], &'static [u8]>,
    pub reverse: bool,
}

/// What the scan and the helper share.
struct Shared {
    /// The scan to follow, taken by the helper when `generation` moved.
    next: Mutex<Option<Follow>>,
    /// Bumped for each new scan.
    generation: AtomicU64,
    /// Entries the current scan has taken.
    taken: AtomicUsize,
    /// The `taken` count the parked helper waits for (`usize::MAX`: it does not wait on it).
    wake_at: AtomicUsize,
    stop: AtomicBool,
    /// While the helper is parked: the entries it read of the scan it follows.
    parked: Mutex<Option<usize>>,
    parked_changed: Condvar,
}

impl Shared {
    /// Parks the helper, `read` entries into its scan, until unparked.
    fn park(&self, read: usize) {
        *self.parked.lock().unwrap_or_else(|e| e.into_inner()) = Some(read);
        self.parked_changed.notify_all();
        std::thread::park();
        *self.parked.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// A helper thread reading ahead of one view's scans (see the module docs).
pub(crate) struct ReadAhead {
    shared: Arc<Shared>,
    helper: Option<JoinHandle<()>>,
    thread: Thread,
}

impl ReadAhead {
    /// Starts the helper (thread `cp-read-ahead`), `window` entries ahead at most; `None` when
    /// the thread cannot be started (the scans then read as they would without it).
    pub(crate) fn start(window: usize) -> Option<ReadAhead> {
        let shared = Arc::new(Shared {
            next: Mutex::new(None),
            generation: AtomicU64::new(0),
            taken: AtomicUsize::new(0),
            wake_at: AtomicUsize::new(usize::MAX),
            stop: AtomicBool::new(false),
            parked: Mutex::new(None),
            parked_changed: Condvar::new(),
        });
        let helper_shared = shared.clone();
        let window = window.max(1);
        match std::thread::Builder::new().name("cp-read-ahead".into()).spawn(move || run(&helper_shared, window)) {
            Ok(helper) => Some(ReadAhead { shared, thread: helper.thread().clone(), helper: Some(helper) }),
            Err(e) => {
                tracing::debug!(error = %e, "read-ahead thread not started");
                None
            }
        }
    }

    /// Makes the helper follow a new scan (and leave the one it followed), returning the
    /// counter the scan calls for each entry it takes.
    pub(crate) fn follow(&self, scan: Follow) -> Taken<'_> {
        *self.shared.next.lock().unwrap_or_else(|e| e.into_inner()) = Some(scan);
        self.shared.taken.store(0, Ordering::Release);
        self.shared.generation.fetch_add(1, Ordering::AcqRel);
        self.thread.unpark();
        Taken { ahead: self }
    }
}

#[cfg(test)]
impl ReadAhead {
    /// Waits until the helper is parked having read at least `read` entries of its scan, and
    /// returns how many it read (more than `read` when it went past).
    pub(crate) fn parked_after(&self, read: usize) -> usize {
        let parked = self.shared.parked.lock().unwrap_or_else(|e| e.into_inner());
        let (parked, _) = self
            .shared
            .parked_changed
            .wait_timeout_while(parked, std::time::Duration::from_secs(60), |p| p.is_none_or(|n| n < read))
            .unwrap_or_else(|e| e.into_inner());
        parked.unwrap_or(0)
    }
}

/// Counts the entries one scan takes, waking the helper when it waits for them.
pub(crate) struct Taken<'a> {
    ahead: &'a ReadAhead,
}

impl Taken<'_> {
    /// One more entry taken.
    pub(crate) fn one(&self) {
        let shared = &self.ahead.shared;
        let taken = shared.taken.fetch_add(1, Ordering::AcqRel) + 1;
        if taken >= shared.wake_at.load(Ordering::Acquire) {
            shared.wake_at.store(usize::MAX, Ordering::Release);
            self.ahead.thread.unpark();
        }
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.thread.unpark();
        if let Some(helper) = self.helper.take() {
            // The helper holds a table of the view's transaction: the view ends once it is gone.
            let _ = helper.join();
        }
    }
}

/// The helper's loop: takes the latest scan, reads its entries up to `window` ahead of the
/// scan, parks when ahead or done.
fn run(shared: &Shared, window: usize) {
    let (mut seen, mut read) = (0, 0);
    while !shared.stop.load(Ordering::Acquire) {
        let generation = shared.generation.load(Ordering::Acquire);
        if generation == seen {
            shared.park(read);
            continue;
        }
        seen = generation;
        let Some(scan) = shared.next.lock().unwrap_or_else(|e| e.into_inner()).take() else { continue };
        read = walk(shared, scan, generation, window);
    }
}

/// Reads the entries of `scan` while it is the latest and the view lives; returns how many.
fn walk(shared: &Shared, scan: Follow, generation: u64, window: usize) -> usize {
    let mut entries: Box<dyn Iterator<Item = _>> = if scan.reverse { Box::new(scan.range.rev()) } else { Box::new(scan.range) };
    let mut read = 0usize;
    loop {
        if shared.stop.load(Ordering::Acquire) || shared.generation.load(Ordering::Acquire) != generation {
            return read;
        }
        if read >= shared.taken.load(Ordering::Acquire) + window {
            // Ahead by the window: wait until the scan has taken half of it.
            let wake_at = read - window / 2;
            shared.wake_at.store(wake_at, Ordering::Release);
            if shared.taken.load(Ordering::Acquire) < wake_at {
                shared.park(read);
            }
            continue;
        }
        // Reading the entry is what caches its page; its bytes are not needed.
        match entries.next() {
            Some(Ok(_)) => read += 1,
            Some(Err(_)) | None => return read,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::tables::OrderField;
    use schema::kinds::zone::Zone;
    use schema::{Scope, Timestamp};
    use std::ops::Bound;

    /// A store of `n` zones (`z00` … in key order).
    fn zones(dir: &std::path::Path, n: usize) -> crate::Store {
        let store = crate::Store::open(dir).unwrap();
        store
            .write(Timestamp(1), |batch| {
                (0..n).for_each(|i| crate::test_support::zone_version(batch, &format!("z{i:02}"), "1", Timestamp(1)));
                Ok(())
            })
            .unwrap();
        store
    }

    /// The cursor suffixes of a scan of zones from `from`, `take` of them.
    fn suffixes(view: &crate::ReadView, from: Bound<&[u8]>, reverse: bool, take: usize) -> Vec<Vec<u8>> {
        let rows = view.scan_records::<Zone>(OrderField::Key, &Scope::All, from, reverse).unwrap();
        rows.take(take).map(|row| row.unwrap().0).collect()
    }

    #[test]
    fn scans_read_ahead_answer_what_plain_scans_answer_page_after_page() {
        let dir = tempfile::tempdir().unwrap();
        let store = zones(dir.path(), 30);
        let (plain, ahead) = (store.read().unwrap(), store.read().unwrap());
        ahead.read_ahead(4);
        for reverse in [false, true] {
            let whole = suffixes(&plain, Bound::Unbounded, reverse, usize::MAX);
            assert_eq!(whole.len(), 30);
            // Pages of 7, each a new scan after the last one's cursor.
            let mut paged = suffixes(&ahead, Bound::Unbounded, reverse, 7);
            while paged.len() < whole.len() {
                let last = paged.last().unwrap().clone();
                paged.extend(suffixes(&ahead, Bound::Excluded(&last), reverse, 7));
            }
            assert_eq!(paged, whole, "reverse {reverse}");
        }
    }

    #[test]
    fn the_helper_reads_a_window_ahead_of_what_the_scan_took_and_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let store = zones(dir.path(), 20);
        let view = store.read().unwrap();
        view.read_ahead(4);
        let ahead = view.read_ahead.get().unwrap().as_ref().unwrap();
        let mut rows = view.scan_records::<Zone>(OrderField::Key, &Scope::All, Bound::Unbounded, false).unwrap();
        // Once the scan took `taken`, the helper parks between half a window and a window
        // ahead (it waits for the scan to take half of the window before reading on).
        let settled = |taken: usize| {
            let read = ahead.parked_after(taken + 3);
            assert!((taken + 3..=taken + 4).contains(&read), "{taken} taken, a window of 4: {read} read");
        };
        rows.by_ref().take(2).for_each(|row| assert!(row.is_ok()));
        settled(2);
        rows.by_ref().take(2).for_each(|row| assert!(row.is_ok()));
        settled(4);
        assert_eq!(rows.count(), 16);
        assert_eq!(ahead.parked_after(20), 20, "the table's end");
    }
}
