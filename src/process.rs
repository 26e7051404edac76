//! The child process: spawning in its own process group, signalling, reaping (as PID 1 or
//! as a child subreaper) without ever losing the child's own exit status.

use std::ffi::OsString;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::errno::Errno;
use nix::sys::signal::{self, SigHandler, SigSet, SigmaskHow, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::core::{ChildStatus, SpawnFailure};

#[derive(Debug, Clone, Copy)]
pub struct Child {
    pub pid: Pid,
    /// The child leads its own process group, so pgid == pid.
    pub pgid: Pid,
}

/// Starts the command in a new process group, with no signal blocked. When stdin is a
/// terminal the child's group is made the terminal's foreground group (so it can read from
/// it and gets ^C directly).
pub fn spawn(command: &[OsString]) -> Result<Child, (SpawnFailure, String)> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]);
    let tty = nix::unistd::isatty(io::stdin().as_fd()).unwrap_or(false);
    // Runs in the child between fork and exec (async-signal-safe calls only).
    unsafe {
        cmd.pre_exec(move || {
            // The supervisor blocks the signals it reads from its signalfd; the child must
            // start with none blocked, or it would never see a forwarded SIGTERM.
            nix::sys::signal::pthread_sigmask(
                SigmaskHow::SIG_SETMASK,
                Some(&SigSet::empty()),
                None,
            )?;
            nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0))?;
            if tty {
                // A background group calling tcsetpgrp gets SIGTTOU unless it is ignored.
                let old = signal::signal(Signal::SIGTTOU, SigHandler::SigIgn)?;
                let _ = nix::unistd::tcsetpgrp(io::stdin().as_fd(), nix::unistd::getpid());
                signal::signal(Signal::SIGTTOU, old)?;
            }
            Ok(())
        });
    }
    match cmd.spawn() {
        Ok(child) => {
            let pid = Pid::from_raw(child.id() as i32);
            // Dropping std's handle neither waits nor kills; we reap with waitpid(-1).
            drop(child);
            Ok(Child { pid, pgid: pid })
        }
        Err(e) => {
            let name = command[0].to_string_lossy();
            Err(match e.kind() {
                io::ErrorKind::NotFound => (
                    SpawnFailure::NotFound,
                    format!(
                        "command {name:?} not found: {e} (check the image's PATH and the container's command)"
                    ),
                ),
                _ => (
                    SpawnFailure::NotExecutable,
                    format!("command {name:?} cannot be executed: {e}"),
                ),
            })
        }
    }
}

/// Sends `sig` to the child, or to its whole process group.
pub fn send(child: &Child, sig: Signal, group: bool) -> nix::Result<()> {
    let r = if group {
        signal::killpg(child.pgid, sig)
    } else {
        signal::kill(child.pid, sig)
    };
    match r {
        Err(Errno::ESRCH) => Ok(()), // already gone; its status is still ours to reap
        other => other,
    }
}

/// SIGKILLs the child's process group, and the child itself in case it left the group.
pub fn kill_all(child: &Child) {
    let _ = signal::killpg(child.pgid, Signal::SIGKILL);
    let _ = signal::kill(child.pid, Signal::SIGKILL);
}

/// Reaps every exited child (orphans included). Returns the child's status if it was
/// among them, and how many other processes were reaped.
pub fn reap(child: Option<Pid>) -> (Option<ChildStatus>, usize) {
    let mut status = None;
    let mut others = 0;
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) => {
                if Some(pid) == child {
                    status = Some(ChildStatus::Exited(code));
                } else {
                    others += 1;
                }
            }
            Ok(WaitStatus::Signaled(pid, sig, _core)) => {
                if Some(pid) == child {
                    status = Some(ChildStatus::Signaled(sig));
                } else {
                    others += 1;
                }
            }
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => break,
            Err(Errno::EINTR) => continue,
            Ok(_) => continue, // stopped/continued: not an exit
            Err(_) => break,
        }
    }
    (status, others)
}

/// When not PID 1, become a child subreaper so orphans of the child are reparented to us
/// and reaped, as PID 1 would.
pub fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}
