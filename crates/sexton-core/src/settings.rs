//! The table of supervisor settings: each one a flag mirrored by a kubexit-style
//! environment variable (flags win). The single source for the CLI, the configuration
//! parser and the settings table of docs/in-pod.md (a test keeps the page in step).

/// One setting: a flag and the environment variable that mirrors it. Flags win.
#[derive(Debug)]
pub struct Setting {
    pub id: Id,
    pub flag: &'static str,
    pub env: &'static str,
    pub default: Option<&'static str>,
    pub value_name: &'static str,
    pub help: &'static str,
}

/// Which setting: the configuration parser asks for settings by these, so that asking for
/// one that does not exist cannot compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Id {
    Name,
    Graveyard,
    DeathDeps,
    BirthDeps,
    GracePeriod,
    BirthTimeout,
    TermSignal,
    SignalGroup,
    DepExitCode,
    DeathTrigger,
    DeathDepsMode,
    HoldStop,
    PodGracePeriod,
    RestartChild,
    RestartBackoff,
    PreStop,
    PodName,
    Namespace,
    Kubeconfig,
    Watch,
    PollInterval,
    ReadyProbe,
    ReadyInterval,
    ReadyTimeout,
    ShutdownHooks,
    ShutdownHookTimeout,
    ShutdownHooksAllowRemote,
    ShutdownHooksAfter,
    ShutdownHooksOn,
    LogFormat,
    LogLevel,
}

impl Id {
    /// The setting (`SETTINGS` is in the order of `Id`, checked when compiling).
    pub fn setting(self) -> &'static Setting {
        &SETTINGS[self as usize]
    }

    /// The id as the caller's lookup gets it, and the CLI's argument id.
    pub fn as_str(self) -> &'static str {
        match self {
            Id::Name => "name",
            Id::Graveyard => "graveyard",
            Id::DeathDeps => "death_deps",
            Id::BirthDeps => "birth_deps",
            Id::GracePeriod => "grace_period",
            Id::BirthTimeout => "birth_timeout",
            Id::TermSignal => "term_signal",
            Id::SignalGroup => "signal_group",
            Id::DepExitCode => "dep_exit_code",
            Id::DeathTrigger => "death_trigger",
            Id::DeathDepsMode => "death_deps_mode",
            Id::HoldStop => "hold_stop",
            Id::PodGracePeriod => "pod_grace_period",
            Id::RestartChild => "restart_child",
            Id::RestartBackoff => "restart_backoff",
            Id::PreStop => "pre_stop",
            Id::PodName => "pod_name",
            Id::Namespace => "namespace",
            Id::Kubeconfig => "kubeconfig",
            Id::Watch => "watch",
            Id::PollInterval => "poll_interval",
            Id::ReadyProbe => "ready_probe",
            Id::ReadyInterval => "ready_interval",
            Id::ReadyTimeout => "ready_timeout",
            Id::ShutdownHooks => "shutdown_hooks",
            Id::ShutdownHookTimeout => "shutdown_hook_timeout",
            Id::ShutdownHooksAllowRemote => "shutdown_hooks_allow_remote",
            Id::ShutdownHooksAfter => "shutdown_hooks_after",
            Id::ShutdownHooksOn => "shutdown_hooks_on",
            Id::LogFormat => "log_format",
            Id::LogLevel => "log_level",
        }
    }
}

/// Every supervisor setting. This table is the single source for the CLI and the settings
/// table of docs/in-pod.md (a test, kubectl-sexton's tests/docs.rs, keeps the page in step).
pub const SETTINGS: &[Setting] = &[
    Setting {
        id: Id::Name,
        flag: "name",
        env: "KUBEXIT_NAME",
        default: None,
        value_name: "NAME",
        help: "Name of this container (required; a DNS-1123 label). The tombstone is GRAVEYARD/NAME.",
    },
    Setting {
        id: Id::Graveyard,
        flag: "graveyard",
        env: "KUBEXIT_GRAVEYARD",
        default: Some("/graveyard"),
        value_name: "DIR",
        help: "Directory shared by the pod's containers (an emptyDir); created if missing.",
    },
    Setting {
        id: Id::DeathDeps,
        flag: "death-deps",
        env: "KUBEXIT_DEATH_DEPS",
        default: Some(""),
        value_name: "NAMES",
        help: "Comma list of containers whose death stops this container's child.",
    },
    Setting {
        id: Id::BirthDeps,
        flag: "birth-deps",
        env: "KUBEXIT_BIRTH_DEPS",
        default: Some(""),
        value_name: "NAMES",
        help: "Comma list of containers that must be ready before the child is started.",
    },
    Setting {
        id: Id::GracePeriod,
        flag: "grace-period",
        env: "KUBEXIT_GRACE_PERIOD",
        default: Some("30s"),
        value_name: "DURATION",
        help: "Time between the termination signal and SIGKILL when a death dependency dies (Go syntax: 30s, 1m30s, 500ms).",
    },
    Setting {
        id: Id::BirthTimeout,
        flag: "birth-timeout",
        env: "KUBEXIT_BIRTH_TIMEOUT",
        default: Some("30s"),
        value_name: "DURATION",
        help: "How long to wait for birth dependencies before giving up without starting the child.",
    },
    Setting {
        id: Id::TermSignal,
        flag: "term-signal",
        env: "KUBEXIT_TERM_SIGNAL",
        default: Some("SIGTERM"),
        value_name: "SIGNAL",
        help: "Signal sent to the child when a death dependency dies (name such as SIGTERM, TERM, or number).",
    },
    Setting {
        id: Id::SignalGroup,
        flag: "signal-group",
        env: "KUBEXIT_SIGNAL_GROUP",
        default: Some("false"),
        value_name: "BOOL",
        help: "Send forwarded and termination signals to the child's whole process group instead of the child alone.",
    },
    Setting {
        id: Id::DepExitCode,
        flag: "dep-exit-code",
        env: "KUBEXIT_DEP_EXIT_CODE",
        default: Some("zero"),
        value_name: "zero|child",
        help: "Exit code when the child was stopped because a death dependency died: `zero` (the pod can succeed) or `child` (the child's own code, 128+N if killed by signal N).",
    },
    Setting {
        id: Id::DeathTrigger,
        flag: "death-trigger",
        env: "KUBEXIT_DEATH_TRIGGER",
        default: Some("any"),
        value_name: "any|success",
        help: "Which deaths of a death dependency stop the child: `any`, or only `success` (exit code 0; use with restartPolicy OnFailure, where a failed main is restarted).",
    },
    Setting {
        id: Id::DeathDepsMode,
        flag: "death-deps-mode",
        env: "KUBEXIT_DEATH_DEPS_MODE",
        default: Some("any"),
        value_name: "any|all",
        help: "Whether the child is stopped when `any` death dependency died (kubexit), or only once `all` of them died (a sidecar of several mains).",
    },
    Setting {
        id: Id::HoldStop,
        flag: "hold-stop",
        env: "KUBEXIT_HOLD_STOP",
        default: Some("false"),
        value_name: "BOOL",
        help: "Ordered termination: a stop signal (SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGPWR, real-time) received while a death dependency is alive is held, not forwarded, until they all died, then the child is stopped as when they die; at the latest when the pod's grace period leaves only the grace period and 1s.",
    },
    Setting {
        id: Id::PodGracePeriod,
        flag: "pod-grace-period",
        env: "KUBEXIT_POD_GRACE_PERIOD",
        default: Some("30s"),
        value_name: "DURATION",
        help: "The pod's terminationGracePeriodSeconds: bounds how long KUBEXIT_HOLD_STOP holds a stop signal.",
    },
    Setting {
        id: Id::RestartChild,
        flag: "restart-child",
        env: "KUBEXIT_RESTART_CHILD",
        default: Some("false"),
        value_name: "BOOL",
        help: "Start the child again whenever it exits while the death dependencies are alive (a native sidecar's restart), with the kubelet's back-off; never once they died or a stop signal came. The lock and tombstone stay this supervisor's, so peers see the container alive across restarts.",
    },
    Setting {
        id: Id::RestartBackoff,
        flag: "restart-backoff",
        env: "KUBEXIT_RESTART_BACKOFF",
        default: Some("10s"),
        value_name: "DURATION",
        help: "Back-off of KUBEXIT_RESTART_CHILD: the first restart at once, then this, doubling up to 30 times this (300s by default); at once again after a run of 10 minutes.",
    },
    Setting {
        id: Id::PreStop,
        flag: "pre-stop",
        env: "KUBEXIT_PRE_STOP",
        default: Some(""),
        value_name: "HOOK",
        help: "The container's preStop hook, run before the termination signal when a death dependency's death stops the child (not on a signal: the kubelet ran it then): `exec:[\"CMD\",\"ARG\"]`, `http://HOST:PORT/PATH` (GET) or `sleep:DURATION`. Its time counts in the grace period.",
    },
    Setting {
        id: Id::PodName,
        flag: "pod-name",
        env: "KUBEXIT_POD_NAME",
        default: Some(""),
        value_name: "NAME",
        help: "This pod's name. With KUBEXIT_NAMESPACE, birth dependencies are containers of this pod whose status says ready in the Kubernetes API (kubexit behaviour; works for containers not wrapped by sexton). Set it from the downward API (fieldRef metadata.name).",
    },
    Setting {
        id: Id::Namespace,
        flag: "namespace",
        env: "KUBEXIT_NAMESPACE",
        default: Some(""),
        value_name: "NAMESPACE",
        help: "This pod's namespace (downward API: fieldRef metadata.namespace); with KUBEXIT_POD_NAME.",
    },
    Setting {
        id: Id::Kubeconfig,
        flag: "kubeconfig",
        env: "KUBEXIT_KUBECONFIG",
        default: Some(""),
        value_name: "FILE",
        help: "Kubeconfig for the API (local runs); default: the pod's service account (in-cluster).",
    },
    Setting {
        id: Id::Watch,
        flag: "watch",
        env: "KUBEXIT_WATCH",
        default: Some("auto"),
        value_name: "auto|inotify|poll",
        help: "How the graveyard is watched: `inotify` (events only: zero idle cost), `poll` (re-read every poll interval), or `auto`: inotify plus a poll every interval as a safety net (some sandboxes, e.g. gVisor, deliver no inotify events across containers), falling back to poll if inotify cannot be set up.",
    },
    Setting {
        id: Id::PollInterval,
        flag: "poll-interval",
        env: "KUBEXIT_POLL_INTERVAL",
        default: Some("1s"),
        value_name: "DURATION",
        help: "Interval of the graveyard poll (modes `poll` and `auto`); at least 10ms.",
    },
    Setting {
        id: Id::ReadyProbe,
        flag: "ready-probe",
        env: "KUBEXIT_READY_PROBE",
        default: Some(""),
        value_name: "PROBE",
        help: "When this container counts as ready (its tombstone's `Ready`): immediately when unset; or when a check of the child succeeds: `tcp://HOST:PORT` (connect), `http://HOST:PORT/PATH` (GET answers 200-399, as for the kubelet), `file:///PATH` (file exists).",
    },
    Setting {
        id: Id::ReadyInterval,
        flag: "ready-interval",
        env: "KUBEXIT_READY_INTERVAL",
        default: Some("100ms"),
        value_name: "DURATION",
        help: "Interval between readiness checks.",
    },
    Setting {
        id: Id::ReadyTimeout,
        flag: "ready-timeout",
        env: "KUBEXIT_READY_TIMEOUT",
        default: Some("1s"),
        value_name: "DURATION",
        help: "Time limit of one readiness check (connect, request and response).",
    },
    Setting {
        id: Id::ShutdownHooks,
        flag: "shutdown-hooks",
        env: "KUBEXIT_SHUTDOWN_HOOKS",
        default: Some(""),
        value_name: "URLS",
        help: "Comma list of http:// URLs to POST to after the child exits, e.g. Istio's http://127.0.0.1:15020/quitquitquit or Linkerd's http://127.0.0.1:4191/shutdown. Failures are logged and never change the exit code.",
    },
    Setting {
        id: Id::ShutdownHookTimeout,
        flag: "shutdown-hook-timeout",
        env: "KUBEXIT_SHUTDOWN_HOOK_TIMEOUT",
        default: Some("2s"),
        value_name: "DURATION",
        help: "Time budget of each shutdown hook, retries included.",
    },
    Setting {
        id: Id::ShutdownHooksAllowRemote,
        flag: "shutdown-hooks-allow-remote",
        env: "KUBEXIT_SHUTDOWN_HOOKS_ALLOW_REMOTE",
        default: Some("false"),
        value_name: "BOOL",
        help: "Allow shutdown hooks to non-loopback hosts (refused by default: these endpoints are local-only by design).",
    },
    Setting {
        id: Id::ShutdownHooksAfter,
        flag: "shutdown-hooks-after",
        env: "KUBEXIT_SHUTDOWN_HOOKS_AFTER",
        default: Some(""),
        value_name: "NAMES",
        help: "Comma list of containers that must have died too (their tombstones, or their free locks, say so) for this container's shutdown hooks to run: the last of them to die runs the hooks (the mains of a pod whose sidecars only a quit endpoint ends).",
    },
    Setting {
        id: Id::ShutdownHooksOn,
        flag: "shutdown-hooks-on",
        env: "KUBEXIT_SHUTDOWN_HOOKS_ON",
        default: Some("exit"),
        value_name: "exit|success",
        help: "When the shutdown hooks run: after any `exit` of the child, or only on `success` (the child and every container of KUBEXIT_SHUTDOWN_HOOKS_AFTER exited 0; use with restartPolicy OnFailure, where a failed main is restarted).",
    },
    Setting {
        id: Id::LogFormat,
        flag: "log-format",
        env: "KUBEXIT_LOG_FORMAT",
        default: Some("text"),
        value_name: "text|json",
        help: "Log format on stderr.",
    },
    Setting {
        id: Id::LogLevel,
        flag: "log-level",
        env: "KUBEXIT_LOG_LEVEL",
        default: Some("info"),
        value_name: "LEVEL",
        help: "Log level: error, warn, info, debug or trace.",
    },
];

// `Id::setting` indexes the table: each setting stands at its id's place.
const _: () = {
    assert!(SETTINGS.len() == 31);
    let mut i = 0;
    while i < SETTINGS.len() {
        assert!(SETTINGS[i].id as usize == i);
        i += 1;
    }
};

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
