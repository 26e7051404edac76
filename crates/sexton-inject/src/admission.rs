//! The admission webhook's decision for one Pod, pure: whether it is in scope, the
//! injection as a JSON patch, the repair of native sidecars that another webhook stripped,
//! and the warnings the user sees in `kubectl apply`.
//!
//! A Pod is injected at most once. When the API server calls the webhook again (reinvocation,
//! after a later webhook changed the Pod), the Pod already carries sexton's record: it is not
//! injected again (undoing and redoing would drop what the later webhook added to the same
//! fields); it is repaired, and the sidecars a later webhook added are ended by the
//! mechanism of the first pass (`extend.rs`).
//!
//! Before it answers, the webhook checks that the Pod it returns has no two containers of one
//! name (`spec.containers`, `initContainers`, `ephemeralContainers` together) that the Pod it
//! was given did not have: the API server would refuse it, and sexton must never be the
//! reason a Pod cannot be created. Such a change is dropped, with a warning.

use serde_json::Value;

use crate::choose::ANNOTATION_INJECT;
use crate::entrypoint::Resolve;
use crate::extend::{added, drop_copies, extend};
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
    let opts = &Options {
        at_admission: true,
        ..opts.clone()
    };
    // The Pod as it is to be admitted: copied only once something is to change, so that a
    // Pod admitted unchanged costs no copy and no diff.
    let mut changed = None;
    let mut warnings = vec![];
    let mut outcome = match record::read_object(pod) {
        Some(Ok(r)) if r.sidecars.is_empty() => {
            // set ahead of a vendor's webhook (`ahead.rs`) by `inject` on the template: the
            // annotations stay for that webhook; the Pod is injected as if first seen
            let mut p = pod.clone();
            Template(&mut p).remove_annotation(crate::record::ANNOTATION_INJECTED, r.absent);
            changed = Some(p);
            warnings.extend(repair(pod, &mut changed, None));
            let out = first_pass(pod, &mut changed, opts, resolver);
            warnings.extend(out_warnings(&out));
            Some(out)
        }
        Some(Ok(r)) => {
            warnings.extend(repair(pod, &mut changed, Some(&r)));
            again(pod, &mut changed, r, opts, resolver, &mut warnings)
        }
        Some(Err(e)) => Some(Outcome::Refused(e.to_string())),
        None => {
            warnings.extend(repair(pod, &mut changed, None));
            let out = first_pass(pod, &mut changed, opts, resolver);
            warnings.extend(out_warnings(&out));
            Some(out)
        }
    };
    if let Some(name) = changed.as_ref().and_then(|c| new_duplicate(pod, c)) {
        let why = format!(
            "the change would give the Pod two containers named {name:?}, which the API server refuses"
        );
        changed = None;
        warnings = vec![format!("sexton: pod admitted unchanged: {why}")];
        outcome = Some(Outcome::Refused(why));
    }
    Admission {
        patch: match &changed {
            Some(changed) => json_patch::diff(pod, changed),
            None => json_patch::Patch::default(),
        },
        warnings,
        outcome,
    }
}

/// A later time the webhook sees the Pod (its record is there): a second copy of a sidecar
/// sexton moved is dropped, and the sidecars added since are ended (`extend.rs`).
fn again(
    pod: &Value,
    changed: &mut Option<Value>,
    mut record: Record,
    opts: &Options,
    resolver: &dyn Resolve,
    warnings: &mut Vec<String>,
) -> Option<Outcome> {
    if has_copies(current(pod, changed), &record) {
        warnings.extend(drop_copies(&mut Template(edited(pod, changed)), &record));
    }
    if !has_unknown(current(pod, changed), &record) {
        return None;
    }
    let mut copy = current(pod, changed).clone();
    let mut t = Template(&mut copy);
    let new = added(&t, &record, opts)?;
    match extend(&mut t, &mut record, &new, opts, resolver) {
        Ok(()) => {
            record.resave(&mut t);
            warnings.extend(record.caveats.iter().map(|c| format!("sexton: {c}")));
            *changed = Some(copy);
            Some(Outcome::Injected {
                mechanism: record.mechanism,
                sidecars: new.sidecars,
                recognised: new.recognised,
                note: Some("added by a webhook after sexton's first pass".into()),
                caveats: record.caveats,
            })
        }
        Err(refusal) => {
            let why = format!(
                "sidecar(s) {} added by a webhook after sexton's first pass cannot be ended: {refusal}",
                new.sidecars.join(", ")
            );
            warnings.push(format!("sexton: {why}"));
            Some(Outcome::Refused(why))
        }
    }
}

/// Whether `spec.containers` has a container the record knows neither as a sidecar nor as a
/// main (cheap: no copy of the Pod).
fn has_unknown(pod: &Value, record: &Record) -> bool {
    list(&pod["spec"], "containers").iter().any(|c| {
        let n = name(c);
        !record.sidecars.iter().any(|s| s == n) && !record.mains.iter().any(|m| m == n)
    })
}

/// Whether `spec.containers` has a container of the name of one sexton moved to
/// `initContainers`.
fn has_copies(pod: &Value, record: &Record) -> bool {
    list(&pod["spec"], "containers")
        .iter()
        .any(|c| record.moved.iter().any(|m| m.name == name(c)))
}

/// A container name that appears twice in `changed` (across its three lists) but not in
/// `pod`.
fn new_duplicate(pod: &Value, changed: &Value) -> Option<String> {
    let twice = |p: &Value| {
        let mut seen = std::collections::BTreeSet::new();
        let mut dups = std::collections::BTreeSet::new();
        for key in ["initContainers", "containers", "ephemeralContainers"] {
            for c in list(&p["spec"], key) {
                if !seen.insert(name(c).to_string()) {
                    dups.insert(name(c).to_string());
                }
            }
        }
        dups
    };
    let before = twice(pod);
    twice(changed).into_iter().find(|n| !before.contains(n))
}

/// What the user sees of a first pass's outcome.
fn out_warnings(out: &Outcome) -> Vec<String> {
    match out {
        Outcome::Refused(why) => vec![format!("sexton: pod admitted unchanged: {why}")],
        Outcome::Injected { caveats, .. } => {
            caveats.iter().map(|c| format!("sexton: {c}")).collect()
        }
        _ => vec![],
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
