//! `wrap`: the in-pod supervisor, as `examples/job-sidecar.yaml` does by hand. The static
//! `sexton` is at `/sexton/sexton` in every container: from the sexton image mounted as an
//! image volume, or copied by an init container into an `emptyDir` (`binary_source.rs`
//! chooses); every container of
//! `spec.containers` runs its own process behind `/sexton/sexton --`, records its life in a
//! memory-backed graveyard `emptyDir`, and gets the settings of the sidecar contract
//! (`contract.rs`: sidecars stop after all mains, in reverse order, also on pod deletion;
//! start before them; are restarted when they crash). Works wherever the pod runs
//! (virtual-kubelet nodes included), on any Kubernetes version.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::binary_source::{self, BinaryForm};
use crate::contract::{Group, StartOrder, plan};
use crate::entrypoint::{Resolve, needs_image, wrapped};
use crate::markers::{has_env, has_marker, strip_markers};
use crate::options::{Mechanism, Options};
use crate::record::Record;
use crate::report::Refusal;
use crate::sidecars::Roles;
use crate::template::{Template, name};

pub const INSTALL: &str = "sexton-install";
pub const BIN_VOLUME: &str = "sexton-bin";
pub const GRAVEYARD_VOLUME: &str = "sexton-graveyard";
const BIN_PATH: &str = "/sexton";
const GRAVEYARD_PATH: &str = "/sexton-graveyard";

fn refuse(message: String) -> Refusal {
    Refusal::new(Mechanism::Wrap, message)
}

/// `wrap`: the supervisor also orders the start (birth dependencies).
pub fn wrap(
    t: &mut Template,
    roles: &Roles,
    opts: &Options,
    resolver: &dyn Resolve,
) -> Result<Record, Refusal> {
    supervise(t, roles, opts, resolver, StartOrder::Supervisor)
}

/// Every container behind the supervisor, with the contract's settings; `start` says who
/// orders the start (`native-wrap`: the kubelet).
pub fn supervise(
    t: &mut Template,
    roles: &Roles,
    opts: &Options,
    resolver: &dyn Resolve,
    start: StartOrder,
) -> Result<Record, Refusal> {
    let mut record = Record::new(Mechanism::Wrap, &roles.sidecars, &roles.mains);
    let mut plan = plan(t, roles, start);
    record.caveats = std::mem::take(&mut plan.caveats);
    let all = t.container_names();
    behind_supervisor(t, &all, plan.settings, opts, resolver, &mut record)?;
    Ok(record)
}

/// The containers `names` behind the supervisor, each with its `settings`; the binary's
/// volume (and with the copy, the install init container) and the graveyard added. Nothing is changed if one of them cannot be (the
/// refusal says `wrap`: a caller of another mechanism says its own).
pub fn behind_supervisor(
    t: &mut Template,
    names: &[String],
    settings: BTreeMap<String, Vec<Group>>,
    opts: &Options,
    resolver: &dyn Resolve,
    record: &mut Record,
) -> Result<(), Refusal> {
    check_pod(t)?;
    let commands = commands(t, names, resolver)?;
    let (form, why) = binary_source::choose(t, opts).map_err(refuse)?;
    record.binary_note = why;
    add_volumes(t, form, opts, record);
    if form == BinaryForm::Copy {
        add_install(t, opts, record);
    }
    put_behind(t, names, commands, settings, record);
    Ok(())
}

/// More containers behind the supervisor of a pod already wrapped (a sidecar a later
/// webhook added): the install and the volumes are there.
pub fn also_behind(
    t: &mut Template,
    names: &[String],
    settings: BTreeMap<String, Vec<Group>>,
    resolver: &dyn Resolve,
    record: &mut Record,
) -> Result<(), Refusal> {
    let commands = commands(t, names, resolver)?;
    put_behind(t, names, commands, settings, record);
    Ok(())
}

type Command = (Vec<String>, Option<Vec<String>>);

/// Each container's command behind the supervisor, once each is checked.
fn commands(
    t: &Template,
    names: &[String],
    resolver: &dyn Resolve,
) -> Result<Vec<Command>, Refusal> {
    names
        .iter()
        .map(|n| {
            let c = t.container(n).expect("a container");
            check_container(c)?;
            wrapped_command(c, resolver)
        })
        .collect()
}

fn put_behind(
    t: &mut Template,
    names: &[String],
    commands: Vec<Command>,
    mut settings: BTreeMap<String, Vec<Group>>,
    record: &mut Record,
) {
    for (name_, (command, args)) in names.iter().zip(commands) {
        let contract = settings.remove(name_).unwrap_or_default();
        let c = t.container_mut(name_).expect("a container");
        set_command(c, command, args, record);
        add_env(c, name_, contract, record);
        add_mounts(c, record);
    }
}

/// What the pod as a whole must allow.
fn check_pod(t: &Template) -> Result<(), Refusal> {
    if let Some(os) = t.spec()["os"]["name"].as_str().filter(|o| *o != "linux") {
        return Err(refuse(format!(
            "spec.os.name is {os:?}; the supervisor is a Linux binary: use --strategy native"
        )));
    }
    for v in [BIN_VOLUME, GRAVEYARD_VOLUME] {
        if t.spec()["volumes"]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| name(x) == v))
        {
            return Err(refuse(format!(
                "spec.volumes already has a volume named {v:?}"
            )));
        }
    }
    if t.init_containers().iter().any(|c| name(c) == INSTALL) {
        return Err(refuse(format!(
            "spec.initContainers already has a container named {INSTALL:?}"
        )));
    }
    // (KEP-5532: the pod restarted in place keeps its volumes, the graveyard too, where the
    // tombstones of the mains' first run would end the sidecars again at once)
    let restarts_all = t.init_containers().iter().find(|c| {
        crate::template::list(c, "restartPolicyRules")
            .iter()
            .any(|r| r["action"] == "RestartAllContainers")
    });
    if let Some(c) = restarts_all {
        return Err(refuse(format!(
            "init container {:?} restarts every container on exit (restartPolicyRules RestartAllContainers, Kubernetes 1.36+), and the pod restarted in place would keep the graveyard whose tombstones end the sidecars at once: use --strategy native",
            name(c)
        )));
    }
    Ok(())
}

/// What each container must allow: not wrapped already, nothing at sexton's paths.
fn check_container(c: &Value) -> Result<(), Refusal> {
    let n = name(c);
    let first = c["command"][0].as_str().unwrap_or_default();
    let program = first.rsplit('/').next().unwrap_or_default();
    if program == "sexton" || program == "kubexit" {
        return Err(refuse(format!(
            "container {n:?} already runs {first:?} (command); it is wrapped already"
        )));
    }
    if c.get("restartPolicyRules").is_some_and(|r| !r.is_null()) {
        return Err(refuse(format!(
            "container {n:?} sets restartPolicyRules (container restart rules, Kubernetes 1.35+): the kubelet would restart it after an exit its supervisor records as its end, and its sidecars would be stopped under it: use --strategy native"
        )));
    }
    if has_env(c, "KUBEXIT_GRAVEYARD") {
        return Err(refuse(format!(
            "container {n:?} already sets KUBEXIT_GRAVEYARD (wired for kubexit); remove the kubexit wiring first"
        )));
    }
    let taken = c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| {
            let p = m["mountPath"]
                .as_str()
                .unwrap_or_default()
                .trim_end_matches('/');
            p == BIN_PATH || p == GRAVEYARD_PATH
        });
    if let Some(m) = taken {
        return Err(refuse(format!(
            "container {n:?} already mounts a volume at {}, where sexton's volumes go",
            m["mountPath"]
        )));
    }
    Ok(())
}

/// The container's command and args behind the supervisor; the image is looked up only
/// when the container sets no `command`.
fn wrapped_command(c: &Value, resolver: &dyn Resolve) -> Result<Command, Refusal> {
    let (n, image) = (name(c), c["image"].as_str().unwrap_or_default());
    let looked_up = match needs_image(c) {
        false => None,
        true => Some(resolver.resolve(image).map_err(|e| {
            refuse(format!(
                "container {n:?} sets no command, and the ENTRYPOINT of image {image:?} cannot be read ({e}): set `command` on the container"
            ))
        })?),
    };
    wrapped(c, looked_up.as_ref()).ok_or_else(|| {
        refuse(format!(
            "container {n:?}: image {image:?} has neither ENTRYPOINT nor CMD and the container sets neither command nor args: nothing to run"
        ))
    })
}

/// The binary's volume (the sexton image, whose file `/sexton` appears at `/sexton/sexton`;
/// or the `emptyDir` the copy goes to) and the graveyard's.
fn add_volumes(t: &mut Template, form: BinaryForm, opts: &Options, record: &mut Record) {
    record.before_list(t, "volumes");
    let bin = match form {
        BinaryForm::ImageVolume => {
            record.binary_source = Some(form);
            record.binary_note = Some(format!("binary from image volume {}", opts.sexton_image));
            json!({"name": BIN_VOLUME, "image": {"reference": opts.sexton_image}})
        }
        BinaryForm::Copy => json!({"name": BIN_VOLUME, "emptyDir": {"sizeLimit": "20Mi"}}),
    };
    t.spec_list_mut("volumes").extend([
        bin,
        // memory-backed: tombstone writes stay off the node's disk (and fsync is free)
        json!({"name": GRAVEYARD_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}),
    ]);
    record.added_volumes = vec![BIN_VOLUME.into(), GRAVEYARD_VOLUME.into()];
}

/// `sexton install`, first of the init containers, admitted under the `restricted` Pod
/// Security Standard and within common LimitRanges.
fn add_install(t: &mut Template, opts: &Options, record: &mut Record) {
    record.before_list(t, "initContainers");
    let install = json!({
        "name": INSTALL,
        "image": opts.sexton_image,
        "args": ["install", "/out"],
        "volumeMounts": [{"name": BIN_VOLUME, "mountPath": "/out"}],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": 65532,
            "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}
        }
    });
    t.spec_list_mut("initContainers").insert(0, install);
    record.added_init_containers = vec![INSTALL.into()];
}

fn set_command(
    c: &mut Value,
    command: Vec<String>,
    args: Option<Vec<String>>,
    record: &mut Record,
) {
    record.before_change(c, "command");
    record.before_change(c, "args");
    c["command"] = json!(command);
    match args {
        Some(a) => c["args"] = json!(a),
        None => {
            c.as_object_mut().expect("an object").remove("args");
        }
    }
}

/// The supervisor's settings, each group where the container does not set its first
/// variable itself; OpenKruise's markers go (the supervisor ends the sidecar, the
/// SidecarTerminator must not).
fn add_env(c: &mut Value, name_: &str, contract: Vec<Group>, record: &mut Record) {
    let mut groups = vec![
        vec![("KUBEXIT_NAME", name_.to_string())],
        vec![("KUBEXIT_GRAVEYARD", GRAVEYARD_PATH.into())],
    ];
    groups.extend(contract);
    let missing: Vec<_> = groups
        .into_iter()
        .filter(|g| g.first().is_some_and(|(k, _)| !has_env(c, k)))
        .flatten()
        .collect();
    if missing.is_empty() && !has_marker(c) {
        return;
    }
    record.before_change(c, "env");
    strip_markers(c);
    let env = crate::template::list_at(c, "env");
    env.extend(
        missing
            .into_iter()
            .map(|(k, v)| json!({"name": k, "value": v})),
    );
}

fn add_mounts(c: &mut Value, record: &mut Record) {
    record.before_change(c, "volumeMounts");
    crate::template::list_at(c, "volumeMounts").extend([
        json!({"name": BIN_VOLUME, "mountPath": BIN_PATH, "readOnly": true}),
        json!({"name": GRAVEYARD_VOLUME, "mountPath": GRAVEYARD_PATH}),
    ]);
}
