//! Process-level faults of the supervisor, each reproduced with the real binary and real
//! processes: statuses of children killed by real-time signals, signals that arrive before
//! the child exists, a child that cannot be killed, signals PID 1 must forward, and small
//! configuration and I/O edges. Every test here failed against the build before the
//! supervisor hardening (run them against another build with `SEXTON_TEST_BIN=...`).

mod common;
use common::*;

use std::ffi::OsStr;
use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::sys::signal::{Signal as NixSignal, kill};
use nix::sys::statvfs::{FsFlags, statvfs};
use nix::unistd::Pid;

/// sexton as PID 1 of a new PID namespace, like `Pod::container`, but with the whole
/// environment given here (KUBEXIT_GRAVEYARD included) and the pod directory as working
/// directory, so that a graveyard taken for a relative path lands inside the pod.
fn container_cmd(pod: &Pod, env: &[(&str, &OsStr)], cmd: &[&str]) -> Command {
    let mut c = Command::new("unshare");
    c.args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(sexton_bin())
        .arg("--")
        .args(cmd)
        .current_dir(&pod.root)
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        )
        .env("POD", &pod.root);
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// Waits (bounded) for a process the test spawned itself.
fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let mut status = None;
    wait_until(timeout, || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    status
}

/// A signal mask line of /proc/PID/status (`SigBlk`, `ShdPnd`, ...) as a bit set.
fn sigmask(pid: i32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0)
}

fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

/// SIGKILLs a process the test left behind, however the test ends (disarmed once it is
/// known to be gone, so that a reused PID is never hit).
struct KillOnDrop(Option<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = kill(Pid::from_raw(pid), NixSignal::SIGKILL);
        }
    }
}

/// Removes a scratch directory outside the pod at the end.
struct RemoveTree(Option<PathBuf>);

impl Drop for RemoveTree {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = fs::remove_dir_all(d);
        }
    }
}

fn gone(pid: i32) -> bool {
    state_of(pid).is_none_or(|s| s == 'Z' || s == 'X')
}

// ---------------------------------------------------------------------------------------
// 1. Child status lost: a child killed by a real-time signal
// ---------------------------------------------------------------------------------------

#[test]
fn child_killed_by_realtime_signal_exits_128_plus_n_with_the_signal_named() {
    let pod = Pod::new("rtdeath");
    // (number, name in the tombstone, how the child kills itself)
    let cases: &[(i32, &str, &str)] = &[
        (34, "SIGRTMIN", "sh"),
        (35, "SIGRTMIN+1", "sh"),
        (37, "SIGRTMIN+3", "sh"),
        (37, "SIGRTMIN+3", "python3"),
        (49, "SIGRTMIN+15", "sh"),
        (50, "SIGRTMAX-14", "sh"),
        (63, "SIGRTMAX-1", "python3"),
        (64, "SIGRTMAX", "sh"),
        (64, "SIGRTMAX", "python3"),
        // a classic signal, through the same path
        (10, "SIGUSR1", "sh"),
    ];
    let mut containers: Vec<(Container, i32, &str)> = cases
        .iter()
        .map(|&(n, signame, how)| {
            let name = format!("{how}-{n}");
            let c = match how {
                "sh" => pod.container(&name, &[], &["sh", "-c", &format!("kill -{n} $$")]),
                _ => pod.container(
                    &name,
                    &[],
                    &[
                        "python3",
                        "-c",
                        &format!("import os; os.kill(os.getpid(), {n})"),
                    ],
                ),
            };
            (c, n, signame)
        })
        .collect();
    for (c, n, signame) in &mut containers {
        let code = c.wait(); // the old build waited here forever (status lost)
        assert_eq!(code, 128 + *n, "{}: exit code\n{}", c.name, c.logs());
        let t = pod.tombstone(&c.name).expect("tombstone");
        assert_eq!(t["ExitCode"], 128 + *n, "{}: {t}", c.name);
        assert_eq!(t["Signal"], *signame, "{}: {t}", c.name);
        assert_eq!(t["Reason"], "signaled", "{}: {t}", c.name);
        assert!(t.get("Died").is_some(), "{}: {t}", c.name);
        assert!(
            c.logs().contains(&format!("killed by {signame}")),
            "{}: {}",
            c.name,
            c.logs()
        );
    }
}

// ---------------------------------------------------------------------------------------
// 7. A signal before the child exists started the child
// ---------------------------------------------------------------------------------------

#[test]
fn sigterm_while_waiting_for_own_lock_ends_without_starting_the_child() {
    let pod = Pod::new("lockwait");
    fs::create_dir_all(&pod.graveyard).unwrap();
    // Hold the container's own lock: sexton waits for it (up to 2 s) during its setup.
    let lock_path = pod.graveyard.join(".app.lock");
    let held = Flock::lock(File::create(&lock_path).unwrap(), FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .expect("flock");
    let mut c = pod.container("app", &[], &["sh", "-c", "touch \"$POD/ran\"; sleep 5"]);
    let pid = c.target_pid();
    // Once sexton has blocked SIGTERM (its first step) the signal cannot be lost: send it
    // then. (Not before the exec: unshare's fork also has SIGTERM blocked for a moment, and
    // a SIGTERM queued there is discarded once it unblocks it, as PID 1 has no handler.)
    let sexton = fs::canonicalize(sexton_bin()).unwrap();
    assert!(
        wait_until(TIMEOUT, || fs::read_link(format!("/proc/{pid}/exe"))
            .is_ok_and(|exe| exe == sexton)
            && sigmask(pid, "SigBlk") & bit(15) != 0),
        "sexton never blocked SIGTERM:\n{}",
        c.logs()
    );
    c.signal(15);
    // pending and not yet read: it arrived while sexton is still setting up (the lock
    // is ours, so sexton cannot be past its lock wait)
    assert!(
        wait_until(TIMEOUT, || (sigmask(pid, "ShdPnd")
            | sigmask(pid, "SigPnd"))
            & bit(15)
            != 0),
        "SIGTERM not pending in sexton"
    );
    // while the lock is held sexton neither starts the child nor gives up
    assert!(
        !wait_until(Duration::from_millis(500), || !c.is_running()),
        "sexton ended while its lock was still held:\n{}",
        c.logs()
    );
    assert!(pod.tombstone("app").is_none_or(|t| t.get("Born").is_none()));
    drop(held);

    assert_eq!(c.wait(), 143, "{}", c.logs());
    let t = pod.tombstone("app").expect("tombstone");
    assert_eq!(t["Reason"], "terminated-before-start", "{t}");
    assert_eq!(t["ExitCode"], 143, "{t}");
    assert!(t.get("Born").is_none(), "the child was started: {t}");
    assert!(!c.logs().contains("started child"), "{}", c.logs());
    assert!(!exists(&pod.path("ran")), "the child ran");
}

#[test]
fn realtime_stop_signal_during_birth_wait_ends_without_starting_the_child() {
    let pod = Pod::new("rtstop");
    // SIGRTMIN+3 is systemd's STOPSIGNAL; SIGPWR is a stop signal too
    for (sig, signame) in [(37, "SIGRTMIN+3"), (30, "SIGPWR")] {
        let name = format!("main{sig}");
        let marker = format!("ran{sig}");
        let mut c = pod.container(
            &name,
            &[
                ("KUBEXIT_BIRTH_DEPS", "db"),
                ("KUBEXIT_BIRTH_TIMEOUT", "18s"),
            ],
            &["sh", "-c", &format!("touch \"$POD/{marker}\"")],
        );
        c.wait_log("waiting for birth dependencies");
        c.signal(sig);
        // the old build dropped the signal and went on waiting for db
        assert_eq!(c.wait(), 128 + sig, "{signame}: {}", c.logs());
        let t = pod.tombstone(&name).expect("tombstone");
        assert_eq!(t["Reason"], "terminated-before-start", "{signame}: {t}");
        assert_eq!(t["ExitCode"], 128 + sig, "{signame}: {t}");
        assert!(t.get("Born").is_none(), "{signame}: {t}");
        assert!(
            !exists(&pod.path(&marker)),
            "{signame}: the child was started"
        );
    }
}

// ---------------------------------------------------------------------------------------
// 8. An unkillable child: a non-root sexton whose child became root (setuid program)
// ---------------------------------------------------------------------------------------

const UID: &str = "4242";

/// Becomes root for real (setuid(0): real uid 0 too, so a non-root sexton may not signal
/// it), ignores SIGTERM, records its PID in argv[1], then waits forever.
const SETUID_ROOT_C: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (setuid(0) != 0) { perror("setuid(0)"); return 3; }
    signal(SIGTERM, SIG_IGN);
    FILE *f = fopen(argv[1], "w");
    if (!f) { perror(argv[1]); return 4; }
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    for (;;) pause();
}
"#;

fn nosuid(dir: &Path) -> bool {
    statvfs(dir)
        .map(|s| s.flags().contains(FsFlags::ST_NOSUID))
        .unwrap_or(true)
}

/// Builds the setuid-root program in a directory whose mount honours setuid bits: the
/// pod directory, or else the test target's scratch directory.
fn setuid_root_program(pod: &Pod) -> (PathBuf, RemoveTree) {
    let mut scratch = RemoveTree(None);
    let dir = if !nosuid(&pod.root) {
        pod.root.clone()
    } else {
        let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(pod.root.file_name().unwrap());
        fs::create_dir_all(&d).unwrap();
        scratch.0 = Some(d.clone());
        assert!(
            !nosuid(&d),
            "both {} and {} are on nosuid mounts: cannot test a setuid child",
            pod.root.display(),
            d.display()
        );
        d
    };
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    let src = dir.join("setuid-root.c");
    let exe = dir.join("setuid-root");
    fs::write(&src, SETUID_ROOT_C).unwrap();
    let out = Command::new("gcc")
        .args(["-O", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("gcc");
    assert!(
        out.status.success(),
        "gcc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::os::unix::fs::chown(&exe, Some(0), Some(0)).unwrap();
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o4755)).unwrap();
    (exe, scratch)
}

/// The pod's graveyard, owned by the unprivileged user sexton runs as.
fn graveyard_for_user(pod: &Pod) {
    fs::create_dir_all(&pod.graveyard).unwrap();
    let uid: u32 = UID.parse().unwrap();
    std::os::unix::fs::chown(&pod.graveyard, Some(uid), Some(uid)).unwrap();
    fs::set_permissions(&pod.root, fs::Permissions::from_mode(0o755)).unwrap();
}

/// `setpriv ... sexton -- PROGRAM MARKER` as a command line, for use after `unshare` or alone.
fn setpriv_args(program: &Path, marker: &Path) -> Vec<String> {
    vec![
        "setpriv".into(),
        "--reuid".into(),
        UID.into(),
        "--regid".into(),
        UID.into(),
        "--clear-groups".into(),
        sexton_bin(),
        "--".into(),
        program.display().to_string(),
        marker.display().to_string(),
    ]
}

fn unkillable_env(c: &mut Command, pod: &Pod, name: &str) {
    c.env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        )
        .env("KUBEXIT_NAME", name)
        .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
        .env("KUBEXIT_DEATH_DEPS", "main")
        .env("KUBEXIT_GRACE_PERIOD", "1s")
        .current_dir(&pod.root);
}

/// The child really is root and ignores SIGTERM: a uid-4242 sexton cannot signal it.
fn assert_unkillable(pid: i32) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uids = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert_eq!(
        uids.split_whitespace().skip(1).collect::<Vec<_>>(),
        ["0", "0", "0", "0"],
        "the child did not become root: {uids}"
    );
    assert!(
        sigmask(pid, "SigIgn") & bit(15) != 0,
        "child does not ignore SIGTERM"
    );
}

fn main_died(pod: &Pod) -> Instant {
    pod.write_tombstone(
        "main",
        "{\"Born\":\"2026-01-01T00:00:00Z\",\"Died\":\"2026-01-01T00:00:01Z\",\"ExitCode\":0}\n",
    );
    Instant::now()
}

#[test]
fn unkillable_child_as_pid1_ends_the_container_after_the_grace_period() {
    let pod = Pod::new("unkillable1");
    let (program, _scratch) = setuid_root_program(&pod);
    graveyard_for_user(&pod);
    let marker = pod.path("child.pid");
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .args(setpriv_args(&program, &marker));
    unkillable_env(&mut cmd, &pod, "sidecar");
    let mut c = pod.spawn("sidecar", cmd);
    pod.wait_file("child.pid");
    let sexton = c.target_pid();
    assert_eq!(
        ns_pid(sexton),
        Some(1),
        "sexton is not PID 1 of its namespace"
    );
    let child = *children_of(sexton).first().expect("sexton has no child");
    let mut cleanup = KillOnDrop(Some(child));
    assert_unkillable(child);
    pod.wait_born("sidecar");

    let t0 = main_died(&pod);
    // the old build waited here forever: SIGKILL failed (EPERM) and nothing else ended it
    let code = c.wait();
    let took = t0.elapsed();
    assert_eq!(code, 0, "{}", c.logs());
    assert!(
        took >= Duration::from_millis(900),
        "grace period not respected: {took:?}"
    );
    assert!(
        took <= Duration::from_secs(5) * slowdown(),
        "too long after the grace period: {took:?}"
    );
    // the scenario really is an unkillable child
    assert!(
        c.logs().contains("cannot SIGKILL the child"),
        "{}",
        c.logs()
    );
    assert!(c.logs().contains("PID 1"), "{}", c.logs());
    let t = pod.tombstone("sidecar").expect("tombstone");
    assert_eq!(t["ExitCode"], 0, "{t}");
    assert_eq!(t["DeathDep"], "main", "{t}");
    // the kernel killed the child with the namespace
    assert!(
        wait_until(TIMEOUT, || gone(child)),
        "the child outlived its container"
    );
    cleanup.0 = None;
}

#[test]
fn unkillable_child_as_subreaper_exits_1_and_says_it_is_left_running() {
    let pod = Pod::new("unkillable2");
    let (program, _scratch) = setuid_root_program(&pod);
    graveyard_for_user(&pod);
    let marker = pod.path("child.pid");
    let args = setpriv_args(&program, &marker);
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..]);
    unkillable_env(&mut cmd, &pod, "sidecar");
    let mut c = pod.spawn_host("sidecar", cmd);
    let child: i32 = pod.wait_file("child.pid").trim().parse().unwrap();
    let mut cleanup = KillOnDrop(Some(child));
    assert_ne!(ns_pid(c.target_pid()), Some(1));
    assert_unkillable(child);
    pod.wait_born("sidecar");

    let t0 = main_died(&pod);
    // the old build waited here forever
    let code = c.wait();
    let took = t0.elapsed();
    assert_eq!(code, 1, "{}", c.logs());
    assert!(
        took >= Duration::from_millis(900),
        "grace period not respected: {took:?}"
    );
    assert!(
        took <= Duration::from_secs(1 + 2 + 3) * slowdown(),
        "more than grace + 2 s (+ slack): {took:?}"
    );
    let logs = c.logs();
    assert!(logs.contains("cannot SIGKILL the child"), "{logs}");
    assert!(
        logs.contains("could not be stopped") && logs.contains("leaving it running"),
        "{logs}"
    );
    let t = pod.tombstone("sidecar").expect("tombstone");
    assert_eq!(t["Reason"], "child-not-stopped", "{t}");
    assert_eq!(t["ExitCode"], 1, "{t}");
    assert_eq!(t["DeathDep"], "main", "{t}");
    // as announced, the child is still there: end it ourselves
    assert!(!gone(child), "the child was stopped after all");
    kill(Pid::from_raw(child), NixSignal::SIGKILL).unwrap();
    assert!(
        wait_until(TIMEOUT, || gone(child)),
        "leftover child did not die"
    );
    cleanup.0 = None;
}

// ---------------------------------------------------------------------------------------
// 9. Signals to PID 1 silently dropped
// ---------------------------------------------------------------------------------------

#[test]
fn pid1_forwards_sigpwr_realtime_and_other_catchable_signals() {
    let pod = Pod::new("fwdall");
    // The child takes the signals with sigwaitinfo, blocked from before it says "up": a
    // Python handler with signal.pause() misses a signal that lands between the check of
    // pending handlers and pause(), and then sleeps until the next one (seen under load).
    let script = r#"
import os, signal
pod = os.environ["POD"]
wanted = {30, 37, 64, 23, 14, signal.SIGTERM}
signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
with open(pod + "/up", "w") as f:
    f.write("up\n")
while True:
    n = signal.sigwaitinfo(wanted).si_signo
    if n == signal.SIGTERM:
        break
    with open(pod + "/got", "a") as f:
        f.write("%d\n" % n)
"#;
    let mut c = pod.container("app", &[], &["python3", "-c", script]);
    pod.wait_file("up");
    let received = |sig: i32| {
        fs::read_to_string(pod.path("got"))
            .unwrap_or_default()
            .lines()
            .any(|l| l == sig.to_string())
    };
    let mut missing = vec![];
    // SIGPWR, SIGRTMIN+3, SIGRTMAX, SIGURG, SIGALRM: none of them reached the child before
    for sig in [30, 37, 64, 23, 14] {
        c.signal(sig);
        if !wait_until(Duration::from_secs(3), || received(sig)) {
            missing.push(sig);
        }
    }
    assert!(
        missing.is_empty(),
        "signals sent to PID 1 that never reached the child: {missing:?}\n{}",
        c.logs()
    );
    assert!(c.is_running(), "sexton ended on a forwarded signal");
    c.signal(15);
    assert_eq!(c.wait(), 0, "{}", c.logs());
}

// ---------------------------------------------------------------------------------------
// 10. Small configuration and I/O edges
// ---------------------------------------------------------------------------------------

#[test]
fn graveyard_with_leading_blank_is_the_absolute_path() {
    let pod = Pod::new("blankgy");
    let padded = format!(" {}", pod.graveyard.display());
    let cmd = container_cmd(
        &pod,
        &[
            ("KUBEXIT_NAME", OsStr::new("app")),
            ("KUBEXIT_GRAVEYARD", OsStr::new(&padded)),
        ],
        &["sh", "-c", "exit 3"],
    );
    let mut c = pod.spawn("app", cmd);
    assert_eq!(c.wait(), 3, "{}", c.logs());
    // the old build took " /tmp/..." for a relative path (under the working directory)
    let t = pod.tombstone("app");
    assert!(
        t.as_ref()
            .is_some_and(|t| t["ExitCode"] == 3 && t.get("Born").is_some()),
        "no tombstone in {}: {t:?}\n{}",
        pod.graveyard.display(),
        c.logs()
    );
    assert!(
        !exists(&pod.root.join(" ")),
        "a relative ' ' directory was created"
    );
}

/// Removes `/graveyard` at the end if the test created it (it stays empty: everything is
/// written to a tmpfs mounted over it in a private mount namespace).
struct RemoveDirIfCreated(Option<PathBuf>);

impl Drop for RemoveDirIfCreated {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = fs::remove_dir(d);
        }
    }
}

#[test]
fn empty_graveyard_setting_means_the_default_graveyard() {
    let pod = Pod::new("emptygy");
    let default = Path::new("/graveyard");
    let _cleanup = RemoveDirIfCreated(if exists(default) {
        None
    } else {
        fs::create_dir(default).unwrap();
        Some(default.to_path_buf())
    });
    // A private mount namespace with a tmpfs over /graveyard: nothing reaches the host's.
    // The tombstone is copied out after sexton exits, before the namespace goes away.
    let script = r#"
mount -t tmpfs sexton-test /graveyard || exit 90
unshare --pid --fork --mount-proc --kill-child "$0" -- sh -c 'exit 4'
rc=$?
cat /graveyard/app > "$POD/tombstone.copy" 2>/dev/null
exit $rc
"#;
    for value in ["", "  "] {
        let mut cmd = Command::new("unshare");
        cmd.args(["--mount", "--propagation", "private", "sh", "-c", script])
            .arg(sexton_bin())
            .current_dir(&pod.root)
            .env_clear()
            .env(
                "PATH",
                std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
            )
            .env("POD", &pod.root)
            .env("KUBEXIT_NAME", "app")
            .env("KUBEXIT_GRAVEYARD", value);
        let _ = fs::remove_file(pod.path("tombstone.copy"));
        let mut c = pod.spawn_host("wrapper", cmd);
        // the old build refused it: exit 2, "must not be empty"
        assert_eq!(c.wait(), 4, "KUBEXIT_GRAVEYARD={value:?}: {}", c.logs());
        let copy = fs::read(pod.path("tombstone.copy")).unwrap_or_default();
        let t: serde_json::Value = serde_json::from_slice(&copy).unwrap_or_else(|e| {
            panic!(
                "no tombstone in /graveyard ({e}): {:?}\n{}",
                String::from_utf8_lossy(&copy),
                c.logs()
            )
        });
        assert_eq!(t["ExitCode"], 4, "{t}");
        assert!(t.get("Born").is_some(), "{t}");
    }
    if _cleanup.0.is_some() {
        let left: Vec<_> = fs::read_dir(default)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            left.is_empty(),
            "files reached the host's /graveyard: {left:?}"
        );
    }
}

/// A pipe whose read end is already closed: every write to it fails with EPIPE.
fn broken_pipe() -> std::os::fd::OwnedFd {
    let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
    drop(read);
    write
}

/// Runs the binary directly with `fd` (1 or 2) a broken pipe; the other one to a file.
fn run_with_broken(
    pod: &Pod,
    fd: i32,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String) {
    let log = pod.path(&format!("broken-{}.log", args.join("_").replace('/', "_")));
    let mut c = Command::new(sexton_bin());
    c.args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(env.iter().copied())
        .current_dir(&pod.root)
        .stdin(Stdio::null());
    if fd == 1 {
        c.stdout(Stdio::from(broken_pipe()))
            .stderr(File::create(&log).unwrap());
    } else {
        c.stdout(File::create(&log).unwrap())
            .stderr(Stdio::from(broken_pipe()));
    }
    let mut child = c.spawn().unwrap();
    let st = wait_child(&mut child, TIMEOUT);
    if st.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    (
        st.map(code_of),
        fs::read_to_string(&log).unwrap_or_default(),
    )
}

#[test]
fn output_to_a_closed_pipe_never_aborts() {
    let pod = Pod::new("epipe");
    // sanity: the configuration error is the one expected
    let out = Command::new(sexton_bin())
        .args(["--", "true"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("KUBEXIT_NAME: required"));

    let inst = pod.path("inst");
    let inst_arg = inst.to_str().unwrap();
    let results = vec![
        // (what, exit code) -- the old build aborted (134) in the first and the last two
        (
            "config error to closed stderr",
            run_with_broken(&pod, 2, &["--", "true"], &[]).0,
        ),
        (
            "--help to closed stdout",
            run_with_broken(&pod, 1, &["--help"], &[]).0,
        ),
        (
            "install to closed stdout",
            run_with_broken(&pod, 1, &["install", inst_arg], &[]).0,
        ),
        (
            "quick-exit to closed stderr",
            run_with_broken(&pod, 2, &["quick-exit", "x"], &[]).0,
        ),
    ];
    let want = vec![
        ("config error to closed stderr", Some(2)),
        ("--help to closed stdout", Some(0)),
        ("install to closed stdout", Some(0)),
        ("quick-exit to closed stderr", Some(0)),
    ];
    assert_eq!(results, want, "exit codes (134 = abort)");
    assert!(inst.join("sexton").is_file(), "install did not install");
}
