//! The supervisor's configuration: parsing and validation of the settings table
//! (`settings.rs`), one named step per setting.
//!
//! Pure: values come in through a lookup function, so the rules are table-tested without
//! touching the process environment. The in-pod CLI feeds it from clap, which knows whether
//! a value came from a flag or from the environment; error messages name exactly that
//! origin (`KUBEXIT_GRACE_PERIOD` or `--grace-period`).

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::duration::{format_go_duration, parse_go_duration};
use crate::endpoint::{HttpUrl, Probe};
use crate::names::{parse_dep_list, validate_name, validate_subdomain};
use crate::pre_stop::PreStop;
use crate::settings::{Origin, Raw, Setting, setting};
use crate::signal::Signal;

/// A value that is not one of a setting's fixed choices.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("expected {0}")]
pub struct NotOneOf(&'static str);

/// Matches a trimmed, case-insensitive value against `options`.
fn one_of<T: Copy>(
    value: &str,
    options: &[(&str, T)],
    expected: &'static str,
) -> Result<T, NotOneOf> {
    let v = value.trim().to_ascii_lowercase();
    options
        .iter()
        .find(|(name, _)| *name == v)
        .map(|(_, t)| *t)
        .ok_or(NotOneOf(expected))
}

/// The exit code of a container stopped because a death dependency died.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepExitCode {
    Zero,
    Child,
}

impl DepExitCode {
    pub fn parse(s: &str) -> Result<Self, NotOneOf> {
        let options = [
            ("zero", Self::Zero),
            ("0", Self::Zero),
            ("child", Self::Child),
        ];
        one_of(s, &options, "`zero` or `child`")
    }
}

/// Which deaths of a death dependency stop this container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeathTrigger {
    Any,
    Success,
}

impl DeathTrigger {
    pub fn parse(s: &str) -> Result<Self, NotOneOf> {
        one_of(
            s,
            &[("any", Self::Any), ("success", Self::Success)],
            "`any` or `success`",
        )
    }
}

/// Whether one death dependency's death stops the child, or only all of theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeathDepsMode {
    /// kubexit's meaning of `KUBEXIT_DEATH_DEPS`: the first death stops the child.
    Any,
    /// A sidecar of several mains: the child is stopped once every one of them died.
    All,
}

impl DeathDepsMode {
    pub fn parse(s: &str) -> Result<Self, NotOneOf> {
        one_of(
            s,
            &[("any", Self::Any), ("all", Self::All)],
            "`any` or `all`",
        )
    }
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
    pub fn parse(s: &str) -> Result<Self, NotOneOf> {
        let options = [
            ("auto", Self::Auto),
            ("inotify", Self::Inotify),
            ("poll", Self::Poll),
        ];
        one_of(s, &options, "`auto`, `inotify` or `poll`")
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WatchMode::Auto => "auto",
            WatchMode::Inotify => "inotify",
            WatchMode::Poll => "poll",
        }
    }
}

/// The log format of both binaries. (With the feature `clap`, the cluster-side binary's
/// flags parse it through `clap::ValueEnum`; the in-pod binary reads it from its settings
/// table with `parse`, which also takes kubexit-style spellings.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    pub fn parse(s: &str) -> Result<Self, NotOneOf> {
        one_of(
            s,
            &[("text", Self::Text), ("json", Self::Json)],
            "`text` or `json`",
        )
    }
}

/// The log level of both binaries (the one parser of `--log-level` and `KUBEXIT_LOG_LEVEL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LogLevel {
    Error,
    #[cfg_attr(feature = "clap", value(alias = "warning"))]
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    pub fn parse(s: &str) -> Result<Self, NotOneOf> {
        let options = [
            ("error", Self::Error),
            ("warn", Self::Warn),
            ("warning", Self::Warn),
            ("info", Self::Info),
            ("debug", Self::Debug),
            ("trace", Self::Trace),
        ];
        one_of(s, &options, "error, warn, info, debug or trace")
    }
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
    pub death_deps_mode: DeathDepsMode,
    pub hold_stop: bool,
    pub pod_grace_period: Duration,
    pub restart_child: bool,
    pub restart_backoff: Duration,
    pub pre_stop: Option<PreStop>,
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
    pub log_level: LogLevel,
    pub command: Vec<OsString>,
}

/// A configuration error: names the variable (or flag) and the offending value. One line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
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

/// A setting's raw value, with what is needed to name it in an error.
struct Value {
    raw: Raw,
    setting: &'static Setting,
}

impl Value {
    fn text(&self) -> &str {
        self.raw.value.trim()
    }

    // `&dyn Display` and no inlining: one copy of the error path for every setting keeps
    // the in-pod binary small (the generic version cost ~5 KB).
    #[inline(never)]
    fn invalid(&self, problem: &dyn fmt::Display) -> ConfigError {
        let origin = match self.raw.origin {
            Origin::Flag => format!("--{}", self.setting.flag),
            Origin::Env | Origin::Default => self.setting.env.to_string(),
        };
        ConfigError {
            origin,
            value: Some(self.raw.value.clone()),
            problem: problem.to_string(),
        }
    }

    /// A problem with no single value to show (a missing or inconsistent setting).
    fn missing(&self, problem: String) -> ConfigError {
        ConfigError {
            origin: self.setting.env.to_string(),
            value: None,
            problem,
        }
    }

    fn parse<T, E: fmt::Display>(
        &self,
        f: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<T, ConfigError> {
        f(self.text()).map_err(|e| self.invalid(&e))
    }
}

/// Any positive duration (as opposed to a minimum of zero).
const MORE_THAN_ZERO: Duration = Duration::from_nanos(1);

/// Reads settings through the caller's lookup.
struct Reader<L> {
    lookup: L,
}

impl<L: Fn(&str) -> Option<Raw>> Reader<L> {
    /// An environment variable set to blanks counts as unset, as in kubexit (which reads
    /// `KUBEXIT_GRAVEYARD=""` as the default `/graveyard`), so sexton is a drop-in.
    fn get(&self, id: &str) -> Value {
        let setting = setting(id);
        let given =
            (self.lookup)(id).filter(|r| r.origin != Origin::Env || !r.value.trim().is_empty());
        let raw = given.unwrap_or_else(|| Raw {
            value: setting.default.unwrap_or("").to_string(),
            origin: Origin::Default,
        });
        Value { raw, setting }
    }

    fn name(&self) -> Result<String, ConfigError> {
        let v = self.get("name");
        if v.text().is_empty() {
            let s = v.setting;
            return Err(v.missing(format!(
                "required: set {} (or --{}) to this container's name",
                s.env, s.flag
            )));
        }
        v.parse(|t| validate_name(t).map(|()| t.to_string()))
    }

    /// Paths are trimmed like every other value (`" /graveyard"` is not relative).
    fn graveyard(&self) -> Result<PathBuf, ConfigError> {
        let v = self.get("graveyard");
        if v.text().is_empty() {
            return Err(v.invalid(&"must not be empty"));
        }
        Ok(PathBuf::from(v.text()))
    }

    fn deps(&self, id: &str, own_name: &str) -> Result<Vec<String>, ConfigError> {
        self.get(id).parse(|t| parse_dep_list(t, own_name))
    }

    /// A Go duration of at least `min` (`MORE_THAN_ZERO`: any positive one).
    #[inline(never)]
    fn duration(&self, id: &str, min: Duration) -> Result<Duration, ConfigError> {
        let v = self.get(id);
        let d = v.parse(parse_go_duration)?;
        if d >= min {
            return Ok(d);
        }
        Err(v.invalid(&if min == MORE_THAN_ZERO {
            "must be more than 0".to_string()
        } else {
            format!("must be at least {}", format_go_duration(min))
        }))
    }

    /// Both or neither of pod name and namespace (from the downward API).
    fn pod(&self) -> Result<Option<PodRef>, ConfigError> {
        let (pod, ns) = (self.get("pod_name"), self.get("namespace"));
        match (pod.text(), ns.text()) {
            ("", "") => Ok(None),
            (p, "") => Err(ns.missing(format!(
                "required when {}={p:?} is set (the pod's namespace, from the downward API)",
                pod.setting.env
            ))),
            ("", n) => Err(pod.missing(format!(
                "required when {}={n:?} is set (the pod's name, from the downward API)",
                ns.setting.env
            ))),
            (p, n) => {
                pod.parse(validate_subdomain)?;
                ns.parse(validate_name)?;
                Ok(Some(PodRef {
                    name: p.into(),
                    namespace: n.into(),
                }))
            }
        }
    }

    fn optional_path(&self, id: &str) -> Option<PathBuf> {
        Some(self.get(id).text())
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    fn pre_stop(&self) -> Result<Option<PreStop>, ConfigError> {
        let v = self.get("pre_stop");
        if v.text().is_empty() {
            return Ok(None);
        }
        v.parse(PreStop::parse).map(Some)
    }

    fn ready_probe(&self) -> Result<Option<Probe>, ConfigError> {
        let v = self.get("ready_probe");
        if v.text().is_empty() {
            return Ok(None);
        }
        v.parse(Probe::parse).map(Some)
    }

    /// Shutdown endpoints are local-only unless remote ones are allowed explicitly.
    fn shutdown_hooks(&self) -> Result<Vec<HttpUrl>, ConfigError> {
        let remote = self.get("shutdown_hooks_allow_remote");
        let allow_remote = remote.parse(parse_bool)?;
        let v = self.get("shutdown_hooks");
        let mut hooks = vec![];
        for item in v.text().split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let url = HttpUrl::parse(item).map_err(|p| v.invalid(&format!("{item:?}: {p}")))?;
            if !allow_remote && !url.is_loopback() {
                return Err(v.invalid(&format!(
                    "{item:?} is not a loopback address; shutdown endpoints are local-only by design (set {}=true to allow it)",
                    remote.setting.env
                )));
            }
            hooks.push(url);
        }
        Ok(hooks)
    }
}

fn checked_command(command: Vec<OsString>) -> Result<Vec<OsString>, ConfigError> {
    if command.first().is_none_or(|c| c.is_empty()) {
        return Err(ConfigError {
            origin: "COMMAND".into(),
            value: None,
            problem: "no command given: usage is `sexton [FLAGS] [--] COMMAND [ARGS...]`".into(),
        });
    }
    Ok(command)
}

impl Config {
    /// Builds the configuration from a lookup (setting id → raw value) and the command.
    /// `lookup` returns `None` when neither flag nor env var is set; defaults apply then.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<Raw>,
        command: Vec<OsString>,
    ) -> Result<Config, ConfigError> {
        let r = Reader { lookup };
        let name = r.name()?;
        Ok(Config {
            graveyard: r.graveyard()?,
            death_deps: r.deps("death_deps", &name)?,
            birth_deps: r.deps("birth_deps", &name)?,
            grace_period: r.duration("grace_period", Duration::ZERO)?,
            birth_timeout: r.duration("birth_timeout", Duration::ZERO)?,
            term_signal: r.get("term_signal").parse(Signal::parse)?,
            signal_group: r.get("signal_group").parse(parse_bool)?,
            dep_exit_code: r.get("dep_exit_code").parse(DepExitCode::parse)?,
            death_trigger: r.get("death_trigger").parse(DeathTrigger::parse)?,
            death_deps_mode: r.get("death_deps_mode").parse(DeathDepsMode::parse)?,
            hold_stop: r.get("hold_stop").parse(parse_bool)?,
            pod_grace_period: r.duration("pod_grace_period", Duration::ZERO)?,
            restart_child: r.get("restart_child").parse(parse_bool)?,
            restart_backoff: r.duration("restart_backoff", Duration::from_millis(10))?,
            pre_stop: r.pre_stop()?,
            pod: r.pod()?,
            kubeconfig: r.optional_path("kubeconfig"),
            watch: r.get("watch").parse(WatchMode::parse)?,
            poll_interval: r.duration("poll_interval", Duration::from_millis(10))?,
            ready_probe: r.ready_probe()?,
            ready_interval: r.duration("ready_interval", Duration::from_millis(10))?,
            ready_timeout: r.duration("ready_timeout", MORE_THAN_ZERO)?,
            shutdown_hooks: r.shutdown_hooks()?,
            shutdown_hook_timeout: r.duration("shutdown_hook_timeout", MORE_THAN_ZERO)?,
            log_format: r.get("log_format").parse(LogFormat::parse)?,
            log_level: r.get("log_level").parse(LogLevel::parse)?,
            command: checked_command(command)?,
            name,
        })
    }
}

/// A value that is not a boolean.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("expected true or false")]
pub struct NotABool;

pub fn parse_bool(s: &str) -> Result<bool, NotABool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(NotABool),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Origin, Raw};
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

    /// (settings, command, what the error must say)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a str);

    #[test]
    fn config_errors_name_the_variable_and_value() {
        let cases: &[Case] = &[
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
                    value: if id == "name" {
                        "a".into()
                    } else if id == "graveyard" {
                        " ".into()
                    } else {
                        return None;
                    },
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
            assert_eq!(Signal::parse(s), Ok(sig), "{s}");
        }
        for bad in ["", "0", "65", "FOO", "SIG"] {
            assert!(Signal::parse(bad).is_err(), "{bad}");
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
