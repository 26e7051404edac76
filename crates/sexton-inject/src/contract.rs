//! The sidecar contract as supervisor settings: what each container of a wrapped pod
//! template gets so that its sidecars behave as native sidecars (KEP-753) do.
//!
//! Sidecars `S1..Sk` (in the order of `spec.containers`) and mains `M...`:
//! - **stop after all mains, in reverse order**: `Sk` depends on every main, with
//!   `KUBEXIT_DEATH_DEPS_MODE=all`; each other `Si` on `Si+1` alone, so `Sk` stops first and
//!   `S1` last. The lists stay linear in the number of containers (k + m names in all),
//!   not quadratic (every sidecar naming every main);
//! - **OnFailure**: `KUBEXIT_DEATH_TRIGGER=success`, since a failed main is restarted;
//! - **pod deletion**: `KUBEXIT_HOLD_STOP` with the pod's grace period: the kubelet's SIGTERM
//!   reaches every container at once, and a sidecar holds it until its dependencies died;
//! - **restart** of a crashed sidecar: `KUBEXIT_RESTART_CHILD`;
//! - **preStop** when the mains finish: `KUBEXIT_PRE_STOP`;
//! - **start order** (`wrap` only; for `native-wrap` the kubelet starts native sidecars in
//!   order itself): the startupProbe as `KUBEXIT_READY_PROBE`, and birth dependencies along
//!   the same chain: `Si` waits for `Si-1`, every main for `Sk`, each with a birth timeout of
//!   the probe budgets before it plus a margin.
//!
//! Settings come in groups, each added only if the container does not set its first
//! variable itself (a value of the user's is theirs, and so are the settings that go with it).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::lifecycle::{pre_stop, startup_probe};
use crate::sidecars::Roles;
use crate::template::{Template, name};

/// The kubelet's default `terminationGracePeriodSeconds`.
const DEFAULT_POD_GRACE: u64 = 30;
/// Added to the probe budgets for a birth timeout: the start of the containers themselves,
/// and image pulls. The kubelet pulls a pod's images one after the other, in the order of
/// its containers, so a sidecar declared after a main may start minutes after it; the
/// kubelet makes mains wait for native sidecars without any bound, so the margin is
/// generous: a main that gives up too early would fail a Job that would succeed.
pub const BIRTH_MARGIN: u64 = 300;

/// Who orders the start: the supervisor (`wrap`: birth dependencies), or the kubelet
/// (`native-wrap`: native sidecars start in order, each after its startupProbe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOrder {
    Supervisor,
    Kubelet,
}

/// Settings added together: the first variable decides whether the group is added.
pub type Group = Vec<(&'static str, String)>;

/// The contract's settings of every container, and what could not be carried over.
#[derive(Debug, Default)]
pub struct Plan {
    pub settings: BTreeMap<String, Vec<Group>>,
    pub caveats: Vec<String>,
}

/// The sidecars' grace period: a third of the pod's, at least 1 s. On pod deletion a held
/// stop signal leaves the mains the rest of it (`Hold::until` in sexton-core); when the
/// mains finish by themselves, it is how long a sidecar has to drain before SIGKILL.
pub fn sidecar_grace(pod_grace: u64) -> u64 {
    (pod_grace / 3).max(1)
}

pub fn plan(t: &Template, roles: &Roles, start: StartOrder) -> Plan {
    let spec = t.spec();
    let pod_grace = spec["terminationGracePeriodSeconds"]
        .as_u64()
        .unwrap_or(DEFAULT_POD_GRACE);
    let on_failure = spec["restartPolicy"] == "OnFailure";
    let order: Vec<&Value> = t
        .containers()
        .iter()
        .filter(|c| roles.sidecars.iter().any(|s| s == name(c)))
        .collect();
    let mut plan = Plan::default();
    let mut waited = 0; // the probe budgets of the sidecars started so far
    for (i, c) in order.iter().enumerate() {
        let mut groups = vec![];
        let deps = match order.get(i + 1) {
            Some(next) => name(next).to_string(),
            None => roles.mains.join(","),
        };
        groups.push(vec![
            ("KUBEXIT_DEATH_DEPS", deps),
            ("KUBEXIT_DEATH_DEPS_MODE", "all".into()),
        ]);
        groups.push(vec![(
            "KUBEXIT_GRACE_PERIOD",
            format!("{}s", sidecar_grace(pod_grace)),
        )]);
        if on_failure {
            groups.push(vec![("KUBEXIT_DEATH_TRIGGER", "success".into())]);
        }
        groups.push(vec![
            ("KUBEXIT_HOLD_STOP", "true".into()),
            ("KUBEXIT_POD_GRACE_PERIOD", format!("{pod_grace}s")),
        ]);
        groups.push(vec![("KUBEXIT_RESTART_CHILD", "true".into())]);
        match pre_stop(c) {
            Ok(Some(hook)) => groups.push(vec![("KUBEXIT_PRE_STOP", hook)]),
            Ok(None) => {}
            Err(caveat) => plan.caveats.push(caveat.0),
        }
        if start == StartOrder::Supervisor {
            if i > 0 {
                groups.push(birth(name(order[i - 1]), waited));
            }
            waited += gate(c, &mut groups, &mut plan.caveats);
        }
        plan.settings.insert(name(c).to_string(), groups);
    }
    if let (StartOrder::Supervisor, Some(last)) = (start, order.last()) {
        for m in &roles.mains {
            plan.settings
                .insert(m.clone(), vec![birth(name(last), waited)]);
        }
    }
    plan
}

/// Waits for `dep`'s readiness, as long as the sidecars before it may take and a margin.
fn birth(dep: &str, waited: u64) -> Group {
    vec![
        ("KUBEXIT_BIRTH_DEPS", dep.to_string()),
        (
            "KUBEXIT_BIRTH_TIMEOUT",
            format!("{}s", waited + BIRTH_MARGIN),
        ),
    ]
}

/// The startupProbe as the readiness probe; returns its time budget (0 without one: the
/// sidecar is ready once its process started).
fn gate(c: &Value, groups: &mut Vec<Group>, caveats: &mut Vec<String>) -> u64 {
    match startup_probe(c) {
        Ok(Some(p)) => {
            caveats.extend(p.caveat);
            groups.push(vec![
                ("KUBEXIT_READY_PROBE", p.probe),
                ("KUBEXIT_READY_INTERVAL", p.interval),
                ("KUBEXIT_READY_TIMEOUT", p.timeout),
            ]);
            p.budget
        }
        Ok(None) => 0,
        Err(caveat) => {
            caveats.push(caveat.0);
            0
        }
    }
}
