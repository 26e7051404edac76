//! `kubectl-sexton inject` and `uninject`: manifests in, manifests out (stdout, in the
//! input's format), one line per resource on stderr saying what was done and why. The
//! mutation itself is the pure `sexton-inject` crate, shared with the admission webhook;
//! this is its I/O: files, registries, output, exit code.
//!
//! Exit codes: 0 done; 1 a resource was refused; 2 bad flags or unreadable input (nothing
//! is written).
//!
//! A refused resource is not written to stdout (unless `--include-refused`): in
//! `inject -f job.yaml | kubectl apply -f -` the exit code 1 is lost in the pipe, and a Job
//! applied unchanged would hang on its sidecars. The other resources are written; with none
//! left, stdout is empty and `kubectl apply` fails ("no objects passed to apply").

use std::io::Write;

use clap::{Args, ValueEnum};
use serde_json::Value;
use sexton_inject::{BinarySource, Options, Position, Report, Runtimes, Strategy};

use crate::shared::catalogue::CatalogueFlags;
use crate::shared::exit::Exit;
use crate::shared::logging;
use crate::shared::manifest::{Filenames, Format, ManifestOutput, read_all, write};
use crate::shared::registry::{Looked, RegistryFlags, RegistryOpts, lookup_all};
use crate::shared::runtime::block_on;
use crate::shared::values::{runtime, version};

#[derive(Args, Debug)]
#[command(
    about = "Make the sidecars of pod templates end with their mains: native sidecars where they work, the in-pod supervisor where they don't",
    long_about = "Reads manifests (Pod, Job, CronJob, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, List; other kinds pass through) and writes them with their sidecars made to end with the main containers. Which containers are sidecars: the template annotation sexton.dev/sidecars, else OpenKruise's markers, else kubexit's KUBEXIT_DEATH_DEPS, else --sidecar; and, in run-to-completion templates, other vendors' injected sidecars that the template's markers prove (Istio's istio-proxy with sidecar.istio.io/status, ...: the catalogue, docs/webhook.md). The template annotation sexton.dev/inject (native, native-wrap, wrap, quit, auto, disabled) overrides --strategy."
)]
pub struct InjectFlags {
    #[command(flatten)]
    files: Filenames,
    /// native: init containers with restartPolicy Always; native-wrap: those, ended by the in-pod supervisor with the mains (faster); wrap: the in-pod supervisor; quit: the mains' supervisor calls vendors' sidecars' quit endpoints; auto: native where it works, else wrap, else quit (vendors' sidecars), else the SidecarTerminator's markers
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
    /// The sexton image (wrap, native-wrap): mounted as an image volume, or run by the `sexton install` init container that copies the binary
    #[arg(long, value_name = "IMAGE", default_value = concat!("ghcr.io/sexton-dev/sexton:", env!("CARGO_PKG_VERSION")))]
    sexton_image: String,
    /// Where wrap and native-wrap get the supervisor's binary: image-volume (the sexton image mounted read-only; Kubernetes 1.35+ with containerd 2.1+ or CRI-O 1.31+), copy (an init container copies it into an emptyDir: anywhere), auto (image-volume where --kubernetes-version and --container-runtime say it works, else copy)
    #[arg(long, value_enum, default_value = "auto")]
    binary_source: BinarySourceArg,
    /// The container runtime of the nodes the pods may land on, as nodes report it (containerd://2.1.4, cri-o://1.33.2; kubectl get nodes -o wide); repeatable
    #[arg(long, value_name = "RUNTIME", value_parser = runtime)]
    container_runtime: Vec<String>,
    #[command(flatten)]
    catalogue: CatalogueFlags,
    #[command(flatten)]
    registry: RegistryFlags,
    #[command(flatten)]
    refused: RefusedFlags,
    #[command(flatten)]
    output: ManifestOutput,
}

#[derive(Args, Debug)]
#[command(
    about = "Restore manifests injected by `kubectl sexton inject` to what they were",
    mut_arg("filename", |a| a.help("Manifest file, directory or - for stdin; repeatable"))
)]
pub struct UninjectFlags {
    #[command(flatten)]
    files: Filenames,
    #[command(flatten)]
    refused: RefusedFlags,
    #[command(flatten)]
    output: ManifestOutput,
}

/// What becomes of a refused resource.
#[derive(Args, Debug)]
pub struct RefusedFlags {
    /// Also write refused resources, unchanged, to stdout (by default they are left out, so that `... | kubectl apply -f -` cannot apply a Job whose sidecars would keep it running)
    #[arg(long)]
    include_refused: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StrategyArg {
    Native,
    NativeWrap,
    Wrap,
    Quit,
    Auto,
    Disabled,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BinarySourceArg {
    Auto,
    ImageVolume,
    Copy,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PositionArg {
    First,
    Last,
}

impl InjectFlags {
    fn options(&self, catalogue: sexton_inject::Catalogue) -> Options {
        Options {
            strategy: match self.strategy {
                StrategyArg::Native => Strategy::Native,
                StrategyArg::NativeWrap => Strategy::NativeWrap,
                StrategyArg::Wrap => Strategy::Wrap,
                StrategyArg::Quit => Strategy::Quit,
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
            catalogue: std::sync::Arc::new(catalogue),
            binary_source: match self.binary_source {
                BinarySourceArg::Auto => BinarySource::Auto,
                BinarySourceArg::ImageVolume => BinarySource::ImageVolume,
                BinarySourceArg::Copy => BinarySource::Copy,
            },
            runtimes: match self.container_runtime.is_empty() {
                true => Runtimes::Unknown,
                false => Runtimes::Given(self.container_runtime.clone()),
            },
            ..Options::default()
        }
    }

    fn registry(&self) -> RegistryOpts {
        self.registry.opts(std::time::Duration::from_secs(20))
    }
}

/// `kubectl-sexton inject`: read, look up the images wrap needs, inject, write, report.
pub fn inject(flags: InjectFlags) -> Exit {
    let (docs, format) = match read_all(&flags.files.filename) {
        Ok(d) => d,
        Err(e) => return unusable(&e),
    };
    let catalogue = match flags.catalogue.load() {
        Ok(c) => c,
        Err(e) => return unusable(&e),
    };
    let opts = flags.options(catalogue);
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
    let mut edit = |d: &mut Value| sexton_inject::inject(d, &opts, &looked);
    let (docs, reports) = apply(docs, &mut edit, &flags.refused);
    let format = flags.output.output.unwrap_or(format);
    finish(&docs, format, &reports, flags.refused.include_refused)
}

/// `kubectl-sexton uninject`.
pub fn uninject(flags: UninjectFlags) -> Exit {
    let (docs, format) = match read_all(&flags.files.filename) {
        Ok(d) => d,
        Err(e) => return unusable(&e),
    };
    let (docs, reports) = apply(docs, &mut sexton_inject::uninject, &flags.refused);
    let format = flags.output.output.unwrap_or(format);
    finish(&docs, format, &reports, flags.refused.include_refused)
}

/// Edits every resource (each item of a List on its own), and keeps those to write: all
/// but the refused ones, unless `--include-refused`.
fn apply(
    docs: Vec<Value>,
    edit: &mut dyn FnMut(&mut Value) -> Vec<Report>,
    flags: &RefusedFlags,
) -> (Vec<Value>, Vec<Report>) {
    let mut reports = vec![];
    let kept = docs
        .into_iter()
        .filter_map(|d| kept(d, edit, flags.include_refused, &mut reports))
        .collect();
    (kept, reports)
}

/// `doc` edited, or `None` if it was refused (a List: the List of its items not refused,
/// `None` if every one was).
fn kept(
    mut doc: Value,
    edit: &mut dyn FnMut(&mut Value) -> Vec<Report>,
    include_refused: bool,
    reports: &mut Vec<Report>,
) -> Option<Value> {
    let is_list = doc["kind"].as_str().is_some_and(|k| k.ends_with("List"));
    // (`get_mut`: indexing a Value mutably would add `items: null` to every object)
    if let (true, Some(items)) = (is_list, doc.get_mut("items").and_then(Value::as_array_mut)) {
        if items.is_empty() {
            return Some(doc);
        }
        let left: Vec<Value> = std::mem::take(items)
            .into_iter()
            .filter_map(|item| kept(item, edit, include_refused, reports))
            .collect();
        if left.is_empty() {
            return None;
        }
        doc["items"] = Value::Array(left);
        return Some(doc);
    }
    let own = edit(&mut doc);
    let refused = own.iter().any(|r| r.outcome.is_refused());
    reports.extend(own);
    (!refused || include_refused).then_some(doc)
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
fn finish(docs: &[Value], format: Format, reports: &[Report], include_refused: bool) -> Exit {
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
    let refused: Vec<&str> = reports
        .iter()
        .filter(|r| r.outcome.is_refused())
        .map(|r| r.resource.as_str())
        .collect();
    if refused.is_empty() {
        return Exit::Ok;
    }
    logging::stderr_line(&refused_line(&refused, docs.is_empty(), include_refused));
    Exit::Failed
}

/// What became of the refused resources, on stderr after their reports.
fn refused_line(refused: &[&str], nothing_written: bool, include_refused: bool) -> String {
    let names = refused.join(", ");
    if include_refused {
        return format!("kubectl-sexton: refused, written unchanged (--include-refused): {names}");
    }
    let written = if nothing_written {
        "; nothing else to write, so stdout is empty"
    } else {
        ""
    };
    format!(
        "kubectl-sexton: refused, not written to stdout (--include-refused writes them unchanged): {names}{written}"
    )
}

fn unusable(e: &dyn std::fmt::Display) -> Exit {
    logging::stderr_line(&format!("kubectl-sexton: {e}"));
    Exit::Unusable
}
