//! Receiving signals: every signal sexton forwards (see `Signal::is_forwarded`) and
//! SIGCHLD are blocked and read from a signalfd by the event loop. Blocked signals stay
//! pending even for PID 1 of a namespace (which otherwise drops signals it has no handler
//! for), so one that arrives before the child exists is not lost, and neither is the
//! child's SIGCHLD. Raw libc calls because `nix`'s `SigSet` cannot hold real-time signals.

use std::os::fd::{AsFd, BorrowedFd};

use nix::libc;
use nix::sys::signal::SigSet;
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::setup_error::SetupError;
use sexton_core::signal::Signal;

pub struct Signals {
    fd: SignalFd,
}

/// The signal numbers sexton receives: the forwarded ones this C library lets a program
/// use (its real-time range starts above its internal signals: 34 with glibc, 35 with
/// musl), and SIGCHLD.
pub fn handled() -> impl Iterator<Item = Signal> {
    let (rtmin, rtmax) = (libc::SIGRTMIN(), libc::SIGRTMAX());
    Signal::forwarded()
        .filter(move |s| s.number() < Signal::RTMIN || (rtmin..=rtmax).contains(&s.number()))
        .chain([Signal::SIGCHLD])
}

impl Signals {
    /// Resets the handled signals to their default action (an inherited SIG_IGN for
    /// SIGCHLD would make the kernel reap the child and lose its status; an ignored
    /// SIGTERM would be ignored by the child too), blocks them in this thread (threads
    /// started later inherit the mask) and opens the signalfd. Call before any thread.
    pub fn block() -> Result<Signals, SetupError> {
        // SAFETY: sigset_t is plain data initialised by sigemptyset; signal() with
        // SIG_DFL and pthread_sigmask have no memory-safety preconditions.
        let set = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in handled() {
                libc::signal(s.number(), libc::SIG_DFL);
                libc::sigaddset(&mut set, s.number());
            }
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(SetupError::BlockSignals(std::io::Error::from_raw_os_error(
                    rc,
                )));
            }
            SigSet::from_sigset_t_unchecked(set)
        };
        let fd = SignalFd::with_flags(&set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(SetupError::SignalFd)?;
        Ok(Signals { fd })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The next pending signal, if any (never blocks).
    pub fn next(&self) -> Option<Signal> {
        loop {
            match self.fd.read_signal() {
                Ok(Some(info)) => {
                    if let Some(s) = Signal::new(info.ssi_signo as i32) {
                        return Some(s);
                    }
                }
                Ok(None) => return None,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => return None,
            }
        }
    }
}
