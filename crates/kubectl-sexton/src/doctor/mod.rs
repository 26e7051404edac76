//! `kubectl sexton doctor`: what keeps Jobs with sidecars from ending, found in the cluster
//! (or in manifests with `-f`), each finding with the command that fixes it. Read-only:
//! the one write is a server-side dry run, which the API server does not persist.
//!
//! This is the glue: flags, the client, which checks run, output and exit code. Each
//! family of checks is a file (`cluster.rs`, `components.rs`, `admission.rs`, `chain.rs`,
//! `nodes.rs`, `image_volumes.rs`, `injected.rs` with `ended.rs`, `stuck_pods.rs`,
//! `safety_net.rs`, `manifests.rs`); what
//! several read is listed once (`webhooks.rs`, `pods.rs`); `report.rs` is the pure report.

mod access;
mod admission;
mod chain;
mod cluster;
mod components;
mod ctx;
mod ended;
mod found;
mod image_volumes;
mod injected;
mod manifests;
mod nodes;
mod pods;
mod reduced;
mod report;
mod safety_net;
mod stuck_pods;
mod webhooks;
mod workloads;

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;

use crate::shared::catalogue::{CatalogueFileError, CatalogueFlags};
use crate::shared::cli::{
    NamespaceFlag, ReportFormat, ReportOutput, SextonNamespaceFlag, structured,
};
use crate::shared::exit::Exit;
use crate::shared::kube_client::{self, KubeFlags, namespace_or_default};
use crate::shared::logging;
use crate::shared::runtime::block_on;
use ctx::{Ctx, Namespaces};
use report::{EXIT_CANNOT_RUN, Report};
use sexton_inject::Catalogue;

#[derive(Args, Debug)]
#[command(
    about = "Find stuck Jobs, vendors' injected sidecars nothing ends, stripped native sidecars and legacy sidecar patterns, and the command that fixes each",
    long_about = "Checks the cluster (API server version, whether native sidecars survive admission, the mutating webhooks in the order the API server calls them, virtual-kubelet nodes, nodes whose runtime mounts image volumes empty and pods that failed on it, the sidecars other vendors' webhooks injected into Jobs' pods and whether they will be ended, pods stuck with their mains done, the pods whose sidecars the controller's safety net ended because admission missed them and why, sexton's own components, found by their labels whatever the Helm release is named) or, with -f, manifests (sidecars nothing ends, kubexit wrappers, OpenKruise markers, mesh quit-endpoint scripts, sleep-until-file loops). --recognise and --sidecar-catalogue are the webhook's: pass the same. Read-only: the admission probe is a server-side dry run. Exit 0: nothing wrong; 1: a warning or an error was found; 2: the doctor could not run."
)]
pub struct DoctorFlags {
    #[command(flatten)]
    kube: KubeFlags,
    #[command(flatten)]
    namespace: NamespaceFlag,
    /// Check every namespace
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    all_namespaces: bool,
    /// Check these manifests instead of the cluster: file, directory (its .yaml, .yml and .json files) or - for stdin; repeatable
    #[arg(short = 'f', long = "filename", value_name = "FILE|DIR|-")]
    filename: Vec<String>,
    #[command(flatten)]
    output: ReportOutput,
    /// A pod whose main containers all ended longer ago than this while it still runs is stuck (Go duration syntax)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    stuck_after: Duration,
    /// Warn when a certificate of sexton's webhook expires within this many days
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    cert_days: u32,
    #[command(flatten)]
    sexton: SextonNamespaceFlag,
    #[command(flatten)]
    catalogue: CatalogueFlags,
}

fn duration(s: &str) -> Result<Duration, sexton_core::duration::DurationError> {
    sexton_core::duration::parse_go_duration(s)
}

/// Why the doctor could not run at all (exit 2).
#[derive(Debug, thiserror::Error)]
enum CannotRun {
    #[error(transparent)]
    Client(#[from] kube_client::ClientError),
    #[error(transparent)]
    Manifests(#[from] crate::shared::manifest::ReadError),
    #[error(transparent)]
    Catalogue(#[from] CatalogueFileError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

pub fn main(flags: DoctorFlags) -> Exit {
    match report(&flags) {
        Ok(report) => {
            let text = match flags.output.output {
                ReportFormat::Json => report.json(),
                ReportFormat::Yaml => structured(&report, true),
                ReportFormat::Text => report.text(colour()),
            };
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            report.exit_code()
        }
        Err(e) => {
            logging::stderr_line(&format!("kubectl-sexton doctor: {e}"));
            EXIT_CANNOT_RUN
        }
    }
}

/// Colour only on a terminal, and not if NO_COLOR is set (https://no-color.org).
fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn report(flags: &DoctorFlags) -> Result<Report, CannotRun> {
    let catalogue = flags.catalogue.load()?;
    if !flags.filename.is_empty() {
        let files = crate::shared::manifest::read_each(&flags.filename)?;
        return Ok(Report::new(vec![manifests::check(&files, &catalogue)]));
    }
    block_on(cluster_report(flags, catalogue)).map_err(CannotRun::Runtime)?
}

/// Every cluster check, once the API server has answered at all.
async fn cluster_report(flags: &DoctorFlags, catalogue: Catalogue) -> Result<Report, CannotRun> {
    let (client, version) = flags.kube.connect().await?;
    let namespaces = if flags.all_namespaces {
        Namespaces::All
    } else {
        Namespaces::One(namespace_or_default(
            flags.namespace.namespace.as_deref(),
            &client,
        ))
    };
    let ctx = Ctx::new(
        client,
        namespaces,
        flags.stuck_after,
        flags.cert_days,
        flags.sexton.sexton_namespace.clone(),
        catalogue,
    );
    let (components, admission, chain, nodes, image_volumes, injected, stuck, net) = tokio::join!(
        components::check(&ctx),
        admission::check(&ctx),
        chain::check(&ctx),
        nodes::check(&ctx),
        image_volumes::check(&ctx),
        injected::check(&ctx),
        stuck_pods::check(&ctx),
        safety_net::check(&ctx),
    );
    Ok(Report::new(vec![
        cluster::check(&version),
        components,
        admission,
        chain,
        nodes,
        image_volumes,
        injected,
        stuck,
        net,
    ]))
}
