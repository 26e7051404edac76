//! What an EphemeralJob may inject, pure: the cluster admin's policy over its template
//! (no privileged containers, no capabilities beyond Pod Security's baseline, no mounts of
//! a service-account token, images from an allow-list when one is set) and the cap on the
//! ephemeral containers a pod may hold (they stay in the pod until it is recreated).

use crate::shared::ephemeraljob::EphemeralJob;
use crate::shared::pod::Pod;

/// The capabilities Pod Security's `baseline` level lets a container add.
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The name prefix of the service-account token volume the API server adds to pods.
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// The admin's policy (`--ejob-*` flags; chart values `ephemeralJob.*`).
#[derive(Debug, Clone)]
pub struct Policy {
    /// Image prefixes a template may use; empty: any image.
    pub allowed_images: Vec<String>,
    /// Let templates be privileged, add any capability and mount token volumes.
    pub allow_privileged: bool,
    /// Ephemeral containers a pod may hold at most (its own and every job's).
    pub max_per_pod: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            allowed_images: vec![],
            allow_privileged: false,
            max_per_pod: 32,
        }
    }
}

impl Policy {
    /// Why the job's template may not be injected anywhere, if it may not.
    pub fn template_refusal(&self, job: &EphemeralJob) -> Option<String> {
        job.spec
            .template
            .ephemeral_containers
            .iter()
            .find_map(|c| self.container_refusal(c))
    }

    fn container_refusal(
        &self,
        c: &k8s_openapi::api::core::v1::EphemeralContainer,
    ) -> Option<String> {
        let name = &c.name;
        let image = c.image.as_deref().unwrap_or_default();
        if !self.allowed_images.is_empty()
            && !self
                .allowed_images
                .iter()
                .any(|p| image.starts_with(p.as_str()))
        {
            return Some(format!(
                "container {name:?}: image {image:?} is not allowed (--ejob-allowed-images: {})",
                self.allowed_images.join(", ")
            ));
        }
        if self.allow_privileged {
            return None;
        }
        let sc = c.security_context.as_ref();
        if sc.and_then(|s| s.privileged) == Some(true) {
            return Some(format!(
                "container {name:?}: securityContext.privileged is not allowed (--ejob-allow-privileged)"
            ));
        }
        let added = sc
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.add.as_deref())
            .unwrap_or_default();
        if let Some(cap) = added.iter().find(|a| {
            let a = a.trim_start_matches("CAP_");
            !BASELINE_CAPABILITIES.contains(&a)
        }) {
            return Some(format!(
                "container {name:?}: securityContext.capabilities.add {cap:?} is beyond Pod Security's baseline (--ejob-allow-privileged)"
            ));
        }
        let mounts = c.volume_mounts.as_deref().unwrap_or_default();
        if let Some(m) = mounts
            .iter()
            .find(|m| m.name.starts_with(TOKEN_VOLUME_PREFIX))
        {
            return Some(format!(
                "container {name:?}: volumeMounts of the service-account token volume {:?} are not allowed (--ejob-allow-privileged)",
                m.name
            ));
        }
        None
    }

    /// Why `pod` may not take the job's containers, if it may not: it would hold more
    /// ephemeral containers than the cap.
    pub fn pod_refusal(&self, pod: &Pod, job: &EphemeralJob) -> Option<String> {
        let has = pod
            .spec
            .as_ref()
            .and_then(|s| s.ephemeral_containers.as_ref())
            .map_or(0, Vec::len);
        let adds = job.spec.template.ephemeral_containers.len();
        (has + adds > self.max_per_pod).then(|| {
            format!(
                "pod {} holds {has} ephemeral containers; {adds} more would exceed {} (--ejob-max-containers-per-pod; they stay until the pod is recreated)",
                pod.metadata.name.as_deref().unwrap_or_default(),
                self.max_per_pod
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn job(container: serde_json::Value) -> EphemeralJob {
        let mut c = json!({"name": "probe", "image": "busybox:1.36"});
        for (k, v) in container.as_object().unwrap() {
            c[k] = v.clone();
        }
        serde_json::from_value(json!({"apiVersion": "sexton.dev/v1alpha1", "kind": "EphemeralJob",
            "metadata": {"name": "j"}, "spec": {"selector": {}, "template": {"ephemeralContainers": [c]}}}))
        .unwrap()
    }

    #[test]
    fn templates_are_refused_by_the_policy() {
        let p = Policy::default();
        for (c, why) in [
            (
                json!({"securityContext": {"privileged": true}}),
                "privileged",
            ),
            (
                json!({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}),
                "SYS_ADMIN",
            ),
            (
                json!({"securityContext": {"capabilities": {"add": ["CAP_SYS_PTRACE"]}}}),
                "SYS_PTRACE",
            ),
            (
                json!({"volumeMounts": [{"name": "kube-api-access-x1", "mountPath": "/t"}]}),
                "token",
            ),
        ] {
            let r = p.template_refusal(&job(c.clone())).unwrap_or_default();
            assert!(r.contains(why), "{c}: {r}");
        }
        for c in [
            json!({}),
            json!({"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}}),
            json!({"volumeMounts": [{"name": "data", "mountPath": "/d"}]}),
        ] {
            assert_eq!(p.template_refusal(&job(c.clone())), None, "{c}");
        }
        let open = Policy {
            allow_privileged: true,
            ..Policy::default()
        };
        assert_eq!(
            open.template_refusal(&job(json!({"securityContext": {"privileged": true}}))),
            None
        );
        let listed = Policy {
            allowed_images: vec!["registry.example/debug/".into()],
            ..Policy::default()
        };
        assert!(
            listed
                .template_refusal(&job(json!({})))
                .unwrap()
                .contains("not allowed")
        );
        assert_eq!(
            listed.template_refusal(&job(json!({"image": "registry.example/debug/tools:1"}))),
            None
        );
    }

    #[test]
    fn a_full_pod_is_refused() {
        let p = Policy {
            max_per_pod: 2,
            ..Policy::default()
        };
        let pod = |n: usize| -> Pod {
            let ecs: Vec<_> = (0..n).map(|i| json!({"name": format!("e{i}")})).collect();
            serde_json::from_value(
                json!({"metadata": {"name": "web-0"}, "spec": {"ephemeralContainers": ecs}}),
            )
            .unwrap()
        };
        let j = job(json!({}));
        assert_eq!(p.pod_refusal(&pod(1), &j), None);
        assert!(p.pod_refusal(&pod(2), &j).unwrap().contains("holds 2"));
    }
}
