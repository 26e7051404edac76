//! The child process: spawning in its own process group, signalling, reaping (as PID 1 or
//! as a child subreaper) without ever losing the child's own exit status.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
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

/// The program and its arguments, ready for `execv` in the forked child: everything is
/// allocated before the fork (only async-signal-safe calls after it).
struct Exec {
    /// Where the program may be: itself if it names a path, else each `PATH` entry.
    candidates: Vec<CString>,
    _args: Vec<CString>,
    argv: Vec<*const nix::libc::c_char>,
}

// SAFETY: the pointers point into `_args`, owned alongside and never changed; the closure
// that holds this runs only in the forked child.
unsafe impl Send for Exec {}
unsafe impl Sync for Exec {}

impl Exec {
    fn new(command: &[OsString]) -> Option<Exec> {
        let cstr = |s: &OsStr| CString::new(s.as_bytes()).ok();
        let args: Vec<CString> = command.iter().map(|a| cstr(a)).collect::<Option<_>>()?;
        let mut argv: Vec<_> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let candidates = search_path(&command[0])
            .iter()
            .map(|p| cstr(p.as_os_str()))
            .collect::<Option<_>>()?;
        Some(Exec {
            candidates,
            _args: args,
            argv,
        })
    }

    /// execvp's search without its fallback: glibc's execvp runs a file the kernel refuses
    /// with ENOEXEC through /bin/sh, so an arm64 binary on an amd64 node became a shell
    /// script with a syntax error. `execv` has no such retry. Returns only on failure,
    /// with execvp's errno (EACCES if a candidate was refused, else the last error).
    fn exec(&self) -> io::Error {
        let mut denied = false;
        let mut last = nix::libc::ENOENT;
        for path in &self.candidates {
            // SAFETY: a NUL-terminated path and a NULL-terminated argv of live CStrings.
            unsafe { nix::libc::execv(path.as_ptr(), self.argv.as_ptr()) };
            last = Errno::last_raw();
            match Errno::from_raw(last) {
                Errno::EACCES => denied = true,
                Errno::ENOENT
                | Errno::ENOTDIR
                | Errno::ESTALE
                | Errno::ENODEV
                | Errno::ETIMEDOUT => {}
                _ => return io::Error::from_raw_os_error(last),
            }
        }
        io::Error::from_raw_os_error(if denied { nix::libc::EACCES } else { last })
    }
}

/// Where `execvp` would look for `program`: the name itself if it has a `/`, else in
/// each entry of `PATH` (glibc's default `/bin:/usr/bin` without one; an empty entry is
/// the working directory).
fn search_path(program: &OsStr) -> Vec<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return vec![PathBuf::from(program)];
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    std::env::split_paths(&path)
        .map(|dir| match dir.as_os_str().is_empty() {
            true => PathBuf::from(program),
            false => dir.join(program),
        })
        .collect()
}

/// Starts the command in a new process group, with no signal blocked. When stdin is a
/// terminal and `foreground`, the child's group is made the terminal's foreground group
/// (so it can read from it and gets ^C directly).
pub fn spawn(command: &[OsString], foreground: bool) -> Result<Child, (SpawnFailure, String)> {
    let name = command[0].to_string_lossy();
    let Some(exec) = Exec::new(command) else {
        let detail =
            format!("command {name:?} cannot be executed: an argument contains a NUL byte");
        return Err((SpawnFailure::NotExecutable, detail));
    };
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]);
    let tty = foreground && nix::unistd::isatty(io::stdin().as_fd()).unwrap_or(false);
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
            // exec here: std's own exec would be glibc's execvp (see `Exec::exec`)
            Err(exec.exec())
        });
    }
    match cmd.spawn() {
        Ok(child) => {
            let pid = Pid::from_raw(child.id() as i32);
            // Dropping std's handle neither waits nor kills; we reap with waitpid(-1).
            drop(child);
            Ok(Child { pid, pgid: pid })
        }
        Err(e) => Err(spawn_failure(&command[0], &e)),
    }
}

/// Why the command could not be started, in one line naming the file.
fn spawn_failure(program: &OsStr, e: &io::Error) -> (SpawnFailure, String) {
    let name = program.to_string_lossy();
    if e.kind() == io::ErrorKind::NotFound {
        let detail = format!(
            "command {name:?} not found: {e} (check the image's PATH and the container's command)"
        );
        return (SpawnFailure::NotFound, detail);
    }
    // the file the kernel refused: the first candidate that exists
    let file = search_path(program)
        .into_iter()
        .find(|p| Path::new(p).exists())
        .map_or(name.to_string(), |p| p.display().to_string());
    let detail = match e.raw_os_error() {
        Some(nix::libc::ENOEXEC) => format!(
            "command {file:?} cannot be executed: exec format error (not a program for this machine: a binary built for another architecture, or a script without #!)"
        ),
        _ => format!("command {file:?} cannot be executed: {e}"),
    };
    (SpawnFailure::NotExecutable, detail)
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

/// What one `reap` collected.
#[derive(Debug, Default)]
pub struct Reaped {
    /// The child's status, if it exited.
    pub child: Option<ChildStatus>,
    /// The preStop hook's status, if it exited.
    pub hook: Option<ChildStatus>,
    /// Other processes reaped (orphans).
    pub others: usize,
}

/// Reaps every exited child (orphans included): the child's status, the preStop hook's,
/// and how many other processes were reaped. Raw `waitpid` so that no status is ever
/// dropped after the kernel has handed it over.
pub fn reap(child: Option<Pid>, hook: Option<Pid>) -> Reaped {
    let mut r = Reaped::default();
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
        let pid = Some(Pid::from_raw(pid));
        if pid == child {
            r.child = Some(st);
        } else if pid == hook {
            r.hook = Some(st);
        } else {
            r.others += 1;
        }
    }
    r
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
