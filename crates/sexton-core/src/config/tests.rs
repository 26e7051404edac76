//! The configuration parser, table-tested (`config.rs`).

use super::*;
use crate::settings::{Origin, Raw};
use std::collections::HashMap;

fn cfg(pairs: &[(&str, &str)], cmd: &[&str]) -> Result<Config, ConfigError> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(
        |id| {
            map.get(id).map(|v| Raw {
                value: v.clone(),
                origin: Origin::Env,
            })
        },
        cmd.iter().map(OsString::from).collect(),
    )
}

#[test]
fn defaults() {
    let c = cfg(&[("name", "sidecar")], &["sleep", "1"]).unwrap();
    assert_eq!(c.name, "sidecar");
    assert_eq!(c.graveyard, PathBuf::from("/graveyard"));
    assert!(c.death_deps.is_empty());
    assert!(c.birth_deps.is_empty());
    assert_eq!(c.grace_period, Duration::from_secs(30));
    assert_eq!(c.birth_timeout, Duration::from_secs(30));
    assert_eq!(c.term_signal, Signal::SIGTERM);
    assert!(!c.signal_group);
    assert_eq!(c.dep_exit_code, DepExitCode::Zero);
    assert_eq!(c.death_trigger, DeathTrigger::Any);
    assert_eq!(c.log_format, LogFormat::Text);
}

#[test]
fn all_settings_parsed() {
    let c = cfg(
        &[
            ("name", "proxy"),
            ("graveyard", "/tmp/g"),
            ("death_deps", " main , other,"),
            ("birth_deps", "db"),
            ("grace_period", "1m30s"),
            ("birth_timeout", "500ms"),
            ("term_signal", "int"),
            ("signal_group", "true"),
            ("dep_exit_code", "child"),
            ("death_trigger", "success"),
            ("log_format", "JSON"),
        ],
        &["envoy"],
    )
    .unwrap();
    assert_eq!(c.death_deps, vec!["main", "other"]);
    assert_eq!(c.birth_deps, vec!["db"]);
    assert_eq!(c.grace_period, Duration::from_secs(90));
    assert_eq!(c.birth_timeout, Duration::from_millis(500));
    assert_eq!(c.term_signal, Signal::SIGINT);
    assert!(c.signal_group);
    assert_eq!(c.dep_exit_code, DepExitCode::Child);
    assert_eq!(c.death_trigger, DeathTrigger::Success);
    assert_eq!(c.log_format, LogFormat::Json);
}

/// (settings, command, what the error must say)
type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a str);

#[test]
fn config_errors_name_the_variable_and_value() {
    let cases: &[Case] = &[
        (&[], &["x"], "KUBEXIT_NAME: required"),
        (&[("name", "  ")], &["x"], "KUBEXIT_NAME: required"),
        (&[("name", "a/b")], &["x"], "invalid KUBEXIT_NAME=\"a/b\""),
        (
            &[("name", "..")],
            &["x"],
            "invalid KUBEXIT_NAME=\"..\": must be a plain name",
        ),
        (
            &[("name", "Main")],
            &["x"],
            "invalid KUBEXIT_NAME=\"Main\": contains 'M'",
        ),
        (&[("name", "-a")], &["x"], "must start and end"),
        (
            &[("name", "a"), ("grace_period", "10")],
            &["x"],
            "invalid KUBEXIT_GRACE_PERIOD=\"10\": missing unit",
        ),
        (
            &[("name", "a"), ("grace_period", "5x")],
            &["x"],
            "invalid KUBEXIT_GRACE_PERIOD=\"5x\": unknown unit",
        ),
        (
            &[("name", "a"), ("grace_period", "-1s")],
            &["x"],
            "must not be negative",
        ),
        (
            &[("name", "a"), ("term_signal", "SIGFOO")],
            &["x"],
            "invalid KUBEXIT_TERM_SIGNAL=\"SIGFOO\": unknown signal",
        ),
        (
            &[("name", "a"), ("term_signal", "99")],
            &["x"],
            "99 is not a signal number",
        ),
        (
            &[("name", "a"), ("death_deps", "b,a")],
            &["x"],
            "invalid KUBEXIT_DEATH_DEPS=\"b,a\": \"a\" is this container's own name",
        ),
        (
            &[("name", "a"), ("death_deps", "b, b")],
            &["x"],
            "\"b\" is listed twice",
        ),
        (
            &[("name", "a"), ("birth_deps", "B")],
            &["x"],
            "invalid KUBEXIT_BIRTH_DEPS=\"B\": dependency \"B\"",
        ),
        (
            &[("name", "a"), ("signal_group", "maybe")],
            &["x"],
            "invalid KUBEXIT_SIGNAL_GROUP=\"maybe\"",
        ),
        (
            &[("name", "a"), ("dep_exit_code", "one")],
            &["x"],
            "invalid KUBEXIT_DEP_EXIT_CODE",
        ),
        (
            &[("name", "a"), ("death_trigger", "fail")],
            &["x"],
            "invalid KUBEXIT_DEATH_TRIGGER",
        ),
        (
            &[("name", "a"), ("log_format", "xml")],
            &["x"],
            "invalid KUBEXIT_LOG_FORMAT",
        ),
        (
            &[("name", "a"), ("watch", "fanotify")],
            &["x"],
            "invalid KUBEXIT_WATCH=\"fanotify\"",
        ),
        (
            &[("name", "a"), ("pod_name", "job-x")],
            &["x"],
            "KUBEXIT_NAMESPACE: required when KUBEXIT_POD_NAME=\"job-x\"",
        ),
        (
            &[("name", "a"), ("namespace", "ns")],
            &["x"],
            "KUBEXIT_POD_NAME: required when KUBEXIT_NAMESPACE=\"ns\"",
        ),
        (
            &[("name", "a"), ("pod_name", "Job_X"), ("namespace", "ns")],
            &["x"],
            "invalid KUBEXIT_POD_NAME=\"Job_X\"",
        ),
        (
            &[("name", "a"), ("pod_name", "p"), ("namespace", "a.b")],
            &["x"],
            "invalid KUBEXIT_NAMESPACE=\"a.b\"",
        ),
        (
            &[("name", "a"), ("poll_interval", "1ms")],
            &["x"],
            "invalid KUBEXIT_POLL_INTERVAL=\"1ms\": must be at least 10ms",
        ),
        (
            &[("name", "a"), ("ready_probe", "udp://1.2.3.4:5")],
            &["x"],
            "invalid KUBEXIT_READY_PROBE=\"udp://1.2.3.4:5\"",
        ),
        (
            &[("name", "a"), ("ready_probe", "tcp://127.0.0.1")],
            &["x"],
            "port",
        ),
        (
            &[("name", "a"), ("ready_probe", "file://relative")],
            &["x"],
            "absolute",
        ),
        (
            &[("name", "a"), ("ready_timeout", "0")],
            &["x"],
            "invalid KUBEXIT_READY_TIMEOUT",
        ),
        (
            &[("name", "a"), ("shutdown_hook_timeout", "0s")],
            &["x"],
            "invalid KUBEXIT_SHUTDOWN_HOOK_TIMEOUT=\"0s\": must be more than 0",
        ),
        (
            &[("name", "a"), ("ready_interval", "9ms")],
            &["x"],
            "invalid KUBEXIT_READY_INTERVAL=\"9ms\": must be at least 10ms",
        ),
        (
            &[
                ("name", "a"),
                ("shutdown_hooks", "http://10.1.2.3:15020/quitquitquit"),
            ],
            &["x"],
            "is not a loopback address",
        ),
        (
            &[("name", "a"), ("shutdown_hooks", "https://127.0.0.1/x")],
            &["x"],
            "invalid KUBEXIT_SHUTDOWN_HOOKS",
        ),
        (
            &[("name", "a"), ("shutdown_hooks_allow_remote", "sure")],
            &["x"],
            "invalid KUBEXIT_SHUTDOWN_HOOKS_ALLOW_REMOTE",
        ),
        (
            &[("name", "a"), ("log_level", "loud")],
            &["x"],
            "invalid KUBEXIT_LOG_LEVEL=\"loud\"",
        ),
        (&[("name", "a")], &[], "COMMAND: no command given"),
        (&[("name", "a")], &[""], "COMMAND: no command given"),
    ];
    for (pairs, cmd, want) in cases {
        let e = cfg(pairs, cmd).expect_err(want).to_string();
        assert!(e.contains(want), "{pairs:?}: got {e:?}, want {want:?}");
        assert!(!e.contains('\n'), "one line: {e:?}");
    }
}

#[test]
fn blank_env_is_unset_and_paths_are_trimmed() {
    let c = cfg(
        &[
            ("name", " a "),
            ("graveyard", ""),
            ("grace_period", " "),
            ("term_signal", ""),
            ("watch", ""),
            ("log_level", "  "),
        ],
        &["x"],
    )
    .unwrap();
    assert_eq!(c.graveyard, PathBuf::from("/graveyard"));
    assert_eq!(c.grace_period, Duration::from_secs(30));
    assert_eq!(c.term_signal, Signal::SIGTERM);
    assert_eq!(c.watch, WatchMode::Auto);
    let c = cfg(&[("name", "a"), ("graveyard", " /abs/g \t")], &["x"]).unwrap();
    assert_eq!(c.graveyard, PathBuf::from("/abs/g"));
    // still required
    let e = cfg(&[("name", " ")], &["x"]).unwrap_err().to_string();
    assert!(e.starts_with("KUBEXIT_NAME: required"), "{e}");
    // a blank flag is not "unset": it is an explicit, empty value
    let e = Config::from_lookup(
        |id| {
            Some(Raw {
                value: if id == "name" {
                    "a".into()
                } else if id == "graveyard" {
                    " ".into()
                } else {
                    return None;
                },
                origin: Origin::Flag,
            })
        },
        vec!["x".into()],
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("invalid --graveyard"), "{e}");
}

#[test]
fn probes_and_hooks() {
    let c = cfg(
        &[
            ("name", "a"),
            ("watch", "poll"),
            ("poll_interval", "50ms"),
            ("ready_probe", "http://localhost:15021/healthz/ready"),
            (
                "shutdown_hooks",
                "http://127.0.0.1:15020/quitquitquit, http://[::1]:4191/shutdown",
            ),
        ],
        &["x"],
    )
    .unwrap();
    assert_eq!(c.watch, WatchMode::Poll);
    assert_eq!(c.poll_interval, Duration::from_millis(50));
    assert!(
        matches!(&c.ready_probe, Some(Probe::Http(u)) if u.port == 15021 && u.path == "/healthz/ready")
    );
    assert_eq!(c.shutdown_hooks.len(), 2);
    let c = cfg(
        &[
            ("name", "a"),
            ("shutdown_hooks", "http://proxy.internal:8080/stop"),
            ("shutdown_hooks_allow_remote", "true"),
        ],
        &["x"],
    )
    .unwrap();
    assert_eq!(c.shutdown_hooks[0].host, "proxy.internal");
    let d = cfg(&[("name", "a")], &["x"]).unwrap();
    assert_eq!(
        (d.watch, d.poll_interval, d.ready_probe.is_none()),
        (WatchMode::Auto, Duration::from_secs(1), true)
    );
    assert!(d.pod.is_none() && d.kubeconfig.is_none());
    let c = cfg(
        &[
            ("name", "a"),
            ("pod_name", "job-abc.x"),
            ("namespace", "team-a"),
            ("kubeconfig", "/k"),
        ],
        &["x"],
    )
    .unwrap();
    assert_eq!(
        c.pod,
        Some(PodRef {
            name: "job-abc.x".into(),
            namespace: "team-a".into()
        })
    );
    assert_eq!(c.kubeconfig, Some(PathBuf::from("/k")));
}

#[test]
fn flag_origin_named_as_flag() {
    let e = Config::from_lookup(
        |id| match id {
            "name" => Some(Raw {
                value: "a".into(),
                origin: Origin::Env,
            }),
            "grace_period" => Some(Raw {
                value: "x".into(),
                origin: Origin::Flag,
            }),
            _ => None,
        },
        vec!["x".into()],
    )
    .unwrap_err();
    assert_eq!(e.origin, "--grace-period");
}

#[test]
fn signals() {
    for (s, sig) in [
        ("SIGTERM", Signal::SIGTERM),
        ("TERM", Signal::SIGTERM),
        ("term", Signal::SIGTERM),
        ("15", Signal::SIGTERM),
        ("sigquit", Signal::SIGQUIT),
        ("KILL", Signal::SIGKILL),
        ("USR1", Signal::SIGUSR1),
    ] {
        assert_eq!(Signal::parse(s), Ok(sig), "{s}");
    }
    for bad in ["", "0", "65", "FOO", "SIG"] {
        assert!(Signal::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn bools() {
    for (s, b) in [
        ("true", true),
        ("1", true),
        ("YES", true),
        ("false", false),
        ("", false),
        ("0", false),
    ] {
        assert_eq!(parse_bool(s), Ok(b), "{s}");
    }
    assert!(parse_bool("2").is_err());
}
