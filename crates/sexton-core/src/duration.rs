//! Go's duration syntax (`30s`, `1m30s`, `500ms`), as kubexit reads `KUBEXIT_GRACE_PERIOD`,
//! and the same style for logs. Hand-written: the crates that parse durations
//! (humantime, go-parse-duration) differ from Go on fractions or units, and a drop-in
//! replacement for kubexit must read exactly what kubexit reads.

use std::time::Duration;

use thiserror::Error;

const HINT: &str = "use Go duration syntax such as 30s, 1m30s, 500ms";

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DurationError {
    #[error("empty duration; {HINT}")]
    Empty,
    #[error("must not be negative")]
    Negative,
    #[error("expected a number at {0:?}; {HINT}")]
    ExpectedNumber(String),
    #[error("missing unit after {0:?}; {HINT}")]
    MissingUnit(String),
    #[error("unknown unit {0:?}; {HINT}")]
    UnknownUnit(String),
    #[error("duration {0:?} is too large")]
    TooLarge(String),
}

/// Go's `time.ParseDuration` syntax, non-negative only: `300ms`, `1.5h`, `2h45m`, `0`.
pub fn parse_go_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let body = match s.as_bytes()[0] {
        b'-' => {
            if s[1..].chars().all(|c| c == '0') && s.len() > 1 {
                return Ok(Duration::ZERO);
            }
            return Err(DurationError::Negative);
        }
        b'+' => &s[1..],
        _ => s,
    };
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut total: u128 = 0; // nanoseconds
    let mut rest = body;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = &rest[..num_len];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(DurationError::ExpectedNumber(rest.into()));
        }
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(DurationError::MissingUnit(num.into())),
            other => return Err(DurationError::UnknownUnit(other.into())),
        };
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        let int: u128 = if int_part.is_empty() {
            0
        } else {
            int_part
                .parse()
                .map_err(|_| DurationError::TooLarge(s.into()))?
        };
        let mut value = int
            .checked_mul(scale)
            .ok_or_else(|| DurationError::TooLarge(s.into()))?;
        // Fraction: exact for up to 9 digits below the unit, like Go.
        let mut frac_scale = scale;
        for d in frac_part.chars() {
            frac_scale /= 10;
            if frac_scale == 0 {
                break;
            }
            value += u128::from(d.to_digit(10).unwrap_or(0)) * frac_scale;
        }
        total = total
            .checked_add(value)
            .ok_or_else(|| DurationError::TooLarge(s.into()))?;
    }
    if total > u128::from(u64::MAX) {
        return Err(DurationError::TooLarge(s.into()));
    }
    Ok(Duration::from_nanos(total as u64))
}

/// Formats a duration in Go style for logs (`1m30s`, `500ms`, `0s`).
pub fn format_go_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    if ns < 1_000_000_000 {
        let (unit, div) = if ns < 1_000 {
            ("ns", 1)
        } else if ns < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{}{unit}", trim_float(ns as f64 / div as f64));
    }
    let h = ns / 3_600_000_000_000;
    let m = (ns / 60_000_000_000) % 60;
    let s = (ns % 60_000_000_000) as f64 / 1e9;
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&format!("{}s", trim_float(s)));
    out
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.9}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ok: &[(&str, u64)] = &[
            ("0", 0),
            ("-0", 0),
            ("+5s", 5_000_000_000),
            ("30s", 30_000_000_000),
            ("1m30s", 90_000_000_000),
            ("500ms", 500_000_000),
            ("1.5h", 5_400_000_000_000),
            ("2h45m", 9_900_000_000_000),
            ("10us", 10_000),
            ("10µs", 10_000),
            ("10μs", 10_000),
            ("7ns", 7),
            (".5s", 500_000_000),
            ("1.s", 1_000_000_000),
            ("0.001s", 1_000_000),
            ("1h1m1s1ms1us1ns", 3_661_001_001_001),
        ];
        for (s, ns) in ok {
            assert_eq!(parse_go_duration(s), Ok(Duration::from_nanos(*ns)), "{s}");
        }
        for bad in [
            "",
            "s",
            "1",
            "1x",
            "1.2.3s",
            ".s",
            "-5s",
            "1s2",
            "5 s",
            "99999999999999h",
        ] {
            assert!(parse_go_duration(bad).is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn go_duration_format() {
        for (ns, s) in [
            (0u64, "0s"),
            (500_000_000, "500ms"),
            (90_000_000_000, "1m30s"),
            (30_000_000_000, "30s"),
            (3_600_000_000_000, "1h0m0s"),
            (1_500, "1.5µs"),
        ] {
            assert_eq!(format_go_duration(Duration::from_nanos(ns)), s);
        }
    }
}
