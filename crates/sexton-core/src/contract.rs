//! The sidecar contract's rules (pure): what a native sidecar (KEP-753) promises, as
//! settings of the supervisor. All are off by default, so a hand-written kubexit
//! configuration behaves as kubexit's does; `kubectl sexton inject` turns them on for
//! sidecars.
//!
//! - `all_deps`: the child is stopped once *every* death dependency died (kubexit: any);
//! - `hold`: a stop signal received while a death dependency is alive is held until they
//!   all died, bounded by the pod's grace period (ordered termination);
//! - `restart`: a child that exits while its death dependencies are alive is started
//!   again, with the kubelet's back-off;
//! - `pre_stop`: the container's preStop hook, run before the termination signal when the
//!   supervisor stops the child itself (the kubelet runs it on pod deletion).

use std::time::{Duration, Instant};

use crate::pre_stop::PreStop;

/// The room left at the end of a held stop, after the child's own grace period: for
/// recording the death and exiting, and for the clocks of the kubelet and the supervisor
/// not agreeing to the millisecond on when the pod's grace period began.
pub const HOLD_MARGIN: Duration = Duration::from_secs(1);

/// After a preStop hook, the child gets at least this long between the termination signal
/// and SIGKILL, whatever the hook took: the kubelet's own minimum
/// (`minimumGracePeriodInSeconds`).
pub const MIN_GRACE_AFTER_HOOK: Duration = Duration::from_secs(2);

/// Once the child has run this long, its next exit is restarted at once again (the
/// kubelet's back-off reset).
pub const BACKOFF_RESET: Duration = Duration::from_secs(600);

/// The back-off grows up to this many times its base (300 s for the kubelet's 10 s).
pub const BACKOFF_MAX_FACTOR: u32 = 30;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contract {
    pub all_deps: bool,
    pub hold: Option<Hold>,
    pub restart: Option<Backoff>,
    pub pre_stop: Option<PreStop>,
}

/// Ordered termination: how long a stop signal may be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// The pod's `terminationGracePeriodSeconds`: the kubelet SIGKILLs the container this
    /// long after it began to stop the pod.
    pub pod_grace: Duration,
}

impl Hold {
    /// Until when a stop signal received at `signal_at` may be held, so that the child
    /// still gets its whole `grace` (and the margin) before the pod's grace period ends.
    ///
    /// The kubelet began the pod's grace period before the signal: by the time of this
    /// container's preStop hook, which it runs first (`hook_time`: known for a `sleep`
    /// hook, counted as nothing for the others, whose length the supervisor cannot see).
    /// Never before `signal_at`: a grace period too short to hold in is no hold.
    pub fn until(&self, signal_at: Instant, hook_time: Duration, grace: Duration) -> Instant {
        let budget = self
            .pod_grace
            .saturating_sub(hook_time)
            .saturating_sub(grace)
            .saturating_sub(HOLD_MARGIN);
        signal_at + budget
    }
}

/// The kubelet's restart back-off for a crashing container: the first restart at once,
/// then `base`, doubling up to `BACKOFF_MAX_FACTOR` × `base` (10 s to 300 s for the
/// kubelet), and at once again after a run of `BACKOFF_RESET`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
}

impl Backoff {
    /// The delay before restart number `step` since the last reset (0: the first).
    pub fn delay(&self, step: u32) -> Duration {
        if step == 0 {
            return Duration::ZERO;
        }
        let max = self.base * BACKOFF_MAX_FACTOR;
        let factor = 1u32.checked_shl(step - 1).unwrap_or(u32::MAX);
        self.base.checked_mul(factor).unwrap_or(max).min(max)
    }

    /// The step of the next restart, given the previous one and how long the child ran.
    pub fn next_step(previous: Option<u32>, ran: Duration) -> u32 {
        match previous {
            Some(s) if ran < BACKOFF_RESET => s.saturating_add(1),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_follows_the_kubelet() {
        let b = Backoff {
            base: Duration::from_secs(10),
        };
        let got: Vec<u64> = (0..8).map(|s| b.delay(s).as_secs()).collect();
        assert_eq!(got, [0, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(b.delay(40), Duration::from_secs(300), "no overflow");
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(300));
        // the step grows while the child crashes soon, and resets after a long run
        assert_eq!(Backoff::next_step(None, Duration::ZERO), 0);
        assert_eq!(Backoff::next_step(Some(0), Duration::from_secs(1)), 1);
        assert_eq!(Backoff::next_step(Some(5), Duration::from_secs(599)), 6);
        assert_eq!(Backoff::next_step(Some(5), BACKOFF_RESET), 0);
        assert_eq!(Backoff::next_step(Some(u32::MAX), Duration::ZERO), u32::MAX);
    }

    #[test]
    fn hold_leaves_the_grace_period_and_the_margin() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let hold = Hold { pod_grace: s(30) };
        // (hook time, child grace) -> held for
        let cases = [
            (s(0), s(10), s(19)),
            (s(5), s(10), s(14)),
            (s(0), s(29), s(0)),
            (s(0), s(40), s(0)),
            (s(40), s(1), s(0)),
        ];
        for (hook, grace, held) in cases {
            assert_eq!(hold.until(t, hook, grace), t + held, "{hook:?} {grace:?}");
        }
    }
}
