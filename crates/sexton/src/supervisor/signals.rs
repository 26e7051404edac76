//! The signalfd: a signal for the core, or SIGCHLD, after which every exited process is
//! reaped and the child's and the preStop hook's ends are told to the core.

use std::time::Instant;

use tracing::{debug, info};

use super::Supervisor;
use crate::process;
use sexton_core::machine::{Action, Phase, describe_status};
use sexton_core::signal::Signal;

impl Supervisor {
    /// Every signal pending on the signalfd, in the core's terms.
    pub(super) fn pending_signals(&mut self, now: Instant) -> Vec<Action> {
        let mut actions = vec![];
        while let Some(sig) = self.signals.next() {
            actions.extend(self.on_signal(sig, now));
            if self.core.phase() == &Phase::Finished {
                break;
            }
        }
        actions
    }

    pub(super) fn on_signal(&mut self, sig: Signal, now: Instant) -> Vec<Action> {
        if sig == Signal::SIGCHLD {
            return self.reaped(now);
        }
        info!(signal = %sig, "received signal");
        // Whether to hold a stop signal depends on the dependencies as they are now: read
        // them again rather than trust an inotify event still queued behind the signal.
        let mut actions = vec![];
        if self.core.may_hold(sig) {
            actions = self.rescan(now);
        }
        actions.extend(self.core.on_signal(sig, now));
        actions
    }

    /// SIGCHLD: every exited process reaped; the child's and the hook's ends told to the core.
    pub(super) fn reaped(&mut self, now: Instant) -> Vec<Action> {
        let r = process::reap(self.child.map(|c| c.pid), self.hook.map(|h| h.pid));
        if r.others > 0 {
            debug!(count = r.others, "reaped orphaned processes");
        }
        let mut actions = vec![];
        if let Some(st) = r.hook {
            self.hook = None;
            info!("preStop hook {}", describe_status(st));
            actions.extend(self.core.on_pre_stop_done(now));
        }
        if let Some(st) = r.child {
            self.child = None;
            actions.extend(self.core.on_child_exit(st, now));
        }
        actions
    }
}
