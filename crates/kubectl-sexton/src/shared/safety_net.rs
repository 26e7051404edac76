//! The controller's safety net as a Pod records it: why admission missed the Pod (the
//! [`Cause`]) and which sidecars the net ends, in the annotation `sexton.dev/safety-net`
//! that it writes with its first swap. The controller writes it; `doctor` reads it back.

use serde::{Deserialize, Serialize};

/// The Pod annotation the safety net writes (JSON: [`Record`]).
pub const ANNOTATION_SAFETY_NET: &str = "sexton.dev/safety-net";

/// Why admission did not make the Pod's sidecars end: the `reason` label of
/// `sexton_controller_actions_total{controller="safety-net"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Cause {
    /// No record of sexton's: the webhook serves the Pod but admitted it unchanged (no
    /// replica answered in time, it refused the Pod, or it did not recognise the sidecar).
    NotInjected,
    /// The namespace got the label the webhook selects on after the Pod was created.
    NamespaceLabelledLater,
    /// sexton injected the Pod but took the sidecar for a main: it did not recognise it (a
    /// vendor its catalogue lacks, or recognition off).
    NotRecognised,
    /// sexton injected the Pod, and a sidecar added after that was not ended at the
    /// webhook's re-invocation.
    AddedAfterAdmission,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::NotInjected => "NotInjected",
            Cause::NamespaceLabelledLater => "NamespaceLabelledLater",
            Cause::NotRecognised => "NotRecognised",
            Cause::AddedAfterAdmission => "AddedAfterAdmission",
        }
    }

    /// One sentence: why admission missed the Pod (`detail`: what the controller could
    /// tell besides, such as when the namespace was labelled).
    pub fn explain(self, detail: &str) -> String {
        let what = match self {
            Cause::NotInjected => {
                "sexton's webhook serves this Pod but admitted it unchanged: no replica answered within its timeout (down, restarting, its certificate not yet trusted, over its connection limits), or it refused the Pod (then a Warning InjectRefused Event on the Pod's Job says why: over a limit, a sidecar it cannot end), or it did not recognise the sidecar"
            }
            Cause::NamespaceLabelledLater => {
                "the namespace was labelled for sexton's webhook after the Pod was created"
            }
            Cause::NotRecognised => {
                "sexton's webhook injected the Pod but took the sidecar for a main container: it did not recognise it (a vendor its catalogue lacks, or recognition off)"
            }
            Cause::AddedAfterAdmission => {
                "the sidecar was added after sexton's webhook injected the Pod, and was not ended when the webhook was called again (not recognised, or refused)"
            }
        };
        match detail {
            "" => format!("not injected at admission: {what}"),
            d => format!("not injected at admission: {what} ({d})"),
        }
    }
}

/// The annotation's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub cause: Cause,
    /// The sidecars the net ends, in the order it ends them (the reverse of the Pod's).
    pub sidecars: Vec<String>,
    /// What else it could tell of the cause.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Record {
    /// The record on a Pod with these annotations, if it has a readable one.
    pub fn of(annotations: Option<&std::collections::BTreeMap<String, String>>) -> Option<Record> {
        serde_json::from_str(annotations?.get(ANNOTATION_SAFETY_NET)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_reads_back_and_each_cause_explains_itself() {
        let r = Record {
            cause: Cause::NamespaceLabelledLater,
            sidecars: vec!["logs".into(), "proxy".into()],
            detail: "labelled at 2026-01-01T00:05:00Z".into(),
        };
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"cause":"NamespaceLabelledLater","sidecars":["logs","proxy"],"detail":"labelled at 2026-01-01T00:05:00Z"}"#
        );
        let a = std::collections::BTreeMap::from([(ANNOTATION_SAFETY_NET.to_string(), json)]);
        assert_eq!(Record::of(Some(&a)), Some(r));
        for c in [
            Cause::NotInjected,
            Cause::NamespaceLabelledLater,
            Cause::AddedAfterAdmission,
        ] {
            assert!(c.explain("").starts_with("not injected at admission: "));
            assert!(c.explain("x").ends_with(" (x)"));
        }
    }
}
