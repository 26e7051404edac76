//! Watching the graveyard with inotify, read directly by the supervisor's single event loop
//! (no watcher thread: one wake-up less on the critical path). Events only say "look again
//! at this file": the supervisor re-reads the tombstone, so a lost or merged event costs at
//! most a delay, never a wrong decision.
//!
//! The mask holds changes only. Opens and reads are not subscribed: a watcher that reacts
//! to a read by reading again would feed itself (the `notify` crate subscribes IN_OPEN and
//! did exactly that here once). Deletions of files are not subscribed either: a vanished
//! tombstone changes no decision (a dead dependency stays dead), and every unrelated file
//! removed from a busy graveyard would wake the loop.
//!
//! Events are parsed in place from one read buffer and filtered by name before anything
//! else happens (no allocation, no system call for an unrelated file): a graveyard shared
//! with a busy program raises thousands of events per second that concern no dependency.
//! `nix`'s `read_events` allocates a vector and a string per event, hence the hand parser.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

pub const MASK: AddWatchFlags = AddWatchFlags::IN_CLOSE_WRITE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_CREATE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF);

/// Events that mean the watched directory itself is gone or was moved away (the kernel
/// then drops the watch: IN_IGNORED), or that events were lost.
const GONE: u32 = nix::libc::IN_DELETE_SELF
    | nix::libc::IN_MOVE_SELF
    | nix::libc::IN_IGNORED
    | nix::libc::IN_UNMOUNT;
const OVERFLOW: u32 = nix::libc::IN_Q_OVERFLOW;

/// Size of `struct inotify_event` before the name.
const HEADER: usize = 16;

pub struct GraveyardWatcher {
    inotify: Inotify,
    dir: PathBuf,
}

/// What one drain of the inotify queue says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Names of relevant files that changed, each once, in order of first appearance.
    pub names: Vec<String>,
    /// Events were lost (queue overflow): re-read every dependency.
    pub overflow: bool,
    /// The directory was deleted, moved or unmounted: the watch is gone.
    pub dir_gone: bool,
}

pub fn watch(graveyard: &Path) -> nix::Result<GraveyardWatcher> {
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
    inotify.add_watch(graveyard, MASK)?;
    Ok(GraveyardWatcher {
        inotify,
        dir: graveyard.to_path_buf(),
    })
}

impl GraveyardWatcher {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }

    /// Watches the graveyard path again (after it was re-created).
    pub fn rewatch(&self) -> nix::Result<()> {
        self.inotify.add_watch(&self.dir, MASK).map(|_| ())
    }

    /// Reads every queued event without blocking; keeps the names `relevant` accepts.
    pub fn drain(&self, relevant: impl Fn(&str) -> bool) -> Changes {
        let mut c = Changes::default();
        // aligned for `struct inotify_event`; room for ~250 events of short names
        let mut buf = [0u64; 1024];
        loop {
            // SAFETY: the u64 buffer is viewed as bytes, fully initialised, and outlives
            // the slice.
            let bytes: &mut [u8] = unsafe {
                std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast(), buf.len() * 8)
            };
            let n = match nix::unistd::read(self.inotify.as_fd(), bytes) {
                Ok(0) | Err(Errno::EAGAIN) => break,
                Ok(n) => n,
                Err(Errno::EINTR) => continue,
                Err(_) => {
                    c.overflow = true;
                    break;
                }
            };
            parse(&bytes[..n], &relevant, &mut c);
            if n < bytes.len() / 2 {
                break; // a short read emptied the queue; ppoll reports anything newer
            }
        }
        c
    }
}

/// Parses a buffer of `struct inotify_event`s into `c`.
fn parse(mut bytes: &[u8], relevant: &impl Fn(&str) -> bool, c: &mut Changes) {
    let word = |b: &[u8], at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    while bytes.len() >= HEADER {
        let mask = word(bytes, 4);
        let len = word(bytes, 12) as usize;
        let Some(name_bytes) = bytes.get(HEADER..HEADER + len) else {
            break;
        };
        bytes = &bytes[HEADER + len..];
        if mask & OVERFLOW != 0 {
            c.overflow = true;
        }
        if mask & GONE != 0 {
            c.dir_gone = true;
        }
        let end = name_bytes.iter().position(|&b| b == 0).unwrap_or(len);
        let Ok(name) = std::str::from_utf8(&name_bytes[..end]) else {
            continue; // container names are ASCII: not ours
        };
        if !name.is_empty() && relevant(name) && !c.names.iter().any(|x| x == name) {
            c.names.push(name.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_not_reads() {
        let d = std::env::temp_dir().join(format!("sexton-watch-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("main"), "x\n").unwrap();
        let w = watch(&d).unwrap();
        let all = |_: &str| true;
        assert_eq!(w.drain(all), Changes::default());
        // reads raise nothing
        for _ in 0..3 {
            let _ = std::fs::read(d.join("main")).unwrap();
        }
        assert_eq!(w.drain(all), Changes::default());
        // a write and a rename do, each name once
        std::fs::write(d.join("main"), "y\n").unwrap();
        std::fs::write(d.join("tmp"), "z\n").unwrap();
        std::fs::rename(d.join("tmp"), d.join("side")).unwrap();
        let c = w.drain(all);
        assert!(
            c.names.contains(&"main".to_string()) && c.names.contains(&"side".to_string()),
            "{c:?}"
        );
        assert_eq!(c.names.iter().filter(|n| *n == "main").count(), 1);
        // unrelated names are dropped while parsing
        std::fs::write(d.join("noise"), "n\n").unwrap();
        std::fs::write(d.join("main"), "y\n").unwrap();
        assert_eq!(w.drain(|n| n == "main").names, ["main"]);
        std::fs::remove_dir_all(&d).unwrap();
        let c = w.drain(all);
        assert!(c.dir_gone, "the directory itself went away: {c:?}");
        // re-created and watched again
        std::fs::create_dir_all(&d).unwrap();
        w.rewatch().unwrap();
        std::fs::write(d.join("main"), "z\n").unwrap();
        assert_eq!(w.drain(all).names, ["main"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn parses_many_events_in_one_buffer() {
        let d = std::env::temp_dir().join(format!("sexton-watch-many-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let w = watch(&d).unwrap();
        for i in 0..2000 {
            std::fs::write(d.join(format!("noise-{i}")), "").unwrap();
        }
        std::fs::write(d.join("main"), "x\n").unwrap();
        let c = w.drain(|n| n == "main");
        assert_eq!(c.names, ["main"], "{c:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
