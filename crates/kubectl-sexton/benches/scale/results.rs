//! What a cluster run measured, as written to `--json` and rendered by `report.rs`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::apiserver::Activity;
use crate::contender::Kind;
use crate::ejob_e2e::EjobResult;
use crate::plan_bench::Row;
use crate::procs::PhaseCost;
use crate::window::WindowResult;

#[derive(Debug, Clone, Serialize)]
pub struct Costs {
    pub controller: Option<PhaseCost>,
    pub apiserver: Option<PhaseCost>,
    pub harness: Option<PhaseCost>,
    /// busy cores of the whole machine (other jobs included)
    pub machine_cores: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ContenderResult {
    pub label: String,
    pub command: String,
    pub kind: Kind,
    /// process start → pod cache filled (s)
    pub ready_s: f64,
    /// process start → settled (s)
    pub settled_s: f64,
    pub startup: Costs,
    pub idle: Costs,
    pub window: Costs,
    pub result: WindowResult,
    pub load_before: String,
    pub load_after: String,
    /// bench/webhook/run.sh seen running at the window's start or end
    pub webhook_bench_running: bool,
    pub waited_for_webhook_s: f64,
    pub metrics: BTreeMap<String, f64>,
    pub log_lines: usize,
    /// waited for the API server to settle (under 5 % of a core) before the window (s)
    pub waited_for_apiserver_s: f64,
    /// the controller's own histograms over the window: (p50, p99) in ms, each the upper
    /// bound of its bucket. Reconciliations (sexton's and controller-runtime's; the write
    /// included) and, for sexton, the wait from the watch event to the reconciliation
    pub reconcile_ms: Option<(f64, f64)>,
    pub queue_ms: Option<(f64, f64)>,
    /// what the API server served during the window, by its own counters
    pub apiserver: Activity,
}

#[derive(Debug, Clone, Serialize)]
pub struct EjobRun {
    pub result: EjobResult,
    pub costs: Costs,
    pub metrics: BTreeMap<String, f64>,
    pub load_before: String,
    pub load_after: String,
    pub webhook_bench_running: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SizeResult {
    pub pods: usize,
    pub create_s: f64,
    pub reset_s: Vec<f64>,
    /// "mains done" transitions per second in these windows
    pub rate_per_sec: f64,
    pub window_pods: usize,
    pub contenders: Vec<ContenderResult>,
    pub ejob: Option<EjobRun>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub started: String,
    pub finished: String,
    pub machine: String,
    pub cores: f64,
    pub note: String,
    pub kruise_version: String,
    pub concurrency: usize,
    pub window_secs: f64,
    pub rate_percent: f64,
    /// transitions per second of the second window (0: none)
    pub also_rate: f64,
    pub idle_secs: f64,
    pub drain_secs: f64,
    pub sizes: Vec<SizeResult>,
    pub plan: Vec<Row>,
}
