//! The helper threads: the readiness probe, the API watch of birth dependencies (the lock
//! waiters are the observer's), and what they post to the loop.

use std::sync::atomic::Ordering;
use std::time::Instant;

use tracing::{debug, error, info};

use super::Supervisor;
use crate::events::Event;
use crate::setup_error::SetupError;
use sexton_core::duration::format_go_duration;
use sexton_core::machine::Action;

impl Supervisor {
    /// Birth deps through the Kubernetes API: one watch of this pod on its own thread.
    pub(super) fn start_api_watch(&self) -> Result<(), SetupError> {
        // (the policy's rule: a pod named, and birth dependencies to read)
        let pod = match &self.settings.pod {
            Some(pod) if self.core.policy().birth_via_api => pod.clone(),
            _ => return Ok(()),
        };
        #[cfg(feature = "api")]
        {
            let poster = self.poster.clone();
            crate::api::spawn(
                pod,
                self.settings.kubeconfig.clone(),
                self.probe_stop.clone(),
                move |ev| poster.post(ev),
            )
            .map_err(SetupError::ApiThread)
        }
        #[cfg(not(feature = "api"))]
        {
            let _ = (pod, &self.settings.kubeconfig); // (what the API watch would read)
            Err(SetupError::NoApiFeature)
        }
    }

    /// The readiness probe succeeded: record `Ready`.
    pub(super) fn on_ready(&mut self) {
        if self.child.is_none() {
            return;
        }
        match self.record.record_ready() {
            Ok(true) if self.settings.ready_probe.is_some() => info!("child is ready"),
            Ok(true) => debug!("child started: recorded Ready"),
            Ok(false) => {}
            Err(e) => error!(
                "cannot record Ready in the graveyard {}: {e}; containers waiting for this one will time out",
                self.settings.graveyard.display()
            ),
        }
    }

    /// Checks the child's readiness on a thread of its own (each check may block up to
    /// the probe timeout) and posts `Event::Ready` once it passes.
    pub(super) fn start_probe(&self) {
        let Some(probe) = self.settings.ready_probe.clone() else {
            return;
        };
        let (interval, timeout) = (self.settings.ready_interval, self.settings.ready_timeout);
        let (poster, stop, span) = (
            self.poster.clone(),
            self.probe_stop.clone(),
            tracing::Span::current(),
        );
        let spawned = std::thread::Builder::new().name("ready-probe".into()).stack_size(128 * 1024).spawn(move || {
            let _e = span.enter();
            info!(probe = %probe.describe(), interval = %format_go_duration(interval), "checking the child's readiness");
            let mut failures = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match crate::probe::check(&probe, timeout) {
                    Ok(()) => {
                        poster.post(Event::Ready);
                        return;
                    }
                    Err(e) => {
                        failures += 1;
                        // the first failure, then every 50th: visible but not noisy
                        if failures == 1 || failures % 50 == 0 {
                            info!(probe = %probe.describe(), failures, "child not ready yet: {e}");
                        }
                    }
                }
                std::thread::sleep(interval);
            }
        });
        if let Err(e) = spawned {
            error!(
                "cannot start the readiness probe thread: {e}; the child will never be marked ready"
            );
        }
    }

    /// What the helper threads posted.
    pub(super) fn helper_events(&mut self, now: Instant) -> Vec<Action> {
        let _ = self.poster.eventfd().read(); // reset the counter; the channel holds the news
        let mut actions = vec![];
        while let Ok(ev) = self.events.try_recv() {
            actions.extend(match ev {
                Event::Ready => {
                    self.on_ready();
                    vec![]
                }
                Event::PreStopDone => self.core.on_pre_stop_done(now),
                Event::LockReleased(dep) => self.observe(&dep, true, now),
                Event::LockWaitFailed(dep, why) => {
                    self.observer.waiter_failed(&dep, &why);
                    self.observe(&dep, false, now)
                }
                Event::Pod(view) => {
                    debug!(ready = ?view.ready, "ready containers according to the API");
                    self.core.on_pod(&view, now)
                }
                Event::ApiUnreachable(problem) => {
                    self.core.on_api_unreachable(problem);
                    vec![]
                }
                Event::ApiFatal(message) => {
                    error!("{message}");
                    self.core.on_api_error(message)
                }
            });
        }
        actions
    }
}
