//! What the helper threads (readiness probe, lock waiters, API watch) tell the event loop:
//! a channel, plus an eventfd that wakes the loop's `ppoll`.

use std::sync::Arc;
use std::sync::mpsc;

use nix::sys::eventfd::{EfdFlags, EventFd};

use crate::setup_error::SetupError;
use sexton_core::machine::PodView;

#[derive(Debug)]
pub enum Event {
    /// The readiness probe of the child succeeded.
    Ready,
    /// The HTTP preStop hook answered, failed or ran out of time.
    PreStopDone,
    /// The lock of this dependency was released: its supervisor is gone.
    LockReleased(String),
    /// A lock waiter could not block on this dependency's lock (and why).
    LockWaitFailed(String, String),
    /// The Kubernetes API shows the pod.
    Pod(PodView),
    /// The Kubernetes API could not be reached (yet); says where and why.
    ApiUnreachable(String),
    /// The Kubernetes API cannot be asked (forbidden, no credentials).
    ApiFatal(String),
}

/// How a helper thread posts an event.
#[derive(Clone)]
pub struct Poster {
    tx: mpsc::Sender<Event>,
    efd: Arc<EventFd>,
}

impl Poster {
    pub fn new() -> Result<(Poster, mpsc::Receiver<Event>), SetupError> {
        let efd = EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
            .map_err(SetupError::EventFd)?;
        let (tx, rx) = mpsc::channel();
        Ok((
            Poster {
                tx,
                efd: Arc::new(efd),
            },
            rx,
        ))
    }

    pub fn post(&self, ev: Event) {
        if self.tx.send(ev).is_ok() {
            // a full counter (2^64-2 pending wake-ups) still wakes the loop
            let _ = self.efd.write(1);
        }
    }

    pub fn eventfd(&self) -> Arc<EventFd> {
        self.efd.clone()
    }
}
