//! The job's time-to-live (`ttlSecondsAfterCreated`, `ttlSecondsAfterFinished`): when it
//! runs out the job is deleted; until then, when the job must be looked at again without an
//! event (`Wake`: a TTL, or the active deadline).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{DeleteParams, Preconditions};
use kube::runtime::controller::Action;
use tracing::info;

use super::ctx::Ctx;
use super::plan::Plan;
use crate::controller::telemetry::key;
use crate::shared::api_error::Error;
use crate::shared::ephemeraljob::{DEFAULT_TTL_AFTER_FINISHED, EphemeralJob};

fn at(t: &Time, secs: i64) -> i64 {
    t.0.as_second() + secs
}

/// The earliest time the job must be looked at again without an event.
#[derive(Default)]
pub struct Wake(Option<Duration>);

impl Wake {
    pub fn at(&mut self, d: Duration) {
        self.0 = Some(self.0.map_or(d, |w| w.min(d)));
    }

    /// After this reconciliation: when a finished job's TTL or a running job's deadline
    /// runs out.
    pub fn at_next_deadline(&mut self, job: &EphemeralJob, p: &Plan, now: &Time) {
        let now = now.0.as_second();
        let secs = |deadline: i64| Duration::from_secs((deadline - now).max(0) as u64);
        if p.finished {
            let (ttl, done) = (
                job.spec
                    .ttl_seconds_after_finished
                    .or(Some(DEFAULT_TTL_AFTER_FINISHED)),
                p.status.completion_time.as_ref(),
            );
            if let (Some(ttl), Some(done)) = (ttl, done) {
                self.at(secs(at(done, ttl.into())));
            }
        } else if let (Some(d), Some(start)) = (
            job.spec.active_deadline_seconds,
            p.status.start_time.as_ref(),
        ) {
            self.at(secs(at(start, d)) + Duration::from_secs(1));
        }
    }

    pub fn action(self) -> Action {
        match self.0 {
            Some(d) => Action::requeue(d.max(Duration::from_millis(200))),
            None => Action::await_change(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub enum Ttl {
    AfterCreated,
    AfterFinished,
}

impl Ttl {
    fn reason(self) -> &'static str {
        match self {
            Ttl::AfterCreated => "TTLAfterCreated",
            Ttl::AfterFinished => "TTLAfterFinished",
        }
    }

    /// When the job expires, in seconds since the epoch, if it has this TTL.
    fn deadline(self, job: &EphemeralJob) -> Option<i64> {
        let (ttl, from) = match self {
            Ttl::AfterCreated => (
                job.spec.ttl_seconds_after_created,
                job.metadata.creation_timestamp.as_ref(),
            ),
            Ttl::AfterFinished => (
                job.spec
                    .ttl_seconds_after_finished
                    .or(Some(DEFAULT_TTL_AFTER_FINISHED)),
                job.status.as_ref().and_then(|s| s.completion_time.as_ref()),
            ),
        };
        Some(at(from?, ttl?.into()))
    }
}

/// Deletes the job if its `ttl` has run out (true: deleted or gone); else notes in `wake`
/// when it will.
pub async fn expired(
    job: &EphemeralJob,
    ctx: &Ctx,
    ttl: Ttl,
    now: &Time,
    wake: &mut Wake,
) -> Result<bool, Error> {
    let Some(deadline) = ttl.deadline(job) else {
        return Ok(false);
    };
    let now = now.0.as_second();
    if now < deadline {
        wake.at(Duration::from_secs((deadline - now) as u64));
        return Ok(false);
    }
    // The UID precondition: never delete a newer job of the same name.
    let dp = DeleteParams {
        preconditions: job.uid().map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..Default::default()
    };
    let why = ttl.reason();
    match ctx
        .api::<EphemeralJob>(job)
        .delete(&job.name_any(), &dp)
        .await
    {
        Ok(_) => {
            ctx.count("delete", why);
            info!(job = %key(job), decision = "delete", "{why}: deleted");
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(true),
        Err(e) => Err(Error::api(key(job), format!("deleting after {why}"), e)),
    }
}
