//! Flag values several subcommands read: a Kubernetes version (`--kubernetes-version`, and
//! the API server's own), a timeout (`--registry-timeout`, `--request-timeout`), and a
//! container runtime as nodes report it (`--container-runtime`).

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

#[derive(Debug, thiserror::Error)]
#[error("expected NAME://VERSION as nodes report it, such as containerd://2.1.4")]
pub struct BadRuntime;

/// `containerd://2.1.4`, `cri-o://1.33.2`: a node's `status.nodeInfo.containerRuntimeVersion`.
pub fn runtime(s: &str) -> Result<String, BadRuntime> {
    match s.trim().split_once("://") {
        Some((name, version)) if !name.is_empty() && !version.is_empty() => Ok(s.trim().into()),
        _ => Err(BadRuntime),
    }
}

#[cfg(test)]
mod tests {
    use super::{runtime, version};

    #[test]
    fn runtimes_as_nodes_report_them() {
        assert_eq!(
            runtime(" containerd://2.1.4").unwrap(),
            "containerd://2.1.4"
        );
        for s in ["", "containerd", "containerd://", "://2.1", "2.1.4"] {
            assert!(runtime(s).is_err(), "{s}");
        }
    }

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
