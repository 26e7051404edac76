//! `POST /mutate/ephemeraljobs`: stamps who creates an EphemeralJob into its annotation
//! `sexton.dev/requester` (from the review's `userInfo`, which the API server fills in and
//! the client cannot choose), over anything the client wrote there. The controller acts
//! only within that user's rights; the ValidatingAdmissionPolicy
//! `sexton-ephemeraljob-requester` checks the stamp again after every mutation, so a
//! cluster without this webhook still gets a truthful one (the client writes it).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use serde_json::json;
use tracing::warn;

use super::limits::echoed_too_long;
use super::review::Reviewer;
use crate::shared::ephemeraljob::{ANNOTATION_REQUESTER, Requester};

pub async fn stamp(State(reviewer): State<Arc<Reviewer>>, request: Request) -> Response {
    let taken = match reviewer.take(request, &reviewer.stamps).await {
        Ok(taken) => taken,
        Err(refused) => return refused,
    };
    let answer = stamp_read(&reviewer, &taken.body);
    drop(taken.body);
    // (in the turn: see review.rs)
    let sent = taken
        .reply
        .send(answer, &reviewer.stamps.answers, taken.room)
        .await;
    drop(taken.turn);
    sent
}

/// The answer to a review whose body was read.
fn stamp_read(reviewer: &Reviewer, body: &[u8]) -> Response {
    let started = Instant::now();
    let request = serde_json::from_slice::<AdmissionReview<DynamicObject>>(body)
        .map_err(|e| format!("not an AdmissionReview: {e}"))
        .and_then(|r| {
            TryInto::<AdmissionRequest<DynamicObject>>::try_into(r)
                .map_err(|e| format!("no request in the AdmissionReview: {e}"))
        });
    let request = match request {
        Ok(r) => r,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    let (types, uid) = (&request.types, &request.uid);
    if let Some(why) = echoed_too_long(&types.api_version, &types.kind, uid) {
        return (StatusCode::BAD_REQUEST, why).into_response();
    }
    let (response, result) = stamped(&request);
    reviewer.metrics.reviewed(result, started.elapsed());
    axum::Json(response.into_review()).into_response()
}

/// The answer: a CREATE of an EphemeralJob gets the stamp; anything else passes unchanged
/// (the policy forbids changing the stamp later).
fn stamped(request: &AdmissionRequest<DynamicObject>) -> (AdmissionResponse, &'static str) {
    let allowed = AdmissionResponse::from(request);
    let Some(job) = request.object.as_ref() else {
        return (allowed, "skipped");
    };
    if request.operation != Operation::Create || request.kind.kind != "EphemeralJob" {
        return (allowed, "skipped");
    }
    let stamp = Requester::from_user_info(&request.user_info).stamp();
    let op = match job.metadata.annotations {
        Some(_) => json!({"op": "add", "value": stamp,
                          "path": format!("/metadata/annotations/{}", ANNOTATION_REQUESTER.replace('/', "~1"))}),
        None => json!({"op": "add", "path": "/metadata/annotations",
                       "value": {ANNOTATION_REQUESTER: stamp}}),
    };
    let patch: json_patch::Patch = serde_json::from_value(json!([op])).expect("a valid patch");
    match AdmissionResponse::from(request).with_patch(patch) {
        Ok(r) => (r, "stamped"),
        Err(e) => {
            // (the policy then refuses the job, unless the client stamped it truthfully)
            warn!("cannot encode the requester patch ({e}); admitting unchanged");
            (allowed, "error")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(annotations: serde_json::Value, operation: &str) -> AdmissionRequest<DynamicObject> {
        let r: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "1", "operation": operation, "namespace": "ns", "name": "j",
                "kind": {"group": "sexton.dev", "version": "v1alpha1", "kind": "EphemeralJob"},
                "resource": {"group": "sexton.dev", "version": "v1alpha1", "resource": "ephemeraljobs"},
                "userInfo": {"username": "alice", "groups": ["devs", "system:authenticated"]},
                "object": {"apiVersion": "sexton.dev/v1alpha1", "kind": "EphemeralJob",
                           "metadata": {"name": "j", "namespace": "ns", "annotations": annotations}},
            }
        }))
        .unwrap();
        r.try_into().unwrap()
    }

    fn patch_of(r: &AdmissionResponse) -> serde_json::Value {
        serde_json::from_slice(r.patch.as_deref().unwrap()).unwrap()
    }

    #[test]
    fn a_create_is_stamped_over_what_the_client_wrote() {
        let (r, result) = stamped(&review(
            json!({"sexton.dev/requester": "user=admin"}),
            "CREATE",
        ));
        assert_eq!(result, "stamped");
        let p = patch_of(&r);
        assert_eq!(
            p[0]["path"], "/metadata/annotations/sexton.dev~1requester",
            "{p}"
        );
        assert_eq!(
            p[0]["value"],
            "user=alice\ngroup=devs\ngroup=system:authenticated"
        );
        let (r, _) = stamped(&review(serde_json::Value::Null, "CREATE"));
        assert_eq!(
            patch_of(&r)[0]["value"][ANNOTATION_REQUESTER],
            "user=alice\ngroup=devs\ngroup=system:authenticated"
        );
    }

    #[test]
    fn an_update_is_left_to_the_policy() {
        let (r, result) = stamped(&review(json!({}), "UPDATE"));
        assert_eq!((r.patch.is_none(), result), (true, "skipped"));
    }
}
