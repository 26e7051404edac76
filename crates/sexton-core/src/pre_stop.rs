//! A container's preStop hook as a supervisor setting (pure): `KUBEXIT_PRE_STOP`, written
//! by `kubectl sexton inject` from the container's `lifecycle.preStop`, which the kubelet
//! runs only when *it* stops the container (pod deletion). The supervisor runs it before
//! the termination signal when it stops the child itself (the mains are done).
//!
//! Syntax: `exec:["CMD","ARG",...]` (a JSON array of strings, as `exec.command`),
//! `http://HOST:PORT/PATH` (a GET, as `httpGet`), `sleep:DURATION` (as `sleep.seconds`).

use std::time::Duration;

use thiserror::Error;

use crate::duration::{format_go_duration, parse_go_duration};
use crate::endpoint::HttpUrl;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreStop {
    /// Run this command (no shell) inside the container.
    Exec(Vec<String>),
    /// GET this URL.
    Http(HttpUrl),
    /// Wait this long.
    Sleep(Duration),
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PreStopError {
    #[error("expected exec:[\"CMD\",\"ARG\",...], http://HOST:PORT/PATH or sleep:DURATION")]
    Syntax,
    #[error("exec: expected a non-empty JSON array of strings, as exec.command")]
    Exec,
    #[error("http: {0}")]
    Http(crate::endpoint::EndpointError),
    #[error("sleep: {0}")]
    Sleep(String),
}

impl PreStop {
    pub fn parse(s: &str) -> Result<PreStop, PreStopError> {
        let s = s.trim();
        if let Some(json) = s.strip_prefix("exec:") {
            let command: Vec<String> =
                serde_json::from_str(json.trim()).map_err(|_| PreStopError::Exec)?;
            if command.first().is_none_or(|c| c.is_empty()) {
                return Err(PreStopError::Exec);
            }
            return Ok(PreStop::Exec(command));
        }
        if s.starts_with("http://") {
            return HttpUrl::parse(s)
                .map(PreStop::Http)
                .map_err(PreStopError::Http);
        }
        if let Some(d) = s.strip_prefix("sleep:") {
            return parse_go_duration(d.trim())
                .map(PreStop::Sleep)
                .map_err(|e| PreStopError::Sleep(e.to_string()));
        }
        Err(PreStopError::Syntax)
    }

    /// How long the kubelet spent on this hook before it sent the stop signal, as far as
    /// the supervisor can know: a `sleep` hook's length; nothing for the others.
    pub fn known_length(&self) -> Duration {
        match self {
            PreStop::Sleep(d) => *d,
            _ => Duration::ZERO,
        }
    }

    /// As written in the setting (for logs).
    pub fn describe(&self) -> String {
        match self {
            PreStop::Exec(c) => format!("exec:{}", serde_json::to_string(c).unwrap_or_default()),
            PreStop::Http(u) => u.to_string(),
            PreStop::Sleep(d) => format!("sleep:{}", format_go_duration(*d)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_each_kind() {
        assert_eq!(
            PreStop::parse(r#" exec:["/bin/sh", "-c", "kill -QUIT 1"] "#),
            Ok(PreStop::Exec(vec![
                "/bin/sh".into(),
                "-c".into(),
                "kill -QUIT 1".into()
            ]))
        );
        let PreStop::Http(u) = PreStop::parse("http://127.0.0.1:15000/drain?x=1").unwrap() else {
            panic!()
        };
        assert_eq!((u.port, u.path.as_str()), (15000, "/drain?x=1"));
        assert_eq!(
            PreStop::parse("sleep:5s"),
            Ok(PreStop::Sleep(Duration::from_secs(5)))
        );
        for s in [r#"exec:["a","b"]"#, "http://10.0.0.1:80/x", "sleep:1m30s"] {
            assert_eq!(PreStop::parse(s).unwrap().describe(), s);
        }
        assert_eq!(
            PreStop::parse("sleep:5s").unwrap().known_length(),
            Duration::from_secs(5)
        );
        assert_eq!(
            PreStop::parse(r#"exec:["x"]"#).unwrap().known_length(),
            Duration::ZERO
        );
    }

    #[test]
    fn bad_values_say_what_is_expected() {
        for (bad, says) in [
            ("", "expected exec:"),
            ("exec:", "non-empty JSON array"),
            ("exec:[]", "non-empty JSON array"),
            (r#"exec:[""]"#, "non-empty JSON array"),
            ("exec:[1]", "non-empty JSON array"),
            ("exec:sh -c x", "non-empty JSON array"),
            ("https://a/", "expected exec:"),
            ("http://a:0/", "http: bad port"),
            ("sleep:5", "sleep: missing unit"),
            ("tcp://a:1", "expected exec:"),
        ] {
            let e = PreStop::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
