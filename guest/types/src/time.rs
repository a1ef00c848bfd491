//! Time as the engine keeps it (milliseconds since the Unix epoch, UTC) and the calendar around
//! it: civil dates, ISO 8601 in and out. No time zone database: inputs carry their offset.

use crate::error::FieldError;

/// Milliseconds since the Unix epoch, UTC.
pub type Timestamp = i64;

/// Milliseconds in a day.
pub const DAY_MS: i64 = 86_400_000;

/// The wall clock.
pub fn now() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// (year, month, day) of a UTC timestamp (Howard Hinnant's civil-from-days).
pub fn civil(ms: Timestamp) -> (i64, u32, u32) {
    let days = ms.div_euclid(DAY_MS);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month as u32, day as u32)
}

/// Days since 1970-01-01 of a civil date (days-from-civil).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// "May 2023": the words a question about a time would use.
pub fn month_year(ms: Timestamp) -> String {
    let (year, month, _) = civil(ms);
    format!("{} {year}", MONTHS[(month - 1) as usize])
}

/// YYYY-MM-DD of a UTC timestamp.
pub fn date(ms: Timestamp) -> String {
    let (year, month, day) = civil(ms);
    format!("{year:04}-{month:02}-{day:02}")
}

/// ISO 8601 in UTC to the second: `2026-11-29T10:00:00Z`.
pub fn format_iso(ms: Timestamp) -> String {
    let of_day = ms.rem_euclid(DAY_MS) / 1000;
    format!("{}T{:02}:{:02}:{:02}Z", date(ms), of_day / 3600, of_day / 60 % 60, of_day % 60)
}

/// Parses ISO 8601: `2026-11-29T10:00:00Z`, with fractional seconds, with an offset (`+01:00`),
/// without one (read as UTC), with a space for the `T`, without seconds, or a bare date
/// (midnight UTC). The error names `field`.
pub fn parse_iso(field: &str, text: &str) -> Result<Timestamp, FieldError> {
    let original = text;
    let bad = || {
        FieldError::new(
            field,
            format!("{original:?} is not an ISO 8601 time (e.g. 2026-11-29T10:00:00Z or 2026-11-29)"),
        )
    };
    let text = text.trim();
    let b = text.as_bytes();
    let digits = |s: &[u8]| -> Option<i64> {
        (!s.is_empty() && s.iter().all(u8::is_ascii_digit))
            .then(|| s.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(bad());
    }
    let year = digits(&b[0..4]).ok_or_else(bad)?;
    let month = digits(&b[5..7]).ok_or_else(bad)? as u32;
    let day = digits(&b[8..10]).ok_or_else(bad)? as u32;
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(FieldError::new(field, format!("{original:?} is not a date that exists")));
    }
    let mut ms = days_from_civil(year, month, day) * DAY_MS;
    let rest = &b[10..];
    if rest.is_empty() {
        return Ok(ms);
    }
    if !(rest[0] == b'T' || rest[0] == b't' || rest[0] == b' ') || rest.len() < 6 || rest[3] != b':' {
        return Err(bad());
    }
    let hour = digits(&rest[1..3]).ok_or_else(bad)?;
    let minute = digits(&rest[4..6]).ok_or_else(bad)?;
    let mut i = 6;
    let mut second = 0;
    let mut millis = 0;
    if rest.len() >= i + 3 && rest[i] == b':' {
        second = digits(&rest[i + 1..i + 3]).ok_or_else(bad)?;
        i += 3;
        if rest.len() > i && (rest[i] == b'.' || rest[i] == b',') {
            let start = i + 1;
            let mut end = start;
            while end < rest.len() && rest[end].is_ascii_digit() {
                end += 1;
            }
            if end == start {
                return Err(bad());
            }
            let frac = &rest[start..end.min(start + 3)];
            millis = digits(frac).ok_or_else(bad)? * 10i64.pow(3 - frac.len() as u32);
            i = end;
        }
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(FieldError::new(field, format!("{original:?} is not a time of day that exists")));
    }
    ms += ((hour * 60 + minute) * 60 + second) * 1000 + millis;
    let zone = &rest[i..];
    match zone {
        [] | [b'Z'] | [b'z'] => Ok(ms),
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] | [sign @ (b'+' | b'-'), h1, h2, m1, m2] => {
            let h = digits(&[*h1, *h2]).ok_or_else(bad)?;
            let m = digits(&[*m1, *m2]).ok_or_else(bad)?;
            if h > 23 || m > 59 {
                return Err(bad());
            }
            let offset = (h * 60 + m) * 60_000;
            Ok(if *sign == b'+' { ms - offset } else { ms + offset })
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_in_the_usual_iso_forms() {
        assert_eq!(parse_iso("at", "1970-01-02").unwrap(), 86_400_000);
        assert_eq!(parse_iso("at", "1970-01-01T00:00:01Z").unwrap(), 1000);
        assert_eq!(parse_iso("at", "1970-01-01T01:00:00+01:00").unwrap(), 0);
        assert_eq!(parse_iso("at", "1969-12-31T23:00:00-01:00").unwrap(), 0);
        assert_eq!(parse_iso("at", "2023-05-08T13:56:00").unwrap(), 1_683_554_160_000);
        assert_eq!(parse_iso("at", "2023-05-08 13:56").unwrap(), 1_683_554_160_000);
        assert_eq!(parse_iso("at", "2023-05-08T13:56:00.250Z").unwrap(), 1_683_554_160_250);
        assert_eq!(parse_iso("at", "2024-02-29").unwrap(), days_from_civil(2024, 2, 29) * DAY_MS);
        for bad in ["yesterday", "2024-02-30", "2023-02-29", "2024-01-01T25:00", "20240101", "2024-1-1", ""] {
            let err = parse_iso("at", bad).unwrap_err();
            assert_eq!(err.field, "at", "{bad}");
        }
    }

    #[test]
    fn dates_are_civil_utc_and_round_trip() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(-1), "1969-12-31");
        assert_eq!(date(1_700_000_000_000), "2023-11-14");
        assert_eq!(date(951_782_400_000), "2000-02-29");
        assert_eq!(month_year(1_683_554_160_000), "May 2023");
        assert_eq!(format_iso(1_683_554_160_999), "2023-05-08T13:56:00Z");
        for ms in [0, 1_767_225_600_000, -86_400_000 * 400, 253_402_300_799_000] {
            assert_eq!(parse_iso("t", &format_iso(ms)).unwrap(), ms);
        }
    }
}
