//! What the core says about its decisions: the messages of the outcomes and of the signals
//! it sends, and the `Note`s where its actions do not say why.

use std::time::Duration;

use super::Core;
use super::vocabulary::{Cause, DepState, Note};
use crate::config::DeathTrigger;

impl Core {
    pub(super) fn describe_dead(&self, dep: &str) -> String {
        let mut s = format!("death dependency {dep:?} {}", self.describe_death(dep));
        if self.policy.contract.all_deps && self.policy.death_deps.len() > 1 {
            s.push_str(&format!(
                ", and with it all of {}",
                self.policy.death_deps.join(", ")
            ));
        }
        s
    }

    pub(super) fn describe_cause(&self, cause: &Cause) -> String {
        match cause {
            Cause::Dependency(d) => self.describe_dead(d),
            Cause::Signal {
                signal,
                bound: true,
            } => format!(
                "{signal} was held while death dependencies lived ({}) until its bound, the pod's grace period of {} less this container's grace period and 1s",
                self.living_death_deps().join(", "),
                crate::duration::format_go_duration(
                    self.policy
                        .contract
                        .hold
                        .map_or(Duration::ZERO, |h| h.pod_grace)
                )
            ),
            Cause::Signal {
                signal,
                bound: false,
            } => format!("{signal} received and no death dependency lives"),
        }
    }

    /// "died with exit code 3" or "died (exit code unknown)".
    pub(super) fn describe_death(&self, dep: &str) -> String {
        match self.dep_state(dep) {
            DepState::Dead { exit_code: Some(c) } => format!("died with exit code {c}"),
            _ => "died (exit code unknown)".into(),
        }
    }

    /// A death dependency died without stopping the child: under
    /// KUBEXIT_DEATH_TRIGGER=success a failure (it may be restarted), under
    /// KUBEXIT_DEATH_DEPS_MODE=all one of several. Noted, since it looks like a missed death
    /// otherwise.
    pub(super) fn note_death_not_stopping(&mut self, dep: &str, state: &DepState) {
        let DepState::Dead { exit_code } = *state else {
            return;
        };
        if !self.is_death_dep(dep) {
            return;
        }
        let dep = dep.to_string();
        let note = if self.policy.death_trigger == DeathTrigger::Success && exit_code != Some(0) {
            Note::FailureMayRestart { dep, exit_code }
        } else if self.policy.contract.all_deps {
            let waiting = (self.policy.death_deps.iter())
                .filter(|d| !self.is_trigger(self.dep_state(d)))
                .cloned()
                .collect();
            Note::WaitingForAll {
                dep,
                exit_code,
                waiting,
            }
        } else {
            return;
        };
        self.notes.push(note);
    }
}

#[cfg(test)]
mod tests;
