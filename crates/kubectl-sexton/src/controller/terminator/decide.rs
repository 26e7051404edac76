//! The SidecarTerminator's decision, as a pure function of one Pod object: which sidecars to
//! swap to which quick-exit image, and which swaps to refuse (and why). No I/O here; the
//! reconciler (`reconcile.rs`) carries the decision out.
//!
//! Markers (OpenKruise-compatible): a container in `spec.containers` is a sidecar if its env
//! has `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true` (case-insensitive) or a non-empty
//! `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE`; every other container in
//! `spec.containers` is a main. Init containers (including native sidecars) are neither.

use std::collections::BTreeMap;

use crate::shared::pod::{Container, ContainerStatus, Pod, is_running, phase};

pub use sexton_inject::{
    ENV_KRUISE_SIDECAR as ENV_SIDECAR, ENV_KRUISE_SIDECAR_IMAGE as ENV_SIDECAR_IMAGE,
};
/// Pod annotation recording the sidecars sexton swapped: a JSON object mapping container name
/// to the image it had before. It is written in the same patch as the image, so a swap is
/// never repeated, even by a restarted controller or after someone reverts the image.
pub const ANNOTATION_SWAPPED: &str = "sexton.dev/swapped-sidecars";

/// Waiting reasons of a swapped sidecar that mean the replacement will not start by itself.
const STALL_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "PreCreateHookError",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swap {
    pub container: String,
    pub from: String,
    pub to: String,
    /// The sidecar was not running but waiting (CrashLoopBackOff, ImagePullBackOff, ...): the
    /// kubelet starts the replacement instead, once its back-off allows.
    pub waiting: Option<String>,
}

/// Why the controller will not act on a sidecar (or what problem it sees): the reason of
/// the Warning event on the pod, and the `reason` label of `actions_total{action="refuse"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    NoMainContainer,
    IgnoreExitCodeNotHonoured,
    SwapRefusedNoImage,
    SwapRefusedCommand,
    SwapRefusedPostStart,
    SwapRefusedOS,
    SwapRefusedSameImage,
    SwapRefusedImageNotAllowed,
    QuickExitStalled,
    QuickExitFailed,
    SwapFailed,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NoMainContainer => "NoMainContainer",
            Reason::IgnoreExitCodeNotHonoured => "IgnoreExitCodeNotHonoured",
            Reason::SwapRefusedNoImage => "SwapRefusedNoImage",
            Reason::SwapRefusedCommand => "SwapRefusedCommand",
            Reason::SwapRefusedPostStart => "SwapRefusedPostStart",
            Reason::SwapRefusedOS => "SwapRefusedOS",
            Reason::SwapRefusedSameImage => "SwapRefusedSameImage",
            Reason::SwapRefusedImageNotAllowed => "SwapRefusedImageNotAllowed",
            Reason::QuickExitStalled => "QuickExitStalled",
            Reason::QuickExitFailed => "QuickExitFailed",
            Reason::SwapFailed => "SwapFailed",
        }
    }

    /// A swapped sidecar whose replacement cannot start: the pod waits for it.
    pub(crate) fn stalls(self) -> bool {
        self == Reason::QuickExitStalled
    }

    /// A sidecar refused for this reason keeps running, and so keeps the pod alive: then
    /// no other sidecar of the pod is swapped either (all or nothing).
    pub(crate) fn keeps_a_sidecar_running(self) -> bool {
        matches!(
            self,
            Reason::SwapRefusedNoImage
                | Reason::SwapRefusedCommand
                | Reason::SwapRefusedPostStart
                | Reason::SwapRefusedOS
                | Reason::SwapRefusedSameImage
                | Reason::SwapRefusedImageNotAllowed
        )
    }
}

/// Something the controller will not do (or a problem it sees), reported as a Warning event
/// on the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub container: String,
    pub reason: Reason,
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(container: &str, reason: Reason, message: String) -> Self {
        Refusal {
            container: container.into(),
            reason,
            message,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not a pod this controller acts on (no markers, not Running, being deleted, ...).
    Ignore(String),
    /// A pod with sidecars whose mains are not done yet.
    Wait(String),
    /// Mains are done. Swap these sidecars (all of them or, when anything is refused, none:
    /// half-stopping a pod's sidecars would not let it complete and only removes, say, its
    /// log shipper while its proxy keeps running). `problems` are reported either way.
    Act {
        swaps: Vec<Swap>,
        problems: Vec<Refusal>,
    },
    /// Mains are done and every sidecar has terminated or been swapped already.
    Done(String),
}

fn env_value<'a>(c: &'a Container, name: &str) -> Option<&'a str> {
    c.env
        .as_deref()?
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value.as_deref())
}

/// The image named by the container's own marker, if any.
pub fn named_image(c: &Container) -> Option<&str> {
    env_value(c, ENV_SIDECAR_IMAGE).filter(|v| !v.is_empty())
}

/// The marker rule `kubectl sexton inject` also reads sidecars by.
pub fn is_sidecar(c: &Container) -> bool {
    let env = c.env.as_deref().unwrap_or_default();
    sexton_inject::kruise_marked(env.iter().map(|e| (e.name.as_str(), e.value.as_deref())))
}

/// OpenKruise's third marker: the sidecar's exit code must not decide the pod's phase.
pub const ENV_SIDECAR_IGNORE_EXIT_CODE: &str = "KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE";

fn ignores_exit_code(c: &Container) -> bool {
    env_value(c, ENV_SIDECAR_IGNORE_EXIT_CODE).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The containers sexton swapped already, from the pod annotation (name → original image).
pub fn swapped(pod: &Pod) -> BTreeMap<String, String> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_SWAPPED))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

pub(crate) fn status<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_deref()?
        .iter()
        .find(|s| s.name == name)
}

pub(crate) fn terminated_code(s: Option<&ContainerStatus>) -> Option<i32> {
    s?.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code)
}

fn is_container_running(s: Option<&ContainerStatus>) -> bool {
    s.and_then(|s| s.state.as_ref())
        .is_some_and(|st| st.running.is_some())
}

fn waiting(s: Option<&ContainerStatus>) -> Option<(String, String)> {
    let w = s?.state.as_ref()?.waiting.as_ref()?;
    Some((
        w.reason.clone().unwrap_or_default(),
        w.message.clone().unwrap_or_default(),
    ))
}

/// Why the quick-exit image cannot replace this container without risking the pod's
/// success, when the image is sexton's default (the user named no image). With a user-named
/// image the user has vouched for it, so these checks do not apply.
fn default_image_refusal(pod: &Pod, c: &Container) -> Option<Refusal> {
    let spec = pod.spec.as_ref()?;
    let refuse = |reason, message| Some(Refusal::new(&c.name, reason, message));
    if c.command.as_ref().is_some_and(|v| !v.is_empty()) {
        return refuse(
            Reason::SwapRefusedCommand,
            format!(
                "sidecar {:?} sets `command`, which would not exist in the quick-exit image (the container would fail to start and fail the pod); set env {ENV_SIDECAR_IMAGE} on it to an image in which that command exits 0, or end the sidecar another way (sexton's in-pod supervisor)",
                c.name
            ),
        );
    }
    if c.lifecycle.as_ref().is_some_and(|l| l.post_start.is_some()) {
        return refuse(
            Reason::SwapRefusedPostStart,
            format!(
                "sidecar {:?} has a postStart hook; it would run against the quick-exit container, fail, and the kubelet would kill the container with a non-zero code (failing the pod); set env {ENV_SIDECAR_IMAGE} to an image in which the hook succeeds",
                c.name
            ),
        );
    }
    let os = spec.os.as_ref().map(|o| o.name.as_str());
    if os.is_some_and(|os| !os.eq_ignore_ascii_case("linux")) {
        return refuse(
            Reason::SwapRefusedOS,
            format!(
                "pod runs on {:?}, and the default quick-exit image is a Linux image; set env {ENV_SIDECAR_IMAGE} on sidecar {:?} to an image for that OS",
                os.unwrap_or_default(),
                c.name
            ),
        );
    }
    None
}

/// The images the controller may swap a sidecar to: the admin's quick-exit image
/// (`--quick-exit-image`), and the images sidecars name themselves only as far as the admin
/// allows (`--sidecar-allowed-images`). The swap is written under the controller's identity,
/// as an UPDATE: image policies that check only CREATE, or exempt the controller, would
/// never see an image the pod's author chose.
#[derive(Debug, Clone, Copy)]
pub struct Images<'a> {
    pub quick_exit: Option<&'a str>,
    pub named: Named<'a>,
}

/// Which images a sidecar may name in its marker.
#[derive(Debug, Clone, Copy)]
pub enum Named<'a> {
    /// Any image (`--sidecar-allowed-images='*'`).
    Any,
    /// Images starting with one of these prefixes (none: no named image at all).
    Prefixes(&'a [String]),
}

impl Named<'_> {
    fn allows(self, image: &str) -> bool {
        match self {
            Named::Any => true,
            Named::Prefixes(p) => p.iter().any(|p| image.starts_with(p.as_str())),
        }
    }
}

/// Decide what to do with `pod`, swapping only to `images`.
pub fn decide(pod: &Pod, images: Images) -> Decision {
    let default_image = images.quick_exit;
    let Some(spec) = pod.spec.as_ref() else {
        return Decision::Ignore("no spec".into());
    };
    let (sidecars, mains): (Vec<&Container>, Vec<&Container>) =
        spec.containers.iter().partition(|c| is_sidecar(c));
    if let Some(why) = not_for_us(pod, &sidecars) {
        return Decision::Ignore(why);
    }
    if mains.is_empty() {
        return no_main_container();
    }
    if let Some(why) = mains_not_done(pod, &mains) {
        return Decision::Wait(why);
    }
    let already = swapped(pod);
    let verdicts = sidecars
        .iter()
        .map(|c| match already.contains_key(&c.name) {
            true => swapped_sidecar(pod, c),
            false => unswapped_sidecar(pod, c, default_image, images.named),
        })
        .collect();
    combine(verdicts)
}

/// Why this controller has nothing to do with the pod, if so.
fn not_for_us(pod: &Pod, sidecars: &[&Container]) -> Option<String> {
    if sidecars.is_empty() {
        return Some("no container carries a sidecar marker".into());
    }
    not_a_running_job_pod(pod)
}

/// Why `pod` is not a Running Job-style pod not being deleted, if it is not: the only pods
/// whose sidecars the SidecarTerminator and the safety net end.
pub(crate) fn not_a_running_job_pod(pod: &Pod) -> Option<String> {
    if pod.metadata.deletion_timestamp.is_some() {
        return Some("pod is being deleted".into());
    }
    let policy = restart_policy(pod);
    if policy != "Never" && policy != "OnFailure" {
        return Some(format!(
            "restartPolicy {policy}: only Job-style pods (Never, OnFailure) complete"
        ));
    }
    (!is_running(pod)).then(|| format!("phase {}", phase(pod)))
}

pub(crate) fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

fn no_main_container() -> Decision {
    Decision::Act {
        swaps: vec![],
        problems: vec![Refusal::new(
            "",
            Reason::NoMainContainer,
            format!(
                "every container carries a sidecar marker, so there is no main container to wait for; remove {ENV_SIDECAR} from the main container"
            ),
        )],
    }
}

/// Why the mains are not done yet, if so: one is running or has not started, or (under
/// OnFailure) failed and will be restarted.
pub(crate) fn mains_not_done(pod: &Pod, mains: &[&Container]) -> Option<String> {
    for m in mains {
        let s = status(pod, &m.name);
        match terminated_code(s) {
            None => {
                let state = match is_container_running(s) {
                    true => "running",
                    false => "not started",
                };
                return Some(format!("main container {:?} is {state}", m.name));
            }
            Some(code) if code != 0 && restart_policy(pod) == "OnFailure" => {
                return Some(format!(
                    "main container {:?} exited with {code}; with restartPolicy OnFailure the kubelet restarts it",
                    m.name
                ));
            }
            Some(_) => {}
        }
    }
    None
}

/// What to do with one sidecar once the mains are done.
#[derive(Debug)]
pub(crate) enum Verdict {
    Swap(Swap),
    Problem(Refusal),
    /// Swapped before; its replacement has not ended yet.
    BeingReplaced(String),
    /// Terminated, or swapped and ended: nothing to do.
    Over,
}

/// A sidecar swapped before: never swap it again; watch that the replacement actually ends.
pub(crate) fn swapped_sidecar(pod: &Pod, c: &Container) -> Verdict {
    let s = status(pod, &c.name);
    let image = c.image.as_deref().unwrap_or_default();
    if let Some((reason, message)) = waiting(s).filter(|(r, _)| STALL_REASONS.contains(&r.as_str()))
    {
        return Verdict::Problem(Refusal::new(
            &c.name,
            Reason::QuickExitStalled,
            format!(
                "sidecar {:?} was swapped to {image:?} but cannot start: {reason} {message}; the pod will not complete until it does (is the image pullable from this node, and does the container's securityContext allow it to run?)",
                c.name
            ),
        ));
    }
    match terminated_code(s) {
        None => Verdict::BeingReplaced(c.name.clone()),
        Some(0) => Verdict::Over,
        // The replacement's own termination, not the old container's: the runtime reports
        // the image it ran (possibly normalized, e.g. with docker.io/).
        Some(code) if !image.is_empty() && s.is_some_and(|s| s.image.ends_with(image)) => {
            Verdict::Problem(Refusal::new(
                &c.name,
                Reason::QuickExitFailed,
                format!(
                    "the quick-exit replacement of sidecar {:?} ({image:?}) exited with {code} instead of 0; check that the image runs on this node's OS and architecture",
                    c.name
                ),
            ))
        }
        Some(_) => Verdict::Over,
    }
}

/// A sidecar not swapped yet: swap it if it runs and a safe quick-exit image is known.
pub(crate) fn unswapped_sidecar(
    pod: &Pod,
    c: &Container,
    default_image: Option<&str>,
    allowed: Named,
) -> Verdict {
    let s = status(pod, &c.name);
    let problem = |reason, message| Verdict::Problem(Refusal::new(&c.name, reason, message));
    match terminated_code(s) {
        Some(code) if code != 0 && ignores_exit_code(c) => {
            return problem(
                Reason::IgnoreExitCodeNotHonoured,
                format!(
                    "sidecar {:?} exited with {code} and carries {ENV_SIDECAR_IGNORE_EXIT_CODE}: OpenKruise would write the pod's phase from the mains alone, but sexton does not write pod phases (the kubelet's), so this pod ends Failed; make the sidecar exit 0 on SIGTERM, or let sexton end it (`kubectl sexton inject`: native sidecars or the supervisor)",
                    c.name
                ),
            );
        }
        Some(_) => return Verdict::Over,
        None => {}
    }
    // A sidecar that waits (CrashLoopBackOff, ImagePullBackOff, ContainerCreating) would keep
    // the pod alive forever: it is swapped too, and the kubelet starts the replacement.
    let waiting_for = (!is_container_running(s)).then(|| {
        let (reason, _) = waiting(s).unwrap_or_default();
        if reason.is_empty() {
            "no status".to_string()
        } else {
            reason
        }
    });
    let named = named_image(c);
    // The configured quick-exit image is the admin's own choice, named or not.
    if let Some(image) = named.filter(|i| Some(*i) != default_image && !allowed.allows(i)) {
        return problem(
            Reason::SwapRefusedImageNotAllowed,
            format!(
                "sidecar {:?} names {image:?} in {ENV_SIDECAR_IMAGE}, which the cluster admin does not allow (--sidecar-allowed-images); not swapping: remove the variable to get the quick-exit image, or ask for the image to be allowed",
                c.name
            ),
        );
    }
    let Some(target) = named.or(default_image).filter(|t| !t.is_empty()) else {
        return problem(
            Reason::SwapRefusedNoImage,
            format!(
                "sidecar {:?} names no quick-exit image and the controller has none (--quick-exit-image); set env {ENV_SIDECAR_IMAGE} on the container or start the controller with --quick-exit-image",
                c.name
            ),
        );
    };
    if named.is_none()
        && let Some(refusal) = default_image_refusal(pod, c)
    {
        return Verdict::Problem(refusal);
    }
    let from = c.image.clone().unwrap_or_default();
    if from == target {
        return problem(
            Reason::SwapRefusedSameImage,
            format!(
                "sidecar {:?} already runs {target:?}, the quick-exit image: changing nothing would not restart it; name a different image in {ENV_SIDECAR_IMAGE}",
                c.name
            ),
        );
    }
    Verdict::Swap(Swap {
        container: c.name.clone(),
        from,
        to: target.to_string(),
        waiting: waiting_for,
    })
}

/// The pod's decision from its sidecars' verdicts: all swaps or none.
fn combine(verdicts: Vec<Verdict>) -> Decision {
    let (mut swaps, mut problems, mut pending) = (vec![], vec![], vec![]);
    for v in verdicts {
        match v {
            Verdict::Swap(s) => swaps.push(s),
            Verdict::Problem(p) => problems.push(p),
            Verdict::BeingReplaced(name) => pending.push(name),
            Verdict::Over => {}
        }
    }
    if swaps.is_empty() && problems.is_empty() {
        return Decision::Done(if pending.is_empty() {
            "every sidecar has terminated".into()
        } else {
            format!("swapped sidecars {pending:?} are being replaced by the kubelet")
        });
    }
    // All or nothing: a refused running sidecar keeps the pod alive anyway.
    if problems.iter().any(|p| p.reason.keeps_a_sidecar_running()) {
        swaps.clear();
    }
    Decision::Act { swaps, problems }
}

/// The strategic-merge patch that swaps `swaps` in `pod`: only the image of each named
/// container, plus the annotation recording the swap, with the pod's resourceVersion as a
/// precondition (the API server answers 409 Conflict if the pod changed since it was read).
pub fn swap_patch(pod: &Pod, swaps: &[Swap]) -> serde_json::Value {
    let mut record = swapped(pod);
    for s in swaps {
        record.insert(s.container.clone(), s.from.clone());
    }
    let containers: Vec<_> = swaps
        .iter()
        .map(|s| serde_json::json!({"name": s.container, "image": s.to}))
        .collect();
    serde_json::json!({
        "metadata": {
            "resourceVersion": pod.metadata.resource_version,
            "annotations": {
                ANNOTATION_SWAPPED: serde_json::to_string(&record).expect("map of strings"),
            },
        },
        "spec": {"containers": containers},
    })
}

#[cfg(test)]
mod tests;
