//! `POST /mutate` (and `/mutate/annotated`): one AdmissionReview (`admission.k8s.io/v1`) for one Pod: the images
//! `wrap` needs looked up (cached), sexton-inject's decision, the answer (a JSON patch and
//! warnings), an Event for a refusal, metrics. Anything unexpected admits the Pod unchanged:
//! the webhook must never be why a Pod cannot be created.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::core::admission::Operation;
use kube::runtime::events::{EventType, Recorder};
use serde_json::Value;
use sexton_inject::{
    ANNOTATION_INJECT, Admission, ImageCommand, Options, Outcome, Report, Resolve, Scope,
    Unresolved, admit,
};
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, info, warn};

use super::answer::{Answer, Request, Review};
use super::events::{owner_event, refusal_owner};
use super::limits::{
    Kind, Pools, Room, TURN_WAIT, beyond_limits, echoed_too_long, escaped, patch_too_large,
    read_body,
};
use super::metrics::WebhookMetrics;
use super::sending::Reply;
use crate::shared::registry::{RegistryOpts, lookup_all};

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
    /// Reads the owners of refused Pods (an Event is only about one that exists).
    pub client: kube::Client,
    lookups: Mutex<HashMap<String, (Instant, Lookup)>>,
    /// The Pods' turns and budgets.
    reviews: Pools,
    /// The EphemeralJob requester's stamps' own (a stamp must not wait behind Pods, or the
    /// EphemeralJob would go unstamped and be refused).
    pub stamps: Pools,
}

/// A review taken: its body, what the body holds of the budget (to be given back once it
/// is parsed), its turn, and where its answer goes.
pub struct Taken {
    pub body: axum::body::Bytes,
    pub room: Room,
    pub turn: Arc<Turn>,
    pub reply: Reply,
}

/// One of the turns. Moved into any work that outlives the request (a blocking thread goes
/// on when the client gives up; the turn must go on with it, or each reset HTTP/2 stream
/// would start one more injection beside the turns).
pub struct Turn {
    _review: OwnedSemaphorePermit,
}

impl Reviewer {
    /// The review's body, read within the limits, the `pools`' budget and its client's share
    /// of it (if it has one), then one of the `pools`' turns (waited for at most
    /// `limits::TURN_WAIT`); or the answer that refuses it.
    pub async fn take(
        &self,
        request: axum::extract::Request,
        pools: &Pools,
    ) -> Result<Taken, Response> {
        let (parts, body) = request.into_parts();
        let reply = Reply::of(&parts.extensions, pools.kind);
        let (body, room) =
            match read_body(&parts.headers, body, &pools.budget, reply.client()).await {
                Ok(read) => read,
                Err(refused) => {
                    self.metrics.reviewed("refused-body", Duration::ZERO);
                    return Err(reply.refusal(&refused));
                }
            };
        let Ok(review) = tokio::time::timeout(TURN_WAIT, pools.turns.clone().acquire_owned()).await
        else {
            self.metrics.reviewed("refused-body", Duration::ZERO);
            let why = format!("no turn within {}s; try again\n", TURN_WAIT.as_secs());
            return Err((StatusCode::SERVICE_UNAVAILABLE, why).into_response());
        };
        let turn = Turn {
            _review: review.expect("never closed"),
        };
        Ok(Taken {
            body,
            room,
            turn: Arc::new(turn),
            reply,
        })
    }
}

impl Reviewer {
    pub fn new(
        options: Options,
        registry: RegistryOpts,
        recorder: Recorder,
        metrics: Arc<WebhookMetrics>,
        pull_secrets: Option<kube::Client>,
        client: kube::Client,
    ) -> Self {
        Reviewer {
            options: Mutex::new(options),
            registry,
            recorder,
            metrics,
            pull_secrets,
            client,
            lookups: Mutex::default(),
            reviews: Pools::new(Kind::Pods),
            stamps: Pools::new(Kind::Stamps),
        }
    }
}

/// `POST /mutate`: Pods of namespaces labelled `sexton.dev/inject=enabled`.
pub async fn mutate(
    State(reviewer): State<Arc<Reviewer>>,
    request: axum::extract::Request,
) -> Response {
    answer(reviewer, Scope::Namespace, request).await
}

/// `POST /mutate/annotated`: Pods of other namespaces (only those whose annotation asks).
pub async fn mutate_annotated(
    State(reviewer): State<Arc<Reviewer>>,
    request: axum::extract::Request,
) -> Response {
    answer(reviewer, Scope::Annotation, request).await
}

/// Never an HTTP error for a well-formed review within the limits.
async fn answer(
    reviewer: Arc<Reviewer>,
    scope: Scope,
    request: axum::extract::Request,
) -> Response {
    let Taken {
        body,
        room,
        turn,
        reply,
    } = match reviewer.take(request, &reviewer.reviews).await {
        Ok(taken) => taken,
        Err(refused) => return refused,
    };
    // (the turn is held until the answer is built, encoding the patch is work too, and has
    // its room, into which the body's is carried over: answers waiting for room are then no
    // more than the turns)
    let answer = reviewed(reviewer.clone(), scope, body, turn.clone()).await;
    let sent = reply.send(answer, &reviewer.reviews.answers, room).await;
    drop(turn);
    sent
}

/// The answer to a review whose body was read and which has its turn.
async fn reviewed(
    reviewer: Arc<Reviewer>,
    scope: Scope,
    body: axum::body::Bytes,
    turn: Arc<Turn>,
) -> Response {
    let started = Instant::now();
    let mut review: Review = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("not an AdmissionReview: {e}"),
            )
                .into_response();
        }
    };
    let bytes = body.len();
    // (parsed: the turns bound what it takes from here; its room is kept for the answer)
    drop(body);
    let Some(mut request) = review.request.take() else {
        return (
            StatusCode::BAD_REQUEST,
            "no request in the AdmissionReview".to_string(),
        )
            .into_response();
    };
    if let Some(why) = echoed_too_long(&review.api_version, &review.kind, &request.uid) {
        return (StatusCode::BAD_REQUEST, why).into_response();
    }
    let pod = request.object.take();
    let allowed = Answer::allowed(&review, &request);
    let (answer, result) = review_pod(&reviewer, &request, allowed, pod, scope, bytes, turn).await;
    reviewer.metrics.reviewed(result, started.elapsed());
    answer.into_response()
}

/// The answer for one request, and its result label.
async fn review_pod(
    reviewer: &Arc<Reviewer>,
    request: &Request,
    allowed: Answer,
    pod: Option<Value>,
    scope: Scope,
    bytes: usize,
    turn: Arc<Turn>,
) -> (Answer, &'static str) {
    let Some(pod) = pod.filter(|_| is_pod_create(request)) else {
        return (allowed, "skipped");
    };
    let name = pod_name(request, &pod);
    let owner = refusal_owner(&pod);
    let options = reviewer.options.lock().expect("poisoned").clone();
    let namespace = request.namespace.clone().unwrap_or_default();
    let admission = match beyond_limits(&pod) {
        Some(why) if in_scope(&pod, scope) => refused(why),
        _ => injected_once(reviewer, pod, scope, options, namespace, bytes, turn).await,
    };
    let result = result_label(&admission);
    log(request, &name, &admission.outcome, &admission.warnings);
    if !request.dry_run {
        tell_owner(reviewer, request, owner, &name, &admission.outcome).await;
    }
    answer_with(allowed, admission, &name, result)
}

/// The metrics' label of an admission's result.
fn result_label(admission: &Admission) -> &'static str {
    match &admission.outcome {
        None if admission.patch.is_empty() => "unchanged",
        None => "repaired",
        Some(Outcome::Injected { .. }) => "injected",
        Some(Outcome::Refused(_)) => "refused",
        Some(_) => "unchanged",
    }
}

/// An Event on the Pod's owner where its author should know: a refusal, or the vendors'
/// sidecars sexton recognised and how they end.
async fn tell_owner(
    reviewer: &Reviewer,
    request: &Request,
    owner: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference>,
    name: &str,
    outcome: &Option<Outcome>,
) {
    let (kind, reason, note) = match outcome {
        Some(Outcome::Refused(why)) => (
            EventType::Warning,
            "InjectRefused",
            format!("pod {name}: {why}"),
        ),
        // one note per Job, whatever its Pod's name, so that the recorder counts them as one
        // series
        Some(o @ Outcome::Injected { recognised, .. }) if !recognised.is_empty() => {
            let report = Report {
                resource: "pods".into(),
                outcome: o.clone(),
            };
            (EventType::Normal, "SidecarsRecognised", report.to_string())
        }
        _ => return,
    };
    owner_event(
        &reviewer.client,
        &reviewer.recorder,
        request,
        owner,
        kind,
        reason,
        &note,
    )
    .await;
}

/// The answer carrying the admission's warnings and patch; the Pod admitted unchanged where
/// the encoded patch (what the API server would receive) is over the limit or cannot be made.
fn answer_with(
    allowed: Answer,
    admission: Admission,
    name: &str,
    result: &'static str,
) -> (Answer, &'static str) {
    let mut answer = allowed;
    answer.warnings = admission.warnings;
    if admission.patch.is_empty() {
        return (answer, result);
    }
    match serde_json::to_vec(&admission.patch) {
        Ok(ops) => match patch_too_large(ops.len()) {
            Some(why) => {
                warn!(pod = escaped(name, 512), "refused: {why}");
                let mut unchanged = answer.unchanged();
                unchanged.warnings = vec![format!("sexton: pod admitted unchanged: {why}")];
                (unchanged, "refused")
            }
            None => (answer.with_patch(ops), result),
        },
        Err(e) => {
            warn!("cannot encode the patch ({e}); admitting unchanged");
            let mut unchanged = answer.unchanged();
            unchanged.warnings.clear();
            (unchanged, "error")
        }
    }
}

/// Whether `admit` would look at the Pod at all (the limits apply only to those).
fn in_scope(pod: &Value, scope: Scope) -> bool {
    let asked = pod["metadata"]["annotations"][ANNOTATION_INJECT].as_str();
    !(asked.is_some_and(|a| a.trim().eq_ignore_ascii_case("disabled"))
        || (scope == Scope::Annotation && asked.is_none()))
}

/// The Pod admitted unchanged for `why`, with the warning `admit` gives for a refusal.
fn refused(why: String) -> Admission {
    Admission {
        patch: json_patch::Patch(vec![]),
        warnings: vec![format!("sexton: pod admitted unchanged: {why}")],
        outcome: Some(Outcome::Refused(why)),
    }
}

/// Reviews of at most this many bytes are injected on the async worker that read them when
/// every image `wrap` needs is cached (the usual case: a fraction of a millisecond of work,
/// where handing it to another thread adds a wake-up on a busy machine); larger ones, and
/// those that need a lookup, on a blocking thread.
const INLINE_BYTES: usize = 64 << 10;

/// sexton-inject's decision: on this worker when the review is small and needs no lookup;
/// else (or when that first attempt asked for an image not cached, its result dropped) off
/// the async workers (it is CPU work on a tree of up to the body limit), with the images
/// `wrap` needs looked up as it asks for them.
async fn injected_once(
    reviewer: &Arc<Reviewer>,
    pod: Value,
    scope: Scope,
    options: Options,
    namespace: String,
    bytes: usize,
    turn: Arc<Turn>,
) -> Admission {
    if bytes <= INLINE_BYTES {
        let cached = CachedOnly {
            reviewer,
            missed: std::cell::Cell::new(false),
        };
        let admission = admit(&pod, scope, &options, &cached);
        if !cached.missed.get() {
            return admission;
        }
    }
    let resolver = LazyLookup {
        reviewer: reviewer.clone(),
        runtime: tokio::runtime::Handle::current(),
        namespace,
        pod_secrets: pod["spec"]["imagePullSecrets"].clone(),
        secrets: std::sync::OnceLock::new(),
    };
    let work = tokio::task::spawn_blocking(move || {
        // (the turn held until the work ends, even if the request is gone, and the Pod's
        // tree dropped before it)
        let admission = admit(&pod, scope, &options, &resolver);
        drop(pod);
        drop(turn);
        admission
    });
    match work.await {
        Ok(a) => a,
        Err(e) => {
            warn!("the injection failed ({e}); admitting unchanged");
            Admission::default()
        }
    }
}

fn is_pod_create(request: &Request) -> bool {
    request.kind.kind == "Pod"
        && request.kind.group.is_empty()
        && request.operation == Operation::Create
}

/// `namespace/name` (or `namespace/generateName` before the API server names the Pod).
fn pod_name(request: &Request, pod: &Value) -> String {
    let meta = &pod["metadata"];
    let name = meta["name"]
        .as_str()
        .or_else(|| meta["generateName"].as_str());
    format!(
        "{}/{}",
        request.namespace.as_deref().unwrap_or_default(),
        name.unwrap_or_default()
    )
}

fn log(request: &Request, pod: &str, outcome: &Option<Outcome>, warnings: &[String]) {
    match outcome {
        Some(Outcome::Injected {
            mechanism,
            sidecars,
            recognised,
            note,
            ..
        }) => {
            let vendors: Vec<&str> = recognised.iter().map(|r| r.vendor.as_str()).collect();
            // (the note says why `auto` did not take an earlier mechanism)
            let note = note.as_deref().map(|n| escaped(n, 1024));
            info!(pod, %mechanism, ?sidecars, ?vendors, ?note, dry_run = request.dry_run, "injected")
        }
        Some(Outcome::Refused(why)) => warn!(
            pod,
            dry_run = request.dry_run,
            "refused: {}",
            escaped(why, 1024)
        ),
        _ if !warnings.is_empty() => warn!(pod, ?warnings, "repaired"),
        _ => debug!(pod, "admitted unchanged"),
    }
}

impl Reviewer {
    /// A lookup still fresh in the cache.
    fn cached(&self, key: &str) -> Option<Lookup> {
        let cache = self.lookups.lock().expect("poisoned");
        let (at, r) = cache.get(key)?;
        (at.elapsed() < ttl(r)).then(|| r.clone())
    }
}

/// The lookups of the cache alone, from an async worker (which must not wait): a Pod
/// with no pull Secrets to read whose images are all cached is injected there; any other
/// lookup is `missed`, and the injection is done again on a blocking thread.
struct CachedOnly<'a> {
    reviewer: &'a Reviewer,
    missed: std::cell::Cell<bool>,
}

impl Resolve for CachedOnly<'_> {
    fn resolve(&self, image: &str) -> Lookup {
        let found = match self.reviewer.pull_secrets {
            // (the key LazyLookup uses when there are no pull Secrets to read)
            None => self.reviewer.cached(&format!("|{image}")),
            Some(_) => None,
        };
        found.unwrap_or_else(|| {
            self.missed.set(true);
            Err(Unresolved("not cached".into()))
        })
    }
}

/// The images' ENTRYPOINT and CMD as `wrap` asks for them, from the cache or looked up
/// then (with the Pod's pull Secrets, if `--image-pull-secrets`, read at the first lookup:
/// then cached per namespace and Secrets). Runs on a blocking thread: it waits for the
/// lookups on the runtime.
struct LazyLookup {
    reviewer: Arc<Reviewer>,
    runtime: tokio::runtime::Handle,
    namespace: String,
    pod_secrets: Value,
    secrets: std::sync::OnceLock<Vec<(String, String)>>,
}

impl Resolve for LazyLookup {
    fn resolve(&self, image: &str) -> Lookup {
        let secrets = self
            .secrets
            .get_or_init(|| match &self.reviewer.pull_secrets {
                Some(client) => self.runtime.block_on(read_pull_secrets(
                    client,
                    &self.namespace,
                    &self.pod_secrets,
                )),
                None => vec![],
            });
        let scope: Vec<&str> = secrets.iter().map(|(n, _)| n.as_str()).collect();
        let key = format!("{}|{image}", scope.join(","));
        if let Some(r) = self.reviewer.cached(&key) {
            return r;
        }
        let opts = RegistryOpts {
            pull_secrets: secrets.clone(),
            ..self.reviewer.registry.clone()
        };
        let looked = self
            .runtime
            .block_on(lookup_all(&[image.to_string()], &opts));
        let r = looked
            .into_values()
            .next()
            .unwrap_or_else(|| Err(Unresolved("not looked up".into())));
        let mut cache = self.reviewer.lookups.lock().expect("poisoned");
        if cache.len() > 4096 {
            cache.retain(|_, (at, r)| at.elapsed() < ttl(r));
        }
        cache.insert(key, (Instant::now(), r.clone()));
        r
    }
}

/// The docker configs of the Pod's `imagePullSecrets` (those of its ServiceAccount are in
/// the list already: the API server's ServiceAccount admission runs before webhooks). A
/// Secret that cannot be read is skipped, with a warning naming the RBAC it needs.
async fn read_pull_secrets(
    client: &kube::Client,
    namespace: &str,
    pull_secrets: &Value,
) -> Vec<(String, String)> {
    let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(client.clone(), namespace);
    let mut found = vec![];
    for name in pull_secrets
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
