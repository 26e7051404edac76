//! Ahead of a vendor's webhook: a run-to-completion pod (template) that asks for a vendor's
//! injection (the vendor's trigger) and does not have it yet gets the vendor's own switch,
//! read by the vendor's webhook when it injects:
//! - where sexton makes sidecars native, the vendor's native-sidecar switch (Istio's
//!   `sidecar.istio.io/nativeSidecar`, Linkerd's
//!   `config.beta.linkerd.io/proxy-enable-native-sidecar`): the vendor then injects its
//!   sidecar natively itself, with its own start gate and order, which is cleaner than
//!   sexton moving it afterwards (sexton still does, for a vendor that ignores the switch);
//! - where native sidecars cannot run, the annotation that turns the vendor's quit endpoint
//!   on (Vault's `agent-enable-quit`, Linkerd's `proxy-admin-shutdown`), so that the `quit`
//!   mechanism can end the sidecar should it be neither native nor wrapped.
//!
//! An annotation the pod already has (any value: the user's choice) is left as it is. The
//! record lists what was added, and `uninject` removes it.

use serde_json::Value;

use crate::catalogue::{Catalogue, On, run_to_completion};

/// An annotation to set for a vendor's webhook still to come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ahead {
    pub key: String,
    pub value: String,
    pub vendor: String,
}

/// The annotations to set on `pod`, where sidecars are made `native` (or not).
pub fn ahead(pod: &Value, catalogue: &Catalogue, native: bool) -> Vec<Ahead> {
    if !run_to_completion(&pod["spec"]) {
        return vec![];
    }
    let annotations = &pod["metadata"]["annotations"];
    catalogue
        .vendors
        .iter()
        .filter(|v| v.asked(pod) && !v.injected(pod))
        .filter_map(|v| {
            let switch = match native {
                true => v.native_switch.as_ref(),
                false => v.quit.as_ref().and_then(|q| q.enable_annotation.as_ref()),
            }?;
            (switch.on == On::Annotation).then_some(())?;
            let key = switch.key.0.clone();
            if key.contains('*') || !annotations[key.as_str()].is_null() {
                return None;
            }
            Some(Ahead {
                key,
                value: switch.value.clone().unwrap_or_else(|| "true".into()),
                vendor: v.name.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(annotations: Value, labels: Value, policy: &str) -> Value {
        json!({"metadata": {"annotations": annotations, "labels": labels},
               "spec": {"restartPolicy": policy, "containers": [{"name": "main"}]}})
    }

    #[test]
    fn the_vendors_switch_where_it_has_not_injected_yet() {
        let c = Catalogue::default();
        let asked = pod(
            json!({"linkerd.io/inject": "enabled", "vault.hashicorp.com/agent-inject": "true"}),
            json!({"sidecar.istio.io/inject": "true"}),
            "Never",
        );
        let keys = |a: Vec<Ahead>| {
            a.into_iter()
                .map(|a| format!("{}={}", a.key, a.value))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(ahead(&asked, &c, true)),
            [
                "sidecar.istio.io/nativeSidecar=true",
                "config.beta.linkerd.io/proxy-enable-native-sidecar=true"
            ]
        );
        assert_eq!(
            keys(ahead(&asked, &c, false)),
            [
                "config.linkerd.io/proxy-admin-shutdown=enabled",
                "vault.hashicorp.com/agent-enable-quit=true"
            ]
        );
        // injected already, long-running, or the user's own value: nothing
        let injected = pod(
            json!({"vault.hashicorp.com/agent-inject": "true", "vault.hashicorp.com/agent-inject-status": "injected"}),
            json!({}),
            "Never",
        );
        assert!(ahead(&injected, &c, false).is_empty());
        let web = pod(
            json!({"vault.hashicorp.com/agent-inject": "true"}),
            json!({}),
            "Always",
        );
        assert!(ahead(&web, &c, false).is_empty());
        let theirs = pod(
            json!({"vault.hashicorp.com/agent-inject": "true", "vault.hashicorp.com/agent-enable-quit": "false"}),
            json!({}),
            "Never",
        );
        assert!(ahead(&theirs, &c, false).is_empty());
    }
}
