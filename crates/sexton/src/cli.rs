//! Command line: `sexton [FLAGS] [--] COMMAND [ARGS...]` (kubexit style `sexton CMD ARGS`
//! too) and `sexton install DIR`. Every setting is a flag mirrored by an env var; flags win.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, Command, value_parser};

use crate::logging::stderr_line;
use sexton_core::config::Config;
use sexton_core::settings::{Origin, Raw, SETTINGS};

const ABOUT: &str = "Supervises a container's entrypoint in a Kubernetes pod: records its life in a \
shared graveyard directory, stops it when its death dependencies die, starts it when its birth \
dependencies are ready, and behaves as a proper PID 1 (signal forwarding, zombie reaping, exit codes).";

const AFTER_HELP: &str = "Other commands:
  sexton install DIR    copy this executable to DIR/sexton (mode 0755, atomically), for an init container
  sexton quick-exit ... exit 0 at once, whatever the arguments (the quick-exit image's entrypoint)

Exit codes: the child's code; 128+N if it was killed by signal N; 0 if it was stopped because a \
death dependency died (see --dep-exit-code); 2 configuration error; 126 command not executable; \
127 command not found; 1 birth dependencies not ready in time.";

/// `sexton install`, `sexton quick-exit`, or the supervisor (kubexit style: anything else).
pub fn main(args: Vec<OsString>) -> i32 {
    match args.get(1).and_then(|a| a.to_str()) {
        Some("install") => install(&args),
        Some("quick-exit") => crate::install::quick_exit(),
        _ => supervise(args),
    }
}

fn supervisor_command() -> Command {
    let mut cmd = Command::new("sexton")
        .version(env!("CARGO_PKG_VERSION"))
        .about(ABOUT)
        .override_usage("sexton [FLAGS] [--] COMMAND [ARGS...]\n       sexton install DIR\n       sexton quick-exit [ANY...]")
        .after_help(AFTER_HELP)
        .disable_help_subcommand(true);
    for s in SETTINGS {
        let mut arg = Arg::new(s.id.as_str())
            .long(s.flag)
            .env(s.env)
            .value_name(s.value_name)
            .help(s.help)
            .action(ArgAction::Set);
        if let Some(d) = s.default.filter(|d| !d.is_empty()) {
            arg = arg.default_value(d);
        }
        cmd = cmd.arg(arg);
    }
    cmd.arg(
        Arg::new("command")
            .value_name("COMMAND")
            .help("The command to supervise and its arguments")
            .num_args(1..)
            .trailing_var_arg(true)
            .value_parser(value_parser!(OsString)),
    )
}

/// `sexton install DIR`: the arguments read here, the copy made by `install.rs`.
fn install(args: &[OsString]) -> i32 {
    let cmd = Command::new("sexton install")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Copy this executable into DIR (an emptyDir shared with the app containers) as DIR/sexton, atomically, mode 0755.")
        .arg(Arg::new("dir").value_name("DIR").required(true).value_parser(value_parser!(PathBuf)));
    match cmd.try_get_matches_from(&args[1..]) {
        Ok(m) => crate::install::install(m.get_one::<PathBuf>("dir").expect("required")),
        Err(e) => clap_error(e),
    }
}

fn clap_error(e: clap::Error) -> i32 {
    let _ = e.print(); // --help to a closed pipe is not an error worth an abort
    e.exit_code()
}

fn supervise(args: Vec<OsString>) -> i32 {
    let matches = match supervisor_command().try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => return clap_error(e),
    };
    let lookup = |id: &str| -> Option<Raw> {
        let value = matches.get_one::<String>(id)?.clone();
        let origin = match matches.value_source(id) {
            Some(ValueSource::CommandLine) => Origin::Flag,
            Some(ValueSource::EnvVariable) => Origin::Env,
            _ => Origin::Default,
        };
        Some(Raw { value, origin })
    };
    let command: Vec<OsString> = matches
        .get_many::<OsString>("command")
        .map(|v| v.cloned().collect())
        .unwrap_or_default();
    let cfg = match Config::from_lookup(lookup, command) {
        Ok(c) => c,
        Err(e) => {
            stderr_line(&format!("sexton: {e}"));
            return 2;
        }
    };
    // Signals first, before any thread and before the logging set-up, which blocks every
    // signal for a moment: a SIGTERM arriving then would be unblocked again by it and, for
    // the init of a PID namespace without a handler, dropped.
    let signals = match crate::sigfd::Signals::block() {
        Ok(s) => s,
        Err(e) => {
            stderr_line(&format!("sexton: {e}"));
            return 2;
        }
    };
    let libraries = crate::logging::in_pod_libraries(cfg.log_level);
    crate::logging::init(cfg.log_format, cfg.log_level, libraries);
    let span = tracing::info_span!("sexton", container = %cfg.name);
    let _enter = span.enter();
    match crate::supervisor::run(cfg, signals) {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e}");
            crate::logging::flush();
            stderr_line(&format!("sexton: {e}"));
            2
        }
    }
}
