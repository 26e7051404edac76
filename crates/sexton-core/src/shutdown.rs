//! Whether this container's shutdown hooks run now (`KUBEXIT_SHUTDOWN_HOOKS`): after its
//! child exited, unless the hooks wait for other containers too
//! (`KUBEXIT_SHUTDOWN_HOOKS_AFTER`: the mains of a pod whose vendor sidecars only a quit
//! endpoint ends, each naming the others) or for successes only
//! (`KUBEXIT_SHUTDOWN_HOOKS_ON=success`, under restartPolicy OnFailure).
//!
//! Each container records its own death before it reads the others', so of several that
//! end at once the last to record sees every other dead: the hooks run at least once, and
//! may run twice (a quit endpoint that is called again does no harm).

use crate::config::HooksOn;
use crate::machine::DepState;

/// Why the hooks do not run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// `success` only, and the child exited with this code.
    Failed(i32),
    /// A container the hooks wait for has not died (it runs them when it does).
    Waiting(String),
    /// `success` only, and a container the hooks wait for died unsuccessfully (or with no
    /// recorded code): it is restarted, or the Job fails and the pod is ended.
    PeerFailed(String),
}

impl Skip {
    /// The log line's words.
    pub fn explain(&self) -> String {
        match self {
            Skip::Failed(code) => format!(
                "not running the shutdown hooks: the child exited {code} and KUBEXIT_SHUTDOWN_HOOKS_ON=success"
            ),
            Skip::Waiting(name) => format!(
                "not running the shutdown hooks: {name:?} (KUBEXIT_SHUTDOWN_HOOKS_AFTER) has not died; it runs them when it does"
            ),
            Skip::PeerFailed(name) => format!(
                "not running the shutdown hooks: {name:?} (KUBEXIT_SHUTDOWN_HOOKS_AFTER) did not exit 0 and KUBEXIT_SHUTDOWN_HOOKS_ON=success"
            ),
        }
    }
}

/// Whether the hooks run, given the child's exit code and the state of each container they
/// wait for (read after this container's death was recorded).
pub fn hooks_due(on: HooksOn, exit_code: i32, after: &[(String, DepState)]) -> Result<(), Skip> {
    if on == HooksOn::Success && exit_code != 0 {
        return Err(Skip::Failed(exit_code));
    }
    for (name, state) in after {
        match state {
            DepState::Dead { exit_code } => {
                if on == HooksOn::Success && *exit_code != Some(0) {
                    return Err(Skip::PeerFailed(name.clone()));
                }
            }
            // (absent: not started yet; unreadable: not seen dead)
            _ => return Err(Skip::Waiting(name.clone())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dead(code: Option<i32>) -> DepState {
        DepState::Dead { exit_code: code }
    }

    #[test]
    fn the_last_to_die_runs_them_and_success_only_on_successes() {
        let peer = |s: DepState| vec![("b".to_string(), s)];
        for (on, code, after, want) in [
            (HooksOn::Exit, 3, vec![], Ok(())),
            (HooksOn::Success, 3, vec![], Err(Skip::Failed(3))),
            (HooksOn::Success, 0, vec![], Ok(())),
            (
                HooksOn::Exit,
                0,
                peer(DepState::Alive { ready: true }),
                Err(Skip::Waiting("b".into())),
            ),
            (
                HooksOn::Exit,
                0,
                peer(DepState::Absent),
                Err(Skip::Waiting("b".into())),
            ),
            (
                HooksOn::Exit,
                0,
                peer(DepState::Unreadable),
                Err(Skip::Waiting("b".into())),
            ),
            (HooksOn::Exit, 0, peer(dead(Some(1))), Ok(())),
            (HooksOn::Exit, 0, peer(dead(None)), Ok(())),
            (HooksOn::Success, 0, peer(dead(Some(0))), Ok(())),
            (
                HooksOn::Success,
                0,
                peer(dead(Some(1))),
                Err(Skip::PeerFailed("b".into())),
            ),
            (
                HooksOn::Success,
                0,
                peer(dead(None)),
                Err(Skip::PeerFailed("b".into())),
            ),
        ] {
            assert_eq!(hooks_due(on, code, &after), want, "{on:?} {code} {after:?}");
        }
        assert!(
            Skip::Waiting("b".into())
                .explain()
                .contains("KUBEXIT_SHUTDOWN_HOOKS_AFTER")
        );
    }
}
