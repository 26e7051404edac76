//! Flag values several subcommands read: a Kubernetes version (`--kubernetes-version`, and
//! the API server's own), and a timeout (`--registry-timeout`, `--request-timeout`).

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
#[error("expected MAJOR.MINOR, such as 1.29")]
pub struct BadVersion;

/// `1.29`, `v1.29.3`, `1.29+` (as some providers report it).
pub fn version(s: &str) -> Result<(u32, u32), BadVersion> {
    let s = s.trim().trim_start_matches('v');
    let mut parts = s.split('.');
    let number = |p: Option<&str>| {
        let digits: String = p?.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    match (number(parts.next()), number(parts.next())) {
        (Some(major), Some(minor)) => Ok((major, minor)),
        _ => Err(BadVersion),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BadTimeout {
    #[error(transparent)]
    Syntax(#[from] sexton_core::duration::DurationError),
    #[error("must be more than 0s")]
    Zero,
}

/// `--registry-timeout`, `--request-timeout`: a Go duration (`20s`, `1m`), more than zero.
pub fn timeout(s: &str) -> Result<Duration, BadTimeout> {
    match sexton_core::duration::parse_go_duration(s)? {
        d if d.is_zero() => Err(BadTimeout::Zero),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::version;

    #[test]
    fn versions_as_providers_report_them() {
        for (s, v) in [
            ("1.29", (1, 29)),
            ("v1.28.3", (1, 28)),
            ("1.30+", (1, 30)),
            ("1.31.0-eks-1", (1, 31)),
        ] {
            assert_eq!(version(s).unwrap(), v, "{s}");
        }
        for s in ["", "1", "one.two", "v"] {
            assert!(version(s).is_err(), "{s}");
        }
    }
}
