//! `native`: each sidecar moves from `containers` to `initContainers` with
//! `restartPolicy: Always`, keeping everything it had but the OpenKruise markers (which mean
//! nothing to a native sidecar). The kubelet then starts it before the mains, keeps it
//! running beside them, and stops it once they are done.
//!
//! Refused, with the field named, where the move would change what the pod does in a way
//! the user has to decide:
//! - the sidecar sets its own `restartPolicy`/`restartPolicyRules` (container restart
//!   rules): a native sidecar must be `Always`;
//! - it is expected to exit while a main still runs (kubexit death dependencies that are
//!   not all the mains): a native sidecar that exits is restarted by the kubelet;
//! - it waits for a main (kubexit birth dependency) and has a startupProbe or postStart
//!   hook: the kubelet starts the mains only once a native sidecar has started, so each
//!   would wait for the other.

use serde_json::Value;

use crate::contract::StartOrder;
use crate::entrypoint::Resolve;
use crate::markers::{env_value, has_marker, strip_markers};
use crate::options::{Mechanism, Options, Position};
use crate::record::{Moved, Record};
use crate::report::Refusal;
use crate::sidecars::Roles;
use crate::template::{Template, name};
use crate::wrap::supervise;

pub fn native(t: &mut Template, roles: &Roles, position: Position) -> Result<Record, Refusal> {
    check(t, roles, Mechanism::Native)?;
    let mut record = Record::new(Mechanism::Native, &roles.sidecars, &roles.mains);
    move_to_init(t, roles, position, 0, &mut record);
    Ok(record)
}

/// `native-wrap`: `wrap`, then the sidecars made native, after the init container that
/// installs the supervisor they run behind. The kubelet orders their start (no birth
/// dependencies); the supervisor their stop.
pub fn native_wrap(
    t: &mut Template,
    roles: &Roles,
    opts: &Options,
    resolver: &dyn Resolve,
) -> Result<Record, Refusal> {
    check(t, roles, Mechanism::NativeWrap)?;
    let mut record = supervise(t, roles, opts, resolver, StartOrder::Kubelet)
        .map_err(|r| Refusal::new(Mechanism::NativeWrap, r.message))?;
    record.mechanism = Mechanism::NativeWrap;
    move_to_init(t, roles, opts.position, 1, &mut record);
    Ok(record)
}

/// The refusals of both native forms.
fn check(t: &Template, roles: &Roles, mechanism: Mechanism) -> Result<(), Refusal> {
    for s in &roles.sidecars {
        let c = t.container(s).expect("a sidecar is a container");
        if let Some(why) = meaning_changes(c, &roles.mains) {
            return Err(Refusal::new(mechanism, why));
        }
    }
    Ok(())
}

/// Moves the sidecars to `initContainers` with `restartPolicy: Always`: after the existing
/// ones, or first but for the `keep_first` init containers sexton put there.
fn move_to_init(
    t: &mut Template,
    roles: &Roles,
    position: Position,
    keep_first: usize,
    record: &mut Record,
) {
    record.before_list(t, "initContainers");
    let mut moving = take_sidecars(t, &roles.sidecars, record);
    for c in &mut moving {
        make_native(c, record);
    }
    let inits = t.spec_list_mut("initContainers");
    match position {
        Position::Last => inits.extend(moving),
        Position::First => {
            let at = keep_first.min(inits.len());
            inits.splice(at..at, moving);
        }
    }
}

/// Why moving this sidecar would change the pod's meaning, if it would.
fn meaning_changes(c: &Value, mains: &[String]) -> Option<String> {
    let n = name(c);
    if let Some(p) = c["restartPolicy"].as_str().filter(|p| *p != "Always") {
        return Some(format!(
            "sidecar {n:?} sets restartPolicy {p:?}; a native sidecar is restarted whenever it exits (restartPolicy Always): remove the field, or use --strategy wrap"
        ));
    }
    if c.get("restartPolicyRules").is_some_and(|r| !r.is_null()) {
        return Some(format!(
            "sidecar {n:?} sets restartPolicyRules, which a native sidecar cannot have: remove them, or use --strategy wrap"
        ));
    }
    let deps = |var| -> Vec<String> {
        env_value(c, var)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    };
    let death = deps("KUBEXIT_DEATH_DEPS");
    if !death.is_empty()
        && let Some(m) = mains.iter().find(|m| !death.contains(m))
    {
        return Some(format!(
            "sidecar {n:?} is stopped when {death:?} die (KUBEXIT_DEATH_DEPS) while main {m:?} may still run, and a native sidecar that exits is restarted by the kubelet: add {m:?} to KUBEXIT_DEATH_DEPS, or use --strategy wrap"
        ));
    }
    let waits_for = deps("KUBEXIT_BIRTH_DEPS")
        .into_iter()
        .find(|d| mains.contains(d));
    let blocks = c.get("startupProbe").is_some_and(|p| !p.is_null())
        || !c["lifecycle"]["postStart"].is_null();
    if let (Some(m), true) = (waits_for, blocks) {
        return Some(format!(
            "sidecar {n:?} waits for main {m:?} (KUBEXIT_BIRTH_DEPS) and has a startupProbe or postStart hook; the kubelet starts the mains only after a native sidecar has started, so each would wait for the other: remove {m:?} from KUBEXIT_BIRTH_DEPS, or use --strategy wrap"
        ));
    }
    None
}

/// Removes the sidecars from `containers`, recording where each was.
fn take_sidecars(t: &mut Template, sidecars: &[String], record: &mut Record) -> Vec<Value> {
    let containers = t.spec_list_mut("containers");
    let mut taken = vec![];
    let mut index = 0;
    containers.retain(|c| {
        let i = index;
        index += 1;
        if sidecars.iter().any(|s| s == name(c)) {
            record.moved.push(Moved {
                name: name(c).to_string(),
                index: i,
            });
            taken.push(c.clone());
            false
        } else {
            true
        }
    });
    taken
}

/// `restartPolicy: Always`, and the OpenKruise markers dropped.
fn make_native(c: &mut Value, record: &mut Record) {
    record.before_change(c, "restartPolicy");
    c["restartPolicy"] = Value::from("Always");
    if has_marker(c) {
        record.before_change(c, "env");
        strip_markers(c);
    }
}
