//! One strategic-merge patch of a pod whose body carries the pod's resourceVersion, as both
//! swapping controllers (the SidecarTerminator, the safety net) send it, and what became of
//! it: the 404 and 409 handling they share; any other failure is the caller's to report.
//! And their reconciliation's shape around it: decide, patch, and on a conflict decide
//! again on the pod as it is now (`decide_and_patch`).

use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::Value;
use tracing::info;

use super::telemetry::{FIELD_MANAGER, key};
use crate::shared::api_error::Error;
use crate::shared::pod::Pod;

/// Patches tried per reconciliation when each one conflicts with another writer.
const MAX_ATTEMPTS: usize = 5;

/// A swapping reconciler's steps for one pod.
pub trait Steps {
    /// What to patch.
    type Step;
    /// Decides (logging the decision and reporting its problems): what to patch, if anything.
    async fn decide(&self, pod: &Pod) -> Option<Self::Step>;
    /// One guarded patch (`send`), its failures reported.
    async fn patch(&self, pod: &Pod, step: &Self::Step) -> Result<Patched, Error>;
    /// Reports a patch that went through.
    async fn done(&self, pod: &Pod, step: &Self::Step);
}

/// Decides on `pod`, patches, and once a patch went through, reports it. A conflict (the
/// pod changed since it was read) means deciding again on the pod as re-read, at most
/// `MAX_ATTEMPTS` times.
// (a trait, not async closures: the workers' futures must be Send, and async closures
// taking a reference are not seen as Send for every lifetime, rustc 1.95)
pub async fn decide_and_patch<S: Steps>(pod: Arc<Pod>, steps: S) -> Result<(), Error> {
    let mut current = pod;
    for attempt in 1..=MAX_ATTEMPTS {
        let Some(step) = steps.decide(&current).await else {
            return Ok(());
        };
        match steps.patch(&current, &step).await? {
            Patched::Done => {
                steps.done(&current, &step).await;
                return Ok(());
            }
            Patched::Gone => return Ok(()),
            Patched::Reread(p) => {
                info!(pod = %key(&*current), resource_version = %rv(&current), attempt, "conflict: the pod changed since it was read; re-reading");
                current = Arc::new(*p);
            }
        }
    }
    Err(Error::StillConflicting {
        object: key(&*current),
        attempts: MAX_ATTEMPTS,
    })
}

/// What became of one patch.
pub enum Patched {
    Done,
    /// The pod is gone: nothing left to do.
    Gone,
    /// It changed since it was read: here it is again.
    Reread(Box<Pod>),
}

/// Why a patch came to nothing.
pub enum Failed {
    /// The API server refused the patch itself (not a 404 or 409).
    Patch(kube::Error),
    /// After a 409, the pod could not be read again.
    Reread(kube::Error),
}

/// Sends `patch` for `pod`: a 404 is `Gone`; a 409 (the pod changed since it was read) calls
/// `conflict` and reads the pod again.
pub async fn send(
    api: &Api<Pod>,
    pod: &Pod,
    patch: &Value,
    conflict: impl FnOnce(),
) -> Result<Patched, Failed> {
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    match api
        .patch(&pod.name_any(), &params, &Patch::Strategic(patch))
        .await
    {
        Ok(_) => Ok(Patched::Done),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Patched::Gone),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            conflict();
            match api.get_opt(&pod.name_any()).await {
                Ok(Some(p)) => Ok(Patched::Reread(Box::new(p))),
                Ok(None) => Ok(Patched::Gone),
                Err(e) => Err(Failed::Reread(e)),
            }
        }
        Err(e) => Err(Failed::Patch(e)),
    }
}

/// The pod's resourceVersion, for the logs.
pub fn rv(pod: &Pod) -> String {
    pod.resource_version().unwrap_or_default()
}
