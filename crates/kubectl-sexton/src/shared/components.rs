//! sexton's own components in a cluster, found by the label the chart (and deploy/, rendered
//! from it) gives them, `app.kubernetes.io/name=sexton-controller|sexton-webhook`, never by
//! their names: those carry the Helm release's name (`helm install batch ...` makes
//! `batch-sexton-controller`). `version` and `doctor` both find them here.

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{ListParams, ObjectMeta};
use kube::{Api, Client};

/// The label naming the component.
pub const NAME_LABEL: &str = "app.kubernetes.io/name";

/// The name the binaries default to for the webhook's MutatingWebhookConfiguration, which
/// a hand-made configuration (without the chart's labels) is recognised by.
pub const DEFAULT_WEBHOOK_CONFIGURATION: &str = "sexton-webhook";

/// One of sexton's Deployments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Controller,
    Webhook,
}

impl Part {
    /// The value of [`NAME_LABEL`].
    pub fn label(self) -> &'static str {
        match self {
            Part::Controller => "sexton-controller",
            Part::Webhook => "sexton-webhook",
        }
    }

    /// `app.kubernetes.io/name=sexton-...`, for list requests and messages.
    pub fn selector(self) -> String {
        format!("{NAME_LABEL}={}", self.label())
    }
}

/// The Deployments of `part` in `namespace`, in name order (several: several releases).
pub async fn deployments(
    client: &Client,
    namespace: &str,
    part: Part,
) -> Result<Vec<Deployment>, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let mut list = api
        .list(&ListParams::default().labels(&part.selector()))
        .await?
        .items;
    list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(list)
}

/// Whether a MutatingWebhookConfiguration is sexton webhook's: labelled as the chart labels
/// it, or named as the binaries name it by default.
pub fn is_sexton_webhook_configuration(meta: &ObjectMeta) -> bool {
    let labelled = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(NAME_LABEL))
        .is_some_and(|v| v == Part::Webhook.label());
    labelled || meta.name.as_deref() == Some(DEFAULT_WEBHOOK_CONFIGURATION)
}

/// sexton's MutatingWebhookConfigurations among `all`.
pub fn webhook_configurations(
    all: &[MutatingWebhookConfiguration],
) -> Vec<&MutatingWebhookConfiguration> {
    all.iter()
        .filter(|c| is_sexton_webhook_configuration(&c.metadata))
        .collect()
}

/// The Secret holding a webhook Deployment's serving certificate: the `--tls-secret` it
/// manages (self-managed), else the Secret mounted as its volume `tls` (cert-manager, or a
/// Secret of the user's).
pub fn webhook_tls_secret(d: &Deployment) -> Option<String> {
    let spec = d.spec.as_ref()?.template.spec.as_ref()?;
    let flag = spec.containers.iter().find_map(|c| {
        let words: Vec<&String> = c.command.iter().chain(c.args.iter()).flatten().collect();
        words
            .iter()
            .enumerate()
            .find_map(|(i, w)| match w.strip_prefix("--tls-secret") {
                Some("") => words.get(i + 1).map(|n| n.to_string()),
                Some(v) => v.strip_prefix('=').map(str::to_string),
                None => None,
            })
    });
    if flag.is_some() {
        return flag;
    }
    spec.volumes
        .iter()
        .flatten()
        .find(|v| v.name == "tls")
        .and_then(|v| v.secret.as_ref())
        .and_then(|s| s.secret_name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_webhooks_secret_is_its_flag_else_its_tls_volume() {
        let d = |spec: serde_json::Value| -> Deployment {
            serde_json::from_value(json!({"spec": {"selector": {}, "template": {"spec": spec}}}))
                .unwrap()
        };
        let flag = d(
            json!({"containers": [{"name": "w", "args": ["webhook", "--tls-secret=batch-sexton-webhook-tls"]}]}),
        );
        assert_eq!(
            webhook_tls_secret(&flag).as_deref(),
            Some("batch-sexton-webhook-tls")
        );
        let volume = d(json!({"containers": [{"name": "w"}],
            "volumes": [{"name": "other", "emptyDir": {}}, {"name": "tls", "secret": {"secretName": "mine"}}]}));
        assert_eq!(webhook_tls_secret(&volume).as_deref(), Some("mine"));
        assert_eq!(webhook_tls_secret(&d(json!({"containers": []}))), None);
        let apart = d(
            json!({"containers": [{"name": "w", "command": ["kubectl-sexton", "webhook", "--tls-secret", "s"]}]}),
        );
        assert_eq!(webhook_tls_secret(&apart).as_deref(), Some("s"));
    }

    #[test]
    fn sextons_configuration_by_label_or_default_name() {
        let meta = |v: serde_json::Value| -> ObjectMeta { serde_json::from_value(v).unwrap() };
        assert!(is_sexton_webhook_configuration(&meta(
            json!({"name": "batch-sexton-webhook", "labels": {"app.kubernetes.io/name": "sexton-webhook"}})
        )));
        assert!(is_sexton_webhook_configuration(&meta(
            json!({"name": "sexton-webhook"})
        )));
        assert!(!is_sexton_webhook_configuration(&meta(
            json!({"name": "istio-sidecar-injector", "labels": {"app.kubernetes.io/name": "istiod"}})
        )));
    }
}
