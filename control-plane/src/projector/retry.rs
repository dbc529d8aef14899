//! The writer's retry policy in one place, as pure functions (kube-rs' `error_policy` shape):
//! which outcome waits for another attempt ([`Wait`]), and how long ([`delay`], the one
//! [`backoff`] both waits use). The writer draws the jitter and keeps the attempt counts.

use crate::config::ProjectorConfig;
use std::time::Duration;

/// The longest wait between retries of a change whose parent, link target or natural key is
/// missing.
pub const MAX_DEPENDENCY_DELAY: Duration = Duration::from_secs(300);

/// The first wait after a store error.
pub const STORE_ERROR_DELAY: Duration = Duration::from_secs(1);

/// The longest wait between retries after store errors.
pub const MAX_STORE_ERROR_DELAY: Duration = Duration::from_secs(60);

/// Why a change waits for another attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// A parent is missing, a link target is not there yet, or another object holds the
    /// natural key: retried after `DEPENDENCY_DELAY` + jitter, doubling up to
    /// [`MAX_DEPENDENCY_DELAY`]. A parent that arrives wakes its children at once, and a link
    /// target that arrives relinks them in the store, so the backoff delays nothing that can
    /// be done; an object whose target never comes costs a retry every few minutes.
    Dependency,
    /// The store refused the write: retried after [`STORE_ERROR_DELAY`] doubling up to
    /// [`MAX_STORE_ERROR_DELAY`].
    StoreError,
}

/// `base` doubled per earlier attempt, at most `max`.
pub fn backoff(base: Duration, attempts: u32, max: Duration) -> Duration {
    base.saturating_mul(1u32 << attempts.min(16)).min(max)
}

/// The wait before the next attempt of a change that waited `attempts` times before for `why`
/// (0 for its first wait);
/// `jitter` is uniform in `[0, 1)` (drawn by the caller).
pub fn delay(why: Wait, attempts: u32, projector: &ProjectorConfig, jitter: f64) -> Duration {
    match why {
        Wait::Dependency => backoff(
            projector.dependency_delay + projector.dependency_delay_jitter.mul_f64(jitter.clamp(0.0, 1.0)),
            attempts,
            MAX_DEPENDENCY_DELAY,
        ),
        Wait::StoreError => backoff(STORE_ERROR_DELAY, attempts, MAX_STORE_ERROR_DELAY),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_retries_back_off_to_five_minutes() {
        let p = ProjectorConfig {
            dependency_delay: Duration::from_secs(3),
            dependency_delay_jitter: Duration::from_secs(2),
            ..ProjectorConfig::default()
        };
        let delays: Vec<u64> = (0..10).map(|w| delay(Wait::Dependency, w, &p, 0.0).as_secs()).collect();
        assert_eq!(delays, vec![3, 6, 12, 24, 48, 96, 192, 300, 300, 300]);
        assert_eq!(delay(Wait::Dependency, 0, &p, 0.5), Duration::from_secs(4), "half the jitter");
        assert_eq!(delay(Wait::Dependency, 1, &p, 0.5), Duration::from_secs(8), "the jitter doubles too");
        assert_eq!(delay(Wait::Dependency, u32::MAX, &p, 0.99), MAX_DEPENDENCY_DELAY);
        assert_eq!(backoff(Duration::ZERO, 5, MAX_DEPENDENCY_DELAY), Duration::ZERO);
    }

    #[test]
    fn store_errors_back_off_from_one_second_to_a_minute() {
        let p = ProjectorConfig::default();
        let delays: Vec<u64> = (0..8).map(|f| delay(Wait::StoreError, f, &p, 0.7).as_millis() as u64).collect();
        assert_eq!(delays, vec![1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000]);
    }
}
