//! The controller's safety net behind sexton's webhook **answering**: the real webhook of
//! `admission/mod.rs` (deploy/'s RBAC and configuration, registered by URL) admits some Pods
//! unchanged on purpose (a refusal, a limit) or injects them without ending every sidecar
//! (one it does not recognise), and the safety net ends what it left; what it injected is
//! left alone. The controller runs as the real binary with deploy/rbac.yaml's rights (the
//! harness: `controllers/mod.rs`); the test plays the kubelet. The webhook down and the other
//! causes: `safety_net.rs`.

use serde_json::{Value, json};
use testbed::*;

mod admission;
mod controllers;
use controllers::net::*;
use controllers::*;

/// A Pod manifest: its annotations and containers (every one with a command, so that
/// nothing needs an image's entrypoint), bound to a node that does not exist.
fn manifest(name: &str, annotations: Value, containers: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"restartPolicy": "Never", "nodeName": FAKE_NODE, "automountServiceAccountToken": false,
            "containers": containers}})
}

fn c(name: &str) -> Value {
    json!({"name": name, "image": format!("example/{name}:1"), "command": ["run"]})
}

/// A container without a command: the quick-exit image can replace it.
fn no_command(name: &str) -> Value {
    json!({"name": name, "image": format!("example/{name}:1")})
}

/// Creates the Pod through the API server (and sexton's webhook); kubectl's stderr (the
/// admission warnings).
fn create_through_webhook(ns: &str, pod: &Value) -> String {
    let out = admission::create(ns, pod);
    let stderr = admission::text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    stderr
}

#[tokio::test(flavor = "current_thread")]
async fn pods_the_webhook_refused_or_found_over_a_limit() {
    admission::webhook();
    let client = admin_client().await;
    let ns = namespace_with(&client, "netw-refused", &[LABEL]).await;
    let scratch = Scratch::new("netw-refused");
    let ctl = controller(&scratch, &ns, &[]);
    // a Job whose Pod native refuses (its sidecar sets its own restartPolicy): the webhook
    // says why in a Warning Event on the Job
    let mut proxy = no_command("proxy");
    proxy["restartPolicy"] = json!("Never");
    let pod = manifest(
        "x",
        json!({"sexton.dev/sidecars": "proxy", "sexton.dev/inject": "native"}),
        vec![c("main"), proxy],
    );
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "refused", "namespace": ns},
        "spec": {"backoffLimit": 0, "template": {"metadata": {"annotations": pod["metadata"]["annotations"].clone()}, "spec": pod["spec"].clone()}}});
    let out = admission::apply(&job);
    assert!(out.status.success(), "{}", admission::text(&out.stderr));
    let refused = job_pod(&client, &ns, "refused").await;
    let e = wait_event(&client, &ns, "refused", "InjectRefused").await;
    assert!(
        e.note
            .as_deref()
            .unwrap_or_default()
            .contains("native: sidecar \"proxy\" sets restartPolicy"),
        "{e:?}"
    );
    // over a limit: 65 containers
    let mut many: Vec<Value> = (0..64).map(|i| c(&format!("main-{i}"))).collect();
    many.push(no_command("proxy"));
    let warned = create_through_webhook(
        &ns,
        &manifest("over", json!({"sexton.dev/sidecars": "proxy"}), many),
    );
    assert!(
        warned.contains("sexton: pod admitted unchanged") && warned.contains("64"),
        "{warned}"
    );
    for (name, mains) in [(refused.as_str(), 1), ("over", 64)] {
        let names: Vec<String> = match mains {
            1 => vec!["main".into()],
            n => (0..n).map(|i| format!("main-{i}")).collect(),
        };
        let mut states: Vec<(&str, &str)> = names.iter().map(|m| (m.as_str(), "running")).collect();
        states.push(("proxy", "running"));
        let rv = set_status(&client, &ns, name, "Running", &states).await;
        assert_eq!(net_decision(&ctl, &ns, name, &rv).0, "wait", "{name}");
        let mut states: Vec<(&str, &str)> = names.iter().map(|m| (m.as_str(), "0")).collect();
        states.push(("proxy", "running"));
        let rv = set_status(&client, &ns, name, "Running", &states).await;
        assert_eq!(net_decision(&ctl, &ns, name, &rv).0, "end", "{name}");
        let p = wait_image(&client, &ns, name, "proxy", Q).await;
        assert_eq!(net_record(&p)["cause"], "NotInjected", "{name}");
    }
    // doctor tells the refusal from its Event on the Job
    let f = doctor_finding(&ns, &format!("pod {ns}/{refused} (Job refused)"));
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("not injected at admission: sexton's webhook refused it: ")
            && m.contains("native: sidecar \"proxy\" sets restartPolicy"),
        "{m}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn what_the_webhook_injected_is_left_alone_and_what_it_did_not_recognise_is_ended() {
    admission::webhook();
    let client = admin_client().await;
    let ns = namespace_with(&client, "netw-recognise", &[LABEL]).await;
    let scratch = Scratch::new("netw-recognise");
    // the controller knows a vendor the webhook does not (an admin's catalogue entry that
    // only the controller was given)
    let catalogue = scratch.path("vendors.yaml");
    std::fs::write(
        &catalogue,
        "- name: Acme\n  containers: [acme-agent]\n  markers: [{on: annotation, key: acme.example/injected}]\n",
    )
    .unwrap();
    let ctl = controller(
        &scratch,
        &ns,
        &["--sidecar-catalogue", catalogue.to_str().unwrap()],
    );
    // wrap: the sidecar stays in spec.containers, behind the supervisor, in the record
    let wrapped = manifest(
        "wrapped",
        json!({"sexton.dev/sidecars": "proxy", "sexton.dev/inject": "wrap"}),
        vec![c("main"), c("proxy")],
    );
    create_through_webhook(&ns, &wrapped);
    let p = get_pod(&client, &ns, "wrapped").await;
    assert!(
        p.metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key("sexton.dev/injected"),
        "the webhook injected it"
    );
    let rv = set_status(
        &client,
        &ns,
        "wrapped",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    let (d, why) = net_decision(&ctl, &ns, "wrapped", &rv);
    assert_eq!(d, "ignore");
    assert!(
        why.contains("\"proxy\": sexton injected it (wrap)"),
        "{why}"
    );
    assert_eq!(
        image_of(&get_pod(&client, &ns, "wrapped").await, "proxy"),
        "example/proxy:1"
    );

    // native for the declared `logs`; Acme's agent, unknown to the webhook, taken for a main
    let acme = no_command("acme-agent");
    let mixed = manifest(
        "mixed",
        json!({"sexton.dev/sidecars": "logs", "acme.example/injected": "true", "sexton.dev/inject": "native"}),
        vec![c("main"), c("logs"), acme],
    );
    create_through_webhook(&ns, &mixed);
    let p = get_pod(&client, &ns, "mixed").await;
    let spec = p.spec.as_ref().unwrap();
    let names: Vec<_> = spec.containers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["main", "acme-agent"], "logs made native");
    assert_eq!(
        running_then_decision(
            &client,
            &ctl,
            &ns,
            "mixed",
            &[("main", "running"), ("acme-agent", "running")]
        )
        .await,
        "wait"
    );
    assert_eq!(
        running_then_decision(
            &client,
            &ctl,
            &ns,
            "mixed",
            &[("main", "0"), ("acme-agent", "running")]
        )
        .await,
        "end"
    );
    let p = wait_image(&client, &ns, "mixed", "acme-agent", Q).await;
    let record = net_record(&p);
    assert_eq!(record["cause"], "NotRecognised", "{record}");
    assert_eq!(record["detail"], "sexton injected the Pod: native");
    let e = wait_event(&client, &ns, "mixed", "SidecarsEndedBySafetyNet").await;
    assert!(
        e.note
            .unwrap()
            .contains("took the sidecar for a main container: it did not recognise it"),
    );
}
