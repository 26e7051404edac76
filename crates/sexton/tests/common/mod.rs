//! Test harness: a "pod" is a temporary directory holding a graveyard; each "container" is
//! the real sexton binary run as PID 1 of its own PID namespace
//! (`unshare --pid --fork --mount-proc --kill-child`), sharing the graveyard. Every wait
//! is bounded; conditions are awaited, never slept on.
#![allow(dead_code)]

#[allow(unused_imports)]
pub use testbed::{
    Process as Container, Scratch, TIMEOUT, children_of, code_of, ns_pid, processes, same_pidns,
    slowdown, state_of, wait_until,
};

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const SEXTON: &str = env!("CARGO_BIN_EXE_sexton");

/// The binary the tests run: this build's, or `SEXTON_TEST_BIN` (to show that a test fails
/// against an older build: `SEXTON_TEST_BIN=/tmp/old/sexton cargo test ...`; scripts/test.sh
/// runs the tests again with the arm64 build, emulated by qemu-user through binfmt_misc).
pub fn sexton_bin() -> String {
    std::env::var("SEXTON_TEST_BIN").unwrap_or_else(|_| SEXTON.to_string())
}

/// A pod: a scratch directory holding the shared graveyard (`$root/graveyard`).
pub struct Pod {
    scratch: Scratch,
    pub graveyard: PathBuf,
}

impl std::ops::Deref for Pod {
    type Target = Scratch;
    fn deref(&self) -> &Scratch {
        &self.scratch
    }
}

impl Pod {
    pub fn new(test: &str) -> Pod {
        let scratch = Scratch::new(test);
        let graveyard = scratch.root.join("graveyard");
        Pod { scratch, graveyard }
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

    /// Runs an arbitrary command line (typically `unshare ... sexton ...`) as a container.
    pub fn spawn(&self, name: &str, c: Command) -> Container {
        self.spawn_as(name, c, true)
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

/// When sexton logged the first line containing `needle`: its own timestamp (RFC 3339, the
/// first word of each text log line). Intervals between two of sexton's actions are read
/// from these, not from the harness's clock, which a loaded machine can deschedule between
/// the event and its reading (a lower bound measured by the harness then fails).
pub fn logged_at(logs: &str, needle: &str) -> chrono::DateTime<chrono::FixedOffset> {
    let line = logs
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no log line says {needle:?}:\n{logs}"));
    let stamp = line.split_whitespace().next().unwrap_or_default();
    chrono::DateTime::parse_from_rfc3339(stamp)
        .unwrap_or_else(|e| panic!("log line without a timestamp ({e}): {line}"))
}

/// A local HTTP server that records "METHOD PATH" of each request and answers `status`.
pub fn recorder(status: u16) -> (u16, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(vec![]));
    let seen2 = seen.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = vec![];
            let mut b = [0u8; 512];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&b[..n]),
                }
            }
            let head = String::from_utf8_lossy(&buf).to_string();
            let first = head.lines().next().unwrap_or("").to_string();
            let parts: Vec<&str> = first.split_whitespace().collect();
            seen2.lock().unwrap().push(format!(
                "{} {}",
                parts.first().unwrap_or(&""),
                parts.get(1).unwrap_or(&"")
            ));
            let _ = write!(
                c,
                "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    (port, seen)
}
