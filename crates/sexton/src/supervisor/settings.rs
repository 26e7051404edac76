//! What the supervisor keeps of the configuration: where the graveyard is, what to run,
//! how to watch and probe. The rules (dependencies, grace, signals, the sidecar contract)
//! go to the core's `Policy`, built here once; the supervisor reads them back from the
//! core and nowhere else.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::probe::{HttpUrl, Probe};
use sexton_core::config::{Config, HooksOn, PodRef, WatchMode};
use sexton_core::machine::Policy;

/// The configuration's settings that are the glue's, not the core's.
pub struct Settings {
    pub name: String,
    pub graveyard: PathBuf,
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
    pub command: Vec<OsString>,
}

/// The configuration split once: the core's policy, and the glue's settings. Every field
/// goes to one side (the compiler checks the list: a new setting must be placed).
pub fn split(cfg: Config, pid1: bool) -> (Policy, Settings) {
    let policy = Policy::from_config(&cfg, pid1);
    let Config {
        name,
        graveyard,
        pod,
        kubeconfig,
        watch,
        poll_interval,
        ready_probe,
        ready_interval,
        ready_timeout,
        shutdown_hooks,
        shutdown_hook_timeout,
        shutdown_hooks_after,
        shutdown_hooks_on,
        command,
        // the policy's: read back from the core from now on
        death_deps: _,
        birth_deps: _,
        grace_period: _,
        birth_timeout: _,
        term_signal: _,
        signal_group: _,
        dep_exit_code: _,
        death_trigger: _,
        death_deps_mode: _,
        hold_stop: _,
        pod_grace_period: _,
        restart_child: _,
        restart_backoff: _,
        pre_stop: _,
        // the logger's, set up before the supervisor starts
        log_format: _,
        log_level: _,
    } = cfg;
    let settings = Settings {
        name,
        graveyard,
        pod,
        kubeconfig,
        watch,
        poll_interval,
        ready_probe,
        ready_interval,
        ready_timeout,
        shutdown_hooks,
        shutdown_hook_timeout,
        shutdown_hooks_after,
        shutdown_hooks_on,
        command,
    };
    (policy, settings)
}
