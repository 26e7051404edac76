//! Resilience and start order, with the real binary as PID 1 of separate PID namespaces:
//! deaths without a tombstone record (lock), polling and an inotify that delivers nothing,
//! birth dependencies with readiness probes, OnFailure, shutdown hooks.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use testbed::free_port;

const SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/server.py");

fn has_key(t: &Option<serde_json::Value>, k: &str) -> bool {
    t.as_ref().is_some_and(|t| t.get(k).is_some())
}

#[test]
fn sigkill_of_whole_dependency_container_is_noticed() {
    for watch in ["inotify", "poll", "auto"] {
        let pod = Pod::new("sigkill");
        let mut main = pod.container("main", &[], &["sleep", "1000"]);
        pod.wait_born("main");
        let mut sidecar = pod.container(
            "sidecar",
            &[
                ("KUBEXIT_DEATH_DEPS", "main"),
                ("KUBEXIT_WATCH", watch),
                ("KUBEXIT_POLL_INTERVAL", "200ms"),
            ],
            &["sh", "-c", &term_recorder("term", 0)],
        );
        pod.wait_file("term.started");
        pod.wait_born("sidecar");
        assert!(
            sidecar.is_running(),
            "{watch}: a live dependency is not dead"
        );

        // SIGKILL to PID 1 of main's namespace: the kernel kills the whole container, the
        // wrapper has no chance to write `Died`.
        let killed_at = Instant::now();
        main.signal(9);
        assert_ne!(main.wait(), 0);
        // (the wait is bounded; without the lock, a death with no tombstone is never seen)
        sidecar.wait_log("sending SIGTERM");
        let noticed = killed_at.elapsed();
        assert_eq!(sidecar.wait(), 0);
        let m = pod.tombstone("main").unwrap();
        assert!(
            m.get("Born").is_some() && m.get("Died").is_none(),
            "main never recorded its death: {m}"
        );
        assert!(
            sidecar.logs().contains("lock released"),
            "{}",
            sidecar.logs()
        );
        assert!(
            sidecar.logs().contains("died (exit code unknown)"),
            "{}",
            sidecar.logs()
        );
        assert_eq!(pod.tombstone("sidecar").unwrap()["DeathDep"], "main");
        eprintln!("{watch}: SIGKILL noticed after {noticed:?}");
    }
}

#[test]
fn dependency_not_started_yet_is_not_dead() {
    let pod = Pod::new("notyet");
    fs::create_dir_all(&pod.graveyard).unwrap();
    let mut sidecar = pod.container(
        "sidecar",
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_LOG_LEVEL", "debug"),
            ("KUBEXIT_WATCH", "auto"),
            ("KUBEXIT_POLL_INTERVAL", "50ms"),
        ],
        &["sh", "-c", &term_recorder("term", 0)],
    );
    pod.wait_file("term.started"); // started: the first scan did not find main dead
    // kubexit-written Born (no sexton lock file for kubexit containers)
    pod.write_in_place("main", b"Born: \"2020-04-28T10:41:46.9926314Z\"\n");
    sidecar.wait_log("state=Alive { ready: false }");
    assert!(
        sidecar.is_running(),
        "a started-but-unlocked (kubexit) dependency is alive"
    );
    // and a real sexton main that starts later is alive too, then its death counts
    pod.fifo("fifo");
    let mut main = pod.container("main", &[], &["sh", "-c", "read x < \"$POD/fifo\""]);
    pod.wait_born("main");
    assert!(sidecar.is_running());
    fs::write(pod.path("fifo"), "go\n").unwrap();
    assert_eq!(main.wait(), 0);
    assert_eq!(sidecar.wait(), 0);
}

#[test]
fn forced_polling_mode() {
    let pod = Pod::new("poll");
    let mut sidecar = pod.container(
        "sidecar",
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_WATCH", "poll"),
            ("KUBEXIT_POLL_INTERVAL", "50ms"),
        ],
        &["sh", "-c", &term_recorder("term", 0)],
    );
    pod.wait_born("sidecar");
    sidecar.wait_log("inotify=false poll=50ms");
    let mut main = pod.container("main", &[], &["sh", "-c", "exit 4"]);
    assert_eq!(main.wait(), 4);
    assert_eq!(sidecar.wait(), 0);
    assert!(sidecar.logs().contains("died with exit code 4"));
}

/// A FUSE view (bindfs) of a directory. Writes made to the backing directory show up in
/// the view, but raise no inotify event there: what some sandboxes (gVisor) do to
/// containers sharing a volume. Locks are forwarded, as they are in such sandboxes.
struct FuseView {
    mnt: PathBuf,
}

impl FuseView {
    fn mount(back: &Path, mnt: &Path) -> FuseView {
        fs::create_dir_all(back).unwrap();
        fs::create_dir_all(mnt).unwrap();
        let st = Command::new("bindfs")
            .args(["--multithreaded", "--enable-lock-forwarding"])
            .arg(back)
            .arg(mnt)
            .status()
            .expect("bindfs (Debian package bindfs) is needed; scripts/test.sh installs it");
        assert!(st.success(), "bindfs mount failed");
        FuseView {
            mnt: mnt.to_path_buf(),
        }
    }
}

impl Drop for FuseView {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
    }
}

#[test]
fn auto_mode_survives_an_inotify_that_delivers_nothing() {
    let pod = Pod::new("fuse");
    let back = pod.path("back");
    let view = FuseView::mount(&back, &pod.path("view"));
    let view_dir = view.mnt.to_str().unwrap().to_string();

    // The fault is real: a pure inotify watcher on the view misses main's death.
    let mut blind = pod.container(
        "blind",
        &[
            ("KUBEXIT_GRAVEYARD", &view_dir),
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_WATCH", "inotify"),
        ],
        &["sh", "-c", &term_recorder("blind-term", 0)],
    );
    let mut safe = pod.container(
        "safe",
        &[
            ("KUBEXIT_GRAVEYARD", &view_dir),
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_WATCH", "auto"),
            ("KUBEXIT_POLL_INTERVAL", "200ms"),
        ],
        &["sh", "-c", &term_recorder("safe-term", 0)],
    );
    pod.wait_file("blind-term.started");
    pod.wait_file("safe-term.started");
    // main writes to the backing directory, as a container outside the sandbox view would
    let back_dir = back.to_str().unwrap().to_string();
    let mut main = pod.container("main", &[("KUBEXIT_GRAVEYARD", &back_dir)], &["true"]);
    assert_eq!(main.wait(), 0);
    let died = Instant::now();
    // (bounded: the inotify-only watcher beside it never notices)
    assert_eq!(safe.wait(), 0, "auto mode must notice the death by polling");
    eprintln!("auto noticed after {:?} (poll 200ms)", died.elapsed());
    // the pure inotify watcher saw nothing in many poll intervals: the fault was real
    assert!(
        blind.is_running(),
        "inotify unexpectedly delivered the event: the test does not reproduce the fault"
    );
    assert!(!pod.path("blind-term").exists());
    blind.signal(15);
    assert_eq!(blind.wait(), 0);
    drop(view);
}

/// Not a test on its own: when re-executed with SEXTON_INOTIFY_HOG=1 (as another user), it
/// takes every inotify instance that user may have and holds them until stdin closes.
#[test]
fn inotify_hog() {
    if std::env::var_os("SEXTON_INOTIFY_HOG").is_none() {
        return;
    }
    unsafe extern "C" {
        fn inotify_init() -> i32;
    }
    let mut n = 0;
    while unsafe { inotify_init() } >= 0 {
        n += 1;
    }
    println!("HOG {n}");
    let _ = std::io::stdout().flush();
    let _ = std::io::stdin().read_to_end(&mut vec![]);
}

#[test]
fn inotify_that_cannot_be_initialised() {
    // Exhaust the inotify instances of a dedicated user, then run sexton as that user.
    let uid = "4242";
    let pod = Pod::new("inolimit");
    let mut perms = fs::metadata(&pod.root).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o777);
    fs::set_permissions(&pod.root, perms).unwrap();
    // the hog is this test binary, re-executed as that user (see `inotify_hog` below)
    let mut hog = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "inotify_hog", "--nocapture", "--test-threads=1"])
        .env("SEXTON_INOTIFY_HOG", "1")
        .uid(4242)
        .gid(4242)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // its report arrives on a thread so that the wait is bounded
    let (tx, rx) = std::sync::mpsc::channel();
    let out = hog.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(i) = line.find("HOG ") {
                let _ = tx.send(line[i + 4..].trim().to_string());
            }
        }
    });
    let n = rx
        .recv_timeout(TIMEOUT)
        .expect("the inotify hog did not report");
    assert!(n.parse::<u32>().unwrap() > 0, "hog took {n} instances");

    // sexton as that user, wrapping `cmd`
    let sexton = sexton_bin();
    let sexton_as_user = |cmd: &[&str]| {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid",
            uid,
            "--regid",
            uid,
            "--clear-groups",
            &sexton,
            "--",
        ])
        .args(cmd);
        c
    };
    let run = |watch: &str, name: &str| {
        sexton_as_user(&["sh", "-c", "exit 0"])
            .env("KUBEXIT_NAME", name)
            .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
            .env("KUBEXIT_WATCH", watch)
            .env("KUBEXIT_POLL_INTERVAL", "50ms")
            .env("KUBEXIT_DEATH_DEPS", "nobody") // something to watch
            .output()
            .unwrap()
    };
    let out = run("inotify", "strict");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("KUBEXIT_WATCH=inotify: cannot watch"), "{err}");
    let out = run("auto", "lenient");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("polling every 50ms instead"), "{err}");

    // and the poll fallback really watches: a sidecar as that user notices main's death
    let mut sidecar = sexton_as_user(&["sleep", "100"])
        .env("KUBEXIT_NAME", "sidecar")
        .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
        .env("KUBEXIT_DEATH_DEPS", "main")
        .env("KUBEXIT_POLL_INTERVAL", "50ms")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    pod.wait_born("sidecar");
    let mut main = pod.container("main", &[], &["true"]);
    assert_eq!(main.wait(), 0);
    let mut st = None;
    assert!(wait_until(TIMEOUT, || {
        st = sidecar.try_wait().unwrap();
        st.is_some()
    }));
    assert_eq!(st.unwrap().code(), Some(0));
    drop(hog.stdin.take());
    let _ = hog.wait();
}

fn birth_order(probe: &str, mode: &str) {
    let pod = Pod::new("birth");
    let port = free_port();
    let go = pod.path("go");
    let probe = probe
        .replace("PORT", &port.to_string())
        .replace("GOFILE", go.to_str().unwrap());
    // main waits for the proxy to be ready, the proxy stops when main exits
    let mut main = pod.container(
        "main",
        &[
            ("KUBEXIT_BIRTH_DEPS", "proxy"),
            ("KUBEXIT_BIRTH_TIMEOUT", "20s"),
        ],
        &["sh", "-c", "touch \"$POD/main-ran\"; exit 0"],
    );
    let mut proxy = pod.container(
        "proxy",
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_READY_PROBE", &probe),
            ("KUBEXIT_READY_INTERVAL", "20ms"),
        ],
        &[
            "python3",
            SERVER,
            mode,
            &port.to_string(),
            go.to_str().unwrap(),
        ],
    );
    pod.wait_born("proxy");
    proxy.wait_log("child not ready yet");
    // the proxy is born but not ready, so main must not have started
    assert!(
        !has_key(&pod.tombstone("proxy"), "Ready"),
        "{probe}: ready too early"
    );
    assert!(
        !pod.path("main-ran").exists(),
        "{probe}: main started before its birth dependency was ready"
    );
    assert!(!has_key(&pod.tombstone("main"), "Born"));
    fs::write(&go, "").unwrap();
    assert_eq!(main.wait(), 0, "{probe}: {}", main.logs());
    assert!(pod.path("main-ran").exists());
    assert_eq!(proxy.wait(), 0, "{probe}");
    let (p, m) = (
        pod.tombstone("proxy").unwrap(),
        pod.tombstone("main").unwrap(),
    );
    assert!(
        p["Ready"].as_str().unwrap() <= m["Born"].as_str().unwrap(),
        "{probe}: main born before proxy ready: {p} {m}"
    );
    assert_eq!(p["Reason"], "stopped-by-dependency");
    assert!(proxy.logs().contains("child is ready"));
}

#[test]
fn birth_order_with_tcp_readiness() {
    birth_order("tcp://127.0.0.1:PORT", "tcp");
}

#[test]
fn birth_order_with_http_readiness_needs_2xx() {
    birth_order("http://localhost:PORT/healthz/ready", "http");
}

#[test]
fn birth_order_with_file_readiness() {
    birth_order("file://GOFILE", "tcp");
}

#[test]
fn birth_timeout_names_missing_deps() {
    let pod = Pod::new("btimeout");
    pod.write_tombstone(
        "db",
        "{\"Born\":\"2026-01-01T00:00:00Z\",\"Ready\":\"2026-01-01T00:00:00Z\"}\n",
    );
    let mut main = pod.container(
        "main",
        &[
            ("KUBEXIT_BIRTH_DEPS", "db, proxy, cache"),
            ("KUBEXIT_BIRTH_TIMEOUT", "300ms"),
        ],
        &["sh", "-c", "touch \"$POD/ran\""],
    );
    assert_eq!(main.wait(), 1);
    assert!(!pod.path("ran").exists());
    let logs = main.logs();
    assert!(
        logs.contains(
            "birth dependencies not ready after 300ms: proxy, cache; not starting the child"
        ),
        "{logs}"
    );
    let t = pod.tombstone("main").unwrap();
    assert_eq!(t["Reason"], "birth-timeout");
    assert!(t.get("Born").is_none());
}

#[test]
fn sigterm_and_death_during_birth_wait_end_without_starting() {
    let pod = Pod::new("bwait");
    let mut main = pod.container(
        "main",
        &[("KUBEXIT_BIRTH_DEPS", "proxy")],
        &["sh", "-c", "touch \"$POD/ran\""],
    );
    main.wait_log("waiting for birth dependencies");
    main.signal(15);
    assert_eq!(main.wait(), 143);
    assert!(
        !pod.path("ran").exists(),
        "kubexit starts the child here: sexton must not"
    );
    assert_eq!(
        pod.tombstone("main").unwrap()["Reason"],
        "terminated-before-start"
    );

    let mut worker = pod.container(
        "worker",
        &[
            ("KUBEXIT_BIRTH_DEPS", "proxy"),
            ("KUBEXIT_DEATH_DEPS", "controller"),
        ],
        &["sh", "-c", "touch \"$POD/ran\""],
    );
    worker.wait_log("waiting for birth dependencies");
    pod.write_tombstone(
        "controller",
        "{\"Born\":\"2026-01-01T00:00:00Z\",\"Died\":\"2026-01-01T00:00:01Z\",\"ExitCode\":0}\n",
    );
    assert_eq!(worker.wait(), 0);
    assert!(
        !pod.path("ran").exists(),
        "kubexit loses this death: sexton must not"
    );
    let t = pod.tombstone("worker").unwrap();
    assert_eq!(t["Reason"], "dependency-dead-before-start");
    assert_eq!(t["DeathDep"], "controller");
}

#[test]
fn on_failure_sidecar_survives_failed_main_and_stops_after_success() {
    let pod = Pod::new("onfailure");
    let mut sidecar = pod.container(
        "sidecar",
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_DEATH_TRIGGER", "success"),
        ],
        &["sh", "-c", &term_recorder("term", 0)],
    );
    pod.wait_born("sidecar");
    // first attempt fails: the kubelet would restart main
    let mut main = pod.container("main", &[], &["sh", "-c", "exit 1"]);
    assert_eq!(main.wait(), 1);
    sidecar.wait_log("not stopping the child (KUBEXIT_DEATH_TRIGGER=success");
    assert!(sidecar.is_running());
    // the restarted main: a new tombstone with a new Born and no Died, then success
    pod.fifo("fifo");
    let mut main = pod.container("main", &[], &["sh", "-c", "read x < \"$POD/fifo\"; exit 0"]);
    assert!(
        wait_until(TIMEOUT, || pod
            .tombstone("main")
            .is_some_and(|t| t.get("Died").is_none())),
        "restart overwrites the tombstone"
    );
    assert!(sidecar.is_running());
    fs::write(pod.path("fifo"), "go\n").unwrap();
    assert_eq!(main.wait(), 0);
    assert_eq!(sidecar.wait(), 0);
    assert_eq!(fs::read_to_string(pod.path("term")).unwrap(), "TERM\n");
}

#[test]
fn shutdown_hooks_after_child_exit() {
    let pod = Pod::new("hooks");
    let (ok_port, ok_seen) = recorder(200);
    let (err_port, err_seen) = recorder(500);
    let closed = free_port();
    let hooks = format!(
        "http://127.0.0.1:{ok_port}/quitquitquit, http://localhost:{err_port}/shutdown, http://127.0.0.1:{closed}/nobody-home"
    );
    let started = Instant::now();
    let mut main = pod.container(
        "main",
        &[
            ("KUBEXIT_SHUTDOWN_HOOKS", &hooks),
            ("KUBEXIT_SHUTDOWN_HOOK_TIMEOUT", "600ms"),
        ],
        &["sh", "-c", "exit 3"],
    );
    assert_eq!(main.wait(), 3, "hooks never change the exit code");
    let took = started.elapsed();
    assert_eq!(*ok_seen.lock().unwrap(), vec!["POST /quitquitquit"]);
    assert_eq!(
        *err_seen.lock().unwrap(),
        vec!["POST /shutdown"],
        "an HTTP error is not retried"
    );
    let logs = main.logs();
    assert!(logs.contains("shutdown hook succeeded"), "{logs}");
    assert!(logs.contains("answered HTTP 500"), "{logs}");
    assert!(logs.contains("giving up after 600ms"), "{logs}");
    // the hooks' 600ms budget holds: far below the wait's own bound
    assert!(
        took < Duration::from_secs(5) * slowdown(),
        "bounded: {took:?}"
    );
    // Died is recorded before the hooks run
    assert_eq!(pod.tombstone("main").unwrap()["ExitCode"], 3);

    // non-loopback targets are refused before anything starts
    let out = Command::new(sexton_bin())
        .env("KUBEXIT_NAME", "x")
        .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
        .env(
            "KUBEXIT_SHUTDOWN_HOOKS",
            "http://10.20.30.40:15020/quitquitquit",
        )
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KUBEXIT_SHUTDOWN_HOOKS")
            && err.contains("not a loopback address")
            && err.contains("KUBEXIT_SHUTDOWN_HOOKS_ALLOW_REMOTE"),
        "{err}"
    );
}

/// Two mains of a pod whose vendor sidecar only a quit endpoint ends (`inject`'s `quit`):
/// each names the other in KUBEXIT_SHUTDOWN_HOOKS_AFTER, so the first to end leaves the hooks
/// to the last, which calls them once both are dead; under KUBEXIT_SHUTDOWN_HOOKS_ON=success
/// a failure anywhere calls nothing (the kubelet restarts the failed main under OnFailure).
#[test]
fn shutdown_hooks_wait_for_every_main_and_success_when_asked() {
    let pod = Pod::new("hooks-after");
    let (port, seen) = recorder(200);
    let hooks = format!("http://127.0.0.1:{port}/quitquitquit");
    let main = |name: &str, other: &str, on: &str, cmd: &str| {
        pod.container(
            name,
            &[
                ("KUBEXIT_SHUTDOWN_HOOKS", &hooks),
                ("KUBEXIT_SHUTDOWN_HOOKS_AFTER", other),
                ("KUBEXIT_SHUTDOWN_HOOKS_ON", on),
            ],
            &["sh", "-c", cmd],
        )
    };
    pod.fifo("b-go");
    let mut b = main("b", "a", "exit", "read x < \"$POD/b-go\"; exit 0");
    pod.wait_born("b");
    let mut a = main("a", "b", "exit", "exit 0");
    assert_eq!(a.wait(), 0);
    a.wait_log("\"b\" (KUBEXIT_SHUTDOWN_HOOKS_AFTER) has not died");
    assert!(
        seen.lock().unwrap().is_empty(),
        "the first main to end calls nothing"
    );
    fs::write(pod.path("b-go"), "go\n").unwrap();
    assert_eq!(b.wait(), 0);
    assert_eq!(
        *seen.lock().unwrap(),
        vec!["POST /quitquitquit"],
        "the last one calls once"
    );

    // success only: a main that failed calls nothing, nor does the other after it
    let pod = Pod::new("hooks-success");
    let (port, seen) = recorder(200);
    let hooks = format!("http://127.0.0.1:{port}/quitquitquit");
    let main = |name: &str, other: &str, cmd: &str| {
        pod.container(
            name,
            &[
                ("KUBEXIT_SHUTDOWN_HOOKS", &hooks),
                ("KUBEXIT_SHUTDOWN_HOOKS_AFTER", other),
                ("KUBEXIT_SHUTDOWN_HOOKS_ON", "success"),
            ],
            &["sh", "-c", cmd],
        )
    };
    let mut a = main("a", "b", "exit 1");
    assert_eq!(a.wait(), 1);
    a.wait_log("the child exited 1 and KUBEXIT_SHUTDOWN_HOOKS_ON=success");
    let mut b = main("b", "a", "exit 0");
    assert_eq!(b.wait(), 0);
    b.wait_log("\"a\" (KUBEXIT_SHUTDOWN_HOOKS_AFTER) did not exit 0");
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
    // a bad value is refused before anything starts, naming the variable
    let out = Command::new(sexton_bin())
        .env("KUBEXIT_NAME", "x")
        .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
        .env("KUBEXIT_SHUTDOWN_HOOKS_ON", "sometimes")
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KUBEXIT_SHUTDOWN_HOOKS_ON") && err.contains("`exit` or `success`"),
        "{err}"
    );
}

#[test]
fn duplicate_container_name_is_refused() {
    let pod = Pod::new("dupname");
    let mut first = pod.container("app", &[], &["sleep", "100"]);
    pod.wait_born("app");
    let mut second = pod.container("app", &[], &["sh", "-c", "touch \"$POD/ran\""]);
    assert_eq!(second.wait(), 2);
    assert!(
        second.logs().contains("held by another live container"),
        "{}",
        second.logs()
    );
    assert!(!pod.path("ran").exists());
    assert!(first.is_running());
    first.signal(15);
    assert_eq!(first.wait(), 143);
}
