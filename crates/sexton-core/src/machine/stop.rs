//! Stopping and restarting the child: the preStop hook, the termination signal, SIGKILL
//! after the grace period, the held stop signal of ordered termination, and the restart of
//! a sidecar whose death dependencies live.

use std::time::{Duration, Instant};

use super::Core;
use super::vocabulary::{
    Action, Cause, ChildStatus, KILL_WAIT, Note, Outcome, Phase, Reason, describe_status,
};
use crate::contract::{Backoff, MIN_GRACE_AFTER_HOOK};
use crate::pre_stop::PreStop;
use crate::signal::Signal;

impl Core {
    /// Stops the child: the preStop hook first when the supervisor decides the stop itself
    /// (`run_hook`; on a signal the kubelet has run it), then the termination signal, then
    /// SIGKILL after the grace period. A child that already received the termination
    /// signal (forwarded while it ran) is not sent it again, nor run the hook: the stop
    /// only sets its deadline. Without a running child (it waits to be restarted, or
    /// exited during a hold), the container ends at once.
    pub(super) fn stop(&mut self, cause: Cause, now: Instant, run_hook: bool) -> Vec<Action> {
        if !self.child_running {
            return self.end_without_child(cause);
        }
        let kill_at = now + self.policy.grace_period;
        let signalled = self.term_delivered;
        let hook = (self.policy.contract.pre_stop.clone()).filter(|_| run_hook && !signalled);
        let hook_until = hook.as_ref().map(|h| match h {
            PreStop::Sleep(d) => (now + *d).min(kill_at),
            _ => kill_at,
        });
        let mut actions = match &hook {
            None if signalled => vec![],
            None => vec![self.term_action(&cause, self.policy.grace_period)],
            Some(PreStop::Sleep(_)) => vec![],
            Some(_) => vec![Action::RunPreStop],
        };
        self.phase = Phase::stopping(cause, hook_until, kill_at, None);
        actions.extend(self.tick(now));
        actions
    }

    /// The stop's termination signal, owed `grace` from the moment it is sent.
    fn term_action(&mut self, cause: &Cause, grace: Duration) -> Action {
        self.term_delivered = true;
        self.term_owed = Some(grace);
        Action::Signal {
            signal: self.policy.term_signal,
            group: self.policy.signal_group,
            why: self.describe_cause(cause),
        }
    }

    /// The preStop hook ended (or its time is up): the termination signal, and at least
    /// `MIN_GRACE_AFTER_HOOK` before SIGKILL, as the kubelet gives.
    pub(super) fn after_hook(&mut self, now: Instant) -> Vec<Action> {
        let Phase::Stopping {
            cause,
            hook_until: Some(_),
            kill_at,
            ..
        } = self.phase.clone()
        else {
            return vec![];
        };
        let mut actions = vec![self.term_action(&cause, MIN_GRACE_AFTER_HOOK)];
        let kill_at = kill_at.max(now + MIN_GRACE_AFTER_HOOK);
        self.phase = Phase::stopping(cause, None, kill_at, None);
        actions.extend(self.tick(now));
        actions
    }

    /// The container ends without a child to stop: exit code as if it had been stopped.
    pub(super) fn end_without_child(&mut self, cause: Cause) -> Vec<Action> {
        let exit_code = self.code_when_stopped(self.last_status);
        let last = self
            .last_status
            .map_or("never ran".to_string(), describe_status);
        let message = format!(
            "{}; the child was not running (it {last}); exiting {exit_code}",
            self.describe_cause(&cause)
        );
        self.finish(Outcome {
            exit_code,
            reason: cause.reason(),
            child_signal: None,
            death_dep: cause.dep(),
            message,
        })
    }

    /// Ordered termination: a stop signal while death dependencies live is held until
    /// they died, at most until the bound that leaves the child its grace period inside
    /// the pod's (`Hold::until`).
    pub(super) fn hold(&mut self, sig: Signal, now: Instant) -> Vec<Action> {
        let Some(hold) = self.policy.contract.hold else {
            return vec![];
        };
        let hook_time =
            (self.policy.contract.pre_stop.as_ref()).map_or(Duration::ZERO, PreStop::known_length);
        let until = hold.until(now, hook_time, self.policy.grace_period);
        let living = self.living_death_deps();
        if living.is_empty() || until <= now {
            let cause = Cause::Signal {
                signal: sig,
                bound: !living.is_empty(),
            };
            return self.stop(cause, now, false);
        }
        self.phase = Phase::Holding { signal: sig, until };
        self.notes.push(Note::Holding {
            signal: sig,
            living,
            bound: until - now,
        });
        vec![]
    }

    /// The hold ends because no death dependency lives any more (or one died, under `any`).
    pub(super) fn release(&mut self, signal: Signal, now: Instant) -> Vec<Action> {
        let cause = match self.dead_death_dep() {
            Some(d) => Cause::Dependency(d),
            None => Cause::Signal {
                signal,
                bound: false,
            },
        };
        self.stop(cause, now, false)
    }

    /// The child cannot be stopped. As PID 1 the container ends with the code it would
    /// have had (the kernel kills the child when PID 1 exits); otherwise the child is left
    /// running, which is an error.
    pub(super) fn give_up(&mut self, cause: Cause, why: String) -> Vec<Action> {
        let because = self.describe_cause(&cause);
        if self.policy.pid1 {
            let exit_code = self.code_when_stopped(None);
            let message = format!(
                "child stopped because {because}, but {why}; exiting {exit_code} as PID 1, which makes the kernel kill the rest of the container"
            );
            return self.finish(Outcome {
                exit_code,
                reason: cause.reason(),
                child_signal: None,
                death_dep: cause.dep(),
                message,
            });
        }
        let message = format!(
            "{because}, but the child could not be stopped: {why}; exiting 1 and leaving it running (sexton is not PID 1, so nothing else will end it)"
        );
        self.finish(Outcome {
            exit_code: 1,
            reason: Reason::ChildNotStopped,
            child_signal: None,
            death_dep: cause.dep(),
            message,
        })
    }

    /// A native sidecar's restart: while its death dependencies live and no stop signal
    /// came.
    pub(super) fn restart_due(&self) -> bool {
        self.policy.contract.restart.is_some()
            && !self.stop_forwarded
            && self.dead_death_dep().is_none()
    }

    /// The kubelet's back-off: at once, then 10 s doubling to 300 s, reset after 10 min.
    pub(super) fn schedule_restart(&mut self, status: ChildStatus, now: Instant) -> Vec<Action> {
        let Some(backoff) = self.policy.contract.restart else {
            return vec![];
        };
        let ran = self
            .started_at
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        let step = Backoff::next_step(self.backoff_step, ran);
        self.backoff_step = Some(step);
        self.restarts = self.restarts.saturating_add(1);
        let delay = backoff.delay(step);
        self.phase = Phase::Restarting { at: now + delay };
        self.notes.push(Note::Restarting {
            status,
            restart: self.restarts,
            delay,
        });
        self.tick(now)
    }

    /// The glue sent `signal` to the child at `at`. The termination signal of a stop is
    /// decided at the `now` of an event, and sent after the glue has handled that event's
    /// other work: on a loaded machine (or under emulation) milliseconds later. The grace
    /// period runs from the signal, not from the decision, so SIGKILL moves accordingly:
    /// the child always gets its whole grace period (after a preStop hook, at least
    /// `MIN_GRACE_AFTER_HOOK`), as the docs and the kubelet promise.
    pub fn signal_sent(&mut self, signal: Signal, at: Instant) {
        if signal != self.policy.term_signal {
            return;
        }
        let Some(grace) = self.term_owed.take() else {
            return;
        };
        if let Phase::Stopping {
            hook_until: None,
            killed: false,
            kill_at,
            ..
        } = &mut self.phase
        {
            *kill_at = (*kill_at).max(at + grace);
        }
    }

    /// Whether `sig` is dropped because the stop under way delivers it already: while the
    /// child is being stopped, its termination signal (sent, or due after the preStop
    /// hook) is not sent a second time. A native sidecar's program gets one SIGTERM from
    /// the kubelet, and many take a second one as "exit now, skip the drain"; under
    /// `native-wrap` the kubelet's SIGTERM reaches a sidecar whose supervisor has
    /// stopped it already. Any other signal is still forwarded (a different stop signal
    /// too: its sender asked for something the child has not been told), and SIGKILL
    /// still follows at the end of the grace period.
    pub fn absorbs(&self, sig: Signal) -> bool {
        matches!(self.phase, Phase::Stopping { .. }) && sig == self.policy.term_signal
    }

    /// Timers: birth timeout, restart back-off, the bound of a hold, the end of a preStop
    /// hook, of the grace period, of the wait after SIGKILL.
    pub fn tick(&mut self, now: Instant) -> Vec<Action> {
        match self.phase.clone() {
            Phase::WaitingBirth { deadline } if now >= deadline => {
                let missing = self.not_ready().join(", ");
                let mut msg = format!(
                    "birth dependencies not ready after {}: {missing}",
                    crate::duration::format_go_duration(self.policy.birth_timeout)
                );
                if let Some(problem) = &self.api_problem {
                    msg.push_str(&format!(
                        "; the Kubernetes API was never reached ({problem})"
                    ));
                }
                msg.push_str("; not starting the child");
                self.not_started(Reason::BirthTimeout, 1, None, msg)
            }
            Phase::Restarting { at } if now >= at => {
                self.phase = Phase::Starting;
                vec![Action::Restart {
                    count: self.restarts,
                }]
            }
            Phase::Holding { signal, until } if now >= until => {
                let cause = Cause::Signal {
                    signal,
                    bound: true,
                };
                self.stop(cause, now, false)
            }
            Phase::Stopping {
                hook_until: Some(h),
                ..
            } if now >= h => self.after_hook(now),
            Phase::Stopping {
                cause,
                hook_until: None,
                kill_at,
                killed: false,
                ..
            } if now >= kill_at => {
                self.phase = Phase::stopping(cause, None, kill_at, Some(now + KILL_WAIT));
                vec![Action::Kill {
                    why: format!(
                        "grace period of {} expired after {}",
                        crate::duration::format_go_duration(self.policy.grace_period),
                        self.policy.term_signal
                    ),
                }]
            }
            Phase::Stopping {
                cause,
                give_up_at: Some(t),
                ..
            } if now >= t => self.give_up(
                cause,
                format!(
                    "the child did not exit within {} after SIGKILL",
                    crate::duration::format_go_duration(KILL_WAIT)
                ),
            ),
            _ => vec![],
        }
    }

    /// SIGKILL could not be delivered (the child runs with other credentials). As PID 1,
    /// exiting ends the child anyway (the kernel kills the rest of the namespace), so end
    /// now; otherwise give the child a last moment to exit, then leave it behind.
    pub fn on_kill_failed(&mut self, problem: String, now: Instant) -> Vec<Action> {
        let Phase::Stopping { cause, kill_at, .. } = self.phase.clone() else {
            return vec![];
        };
        if self.policy.pid1 {
            return self.give_up(cause, format!("SIGKILL failed ({problem})"));
        }
        self.phase = Phase::stopping(cause, None, kill_at, Some(now + KILL_WAIT));
        vec![]
    }
}
