//! Timestamps as stored in records: nanoseconds since the Unix epoch, UTC.

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

/// A point in time, UTC, nanosecond precision, stored as `i64` nanoseconds since
/// 1970-01-01T00:00:00Z (covers the years 1677–2262).
///
/// Kubernetes timestamps (`metav1.Time`) have second precision; they convert losslessly.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Timestamp(pub i64);

/// `Timestamp(2026-09-01T00:00:00Z)`: the instant readable in test output and fixtures.
impl std::fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Timestamp({})", self.to_rfc3339())
    }
}

impl Timestamp {
    /// Converts from chrono; times outside the representable range saturate.
    pub fn from_datetime(t: DateTime<Utc>) -> Timestamp {
        Timestamp(t.timestamp_nanos_opt().unwrap_or(if t.timestamp() < 0 { i64::MIN } else { i64::MAX }))
    }

    /// Converts to chrono.
    pub fn to_datetime(self) -> DateTime<Utc> {
        Utc.timestamp_nanos(self.0)
    }

    /// Parses an RFC 3339 string (`2026-09-01T00:00:00Z`).
    ///
    /// # Errors
    /// Returns the chrono parse error for a malformed string.
    pub fn parse_rfc3339(s: &str) -> Result<Timestamp, chrono::ParseError> {
        Ok(Timestamp::from_datetime(DateTime::parse_from_rfc3339(s)?.with_timezone(&Utc)))
    }

    /// RFC 3339 with second precision when the nanoseconds are zero (`2026-09-01T00:00:00Z`).
    pub fn to_rfc3339(self) -> String {
        self.to_datetime().to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    }

    /// Big-endian, order-preserving byte encoding (sign bit flipped), for index keys.
    pub fn to_sort_bytes(self) -> [u8; 8] {
        ((self.0 as u64) ^ (1 << 63)).to_be_bytes()
    }
}

impl From<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time> for Timestamp {
    fn from(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Timestamp {
        // k8s-openapi 0.29 wraps jiff::Timestamp.
        Timestamp(t.0.as_nanosecond().clamp(i64::MIN as i128, i64::MAX as i128) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sort_bytes_preserve_order() {
        let a = Timestamp(-5).to_sort_bytes();
        let b = Timestamp(0).to_sort_bytes();
        let c = Timestamp(1_700_000_000_000_000_000).to_sort_bytes();
        assert!(a < b && b < c);
    }

    #[test]
    fn rfc3339_round_trip() {
        let t = Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap();
        assert_eq!(t.0, 1_788_220_800_000_000_000);
        assert_eq!(t.to_rfc3339(), "2026-09-01T00:00:00Z");
    }
}
