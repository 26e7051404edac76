//! sexton's own components (the chart, deploy/), found by their labels whatever the Helm
//! release is named: the controller and webhook Deployments running and ready, the EphemeralJob CRD installed at the version this binary serves, and the
//! webhook's certificates (the caBundle the API server trusts, the serving certificate in
//! its Secret) valid for more than `--cert-days`. A component that is not installed is
//! not a fault (each is optional); one installed and not working is.

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::{Api, CustomResourceExt, Resource, ResourceExt};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::access::{Access, AccessError, answer, optional};
use super::ctx::Ctx;
use super::report::{Check, Finding, Status};
use super::webhooks;
use crate::shared::certs::not_after;
use crate::shared::components::{self, Part};
use crate::shared::ephemeraljob::EphemeralJob;

pub const NAME: &str = "components";

const DAY: i64 = 86_400;

pub async fn check(ctx: &Ctx) -> Check {
    let mut findings = vec![];
    let mut webhooks = vec![];
    for part in [Part::Controller, Part::Webhook] {
        match deployments(ctx, part).await {
            Ok((mut f, found)) => {
                findings.append(&mut f);
                if part == Part::Webhook {
                    webhooks = found;
                }
            }
            Err(e) => findings.push(refused(e)),
        }
    }
    findings.push(crd(ctx).await.unwrap_or_else(refused));
    match certificates(ctx, &webhooks).await {
        Ok(mut f) => findings.append(&mut f),
        Err(e) => findings.push(refused(e)),
    }
    let summary = match findings.iter().map(|f| f.status).max() {
        Some(Status::Ok) | None => "every installed component works",
        Some(Status::Warning) => "a component needs attention",
        Some(Status::Error) => "a component is broken or could not be checked",
    };
    Check::new(NAME, summary, findings)
}

fn refused(e: AccessError) -> Finding {
    refused_ref(&e)
}

/// A refusal the checks share (the configurations' list).
fn refused_ref(e: &AccessError) -> Finding {
    let object = match e {
        AccessError::Forbidden { access, .. } | AccessError::Failed { access, .. } => {
            access.resource.to_string()
        }
    };
    Finding::new(Status::Error, object, e.to_string())
}

/// The Deployments of `part` in `--sexton-namespace`, found by label whatever the release
/// name: a finding for each (or one saying none is installed), and the Deployments.
async fn deployments(
    ctx: &Ctx,
    part: Part,
) -> Result<(Vec<Finding>, Vec<Deployment>), AccessError> {
    let ns = &ctx.sexton_namespace;
    let access = Access::new("list", "deployments.apps").in_ns(Some(ns));
    let found = answer(access, components::deployments(&ctx.client, ns, part).await)?;
    if found.is_empty() {
        let object = format!("{} in namespace {ns}", part.label());
        let message = format!("not installed (no Deployment labelled {})", part.selector());
        return Ok((vec![Finding::new(Status::Ok, object, message)], found));
    }
    let findings = found
        .iter()
        .map(|d| readiness(d, ns, &d.name_any()))
        .collect();
    Ok((findings, found))
}

/// Ready replicas against those asked for.
fn readiness(d: &Deployment, ns: &str, name: &str) -> Finding {
    let object = format!("deployment {ns}/{name}");
    let fix = format!("kubectl describe deployment -n {ns} {name}");
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let ready = d
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    let message = format!("{ready}/{want} replicas ready");
    if want > 0 && ready >= want {
        Finding::new(Status::Ok, object, message)
    } else if ready > 0 {
        Finding::new(Status::Warning, object, message).fix(fix)
    } else {
        Finding::new(Status::Error, object, message).fix(fix)
    }
}

async fn crd(ctx: &Ctx) -> Result<Finding, AccessError> {
    let name = EphemeralJob::crd_name();
    let access = Access::new("get", "customresourcedefinitions.apiextensions.k8s.io").named(name);
    let got = Api::<CustomResourceDefinition>::all(ctx.client.clone())
        .get(name)
        .await;
    let object = format!("crd {name}");
    Ok(match optional(access, got)? {
        None => Finding::new(
            Status::Ok,
            object,
            "not installed (only EphemeralJobs need it)",
        ),
        Some(crd) => crd_version(&crd, object),
    })
}

/// Whether the installed CRD serves (and stores) the version this binary reads, as
/// `kubectl-sexton crd` prints it.
fn crd_version(crd: &CustomResourceDefinition, object: String) -> Finding {
    let expected = EphemeralJob::version(&());
    let served: Vec<&str> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.as_str())
        .collect();
    let stored = crd
        .spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.as_str());
    let established = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Established" && c.status == "True");
    let fix = "kubectl sexton crd | kubectl apply --server-side -f -";
    if !established {
        return Finding::new(Status::Error, object, "installed but not Established").fix(fix);
    }
    if served.contains(&expected.as_ref()) && stored == Some(expected.as_ref()) {
        Finding::new(
            Status::Ok,
            object,
            format!("{expected}, as this kubectl-sexton serves it"),
        )
    } else {
        Finding::new(
            Status::Warning,
            object,
            format!(
                "serves {served:?} (stores {}), this kubectl-sexton expects {expected}",
                stored.unwrap_or("none")
            ),
        )
        .fix(fix)
    }
}

/// The caBundle of each of sexton's MutatingWebhookConfigurations (labelled as the chart
/// labels them) and the serving certificate in the Secret each webhook Deployment uses
/// (its `--tls-secret`, else its `tls` volume), if that Secret exists.
async fn certificates(ctx: &Ctx, webhooks: &[Deployment]) -> Result<Vec<Finding>, AccessError> {
    let all = match webhooks::configurations(ctx).await {
        Ok(all) => all,
        Err(e) => return Ok(vec![refused_ref(e)]),
    };
    let now = Timestamp::now().as_second();
    let days = ctx.cert_days;
    let configs = components::webhook_configurations(all);
    let mut findings = vec![];
    if configs.is_empty() {
        findings.push(Finding::new(
            Status::Ok,
            "mutatingwebhookconfiguration",
            format!("not installed (none labelled {})", Part::Webhook.selector()),
        ));
    }
    for config in configs {
        let object = format!("mutatingwebhookconfiguration {}", config.name_any());
        for hook in config.webhooks.iter().flatten() {
            let what = format!("{object}: webhook {} caBundle", hook.name);
            findings.push(match &hook.client_config.ca_bundle {
                None => Finding::new(
                    Status::Error,
                    what,
                    "empty: the API server cannot trust the webhook (with --self-managed-tls the webhook writes it when it starts; with cert-manager, its CA injector)",
                ),
                Some(ByteString(pem)) => validity(pem, what, now, days),
            });
        }
    }
    let ns = &ctx.sexton_namespace;
    let mut secrets: Vec<String> = webhooks
        .iter()
        .filter_map(components::webhook_tls_secret)
        .collect();
    secrets.sort();
    secrets.dedup();
    for name in secrets {
        let access = Access::new("get", "secrets").in_ns(Some(ns)).named(&name);
        let got = Api::<Secret>::namespaced(ctx.client.clone(), ns)
            .get(&name)
            .await;
        if let Some(secret) = optional(access, got)? {
            let what = format!("secret {ns}/{name} tls.crt");
            let crt = secret.data.as_ref().and_then(|d| d.get("tls.crt"));
            findings.push(match crt {
                None => Finding::new(Status::Error, what, "no tls.crt in it"),
                Some(ByteString(pem)) => validity(pem, what, now, days),
            });
        }
    }
    Ok(findings)
}

/// How long the first (leaf, or CA) certificate of a PEM bundle has left: an error if
/// expired or unreadable, a warning under `days` days.
pub fn validity(pem: &[u8], object: String, now: i64, days: u32) -> Finding {
    let der = CertificateDer::pem_slice_iter(pem)
        .next()
        .and_then(Result::ok);
    let Some(der) = der else {
        return Finding::new(Status::Error, object, "no PEM certificate in it");
    };
    let expires = match not_after(&der, &object) {
        Ok(t) => t,
        Err(e) => return Finding::new(Status::Error, object, e.to_string()),
    };
    let left = (expires - now) / DAY;
    let until = Timestamp::from_second(expires)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_else(|_| expires.to_string());
    let renew = "renew it: with --self-managed-tls, restart the webhook (it renews 60 days before expiry); with cert-manager, see its Certificate";
    if expires <= now {
        Finding::new(Status::Error, object, format!("expired on {until}")).fix(renew)
    } else if left < i64::from(days) {
        Finding::new(
            Status::Warning,
            object,
            format!("expires on {until}, in {left} day(s) (under {days})"),
        )
        .fix(renew)
    } else {
        Finding::new(
            Status::Ok,
            object,
            format!("valid until {until} ({left} days)"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(want: i32, ready: Option<i32>) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "sexton-controller", "namespace": "sexton-system"},
            "spec": {"replicas": want, "selector": {}, "template": {}},
            "status": {"readyReplicas": ready},
        }))
        .unwrap()
    }

    #[test]
    fn deployments_ready_partly_or_not_at_all() {
        let r = |d: &Deployment| readiness(d, "sexton-system", "sexton-controller");
        assert_eq!(r(&deployment(2, Some(2))).status, Status::Ok);
        assert_eq!(r(&deployment(2, Some(1))).status, Status::Warning);
        let none = r(&deployment(2, None));
        assert_eq!(
            (none.status, none.message.as_str()),
            (Status::Error, "0/2 replicas ready")
        );
        assert_eq!(
            none.fix.as_deref(),
            Some("kubectl describe deployment -n sexton-system sexton-controller")
        );
    }

    #[test]
    fn crd_versions() {
        let crd = |versions: serde_json::Value, established: &str| -> CustomResourceDefinition {
            serde_json::from_value(json!({
                "metadata": {"name": "ephemeraljobs.sexton.dev"},
                "spec": {"group": "sexton.dev", "names": {"kind": "EphemeralJob", "plural": "ephemeraljobs"},
                    "scope": "Namespaced", "versions": versions},
                "status": {"conditions": [{"type": "Established", "status": established}]},
            }))
            .unwrap()
        };
        let v =
            |name: &str, storage: bool| json!({"name": name, "served": true, "storage": storage});
        let o = || "crd".to_string();
        assert_eq!(
            crd_version(&crd(json!([v("v1alpha1", true)]), "True"), o()).status,
            Status::Ok
        );
        assert_eq!(
            crd_version(&crd(json!([v("v1alpha1", true)]), "False"), o()).status,
            Status::Error
        );
        let old = crd_version(&crd(json!([v("v0", true)]), "True"), o());
        assert_eq!(old.status, Status::Warning);
        assert!(old.message.contains("expects v1alpha1"), "{}", old.message);
    }

    #[test]
    fn certificate_validity() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["x".into()]).unwrap();
        params.not_before = time::OffsetDateTime::from_unix_timestamp(1_000_000_000).unwrap();
        params.not_after =
            time::OffsetDateTime::from_unix_timestamp(1_000_000_000 + 40 * DAY).unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        let at = |day: i64| validity(pem.as_bytes(), "c".into(), 1_000_000_000 + day * DAY, 30);
        assert_eq!(at(0).status, Status::Ok);
        assert!(at(0).message.contains("(40 days)"), "{}", at(0).message);
        assert_eq!(at(20).status, Status::Warning);
        assert_eq!(at(41).status, Status::Error);
        assert_eq!(validity(b"junk", "c".into(), 0, 30).status, Status::Error);
    }
}
