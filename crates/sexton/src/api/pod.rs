//! The pod as the API shows it, for birth dependencies: the requests that read it (a list of
//! it alone, then a watch), and what its object and a watch's events say (`PodView`).

use serde_json::Value;

use super::config::encode;
use super::http;
use sexton_core::config::PodRef;
use sexton_core::machine::PodView;

/// What the pod object says, for birth dependencies: every container of the spec, the
/// ready ones, and those whose termination is final. The pod is read untyped: only these
/// fields are needed, and the typed `Pod` would bring the deserializer of the whole pod
/// spec into the in-pod binary.
///
/// A terminated container is final only if the kubelet will not start it again: never
/// for a native sidecar (an init container with `restartPolicy: Always`), and under the
/// pod's `restartPolicy`: `Never` always, `OnFailure` after exit code 0, `Always` never.
pub fn pod_view(pod: &Value) -> PodView {
    let spec = &pod["spec"];
    let status = &pod["status"];
    let restart = spec["restartPolicy"].as_str().unwrap_or("Always");
    let mut view = PodView::default();
    for key in ["initContainers", "containers"] {
        for c in spec[key].as_array().into_iter().flatten() {
            if let Some(name) = c["name"].as_str() {
                view.containers.push(name.to_string());
            }
        }
    }
    let native_sidecar = |name: &str| {
        spec["initContainers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| {
                c["name"].as_str() == Some(name) && c["restartPolicy"].as_str() == Some("Always")
            })
    };
    for key in ["initContainerStatuses", "containerStatuses"] {
        for c in status[key].as_array().into_iter().flatten() {
            let Some(name) = c["name"].as_str() else {
                continue;
            };
            if c["ready"].as_bool() == Some(true) {
                view.ready.push(name.to_string());
            }
            let Some(term) = c["state"]["terminated"].as_object() else {
                continue;
            };
            let code = term
                .get("exitCode")
                .and_then(|v| v.as_i64())
                .map(|c| c as i32);
            let last = match restart {
                _ if native_sidecar(name) => false,
                "Never" => true,
                "OnFailure" => code == Some(0),
                _ => false,
            };
            if last {
                view.terminated.push((name.to_string(), code));
            }
        }
    }
    view
}

/// A list of the pod alone (field selector on its name). A list, not a GET of the pod: the
/// list's resourceVersion is the current one, from which a watch can start; the pod's own
/// is that of its last change, which the API server may no longer hold (a watch from it is
/// answered 410 Gone, again and again while the pod does not change).
pub fn list_path(pod: &PodRef) -> String {
    format!(
        "/api/v1/namespaces/{}/pods?fieldSelector={}",
        encode(&pod.namespace),
        encode(&format!("metadata.name={}", pod.name))
    )
}

/// The pod of a list of it, and the list's resourceVersion; a list without it is the
/// API's 404, as a GET of a missing pod answers.
pub fn listed(pod: &PodRef, list: Value) -> Result<(Value, String), http::Error> {
    let version = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    match list["items"].as_array().and_then(|items| items.first()) {
        Some(p) => Ok((p.clone(), version)),
        None => Err(http::Error::Status {
            code: 404,
            message: format!("pods {:?} not found", pod.name),
        }),
    }
}

/// A watch of the pod from `version`, which the server ends after `timeout` seconds. The
/// same request as kube-client's `Api::watch` with a field selector on the name.
pub fn watch_path(pod: &PodRef, version: &str, timeout: u32) -> String {
    format!(
        "/api/v1/namespaces/{}/pods?fieldSelector={}&resourceVersion={}&timeoutSeconds={timeout}&watch=true&allowWatchBookmarks=true",
        encode(&pod.namespace),
        encode(&format!("metadata.name={}", pod.name)),
        encode(version)
    )
}

/// What one line of a watch says.
#[derive(Debug, PartialEq)]
pub enum Change {
    /// ADDED, MODIFIED: the pod as it is now.
    Pod(PodView),
    Deleted,
    /// A BOOKMARK: only a newer resourceVersion.
    Bookmark,
    /// An ERROR: the watch is over (410 Gone: its resourceVersion is too old to resume).
    Error {
        code: u16,
        message: String,
    },
}

/// A watch line that is not an event (the stream is read again from a list).
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("unknown watch event type {0:?}")]
    UnknownType(Option<String>),
}

/// One watch event (a JSON line: `{"type": ..., "object": ...}`), and the resourceVersion
/// of its object, from which a watch resumes.
pub fn parse_event(line: &[u8]) -> Result<(Change, Option<String>), EventError> {
    let event: Value = serde_json::from_slice(line).map_err(EventError::NotJson)?;
    let object = &event["object"];
    let version = object["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    let change = match event["type"].as_str() {
        Some("ADDED" | "MODIFIED") => Change::Pod(pod_view(object)),
        Some("DELETED") => Change::Deleted,
        Some("BOOKMARK") => Change::Bookmark,
        Some("ERROR") => {
            // (an ERROR's object is a Status, whose resourceVersion is not the pod's)
            let code = object["code"].as_u64().and_then(|c| u16::try_from(c).ok());
            let message = object["message"].as_str().unwrap_or("").to_string();
            return Ok((
                Change::Error {
                    code: code.unwrap_or(500),
                    message,
                },
                None,
            ));
        }
        other => return Err(EventError::UnknownType(other.map(str::to_string))),
    };
    Ok((change, version))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> PodRef {
        PodRef {
            name: "job-1".into(),
            namespace: "team-a".into(),
        }
    }

    #[test]
    fn pod_view_from_untyped_pod() {
        let view = |restart: &str, statuses: serde_json::Value| -> PodView {
            let p = serde_json::json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {
                    "restartPolicy": restart,
                    "initContainers": [{"name": "native-sidecar", "restartPolicy": "Always"}, {"name": "setup"}],
                    "containers": [{"name": "main"}, {"name": "proxy"}]
                },
                "status": statuses
            });
            pod_view(&p)
        };
        let v = view(
            "Never",
            serde_json::json!({
                "containerStatuses": [
                    {"name": "main", "ready": false, "state": {"running": {}}},
                    {"name": "proxy", "ready": true, "state": {"running": {}}}
                ],
                "initContainerStatuses": [{"name": "native-sidecar", "ready": true}]
            }),
        );
        assert_eq!(v.containers, ["native-sidecar", "setup", "main", "proxy"]);
        assert_eq!(v.ready, ["native-sidecar", "proxy"]);
        assert!(v.terminated.is_empty());
        // which terminations are final
        let ended = serde_json::json!({
            "containerStatuses": [
                {"name": "main", "state": {"terminated": {"exitCode": 0}}},
                {"name": "proxy", "state": {"terminated": {"exitCode": 127}}}
            ],
            "initContainerStatuses": [{"name": "native-sidecar", "state": {"terminated": {"exitCode": 1}}}]
        });
        let names = |v: PodView| {
            v.terminated
                .into_iter()
                .map(|(n, c)| (n, c.unwrap()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(view("Never", ended.clone())),
            [("main".into(), 0), ("proxy".into(), 127)]
        );
        assert_eq!(
            names(view("OnFailure", ended.clone())),
            [("main".into(), 0)]
        );
        assert!(view("Always", ended).terminated.is_empty());
        let empty =
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        assert_eq!(pod_view(&empty), PodView::default());
    }

    #[test]
    fn request_paths() {
        assert_eq!(
            list_path(&pod()),
            "/api/v1/namespaces/team-a/pods?fieldSelector=metadata.name%3Djob-1"
        );
        let list = serde_json::json!({"kind": "PodList", "metadata": {"resourceVersion": "900"}, "items": [{"metadata": {"name": "job-1", "resourceVersion": "12"}}]});
        let (p, version) = listed(&pod(), list).unwrap();
        assert_eq!(
            (p["metadata"]["name"].as_str(), version.as_str()),
            (Some("job-1"), "900"),
            "the list's version, not the pod's"
        );
        let empty = serde_json::json!({"kind": "PodList", "metadata": {"resourceVersion": "900"}, "items": []});
        let e = listed(&pod(), empty).unwrap_err().to_string();
        assert_eq!(e, "HTTP 404: pods \"job-1\" not found");
        assert_eq!(
            watch_path(&pod(), "123", 290),
            "/api/v1/namespaces/team-a/pods?fieldSelector=metadata.name%3Djob-1&resourceVersion=123&timeoutSeconds=290&watch=true&allowWatchBookmarks=true"
        );
    }

    #[test]
    fn watch_events() {
        let pod = br#"{"type":"MODIFIED","object":{"kind":"Pod","metadata":{"name":"job-1","resourceVersion":"42"},"spec":{"containers":[{"name":"main"}]},"status":{"containerStatuses":[{"name":"main","ready":true}]}}}"#;
        let (change, version) = parse_event(pod).unwrap();
        assert_eq!(version.as_deref(), Some("42"));
        let Change::Pod(view) = change else {
            panic!("{change:?}")
        };
        assert_eq!(view.ready, ["main"]);
        let bookmark =
            br#"{"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"57"}}}"#;
        assert_eq!(
            parse_event(bookmark).unwrap(),
            (Change::Bookmark, Some("57".into()))
        );
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2264)","reason":"Expired","code":410}}"#;
        assert_eq!(
            parse_event(gone).unwrap(),
            (
                Change::Error {
                    code: 410,
                    message: "too old resource version: 1 (2264)".into()
                },
                None
            )
        );
        assert!(parse_event(b"{\"type\":\"WHAT\"}").is_err());
        assert!(parse_event(b"not json").is_err());
    }
}
