//! The cluster part, in this order for each size N:
//!
//! 1. N pods created through the API (`--concurrency` at a time) and made Running, in a
//!    namespace of their own, bound to a node without kubelet.
//! 2. For each controller measured ("contender"), alone: start it; time until its pod
//!    cache is filled (sexton's /readyz; kruise's "Starting workers" of its
//!    SidecarTerminator); wait until it settles (under 2 % of a core for a second); `--idle`
//!    seconds idle; then the window (`window.rs`): the first `--window` × `--rate-percent` %
//!    of the pods reach "mains done", `--rate-percent` % of N per second, evenly spaced;
//!    then up to `--drain` seconds for the last swaps; metrics; stop (SIGTERM).
//!    The window's pods are then deleted and created again, Running, so that every
//!    contender starts from the same pods (a terminated container cannot be made to run
//!    again through the API).
//! 3. The EphemeralJob end to end (`ejob_e2e.rs`) with sexton's default controller.
//!
//! CPU and memory of the controller, the API server and the harness itself are sampled
//! every 250 ms (`procs.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::apiserver;
use crate::contender::{Contender, Kind, Running};
use crate::ejob_e2e;
use crate::error::{Failed, Result, ctx};
use crate::pods;
use crate::procs::{
    Sampler, Tick, clk_tck, loadavg, machine_cores, ncpu, phase_cost, until_quiet,
    webhook_bench_running,
};
use crate::results::{ContenderResult, Costs, EjobRun, Report, SizeResult};
use crate::window;

#[derive(clap::Args)]
pub struct Opts {
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// kubectl-sexton (release build)
    #[arg(long)]
    pub sexton: PathBuf,
    /// OpenKruise's manager, if it could be built
    #[arg(long)]
    pub kruise: Option<PathBuf>,
    /// Its version, for the report
    #[arg(long, default_value = "")]
    pub kruise_version: String,
    /// What starts it: bench/lib/kruise.sh (`run BIN CERT_DIR FLAG...` execs the manager with
    /// the flags and environment it needs)
    #[arg(long, default_value = "bench/lib/kruise.sh")]
    pub kruise_launcher: PathBuf,
    #[arg(long, default_value = "sexton-quick-exit:bench")]
    pub quick_exit_image: String,
    #[arg(long, value_delimiter = ',', default_values_t = vec![1000, 10000])]
    pub sizes: Vec<usize>,
    /// Seconds of "mains done" transitions per contender
    #[arg(long, default_value_t = 30.0)]
    pub window: f64,
    /// Share of the pods reaching "mains done" per second (%)
    #[arg(long, default_value_t = 1.0)]
    pub rate_percent: f64,
    /// A second window per size and contender at this many transitions per second: a
    /// rate the test API server carries on this machine without saturating (0: none)
    #[arg(long, default_value_t = 20.0)]
    pub also_rate: f64,
    #[arg(long, default_value_t = 10.0)]
    pub idle: f64,
    #[arg(long, default_value_t = 60.0)]
    pub drain: f64,
    /// API calls of the harness at once while creating and deleting pods
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Which contenders, in order: sexton, sexton-no-net, sexton-terminator-only, sexton-concurrency-N
    /// (`--concurrency N`), kruise, kruise-default-qps
    #[arg(
        long,
        value_delimiter = ',',
        default_values_t = vec!["sexton".to_string(), "kruise".to_string()]
    )]
    pub contenders: Vec<String>,
    /// kruise-manager's --rest-config-qps and -burst in the "kruise" contender
    #[arg(long, default_value_t = 1000)]
    pub kruise_qps: u32,
    /// The API server's PID (its CPU and memory are sampled too)
    #[arg(long)]
    pub apiserver_pid: Option<u32>,
    /// Take a CPU profile of the API server during each window (it must serve
    /// /debug/pprof: kube-apiserver --profiling), written into --work
    #[arg(long)]
    pub apiserver_profile: bool,
    #[arg(long, default_value = "scale-node-0")]
    pub node: String,
    #[arg(long)]
    pub no_ejob: bool,
    /// Wait at most this long (s) for bench/webhook/run.sh to end before each measured phase
    #[arg(long, default_value_t = 1800.0)]
    pub max_wait_webhook: f64,
    #[arg(long, default_value = "target/bench/scale")]
    pub work: PathBuf,
    #[arg(long, default_value = "target/bench/scale.json")]
    pub json: PathBuf,
    #[arg(long, default_value = "target/bench/scale.md")]
    pub md: PathBuf,
    /// Free text for the report (the commit measured, API server settings)
    #[arg(long, default_value = "")]
    pub note: String,
}

pub fn run(o: Opts) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ctx("starting the runtime"))?;
    rt.block_on(run_async(o))
}

pub async fn client(kubeconfig: &std::path::Path) -> Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig).map_err(ctx("reading the kubeconfig"))?;
    let config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(ctx("kubeconfig"))?;
    Client::try_from(config).map_err(ctx("client"))
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map(|kb| format!("{:.0} GiB", kb / 1024.0 / 1024.0))
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpu}, {} cores, {mem}, Linux {}", ncpu(), kernel.trim())
}

fn contenders(o: &Opts) -> Result<Vec<Contender>> {
    let mut out = vec![];
    for c in &o.contenders {
        let (kind, bin) = match c.as_str() {
            "sexton" => (
                Kind::Sexton {
                    controllers: None,
                    concurrency: None,
                },
                o.sexton.clone(),
            ),
            "sexton-terminator-only" => (
                Kind::Sexton {
                    controllers: Some("sidecar-terminator".into()),
                    concurrency: None,
                },
                o.sexton.clone(),
            ),
            // the default without the safety net: what the net costs, in the same run
            "sexton-no-net" => (
                Kind::Sexton {
                    controllers: Some("sidecar-terminator,ephemeraljob".into()),
                    concurrency: None,
                },
                o.sexton.clone(),
            ),
            c if c.starts_with("sexton-concurrency-") => {
                let n = c["sexton-concurrency-".len()..].parse().map_err(|_| {
                    format!("contender {c}: not a number after sexton-concurrency-")
                })?;
                (
                    Kind::Sexton {
                        controllers: None,
                        concurrency: Some(n),
                    },
                    o.sexton.clone(),
                )
            }
            "kruise" | "kruise-default-qps" => {
                let Some(bin) = o.kruise.clone() else {
                    continue;
                };
                let qps = (c == "kruise").then_some((o.kruise_qps, o.kruise_qps));
                let launcher = o.kruise_launcher.clone();
                (Kind::Kruise { qps, launcher }, bin)
            }
            other => return Err(format!("unknown contender {other:?}").into()),
        };
        out.push(Contender {
            label: c.clone(),
            kind,
            bin,
        });
    }
    Ok(out)
}

async fn run_async(o: Opts) -> Result<()> {
    std::fs::create_dir_all(&o.work).map_err(ctx("creating the work directory"))?;
    let client = client(&o.kubeconfig).await?;
    let contenders = contenders(&o)?;
    let mut report = Report {
        started: now(),
        finished: String::new(),
        machine: machine(),
        cores: ncpu(),
        note: o.note.clone(),
        kruise_version: o.kruise_version.clone(),
        concurrency: o.concurrency,
        window_secs: o.window,
        rate_percent: o.rate_percent,
        also_rate: o.also_rate,
        idle_secs: o.idle,
        drain_secs: o.drain,
        sizes: vec![],
        plan: crate::plan_bench::rows(&crate::plan_bench::Opts {
            sizes: o.sizes.clone(),
            secs: 1.0,
            ..Default::default()
        }),
    };
    for &n in &o.sizes {
        let sizes = one_size(&o, &client, &contenders, n).await?;
        report.sizes.extend(sizes);
        write(&o, &mut report)?;
    }
    report.finished = now();
    write(&o, &mut report)?;
    eprintln!("scale: done: {} and {}", o.json.display(), o.md.display());
    Ok(())
}

fn write(o: &Opts, report: &mut Report) -> Result<()> {
    std::fs::write(&o.json, serde_json::to_string_pretty(&report).unwrap())
        .map_err(ctx(format!("writing {}", o.json.display())))?;
    std::fs::write(&o.md, crate::report::markdown(report))
        .map_err(ctx(format!("writing {}", o.md.display())))
}

/// The windows' rates for `n` pods, in transitions per second: the issue's (a share of
/// the pods per second), then `--also-rate` (if set and different).
fn rates(o: &Opts, n: usize) -> Vec<f64> {
    let mut out = vec![n as f64 * o.rate_percent / 100.0];
    if o.also_rate > 0.0 && (o.also_rate - out[0]).abs() > 1e-9 {
        out.push(o.also_rate);
    }
    out
}

/// N pods, and every contender measured at each rate; one result per rate.
async fn one_size(
    o: &Opts,
    client: &Client,
    contenders: &[Contender],
    n: usize,
) -> Result<Vec<SizeResult>> {
    let ns = format!("scale-{n}");
    eprintln!("scale: {n} pods in namespace {ns}");
    pods::ensure_namespace(client, &ns).await?;
    pods::delete_all(client, &ns).await?;
    pods::delete_node(client, &o.node).await?;
    let names: Vec<String> = (0..n).map(pods::name).collect();
    let t = Instant::now();
    pods::create_running(
        client,
        &ns,
        names.clone(),
        &o.node,
        &o.quick_exit_image,
        o.concurrency,
    )
    .await?;
    let create_s = t.elapsed().as_secs_f64();
    eprintln!("scale: created {n} running pods in {create_s:.1} s");
    let mut out = vec![];
    // the pods of the last window, to be made Running again before the next one
    let mut dirty: Vec<String> = vec![];
    for rate in rates(o, n) {
        let window_pods = ((rate * o.window).round() as usize).min(n);
        let slice: Vec<String> = names[..window_pods].to_vec();
        let mut size = SizeResult {
            pods: n,
            create_s,
            reset_s: vec![],
            rate_per_sec: rate,
            window_pods,
            contenders: vec![],
            ejob: None,
        };
        for c in contenders {
            if !dirty.is_empty() {
                size.reset_s.push(reset(o, client, &ns, &dirty).await?);
            }
            match c.kind {
                Kind::Kruise { .. } => pods::ensure_vk_node(client, &o.node).await?,
                Kind::Sexton { .. } => pods::delete_node(client, &o.node).await?,
            }
            let r = measure(o, client, c, &ns, &slice, rate).await?;
            print_summary(n, rate, &r);
            size.contenders.push(r);
            dirty = slice.clone();
        }
        out.push(size);
    }
    pods::delete_node(client, &o.node).await?;
    if !o.no_ejob {
        let last = out.last_mut().expect("at least one rate");
        if !dirty.is_empty() {
            last.reset_s.push(reset(o, client, &ns, &dirty).await?);
        }
        last.ejob = Some(ejob(o, client, &ns, n).await?);
    }
    eprintln!("scale: deleting the {n} pods");
    pods::delete_all(client, &ns).await?;
    Ok(out)
}

/// The window's pods again as they were: deleted and created anew, Running.
async fn reset(o: &Opts, client: &Client, ns: &str, slice: &[String]) -> Result<f64> {
    let t = Instant::now();
    pods::delete_now(client, ns, slice.to_vec(), o.concurrency).await?;
    pods::create_running(
        client,
        ns,
        slice.to_vec(),
        &o.node,
        &o.quick_exit_image,
        o.concurrency,
    )
    .await?;
    let s = t.elapsed().as_secs_f64();
    eprintln!("scale: reset the window's {} pods in {s:.1} s", slice.len());
    Ok(s)
}

/// Waits while bench/webhook/run.sh runs (another engineer's benchmark waits for quiet
/// windows: ours should not overlap theirs); the seconds waited.
async fn quiet(o: &Opts) -> f64 {
    let t = Instant::now();
    let mut said = false;
    while webhook_bench_running() && t.elapsed().as_secs_f64() < o.max_wait_webhook {
        if !said {
            eprintln!("scale: bench/webhook/run.sh is running; waiting for it to end");
            said = true;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    t.elapsed().as_secs_f64()
}

fn costs(ticks: &[Tick], clk: f64) -> Costs {
    Costs {
        controller: phase_cost(ticks, 0, clk),
        apiserver: phase_cost(ticks, 1, clk),
        harness: phase_cost(ticks, 2, clk),
        machine_cores: machine_cores(ticks, ncpu()),
    }
}

/// Starts `c`, waits until its cache is filled and it has settled: (ready after, settled after).
async fn start_settled(
    o: &Opts,
    c: &Contender,
    sampler_pids: impl Fn(u32) -> Vec<u32>,
) -> Result<(Running, Sampler, Vec<u32>, Instant, Instant, Instant, f64)> {
    // (started again, at most twice, if a port it was given was taken before it bound it)
    let mut attempt = 1;
    let (r, pids, sampler, t0, ready) = loop {
        let mut r = c.start(&o.kubeconfig, &o.quick_exit_image, &o.work)?;
        let pids = sampler_pids(r.pid);
        let sampler = Sampler::start(pids.clone());
        let t0 = sampler.mark(&pids).at;
        match c.wait_ready(&mut r, Duration::from_secs(600)).await {
            Ok(ready) => break (r, pids, sampler, t0, ready),
            Err(e) if e.port_taken && attempt < 3 => {
                eprintln!("scale: {}: a port was taken; starting it again", c.label);
                attempt += 1;
            }
            Err(e) => return Err(e.into()),
        }
    };
    let t_ready = sampler.mark(&pids).at;
    let clk = clk_tck();
    // settled: under 2 % of a core over one second (at most 120 s)
    let mut prev = sampler.mark(&pids);
    let limit = Instant::now() + Duration::from_secs(120);
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let cur = sampler.mark(&pids);
        let used = match (prev.procs[0], cur.procs[0]) {
            (Some(a), Some(b)) => (b.cpu_ticks - a.cpu_ticks) as f64 / clk,
            _ => return Err(format!("{} exited; log: {}", c.label, r.log.display()).into()),
        };
        let secs = cur.at.duration_since(prev.at).as_secs_f64();
        if used / secs < 0.02 || Instant::now() > limit {
            break;
        }
        prev = cur;
    }
    let t_settled = sampler.mark(&pids).at;
    Ok((
        r,
        sampler,
        pids,
        t0,
        t_ready,
        t_settled,
        ready.as_secs_f64(),
    ))
}

fn self_pid() -> u32 {
    std::process::id()
}

async fn measure(
    o: &Opts,
    client: &Client,
    c: &Contender,
    ns: &str,
    slice: &[String],
    rate: f64,
) -> Result<ContenderResult> {
    eprintln!("scale: {}: starting", c.label);
    let waited = quiet(o).await;
    let api = o.apiserver_pid.unwrap_or(0);
    let (r, sampler, pids, t0, t_ready, t_settled, ready_s) =
        start_settled(o, c, |pid| vec![pid, api, self_pid()]).await?;
    let clk = clk_tck();
    eprintln!(
        "scale: {}: cache filled after {ready_s:.2} s, settled after {:.1} s",
        c.label,
        t_settled.duration_since(t0).as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs_f64(o.idle)).await;
    let t_idle = sampler.mark(&pids).at;
    let waited = waited + quiet(o).await;
    // (after creating or re-creating thousands of pods the API server and the controller
    // manager are busy for a while: a window must not start on that)
    let waited_api = match o.apiserver_pid {
        Some(pid) => until_quiet(pid, 0.05, Duration::from_secs(120)).await,
        None => 0.0,
    };
    let load_before = loadavg();
    let busy_before = webhook_bench_running();
    let t_win = sampler.mark(&pids).at;
    let drain = Duration::from_secs_f64(o.drain);
    let api_before = apiserver::metrics(client).await;
    let own_before = r.metrics().await;
    let profile = o.apiserver_profile.then(|| {
        // the transitions' part of the window (the drain is mostly idle)
        let secs = (slice.len() as f64 / rate).ceil().max(1.0) as u64;
        let path = o
            .work
            .join(format!("apiserver-{}-{}.pprof", slice.len(), c.label));
        let client = client.clone();
        tokio::spawn(async move {
            apiserver::cpu_profile(client, secs, &path)
                .await
                .map(|()| path.display().to_string())
        })
    });
    let result = window::run(client, ns, slice, rate, &o.quick_exit_image, drain).await?;
    let t_end = sampler.mark(&pids).at;
    let mut api_activity = apiserver::activity(&api_before, &apiserver::metrics(client).await);
    if let Some(p) = profile {
        match p.await.map_err(|e| Failed(e.to_string())).and_then(|r| r) {
            Ok(path) => api_activity.profile = Some(path),
            Err(e) => eprintln!("scale: {}: no API server profile: {e}", c.label),
        }
    }
    let busy_after = webhook_bench_running();
    let load_after = loadavg();
    let metrics = r.metrics().await;
    let window = |name: &str, label: &str| hist_quantiles(&own_before, &metrics, name, label);
    let sexton = r#"controller="sidecar-terminator""#;
    let (reconcile_ms, queue_ms) = match c.kind {
        Kind::Sexton { .. } => (
            window("sexton_controller_reconcile_duration_seconds", sexton),
            window("sexton_controller_queue_latency_seconds", sexton),
        ),
        Kind::Kruise { .. } => (
            window(
                "controller_runtime_reconcile_time_seconds",
                r#"controller="sidecarterminator-controller""#,
            ),
            None,
        ),
    };
    let log_lines = std::fs::read_to_string(&r.log)
        .map(|l| l.lines().count())
        .unwrap_or(0);
    let out = ContenderResult {
        label: c.label.clone(),
        command: c.describe(&o.quick_exit_image),
        kind: c.kind.clone(),
        ready_s,
        settled_s: t_settled.duration_since(t0).as_secs_f64(),
        startup: costs(&sampler.between(t0, t_settled), clk),
        idle: costs(&sampler.between(t_settled, t_idle), clk),
        window: costs(&sampler.between(t_win, t_end), clk),
        result,
        load_before,
        load_after,
        webhook_bench_running: busy_before || busy_after,
        waited_for_webhook_s: waited,
        metrics,
        log_lines,
        waited_for_apiserver_s: waited_api,
        reconcile_ms,
        queue_ms,
        apiserver: api_activity,
    };
    let _ = t_ready;
    r.stop().await;
    drop(sampler);
    Ok(out)
}

/// The controller's metrics once its EphemeralJob reconciliation has ended (at most 30 s
/// after the job's status counted every target): the reconciliation writes that status
/// before it returns, and its duration is recorded only then, so the metrics read at once
/// could lack it.
async fn reconciled(r: &Running) -> BTreeMap<String, f64> {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let m = r.metrics().await;
        let done = m.iter().any(|(k, v)| {
            k.starts_with("sexton_controller_reconcile_duration_seconds_count")
                && k.contains("ephemeraljob")
                && *v > 0.0
        });
        if done || Instant::now() > end {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn ejob(o: &Opts, client: &Client, ns: &str, n: usize) -> Result<EjobRun> {
    let c = Contender {
        label: "sexton-ejob".into(),
        kind: Kind::Sexton {
            controllers: None,
            concurrency: None,
        },
        bin: o.sexton.clone(),
    };
    quiet(o).await;
    let api = o.apiserver_pid.unwrap_or(0);
    let (r, sampler, pids, _t0, _t_ready, _t_settled, _ready) =
        start_settled(o, &c, |pid| vec![pid, api, self_pid()]).await?;
    quiet(o).await;
    let load_before = loadavg();
    let busy_before = webhook_bench_running();
    let t_start = sampler.mark(&pids).at;
    let name = format!("scale-{n}");
    eprintln!("scale: EphemeralJob over {n} pods");
    let result = ejob_e2e::run(client, ns, &name, n, Duration::from_secs(900)).await?;
    let t_end = sampler.mark(&pids).at;
    let clk = clk_tck();
    let out = EjobRun {
        costs: costs(&sampler.between(t_start, t_end), clk),
        metrics: reconciled(&r).await,
        load_before,
        load_after: loadavg(),
        webhook_bench_running: busy_before || webhook_bench_running(),
        result,
    };
    eprintln!(
        "scale: EphemeralJob: first {:?} s, all {:?} s, {} of {n} injected",
        out.result.first_s, out.result.all_s, out.result.injected
    );
    r.stop().await;
    Ok(out)
}

/// (p50, p99) in ms of the observations a Prometheus histogram gained between two scrapes,
/// each the upper bound of the bucket it falls in; None without observations.
fn hist_quantiles(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
    name: &str,
    label: &str,
) -> Option<(f64, f64)> {
    let prefix = format!("{name}_bucket{{");
    let mut buckets: Vec<(f64, f64)> = after
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix) && k.contains(label))
        .filter_map(|(k, v)| {
            let le = k.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, v - before.get(k).copied().unwrap_or(0.0)))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = buckets.last()?.1;
    if total < 1.0 {
        return None;
    }
    let at = |q: f64| {
        buckets
            .iter()
            .find(|(_, n)| *n >= q * total)
            .map_or(f64::INFINITY, |(le, _)| le * 1e3)
    };
    Some((at(0.5), at(0.99)))
}

fn print_summary(n: usize, rate: f64, r: &ContenderResult) {
    let l = r.result.latency_ms.as_ref();
    let w = r.window.controller.as_ref();
    let i = r.idle.controller.as_ref();
    eprintln!(
        "scale: {n} pods, {rate} per second, {}: reaction p50 {:.1} ms p99 {:.1} ms ({} of {} swapped); RSS idle {:.1} MB, window max {:.1} MB; CPU idle {:.1} %, window {:.1} %",
        r.label,
        l.map_or(f64::NAN, |l| l.p50),
        l.map_or(f64::NAN, |l| l.p99),
        r.result.swapped,
        r.result.transitions,
        i.map_or(f64::NAN, |c| c.rss_end_kb as f64 / 1024.0),
        w.map_or(f64::NAN, |c| c.rss_max_kb as f64 / 1024.0),
        i.map_or(f64::NAN, |c| c.cores * 100.0),
        w.map_or(f64::NAN, |c| c.cores * 100.0),
    );
}
