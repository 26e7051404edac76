//! The controllers measured, each a real process: sexton's `kubectl-sexton controller`, and
//! OpenKruise's manager (kruise-manager, built from its Go module by bench/lib/kruise/build.sh,
//! started by bench/lib/kruise.sh, which bench/completion/run.sh shares) with only its
//! SidecarTerminator enabled among the pod controllers that need no CRD.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::{Result, ctx};

#[derive(Debug, Clone, Serialize)]
pub enum Kind {
    /// `kubectl-sexton controller`; `controllers`: its `--controllers` (None: the default,
    /// both); `concurrency`: its `--concurrency` (None: the default, 8)
    Sexton {
        controllers: Option<String>,
        concurrency: Option<u16>,
    },
    /// kruise-manager; `qps`: its `--rest-config-qps`/`--rest-config-burst` (None: its defaults,
    /// 30/50); `launcher`: bench/lib/kruise.sh, whose `run` adds the flags and environment
    /// the manager needs and then becomes the manager (exec: the PID measured is its)
    Kruise {
        qps: Option<(u32, u32)>,
        launcher: PathBuf,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct Contender {
    /// A short name for tables and files.
    pub label: String,
    pub kind: Kind,
    pub bin: PathBuf,
}

pub struct Running {
    pub child: Child,
    pub pid: u32,
    pub metrics: String,
    pub health: String,
    pub log: PathBuf,
    pub started: Instant,
}

impl Contender {
    /// The command line, for the report.
    pub fn describe(&self, quick: &str) -> String {
        match &self.kind {
            Kind::Sexton {
                controllers,
                concurrency,
            } => format!(
                "kubectl-sexton controller --quick-exit-image {quick}{}{}",
                controllers
                    .as_ref()
                    .map(|c| format!(" --controllers {c}"))
                    .unwrap_or_default(),
                concurrency
                    .map(|c| format!(" --concurrency {c}"))
                    .unwrap_or_default()
            ),
            Kind::Kruise { qps, launcher } => format!(
                "kruise-manager as `{} run` starts it (SidecarTerminator on, no leader election){}",
                launcher.display(),
                qps.map(|(q, b)| format!(" --rest-config-qps={q} --rest-config-burst={b}"))
                    .unwrap_or_default()
            ),
        }
    }

    pub fn start(&self, kubeconfig: &Path, quick: &str, work: &Path) -> Result<Running> {
        // (the webhook's port is kruise's only: its launcher's own pick would cost a Python
        // start, which the start-to-ready time would include)
        let [m, h, webhook] = testbed::free_ports();
        let metrics = format!("127.0.0.1:{m}");
        let health = format!("127.0.0.1:{h}");
        let log = work.join(format!("{}.log", self.label));
        let out =
            std::fs::File::create(&log).map_err(ctx(format!("creating {}", log.display())))?;
        let mut cmd = match &self.kind {
            Kind::Sexton { .. } => Command::new(&self.bin),
            Kind::Kruise { launcher, .. } => {
                let certs = work.join(format!("{}-certs", self.label));
                let mut c = Command::new(launcher);
                c.arg("run")
                    .arg(&self.bin)
                    .arg(certs)
                    .env("WEBHOOK_PORT", webhook.to_string());
                c
            }
        };
        cmd.env("KUBECONFIG", kubeconfig)
            .stdin(Stdio::null())
            .stdout(out.try_clone().map_err(ctx("log file"))?)
            .stderr(out);
        match &self.kind {
            Kind::Sexton {
                controllers,
                concurrency,
            } => {
                cmd.arg("controller")
                    .arg("--kubeconfig")
                    .arg(kubeconfig)
                    .args(["--quick-exit-image", quick])
                    .args(["--metrics-addr", &metrics, "--health-addr", &health]);
                if let Some(c) = controllers {
                    cmd.args(["--controllers", c]);
                }
                if let Some(c) = concurrency {
                    cmd.args(["--concurrency", &c.to_string()]);
                }
            }
            Kind::Kruise { qps, .. } => {
                cmd.args([
                    format!("--metrics-addr={metrics}"),
                    format!("--health-probe-addr={health}"),
                ]);
                if let Some((q, b)) = qps {
                    cmd.arg(format!("--rest-config-qps={q}"))
                        .arg(format!("--rest-config-burst={b}"));
                }
            }
        }
        let child = cmd
            .spawn()
            .map_err(ctx(format!("starting {}", self.bin.display())))?;
        let pid = child.id();
        Ok(Running {
            child,
            pid,
            metrics,
            health,
            log,
            started: Instant::now(),
        })
    }

    /// Whether the controller has its pod cache filled and reconciles: sexton's /readyz;
    /// for kruise, controller-runtime's "Starting workers" of the SidecarTerminator (logged
    /// once its pod informer has synced).
    pub async fn ready(&self, r: &Running) -> bool {
        match self.kind {
            Kind::Sexton { .. } => get(&r.health, "/readyz")
                .await
                .is_some_and(|(c, _)| c == 200),
            Kind::Kruise { .. } => std::fs::read_to_string(&r.log).is_ok_and(|l| {
                l.lines()
                    .any(|l| l.contains("Starting workers") && l.contains("sidecarterminator"))
            }),
        }
    }

    /// Waits until ready (up to `limit`), failing early if the process exits.
    pub async fn wait_ready(
        &self,
        r: &mut Running,
        limit: Duration,
    ) -> std::result::Result<Duration, NotReady> {
        let end = Instant::now() + limit;
        loop {
            if self.ready(r).await {
                return Ok(r.started.elapsed());
            }
            if let Ok(Some(status)) = r.child.try_wait() {
                return Err(self.not_ready(r, format!("exited ({status})"), true));
            }
            if Instant::now() > end {
                return Err(self.not_ready(r, format!("not ready after {limit:?}"), false));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Contender {
    /// Why `r` is not ready (it `exited`, or is late), with its log's end.
    fn not_ready(&self, r: &Running, why: String, exited: bool) -> NotReady {
        let log = std::fs::read_to_string(&r.log).unwrap_or_default();
        NotReady {
            label: self.label.clone(),
            // (a port free when picked can be taken before the manager binds it: see
            // testbed::free_ports; the caller starts it again)
            port_taken: exited && log.contains("address already in use"),
            why,
            log: r.log.clone(),
            tail: tail(&log, 12),
        }
    }
}

/// A contender that did not become ready: the error says why, with its log's last lines
/// (CI keeps the harness's output, not the log files).
#[derive(Debug, thiserror::Error)]
#[error("{label} {why} before it was ready; log: {}; its last lines:\n{tail}", log.display())]
pub struct NotReady {
    label: String,
    why: String,
    /// its log says a port it was given was taken: worth another start with other ports
    pub port_taken: bool,
    log: PathBuf,
    tail: String,
}

impl From<NotReady> for crate::error::Failed {
    fn from(e: NotReady) -> Self {
        crate::error::Failed(e.to_string())
    }
}

/// The last `n` lines of `text`, each indented.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// (status code, body) of `GET path` at `addr` (testbed's GET, off the runtime's threads).
async fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let (addr, path) = (addr.to_string(), path.to_string());
    tokio::task::spawn_blocking(move || testbed::http_get(&addr, &path).ok())
        .await
        .ok()
        .flatten()
}

impl Running {
    /// Prometheus metrics (sexton: `sexton_controller_*`; kruise: controller-runtime's).
    pub async fn metrics(&self) -> std::collections::BTreeMap<String, f64> {
        get(&self.metrics, "/metrics")
            .await
            .map(|(_, body)| testbed::parse_metrics(&body))
            .unwrap_or_default()
    }

    /// SIGTERM, then SIGKILL after 15 s.
    pub async fn stop(mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status();
        let end = Instant::now() + Duration::from_secs(15);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    /// A harness that fails half-way leaves no controller behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
