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
use crate::settings::{Id, Origin, Raw, Setting};
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

/// When the shutdown hooks run (`KUBEXIT_SHUTDOWN_HOOKS_ON`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HooksOn {
    /// After any exit of the child.
    Exit,
    /// Only when the child, and every container they wait for, exited 0.
    Success,
}

impl HooksOn {
    pub fn parse(s: &str) -> Result<Self, NotOneOf> {
        one_of(
            s,
            &[("exit", Self::Exit), ("success", Self::Success)],
            "`exit` or `success`",
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
    pub shutdown_hooks_after: Vec<String>,
    pub shutdown_hooks_on: HooksOn,
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
    fn get(&self, id: Id) -> Value {
        let setting = id.setting();
        let given = (self.lookup)(id.as_str())
            .filter(|r| r.origin != Origin::Env || !r.value.trim().is_empty());
        let raw = given.unwrap_or_else(|| Raw {
            value: setting.default.unwrap_or("").to_string(),
            origin: Origin::Default,
        });
        Value { raw, setting }
    }

    fn name(&self) -> Result<String, ConfigError> {
        let v = self.get(Id::Name);
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
        let v = self.get(Id::Graveyard);
        if v.text().is_empty() {
            return Err(v.invalid(&"must not be empty"));
        }
        Ok(PathBuf::from(v.text()))
    }

    fn deps(&self, id: Id, own_name: &str) -> Result<Vec<String>, ConfigError> {
        self.get(id).parse(|t| parse_dep_list(t, own_name))
    }

    /// A Go duration of at least `min` (`MORE_THAN_ZERO`: any positive one).
    #[inline(never)]
    fn duration(&self, id: Id, min: Duration) -> Result<Duration, ConfigError> {
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
        let (pod, ns) = (self.get(Id::PodName), self.get(Id::Namespace));
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

    fn optional_path(&self, id: Id) -> Option<PathBuf> {
        Some(self.get(id).text())
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    }

    fn pre_stop(&self) -> Result<Option<PreStop>, ConfigError> {
        let v = self.get(Id::PreStop);
        if v.text().is_empty() {
            return Ok(None);
        }
        v.parse(PreStop::parse).map(Some)
    }

    fn ready_probe(&self) -> Result<Option<Probe>, ConfigError> {
        let v = self.get(Id::ReadyProbe);
        if v.text().is_empty() {
            return Ok(None);
        }
        v.parse(Probe::parse).map(Some)
    }

    /// Shutdown endpoints are local-only unless remote ones are allowed explicitly.
    fn shutdown_hooks(&self) -> Result<Vec<HttpUrl>, ConfigError> {
        let remote = self.get(Id::ShutdownHooksAllowRemote);
        let allow_remote = remote.parse(parse_bool)?;
        let v = self.get(Id::ShutdownHooks);
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
            death_deps: r.deps(Id::DeathDeps, &name)?,
            birth_deps: r.deps(Id::BirthDeps, &name)?,
            grace_period: r.duration(Id::GracePeriod, Duration::ZERO)?,
            birth_timeout: r.duration(Id::BirthTimeout, Duration::ZERO)?,
            term_signal: r.get(Id::TermSignal).parse(Signal::parse)?,
            signal_group: r.get(Id::SignalGroup).parse(parse_bool)?,
            dep_exit_code: r.get(Id::DepExitCode).parse(DepExitCode::parse)?,
            death_trigger: r.get(Id::DeathTrigger).parse(DeathTrigger::parse)?,
            death_deps_mode: r.get(Id::DeathDepsMode).parse(DeathDepsMode::parse)?,
            hold_stop: r.get(Id::HoldStop).parse(parse_bool)?,
            pod_grace_period: r.duration(Id::PodGracePeriod, Duration::ZERO)?,
            restart_child: r.get(Id::RestartChild).parse(parse_bool)?,
            restart_backoff: r.duration(Id::RestartBackoff, Duration::from_millis(10))?,
            pre_stop: r.pre_stop()?,
            pod: r.pod()?,
            kubeconfig: r.optional_path(Id::Kubeconfig),
            watch: r.get(Id::Watch).parse(WatchMode::parse)?,
            poll_interval: r.duration(Id::PollInterval, Duration::from_millis(10))?,
            ready_probe: r.ready_probe()?,
            ready_interval: r.duration(Id::ReadyInterval, Duration::from_millis(10))?,
            ready_timeout: r.duration(Id::ReadyTimeout, MORE_THAN_ZERO)?,
            shutdown_hooks: r.shutdown_hooks()?,
            shutdown_hook_timeout: r.duration(Id::ShutdownHookTimeout, MORE_THAN_ZERO)?,
            shutdown_hooks_after: r.deps(Id::ShutdownHooksAfter, &name)?,
            shutdown_hooks_on: r.get(Id::ShutdownHooksOn).parse(HooksOn::parse)?,
            log_format: r.get(Id::LogFormat).parse(LogFormat::parse)?,
            log_level: r.get(Id::LogLevel).parse(LogLevel::parse)?,
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
mod tests;
