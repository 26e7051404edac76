//! `controller`: where neither native sidecars nor the supervisor can be used, the
//! sidecars get OpenKruise's marker, and the SidecarTerminator (`kubectl-sexton
//! controller`) ends them by swapping their image once the mains are done. Only for
//! Job-style pods, and only for sidecars the controller would not refuse.

use serde_json::{Value, json};

use crate::markers::{
    ENV_KRUISE_SIDECAR, ENV_KRUISE_SIDECAR_IMAGE, env_pairs, env_value, kruise_marked,
};
use crate::options::Mechanism;
use crate::record::Record;
use crate::report::Refusal;
use crate::sidecars::Roles;
use crate::template::{Template, list_at};

fn refuse(message: String) -> Refusal {
    Refusal::new(Mechanism::Controller, message)
}

pub fn mark(t: &mut Template, roles: &Roles) -> Result<Record, Refusal> {
    let policy = t.spec()["restartPolicy"].as_str().unwrap_or("Always");
    if policy != "Never" && policy != "OnFailure" {
        return Err(refuse(format!(
            "the SidecarTerminator ends only pods with restartPolicy Never or OnFailure (this one: {policy})"
        )));
    }
    for s in &roles.sidecars {
        let c = t.container(s).expect("a sidecar is a container");
        if let Some(why) = would_refuse(c) {
            return Err(refuse(why));
        }
    }
    let mut record = Record::new(Mechanism::Controller, &roles.sidecars, &roles.mains);
    for s in &roles.sidecars {
        let c = t.container_mut(s).expect("a sidecar is a container");
        if kruise_marked(env_pairs(c)) {
            continue;
        }
        record.before_change(c, "env");
        list_at(c, "env").push(json!({"name": ENV_KRUISE_SIDECAR, "value": "true"}));
    }
    Ok(record)
}

/// The controller's own refusals for its default image (`kubectl-sexton controller`'s
/// decide.rs), checked here so that a pod is not left to a controller that will not act.
fn would_refuse(c: &Value) -> Option<String> {
    let n = c["name"].as_str().unwrap_or_default();
    if env_value(c, ENV_KRUISE_SIDECAR_IMAGE).is_some_and(|v| !v.is_empty()) {
        return None; // the user named the replacement image and vouched for it
    }
    if c["command"].as_array().is_some_and(|v| !v.is_empty()) {
        return Some(format!(
            "sidecar {n:?} sets `command`, which the quick-exit image does not have: set {ENV_KRUISE_SIDECAR_IMAGE} on it to an image in which that command exits 0"
        ));
    }
    if !c["lifecycle"]["postStart"].is_null() {
        return Some(format!(
            "sidecar {n:?} has a postStart hook, which would fail in the quick-exit image: set {ENV_KRUISE_SIDECAR_IMAGE} on it to an image in which the hook succeeds"
        ));
    }
    None
}
