//! The real sexton binary, several "containers" of one pod, each PID 1 of its own PID
//! namespace, sharing one graveyard directory.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use common::*;

fn rfc3339_nanos(v: &serde_json::Value) -> bool {
    let s = v.as_str().unwrap_or("");
    // 2026-11-22T14:37:38.861412966Z
    s.len() == 30 && s.ends_with('Z') && s.as_bytes()[19] == b'.' && chrono_ok(s)
}

fn chrono_ok(s: &str) -> bool {
    sexton_core::tombstone::Tombstone::decode(format!("{{\"Born\":\"{s}\"}}").as_bytes()).is_ok()
}

#[test]
fn sidecar_stops_when_main_exits() {
    let pod = Pod::new("basic");
    let mut sidecar = pod.container(
        "sidecar",
        &[("KUBEXIT_DEATH_DEPS", "main")],
        &["sh", "-c", &term_recorder("sidecar-term", 0)],
    );
    // the sidecar's child runs under sexton, which is PID 1 of its namespace
    let started = pod.wait_file("sidecar-term.started");
    assert_eq!(
        started.split_whitespace().nth(1),
        Some("1"),
        "child's parent is PID 1: {started}"
    );
    pod.wait_born("sidecar");
    let mut main = pod.container("main", &[], &["sh", "-c", "echo working; exit 0"]);
    assert_eq!(main.wait(), 0);
    assert_eq!(
        sidecar.wait(),
        0,
        "sidecar wrapper exits 0 so the pod can succeed"
    );
    assert_eq!(
        fs::read_to_string(pod.path("sidecar-term")).unwrap(),
        "TERM\n",
        "sidecar child got SIGTERM"
    );

    let m = pod.tombstone("main").unwrap();
    assert_eq!(m["ExitCode"], 0);
    assert_eq!(m["Reason"], "exited");
    let s = pod.tombstone("sidecar").unwrap();
    assert_eq!(s["ExitCode"], 0);
    assert_eq!(s["Reason"], "stopped-by-dependency");
    assert_eq!(s["DeathDep"], "main");
    assert!(
        sidecar.logs().contains(
            "sending SIGTERM to the child: death dependency \"main\" died with exit code 0"
        ),
        "{}",
        sidecar.logs()
    );
    assert!(main.stdout().contains("working"));
}

#[test]
fn main_exit_code_and_tombstone() {
    let pod = Pod::new("maincode");
    let mut main = pod.container("main", &[], &["sh", "-c", "exit 7"]);
    assert_eq!(main.wait(), 7);
    let t = pod.tombstone("main").unwrap();
    assert_eq!(t["ExitCode"], 7);
    for k in ["Born", "Ready", "Died"] {
        assert!(rfc3339_nanos(&t[k]), "{k}: {}", t[k]);
    }
    assert!(t["Born"].as_str().unwrap() <= t["Died"].as_str().unwrap());
    assert!(t.get("Signal").is_none());
    // the file is one JSON line that kubexit (YAML) can also read: no tabs, ends with \n
    let raw = fs::read_to_string(pod.tombstone_path("main")).unwrap();
    assert!(raw.ends_with("}\n") && !raw.contains('\t'));
    // graveyard was created by sexton with the tombstone and the lock, no temp files left
    let mut names: Vec<String> = fs::read_dir(&pod.graveyard)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec![".main.lock".to_string(), "main".to_string()]);
}

#[test]
fn dep_already_dead_before_sidecar_starts() {
    for (label, content, in_place) in [
        (
            "sexton-json",
            "{\"Born\":\"2026-01-01T00:00:00.000000001Z\",\"Died\":\"2026-01-01T00:00:01.000000001Z\",\"ExitCode\":0}\n",
            false,
        ),
        (
            "kubexit-yaml",
            "Born: \"2020-04-28T10:41:46.9926314Z\"\nDied: \"2020-04-28T10:41:47.0498724Z\"\nExitCode: -1\n",
            true,
        ),
    ] {
        let pod = Pod::new("predead");
        if in_place {
            pod.write_in_place("main", content.as_bytes());
        } else {
            pod.write_tombstone("main", content);
        }
        let mut sidecar = pod.container(
            "sidecar",
            &[("KUBEXIT_DEATH_DEPS", "main")],
            &["sh", "-c", "touch \"$POD/ran\"; sleep 100"],
        );
        assert_eq!(sidecar.wait(), 0, "{label}");
        assert!(
            !pod.path("ran").exists(),
            "{label}: child must not be started"
        );
        let t = pod.tombstone("sidecar").unwrap();
        assert_eq!(t["Reason"], "dependency-dead-before-start", "{label}");
        assert_eq!(t["ExitCode"], 0);
        assert!(
            t.get("Died").is_some() && t.get("Born").is_none(),
            "{label}: {t}"
        );
        assert!(sidecar.logs().contains("not starting it"), "{label}");
    }
}

#[test]
fn child_ignoring_sigterm_is_killed_after_grace_period() {
    for (dep_exit_code, want) in [("zero", 0), ("child", 137)] {
        let pod = Pod::new("grace");
        let script = "trap '' TERM; echo $$ > \"$POD/started\"; while :; do sleep 0.2; done";
        let mut sidecar = pod.container(
            "sidecar",
            &[
                ("KUBEXIT_DEATH_DEPS", "main"),
                ("KUBEXIT_GRACE_PERIOD", "400ms"),
                ("KUBEXIT_DEP_EXIT_CODE", dep_exit_code),
            ],
            &["sh", "-c", script],
        );
        pod.wait_file("started");
        pod.wait_born("sidecar");
        let mut main = pod.container("main", &[], &["true"]);
        assert_eq!(main.wait(), 0);
        assert_eq!(sidecar.wait(), want, "{dep_exit_code}");
        // sexton's own clock: the harness, descheduled under load, once read its clock after
        // the sidecar had already ended (80 µs "between" SIGTERM and the exit, emulated arm64).
        // The grace runs from the signal's send (Core::signal_sent), and the SIGTERM line is
        // stamped just after it: the margin is that stamp's delay, 10 ms natively, stretched
        // by the emulation factor (`slowdown`).
        let logs = sidecar.logs();
        let waited = logged_at(&logs, "sending SIGKILL") - logged_at(&logs, "sending SIGTERM");
        let margin = 10 * i64::from(testbed::slowdown());
        assert!(
            waited >= chrono::Duration::milliseconds(400 - margin),
            "grace period respected: {waited:?}\n{logs}"
        );
        let t = pod.tombstone("sidecar").unwrap();
        assert_eq!(t["Signal"], "SIGKILL");
        assert_eq!(t["ExitCode"], want);
        assert!(
            sidecar.logs().contains("grace period of 400ms expired"),
            "{}",
            sidecar.logs()
        );
    }
}

#[test]
fn sigterm_to_pid1_is_forwarded() {
    let pod = Pod::new("fwd");
    let mut c = pod.container("app", &[], &["sh", "-c", &term_recorder("term", 5)]);
    pod.wait_file("term.started");
    c.signal(15);
    assert_eq!(c.wait(), 5);
    assert_eq!(fs::read_to_string(pod.path("term")).unwrap(), "TERM\n");
    let t = pod.tombstone("app").unwrap();
    assert_eq!(t["ExitCode"], 5);

    // a child without a handler dies of the forwarded signal: 128+15. (`Ready` is recorded
    // once the child is started; `Born` comes before it, and a SIGTERM between the two ends
    // the container without starting the child: no signal to record. Seen under emulation.)
    let mut c = pod.container("plain", &[], &["sleep", "100"]);
    assert!(
        wait_until(TIMEOUT, || pod
            .tombstone("plain")
            .is_some_and(|t| t.get("Ready").is_some())),
        "plain was not ready in time"
    );
    c.signal(15);
    assert_eq!(c.wait(), 143);
    assert_eq!(pod.tombstone("plain").unwrap()["Signal"], "SIGTERM");
}

#[test]
fn other_signals_forwarded_to_child_and_group() {
    // SIGUSR1 and SIGHUP reach the child; with KUBEXIT_SIGNAL_GROUP the whole group.
    let pod = Pod::new("fwd2");
    let script = "trap 'echo USR1 >> \"$POD/sig\"' USR1; trap 'echo HUP >> \"$POD/sig\"' HUP; trap 'exit 0' TERM; echo up > \"$POD/up\"; while :; do sleep 1 & wait; done";
    let mut c = pod.container("app", &[], &["sh", "-c", script]);
    pod.wait_file("up");
    c.signal(10);
    assert!(wait_until(TIMEOUT, || fs::read_to_string(pod.path("sig"))
        .unwrap_or_default()
        == "USR1\n"));
    c.signal(1);
    assert!(wait_until(TIMEOUT, || fs::read_to_string(pod.path("sig"))
        .unwrap_or_default()
        == "USR1\nHUP\n"));
    c.signal(15);
    assert_eq!(c.wait(), 0);

    // group: a grandchild in the child's process group receives the signal too. (The
    // child sets its traps before it starts the grandchild, whose "up" the test waits
    // for: the other way round, under load, the signal could come first and kill it.)
    let script = "trap 'echo child >> \"$POD/g\"' USR2; trap 'exit 0' TERM; sh -c 'trap \"echo grandchild >> \\\"$POD/g\\\"; exit 0\" USR2; echo up > \"$POD/gup\"; while :; do sleep 1 & wait; done' & while :; do sleep 1 & wait; done";
    let mut c = pod.container(
        "grp",
        &[("KUBEXIT_SIGNAL_GROUP", "true")],
        &["sh", "-c", script],
    );
    pod.wait_file("gup");
    c.signal(12);
    assert!(
        wait_until(TIMEOUT, || {
            let s = fs::read_to_string(pod.path("g")).unwrap_or_default();
            s.contains("grandchild") && s.contains("child\n")
        }),
        "{:?}",
        fs::read_to_string(pod.path("g"))
    );
    c.signal(15);
    assert_eq!(c.wait(), 0);
}

#[test]
fn child_killed_by_signal_gives_128_plus_n() {
    let pod = Pod::new("sig");
    for (sig, code) in [("KILL", 137), ("SEGV", 139), ("TERM", 143), ("INT", 130)] {
        let name = format!("c{}", code);
        let mut c = pod.container(&name, &[], &["sh", "-c", &format!("kill -{sig} $$")]);
        assert_eq!(c.wait(), code, "{sig}");
        let t = pod.tombstone(&name).unwrap();
        assert_eq!(t["ExitCode"], code);
        assert_eq!(t["Signal"], format!("SIG{sig}"));
        assert_eq!(t["Reason"], "signaled");
    }
}

#[test]
fn spawn_failures_127_and_126() {
    let pod = Pod::new("spawn");
    let mut c = pod.container("nf", &[], &["/definitely/not/here"]);
    assert_eq!(c.wait(), 127);
    assert!(
        c.logs()
            .contains("command \"/definitely/not/here\" not found"),
        "{}",
        c.logs()
    );
    assert_eq!(pod.tombstone("nf").unwrap()["Reason"], "spawn-failed");

    let mut c = pod.container("nfp", &[], &["no-such-command-in-path"]);
    assert_eq!(c.wait(), 127);

    let script = pod.path("noexec.sh");
    fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).unwrap();
    let mut c = pod.container("ne", &[], &[script.to_str().unwrap()]);
    assert_eq!(c.wait(), 126);
    assert!(c.logs().contains("cannot be executed"), "{}", c.logs());
    assert_eq!(pod.tombstone("ne").unwrap()["ExitCode"], 126);
}

#[test]
fn configuration_errors_exit_2_before_starting_anything() {
    #[allow(clippy::type_complexity)] // (env, args, what stderr must say)
    let cases: &[(&[(&str, &str)], &[&str], &str)] = &[
        (&[("KUBEXIT_NAME", "")], &[], "KUBEXIT_NAME: required"),
        (
            &[("KUBEXIT_NAME", "a/b")],
            &[],
            "invalid KUBEXIT_NAME=\"a/b\"",
        ),
        (
            &[("KUBEXIT_NAME", "..")],
            &[],
            "invalid KUBEXIT_NAME=\"..\"",
        ),
        (
            &[("KUBEXIT_NAME", "Upper")],
            &[],
            "invalid KUBEXIT_NAME=\"Upper\"",
        ),
        (
            &[("KUBEXIT_GRACE_PERIOD", "ten")],
            &[],
            "invalid KUBEXIT_GRACE_PERIOD=\"ten\"",
        ),
        (
            &[("KUBEXIT_BIRTH_TIMEOUT", "5")],
            &[],
            "invalid KUBEXIT_BIRTH_TIMEOUT=\"5\"",
        ),
        (
            &[("KUBEXIT_TERM_SIGNAL", "SIGNOPE")],
            &[],
            "invalid KUBEXIT_TERM_SIGNAL=\"SIGNOPE\"",
        ),
        (
            &[("KUBEXIT_DEATH_DEPS", "main,app")],
            &[],
            "invalid KUBEXIT_DEATH_DEPS=\"main,app\": \"app\" is this container's own name",
        ),
        (&[("KUBEXIT_DEATH_DEPS", "a,a")], &[], "listed twice"),
        (
            &[("KUBEXIT_BIRTH_DEPS", "x/y")],
            &[],
            "invalid KUBEXIT_BIRTH_DEPS",
        ),
        (
            &[("KUBEXIT_DEP_EXIT_CODE", "7")],
            &[],
            "invalid KUBEXIT_DEP_EXIT_CODE=\"7\"",
        ),
        (
            &[("KUBEXIT_LOG_FORMAT", "yaml")],
            &[],
            "invalid KUBEXIT_LOG_FORMAT=\"yaml\"",
        ),
        (
            &[("KUBEXIT_SIGNAL_GROUP", "perhaps")],
            &[],
            "invalid KUBEXIT_SIGNAL_GROUP=\"perhaps\"",
        ),
        (
            &[],
            &["--grace-period", "1y"],
            "invalid --grace-period=\"1y\"",
        ),
        (&[], &["--no-such-flag"], "--no-such-flag"),
    ];
    for (env, args, want) in cases {
        let pod = Pod::new("cfg");
        let mut env: Vec<(&str, &str)> = env.to_vec();
        if !env.iter().any(|(k, _)| *k == "KUBEXIT_NAME") {
            env.push(("KUBEXIT_NAME", "app"));
        }
        let mut cmd = std::process::Command::new(sexton_bin());
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
            .env("POD", &pod.root);
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = cmd
            .args(*args)
            .args(["--", "sh", "-c", "touch \"$POD/ran\""])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{want}: {stderr}");
        assert!(stderr.contains(want), "want {want:?} in {stderr:?}");
        if !want.starts_with("--no-such") {
            assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr:?}");
        }
        assert!(!pod.path("ran").exists(), "{want}: nothing may be started");
        assert!(!pod.graveyard.exists(), "{want}: nothing may be written");
    }
    // empty command
    let out = std::process::Command::new(sexton_bin())
        .env("KUBEXIT_NAME", "a")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no command given"));
}

#[test]
fn unusable_tombstones_are_not_deaths_and_are_reread() {
    let pod = Pod::new("corrupt");
    let mut sidecar = pod.container(
        "sidecar",
        &[("KUBEXIT_DEATH_DEPS", "main")],
        &["sh", "-c", &term_recorder("term", 0)],
    );
    pod.wait_file("term.started");
    pod.wait_born("sidecar");
    let bad: &[(&[u8], &str)] = &[
        (b"", "empty file"),
        (b"\x00\x01garbage\xff", "not UTF-8"),
        (
            b"{\"Born\":\"2026-01-01T00:00:00Z\",\"Died\":\"2026-01-01T00",
            "EOF while parsing",
        ),
        (
            b"Died: \"2020-04-28T10:41:47.0498724Z\"\nExitCode: 1",
            "incomplete last line",
        ),
        (b"Died: soon\n", "bad time"),
    ];
    for (content, why) in bad {
        pod.write_in_place("main", content);
        sidecar.wait_log(why);
        assert!(
            sidecar.is_running(),
            "{why}: an unusable tombstone is not a death"
        );
        assert!(!pod.path("term").exists());
    }
    // the same problem, seen on many events, is logged once. The first garbage is awaited
    // before the others: a loaded machine may let all five writes and the sync point land
    // before the sidecar reads the file once (inotify events of one file coalesce; the
    // sidecar reads what is there when it looks), and it would then never see the garbage.
    pod.write_tombstone("main", "same-garbage-every-time\n");
    sidecar.wait_log("expected `Key: value`");
    for _ in 0..4 {
        pod.write_tombstone("main", "same-garbage-every-time\n");
    }
    pod.write_tombstone("main", "{\"Born\": \"sync-point\"}\n");
    sidecar.wait_log("sync-point");
    assert_eq!(
        sidecar.logs().matches("same-garbage").count(),
        0,
        "the message names the problem, not the content"
    );
    assert_eq!(
        sidecar.logs().matches("expected `Key: value`").count(),
        1,
        "{}",
        sidecar.logs()
    );
    assert!(sidecar.is_running());
    // now a real kubexit death, written in place like kubexit does
    pod.write_in_place("main", b"Born: \"2020-04-28T10:41:46.9926314Z\"\nDied: \"2020-04-28T10:41:47.0498724Z\"\nExitCode: 0\n");
    assert_eq!(sidecar.wait(), 0);
    assert_eq!(fs::read_to_string(pod.path("term")).unwrap(), "TERM\n");
}
#[test]
fn kubexit_yaml_death_while_running() {
    let pod = Pod::new("kyaml");
    let mut sidecar = pod.container(
        "sidecar",
        &[("KUBEXIT_DEATH_DEPS", "main")],
        &["sh", "-c", &term_recorder("term", 0)],
    );
    pod.wait_file("term.started");
    pod.wait_born("sidecar");
    // kubexit first writes Born, later Born+Died+ExitCode, truncating in place
    pod.write_in_place("main", b"Born: \"2020-04-28T10:41:46.9926314Z\"\n");
    pod.write_in_place("main", b"born: \"2020-04-28T10:41:46.9926314Z\"\ndied: \"2020-04-28T10:41:47.0498724Z\"\nexitcode: 2\n");
    assert_eq!(sidecar.wait(), 0);
    assert!(
        sidecar.logs().contains("died with exit code 2"),
        "{}",
        sidecar.logs()
    );
}

fn zombies_in(pids: &[i32]) -> Vec<i32> {
    pids.iter()
        .copied()
        .filter(|p| state_of(*p) == Some('Z'))
        .collect()
}

#[test]
fn orphans_are_reaped_as_pid1_and_as_subreaper() {
    for pidns in [true, false] {
        let pod = Pod::new("reap");
        // the child starts a grandchild and exits... no: the child's *child* (a subshell)
        // forks an orphan that outlives its parent and then exits; the orphan is
        // reparented to sexton, which must reap it.
        let script = "(sh -c 'echo $$ > \"$POD/orphan\"; read x < \"$POD/fifo\"; echo done > \"$POD/orphan-done\"' &) ; echo $$ > \"$POD/child\"; while :; do sleep 1 & wait; done";
        let fifo = pod.fifo("fifo");
        let mut c = pod.start("app", &[], &[], &["sh", "-c", script], pidns);
        pod.wait_file("orphan");
        let sexton = c.target_pid();
        // the orphan's parent is sexton (PID 1 of the namespace, or the subreaper)
        let orphan_ns_pid: i32 = fs::read_to_string(pod.path("orphan"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let orphan_host_pid = {
            let mut found = None;
            wait_until(TIMEOUT, || {
                found = children_of(sexton)
                    .into_iter()
                    .find(|p| ns_pid(*p) == Some(orphan_ns_pid));
                found.is_some()
            });
            found.unwrap_or_else(|| {
                panic!(
                    "orphan not reparented to sexton (pidns={pidns}); children: {:?}",
                    children_of(sexton)
                )
            })
        };
        fs::write(&fifo, "go\n").unwrap();
        pod.wait_file("orphan-done");
        // the orphan exits; sexton must reap it (no zombie left)
        assert!(
            wait_until(TIMEOUT, || state_of(orphan_host_pid).is_none()),
            "orphan {orphan_host_pid} left as {:?} (pidns={pidns})",
            state_of(orphan_host_pid)
        );
        assert!(zombies_in(&children_of(sexton)).is_empty());
        assert!(
            c.is_running(),
            "reaping an orphan must not be mistaken for the child's exit"
        );
        c.signal(15);
        assert_eq!(c.wait(), 143, "child's own status kept (pidns={pidns})");
    }
}

#[test]
fn symlink_in_place_of_tombstone_is_replaced_not_followed() {
    let pod = Pod::new("symlink");
    fs::create_dir_all(&pod.graveyard).unwrap();
    let victim = pod.path("victim");
    fs::write(&victim, "precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, pod.tombstone_path("app")).unwrap();
    let mut c = pod.container("app", &[], &["true"]);
    assert_eq!(c.wait(), 0);
    assert_eq!(fs::read_to_string(&victim).unwrap(), "precious\n");
    let meta = fs::symlink_metadata(pod.tombstone_path("app")).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(pod.tombstone("app").unwrap()["ExitCode"], 0);
}

#[test]
fn symlinked_dependency_tombstone_is_not_followed() {
    let pod = Pod::new("symdep");
    fs::create_dir_all(&pod.graveyard).unwrap();
    fs::write(
        pod.path("fake"),
        "{\"Died\":\"2026-01-01T00:00:00Z\",\"ExitCode\":0}\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(pod.path("fake"), pod.tombstone_path("main")).unwrap();
    let mut c = pod.container(
        "sidecar",
        &[("KUBEXIT_DEATH_DEPS", "main")],
        &["sh", "-c", &term_recorder("term", 0)],
    );
    pod.wait_file("term.started");
    c.wait_log("is a symlink; not followed");
    assert!(c.is_running());
    c.signal(15);
    assert_eq!(c.wait(), 0);
}

#[test]
fn flags_win_over_env_and_kubexit_style_invocation() {
    let pod = Pod::new("flags");
    // flag --name beats KUBEXIT_NAME
    let mut c = pod.start(
        "envname",
        &[],
        &["--name", "flagname"],
        &["sh", "-c", "exit 3"],
        true,
    );
    assert_eq!(c.wait(), 3);
    assert!(pod.tombstone("flagname").is_some() && pod.tombstone("envname").is_none());

    // kubexit style: no `--`, arguments that look like flags belong to the command
    let out = std::process::Command::new(sexton_bin())
        .env("KUBEXIT_NAME", "k")
        .env("KUBEXIT_GRAVEYARD", &pod.graveyard)
        .args(["sh", "-c", "echo \"$0 $1\"; exit 4", "--name", "-x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "--name -x\n");
}

#[test]
fn chain_and_multiple_death_deps() {
    // proxy dies when main dies; logger dies when either proxy or other dies
    let pod = Pod::new("chain");
    let mut proxy = pod.container(
        "proxy",
        &[("KUBEXIT_DEATH_DEPS", "main")],
        &["sh", "-c", &term_recorder("p", 0)],
    );
    let mut logger = pod.container(
        "logger",
        &[("KUBEXIT_DEATH_DEPS", "other, proxy")],
        &["sh", "-c", &term_recorder("l", 0)],
    );
    pod.wait_born("proxy");
    pod.wait_born("logger");
    let mut main = pod.container("main", &[], &["true"]);
    assert_eq!(main.wait(), 0);
    assert_eq!(proxy.wait(), 0);
    assert_eq!(logger.wait(), 0);
    assert_eq!(pod.tombstone("logger").unwrap()["DeathDep"], "proxy");
}

#[test]
fn json_logs() {
    let pod = Pod::new("json");
    let mut c = pod.container("app", &[("KUBEXIT_LOG_FORMAT", "json")], &["true"]);
    assert_eq!(c.wait(), 0);
    let logs = c.logs();
    let lines: Vec<&str> = logs.lines().collect();
    assert!(lines.len() >= 2, "{logs}");
    for l in lines {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert_eq!(v["span"]["container"], "app", "{l}");
        assert!(v["fields"]["message"].is_string());
    }
}

#[test]
fn help_version_and_install() {
    let out = std::process::Command::new(sexton_bin())
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for s in sexton_core::settings::SETTINGS {
        assert!(
            help.contains(&format!("--{}", s.flag)) && help.contains(s.env),
            "{} missing from --help",
            s.env
        );
    }
    let out = std::process::Command::new(sexton_bin())
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("sexton {}", env!("CARGO_PKG_VERSION"))
    );

    let pod = Pod::new("install");
    let dir = pod.path("bin");
    let out = std::process::Command::new(sexton_bin())
        .args(["install", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = dir.join("sexton");
    let meta = fs::metadata(&installed).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o755);
    assert_eq!(meta.len(), fs::metadata(sexton_bin()).unwrap().len());
    assert_eq!(
        fs::read(&installed).unwrap(),
        fs::read(sexton_bin()).unwrap()
    );
    let out = std::process::Command::new(&installed)
        .arg("--version")
        .output()
        .unwrap();
    assert!(out.status.success());
    // no temp files left
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
    // install with no DIR is a usage error
    let out = std::process::Command::new(sexton_bin())
        .arg("install")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

fn cpu_ticks(pid: i32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // fields 14 and 15 of stat (utime, stime) are at 11 and 12 after "state"
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn idle_supervision_does_not_spin_when_dependency_tombstone_is_read() {
    // Regression: notify subscribes to IN_OPEN; re-reading a tombstone on its own open
    // event was a busy loop. Over a one-second window the wrapper must use (almost) no CPU
    // even while other processes keep reading the dependency's tombstone.
    let pod = Pod::new("idle");
    pod.write_tombstone(
        "main",
        "{\"Born\":\"2026-01-01T00:00:00Z\",\"Ready\":\"2026-01-01T00:00:00Z\"}\n",
    );
    let mut c = pod.container(
        "sidecar",
        &[("KUBEXIT_DEATH_DEPS", "main"), ("KUBEXIT_WATCH", "inotify")],
        &["sleep", "100"],
    );
    pod.wait_born("sidecar");
    let pid = c.target_pid();
    for _ in 0..20 {
        let _ = fs::read(pod.tombstone_path("main")).unwrap();
    }
    let before = cpu_ticks(pid);
    let end = Instant::now() + Duration::from_secs(1);
    while Instant::now() < end {
        let _ = fs::read(pod.tombstone_path("main")).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let used = cpu_ticks(pid) - before;
    assert!(
        used <= 5,
        "wrapper used {used} clock ticks in 1s of idle supervision"
    );
    assert!(c.is_running());
}

#[test]
fn binary_is_static() {
    // No PT_INTERP program header: the kernel runs it without a dynamic loader, so it
    // works in FROM-scratch images and when copied into any app image.
    let elf = fs::read(sexton_bin()).unwrap();
    assert_eq!(&elf[..4], b"\x7fELF");
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    let types: Vec<u32> = (0..phnum)
        .map(|i| u32::from_le_bytes(elf[phoff + i * phentsize..][..4].try_into().unwrap()))
        .collect();
    assert!(!types.contains(&3), "PT_INTERP present: dynamically linked");
}

#[test]
fn child_starts_with_no_signal_blocked_or_ignored() {
    // sexton blocks the signals it reads from its signalfd; the child must not inherit that
    let pod = Pod::new("sigmask");
    let mut c = pod.container(
        "app",
        &[],
        &[
            "sh",
            "-c",
            "grep -E '^Sig(Blk|Ign)' /proc/self/status > \"$POD/mask\"",
        ],
    );
    assert_eq!(c.wait(), 0);
    let mask = fs::read_to_string(pod.path("mask")).unwrap();
    assert!(mask.contains("SigBlk:\t0000000000000000"), "{mask}");
}

/// `sexton quick-exit` is the entrypoint of the SidecarTerminator's replacement image: it
/// must exit 0 whatever the arguments of the container it replaces.
#[test]
fn quick_exit_exits_zero_whatever_its_arguments() {
    for args in [
        vec![],
        vec!["--config", "/etc/envoy.yaml"],
        vec!["-c", "exit 3"],
    ] {
        let out = std::process::Command::new(sexton_bin())
            .arg("quick-exit")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
    }
}
