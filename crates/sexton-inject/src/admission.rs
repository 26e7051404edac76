//! The admission webhook's decision for one Pod, pure: whether it is in scope, the
//! injection as a JSON patch, the repair of native sidecars that another webhook stripped,
//! and the warnings the user sees in `kubectl apply`.
//!
//! A Pod is injected at most once. When the API server calls the webhook again (reinvocation,
//! after a later webhook changed the Pod), the Pod already carries sexton's record: it is not
//! injected again (undoing and redoing would drop what the later webhook added to the same
//! fields), only repaired.

use serde_json::Value;

use crate::ANNOTATION_INJECT;
use crate::entrypoint::Resolve;
use crate::options::{Mechanism, Options};
use crate::record::{self, Record};
use crate::report::Outcome;
use crate::resource::inject_copy;
use crate::template::{Template, list, name};

/// Init containers that were native sidecars when sexton first saw the Pod, whoever made
/// them so: repaired like sexton's own if a later webhook strips their `restartPolicy`.
pub const ANNOTATION_NATIVE: &str = "sexton.dev/native-sidecars";

/// Why the webhook sees the Pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Its namespace is labelled `sexton.dev/inject=enabled`: every Pod, unless opted out.
    Namespace,
    /// Any other namespace: only Pods whose annotation `sexton.dev/inject` asks for it.
    Annotation,
}

/// What to answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Admission {
    /// RFC 6902 operations (empty: admit unchanged).
    pub patch: json_patch::Patch,
    /// Shown by kubectl as `Warning: ...`.
    pub warnings: Vec<String>,
    /// What was done (for logs, metrics and Events); `None` when the Pod is not in scope.
    pub outcome: Option<Outcome>,
}

/// The webhook's answer for `pod` (the AdmissionReview's object).
pub fn admit(pod: &Value, scope: Scope, opts: &Options, resolver: &dyn Resolve) -> Admission {
    let asked = pod["metadata"]["annotations"][ANNOTATION_INJECT].as_str();
    if asked.is_some_and(|a| a.trim().eq_ignore_ascii_case("disabled"))
        || (scope == Scope::Annotation && asked.is_none())
    {
        return Admission::default();
    }
    // The Pod as it is to be admitted: copied only once something is to change, so that a
    // Pod admitted unchanged costs no copy and no diff.
    let mut changed = None;
    let mut warnings = vec![];
    let outcome = match record::read_object(pod) {
        Some(Ok(r)) => {
            warnings.extend(repair(pod, &mut changed, Some(&r)));
            None
        }
        Some(Err(e)) => Some(Outcome::Refused(e.to_string())),
        None => {
            warnings.extend(repair(pod, &mut changed, None));
            let out = first_pass(pod, &mut changed, opts, resolver);
            match &out {
                Outcome::Refused(why) => {
                    warnings.push(format!("sexton: pod admitted unchanged: {why}"))
                }
                Outcome::Injected { caveats, .. } => {
                    warnings.extend(caveats.iter().map(|c| format!("sexton: {c}")))
                }
                _ => {}
            }
            Some(out)
        }
    };
    Admission {
        patch: match &changed {
            Some(changed) => json_patch::diff(pod, changed),
            None => json_patch::Patch::default(),
        },
        warnings,
        outcome,
    }
}

/// The Pod as changed so far (the one from the review until something changes).
fn current<'a>(pod: &'a Value, changed: &'a Option<Value>) -> &'a Value {
    changed.as_ref().unwrap_or(pod)
}

/// The Pod to change: the copy, made now if there is none yet.
fn edited<'a>(pod: &Value, changed: &'a mut Option<Value>) -> &'a mut Value {
    changed.get_or_insert_with(|| pod.clone())
}

/// The first time the webhook sees the Pod: the native sidecars it already has are noted
/// (to be repaired later), then it is injected.
fn first_pass(
    pod: &Value,
    changed: &mut Option<Value>,
    opts: &Options,
    resolver: &dyn Resolve,
) -> Outcome {
    let before = current(pod, changed);
    let native: Vec<String> = list(&before["spec"], "initContainers")
        .iter()
        .filter(|c| c["restartPolicy"] == "Always")
        .map(|c| name(c).to_string())
        .collect();
    let (injected, outcome) = inject_copy(before, opts, resolver);
    if injected.is_some() {
        *changed = injected;
    }
    if !native.is_empty() {
        Template(edited(pod, changed)).set_annotation(ANNOTATION_NATIVE, native.join(","));
    }
    outcome
}

/// Gives back `restartPolicy: Always` to the native sidecars that lost it: sexton's, those
/// noted on the first pass, and init containers with probes or lifecycle hooks (which only
/// a native sidecar may have); one warning per repair, and per sidecar that is gone.
fn repair(pod: &Value, changed: &mut Option<Value>, record: Option<&Record>) -> Vec<String> {
    let mut names: Vec<String> = record
        .filter(|r| matches!(r.mechanism, Mechanism::Native | Mechanism::NativeWrap))
        .map(|r| r.moved.iter().map(|m| m.name.clone()).collect())
        .unwrap_or_default();
    let before = current(pod, changed);
    let noted = before["metadata"]["annotations"][ANNOTATION_NATIVE]
        .as_str()
        .unwrap_or_default();
    for n in noted.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !names.iter().any(|x| x == n) {
            names.push(n.to_string());
        }
    }
    let mut warnings = vec![];
    for n in inferred_sidecars(before) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    for n in names {
        // (objects only: a forged review may have scalars in the list)
        let found = list(&current(pod, changed)["spec"], "initContainers")
            .iter()
            .position(|c| c.is_object() && name(c) == n);
        let Some(i) = found else {
            warnings.push(format!(
                "sexton: native sidecar {n:?} was removed from the pod by another mutating webhook; it cannot be restored"
            ));
            continue;
        };
        if current(pod, changed)["spec"]["initContainers"][i]["restartPolicy"] != "Always" {
            edited(pod, changed)["spec"]["initContainers"][i]["restartPolicy"] =
                Value::from("Always");
            warnings.push(format!(
                "sexton: restored restartPolicy: Always on native sidecar {n:?}, dropped by another mutating webhook (one built on an old k8s.io/api); without it the pod would never start its main containers, or be rejected"
            ));
        }
    }
    warnings
}

/// Init containers without `restartPolicy` that have what only a native sidecar may have
/// (probes, lifecycle hooks): a webhook that ran before sexton stripped them (the API
/// server would reject the pod as it is).
fn inferred_sidecars(pod: &Value) -> Vec<String> {
    pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["restartPolicy"].is_null())
        .filter(|c| {
            [
                "readinessProbe",
                "livenessProbe",
                "startupProbe",
                "lifecycle",
            ]
            .iter()
            .any(|k| !c[*k].is_null())
        })
        .map(|c| name(c).to_string())
        .collect()
}
