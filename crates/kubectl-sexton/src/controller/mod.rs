//! `kubectl-sexton controller`: the companion controllers. Today it runs the
//! SidecarTerminator: it ends the marked sidecars of Job pods whose main containers are
//! done by swapping their image, in place, to a quick-exit image.
//!
//! Process shape: one multi-threaded tokio runtime; an optional Lease-based leader election
//! (kube-lease-manager) gates the kube-runtime `Controller`; a tiny HTTP server serves
//! Prometheus metrics and health. SIGTERM/SIGINT stop the controller gracefully (in-flight
//! reconciliations finish) and release the lease so a standby takes over at once.

pub mod decide;
pub mod ejob;
pub mod ejob_controller;
pub mod http;
pub mod runtime;
pub mod terminator;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Arg, ArgAction, ArgMatches, Command, value_parser};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher;

use kube::{Api, Client, Config};
use tokio::sync::watch;
use tracing::{error, info, warn};

use sexton_core::config::{LogFormat, LogLevel};
use sexton_core::duration::parse_go_duration;
use http::{Health, Metrics, Serve};

/// How long in-flight reconciliations may run after SIGTERM (well inside the Deployment's
/// 30 s termination grace period, so the lease is still released).
const GRACE: Duration = Duration::from_secs(10);
const SA_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

fn command() -> Command {
    let flag = |id: &'static str, env: &'static str, help: &'static str| {
        Arg::new(id)
            .long(id)
            .env(env)
            .help(help)
            .action(ArgAction::Set)
    };
    Command::new("kubectl-sexton controller")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Companion controller: ends the marked sidecars (OpenKruise markers KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT[_WITH_IMAGE]) of pods whose main containers are done, by swapping each sidecar's image in place to a quick-exit image.")
        .arg(flag("kubeconfig", "KUBECONFIG", "Kubeconfig file; default: in-cluster service account, else ~/.kube/config").value_parser(value_parser!(PathBuf)))
        .arg(flag("namespace", "SEXTON_NAMESPACE", "Watch only this namespace (default: all namespaces)"))
        .arg(flag("quick-exit-image", "SEXTON_QUICK_EXIT_IMAGE", "Image for sidecars that name none in KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE: one whose entrypoint exits 0 whatever its arguments (sexton's `quick-exit` image). Without it such sidecars are refused with a Warning event"))
        .arg(Arg::new("leader-elect").long("leader-elect").env("SEXTON_LEADER_ELECT").help("Run only while holding a coordination.k8s.io Lease, so that several replicas can run safely").action(ArgAction::SetTrue))
        .arg(flag("leader-elect-namespace", "SEXTON_LEADER_ELECT_NAMESPACE", "Namespace of the Lease (default: the service account's namespace, else \"default\")"))
        .arg(flag("leader-elect-name", "SEXTON_LEADER_ELECT_NAME", "Name of the Lease").default_value("sexton-controller"))
        .arg(flag("leader-elect-lease-duration", "SEXTON_LEADER_ELECT_LEASE_DURATION", "How long a lease is valid after its last renewal: a standby takes over at most this long after the leader dies (whole seconds)").default_value("15s"))
        .arg(flag("leader-elect-renew-grace", "SEXTON_LEADER_ELECT_RENEW_GRACE", "The leader renews this long before the lease expires (whole seconds; less than the lease duration)").default_value("5s"))
        .arg(flag("identity", "POD_NAME", "This replica's identity in the Lease and in events (default: hostname and PID)"))
        .arg(flag("metrics-addr", "SEXTON_METRICS_ADDR", "Serve Prometheus metrics on http://ADDR/metrics").default_value("0.0.0.0:8080").value_parser(value_parser!(SocketAddr)))
        .arg(flag("health-addr", "SEXTON_HEALTH_ADDR", "Serve /healthz and /readyz on ADDR").default_value("0.0.0.0:8081").value_parser(value_parser!(SocketAddr)))
        .arg(flag("controllers", "SEXTON_CONTROLLERS", "Which controllers to run, comma-separated: sidecar-terminator, ephemeraljob").default_value("sidecar-terminator,ephemeraljob"))
        .arg(flag("concurrency", "SEXTON_CONCURRENCY", "Pods reconciled at once").default_value("8").value_parser(value_parser!(u16).range(1..)))
        .arg(flag("log-format", "SEXTON_LOG_FORMAT", "text or json").default_value("text"))
        .arg(flag("log-level", "SEXTON_LOG_LEVEL", "error, warn, info, debug or trace").default_value("info"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    SidecarTerminator,
    EphemeralJob,
}

struct Opts {
    controllers: Vec<Which>,
    kubeconfig: Option<PathBuf>,
    namespace: Option<String>,
    quick_exit_image: Option<String>,
    leader_elect: bool,
    lease_namespace: Option<String>,
    lease_name: String,
    lease_duration: u64,
    lease_grace: u64,
    identity: String,
    metrics_addr: SocketAddr,
    health_addr: SocketAddr,
    concurrency: u16,
}

fn whole_seconds(m: &ArgMatches, id: &str) -> Result<u64, String> {
    let raw = m.get_one::<String>(id).expect("has a default");
    let d = parse_go_duration(raw).map_err(|e| format!("invalid --{id}={raw:?}: {e}"))?;
    if d.subsec_nanos() != 0 || d.as_secs() == 0 {
        return Err(format!(
            "invalid --{id}={raw:?}: Lease times are whole seconds, at least 1s"
        ));
    }
    Ok(d.as_secs())
}

fn non_empty(m: &ArgMatches, id: &str) -> Option<String> {
    m.get_one::<String>(id)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn opts(m: &ArgMatches) -> Result<Opts, String> {
    let lease_duration = whole_seconds(m, "leader-elect-lease-duration")?;
    let lease_grace = whole_seconds(m, "leader-elect-renew-grace")?;
    if lease_grace >= lease_duration {
        return Err(format!(
            "invalid --leader-elect-renew-grace={lease_grace}s: it must be shorter than --leader-elect-lease-duration={lease_duration}s"
        ));
    }
    let identity = non_empty(m, "identity").unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "sexton".into());
        format!("{host}-{}", std::process::id())
    });
    let raw = m.get_one::<String>("controllers").expect("default");
    let mut controllers = vec![];
    for c in raw.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let w = match c {
            "sidecar-terminator" => Which::SidecarTerminator,
            "ephemeraljob" => Which::EphemeralJob,
            _ => {
                return Err(format!(
                    "invalid --controllers={raw:?}: unknown controller {c:?} (use sidecar-terminator, ephemeraljob)"
                ));
            }
        };
        if !controllers.contains(&w) {
            controllers.push(w);
        }
    }
    if controllers.is_empty() {
        return Err(format!(
            "invalid --controllers={raw:?}: name at least one controller"
        ));
    }
    Ok(Opts {
        controllers,
        kubeconfig: m.get_one::<PathBuf>("kubeconfig").cloned(),
        namespace: non_empty(m, "namespace"),
        quick_exit_image: non_empty(m, "quick-exit-image"),
        leader_elect: m.get_flag("leader-elect"),
        lease_namespace: non_empty(m, "leader-elect-namespace"),
        lease_name: non_empty(m, "leader-elect-name").unwrap_or_else(|| "sexton-controller".into()),
        lease_duration,
        lease_grace,
        identity,
        metrics_addr: *m.get_one("metrics-addr").expect("default"),
        health_addr: *m.get_one("health-addr").expect("default"),
        concurrency: *m.get_one("concurrency").expect("default"),
    })
}

/// `kubectl-sexton crd` (and, as before, `kubectl-sexton controller crd`).
pub fn print_crd() -> i32 {
    crate::telemetry::stdout_line(ejob::crd_yaml().trim_end())
}

pub fn main(args: &[OsString]) -> i32 {
    if args.get(1).and_then(|a| a.to_str()) == Some("crd") {
        return print_crd();
    }
    let m = match command().try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    let logging = (|| -> Result<_, String> {
        let f = m.get_one::<String>("log-format").expect("default");
        let format =
            LogFormat::parse(f).map_err(|e| format!("invalid --log-format={f:?}: {e}"))?;
        let l = m.get_one::<String>("log-level").expect("default");
        let level = LogLevel::parse(l).map_err(|e| format!("invalid --log-level={l:?}: {e}"))?;
        Ok((format, level))
    })();
    let (o, (format, level)) = match opts(&m).and_then(|o| Ok((o, logging?))) {
        Ok(v) => v,
        Err(e) => {
            crate::telemetry::stderr_line(&format!("kubectl-sexton controller: {e}"));
            return 2;
        }
    };
    crate::telemetry::init(format, level);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            crate::telemetry::stderr_line(&format!("kubectl-sexton controller: cannot start the async runtime: {e}"));
            return 1;
        }
    };
    rt.block_on(run(o))
}

async fn client(kubeconfig: Option<&PathBuf>) -> Result<Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            use kube::config::{KubeConfigOptions, Kubeconfig};
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| format!("invalid --kubeconfig={:?}: {e}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| format!("invalid --kubeconfig={:?}: {e}", path.display()))?
        }
        None => Config::infer().await.map_err(|e| {
            format!("no Kubernetes credentials: not in a pod with a service account token, and no usable ~/.kube/config ({e}); pass --kubeconfig")
        })?,
    };
    Client::try_from(config).map_err(|e| format!("cannot create a Kubernetes client: {e}"))
}

/// A shutdown signal that can be awaited from several places.
fn shutdown_on_signals() -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => info!("SIGTERM: shutting down"),
            _ = int.recv() => info!("SIGINT: shutting down"),
        }
        let _ = tx.send(true);
    });
    rx
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

async fn run(o: Opts) -> i32 {
    let shutdown = shutdown_on_signals();
    let metrics = Arc::new(Metrics::new());
    let health = Arc::new(Health::default());
    for (addr, what, flag) in [
        (
            o.metrics_addr,
            Serve::Metrics(metrics.clone()),
            "--metrics-addr",
        ),
        (
            o.health_addr,
            Serve::Health(health.clone()),
            "--health-addr",
        ),
    ] {
        match http::serve(addr, what, flag).await {
            Ok(bound) => info!(%bound, "serving {}", &flag[2..]),
            Err(e) => {
                error!("{e}");
                return 2;
            }
        }
    }
    let client = match client(o.kubeconfig.as_ref()).await {
        Ok(c) => c,
        Err(e) => {
            error!("{e}");
            return 2;
        }
    };
    if !o.leader_elect {
        metrics.leader.set(1);
        return run_controller(&o, client, metrics, health, shutdown).await;
    }

    let lease_ns = o.lease_namespace.clone().unwrap_or_else(|| {
        std::fs::read_to_string(SA_NAMESPACE_FILE)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "default".into())
    });
    let manager = match kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &o.lease_name)
        .with_namespace(&lease_ns)
        .with_identity(&o.identity)
        .with_duration(o.lease_duration)
        .with_grace(o.lease_grace)
        .with_field_manager(terminator::FIELD_MANAGER)
        .build()
        .await
    {
        Ok(m) => m,
        Err(e) => {
            error!(
                "leader election: cannot use Lease {lease_ns}/{}: {e} (RBAC: coordination.k8s.io leases get/create/patch/update in {lease_ns:?})",
                o.lease_name
            );
            return 1;
        }
    };
    let (mut leading, lease_task) = manager.watch().await;
    health.ready.store(true, Ordering::Relaxed); // a standby is healthy and ready
    info!(identity = %o.identity, lease = %format!("{lease_ns}/{}", o.lease_name), "leader election: waiting for the lease");
    let release = |leading: watch::Receiver<bool>, lease_task: tokio::task::JoinHandle<_>| async move {
        // Dropping the last receiver makes the lease task release the lease and end.
        drop(leading);
        match tokio::time::timeout(Duration::from_secs(5), lease_task).await {
            Ok(Ok(Ok(_))) => info!("leader election: lease released"),
            Ok(Ok(Err(e))) => warn!("leader election: releasing the lease failed: {e}"),
            _ => warn!("leader election: the lease was not released within 5s"),
        }
    };
    loop {
        if *leading.borrow_and_update() {
            break;
        }
        tokio::select! {
            changed = leading.changed() => if changed.is_err() {
                error!("leader election stopped unexpectedly");
                return 1;
            },
            _ = stopped(shutdown.clone()) => {
                release(leading, lease_task).await;
                return 0;
            }
        }
    }
    info!(identity = %o.identity, "leader election: acquired the lease; starting");
    metrics.leader.set(1);
    let mut watch_loss = leading.clone();
    let lost = async move {
        loop {
            if watch_loss.changed().await.is_err() || !*watch_loss.borrow_and_update() {
                return;
            }
        }
    };
    tokio::select! {
        code = run_controller(&o, client, metrics.clone(), health, shutdown) => {
            metrics.leader.set(0);
            release(leading, lease_task).await;
            code
        }
        _ = lost => {
            metrics.leader.set(0);
            // Stop acting at once (this drops the controller); exit so the restarted
            // process rejoins the election with fresh state, as client-go controllers do.
            error!("leader election: lost the lease; exiting");
            1
        }
    }
}

async fn run_controller(
    o: &Opts,
    client: Client,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: watch::Receiver<bool>,
) -> i32 {
    let reporter = Reporter {
        controller: "sexton-controller".into(),
        instance: Some(o.identity.clone()),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let scope = if o.namespace.is_some() {
        "in its namespace"
    } else {
        "cluster-wide"
    };
    health.pending.store(o.controllers.len(), Ordering::Relaxed);

    let terminator = o.controllers.contains(&Which::SidecarTerminator).then(|| {
        let ctx = Arc::new(terminator::Ctx::new(
            client.clone(),
            recorder.clone(),
            o.quick_exit_image.clone(),
            metrics.clone(),
        ));
        if o.quick_exit_image.is_none() {
            warn!("no --quick-exit-image: only sidecars that name their own image in KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE can be ended");
        }
        let (reader, writer) = reflector::store();
        let filled = Arc::new(AtomicBool::new(false));
        // Only Running pods can need action (not Pending; Succeeded and Failed are over),
        // so the cache holds only those.
        let stream = runtime::trigger(
            filled.clone(),
            scoped(&client, o),
            watcher::Config::default().fields("status.phase=Running"),
            writer,
            ctx.telemetry.clock.clone(),
            health.clone(),
            metrics.clone(),
            terminator::CONTROLLER,
            format!("the controller needs pods list and watch {scope}"),
        );
        let run = Controller::for_stream(stream, reader)
            .with_config(controller::Config::default().concurrency(o.concurrency))
            .graceful_shutdown_on(stopped(shutdown.clone()))
            .run(terminator::reconcile, terminator::error_policy, ctx)
            .for_each(log_queue_error);
        runtime::until_stopped(terminator::CONTROLLER, run, filled, stopped(shutdown.clone()), GRACE)
    });

    let ejobs = o.controllers.contains(&Which::EphemeralJob).then(|| {
        let ctx = Arc::new(ejob_controller::Ctx::new(
            client.clone(),
            recorder.clone(),
            metrics.clone(),
        ));
        let jobs: Api<ejob::EphemeralJob> = scoped(&client, o);
        let (reader, writer) = reflector::store();
        let filled = Arc::new(AtomicBool::new(false));
        let stream = runtime::trigger(
            filled.clone(),
            jobs,
            watcher::Config::default(),
            writer,
            ctx.telemetry.clock.clone(),
            health.clone(),
            metrics.clone(),
            ejob_controller::CONTROLLER,
            format!("the controller needs ephemeraljobs.sexton.dev list and watch {scope}; is the CRD installed (deploy/crd-ephemeraljob.yaml)?"),
        );
        // Pod changes wake the jobs of the pod's namespace that select it or run in it.
        let meta: Api<kube::core::PartialObjectMeta<Pod>> = scoped(&client, o);
        let pods = watcher::watcher(meta, watcher::Config::default())
            .default_backoff()
            .touched_objects();
        let store = reader.clone();
        let mapper = move |pod: kube::core::PartialObjectMeta<Pod>| {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            store
                .state()
                .into_iter()
                .filter(|j| {
                    j.metadata.namespace.as_deref() == Some(ns.as_str())
                        && (ejob::selector_matches(&j.spec.selector, &labels)
                            || j.status.as_ref().is_some_and(|s| s.running + s.waiting > 0))
                })
                .map(|j| ObjectRef::from_obj(&*j))
                .collect::<Vec<_>>()
        };
        let run = Controller::for_stream(stream, reader)
            .watches_stream(pods, mapper)
            .with_config(controller::Config::default().concurrency(o.concurrency))
            .graceful_shutdown_on(stopped(shutdown.clone()))
            .run(ejob_controller::reconcile, ejob_controller::error_policy, ctx)
            .for_each(log_queue_error);
        runtime::until_stopped(ejob_controller::CONTROLLER, run, filled, stopped(shutdown.clone()), GRACE)
    });

    tokio::join!(maybe(terminator), maybe(ejobs));
    info!("controller stopped");
    0
}

/// The API of `K` in the watched namespace, or in all namespaces.
fn scoped<K>(client: &Client, o: &Opts) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match &o.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

async fn maybe(f: Option<impl std::future::Future<Output = ()>>) {
    if let Some(f) = f {
        f.await
    }
}

async fn log_queue_error<T, E: std::fmt::Display, Q: std::fmt::Display>(
    res: Result<T, controller::Error<E, Q>>,
) {
    if let Err(controller::Error::QueueError(e)) = res {
        warn!("controller queue: {e}");
    }
}
