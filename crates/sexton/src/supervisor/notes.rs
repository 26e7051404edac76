//! The core's notes, logged as they come: why it waits, holds, restarts or drops a signal,
//! in its own words. Nothing here works out a reason.

use tracing::info;

use sexton_core::duration::format_go_duration;
use sexton_core::machine::{Note, describe_status};

/// One log line for `note`.
pub fn say(note: &Note) {
    match note {
        Note::WaitingForBirth { not_ready, timeout } => info!(
            not_ready = ?not_ready,
            timeout = %format_go_duration(*timeout),
            "waiting for birth dependencies to be ready"
        ),
        Note::FailureMayRestart { dep, exit_code } => info!(
            dep = dep.as_str(),
            "death dependency {dep:?} died with exit code {}; not stopping the child (KUBEXIT_DEATH_TRIGGER=success: it may be restarted)",
            code(*exit_code)
        ),
        Note::WaitingForAll {
            dep,
            exit_code,
            waiting,
        } => info!(
            dep = dep.as_str(),
            "death dependency {dep:?} died with exit code {}; the child is stopped once all have died (KUBEXIT_DEATH_DEPS_MODE=all), waiting for {}",
            code(*exit_code),
            waiting.join(", ")
        ),
        Note::Restarting {
            status,
            restart,
            delay,
        } => {
            let when = match delay.is_zero() {
                true => "at once".to_string(),
                false => format!("in {}", format_go_duration(*delay)),
            };
            info!(
                restarts = restart,
                "child {}; restarting it {when} (restart {restart}; the death dependencies are alive)",
                describe_status(*status)
            )
        }
        Note::ExitedWhileHeld { status } => info!(
            "child {} while a stop signal is held; not restarting it, waiting for the death dependencies to die",
            describe_status(*status)
        ),
        Note::Holding {
            signal,
            living,
            bound,
        } => info!(
            "holding {signal}: death dependencies {} still alive; the child is stopped once they died, at the latest in {}",
            living.join(", "),
            format_go_duration(*bound)
        ),
        Note::Absorbed { signal } => info!(
            "{signal}: the child is being stopped already and gets {signal} once (sent, or due after the preStop hook); not sent again, SIGKILL still follows the grace period"
        ),
        Note::Dropped { signal } => {
            info!(signal = %signal, "no child yet: {signal} is not a stop signal; dropped")
        }
    }
}

/// An exit code, or "unknown" when its container could not record it.
fn code(exit_code: Option<i32>) -> String {
    exit_code.map_or("unknown".to_string(), |c| c.to_string())
}
