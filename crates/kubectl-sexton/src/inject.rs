//! `kubectl-sexton inject` and `uninject`: manifests in, manifests out (stdout, in the
//! input's format), one line per resource on stderr saying what was done and why. The
//! mutation itself is the pure `sexton-inject` crate, shared with the admission webhook;
//! this is its I/O: files, registries, output, exit code.
//!
//! Exit codes: 0 done; 1 a resource was refused (it is written out unchanged, nothing is
//! lost); 2 bad flags or unreadable input (nothing is written).

use std::io::Write;

use clap::{Args, ValueEnum};
use serde_json::Value;
use sexton_inject::{Options, Position, Report, Strategy};

use crate::shared::exit::Exit;
use crate::shared::logging;
use crate::shared::manifest::{Filenames, Format, read_all, write};
use crate::shared::registry::{Looked, RegistryFlags, RegistryOpts, lookup_all};
use crate::shared::runtime::block_on;
use crate::shared::values::version;

#[derive(Args, Debug)]
#[command(
    about = "Make the sidecars of pod templates end with their mains: native sidecars where they work, the in-pod supervisor where they don't",
    long_about = "Reads manifests (Pod, Job, CronJob, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, List; other kinds pass through) and writes them with their sidecars made to end with the main containers. Which containers are sidecars: the template annotation sexton.dev/sidecars, else OpenKruise's markers, else kubexit's KUBEXIT_DEATH_DEPS, else --sidecar. The template annotation sexton.dev/inject (native, wrap, auto, disabled) overrides --strategy."
)]
pub struct InjectFlags {
    #[command(flatten)]
    files: Filenames,
    /// native: init containers with restartPolicy Always; native-wrap: those, ended by the in-pod supervisor with the mains (faster); wrap: the in-pod supervisor; auto: native where it works, else wrap, else the SidecarTerminator's markers
    #[arg(long, value_enum, default_value = "auto")]
    strategy: StrategyArg,
    /// A sidecar's container name, where the template does not say which are; repeatable
    #[arg(long, value_name = "NAME")]
    sidecar: Vec<String>,
    /// Where native sidecars go among existing init containers (first: for sidecars init containers need, such as a mesh proxy)
    #[arg(long, value_enum, default_value = "last")]
    native_position: PositionArg,
    /// The cluster's Kubernetes version (MAJOR.MINOR); below 1.29 auto does not choose native sidecars
    #[arg(long, value_name = "MAJOR.MINOR", value_parser = version)]
    kubernetes_version: Option<(u32, u32)>,
    /// The image of the `sexton install` init container (wrap)
    #[arg(long, value_name = "IMAGE", default_value = concat!("ghcr.io/sexton-dev/sexton:", env!("CARGO_PKG_VERSION")))]
    sexton_image: String,
    #[command(flatten)]
    registry: RegistryFlags,
}

#[derive(Args, Debug)]
#[command(
    about = "Restore manifests injected by `kubectl sexton inject` to what they were",
    mut_arg("filename", |a| a.help("Manifest file, directory or - for stdin; repeatable"))
)]
pub struct UninjectFlags {
    #[command(flatten)]
    files: Filenames,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StrategyArg {
    Native,
    NativeWrap,
    Wrap,
    Auto,
    Disabled,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PositionArg {
    First,
    Last,
}

impl InjectFlags {
    fn options(&self) -> Options {
        Options {
            strategy: match self.strategy {
                StrategyArg::Native => Strategy::Native,
                StrategyArg::NativeWrap => Strategy::NativeWrap,
                StrategyArg::Wrap => Strategy::Wrap,
                StrategyArg::Auto => Strategy::Auto,
                StrategyArg::Disabled => Strategy::Disabled,
            },
            sidecars: self.sidecar.clone(),
            position: match self.native_position {
                PositionArg::First => Position::First,
                PositionArg::Last => Position::Last,
            },
            kubernetes_version: self.kubernetes_version,
            sexton_image: self.sexton_image.clone(),
        }
    }

    fn registry(&self) -> RegistryOpts {
        self.registry.opts(std::time::Duration::from_secs(20))
    }
}

/// `kubectl-sexton inject`: read, look up the images wrap needs, inject, write, report.
pub fn inject(flags: InjectFlags) -> Exit {
    let (mut docs, format) = match read_all(&flags.files.filename) {
        Ok(d) => d,
        Err(e) => return unusable(&e),
    };
    let opts = flags.options();
    let images: Vec<String> = docs
        .iter()
        .flat_map(|d| sexton_inject::entrypoints_needed(d, &opts))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let looked = match look_up(&images, &flags.registry()) {
        Ok(l) => l,
        Err(code) => return code,
    };
    let reports: Vec<Report> = docs
        .iter_mut()
        .flat_map(|d| sexton_inject::inject(d, &opts, &looked))
        .collect();
    finish(&docs, format, &reports)
}

/// `kubectl-sexton uninject`.
pub fn uninject(flags: UninjectFlags) -> Exit {
    let (mut docs, format) = match read_all(&flags.files.filename) {
        Ok(d) => d,
        Err(e) => return unusable(&e),
    };
    let reports: Vec<Report> = docs.iter_mut().flat_map(sexton_inject::uninject).collect();
    finish(&docs, format, &reports)
}

/// Looks the images up (on a runtime of its own: the rest is synchronous).
fn look_up(images: &[String], opts: &RegistryOpts) -> Result<Looked, Exit> {
    if images.is_empty() {
        return Ok(Looked::default());
    }
    match block_on(lookup_all(images, opts)) {
        Ok(looked) => Ok(Looked(looked)),
        Err(e) => Err(unusable(&format!("cannot start the async runtime: {e}"))),
    }
}

/// Writes the documents and the reports; the exit code.
fn finish(docs: &[Value], format: Format, reports: &[Report]) -> Exit {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(write(docs, format).as_bytes())
        .and_then(|()| stdout.flush())
    {
        logging::stderr_line(&format!("kubectl-sexton: writing the output: {e}"));
        return Exit::Unusable;
    }
    for r in reports {
        logging::stderr_line(&r.to_string());
    }
    if reports.iter().any(|r| r.outcome.is_refused()) {
        Exit::Failed
    } else {
        Exit::Ok
    }
}

fn unusable(e: &dyn std::fmt::Display) -> Exit {
    logging::stderr_line(&format!("kubectl-sexton: {e}"));
    Exit::Unusable
}
