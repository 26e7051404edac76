//! The SidecarTerminator's decision, as a pure function of one Pod object: which sidecars to
//! swap to which quick-exit image, and which swaps to refuse (and why). No I/O here; the
//! reconciler (`reconcile.rs`) carries the decision out.
//!
//! Markers (OpenKruise-compatible): a container in `spec.containers` is a sidecar if its env
//! has `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true` (case-insensitive) or a non-empty
//! `KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE`; every other container in
//! `spec.containers` is a main. Init containers (including native sidecars) are neither.

use std::collections::BTreeMap;

use crate::shared::pod::{Container, ContainerStatus, Pod};

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
            Reason::QuickExitStalled => "QuickExitStalled",
            Reason::QuickExitFailed => "QuickExitFailed",
            Reason::SwapFailed => "SwapFailed",
        }
    }

    /// A sidecar refused for this reason keeps running, and so keeps the pod alive: then
    /// no other sidecar of the pod is swapped either (all or nothing).
    fn keeps_a_sidecar_running(self) -> bool {
        matches!(
            self,
            Reason::SwapRefusedNoImage
                | Reason::SwapRefusedCommand
                | Reason::SwapRefusedPostStart
                | Reason::SwapRefusedOS
                | Reason::SwapRefusedSameImage
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
    fn new(container: &str, reason: Reason, message: String) -> Self {
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

/// The pod is Running (the only phase in which this controller may have to act).
pub fn is_running(pod: &Pod) -> bool {
    phase(pod) == "Running"
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
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

fn status<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_deref()?
        .iter()
        .find(|s| s.name == name)
}

fn terminated_code(s: Option<&ContainerStatus>) -> Option<i32> {
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

/// Decide what to do with `pod`. `default_image` is the controller's quick-exit image
/// (`--quick-exit-image`), used for sidecars that do not name their own.
pub fn decide(pod: &Pod, default_image: Option<&str>) -> Decision {
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
            false => unswapped_sidecar(pod, c, default_image),
        })
        .collect();
    combine(verdicts)
}

/// Why this controller has nothing to do with the pod, if so.
fn not_for_us(pod: &Pod, sidecars: &[&Container]) -> Option<String> {
    if sidecars.is_empty() {
        return Some("no container carries a sidecar marker".into());
    }
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

fn restart_policy(pod: &Pod) -> &str {
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
fn mains_not_done(pod: &Pod, mains: &[&Container]) -> Option<String> {
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
enum Verdict {
    Swap(Swap),
    Problem(Refusal),
    /// Swapped before; its replacement has not ended yet.
    BeingReplaced(String),
    /// Terminated, or swapped and ended: nothing to do.
    Over,
}

/// A sidecar swapped before: never swap it again; watch that the replacement actually ends.
fn swapped_sidecar(pod: &Pod, c: &Container) -> Verdict {
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
fn unswapped_sidecar(pod: &Pod, c: &Container, default_image: Option<&str>) -> Verdict {
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
mod tests {
    use super::*;
    use serde_json::json;

    /// A container spec: (name, marker env) with optional extras merged in.
    fn container(
        name: &str,
        marker: Option<(&str, &str)>,
        extra: serde_json::Value,
    ) -> serde_json::Value {
        let mut c = json!({"name": name, "image": format!("img/{name}:1")});
        if let Some((k, v)) = marker {
            c["env"] = json!([{"name": k, "value": v}]);
        }
        if let serde_json::Value::Object(m) = extra {
            for (k, v) in m {
                c[k] = v;
            }
        }
        c
    }

    fn state(s: &str) -> serde_json::Value {
        match s {
            "running" => json!({"running": {"startedAt": "2026-01-01T00:00:00Z"}}),
            "waiting" => json!({"waiting": {"reason": "ContainerCreating"}}),
            "pullbackoff" => {
                json!({"waiting": {"reason": "ImagePullBackOff", "message": "not found"}})
            }
            code => json!({"terminated": {"exitCode": code.parse::<i32>().unwrap()}}),
        }
    }

    /// A pod: restart policy, phase, containers, and states by container name.
    fn pod(
        policy: &str,
        phase: &str,
        containers: Vec<serde_json::Value>,
        states: &[(&str, &str)],
    ) -> Pod {
        let statuses: Vec<_> = states
            .iter()
            .map(|(n, s)| {
                let image = containers
                    .iter()
                    .find(|c| c["name"] == *n)
                    .map(|c| c["image"].clone())
                    .unwrap_or(json!("x"));
                json!({"name": n, "image": image, "imageID": "", "ready": false, "restartCount": 0, "state": state(s)})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "42"},
            "spec": {"restartPolicy": policy, "containers": containers},
            "status": {"phase": phase, "containerStatuses": statuses},
        }))
        .unwrap()
    }

    const Q: Option<&str> = Some("sexton-quick-exit:1");
    const SIDE: Option<(&str, &str)> = Some((ENV_SIDECAR, "true"));

    fn main_and_sidecar(policy: &str, main: &str, side: &str) -> Pod {
        pod(
            policy,
            "Running",
            vec![
                container("main", None, json!({})),
                container("proxy", SIDE, json!({})),
            ],
            &[("main", main), ("proxy", side)],
        )
    }

    /// The problems of a decision that must act without swapping anything.
    fn only_problems(d: Decision) -> Vec<Refusal> {
        match d {
            Decision::Act { swaps, problems } => {
                assert!(swaps.is_empty(), "must not swap: {swaps:?}");
                problems
            }
            other => panic!("expected problems, got {other:?}"),
        }
    }

    fn swap_of(d: &Decision) -> Vec<String> {
        match d {
            Decision::Act { swaps, .. } => swaps
                .iter()
                .map(|s| format!("{}->{}", s.container, s.to))
                .collect(),
            _ => vec![],
        }
    }

    #[test]
    fn policy_by_main_state_by_sidecar_state() {
        // (policy, main, sidecar, expected: "swap" | "wait" | "done")
        let table = [
            ("Never", "running", "running", "wait"),
            ("Never", "0", "running", "swap"),
            ("Never", "1", "running", "swap"),
            ("Never", "137", "running", "swap"),
            ("Never", "0", "0", "done"),
            ("Never", "1", "2", "done"),
            ("OnFailure", "running", "running", "wait"),
            ("OnFailure", "0", "running", "swap"),
            ("OnFailure", "1", "running", "wait"),
            ("OnFailure", "0", "0", "done"),
            ("OnFailure", "1", "0", "wait"),
            ("Never", "waiting", "running", "wait"),
        ];
        for (policy, main, side, want) in table {
            let d = decide(&main_and_sidecar(policy, main, side), Q);
            let got = match &d {
                Decision::Act { swaps, problems } if !swaps.is_empty() && problems.is_empty() => {
                    "swap"
                }
                Decision::Wait(_) => "wait",
                Decision::Done(_) => "done",
                other => panic!("{policy} {main} {side}: unexpected {other:?}"),
            };
            assert_eq!(got, want, "{policy} main={main} sidecar={side}: {d:?}");
        }
    }

    #[test]
    fn ignored_pods() {
        let cases = [
            (
                main_and_sidecar("Always", "0", "running"),
                "restartPolicy Always",
            ),
            (
                pod(
                    "Never",
                    "Pending",
                    vec![
                        container("main", None, json!({})),
                        container("proxy", SIDE, json!({})),
                    ],
                    &[],
                ),
                "phase Pending",
            ),
            (
                pod(
                    "Never",
                    "Running",
                    vec![
                        container("main", None, json!({})),
                        container("proxy", None, json!({})),
                    ],
                    &[("main", "0"), ("proxy", "running")],
                ),
                "no container carries",
            ),
            (
                pod(
                    "Never",
                    "Running",
                    vec![
                        container("main", None, json!({})),
                        container("proxy", Some((ENV_SIDECAR, "yes")), json!({})),
                    ],
                    &[("main", "0"), ("proxy", "running")],
                ),
                "no container carries",
            ),
            (
                pod(
                    "Never",
                    "Running",
                    vec![
                        container("main", None, json!({})),
                        container("proxy", Some((ENV_SIDECAR_IMAGE, "")), json!({})),
                    ],
                    &[("main", "0"), ("proxy", "running")],
                ),
                "no container carries",
            ),
        ];
        for (p, want) in cases {
            match decide(&p, Q) {
                Decision::Ignore(why) => assert!(why.contains(want), "{why} should say {want}"),
                other => panic!("expected Ignore({want}), got {other:?}"),
            }
        }
        let mut deleting = main_and_sidecar("Never", "0", "running");
        deleting.metadata.deletion_timestamp =
            Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
        assert_eq!(
            decide(&deleting, Q),
            Decision::Ignore("pod is being deleted".into())
        );
    }

    #[test]
    fn marker_is_case_insensitive_and_init_containers_are_not_mains() {
        let mut p = pod(
            "Never",
            "Running",
            vec![
                container("main", None, json!({})),
                container("proxy", Some((ENV_SIDECAR, "TRUE")), json!({})),
            ],
            &[("main", "0"), ("proxy", "running")],
        );
        p.spec.as_mut().unwrap().init_containers = Some(vec![
            serde_json::from_value(json!({
                "name": "native", "image": "n", "restartPolicy": "Always"
            }))
            .unwrap(),
        ]);
        assert_eq!(swap_of(&decide(&p, Q)), ["proxy->sexton-quick-exit:1"]);
    }

    #[test]
    fn several_mains_and_sidecars() {
        let containers = vec![
            container("a", None, json!({})),
            container("b", None, json!({})),
            container("proxy", SIDE, json!({})),
            container(
                "logs",
                Some((ENV_SIDECAR_IMAGE, "busybox:quick")),
                json!({}),
            ),
            container("done", SIDE, json!({})),
        ];
        let states = |b: &'static str| {
            vec![
                ("a", "0"),
                ("b", b),
                ("proxy", "running"),
                ("logs", "running"),
                ("done", "0"),
            ]
        };
        let p = pod("Never", "Running", containers.clone(), &states("running"));
        assert!(matches!(decide(&p, Q), Decision::Wait(w) if w.contains("\"b\"")));
        let p = pod("Never", "Running", containers, &states("3"));
        assert_eq!(
            swap_of(&decide(&p, Q)),
            ["proxy->sexton-quick-exit:1", "logs->busybox:quick"],
            "user-named image wins over the default; a terminated sidecar is left alone"
        );
    }

    #[test]
    fn refusals_name_the_container_and_the_fix() {
        let with = |extra: serde_json::Value, marker, os: Option<&str>| {
            let mut p = pod(
                "Never",
                "Running",
                vec![
                    container("main", None, json!({})),
                    container("proxy", marker, extra),
                ],
                &[("main", "0"), ("proxy", "running")],
            );
            if let Some(os) = os {
                p.spec.as_mut().unwrap().os =
                    Some(serde_json::from_value(json!({"name": os})).unwrap());
            }
            p
        };
        let cases = [
            (
                with(json!({"command": ["envoy"]}), SIDE, None),
                Q,
                "SwapRefusedCommand",
            ),
            (
                with(
                    json!({"lifecycle": {"postStart": {"exec": {"command": ["x"]}}}}),
                    SIDE,
                    None,
                ),
                Q,
                "SwapRefusedPostStart",
            ),
            (with(json!({}), SIDE, Some("windows")), Q, "SwapRefusedOS"),
            (with(json!({}), SIDE, None), None, "SwapRefusedNoImage"),
            (
                with(json!({"image": "sexton-quick-exit:1"}), SIDE, None),
                Q,
                "SwapRefusedSameImage",
            ),
        ];
        for (p, image, reason) in cases {
            let problems = only_problems(decide(&p, image));
            assert_eq!(problems.len(), 1, "{reason}");
            assert_eq!(problems[0].reason.as_str(), reason);
            assert_eq!(problems[0].container, "proxy");
            assert!(
                problems[0].message.contains("\"proxy\""),
                "{}",
                problems[0].message
            );
        }
        // A user-named image lifts the default-image checks: the user vouches for it.
        let p = with(
            json!({"command": ["envoy"], "lifecycle": {"postStart": {"exec": {"command": ["x"]}}}}),
            Some((ENV_SIDECAR_IMAGE, "envoy-quick:1")),
            Some("windows"),
        );
        assert_eq!(swap_of(&decide(&p, Q)), ["proxy->envoy-quick:1"]);
    }

    #[test]
    fn all_or_nothing_when_one_sidecar_is_refused() {
        let p = pod(
            "Never",
            "Running",
            vec![
                container("main", None, json!({})),
                container("proxy", SIDE, json!({"command": ["envoy"]})),
                container("logs", SIDE, json!({})),
            ],
            &[("main", "0"), ("proxy", "running"), ("logs", "running")],
        );
        let problems = only_problems(decide(&p, Q));
        assert_eq!(problems[0].reason, Reason::SwapRefusedCommand);
        // Once the refused sidecar has ended (say, by hand), the others are swapped.
        let p = pod(
            "Never",
            "Running",
            vec![
                container("main", None, json!({})),
                container("proxy", SIDE, json!({"command": ["envoy"]})),
                container("logs", SIDE, json!({})),
            ],
            &[("main", "0"), ("proxy", "143"), ("logs", "running")],
        );
        assert_eq!(swap_of(&decide(&p, Q)), ["logs->sexton-quick-exit:1"]);
    }

    #[test]
    fn every_container_marked_is_reported() {
        let p = pod(
            "Never",
            "Running",
            vec![container("proxy", SIDE, json!({}))],
            &[("proxy", "running")],
        );
        let problems = only_problems(decide(&p, Q));
        assert_eq!(problems[0].reason, Reason::NoMainContainer);
    }

    #[test]
    fn a_waiting_sidecar_is_swapped_too() {
        for state in ["pullbackoff", "waiting"] {
            let p = main_and_sidecar("Never", "0", state);
            match decide(&p, Q) {
                Decision::Act { swaps, problems } => {
                    assert!(problems.is_empty(), "{problems:?}");
                    assert_eq!(swaps[0].to, Q.unwrap());
                    assert!(swaps[0].waiting.is_some(), "{state}");
                }
                other => panic!("{state}: {other:?}"),
            }
        }
        // not while the main runs
        assert!(matches!(
            decide(&main_and_sidecar("Never", "running", "pullbackoff"), Q),
            Decision::Wait(_)
        ));
    }

    #[test]
    fn ignore_exit_code_that_cannot_be_honoured_is_reported() {
        let p = pod(
            "Never",
            "Running",
            vec![
                container("main", None, json!({})),
                container(
                    "proxy",
                    SIDE,
                    json!({"env": [{"name": ENV_SIDECAR, "value": "true"},
                    {"name": ENV_SIDECAR_IGNORE_EXIT_CODE, "value": "true"}]}),
                ),
            ],
            &[("main", "0"), ("proxy", "2")],
        );
        let problems = only_problems(decide(&p, Q));
        assert_eq!(problems[0].reason, Reason::IgnoreExitCodeNotHonoured);
        // exited 0: nothing to honour
        let fine = pod(
            "Never",
            "Running",
            vec![
                container("main", None, json!({})),
                container(
                    "proxy",
                    SIDE,
                    json!({"env": [{"name": ENV_SIDECAR, "value": "true"},
                {"name": ENV_SIDECAR_IGNORE_EXIT_CODE, "value": "true"}]}),
                ),
            ],
            &[("main", "0"), ("proxy", "0")],
        );
        assert!(matches!(decide(&fine, Q), Decision::Done(_)));
    }

    /// Apply a swap patch the way the API server would (for what the decision reads).
    fn apply(p: &Pod, swaps: &[Swap]) -> Pod {
        let patch = swap_patch(p, swaps);
        let mut v = serde_json::to_value(p).unwrap();
        v["metadata"]["annotations"] = patch["metadata"]["annotations"].clone();
        for s in swaps {
            for c in v["spec"]["containers"].as_array_mut().unwrap() {
                if c["name"] == s.container {
                    c["image"] = json!(s.to);
                }
            }
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn never_swaps_twice() {
        let p = main_and_sidecar("Never", "0", "running");
        let Decision::Act { swaps, .. } = decide(&p, Q) else {
            panic!()
        };
        let patch = swap_patch(&p, &swaps);
        assert_eq!(patch["metadata"]["resourceVersion"], "42");
        assert_eq!(
            patch["spec"]["containers"],
            json!([{"name": "proxy", "image": "sexton-quick-exit:1"}])
        );
        assert_eq!(
            patch["metadata"]["annotations"][ANNOTATION_SWAPPED],
            json!(r#"{"proxy":"img/proxy:1"}"#)
        );
        let after = apply(&p, &swaps);
        // The old container still runs until the kubelet acts: nothing more to do.
        assert!(matches!(decide(&after, Q), Decision::Done(w) if w.contains("being replaced")));
        // Even if someone puts the old image back, the annotation prevents a second swap.
        let mut reverted = after.clone();
        reverted.spec.as_mut().unwrap().containers[1].image = Some("img/proxy:1".into());
        assert!(matches!(decide(&reverted, Q), Decision::Done(_)));
    }

    #[test]
    fn swapped_sidecar_that_cannot_start_or_fails_is_reported() {
        let p = main_and_sidecar("Never", "0", "running");
        let Decision::Act { swaps, .. } = decide(&p, Q) else {
            panic!()
        };
        let mut stalled = apply(&p, &swaps);
        stalled
            .status
            .as_mut()
            .unwrap()
            .container_statuses
            .as_mut()
            .unwrap()[1]
            .state = Some(serde_json::from_value(state("pullbackoff")).unwrap());
        let problems = only_problems(decide(&stalled, Q));
        assert_eq!(problems[0].reason, Reason::QuickExitStalled);
        let mut failed = apply(&p, &swaps);
        let st = &mut failed
            .status
            .as_mut()
            .unwrap()
            .container_statuses
            .as_mut()
            .unwrap()[1];
        st.state = Some(serde_json::from_value(state("128")).unwrap());
        st.image = "sexton-quick-exit:1".into();
        match decide(&failed, Q) {
            Decision::Act { problems, .. } => {
                assert_eq!(problems[0].reason, Reason::QuickExitFailed)
            }
            other => panic!("{other:?}"),
        }
        // The old container's own exit code (143 after SIGTERM) is not the replacement's.
        let mut old_exit = apply(&p, &swaps);
        old_exit
            .status
            .as_mut()
            .unwrap()
            .container_statuses
            .as_mut()
            .unwrap()[1]
            .state = Some(serde_json::from_value(state("143")).unwrap());
        assert!(matches!(decide(&old_exit, Q), Decision::Done(_)));
    }
}
