//! Whether a job's requester stamp can be trusted: the annotation `sexton.dev/requester` is
//! only as good as the ValidatingAdmissionPolicy that keeps it truthful and unchanged
//! (`sexton-ephemeraljob-requester`). Where the policy is not in force (a cluster older than
//! 1.30, `kubectl apply` of the controller alone, a binding that leaves the namespace out),
//! anyone who may update a job could write a more privileged user's name into it, and the
//! controller would then act with that user's rights. So the controller asks the API
//! server, before it acts on a stamp, whether a change of the stamp would be refused in the
//! job's namespace: a server-side dry run (`dryRun=All`, nothing is stored) of that change.
//! Refused by the policy: the stamp is protected. Accepted: it is not, and the job is
//! refused (fail closed). The answer is the admission chain's own, whatever the policy's
//! or the binding's names and selectors. "Protected" is kept per namespace for `FRESH`;
//! "unprotected" is not kept (each such job fails once, and a policy installed after it is
//! trusted at once).

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::fresh::Fresh;
use crate::shared::ephemeraljob::{ANNOTATION_REQUESTER, EphemeralJob};

/// How long a namespace's "protected" is reused: a policy removed stops being trusted
/// within this time.
const FRESH: Duration = Duration::from_secs(30);
/// The most namespaces remembered (past it, the stale ones go first, then the oldest).
const CAPACITY: usize = 4096;
/// The stamp the dry run tries to write: no user is named so.
const PROBE_STAMP: &str = "user=system:sexton:stamp-probe";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stamp {
    /// A change of the stamp is refused by the requester policy.
    Protected,
    /// It is not: why, and what to do.
    Unprotected(String),
}

pub struct StampGuard {
    client: Client,
    protected: Fresh<String, ()>,
}

impl StampGuard {
    pub fn new(client: Client) -> Self {
        StampGuard {
            client,
            protected: Fresh::new(FRESH, CAPACITY),
        }
    }

    /// Whether `job`'s namespace protects requester stamps. An error is the API server's
    /// (unreachable, 5xx, the job gone): the caller retries.
    pub async fn check(&self, job: &EphemeralJob) -> Result<Stamp, kube::Error> {
        let ns = job.namespace().unwrap_or_default();
        if self.protected.get(&ns).is_some() {
            return Ok(Stamp::Protected);
        }
        let api: Api<EphemeralJob> = Api::namespaced(self.client.clone(), &ns);
        let change = json!({"metadata": {"annotations": {ANNOTATION_REQUESTER: PROBE_STAMP}}});
        let dry_run = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        let outcome = api
            .patch(&job.name_any(), &dry_run, &Patch::Merge(change))
            .await;
        let answer = verdict(&ns, outcome)?;
        if answer == Stamp::Protected {
            self.protected.put(ns, ());
        }
        Ok(answer)
    }
}

/// What the dry run's outcome says. Only a refusal that names the annotation is the policy
/// at work; any other refusal (another admission webhook, the controller's own RBAC) leaves
/// the question open, and an open question is answered "unprotected", with its reason.
fn verdict<T>(ns: &str, outcome: Result<T, kube::Error>) -> Result<Stamp, kube::Error> {
    let fix = "install the ValidatingAdmissionPolicy sexton-ephemeraljob-requester and its binding (the chart and deploy/ ship them; Kubernetes 1.30 or later) so that they cover this namespace, then create the job again";
    match outcome {
        Ok(_) => Ok(Stamp::Unprotected(format!(
            "in namespace {ns}, a change of the annotation {ANNOTATION_REQUESTER} is not refused (a server-side dry run of one was accepted): anyone who may update an EphemeralJob could name another user there, so the controller does not act on it; {fix}"
        ))),
        Err(kube::Error::Api(s)) if s.code >= 500 || s.code == 404 || s.code == 429 => {
            Err(kube::Error::Api(s))
        }
        Err(kube::Error::Api(s)) if s.message.contains(ANNOTATION_REQUESTER) => {
            Ok(Stamp::Protected)
        }
        Err(kube::Error::Api(s)) => Ok(Stamp::Unprotected(format!(
            "in namespace {ns}, whether the annotation {ANNOTATION_REQUESTER} can be changed could not be checked: a server-side dry run of a change was refused for another reason ({}; the controller's ClusterRole needs ephemeraljobs patch for it); if the requester policy is not installed, {fix}",
            s.message
        ))),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: u16, message: &str) -> Result<(), kube::Error> {
        let status = kube::core::Status::failure(message, "Invalid").with_code(code);
        Err(kube::Error::Api(Box::new(status)))
    }

    #[test]
    fn only_the_policys_refusal_means_protected() {
        let by_policy = "ValidatingAdmissionPolicy 'sexton-ephemeraljob-requester' with binding 'x' denied request: the annotation sexton.dev/requester cannot be changed";
        assert_eq!(
            verdict("ns", refused(422, by_policy)).unwrap(),
            Stamp::Protected
        );
        let accepted = verdict("ns", Ok(())).unwrap();
        assert!(
            matches!(&accepted, Stamp::Unprotected(m) if m.contains("was accepted")),
            "{accepted:?}"
        );
        let rbac = verdict(
            "ns",
            refused(
                403,
                "ephemeraljobs.sexton.dev \"j\" is forbidden: User \"c\" cannot patch resource",
            ),
        )
        .unwrap();
        assert!(
            matches!(&rbac, Stamp::Unprotected(m) if m.contains("ephemeraljobs patch")),
            "{rbac:?}"
        );
    }

    #[test]
    fn a_server_error_or_a_job_gone_is_asked_again() {
        assert!(verdict("ns", refused(503, "unavailable")).is_err());
        assert!(verdict("ns", refused(404, "not found")).is_err());
        assert!(verdict("ns", refused(429, "too many requests")).is_err());
    }
}
