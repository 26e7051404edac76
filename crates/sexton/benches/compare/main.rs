//! sexton vs kubexit, side by side in one run on one machine (`bench/in-pod/run.sh` builds both
//! and calls this). Every "container" is the real wrapper binary as PID 1 of its own PID
//! namespace (`unshare --pid --fork --mount-proc`), sharing a graveyard directory, as in the
//! integration tests. Latencies are taken inside the measured processes with
//! CLOCK_MONOTONIC by a small C child (`bench/in-pod/child.c`):
//!   reaction = (sidecar child receives SIGTERM) - (main child's last instruction).
//!
//! Args: --kubexit BIN --child BIN --out DIR [--quick] [--idle-secs N]
//!       [--churn BIN] [--churn-secs N] [--only-cpu] [--only-reaction]
//!       [--sexton BIN] [--sexton-old BIN] [--sexton-musl BIN] [--sexton-slim BIN]
//!
//! `--only-cpu` runs the CPU section alone (graveyard churn and idle) and merges it into
//! an existing `results.json`, so `bench/in-pod/report.py` can rewrite that part of BENCHMARKS.md.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SEXTON: &str = env!("CARGO_BIN_EXE_sexton");

#[derive(Clone)]
struct Tool {
    label: &'static str,
    bin: PathBuf,
    env: Vec<(&'static str, String)>,
}

struct Opts {
    kubexit: PathBuf,
    /// The sexton measured (default: the one cargo built with this benchmark).
    sexton: PathBuf,
    /// An earlier sexton build, measured as "sexton (before)" in the CPU section.
    old: Option<PathBuf>,
    /// The load generator (`bench/in-pod/churn.c`).
    churn: Option<PathBuf>,
    churn_secs: f64,
    only_cpu: bool,
    musl: Option<PathBuf>,
    slim: Option<PathBuf>,
    child: PathBuf,
    out: PathBuf,
    quick: bool,
    idle_secs: u64,
    /// Only the reaction-latency section (for quick iterations).
    only_reaction: bool,
}

fn opts() -> Opts {
    let mut a = std::env::args().skip(1);
    let (mut kubexit, mut child, mut out, mut quick, mut idle_secs, mut musl) =
        (None, None, None, false, None, None);
    let mut only_reaction = false;
    let (mut slim, mut sexton, mut old, mut churn, mut churn_secs, mut only_cpu) =
        (None, None, None, None, None, false);
    while let Some(x) = a.next() {
        match x.as_str() {
            "--kubexit" => kubexit = a.next().map(PathBuf::from),
            "--sexton-musl" => musl = a.next().map(PathBuf::from),
            "--sexton-slim" => slim = a.next().map(PathBuf::from),
            "--sexton" => sexton = a.next().map(PathBuf::from),
            "--sexton-old" => old = a.next().map(PathBuf::from),
            "--churn" => churn = a.next().map(PathBuf::from),
            "--churn-secs" => churn_secs = a.next().and_then(|s| s.parse().ok()),
            "--only-cpu" => only_cpu = true,
            "--child" => child = a.next().map(PathBuf::from),
            "--out" => out = a.next().map(PathBuf::from),
            "--quick" => quick = true,
            "--only-reaction" => only_reaction = true,
            "--idle-secs" => idle_secs = a.next().and_then(|s| s.parse().ok()),
            "--bench" => {}
            other => panic!("unknown argument {other}; see bench/in-pod/run.sh"),
        }
    }
    Opts {
        kubexit: kubexit.expect("--kubexit BIN (bench/in-pod/run.sh builds it)"),
        sexton: sexton.unwrap_or_else(|| SEXTON.into()),
        old,
        churn,
        churn_secs: churn_secs.unwrap_or(if quick { 2.0 } else { 4.0 }),
        only_cpu,
        musl,
        slim,
        child: child.expect("--child BIN"),
        out: out.expect("--out DIR"),
        quick,
        // (the quick form checks the harness: a few seconds show that the window is measured)
        idle_secs: idle_secs.unwrap_or(if quick { 5 } else { 60 }),
        only_reaction,
    }
}

fn now_ns() -> i64 {
    let mut t = nix::libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec * 1_000_000_000 + t.tv_nsec
}

fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    f()
}

fn read_ns(p: &Path) -> Option<i64> {
    fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// One container: the tool as PID 1 of a new PID namespace wrapping `args`.
fn container(tool: &Tool, name: &str, gy: &Path, deps: &str, args: &[&str], pidns: bool) -> Child {
    let mut c = if pidns {
        let mut c = Command::new("unshare");
        c.args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            .arg(&tool.bin);
        c
    } else {
        Command::new(&tool.bin)
    };
    c.args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("KUBEXIT_NAME", name)
        .env("KUBEXIT_GRAVEYARD", gy)
        .env("KUBEXIT_GRACE_PERIOD", "10s")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if !deps.is_empty() {
        c.env("KUBEXIT_DEATH_DEPS", deps);
    }
    for (k, v) in &tool.env {
        c.env(k, v);
    }
    c.spawn().expect("spawn container")
}

fn wait_exit(c: &mut Child, timeout: Duration) -> bool {
    wait_until(timeout, || c.try_wait().ok().flatten().is_some())
}

fn fresh_dir(base: &Path, tag: &str) -> PathBuf {
    let d = base.join(tag);
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(d.join("graveyard")).unwrap();
    d
}

/// The arguments of a container's command: `-- CMD ARGS` for sexton, `CMD ARGS` for kubexit.
fn command_args<'a>(tool: &Tool, cmd: &[&'a str]) -> Vec<&'a str> {
    std::iter::once("--")
        .chain(cmd.iter().copied())
        .skip(usize::from(tool.label == "kubexit"))
        .collect()
}

/// `n` sidecars of `main` in graveyard `gy`, each recording when it was told to stop.
fn spawn_sidecars(o: &Opts, tool: &Tool, d: &Path, n: usize) -> Vec<Child> {
    let child = o.child.to_str().unwrap();
    let gy = d.join("graveyard");
    (0..n)
        .map(|i| {
            let (t, r) = (d.join(format!("term-{i}")), d.join(format!("ready-{i}")));
            let cmd = [child, "term", t.to_str().unwrap(), r.to_str().unwrap()];
            container(
                tool,
                &format!("side-{i}"),
                &gy,
                "main",
                &command_args(tool, &cmd),
                true,
            )
        })
        .collect()
}

/// Runs `main` to its exit and waits for the sidecars; per sidecar, how long after the
/// main's exit it was told to stop (ns), or None if a repetition did not complete.
fn run_main(o: &Opts, tool: &Tool, d: &Path, sidecars: &mut [Child]) -> Option<Vec<i64>> {
    let child = o.child.to_str().unwrap();
    let m = d.join("main-exit");
    let cmd = [child, "exit", m.to_str().unwrap()];
    let mut main = container(
        tool,
        "main",
        &d.join("graveyard"),
        "",
        &command_args(tool, &cmd),
        true,
    );
    let mut ok = wait_exit(&mut main, Duration::from_secs(30));
    for s in sidecars.iter_mut() {
        ok &= wait_exit(s, Duration::from_secs(30));
    }
    let _ = main.wait();
    let exit = read_ns(&m)?;
    let terms: Option<Vec<i64>> = (0..sidecars.len())
        .map(|i| read_ns(&d.join(format!("term-{i}"))).map(|t| t - exit))
        .collect();
    terms.filter(|_| ok)
}

/// Reaction latency of `n` sidecars depending on one main, with `unrelated` other
/// tombstones in the graveyard. Returns per repetition (first, last) sidecar latency in ns.
fn reaction(
    o: &Opts,
    tool: &Tool,
    base: &Path,
    n: usize,
    unrelated: usize,
    reps: usize,
) -> Vec<(i64, i64)> {
    let mut out = Vec::with_capacity(reps);
    let mut failures = 0;
    for rep in 0..reps {
        let d = fresh_dir(base, &format!("{}-{n}-{unrelated}-{rep}", tool.label));
        for i in 0..unrelated {
            fs::write(d.join("graveyard").join(format!("other-{i}")), "{\"Born\":\"2026-01-01T00:00:00Z\",\"Died\":\"2026-01-01T00:00:01Z\",\"ExitCode\":0}\n").unwrap();
        }
        let mut sidecars = spawn_sidecars(o, tool, &d, n);
        let ready = wait_until(Duration::from_secs(30), || {
            (0..n).all(|i| d.join(format!("ready-{i}")).exists())
        });
        assert!(ready, "{}: sidecars not ready", tool.label);
        match run_main(o, tool, &d, &mut sidecars) {
            Some(lat) => out.push((*lat.iter().min().unwrap(), *lat.iter().max().unwrap())),
            None => {
                failures += 1;
                for s in &mut sidecars {
                    let _ = s.kill();
                }
            }
        }
        for mut s in sidecars {
            let _ = s.wait();
        }
        let _ = fs::remove_dir_all(&d);
    }
    if failures > 0 {
        eprintln!(
            "  {}: {failures} of {reps} repetitions did not complete",
            tool.label
        );
    }
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0 * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn stats_us(ns: &[i64]) -> Value {
    let mut v: Vec<f64> = ns.iter().map(|x| *x as f64 / 1000.0).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    json!({
        "n": v.len(),
        "p50": percentile(&v, 50.0), "p90": percentile(&v, 90.0),
        "p99": percentile(&v, 99.0), "max": v.last().copied().unwrap_or(f64::NAN),
        "samples_us": v,
    })
}

/// The wrapper's PID: the child of `unshare`.
fn wrapper_of(unshare: u32) -> Option<i32> {
    let children = fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// A `Key:   N kB` field of a /proc/PID file (`status`, `smaps_rollup`).
fn proc_kb(pid: i32, file: &str, key: &str) -> u64 {
    let s = fs::read_to_string(format!("/proc/{pid}/{file}")).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn status_kb(pid: i32, key: &str) -> u64 {
    proc_kb(pid, "status", key)
}

fn smaps_kb(pid: i32, key: &str) -> u64 {
    proc_kb(pid, "smaps_rollup", key)
}

/// CPU time of every thread of `pid`, in ns (schedstat: exact, not in clock ticks).
fn cpu_ns(pid: i32) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

/// Idle supervision: a sidecar (death dep on a live main) per configuration, all at once.
fn idle(o: &Opts, configs: &[Tool], base: &Path) -> BTreeMap<String, Value> {
    let child = o.child.to_str().unwrap();
    let mut pods = vec![];
    for t in configs {
        let d = fresh_dir(base, &format!("idle-{}", t.label));
        let gy = d.join("graveyard");
        let skip = usize::from(t.label == "kubexit");
        let args: Vec<&str> = ["--", child, "idle"].iter().skip(skip).copied().collect();
        let main = container(t, "main", &gy, "", &args, true);
        assert!(
            wait_until(Duration::from_secs(10), || gy.join("main").exists()),
            "{}: main not born",
            t.label
        );
        let side = container(t, "side", &gy, "main", &args, true);
        assert!(
            wait_until(Duration::from_secs(10), || gy.join("side").exists()),
            "{}: sidecar not born",
            t.label
        );
        let pid = wrapper_of(side.id()).expect("wrapper pid");
        pods.push((t.label, d, main, side, pid));
    }
    std::thread::sleep(Duration::from_secs(2)); // settle: start-up work is not idle work
    let before: Vec<(u64, u64, u64)> = pods
        .iter()
        .map(|p| (cpu_ns(p.4), status_kb(p.4, "VmRSS:"), ctx_switches(p.4)))
        .collect();
    eprintln!("  idle window: {} s", o.idle_secs);
    std::thread::sleep(Duration::from_secs(o.idle_secs));
    let mut res = BTreeMap::new();
    for (i, (label, d, mut main, mut side, pid)) in pods.into_iter().enumerate() {
        let cpu = cpu_ns(pid).saturating_sub(before[i].0);
        let ctxsw = ctx_switches(pid).saturating_sub(before[i].2);
        let threads = fs::read_dir(format!("/proc/{pid}/task"))
            .map(|r| r.count())
            .unwrap_or(0);
        res.insert(
            label.to_string(),
            json!({
                "rss_start_kb": before[i].1,
                "rss_steady_kb": status_kb(pid, "VmRSS:"),
                "rss_peak_kb": status_kb(pid, "VmHWM:"),
                "pss_kb": smaps_kb(pid, "Pss:"),
                "private_kb": smaps_kb(pid, "Private_Dirty:") + smaps_kb(pid, "Private_Clean:"),
                "cpu_ms": cpu as f64 / 1e6,
                "ctxsw": ctxsw,
                "threads": threads,
                "window_s": o.idle_secs,
            }),
        );
        let _ = side.kill();
        let _ = main.kill();
        let _ = side.wait();
        let _ = main.wait();
        let _ = fs::remove_dir_all(&d);
    }
    res
}

/// Time from spawning the wrapper to the child's first instruction, in ns.
fn start_overhead(o: &Opts, tool: Option<&Tool>, base: &Path, reps: usize) -> Vec<i64> {
    let child = o.child.to_str().unwrap();
    let d = fresh_dir(
        base,
        &format!("start-{}", tool.map_or("direct", |t| t.label)),
    );
    let gy = d.join("graveyard");
    let mark = d.join("start");
    let mut v = vec![];
    for _ in 0..reps {
        let _ = fs::remove_file(&mark);
        let t0 = now_ns();
        let mut c = match tool {
            None => Command::new(child)
                .args(["start", mark.to_str().unwrap()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
            Some(t) => {
                let args: Vec<&str> = ["--", child, "start", mark.to_str().unwrap()]
                    .iter()
                    .skip(usize::from(t.label == "kubexit"))
                    .copied()
                    .collect();
                container(t, "app", &gy, "", &args, false)
            }
        };
        let _ = c.wait();
        if let Some(t1) = read_ns(&mark) {
            v.push(t1 - t0);
        }
    }
    let _ = fs::remove_dir_all(&d);
    v
}

fn sizes(bin: &Path, base: &Path) -> Value {
    let d = fresh_dir(base, "layer");
    let name = bin.file_name().unwrap().to_str().unwrap();
    fs::copy(bin, d.join(name)).unwrap();
    let sh = |cmd: String| -> u64 {
        let o = Command::new("sh").arg("-c").arg(cmd).output().unwrap();
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let dir = d.to_str().unwrap();
    let v = json!({
        "binary_bytes": fs::metadata(bin).unwrap().len(),
        "layer_tar_bytes": sh(format!("tar -C {dir} -cf - {name} | wc -c")),
        "layer_tar_gz_bytes": sh(format!("tar -C {dir} -cf - {name} | gzip -9 | wc -c")),
    });
    let _ = fs::remove_dir_all(&d);
    v
}

/// Context switches (voluntary + involuntary) of every thread of `pid`: how often the
/// process went to sleep or was preempted, i.e. about one per wake-up.
fn ctx_switches(pid: i32) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("status")).ok())
        .map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// Busy CPU time of the whole machine so far, in ns (/proc/stat, every core, all but idle
/// and iowait): subtracting the processes we know of leaves what other jobs used.
fn machine_busy_ns() -> u64 {
    let s = fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = s
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|x| x.parse().ok())
        .collect();
    if v.len() < 8 {
        return 0;
    }
    let hz = 100; // USER_HZ on Linux
    (v.iter().sum::<u64>() - v[3] - v[4]) * 1_000_000_000 / hz
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parses the generator's `key=value` summary line.
fn kv(out: &str, key: &str) -> f64 {
    out.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A pod in `gy`: a main container (idle child) and a sidecar with a death dependency on
/// it. Returns (main, sidecar, the sidecar's wrapper PID).
fn pod(o: &Opts, t: &Tool, gy: &Path, side: &str) -> (Child, Child, i32) {
    let child = o.child.to_str().unwrap();
    let skip = usize::from(t.label == "kubexit");
    let args: Vec<&str> = ["--", child, "idle"].iter().skip(skip).copied().collect();
    let main = container(t, "main", gy, "", &args, true);
    assert!(
        wait_until(Duration::from_secs(10), || gy.join("main").exists()),
        "{}: main not born",
        t.label
    );
    let sc = container(t, side, gy, "main", &args, true);
    assert!(
        wait_until(Duration::from_secs(10), || gy.join(side).exists()),
        "{}: sidecar not born",
        t.label
    );
    let pid = wrapper_of(sc.id()).expect("wrapper pid");
    (main, sc, pid)
}

/// Waits (at most 5 s) until the wrapper has caught up with the graveyard: less than 0.2 ms
/// of CPU in 100 ms, so that a backlog of events (the removal of the files of a `create`
/// window) is not counted in the next window.
fn quiesce(pid: i32) {
    let end = Instant::now() + Duration::from_secs(5);
    let mut last = cpu_ns(pid);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let now = cpu_ns(pid);
        if now.saturating_sub(last) < 200_000 || Instant::now() > end {
            return;
        }
        last = now;
    }
}

/// Other jobs' load (cores) above which a churn window counts as disturbed.
const DISTURBED: f64 = 0.25;

/// One churn window: the generator at `rate` for `o.churn_secs`, the wrapper's CPU over it.
fn churn_window(
    o: &Opts,
    t: &Tool,
    gy: &Path,
    pid: i32,
    side: &mut Child,
    mode: &str,
    rate: u32,
) -> Value {
    let (c0, s0, m0) = (cpu_ns(pid), ctx_switches(pid), machine_busy_ns());
    let t0 = Instant::now();
    let out = Command::new(o.churn.as_ref().unwrap())
        .arg(gy)
        .arg(rate.to_string())
        .arg(o.churn_secs.to_string())
        .arg(mode)
        .stderr(Stdio::inherit())
        .output()
        .expect("run the generator");
    let wall = t0.elapsed().as_secs_f64();
    let (c1, s1, m1) = (cpu_ns(pid), ctx_switches(pid), machine_busy_ns());
    let alive = side.try_wait().ok().flatten().is_none();
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    let (files, elapsed_s) = (kv(&out, "files"), kv(&out, "elapsed_ns") / 1e9);
    let gen_cpu = kv(&out, "cpu_ns");
    let cpu = c1.saturating_sub(c0) as f64;
    let other = (m1.saturating_sub(m0) as f64 - cpu - gen_cpu).max(0.0) / 1e9 / wall;
    let row = json!({
        "tool": t.label, "mode": mode, "rate": rate,
        "files": files, "elapsed_s": elapsed_s,
        "achieved_per_s": files / elapsed_s,
        "late_files": kv(&out, "late"),
        "cpu_ms": cpu / 1e6,
        "cpu_pct": cpu / 1e9 / wall * 100.0,
        "cpu_us_per_1000": cpu / 1e3 / (files / 1000.0),
        "ctxsw_per_s": s1.saturating_sub(s0) as f64 / wall,
        "generator_cpu_pct": gen_cpu / 1e9 / wall * 100.0,
        "other_load_cores": other,
        "window_s": wall,
        "sidecar_alive": alive,
    });
    eprintln!(
        "  {:<15} {mode:<6} {rate:>5}/s: achieved {:>6.0}/s, wrapper {:>6.2}% of a core, {:>7.0} CPU-µs/1000 files, {:>6.0} ctx switches/s, other load {:.2} cores{}",
        t.label,
        row["achieved_per_s"].as_f64().unwrap_or(f64::NAN),
        row["cpu_pct"].as_f64().unwrap_or(f64::NAN),
        row["cpu_us_per_1000"].as_f64().unwrap_or(f64::NAN),
        row["ctxsw_per_s"].as_f64().unwrap_or(f64::NAN),
        other,
        if alive { "" } else { "  SIDECAR EXITED" }
    );
    row
}

const CHURN_RATES: [u32; 3] = [1000, 5000, 8500];

/// CPU of a sidecar's wrapper while a generator creates (`create`) or creates and removes
/// (`cycle`) unrelated files in its graveyard at steady rates. One tool at a time, so that
/// on a small machine the tools do not batch each other's wake-ups.
fn churn(o: &Opts, tools: &[Tool], base: &Path) -> Vec<Value> {
    let generator = o
        .churn
        .as_ref()
        .expect("--churn BIN (bench/in-pod/churn.c; bench/in-pod/run.sh builds it)");
    let mut rows = vec![];
    for t in tools {
        let d = fresh_dir(base, &format!("churn-{}", t.label));
        let gy = d.join("graveyard");
        let (mut main, mut side, pid) = pod(o, t, &gy, "side");
        std::thread::sleep(Duration::from_secs(1)); // start-up work is not churn work
        for mode in ["create", "cycle"] {
            for rate in CHURN_RATES {
                // a window during which other jobs used the machine is measured again once;
                // the less disturbed of the two is kept
                let mut best: Option<Value> = None;
                for attempt in 0..2 {
                    let row = churn_window(o, t, &gy, pid, &mut side, mode, rate);
                    let other = row["other_load_cores"].as_f64().unwrap_or(0.0);
                    if mode == "create" {
                        let _ = Command::new(generator)
                            .arg(&gy)
                            .args(["0", "0", "clean"])
                            .output();
                    }
                    quiesce(pid);
                    let keep = best.as_ref().is_none_or(|b| {
                        other < b["other_load_cores"].as_f64().unwrap_or(f64::INFINITY)
                    });
                    if keep {
                        best = Some(row);
                    }
                    if other <= DISTURBED || attempt == 1 {
                        break;
                    }
                    eprintln!("    (other jobs used {other:.2} cores: measuring again)");
                }
                let mut row = best.unwrap();
                row["disturbed"] =
                    json!(row["other_load_cores"].as_f64().unwrap_or(0.0) > DISTURBED);
                rows.push(row);
            }
        }
        let _ = side.kill();
        let _ = main.kill();
        let _ = side.wait();
        let _ = main.wait();
        let _ = fs::remove_dir_all(&d);
    }
    rows
}

/// The CPU section: churn, then (unless the full run measured it already) idle.
fn cpu_section(o: &Opts, tools: &[Tool], base: &Path, idle_done: Option<&Value>) -> Value {
    let load_before = loadavg();
    let started = Instant::now();
    eprintln!(
        "CPU under graveyard churn: {} s per rate, load average {load_before}",
        o.churn_secs
    );
    let rows = churn(o, tools, base);
    let idle_res = match idle_done {
        Some(v) => {
            let mut m = serde_json::Map::new();
            for t in tools {
                if let Some(x) = v.get(t.label) {
                    m.insert(t.label.into(), x.clone());
                }
            }
            Value::Object(m)
        }
        None => {
            eprintln!("CPU idle");
            let m0 = machine_busy_ns();
            let t0 = Instant::now();
            let mut v = json!(idle(o, tools, base));
            let other =
                (machine_busy_ns().saturating_sub(m0) as f64 / 1e9 / t0.elapsed().as_secs_f64())
                    .max(0.0);
            v["machine_busy_cores"] = json!(other);
            v
        }
    };
    eprintln!("CPU section: {:.0} s", started.elapsed().as_secs_f64());
    json!({
        "churn": rows,
        "idle": idle_res,
        "churn_secs": o.churn_secs,
        "section_s": started.elapsed().as_secs_f64(),
        "load_before": load_before,
        "load_after": loadavg(),
        "labels": tools.iter().map(|t| t.label).collect::<Vec<_>>(),
    })
}

fn machine() -> Value {
    let cpu = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpu
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("?")
        .trim()
        .to_string();
    let sh = |c: &str| {
        String::from_utf8_lossy(&Command::new("sh").arg("-c").arg(c).output().unwrap().stdout)
            .trim()
            .to_string()
    };
    json!({
        "cpu": model,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "kernel": sh("uname -r"),
        "mem": sh("free -g | awk '/Mem:/{print $2\" GiB\"}'"),
        "tmpfs": "/dev/shm",
        "disk_fs": sh("stat -f -c %T /var/tmp"),
        "sexton_commit": sh("git rev-parse --short HEAD"),
        "sexton_uncommitted": sh("git status --porcelain -- src Cargo.toml Cargo.lock | awk '{print $2}' | tr '\\n' ' '"),
        "loadavg": loadavg(),
    })
}

/// The configurations measured: kubexit, sexton in each watch mode, and optional builds.
struct Tools {
    kubexit: Tool,
    sexton: Tool,
    sexton_inotify: Tool,
    sexton_poll: Tool,
    sexton_poll100: Tool,
    musl: Option<Tool>,
    slim: Option<Tool>,
    old: Option<Tool>,
}

impl Tools {
    fn new(o: &Opts) -> Tools {
        let tool = |label, bin: &PathBuf, env: Vec<(&'static str, String)>| Tool {
            label,
            bin: bin.clone(),
            env,
        };
        let poll = || ("KUBEXIT_WATCH", "poll".to_string());
        Tools {
            kubexit: tool("kubexit", &o.kubexit, vec![]),
            sexton: tool("sexton", &o.sexton, vec![]),
            sexton_inotify: tool(
                "sexton-inotify",
                &o.sexton,
                vec![("KUBEXIT_WATCH", "inotify".into())],
            ),
            sexton_poll: tool("sexton-poll", &o.sexton, vec![poll()]),
            sexton_poll100: tool(
                "sexton-poll-100ms",
                &o.sexton,
                vec![poll(), ("KUBEXIT_POLL_INTERVAL", "100ms".into())],
            ),
            musl: o.musl.as_ref().map(|b| tool("sexton-musl", b, vec![])),
            slim: o.slim.as_ref().map(|b| tool("sexton-slim", b, vec![])),
            old: o.old.as_ref().map(|b| tool("sexton-old", b, vec![])),
        }
    }

    /// The CPU section: kubexit, sexton in both watch modes, and the earlier build if given.
    fn cpu(&self) -> Vec<Tool> {
        let mut v = vec![
            self.kubexit.clone(),
            self.sexton.clone(),
            self.sexton_inotify.clone(),
        ];
        v.extend(self.old.clone());
        v
    }

    /// The reaction and start sections: kubexit, sexton, and the optional builds.
    fn main(&self) -> Vec<&Tool> {
        let mut v = vec![&self.kubexit, &self.sexton, &self.sexton_inotify];
        v.extend(self.musl.iter().chain(self.slim.iter()));
        v
    }

    fn idle(&self) -> Vec<Tool> {
        let mut v = vec![
            self.kubexit.clone(),
            self.sexton.clone(),
            self.sexton_inotify.clone(),
            self.sexton_poll.clone(),
            self.sexton_poll100.clone(),
        ];
        v.extend(
            self.musl
                .clone()
                .into_iter()
                .chain(self.slim.clone())
                .chain(self.old.clone()),
        );
        v
    }
}

/// Repetitions of each section.
struct Reps {
    reaction: usize,
    poll: usize,
    /// (sidecars, repetitions)
    scale: Vec<(usize, usize)>,
    unrelated: usize,
    start: usize,
}

impl Reps {
    fn new(quick: bool) -> Reps {
        match quick {
            true => Reps {
                reaction: 20,
                poll: 10,
                scale: vec![(10, 3), (50, 2)],
                unrelated: 5,
                start: 20,
            },
            false => Reps {
                reaction: 200,
                poll: 100,
                scale: vec![(10, 30), (50, 10)],
                unrelated: 50,
                start: 200,
            },
        }
    }
}

fn latencies(v: &[(i64, i64)], pick: fn(&(i64, i64)) -> i64) -> Value {
    stats_us(&v.iter().map(pick).collect::<Vec<_>>())
}

fn last(x: &(i64, i64)) -> i64 {
    x.1
}

fn first(x: &(i64, i64)) -> i64 {
    x.0
}

/// Reaction latency on tmpfs for every main configuration, and poll mode.
fn reaction_section(o: &Opts, tools: &Tools, reps: &Reps, shm: &Path) -> Value {
    eprintln!("reaction latency, tmpfs graveyard, {} reps", reps.reaction);
    let mut lat = serde_json::Map::new();
    for t in tools.main() {
        let v = reaction(o, t, shm, 1, 0, reps.reaction);
        lat.insert(t.label.into(), latencies(&v, last));
    }
    eprintln!("reaction latency, poll mode, {} reps", reps.poll);
    let v = reaction(o, &tools.sexton_poll100, shm, 1, 0, reps.poll);
    lat.insert(tools.sexton_poll100.label.into(), latencies(&v, last));
    Value::Object(lat)
}

/// The percentiles of the reaction section, for `--only-reaction`.
fn print_reaction_summary(reaction: &Value) {
    let summary: serde_json::Map<_, _> = reaction
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                json!({"p50": v["p50"], "p90": v["p90"], "p99": v["p99"], "max": v["max"]}),
            )
        })
        .collect();
    println!("{}", serde_json::to_string_pretty(&summary).unwrap());
}

/// Reaction latency with the graveyard on disk.
fn disk_section(o: &Opts, tools: &Tools, reps: &Reps, disk: &Path) -> Value {
    eprintln!(
        "reaction latency, graveyard on disk ({}), {} reps",
        machine()["disk_fs"],
        reps.poll
    );
    let mut r = serde_json::Map::new();
    for t in [&tools.kubexit, &tools.sexton] {
        let v = reaction(o, t, disk, 1, 0, reps.poll);
        r.insert(t.label.into(), latencies(&v, last));
    }
    Value::Object(r)
}

/// Many sidecars on one main, and a graveyard full of unrelated tombstones.
fn scale_section(o: &Opts, tools: &Tools, reps: &Reps, shm: &Path) -> Value {
    let mut sc = serde_json::Map::new();
    for (n, r) in &reps.scale {
        eprintln!("scale: {n} sidecars, {r} reps");
        for t in [&tools.kubexit, &tools.sexton] {
            let v = reaction(o, t, shm, *n, 0, *r);
            sc.insert(format!("{}-{n}-last", t.label), latencies(&v, last));
            sc.insert(format!("{}-{n}-first", t.label), latencies(&v, first));
        }
    }
    eprintln!("scale: 1000 unrelated tombstones, {} reps", reps.unrelated);
    for t in [&tools.kubexit, &tools.sexton] {
        let v = reaction(o, t, shm, 1, 1000, reps.unrelated);
        sc.insert(format!("{}-unrelated1000", t.label), latencies(&v, last));
    }
    Value::Object(sc)
}

/// What wrapping a command costs at start, against running it directly.
fn start_section(o: &Opts, tools: &Tools, reps: &Reps, shm: &Path) -> Value {
    eprintln!("start overhead");
    let mut st = serde_json::Map::new();
    st.insert(
        "direct".into(),
        stats_us(&start_overhead(o, None, shm, reps.start)),
    );
    for t in tools
        .main()
        .into_iter()
        .filter(|t| t.label != "sexton-inotify")
    {
        st.insert(
            t.label.into(),
            stats_us(&start_overhead(o, Some(t), shm, reps.start)),
        );
    }
    Value::Object(st)
}

fn size_section(o: &Opts, tools: &Tools, shm: &Path) -> Value {
    let mut size = json!({ "kubexit": sizes(&o.kubexit, shm), "sexton": sizes(&o.sexton, shm) });
    for t in tools.musl.iter().chain(tools.slim.iter()) {
        size[t.label] = sizes(&t.bin, shm);
    }
    size
}

/// `--only-cpu`: the CPU section alone, merged into the results of the last full run.
fn only_cpu(o: &Opts, tools: &Tools, shm: &Path) {
    let cpu = cpu_section(o, &tools.cpu(), shm, None);
    let _ = fs::remove_dir_all(shm);
    let path = o.out.join("results.json");
    let mut r: Value = fs::read_to_string(&path)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_else(|| json!({}));
    r["cpu"] = cpu;
    r["cpu"]["machine"] = machine();
    fs::write(&path, serde_json::to_string_pretty(&r).unwrap()).unwrap();
    eprintln!("wrote {} (cpu section)", path.display());
}

fn main() {
    // `cargo test --all-targets` runs bench binaries too: without arguments, do nothing
    if !std::env::args().any(|a| a == "--kubexit") {
        eprintln!(
            "compare: run it through bench/in-pod/run.sh (it builds kubexit and passes --kubexit); nothing to do"
        );
        return;
    }
    let o = opts();
    fs::create_dir_all(&o.out).unwrap();
    let shm = PathBuf::from("/dev/shm/sexton-bench");
    let disk = PathBuf::from("/var/tmp/sexton-bench");
    let tools = Tools::new(&o);
    let reps = Reps::new(o.quick);
    if o.only_cpu {
        return only_cpu(&o, &tools, &shm);
    }
    let mut r = serde_json::Map::new();
    r.insert("machine".into(), machine());
    r.insert("reaction".into(), reaction_section(&o, &tools, &reps, &shm));
    if o.only_reaction {
        return print_reaction_summary(&r["reaction"]);
    }
    r.insert(
        "reaction_disk".into(),
        disk_section(&o, &tools, &reps, &disk),
    );
    r.insert("scale".into(), scale_section(&o, &tools, &reps, &shm));
    r.insert("start".into(), start_section(&o, &tools, &reps, &shm));
    eprintln!("idle supervision");
    let idle_res = json!(idle(&o, &tools.idle(), &shm));
    r.insert("idle".into(), idle_res.clone());
    let mut cpu = cpu_section(&o, &tools.cpu(), &shm, Some(&idle_res));
    cpu["machine"] = machine();
    r.insert("cpu".into(), cpu);
    r.insert("size".into(), size_section(&o, &tools, &shm));
    let _ = fs::remove_dir_all(&shm);
    let _ = fs::remove_dir_all(&disk);
    let path = o.out.join("results.json");
    fs::write(
        &path,
        serde_json::to_string_pretty(&Value::Object(r)).unwrap(),
    )
    .unwrap();
    eprintln!("wrote {}", path.display());
}
