//! Command line: `sexton [FLAGS] [--] COMMAND [ARGS...]` (kubexit style `sexton CMD ARGS`
//! too) and `sexton install DIR`. Every setting is a flag mirrored by an env var; flags win.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, Command, value_parser};

use crate::config::{Config, Origin, Raw, SETTINGS};
use crate::logging::{stderr_line, stdout_line};

const ABOUT: &str = "Supervises a container's entrypoint in a Kubernetes pod: records its life in a \
shared graveyard directory, stops it when its death dependencies die, starts it when its birth \
dependencies are ready, and behaves as a proper PID 1 (signal forwarding, zombie reaping, exit codes).";

const AFTER_HELP: &str = "Other commands:
  sexton install DIR    copy this executable to DIR/sexton (mode 0755, atomically), for an init container
  sexton quick-exit ... exit 0 at once, whatever the arguments (the quick-exit image's entrypoint)
  sexton controller     the companion controller (built with --features controller; see --help there)

Exit codes: the child's code; 128+N if it was killed by signal N; 0 if it was stopped because a \
death dependency died (see --dep-exit-code); 2 configuration error; 126 command not executable; \
127 command not found; 1 birth dependencies not ready in time.";

pub fn main(args: Vec<OsString>) -> i32 {
    match args.get(1).and_then(|a| a.to_str()) {
        Some("install") => install(&args),
        Some("quick-exit") => quick_exit(),
        Some("controller") => controller(&args[1..]),
        _ => supervise(args),
    }
}

fn supervisor_command() -> Command {
    let mut cmd = Command::new("sexton")
        .version(env!("CARGO_PKG_VERSION"))
        .about(ABOUT)
        .override_usage("sexton [FLAGS] [--] COMMAND [ARGS...]\n       sexton install DIR\n       sexton quick-exit [ANY...]\n       sexton controller [FLAGS]")
        .after_help(AFTER_HELP)
        .disable_help_subcommand(true);
    for s in SETTINGS {
        let mut arg = Arg::new(s.id)
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
    let libraries = crate::logging::in_pod_libraries(cfg.log_level);
    crate::logging::init(cfg.log_format, cfg.log_level, libraries);
    let span = tracing::info_span!("sexton", container = %cfg.name);
    let _enter = span.enter();
    match crate::supervisor::run(cfg) {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e}");
            crate::logging::flush();
            stderr_line(&format!("sexton: {e}"));
            2
        }
    }
}

/// The entrypoint of the quick-exit image: the SidecarTerminator swaps a sidecar's image to
/// it, the kubelet restarts the container with the sidecar's own arguments appended, and it
/// must end with 0 whatever they are.
fn quick_exit() -> i32 {
    stderr_line(
        "sexton quick-exit: this sidecar was ended by the sexton controller (its image was swapped because the pod's main containers are done); exiting 0",
    );
    0
}

#[cfg(feature = "controller")]
fn controller(args: &[OsString]) -> i32 {
    crate::controller::main(args)
}

#[cfg(not(feature = "controller"))]
fn controller(_: &[OsString]) -> i32 {
    stderr_line(
        "sexton controller: this sexton was built without the `controller` feature (it keeps the controller's dependencies out of the in-pod binary); build with `cargo build --release --features controller`, or use the sexton controller image",
    );
    2
}

fn install(args: &[OsString]) -> i32 {
    let cmd = Command::new("sexton install")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Copy this executable into DIR (an emptyDir shared with the app containers) as DIR/sexton, atomically, mode 0755.")
        .arg(Arg::new("dir").value_name("DIR").required(true).value_parser(value_parser!(PathBuf)));
    let m = match cmd.try_get_matches_from(&args[1..]) {
        Ok(m) => m,
        Err(e) => return clap_error(e),
    };
    let dir = m.get_one::<PathBuf>("dir").expect("required");
    if let Err(e) = std::fs::create_dir_all(dir) {
        stderr_line(&format!("sexton install: cannot create {}: {e}", dir.display()));
        return 1;
    }
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            stderr_line(&format!(
                "sexton install: cannot find my own executable (is /proc mounted?): {e}"
            ));
            return 1;
        }
    };
    match crate::fsutil::atomic_copy(&exe, dir, "sexton", 0o755) {
        Ok(n) => {
            stdout_line(&format!(
                "sexton install: installed {} ({n} bytes)",
                dir.join("sexton").display()
            ));
            0
        }
        Err(e) => {
            stderr_line(&format!("sexton install: cannot install into {}: {e}", dir.display()));
            1
        }
    }
}
