//! `POST /mutate` (and `/mutate/annotated`): one AdmissionReview (`admission.k8s.io/v1`) for one Pod: the images
//! `wrap` needs looked up (cached), sexton-inject's decision, the answer (a JSON patch and
//! warnings), an Event for a refusal, metrics. Anything unexpected admits the Pod unchanged:
//! the webhook must never be why a Pod cannot be created.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::runtime::events::{Event, EventType, Recorder};
use serde_json::Value;
use sexton_inject::{ImageCommand, Options, Outcome, Scope, Unresolved, admit, entrypoints_needed};
use tracing::{debug, info, warn};

use super::metrics::WebhookMetrics;
use crate::shared::registry::{Looked, RegistryOpts, lookup_all};

/// Lookups are kept this long (an image's ENTRYPOINT under a tag rarely changes; a failed
/// lookup is retried sooner).
const LOOKUP_TTL: Duration = Duration::from_secs(600);
const FAILED_LOOKUP_TTL: Duration = Duration::from_secs(30);

/// One image's lookup.
type Lookup = Result<ImageCommand, Unresolved>;

/// What every review needs.
pub struct Reviewer {
    /// The base options; the cluster's version is set from the API server.
    pub options: Mutex<Options>,
    pub registry: RegistryOpts,
    pub recorder: Recorder,
    pub metrics: Arc<WebhookMetrics>,
    /// With `--image-pull-secrets`: the client that reads a Pod's pull Secrets.
    pub pull_secrets: Option<kube::Client>,
    lookups: Mutex<HashMap<String, (Instant, Lookup)>>,
}

impl Reviewer {
    pub fn new(
        options: Options,
        registry: RegistryOpts,
        recorder: Recorder,
        metrics: Arc<WebhookMetrics>,
        pull_secrets: Option<kube::Client>,
    ) -> Self {
        Reviewer {
            options: Mutex::new(options),
            registry,
            recorder,
            metrics,
            pull_secrets,
            lookups: Mutex::default(),
        }
    }
}

/// `POST /mutate`: Pods of namespaces labelled `sexton.dev/inject=enabled`.
pub async fn mutate(State(reviewer): State<Arc<Reviewer>>, body: Bytes) -> Response {
    answer(&reviewer, Scope::Namespace, &body).await
}

/// `POST /mutate/annotated`: Pods of other namespaces (only those whose annotation asks).
pub async fn mutate_annotated(State(reviewer): State<Arc<Reviewer>>, body: Bytes) -> Response {
    answer(&reviewer, Scope::Annotation, &body).await
}

/// Never an HTTP error for a well-formed review.
async fn answer(reviewer: &Reviewer, scope: Scope, body: &[u8]) -> Response {
    let started = Instant::now();
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("not an AdmissionReview: {e}"),
            )
                .into_response();
        }
    };
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("no request in the AdmissionReview: {e}"),
            )
                .into_response();
        }
    };
    let (response, result) = review_pod(reviewer, &request, scope).await;
    reviewer.metrics.reviewed(result, started.elapsed());
    axum::Json(response.into_review()).into_response()
}

/// The answer for one request, and its result label.
async fn review_pod(
    reviewer: &Reviewer,
    request: &AdmissionRequest<DynamicObject>,
    scope: Scope,
) -> (AdmissionResponse, &'static str) {
    let allowed = AdmissionResponse::from(request);
    let Some(object) = request.object.as_ref().filter(|_| is_pod_create(request)) else {
        return (allowed, "skipped");
    };
    let Ok(pod) = serde_json::to_value(object) else {
        return (allowed, "skipped");
    };
    let options = reviewer.options.lock().expect("poisoned").clone();
    let namespace = request.namespace.clone().unwrap_or_default();
    let resolver = reviewer.resolver(&pod, &namespace, &options).await;
    let admission = admit(&pod, scope, &options, &resolver);
    let result = match &admission.outcome {
        None if admission.patch.is_empty() => "unchanged",
        None => "repaired",
        Some(Outcome::Injected { .. }) => "injected",
        Some(Outcome::Refused(_)) => "refused",
        Some(_) => "unchanged",
    };
    log(request, &admission.outcome, &admission.warnings);
    if let (Some(Outcome::Refused(why)), false) = (&admission.outcome, request.dry_run) {
        refusal_event(reviewer, request, why.as_str()).await;
    }
    let mut response = allowed;
    if !admission.warnings.is_empty() {
        response.warnings = Some(admission.warnings);
    }
    if admission.patch.is_empty() {
        return (response, result);
    }
    match response.with_patch(admission.patch) {
        Ok(r) => (r, result),
        Err(e) => {
            warn!("cannot encode the patch ({e}); admitting unchanged");
            (AdmissionResponse::from(request), "error")
        }
    }
}

fn is_pod_create(request: &AdmissionRequest<DynamicObject>) -> bool {
    request.kind.kind == "Pod"
        && request.kind.group.is_empty()
        && request.operation == Operation::Create
}

fn pod_name(request: &AdmissionRequest<DynamicObject>) -> String {
    let meta = request.object.as_ref().map(|o| &o.metadata);
    let name = meta.and_then(|m| m.name.clone().or_else(|| m.generate_name.clone()));
    format!(
        "{}/{}",
        request.namespace.clone().unwrap_or_default(),
        name.unwrap_or_default()
    )
}

fn log(request: &AdmissionRequest<DynamicObject>, outcome: &Option<Outcome>, warnings: &[String]) {
    let pod = pod_name(request);
    match outcome {
        Some(Outcome::Injected {
            mechanism,
            sidecars,
            ..
        }) => {
            info!(pod, %mechanism, ?sidecars, dry_run = request.dry_run, "injected")
        }
        Some(Outcome::Refused(why)) => warn!(pod, dry_run = request.dry_run, "refused: {why}"),
        _ if !warnings.is_empty() => warn!(pod, ?warnings, "repaired"),
        _ => debug!(pod, "admitted unchanged"),
    }
}

/// A Warning Event about the refusal, on the Pod's owner (the Job, the ReplicaSet, ...): the
/// Pod has no UID yet. A bare Pod gets it under its own name.
async fn refusal_event(reviewer: &Reviewer, request: &AdmissionRequest<DynamicObject>, why: &str) {
    let Some(object) = request.object.as_ref() else {
        return;
    };
    let namespace = request.namespace.clone();
    let owner = object
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.first());
    let regarding = match owner {
        Some(o) => k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(o.api_version.clone()),
            kind: Some(o.kind.clone()),
            name: Some(o.name.clone()),
            uid: Some(o.uid.clone()),
            namespace,
            ..Default::default()
        },
        None => k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: object
                .metadata
                .name
                .clone()
                .or_else(|| object.metadata.generate_name.clone()),
            namespace,
            ..Default::default()
        },
    };
    let event = Event {
        type_: EventType::Warning,
        reason: "InjectRefused".into(),
        note: Some(format!("pod {}: {why}", pod_name(request))),
        action: "Inject".into(),
        secondary: None,
    };
    if let Err(e) = reviewer.recorder.publish(&event, &regarding).await {
        warn!("cannot publish the refusal event (RBAC: events.k8s.io events create/patch): {e}");
    }
}

impl Reviewer {
    /// The images `wrap` would need for this Pod, from the cache or looked up now (with the
    /// Pod's pull Secrets, if `--image-pull-secrets`: then cached per namespace and Secrets).
    async fn resolver(&self, pod: &Value, namespace: &str, options: &Options) -> Looked {
        let needed = entrypoints_needed(pod, options);
        if needed.is_empty() {
            return Looked::default();
        }
        let secrets = match &self.pull_secrets {
            Some(client) => read_pull_secrets(client, namespace, pod).await,
            None => vec![],
        };
        let scope: Vec<&str> = secrets.iter().map(|(n, _)| n.as_str()).collect();
        let key = |image: &str| format!("{}|{image}", scope.join(","));
        let mut known = BTreeMap::new();
        let mut missing = vec![];
        {
            let cache = self.lookups.lock().expect("poisoned");
            for image in needed {
                match cache.get(&key(&image)) {
                    Some((at, r)) if at.elapsed() < ttl(r) => {
                        known.insert(image, r.clone());
                    }
                    _ => missing.push(image),
                }
            }
        }
        if !missing.is_empty() {
            let opts = RegistryOpts {
                pull_secrets: secrets.clone(),
                ..self.registry.clone()
            };
            let looked = lookup_all(&missing, &opts).await;
            let mut cache = self.lookups.lock().expect("poisoned");
            if cache.len() > 4096 {
                cache.retain(|_, (at, r)| at.elapsed() < ttl(r));
            }
            for (image, r) in looked {
                cache.insert(key(&image), (Instant::now(), r.clone()));
                known.insert(image, r);
            }
        }
        Looked(known)
    }
}

/// The docker configs of the Pod's `imagePullSecrets` (those of its ServiceAccount are in
/// the list already: the API server's ServiceAccount admission runs before webhooks). A
/// Secret that cannot be read is skipped, with a warning naming the RBAC it needs.
async fn read_pull_secrets(
    client: &kube::Client,
    namespace: &str,
    pod: &Value,
) -> Vec<(String, String)> {
    let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), namespace);
    let mut found = vec![];
    for name in pod["spec"]["imagePullSecrets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["name"].as_str())
    {
        let label = format!("Secret {namespace}/{name}");
        match api.get_opt(name).await {
            Ok(Some(secret)) => {
                let data = secret.data.unwrap_or_default();
                let config = data
                    .get(".dockerconfigjson")
                    .or_else(|| data.get(".dockercfg"));
                if let Some(text) = config.and_then(|b| String::from_utf8(b.0.clone()).ok()) {
                    found.push((label, text));
                }
            }
            Ok(None) => debug!("image pull {label} does not exist"),
            Err(e) => warn!(
                "cannot read image pull {label} ({e}); RBAC: secrets get (--image-pull-secrets)"
            ),
        }
    }
    found
}

fn ttl(r: &Result<ImageCommand, Unresolved>) -> Duration {
    if r.is_ok() {
        LOOKUP_TTL
    } else {
        FAILED_LOOKUP_TTL
    }
}
