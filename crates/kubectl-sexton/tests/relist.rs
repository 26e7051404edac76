//! The controller across a re-list of its pod watch, produced for real: the controller's
//! connections to the test API server are cut (a relay between them, as a network
//! partition would: its connections closed, new ones unanswered) while a main exits and
//! the API server restarts, so that once they are mended its watch cannot resume (its
//! resource version is older than the restarted server's watch cache: "too old resource
//! version", 410) and it lists every pod again. What changed meanwhile reaches it only in
//! that list, which kube-runtime's cache takes in only at its end: a controller that
//! decided on a listed pod as it came read the older version in its cache and kept the
//! sidecar running (watch.rs, `PodEvent`; this test failed 6 times in 6 with that code).
//! The cut matters: a controller only frozen (SIGSTOP) still had the change in its
//! socket's buffer in 3 runs of 8.
//!
//! A file of its own: restarting the shared API server would disturb the other controller
//! tests of a file (`cargo test` runs one test file at a time).

use std::time::Duration;

use futures_util::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod as K8sPod};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;
use testbed::*;

mod controllers;
use controllers::*;

/// Pods listed after the pod of interest (names sort after it): the cache takes the list in
/// only once they have all been read too, so a worker given the pod as it was listed would
/// read the older version. (The API server answers this list in one page: a list at
/// resourceVersion 0 comes from its watch cache, which ignores the page size.)
const FILLERS: usize = 600;

/// How long the relist may take once the relay is mended.
const AFTER_MEND: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_main_that_exited_while_the_watch_was_down_ends_its_sidecars_after_the_relist() {
    let client = admin_client().await;
    let ns = namespace(&client, "ctl-relist").await;
    let scratch = Scratch::new("ctl-relist");

    create_pod(
        &client,
        &ns,
        "a-job",
        "Never",
        vec![container("main", &[], json!({})), sidecar("proxy")],
        json!({}),
    )
    .await;
    let running = set_status(
        &client,
        &ns,
        "a-job",
        "Running",
        &[("main", "running"), ("proxy", "running")],
    )
    .await;
    fillers(&client, &ns).await;

    let env = testenv();
    let relay = CuttableRelay::start(format!("{}:{}", env.host, env.port).parse().unwrap());
    let kubeconfig = kubeconfig_relayed(
        controller_kubeconfig(),
        relay.addr,
        &scratch.path("controller.kubeconfig"),
    );
    let ctl = Ctl::start(
        &scratch,
        "controller",
        &kubeconfig,
        &[
            "--namespace",
            &ns,
            "--controllers",
            "sidecar-terminator",
            "--quick-exit-image",
            Q,
        ],
        &[],
    );
    assert_eq!(ctl.wait_decision(&ns, "a-job", &running), "wait");

    // Cut off, it sees none of this: main exits, and the API server restarts (its watch
    // cache then begins after the controller's last resource version).
    relay.cut();
    let exited = set_status(
        &client,
        &ns,
        "a-job",
        "Running",
        &[("main", "0"), ("proxy", "running")],
    )
    .await;
    testenv_cmd("restart-apiserver");
    relay.mend();

    // (the path under test was taken: the watch could not resume and listed again; each
    // step waits out two of kube-runtime's longest retry delays, 2 x 30 s with jitter)
    ctl.wait_line_within(AFTER_MEND, |l| {
        l["fields"]["watch"] == "pods" && msg(l).starts_with("watch expired, relisting")
    });
    assert_eq!(
        ctl.wait_decision_within(AFTER_MEND, &ns, "a-job", &exited),
        "swap",
        "the main's exit, seen only in the relist, must be decided on"
    );
    let client = admin_client().await;
    wait_image(&client, &ns, "a-job", "proxy", Q).await;
    drop(ctl);
    // The next test file starts on a working control plane (after a restart, the
    // controller-manager may take a while to create a namespace's ServiceAccount again),
    // and without these 601 pods (the cluster-wide tests would read them all).
    let after = namespace(&client, "ctl-relist-after").await;
    for ns in [ns, after] {
        let pods: Api<K8sPod> = Api::namespaced(client.clone(), &ns);
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        pods.delete_collection(&now, &ListParams::default())
            .await
            .unwrap();
        Api::<Namespace>::all(client.clone())
            .delete(&ns, &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// `FILLERS` Running pods without a marked sidecar, named to be listed after "a-job".
async fn fillers(client: &kube::Client, ns: &str) {
    stream::iter(0..FILLERS)
        .for_each_concurrent(16, |i| async move {
            let name = format!("z-filler-{i:04}");
            create_pod(
                client,
                ns,
                &name,
                "Never",
                vec![container("main", &[], json!({}))],
                json!({}),
            )
            .await;
            set_status(client, ns, &name, "Running", &[("main", "running")]).await;
        })
        .await;
}
