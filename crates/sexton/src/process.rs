//! The child process: spawning in its own process group, signalling, reaping (as PID 1 or
//! as a child subreaper) without ever losing the child's own exit status.

use std::ffi::OsString;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::errno::Errno;
use nix::sys::signal::{self, SigHandler, SigSet, SigmaskHow};
use nix::unistd::Pid;

use sexton_core::machine::{ChildStatus, SpawnFailure};
use sexton_core::signal::Signal;

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
                let ttou = nix::sys::signal::Signal::SIGTTOU;
                let old = signal::signal(ttou, SigHandler::SigIgn)?;
                // best effort: without it the child runs in the background of the terminal
                let _ = nix::unistd::tcsetpgrp(io::stdin().as_fd(), nix::unistd::getpid());
                signal::signal(ttou, old)?;
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

/// Sends `sig` (any number, real-time ones included: `nix`'s `Signal` cannot hold those,
/// hence `libc::kill`) to the child, or to its whole process group. A child that is
/// already gone is not an error: its status is still ours to reap. Any other failure
/// (EPERM: the child runs with other credentials, through a setuid program) is returned.
pub fn send(child: &Child, sig: Signal, group: bool) -> io::Result<()> {
    if group {
        match raw_kill(-child.pgid.as_raw(), sig.number()) {
            // no such group: the child left it (setsid), so it gets the signal alone
            Err(Errno::ESRCH) => {}
            other => return gone_is_fine(other),
        }
    }
    gone_is_fine(raw_kill(child.pid.as_raw(), sig.number()))
}

fn raw_kill(target: i32, sig: i32) -> Result<(), Errno> {
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { nix::libc::kill(target, sig) } == 0 {
        Ok(())
    } else {
        Err(Errno::last())
    }
}

fn gone_is_fine(r: Result<(), Errno>) -> io::Result<()> {
    match r {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// SIGKILLs the child's process group, and the child itself in case it left the group.
/// Fails only if the child itself could not be sent SIGKILL (a group member that could
/// not be is left to the kernel when the container ends).
pub fn kill_all(child: &Child) -> io::Result<()> {
    let _group = raw_kill(-child.pgid.as_raw(), nix::libc::SIGKILL);
    gone_is_fine(raw_kill(child.pid.as_raw(), nix::libc::SIGKILL))
}

/// Decodes a raw wait status. Every signal number is kept (a child killed by SIGRTMIN+3
/// has status 37 in the low bits; `nix` fails to convert it and the status, already
/// reaped by the kernel, would be lost). `None`: stopped or continued, not an end.
pub fn decode_wait_status(raw: i32) -> Option<ChildStatus> {
    let low = raw & 0x7f;
    if low == 0 {
        return Some(ChildStatus::Exited((raw >> 8) & 0xff));
    }
    if low == 0x7f || raw == 0xffff {
        return None; // WIFSTOPPED / WIFCONTINUED
    }
    Some(ChildStatus::Signaled(
        Signal::new(low).unwrap_or(Signal::SIGKILL),
    ))
}

/// Reaps every exited child (orphans included). Returns the child's status if it was
/// among them, and how many other processes were reaped. Raw `waitpid` so that no status
/// is ever dropped after the kernel has handed it over.
pub fn reap(child: Option<Pid>) -> (Option<ChildStatus>, usize) {
    let mut status = None;
    let mut others = 0;
    loop {
        let mut raw = 0;
        // SAFETY: waitpid writes the status into `raw`, a valid i32.
        let pid = unsafe { nix::libc::waitpid(-1, &mut raw, nix::libc::WNOHANG) };
        if pid == 0 {
            break; // children remain, none has exited
        }
        if pid < 0 {
            match Errno::last() {
                Errno::EINTR => continue,
                _ => break, // ECHILD: no children left
            }
        }
        let Some(st) = decode_wait_status(raw) else {
            continue; // stopped/continued: not an exit
        };
        if Some(Pid::from_raw(pid)) == child {
            status = Some(st);
        } else {
            others += 1;
        }
    }
    (status, others)
}

/// When not PID 1, become a child subreaper so orphans of the child are reparented to us
/// and reaped, as PID 1 would.
pub fn become_subreaper() -> nix::Result<()> {
    nix::sys::prctl::set_child_subreaper(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_statuses_for_every_signal() {
        assert_eq!(decode_wait_status(0), Some(ChildStatus::Exited(0)));
        assert_eq!(decode_wait_status(3 << 8), Some(ChildStatus::Exited(3)));
        assert_eq!(decode_wait_status(255 << 8), Some(ChildStatus::Exited(255)));
        for n in 1..=64 {
            let want = Some(ChildStatus::Signaled(Signal::new(n).unwrap()));
            assert_eq!(decode_wait_status(n), want, "signal {n}");
            assert_eq!(
                decode_wait_status(n | 0x80),
                want,
                "signal {n} with core dump"
            );
        }
        assert_eq!(decode_wait_status((19 << 8) | 0x7f), None, "stopped");
        assert_eq!(decode_wait_status(0xffff), None, "continued");
    }
}
