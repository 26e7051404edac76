//! Controllers at scale (issue 16). A benchmark, not a timed test: `bench/scale/run.sh` runs it
//! against a test API server of its own and writes BENCHMARKS.md's "Controllers at scale".
//!
//! ```text
//! scale [plan] [--json F] [--md F]     the EphemeralJob's pure planning function, in memory
//!                                      (what `cargo bench --bench scale` runs; no cluster)
//! scale cluster --kubeconfig F --sexton BIN [--kruise BIN] [--sizes 1000,10000] ...
//!                                      the controllers as processes against the API server
//! ```
//!
//! The cluster part plays the kubelet: pods are created through the API, bound to a node
//! that does not exist (`spec.nodeName`), and their status is written through the status
//! subresource. The controllers under test are real processes (the release binary of
//! `kubectl-sexton controller`, and OpenKruise's manager as the anchor when it was built),
//! each measured on its own against the same pods. See `cluster.rs` for the sequence and
//! `window.rs` for what the reaction latency is, exactly.

// The planning function and the resource it plans for, compiled into this benchmark from
// the controller's own source (kubectl-sexton is a binary crate: there is no library to
// link against). Only `plan` and what it needs are used here.
#[allow(dead_code)]
#[allow(unused_imports)]
#[path = "../../src/shared/ephemeraljob/mod.rs"]
mod ephemeraljob;
#[allow(dead_code)]
#[allow(unused_imports)]
#[path = "../../src/controller/ejob/plan.rs"]
mod plan;
#[allow(dead_code)]
#[allow(unused_imports)]
#[path = "../../src/shared/pod.rs"]
mod pod;

mod apiserver;
mod cluster;
mod contender;
mod ejob_e2e;
mod error;
mod memory;
mod plan_bench;
mod pods;
mod procs;
mod report;
mod results;
mod stats;
mod window;

/// The paths the binary's files use, for the files compiled in here.
mod shared {
    pub(crate) use crate::{ephemeraljob, pod};
}

use std::process::ExitCode;

/// Counts the heap's live bytes (for `scale memory`; a relaxed atomic add per call elsewhere).
#[global_allocator]
static ALLOC: memory::Counting = memory::Counting;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "sexton's controllers at scale (bench/scale/run.sh)")]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// (passed by `cargo bench`; ignored)
    #[arg(long = "bench", hide = true)]
    _bench: bool,
}

#[derive(Subcommand)]
enum Command {
    /// The pure planning function of the EphemeralJob controller, in memory.
    Plan(Box<plan_bench::Opts>),
    /// Where a cached pod's memory goes (one pod from the API server, decoded n times).
    Memory(Box<memory::Opts>),
    /// Everything against a running test API server.
    Cluster(Box<cluster::Opts>),
}

fn main() -> ExitCode {
    // `cargo bench` appends `--bench` after the arguments given; drop it wherever it is.
    let args: Vec<String> = std::env::args().filter(|a| a != "--bench").collect();
    let cli = Cli::parse_from(args);
    let result = match cli.command {
        None => plan_bench::run(&plan_bench::Opts::default()),
        Some(Command::Plan(o)) => plan_bench::run(&o),
        Some(Command::Memory(o)) => memory::run(&o),
        Some(Command::Cluster(o)) => cluster::run(*o),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale: error: {e}");
            ExitCode::FAILURE
        }
    }
}
