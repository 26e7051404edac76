//! The status arithmetic after planning, pure. The plan counts the batch it injects as
//! waiting (`plan.rs`); what became of each pod of the batch moves the counts here, and
//! nowhere else: a pod not injected leaves `waiting`, a refused one becomes a failed target
//! (remembered in `refused`), and a failure of the whole job puts it in phase Error.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::shared::ephemeraljob::{EphemeralJobStatus, Phase, REFUSED_CAP, Refused};

/// What became of pods of the batch, as the status counts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// The containers were added: the pod stays counted as waiting.
    Injected,
    /// Not injected this time: the pod changed or went away (re-planned at its next
    /// event), or the API server did not answer (the reconciliation is retried).
    NotInjected,
    /// The pod refused the containers (a 4xx, an admission denial, the per-pod cap): a
    /// failed target, and the job carries on.
    Refused { pod: String, message: String },
    /// The job failed for good (no API, no permission, a template the policy refuses, no
    /// trusted requester): phase Error, sticky. `withdrawn` pods of the batch are not
    /// injected: the one whose injection failed, or the whole batch when the job failed
    /// before any.
    JobFailed {
        reason: &'static str,
        message: String,
        withdrawn: usize,
    },
}

/// The status after `settled`, at `now`, for a job of `generation`.
pub fn settle(
    status: &mut EphemeralJobStatus,
    settled: &Settled,
    now: &Time,
    generation: Option<i64>,
) {
    match settled {
        Settled::Injected => {}
        Settled::NotInjected => status.waiting -= 1,
        Settled::Refused { pod, message } => {
            status.waiting -= 1;
            status.failed += 1;
            let count = status.refused_count.unwrap_or(status.refused.len() as i32) + 1;
            status.refused_count = Some(count);
            if status.refused.len() < REFUSED_CAP {
                status.refused.push(Refused {
                    pod: pod.clone(),
                    message: message.clone(),
                });
            }
        }
        Settled::JobFailed {
            reason,
            message,
            withdrawn,
        } => {
            status.waiting -= *withdrawn as i32;
            status.phase = Some(Phase::Error);
            status.conditions.push(Condition {
                type_: "Error".into(),
                status: "True".into(),
                reason: (*reason).into(),
                message: message.clone(),
                last_transition_time: now.clone(),
                observed_generation: generation,
            });
            status.completion_time = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    /// A plan's status: 4 pods of the batch counted as waiting beside 2 running.
    fn planned() -> EphemeralJobStatus {
        EphemeralJobStatus {
            phase: Some(Phase::Running),
            matched: 6,
            waiting: 4,
            running: 2,
            ..Default::default()
        }
    }

    fn now() -> Time {
        Time(Timestamp::from_second(1_790_000_000).unwrap())
    }

    fn refused(pod: &str) -> Settled {
        Settled::Refused {
            pod: pod.into(),
            message: format!("{pod} said no"),
        }
    }

    #[test]
    fn each_outcome_moves_the_counts_it_concerns() {
        let apply = |settled: &[Settled]| {
            let mut s = planned();
            for x in settled {
                settle(&mut s, x, &now(), Some(3));
            }
            s
        };
        assert_eq!(apply(&[Settled::Injected]), planned());
        let s = apply(&[Settled::Injected, Settled::NotInjected, refused("web-1")]);
        assert_eq!(
            (s.waiting, s.running, s.failed, s.refused_count),
            (2, 2, 1, Some(1))
        );
        assert_eq!(s.refused[0].pod, "web-1");
        assert_eq!(s.phase, Some(Phase::Running));
        assert!(s.conditions.is_empty());
        // the whole batch withdrawn: the job failed before any injection
        let failed = Settled::JobFailed {
            reason: "TemplateRefused",
            message: "privileged".into(),
            withdrawn: 4,
        };
        let s = apply(&[failed]);
        assert_eq!((s.waiting, s.phase), (0, Some(Phase::Error)));
        let c = &s.conditions[0];
        assert_eq!(
            (c.type_.as_str(), c.reason.as_str(), c.message.as_str()),
            ("Error", "TemplateRefused", "privileged")
        );
        assert_eq!(
            (c.last_transition_time.clone(), c.observed_generation),
            (now(), Some(3))
        );
        assert_eq!(s.completion_time, None);
    }

    #[test]
    fn refusals_are_counted_exactly_beyond_the_lists_cap() {
        let mut s = planned();
        s.refused = (0..REFUSED_CAP)
            .map(|i| Refused {
                pod: format!("old-{i}"),
                message: String::new(),
            })
            .collect();
        // (an older status without the count: the list is the count)
        settle(&mut s, &refused("web-1"), &now(), None);
        settle(&mut s, &refused("web-2"), &now(), None);
        assert_eq!(s.refused_count, Some(REFUSED_CAP as i32 + 2));
        assert_eq!(s.refused.len(), REFUSED_CAP, "the list stays capped");
        assert_eq!((s.waiting, s.failed), (2, 2));
    }

    #[test]
    fn a_job_that_had_finished_is_in_phase_error_without_a_completion_time() {
        let mut s = EphemeralJobStatus {
            completion_time: Some(now()),
            phase: Some(Phase::Succeeded),
            waiting: 1,
            ..Default::default()
        };
        let failed = Settled::JobFailed {
            reason: "Forbidden",
            message: "no".into(),
            withdrawn: 1,
        };
        settle(&mut s, &failed, &now(), None);
        assert_eq!(
            (s.phase, s.completion_time, s.waiting),
            (Some(Phase::Error), None, 0)
        );
    }
}
