//! The results as Markdown: the part of BENCHMARKS.md's "Controllers at scale" between its
//! `scale:start` and `scale:end` markers (bench/scale/run.sh puts it there).

use crate::contender::Kind;
use crate::results::{ContenderResult, Costs, Report, SizeResult};
use crate::stats::{Summary, thousands};

fn ms(v: f64) -> String {
    if !v.is_finite() {
        "not swapped".into()
    } else if v.abs() >= 100.0 {
        thousands(v)
    } else {
        format!("{v:.1}")
    }
}

fn mb(kb: u64) -> String {
    format!("{:.1}", kb as f64 * 1024.0 / 1e6)
}

fn title(r: &Report, c: &ContenderResult) -> String {
    let v = if r.kruise_version.is_empty() {
        String::new()
    } else {
        format!(" {}", r.kruise_version)
    };
    match &c.kind {
        Kind::Sexton {
            controllers: None,
            concurrency: None,
        } => "sexton (default: both controllers)".into(),
        Kind::Sexton {
            controllers: Some(c),
            concurrency: None,
        } => format!("sexton `--controllers {c}`"),
        Kind::Sexton {
            controllers,
            concurrency: Some(n),
        } => format!(
            "sexton `--concurrency {n}`{}",
            controllers
                .as_ref()
                .map(|c| format!(" `--controllers {c}`"))
                .unwrap_or_default()
        ),
        Kind::Kruise {
            qps: Some((q, _)), ..
        } => format!("OpenKruise{v}, client QPS {q}"),
        Kind::Kruise { qps: None, .. } => format!("OpenKruise{v}, default client QPS 30"),
    }
}

type Cell = Box<dyn Fn(&ContenderResult) -> String>;
type SizeCell = Box<dyn Fn(&SizeResult) -> String>;

fn lat(f: fn(&Summary) -> f64) -> Cell {
    Box::new(move |c| {
        c.result
            .latency_ms
            .as_ref()
            .map_or("–".into(), |s| ms(f(s)))
    })
}

fn cost(pick: fn(&ContenderResult) -> &Costs, f: fn(&crate::procs::PhaseCost) -> String) -> Cell {
    Box::new(move |c| pick(c).controller.as_ref().map_or("–".into(), f))
}

/// "≤ 16 / ≤ 512" of a (p50, p99) pair of bucket bounds; "–" if not measured.
fn pair_bound(p: Option<(f64, f64)>) -> String {
    let bound = |v: f64| {
        if v.is_finite() {
            format!("≤ {}", ms(v))
        } else {
            "above the last bucket".into()
        }
    };
    match p {
        Some((a, b)) => format!("{} / {}", bound(a), bound(b)),
        None => "–".into(),
    }
}

/// A table's first two lines: a column per contender.
fn header(r: &Report, s: &SizeResult) -> String {
    let mut out = String::from("| |");
    for c in &s.contenders {
        out.push_str(&format!(" {} |", title(r, c)));
    }
    out.push_str("\n|---|");
    for _ in &s.contenders {
        out.push_str("---:|");
    }
    out.push('\n');
    out
}

fn size_table(r: &Report, s: &SizeResult) -> String {
    let mut out = format!(
        "**{} running pods, {} per second**: {} of them reach \"mains done\" in each contender's window, {} per second ({} % of the pods per second) for {:.0} s.\n\n",
        thousands(s.pods as f64),
        thousands(s.rate_per_sec),
        thousands(s.window_pods as f64),
        thousands(s.rate_per_sec),
        (s.rate_per_sec / s.pods as f64 * 1e4).round() / 100.0,
        r.window_secs
    );
    out.push_str(&header(r, s));
    let rows: Vec<(&str, Cell)> = vec![
        ("reaction p50 (ms)", lat(|s| s.p50)),
        ("reaction p90 (ms)", lat(|s| s.p90)),
        ("reaction p99 (ms)", lat(|s| s.p99)),
        ("reaction max (ms)", lat(|s| s.max)),
        (
            "swapped / transitions",
            Box::new(|c| {
                format!(
                    "{} / {}",
                    thousands(c.result.swapped as f64),
                    thousands(c.result.transitions as f64)
                )
            }),
        ),
        (
            "watch to watch p50 / p99 (ms)",
            Box::new(|c| {
                c.result
                    .latency_watch_ms
                    .as_ref()
                    .map_or("–".into(), |s| format!("{} / {}", ms(s.p50), ms(s.p99)))
            }),
        ),
        (
            "its reconciliations p50 / p99 (ms, bucket bound; its write included)",
            Box::new(|c| pair_bound(c.reconcile_ms)),
        ),
        (
            "its queue: watch event → reconciliation p50 / p99 (ms, bucket bound)",
            Box::new(|c| pair_bound(c.queue_ms)),
        ),
        (
            "RSS idle, cache filled (MB)",
            cost(|c| &c.idle, |p| mb(p.rss_end_kb)),
        ),
        (
            "RSS max in the window (MB)",
            cost(|c| &c.window, |p| mb(p.rss_max_kb)),
        ),
        (
            "peak RSS of its life, VmHWM (MB)",
            cost(|c| &c.window, |p| mb(p.hwm_kb)),
        ),
        (
            "CPU idle (% of a core)",
            cost(|c| &c.idle, |p| format!("{:.2}", p.cores * 100.0)),
        ),
        (
            "CPU in the window (% of a core)",
            cost(|c| &c.window, |p| format!("{:.1}", p.cores * 100.0)),
        ),
        (
            "CPU per transition (ms)",
            Box::new(|c| {
                c.window.controller.as_ref().map_or("–".into(), |p| {
                    format!(
                        "{:.2}",
                        p.cpu_secs * 1e3 / c.result.transitions.max(1) as f64
                    )
                })
            }),
        ),
        (
            "start → pod cache filled (s)",
            Box::new(|c| format!("{:.2}", c.ready_s)),
        ),
        (
            "start → settled (s); CPU used (s)",
            Box::new(|c| {
                format!(
                    "{:.1}; {}",
                    c.settled_s,
                    c.startup
                        .controller
                        .as_ref()
                        .map_or("–".into(), |p| format!("{:.2}", p.cpu_secs))
                )
            }),
        ),
        (
            "threads",
            cost(|c| &c.window, |p| p.threads_end.to_string()),
        ),
        (
            "API server CPU in the window (% of a core)",
            Box::new(|c| {
                c.window
                    .apiserver
                    .as_ref()
                    .map_or("–".into(), |p| format!("{:.1}", p.cores * 100.0))
            }),
        ),
        (
            "API server CPU per transition, above its idle (ms)",
            Box::new(|c| {
                let (Some(w), Some(i)) = (&c.window.apiserver, &c.idle.apiserver) else {
                    return "–".into();
                };
                let secs = if w.cores > 0.0 {
                    w.cpu_secs / w.cores
                } else {
                    0.0
                };
                let above = w.cpu_secs - i.cores * secs;
                format!("{:.1}", above * 1e3 / c.result.transitions.max(1) as f64)
            }),
        ),
    ];
    for (name, f) in rows {
        out.push_str(&format!("| {name} |"));
        for c in &s.contenders {
            out.push_str(&format!(" {} |", f(c)));
        }
        out.push('\n');
    }
    out.push('\n');
    // the method's own error and the conditions, per contender
    out.push_str("Conditions of each window (the method's error is the status change's watch arrival minus its PATCH answer, see Method):\n\n");
    out.push_str("| | method error p50 / p99 (ms) | status PATCH round trip p50 / p99 (ms) | PATCH sent late, p99 (ms) | harness CPU (% of a core) | machine busy (cores of 2) | load average before → after | webhook benchmark running |\n|---|---:|---:|---:|---:|---:|---|---|\n");
    for c in &s.contenders {
        let w = &c.result;
        let pair = |s: &Option<Summary>| {
            s.as_ref()
                .map_or("–".into(), |s| format!("{} / {}", ms(s.p50), ms(s.p99)))
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.2} | {} → {} | {} |\n",
            title(r, c),
            pair(&w.watch_minus_answer_ms),
            pair(&w.status_rtt_ms),
            w.send_late_ms.as_ref().map_or("–".into(), |s| ms(s.p99)),
            c.window
                .harness
                .as_ref()
                .map_or("–".into(), |p| format!("{:.1}", p.cores * 100.0)),
            c.window.machine_cores,
            c.load_before,
            c.load_after,
            if c.webhook_bench_running { "yes" } else { "no" },
        ));
    }
    out.push('\n');
    out.push_str(&requests_table(r, s));
    out
}

/// What the API server served in each window, by its own counters: requests per verb and
/// resource (with its mean handling time) and watch events, everyone's (the harness's, the
/// controller's, the controller manager's).
fn requests_table(r: &Report, s: &SizeResult) -> String {
    let mut keys: Vec<(String, String)> = vec![];
    for c in &s.contenders {
        for q in &c.apiserver.requests {
            let k = (q.verb.clone(), q.resource.clone());
            // under one request a second in every window: noise (leases, discovery)
            if q.count >= c.result.secs.max(1.0) && !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    if keys.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "What the API server served during each window, by its own counters (`apiserver_request_total`, `apiserver_request_duration_seconds`, `apiserver_watch_events_*`; everyone's requests: the harness's, the controller's, the controller manager's): count, and in brackets the API server's mean handling time (ms).\n\n",
    );
    out.push_str(&header(r, s));
    for (verb, resource) in &keys {
        out.push_str(&format!("| {verb} {resource} |"));
        for c in &s.contenders {
            let q = c
                .apiserver
                .requests
                .iter()
                .find(|q| &q.verb == verb && &q.resource == resource);
            out.push_str(&match q {
                Some(q) if q.failed >= 1.0 => format!(
                    " {} ({:.1}), {} failed |",
                    thousands(q.count),
                    q.mean_ms,
                    thousands(q.failed)
                ),
                Some(q) => format!(" {} ({:.1}) |", thousands(q.count), q.mean_ms),
                None => " 0 |".into(),
            });
        }
        out.push('\n');
    }
    let mut watched: Vec<String> = vec![];
    for c in &s.contenders {
        for w in &c.apiserver.watch_events {
            if w.events >= c.result.secs.max(1.0) && !watched.contains(&w.resource) {
                watched.push(w.resource.clone());
            }
        }
    }
    for res in &watched {
        out.push_str(&format!("| watch events sent: {res} (MB) |"));
        for c in &s.contenders {
            let w = c.apiserver.watch_events.iter().find(|w| &w.resource == res);
            out.push_str(&match w {
                Some(w) => format!(" {} ({:.1}) |", thousands(w.events), w.bytes / 1e6),
                None => " 0 |".into(),
            });
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

fn ejob_table(r: &Report) -> String {
    let runs: Vec<&SizeResult> = r.sizes.iter().filter(|s| s.ejob.is_some()).collect();
    if runs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "**EphemeralJob end to end** (sexton's default controller; `parallelism` = the number of pods; times from the API server's answer to the job's creation to the harness's watch seeing a target's ephemeral container):\n\n| | ",
    );
    for s in &runs {
        out.push_str(&format!("{} targets | ", thousands(s.pods as f64)));
    }
    out.push_str("\n|---|");
    for _ in &runs {
        out.push_str("---:|");
    }
    out.push('\n');
    let secs = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.2}"));
    let rows: Vec<(&str, SizeCell)> = vec![
        (
            "first target injected (s)",
            Box::new(move |s| secs(s.ejob.as_ref().unwrap().result.first_s)),
        ),
        (
            "10 % of the targets (s)",
            Box::new(move |s| secs(s.ejob.as_ref().unwrap().result.p10_s)),
        ),
        (
            "50 % (s)",
            Box::new(move |s| secs(s.ejob.as_ref().unwrap().result.p50_s)),
        ),
        (
            "90 % (s)",
            Box::new(move |s| secs(s.ejob.as_ref().unwrap().result.p90_s)),
        ),
        (
            "every target (s)",
            Box::new(move |s| secs(s.ejob.as_ref().unwrap().result.all_s)),
        ),
        (
            "targets injected",
            Box::new(|s| {
                let e = &s.ejob.as_ref().unwrap().result;
                format!(
                    "{} of {}",
                    thousands(e.injected as f64),
                    thousands(e.targets as f64)
                )
            }),
        ),
        (
            "injections per second",
            Box::new(|s| {
                s.ejob
                    .as_ref()
                    .unwrap()
                    .result
                    .per_sec
                    .map_or("–".into(), |v| format!("{v:.0}"))
            }),
        ),
        (
            "status counts every target (s)",
            Box::new(move |s| secs(s.ejob.as_ref().unwrap().result.status_s)),
        ),
        (
            "controller CPU (% of a core); RSS max (MB)",
            Box::new(|s| {
                s.ejob
                    .as_ref()
                    .unwrap()
                    .costs
                    .controller
                    .as_ref()
                    .map_or("–".into(), |p| {
                        format!("{:.1}; {}", p.cores * 100.0, mb(p.rss_max_kb))
                    })
            }),
        ),
        (
            "API server CPU (% of a core)",
            Box::new(|s| {
                s.ejob
                    .as_ref()
                    .unwrap()
                    .costs
                    .apiserver
                    .as_ref()
                    .map_or("–".into(), |p| format!("{:.1}", p.cores * 100.0))
            }),
        ),
        (
            "EphemeralJob reconciles: count; mean duration (s)",
            Box::new(|s| {
                let m = &s.ejob.as_ref().unwrap().metrics;
                let find = |suffix: &str| {
                    m.iter()
                        .find(|(k, _)| {
                            k.starts_with("sexton_controller_reconcile_duration_seconds")
                                && k.ends_with(suffix)
                                && k.contains("ephemeraljob")
                        })
                        .map(|(_, v)| *v)
                };
                match (
                    find("_count{controller=\"ephemeraljob\"}").or_else(|| find("count")),
                    find("_sum{controller=\"ephemeraljob\"}").or_else(|| find("sum")),
                ) {
                    (Some(c), Some(sum)) if c > 0.0 => format!("{c:.0}; {:.2}", sum / c),
                    _ => "–".into(),
                }
            }),
        ),
        (
            "machine busy (cores of 2); load before → after",
            Box::new(|s| {
                let e = s.ejob.as_ref().unwrap();
                format!(
                    "{:.2}; {} → {}",
                    e.costs.machine_cores, e.load_before, e.load_after
                )
            }),
        ),
    ];
    for (name, f) in rows {
        out.push_str(&format!("| {name} |"));
        for s in &runs {
            out.push_str(&format!(" {} |", f(s)));
        }
        out.push('\n');
    }
    out.push('\n');
    out
}

pub fn markdown(r: &Report) -> String {
    let mut out = format!(
        "Measured {} – {}: {}. {}\n\nHarness: {} API calls at once while creating pods; windows of {:.0} s at {} % of the pods per second (the issue's rate) and at {} transitions per second (a rate this machine's test API server carries), {:.0} s idle before each, then until the API server has settled (under 5 % of a core), up to {:.0} s after each for the last swaps.\n\n",
        r.started,
        if r.finished.is_empty() {
            "(running)"
        } else {
            &r.finished
        },
        r.machine,
        r.note,
        r.concurrency,
        r.window_secs,
        r.rate_percent,
        r.also_rate,
        r.idle_secs,
        r.drain_secs
    );
    out.push_str("#### SidecarTerminator\n\n");
    for s in &r.sizes {
        out.push_str(&size_table(r, s));
        if !s.reset_s.is_empty() {
            out.push_str(&format!(
                "Creating the {} pods (and making them Running) took {:.1} s; re-creating a window's pods between contenders {:.1}–{:.1} s.\n\n",
                thousands(s.pods as f64),
                s.create_s,
                s.reset_s.iter().cloned().fold(f64::INFINITY, f64::min),
                s.reset_s.iter().cloned().fold(0.0, f64::max)
            ));
        }
    }
    out.push_str("#### EphemeralJob\n\n");
    out.push_str(
        "The pure planning function (`plan`, src/controller/ejob/plan.rs), in memory:\n\n",
    );
    out.push_str(&crate::plan_bench::markdown(&r.plan));
    out.push('\n');
    out.push_str(&ejob_table(r));
    out
}
