//! The flags of `kubectl-sexton controller`, each mirrored by an environment variable, and
//! their validation into [`Opts`]. Bad values exit 2 with a line naming the flag.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, ValueEnum, value_parser};

use super::ejob::policy::Policy;
use crate::shared::catalogue::{CatalogueFileError, CatalogueFlags};
use crate::shared::components::DEFAULT_WEBHOOK_CONFIGURATION;
use crate::shared::kube_client::ServiceKubeFlags;
use crate::shared::leader::LeaseOpts;
use crate::shared::service::ServiceFlags;
use sexton_core::config::{LogFormat, LogLevel};
use sexton_core::duration::parse_go_duration;
use sexton_inject::Catalogue;

#[derive(Args, Debug)]
#[command(
    about = "Run the SidecarTerminator, the EphemeralJob controller and the safety net",
    long_about = "Run the companion controllers: the SidecarTerminator ends the marked sidecars (OpenKruise markers KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT[_WITH_IMAGE]) of pods whose main containers are done, by swapping each sidecar's image in place to a quick-exit image; the EphemeralJob controller runs ephemeral containers across the pods a selector picks; the safety net ends, by the same swap, the declared or recognised sidecars of Job pods that sexton's webhook serves but admitted unchanged (down, refused, or the namespace labelled later)."
)]
pub struct Flags {
    #[command(flatten)]
    kube: ServiceKubeFlags,
    /// Watch only this namespace (default: all namespaces)
    #[arg(long, env = "SEXTON_NAMESPACE")]
    namespace: Option<String>,
    /// Image for sidecars that name none in KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE: one whose entrypoint exits 0 whatever its arguments (sexton's `quick-exit` image). Without it such sidecars are refused with a Warning event
    #[arg(long, env = "SEXTON_QUICK_EXIT_IMAGE", value_name = "IMAGE")]
    quick_exit_image: Option<String>,
    /// SidecarTerminator: images a sidecar may name in KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE, as prefixes, comma-separated (`registry.example.com/quick/`); `*`: any. Default: none (a named image is refused with a Warning event; only --quick-exit-image is swapped to)
    #[arg(
        long,
        env = "SEXTON_SIDECAR_ALLOWED_IMAGES",
        value_delimiter = ',',
        value_name = "PREFIX"
    )]
    sidecar_allowed_images: Vec<String>,
    /// Run only while holding a coordination.k8s.io Lease, so that several replicas can run safely
    #[arg(long, env = "SEXTON_LEADER_ELECT")]
    leader_elect: bool,
    /// Namespace of the Lease (default: the service account's namespace, else "default")
    #[arg(long, env = "SEXTON_LEADER_ELECT_NAMESPACE")]
    leader_elect_namespace: Option<String>,
    /// Name of the Lease
    #[arg(
        long,
        env = "SEXTON_LEADER_ELECT_NAME",
        default_value = "sexton-controller"
    )]
    leader_elect_name: String,
    /// How long a lease is valid after its last renewal: a standby takes over at most this long after the leader dies (whole seconds)
    #[arg(long, env = "SEXTON_LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = whole_seconds, value_name = "DURATION")]
    leader_elect_lease_duration: u64,
    /// The leader renews this long before the lease expires (whole seconds; less than the lease duration)
    #[arg(long, env = "SEXTON_LEADER_ELECT_RENEW_GRACE", default_value = "5s", value_parser = whole_seconds, value_name = "DURATION")]
    leader_elect_renew_grace: u64,
    /// This replica's identity in the Lease and in events (default: hostname and PID)
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    #[command(flatten)]
    serving: ServiceFlags,
    /// Which controllers to run, comma-separated: sidecar-terminator, ephemeraljob, safety-net
    #[arg(long, env = "SEXTON_CONTROLLERS", value_delimiter = ',', default_value = "sidecar-terminator,ephemeraljob,safety-net", value_parser = which)]
    controllers: Vec<Which>,
    /// Safety net: the MutatingWebhookConfiguration of sexton's webhook, whose selectors say which Pods it serves (read live; the net acts on nothing while it does not exist)
    #[arg(long, env = "SEXTON_WEBHOOK_CONFIGURATION", default_value = DEFAULT_WEBHOOK_CONFIGURATION, value_name = "NAME")]
    webhook_configuration: String,
    #[command(flatten)]
    catalogue: CatalogueFlags,
    /// A running pod whose main containers all terminated this long ago while others still run is reported stuck (gauge sexton_controller_stuck_pods, one PodStuck Warning event each); with the SidecarTerminator
    #[arg(long, env = "SEXTON_STUCK_AFTER", default_value = "60s", value_parser = at_least_a_second, value_name = "DURATION")]
    stuck_after: Duration,
    /// Objects reconciled at once, per controller (each mostly waits for the API server: at 8, a swap and its Event took the slots long enough to queue swaps at 100 pods/s, BENCHMARKS.md "Controllers at scale")
    #[arg(long, env = "SEXTON_CONCURRENCY", default_value_t = 64, value_parser = value_parser!(u16).range(1..))]
    concurrency: u16,
    /// EphemeralJob: image prefixes a template may use, comma-separated (`registry.example.com/debug/`); empty: any image
    #[arg(
        long,
        env = "SEXTON_EJOB_ALLOWED_IMAGES",
        value_delimiter = ',',
        value_name = "PREFIX"
    )]
    ejob_allowed_images: Vec<String>,
    /// EphemeralJob: let templates be privileged, add capabilities beyond Pod Security's baseline and mount the service-account token volume (refused by default)
    #[arg(long, env = "SEXTON_EJOB_ALLOW_PRIVILEGED")]
    ejob_allow_privileged: bool,
    /// EphemeralJob: ephemeral containers a pod may hold at most (they stay until the pod is recreated); a pod that would hold more is a refused target
    #[arg(long, env = "SEXTON_EJOB_MAX_CONTAINERS_PER_POD", default_value_t = 32, value_parser = value_parser!(u16).range(1..))]
    ejob_max_containers_per_pod: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Which {
    SidecarTerminator,
    #[value(name = "ephemeraljob")]
    EphemeralJob,
    SafetyNet,
}

/// A flag value clap's own parsers do not check.
#[derive(Debug, thiserror::Error)]
pub enum BadValue {
    #[error("expected sidecar-terminator, ephemeraljob or safety-net")]
    Controller,
    #[error(transparent)]
    Duration(#[from] sexton_core::duration::DurationError),
    #[error("Lease times are whole seconds, at least 1s")]
    NotWholeSeconds,
    #[error("at least 1s")]
    TooShort,
}

/// A controller name, spaces around it allowed (`a, b` in an env var).
fn which(s: &str) -> Result<Which, BadValue> {
    Which::from_str(s.trim(), false).map_err(|_| BadValue::Controller)
}

/// Lease times: the lease manager counts in whole seconds.
fn whole_seconds(raw: &str) -> Result<u64, BadValue> {
    let d = parse_go_duration(raw)?;
    if d.subsec_nanos() != 0 || d.as_secs() == 0 {
        return Err(BadValue::NotWholeSeconds);
    }
    Ok(d.as_secs())
}

/// `--stuck-after`: shorter would report pods the kubelet is still tearing down.
fn at_least_a_second(raw: &str) -> Result<Duration, BadValue> {
    let d = parse_go_duration(raw)?;
    if d < Duration::from_secs(1) {
        return Err(BadValue::TooShort);
    }
    Ok(d)
}

/// The validated options of one controller process.
#[derive(Debug, Clone)]
pub struct Opts {
    pub controllers: Vec<Which>,
    pub kube: ServiceKubeFlags,
    pub namespace: Option<String>,
    pub quick_exit_image: Option<String>,
    /// None: any image; else the prefixes a sidecar's named image must have.
    pub sidecar_allowed_images: Option<Vec<String>>,
    pub lease: Option<LeaseOpts>,
    pub identity: String,
    pub metrics_addr: SocketAddr,
    pub health_addr: SocketAddr,
    pub stuck_after: Duration,
    pub concurrency: u16,
    pub ejob_policy: Policy,
    pub webhook_configuration: String,
    pub catalogue: Catalogue,
    pub log_format: LogFormat,
    pub log_level: LogLevel,
}

/// Flags that cannot be used together, or a file a flag names that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    #[error(
        "invalid --leader-elect-renew-grace={grace}s: it must be shorter than --leader-elect-lease-duration={duration}s"
    )]
    GraceTooLong { grace: u64, duration: u64 },
    #[error("invalid --webhook-configuration: empty")]
    NoWebhookConfiguration,
    #[error(transparent)]
    Catalogue(#[from] CatalogueFileError),
}

/// A blank value (`SEXTON_NAMESPACE=" "`) is no value.
fn non_empty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

impl Flags {
    pub fn validate(self) -> Result<Opts, Invalid> {
        let (duration, grace) = (
            self.leader_elect_lease_duration,
            self.leader_elect_renew_grace,
        );
        if grace >= duration {
            return Err(Invalid::GraceTooLong { grace, duration });
        }
        let webhook_configuration =
            non_empty(Some(self.webhook_configuration)).ok_or(Invalid::NoWebhookConfiguration)?;
        let catalogue = self.catalogue.load()?;
        let mut controllers = self.controllers;
        let mut seen = vec![];
        controllers.retain(|w| {
            let first = !seen.contains(w);
            seen.push(*w);
            first
        });
        Ok(Opts {
            controllers,
            kube: self.kube,
            namespace: non_empty(self.namespace),
            quick_exit_image: non_empty(self.quick_exit_image),
            sidecar_allowed_images: prefixes(self.sidecar_allowed_images),
            lease: self.leader_elect.then(|| LeaseOpts {
                namespace: non_empty(self.leader_elect_namespace),
                name: non_empty(Some(self.leader_elect_name))
                    .unwrap_or_else(|| "sexton-controller".into()),
                duration,
                grace,
            }),
            identity: non_empty(self.identity).unwrap_or_else(default_identity),
            metrics_addr: self.serving.metrics_addr,
            health_addr: self.serving.health_addr,
            stuck_after: self.stuck_after,
            concurrency: self.concurrency,
            ejob_policy: Policy {
                allowed_images: self
                    .ejob_allowed_images
                    .into_iter()
                    .map(|p| p.trim().to_string())
                    .filter(|p| !p.is_empty())
                    .collect(),
                allow_privileged: self.ejob_allow_privileged,
                max_per_pod: self.ejob_max_containers_per_pod.into(),
            },
            webhook_configuration,
            catalogue,
            log_format: self.serving.log_format,
            log_level: self.serving.log_level,
        })
    }
}

/// `--sidecar-allowed-images`: `*` allows any image (None), else the non-empty prefixes.
fn prefixes(raw: Vec<String>) -> Option<Vec<String>> {
    let list: Vec<String> = raw
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    (!list.iter().any(|p| p == "*")).then_some(list)
}

/// `hostname-PID`, unique enough among the replicas of one Deployment.
fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "sexton".into());
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: Flags,
    }

    /// Why the flags were refused: by clap, or by `validate`.
    #[derive(Debug, thiserror::Error)]
    enum Refused {
        #[error(transparent)]
        Clap(#[from] clap::Error),
        #[error(transparent)]
        Invalid(#[from] Invalid),
    }

    fn parse(args: &[&str]) -> Result<Opts, Refused> {
        let cli = Cli::try_parse_from(std::iter::once("controller").chain(args.iter().copied()))?;
        Ok(cli.flags.validate()?)
    }

    #[test]
    fn the_safety_net_runs_by_default_and_reads_the_catalogue_flags() {
        let o = parse(&[]).unwrap();
        assert_eq!(
            o.controllers,
            [
                Which::SidecarTerminator,
                Which::EphemeralJob,
                Which::SafetyNet
            ]
        );
        assert_eq!(o.webhook_configuration, "sexton-webhook");
        assert!(!o.catalogue.vendors.is_empty());
        let o = parse(&[
            "--recognise=false",
            "--webhook-configuration",
            "batch-sexton-webhook",
        ])
        .unwrap();
        assert!(o.catalogue.vendors.is_empty());
        assert_eq!(o.webhook_configuration, "batch-sexton-webhook");
        for (args, needle) in [
            (
                vec!["--webhook-configuration", " "],
                "--webhook-configuration",
            ),
            (
                vec!["--sidecar-catalogue", "/nonexistent/c.yaml"],
                "--sidecar-catalogue /nonexistent/c.yaml",
            ),
        ] {
            let e = parse(&args).unwrap_err().to_string();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }

    #[test]
    fn controllers_are_trimmed_and_deduplicated() {
        let o = parse(&[
            "--controllers",
            "ephemeraljob, sidecar-terminator,ephemeraljob",
        ])
        .unwrap();
        assert_eq!(
            o.controllers,
            [Which::EphemeralJob, Which::SidecarTerminator]
        );
        let e = parse(&["--controllers", "sidecar-terminator,nope"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--controllers") && e.contains("nope"), "{e}");
    }

    #[test]
    fn lease_times_are_whole_seconds_and_grace_is_shorter() {
        let o = parse(&["--leader-elect", "--leader-elect-lease-duration", "1m"]).unwrap();
        assert_eq!(o.lease.map(|l| (l.duration, l.grace)), Some((60, 5)));
        for (args, needle) in [
            (
                ["--leader-elect-lease-duration", "1.5s"],
                "--leader-elect-lease-duration",
            ),
            (
                ["--leader-elect-lease-duration", "0s"],
                "--leader-elect-lease-duration",
            ),
            (
                ["--leader-elect-renew-grace", "15s"],
                "shorter than --leader-elect-lease-duration=15s",
            ),
        ] {
            let e = parse(&args).unwrap_err().to_string();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }

    #[test]
    fn blank_values_are_unset_and_log_settings_are_enums() {
        let o = parse(&[
            "--namespace",
            " ",
            "--log-level",
            "warning",
            "--log-format",
            "json",
        ])
        .unwrap();
        assert_eq!(o.namespace, None);
        assert_eq!(
            (o.log_level, o.log_format),
            (LogLevel::Warn, LogFormat::Json)
        );
        assert!(
            parse(&["--log-format", "xml"])
                .unwrap_err()
                .to_string()
                .contains("--log-format")
        );
    }
}
