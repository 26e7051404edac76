//! Where `wrap` and `native-wrap` get the supervisor's binary: an image volume (the sexton
//! image mounted read-only at `/sexton`, so the file comes from one image layer that every
//! pod of a node shares, and no init container runs), or the copy (`sexton install` copies it
//! into an `emptyDir` in an init container: one copy per pod, on any cluster).
//!
//! `auto` takes the image volume only where it is known to work: Kubernetes 1.35 or later
//! (image volumes on by default; beta in 1.33-1.34 but off), and every node the pod can
//! land on running a runtime that mounts them (containerd 2.1 or later, CRI-O 1.31 or later).
//! A runtime that does not mount them may mount the volume empty without an error (k3s's
//! bundled containerd, k3s-io/k3s#14323), and the pod then fails with "no such file": k3s
//! builds and unknown runtimes get the copy, and so does any pod whose nodes are not known.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::choose::virtual_kubelet;
use crate::options::{BinarySource, NodeFacts, Options, Runtimes, Taint};
use crate::template::{Template, list};

/// The template annotation that chooses the binary source (`image-volume`, `copy`, `auto`);
/// it wins over the caller's option.
pub const ANNOTATION_BINARY_SOURCE: &str = "sexton.dev/binary-source";

/// What was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BinaryForm {
    /// `volumes[].image`: the sexton image mounted at `/sexton`.
    ImageVolume,
    /// The `sexton install` init container and an `emptyDir`.
    Copy,
}

/// The template's binary source names none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "annotation {ANNOTATION_BINARY_SOURCE}: {0:?} is not a binary source (image-volume, copy or auto)"
)]
pub struct BadBinarySource(pub String);

/// The form to use, and (for `auto`, when it knew something) why.
pub fn choose(t: &Template, opts: &Options) -> Result<(BinaryForm, Option<String>), String> {
    let source = match t.annotation(ANNOTATION_BINARY_SOURCE) {
        None => opts.binary_source,
        Some(v) => v
            .parse()
            .map_err(|_| BadBinarySource(v.to_string()).to_string())?,
    };
    match source {
        BinarySource::Copy => Ok((BinaryForm::Copy, None)),
        BinarySource::ImageVolume => match opts.kubernetes_version {
            Some((major, minor)) if (major, minor) < (1, 31) => Err(format!(
                "Kubernetes {major}.{minor} has no image volumes (1.31 or later, on by default from 1.35): use --binary-source copy"
            )),
            _ => Ok((BinaryForm::ImageVolume, None)),
        },
        BinarySource::Auto => Ok(match auto(t.spec(), opts) {
            Ok(()) => (BinaryForm::ImageVolume, None),
            Err(why) => (BinaryForm::Copy, why),
        }),
    }
}

/// `Ok` where image volumes are known to work for this pod; else why not (`None`, said
/// nowhere: nothing was known, the usual case offline, or the cluster is older than 1.35,
/// where nobody expects them).
fn auto(spec: &Value, opts: &Options) -> Result<(), Option<String>> {
    match opts.kubernetes_version {
        Some(v) if v >= (1, 35) => {}
        _ => return Err(None),
    }
    let copied = |why: String| Err(Some(format!("binary copied: {why}")));
    if let Some(why) = virtual_kubelet(spec) {
        return copied(format!("the pods target virtual-kubelet nodes ({why})"));
    }
    let runtimes: Vec<(String, &str)> = match &opts.runtimes {
        Runtimes::Unknown => return copied("the nodes' container runtimes are unknown".into()),
        Runtimes::Given(list) => list
            .iter()
            .map(|r| ("a node runs ".into(), r.as_str()))
            .collect(),
        Runtimes::Nodes(nodes) => nodes
            .iter()
            .filter(|n| can_land_on(spec, n))
            .map(|n| (format!("node {} runs ", n.name), n.runtime.as_str()))
            .collect(),
    };
    if runtimes.is_empty() {
        return copied("no known node can run the pod".into());
    }
    match runtimes.iter().find(|(_, r)| !mounts_image_volumes(r)) {
        Some((node, r)) => copied(format!(
            "{node}{r:?}, which is not known to mount image volumes (containerd 2.1 or CRI-O 1.31 or later; not k3s's containerd)"
        )),
        None => Ok(()),
    }
}

/// Whether a runtime (`nodeInfo.containerRuntimeVersion`) mounts image volumes: containerd
/// 2.1 or later (2.1.0 added them), CRI-O 1.31 or later. k3s's bundled containerd is
/// refused whatever its version: it mounted them empty, without an error (k3s-io/k3s#14323,
/// v2.2.3-k3s1); so is anything else (docker://, unknown names).
pub fn mounts_image_volumes(runtime: &str) -> bool {
    let Some((name, version)) = runtime.split_once("://") else {
        return false;
    };
    let version = version.trim_start_matches('v');
    let min = match name {
        "containerd" if !version.contains("k3s") => (2, 1),
        "cri-o" => (1, 31),
        _ => return false,
    };
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= min,
        _ => false,
    }
}

/// Whether the scheduler may put the pod on `node`: `nodeName`, `nodeSelector`, the required
/// node affinity, and the node's NoSchedule and NoExecute taints against the tolerations.
pub fn can_land_on(spec: &Value, node: &NodeFacts) -> bool {
    if let Some(n) = spec["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return n == node.name;
    }
    let selected = spec["nodeSelector"].as_object().is_none_or(|sel| {
        sel.iter()
            .all(|(k, v)| node.labels.get(k).map(String::as_str) == v.as_str())
    });
    selected && affinity_allows(spec, node) && tolerated(spec, node)
}

/// `requiredDuringSchedulingIgnoredDuringExecution`: any term whose expressions all match.
fn affinity_allows(spec: &Value, node: &NodeFacts) -> bool {
    let terms = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    let Some(terms) = terms.as_array() else {
        return true;
    };
    let name_labels = BTreeMap::from([("metadata.name".to_string(), node.name.clone())]);
    terms.iter().any(|term| {
        let (exprs, fields) = (list(term, "matchExpressions"), list(term, "matchFields"));
        // (a term without requirements matches no node, as the scheduler reads it)
        (!exprs.is_empty() || !fields.is_empty())
            && exprs.iter().all(|e| expression_matches(e, &node.labels))
            && fields.iter().all(|e| expression_matches(e, &name_labels))
    })
}

/// One node selector requirement against a node's labels.
fn expression_matches(e: &Value, labels: &BTreeMap<String, String>) -> bool {
    let key = e["key"].as_str().unwrap_or_default();
    let values: Vec<&str> = e["values"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let label = labels.get(key).map(String::as_str);
    let number = |s: Option<&str>| s.and_then(|s| s.parse::<i64>().ok());
    match e["operator"].as_str().unwrap_or_default() {
        "In" => label.is_some_and(|l| values.contains(&l)),
        "NotIn" => label.is_none_or(|l| !values.contains(&l)),
        "Exists" => label.is_some(),
        "DoesNotExist" => label.is_none(),
        "Gt" => {
            matches!((number(label), number(values.first().copied())), (Some(l), Some(v)) if l > v)
        }
        "Lt" => {
            matches!((number(label), number(values.first().copied())), (Some(l), Some(v)) if l < v)
        }
        _ => false,
    }
}

/// Every NoSchedule and NoExecute taint of the node is tolerated.
fn tolerated(spec: &Value, node: &NodeFacts) -> bool {
    let tolerations: Vec<&Value> = spec["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    node.taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|taint| tolerations.iter().any(|tol| tolerates(tol, taint)))
}

fn tolerates(tol: &Value, taint: &Taint) -> bool {
    let key = tol["key"].as_str().unwrap_or_default();
    let exists = tol["operator"] == "Exists";
    let effect = tol["effect"].as_str().unwrap_or_default();
    (effect.is_empty() || effect == taint.effect)
        && (key == taint.key || (key.is_empty() && exists))
        && (exists || tol["value"].as_str().unwrap_or_default() == taint.value)
}

#[cfg(test)]
mod tests;
