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
//!   would wait for the other;
//! - it is a vendor's sidecar whose webhook will be called again after sexton's and looks
//!   for it by name in `spec.containers` alone (`chain::may_move`): moved, it would be
//!   injected a second time, and the API server refuses a Pod with two containers of a name.
//!
//! A vendor's injected sidecar (`catalogue.rs`) goes right after the vendor's own init
//! containers (which prepare its network, or render its first secrets), and, without a
//! startup gate of its own, gets the vendor's readiness endpoint as its startupProbe: the
//! mains start once it is ready, as the vendor's own native mode does it.

use serde_json::{Value, json};

use crate::catalogue::Vendor;
use crate::chain::may_move;
use crate::contract::StartOrder;
use crate::entrypoint::Resolve;
use crate::markers::{env_value, has_marker, strip_markers};
use crate::options::{Mechanism, Options, Position};
use crate::record::{Moved, Record};
use crate::report::Refusal;
use crate::sidecars::Roles;
use crate::template::{Template, name};
use crate::wrap::supervise;

pub fn native(t: &mut Template, roles: &Roles, opts: &Options) -> Result<Record, Refusal> {
    check(t, roles, opts, Mechanism::Native)?;
    let mut record = Record::new(Mechanism::Native, &roles.sidecars, &roles.mains);
    move_to_init(t, roles, opts, 0, &mut record);
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
    check(t, roles, opts, Mechanism::NativeWrap)?;
    let mut record = supervise(t, roles, opts, resolver, StartOrder::Kubelet)
        .map_err(|r| Refusal::new(Mechanism::NativeWrap, r.message))?;
    record.mechanism = Mechanism::NativeWrap;
    // (after `sexton install`, if the binary is copied)
    let installs = record.added_init_containers.len();
    move_to_init(t, roles, opts, installs, &mut record);
    Ok(record)
}

/// The refusals of both native forms.
fn check(t: &Template, roles: &Roles, opts: &Options, mechanism: Mechanism) -> Result<(), Refusal> {
    for s in &roles.sidecars {
        let c = t.container(s).expect("a sidecar is a container");
        if let Some(why) = meaning_changes(c, &roles.mains) {
            return Err(Refusal::new(mechanism, why));
        }
        if let Some(why) = injected_again(s, opts) {
            return Err(Refusal::new(mechanism, why));
        }
    }
    Ok(())
}

/// Why moving sidecar `s` out of `spec.containers` would make its vendor's webhook add it
/// again, if it would. The vendor is found by the container's name alone: the hazard is its
/// webhook's re-check, which looks at nothing else.
pub fn injected_again(s: &str, opts: &Options) -> Option<String> {
    let vendor = opts.catalogue.vendor_named(s)?;
    if may_move(vendor, opts.chain.as_deref()) {
        return None;
    }
    if let Some(why) = &vendor.keep_in_containers {
        return Some(format!("sidecar {s:?} stays in spec.containers: {why}"));
    }
    Some(format!(
        "sidecar {s:?} stays in spec.containers: {}'s webhook ({}) is called again after sexton's (reinvocationPolicy IfNeeded) and looks for it there by name, so moved it would be added a second time and the Pod refused",
        vendor.name,
        vendor
            .webhook
            .configurations
            .iter()
            .map(|p| p.0.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

/// Moves the sidecars to `initContainers` with `restartPolicy: Always`: a vendor's right
/// after the vendor's own init containers; the others after the existing ones, or first but
/// for the `keep_first` init containers sexton put there.
fn move_to_init(
    t: &mut Template,
    roles: &Roles,
    opts: &Options,
    keep_first: usize,
    record: &mut Record,
) {
    record.before_list(t, "initContainers");
    let moving = take_sidecars(t, &roles.sidecars, record);
    let mut plain = vec![];
    for mut c in moving {
        let vendor = roles
            .vendor_of(name(&c))
            .and_then(|v| opts.catalogue.vendor(v));
        make_native(&mut c, vendor, record);
        match vendor.and_then(|v| after_own_init(t.init_containers(), v)) {
            Some(at) => {
                t.spec_list_mut("initContainers").insert(at, c);
            }
            None => plain.push(c),
        }
    }
    let inits = t.spec_list_mut("initContainers");
    match opts.position {
        Position::Last => inits.extend(plain),
        Position::First => {
            let at = keep_first.min(inits.len());
            inits.splice(at..at, plain);
        }
    }
}

/// The index right after the last of `vendor`'s own init containers, if the pod has one.
fn after_own_init(inits: &[Value], vendor: &Vendor) -> Option<usize> {
    inits
        .iter()
        .rposition(|c| vendor.init_containers.iter().any(|p| p.matches(name(c))))
        .map(|i| i + 1)
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

/// `restartPolicy: Always`, and the OpenKruise markers dropped; a vendor's sidecar without
/// a startup gate gets the vendor's readiness endpoint as its startupProbe.
fn make_native(c: &mut Value, vendor: Option<&Vendor>, record: &mut Record) {
    record.before_change(c, "restartPolicy");
    c["restartPolicy"] = Value::from("Always");
    if has_marker(c) {
        record.before_change(c, "env");
        strip_markers(c);
    }
    let gated = !c["startupProbe"].is_null() || !c["lifecycle"]["postStart"].is_null();
    if let (Some(e), false) = (vendor.and_then(|v| v.startup.as_ref()), gated) {
        record.before_change(c, "startupProbe");
        // Istio's native mode's values: every second, for up to 10 minutes
        c["startupProbe"] = json!({
            "httpGet": {"path": e.path, "port": e.port},
            "periodSeconds": 1,
            "timeoutSeconds": 3,
            "failureThreshold": 600,
        });
    }
}
