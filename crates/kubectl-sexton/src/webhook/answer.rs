//! An AdmissionReview (`admission.k8s.io/v1`) as the webhook reads and answers it, without
//! kube's generic types: the request's fields the webhook uses, typed, and its object as
//! JSON, parsed in one pass over the body (`oldObject` and the fields not used are skipped,
//! not kept); the answer written directly, its patch in base64 as the API defines it (kube's
//! `AdmissionResponse` writes the patch as a JSON list of numbers, four times its size).

use axum::http::header;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use kube::core::GroupVersionKind;
use kube::core::admission::Operation;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::limits::MAX_ANSWER_BYTES;

/// The review as received.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Review {
    pub api_version: String,
    pub kind: String,
    pub request: Option<Request>,
}

/// The request's fields the webhook uses (`resource` and `userInfo` are required, as the
/// API server always sends them, but not kept).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub uid: String,
    pub kind: GroupVersionKind,
    #[allow(dead_code)]
    resource: IgnoredAny,
    #[serde(default)]
    pub namespace: Option<String>,
    pub operation: Operation,
    #[allow(dead_code)]
    user_info: IgnoredAny,
    /// The object, as JSON (`null` and absent are `None`).
    #[serde(default)]
    pub object: Option<Value>,
    #[serde(default)]
    pub dry_run: bool,
}

/// The answer to one review: always allowed (the webhook never refuses a Pod), with a
/// JSON patch and warnings when there are any.
pub struct Answer {
    api_version: String,
    kind: String,
    uid: String,
    patch: Option<Vec<u8>>,
    pub warnings: Vec<String>,
}

impl Answer {
    /// Admitted unchanged.
    pub fn allowed(review: &Review, request: &Request) -> Self {
        Answer {
            api_version: review.api_version.clone(),
            kind: review.kind.clone(),
            uid: request.uid.clone(),
            patch: None,
            warnings: vec![],
        }
    }

    /// With the patch `ops` (an encoded RFC 6902 patch).
    pub fn with_patch(mut self, ops: Vec<u8>) -> Self {
        self.patch = Some(ops);
        self
    }

    /// The answer without its patch (the warnings kept).
    pub fn unchanged(mut self) -> Self {
        self.patch = None;
        self
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Written<'a> {
    api_version: &'a str,
    kind: &'a str,
    response: WrittenResponse<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WrittenResponse<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let written = Written {
            api_version: &self.api_version,
            kind: &self.kind,
            response: WrittenResponse {
                uid: &self.uid,
                allowed: true,
                patch: self
                    .patch
                    .as_ref()
                    .map(|p| base64::engine::general_purpose::STANDARD.encode(p)),
                patch_type: self.patch.as_ref().map(|_| "JSONPatch"),
                warnings: &self.warnings,
            },
        };
        match serde_json::to_vec(&written) {
            // (the fallback is not checked again: its echoed strings are bounded by the
            // review's check, `limits::echoed_too_long`)
            Ok(body) if body.len() > MAX_ANSWER_BYTES => {
                let why = format!(
                    "sexton: pod admitted unchanged: the answer would be {} bytes, more than the webhook sends ({MAX_ANSWER_BYTES})",
                    body.len()
                );
                let unchanged = Written {
                    response: WrittenResponse {
                        patch: None,
                        patch_type: None,
                        warnings: &[why],
                        ..written.response
                    },
                    ..written
                };
                let body = serde_json::to_vec(&unchanged).unwrap_or_default();
                ([(header::CONTENT_TYPE, "application/json")], body).into_response()
            }
            Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
            // (strings and a bool: cannot fail)
            Err(e) => (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot encode the answer: {e}"),
            )
                .into_response(),
        }
    }
}
