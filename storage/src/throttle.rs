//! Logging a repeated failure once per cause and interval, with a count ([`LogThrottle`]):
//! a full volume fails every write the same way, and one line per object or per retry would
//! fill the log (and the volume it may share) faster than anything else.

use std::time::{Duration, Instant};

/// Admits one log line per cause and interval. Not thread-safe: one per logging loop.
#[derive(Debug)]
pub struct LogThrottle {
    interval: Duration,
    /// The cause last admitted, and when.
    last: Option<(String, Instant)>,
    /// Occurrences of that cause not admitted since.
    suppressed: u64,
}

impl LogThrottle {
    /// At most one line per cause every `interval`.
    pub fn new(interval: Duration) -> LogThrottle {
        LogThrottle { interval, last: None, suppressed: 0 }
    }

    /// Counts one occurrence of `cause` (an error message; what it quotes in double quotes,
    /// such as a temporary file's path, does not make another cause); `Some(n)` when it is to
    /// be logged now, `n` being the occurrences of the same cause left unlogged since its last
    /// line. A new cause is logged at once.
    pub fn admit(&mut self, cause: &str) -> Option<u64> {
        let cause = without_quoted(cause);
        let now = Instant::now();
        match &self.last {
            Some((last, at)) if *last == cause && now.duration_since(*at) < self.interval => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some((cause, now));
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }

    /// Forgets the last cause (after a recovery): its next occurrence is logged at once.
    pub fn reset(&mut self) {
        self.last = None;
        self.suppressed = 0;
    }
}

/// `text` without what it quotes in double quotes (a temporary file's path, say).
pub fn without_quoted(text: &str) -> String {
    text.split('"').step_by(2).collect::<Vec<_>>().join("\"\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_cause_and_interval_with_the_count_of_the_others() {
        let mut t = LogThrottle::new(Duration::from_secs(3600));
        assert_eq!(t.admit("No space left on device"), Some(0));
        for _ in 0..81_999 {
            assert_eq!(t.admit("No space left on device"), None);
        }
        assert_eq!(t.admit("Read-only file system"), Some(81_999), "a new cause is logged at once");
        let mut short = LogThrottle::new(Duration::ZERO);
        assert_eq!(short.admit("a"), Some(0));
        assert_eq!(short.admit("a"), Some(0), "after the interval the same cause is logged again");
        let full = |path: &str| format!("An IO error occurred: 'No space left on device (os error 28) at path \"{path}\"'");
        let mut search = LogThrottle::new(Duration::from_secs(3600));
        assert_eq!(search.admit(&full("/data/search/.tmpYpLEEd")), Some(0));
        assert_eq!(search.admit(&full("/data/search/.tmpc5givC")), None, "another temporary file, the same cause");
        t.reset();
        assert_eq!(t.admit("Read-only file system"), Some(0));
    }
}
