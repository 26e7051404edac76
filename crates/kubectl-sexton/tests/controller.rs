//! `kubectl-sexton controller` as a process, whichever controllers it runs: its flags, its
//! errors without RBAC, leader election between two replicas, and the manifests it is
//! deployed with (the harness: `controllers/mod.rs`).
// The scope guard is held for a whole test on purpose; each test has its own runtime thread.
#![allow(clippy::await_holding_lock, clippy::type_complexity)]

use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::json;
use testbed::*;

mod controllers;
use controllers::*;

#[tokio::test(flavor = "current_thread")]
async fn without_the_role_the_error_names_the_missing_permission() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    let client = admin_client().await;
    let ns = namespace(&client, "ctl-norbac").await;
    Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "nobody"}})).unwrap(),
        )
        .await
        .unwrap();
    let scratch = Scratch::new("ctl-norbac");
    let kc = service_account_kubeconfig(&ns, "nobody", &scratch.path("nobody.kubeconfig"));
    let ctl = Ctl::start(&scratch, "controller", &kc, &["--namespace", &ns], &[]);
    let l =
        ctl.wait_line(|l| msg(l).starts_with("watching failed") && l["fields"]["watch"] == "pods");
    let m = msg(&l);
    assert!(
        m.contains("forbidden") && m.contains("pods list and watch"),
        "{m}"
    );
    assert_eq!(
        ctl.get(&ctl.health, "/readyz").0,
        503,
        "not ready without a filled cache"
    );
    // SIGTERM before any cache was filled still ends the process at once (kube-runtime's
    // graceful shutdown alone would wait for the store forever).
    let mut ctl = ctl;
    let t = Instant::now();
    ctl.c.signal(15);
    // (bounded by LONG: without the fix it waits for ever)
    let st = ctl.c.wait_status(LONG).expect("did not stop on SIGTERM");
    assert_eq!(code_of(st), 0);
    eprintln!("stopped {:?} after SIGTERM", t.elapsed());
}

#[test]
fn bad_flags_are_named() {
    for (args, needle) in [
        (
            vec!["--leader-elect-lease-duration", "1.5s"],
            "--leader-elect-lease-duration",
        ),
        (
            vec!["--leader-elect-renew-grace", "20s"],
            "shorter than --leader-elect-lease-duration",
        ),
        (vec!["--log-format", "xml"], "--log-format"),
        (vec!["--metrics-addr", "nowhere"], "--metrics-addr"),
        (vec!["--concurrency", "0"], "--concurrency"),
    ] {
        let out = Command::new(KUBECTL_SEXTON)
            .arg("controller")
            .args(&args)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// Production shape: two replicas with --leader-elect, cluster-wide. Only the holder of
/// the Lease acts; when it is killed, the other takes over within the lease duration.
#[tokio::test(flavor = "current_thread")]
async fn leader_election_one_acts_and_the_other_takes_over() {
    let _scope = SCOPE.write().unwrap_or_else(|e| e.into_inner());
    let client = admin_client().await;
    let ns = namespace(&client, "ctl-leader").await;
    let scratch = Scratch::new("ctl-leader");
    let kc = controller_kubeconfig();
    // a's lease is short, so that b's takeover after a's SIGKILL is quick; b's is long, so
    // that c taking it at once proves b released it (else c would wait 30 s), whatever the
    // machine's load does to the time it takes
    let args = |id: &'static str| -> Vec<&'static str> {
        vec![
            "--leader-elect",
            "--leader-elect-namespace",
            "sexton-system",
            "--leader-elect-lease-duration",
            if id == "replica-b" { "30s" } else { "4s" },
            "--leader-elect-renew-grace",
            "2s",
            "--quick-exit-image",
            Q,
            "--identity",
            id,
        ]
    };
    let a = Ctl::start(&scratch, "a", kc, &args("replica-a"), &[]);
    a.wait_line(|l| msg(l).contains("acquired the lease"));
    let b = Ctl::start(&scratch, "b", kc, &args("replica-b"), &[]);
    b.wait_line(|l| msg(l).contains("waiting for the lease"));
    assert_eq!(b.get(&b.health, "/readyz").0, 200, "a standby is ready");
    assert_eq!(b.metrics()["sexton_controller_leader"], 0.0);

    let rv = main_done_pod(&client, &ns, "one").await;
    assert_eq!(a.wait_decision(&ns, "one", &rv), "swap");
    wait_image(&client, &ns, "one", "proxy", Q).await;
    let e = wait_event(&client, &ns, "one", "SidecarSwapped").await;
    assert_eq!(e.reporting_instance.as_deref(), Some("replica-a"));
    assert!(
        b.find(|l| l["fields"]["decision"].is_string()).is_none(),
        "the standby reconciled:\n{}",
        b.c.logs()
    );

    // Kill the leader without letting it release the lease.
    let killed = Instant::now();
    drop(a);
    b.wait_line(|l| msg(l).contains("acquired the lease"));
    let takeover = killed.elapsed();
    eprintln!("takeover after SIGKILL of the leader: {takeover:?} (lease 4s)");
    // The lease expires at most 4s after the kill; the standby then waits 0.1-1s (random)
    // before taking it (the bound leaves room for a loaded machine; never is the failure).
    assert!(
        takeover < Duration::from_secs(12),
        "takeover took {takeover:?}"
    );
    main_done_pod(&client, &ns, "two").await;
    wait_image(&client, &ns, "two", "proxy", Q).await;
    assert_eq!(
        wait_event(&client, &ns, "two", "SidecarSwapped")
            .await
            .reporting_instance
            .as_deref(),
        Some("replica-b")
    );

    // SIGTERM: graceful stop releases the lease, so a successor does not wait for expiry.
    let mut b = b;
    b.c.signal(15);
    let st =
        b.c.wait_status(LONG)
            .expect("controller did not stop on SIGTERM");
    assert_eq!(code_of(st), 0, "{}", b.c.logs());
    assert!(
        b.find(|l| msg(l) == "leader election: lease released")
            .is_some(),
        "{}",
        b.c.logs()
    );
    let c = Ctl::start(&scratch, "c", kc, &args("replica-c"), &[]);
    let started = Instant::now();
    c.wait_line(|l| msg(l).contains("acquired the lease"));
    eprintln!("takeover after a released lease: {:?}", started.elapsed());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "released lease not taken at once (b's lease lasts 30 s)"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn deploy_manifests_apply_with_server_dry_run() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    controller_kubeconfig(); // the namespace exists (a server dry run cannot create into a dry-run namespace)
    // Server-side, like every other apply of these files in the tests (a client-side apply
    // over server-side-applied objects warns about the missing last-applied annotation).
    let out = kubectl(&[
        "apply",
        "--server-side",
        "--dry-run=server",
        "-k",
        &format!("{}/deploy", root()),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // The Deployment passes the namespace's `restricted` Pod Security level and uses no
    // deprecated API. (kubectl's own warnings about apply bookkeeping are not ours.)
    assert!(
        !err.contains("PodSecurity") && !err.contains("deprecated"),
        "Pod Security or deprecation warnings: {err}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for kind in [
        "deployment.apps/sexton-controller",
        "clusterrole.rbac.authorization.k8s.io/sexton-controller",
        "role.rbac.authorization.k8s.io/sexton-controller-leader-election",
    ] {
        assert!(stdout.contains(kind), "{kind} missing: {stdout}");
    }
}

/// A leader that cannot list EphemeralJobs is not ready (its standby days made it ready);
/// the log names the real cause (RBAC), and once the Role allows the list it is ready again.
#[tokio::test(flavor = "current_thread")]
async fn a_leader_that_cannot_list_is_not_ready_until_it_can() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    let client = admin_client().await;
    ejob_crd();
    let ns = namespace(&client, "ctl-unready").await;
    let sa = "lister";
    Api::<ServiceAccount>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": sa}})).unwrap(),
        )
        .await
        .unwrap();
    let role = |name: &str, rules: serde_json::Value| {
        json!([
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": ns}, "rules": rules},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name, "namespace": ns},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
             "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]}
        ])
    };
    apply_all(&role(
        "pods-and-lease",
        json!([
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "patch", "update"]},
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}
        ]),
    ));
    let scratch = Scratch::new("ctl-unready");
    let kc = service_account_kubeconfig(&ns, sa, &scratch.path("lister.kubeconfig"));
    let ctl = Ctl::start(
        &scratch,
        "controller",
        &kc,
        &[
            "--namespace",
            &ns,
            "--leader-elect",
            "--leader-elect-namespace",
            &ns,
            "--controllers",
            "ephemeraljob",
        ],
        &[],
    );
    ctl.wait_line(|l| msg(l).contains("acquired the lease"));
    let l = ctl.wait_line(|l| {
        msg(l).starts_with("watching failed") && l["fields"]["watch"] == "ephemeraljobs"
    });
    assert_eq!(l["fields"]["cause"], "forbidden", "{l}");
    assert!(
        msg(&l).contains("ephemeraljobs.sexton.dev list and watch") && !msg(&l).contains("CRD"),
        "{l}"
    );
    assert_eq!(
        ctl.get(&ctl.health, "/readyz").0,
        503,
        "a leader that cannot list is ready"
    );
    let m = ctl.metrics();
    assert!(
        m.get(r#"sexton_controller_watch_errors_total{watch="ephemeraljobs",cause="forbidden"}"#)
            .is_some_and(|n| *n >= 1.0),
        "{m:?}"
    );

    apply_all(&role(
        "ejobs",
        json!([{"apiGroups": ["sexton.dev"], "resources": ["ephemeraljobs"], "verbs": ["get", "list", "watch"]}]),
    ));
    // the watcher's back-off between list attempts grows to 30 s
    let ready = wait_until(Duration::from_secs(90), || {
        ctl.get(&ctl.health, "/readyz").0 == 200
    });
    assert!(
        ready,
        "not ready after the Role allowed the list:\n{}",
        ctl.c.logs()
    );
}

/// An API server that cannot be reached is reported as such, not as missing RBAC.
#[tokio::test(flavor = "current_thread")]
async fn an_unreachable_api_server_is_named_as_the_cause() {
    let _scope = SCOPE.read().unwrap_or_else(|e| e.into_inner());
    let scratch = Scratch::new("ctl-unreachable");
    // a port nothing listens on: bound, then closed
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kc = scratch.path("closed.kubeconfig");
    std::fs::write(
        &kc,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:{port}', insecure-skip-tls-verify: true}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let ctl = Ctl::start(&scratch, "controller", &kc, &["--namespace", "x"], &[]);
    let l =
        ctl.wait_line(|l| msg(l).starts_with("watching failed") && l["fields"]["watch"] == "pods");
    assert_eq!(l["fields"]["cause"], "unreachable", "{l}");
    assert!(!msg(&l).contains("RBAC"), "{l}");
    assert_eq!(ctl.get(&ctl.health, "/readyz").0, 503);
}

/// `kubectl apply` of a list of objects as the admin.
fn apply_all(objects: &serde_json::Value) {
    for o in objects.as_array().unwrap() {
        let out = kubectl_with_input(&["apply", "-f", "-"], o.to_string().as_bytes());
        assert!(
            out.status.success(),
            "apply {o}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
