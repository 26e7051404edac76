//! What a process costs, from /proc: CPU time (`/proc/PID/stat` utime + stime, every thread,
//! exited ones included, in clock ticks), resident memory (`/proc/PID/status` VmRSS, VmHWM,
//! RssAnon) and threads; the machine's busy time (`/proc/stat`) and load average. A
//! sampler task records them every 250 ms; a phase's figures are taken between two marks.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Clock ticks per second of /proc's CPU times (USER_HZ; 100 on Linux unless configured).
pub fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ProcSample {
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    pub rss_kb: u64,
    pub hwm_kb: u64,
    pub anon_kb: u64,
    pub threads: u64,
}

pub fn proc_sample(pid: u32) -> Option<ProcSample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // fields after the command name, which may hold spaces: state is [0], utime [11], stime [12]
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Some(ProcSample {
        cpu_ticks: utime + stime,
        rss_kb: field("VmRSS:"),
        hwm_kb: field("VmHWM:"),
        anon_kb: field("RssAnon:"),
        threads: field("Threads:"),
    })
}

/// Waits until `pid` uses under `share` of a core over a second (at most `limit`, or until
/// it is gone); the seconds waited.
pub async fn until_quiet(pid: u32, share: f64, limit: Duration) -> f64 {
    let start = Instant::now();
    let clk = clk_tck();
    let Some(mut prev) = proc_sample(pid) else {
        return 0.0;
    };
    while start.elapsed() < limit {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Some(cur) = proc_sample(pid) else { break };
        if ((cur.cpu_ticks - prev.cpu_ticks) as f64 / clk) < share {
            break;
        }
        prev = cur;
    }
    start.elapsed().as_secs_f64()
}

/// (busy, total) clock ticks of the whole machine since boot.
pub fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().next() else {
        return (0, 0);
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    // idle + iowait
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One tick of the sampler: each watched process (None once gone) and the machine.
#[derive(Debug, Clone)]
pub struct Tick {
    pub at: Instant,
    pub procs: Vec<Option<ProcSample>>,
    pub machine: (u64, u64),
}

/// Samples the processes `pids` (in this order) every 250 ms until dropped.
pub struct Sampler {
    pub ticks: Arc<Mutex<Vec<Tick>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    pub fn start(pids: Vec<u32>) -> Sampler {
        let ticks: Arc<Mutex<Vec<Tick>>> = Arc::default();
        let t = ticks.clone();
        let task = tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(250));
            loop {
                every.tick().await;
                let tick = Tick {
                    at: Instant::now(),
                    procs: pids.iter().map(|p| proc_sample(*p)).collect(),
                    machine: machine_ticks(),
                };
                t.lock().unwrap().push(tick);
            }
        });
        Sampler { ticks, task }
    }

    /// Takes a tick now (a phase's exact start or end).
    pub fn mark(&self, pids: &[u32]) -> Tick {
        let tick = Tick {
            at: Instant::now(),
            procs: pids.iter().map(|p| proc_sample(*p)).collect(),
            machine: machine_ticks(),
        };
        self.ticks.lock().unwrap().push(tick.clone());
        tick
    }

    /// Ticks between two instants (inclusive).
    pub fn between(&self, from: Instant, to: Instant) -> Vec<Tick> {
        self.ticks
            .lock()
            .unwrap()
            .iter()
            .filter(|t| t.at >= from && t.at <= to)
            .cloned()
            .collect()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One process over one phase.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseCost {
    pub secs: f64,
    /// CPU time used in the phase (s).
    pub cpu_secs: f64,
    /// Average cores used (cpu_secs / secs); 1.0 is one core.
    pub cores: f64,
    pub rss_start_kb: u64,
    pub rss_end_kb: u64,
    pub rss_max_kb: u64,
    /// VmHWM at the end: the peak of the process's whole life so far.
    pub hwm_kb: u64,
    pub anon_end_kb: u64,
    pub threads_end: u64,
}

/// The cost of process number `i` of the sampler over `ticks` (first and last are the marks).
pub fn phase_cost(ticks: &[Tick], i: usize, clk: f64) -> Option<PhaseCost> {
    let first = ticks
        .iter()
        .find_map(|t| t.procs.get(i).copied().flatten())?;
    let (last_at, last) = ticks
        .iter()
        .rev()
        .find_map(|t| t.procs.get(i).copied().flatten().map(|p| (t.at, p)))?;
    let first_at = ticks
        .iter()
        .find(|t| t.procs.get(i).copied().flatten().is_some())?
        .at;
    let secs = last_at.duration_since(first_at).as_secs_f64();
    let cpu_secs = (last.cpu_ticks - first.cpu_ticks) as f64 / clk;
    let rss_max_kb = ticks
        .iter()
        .filter_map(|t| t.procs.get(i).copied().flatten())
        .map(|p| p.rss_kb)
        .max()
        .unwrap_or(0);
    Some(PhaseCost {
        secs,
        cpu_secs,
        cores: if secs > 0.0 { cpu_secs / secs } else { 0.0 },
        rss_start_kb: first.rss_kb,
        rss_end_kb: last.rss_kb,
        rss_max_kb,
        hwm_kb: last.hwm_kb,
        anon_end_kb: last.anon_kb,
        threads_end: last.threads,
    })
}

/// The machine's busy cores over `ticks` (everything: other jobs included).
pub fn machine_cores(ticks: &[Tick], cores: f64) -> f64 {
    let (Some(a), Some(b)) = (ticks.first(), ticks.last()) else {
        return 0.0;
    };
    let total = (b.machine.1 - a.machine.1) as f64;
    if total == 0.0 {
        return 0.0;
    }
    (b.machine.0 - a.machine.0) as f64 / total * cores
}

/// The number of CPUs of the machine.
pub fn ncpu() -> f64 {
    std::thread::available_parallelism()
        .map(|n| n.get() as f64)
        .unwrap_or(1.0)
}

/// Whether another engineer's webhook benchmark (bench/webhook/run.sh) is running now.
pub fn webhook_bench_running() -> bool {
    std::process::Command::new("pgrep")
        .args(["-f", "bench/webhook/run.sh"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}
