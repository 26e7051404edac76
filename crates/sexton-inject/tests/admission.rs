//! The webhook's decision for one Pod: scope, the patch, and the repair after a later
//! webhook stripped `restartPolicy: Always` (played here by the same edit an old-style
//! webhook makes; the real one runs against the test API server in kubectl-sexton's tests).

use serde_json::{Value, json};
use sexton_inject::{ImageCommand, Options, Outcome, Resolve, Scope, Unresolved, admit};

struct NoRegistry;

impl Resolve for NoRegistry {
    fn resolve(&self, image: &str) -> Result<ImageCommand, Unresolved> {
        Err(Unresolved(format!("{image}: no registry in this test")))
    }
}

fn pod(annotations: Value, init: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "job-", "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "initContainers": init,
            "containers": [
                {"name": "main", "image": "app:1", "command": ["run"]},
                {"name": "proxy", "image": "proxy:1", "env": [
                    {"name": "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "value": "true"}]}
            ]
        }
    })
}

/// The Pod as the API server would store it after the webhook's patch.
fn patched(pod: &Value, patch: &json_patch::Patch) -> Value {
    let mut p = pod.clone();
    json_patch::patch(&mut p, patch).unwrap();
    p
}

/// What an admission webhook built on an old k8s.io/api does to init containers.
fn strip_restart_policy(pod: &mut Value) {
    for c in pod["spec"]["initContainers"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("restartPolicy");
    }
}

fn admitted(p: &Value, scope: Scope) -> (Value, sexton_inject::Admission) {
    let a = admit(p, scope, &Options::default(), &NoRegistry);
    (patched(p, &a.patch), a)
}

#[test]
fn scope_and_opt_out() {
    let plain = pod(json!({}), json!([]));
    assert!(
        admit(&plain, Scope::Annotation, &Options::default(), &NoRegistry)
            .patch
            .is_empty()
    );
    let disabled = pod(json!({"sexton.dev/inject": "disabled"}), json!([]));
    let a = admit(
        &disabled,
        Scope::Namespace,
        &Options::default(),
        &NoRegistry,
    );
    assert!(a.patch.is_empty() && a.outcome.is_none());
    let asked = pod(json!({"sexton.dev/inject": "native"}), json!([]));
    let (p, a) = admitted(&asked, Scope::Annotation);
    assert_eq!(p["spec"]["initContainers"][0]["name"], "proxy", "{a:?}");
    let (p, _) = admitted(&plain, Scope::Namespace);
    assert_eq!(p["spec"]["initContainers"][0]["restartPolicy"], "Always");
    assert_eq!(p["spec"]["containers"].as_array().unwrap().len(), 1);
}

#[test]
fn a_stripped_native_sidecar_is_repaired_on_reinvocation_not_injected_again() {
    let (mut p, first) = admitted(&pod(json!({}), json!([])), Scope::Namespace);
    assert!(
        matches!(first.outcome, Some(Outcome::Injected { .. })),
        "{first:?}"
    );
    assert!(first.warnings.is_empty());
    // a later webhook strips the field, and adds an env var to the sidecar
    strip_restart_policy(&mut p);
    p["spec"]["initContainers"][0]["env"] = json!([{"name": "VAULT_ADDR", "value": "x"}]);
    let (again, second) = admitted(&p, Scope::Namespace);
    assert_eq!(second.patch.len(), 1, "only the repair: {:?}", second.patch);
    assert_eq!(
        again["spec"]["initContainers"][0]["restartPolicy"],
        "Always"
    );
    assert_eq!(
        again["spec"]["initContainers"][0]["env"][0]["name"], "VAULT_ADDR",
        "the later webhook's change is kept"
    );
    assert!(
        second.warnings[0].contains("restored restartPolicy: Always on native sidecar \"proxy\""),
        "{:?}",
        second.warnings
    );
    // nothing to do a third time
    assert!(
        admit(&again, Scope::Namespace, &Options::default(), &NoRegistry)
            .patch
            .is_empty()
    );
}

#[test]
fn native_sidecars_written_by_the_user_are_noted_and_repaired() {
    let user = pod(
        json!({"sexton.dev/inject": "disabled-not"}),
        json!([{"name": "mesh", "image": "mesh:1", "restartPolicy": "Always"}]),
    );
    // (an invalid strategy: refused, admitted unchanged but for the note, with a warning)
    let (mut p, first) = admitted(&user, Scope::Namespace);
    assert!(
        first
            .warnings
            .iter()
            .any(|w| w.contains("admitted unchanged")),
        "{first:?}"
    );
    assert_eq!(
        p["metadata"]["annotations"]["sexton.dev/native-sidecars"],
        "mesh"
    );
    strip_restart_policy(&mut p);
    let (again, second) = admitted(&p, Scope::Namespace);
    assert_eq!(
        again["spec"]["initContainers"][0]["restartPolicy"],
        "Always"
    );
    assert!(
        second
            .warnings
            .iter()
            .any(|w| w.contains("restored restartPolicy: Always on native sidecar \"mesh\"")),
        "{second:?}"
    );
}

#[test]
fn a_removed_native_sidecar_is_reported() {
    let (mut p, _) = admitted(&pod(json!({}), json!([])), Scope::Namespace);
    p["spec"]["initContainers"] = json!([]);
    let (_, a) = admitted(&p, Scope::Namespace);
    assert!(
        a.warnings[0].contains("\"proxy\" was removed"),
        "{:?}",
        a.warnings
    );
}

#[test]
fn an_init_container_with_probes_but_no_restart_policy_was_a_native_sidecar() {
    // stripped by a webhook that ran before sexton: only a native sidecar may have probes
    let stripped = pod(
        json!({}),
        json!([{"name": "mesh", "image": "mesh:1", "readinessProbe": {"tcpSocket": {"port": 15021}}},
               {"name": "setup", "image": "setup:1"}]),
    );
    let (p, a) = admitted(&stripped, Scope::Namespace);
    let inits = p["spec"]["initContainers"].as_array().unwrap();
    assert_eq!(
        inits.iter().find(|c| c["name"] == "mesh").unwrap()["restartPolicy"],
        "Always",
        "{a:?}"
    );
    assert!(
        inits.iter().find(|c| c["name"] == "setup").unwrap()["restartPolicy"].is_null(),
        "a plain init container stays one"
    );
}

#[test]
fn what_wrap_cannot_carry_over_is_a_warning() {
    let mut p = pod(json!({"sexton.dev/inject": "wrap"}), json!([]));
    p["spec"]["containers"][1]["command"] = json!(["/proxy"]);
    p["spec"]["containers"][1]["startupProbe"] = json!({"exec": {"command": ["ready"]}});
    let (injected, a) = admitted(&p, Scope::Annotation);
    assert!(
        matches!(&a.outcome, Some(Outcome::Injected { caveats, .. }) if caveats.len() == 1),
        "{a:?}"
    );
    assert_eq!(
        a.warnings,
        [
            "sexton: sidecar \"proxy\": a startupProbe's exec has no equivalent in the supervisor, so the mains start once its process started"
        ]
    );
    // the main still waits for the proxy's process to start
    let main = &injected["spec"]["containers"][0];
    let env = main["env"].as_array().unwrap();
    assert!(
        env.contains(&json!({"name": "KUBEXIT_BIRTH_DEPS", "value": "proxy"})),
        "{main}"
    );
}
