//! A sidecar's `startupProbe` and `lifecycle.preStop`, which the kubelet acts on only for
//! native sidecars (start gating) or on pod deletion (preStop), as supervisor settings:
//! `KUBEXIT_READY_PROBE` (with its interval and timeout, and the probe's time budget for
//! the birth timeouts) and `KUBEXIT_PRE_STOP`. Each value is checked with the supervisor's
//! own parser (sexton-core), so the supervisor never refuses what inject wrote.
//!
//! What has no equivalent is not carried and says so (`Err(caveat)`): an `exec` or `grpc`
//! startupProbe (the mains start once the sidecar's process started), HTTPS (a TCP connect
//! to its port instead, for a probe), a named port the container does not declare.

use serde_json::Value;
use sexton_core::endpoint::{Probe, bracket};
use sexton_core::pre_stop::PreStop;

use crate::entrypoint::escape;
use crate::template::name;

/// The kubelet's defaults for a probe's fields.
const PERIOD: u64 = 10;
const TIMEOUT: u64 = 1;
const FAILURE_THRESHOLD: u64 = 3;
/// The supervisor checks at least this often (seconds): a startupProbe's period only
/// bounds how late the kubelet would notice; checking sooner starts the mains sooner.
const MAX_INTERVAL: u64 = 1;

/// A startupProbe as the supervisor's readiness probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyProbe {
    /// `KUBEXIT_READY_PROBE`, `$`-escaped for the kubelet's expansion of env values.
    pub probe: String,
    pub interval: String,
    pub timeout: String,
    /// initialDelaySeconds + failureThreshold × periodSeconds: how long the kubelet lets
    /// the probe fail before it gives up on the container (seconds).
    pub budget: u64,
    /// What is not carried over exactly.
    pub caveat: Option<String>,
}

/// What of a container's own settings is not carried over, in the user's words: said in the
/// report and at admission as a warning, never a refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Caveat(pub String);

/// The sidecar's startupProbe as a readiness probe; `Ok(None)` without one.
pub fn startup_probe(c: &Value) -> Result<Option<ReadyProbe>, Caveat> {
    let p = &c["startupProbe"];
    if !p.is_object() {
        return Ok(None);
    }
    let n = name(c);
    let secs = |k: &str, d: u64| p[k].as_u64().unwrap_or(d);
    let (period, timeout) = (
        secs("periodSeconds", PERIOD),
        secs("timeoutSeconds", TIMEOUT),
    );
    let budget =
        secs("initialDelaySeconds", 0) + secs("failureThreshold", FAILURE_THRESHOLD) * period;
    let (url, caveat) = if p["httpGet"].is_object() {
        http_probe(c, &p["httpGet"])?
    } else if p["tcpSocket"].is_object() {
        let t = &p["tcpSocket"];
        (
            format!(
                "tcp://{}:{}",
                host(t),
                port(c, t, "startupProbe.tcpSocket")?
            ),
            None,
        )
    } else {
        let kind = ["exec", "grpc"]
            .into_iter()
            .find(|k| !p[*k].is_null())
            .unwrap_or("handler");
        return Err(Caveat(format!(
            "sidecar {n:?}: a startupProbe's {kind} has no equivalent in the supervisor, so the mains start once its process started"
        )));
    };
    Probe::parse(&url).map_err(|e| Caveat(format!("sidecar {n:?}: startupProbe {url:?} cannot be checked ({e}), so the mains start once its process started")))?;
    Ok(Some(ReadyProbe {
        probe: escape(&url),
        interval: format!("{}s", period.clamp(1, MAX_INTERVAL)),
        timeout: format!("{}s", timeout.max(1)),
        budget,
        caveat,
    }))
}

/// `http://` for HTTP, a TCP connect for HTTPS (no TLS client in the supervisor).
fn http_probe(c: &Value, h: &Value) -> Result<(String, Option<String>), Caveat> {
    let n = name(c);
    let port = port(c, h, "startupProbe.httpGet")?;
    let mut caveats = vec![];
    if !h["httpHeaders"].as_array().is_none_or(Vec::is_empty) {
        caveats.push("its httpHeaders are not sent");
    }
    if h["scheme"]
        .as_str()
        .is_some_and(|s| s.eq_ignore_ascii_case("https"))
    {
        caveats
            .push("it uses HTTPS, so the supervisor only checks that the port accepts connections");
        return Ok((format!("tcp://{}:{port}", host(h)), caveat(n, &caveats)));
    }
    let path = h["path"].as_str().unwrap_or("/");
    let slash = if path.starts_with('/') { "" } else { "/" };
    Ok((
        format!("http://{}:{port}{slash}{path}", host(h)),
        caveat(n, &caveats),
    ))
}

fn caveat(n: &str, what: &[&str]) -> Option<String> {
    (!what.is_empty()).then(|| format!("sidecar {n:?}: startupProbe: {}", what.join("; ")))
}

/// A probe's or hook's host: the kubelet's default is the pod's IP; the supervisor, inside the
/// pod, asks 127.0.0.1 instead, which reaches every server listening on all addresses or on
/// loopback (not one bound to the pod's IP alone: docs/strategies.md's table of what wrap cannot
/// match says so).
fn host(h: &Value) -> String {
    h["host"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map_or("127.0.0.1".into(), bracket)
}

/// A port given as a number, or as the name of one of the container's ports.
fn port(c: &Value, h: &Value, field: &str) -> Result<u16, Caveat> {
    let n = name(c);
    let found = match &h["port"] {
        Value::Number(p) => p.as_u64(),
        Value::String(s) => s.parse().ok().or_else(|| {
            c["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"] == s.as_str())
                .and_then(|p| p["containerPort"].as_u64())
        }),
        _ => None,
    };
    found
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0)
        .ok_or_else(|| Caveat(format!("sidecar {n:?}: {field}.port {} is not a port of the container, so it is not carried over", h["port"])))
}

/// The container's preStop hook as `KUBEXIT_PRE_STOP` (`$`-escaped); `Ok(None)` without one.
pub fn pre_stop(c: &Value) -> Result<Option<String>, Caveat> {
    let h = &c["lifecycle"]["preStop"];
    if !h.is_object() {
        return Ok(None);
    }
    let n = name(c);
    let not_run = |why: &str| {
        Caveat(format!(
            "sidecar {n:?}: its preStop hook {why}, so the supervisor does not run it when the mains finish (the kubelet still runs it on pod deletion)"
        ))
    };
    let value = if let Some(cmd) = h["exec"]["command"].as_array() {
        let cmd: Option<Vec<&str>> = cmd.iter().map(Value::as_str).collect();
        format!(
            "exec:{}",
            serde_json::to_string(&cmd.unwrap_or_default()).expect("strings")
        )
    } else if h["httpGet"].is_object() {
        let g = &h["httpGet"];
        if g["scheme"]
            .as_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("https"))
        {
            return Err(not_run("uses HTTPS"));
        }
        let port = port(c, g, "lifecycle.preStop.httpGet")
            .map_err(|_| not_run("names a port the container does not declare"))?;
        let path = g["path"].as_str().unwrap_or("/");
        let slash = if path.starts_with('/') { "" } else { "/" };
        format!("http://{}:{port}{slash}{path}", host(g))
    } else if let Some(s) = h["sleep"]["seconds"].as_u64() {
        format!("sleep:{s}s")
    } else {
        return Err(not_run("has no exec, httpGet or sleep action"));
    };
    PreStop::parse(&value).map_err(|e| not_run(&format!("cannot be carried over ({e})")))?;
    Ok(Some(escape(&value)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn probe(p: Value) -> Result<Option<ReadyProbe>, Caveat> {
        startup_probe(
            &json!({"name": "proxy", "ports": [{"name": "admin", "containerPort": 15000}], "startupProbe": p}),
        )
    }

    #[test]
    fn startup_probes() {
        let p = probe(json!({"httpGet": {"path": "/ready", "port": 15021}, "initialDelaySeconds": 2, "periodSeconds": 5, "failureThreshold": 10, "timeoutSeconds": 3})).unwrap().unwrap();
        assert_eq!(
            (
                p.probe.as_str(),
                p.interval.as_str(),
                p.timeout.as_str(),
                p.budget,
                p.caveat
            ),
            ("http://127.0.0.1:15021/ready", "1s", "3s", 52, None)
        );
        // defaults: period 10, threshold 3
        let p = probe(json!({"tcpSocket": {"port": "admin"}}))
            .unwrap()
            .unwrap();
        assert_eq!((p.probe.as_str(), p.budget), ("tcp://127.0.0.1:15000", 30));
        let p = probe(json!({"httpGet": {"port": 80, "host": "::1", "path": "x?$a"}}))
            .unwrap()
            .unwrap();
        assert_eq!(p.probe, "http://[::1]:80/x?$$a");
        let p = probe(json!({"httpGet": {"port": 8443, "scheme": "HTTPS", "httpHeaders": [{"name": "a", "value": "b"}]}})).unwrap().unwrap();
        assert_eq!(p.probe, "tcp://127.0.0.1:8443");
        let c = p.caveat.unwrap();
        assert!(
            c.contains("httpHeaders are not sent") && c.contains("HTTPS"),
            "{c}"
        );
        assert_eq!(probe(json!(null)), Ok(None));
        for (p, says) in [
            (
                json!({"exec": {"command": ["true"]}}),
                "exec has no equivalent",
            ),
            (json!({"grpc": {"port": 9}}), "grpc has no equivalent"),
            (
                json!({"tcpSocket": {"port": "web"}}),
                "tcpSocket.port \"web\" is not a port",
            ),
            (json!({"httpGet": {"port": 70000}}), "is not a port"),
            (
                json!({"httpGet": {"port": 80, "path": "/a b"}}),
                "cannot be checked",
            ),
        ] {
            let e = probe(p.clone()).unwrap_err().0;
            assert!(
                e.contains(says) && e.starts_with("sidecar \"proxy\""),
                "{p}: {e}"
            );
        }
    }

    #[test]
    fn pre_stop_hooks() {
        let hook = |h: Value| pre_stop(&json!({"name": "proxy", "lifecycle": {"preStop": h}}));
        assert_eq!(
            hook(json!({"exec": {"command": ["/bin/sh", "-c", "echo $HOME"]}})),
            Ok(Some(r#"exec:["/bin/sh","-c","echo $$HOME"]"#.into()))
        );
        assert_eq!(
            hook(json!({"httpGet": {"port": 15000, "path": "drain"}})),
            Ok(Some("http://127.0.0.1:15000/drain".into()))
        );
        assert_eq!(
            hook(json!({"sleep": {"seconds": 5}})),
            Ok(Some("sleep:5s".into()))
        );
        assert_eq!(pre_stop(&json!({"name": "x"})), Ok(None));
        for (h, says) in [
            (
                json!({"httpGet": {"port": 1, "scheme": "HTTPS"}}),
                "uses HTTPS",
            ),
            (json!({"httpGet": {"port": "nope"}}), "does not declare"),
            (json!({"exec": {"command": []}}), "cannot be carried over"),
            (
                json!({"tcpSocket": {"port": 1}}),
                "no exec, httpGet or sleep",
            ),
        ] {
            let e = hook(h.clone()).unwrap_err().0;
            assert!(
                e.contains(says) && e.contains("kubelet still runs it"),
                "{h}: {e}"
            );
        }
    }
}
