//! `kubectl-sexton`: sexton's cluster side, one binary that is also a kubectl plugin
//! (`kubectl sexton ...` finds it on the PATH). Subcommands: `controller` (the
//! SidecarTerminator and EphemeralJob controllers) and `crd` (the EphemeralJob CRD).

mod controller;
mod telemetry;

use std::ffi::OsString;

const USAGE: &str = "usage: kubectl-sexton controller [FLAGS]   run the SidecarTerminator and EphemeralJob controllers (--help for flags)
       kubectl-sexton crd                  print the EphemeralJob CustomResourceDefinition (YAML)
       kubectl-sexton --version";

fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    let code = match args.get(1).and_then(|a| a.to_str()) {
        Some("controller") => controller::main(&args[1..]),
        Some("crd") => controller::print_crd(),
        Some("--version" | "-V") => telemetry::stdout_line(&format!("kubectl-sexton {}", env!("CARGO_PKG_VERSION"))),
        Some("--help" | "-h" | "help") => telemetry::stdout_line(USAGE),
        Some(other) => {
            telemetry::stderr_line(&format!("kubectl-sexton: unknown command {other:?}\n{USAGE}"));
            2
        }
        None => {
            telemetry::stderr_line(USAGE);
            2
        }
    };
    std::process::exit(code);
}
