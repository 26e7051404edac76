//! Why the API server did not take a pod's ephemeral containers, pure: the failure's
//! class (the whole job's, one pod's, or retried), its reason and message, and what it does
//! to the status (`settle.rs`).

use super::settle::Settled;
use crate::shared::ephemeraljob::RequesterError;

/// The job does not say who created it: the controller acts for nobody.
#[derive(Debug, thiserror::Error)]
#[error(
    "the EphemeralJob does not say who created it ({0}): the controller acts only for a known requester; install the sexton webhook (it stamps the creator) and the ValidatingAdmissionPolicy sexton-ephemeraljob-requester, then create the job again"
)]
pub struct UnknownRequester(#[from] RequesterError);

/// Why the API server did not take the containers, and whether retrying can help.
#[derive(Debug)]
pub enum InjectFailure {
    /// 404/405 from the subresource on a pod that exists: no ephemeral containers API.
    Unsupported(kube::Error),
    /// 401/403: the controller may not add ephemeral containers.
    Forbidden(kube::Error),
    /// Another 4xx, an admission denial or a pod over the cap: this pod refused these
    /// containers (`message` says why).
    Refused { pod: String, message: String },
    /// The admin's policy does not allow the template (`policy.rs`).
    Policy(String),
    /// The job does not say (truthfully) who created it: nothing is injected for it.
    NoRequester(UnknownRequester),
    /// The job's namespace lets a stamp be changed: it cannot be trusted.
    StampUnprotected(String),
    /// 5xx, transport errors: retried.
    Transient { pod: String, error: kube::Error },
}

impl InjectFailure {
    pub fn classify(pod: &str, error: kube::Error) -> Self {
        let code = match &error {
            kube::Error::Api(s) => s.code,
            _ => 0,
        };
        let pod = pod.to_string();
        match code {
            404 | 405 => InjectFailure::Unsupported(error),
            401 | 403 => InjectFailure::Forbidden(error),
            400..=499 => InjectFailure::Refused {
                message: format!(
                    "the API server refused the ephemeral containers for pod {pod}: {}",
                    api_message(&error)
                ),
                pod,
            },
            _ => InjectFailure::Transient { pod, error },
        }
    }

    /// A failure of the whole job (no API, no permission, a template the policy
    /// refuses): it goes to phase Error. `Refused` concerns one pod, `Transient` is retried.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            InjectFailure::Unsupported(_)
                | InjectFailure::Forbidden(_)
                | InjectFailure::Policy(_)
                | InjectFailure::NoRequester(_)
                | InjectFailure::StampUnprotected(_)
        )
    }

    /// The reason of the Event and condition, and the `actions_total` label.
    pub fn reason(&self) -> &'static str {
        match self {
            InjectFailure::Unsupported(_) => "EphemeralContainersUnsupported",
            InjectFailure::Forbidden(_) => "Forbidden",
            InjectFailure::Policy(_) => "TemplateRefused",
            InjectFailure::NoRequester(_) => "RequesterUnknown",
            InjectFailure::StampUnprotected(_) => "RequesterUnprotected",
            InjectFailure::Refused { .. } | InjectFailure::Transient { .. } => "InjectFailed",
        }
    }

    pub fn message(&self) -> String {
        match self {
            InjectFailure::Unsupported(e) => format!(
                "the API server has no pods/ephemeralcontainers subresource ({}): ephemeral containers are not available on this cluster",
                api_message(e)
            ),
            InjectFailure::Forbidden(e) => format!(
                "not allowed to add ephemeral containers ({}); the controller's ClusterRole needs pods/ephemeralcontainers patch",
                api_message(e)
            ),
            InjectFailure::Refused { message, .. }
            | InjectFailure::Policy(message)
            | InjectFailure::StampUnprotected(message) => message.clone(),
            InjectFailure::NoRequester(unknown) => unknown.to_string(),
            InjectFailure::Transient { pod, error } => {
                format!("adding ephemeral containers to pod {pod} failed: {error}")
            }
        }
    }
}

impl InjectFailure {
    /// What the failure does to the status, `withdrawn` pods of the batch not injected: a
    /// transient one leaves the pod to the retry, a refusal fails its target, a fatal one
    /// the job.
    pub fn settled(&self, withdrawn: usize) -> Settled {
        match self {
            InjectFailure::Transient { .. } => Settled::NotInjected,
            InjectFailure::Refused { pod, message } => Settled::Refused {
                pod: pod.clone(),
                message: message.clone(),
            },
            fatal => Settled::JobFailed {
                reason: fatal.reason(),
                message: fatal.message(),
                withdrawn,
            },
        }
    }
}

fn api_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::InjectFailure;
    use crate::controller::ejob::settle::Settled;

    fn api_error(code: u16) -> kube::Error {
        let status = kube::core::Status::failure("m", "Reason").with_code(code);
        kube::Error::Api(Box::new(status))
    }

    /// A missing ephemeral-containers API cannot be produced on a 1.34 API server (the
    /// feature is GA and has no gate), so its handling is pinned here.
    #[test]
    fn injection_errors_are_classified() {
        for (code, reason, fatal) in [
            (404, "EphemeralContainersUnsupported", true),
            (405, "EphemeralContainersUnsupported", true),
            (403, "Forbidden", true),
            (422, "InjectFailed", false),
            (500, "InjectFailed", false),
            (503, "InjectFailed", false),
        ] {
            let f = InjectFailure::classify("web-0", api_error(code));
            assert_eq!((f.reason(), f.is_fatal()), (reason, fatal), "{code}");
            assert!(f.message().contains('m'));
            // a fatal one fails the job, a 4xx its pod, a 5xx is retried
            let settled = match f.settled(1) {
                Settled::JobFailed { reason, .. } => reason,
                Settled::Refused { .. } => "refused",
                Settled::NotInjected => "retried",
                Settled::Injected => "injected",
            };
            let want = match code {
                422 => "refused",
                500 | 503 => "retried",
                _ => reason,
            };
            assert_eq!(settled, want, "{code}");
        }
    }
}
