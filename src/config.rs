//! Configuration: the table of settings (env var = flag), parsing and validation.
//!
//! Pure: values come in through a lookup function, so the rules are table-tested without
//! touching the process environment. The CLI layer (`cli.rs`) feeds it from clap, which
//! knows whether a value came from a flag or from the environment; error messages name
//! exactly that origin (`KUBEXIT_GRACE_PERIOD` or `--grace-period`).

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::signal::Signal;

pub use crate::probe::{HttpUrl, Probe};

/// One setting: a flag and the environment variable that mirrors it. Flags win.
#[derive(Debug)]
pub struct Setting {
    pub id: &'static str,
    pub flag: &'static str,
    pub env: &'static str,
    pub default: Option<&'static str>,
    pub value_name: &'static str,
    pub help: &'static str,
}

/// Every supervisor setting. This table is the single source for the CLI and the README's
/// settings table (a unit test keeps the README in step).
pub const SETTINGS: &[Setting] = &[
    Setting {
        id: "name",
        flag: "name",
        env: "KUBEXIT_NAME",
        default: None,
        value_name: "NAME",
        help: "Name of this container (required; a DNS-1123 label). The tombstone is GRAVEYARD/NAME.",
    },
    Setting {
        id: "graveyard",
        flag: "graveyard",
        env: "KUBEXIT_GRAVEYARD",
        default: Some("/graveyard"),
        value_name: "DIR",
        help: "Directory shared by the pod's containers (an emptyDir); created if missing.",
    },
    Setting {
        id: "death_deps",
        flag: "death-deps",
        env: "KUBEXIT_DEATH_DEPS",
        default: Some(""),
        value_name: "NAMES",
        help: "Comma list of containers whose death stops this container's child.",
    },
    Setting {
        id: "birth_deps",
        flag: "birth-deps",
        env: "KUBEXIT_BIRTH_DEPS",
        default: Some(""),
        value_name: "NAMES",
        help: "Comma list of containers that must be ready before the child is started.",
    },
    Setting {
        id: "grace_period",
        flag: "grace-period",
        env: "KUBEXIT_GRACE_PERIOD",
        default: Some("30s"),
        value_name: "DURATION",
        help: "Time between the termination signal and SIGKILL when a death dependency dies (Go syntax: 30s, 1m30s, 500ms).",
    },
    Setting {
        id: "birth_timeout",
        flag: "birth-timeout",
        env: "KUBEXIT_BIRTH_TIMEOUT",
        default: Some("30s"),
        value_name: "DURATION",
        help: "How long to wait for birth dependencies before giving up without starting the child.",
    },
    Setting {
        id: "term_signal",
        flag: "term-signal",
        env: "KUBEXIT_TERM_SIGNAL",
        default: Some("SIGTERM"),
        value_name: "SIGNAL",
        help: "Signal sent to the child when a death dependency dies (name such as SIGTERM, TERM, or number).",
    },
    Setting {
        id: "signal_group",
        flag: "signal-group",
        env: "KUBEXIT_SIGNAL_GROUP",
        default: Some("false"),
        value_name: "BOOL",
        help: "Send forwarded and termination signals to the child's whole process group instead of the child alone.",
    },
    Setting {
        id: "dep_exit_code",
        flag: "dep-exit-code",
        env: "KUBEXIT_DEP_EXIT_CODE",
        default: Some("zero"),
        value_name: "zero|child",
        help: "Exit code when the child was stopped because a death dependency died: `zero` (the pod can succeed) or `child` (the child's own code, 128+N if killed by signal N).",
    },
    Setting {
        id: "death_trigger",
        flag: "death-trigger",
        env: "KUBEXIT_DEATH_TRIGGER",
        default: Some("any"),
        value_name: "any|success",
        help: "Which deaths of a death dependency stop the child: `any`, or only `success` (exit code 0; use with restartPolicy OnFailure, where a failed main is restarted).",
    },
    Setting {
        id: "pod_name",
        flag: "pod-name",
        env: "KUBEXIT_POD_NAME",
        default: Some(""),
        value_name: "NAME",
        help: "This pod's name. With KUBEXIT_NAMESPACE, birth dependencies are containers of this pod whose status says ready in the Kubernetes API (kubexit behaviour; works for containers not wrapped by sexton). Set it from the downward API (fieldRef metadata.name).",
    },
    Setting {
        id: "namespace",
        flag: "namespace",
        env: "KUBEXIT_NAMESPACE",
        default: Some(""),
        value_name: "NAMESPACE",
        help: "This pod's namespace (downward API: fieldRef metadata.namespace); with KUBEXIT_POD_NAME.",
    },
    Setting {
        id: "kubeconfig",
        flag: "kubeconfig",
        env: "KUBEXIT_KUBECONFIG",
        default: Some(""),
        value_name: "FILE",
        help: "Kubeconfig for the API (local runs); default: the pod's service account (in-cluster).",
    },
    Setting {
        id: "watch",
        flag: "watch",
        env: "KUBEXIT_WATCH",
        default: Some("auto"),
        value_name: "auto|inotify|poll",
        help: "How the graveyard is watched: `inotify` (events only: zero idle cost), `poll` (re-read every poll interval), or `auto`: inotify plus a poll every interval as a safety net (some sandboxes, e.g. gVisor, deliver no inotify events across containers), falling back to poll if inotify cannot be set up.",
    },
    Setting {
        id: "poll_interval",
        flag: "poll-interval",
        env: "KUBEXIT_POLL_INTERVAL",
        default: Some("1s"),
        value_name: "DURATION",
        help: "Interval of the graveyard poll (modes `poll` and `auto`); at least 10ms.",
    },
    Setting {
        id: "ready_probe",
        flag: "ready-probe",
        env: "KUBEXIT_READY_PROBE",
        default: Some(""),
        value_name: "PROBE",
        help: "When this container counts as ready (its tombstone's `Ready`): immediately when unset; or when a check of the child succeeds: `tcp://HOST:PORT` (connect), `http://HOST:PORT/PATH` (GET returns 2xx), `file:///PATH` (file exists).",
    },
    Setting {
        id: "ready_interval",
        flag: "ready-interval",
        env: "KUBEXIT_READY_INTERVAL",
        default: Some("100ms"),
        value_name: "DURATION",
        help: "Interval between readiness checks.",
    },
    Setting {
        id: "ready_timeout",
        flag: "ready-timeout",
        env: "KUBEXIT_READY_TIMEOUT",
        default: Some("1s"),
        value_name: "DURATION",
        help: "Time limit of one readiness check (connect, request and response).",
    },
    Setting {
        id: "shutdown_hooks",
        flag: "shutdown-hooks",
        env: "KUBEXIT_SHUTDOWN_HOOKS",
        default: Some(""),
        value_name: "URLS",
        help: "Comma list of http:// URLs to POST to after the child exits, e.g. Istio's http://127.0.0.1:15020/quitquitquit or Linkerd's http://127.0.0.1:4191/shutdown. Failures are logged and never change the exit code.",
    },
    Setting {
        id: "shutdown_hook_timeout",
        flag: "shutdown-hook-timeout",
        env: "KUBEXIT_SHUTDOWN_HOOK_TIMEOUT",
        default: Some("2s"),
        value_name: "DURATION",
        help: "Time budget of each shutdown hook, retries included.",
    },
    Setting {
        id: "shutdown_hooks_allow_remote",
        flag: "shutdown-hooks-allow-remote",
        env: "KUBEXIT_SHUTDOWN_HOOKS_ALLOW_REMOTE",
        default: Some("false"),
        value_name: "BOOL",
        help: "Allow shutdown hooks to non-loopback hosts (refused by default: these endpoints are local-only by design).",
    },
    Setting {
        id: "log_format",
        flag: "log-format",
        env: "KUBEXIT_LOG_FORMAT",
        default: Some("text"),
        value_name: "text|json",
        help: "Log format on stderr.",
    },
    Setting {
        id: "log_level",
        flag: "log-level",
        env: "KUBEXIT_LOG_LEVEL",
        default: Some("info"),
        value_name: "LEVEL",
        help: "Log level: error, warn, info, debug or trace.",
    },
];

pub fn setting(id: &str) -> &'static Setting {
    SETTINGS
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("unknown setting id {id}"))
}

/// Where a raw value came from; used to name it in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Flag,
    Env,
    Default,
}

/// A raw value and its origin, as found by the caller's lookup.
#[derive(Debug, Clone)]
pub struct Raw {
    pub value: String,
    pub origin: Origin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepExitCode {
    Zero,
    Child,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeathTrigger {
    Any,
    Success,
}

/// This pod, for birth dependencies through the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub name: String,
    pub namespace: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    Auto,
    Inotify,
    Poll,
}

impl WatchMode {
    pub fn as_str(self) -> &'static str {
        match self {
            WatchMode::Auto => "auto",
            WatchMode::Inotify => "inotify",
            WatchMode::Poll => "poll",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// The validated supervisor configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub name: String,
    pub graveyard: PathBuf,
    pub death_deps: Vec<String>,
    pub birth_deps: Vec<String>,
    pub grace_period: Duration,
    pub birth_timeout: Duration,
    pub term_signal: Signal,
    pub signal_group: bool,
    pub dep_exit_code: DepExitCode,
    pub death_trigger: DeathTrigger,
    pub pod: Option<PodRef>,
    pub kubeconfig: Option<PathBuf>,
    pub watch: WatchMode,
    pub poll_interval: Duration,
    pub ready_probe: Option<Probe>,
    pub ready_interval: Duration,
    pub ready_timeout: Duration,
    pub shutdown_hooks: Vec<HttpUrl>,
    pub shutdown_hook_timeout: Duration,
    pub log_format: LogFormat,
    pub log_level: tracing::Level,
    pub command: Vec<OsString>,
}

/// A configuration error: names the variable (or flag) and the offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub origin: String,
    pub value: Option<String>,
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(v) => write!(f, "invalid {}={:?}: {}", self.origin, v, self.problem),
            None => write!(f, "{}: {}", self.origin, self.problem),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Builds the configuration from a lookup (setting id → raw value) and the command.
    /// `lookup` returns `None` when neither flag nor env var is set; defaults apply then.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<Raw>,
        command: Vec<OsString>,
    ) -> Result<Config, ConfigError> {
        // An environment variable set to blanks counts as unset, as in kubexit (which reads
        // `KUBEXIT_GRAVEYARD=""` as the default `/graveyard`), so sexton is a drop-in.
        let get = |id: &str| -> (Raw, &'static Setting) {
            let s = setting(id);
            let given = lookup(id).filter(|r| r.origin != Origin::Env || !r.value.trim().is_empty());
            let raw = given.unwrap_or_else(|| Raw {
                value: s.default.unwrap_or("").to_string(),
                origin: Origin::Default,
            });
            (raw, s)
        };
        let err = |s: &Setting, raw: &Raw, problem: String| ConfigError {
            origin: origin_name(s, raw.origin),
            value: Some(raw.value.clone()),
            problem,
        };

        let (raw, s) = get("name");
        if raw.value.trim().is_empty() {
            return Err(ConfigError {
                origin: s.env.to_string(),
                value: None,
                problem: format!(
                    "required: set {} (or --{}) to this container's name",
                    s.env, s.flag
                ),
            });
        }
        let name = raw.value.trim().to_string();
        validate_name(&name).map_err(|p| err(s, &raw, p))?;

        // paths are trimmed like every other value (`" /graveyard"` is not relative)
        let (raw, s) = get("graveyard");
        if raw.value.trim().is_empty() {
            return Err(err(s, &raw, "must not be empty".into()));
        }
        let graveyard = PathBuf::from(raw.value.trim());

        let (raw, s) = get("death_deps");
        let death_deps = parse_dep_list(&raw.value, &name).map_err(|p| err(s, &raw, p))?;
        let (raw, s) = get("birth_deps");
        let birth_deps = parse_dep_list(&raw.value, &name).map_err(|p| err(s, &raw, p))?;

        // A Go duration of at least `min` (`MORE_THAN_ZERO`: any positive one).
        const MORE_THAN_ZERO: Duration = Duration::from_nanos(1);
        let duration = |id: &str, min: Duration| -> Result<Duration, ConfigError> {
            let (raw, s) = get(id);
            let d = parse_go_duration(&raw.value).map_err(|p| err(s, &raw, p))?;
            if d < min {
                let problem = if min == MORE_THAN_ZERO {
                    "must be more than 0".to_string()
                } else {
                    format!("must be at least {}", format_go_duration(min))
                };
                return Err(err(s, &raw, problem));
            }
            Ok(d)
        };
        let grace_period = duration("grace_period", Duration::ZERO)?;
        let birth_timeout = duration("birth_timeout", Duration::ZERO)?;

        let (raw, s) = get("term_signal");
        let term_signal = parse_signal(&raw.value).map_err(|p| err(s, &raw, p))?;

        let (raw, s) = get("signal_group");
        let signal_group = parse_bool(&raw.value).map_err(|p| err(s, &raw, p))?;

        let (raw, s) = get("dep_exit_code");
        let dep_exit_code = match raw.value.trim().to_ascii_lowercase().as_str() {
            "zero" | "0" => DepExitCode::Zero,
            "child" => DepExitCode::Child,
            _ => return Err(err(s, &raw, "expected `zero` or `child`".into())),
        };

        let (raw, s) = get("death_trigger");
        let death_trigger = match raw.value.trim().to_ascii_lowercase().as_str() {
            "any" => DeathTrigger::Any,
            "success" => DeathTrigger::Success,
            _ => return Err(err(s, &raw, "expected `any` or `success`".into())),
        };

        let (raw_pod, s_pod) = get("pod_name");
        let (raw_ns, s_ns) = get("namespace");
        let pod = match (raw_pod.value.trim(), raw_ns.value.trim()) {
            ("", "") => None,
            (p, "") => {
                return Err(ConfigError {
                    origin: s_ns.env.into(),
                    value: None,
                    problem: format!(
                        "required when {}={p:?} is set (the pod's namespace, from the downward API)",
                        s_pod.env
                    ),
                });
            }
            ("", n) => {
                return Err(ConfigError {
                    origin: s_pod.env.into(),
                    value: None,
                    problem: format!(
                        "required when {}={n:?} is set (the pod's name, from the downward API)",
                        s_ns.env
                    ),
                });
            }
            (p, n) => {
                validate_subdomain(p).map_err(|e| err(s_pod, &raw_pod, e))?;
                validate_name(n).map_err(|e| err(s_ns, &raw_ns, e))?;
                Some(PodRef {
                    name: p.into(),
                    namespace: n.into(),
                })
            }
        };
        let (raw, _) = get("kubeconfig");
        let kubeconfig = Some(raw.value.trim())
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);

        let (raw, s) = get("watch");
        let watch = match raw.value.trim().to_ascii_lowercase().as_str() {
            "auto" => WatchMode::Auto,
            "inotify" => WatchMode::Inotify,
            "poll" => WatchMode::Poll,
            _ => return Err(err(s, &raw, "expected `auto`, `inotify` or `poll`".into())),
        };
        let poll_interval = duration("poll_interval", Duration::from_millis(10))?;

        let (raw, s) = get("ready_probe");
        let ready_probe = if raw.value.trim().is_empty() {
            None
        } else {
            Some(Probe::parse(raw.value.trim()).map_err(|p| err(s, &raw, p))?)
        };
        let ready_interval = duration("ready_interval", Duration::from_millis(10))?;
        let ready_timeout = duration("ready_timeout", MORE_THAN_ZERO)?;

        let (raw_remote, s_remote) = get("shutdown_hooks_allow_remote");
        let allow_remote =
            parse_bool(&raw_remote.value).map_err(|p| err(s_remote, &raw_remote, p))?;
        let (raw, s) = get("shutdown_hooks");
        let mut shutdown_hooks = vec![];
        for item in raw
            .value
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
        {
            let url = HttpUrl::parse(item).map_err(|p| err(s, &raw, format!("{item:?}: {p}")))?;
            if !allow_remote && !url.is_loopback() {
                return Err(err(
                    s,
                    &raw,
                    format!(
                        "{item:?} is not a loopback address; shutdown endpoints are local-only by design (set {}=true to allow it)",
                        s_remote.env
                    ),
                ));
            }
            shutdown_hooks.push(url);
        }
        let shutdown_hook_timeout = duration("shutdown_hook_timeout", MORE_THAN_ZERO)?;

        let (raw, s) = get("log_format");
        let log_format = match raw.value.trim().to_ascii_lowercase().as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            _ => return Err(err(s, &raw, "expected `text` or `json`".into())),
        };

        let (raw, s) = get("log_level");
        let log_level = match raw.value.trim().to_ascii_lowercase().as_str() {
            "error" => tracing::Level::ERROR,
            "warn" | "warning" => tracing::Level::WARN,
            "info" => tracing::Level::INFO,
            "debug" => tracing::Level::DEBUG,
            "trace" => tracing::Level::TRACE,
            _ => {
                return Err(err(
                    s,
                    &raw,
                    "expected error, warn, info, debug or trace".into(),
                ));
            }
        };

        if command.is_empty() || command[0].is_empty() {
            return Err(ConfigError {
                origin: "COMMAND".into(),
                value: None,
                problem: "no command given: usage is `sexton [FLAGS] [--] COMMAND [ARGS...]`"
                    .into(),
            });
        }

        Ok(Config {
            name,
            graveyard,
            death_deps,
            birth_deps,
            grace_period,
            birth_timeout,
            term_signal,
            signal_group,
            dep_exit_code,
            death_trigger,
            pod,
            kubeconfig,
            watch,
            poll_interval,
            ready_probe,
            ready_interval,
            ready_timeout,
            shutdown_hooks,
            shutdown_hook_timeout,
            log_format,
            log_level,
            command,
        })
    }
}

fn origin_name(s: &Setting, origin: Origin) -> String {
    match origin {
        Origin::Flag => format!("--{}", s.flag),
        Origin::Env | Origin::Default => s.env.to_string(),
    }
}

/// A container name: a DNS-1123 label (what Kubernetes requires of container names), so it
/// is also a safe file name in the graveyard.
pub fn validate_name(name: &str) -> Result<(), String> {
    if name.contains('/') || name.contains("..") || name == "." {
        return Err("must be a plain name: `/` and `..` are not allowed (the name is a file name in the graveyard)".into());
    }
    if name.len() > 63 {
        return Err(format!(
            "is {} characters long; a DNS-1123 label has at most 63",
            name.len()
        ));
    }
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if let Some(c) = name.chars().find(|&c| !ok_char(c)) {
        return Err(format!(
            "contains {c:?}; a DNS-1123 label has only lower-case letters, digits and `-`"
        ));
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !alnum(name.chars().next()) || !alnum(name.chars().last()) {
        return Err("must start and end with a lower-case letter or digit (DNS-1123 label)".into());
    }
    Ok(())
}

/// A DNS-1123 subdomain (pod names): lower-case labels joined by dots, at most 253.
pub fn validate_subdomain(name: &str) -> Result<(), String> {
    if name.len() > 253 {
        return Err(format!("is {} characters long; at most 253", name.len()));
    }
    for label in name.split('.') {
        validate_name(label).map_err(|e| format!("part {label:?} {e}"))?;
    }
    Ok(())
}

/// A comma list of container names: blanks trimmed, empty items skipped; each a valid
/// name; duplicates and self-references rejected.
pub fn parse_dep_list(value: &str, own_name: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        validate_name(item).map_err(|p| format!("dependency {item:?} {p}"))?;
        if item == own_name {
            return Err(format!(
                "{item:?} is this container's own name; a container cannot depend on itself"
            ));
        }
        if out.iter().any(|d| d == item) {
            return Err(format!("{item:?} is listed twice"));
        }
        out.push(item.to_string());
    }
    Ok(out)
}

/// Go's `time.ParseDuration` syntax, non-negative only: `300ms`, `1.5h`, `2h45m`, `0`.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    const HINT: &str = "use Go duration syntax such as 30s, 1m30s, 500ms";
    let s = s.trim();
    if s.is_empty() {
        return Err(format!("empty duration; {HINT}"));
    }
    let body = match s.as_bytes()[0] {
        b'-' => {
            if s[1..].chars().all(|c| c == '0') && s.len() > 1 {
                return Ok(Duration::ZERO);
            }
            return Err("must not be negative".into());
        }
        b'+' => &s[1..],
        _ => s,
    };
    if body == "0" {
        return Ok(Duration::ZERO);
    }
    if body.is_empty() {
        return Err(format!("empty duration; {HINT}"));
    }
    let mut total: u128 = 0; // nanoseconds
    let mut rest = body;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = &rest[..num_len];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(format!("expected a number at {rest:?}; {HINT}"));
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
            "" => return Err(format!("missing unit after {num:?}; {HINT}")),
            other => return Err(format!("unknown unit {other:?}; {HINT}")),
        };
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        let int: u128 = if int_part.is_empty() {
            0
        } else {
            int_part
                .parse()
                .map_err(|_| format!("number {num:?} is too large"))?
        };
        let mut value = int
            .checked_mul(scale)
            .ok_or_else(|| format!("duration {s:?} is too large"))?;
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
            .ok_or_else(|| format!("duration {s:?} is too large"))?;
    }
    if total > u128::from(u64::MAX) {
        return Err(format!("duration {s:?} is too large"));
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

/// A signal by name (`SIGTERM`, `TERM`, `term`, `SIGRTMIN+3`) or number (`15`).
pub fn parse_signal(s: &str) -> Result<Signal, String> {
    Signal::parse(s)
}

pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)], cmd: &[&str]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(
            |id| {
                map.get(id).map(|v| Raw {
                    value: v.clone(),
                    origin: Origin::Env,
                })
            },
            cmd.iter().map(OsString::from).collect(),
        )
    }

    #[test]
    fn defaults() {
        let c = cfg(&[("name", "sidecar")], &["sleep", "1"]).unwrap();
        assert_eq!(c.name, "sidecar");
        assert_eq!(c.graveyard, PathBuf::from("/graveyard"));
        assert!(c.death_deps.is_empty());
        assert!(c.birth_deps.is_empty());
        assert_eq!(c.grace_period, Duration::from_secs(30));
        assert_eq!(c.birth_timeout, Duration::from_secs(30));
        assert_eq!(c.term_signal, Signal::SIGTERM);
        assert!(!c.signal_group);
        assert_eq!(c.dep_exit_code, DepExitCode::Zero);
        assert_eq!(c.death_trigger, DeathTrigger::Any);
        assert_eq!(c.log_format, LogFormat::Text);
    }

    #[test]
    fn all_settings_parsed() {
        let c = cfg(
            &[
                ("name", "proxy"),
                ("graveyard", "/tmp/g"),
                ("death_deps", " main , other,"),
                ("birth_deps", "db"),
                ("grace_period", "1m30s"),
                ("birth_timeout", "500ms"),
                ("term_signal", "int"),
                ("signal_group", "true"),
                ("dep_exit_code", "child"),
                ("death_trigger", "success"),
                ("log_format", "JSON"),
            ],
            &["envoy"],
        )
        .unwrap();
        assert_eq!(c.death_deps, vec!["main", "other"]);
        assert_eq!(c.birth_deps, vec!["db"]);
        assert_eq!(c.grace_period, Duration::from_secs(90));
        assert_eq!(c.birth_timeout, Duration::from_millis(500));
        assert_eq!(c.term_signal, Signal::SIGINT);
        assert!(c.signal_group);
        assert_eq!(c.dep_exit_code, DepExitCode::Child);
        assert_eq!(c.death_trigger, DeathTrigger::Success);
        assert_eq!(c.log_format, LogFormat::Json);
    }

    #[test]
    fn config_errors_name_the_variable_and_value() {
        let cases: &[(&[(&str, &str)], &[&str], &str)] = &[
            (&[], &["x"], "KUBEXIT_NAME: required"),
            (&[("name", "  ")], &["x"], "KUBEXIT_NAME: required"),
            (&[("name", "a/b")], &["x"], "invalid KUBEXIT_NAME=\"a/b\""),
            (
                &[("name", "..")],
                &["x"],
                "invalid KUBEXIT_NAME=\"..\": must be a plain name",
            ),
            (
                &[("name", "Main")],
                &["x"],
                "invalid KUBEXIT_NAME=\"Main\": contains 'M'",
            ),
            (&[("name", "-a")], &["x"], "must start and end"),
            (
                &[("name", "a"), ("grace_period", "10")],
                &["x"],
                "invalid KUBEXIT_GRACE_PERIOD=\"10\": missing unit",
            ),
            (
                &[("name", "a"), ("grace_period", "5x")],
                &["x"],
                "invalid KUBEXIT_GRACE_PERIOD=\"5x\": unknown unit",
            ),
            (
                &[("name", "a"), ("grace_period", "-1s")],
                &["x"],
                "must not be negative",
            ),
            (
                &[("name", "a"), ("term_signal", "SIGFOO")],
                &["x"],
                "invalid KUBEXIT_TERM_SIGNAL=\"SIGFOO\": unknown signal",
            ),
            (
                &[("name", "a"), ("term_signal", "99")],
                &["x"],
                "99 is not a signal number",
            ),
            (
                &[("name", "a"), ("death_deps", "b,a")],
                &["x"],
                "invalid KUBEXIT_DEATH_DEPS=\"b,a\": \"a\" is this container's own name",
            ),
            (
                &[("name", "a"), ("death_deps", "b, b")],
                &["x"],
                "\"b\" is listed twice",
            ),
            (
                &[("name", "a"), ("birth_deps", "B")],
                &["x"],
                "invalid KUBEXIT_BIRTH_DEPS=\"B\": dependency \"B\"",
            ),
            (
                &[("name", "a"), ("signal_group", "maybe")],
                &["x"],
                "invalid KUBEXIT_SIGNAL_GROUP=\"maybe\"",
            ),
            (
                &[("name", "a"), ("dep_exit_code", "one")],
                &["x"],
                "invalid KUBEXIT_DEP_EXIT_CODE",
            ),
            (
                &[("name", "a"), ("death_trigger", "fail")],
                &["x"],
                "invalid KUBEXIT_DEATH_TRIGGER",
            ),
            (
                &[("name", "a"), ("log_format", "xml")],
                &["x"],
                "invalid KUBEXIT_LOG_FORMAT",
            ),
            (
                &[("name", "a"), ("watch", "fanotify")],
                &["x"],
                "invalid KUBEXIT_WATCH=\"fanotify\"",
            ),
            (
                &[("name", "a"), ("pod_name", "job-x")],
                &["x"],
                "KUBEXIT_NAMESPACE: required when KUBEXIT_POD_NAME=\"job-x\"",
            ),
            (
                &[("name", "a"), ("namespace", "ns")],
                &["x"],
                "KUBEXIT_POD_NAME: required when KUBEXIT_NAMESPACE=\"ns\"",
            ),
            (
                &[("name", "a"), ("pod_name", "Job_X"), ("namespace", "ns")],
                &["x"],
                "invalid KUBEXIT_POD_NAME=\"Job_X\"",
            ),
            (
                &[("name", "a"), ("pod_name", "p"), ("namespace", "a.b")],
                &["x"],
                "invalid KUBEXIT_NAMESPACE=\"a.b\"",
            ),
            (
                &[("name", "a"), ("poll_interval", "1ms")],
                &["x"],
                "invalid KUBEXIT_POLL_INTERVAL=\"1ms\": must be at least 10ms",
            ),
            (
                &[("name", "a"), ("ready_probe", "udp://1.2.3.4:5")],
                &["x"],
                "invalid KUBEXIT_READY_PROBE=\"udp://1.2.3.4:5\"",
            ),
            (
                &[("name", "a"), ("ready_probe", "tcp://127.0.0.1")],
                &["x"],
                "port",
            ),
            (
                &[("name", "a"), ("ready_probe", "file://relative")],
                &["x"],
                "absolute",
            ),
            (
                &[("name", "a"), ("ready_timeout", "0")],
                &["x"],
                "invalid KUBEXIT_READY_TIMEOUT",
            ),
            (
                &[("name", "a"), ("shutdown_hook_timeout", "0s")],
                &["x"],
                "invalid KUBEXIT_SHUTDOWN_HOOK_TIMEOUT=\"0s\": must be more than 0",
            ),
            (
                &[("name", "a"), ("ready_interval", "9ms")],
                &["x"],
                "invalid KUBEXIT_READY_INTERVAL=\"9ms\": must be at least 10ms",
            ),
            (
                &[
                    ("name", "a"),
                    ("shutdown_hooks", "http://10.1.2.3:15020/quitquitquit"),
                ],
                &["x"],
                "is not a loopback address",
            ),
            (
                &[("name", "a"), ("shutdown_hooks", "https://127.0.0.1/x")],
                &["x"],
                "invalid KUBEXIT_SHUTDOWN_HOOKS",
            ),
            (
                &[("name", "a"), ("shutdown_hooks_allow_remote", "sure")],
                &["x"],
                "invalid KUBEXIT_SHUTDOWN_HOOKS_ALLOW_REMOTE",
            ),
            (
                &[("name", "a"), ("log_level", "loud")],
                &["x"],
                "invalid KUBEXIT_LOG_LEVEL=\"loud\"",
            ),
            (&[("name", "a")], &[], "COMMAND: no command given"),
            (&[("name", "a")], &[""], "COMMAND: no command given"),
        ];
        for (pairs, cmd, want) in cases {
            let e = cfg(pairs, cmd).expect_err(want).to_string();
            assert!(e.contains(want), "{pairs:?}: got {e:?}, want {want:?}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }

    #[test]
    fn blank_env_is_unset_and_paths_are_trimmed() {
        let c = cfg(
            &[
                ("name", " a "),
                ("graveyard", ""),
                ("grace_period", " "),
                ("term_signal", ""),
                ("watch", ""),
                ("log_level", "  "),
            ],
            &["x"],
        )
        .unwrap();
        assert_eq!(c.graveyard, PathBuf::from("/graveyard"));
        assert_eq!(c.grace_period, Duration::from_secs(30));
        assert_eq!(c.term_signal, Signal::SIGTERM);
        assert_eq!(c.watch, WatchMode::Auto);
        let c = cfg(&[("name", "a"), ("graveyard", " /abs/g \t")], &["x"]).unwrap();
        assert_eq!(c.graveyard, PathBuf::from("/abs/g"));
        // still required
        let e = cfg(&[("name", " ")], &["x"]).unwrap_err().to_string();
        assert!(e.starts_with("KUBEXIT_NAME: required"), "{e}");
        // a blank flag is not "unset": it is an explicit, empty value
        let e = Config::from_lookup(
            |id| {
                Some(Raw {
                    value: if id == "name" { "a".into() } else if id == "graveyard" { " ".into() } else { return None },
                    origin: Origin::Flag,
                })
            },
            vec!["x".into()],
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("invalid --graveyard"), "{e}");
    }

    #[test]
    fn probes_and_hooks() {
        let c = cfg(
            &[
                ("name", "a"),
                ("watch", "poll"),
                ("poll_interval", "50ms"),
                ("ready_probe", "http://localhost:15021/healthz/ready"),
                (
                    "shutdown_hooks",
                    "http://127.0.0.1:15020/quitquitquit, http://[::1]:4191/shutdown",
                ),
            ],
            &["x"],
        )
        .unwrap();
        assert_eq!(c.watch, WatchMode::Poll);
        assert_eq!(c.poll_interval, Duration::from_millis(50));
        assert!(
            matches!(&c.ready_probe, Some(Probe::Http(u)) if u.port == 15021 && u.path == "/healthz/ready")
        );
        assert_eq!(c.shutdown_hooks.len(), 2);
        let c = cfg(
            &[
                ("name", "a"),
                ("shutdown_hooks", "http://proxy.internal:8080/stop"),
                ("shutdown_hooks_allow_remote", "true"),
            ],
            &["x"],
        )
        .unwrap();
        assert_eq!(c.shutdown_hooks[0].host, "proxy.internal");
        let d = cfg(&[("name", "a")], &["x"]).unwrap();
        assert_eq!(
            (d.watch, d.poll_interval, d.ready_probe.is_none()),
            (WatchMode::Auto, Duration::from_secs(1), true)
        );
        assert!(d.pod.is_none() && d.kubeconfig.is_none());
        let c = cfg(
            &[
                ("name", "a"),
                ("pod_name", "job-abc.x"),
                ("namespace", "team-a"),
                ("kubeconfig", "/k"),
            ],
            &["x"],
        )
        .unwrap();
        assert_eq!(
            c.pod,
            Some(PodRef {
                name: "job-abc.x".into(),
                namespace: "team-a".into()
            })
        );
        assert_eq!(c.kubeconfig, Some(PathBuf::from("/k")));
    }

    #[test]
    fn flag_origin_named_as_flag() {
        let e = Config::from_lookup(
            |id| match id {
                "name" => Some(Raw {
                    value: "a".into(),
                    origin: Origin::Env,
                }),
                "grace_period" => Some(Raw {
                    value: "x".into(),
                    origin: Origin::Flag,
                }),
                _ => None,
            },
            vec!["x".into()],
        )
        .unwrap_err();
        assert_eq!(e.origin, "--grace-period");
    }

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

    #[test]
    fn signals() {
        for (s, sig) in [
            ("SIGTERM", Signal::SIGTERM),
            ("TERM", Signal::SIGTERM),
            ("term", Signal::SIGTERM),
            ("15", Signal::SIGTERM),
            ("sigquit", Signal::SIGQUIT),
            ("KILL", Signal::SIGKILL),
            ("USR1", Signal::SIGUSR1),
        ] {
            assert_eq!(parse_signal(s), Ok(sig), "{s}");
        }
        for bad in ["", "0", "65", "FOO", "SIG"] {
            assert!(parse_signal(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names() {
        for ok in ["a", "main", "sidecar-1", "0", &"a".repeat(63)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "A",
            "a_b",
            "a.b",
            "-a",
            "a-",
            "a/b",
            "..",
            ".",
            &"a".repeat(64),
            "ä",
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bools() {
        for (s, b) in [
            ("true", true),
            ("1", true),
            ("YES", true),
            ("false", false),
            ("", false),
            ("0", false),
        ] {
            assert_eq!(parse_bool(s), Ok(b), "{s}");
        }
        assert!(parse_bool("2").is_err());
    }
}
