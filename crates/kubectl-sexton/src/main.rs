//! `kubectl-sexton`: sexton's cluster side, one binary that is also a kubectl plugin
//! (`kubectl sexton ...` finds it on the PATH).

mod completion;
mod controller;
mod doctor;
mod inject;
mod results;
mod shared;
mod version;
mod webhook;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use shared::cli::invoked_by_kubectl;
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

/// The user's commands first, in the order they are met; the server commands, which the
/// chart runs in the cluster, hidden from that list and shown under their own heading
/// ([`command`]).
#[derive(Subcommand)]
enum Command {
    Inject(Box<inject::InjectFlags>),
    Uninject(inject::UninjectFlags),
    Doctor(Box<doctor::DoctorFlags>),
    /// EphemeralJobs: `kubectl sexton ejob results NAME`
    #[command(subcommand)]
    Ejob(results::EjobCommand),
    Version(version::VersionFlags),
    /// Print the EphemeralJob CustomResourceDefinition (YAML)
    Crd,
    Completion(completion::CompletionFlags),
    #[command(hide = true)]
    Controller(Box<controller::flags::Flags>),
    #[command(hide = true)]
    Webhook(Box<webhook::WebhookFlags>),
}

fn main() {
    let mut args = std::env::args();
    let argv0 = args.next().unwrap_or_default();
    if invoked_as(&argv0) == completion::KUBECTL_COMPLETE {
        let words: Vec<String> = args.collect();
        std::process::exit(completion::kubectl_complete(command(), &words).code());
    }
    // Usage errors exit 2 and --help/--version 0, from clap; every other code is an `Exit`.
    let matches = command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let exit = match cli.command {
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
        Command::Completion(flags) => completion::main(flags, command()),
    };
    std::process::exit(exit.code());
}

/// The command tree: the server commands under their own heading, and usage that reads
/// `kubectl sexton ...` when kubectl runs the plugin.
fn command() -> clap::Command {
    let cmd = Cli::command();
    let servers: String = cmd
        .get_subcommands()
        .filter(|c| c.is_hide_set())
        .map(|c| {
            let about = c.get_about().map(ToString::to_string).unwrap_or_default();
            format!("  {:<11} {about}\n", c.get_name())
        })
        .collect();
    let cmd = cmd.after_help(format!(
        "Server commands (the chart runs them in the cluster):\n{}",
        servers.trim_end()
    ));
    if invoked_by_kubectl() {
        cmd.bin_name("kubectl sexton")
    } else {
        cmd
    }
}

/// The file name this binary was run as, without a directory or `.exe`.
fn invoked_as(argv0: &str) -> &str {
    let name = argv0.rsplit(['/', '\\']).next().unwrap_or(argv0);
    name.strip_suffix(".exe").unwrap_or(name)
}
