//! A scratch directory per test, and the real processes a test starts in it: each one's
//! stdout and stderr go to files there (`NAME.out`, `NAME.log`), printed when a test fails.
//! Every wait is bounded.

use std::fs::{self, File};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::wait::{TIMEOUT, wait_until};

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A temporary directory, removed when the test passes and kept (its logs printed) when
/// it fails.
pub struct Scratch {
    pub root: PathBuf,
}

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let root = std::env::temp_dir().join(format!(
            "sexton-it-{test}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        Scratch { root }
    }

    /// A path in the scratch directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Starts `c` as process `name`. `pidns` says that `c` is `unshare --pid --fork ...`
    /// wrapping the process of interest, so that `Process::target_pid` looks one level down.
    pub fn spawn_as(&self, name: &str, mut c: Command, pidns: bool) -> Process {
        let log = self.root.join(format!("{name}.log"));
        c.stdin(Stdio::null())
            .stdout(File::create(self.root.join(format!("{name}.out"))).unwrap())
            .stderr(File::create(&log).unwrap());
        let child = c.spawn().expect("spawn process");
        Process {
            name: name.to_string(),
            child,
            log,
            pidns,
            root: self.root.clone(),
        }
    }

    /// Runs a command as a plain process of the test's own PID namespace.
    pub fn spawn_host(&self, name: &str, c: Command) -> Process {
        self.spawn_as(name, c, false)
    }

    /// Creates a named pipe in the scratch directory: a process blocked reading it runs
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

    /// Waits for a marker file to appear and hold a whole line; returns its content.
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

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = fs::remove_dir_all(&self.root);
        } else {
            eprintln!(
                "kept scratch directory for inspection: {}",
                self.root.display()
            );
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

pub struct Process {
    pub name: String,
    pub child: std::process::Child,
    pub log: PathBuf,
    pub pidns: bool,
    root: PathBuf,
}

impl Process {
    /// Waits for the container to exit (bounded) and returns its exit code (128+N if it
    /// was killed by signal N, as a shell reports it).
    pub fn wait(&mut self) -> i32 {
        let st = self.wait_status(TIMEOUT).unwrap_or_else(|| {
            panic!(
                "process {} did not exit within {TIMEOUT:?}; log:\n{}",
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

    /// The PID of the process of interest as seen from the test (host) namespace: under
    /// `unshare --pid --fork`, unshare's child (PID 1 of the new namespace).
    pub fn target_pid(&self) -> i32 {
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
        let pid = self.target_pid();
        assert_eq!(unsafe { libc_kill(pid, sig) }, 0, "kill({pid}, {sig})");
    }
}

impl Drop for Process {
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
