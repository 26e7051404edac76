//! The policy's rules, as questions the state machine asks: which dependencies count, when
//! a death stops the child, which exit code a stop gives.

use super::Core;
use super::vocabulary::{ChildStatus, DepState, Phase};
use crate::config::{DeathTrigger, DepExitCode};

impl Core {
    pub(super) fn is_death_dep(&self, name: &str) -> bool {
        self.policy.death_deps.iter().any(|d| d == name)
    }

    /// Birth deps whose readiness comes from their tombstones (none in API mode).
    pub(super) fn tombstone_birth_deps(&self) -> &[String] {
        if self.policy.birth_via_api {
            &[]
        } else {
            &self.policy.birth_deps
        }
    }

    /// Does this dependency state count as the death of a death dependency?
    pub(super) fn is_trigger(&self, s: &DepState) -> bool {
        matches!(
            (s, self.policy.death_trigger),
            (DepState::Dead { .. }, DeathTrigger::Any)
                | (DepState::Dead { exit_code: Some(0) }, DeathTrigger::Success)
        )
    }

    /// The death dependency whose death stops the child, once the policy says it does:
    /// the first that died (kubexit's `any`); under `all`, once every one died, the last
    /// of the list.
    pub(super) fn dead_death_dep(&self) -> Option<String> {
        let deps = &self.policy.death_deps;
        if self.policy.contract.all_deps {
            let all = !deps.is_empty() && deps.iter().all(|d| self.is_trigger(self.dep_state(d)));
            return deps.last().filter(|_| all).cloned();
        }
        deps.iter()
            .find(|d| self.is_trigger(self.dep_state(d)))
            .cloned()
    }

    /// Whether restarts of failed containers are expected (KUBEXIT_DEATH_TRIGGER=success
    /// is for restartPolicy OnFailure).
    pub(super) fn deps_may_restart(&self) -> bool {
        self.policy.death_trigger == DeathTrigger::Success
    }

    /// A birth dependency (read from tombstones) whose death is final: it will not become
    /// ready. Where restarts are expected, only an exit with 0 is final.
    pub(super) fn dead_birth_dep(&self) -> Option<String> {
        self.tombstone_birth_deps()
            .iter()
            .find(|d| match self.dep_state(d) {
                DepState::Dead { exit_code } => !self.deps_may_restart() || *exit_code == Some(0),
                _ => false,
            })
            .cloned()
    }

    /// Whether the child is between two runs (a stop signal then means: no more runs).
    pub(super) fn between_runs(&self) -> bool {
        matches!(self.phase, Phase::Restarting { .. })
            || (self.phase == Phase::Starting && self.restarts > 0)
    }

    pub(super) fn code_when_stopped(&self, status: Option<ChildStatus>) -> i32 {
        match (self.policy.dep_exit_code, status) {
            (DepExitCode::Zero, _) => 0,
            (DepExitCode::Child, Some(s)) => s.code(),
            // never started, or never reaped: as if the termination signal had ended it
            (DepExitCode::Child, None) => 128 + self.policy.term_signal.number(),
        }
    }
}
