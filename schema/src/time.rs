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

    /// RFC 3339 in UTC (`Z`) with the sub-second digits that are not zero, in groups of three
    /// (`2026-09-01T00:00:00Z`, `2026-09-01T00:00:00.250Z`): chrono's
    /// `to_rfc3339_opts(SecondsFormat::AutoSi, true)`, which a test compares it with.
    pub fn to_rfc3339(self) -> String {
        let mut out = Vec::with_capacity(30);
        self.write_rfc3339(&mut out);
        // Digits and ASCII punctuation only.
        String::from_utf8(out).unwrap_or_default()
    }

    /// Appends [`Timestamp::to_rfc3339`] to `out` (an export writes one per row and time
    /// column). The years of an `i64` of nanoseconds (1677–2262) always take four digits.
    pub fn write_rfc3339(self, out: &mut Vec<u8>) {
        let secs = self.0.div_euclid(1_000_000_000);
        let nanos = self.0.rem_euclid(1_000_000_000) as u32;
        let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
        let of_day = secs.rem_euclid(86_400) as u32;
        fn digits(out: &mut Vec<u8>, value: u32, width: u32) {
            for place in (0..width).rev() {
                out.push(b'0' + (value / 10u32.pow(place) % 10) as u8);
            }
        }
        digits(out, year as u32, 4);
        out.push(b'-');
        digits(out, month, 2);
        out.push(b'-');
        digits(out, day, 2);
        out.push(b'T');
        digits(out, of_day / 3600, 2);
        out.push(b':');
        digits(out, of_day / 60 % 60, 2);
        out.push(b':');
        digits(out, of_day % 60, 2);
        match nanos {
            0 => {}
            n if n % 1_000_000 == 0 => {
                out.push(b'.');
                digits(out, n / 1_000_000, 3);
            }
            n if n % 1_000 == 0 => {
                out.push(b'.');
                digits(out, n / 1_000, 6);
            }
            n => {
                out.push(b'.');
                digits(out, n, 9);
            }
        }
        out.push(b'Z');
    }

    /// Big-endian, order-preserving byte encoding (sign bit flipped), for index keys.
    pub fn to_sort_bytes(self) -> [u8; 8] {
        ((self.0 as u64) ^ (1 << 63)).to_be_bytes()
    }
}

/// The proleptic Gregorian `(year, month, day)` of `days` since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
    fn rfc3339_is_chronos_for_every_precision_and_both_ends_of_the_range() {
        let chrono = |t: Timestamp| t.to_datetime().to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
        let mut times = vec![i64::MIN, i64::MIN + 1, -1, 0, 1, 999_999_999, 1_000_000_000, 951_782_400_000_000_000, i64::MAX];
        // A deterministic spread over the range, then each value at every sub-second precision.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let t = x as i64;
            times.extend([t, t - t.rem_euclid(1_000_000_000), t - t.rem_euclid(1_000_000), t - t.rem_euclid(1_000)]);
        }
        for t in times {
            assert_eq!(Timestamp(t).to_rfc3339(), chrono(Timestamp(t)), "{t}");
        }
    }

    #[test]
    fn rfc3339_round_trip() {
        let t = Timestamp::parse_rfc3339("2026-09-01T00:00:00Z").unwrap();
        assert_eq!(t.0, 1_788_220_800_000_000_000);
        assert_eq!(t.to_rfc3339(), "2026-09-01T00:00:00Z");
    }
}
