//! What the safety net's tests share (`safety_net.rs`, `safety_net_admission.rs`): the
//! namespaces the webhook serves, the controller as deployed, and reading its decisions,
//! records and doctor's findings.

use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod as K8sPod, ServiceAccount};
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::Value;
use testbed::*;

use super::*;

pub const LABEL: &str = "sexton.dev/inject=enabled";

/// A fresh namespace with `labels`, once its default ServiceAccount exists.
pub async fn namespace_with(client: &Client, test: &str, labels: &[&str]) -> String {
    let ns = labelled_namespace(test, labels);
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
    let end = Instant::now() + LONG;
    while sas.get_opt("default").await.unwrap().is_none() {
        assert!(Instant::now() < end, "no default ServiceAccount in {ns}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ns
}

/// The controller as deployed (all three controllers), in namespace `ns` only.
pub fn controller(scratch: &Scratch, ns: &str, more: &[&str]) -> Ctl {
    let mut args = vec!["--namespace", ns, "--quick-exit-image", Q];
    args.extend_from_slice(more);
    Ctl::start(scratch, "controller", controller_kubeconfig(), &args, &[])
}

/// Plays the kubelet for pod `ns/name` (phase Running, its containers in `states`) and
/// returns the safety net's decision on that version of the pod.
pub async fn running_then_decision(
    client: &Client,
    ctl: &Ctl,
    ns: &str,
    name: &str,
    states: &[(&str, &str)],
) -> String {
    let rv = set_status(client, ns, name, "Running", states).await;
    net_decision(ctl, ns, name, &rv).0
}

/// The safety net's decision for pod `ns/name` at resource version `rv`, and its message.
pub fn net_decision(ctl: &Ctl, ns: &str, name: &str, rv: &str) -> (String, String) {
    let pod = format!("{ns}/{name}");
    let l = ctl.wait_line(|l| {
        l["fields"]["pod"] == pod.as_str()
            && l["fields"]["resource_version"] == rv
            && l["fields"]["safety_net"].is_string()
    });
    (
        l["fields"]["safety_net"].as_str().unwrap().to_string(),
        msg(&l).to_string(),
    )
}

pub fn net_record(p: &K8sPod) -> Value {
    let a = p.metadata.annotations.clone().unwrap_or_default();
    a.get("sexton.dev/safety-net")
        .map(|r| serde_json::from_str(r).unwrap())
        .unwrap_or(Value::Null)
}

/// `kubectl sexton doctor -n NS -o json`'s finding of the safety-net check about `object`.
pub fn doctor_finding(ns: &str, object: &str) -> Value {
    let out = Command::new(KUBECTL_SEXTON)
        .args(["doctor", "--kubeconfig"])
        .arg(&testenv().kubeconfig)
        .args(["-n", ns, "-o", "json"])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "safety-net")
        .unwrap_or_else(|| panic!("no safety-net check: {report:#}"));
    check["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["object"] == object)
        .unwrap_or_else(|| panic!("no finding about {object}: {check:#}"))
        .clone()
}

/// The name of Job `job`'s pod, once the Job controller created it.
pub async fn job_pod(client: &Client, ns: &str, job: &str) -> String {
    let pods: Api<K8sPod> = Api::namespaced(client.clone(), ns);
    let end = Instant::now() + LONG;
    loop {
        let list = pods
            .list(&ListParams::default().labels(&format!("job-name={job}")))
            .await
            .unwrap();
        if let Some(name) = list.items.into_iter().next().and_then(|p| p.metadata.name) {
            return name;
        }
        assert!(
            Instant::now() < end,
            "the Job controller created no pod for {job}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
