//! Fault classes found in our own review of the supervisor (beyond the ones the hardening
//! issue listed), each with the real binary as PID 1 of its own PID namespace:
//! - a log pipe that nobody drains must not freeze the event loop;
//! - no descriptor sexton opens (its lock above all: a leaked lock would keep a dead
//!   container looking alive) may leak into the child;
//! - a graveyard on a filesystem without flock (NFS without a lock manager answers
//!   ENOLCK) must not stop the container from running: tombstones still work.

mod common;

use std::fs;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

#[test]
fn a_log_pipe_nobody_reads_does_not_freeze_the_supervisor() {
    let pod = Pod::new("logpipe");
    let mut c = Command::new("unshare");
    c.args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(sexton_bin())
        .args(["--", "sh", "-c", &term_recorder("term", 0)])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("KUBEXIT_NAME", "sidecar")
        .env("KUBEXIT_DEATH_DEPS", "main")
        .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
        .env("KUBEXIT_LOG_LEVEL", "debug")
        .env("POD", &pod.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        // a pipe whose read end stays open and is never read: it fills at 64 KiB
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut unread = child.stderr.take().unwrap();
    pod.wait_file("term.started");
    // main alternates between born and ready: every change the sidecar reads is a debug
    // line (~200 bytes), far more than the pipe holds
    for i in 0..3000 {
        let ready = if i % 2 == 0 {
            ",\"Ready\":\"2026-01-01T00:00:01Z\""
        } else {
            ""
        };
        pod.write_tombstone(
            "main",
            &format!("{{\"Born\":\"2026-01-01T00:00:00Z\"{ready}}}\n"),
        );
    }
    // sexton is unshare's child (PID 1 of the new namespace)
    let pid = children_of(child.id() as i32)[0];
    assert_eq!(unsafe { libc_kill(pid, 15) }, 0);
    let mut status = None;
    wait_until(Duration::from_secs(20), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    let Some(st) = status else {
        let _ = child.kill();
        panic!("sexton froze on its full log pipe: SIGTERM was never forwarded");
    };
    assert_eq!(code_of(st), 0);
    assert_eq!(pod.wait_file("term"), "TERM\n", "the child got the SIGTERM");
    // and the pipe really was full: 64 KiB sit in it, unread
    let mut bytes = vec![];
    std::io::Read::read_to_end(&mut unread, &mut bytes).unwrap();
    assert!(
        bytes.len() >= 60 * 1024,
        "only {} bytes of logs: the pipe never filled",
        bytes.len()
    );
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn no_descriptor_of_sexton_leaks_into_the_child() {
    let pod = Pod::new("fds");
    fs::create_dir_all(&pod.graveyard).unwrap();
    // what a child inherits from the test's own environment, without sexton in between
    // (no pipeline: its pipes would be sh's descriptors while ls runs)
    let list = "ls /proc/$$/fd > \"$POD/$0\"";
    let mut plain = Command::new("sh");
    plain
        .args(["-c", list, "plain"])
        .env("POD", &pod.root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    assert!(plain.status().unwrap().success());
    // a sidecar holds everything sexton opens: lock, reservations, inotify, signalfd,
    // eventfd, a lock waiter's descriptor on main's lock, a readiness probe
    let mut main = pod.container("main", &[], &["sleep", "30"]);
    pod.wait_born("main");
    let mut sidecar = pod.start(
        "sidecar",
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_READY_PROBE", "file:///"),
        ],
        &[],
        &["sh", "-c", &format!("{list}; sleep 30"), "sexton"],
        false, // not PID 1: the same environment as the plain run
    );
    let with_sexton = pod.wait_file("sexton");
    let without = fs::read_to_string(pod.path("plain")).unwrap();
    // ls itself holds one descriptor open in both runs
    assert_eq!(
        with_sexton, without,
        "descriptors the child got from sexton"
    );
    sidecar.signal(15);
    sidecar.wait();
    main.signal(15);
    main.wait();
}

/// A launcher that makes flock(2) fail with ENOLCK (as on NFS without a lock manager)
/// through a seccomp filter, then runs its arguments. The kernel really refuses the
/// call; nothing in sexton is replaced.
const NO_FLOCK_C: &str = r#"
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_flock, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOLCK),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { .len = 4, .filter = f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
        perror("seccomp");
        return 111;
    }
    execv(argv[1], argv + 1);
    perror("execv");
    return 112;
}
"#;

#[test]
fn a_graveyard_without_flock_still_works_through_tombstones() {
    let pod = Pod::new("noflock");
    let src = pod.path("noflock.c");
    fs::File::create(&src)
        .unwrap()
        .write_all(NO_FLOCK_C.as_bytes())
        .unwrap();
    let launcher = pod.path("noflock");
    let cc = Command::new("gcc")
        .arg("-o")
        .arg(&launcher)
        .arg(&src)
        .status()
        .expect("gcc");
    assert!(cc.success());
    let run = |name: &str, env: &[(&str, &str)], cmd: &[&str]| {
        let mut c = Command::new("unshare");
        c.args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            .arg(&launcher)
            .arg(sexton_bin())
            .arg("--")
            .args(cmd)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("KUBEXIT_NAME", name)
            .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
            .env("POD", &pod.root);
        for (k, v) in env {
            c.env(k, v);
        }
        pod.spawn(name, c)
    };
    let mut sidecar = run(
        "sidecar",
        &[("KUBEXIT_DEATH_DEPS", "main")],
        &["sh", "-c", &term_recorder("term", 0)],
    );
    pod.wait_file("term.started");
    sidecar.wait_log("flock is not supported");
    assert!(
        !pod.graveyard.join(".sidecar.lock").exists(),
        "no lock file where locks do not work: a free one would read as a death"
    );
    let mut main = run("main", &[], &["sh", "-c", "exit 3"]);
    assert_eq!(main.wait(), 3);
    assert_eq!(sidecar.wait(), 0, "{}", sidecar.logs());
    assert!(sidecar.logs().contains("died with exit code 3"));
}
