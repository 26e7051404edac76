//! `kubectl-sexton inject` and `uninject` as a real process: formats, sources, exit codes,
//! the examples kept equal to the generated output, and every injected manifest accepted by
//! the real test API server (server-side dry run, Pod Security `restricted` included).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use testbed::{ROOT, Scratch, kubectl, labelled_namespace, output_with_input, testenv};

const KUBECTL_SEXTON: &str = env!("CARGO_BIN_EXE_kubectl-sexton");

/// Runs `kubectl-sexton ARGS` with `stdin`.
fn run(args: &[&str], stdin: &str) -> Output {
    output_with_input(Command::new(KUBECTL_SEXTON).args(args), stdin.as_bytes())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn docs(yaml: &str) -> Vec<Value> {
    serde_saphyr::from_str_multiple(yaml).unwrap()
}

fn example(name: &str) -> PathBuf {
    Path::new(ROOT).join("examples/inject").join(name)
}

const JOB: &str = "apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - {name: main, image: busybox:1, command: [sh, -c, 'true']}
        - name: proxy
          image: busybox:1
          command: [sleep, '3600']
          env: [{name: KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT, value: 'true'}]
";

/// `JOB` named `name`, with a sidecar that `--strategy native` refuses (it sets its own
/// restartPolicy).
fn refused_job(name: &str) -> String {
    JOB.replace("name: j}", &format!("name: {name}}}")).replace(
        "image: busybox:1\n          command: [sleep",
        "image: busybox:1\n          restartPolicy: Never\n          command: [sleep",
    )
}

/// `kubectl-sexton ARGS | kubectl apply -n NS -f -` through a real shell pipe (no
/// pipefail: the pipe's status is kubectl's), `stdin` fed to kubectl-sexton.
fn piped_to_apply(args: &str, ns: &str, stdin: &str) -> Output {
    let script = format!("\"$KUBECTL_SEXTON\" {args} | kubectl apply -n {ns} -f -");
    output_with_input(
        Command::new("sh")
            .args(["-c", &script])
            .env("KUBECTL_SEXTON", KUBECTL_SEXTON)
            .env("KUBECONFIG", &testenv().kubeconfig),
        stdin.as_bytes(),
    )
}

/// `JOB` named `name`; `native`: its template asks for native sidecars
/// (`sexton.dev/inject: native`), which `--kubernetes-version 1.28` refuses.
fn job(name: &str, native: bool) -> Value {
    let mut yaml = JOB.replace("name: j}", &format!("name: {name}}}"));
    if native {
        yaml = yaml.replace(
            "  template:\n    spec:\n",
            "  template:\n    metadata: {annotations: {sexton.dev/inject: native}}\n    spec:\n",
        );
    }
    docs(&yaml).remove(0)
}

/// The README's first example, `kubectl sexton inject -f job.yaml | kubectl apply -f -`,
/// cannot apply a Job that inject refused (its sidecar would keep it running): with nothing
/// else to apply, kubectl fails; beside an injected Job in a List, only that one is applied.
#[test]
fn a_refused_job_is_not_applied_through_a_pipe() {
    testenv();
    let ns = labelled_namespace("inject-pipe", &[]);
    let exists = |name: &str| {
        let out = kubectl(&["get", "job", "-n", &ns, name, "-o", "name"]);
        let stderr = text(&out.stderr);
        assert!(
            out.status.success() || stderr.contains("NotFound"),
            "{stderr}"
        );
        out.status.success()
    };
    let inject = "inject --kubernetes-version 1.28 -f -";
    let out = piped_to_apply(inject, &ns, &job("alone", true).to_string());
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("no objects passed to apply"), "{stderr}");
    assert!(
        stderr.contains("job/alone: refused: native: Kubernetes 1.28 has no native sidecars"),
        "{stderr}"
    );
    assert!(!exists("alone"));

    let list = serde_json::json!({"apiVersion": "v1", "kind": "List",
        "items": [job("bad", true), job("good", false)]});
    let out = piped_to_apply(inject, &ns, &list.to_string());
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        text(&out.stdout).contains("job.batch/good created"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        stderr.contains(
            "refused, not written to stdout (--include-refused writes them unchanged): job/bad\n"
        ),
        "{stderr}"
    );
    assert!(exists("good"));
    assert!(!exists("bad"));

    // asked for, the refused Job is applied unchanged
    let inject = "inject --kubernetes-version 1.28 --include-refused -f -";
    let out = piped_to_apply(inject, &ns, &job("kept", true).to_string());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(exists("kept"));
}

/// The examples' after-files are exactly what the command writes (`SEXTON_BLESS=1` to
/// write them again).
#[test]
fn examples_are_the_generated_output() {
    let before = example("job.yaml");
    for (strategy, after) in [("native", "job.native.yaml"), ("wrap", "job.wrap.yaml")] {
        let args = [
            "inject",
            "--strategy",
            strategy,
            "-f",
            before.to_str().unwrap(),
        ];
        let out = run(&args, "");
        assert!(out.status.success(), "{}", text(&out.stderr));
        let generated = format!(
            "# Generated by `kubectl sexton inject --strategy {strategy} -f job.yaml`; do not edit.\n{}",
            text(&out.stdout)
        );
        let path = example(after);
        if std::env::var_os("SEXTON_BLESS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap_or_default(),
            generated,
            "{after} is stale: SEXTON_BLESS=1"
        );
        let back = run(&["uninject", "-f", path.to_str().unwrap()], "");
        assert_eq!(
            docs(&text(&back.stdout)),
            docs(&std::fs::read_to_string(&before).unwrap())
        );
    }
}

#[test]
fn formats_sources_and_exit_codes() {
    // JSON in, JSON out; stdin; one report line per resource
    let json = serde_json::to_string(&docs(JOB)[0]).unwrap();
    let out = run(&["inject", "-f", "-"], &json);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let injected: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        injected["spec"]["template"]["spec"]["initContainers"][0]["name"],
        "proxy"
    );
    assert_eq!(text(&out.stderr), "job/j: native (sidecars: proxy)\n");
    // twice is once, through the binary as well
    let again = run(&["inject", "-f", "-"], &text(&out.stdout));
    assert_eq!(again.stdout, out.stdout);
    // a directory: its manifests in name order; other files ignored
    let s = Scratch::new("inject-dir");
    std::fs::write(s.path("b.yaml"), JOB.replace("name: j}", "name: b}")).unwrap();
    std::fs::write(
        s.path("a.yml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
    )
    .unwrap();
    std::fs::write(s.path("notes.txt"), "not a manifest").unwrap();
    let out = run(&["inject", "-f", s.root.to_str().unwrap()], "");
    assert_eq!(
        text(&out.stderr),
        "configmap/a: skipped (no pod template)\njob/b: native (sidecars: proxy)\n"
    );
    // a refused resource: not written, exit 1, the reason on stderr; written unchanged
    // with --include-refused
    let refused = refused_job("j");
    let out = run(&["inject", "--strategy", "native", "-f", "-"], &refused);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("job/j: refused: native: sidecar \"proxy\" sets restartPolicy"),
        "{stderr}"
    );
    assert!(
        stderr.contains("refused, not written to stdout (--include-refused writes them unchanged): job/j; nothing else to write"),
        "{stderr}"
    );
    let args = [
        "inject",
        "--strategy",
        "native",
        "--include-refused",
        "-f",
        "-",
    ];
    let out = run(&args, &refused);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(docs(&text(&out.stdout)), docs(&refused));
    // unreadable input: exit 2, nothing written
    for (args, input, needle) in [
        (
            vec!["inject", "-f", "/no/such/file"],
            "",
            "-f /no/such/file",
        ),
        (
            vec!["inject", "-f", "-"],
            "a: [1\n",
            "-f -: not YAML or JSON",
        ),
        (vec!["inject", "-f", "-"], "- 1\n", "not an object"),
        (
            vec!["inject", "--strategy", "maybe", "-f", "-"],
            "",
            "--strategy",
        ),
        (
            vec!["inject", "--kubernetes-version", "x", "-f", "-"],
            "",
            "--kubernetes-version",
        ),
    ] {
        let out = run(&args, input);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            text(&out.stderr).contains(needle),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

/// The pod templates of the documents that sexton injected, as manifests to apply (a field
/// the API server does not know, kept on purpose by the golden cases, removed).
fn injected_only(yaml: &str) -> Vec<Value> {
    docs(yaml)
        .into_iter()
        .filter(|d| {
            serde_json::to_string(d)
                .unwrap()
                .contains("sexton.dev/injected")
        })
        .map(|mut d| {
            strip(&mut d, "futureField");
            d
        })
        .collect()
}

fn strip(v: &mut Value, key: &str) {
    match v {
        Value::Object(m) => {
            m.remove(key);
            m.values_mut().for_each(|x| strip(x, key));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| strip(x, key)),
        _ => {}
    }
}

fn dry_run(ns: &str, manifests: &[Value]) -> Output {
    let s = Scratch::new("inject-dry-run");
    let file = s.path("m.yaml");
    std::fs::write(&file, serde_saphyr::to_string_multiple(manifests).unwrap()).unwrap();
    kubectl(&[
        "apply",
        "--dry-run=server",
        "-n",
        ns,
        "-f",
        file.to_str().unwrap(),
    ])
}

/// Every injected golden case and example is a valid object for the API server.
#[test]
fn injected_manifests_apply_with_server_dry_run() {
    testenv();
    let ns = labelled_namespace("inject-dry-run", &[]);
    let golden = Path::new(ROOT).join("crates/sexton-inject/tests/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(golden)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".out.yaml"))
        .collect();
    files.extend([example("job.native.yaml"), example("job.wrap.yaml")]);
    let mut applied = 0;
    for f in files {
        let manifests = injected_only(&std::fs::read_to_string(&f).unwrap());
        if manifests.is_empty() {
            continue;
        }
        let out = dry_run(&ns, &manifests);
        assert!(
            out.status.success(),
            "{}: {}",
            f.display(),
            text(&out.stderr)
        );
        applied += manifests.len();
    }
    assert!(applied >= 14, "only {applied} injected manifests applied");
}

/// A Job admissible under the `restricted` Pod Security Standard stays admissible once
/// wrapped (the install init container is restricted too).
#[test]
fn wrapped_jobs_pass_pod_security_restricted() {
    testenv();
    let ns = labelled_namespace(
        "inject-restricted",
        &["pod-security.kubernetes.io/enforce=restricted"],
    );
    let secure = "{allowPrivilegeEscalation: false, runAsNonRoot: true, runAsUser: 1000, capabilities: {drop: [ALL]}, seccompProfile: {type: RuntimeDefault}}";
    let job = JOB
        .replace(
            "command: [sh, -c, 'true']}",
            &format!("command: [sh, -c, 'true'], securityContext: {secure}}}"),
        )
        .replace(
            "command: [sleep, '3600']",
            &format!("command: [sleep, '3600']\n          securityContext: {secure}"),
        );
    // a Pod is admitted (or not) at once, where a Job's pods would only fail later
    let pod = pod_of(&docs(&job)[0]);
    let plain = dry_run(&ns, std::slice::from_ref(&pod));
    assert!(
        plain.status.success(),
        "the test's pod itself is not restricted: {}",
        text(&plain.stderr)
    );
    let out = run(
        &["inject", "--strategy", "wrap", "-f", "-"],
        &serde_json::to_string(&pod).unwrap(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let wrapped: Value = serde_json::from_slice(&out.stdout).unwrap();
    let applied = dry_run(&ns, &[wrapped]);
    assert!(applied.status.success(), "{}", text(&applied.stderr));
    assert!(
        !text(&applied.stderr).contains("PodSecurity"),
        "{}",
        text(&applied.stderr)
    );
}

/// The Pod a Job's template describes.
fn pod_of(job: &Value) -> Value {
    let t = &job["spec"]["template"];
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "restricted"},
        "spec": t["spec"],
    })
}

/// Whatever mechanism ends a vendor's recognised sidecar, the Pod it gives stays admissible
/// where the Pod was: under the `restricted` Pod Security Standard, and in a namespace whose
/// ResourceQuota makes every Pod declare cpu and memory requests and limits.
#[test]
fn every_mechanism_passes_restricted_and_a_quota_of_requests_and_limits() {
    testenv();
    let restricted = labelled_namespace(
        "inject-mech-restricted",
        &["pod-security.kubernetes.io/enforce=restricted"],
    );
    let quota = labelled_namespace("inject-mech-quota", &[]);
    let out = kubectl(&[
        "create",
        "quota",
        "compute",
        "-n",
        &quota,
        "--hard=requests.cpu=4,requests.memory=4Gi,limits.cpu=4,limits.memory=4Gi",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let secure = serde_json::json!({"allowPrivilegeEscalation": false, "runAsNonRoot": true, "runAsUser": 1000,
        "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}});
    let resources = serde_json::json!({"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}});
    let container = |name: &str, command: &str| {
        serde_json::json!({"name": name, "image": "app:1", "command": [command],
            "securityContext": secure, "resources": resources})
    };
    // a Job's pod as Istio's webhook leaves it (legacy mode), nothing declared
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "vendor", "annotations": {"sidecar.istio.io/status": "{}"}},
        "spec": {"restartPolicy": "Never", "containers": [container("main", "backup"), container("istio-proxy", "pilot-agent")]}
    });
    for ns in [&restricted, &quota] {
        let plain = dry_run(ns, std::slice::from_ref(&pod));
        assert!(
            plain.status.success(),
            "the test's pod itself: {}",
            text(&plain.stderr)
        );
    }
    for strategy in ["native", "native-wrap", "wrap", "quit"] {
        let out = run(
            &["inject", "--strategy", strategy, "-f", "-"],
            &pod.to_string(),
        );
        assert!(out.status.success(), "{strategy}: {}", text(&out.stderr));
        let report = text(&out.stderr);
        assert!(
            report.contains("istio-proxy [Istio, injected]"),
            "{strategy}: {report}"
        );
        let injected: Value = serde_json::from_slice(&out.stdout).unwrap();
        for ns in [&restricted, &quota] {
            let applied = dry_run(ns, std::slice::from_ref(&injected));
            let err = text(&applied.stderr);
            assert!(
                applied.status.success() && !err.contains("PodSecurity"),
                "{strategy} in {ns}: {err}"
            );
        }
    }
}
