//! Virtual-kubelet nodes (serverless platforms: Alibaba ECI, Azure virtual nodes, ...,
//! labelled `type=virtual-kubelet` as OpenKruise expects, or tainted
//! `virtual-kubelet.io/provider`): they run no native sidecars and no DaemonSets. Reported,
//! with the Jobs and CronJobs of the checked namespaces whose pods go there, by the rule
//! `kubectl sexton inject --strategy auto` uses (`sexton_inject::virtual_kubelet`), by
//! `nodeName`, or by a `nodeSelector` that one of those nodes matches.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, PodTemplateSpec};
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::access::{Access, AccessError, answer};
use super::ctx::{Ctx, Workloads};
use super::manifests::{injected_mechanism, native_sidecars};
use super::report::{Check, Finding, Status};
use super::workloads;

pub const NAME: &str = "virtual-kubelet";

const TAINT: &str = "virtual-kubelet.io/provider";

/// A virtual-kubelet node: its name, labels, and what says it is one.
struct VkNode {
    name: String,
    labels: BTreeMap<String, String>,
}

pub async fn check(ctx: &Ctx) -> Check {
    let nodes = Api::<Node>::all(ctx.client.clone())
        .list(&ListParams::default())
        .await;
    let nodes = match answer(Access::new("list", "nodes"), nodes) {
        Ok(n) => n.items,
        Err(e) => return Check::failed(NAME, "nodes", e.to_string()),
    };
    let vk: Vec<VkNode> = nodes.iter().filter_map(virtual_kubelet).collect();
    if vk.is_empty() {
        return Check::new(NAME, "no virtual-kubelet nodes", vec![]);
    }
    let mut findings: Vec<Finding> = vk
        .iter()
        .map(|n| {
            Finding::new(
                Status::Ok,
                format!("node {}", n.name),
                "virtual-kubelet: no native sidecars and no DaemonSets run there",
            )
        })
        .collect();
    match templates(ctx).await {
        Ok(templates) => {
            for (object, template) in templates {
                if let Some(f) = targeting(&object, &template, &vk) {
                    findings.push(f);
                }
            }
        }
        Err(e) => findings.push(Finding::new(Status::Error, "jobs", e.to_string())),
    }
    let names: Vec<&str> = vk.iter().map(|n| n.name.as_str()).collect();
    let targeting = findings
        .iter()
        .filter(|f| f.object.contains("job "))
        .count();
    Check::new(
        NAME,
        format!(
            "{} virtual-kubelet node(s) ({}); {targeting} Job(s) or CronJob(s) of the checked namespaces target them",
            vk.len(),
            names.join(", ")
        ),
        findings,
    )
}

fn virtual_kubelet(n: &Node) -> Option<VkNode> {
    let labelled = n
        .labels()
        .get("type")
        .is_some_and(|t| t == "virtual-kubelet");
    let tainted = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .any(|t| t.key == TAINT);
    (labelled || tainted).then(|| VkNode {
        name: n.name_any(),
        labels: n.labels().clone(),
    })
}

/// `(job NS/NAME or cronjob NS/NAME, pod template)` of the checked namespaces.
async fn templates(ctx: &Ctx) -> Result<Vec<(String, PodTemplateSpec)>, &AccessError> {
    let Workloads { jobs, cronjobs } = workloads::listed(ctx).await.as_ref()?;
    let object = |kind: &str, o: &dyn ResourceLike| format!("{kind} {}/{}", o.ns(), o.name());
    let mut out = vec![];
    for j in jobs {
        if let Some(spec) = &j.spec {
            out.push((object("job", j), spec.template.clone()));
        }
    }
    for c in cronjobs {
        if let Some(t) = c.spec.as_ref().and_then(|s| s.job_template.spec.as_ref()) {
            out.push((object("cronjob", c), t.template.clone()));
        }
    }
    Ok(out)
}

/// A namespaced object's namespace and name, for Jobs and CronJobs alike.
trait ResourceLike {
    fn ns(&self) -> String;
    fn name(&self) -> String;
}

impl<K: ResourceExt> ResourceLike for K {
    fn ns(&self) -> String {
        self.namespace().unwrap_or_default()
    }
    fn name(&self) -> String {
        self.name_any()
    }
}

/// The finding for a template whose pods go to a virtual-kubelet node, if they do.
fn targeting(object: &str, template: &PodTemplateSpec, vk: &[VkNode]) -> Option<Finding> {
    let template = serde_json::to_value(template).ok()?;
    let spec = &template["spec"];
    let how = sexton_inject::virtual_kubelet(spec)
        .or_else(|| {
            let node = spec["nodeName"].as_str()?;
            vk.iter()
                .any(|n| n.name == node)
                .then(|| format!("nodeName {node}"))
        })
        .or_else(|| {
            let selector = spec["nodeSelector"].as_object().filter(|s| !s.is_empty())?;
            let node = vk.iter().find(|n| {
                selector.iter().all(|(k, v)| {
                    n.labels
                        .get(k)
                        .is_some_and(|l| v.as_str() == Some(l.as_str()))
                })
            })?;
            Some(format!("a nodeSelector node {} matches", node.name))
        })?;
    let containers = spec["containers"].as_array().map_or(0, Vec::len);
    let native = native_sidecars(spec);
    let wrapped = injected_mechanism(&template).as_deref() == Some("wrap");
    let fix = "kubectl sexton inject --strategy wrap -f MANIFEST";
    Some(if wrapped {
        Finding::new(
            Status::Ok,
            object,
            format!(
                "targets virtual-kubelet nodes ({how}); its containers run behind sexton's in-pod supervisor, which works there"
            ),
        )
    } else if !native.is_empty() {
        Finding::new(
            Status::Warning,
            object,
            format!("targets virtual-kubelet nodes ({how}), where its native sidecars {native:?} do not run as sidecars"),
        )
        .fix(fix)
    } else if containers > 1 {
        Finding::new(
            Status::Warning,
            object,
            format!("targets virtual-kubelet nodes ({how}) with {containers} containers: native sidecars do not run there, so only the in-pod supervisor (wrap) can end its sidecars"),
        )
        .fix(fix)
    } else {
        Finding::new(
            Status::Ok,
            object,
            format!("targets virtual-kubelet nodes ({how}); one container, nothing to end"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn node(name: &str, labels: Value, taints: Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints}}),
        )
        .unwrap()
    }

    fn template(spec: Value) -> PodTemplateSpec {
        serde_json::from_value(json!({"spec": spec})).unwrap()
    }

    #[test]
    fn virtual_kubelet_nodes_by_label_or_taint() {
        assert!(
            virtual_kubelet(&node("a", json!({"type": "virtual-kubelet"}), json!([]))).is_some()
        );
        assert!(
            virtual_kubelet(&node(
                "b",
                json!({}),
                json!([{"key": TAINT, "effect": "NoSchedule"}])
            ))
            .is_some()
        );
        assert!(virtual_kubelet(&node("c", json!({"type": "gpu"}), json!([]))).is_none());
    }

    #[test]
    fn jobs_targeting_them() {
        let vk = [VkNode {
            name: "vk-1".into(),
            labels: [
                ("type".to_string(), "virtual-kubelet".to_string()),
                ("zone".into(), "z".into()),
            ]
            .into(),
        }];
        let two = json!([{"name": "main", "image": "a"}, {"name": "proxy", "image": "b"}]);
        let cases = [
            (
                json!({"nodeSelector": {"type": "virtual-kubelet"}, "containers": two}),
                Some(Status::Warning),
            ),
            (
                json!({"nodeName": "vk-1", "containers": two}),
                Some(Status::Warning),
            ),
            (
                json!({"nodeSelector": {"zone": "z"}, "containers": [{"name": "main"}]}),
                Some(Status::Ok),
            ),
            (
                json!({"nodeSelector": {"zone": "other"}, "containers": two}),
                None,
            ),
            (json!({"nodeName": "ordinary", "containers": two}), None),
            (
                json!({"tolerations": [{"key": TAINT, "operator": "Exists"}], "containers": [{"name": "main"}],
                "initContainers": [{"name": "mesh", "restartPolicy": "Always"}]}),
                Some(Status::Warning),
            ),
        ];
        for (spec, want) in cases {
            let f = targeting("job ns/j", &template(spec.clone()), &vk);
            assert_eq!(f.as_ref().map(|f| f.status), want, "{spec}: {f:?}");
        }
        let f = targeting(
            "job ns/j",
            &template(json!({"nodeName": "vk-1", "containers": two})),
            &vk,
        )
        .unwrap();
        assert!(f.message.contains("nodeName vk-1"), "{}", f.message);
        assert_eq!(
            f.fix.as_deref(),
            Some("kubectl sexton inject --strategy wrap -f MANIFEST")
        );
    }
}
