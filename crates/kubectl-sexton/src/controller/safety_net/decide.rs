//! The safety net's decision for one Pod, pure: whether admission missed it (a Job-style Pod
//! that sexton's webhook serves, with sidecars declared or recognised that nothing of
//! sexton's ends), and once every main is done, which sidecar to end next. Sidecars end in
//! reverse order, one at a time: the last one first, the one before it once the last has
//! ended, as the kubelet stops native sidecars. Each is ended by the SidecarTerminator's swap
//! (its image to the quick-exit image, so the kubelet restarts it into an exit 0), with the
//! SidecarTerminator's rules for when a swap is safe (`terminator/decide.rs`), all or
//! nothing: a sidecar that cannot be ended keeps the Pod alive whatever is done to the others.
//! The reconciler (`reconcile.rs`) carries the decision out.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sexton_inject::{Catalogue, Injected, injected, roles_of};

use crate::controller::terminator::decide::{
    Images, Refusal, Swap, Verdict, is_sidecar, mains_not_done, not_a_running_job_pod, swapped,
    swapped_sidecar, unswapped_sidecar,
};
use crate::shared::pod::{Container, Pod};
use crate::shared::safety_net::{Cause, Record};
use crate::shared::webhook_scope::{WebhookScope, asked, labels_set_after};

/// Whether sexton's webhook serves the Pod, as its live configuration and the namespace's
/// labels say ([`served`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    No(String),
    Yes {
        /// The webhook of the configuration that serves it.
        hook: String,
        /// Set when the namespace got the labels the webhook selects on after the Pod was
        /// created: what the controller can tell of it.
        labelled_later: Option<String>,
    },
}

/// Whether the webhook whose configuration is `scope` (`None`: there is none) serves `pod`,
/// in its namespace `namespace` (`None`: not in the cache).
pub fn served(scope: Option<&WebhookScope>, namespace: Option<&ObjectMeta>, pod: &Pod) -> Served {
    let Some(scope) = scope else {
        return Served::No("sexton's webhook configuration does not exist".into());
    };
    let Some(ns) = namespace else {
        return Served::No("its namespace is not in the cache".into());
    };
    let none = BTreeMap::new();
    let ns_labels = ns.labels.as_ref().unwrap_or(&none);
    let pod_labels = pod.metadata.labels.as_ref().unwrap_or(&none);
    let Some(hook) = scope.serving(ns_labels, pod_labels, asked(&pod.metadata)) else {
        return Served::No("sexton's webhook does not serve it (its selectors, or its annotation sexton.dev/inject)".into());
    };
    let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let labelled_later = created.and_then(|created| {
        let (keys, set) = labels_set_after(ns, &hook.namespace_keys, created)?;
        Some(format!(
            "the namespace's labels {} were set at {set}, the Pod was created at {created}",
            keys.join(", ")
        ))
    });
    Served::Yes {
        hook: hook.name.clone(),
        labelled_later,
    }
}

/// What the decision is made with besides the Pod.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    pub catalogue: &'a Catalogue,
    pub images: Images<'a>,
    /// The SidecarTerminator runs in this process: it ends the sidecars OpenKruise's markers
    /// mark, and the net leaves them to it.
    pub terminator_runs: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Not a Pod the net acts on (not Running, not a Job's, not served, nothing it would
    /// end).
    Ignore(String),
    /// A Pod the net ends the sidecars of, not yet: a main runs (or will be restarted), or
    /// the sidecar after this one is still ending.
    Wait(String),
    /// End this sidecar now.
    End(End),
    /// A sidecar cannot be ended (or its replacement cannot start): reported, nothing done.
    Refuse {
        record: Record,
        problems: Vec<Refusal>,
    },
    /// Every sidecar the net ends has ended.
    Done(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct End {
    pub swap: Swap,
    /// Why, and every sidecar the net ends in this Pod (written with the swap).
    pub record: Record,
    /// The first sidecar the net ends in this Pod: its Events are published now.
    pub first: bool,
    /// Problems seen on the way that do not stop it (a replacement that exited non-zero).
    pub problems: Vec<Refusal>,
}

/// Decides what to do with `pod`.
pub fn decide(pod: &Pod, served: &Served, rules: &Rules) -> Decision {
    let c = match candidate(pod, rules) {
        Ok(c) => c,
        Err(why) => return Decision::Ignore(why),
    };
    let labelled_later = match served {
        Served::No(why) => return Decision::Ignore(why.clone()),
        Served::Yes { labelled_later, .. } => labelled_later,
    };
    if let Some(why) = mains_not_done(pod, &c.mains) {
        return Decision::Wait(why);
    }
    let record = record(&c.ours, &c.injected, labelled_later);
    in_reverse_order(pod, &c.ours, record, rules.images)
}

/// A Pod the net acts on if the webhook serves it: a Running Job-style Pod with sidecars
/// that nothing else ends, and a main to wait for.
pub struct Candidate<'a> {
    /// The sidecars the net ends, in the Pod's order.
    ours: Vec<&'a Container>,
    mains: Vec<&'a Container>,
    injected: Injected,
}

/// Whether `pod` is a [`Candidate`], from the Pod alone (why not, if not). Nothing but a
/// change of the Pod changes the answer, so the net's loop queues candidates only: a
/// cluster's other pods cost it no queue entry, even when a namespace's labels or the
/// webhook's configuration change.
pub fn candidate<'a>(pod: &'a Pod, rules: &Rules) -> Result<Candidate<'a>, String> {
    if let Some(why) = not_a_running_job_pod(pod) {
        return Err(why);
    }
    let Some(spec) = pod.spec.as_ref() else {
        return Err("no spec".into());
    };
    let mut json = serde_json::to_value(pod).expect("a pod serializes");
    let Some(roles) = roles_of(&mut json, rules.catalogue) else {
        return Err("no sidecar declared or recognised".into());
    };
    let injected = injected(&json);
    let container = |n: &str| spec.containers.iter().find(|c| c.name == n);
    let mut ours = vec![];
    let mut theirs = vec![];
    for c in roles.sidecars.iter().filter_map(|n| container(n)) {
        match ended_by(c, &injected, rules.terminator_runs) {
            None => ours.push(c),
            Some(by) => theirs.push(format!("{:?}: {by}", c.name)),
        }
    }
    if ours.is_empty() {
        return Err(format!(
            "its sidecars are ended otherwise ({})",
            theirs.join("; ")
        ));
    }
    let mains: Vec<&Container> = roles.mains.iter().filter_map(|n| container(n)).collect();
    if mains.is_empty() {
        return Err("every container is a sidecar: no main to wait for".into());
    }
    Ok(Candidate {
        ours,
        mains,
        injected,
    })
}

/// What else ends sidecar `c`, if anything does: sexton's injection (its record), its
/// supervisor, or the SidecarTerminator.
fn ended_by(c: &Container, injected: &Injected, terminator_runs: bool) -> Option<String> {
    match injected {
        Injected::Sidecars {
            mechanism,
            sidecars,
            ..
        } if sidecars.contains(&c.name) => {
            return Some(format!(
                "sexton injected it ({})",
                mechanism_name(*mechanism)
            ));
        }
        Injected::Unreadable(e) => return Some(format!("a record of sexton's: {e}")),
        _ => {}
    }
    if let Some(s) = supervisor(c) {
        return Some(format!("it runs behind {s}"));
    }
    (terminator_runs && is_sidecar(c))
        .then(|| "the SidecarTerminator (OpenKruise's marker)".to_string())
}

fn mechanism_name(m: sexton_inject::Mechanism) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The supervisor a container runs behind, if it does: its command is sexton or kubexit, or
/// it has kubexit's `KUBEXIT_NAME` (an image whose entrypoint is the supervisor).
fn supervisor(c: &Container) -> Option<&'static str> {
    let program = c.command.as_ref().and_then(|cmd| cmd.first());
    let base = program.map(|p| p.rsplit('/').next().unwrap_or(p));
    match base {
        Some("sexton") => return Some("sexton's supervisor"),
        Some("kubexit") => return Some("kubexit"),
        _ => {}
    }
    let named = c.env.iter().flatten().any(|e| e.name == "KUBEXIT_NAME");
    named.then_some("a supervisor (it sets KUBEXIT_NAME)")
}

/// Why admission missed the Pod, and the sidecars the net ends in stop order.
fn record(ours: &[&Container], injected: &Injected, labelled_later: &Option<String>) -> Record {
    let (cause, detail) = match (injected, labelled_later) {
        (
            Injected::Sidecars {
                mechanism, mains, ..
            },
            _,
        ) => {
            // taken for a main at admission: not recognised; else added since
            let cause = match ours.iter().any(|c| mains.contains(&c.name)) {
                true => Cause::NotRecognised,
                false => Cause::AddedAfterAdmission,
            };
            let detail = format!("sexton injected the Pod: {}", mechanism_name(*mechanism));
            (cause, detail)
        }
        (_, Some(when)) => (Cause::NamespaceLabelledLater, when.clone()),
        (_, None) => (Cause::NotInjected, String::new()),
    };
    Record {
        cause,
        sidecars: ours.iter().rev().map(|c| c.name.clone()).collect(),
        detail,
    }
}

/// The next step once the mains are done: the last sidecar not ended yet is ended, once
/// every one after it has ended.
fn in_reverse_order(pod: &Pod, ours: &[&Container], record: Record, images: Images) -> Decision {
    let already = swapped(pod);
    let verdicts: Vec<Verdict> = ours
        .iter()
        .map(|c| match already.contains_key(&c.name) {
            true => swapped_sidecar(pod, c),
            false => unswapped_sidecar(pod, c, images.quick_exit, images.named),
        })
        .collect();
    // all or nothing: a sidecar that cannot be ended keeps the Pod alive anyway
    let keep: Vec<Refusal> = verdicts
        .iter()
        .filter_map(|v| match v {
            Verdict::Problem(p) if p.reason.keeps_a_sidecar_running() => Some(p.clone()),
            _ => None,
        })
        .collect();
    if !keep.is_empty() {
        return Decision::Refuse {
            record,
            problems: keep,
        };
    }
    let first = Record::of(pod.metadata.annotations.as_ref()).is_none();
    let mut problems = vec![];
    for v in verdicts.into_iter().rev() {
        match v {
            Verdict::Over => {}
            Verdict::BeingReplaced(name) => {
                return Decision::Wait(format!(
                    "sidecar {name:?} is being replaced by the kubelet; the sidecars before it end after it"
                ));
            }
            Verdict::Swap(swap) => {
                return Decision::End(End {
                    swap,
                    record,
                    first,
                    problems,
                });
            }
            // a replacement that cannot start: the Pod waits for it, and so do the others
            Verdict::Problem(p) if p.reason.stalls() => {
                return Decision::Refuse {
                    record,
                    problems: vec![p],
                };
            }
            // ended, but not as it should (reported)
            Verdict::Problem(p) => problems.push(p),
        }
    }
    match problems.is_empty() {
        true => Decision::Done("every sidecar the safety net ends has ended".into()),
        false => Decision::Refuse { record, problems },
    }
}

#[cfg(test)]
mod tests;
