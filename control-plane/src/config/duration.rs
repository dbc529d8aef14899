//! Go-style durations (`time.ParseDuration`): `2s`, `5m`, `10ms`, `1h30m`, `1.5s`, `0`.

use std::time::Duration;

/// Parses a Go-style duration: one or more `<decimal><unit>` terms with units `ns`, `us` (`µs`),
/// `ms`, `s`, `m`, `h`; a bare `0` is zero. Negative durations are rejected.
///
/// # Errors
/// A message describing what is wrong (used in configuration errors).
pub fn parse(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s.starts_with('-') {
        return Err("negative durations are not allowed".into());
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    let mut rest = s;
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let num = &rest[..num_len];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(format!("invalid duration {s:?} (expected e.g. 2s, 500ms, 5m, 1h30m)"));
        }
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("missing unit in duration {s:?} (units: ns, us, ms, s, m, h)")),
            other => return Err(format!("unknown unit {other:?} in duration {s:?} (units: ns, us, ms, s, m, h)")),
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        let int: u128 = if int.is_empty() { 0 } else { int.parse().map_err(|_| format!("duration {s:?} is too large"))? };
        let mut term = int.checked_mul(nanos_per_unit).ok_or_else(|| format!("duration {s:?} is too large"))?;
        let mut scale = nanos_per_unit;
        for d in frac.chars().take(18) {
            scale /= 10;
            term += u128::from(d.to_digit(10).unwrap_or(0)) * scale;
        }
        total_nanos = total_nanos.checked_add(term).ok_or_else(|| format!("duration {s:?} is too large"))?;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000).map_err(|_| format!("duration {s:?} is too large"))?;
    Ok(Duration::new(secs, (total_nanos % 1_000_000_000) as u32))
}

/// Formats a duration the way Go prints short ones (`2s`, `500ms`, `5m0s` → `5m`); used in help
/// and logs.
pub fn format(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    let nanos = d.as_nanos();
    if nanos.is_multiple_of(3_600_000_000_000) {
        format!("{}h", nanos / 3_600_000_000_000)
    } else if nanos.is_multiple_of(60_000_000_000) {
        format!("{}m", nanos / 60_000_000_000)
    } else if nanos.is_multiple_of(1_000_000_000) {
        format!("{}s", nanos / 1_000_000_000)
    } else if nanos.is_multiple_of(1_000_000) {
        format!("{}ms", nanos / 1_000_000)
    } else {
        format!("{:?}", d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("10ms"), Ok(Duration::from_millis(10)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse(".5m"), Ok(Duration::from_secs(30)));
        assert!(parse("2").is_err());
        assert!(parse("-2s").is_err());
        assert!(parse("2x").is_err());
        assert!(parse("").is_err());
        assert!(parse("s").is_err());
        assert!(parse("1..2s").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(format(Duration::from_secs(300)), "5m");
        assert_eq!(format(Duration::from_secs(2)), "2s");
        assert_eq!(format(Duration::from_millis(10)), "10ms");
        assert_eq!(format(Duration::ZERO), "0s");
    }
}
