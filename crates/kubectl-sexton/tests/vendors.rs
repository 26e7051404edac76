//! The stand-ins of the vendors' sidecar injectors (`testenv/vendor-webhook`, registered by
//! `testbed::Vendor` under each vendor's real configuration name) against the real test API
//! server, without sexton: each adds what the research notes say the vendor adds, where it
//! puts it, with its markers, and leaves alone what the vendor's own "already injected" check
//! leaves alone. And the fault sexton must avoid, shown with the API server's own ordering:
//! Datadog, re-invoked (IfNeeded) after a later webhook moved its sidecar to the init
//! containers, adds it a second time and the Pod is refused.
//!
//! Pods are bare Pods bound to a node that does not exist (nothing runs them), created with
//! kubectl; what the test reads is what the API server stored.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use testbed::*;

/// The test's own namespace label for `vendor`'s stand-in (apart from other processes').
fn label(vendor: &str) -> String {
    format!("sexton-test-vendor-{vendor}-{}=true", std::process::id())
}

/// A run-to-completion Pod with one main container.
fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "nodeName": "sexton-test-no-such-node",
                 "containers": [{"name": "main", "image": "app:1", "command": ["run"]}]}
    })
}

fn annotate(mut p: Value, key: &str, value: &str) -> Value {
    p["metadata"]["annotations"][key] = json!(value);
    p
}

fn with_label(mut p: Value, key: &str, value: &str) -> Value {
    p["metadata"]["labels"][key] = json!(value);
    p
}

/// `p` with `c` added to `list` (`"containers"`, `"initContainers"`).
fn with_container(mut p: Value, list: &str, c: Value) -> Value {
    if !p["spec"][list].is_array() {
        p["spec"][list] = json!([]);
    }
    p["spec"][list].as_array_mut().unwrap().push(c);
    p
}

/// The API server's refusal of a Pod: kubectl's message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

impl Refused {
    fn contains(&self, s: &str) -> bool {
        self.0.contains(s)
    }
}

/// Creates `p` in `ns`: the Pod as the API server stored it, or its refusal.
fn create(ns: &str, p: &Value) -> Result<Value, Refused> {
    let out = kubectl_with_input(
        &["create", "-n", ns, "-o", "json", "-f", "-"],
        p.to_string().as_bytes(),
    );
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(Refused(String::from_utf8_lossy(&out.stderr).into_owned()))
    }
}

fn created(ns: &str, p: &Value) -> Value {
    create(ns, p).unwrap_or_else(|e| panic!("creating {}: {e}", p["metadata"]["name"]))
}

fn names(p: &Value, list: &str) -> Vec<String> {
    p["spec"][list]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

fn container<'a>(p: &'a Value, list: &str, name: &str) -> &'a Value {
    p["spec"][list]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}: {p}"))
}

fn env<'a>(c: &'a Value, name: &str) -> &'a Value {
    c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == name)
        .map(|e| &e["value"])
        .unwrap_or(&Value::Null)
}

fn annotation<'a>(p: &'a Value, key: &str) -> &'a Value {
    &p["metadata"]["annotations"][key]
}

/// The stand-in of `vendor` and a namespace it injects.
fn vendor_and_namespace(vendor: &str) -> (Vendor, String) {
    testenv();
    let label = label(vendor);
    let v = Vendor::start(vendor, &label);
    let ns = labelled_namespace(&format!("vendor-{vendor}"), &[&label]);
    (v, ns)
}

#[test]
fn istio_legacy_native_and_reinjection() {
    let (istio, ns) = vendor_and_namespace("istio");
    let with_setup = |p: Value| {
        with_container(
            p,
            "initContainers",
            json!({"name": "setup", "image": "app:1"}),
        )
    };
    // legacy: istio-init after the Pod's own init containers, istio-proxy last, args only
    let p = created(&ns, &with_setup(pod("legacy")));
    assert_eq!(names(&p, "initContainers"), ["setup", "istio-init"], "{p}");
    assert_eq!(names(&p, "containers"), ["main", "istio-proxy"], "{p}");
    let proxy = container(&p, "containers", "istio-proxy");
    assert!(proxy["command"].is_null(), "{proxy}");
    assert_eq!(proxy["args"][0], "proxy");
    assert_eq!(
        proxy["readinessProbe"]["httpGet"],
        json!({"path": "/healthz/ready", "port": 15021, "scheme": "HTTP"})
    );
    let status: Value =
        serde_json::from_str(annotation(&p, "sidecar.istio.io/status").as_str().unwrap()).unwrap();
    assert_eq!(status["initContainers"], json!(["istio-init"]), "{status}");
    assert_eq!(status["containers"], json!(["istio-proxy"]), "{status}");
    assert_eq!(status["revision"], "default");
    assert_eq!(
        p["metadata"]["labels"]["security.istio.io/tlsMode"],
        "istio"
    );
    assert_eq!(
        p["metadata"]["labels"]["service.istio.io/canonical-name"],
        "legacy"
    );

    // native, asked per Pod: istio-init, istio-proxy (Always), then the Pod's own
    let p = created(
        &ns,
        &annotate(
            with_setup(pod("native")),
            "sidecar.istio.io/nativeSidecar",
            "true",
        ),
    );
    assert_eq!(
        names(&p, "initContainers"),
        ["istio-init", "istio-proxy", "setup"],
        "{p}"
    );
    assert_eq!(names(&p, "containers"), ["main"]);
    let proxy = container(&p, "initContainers", "istio-proxy");
    assert_eq!(proxy["restartPolicy"], "Always");
    assert_eq!(proxy["startupProbe"]["httpGet"]["port"], 15021);

    // opted out
    let p = created(
        &ns,
        &annotate(pod("opted-out"), "sidecar.istio.io/inject", "false"),
    );
    assert_eq!(names(&p, "containers"), ["main"]);
    assert!(annotation(&p, "sidecar.istio.io/status").is_null(), "{p}");

    // Istio has no "already injected" check: it merges its template again, by name, into
    // the list the template puts each container in. A Pod as it injects one comes back with
    // the same containers; one whose istio-proxy was moved to the init containers gets a
    // second istio-proxy, and the API server refuses it.
    let status = r#"{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":[],"imagePullSecrets":null,"revision":"default"}"#;
    let injected = with_container(
        with_container(
            annotate(pod("injected"), "sidecar.istio.io/status", status),
            "initContainers",
            json!({"name": "istio-init", "image": "docker.io/istio/proxyv2:1.26.2"}),
        ),
        "containers",
        json!({"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.26.2"}),
    );
    let p = created(&ns, &injected);
    assert_eq!(names(&p, "initContainers"), ["istio-init"], "{p}");
    assert_eq!(names(&p, "containers"), ["main", "istio-proxy"], "{p}");
    let mut moved = injected.clone();
    moved["metadata"]["name"] = json!("moved");
    let proxy = moved["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .pop()
        .unwrap();
    let mut proxy = proxy;
    proxy["restartPolicy"] = json!("Always");
    moved = with_container(moved, "initContainers", proxy);
    let refused = create(&ns, &moved).expect_err("a second istio-proxy was admitted");
    assert!(
        refused.contains(r#"Duplicate value: "istio-proxy""#),
        "{refused}\n{}",
        istio.logs()
    );
}

#[test]
fn linkerd_proxy_first_native_shutdown_and_existing_sidecars() {
    let (linkerd, ns) = vendor_and_namespace("linkerd");
    // legacy: linkerd-init last among the init containers, linkerd-proxy first
    let p = created(
        &ns,
        &with_container(
            pod("legacy"),
            "initContainers",
            json!({"name": "setup", "image": "app:1"}),
        ),
    );
    assert_eq!(
        names(&p, "initContainers"),
        ["setup", "linkerd-init"],
        "{p}"
    );
    assert_eq!(names(&p, "containers"), ["linkerd-proxy", "main"], "{p}");
    let proxy = container(&p, "containers", "linkerd-proxy");
    assert_eq!(
        env(proxy, "LINKERD2_PROXY_SHUTDOWN_ENDPOINT_ENABLED"),
        "false"
    );
    assert!(
        annotation(&p, "linkerd.io/proxy-version").is_string(),
        "{p}"
    );
    assert!(annotation(&p, "linkerd.io/created-by").is_string(), "{p}");

    // native and the shutdown endpoint, asked per Pod
    let asked = annotate(
        annotate(
            with_container(
                pod("native"),
                "initContainers",
                json!({"name": "setup", "image": "app:1"}),
            ),
            "config.beta.linkerd.io/proxy-enable-native-sidecar",
            "true",
        ),
        "config.linkerd.io/proxy-admin-shutdown",
        "enabled",
    );
    let p = created(&ns, &asked);
    assert_eq!(
        names(&p, "initContainers"),
        ["linkerd-init", "linkerd-proxy", "setup"],
        "{p}"
    );
    assert_eq!(names(&p, "containers"), ["main"]);
    let proxy = container(&p, "initContainers", "linkerd-proxy");
    assert_eq!(proxy["restartPolicy"], "Always");
    assert_eq!(proxy["startupProbe"]["httpGet"]["path"], "/ready");
    assert_eq!(
        env(proxy, "LINKERD2_PROXY_SHUTDOWN_ENDPOINT_ENABLED"),
        "true"
    );

    // already injected: a linkerd-proxy in either list
    for (name, list) in [
        ("has-proxy", "containers"),
        ("moved-proxy", "initContainers"),
    ] {
        let mut proxy =
            json!({"name": "linkerd-proxy", "image": "cr.l5d.io/linkerd/proxy:edge-25.10.1"});
        if list == "initContainers" {
            proxy["restartPolicy"] = json!("Always");
        }
        let p = created(&ns, &with_container(pod(name), list, proxy));
        assert!(
            !names(&p, "initContainers").contains(&"linkerd-init".to_string()),
            "{name}: {p}\n{}",
            linkerd.logs()
        );
        assert_eq!(
            names(&p, "containers").len() + names(&p, "initContainers").len(),
            2,
            "{name}: {p}"
        );
    }
}

#[test]
fn vault_agent_init_sidecar_quit_and_status() {
    let (_vault, ns) = vendor_and_namespace("vault");
    // no trigger: nothing
    let p = created(&ns, &pod("untriggered"));
    assert_eq!(names(&p, "containers"), ["main"]);
    assert!(annotation(&p, "vault.hashicorp.com/agent-inject-status").is_null());

    let asked = triggered(
        "vault",
        with_container(
            pod("agent"),
            "initContainers",
            json!({"name": "setup", "image": "app:1"}),
        ),
    );
    let p = created(&ns, &asked);
    assert_eq!(
        names(&p, "initContainers"),
        ["setup", "vault-agent-init"],
        "{p}"
    );
    assert_eq!(names(&p, "containers"), ["main", "vault-agent"], "{p}");
    let agent = container(&p, "containers", "vault-agent");
    assert_eq!(agent["command"], json!(["/bin/sh", "-ec"]));
    assert_eq!(
        annotation(&p, "vault.hashicorp.com/agent-inject-status"),
        "injected"
    );
    assert!(
        !config_of(agent).to_string().contains("enable_quit"),
        "quit without agent-enable-quit"
    );

    // the quit endpoint, asked per Pod: a listener with agent_api.enable_quit
    let p = created(
        &ns,
        &annotate(
            triggered("vault", pod("quit")),
            "vault.hashicorp.com/agent-enable-quit",
            "true",
        ),
    );
    let config = config_of(container(&p, "containers", "vault-agent"));
    assert_eq!(
        config["listener"][0],
        json!({"type": "tcp", "address": "127.0.0.1:8200", "tls_disable": true,
               "agent_api": {"enable_quit": true}}),
        "{config}"
    );

    // already injected (the status annotation): left alone
    let p = created(
        &ns,
        &annotate(
            triggered("vault", pod("injected")),
            "vault.hashicorp.com/agent-inject-status",
            "injected",
        ),
    );
    assert_eq!(names(&p, "containers"), ["main"], "{p}");
    assert!(p["spec"]["initContainers"].is_null(), "{p}");
}

/// The agent's configuration (VAULT_CONFIG: base64 JSON).
fn config_of(agent: &Value) -> Value {
    use base64::Engine;
    let b = base64::engine::general_purpose::STANDARD
        .decode(env(agent, "VAULT_CONFIG").as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&b).unwrap()
}

#[test]
fn consul_dataplane_and_its_status_annotation_and_label() {
    let (_consul, ns) = vendor_and_namespace("consul");
    let p = created(&ns, &pod("untriggered"));
    assert_eq!(names(&p, "containers"), ["main"]);

    let p = created(&ns, &triggered("consul", pod("mesh")));
    assert_eq!(
        names(&p, "initContainers"),
        ["consul-connect-inject-init"],
        "{p}"
    );
    assert_eq!(names(&p, "containers"), ["main", "consul-dataplane"], "{p}");
    let status = "consul.hashicorp.com/connect-inject-status";
    assert_eq!(annotation(&p, status), "injected");
    assert_eq!(p["metadata"]["labels"][status], "injected");
    assert!(
        container(&p, "containers", "consul-dataplane")["args"]
            .as_array()
            .unwrap()
            .contains(&json!("-graceful-port=20600")),
        "{p}"
    );

    let p = created(
        &ns,
        &annotate(triggered("consul", pod("injected")), status, "injected"),
    );
    assert_eq!(names(&p, "containers"), ["main"], "{p}");
    assert!(p["spec"]["initContainers"].is_null(), "{p}");
}

#[test]
fn dapr_recognises_daprd_by_name_not_by_its_label() {
    let (_dapr, ns) = vendor_and_namespace("dapr");
    let p = created(&ns, &pod("untriggered"));
    assert_eq!(names(&p, "containers"), ["main"]);

    let p = created(&ns, &triggered("dapr", pod("app")));
    assert_eq!(names(&p, "containers"), ["main", "daprd"], "{p}");
    assert!(p["spec"]["initContainers"].is_null(), "{p}");
    assert_eq!(p["metadata"]["labels"]["dapr.io/sidecar-injected"], "true");
    assert_eq!(
        env(container(&p, "containers", "main"), "DAPR_HTTP_PORT"),
        "3500"
    );

    // a daprd in spec.containers: left alone
    let p = created(
        &ns,
        &with_container(
            triggered("dapr", pod("has-daprd")),
            "containers",
            json!({"name": "daprd", "image": "ghcr.io/dapr/daprd:1.16.2"}),
        ),
    );
    assert_eq!(names(&p, "containers"), ["main", "daprd"], "{p}");
    // the marker label alone is not what Dapr checks
    let p = created(
        &ns,
        &with_label(
            triggered("dapr", pod("labelled")),
            "dapr.io/sidecar-injected",
            "true",
        ),
    );
    assert_eq!(names(&p, "containers"), ["main", "daprd"], "{p}");
}

#[test]
fn datadog_agent_shares_the_process_namespace_and_is_recognised_in_containers_only() {
    let (datadog, ns) = vendor_and_namespace("datadog");
    // the selection label is the webhook's objectSelector: without it, not even called
    let p = created(&ns, &pod("unlabelled"));
    assert_eq!(names(&p, "containers"), ["main"]);
    assert!(!datadog.logs().contains("unlabelled"), "{}", datadog.logs());

    let p = created(&ns, &triggered("datadog", pod("app")));
    assert_eq!(
        names(&p, "containers"),
        ["main", "datadog-agent-injected"],
        "{p}"
    );
    assert_eq!(p["spec"]["shareProcessNamespace"], true);

    // in spec.containers: no second agent
    let agent = json!({"name": "datadog-agent-injected", "image": "gcr.io/datadoghq/agent:7.71.1"});
    let p = created(
        &ns,
        &with_container(
            triggered("datadog", pod("has-agent")),
            "containers",
            agent.clone(),
        ),
    );
    assert_eq!(
        names(&p, "containers"),
        ["main", "datadog-agent-injected"],
        "{p}"
    );
    // among the init containers (as sexton's native strategy would put it): a second one
    let mut native = agent;
    native["restartPolicy"] = json!("Always");
    let refused = create(
        &ns,
        &with_container(triggered("datadog", pod("moved")), "initContainers", native),
    )
    .expect_err("a second datadog-agent-injected was admitted");
    assert!(
        refused.contains(r#"Duplicate value: "datadog-agent-injected""#),
        "{refused}"
    );
}

#[test]
fn cloudsql_proxy_is_named_for_the_namespace_and_its_quit_urls_given_to_the_apps() {
    let (_cloudsql, ns) = vendor_and_namespace("cloudsql");
    let proxy = format!("csql-{ns}-db");
    let p = created(&ns, &pod("app"));
    assert_eq!(names(&p, "containers"), ["main", proxy.as_str()], "{p}");
    assert!(p["spec"]["initContainers"].is_null(), "{p}");
    assert!(
        annotation(&p, "cloudsql.cloud.google.com/db")
            .as_str()
            .unwrap()
            .starts_with("1,gcr.io/cloud-sql-connectors/cloud-sql-proxy:"),
        "{p}"
    );
    assert_eq!(
        env(container(&p, "containers", "main"), "CSQL_PROXY_QUIT_URLS"),
        "http://localhost:9091/quitquitquit"
    );
    assert_eq!(
        env(
            container(&p, "containers", &proxy),
            "CSQL_PROXY_QUITQUITQUIT"
        ),
        "true"
    );
    // its container already in spec.containers: no second
    let p = created(
        &ns,
        &with_container(
            pod("has-proxy"),
            "containers",
            json!({"name": proxy, "image": "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.18.2"}),
        ),
    );
    assert_eq!(names(&p, "containers"), ["main", proxy.as_str()], "{p}");
}

#[test]
fn kuma_sidecar_first_and_recognised_by_name() {
    let (_kuma, ns) = vendor_and_namespace("kuma");
    let p = created(
        &ns,
        &with_container(
            pod("app"),
            "initContainers",
            json!({"name": "setup", "image": "app:1"}),
        ),
    );
    assert_eq!(names(&p, "initContainers"), ["setup", "kuma-init"], "{p}");
    assert_eq!(names(&p, "containers"), ["kuma-sidecar", "main"], "{p}");
    assert_eq!(annotation(&p, "kuma.io/sidecar-injected"), "true");

    let p = created(
        &ns,
        &with_label(pod("opted-out"), "kuma.io/sidecar-injection", "disabled"),
    );
    assert_eq!(names(&p, "containers"), ["main"], "{p}");
    // a kuma-sidecar in spec.containers: left alone
    let p = created(
        &ns,
        &with_container(
            pod("has-sidecar"),
            "containers",
            json!({"name": "kuma-sidecar", "image": "docker.io/kumahq/kuma-dp:2.12.2"}),
        ),
    );
    assert_eq!(names(&p, "containers"), ["main", "kuma-sidecar"], "{p}");
    assert!(p["spec"]["initContainers"].is_null(), "{p}");
    // the annotation alone is not what Kuma checks
    let p = created(
        &ns,
        &annotate(pod("annotated"), "kuma.io/sidecar-injected", "true"),
    );
    assert_eq!(names(&p, "containers"), ["kuma-sidecar", "main"], "{p}");
}

/// The API server's ordering, as issue 47 measured it: Datadog's configuration
/// (`datadog-webhook`, reinvocationPolicy IfNeeded) sorts before a webhook that moves its
/// sidecar to the init containers (here a mover named to sort after it, standing for
/// sexton's native strategy); the API server calls Datadog again because the Pod changed,
/// Datadog finds no agent in spec.containers and adds it again: the Pod is refused. This is
/// the real API server's behaviour, the fault sexton must avoid.
#[test]
fn datadog_reinvoked_after_a_move_to_the_init_containers_refuses_the_pod() {
    testenv();
    let label = label("datadog-order");
    // (Datadog first: the mover's readiness Pod has no Datadog label, Datadog's would be
    // refused once the mover is there)
    let datadog = Vendor::start("datadog", &label);
    let mover_name = format!("datadog-webhook-zz-mover-{}", std::process::id());
    assert!(mover_name.as_str() > "datadog-webhook");
    let mover = Vendor::start_with(
        "native:datadog-agent-injected",
        &label,
        VendorOptions {
            configuration: Some(mover_name),
            ..Default::default()
        },
    );
    let ns = labelled_namespace("vendor-order", &[&label]);
    let refused =
        create(&ns, &triggered("datadog", pod("backup"))).expect_err("the Pod was admitted");
    assert!(
        refused
            .contains(r#"spec.initContainers[0].name: Duplicate value: "datadog-agent-injected""#),
        "{refused}"
    );
    // Datadog was called twice for the Pod, the mover once, in between
    let reviews = |v: &Vendor| {
        v.logs()
            .lines()
            .filter(|l| l.contains(&format!("{ns}/backup")))
            .count()
    };
    assert_eq!(reviews(&datadog), 2, "{}", datadog.logs());
    assert_eq!(reviews(&mover), 1, "{}", mover.logs());
}

/// For the end-to-end tests: the vendor's containers in the node's image, its sidecar
/// running the quit server with the vendor's endpoints in its environment, everything else
/// the vendor's.
#[test]
fn node_options_make_the_vendors_containers_runnable() {
    testenv();
    let label = label("node");
    let command = quit_server_command();
    let istio = Vendor::start_with(
        "istio",
        &label,
        VendorOptions {
            image: Some("busybox:e2e".into()),
            sidecar_command: Some(command.clone()),
            ..Default::default()
        },
    );
    let ns = labelled_namespace("vendor-node", &[&label]);
    let p = created(&ns, &pod("istio"));
    drop(istio);
    let proxy = container(&p, "containers", "istio-proxy");
    assert_eq!(proxy["image"], "busybox:e2e");
    // `$` doubled: the kubelet turns `$$` back into `$`, so the sidecar runs exactly `command`
    let kubelet_escaped: Vec<String> = command
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().replace('$', "$$"))
        .collect();
    assert!(
        command.to_string().contains("$$"),
        "quit-server.sh uses $$: {command}"
    );
    assert_eq!(proxy["command"], json!(kubelet_escaped));
    assert!(proxy["args"].is_null(), "{proxy}");
    assert_eq!(env(proxy, "VENDOR_QUIT_PORT"), "15020");
    assert_eq!(env(proxy, "VENDOR_QUIT_PATH"), "/quitquitquit");
    assert_eq!(env(proxy, "VENDOR_PORTS"), "15020 15021");
    assert_eq!(proxy["readinessProbe"]["httpGet"]["port"], 15021);
    let init = container(&p, "initContainers", "istio-init");
    assert_eq!(init["image"], "busybox:e2e");
    assert_eq!(init["command"], json!(["/bin/true"]));
    let ca = p["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "istiod-ca-cert")
        .unwrap();
    assert_eq!(ca["configMap"]["optional"], true, "{ca}");
    assert_eq!(container(&p, "containers", "main")["image"], "app:1");

    // a quit port of the test's choice, where the vendor's configuration sets it
    let vault = Vendor::start_with(
        "vault",
        &label,
        VendorOptions {
            image: Some("busybox:e2e".into()),
            sidecar_command: Some(command),
            quit_port: Some(18200),
            ..Default::default()
        },
    );
    let p = created(
        &ns,
        &annotate(
            triggered("vault", pod("vault")),
            "vault.hashicorp.com/agent-enable-quit",
            "true",
        ),
    );
    drop(vault);
    let agent = container(&p, "containers", "vault-agent");
    assert_eq!(env(agent, "VENDOR_QUIT_PORT"), "18200");
    assert_eq!(env(agent, "VENDOR_QUIT_PATH"), "/agent/v1/quit");
    // (the init container runs /bin/true; the sidecar's environment is the quit server's)
    assert_eq!(
        container(&p, "initContainers", "vault-agent-init")["command"],
        json!(["/bin/true"])
    );
    assert!(env(agent, "VAULT_CONFIG").is_null(), "{agent}");
}

/// `POST path` to 127.0.0.1:`port` with a small body: the status code.
fn post(port: u16, path: &str) -> std::io::Result<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
    )?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {answer:?}")))
}

/// The stand-in sidecar, a real busybox process: the vendor's probes answered, a POST to the
/// quit endpoint ends it with 0, and so does SIGTERM.
#[test]
fn the_quit_server_answers_probes_and_quits_with_zero() {
    if !std::path::Path::new("/bin/busybox").exists() {
        require_service(
            "busybox (the stand-in sidecar's shell)",
            "apt-get install busybox-static",
        );
    }
    let command = quit_server_command();
    let argv: Vec<&str> = command
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let s = Scratch::new("quit-server");
    let start = |name: &str, quit: u16, probe: u16| {
        let mut cmd = Command::new(argv[0]);
        cmd.args(&argv[1..])
            .env("VENDOR_QUIT_PORT", quit.to_string())
            .env("VENDOR_QUIT_PATH", "/quitquitquit")
            .env("VENDOR_PORTS", format!("{quit} {probe}"));
        let p = s.spawn_host(name, cmd);
        p.wait_log("listening on");
        let ready = format!("127.0.0.1:{probe}");
        assert!(
            wait_until(TIMEOUT, || http_get(&ready, "/healthz/ready")
                .is_ok_and(|(code, _)| code == 200)),
            "the probe port never answered:\n{}",
            p.logs()
        );
        p
    };

    let [quit, probe] = free_ports();
    let mut server = start("quitting", quit, probe);
    assert_eq!(
        post(probe, "/quitquitquit").unwrap(),
        404,
        "not the quit port"
    );
    assert_eq!(post(quit, "/other").unwrap(), 404, "not the quit path");
    assert!(server.is_running());
    assert_eq!(post(quit, "/quitquitquit").unwrap(), 200);
    assert_eq!(server.wait(), 0, "{}", server.logs());
    assert!(
        wait_until(TIMEOUT, || TcpStream::connect(("127.0.0.1", probe))
            .is_err()),
        "a listener outlived the server"
    );

    let [quit, probe] = free_ports();
    let mut server = start("terminated", quit, probe);
    server.signal(15);
    assert_eq!(server.wait(), 0, "{}", server.logs());
}

/// Bad flags: one line naming the flag, exit 2.
#[test]
fn bad_flags_are_refused_naming_the_flag() {
    for (args, says) in [
        (
            &["--vendor", "nope"][..],
            "--vendor: unknown vendor \"nope\"",
        ),
        (&[][..], "--vendor is required"),
        (
            &["--vendor", "istio", "--quit-port", "18000"][..],
            "--quit-port: istio's quit port is fixed",
        ),
        (
            &["--vendor", "vault", "--quit-port", "0"][..],
            "--quit-port must be a port number",
        ),
        (
            &["--vendor", "vault", "--sidecar-command", "sleep"][..],
            "--sidecar-command must be a JSON array of strings",
        ),
        (
            &["--vendor", "istio", "--sidecar-args", "sleep"][..],
            "--sidecar-args must be a JSON array of strings",
        ),
        (
            &[
                "--vendor",
                "istio",
                "--sidecar-args",
                "[\"a\"]",
                "--sidecar-command",
                "[\"a\"]",
            ][..],
            "--sidecar-command and --sidecar-args cannot be used together",
        ),
        (&["--vendor", "vault"][..], "is required"),
        (
            &[
                "--vendor",
                "vault",
                "--print-configuration",
                "--url",
                "https://x",
            ][..],
            "--print-configuration needs --url, --ca-bundle and --namespace-label",
        ),
    ] {
        let out = Command::new(vendor_webhook()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
