//! The sidecar contract (README, "The sidecar contract"), row by row, with the real binary:
//! containers of one pod, each PID 1 of its own PID namespace, sharing one graveyard. Each
//! row is run with the settings `kubectl sexton inject` writes for `wrap`, and with a
//! hand-written kubexit configuration, which must behave as before.
//!
//! The mains' and sidecars' programs are shells that report what happened to them in files
//! of the pod's scratch directory and wait on FIFOs the test writes: every order asserted
//! here is made by the test, never by a sleep.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use common::*;

/// What `inject` gives a sidecar (contract.rs of sexton-inject), for a pod with the
/// kubelet's default grace period of 30 s.
const SIDECAR: &[(&str, &str)] = &[
    ("KUBEXIT_DEATH_DEPS_MODE", "all"),
    ("KUBEXIT_GRACE_PERIOD", "10s"),
    ("KUBEXIT_HOLD_STOP", "true"),
    ("KUBEXIT_POD_GRACE_PERIOD", "30s"),
    ("KUBEXIT_RESTART_CHILD", "true"),
];

fn with(
    base: &[(&'static str, &'static str)],
    more: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    let mut v = base.to_vec();
    v.extend_from_slice(more);
    v
}

/// A main that works until the test writes its FIFO `<name>-go`, then exits `code`.
fn main_until_go(pod: &Pod, name: &str, code: i32) -> Container {
    pod.fifo(&format!("{name}-go"));
    pod.container(
        name,
        &[],
        &[
            "sh",
            "-c",
            &format!("read x < \"$POD/{name}-go\"; exit {code}"),
        ],
    )
}

/// A main that drains on SIGTERM: records it, then exits 0 once the test writes `drain`.
/// Returned once its trap is set and its tombstone says `Born`.
fn draining_main(pod: &Pod) -> Container {
    pod.fifo("drain");
    let main = pod.container(
        "main",
        &[],
        &[
            "sh",
            "-c",
            "trap 'echo TERM > \"$POD/main-term\"; read x < \"$POD/drain\"; exit 0' TERM; echo up > \"$POD/main-up\"; while :; do sleep 1 & wait; done",
        ],
    );
    pod.wait_file("main-up");
    pod.wait_born("main");
    main
}

/// A sidecar's child that appends its name to `order` on SIGTERM and exits `code`; with
/// `hold_fifo`, it first waits for the test to write that FIFO (a proxy still draining).
fn sidecar_child(name: &str, code: i32, hold_fifo: Option<&str>) -> String {
    let wait = hold_fifo.map_or(String::new(), |f| format!("read x < \"$POD/{f}\"; "));
    format!(
        "trap 'echo {name} >> \"$POD/order\"; {wait}exit {code}' TERM; echo up > \"$POD/{name}-up\"; while :; do sleep 1 & wait; done"
    )
}

/// Starts a sidecar running `sidecar_child`, returned once its child set its trap.
fn sidecar(
    pod: &Pod,
    name: &str,
    env: &[(&str, &str)],
    code: i32,
    hold_fifo: Option<&str>,
) -> Container {
    let c = pod.container(
        name,
        env,
        &["sh", "-c", &sidecar_child(name, code, hold_fifo)],
    );
    pod.wait_file(&format!("{name}-up"));
    c
}

fn write(pod: &Pod, fifo: &str) {
    fs::write(pod.path(fifo), "go\n").unwrap();
}

fn order(pod: &Pod) -> String {
    fs::read_to_string(pod.path("order")).unwrap_or_default()
}

#[test]
fn sidecar_stops_after_all_mains_not_the_first() {
    for (mode, stops_after_first) in [("all", false), ("any", true)] {
        let pod = Pod::new("allmains");
        let mut a = main_until_go(&pod, "main-a", 0);
        let mut b = main_until_go(&pod, "main-b", 0);
        let env = [
            ("KUBEXIT_DEATH_DEPS", "main-a,main-b"),
            ("KUBEXIT_DEATH_DEPS_MODE", mode),
        ];
        let mut proxy = sidecar(&pod, "proxy", &env, 0, None);
        pod.wait_born("main-b");
        write(&pod, "main-a-go");
        assert_eq!(a.wait(), 0);
        if stops_after_first {
            // kubexit's meaning: main-b runs on without its proxy
            assert_eq!(proxy.wait(), 0, "{mode}");
            assert!(b.is_running());
            assert_eq!(order(&pod), "proxy\n");
            write(&pod, "main-b-go");
            assert_eq!(b.wait(), 0);
            continue;
        }
        proxy.wait_log("death dependency \"main-a\" died with exit code 0; the child is stopped once all have died (KUBEXIT_DEATH_DEPS_MODE=all), waiting for main-b");
        assert!(proxy.is_running(), "{mode}: stopped after the first main");
        assert_eq!(order(&pod), "", "{mode}: the proxy's child got SIGTERM");
        write(&pod, "main-b-go");
        assert_eq!(b.wait(), 0);
        assert_eq!(proxy.wait(), 0, "{}", proxy.logs());
        assert_eq!(order(&pod), "proxy\n");
        let t = pod.tombstone("proxy").unwrap();
        assert_eq!(
            (t["Reason"].as_str(), t["DeathDep"].as_str()),
            (Some("stopped-by-dependency"), Some("main-b"))
        );
    }
}

#[test]
fn pod_deletion_holds_the_sidecars_sigterm_until_the_main_drained() {
    for hold in [true, false] {
        let pod = Pod::new("hold");
        let mut main = draining_main(&pod);
        let env = if hold {
            with(SIDECAR, &[("KUBEXIT_DEATH_DEPS", "main")])
        } else {
            vec![("KUBEXIT_DEATH_DEPS", "main")]
        };
        let mut proxy = sidecar(&pod, "proxy", &env, 143, None);
        // the kubelet deletes the pod: SIGTERM to every container at once
        main.signal(15);
        proxy.signal(15);
        pod.wait_file("main-term");
        if !hold {
            // kubexit: forwarded at once, the proxy is gone while the main drains, and
            // its 143 fails the pod
            assert_eq!(proxy.wait(), 143);
            assert!(main.is_running(), "main still draining");
            write(&pod, "drain");
            assert_eq!(main.wait(), 0);
            continue;
        }
        proxy.wait_log("holding SIGTERM: death dependencies main still alive; the child is stopped once they died, at the latest in 19s");
        assert_eq!(
            order(&pod),
            "",
            "SIGTERM reached the proxy while the main drains"
        );
        assert!(proxy.is_running());
        write(&pod, "drain");
        assert_eq!(main.wait(), 0);
        assert_eq!(proxy.wait(), 0, "{}", proxy.logs());
        assert_eq!(order(&pod), "proxy\n");
        let (m, p) = (
            pod.tombstone("main").unwrap(),
            pod.tombstone("proxy").unwrap(),
        );
        assert_eq!(p["Reason"], "stopped-by-dependency");
        assert!(m["Died"].as_str() <= p["Died"].as_str(), "{m} {p}");
    }
}

#[test]
fn a_held_sigterm_ends_at_its_bound() {
    let pod = Pod::new("bound");
    let mut main = draining_main(&pod);
    // pod grace 3 s - grace 1 s - margin 1 s: held for 1 s at most
    let env = with(
        &[
            ("KUBEXIT_HOLD_STOP", "true"),
            ("KUBEXIT_DEATH_DEPS", "main"),
        ],
        &[
            ("KUBEXIT_POD_GRACE_PERIOD", "3s"),
            ("KUBEXIT_GRACE_PERIOD", "1s"),
        ],
    );
    let mut proxy = sidecar(&pod, "proxy", &env, 143, None);
    main.signal(15);
    proxy.signal(15);
    proxy.wait_log("at the latest in 1s");
    // the main never finishes draining: the proxy still ends inside the pod's grace
    // period, with 0 (a sidecar's code never decides the pod)
    assert_eq!(proxy.wait(), 0, "{}", proxy.logs());
    assert!(main.is_running());
    assert_eq!(order(&pod), "proxy\n");
    assert_eq!(
        pod.tombstone("proxy").unwrap()["Reason"],
        "stopped-by-signal"
    );
    assert!(
        proxy
            .logs()
            .contains("SIGTERM was held while death dependencies lived (main) until its bound"),
        "{}",
        proxy.logs()
    );
    write(&pod, "drain");
    assert_eq!(main.wait(), 0);
}

#[test]
fn sidecars_stop_in_reverse_order() {
    // declared [logs, proxy]: proxy depends on the main, logs on proxy (inject's chain),
    // or both on the main (kubexit)
    for (chain, deletion) in [(true, false), (true, true), (false, false)] {
        let pod = Pod::new("reverse");
        let mut main = draining_main(&pod);
        pod.fifo("proxy-drained");
        let (logs_env, proxy_env) = if chain {
            (
                with(SIDECAR, &[("KUBEXIT_DEATH_DEPS", "proxy")]),
                with(SIDECAR, &[("KUBEXIT_DEATH_DEPS", "main")]),
            )
        } else {
            (
                vec![("KUBEXIT_DEATH_DEPS", "main")],
                vec![("KUBEXIT_DEATH_DEPS", "main")],
            )
        };
        let mut logs = sidecar(&pod, "logs", &logs_env, 0, None);
        let mut proxy = sidecar(&pod, "proxy", &proxy_env, 0, Some("proxy-drained"));
        pod.wait_born("proxy");
        if deletion {
            for c in [&main, &logs, &proxy] {
                c.signal(15);
            }
            proxy.wait_log("holding SIGTERM");
            logs.wait_log("holding SIGTERM");
        } else {
            main.signal(15);
        }
        pod.wait_file("main-term");
        write(&pod, "drain");
        assert_eq!(main.wait(), 0);
        // the proxy got SIGTERM and drains (blocked on its FIFO)
        assert!(
            wait_until(TIMEOUT, || order(&pod).contains("proxy")),
            "{}",
            proxy.logs()
        );
        if !chain {
            // kubexit: both at once
            assert!(wait_until(TIMEOUT, || order(&pod).contains("logs")));
            write(&pod, "proxy-drained");
            assert_eq!((proxy.wait(), logs.wait()), (0, 0));
            continue;
        }
        assert_eq!(
            order(&pod),
            "proxy\n",
            "logs stopped before the proxy exited"
        );
        assert!(logs.is_running());
        write(&pod, "proxy-drained");
        assert_eq!(proxy.wait(), 0, "{}", proxy.logs());
        assert_eq!(logs.wait(), 0, "{}", logs.logs());
        assert_eq!(order(&pod), "proxy\nlogs\n");
        let (p, l) = (
            pod.tombstone("proxy").unwrap(),
            pod.tombstone("logs").unwrap(),
        );
        assert_eq!(l["DeathDep"], "proxy", "{l}");
        assert!(p["Died"].as_str() <= l["Died"].as_str(), "{p} {l}");
    }
}

#[test]
fn a_crashed_sidecar_is_restarted_while_the_main_runs() {
    // each run of the proxy's child appends a line, then crashes
    let crash = ["sh", "-c", "echo run >> \"$POD/runs\"; exit 3"];
    let runs = |pod: &Pod| {
        fs::read_to_string(pod.path("runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };

    // kubexit: not restarted, the container ends with the child's code
    let pod = Pod::new("norestart");
    let mut main = main_until_go(&pod, "main", 0);
    let mut proxy = pod.container("proxy", &[("KUBEXIT_DEATH_DEPS", "main")], &crash);
    assert_eq!(proxy.wait(), 3);
    assert_eq!(runs(&pod), 1);
    write(&pod, "main-go");
    assert_eq!(main.wait(), 0);

    let pod = Pod::new("restart");
    let mut main = main_until_go(&pod, "main", 0);
    let env = with(
        SIDECAR,
        &[
            ("KUBEXIT_DEATH_DEPS", "main"),
            ("KUBEXIT_RESTART_BACKOFF", "200ms"),
        ],
    );
    let mut proxy = pod.container("proxy", &env, &crash);
    pod.wait_born("proxy");
    let born = pod.tombstone("proxy").unwrap()["Born"].clone();
    // at once, then after 200 ms, 400 ms: the kubelet's back-off at a fifth of its scale
    proxy.wait_log("child exited with code 3; restarting it at once (restart 1; the death dependencies are alive)");
    proxy.wait_log("restarting it in 200ms (restart 2;");
    proxy.wait_log("restarting it in 400ms (restart 3;");
    proxy.wait_log("restarted child (restart 3)");
    assert!(wait_until(TIMEOUT, || runs(&pod) >= 4));
    let t = pod.tombstone("proxy").unwrap();
    assert!(t["Restarts"].as_u64() >= Some(3), "{t}");
    assert_eq!(t["Born"], born, "one life for its peers: {t}");
    assert!(t.get("Died").is_none(), "{t}");
    // a peer waiting for it sees it alive and ready across the restarts
    let mut peer = pod.container(
        "peer",
        &[
            ("KUBEXIT_BIRTH_DEPS", "proxy"),
            ("KUBEXIT_BIRTH_TIMEOUT", "5s"),
        ],
        &["true"],
    );
    assert_eq!(peer.wait(), 0, "{}", peer.logs());
    // the main finishes: no restart any more, the proxy ends with 0
    write(&pod, "main-go");
    assert_eq!(main.wait(), 0);
    assert_eq!(proxy.wait(), 0, "{}", proxy.logs());
    let t = pod.tombstone("proxy").unwrap();
    assert_eq!(t["Reason"], "stopped-by-dependency", "{t}");
    assert_eq!(t["Restarts"].as_u64(), Some(runs(&pod) as u64 - 1), "{t}");
    let logs = proxy.logs();
    let died = logs
        .find("death dependency \"main\" died")
        .expect("the main's death");
    assert!(
        !logs[died..].contains("restarted child"),
        "restarted after the main died: {logs}"
    );
}

#[test]
fn no_restart_after_a_stop_signal() {
    let pod = Pod::new("restartsig");
    let mut main = draining_main(&pod);
    let env = with(SIDECAR, &[("KUBEXIT_DEATH_DEPS", "main")]);
    // exits 1 on SIGTERM, or when the test writes `crash`
    pod.fifo("crash");
    let child = "trap 'exit 1' TERM; echo up >> \"$POD/proxy-up\"; read x < \"$POD/crash\"; exit 1";
    let mut proxy = pod.container("proxy", &env, &["sh", "-c", child]);
    pod.wait_file("proxy-up");
    main.signal(15);
    proxy.signal(15);
    proxy.wait_log("holding SIGTERM");
    // the child crashes during the hold: not restarted, the hold goes on
    write(&pod, "crash");
    proxy.wait_log("while a stop signal is held; not restarting it");
    assert!(
        proxy.is_running(),
        "peers stopping after the proxy still wait for it"
    );
    write(&pod, "drain");
    assert_eq!(main.wait(), 0);
    assert_eq!(proxy.wait(), 0, "{}", proxy.logs());
    assert!(
        !proxy.logs().contains("restarted child"),
        "{}",
        proxy.logs()
    );
}

#[test]
fn pre_stop_runs_before_the_term_signal_when_the_main_finishes() {
    // exec: blocks until the test lets it finish; SIGTERM only after it
    let pod = Pod::new("prestop");
    let mut main = main_until_go(&pod, "main", 0);
    pod.fifo("hook-go");
    let hook = r#"exec:["sh","-c","echo hook >> \"$POD/order\"; read x < \"$POD/hook-go\""]"#;
    let env = with(
        SIDECAR,
        &[("KUBEXIT_DEATH_DEPS", "main"), ("KUBEXIT_PRE_STOP", hook)],
    );
    let mut proxy = sidecar(&pod, "proxy", &env, 0, None);
    pod.wait_born("main");
    write(&pod, "main-go");
    assert_eq!(main.wait(), 0);
    assert!(wait_until(TIMEOUT, || order(&pod) == "hook\n"));
    proxy.wait_log("running the preStop hook before stopping the child");
    assert!(proxy.is_running());
    assert_eq!(order(&pod), "hook\n", "SIGTERM before the hook finished");
    write(&pod, "hook-go");
    assert_eq!(proxy.wait(), 0, "{}", proxy.logs());
    assert_eq!(order(&pod), "hook\nproxy\n");
    assert!(
        proxy.logs().contains("preStop hook exited with code 0"),
        "{}",
        proxy.logs()
    );

    // http: one GET before SIGTERM
    let (port, seen) = recorder(200);
    let pod = Pod::new("prestophttp");
    let mut main = main_until_go(&pod, "main", 0);
    let hook = format!("http://127.0.0.1:{port}/drain");
    let env = [
        ("KUBEXIT_DEATH_DEPS", "main"),
        ("KUBEXIT_PRE_STOP", hook.as_str()),
    ];
    let mut proxy = sidecar(&pod, "proxy", &env, 0, None);
    pod.wait_born("main");
    write(&pod, "main-go");
    assert_eq!(main.wait(), 0);
    assert_eq!(proxy.wait(), 0, "{}", proxy.logs());
    assert_eq!(*seen.lock().unwrap(), ["GET /drain"]);
    assert!(
        proxy.logs().contains("preStop hook answered HTTP 200"),
        "{}",
        proxy.logs()
    );

    // on pod deletion the kubelet has run it before its SIGTERM: never twice
    let pod = Pod::new("prestopsig");
    let mut main = draining_main(&pod);
    let hook = r#"exec:["sh","-c","echo hook >> \"$POD/order\""]"#;
    let env = with(
        SIDECAR,
        &[("KUBEXIT_DEATH_DEPS", "main"), ("KUBEXIT_PRE_STOP", hook)],
    );
    let mut proxy = sidecar(&pod, "proxy", &env, 0, None);
    main.signal(15);
    proxy.signal(15);
    proxy.wait_log("holding SIGTERM");
    write(&pod, "drain");
    assert_eq!(main.wait(), 0);
    assert_eq!(proxy.wait(), 0);
    assert_eq!(order(&pod), "proxy\n", "the hook ran on the signal's path");
}

/// Under `native-wrap` a sidecar's supervisor stops its child when the mains have ended,
/// and the kubelet then sends the (native) sidecar container its own SIGTERM: the child
/// must get one SIGTERM, as a native sidecar's program does (a second one often means
/// "exit now, skip the drain"). A different signal is still forwarded.
#[test]
fn a_sidecar_being_stopped_gets_one_sigterm_when_the_kubelet_sends_its_own() {
    let pod = Pod::new("oneterm");
    let mut main = main_until_go(&pod, "main", 0);
    pod.fifo("proxy-drained");
    // records every SIGTERM and SIGWINCH (28: after SIGTERM in the order a shell runs
    // pending traps); drains until the test writes `proxy-drained`
    let child = r#"trap 'echo TERM >> "$POD/signals"' TERM; trap 'echo WINCH >> "$POD/signals"' 28; echo up > "$POD/proxy-up"; (read x < "$POD/proxy-drained") & r=$!; while kill -0 $r 2>/dev/null; do wait $r; done; exit 0"#;
    let env = with(SIDECAR, &[("KUBEXIT_DEATH_DEPS", "main")]);
    let mut proxy = pod.container("proxy", &env, &["sh", "-c", child]);
    pod.wait_file("proxy-up");
    pod.wait_born("main");
    let signals = || fs::read_to_string(pod.path("signals")).unwrap_or_default();
    // the mains end: the supervisor stops the child (SIGTERM), which drains
    write(&pod, "main-go");
    assert_eq!(main.wait(), 0);
    assert!(
        wait_until(TIMEOUT, || signals() == "TERM\n"),
        "{}",
        proxy.logs()
    );
    // the kubelet stops the native sidecar: its SIGTERM, then another signal
    proxy.signal(15);
    proxy.wait_log("received signal");
    proxy.signal(28);
    assert!(
        wait_until(TIMEOUT, || signals().contains("WINCH")),
        "{}",
        proxy.logs()
    );
    write(&pod, "proxy-drained");
    assert_eq!(proxy.wait(), 0, "{}", proxy.logs());
    assert_eq!(signals(), "TERM\nWINCH\n", "{}", proxy.logs());
    assert!(proxy.logs().contains("not sent again"), "{}", proxy.logs());
    assert_eq!(
        pod.tombstone("proxy").unwrap()["Reason"],
        "stopped-by-dependency"
    );
}

#[test]
fn a_binary_for_another_machine_is_exec_format_error_not_a_shell_script() {
    let pod = Pod::new("enoexec");
    // an ELF header no kernel loader or binfmt_misc handler of this machine accepts, as an
    // arm64 binary on an amd64 node without an emulator
    let bin = pod.path("server");
    let mut elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x02\0\xff\xff".to_vec();
    elf.extend_from_slice(b"(not a program for this machine)\n");
    fs::write(&bin, elf).unwrap();
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = pod.container("main", &[], &[bin.to_str().unwrap()]);
    assert_eq!(c.wait(), 126, "{}", c.logs());
    let logs = c.logs();
    let line = format!(
        "command {:?} cannot be executed: exec format error",
        bin.display().to_string()
    );
    assert_eq!(logs.matches(&line).count(), 1, "{logs}");
    assert!(
        !logs.contains("Syntax error") && !logs.contains("not found"),
        "run by /bin/sh: {logs}"
    );
    let t = pod.tombstone("main").unwrap();
    assert_eq!(t["Reason"], "spawn-failed");
    assert!(t.get("Ready").is_none(), "{t}");
    // the same found through PATH (sexton not PID 1 here: unshare is not on that PATH)
    let pod2 = Pod::new("enoexecpath");
    let mut c = pod2.start(
        "main",
        &[("PATH", pod.root.to_str().unwrap())],
        &[],
        &["server"],
        false,
    );
    assert_eq!(c.wait(), 126, "{}", c.logs());
    assert!(c.logs().contains(&line), "{}", c.logs());
}
