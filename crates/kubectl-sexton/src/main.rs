//! `kubectl-sexton`: sexton's cluster side, one binary that is also a kubectl plugin
//! (`kubectl sexton ...` finds it on the PATH).

mod controller;
mod doctor;
mod inject;
mod results;
mod shared;
mod version;
mod webhook;

use clap::{Parser, Subcommand};

use shared::ephemeraljob;
use shared::exit::Exit;
use shared::logging;

#[derive(Parser)]
#[command(
    name = "kubectl-sexton",
    version,
    about = "sexton's cluster side: inject sidecar handling into manifests, and the SidecarTerminator and EphemeralJob controllers (also a kubectl plugin: `kubectl sexton ...`)",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Controller(Box<controller::flags::Flags>),
    Inject(Box<inject::InjectFlags>),
    Uninject(inject::UninjectFlags),
    Webhook(Box<webhook::WebhookFlags>),
    Doctor(Box<doctor::DoctorFlags>),
    /// EphemeralJobs: `kubectl sexton ejob results NAME`
    #[command(subcommand)]
    Ejob(results::EjobCommand),
    /// Print the EphemeralJob CustomResourceDefinition (YAML)
    Crd,
    Version(version::VersionFlags),
}

fn main() {
    // Usage errors exit 2 and --help/--version 0, from clap; every other code is an `Exit`.
    let exit = match Cli::parse().command {
        Command::Controller(flags) => controller::main(*flags),
        Command::Inject(flags) => inject::inject(*flags),
        Command::Uninject(flags) => inject::uninject(flags),
        Command::Webhook(flags) => webhook::main(*flags),
        Command::Doctor(flags) => doctor::main(*flags),
        Command::Ejob(cmd) => results::main(cmd),
        Command::Crd => {
            logging::stdout_line(ephemeraljob::crd_yaml().trim_end());
            Exit::Ok
        }
        Command::Version(flags) => version::main(flags),
    };
    std::process::exit(exit.code());
}
