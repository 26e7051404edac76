//! Test harness: a "pod" is a temporary directory holding a graveyard; each "container" is
//! the real sexton binary run as PID 1 of its own PID namespace
//! (`unshare --pid --fork --mount-proc --kill-child`), sharing the graveyard. Every wait
//! is bounded; conditions are awaited, never slept on.
#![allow(dead_code)]

pub mod kube_env;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const SEXTON: &str = env!("CARGO_BIN_EXE_sexton");

/// The binary the containers run: this build's, or `SEXTON_TEST_BIN` (to show that a
/// test fails against an older build: `SEXTON_TEST_BIN=/tmp/old/sexton cargo test ...`).
pub fn sexton_bin() -> String {
    std::env::var("SEXTON_TEST_BIN").unwrap_or_else(|_| SEXTON.to_string())
}
pub const TIMEOUT: Duration = Duration::from_secs(15);

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// Waits until `cond` holds, checking every few milliseconds, for at most `timeout`.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub struct Pod {
    pub root: PathBuf,
    pub graveyard: PathBuf,
}

impl Pod {
    pub fn new(test: &str) -> Pod {
        let root = std::env::temp_dir().join(format!(
            "sexton-it-{test}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        let graveyard = root.join("graveyard");
        Pod { root, graveyard }
    }

    /// A path in the pod's scratch area (outside the graveyard) for markers.
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Starts a container: sexton as PID 1 of a new PID namespace, with KUBEXIT_NAME and
    /// KUBEXIT_GRAVEYARD set, plus `env`, wrapping `cmd` (passed kubexit-style after `--`).
    pub fn container(&self, name: &str, env: &[(&str, &str)], cmd: &[&str]) -> Container {
        self.start(name, env, &[], cmd, true)
    }

    /// Like `container` but sexton is not PID 1 (no new PID namespace): it must be a
    /// child subreaper instead.
    pub fn plain(&self, name: &str, env: &[(&str, &str)], cmd: &[&str]) -> Container {
        self.start(name, env, &[], cmd, false)
    }

    pub fn start(
        &self,
        name: &str,
        env: &[(&str, &str)],
        args: &[&str],
        cmd: &[&str],
        pidns: bool,
    ) -> Container {
        let mut c = if pidns {
            let mut c = Command::new("unshare");
            c.args(["--pid", "--fork", "--mount-proc", "--kill-child"]);
            c.arg(sexton_bin());
            c
        } else {
            Command::new(sexton_bin())
        };
        c.args(args);
        if !cmd.is_empty() {
            c.arg("--");
            c.args(cmd);
        }
        c.env_clear()
            .env(
                "PATH",
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            )
            .env("KUBEXIT_NAME", name)
            .env("KUBEXIT_GRAVEYARD", &self.graveyard)
            .env("POD", &self.root);
        for (k, v) in env {
            c.env(k, v);
        }
        self.spawn_as(name, c, pidns)
    }

    /// Runs an arbitrary command line as a container (its stdout/stderr kept like others').
    pub fn spawn(&self, name: &str, c: Command) -> Container {
        self.spawn_as(name, c, true)
    }

    /// Runs a command as a plain process of the test's own PID namespace.
    pub fn spawn_host(&self, name: &str, c: Command) -> Container {
        self.spawn_as(name, c, false)
    }

    fn spawn_as(&self, name: &str, mut c: Command, pidns: bool) -> Container {
        let log = self.root.join(format!("{name}.log"));
        c.stdin(Stdio::null())
            .stdout(File::create(self.root.join(format!("{name}.out"))).unwrap())
            .stderr(File::create(&log).unwrap());
        let child = c.spawn().expect("spawn container");
        Container {
            name: name.to_string(),
            child,
            log,
            pidns,
            root: self.root.clone(),
        }
    }

    /// Creates a named pipe in the pod's scratch area: a child blocked reading it runs
    /// until the test writes to it.
    pub fn fifo(&self, name: &str) -> PathBuf {
        let p = self.path(name);
        assert!(
            Command::new("mkfifo").arg(&p).status().unwrap().success(),
            "mkfifo {}",
            p.display()
        );
        p
    }

    pub fn tombstone_path(&self, name: &str) -> PathBuf {
        self.graveyard.join(name)
    }

    /// The tombstone as JSON, if it exists and parses.
    pub fn tombstone(&self, name: &str) -> Option<serde_json::Value> {
        let bytes = fs::read(self.tombstone_path(name)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    pub fn wait_born(&self, name: &str) {
        assert!(
            wait_until(TIMEOUT, || self
                .tombstone(name)
                .is_some_and(|t| t.get("Born").is_some())),
            "{name} was not born in time"
        );
    }

    pub fn write_tombstone(&self, name: &str, content: &str) {
        fs::create_dir_all(&self.graveyard).unwrap();
        let tmp = self.graveyard.join(format!(".{name}.test-tmp"));
        fs::write(&tmp, content).unwrap();
        fs::rename(tmp, self.graveyard.join(name)).unwrap();
    }

    /// Writes like kubexit does: truncate in place, then write (not atomic).
    pub fn write_in_place(&self, name: &str, content: &[u8]) {
        use std::io::Write;
        fs::create_dir_all(&self.graveyard).unwrap();
        let mut f = File::create(self.graveyard.join(name)).unwrap();
        f.write_all(content).unwrap();
    }

    pub fn wait_file(&self, name: &str) -> String {
        let p = self.path(name);
        assert!(
            wait_until(TIMEOUT, || p.exists()),
            "marker {name} did not appear"
        );
        // the writer may not have finished its line yet
        let mut s = String::new();
        wait_until(Duration::from_secs(2), || {
            s = fs::read_to_string(&p).unwrap_or_default();
            s.ends_with('\n')
        });
        s
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.root);
        } else {
            eprintln!("kept pod directory for inspection: {}", self.root.display());
            if let Ok(rd) = fs::read_dir(&self.root) {
                for e in rd.flatten() {
                    if e.path().extension().is_some_and(|x| x == "log") {
                        eprintln!(
                            "--- {}:\n{}",
                            e.path().display(),
                            fs::read_to_string(e.path()).unwrap_or_default()
                        );
                    }
                }
            }
        }
    }
}

pub struct Container {
    pub name: String,
    pub child: std::process::Child,
    pub log: PathBuf,
    pub pidns: bool,
    root: PathBuf,
}

impl Container {
    /// Waits for the container to exit (bounded) and returns its exit code (128+N if it
    /// was killed by signal N, as a shell reports it).
    pub fn wait(&mut self) -> i32 {
        let st = self.wait_status(TIMEOUT).unwrap_or_else(|| {
            panic!(
                "container {} did not exit within {TIMEOUT:?}; log:\n{}",
                self.name,
                self.logs()
            )
        });
        code_of(st)
    }

    pub fn wait_status(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let mut status = None;
        wait_until(timeout, || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        status
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn logs(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn stdout(&self) -> String {
        fs::read_to_string(self.root.join(format!("{}.out", self.name))).unwrap_or_default()
    }

    pub fn wait_log(&self, needle: &str) {
        assert!(
            wait_until(TIMEOUT, || self.logs().contains(needle)),
            "log of {} never said {needle:?}:\n{}",
            self.name,
            self.logs()
        );
    }

    /// sexton's PID as seen from the test (host) namespace.
    pub fn sexton_pid(&self) -> i32 {
        let me = self.child.id() as i32;
        if !self.pidns {
            return me;
        }
        let mut found = None;
        wait_until(TIMEOUT, || {
            found = children_of(me).into_iter().next();
            found.is_some()
        });
        found.expect("unshare has no child")
    }

    pub fn signal(&self, sig: i32) {
        let pid = self.sexton_pid();
        assert_eq!(unsafe { libc_kill(pid, sig) }, 0, "kill({pid}, {sig})");
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

pub fn code_of(st: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// (pid, ppid, state) of every process.
pub fn processes() -> Vec<(i32, i32, char)> {
    let mut out = vec![];
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...; comm may contain spaces and parentheses
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid = f.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        out.push((pid, ppid, state));
    }
    out
}

pub fn children_of(pid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|p| p.1 == pid)
        .map(|p| p.0)
        .collect()
}

/// PIDs of every process in the same PID namespace as `pid`.
pub fn same_pidns(pid: i32) -> Vec<i32> {
    let Ok(ns) = fs::read_link(format!("/proc/{pid}/ns/pid")) else {
        return vec![];
    };
    processes()
        .into_iter()
        .filter(|p| fs::read_link(format!("/proc/{}/ns/pid", p.0)).is_ok_and(|n| n == ns))
        .map(|p| p.0)
        .collect()
}

/// A process's PID inside its own (innermost) PID namespace.
pub fn ns_pid(pid: i32) -> Option<i32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

pub fn state_of(pid: i32) -> Option<char> {
    processes().into_iter().find(|p| p.0 == pid).map(|p| p.2)
}

/// A shell child that records SIGTERM in $POD/<marker> and exits with `code` on it.
pub fn term_recorder(marker: &str, code: i32) -> String {
    format!(
        "trap 'echo TERM > \"$POD/{marker}\"; exit {code}' TERM; echo $$ $PPID > \"$POD/{marker}.started\"; while :; do sleep 1 & wait; done"
    )
}

pub fn exists(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok()
}
