//! `kubectl-sexton inject` and `uninject`: manifests in, manifests out (stdout, in the
//! input's format), one line per resource on stderr saying what was done and why. The
//! mutation itself is the pure `sexton-inject` crate, shared with the admission webhook;
//! this is its I/O: files, registries, output, exit code.
//!
//! Exit codes: 0 done; 1 a resource was refused (it is written out unchanged, nothing is
//! lost); 2 bad flags or unreadable input (nothing is written).

pub(crate) mod manifest;
pub(crate) mod registry;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::Value;
use sexton_inject::{ImageCommand, Options, Position, Report, Resolve, Strategy, Unresolved};

use crate::shared::logging;
use manifest::{Format, read_all, write};
use registry::{Platform, RegistryOpts, lookup_all};

const REFUSED: i32 = 1;
const UNUSABLE: i32 = 2;

#[derive(Args, Debug)]
#[command(
    about = "Make the sidecars of pod templates end with their mains: native sidecars where they work, the in-pod supervisor where they don't",
    long_about = "Reads manifests (Pod, Job, CronJob, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, List; other kinds pass through) and writes them with their sidecars made to end with the main containers. Which containers are sidecars: the template annotation sexton.dev/sidecars, else OpenKruise's markers, else kubexit's KUBEXIT_DEATH_DEPS, else --sidecar. The template annotation sexton.dev/inject (native, wrap, auto, disabled) overrides --strategy."
)]
pub struct InjectFlags {
    /// Manifest file, directory (its .yaml, .yml and .json files) or - for stdin; repeatable
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE|DIR|-",
        required = true
    )]
    filename: Vec<String>,
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
    #[arg(long, value_name = "IMAGE", default_value = concat!("sexton:", env!("CARGO_PKG_VERSION")))]
    sexton_image: String,
    #[command(flatten)]
    registry: RegistryFlags,
}

/// How wrap looks up images' ENTRYPOINT and CMD.
#[derive(Args, Debug)]
pub(crate) struct RegistryFlags {
    /// The platform whose image is read from multi-platform images, that of the nodes the pods run on (OS/ARCH[/VARIANT])
    #[arg(long, value_name = "OS/ARCH", default_value = "linux/amd64", value_parser = Platform::parse)]
    platform: Platform,
    /// A registry reached over plain HTTP (HOST[:PORT]); repeatable
    #[arg(long, value_name = "HOST")]
    insecure_registry: Vec<String>,
    /// Registry credentials (a docker config.json; default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json, if present)
    #[arg(long, value_name = "FILE")]
    registry_config: Option<PathBuf>,
    /// The longest one image's lookup may take (connection, authentication, manifests, config)
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = registry::timeout)]
    registry_timeout: Duration,
}

#[derive(Args, Debug)]
#[command(about = "Restore manifests injected by `kubectl sexton inject` to what they were")]
pub struct UninjectFlags {
    /// Manifest file, directory or - for stdin; repeatable
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE|DIR|-",
        required = true
    )]
    filename: Vec<String>,
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

#[derive(Debug, thiserror::Error)]
#[error("expected MAJOR.MINOR, such as 1.29")]
pub(crate) struct BadVersion;

/// `1.29`, `v1.29.3`, `1.29+` (as some providers report it).
pub(crate) fn version(s: &str) -> Result<(u32, u32), BadVersion> {
    let s = s.trim().trim_start_matches('v');
    let mut parts = s.split('.');
    let number = |p: Option<&str>| {
        let digits: String = p?.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    match (number(parts.next()), number(parts.next())) {
        (Some(major), Some(minor)) => Ok((major, minor)),
        _ => Err(BadVersion),
    }
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
        self.registry.opts()
    }
}

impl RegistryFlags {
    pub(crate) fn opts(&self) -> RegistryOpts {
        RegistryOpts {
            platform: self.platform.clone(),
            insecure: self.insecure_registry.clone(),
            docker_config: self.registry_config.clone(),
            timeout: self.registry_timeout,
            pull_secrets: vec![],
        }
    }
}

/// Images' commands as looked up beforehand (the mutation itself does no I/O).
struct Looked(BTreeMap<String, Result<ImageCommand, Unresolved>>);

impl Resolve for Looked {
    fn resolve(&self, image: &str) -> Result<ImageCommand, Unresolved> {
        self.0
            .get(image)
            .cloned()
            .unwrap_or_else(|| Err(Unresolved("not looked up".into())))
    }
}

/// `kubectl-sexton inject`: read, look up the images wrap needs, inject, write, report.
pub fn inject(flags: InjectFlags) -> i32 {
    let (mut docs, format) = match read_all(&flags.filename) {
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
pub fn uninject(flags: UninjectFlags) -> i32 {
    let (mut docs, format) = match read_all(&flags.filename) {
        Ok(d) => d,
        Err(e) => return unusable(&e),
    };
    let reports: Vec<Report> = docs.iter_mut().flat_map(sexton_inject::uninject).collect();
    finish(&docs, format, &reports)
}

/// Looks the images up (on a runtime of its own: the rest is synchronous).
fn look_up(images: &[String], opts: &RegistryOpts) -> Result<Looked, i32> {
    if images.is_empty() {
        return Ok(Looked(BTreeMap::new()));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    match runtime {
        Ok(rt) => Ok(Looked(rt.block_on(lookup_all(images, opts)))),
        Err(e) => Err(unusable(&format!("cannot start the async runtime: {e}"))),
    }
}

/// Writes the documents and the reports; the exit code.
fn finish(docs: &[Value], format: Format, reports: &[Report]) -> i32 {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(write(docs, format).as_bytes())
        .and_then(|()| stdout.flush())
    {
        logging::stderr_line(&format!("kubectl-sexton: writing the output: {e}"));
        return UNUSABLE;
    }
    for r in reports {
        logging::stderr_line(&r.to_string());
    }
    if reports.iter().any(|r| r.outcome.is_refused()) {
        REFUSED
    } else {
        0
    }
}

fn unusable(e: &dyn std::fmt::Display) -> i32 {
    logging::stderr_line(&format!("kubectl-sexton: {e}"));
    UNUSABLE
}

#[cfg(test)]
mod tests {
    use super::version;

    #[test]
    fn versions_as_providers_report_them() {
        for (s, v) in [
            ("1.29", (1, 29)),
            ("v1.28.3", (1, 28)),
            ("1.30+", (1, 30)),
            ("1.31.0-eks-1", (1, 31)),
        ] {
            assert_eq!(version(s).unwrap(), v, "{s}");
        }
        for s in ["", "1", "one.two", "v"] {
            assert!(version(s).is_err(), "{s}");
        }
    }
}
