//! Stand-ins of the vendors' sidecar injectors (`testenv/vendor-webhook`: Istio, Linkerd,
//! Vault, Consul, Dapr, Datadog, the Cloud SQL Auth Proxy operator, Kuma) on the test API
//! server, each registered under the vendor's real MutatingWebhookConfiguration name with its
//! default reinvocation and failure policies, so that the API server orders them around
//! `sexton-webhook` as in a real cluster (it sorts configurations by name, and calls a webhook
//! with `reinvocationPolicy: IfNeeded` once more when a later one changed the Pod).
//!
//! ```ignore
//! let label = format!("sexton-test-istio-{}=true", std::process::id());
//! let istio = Vendor::start("istio", &label);        // returns once the API server calls it
//! let ns = labelled_namespace("istio", &[&label]);   // Pods created here get istio-proxy
//! let pod = triggered("vault", pod);                 // the annotations Vault's injector wants
//! ```
//!
//! A configuration name is shared by every test process on the API server: a lock (in the
//! test control plane's state directory) gives it to one test process at a time, as the
//! webhook tests' WATCHDOG does for `sexton-webhook`. A watchdog process holds the lock, applies
//! the configuration, runs the stand-in, and when the lifeline closes (the `Vendor` dropped,
//! or the test process gone, however it ended) deletes the configuration, stops the stand-in
//! and releases the lock. Another test process (or test) wanting the same vendor waits for it.

use std::fs::{File, OpenOptions};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use crate::cluster::{kubectl, labelled_namespace, testenv};
use crate::local::{free_port, openssl};
use crate::scratch::{Process, Scratch};
use crate::services::{ROOT, testenv_cmd};
use crate::wait::wait_until;

/// The vendors the stand-in knows (`vendor-webhook --vendor NAME`). It also knows
/// `native:CONTAINER`, a mover that does to CONTAINER what sexton's native strategy does
/// (moves it to initContainers with restartPolicy Always), for tests without sexton.
pub const VENDORS: [&str; 8] = [
    "istio", "linkerd", "vault", "consul", "dapr", "datadog", "cloudsql", "kuma",
];

/// What changes a stand-in; all optional.
#[derive(Clone, Debug, Default)]
pub struct VendorOptions {
    /// `--image`: every container the vendor adds runs this image (the end-to-end node's
    /// busybox), its init containers `/bin/true`.
    pub image: Option<String>,
    /// `--sidecar-command`: the command of the vendor's sidecars (a JSON array), given the
    /// vendor's quit endpoint and probe ports in its environment (`quit_server_command`).
    pub sidecar_command: Option<Value>,
    /// `--quit-port`: the quit endpoint's port instead of the vendor's default.
    pub quit_port: Option<u16>,
    /// A configuration name of the test's own instead of the vendor's (for the mover, or to
    /// order a stand-in elsewhere among the configurations).
    pub configuration: Option<String>,
}

/// A running stand-in, registered for the namespaces carrying one label.
pub struct Vendor {
    /// `--vendor`'s name.
    pub name: String,
    /// The name of its MutatingWebhookConfiguration.
    pub configuration: String,
    watchdog: Process,
    lifeline: Option<File>,
    _scratch: Scratch,
}

/// The watchdog: owns the configuration `$name` for the life of the lifeline (see the module
/// doc). The stand-in starts first, so that a webhook with `failurePolicy: Fail` is there to
/// answer as soon as the API server knows it.
const WATCHDOG: &str = r#"lock=$1 lifeline=$2 config=$3 name=$4; shift 4
exec 9>"$lock"
flock -w 120 9 || { echo "vendor watchdog: $lock held by another test process for 120 s" >&2; exit 1; }
"$@" 9>&- & pid=$!
kubectl apply -f "$config" >/dev/null || { kill "$pid"; exit 1; }
: > "$lifeline.owned"
cat "$lifeline" >/dev/null
kubectl delete mutatingwebhookconfiguration "$name" --ignore-not-found >/dev/null 2>&1
kill "$pid"; wait "$pid""#;

impl Vendor {
    /// Starts vendor `name`'s stand-in on the namespaces labelled `selector_label`
    /// (`KEY=VALUE`, the test's own) and returns once the API server calls it: a dry-run Pod
    /// with the vendor's trigger only, in a new namespace with that label alone, comes back
    /// changed. Two stand-ins on one label: start first the one whose readiness Pod the
    /// other would spoil (Datadog before a mover of its sidecar).
    pub fn start(name: &str, selector_label: &str) -> Vendor {
        Self::start_with(name, selector_label, VendorOptions::default())
    }

    pub fn start_with(name: &str, selector_label: &str, options: VendorOptions) -> Vendor {
        let env = testenv();
        let scratch = Scratch::new(&format!("vendor-{}", name.replace(':', "-")));
        let (cert, key) = (scratch.path("tls.crt"), scratch.path("tls.key"));
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            key.to_str().unwrap(),
            "-out",
            cert.to_str().unwrap(),
        ]);
        let port = free_port();
        let mut print = Command::new(vendor_webhook());
        print
            .args(["--vendor", name, "--print-configuration"])
            .args(["--url", &format!("https://127.0.0.1:{port}/mutate")])
            .arg("--ca-bundle")
            .arg(&cert)
            .args(["--namespace-label", selector_label]);
        if let Some(c) = &options.configuration {
            print.args(["--configuration-name", c]);
        }
        let out = print.output().expect("running vendor-webhook");
        assert!(
            out.status.success(),
            "vendor-webhook --print-configuration: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
        let configuration = manifest["metadata"]["name"].as_str().unwrap().to_string();
        let config = scratch.path("configuration.json");
        std::fs::write(&config, &out.stdout).unwrap();

        let fifo = scratch.fifo("lifeline");
        // (read-write: an open that never blocks, even if the watchdog died before reading)
        let lifeline = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", WATCHDOG, "sh"])
            .arg(env.state.join(format!("vendor-{configuration}.lock")))
            .arg(&fifo)
            .arg(&config)
            .arg(&configuration)
            .arg(vendor_webhook())
            .args(["--vendor", name, "--listen", &format!("127.0.0.1:{port}")])
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .env("KUBECONFIG", &env.kubeconfig);
        if let Some(image) = &options.image {
            cmd.args(["--image", image]);
        }
        if let Some(command) = &options.sidecar_command {
            cmd.args(["--sidecar-command", &command.to_string()]);
        }
        if let Some(p) = options.quit_port {
            cmd.args(["--quit-port", &p.to_string()]);
        }
        let mut watchdog = scratch.spawn_host("vendor-webhook", cmd);
        let owned = scratch.path("lifeline.owned");
        assert!(
            wait_until(Duration::from_secs(150), || owned.exists()
                || !watchdog.is_running()),
            "the watchdog never took {configuration}:\n{}",
            watchdog.logs()
        );
        assert!(
            owned.exists(),
            "the watchdog of {configuration} failed:\n{}",
            watchdog.logs()
        );
        let vendor = Vendor {
            name: name.to_string(),
            configuration,
            watchdog,
            lifeline: Some(lifeline),
            _scratch: scratch,
        };
        vendor.wait_until_called(selector_label);
        vendor
    }

    /// The stand-in's log (and its watchdog's): one line per review.
    pub fn logs(&self) -> String {
        self.watchdog.logs()
    }

    /// Until a dry run in a namespace it selects comes back changed by it (the API server
    /// calls a new configuration once it has read it, and trusts its caBundle).
    fn wait_until_called(&self, selector_label: &str) {
        let ns = labelled_namespace("vendor-ready", &[selector_label]);
        let mut containers = vec![json!({"name": "main", "image": "app:1"})];
        if let Some(moved) = self.name.strip_prefix("native:") {
            containers.push(json!({"name": moved, "image": "sidecar:1"}));
        }
        let probe = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vendor-probe"},
            "spec": {"restartPolicy": "Never", "nodeName": "sexton-test-no-such-node",
                     "containers": containers}
        });
        // (its own trigger only: another stand-in on the same label, a mover say, must not
        // be involved)
        let probe = triggered(&self.name, probe);
        let sent = container_names(&probe);
        let scratch = Scratch::new("vendor-ready");
        let file = scratch.path("probe.json");
        std::fs::write(&file, probe.to_string()).unwrap();
        let mut last = String::new();
        let called = wait_until(Duration::from_secs(60), || {
            let out = kubectl(&[
                "create",
                "--dry-run=server",
                "-o",
                "json",
                "-n",
                &ns,
                "-f",
                file.to_str().unwrap(),
            ]);
            last = String::from_utf8_lossy(&out.stderr).into_owned();
            serde_json::from_slice::<Value>(&out.stdout)
                .is_ok_and(|answered| container_names(&answered) != sent)
        });
        assert!(
            called,
            "the API server never called {} ({}): {last}\n{}",
            self.name,
            self.configuration,
            self.logs()
        );
    }
}

impl Drop for Vendor {
    fn drop(&mut self) {
        // the watchdog sees its lifeline close, deletes the configuration and stops the
        // stand-in; waited for, so that the next owner of the name starts from nothing
        drop(self.lifeline.take());
        if self.watchdog.wait_status(Duration::from_secs(30)).is_none() {
            eprintln!(
                "the watchdog of {} did not end in 30 s:\n{}",
                self.configuration,
                self.logs()
            );
        }
    }
}

/// `(list, name)` of every container of a Pod, in order.
fn container_names(pod: &Value) -> Vec<(String, String)> {
    let mut names = vec![];
    for list in ["initContainers", "containers"] {
        for c in pod["spec"][list].as_array().into_iter().flatten() {
            names.push((
                list.to_string(),
                c["name"].as_str().unwrap_or("").to_string(),
            ));
        }
    }
    names
}

/// `pod` with the annotations and labels vendor `name`'s injector wants on a Pod before it
/// injects it (Istio, Linkerd, Kuma and the Cloud SQL operator are selected by namespace:
/// nothing on the Pod).
pub fn triggered(name: &str, mut pod: Value) -> Value {
    let (annotations, labels) = match name {
        "vault" => (
            json!({"vault.hashicorp.com/agent-inject": "true", "vault.hashicorp.com/role": "app"}),
            json!({}),
        ),
        "consul" => (
            json!({"consul.hashicorp.com/connect-inject": "true"}),
            json!({}),
        ),
        "dapr" => (
            json!({"dapr.io/enabled": "true", "dapr.io/app-id": "app"}),
            json!({}),
        ),
        "datadog" => (json!({}), json!({"agent.datadoghq.com/sidecar": "fargate"})),
        _ => (json!({}), json!({})),
    };
    for (key, add) in [("annotations", annotations), ("labels", labels)] {
        let map = &mut pod["metadata"][key];
        if !map.is_object() {
            *map = json!({});
        }
        for (k, v) in add.as_object().unwrap() {
            map[k] = v.clone();
        }
    }
    pod
}

/// The stand-in's binary (`scripts/testenv.sh vendor-webhook`: built from its Go sources
/// when they changed, cached), asked for once per test process.
pub fn vendor_webhook() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| testenv_cmd("vendor-webhook"))
}

/// The sidecar command of `testenv/vendor-webhook/quit-server.sh` for a busybox image: it
/// answers the vendor's probes, ends with 0 on a POST to the vendor's quit endpoint and on
/// SIGTERM (`VendorOptions::sidecar_command`).
pub fn quit_server_command() -> Value {
    let script =
        std::fs::read_to_string(format!("{ROOT}/testenv/vendor-webhook/quit-server.sh")).unwrap();
    json!(["/bin/busybox", "sh", "-c", script])
}
