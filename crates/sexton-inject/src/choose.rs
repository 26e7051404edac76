//! Which strategy applies to a template, and what `auto` knows: whether native sidecars
//! can run where the pods go (not on virtual-kubelet nodes, not below Kubernetes 1.29).

use serde_json::Value;

use crate::options::{Options, Strategy, StrategyError};
use crate::template::Template;

/// The template annotation that chooses the strategy (`native`, `wrap`, `auto`, `disabled`).
pub const ANNOTATION_INJECT: &str = "sexton.dev/inject";

/// The template's annotation `sexton.dev/inject` names no strategy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {annotation}: {0}", annotation = ANNOTATION_INJECT)]
pub struct BadAnnotation(#[from] StrategyError);

/// The template's annotation wins over the caller's strategy.
pub fn strategy(t: &Template, opts: &Options) -> Result<(Strategy, bool), BadAnnotation> {
    match t.annotation(ANNOTATION_INJECT) {
        None => Ok((opts.strategy, false)),
        Some(v) => Ok((v.parse()?, true)),
    }
}

/// Why native sidecars will not work for this template, if they will not.
pub fn native_unavailable(spec: &Value, opts: &Options) -> Option<String> {
    if let Some((major, minor)) = opts.kubernetes_version
        && (major, minor) < (1, 29)
    {
        return Some(format!(
            "Kubernetes {major}.{minor} has no native sidecars (1.29 or later)"
        ));
    }
    virtual_kubelet(spec).map(|why| {
        format!("the pods target virtual-kubelet nodes ({why}), which run no native sidecars")
    })
}

/// How the template targets virtual-kubelet nodes (serverless platforms: Alibaba ECI,
/// Azure virtual nodes, Huawei CCI, ...), if it does.
pub fn virtual_kubelet(spec: &Value) -> Option<String> {
    if spec["nodeSelector"]["type"] == "virtual-kubelet" {
        return Some("nodeSelector type=virtual-kubelet".into());
    }
    let tolerates = spec["tolerations"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["key"] == "virtual-kubelet.io/provider");
    if tolerates {
        return Some("a toleration of virtual-kubelet.io/provider".into());
    }
    let terms = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    let targets = terms
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|term| term["matchExpressions"].as_array().into_iter().flatten())
        .any(|e| {
            e["key"] == "type"
                && e["operator"] == "In"
                && e["values"]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|x| x == "virtual-kubelet"))
        });
    targets.then(|| "node affinity type In (virtual-kubelet)".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn virtual_kubelet_targets_are_found_and_old_versions_have_no_native_sidecars() {
        for (spec, found) in [
            (json!({}), false),
            (json!({"nodeSelector": {"type": "virtual-kubelet"}}), true),
            (json!({"nodeSelector": {"type": "gpu"}}), false),
            (
                json!({"tolerations": [{"key": "virtual-kubelet.io/provider", "operator": "Exists"}]}),
                true,
            ),
            (json!({"tolerations": [{"key": "other"}]}), false),
            (
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "type", "operator": "In", "values": ["virtual-kubelet"]}]}
                ]}}}}),
                true,
            ),
            (
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["virtual-kubelet"]}]}
                ]}}}}),
                false,
            ),
        ] {
            assert_eq!(virtual_kubelet(&spec).is_some(), found, "{spec}");
        }
        let old = Options {
            kubernetes_version: Some((1, 28)),
            ..Options::default()
        };
        assert!(
            native_unavailable(&json!({}), &old)
                .unwrap()
                .contains("1.28")
        );
        let new = Options {
            kubernetes_version: Some((1, 29)),
            ..Options::default()
        };
        assert_eq!(native_unavailable(&json!({}), &new), None);
    }
}
