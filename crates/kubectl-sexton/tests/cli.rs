//! The command line as kubectl users meet it, through the real `kubectl` (which runs
//! `kubectl-sexton` from the PATH as its plugin): usage that reads `kubectl sexton ...`, the
//! user's commands listed before the server commands, kubectl's flags spelt and explained
//! the same in every command, and shell completion (the binary's own scripts, and
//! `kubectl sexton <TAB>` through kubectl's `kubectl_complete-sexton` convention).

use std::path::Path;
use std::process::{Command, Output};

use testbed::Scratch;

const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A directory holding the binary as `kubectl-sexton` and as `kubectl_complete-sexton`,
/// to put first on the PATH.
fn plugin_dir(s: &Scratch) -> String {
    for name in ["kubectl-sexton", "kubectl_complete-sexton"] {
        std::os::unix::fs::symlink(KUBECTL_SEXTON, s.path(name)).unwrap();
    }
    s.root.to_str().unwrap().to_string()
}

/// `program ARGS` with `dir` first on the PATH, outside any pod.
fn on_path(dir: &str, program: &str, args: &[&str]) -> Output {
    let path = format!("{dir}:{}", std::env::var("PATH").unwrap_or_default());
    Command::new(program)
        .args(args)
        .env("PATH", path)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBECTL_PATH")
        .output()
        .unwrap()
}

#[test]
fn usage_reads_kubectl_sexton_when_kubectl_runs_it() {
    let s = Scratch::new("cli-usage");
    let dir = plugin_dir(&s);
    // a usage error (no -f) through kubectl, then typed as the binary's own name
    let out = on_path(&dir, "kubectl", &["sexton", "inject"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("Usage: kubectl sexton inject "), "{err}");
    let out = on_path(&dir, "kubectl-sexton", &["inject"]);
    let err = text(&out.stderr);
    assert!(err.contains("Usage: kubectl-sexton inject "), "{err}");
}

#[test]
fn user_commands_come_first_and_server_commands_have_their_own_heading() {
    let out = Command::new(KUBECTL_SEXTON).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = text(&out.stdout);
    let (commands, servers) = help
        .split_once("Server commands")
        .unwrap_or_else(|| panic!("no server heading: {help}"));
    let listed = |section: &str| -> Vec<String> {
        section
            .lines()
            .filter(|l| l.starts_with("  ") && !l.trim_start().starts_with('-'))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    };
    let (commands, _) = commands.split_once("Options:").unwrap();
    assert_eq!(
        listed(commands),
        [
            "inject",
            "uninject",
            "doctor",
            "ejob",
            "version",
            "crd",
            "completion",
            "help"
        ],
        "{help}"
    );
    assert_eq!(listed(servers), ["controller", "webhook"], "{help}");
    // still commands
    for server in ["controller", "webhook"] {
        let out = Command::new(KUBECTL_SEXTON)
            .args([server, "--help"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{server}");
    }
}

/// What `-h` of `args` says of `flag`, its spaces collapsed (columns are as wide as each
/// command's longest flag).
fn flag_help(args: &[&str], flag: &str) -> String {
    let out = Command::new(KUBECTL_SEXTON)
        .args(args)
        .arg("-h")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}");
    let help = text(&out.stdout);
    let at = help
        .lines()
        .position(|l| l.trim_start().starts_with(flag) || l.contains(&format!(", {flag}")))
        .unwrap_or_else(|| panic!("{args:?} has no {flag}: {help}"));
    let rest: Vec<&str> = help.lines().skip(at).collect();
    let end = rest[1..]
        .iter()
        .position(|l| l.trim_start().starts_with('-') || l.trim().is_empty())
        .map_or(rest.len(), |i| i + 1);
    rest[..end]
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// kubectl's flags mean the same, with the same help, in every command people run.
#[test]
fn kubectl_flags_are_one_definition() {
    let cluster: [&[&str]; 3] = [&["doctor"], &["ejob", "results"], &["version"]];
    for flag in ["--kubeconfig", "--context", "--request-timeout"] {
        let first = flag_help(cluster[0], flag);
        assert!(first.len() > flag.len() + 20, "{flag} has no help: {first}");
        for args in &cluster[1..] {
            assert_eq!(flag_help(args, flag), first, "{args:?} {flag}");
        }
    }
    // -n is the namespace acted on; the install namespace its own long flag
    let namespace = flag_help(&["doctor"], "-n, --namespace");
    assert_eq!(
        flag_help(&["ejob", "results"], "-n, --namespace"),
        namespace
    );
    assert!(namespace.contains("namespace acted on"), "{namespace}");
    assert_eq!(
        flag_help(&["version"], "--sexton-namespace"),
        flag_help(&["doctor"], "--sexton-namespace")
    );
    assert!(flag_help(&["doctor"], "-A, --all-namespaces").contains("every namespace"));
    // -o: the formats where each prints
    for (args, values) in [
        (&["doctor"][..], "text, json, yaml"),
        (&["version"][..], "text, json, yaml"),
        (&["ejob", "results"][..], "text, wide, json, yaml"),
        (&["inject"][..], "yaml, json"),
        (&["uninject"][..], "yaml, json"),
    ] {
        let o = flag_help(args, "-o, --output");
        assert!(
            o.contains(&format!("[possible values: {values}]")),
            "{args:?}: {o}"
        );
    }
}

#[test]
fn completion_scripts_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(KUBECTL_SEXTON)
            .args(["completion", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(
            script.contains("kubectl-sexton") && script.contains("inject"),
            "{shell}"
        );
    }
    // bash loads it and registers the completion
    let out = Command::new("bash")
        .args([
            "-c",
            "source <(\"$0\" completion bash) && complete -p kubectl-sexton",
            KUBECTL_SEXTON,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("kubectl-sexton"),
        "{}",
        text(&out.stdout)
    );
}

/// `kubectl sexton <TAB>`: kubectl's own completion (`kubectl __complete`, what its shell
/// scripts call) runs `kubectl_complete-sexton` from the PATH and passes its answer on.
#[test]
fn kubectl_completes_the_plugin_through_kubectl_complete_sexton() {
    let s = Scratch::new("cli-complete");
    let dir = plugin_dir(&s);
    let complete = |words: &[&str]| -> Vec<String> {
        let mut args = vec!["__complete", "sexton"];
        args.extend(words);
        let out = on_path(&dir, "kubectl", &args);
        assert!(out.status.success(), "{words:?}: {}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .map(|l| l.split('\t').next().unwrap().to_string())
            .collect()
    };
    let top = complete(&[""]);
    for c in ["inject", "doctor", "ejob", "version", "controller"] {
        assert!(top.contains(&c.to_string()), "{c} not in {top:?}");
    }
    assert_eq!(
        complete(&["doctor", "-o", ""]),
        ["text", "json", "yaml", ":4"]
    );
    assert_eq!(complete(&["ejob", "r"]), ["results", ":4"]);
    assert!(complete(&["inject", "--str"]).contains(&"--strategy".to_string()));
    // -f takes a file: the shell completes file names (directive 0)
    assert_eq!(complete(&["inject", "-f", ""]).last().unwrap(), ":0");
    assert!(Path::new(&s.path("kubectl_complete-sexton")).exists());
}
