//! The checked namespaces' run-to-completion pods that are not done yet, as the
//! injected-sidecar rules read them: listed once for the checks that need them
//! (`injected-sidecars`, and `stuck-pods` to name a vendor), page by page, each reduced as
//! it comes (`reduced.rs`: a cluster's pods, whole, can be gigabytes).

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use super::access::{Access, AccessError, answer};
use super::ctx::Ctx;
use super::reduced::{RunPod, annotation_keys, reduce};

/// Pods per list request.
const PAGE: u32 = 500;

/// The pods (the first check to ask lists them; the others get the same answer).
pub async fn running(ctx: &Ctx) -> &Result<Vec<RunPod>, AccessError> {
    ctx.pods.get_or_init(|| list(ctx)).await
}

async fn list(ctx: &Ctx) -> Result<Vec<RunPod>, AccessError> {
    let ns = ctx.namespaces.one();
    let api = match ns {
        Some(ns) => Api::<Pod>::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    let keys = annotation_keys(&ctx.catalogue);
    let mut pods = vec![];
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default()
            .fields("status.phase!=Succeeded,status.phase!=Failed")
            .limit(PAGE);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = answer(Access::new("list", "pods").in_ns(ns), api.list(&lp).await)?;
        pods.extend(
            page.items
                .into_iter()
                .filter_map(|p| serde_json::to_value(p).ok())
                .filter_map(|p| reduce(&p, &keys)),
        );
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(pods);
        }
    }
}
