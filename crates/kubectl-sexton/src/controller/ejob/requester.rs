//! The requester checks: the controller acts only for the user its stamp names
//! (`sexton.dev/requester`), only where the namespace keeps stamps from being changed
//! (`stamp_guard.rs`), only on pods that user could add ephemeral containers to, and writes
//! a target's output into the status only if that user may read it (`access.rs`).

use kube::ResourceExt;

use super::access::Question;
use super::ctx::Ctx;
use super::failure::{InjectFailure, UnknownRequester};
use super::plan::Plan;
use super::stamp_guard::Stamp;
use crate::controller::telemetry::key;
use crate::shared::api_error::Error;
use crate::shared::ephemeraljob::{EphemeralJob, Requester};

/// The user the job acts for (its `sexton.dev/requester` stamp), or why there is none.
fn requester(job: &EphemeralJob) -> Result<Requester, UnknownRequester> {
    Ok(Requester::of(job.metadata.annotations.as_ref())?)
}

/// The user the job acts for, if its stamp says who and the namespace keeps stamps from
/// being changed (`stamp_guard.rs`); else the failure that puts the job in phase Error.
/// An unanswered question about the stamp's protection is retried.
pub async fn trusted_requester(
    job: &EphemeralJob,
    ctx: &Ctx,
) -> Result<Result<Requester, InjectFailure>, Error> {
    let who = match requester(job) {
        Ok(who) => who,
        Err(unknown) => return Ok(Err(InjectFailure::NoRequester(unknown))),
    };
    match ctx.stamps.check(job).await {
        Ok(Stamp::Protected) => Ok(Ok(who)),
        Ok(Stamp::Unprotected(why)) => Ok(Err(InjectFailure::StampUnprotected(why))),
        Err(e) => Err(Error::api(
            key(job),
            "checking that its requester stamp is protected",
            e,
        )),
    }
}

/// Whether the requester may add ephemeral containers to pod `name` themselves (else the
/// pod is a refused target naming the missing right); an unanswered question is retried.
pub async fn requester_may_inject(
    job: &EphemeralJob,
    ctx: &Ctx,
    who: &Requester,
    name: &str,
) -> Result<(), InjectFailure> {
    let ns = job.namespace().unwrap_or_default();
    let q = Question::new(Question::INJECT, &ns, None);
    let right = q.right();
    match ctx.access.may(who, q, name).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(InjectFailure::Refused {
            pod: name.into(),
            message: format!(
                "the requester {:?} may not {right} on pod {ns}/{name}: the controller injects only what the EphemeralJob's creator could (annotation sexton.dev/requester)",
                who.user
            ),
        }),
        Err(error) => Err(InjectFailure::Transient {
            pod: name.into(),
            error,
        }),
    }
}

/// Each target's termination message goes into the status only if the requester may read
/// that container's output (`get pods/log` on the pod): the status is readable by whoever
/// may get the job, and the message is the container's output (or its log's tail).
pub async fn withhold_messages(job: &EphemeralJob, ctx: &Ctx, p: &mut Plan) {
    let ns = job.namespace().unwrap_or_default();
    let who = requester(job).ok();
    for t in p.status.targets.iter_mut().filter(|t| t.message.is_some()) {
        let q = Question::new(Question::READ_OUTPUT, &ns, None);
        let right = q.right();
        let why = match &who {
            None => "the job has no valid requester stamp".to_string(),
            Some(who) => match ctx.access.may(who, q, &t.pod).await {
                Ok(true) => continue,
                Ok(false) => format!(
                    "the requester {:?} may not {right} on pod {ns}/{}",
                    who.user, t.pod
                ),
                Err(e) => format!("cannot check whether the requester may {right} ({e})"),
            },
        };
        t.message = Some(format!("(withheld: {why})"));
    }
}
