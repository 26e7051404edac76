//! Manifest checks (`-f`), pure: in the pod templates of Jobs and CronJobs (and Lists of
//! them), the patterns that leave Jobs running or that sexton replaces, each with the
//! `kubectl sexton inject` command that fixes its file:
//! - sidecars in `spec.containers` with nothing to end them: a vendor's injected sidecar the
//!   catalogue recognises (its name and the template's marker, as in `istioctl kube-inject`'s
//!   output, which `kubectl sexton inject` ends without `--sidecar`), a container named as a
//!   vendor's sidecar, a well-known sidecar image or name the catalogue does not cover
//!   (fluent-bit, ...), or a server (ports, probes) beside containers that are not;
//! - kubexit wrappers (sexton is a drop-in; or make the sidecars native);
//! - OpenKruise markers, which need a controller to act on them;
//! - mesh quit-endpoint calls (`curl -X POST localhost:15020/quitquitquit`, ...);
//! - sleep-until-file loops (a sidecar polling for a file its main writes at the end).
//!
//! Templates already injected (annotation `sexton.dev/injected`) or opted out
//! (`sexton.dev/inject: disabled`) are left alone.

use serde_json::Value;
use sexton_inject::{
    ANNOTATION_INJECT, ANNOTATION_INJECTED, ANNOTATION_SIDECARS, Catalogue, ENV_KRUISE_SIDECAR,
    Source, declared_roles,
};

use super::report::{Check, Finding, Status};

pub const NAME: &str = "manifests";

/// Images and container names that are sidecars wherever they appear, beside the container
/// names of the catalogue's vendors (`istio-proxy`, `linkerd-proxy`, `vault-agent`, ...).
const KNOWN_SIDECARS: &[&str] = &[
    "proxyv2",
    "envoy",
    "cloud-sql-proxy",
    "cloudsql-proxy",
    "alloydb-auth-proxy",
    "fluent-bit",
    "fluentd",
    "vector",
    "otel-collector",
    "opentelemetry-collector",
    "datadog-agent",
    "oauth2-proxy",
    "promtail",
    "filebeat",
];

/// Calls that tell a mesh or proxy sidecar to quit (Istio's pilot-agent and Envoy's admin
/// port, Linkerd's admin port and linkerd-await, Cloud SQL Auth Proxy's `--quitquitquit`).
const QUIT_CALLS: &[&str] = &[
    "quitquitquit",
    ":15020/",
    ":15000/quit",
    ":4191/shutdown",
    "linkerd-await",
];

pub fn check(files: &[(String, Vec<Value>)], catalogue: &Catalogue) -> Check {
    let mut findings = vec![];
    let mut templates = 0;
    for (path, docs) in files {
        for (i, doc) in docs.iter().enumerate() {
            for (object, template) in templates_of(path, i, doc) {
                templates += 1;
                findings.extend(check_template(path, &object, template, catalogue));
            }
        }
    }
    let summary = format!(
        "{} file(s), {templates} Job/CronJob pod template(s), {} finding(s)",
        files.len(),
        findings.len()
    );
    Check::new(NAME, summary, findings)
}

/// `(FILE: Kind/NAME, pod template)` of a document: a Job's, a CronJob's, each of a List's.
fn templates_of<'a>(path: &str, index: usize, doc: &'a Value) -> Vec<(String, &'a Value)> {
    let kind = doc["kind"].as_str().unwrap_or("");
    let name = doc["metadata"]["name"]
        .as_str()
        .map_or(format!("#{}", index + 1), str::to_string);
    let object = format!("{path}: {kind}/{name}");
    match kind {
        "Job" => vec![(object, &doc["spec"]["template"])],
        "CronJob" => vec![(object, &doc["spec"]["jobTemplate"]["spec"]["template"])],
        "List" => doc["items"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
            .flat_map(|(j, item)| templates_of(path, j, item))
            .collect(),
        _ => vec![],
    }
}

/// The native sidecars of a pod spec (init containers with `restartPolicy: Always`).
pub fn native_sidecars(spec: &Value) -> Vec<String> {
    spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["restartPolicy"] == "Always")
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

/// How sexton injected a template (`native`, `wrap`, ...), if it did.
pub fn injected_mechanism(template: &Value) -> Option<String> {
    let record = template["metadata"]["annotations"][ANNOTATION_INJECTED].as_str()?;
    let record: Value = serde_json::from_str(record).ok()?;
    record["mechanism"].as_str().map(str::to_string)
}

/// The command that fixes a file: `kubectl sexton inject [--sidecar NAME]... -f FILE`.
fn inject(path: &str, sidecars: &[String]) -> String {
    let mut cmd = String::from("kubectl sexton inject");
    for s in sidecars {
        cmd.push_str(&format!(" --sidecar {s}"));
    }
    let quoted = if path.contains(|c: char| c.is_whitespace() || "'\"$`\\".contains(c)) {
        format!("'{}'", path.replace('\'', r"'\''"))
    } else {
        path.to_string()
    };
    format!("{cmd} -f {quoted}")
}

/// The findings of one pod template, in the order they are told: legacy mechanisms
/// (kubexit, OpenKruise markers, quit calls, sleep loops) first; then, only where none was
/// found, the sidecars nothing ends or the declaration that covers them.
fn check_template(
    path: &str,
    object: &str,
    template: &Value,
    catalogue: &Catalogue,
) -> Vec<Finding> {
    let annotations = &template["metadata"]["annotations"];
    if !annotations[ANNOTATION_INJECTED].is_null() || annotations[ANNOTATION_INJECT] == "disabled" {
        return vec![];
    }
    let t = Template::new(path, object, template, catalogue);
    let mut findings: Vec<Finding> = vec![];
    findings.extend(t.kubexit_wrappers());
    findings.extend(t.kruise_markers());
    for c in &t.containers {
        findings.extend(t.quit_call(c));
        findings.extend(t.sleep_until_file(c));
    }
    if findings.is_empty() {
        findings.extend(match declared_roles(&mut template.clone()) {
            None => t.undeclared_sidecars(),
            Some(r) if r.source == Source::Annotation => Some(t.declared(&r.sidecars)),
            Some(_) => None,
        });
    }
    findings
}

/// One pod template under check, with what every step needs.
struct Template<'a> {
    path: &'a str,
    object: &'a str,
    template: &'a Value,
    catalogue: &'a Catalogue,
    containers: Vec<&'a Value>,
    /// The containers `inject` recognises itself (the catalogue's): they need no --sidecar.
    recognised: Vec<String>,
}

impl<'a> Template<'a> {
    fn new(path: &'a str, object: &'a str, template: &'a Value, catalogue: &'a Catalogue) -> Self {
        let containers = template["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .collect();
        let recognised = catalogue
            .recognise(template)
            .into_iter()
            .map(|r| r.container)
            .collect();
        Template {
            path,
            object,
            template,
            catalogue,
            containers,
            recognised,
        }
    }

    fn warning(&self, message: String, fix: String) -> Finding {
        Finding::new(Status::Warning, self.object, message).fix(fix)
    }

    /// `kubectl sexton inject` with `--sidecar` for each of `names` it does not recognise.
    fn inject(&self, names: Vec<String>) -> String {
        let flags: Vec<String> = names
            .into_iter()
            .filter(|n| !self.recognised.contains(n))
            .collect();
        inject(self.path, &flags)
    }

    fn names_of(&self, keep: impl Fn(&Value) -> bool) -> Vec<String> {
        self.containers
            .iter()
            .filter(|c| keep(c))
            .map(|c| name(c))
            .collect()
    }

    fn kubexit_wrappers(&self) -> Option<Finding> {
        let kubexit = self.names_of(is_kubexit);
        (!kubexit.is_empty()).then(|| self.warning(
            format!("kubexit wrappers on {kubexit:?}: sexton is a drop-in (the same KUBEXIT_* variables and tombstones: put sexton's binary where kubexit's is), or make the sidecars native and drop the wrapper"),
            inject(self.path, &[]),
        ))
    }

    fn kruise_markers(&self) -> Option<Finding> {
        let marked = self.names_of(|c| sexton_inject::kruise_marked(env_pairs(c)));
        (!marked.is_empty()).then(|| self.warning(
            format!("OpenKruise markers ({ENV_KRUISE_SIDECAR}) on {marked:?}: only a controller ends these sidecars (OpenKruise's SidecarTerminator, or sexton's: kubectl sexton controller); without one the Job never ends. Native sidecars need none"),
            inject(self.path, &[]),
        ))
    }

    /// A container that tells the proxy to quit itself (`curl .../quitquitquit`).
    fn quit_call(&self, c: &Value) -> Option<Finding> {
        let call = quit_call(&script(c))?;
        // the proxy to end: in the manifest, or injected at admission by the mesh
        let proxies = self.names_of(|o| {
            name(o) != name(c) && sidecar_like(o, self.template, self.catalogue).is_some()
        });
        let fix = if !proxies.is_empty() {
            format!("drop the quit call, then: {}", self.inject(proxies))
        } else if self.catalogue.vendors.is_empty() {
            format!(
                "drop the quit call; the proxy is injected at admission, so name it for sexton's webhook: annotate the pod template {ANNOTATION_SIDECARS}=istio-proxy (the mesh's container name) and `kubectl label namespace NS sexton.dev/inject=enabled`; or, for a proxy in the manifest: {}",
                inject(self.path, &["PROXY".into()])
            )
        } else {
            format!(
                "drop the quit call; the proxy is injected at admission, and sexton's webhook ends the injected sidecars it recognises (Istio's istio-proxy, Linkerd's linkerd-proxy, ...: `kubectl sexton doctor` lists them per Job) with no declaration: `kubectl label namespace NS sexton.dev/inject=enabled`; or, for a proxy in the manifest: {}",
                inject(self.path, &["PROXY".into()])
            )
        };
        Some(self.warning(
            format!("container {:?} ends the proxy itself ({call:?} in its command): if it fails, is killed or is retried before the call, the proxy keeps the pod running", name(c)),
            fix,
        ))
    }

    /// A sidecar polling for a file its main writes at the end.
    fn sleep_until_file(&self, c: &Value) -> Option<Finding> {
        sleep_until_file(&script(c)).then(|| self.warning(
            format!("container {:?} loops on sleep until a file appears (a main writes it when done): if the main dies before writing it, the pod never ends", name(c)),
            format!("drop the loop, then: {}", inject(self.path, &[name(c)])),
        ))
    }

    /// Sidecars in spec.containers that nothing ends (nothing declared, no legacy mechanism).
    fn undeclared_sidecars(&self) -> Option<Finding> {
        if self.containers.len() < 2 {
            return None;
        }
        let sidecars: Vec<(String, String)> = self
            .containers
            .iter()
            .filter_map(|c| {
                sidecar_like(c, self.template, self.catalogue).map(|why| (name(c), why))
            })
            .collect();
        if sidecars.is_empty() || sidecars.len() == self.containers.len() {
            return None;
        }
        let names = sidecars.iter().map(|(n, _)| n.clone()).collect();
        let why: Vec<String> = sidecars
            .iter()
            .map(|(n, why)| format!("{n:?} ({why})"))
            .collect();
        Some(self.warning(
            format!("sidecars in spec.containers with nothing to end them: {}; the pods run on after the main containers finish", why.join(", ")),
            self.inject(names),
        ))
    }

    /// Sidecars declared by annotation: sexton's webhook or `inject` ends them.
    fn declared(&self, sidecars: &[String]) -> Finding {
        Finding::new(
            Status::Ok,
            self.object,
            format!(
                "sidecars {sidecars:?} declared ({ANNOTATION_SIDECARS}): ended by sexton's webhook in namespaces labelled sexton.dev/inject=enabled, or inject the file"
            ),
        )
    }
}

fn name(c: &Value) -> String {
    c["name"].as_str().unwrap_or("").to_string()
}

fn env_pairs(c: &Value) -> impl Iterator<Item = (&str, Option<&str>)> {
    c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| Some((e["name"].as_str()?, e["value"].as_str())))
}

/// The container's command and args, as one string.
fn script(c: &Value) -> String {
    ["command", "args"]
        .iter()
        .flat_map(|k| c[k].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The quit endpoint a container's script calls, if it calls one (a client making the
/// call: not a proxy's own `--quitquitquit` flag, which only turns the endpoint on).
fn quit_call(script: &str) -> Option<&'static str> {
    let calls = ["curl ", "wget ", "http://", "linkerd-await"]
        .iter()
        .any(|c| script.contains(c));
    QUIT_CALLS
        .iter()
        .find(|q| script.contains(*q))
        .copied()
        .filter(|_| calls)
}

fn is_kubexit(c: &Value) -> bool {
    let by_env = env_pairs(c).any(|(k, _)| k == "KUBEXIT_NAME" || k == "KUBEXIT_DEATH_DEPS");
    by_env || script(c).contains("kubexit")
}

/// `while [ ! -f F ]; do sleep N; done`, `until [ -e F ]; do sleep N; done`, `until test -f`.
fn sleep_until_file(script: &str) -> bool {
    let loops = script.contains("while ") || script.contains("until ");
    let tests_file = ["-f ", "-e ", "-s "].iter().any(|t| script.contains(t));
    loops && tests_file && script.contains("sleep")
}

/// Why a container looks like a sidecar (a vendor's injected sidecar that the template's
/// marker proves, a vendor's sidecar name, a known sidecar image or name, or a server that
/// declares ports or probes), if it does.
fn sidecar_like(c: &Value, template: &Value, catalogue: &Catalogue) -> Option<String> {
    let name = c["name"].as_str().unwrap_or("");
    let injected = catalogue
        .vendor_of(template, name)
        .filter(|_| sexton_inject::run_to_completion(&template["spec"]));
    if let Some(v) = injected {
        let marker = v.markers.iter().find(|m| m.on_pod(template));
        let marker = marker.map(|m| format!(": {m}")).unwrap_or_default();
        return Some(format!("{}'s injected sidecar{marker}", v.name));
    }
    if let Some(v) = catalogue.vendor_named(name) {
        return Some(format!("named as {}'s sidecar", v.name));
    }
    let image = c["image"].as_str().unwrap_or("");
    // the image's repository name, without registry, path and tag
    let repo = image
        .rsplit('/')
        .next()
        .unwrap_or("")
        .split([':', '@'])
        .next()
        .unwrap_or("");
    if KNOWN_SIDECARS.iter().any(|k| repo == *k || name == *k) {
        return Some("a known sidecar".into());
    }
    if c["ports"].as_array().is_some_and(|p| !p.is_empty()) {
        return Some("serves ports".into());
    }
    if !c["readinessProbe"].is_null() || !c["livenessProbe"].is_null() {
        return Some("has probes, as servers do".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inject_commands_quote_odd_paths() {
        assert_eq!(inject("a.yaml", &[]), "kubectl sexton inject -f a.yaml");
        assert_eq!(
            inject("my jobs/x.yaml", &["a".into(), "b".into()]),
            "kubectl sexton inject --sidecar a --sidecar b -f 'my jobs/x.yaml'"
        );
        assert_eq!(inject("-", &[]), "kubectl sexton inject -f -");
    }

    #[test]
    fn sidecar_likeness() {
        use serde_json::json;
        let catalogue = Catalogue::default();
        let plain = json!({"spec": {"restartPolicy": "Never"}});
        let c = |v: Value| sidecar_like(&v, &plain, &catalogue);
        assert_eq!(
            c(json!({"name": "x", "image": "gcr.io/cloud-sql-connectors/cloud-sql-proxy:2.8"}))
                .as_deref(),
            Some("a known sidecar")
        );
        assert_eq!(
            c(json!({"name": "x", "image": "nginx", "ports": [{"containerPort": 80}]})).as_deref(),
            Some("serves ports")
        );
        assert_eq!(c(json!({"name": "main", "image": "app:1"})), None);
        // the catalogue's names: proven by the template's marker, or a name alone
        let proxy = json!({"name": "istio-proxy", "image": "example.com/proxy"});
        assert_eq!(
            c(proxy.clone()).as_deref(),
            Some("named as Istio's sidecar")
        );
        let injected = json!({"metadata": {"annotations": {"sidecar.istio.io/status": "{}"}},
            "spec": {"restartPolicy": "Never"}});
        assert_eq!(
            sidecar_like(&proxy, &injected, &catalogue).as_deref(),
            Some("Istio's injected sidecar: annotation sidecar.istio.io/status")
        );
        // recognition off: neither
        assert_eq!(sidecar_like(&proxy, &injected, &Catalogue::empty()), None);
    }
}
