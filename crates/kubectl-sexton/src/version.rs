//! `kubectl sexton version`: this binary's version, and what runs in the cluster: the API
//! server's version, the controller's and the webhook's (their Deployments' version label,
//! image and ready replicas, found by the label `app.kubernetes.io/name` that the chart and
//! deploy/ give them, as `doctor` finds them: shared/components.rs) and the EphemeralJob
//! CRD's versions. It is what one runs when something is wrong, so whatever cannot be read
//! becomes a line saying why ("not installed", "forbidden"). An API server that cannot be
//! reached at all is exit 2 (the client's version still printed), as for every command;
//! `--client` asks nothing of the cluster.

use std::time::Duration;

use clap::Args;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use serde::Serialize;

use crate::shared::cli::{ReportFormat, ReportOutput, SextonNamespaceFlag, structured};
use crate::shared::components::{self, Part};
use crate::shared::exit::Exit;
use crate::shared::kube_client::{ClientError, KubeFlags};
use crate::shared::logging;
use crate::shared::runtime::block_on;

const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");
const CRD_NAME: &str = "ephemeraljobs.sexton.dev";

#[derive(Args, Debug)]
#[command(
    about = "Print the client's version, and the API server's, controller's, webhook's and EphemeralJob CRD's in the cluster"
)]
pub struct VersionFlags {
    /// Only the client's version (no API server contacted)
    #[arg(long)]
    client: bool,
    #[command(flatten)]
    sexton: SextonNamespaceFlag,
    #[command(flatten)]
    kube: KubeFlags,
    #[command(flatten)]
    output: ReportOutput,
}

/// What could be learnt about one thing on the server side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found<T> {
    Installed(T),
    NotInstalled { reason: String },
    Unknown { reason: String },
}

/// `{"state": "installed", "installed": ...}` or `{"state": "notInstalled"|"unknown", "reason": ...}`.
impl<T: Serialize> Serialize for Found<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(2))?;
        match self {
            Found::Installed(t) => {
                m.serialize_entry("state", "installed")?;
                m.serialize_entry("installed", t)?;
            }
            Found::NotInstalled { reason } => {
                m.serialize_entry("state", "notInstalled")?;
                m.serialize_entry("reason", reason)?;
            }
            Found::Unknown { reason } => {
                m.serialize_entry("state", "unknown")?;
                m.serialize_entry("reason", reason)?;
            }
        }
        m.end()
    }
}

/// One Deployment of a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    pub deployment: String,
    /// The version label, else the image's tag.
    pub version: Option<String>,
    pub image: Option<String>,
    pub ready: i32,
    pub replicas: i32,
}

/// The versions of the CRD: which the API serves, which one it stores.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Crd {
    pub served: Vec<String>,
    pub storage: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerReport {
    pub api_server: Found<String>,
    pub namespace: String,
    pub controller: Found<Vec<Component>>,
    pub webhook: Found<Vec<Component>>,
    pub crd: Found<Crd>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub client: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerReport>,
}

pub fn main(flags: VersionFlags) -> Exit {
    let mut report = Report {
        client: CLIENT_VERSION.into(),
        server: None,
    };
    let mut exit = Exit::Ok;
    if !flags.client {
        match block_on(server(&flags)) {
            Ok(Ok(server)) => report.server = Some(server),
            Ok(Err(e)) => {
                logging::stderr_line(&format!(
                    "kubectl-sexton version: {e} (--client prints the client's version alone)"
                ));
                exit = Exit::Unusable;
            }
            Err(e) => {
                logging::stderr_line(&format!(
                    "kubectl-sexton version: cannot start the async runtime: {e}"
                ));
                return Exit::Unusable;
            }
        }
    }
    let out = match flags.output.output {
        ReportFormat::Text => text(&report),
        ReportFormat::Json => structured(&report, false),
        ReportFormat::Yaml => structured(&report, true),
    };
    logging::stdout_line(out.trim_end());
    exit
}

/// The server side, each part read on its own so that one failure hides nothing else;
/// an error if the API server cannot be reached at all.
async fn server(flags: &VersionFlags) -> Result<ServerReport, ClientError> {
    let namespace = flags.sexton.sexton_namespace.clone();
    let (client, info) = flags.kube.connect().await?;
    let t = flags.kube.request_timeout;
    let (controller, webhook, crd) = tokio::join!(
        component(&client, &namespace, Part::Controller, t),
        component(&client, &namespace, Part::Webhook, t),
        crd(&client, t),
    );
    Ok(ServerReport {
        api_server: Found::Installed(info.git_version),
        namespace,
        controller,
        webhook,
        crd,
    })
}

/// Why a request gave no answer.
enum Failure {
    Timeout(Duration),
    Api(kube::Error),
}

impl Failure {
    fn reason(&self) -> String {
        match self {
            Failure::Timeout(t) => format!("no answer within {}s", t.as_secs_f64()),
            Failure::Api(kube::Error::Api(s)) if s.code == 403 => {
                format!("forbidden: {}", s.message)
            }
            Failure::Api(e) => e.to_string(),
        }
    }

    fn not_found(&self) -> bool {
        matches!(self, Failure::Api(kube::Error::Api(s)) if s.code == 404)
    }
}

async fn bounded<T>(
    t: Duration,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(t, request).await {
        Ok(r) => r.map_err(Failure::Api),
        Err(_) => Err(Failure::Timeout(t)),
    }
}

async fn component(client: &Client, ns: &str, part: Part, t: Duration) -> Found<Vec<Component>> {
    match bounded(t, components::deployments(client, ns, part)).await {
        Ok(list) if list.is_empty() => Found::NotInstalled {
            reason: format!("no Deployment labelled {}", part.selector()),
        },
        Ok(list) => Found::Installed(list.iter().map(component_of).collect()),
        Err(e) => Found::Unknown { reason: e.reason() },
    }
}

async fn crd(client: &Client, t: Duration) -> Found<Crd> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    match bounded(t, api.get(CRD_NAME)).await {
        Ok(crd) => Found::Installed(crd_of(&crd)),
        Err(e) if e.not_found() => Found::NotInstalled {
            reason: format!("no CustomResourceDefinition {CRD_NAME}"),
        },
        Err(e) => Found::Unknown { reason: e.reason() },
    }
}

/// A component's version as its Deployment states it: the version label the chart sets,
/// else the tag of its first container's image.
pub fn component_of(d: &Deployment) -> Component {
    let image = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone());
    let label = d
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/version"))
        .cloned();
    let status = d.status.as_ref();
    Component {
        deployment: d.metadata.name.clone().unwrap_or_default(),
        version: label.or_else(|| image.as_deref().and_then(image_tag).map(str::to_string)),
        image,
        ready: status.and_then(|s| s.ready_replicas).unwrap_or(0),
        replicas: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
    }
}

/// The tag of an image reference (`registry:5000/name:tag@digest` gives `tag`), if it has one.
pub fn image_tag(image: &str) -> Option<&str> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last.split_once(':').map(|(_, tag)| tag)
}

pub fn crd_of(crd: &CustomResourceDefinition) -> Crd {
    let versions = &crd.spec.versions;
    Crd {
        served: versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect(),
        storage: versions.iter().find(|v| v.storage).map(|v| v.name.clone()),
    }
}

/// The report as aligned lines, one per component (and per Deployment of one).
pub fn text(r: &Report) -> String {
    let mut lines = vec![("client", format!("kubectl-sexton {}", r.client))];
    if let Some(s) = &r.server {
        lines.push(("api server", found(&s.api_server, |v| v.clone())));
        for (what, found_) in [("controller", &s.controller), ("webhook", &s.webhook)] {
            let rows: Vec<String> = match found_ {
                Found::Installed(cs) => {
                    cs.iter().map(|c| component_line(c, &s.namespace)).collect()
                }
                other => vec![found(other, |_| String::new())],
            };
            lines.extend(rows.into_iter().map(|row| (what, row)));
        }
        lines.push(("crd", found(&s.crd, crd_line)));
    }
    let width = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    lines
        .iter()
        .map(|(k, v)| format!("{:width$} {v}\n", format!("{k}:")))
        .collect()
}

fn found<T>(f: &Found<T>, installed: impl Fn(&T) -> String) -> String {
    match f {
        Found::Installed(t) => installed(t),
        Found::NotInstalled { reason } => format!("not installed ({reason})"),
        Found::Unknown { reason } => format!("unknown ({reason})"),
    }
}

fn component_line(c: &Component, namespace: &str) -> String {
    format!(
        "{} (deployment {namespace}/{}, image {}, {}/{} ready)",
        c.version.as_deref().unwrap_or("unknown version"),
        c.deployment,
        c.image.as_deref().unwrap_or("none"),
        c.ready,
        c.replicas
    )
}

fn crd_line(c: &Crd) -> String {
    format!(
        "{CRD_NAME} {} (served: {}; stored: {})",
        c.storage.as_deref().unwrap_or("-"),
        if c.served.is_empty() {
            "none".to_string()
        } else {
            c.served.join(", ")
        },
        c.storage.as_deref().unwrap_or("none")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tags() {
        assert_eq!(
            image_tag("ghcr.io/sexton-dev/kubectl-sexton:0.1.0"),
            Some("0.1.0")
        );
        assert_eq!(image_tag("127.0.0.1:15000/kubectl-sexton:1.2"), Some("1.2"));
        assert_eq!(image_tag("127.0.0.1:15000/kubectl-sexton"), None);
        assert_eq!(image_tag("kubectl-sexton:0.1.0@sha256:ab"), Some("0.1.0"));
        assert_eq!(image_tag("busybox"), None);
    }

    fn deployment(labels: &[(&str, &str)], image: &str, ready: Option<i32>) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "sexton-controller", "labels": labels.iter().cloned().collect::<std::collections::BTreeMap<_, _>>()},
            "spec": {
                "replicas": 2,
                "selector": {},
                "template": {"spec": {"containers": [{"name": "c", "image": image}]}}
            },
            "status": {"readyReplicas": ready}
        }))
        .unwrap()
    }

    #[test]
    fn a_component_is_versioned_by_its_label_else_its_image_tag() {
        let labelled = deployment(
            &[("app.kubernetes.io/version", "0.2.0")],
            "x:0.1.0",
            Some(2),
        );
        assert_eq!(component_of(&labelled).version.as_deref(), Some("0.2.0"));
        let plain = deployment(&[], "x:0.1.0", None);
        let c = component_of(&plain);
        assert_eq!(c.version.as_deref(), Some("0.1.0"));
        assert_eq!((c.ready, c.replicas), (0, 2));
        assert_eq!(component_of(&deployment(&[], "x", None)).version, None);
    }

    #[test]
    fn the_text_has_a_line_per_part_and_says_why_one_is_missing() {
        let r = Report {
            client: "0.1.0".into(),
            server: Some(ServerReport {
                api_server: Found::Installed("v1.34.4".into()),
                namespace: "sexton-system".into(),
                controller: Found::Installed(vec![Component {
                    deployment: "sexton-controller".into(),
                    version: Some("0.1.0".into()),
                    image: Some("i:0.1.0".into()),
                    ready: 1,
                    replicas: 2,
                }]),
                webhook: Found::NotInstalled {
                    reason: "no Deployment labelled app.kubernetes.io/name=sexton-webhook".into(),
                },
                crd: Found::Unknown {
                    reason: "forbidden: no".into(),
                },
            }),
        };
        assert_eq!(
            text(&r),
            "client:     kubectl-sexton 0.1.0\n\
             api server: v1.34.4\n\
             controller: 0.1.0 (deployment sexton-system/sexton-controller, image i:0.1.0, 1/2 ready)\n\
             webhook:    not installed (no Deployment labelled app.kubernetes.io/name=sexton-webhook)\n\
             crd:        unknown (forbidden: no)\n"
        );
    }
}
