//! Faults of the graveyard itself, with the real binary as PID 1 of separate PID
//! namespaces: tombstones that cannot be written (full, a directory in the way, stale temp
//! files), deaths without a tombstone, locks unreadable across users, hostile entries
//! (FIFOs, huge files), a graveyard removed while running, and birth dependencies that die.
//!
//! Each test failed against the build before the supervisor hardening
//! (`SEXTON_TEST_BIN=/path/to/old/sexton cargo test --release --test faults_graveyard`).

mod common;

use std::fs::{self, File};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// A uid other than root's, like a service-mesh proxy's (Istio runs as 1337).
const PROXY_UID: &str = "1337";

/// A small tmpfs mounted over a directory, unmounted on drop (also when a test fails).
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path) -> Tmpfs {
        fs::create_dir_all(dir).unwrap();
        let st = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                "size=64k,nr_inodes=64,mode=1777",
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs on {}", dir.display());
        Tmpfs {
            dir: dir.to_path_buf(),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // lazy: a process of a failed test may still have a file open there
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// Fills every data block of the filesystem holding `dir` (inodes stay free).
fn fill_blocks(dir: &Path) {
    let mut f = File::create(dir.join("filler")).unwrap();
    let chunk = [b'x'; 1024];
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling {}: {e}", dir.display()),
        }
    }
    let _ = f.sync_all();
    // nothing more fits, not even a byte
    let probe = dir.join("probe");
    let wrote = fs::write(&probe, b"x");
    let _ = fs::remove_file(&probe);
    assert!(wrote.is_err(), "the graveyard is not full");
}

/// Takes every free inode of the filesystem holding `dir`.
fn fill_inodes(dir: &Path) {
    for i in 0.. {
        match File::create(dir.join(format!("inode-{i}"))) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => return,
            Err(e) => panic!("taking inodes of {}: {e}", dir.display()),
        }
    }
}

/// A sexton container whose sexton is started through `wrapper` (umask, setpriv) inside
/// its own PID namespace, with the harness's environment (name, graveyard, POD, PATH).
fn wrapped(
    pod: &Pod,
    name: &str,
    env: &[(&str, &str)],
    wrapper: &[&str],
    cmd: &[&str],
) -> Container {
    let mut c = Command::new("unshare");
    c.args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .args(wrapper)
        .arg(sexton_bin())
        .arg("--")
        .args(cmd)
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        )
        .env("KUBEXIT_NAME", name)
        .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
        .env("POD", &pod.root);
    for (k, v) in env {
        c.env(k, v);
    }
    pod.spawn(name, c)
}

/// sexton run as `PROXY_UID`.
const AS_PROXY: &[&str] = &[
    "setpriv",
    "--reuid",
    PROXY_UID,
    "--regid",
    PROXY_UID,
    "--clear-groups",
];

/// sexton run with umask 077 (`sh` execs it: it stays PID 1 of the namespace).
const UMASK_077: &[&str] = &["sh", "-c", "umask 077; exec \"$@\"", "sh"];

fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

fn mode_of(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The message of a log line: what follows the span (`...sexton{container=x}: MSG`), or
/// of a plain `sexton: MSG` line.
fn message(line: &str) -> &str {
    if let Some(m) = line.strip_prefix("sexton: ") {
        return m;
    }
    line.split_once("}: ").map_or(line, |(_, m)| m)
}

/// The distinct problems sexton reported on stderr: warnings, errors, plain `sexton:`
/// lines, and any line saying the child is not started. A setup error is logged and then
/// printed plainly with the same text: that counts once.
fn problems(log: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for line in log.lines() {
        let level = line.split_whitespace().nth(1).unwrap_or("");
        if level == "WARN"
            || level == "ERROR"
            || line.starts_with("sexton: ")
            || line.contains("not starting the child")
        {
            let m = message(line).to_string();
            if !out.contains(&m) {
                out.push(m);
            }
        }
    }
    out
}

/// Asserts one clear line: exactly one distinct problem reported, containing every word of
/// `want`.
fn assert_one_clear_line(log: &str, want: &[&str]) {
    let p = problems(log);
    assert_eq!(
        p.len(),
        1,
        "want one problem line, got {p:#?}\nfull log:\n{log}"
    );
    for w in want {
        assert!(p[0].contains(w), "{w:?} missing from {:?}", p[0]);
    }
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// Peak resident memory of a process, in KiB.
fn vm_hwm_kib(pid: i32) -> u64 {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = s.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn has(t: &Option<serde_json::Value>, key: &str) -> bool {
    t.as_ref().is_some_and(|t| t.get(key).is_some())
}

// ---------------------------------------------------------------------------------------
// 2. A tombstone that cannot be written
// ---------------------------------------------------------------------------------------

/// 2a: a full graveyard. The child is never started (peers could never learn of its
/// death); sexton says why in one line and exits non-zero. The old build started the child
/// with no record at all.
#[test]
fn full_graveyard_refuses_to_start_the_child() {
    let pod = Pod::new("full");
    let _mnt = Tmpfs::mount(&pod.graveyard);

    // every data block taken (inodes left: empty files could still be created)
    fill_blocks(&pod.graveyard);
    let mut main = pod.container("main", &[], &["sh", "-c", "touch \"$POD/ran\""]);
    let code = main.wait();
    assert_ne!(code, 0, "log:\n{}", main.logs());
    assert!(
        !pod.path("ran").exists(),
        "the child ran without any record of its life:\n{}",
        main.logs()
    );
    assert!(pod.tombstone("main").is_none());
    assert_one_clear_line(
        &main.logs(),
        &["No space left on device", "not starting the child"],
    );

    // and the inodes too: not even the lock file can be created
    fill_inodes(&pod.graveyard);
    let mut other = pod.container("other", &[], &["sh", "-c", "touch \"$POD/ran-other\""]);
    assert_ne!(other.wait(), 0, "log:\n{}", other.logs());
    assert!(!pod.path("ran-other").exists());
    assert_one_clear_line(&other.logs(), &["No space left on device"]);
}

/// 2b: the graveyard fills up after the child started: the death is still recorded (its
/// space was reserved before the child started), with the right exit code, and the
/// sidecar stops. The old build lost `Died` (ENOSPC); the sidecar only saw the lock.
#[test]
fn graveyard_filled_after_start_still_records_the_death() {
    let pod = Pod::new("fill-later");
    let _mnt = Tmpfs::mount(&pod.graveyard);
    let (mut main, mut sidecar) = main_on_fifo_and_sidecar(&pod, 5);

    fill_blocks(&pod.graveyard);
    fill_inodes(&pod.graveyard);
    assert!(main.is_running() && sidecar.is_running());

    fs::write(pod.path("fifo"), "go\n").unwrap();
    assert_eq!(main.wait(), 5);
    let t = pod.tombstone("main");
    assert!(
        has(&t, "Born") && has(&t, "Died"),
        "main's death was not recorded in the full graveyard: {t:?}\n{}",
        main.logs()
    );
    assert_eq!(t.as_ref().unwrap()["ExitCode"], 5, "{t:?}");
    assert_eq!(sidecar.wait(), 0, "{}", sidecar.logs());
    assert_eq!(fs::read_to_string(pod.path("term")).unwrap(), "TERM\n");
    assert!(
        sidecar.logs().contains("died with exit code 5"),
        "{}",
        sidecar.logs()
    );
    let s = pod.tombstone("sidecar");
    assert!(has(&s, "Died"), "the sidecar's own death record: {s:?}");
}

/// 2c: a directory at the tombstone path: `Born` cannot be written, so the child is not
/// started, and sexton says so in one line. The old build started it unrecorded.
#[test]
fn directory_at_tombstone_path_refuses_to_start() {
    let pod = Pod::new("dir-tomb");
    fs::create_dir_all(pod.tombstone_path("main")).unwrap();
    let mut main = pod.container("main", &[], &["sh", "-c", "touch \"$POD/ran\""]);
    let code = main.wait();
    assert_ne!(code, 0, "log:\n{}", main.logs());
    assert!(
        !pod.path("ran").exists(),
        "the child ran although Born could not be recorded:\n{}",
        main.logs()
    );
    assert!(
        pod.tombstone_path("main").is_dir(),
        "the directory is left alone"
    );
    assert_one_clear_line(
        &main.logs(),
        &["main", "Is a directory", "not starting the child"],
    );
}

/// 2d: temp files left by a crashed earlier incarnation (with its lock file). The old
/// build, PID 1 again, picked the same temp name `.main.tmp.1.0`, failed its O_EXCL
/// create and ran the child without `Born`. Now the leftovers are removed at start.
#[test]
fn stale_temp_files_of_an_earlier_incarnation() {
    let pod = Pod::new("stale-tmp");
    fs::create_dir_all(&pod.graveyard).unwrap();
    // what a crashed incarnation leaves: its (free) lock file and half-written temp files
    fs::write(pod.graveyard.join(".main.lock"), b"").unwrap();
    let stale = [".main.tmp.1.0", ".main.tmp.1.1"];
    for f in stale {
        fs::write(pod.graveyard.join(f), b"{\"Born\":").unwrap();
    }
    // another container's temp file is not ours to remove
    fs::write(pod.graveyard.join(".other.tmp.1.0"), b"").unwrap();

    pod.fifo("fifo");
    let mut main = pod.container("main", &[], &["sh", "-c", "read x < \"$POD/fifo\"; exit 4"]);
    pod.wait_born("main");
    let ours = |pod: &Pod| -> Vec<String> {
        fs::read_dir(&pod.graveyard)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| stale.contains(&n.as_str()))
            .collect()
    };
    assert!(
        ours(&pod).is_empty(),
        "stale files still there: {:?}",
        ours(&pod)
    );
    fs::write(pod.path("fifo"), "go\n").unwrap();
    assert_eq!(main.wait(), 4);
    let t = pod.tombstone("main");
    assert!(has(&t, "Born") && has(&t, "Died"), "{t:?}\n{}", main.logs());
    assert_eq!(t.unwrap()["ExitCode"], 4);
    assert!(
        ours(&pod).is_empty(),
        "stale files still there: {:?}",
        ours(&pod)
    );
    assert!(pod.graveyard.join(".other.tmp.1.0").exists());
    assert!(
        !main.logs().contains("ERROR"),
        "no write failed:\n{}",
        main.logs()
    );
}

// ---------------------------------------------------------------------------------------
// 3. A death without a tombstone, before birth
// ---------------------------------------------------------------------------------------

/// main is SIGKILLed (its whole namespace) while it waits for a birth dependency that
/// never comes: it has a lock file but no tombstone. The old build read that as "not
/// started" and the sidecar waited forever; now a free lock file means death.
#[test]
fn killed_while_waiting_for_birth_deps_is_dead() {
    for watch in ["inotify", "poll", "auto"] {
        let pod = Pod::new("killed-unborn");
        let mut main = pod.container(
            "main",
            &[
                ("KUBEXIT_BIRTH_DEPS", "db"),
                ("KUBEXIT_BIRTH_TIMEOUT", "1m"),
            ],
            &["sh", "-c", "touch \"$POD/main-ran\""],
        );
        main.wait_log("waiting for birth dependencies");
        assert!(exists(&pod.graveyard.join(".main.lock")));
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
        assert!(sidecar.is_running(), "{watch}: main is alive (waiting)");

        let killed_at = Instant::now();
        main.signal(9);
        assert_ne!(main.wait(), 0);
        assert!(
            pod.tombstone("main").is_none(),
            "main never wrote a tombstone"
        );
        // (the wait is bounded; without the lock, a death with no tombstone is never seen)
        sidecar.wait_log("sending SIGTERM");
        let noticed = killed_at.elapsed();
        assert_eq!(sidecar.wait(), 0, "{watch}: {}", sidecar.logs());
        assert!(
            sidecar.logs().contains("died (exit code unknown)"),
            "{watch}: {}",
            sidecar.logs()
        );
        assert!(!pod.path("main-ran").exists());
        assert_eq!(pod.tombstone("sidecar").unwrap()["DeathDep"], "main");
        eprintln!("{watch}: SIGKILL of an unborn main noticed after {noticed:?}");
    }
}

// ---------------------------------------------------------------------------------------
// 4. Locks readable across users
// ---------------------------------------------------------------------------------------

/// main runs as root with umask 077, the sidecar as uid 1337. The old build created
/// main's lock (and tombstone) 0600: the sidecar could not open it and never noticed
/// main's SIGKILL.
#[test]
fn umask_077_does_not_hide_the_lock_from_another_uid() {
    let pod = Pod::new("umask");
    chmod(&pod.root, 0o777); // the sidecar's child writes its markers there
    fs::create_dir_all(&pod.graveyard).unwrap();
    chmod(&pod.graveyard, 0o1777);
    let mut main = wrapped(&pod, "main", &[], UMASK_077, &["sleep", "1000"]);
    pod.wait_born("main");
    let mut sidecar = wrapped(
        &pod,
        "sidecar",
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_POLL_INTERVAL", "200ms"),
        ],
        AS_PROXY,
        &["sh", "-c", &term_recorder("term", 0)],
    );
    pod.wait_file("term.started");
    pod.wait_born("sidecar");
    assert!(sidecar.is_running());
    let lock = pod.graveyard.join(".main.lock");
    eprintln!(
        "modes with umask 077: lock {:o}, tombstone {:o}",
        mode_of(&lock),
        mode_of(&pod.tombstone_path("main"))
    );

    let killed_at = Instant::now();
    main.signal(9);
    assert_ne!(main.wait(), 0);
    let st = sidecar.wait_status(TIMEOUT);
    assert!(
        st.is_some(),
        "the sidecar (uid {PROXY_UID}) never noticed main's SIGKILL (lock mode {:o}):\n{}",
        mode_of(&lock),
        sidecar.logs()
    );
    assert_eq!(code_of(st.unwrap()), 0, "{}", sidecar.logs());
    eprintln!("noticed and ended {:?} after the kill", killed_at.elapsed());
    assert_eq!(fs::read_to_string(pod.path("term")).unwrap(), "TERM\n");
    assert!(sidecar.logs().contains("died (exit code unknown)"));
    for f in [lock, pod.tombstone_path("main")] {
        assert_eq!(
            mode_of(&f) & 0o044,
            0o044,
            "{} not readable by peers",
            f.display()
        );
    }
}

/// A peer lock file that cannot be opened (root's, 0600, read by uid 1337) is reported
/// once, naming the file and the consequence, however often it is read again. The old
/// build said nothing.
#[test]
fn unopenable_peer_lock_is_reported_once() {
    let pod = Pod::new("lock-eacces");
    fs::create_dir_all(&pod.graveyard).unwrap();
    chmod(&pod.graveyard, 0o1777);
    let lock = pod.graveyard.join(".main.lock");
    fs::write(&lock, b"").unwrap();
    chmod(&lock, 0o600);
    let born = "{\"Born\":\"2026-01-01T00:00:00Z\"}\n";
    let ready = "{\"Born\":\"2026-01-01T00:00:00Z\",\"Ready\":\"2026-01-01T00:00:00Z\"}\n";
    pod.write_tombstone("main", born);
    let mut sidecar = wrapped(
        &pod,
        "sidecar",
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_WATCH", "poll"),
            ("KUBEXIT_POLL_INTERVAL", "50ms"),
            ("KUBEXIT_LOG_LEVEL", "debug"),
        ],
        AS_PROXY,
        &["sleep", "1000"],
    );
    pod.wait_born("sidecar");
    sidecar.wait_log(".main.lock");
    // (the first state is logged after the warning: counted before it, it would pass for
    // the first change's, and the next change would find the state it already had; seen
    // under emulation)
    sidecar.wait_log("dependency state");
    // main's tombstone changes several times: each change is a new read of main, lock
    // probe included (the debug log shows each new state)
    for i in 0..6 {
        let before = count(&sidecar.logs(), "dependency state");
        pod.write_tombstone("main", if i % 2 == 0 { ready } else { born });
        assert!(
            wait_until(TIMEOUT, || count(&sidecar.logs(), "dependency state")
                > before),
            "change {i} not read:\n{}",
            sidecar.logs()
        );
    }
    let logs = sidecar.logs();
    assert_eq!(count(&logs, ".main.lock"), 1, "{logs}");
    let line = logs.lines().find(|l| l.contains(".main.lock")).unwrap();
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("death cannot be seen"), "{line}");
    assert!(sidecar.is_running(), "an unprobeable lock is not a death");
    sidecar.signal(15);
    assert_eq!(sidecar.wait(), 143);
}

// ---------------------------------------------------------------------------------------
// 5. Hostile graveyard entries
// ---------------------------------------------------------------------------------------

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
}

fn assert_sigterm_still_works(pod: &Pod, sidecar: &mut Container) {
    let sent = Instant::now();
    sidecar.signal(15);
    let st = sidecar.wait_status(TIMEOUT);
    assert!(
        st.is_some(),
        "SIGTERM to sexton (PID 1) did not end the container within {TIMEOUT:?}:\n{}",
        sidecar.logs()
    );
    eprintln!("container ended {:?} after SIGTERM", sent.elapsed());
    // the child got it (forwarded) and its exit code is sexton's
    assert_eq!(code_of(st.unwrap()), 7, "{}", sidecar.logs());
    assert_eq!(fs::read_to_string(pod.path("term")).unwrap(), "TERM\n");
}

/// FIFOs at a dependency's tombstone and lock paths before the sidecar starts: the old
/// build blocked in open(2) in its first scan (the child never started, SIGTERM did
/// nothing).
#[test]
fn fifos_at_dependency_paths_before_start() {
    let pod = Pod::new("fifo-start");
    fs::create_dir_all(&pod.graveyard).unwrap();
    mkfifo(&pod.tombstone_path("main"));
    mkfifo(&pod.graveyard.join(".main.lock"));
    let mut sidecar = pod.container(
        "sidecar",
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_POLL_INTERVAL", "50ms"),
        ],
        &["sh", "-c", &term_recorder("term", 7)],
    );
    // bounded: the old build never gets here
    let started = wait_until(TIMEOUT, || pod.path("term.started").exists());
    assert_sigterm_still_works(&pod, &mut sidecar);
    assert!(started, "the child started");
    let logs = sidecar.logs();
    assert!(logs.contains("FIFO"), "the FIFO is reported:\n{logs}");
}

/// FIFOs appearing at a dependency's paths while the sidecar runs (seen by inotify and
/// the poll): the old build froze in open(2) on the first re-read.
#[test]
fn fifos_at_dependency_paths_while_running() {
    let pod = Pod::new("fifo-run");
    let mut sidecar = pod.container(
        "sidecar",
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_POLL_INTERVAL", "50ms"),
        ],
        &["sh", "-c", &term_recorder("term", 7)],
    );
    pod.wait_file("term.started");
    pod.wait_born("sidecar");
    mkfifo(&pod.graveyard.join(".main.lock"));
    mkfifo(&pod.tombstone_path("main"));
    // sexton reads them (a bounded wait: the old build never says anything)
    let reported = wait_until(TIMEOUT, || {
        let l = sidecar.logs();
        l.contains("FIFO") && l.contains("tombstone of \"main\"")
    });
    assert_sigterm_still_works(&pod, &mut sidecar);
    assert!(reported, "the FIFO was reported:\n{}", sidecar.logs());
}

/// Creates a sparse file of 128 MiB at `path` (atomically: renamed into place).
fn huge_file(dir: &Path, path: &Path) {
    let tmp = dir.join(".huge.test-tmp");
    let f = File::create(&tmp).unwrap();
    f.set_len(128 << 20).unwrap();
    drop(f);
    fs::rename(tmp, path).unwrap();
}

/// A 128 MiB file at a dependency's tombstone path: the old build read it whole on every
/// poll (peak RSS above 128 MiB). Now at most a little of it is read, and a warning says
/// it is too large.
#[test]
fn huge_file_at_tombstone_path_is_not_read_whole() {
    let pod = Pod::new("huge");
    fs::create_dir_all(&pod.graveyard).unwrap();
    huge_file(&pod.graveyard, &pod.tombstone_path("main"));
    let mut sidecar = pod.container(
        "sidecar",
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_WATCH", "poll"),
            ("KUBEXIT_POLL_INTERVAL", "50ms"),
            ("KUBEXIT_LOG_LEVEL", "debug"),
        ],
        &["sh", "-c", &term_recorder("term", 7)],
    );
    let pid = sidecar.target_pid();
    let warning = |c: &Container| count(&c.logs(), "larger than");
    let alive = |c: &Container| count(&c.logs(), "state=Alive");
    // bounded, not asserted yet: the old build says nothing of the kind (it fails on memory)
    let waited = wait_until(TIMEOUT, || warning(&sidecar) >= 1);
    // replace it a few times with a valid tombstone and back (each a new file to read)
    for i in 0..3 {
        if !waited {
            break;
        }
        let before = alive(&sidecar);
        pod.write_tombstone("main", "{\"Born\":\"2026-01-01T00:00:00Z\"}\n");
        assert!(
            wait_until(TIMEOUT, || alive(&sidecar) > before),
            "round {i}: valid tombstone not read:\n{}",
            sidecar.logs()
        );
        let before = warning(&sidecar);
        huge_file(&pod.graveyard, &pod.tombstone_path("main"));
        assert!(
            wait_until(TIMEOUT, || warning(&sidecar) > before),
            "round {i}: huge file not reported:\n{}",
            sidecar.logs()
        );
    }
    // and leave it there for several poll intervals (a measurement window)
    std::thread::sleep(Duration::from_millis(500));
    let peak = vm_hwm_kib(pid);
    eprintln!("peak RSS of sexton: {peak} KiB");
    assert!(
        peak < 16 * 1024,
        "sexton's peak RSS is {peak} KiB: the file was read whole\n{}",
        sidecar.logs()
    );
    let logs = sidecar.logs();
    assert!(waited, "no warning about the huge file:\n{logs}");
    assert!(
        logs.lines()
            .any(|l| l.contains("WARN") && l.contains("\"main\"") && l.contains("larger than")),
        "{logs}"
    );
    assert!(sidecar.is_running());
    assert_sigterm_still_works(&pod, &mut sidecar);
}

// ---------------------------------------------------------------------------------------
// 6. The graveyard removed while running
// ---------------------------------------------------------------------------------------

/// `rm -rf` of the graveyard while main and its sidecar run: main's death is still
/// recorded (the graveyard is re-created) and ends the sidecar. The old build's death
/// record failed with ENOENT and the sidecar waited forever.
#[test]
fn graveyard_removed_while_running() {
    for watch in ["auto", "poll"] {
        let pod = Pod::new("rmrf");
        let (mut main, mut sidecar) = main_on_fifo_and_sidecar_with(
            &pod,
            3,
            &[("KUBEXIT_WATCH", watch), ("KUBEXIT_POLL_INTERVAL", "100ms")],
        );

        remove_while_recreated(&pod.graveyard);
        fs::write(pod.path("fifo"), "go\n").unwrap();
        assert_eq!(main.wait(), 3, "{watch}: {}", main.logs());
        let st = sidecar.wait_status(TIMEOUT);
        assert!(
            st.is_some(),
            "{watch}: the sidecar never noticed main's death after the graveyard was removed:\n{}\n--- main:\n{}",
            sidecar.logs(),
            main.logs()
        );
        assert_eq!(code_of(st.unwrap()), 0, "{watch}: {}", sidecar.logs());
        assert_eq!(fs::read_to_string(pod.path("term")).unwrap(), "TERM\n");
        assert!(pod.graveyard.is_dir(), "{watch}: graveyard not re-created");
        let t = pod.tombstone("main");
        assert!(
            has(&t, "Born") && has(&t, "Died"),
            "{watch}: main's tombstone in the re-created graveyard: {t:?}\n{}",
            main.logs()
        );
        assert_eq!(t.unwrap()["ExitCode"], 3);
        assert!(
            sidecar.logs().contains("died with exit code 3"),
            "{watch}: {}",
            sidecar.logs()
        );
    }
}

/// `main`, which exits with `code` once `$POD/fifo` is written, and a sidecar with main as
/// its death dependency, both born and the sidecar's child started.
fn main_on_fifo_and_sidecar(pod: &Pod, code: u8) -> (Container, Container) {
    main_on_fifo_and_sidecar_with(pod, code, &[])
}

/// The same, with more settings for the sidecar.
fn main_on_fifo_and_sidecar_with(
    pod: &Pod,
    code: u8,
    sidecar_env: &[(&str, &str)],
) -> (Container, Container) {
    pod.fifo("fifo");
    let script = format!("read x < \"$POD/fifo\"; exit {code}");
    let main = pod.container("main", &[], &["sh", "-c", &script]);
    let env = [&[("KUBEXIT_DEATH_DEPS", "main")], sidecar_env].concat();
    let sidecar = pod.container("sidecar", &env, &["sh", "-c", &term_recorder("term", 0)]);
    pod.wait_born("main");
    pod.wait_born("sidecar");
    pod.wait_file("term.started");
    (main, sidecar)
}

/// Lets main of `main_on_fifo_and_sidecar` end: it exits with `code`, and the sidecar then
/// ends with 0 (its child stopped by TERM). `label` prefixes the failures' messages.
fn main_ends_then_sidecar(
    pod: &Pod,
    main: &mut Container,
    sidecar: &mut Container,
    code: i32,
    label: &str,
) {
    fs::write(pod.path("fifo"), "go\n").unwrap();
    assert_eq!(main.wait(), code, "{label}: {}", main.logs());
    assert_eq!(sidecar.wait(), 0, "{label}: {}", sidecar.logs());
}

/// A sidecar's own tombstone deleted while its lock stays (what a sweep through the
/// graveyard does when it reaches the tombstone after the sidecar put both back) is put
/// back at once, so that peers looking now see the sidecar born. Before the directory's
/// watch reported the own record's deletion, nothing noticed it while main ran.
#[test]
fn own_tombstone_deleted_alone_is_put_back_at_once() {
    let pod = Pod::new("ownrecord");
    let (mut main, mut sidecar) = main_on_fifo_and_sidecar(&pod, 0);
    for how in ["deleted", "moved away"] {
        if how == "deleted" {
            fs::remove_file(pod.graveyard.join("sidecar")).unwrap();
        } else {
            fs::rename(pod.graveyard.join("sidecar"), pod.path("sidecar.moved")).unwrap();
        }
        assert!(
            wait_until(TIMEOUT, || has(&pod.tombstone("sidecar"), "Born")),
            "{how}: the sidecar's tombstone was not put back:\n{}",
            sidecar.logs()
        );
    }
    assert!(sidecar.is_running(), "{}", sidecar.logs());
    main_ends_then_sidecar(&pod, &mut main, &mut sidecar, 0, "");
}

/// A sidecar of `main` (its child records TERM) in user and PID namespaces of its own,
/// where `max_inotify_watches` is `watches` before sexton starts, if given; with `env`.
/// Returned once both are born and the child has started.
fn sidecar_in_a_user_namespace(pod: &Pod, watches: Option<u32>, env: &[(&str, &str)]) -> Container {
    let mut c = Command::new("unshare");
    c.args([
        "--user",
        "--map-root-user",
        "--pid",
        "--fork",
        "--mount-proc",
        "--kill-child",
    ]);
    if let Some(n) = watches {
        let set = format!("echo {n} > /proc/sys/user/max_inotify_watches && exec \"$@\"");
        c.args(["sh", "-c", &set, "sh"]);
    }
    c.arg(sexton_bin())
        .args(["--", "sh", "-c", &term_recorder("term", 0)])
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        )
        .env("KUBEXIT_NAME", "sidecar")
        .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
        .env("KUBEXIT_DEATH_DEPS", "main")
        .env("POD", &pod.root)
        .envs(env.iter().copied());
    let sidecar = pod.spawn("sidecar", c);
    pod.wait_born("main");
    pod.wait_born("sidecar");
    pod.wait_file("term.started");
    sidecar
}

/// Inotify watches used up (ENOSPC: here the sidecar's user namespace's
/// `max_inotify_watches` is lowered to 0 once it watches) say nothing about the graveyard.
/// When the sidecar's record is replaced by a copy, a new file to watch, the sidecar says
/// it cannot watch it and polls; it does not find its graveyard lost (before: a false
/// "removed, replaced or emptied", and a rescan). Main's death is still seen.
#[test]
fn inotify_watches_used_up_fall_back_to_the_poll_not_to_a_lost_graveyard() {
    let pod = Pod::new("enospc");
    pod.fifo("fifo");
    let mut main = pod.container("main", &[], &["sh", "-c", "read x < \"$POD/fifo\""]);
    let mut sidecar = sidecar_in_a_user_namespace(&pod, None, &[("KUBEXIT_LOG_LEVEL", "debug")]);
    let lowered = Command::new("nsenter")
        .args([
            "--user",
            "--target",
            &sidecar.child.id().to_string(),
            "sh",
            "-c",
        ])
        .arg("echo 0 > /proc/sys/user/max_inotify_watches")
        .status()
        .unwrap();
    assert!(
        lowered.success(),
        "cannot lower the sidecar's max_inotify_watches"
    );
    let record = pod.tombstone_path("sidecar");
    fs::copy(&record, pod.path("sidecar.copy")).unwrap();
    fs::rename(pod.path("sidecar.copy"), &record).unwrap();
    assert!(
        wait_until(TIMEOUT, || sidecar.logs().contains("cannot watch")),
        "the sidecar did not say that it cannot watch its new record:\n{}",
        sidecar.logs()
    );
    let logs = sidecar.logs();
    assert!(!logs.contains("was removed, replaced or emptied"), "{logs}");
    assert!(logs.contains("polling"), "{logs}");
    assert!(sidecar.is_running(), "{logs}");
    main_ends_then_sidecar(&pod, &mut main, &mut sidecar, 0, "");
    assert!(
        exists(&pod.path("term")),
        "the sidecar's child was not stopped by TERM"
    );
}

/// In mode `inotify`, a sidecar whose own files cannot be watched from the start (its user
/// namespace allows it one inotify watch: the graveyard's) says so and polls. Its record,
/// deleted alone (which the graveyard's own watch does not report), is put back within a
/// poll. Before, it said "polling" and set no poll: the record stayed gone, and peers saw
/// no sidecar.
#[test]
fn inotify_mode_polls_what_it_cannot_watch_from_the_start() {
    let pod = Pod::new("inotify-start");
    pod.fifo("fifo");
    let mut main = pod.container("main", &[], &["sh", "-c", "read x < \"$POD/fifo\""]);
    let mut sidecar = sidecar_in_a_user_namespace(
        &pod,
        Some(1),
        &[
            ("KUBEXIT_WATCH", "inotify"),
            ("KUBEXIT_POLL_INTERVAL", "50ms"),
        ],
    );
    // (the log is written by a thread of its own: awaited, not read at once)
    sidecar.wait_log("cannot watch");
    let logs = sidecar.logs();
    assert!(
        logs.contains("polling every 50ms"),
        "the sidecar did not say that it cannot watch its own files:\n{logs}"
    );
    fs::remove_file(pod.tombstone_path("sidecar")).unwrap();
    assert!(
        wait_until(TIMEOUT, || has(&pod.tombstone("sidecar"), "Born")),
        "the sidecar's record was not put back:\n{}",
        sidecar.logs()
    );
    main_ends_then_sidecar(&pod, &mut main, &mut sidecar, 0, "");
    assert!(
        exists(&pod.path("term")),
        "the sidecar's child was not stopped by TERM"
    );
}

/// A cleanup that deletes a sidecar's lock file again and again costs its supervisor a
/// bounded number of open files: it puts a new lock back 16 times, keeping the superseded
/// ones held (a peer's waiter may block on any of them, and would take its release for
/// the sidecar's death), then says once that it stops putting it back. An outer sidecar
/// stopped after it (death dependency: ordered stop) sees no false death through all of
/// it, and both stop in order once main exits. (Before, every sweep cost one more open file
/// for the container's whole life.)
#[test]
fn lock_file_swept_again_and_again_costs_bounded_open_files_and_no_false_death() {
    use std::os::unix::fs::MetadataExt;
    let pod = Pod::new("sweeps");
    let (mut main, mut sidecar) = main_on_fifo_and_sidecar(&pod, 3);
    let mut outer = pod.container(
        "outer",
        &[("KUBEXIT_DEATH_DEPS", "sidecar")],
        &["sh", "-c", &term_recorder("outer", 0)],
    );
    pod.wait_born("outer");
    pod.wait_file("outer.started");
    let lock = pod.graveyard.join(".sidecar.lock");
    let inode = |p: &Path| fs::symlink_metadata(p).ok().map(|m| m.ino());
    let pid = sidecar.target_pid();
    // The supervisor's descriptors of the lock files it had, found by inode (a lock file
    // is created under a temporary name, which is what /proc shows for it).
    let mut locks = vec![inode(&lock).expect("the sidecar's lock")];
    let lock_files_open = |locks: &[u64]| {
        let fds = fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten();
        fds.filter_map(|fd| fs::metadata(fd.path()).ok())
            .filter(|m| locks.contains(&m.ino()))
            .count()
    };
    // (what each descriptor names, for the failure's message)
    let files_open = || {
        let fds = fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten();
        let mut names: Vec<String> = fds
            .map(|fd| format!("{:?}", fs::read_link(fd.path())))
            .collect();
        names.sort();
        names
    };
    let before = files_open();
    const ABANDONED: &str = "it is not put back again";
    for sweep in 1..=16 {
        let swept = inode(&lock);
        fs::remove_file(&lock).unwrap();
        assert!(
            wait_until(TIMEOUT, || inode(&lock).is_some_and(|i| Some(i) != swept)),
            "sweep {sweep}: the sidecar's lock was not put back:\n{}",
            sidecar.logs()
        );
        locks.extend(inode(&lock));
    }
    fs::remove_file(&lock).unwrap();
    sidecar.wait_log(ABANDONED);
    assert_eq!(inode(&lock), None, "sweep 17: {}", sidecar.logs());
    let open = lock_files_open(&locks);
    assert_eq!(
        open,
        17,
        "the sidecar's supervisor holds {open} lock files after 17 sweeps:\n{}",
        sidecar.logs()
    );
    // (at most: a file it writes or reads at either moment, its tombstone say, is open
    // only for an instant)
    let mut after = vec![];
    assert!(
        wait_until(TIMEOUT, || {
            after = files_open();
            after.len() <= before.len() + 16
        }),
        "the sweeps cost the sidecar's supervisor other open files than its locks: {before:#?} then {after:#?}\n{}",
        sidecar.logs()
    );
    assert_eq!(
        sidecar.logs().matches(ABANDONED).count(),
        1,
        "{}",
        sidecar.logs()
    );
    assert!(
        outer.is_running() && sidecar.is_running(),
        "a sidecar stopped while main ran:\n{}\n{}",
        sidecar.logs(),
        outer.logs()
    );
    main_ends_then_sidecar(&pod, &mut main, &mut sidecar, 3, "");
    assert_eq!(outer.wait(), 0, "{}", outer.logs());
    assert!(
        !outer.logs().contains("is gone"),
        "the sidecar's death was taken for one without a record:\n{}",
        outer.logs()
    );
}

/// `main_on_fifo_and_sidecar` (main exits with 3; the sidecar logs at debug level, with
/// `sidecar_env` too), then a foreign file put at the sidecar's lock path in place of its
/// lock, which sexton does not replace; that path is returned.
fn foreign_file_at_the_sidecars_lock(
    pod: &Pod,
    sidecar_env: &[(&str, &str)],
) -> (Container, Container, PathBuf) {
    let env = [&[("KUBEXIT_LOG_LEVEL", "debug")], sidecar_env].concat();
    let (main, sidecar) = main_on_fifo_and_sidecar_with(pod, 3, &env);
    let lock = pod.graveyard.join(".sidecar.lock");
    fs::remove_file(&lock).unwrap();
    fs::write(&lock, "not a lock of sexton's").unwrap();
    (main, sidecar, lock)
}

/// The foreign file at `lock` removed: the sidecar puts its lock back, and main's death
/// (3) is seen as usual.
fn foreign_file_removed_then_main_ends(
    pod: &Pod,
    main: &mut Container,
    sidecar: &mut Container,
    lock: &Path,
) {
    fs::remove_file(lock).unwrap();
    assert!(
        wait_until(TIMEOUT, || fs::metadata(lock).is_ok_and(|m| m.len() == 0)),
        "the sidecar's lock was not put back:\n{}",
        sidecar.logs()
    );
    main_ends_then_sidecar(pod, main, sidecar, 3, "");
}

/// A graveyard that cannot be put right (a foreign file at the sidecar's lock path, which
/// it does not replace) is found lost at every poll: said once, then once a minute, not at
/// every poll for the pod's life (here every 50 ms: before, a warning each time). Once the
/// file is gone, the lock is put back and main's death is seen as usual.
#[test]
fn graveyard_lost_at_every_poll_is_said_once_a_minute() {
    let pod = Pod::new("losses");
    let (mut main, mut sidecar, lock) = foreign_file_at_the_sidecars_lock(
        &pod,
        &[("KUBEXIT_WATCH", "poll"), ("KUBEXIT_POLL_INTERVAL", "50ms")],
    );
    let (said, again) = (
        "was removed, replaced or emptied",
        "the graveyard was lost again",
    );
    assert!(
        wait_until(TIMEOUT, || {
            let logs = sidecar.logs();
            count(&logs, said) + count(&logs, again) >= 10
        }),
        "the sidecar did not find its graveyard lost at each poll:\n{}",
        sidecar.logs()
    );
    assert_eq!(count(&sidecar.logs(), said), 1, "{}", sidecar.logs());
    assert!(sidecar.is_running(), "{}", sidecar.logs());
    foreign_file_removed_then_main_ends(&pod, &mut main, &mut sidecar, &lock);
}

/// The same foreign file at the lock's path under the default watch does not feed the
/// watch: a restore that rewrote the record in place replaced the watched record, an event
/// that found the graveyard lost again (the foreign file), which restored it again, and so
/// on: PID 1 in a busy loop, its peers woken by every rewrite. What is checked is that
/// nothing happens, so there is no event to await: the window is a bounded half second,
/// in which the loop lost its graveyard thousands of times, and the poll (every 200 ms,
/// while it runs) at most a few.
#[test]
fn foreign_file_at_the_lock_path_does_not_spin_the_default_watch() {
    let pod = Pod::new("nospin");
    let (mut main, mut sidecar, lock) =
        foreign_file_at_the_sidecars_lock(&pod, &[("KUBEXIT_POLL_INTERVAL", "200ms")]);
    sidecar.wait_log("was removed, replaced or emptied");
    std::thread::sleep(Duration::from_millis(500));
    let again = count(&sidecar.logs(), "the graveyard was lost again");
    assert!(
        again <= 10,
        "the graveyard was found lost {again} times in half a second:\n{}",
        sidecar
            .logs()
            .lines()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    foreign_file_removed_then_main_ends(&pod, &mut main, &mut sidecar, &lock);
}

/// A graveyard removed or emptied under a running sidecar is noticed at once, not at the
/// next death: the sidecar puts its lock and record back while main still runs, so peers
/// that look now see it alive. (The directory's own IN_DELETE_SELF never comes while a
/// file that was in it is open, and a supervisor's lock always is: before the own lock
/// file was watched, the sidecar noticed nothing until main's death, and then only
/// through its lock waiter.) Main's death is then seen with its exit code.
#[test]
fn removed_or_emptied_graveyard_is_restored_at_once() {
    for how in ["removed", "emptied"] {
        let pod = Pod::new("restore");
        let (mut main, mut sidecar) = main_on_fifo_and_sidecar(&pod, 3);

        if how == "removed" {
            remove_while_recreated(&pod.graveyard);
        } else {
            for e in fs::read_dir(&pod.graveyard).unwrap().flatten() {
                let _ = fs::remove_file(e.path());
            }
        }
        let back = wait_until(TIMEOUT, || {
            exists(&pod.graveyard.join(".sidecar.lock")) && has(&pod.tombstone("sidecar"), "Born")
        });
        assert!(
            back,
            "{how}: the sidecar did not put its lock and record back while main ran:\n{}",
            sidecar.logs()
        );
        // said once, by whichever noticed first: the watch of the own lock ("removed,
        // replaced or emptied"), or a write of the sidecar's own record that found the
        // graveyard gone ("is gone"; seen under emulation, where the removal can come
        // between the child's start and the supervisor's write of Ready)
        sidecar.wait_log("re-creating it");
        assert!(sidecar.is_running(), "{how}: {}", sidecar.logs());

        main_ends_then_sidecar(&pod, &mut main, &mut sidecar, 3, how);
        assert!(
            sidecar.logs().contains("died with exit code 3"),
            "{how}: {}",
            sidecar.logs()
        );
    }
}

/// Removes `dir` as `rm -rf` does, in a way that sexton's re-creation cannot race: moved
/// away first (the path is gone at once), then the moved directory removed (its files
/// unlinked; retried, bounded, should a write through a descriptor still land there). A
/// `remove_dir_all` of the path itself, retried while sexton re-created the graveyard in
/// it, deleted the re-created lock again and again (16 times in 3 ms under load, after
/// which sexton stops putting it back, and the test failed).
fn remove_while_recreated(dir: &std::path::Path) {
    let moved = dir.with_extension("removed");
    fs::rename(dir, &moved).unwrap();
    for _ in 0..50 {
        match fs::remove_dir_all(&moved) {
            Ok(()) => return,
            Err(_) if !moved.exists() => return,
            Err(_) => std::thread::yield_now(),
        }
    }
    panic!("could not remove {}", moved.display());
}

// ---------------------------------------------------------------------------------------
// 12. A birth dependency that died
// ---------------------------------------------------------------------------------------

fn assert_birth_dep_died(pod: &Pod, main: &Container, code: i32) {
    let logs = main.logs();
    let want = format!("exit code {code}");
    let lines: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("\"db\"") && l.contains(&want))
        .collect();
    assert_eq!(lines.len(), 1, "one line naming db and {want}:\n{logs}");
    assert!(lines[0].contains("not starting the child"), "{}", lines[0]);
    let t = pod.tombstone("main").expect("main's tombstone");
    assert_eq!(t["Reason"], "birth-dependency-died", "{t}");
    assert_eq!(t["ExitCode"], 1, "{t}");
    assert!(!pod.path("main-ran").exists(), "main's child ran");
}

/// db dies (its command does not exist: 127) while main waits for it: main ends at once,
/// not after the 2-minute birth timeout.
#[test]
fn birth_dependency_dying_during_the_wait_ends_it() {
    let pod = Pod::new("birthdied");
    let mut main = pod.container(
        "main",
        &[
            ("KUBEXIT_BIRTH_DEPS", "db"),
            ("KUBEXIT_BIRTH_TIMEOUT", "2m"),
        ],
        &["sh", "-c", "touch \"$POD/main-ran\""],
    );
    main.wait_log("waiting for birth dependencies");
    let mut db = pod.container("db", &[], &["/nonexistent/db-server"]);
    assert_eq!(db.wait(), 127, "{}", db.logs());
    let died = Instant::now();
    let st = main.wait_status(TIMEOUT); // (far below the 2-minute birth timeout)
    assert!(
        st.is_some(),
        "main still waits {:?} after its birth dependency died:\n{}",
        died.elapsed(),
        main.logs()
    );
    assert_eq!(code_of(st.unwrap()), 1, "{}", main.logs());
    assert_birth_dep_died(&pod, &main, 127);
}

/// db dies (`exit 3`) while main waits for it, before it was ready (its readiness probe
/// never passes, so no `Ready` is ever recorded): main ends at once.
#[test]
fn birth_dependency_dying_before_ready_ends_the_wait() {
    let pod = Pod::new("birthunready");
    let mut main = pod.container(
        "main",
        &[
            ("KUBEXIT_BIRTH_DEPS", "db"),
            ("KUBEXIT_BIRTH_TIMEOUT", "2m"),
        ],
        &["sh", "-c", "touch \"$POD/main-ran\""],
    );
    main.wait_log("waiting for birth dependencies");
    let never = format!("file://{}", pod.path("never-ready").display());
    let mut db = pod.container(
        "db",
        &[("KUBEXIT_READY_PROBE", &never)],
        &["sh", "-c", "exit 3"],
    );
    assert_eq!(db.wait(), 3, "{}", db.logs());
    let died = Instant::now();
    let st = main.wait_status(TIMEOUT); // (far below the 2-minute birth timeout)
    assert!(
        st.is_some(),
        "main still waits {:?} after its birth dependency died:\n{}",
        died.elapsed(),
        main.logs()
    );
    assert_eq!(code_of(st.unwrap()), 1, "{}", main.logs());
    assert_birth_dep_died(&pod, &main, 3);
}

/// db already died when main starts (its command does not exist: 127; or `exit 3`): main
/// ends at once, not after the 2-minute birth timeout.
#[test]
fn birth_dependency_dead_before_start_ends_the_wait() {
    let cases: [(&[&str], i32); 2] = [
        (&["/nonexistent/db-server"], 127),
        (&["sh", "-c", "exit 3"], 3),
    ];
    for (cmd, code) in cases {
        let pod = Pod::new("birthdead");
        let mut db = pod.container("db", &[], cmd);
        assert_eq!(db.wait(), code, "{}", db.logs());
        let started = Instant::now();
        let mut main = pod.container(
            "main",
            &[
                ("KUBEXIT_BIRTH_DEPS", "db"),
                ("KUBEXIT_BIRTH_TIMEOUT", "2m"),
            ],
            &["sh", "-c", "touch \"$POD/main-ran\""],
        );
        let st = main.wait_status(TIMEOUT); // (far below the 2-minute birth timeout)
        assert!(
            st.is_some(),
            "main still waits {:?} for a birth dependency that exited {code}:\n{}",
            started.elapsed(),
            main.logs()
        );
        assert_eq!(code_of(st.unwrap()), 1, "{}", main.logs());
        assert_birth_dep_died(&pod, &main, code);
    }
}
