//! Tombstones: the record each container keeps in the graveyard (pure encode/decode).
//!
//! Written as JSON with kubexit's key names (`Born`, `Died`, `ExitCode`) so kubexit can
//! read it (kubexit reads YAML, and JSON is YAML), plus sexton's own keys. Read from
//! sexton's JSON or kubexit's YAML, keys case-insensitive. A reader must treat an empty,
//! partial or unparsable file as "not dead yet": kubexit truncates and rewrites its file in
//! place, so a reader can see any prefix of it. The decoder is therefore strict: anything it
//! cannot fully account for is an error, never a guess.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Tombstone {
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_time")]
    pub born: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_time")]
    pub ready: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_time")]
    pub died: Option<DateTime<Utc>>,
    /// The container's exit code (what the wrapper exited with). `None` with `Died` set
    /// means unknown (the container died without its wrapper recording the code).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Name of the signal that killed the child, if it was killed by one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// Why the container ended (sexton's own field; see `Reason`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The death dependency whose death stopped this container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub death_dep: Option<String>,
    /// How often the supervisor started the child again (KUBEXIT_RESTART_CHILD).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarts: Option<u32>,
}

fn ser_time<S: serde::Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.serialize_str(&format_time(t)),
        None => s.serialize_none(),
    }
}

/// RFC 3339, nanoseconds, UTC (`2020-04-28T10:41:46.992631400Z`).
pub fn format_time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    Empty,
    Invalid(String),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Empty => write!(f, "empty tombstone"),
            DecodeError::Invalid(m) => write!(f, "unparsable tombstone: {m}"),
        }
    }
}

impl Tombstone {
    pub fn is_dead(&self) -> bool {
        self.died.is_some()
    }

    /// Ready and not dead: what a birth dependency waits for.
    pub fn is_ready(&self) -> bool {
        self.ready.is_some() && self.died.is_none()
    }

    /// JSON, one line, newline-terminated.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).expect("tombstone serializes");
        v.push(b'\n');
        v
    }

    /// Decodes sexton JSON or kubexit YAML; keys are case-insensitive, unknown keys ignored.
    pub fn decode(bytes: &[u8]) -> Result<Tombstone, DecodeError> {
        let text =
            std::str::from_utf8(bytes).map_err(|_| DecodeError::Invalid("not UTF-8".into()))?;
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(DecodeError::Empty);
        }
        if trimmed.starts_with('{') {
            decode_json(trimmed)
        } else {
            decode_yaml(text)
        }
    }
}

/// One value as found in the file, before interpretation.
enum Val {
    Null,
    Str(String),
    Int(i64),
    Other,
}

fn apply(t: &mut Tombstone, key: &str, val: Val) -> Result<(), DecodeError> {
    let time = |v: Val| -> Result<Option<DateTime<Utc>>, DecodeError> {
        match v {
            Val::Null => Ok(None),
            Val::Str(s) => DateTime::parse_from_rfc3339(&s)
                .map(|d| Some(d.with_timezone(&Utc)))
                .map_err(|e| DecodeError::Invalid(format!("{key}: bad time {s:?}: {e}"))),
            _ => Err(DecodeError::Invalid(format!(
                "{key}: expected a time string"
            ))),
        }
    };
    let string = |v: Val| -> Result<Option<String>, DecodeError> {
        match v {
            Val::Null => Ok(None),
            Val::Str(s) => Ok(Some(s)),
            Val::Int(i) => Ok(Some(i.to_string())),
            Val::Other => Err(DecodeError::Invalid(format!("{key}: expected a string"))),
        }
    };
    match key.to_ascii_lowercase().as_str() {
        "born" => t.born = time(val)?,
        "ready" => t.ready = time(val)?,
        "died" => t.died = time(val)?,
        "exitcode" => {
            t.exit_code = match val {
                Val::Null => None,
                Val::Int(i) => Some(
                    i32::try_from(i)
                        .map_err(|_| DecodeError::Invalid(format!("{key}: {i} is out of range")))?,
                ),
                Val::Str(s) => Some(s.trim().parse().map_err(|_| {
                    DecodeError::Invalid(format!("{key}: {s:?} is not an integer"))
                })?),
                Val::Other => {
                    return Err(DecodeError::Invalid(format!("{key}: expected an integer")));
                }
            }
        }
        "signal" => t.signal = string(val)?,
        "reason" => t.reason = string(val)?,
        "deathdep" => t.death_dep = string(val)?,
        "restarts" => {
            t.restarts = match val {
                Val::Null => None,
                Val::Int(i) => Some(
                    u32::try_from(i)
                        .map_err(|_| DecodeError::Invalid(format!("{key}: {i} is out of range")))?,
                ),
                _ => return Err(DecodeError::Invalid(format!("{key}: expected an integer"))),
            }
        }
        _ => {} // unknown keys: forward compatible
    }
    Ok(())
}

fn decode_json(text: &str) -> Result<Tombstone, DecodeError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| DecodeError::Invalid(e.to_string()))?;
    let obj = value
        .as_object()
        .ok_or_else(|| DecodeError::Invalid("not a JSON object".into()))?;
    let mut t = Tombstone::default();
    for (k, v) in obj {
        let val = match v {
            serde_json::Value::Null => Val::Null,
            serde_json::Value::String(s) => Val::Str(s.clone()),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Val::Int(i),
                None => Val::Other,
            },
            _ => Val::Other,
        };
        apply(&mut t, k, val)?;
    }
    Ok(t)
}

/// The YAML kubexit writes: one `Key: value` per line, values quoted or bare.
fn decode_yaml(text: &str) -> Result<Tombstone, DecodeError> {
    // kubexit's file always ends with a newline; without one the last line may be cut
    // (`ExitCode: 1` of `ExitCode: 17`), so the file is not complete yet.
    if !text.ends_with('\n') {
        return Err(DecodeError::Invalid(
            "incomplete last line (no trailing newline)".into(),
        ));
    }
    let mut t = Tombstone::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        let content = line.trim_start();
        if content.is_empty() || content.starts_with('#') || content == "---" {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(DecodeError::Invalid(format!(
                "line {}: nested YAML is not a tombstone",
                n + 1
            )));
        }
        let (key, raw) = content.split_once(':').ok_or_else(|| {
            DecodeError::Invalid(format!("line {}: expected `Key: value`", n + 1))
        })?;
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(DecodeError::Invalid(format!(
                "line {}: bad key {key:?}",
                n + 1
            )));
        }
        let val = yaml_scalar(raw.trim())
            .map_err(|m| DecodeError::Invalid(format!("line {}: {m}", n + 1)))?;
        apply(&mut t, key, val)?;
    }
    Ok(t)
}

/// A scalar of kubexit's YAML that cannot be read.
#[derive(Debug, thiserror::Error)]
enum ScalarError {
    #[error("unterminated quoted string")]
    Unterminated,
    #[error("unexpected text after string: {0:?}")]
    TrailingText(String),
}

fn yaml_scalar(raw: &str) -> Result<Val, ScalarError> {
    if raw.is_empty() || raw == "~" || raw.eq_ignore_ascii_case("null") {
        return Ok(Val::Null);
    }
    for q in ['"', '\''] {
        if let Some(rest) = raw.strip_prefix(q) {
            let end = rest.find(q).ok_or(ScalarError::Unterminated)?;
            let tail = rest[end + 1..].trim();
            if !(tail.is_empty() || tail.starts_with('#')) {
                return Err(ScalarError::TrailingText(tail.to_string()));
            }
            return Ok(Val::Str(rest[..end].to_string()));
        }
    }
    let bare = match raw.find(" #") {
        Some(i) => raw[..i].trim_end(),
        None => raw,
    };
    if let Ok(i) = bare.parse::<i64>() {
        return Ok(Val::Int(i));
    }
    if bare.starts_with(['{', '[', '&', '*', '!', '|', '>']) {
        return Ok(Val::Other);
    }
    Ok(Val::Str(bare.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn kubexit_yaml_byte_for_byte() {
        let yaml = b"Born: \"2020-04-28T10:41:46.9926314Z\"\nDied: \"2020-04-28T10:41:47.0498724Z\"\nExitCode: -1\n";
        let ts = Tombstone::decode(yaml).unwrap();
        assert_eq!(ts.born, Some(t("2020-04-28T10:41:46.9926314Z")));
        assert_eq!(ts.died, Some(t("2020-04-28T10:41:47.0498724Z")));
        assert_eq!(ts.exit_code, Some(-1));
        assert!(ts.is_dead());
        assert!(!ts.is_ready());
    }

    #[test]
    fn yaml_keys_case_insensitive_and_bare_values() {
        let ts = Tombstone::decode(b"---\nborn: 2020-04-28T10:41:46Z\nDIED: '2020-04-28T10:41:47Z'\nexitcode: 3 # comment\nExtra: whatever\n").unwrap();
        assert!(ts.born.is_some());
        assert!(ts.died.is_some());
        assert_eq!(ts.exit_code, Some(3));
    }

    #[test]
    fn yaml_born_only_is_alive() {
        let ts = Tombstone::decode(b"Born: \"2020-04-28T10:41:46.9926314Z\"\n").unwrap();
        assert!(!ts.is_dead());
    }

    #[test]
    fn json_roundtrip_with_sexton_fields() {
        let born =
            Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap() + chrono::Duration::nanoseconds(123);
        let ts = Tombstone {
            born: Some(born),
            ready: Some(born),
            died: Some(born),
            exit_code: Some(137),
            signal: Some("SIGKILL".into()),
            reason: Some("stopped-by-dependency".into()),
            death_dep: Some("main".into()),
            restarts: Some(3),
        };
        let bytes = ts.encode();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.contains("\"Born\":\"2026-01-02T03:04:05.000000123Z\""),
            "{text}"
        );
        assert!(text.contains("\"ExitCode\":137"));
        assert!(text.contains("\"Restarts\":3"));
        assert!(text.ends_with('\n'));
        assert_eq!(Tombstone::decode(&bytes).unwrap(), ts);
    }

    #[test]
    fn json_omits_unset_and_keys_case_insensitive() {
        let ts = Tombstone {
            born: Some(DateTime::from_timestamp(1_790_000_000, 0).unwrap()),
            ..Default::default()
        };
        let text = String::from_utf8(ts.encode()).unwrap();
        assert!(!text.contains("Died"));
        assert!(!text.contains("ExitCode"));
        let ts =
            Tombstone::decode(br#"{"born":"2020-04-28T10:41:46Z","died":null,"exitcode":null}"#)
                .unwrap();
        assert!(ts.born.is_some() && ts.died.is_none() && ts.exit_code.is_none());
    }

    #[test]
    fn empty_partial_and_garbage_are_errors() {
        let full = br#"{"Born":"2020-04-28T10:41:46Z","Died":"2020-04-28T10:41:47Z","ExitCode":0}"#;
        // every strict prefix of a JSON tombstone is an error or "not dead"
        for n in 0..full.len() {
            match Tombstone::decode(&full[..n]) {
                Err(_) => {}
                Ok(ts) => panic!("prefix {n} decoded as {ts:?}"),
            }
        }
        let cases: &[&[u8]] = &[
            b"",
            b"  \n",
            b"\xff\xfe",
            b"[1,2]",
            b"Born: \"2020-04-28T10:4",
            b"Died: \"yesterday\"",
            b"Died: \"2020-04-28T10:41:47Z\" trailing",
            b"ExitCode: abc",
            b"just some words",
            b"Born:\n  nested: 1\n",
            br#"{"Died": 5}"#,
            br#"{"ExitCode": 1.5}"#,
            br#"{"ExitCode": 99999999999}"#,
            br#"{"Restarts": -1}"#,
            br#"{"Restarts": "2"}"#,
        ];
        for c in cases {
            assert!(
                Tombstone::decode(c).is_err(),
                "{:?}",
                String::from_utf8_lossy(c)
            );
        }
        assert_eq!(Tombstone::decode(b""), Err(DecodeError::Empty));
    }

    #[test]
    fn yaml_prefixes_never_claim_a_wrong_exit_code() {
        // kubexit rewrites in place: a reader may see a prefix. A prefix either fails,
        // or is alive, or is dead with the right code or no code yet.
        let yaml = b"Born: \"2020-04-28T10:41:46.9926314Z\"\nDied: \"2020-04-28T10:41:47.0498724Z\"\nExitCode: 17\n";
        for n in 0..=yaml.len() {
            if let Ok(ts) = Tombstone::decode(&yaml[..n]) {
                if let Some(code) = ts.exit_code {
                    assert_eq!(code, 17, "prefix {n}");
                }
            }
        }
    }
}
