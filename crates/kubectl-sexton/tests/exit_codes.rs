//! The exit-code contract of every subcommand, one table run against the real binary (and,
//! where a command reads the cluster, the real test API server): 0 done, nothing found;
//! 1 it ran and found something or refused something; 2 it could not run (bad flags,
//! unreadable input, bad kubeconfig, unreachable API server), nothing done. README,
//! "Exit codes", is this table.

use std::path::Path;
use std::process::Command;

use testbed::*;

const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");

/// The README's Job (a sidecar marked as OpenKruise marks them), and the doctor's
/// fixtures: one with nothing to find, one with a finding.
const JOB: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../examples/inject/job.yaml"
);
const CLEAN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doctor/clean.yaml");
const FINDING: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/doctor/kruise.yaml");

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The README's Job with a record of an injection that cannot be read: `uninject` refuses it.
fn corrupt_record() -> String {
    std::fs::read_to_string(JOB).unwrap().replace(
        "  template:\n    spec:\n",
        "  template:\n    metadata: {annotations: {sexton.dev/injected: 'not a record'}}\n    spec:\n",
    )
}

/// A kubeconfig for an API server on 127.0.0.1:`port`.
fn kubeconfig_for_port(path: &Path, port: u16) {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: none\ncontexts:\n- name: t\n  context: {{cluster: t, user: u}}\ncurrent-context: t\n"
        ),
    )
    .unwrap();
}

#[test]
fn every_subcommand_keeps_the_exit_code_contract() {
    let env = testenv();
    ejob_crd();
    let s = Scratch::new("exit-codes");
    let (good, bad, closed) = (
        env.kubeconfig.to_str().unwrap().to_string(),
        s.path("bad.kubeconfig"),
        s.path("closed.kubeconfig"),
    );
    std::fs::write(&bad, "this: [is not a kubeconfig").unwrap();
    kubeconfig_for_port(&closed, free_port());
    let (bad, closed) = (bad.to_str().unwrap(), closed.to_str().unwrap());
    let ns = labelled_namespace("exit-codes", &[]);
    let ejob = serde_json::json!({"apiVersion": "sexton.dev/v1alpha1", "kind": "EphemeralJob",
        "metadata": {"name": "check", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "none"}}, "template": {"ephemeralContainers": [
            {"name": "probe", "image": "busybox:1.36", "targetContainerName": "app",
            "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File", "command": ["true"]}]}}});
    let applied = output_with_input(
        Command::new("kubectl")
            .env("KUBECONFIG", &env.kubeconfig)
            .args(["apply", "-f", "-"]),
        ejob.to_string().as_bytes(),
    );
    assert!(applied.status.success(), "{}", text(&applied.stderr));
    let services = ["--metrics-addr=127.0.0.1:0", "--health-addr=127.0.0.1:0"];
    let record = corrupt_record();

    // (arguments, stdin, exit code)
    let table: Vec<(Vec<&str>, &str, i32)> = vec![
        (vec!["--help"], "", 0),
        (vec![], "", 2),
        (vec!["no-such-command"], "", 2),
        // inject and uninject: manifests in, manifests out
        (vec!["inject", "-f", JOB], "", 0),
        (
            vec![
                "inject",
                "--strategy",
                "native",
                "--kubernetes-version",
                "1.28",
                "-f",
                JOB,
            ],
            "",
            1,
        ),
        (vec!["inject", "--strategy", "maybe", "-f", JOB], "", 2),
        (vec!["inject", "-f", "/no/such/file"], "", 2),
        (vec!["inject", "-f", "-"], "a: [1\n", 2),
        (vec!["uninject", "-f", JOB], "", 0),
        (vec!["uninject", "-f", "-"], record.as_str(), 1),
        (vec!["uninject", "--no-such-flag", "-f", JOB], "", 2),
        // doctor: manifests, then the cluster
        (vec!["doctor", "-f", CLEAN], "", 0),
        (vec!["doctor", "-f", FINDING], "", 1),
        (vec!["doctor", "--stuck-after", "soon"], "", 2),
        (vec!["doctor", "-f", "/no/such/file"], "", 2),
        (vec!["doctor", "--kubeconfig", bad], "", 2),
        (vec!["doctor", "--kubeconfig", closed], "", 2),
        (
            vec!["doctor", "--kubeconfig", &good, "--context", "nope"],
            "",
            2,
        ),
        // ejob results
        (
            vec!["ejob", "results", "check", "-n", &ns, "--kubeconfig", &good],
            "",
            0,
        ),
        (
            vec!["ejob", "results", "nope", "-n", &ns, "--kubeconfig", &good],
            "",
            1,
        ),
        (vec!["ejob", "results", "check", "--kubeconfig", bad], "", 2),
        (
            vec!["ejob", "results", "check", "--kubeconfig", closed],
            "",
            2,
        ),
        (vec!["ejob", "results", "check", "--tail", "0"], "", 2),
        (vec!["ejob", "results"], "", 2),
        // crd
        (vec!["crd"], "", 0),
        (vec!["crd", "--no-such-flag"], "", 2),
        // version
        (vec!["version", "--kubeconfig", &good], "", 0),
        (vec!["version", "--client", "--kubeconfig", bad], "", 0),
        (vec!["version", "--kubeconfig", bad], "", 2),
        (vec!["version", "--kubeconfig", closed], "", 2),
        (vec!["version", "--request-timeout", "0s"], "", 2),
        (vec!["version", "-n", "sexton-system"], "", 2),
        // completion
        (vec!["completion", "bash"], "", 0),
        (vec!["completion", "tcsh"], "", 2),
        // the server commands: they run until stopped (tests/controller.rs, webhook.rs)
        (
            [&["controller", "--kubeconfig", bad][..], &services[..]].concat(),
            "",
            2,
        ),
        (vec!["controller", "--no-such-flag"], "", 2),
        (
            [
                &["webhook", "--self-managed-tls", "--kubeconfig", bad][..],
                &services[..],
            ]
            .concat(),
            "",
            2,
        ),
        (vec!["webhook", "--no-such-flag"], "", 2),
    ];
    let mut wrong = vec![];
    for (args, stdin, want) in &table {
        let out = output_with_input(
            Command::new(KUBECTL_SEXTON)
                .args(args)
                .env_remove("KUBECONFIG")
                .env("HOME", &s.root),
            stdin.as_bytes(),
        );
        let got = out.status.code();
        if got != Some(*want) {
            wrong.push(format!(
                "{args:?}: exit {got:?}, not {want}: {}",
                text(&out.stderr)
            ));
        }
    }
    let _ = kubectl(&["delete", "namespace", &ns, "--wait=false"]);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
