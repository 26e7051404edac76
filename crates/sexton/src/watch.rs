//! Watching the graveyard with inotify, read directly by the supervisor's single event loop
//! (no watcher thread: one wake-up less on the critical path). Events only say "look again
//! at this file": the supervisor re-reads the tombstone, so a lost or merged event costs at
//! most a delay, never a wrong decision.
//!
//! The mask holds changes only, and only those that can matter now (`Interest`), because a
//! graveyard may be shared with a busy program and every event wakes the loop:
//! - always renames into the directory (sexton writes tombstones by rename) and the
//!   directory's own deletion or move;
//! - file creations and in-place writes (a lock file being linked, a kubexit tombstone
//!   written in place) only while some dependency has no lock file yet. Once every
//!   dependency holds its lock, a program creating thousands of files wakes nothing.
//!
//! The directory's own deletion is not enough to notice its removal: the kernel reports
//! IN_DELETE_SELF only once the last file that was in it is closed, and this container's
//! own lock file, held for its whole life, always is open. The lock file is therefore
//! watched too (`watch_own_lock`): removing the graveyard, or emptying it, unlinks it,
//! which raises IN_ATTRIB on it at once. So is its own record (tombstone), so that a sweep
//! that takes the record again after the container put it back (`rm` going on through a
//! graveyard while the supervisor restores it) is noticed too. Watched as a file, not
//! through the directory's IN_DELETE: that would wake the loop for every file a busy
//! program removes from the graveyard (1 000 wake-ups a second at 1 000 files a second,
//! BENCHMARKS.md "CPU under graveyard churn"). A record replaced by the container's own
//! write (a rename over it) raises IN_ATTRIB on the replaced file too: the supervisor then
//! finds itself still in place, and watches the new one.
//!
//! Opens and reads are never subscribed: a watcher that reacts to a read by reading again
//! would feed itself (the `notify` crate subscribes IN_OPEN and did exactly that here once).
//! Deletions are not subscribed: a vanished tombstone of a dependency changes no decision
//! (a dead dependency stays dead).
//!
//! Events are parsed in place from one read buffer and filtered by name before anything
//! else happens (no allocation, no system call for an unrelated file): a graveyard shared
//! with a busy program raises thousands of events per second that concern no dependency.
//! `nix`'s `read_events` allocates a vector and a string per event, hence the hand parser.

use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

/// Events that always matter.
const BASE: AddWatchFlags = AddWatchFlags::IN_MOVED_TO
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_ONLYDIR);
/// Events that matter while a dependency has no lock file yet.
const UNLOCKED: AddWatchFlags = AddWatchFlags::IN_CREATE.union(AddWatchFlags::IN_CLOSE_WRITE);
/// Events of the own lock file and record: unlinked (the link count changes; also when a
/// rename replaces the file) or moved away. Peers only open them read-only (and flock the
/// lock), which raises neither.
const OWN_FILE: AddWatchFlags = AddWatchFlags::IN_ATTRIB
    .union(AddWatchFlags::IN_MOVE_SELF)
    .union(AddWatchFlags::IN_DONT_FOLLOW);

/// What the watch must report now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    /// Some dependency has no lock file yet: its lock being linked into place, or its
    /// kubexit tombstone being written in place, must be seen.
    pub unlocked_deps: bool,
}

impl Interest {
    fn mask(self) -> AddWatchFlags {
        if self.unlocked_deps {
            BASE | UNLOCKED
        } else {
            BASE
        }
    }
}

/// Room for ~250 events of short names; a u64 array, aligned for `struct inotify_event`.
const BUF_WORDS: usize = 1024;

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
    /// The watch of the directory now at `dir`. Every other watch is of the own lock
    /// file or record, or of a directory that was at `dir` before.
    dir_wd: i32,
    /// The watch of the own record now at its path (each write replaces the file).
    record_wd: Option<WatchDescriptor>,
    interest: Interest,
    buf: Box<[u64; BUF_WORDS]>,
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
    /// This container's own lock file or record was unlinked, moved, replaced or changed:
    /// the graveyard may have been removed or emptied (the caller checks).
    pub own_files: bool,
}

/// Starts watching with the widest interest; `set_interest` narrows it.
pub fn watch(graveyard: &Path) -> nix::Result<GraveyardWatcher> {
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
    let interest = Interest {
        unlocked_deps: true,
    };
    let dir_wd = inotify.add_watch(graveyard, interest.mask())?.as_raw();
    Ok(GraveyardWatcher {
        inotify,
        dir: graveyard.to_path_buf(),
        dir_wd,
        record_wd: None,
        interest,
        buf: Box::new([0; BUF_WORDS]),
    })
}

impl GraveyardWatcher {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }

    /// Watches the graveyard path again (after it was re-created).
    pub fn rewatch(&mut self) -> nix::Result<()> {
        self.dir_wd = self
            .inotify
            .add_watch(&self.dir, self.interest.mask())?
            .as_raw();
        Ok(())
    }

    /// Watches this container's own lock file (again, after it was put back): see the
    /// module's comment. The watch of a replaced lock file stays until that file is
    /// closed (it is held, at most 17 of them); its events are still news (it was ours).
    pub fn watch_own_lock(&self, lock: &Path) -> nix::Result<()> {
        self.inotify.add_watch(lock, OWN_FILE).map(|_| ())
    }

    /// Watches this container's own record (again, after it was rewritten or put back),
    /// and drops the watch of the one before: a record replaced by our own write is freed
    /// (the kernel drops its watch), but one moved away by a sweep, or still linked
    /// elsewhere, would keep its watch, and wake the loop, for good.
    pub fn watch_own_record(&mut self, record: &Path) -> nix::Result<()> {
        let wd = self.inotify.add_watch(record, OWN_FILE)?;
        if let Some(old) = self.record_wd.replace(wd) {
            if old != wd {
                let _ = self.inotify.rm_watch(old); // (EINVAL: the kernel dropped it already)
            }
        }
        Ok(())
    }

    /// Changes what is reported (inotify_add_watch on a watched inode replaces its mask).
    /// `Ok(true)` when the interest grew: events of the new kind may have been missed
    /// until now, so the caller reads the dependencies again.
    pub fn set_interest(&mut self, interest: Interest) -> nix::Result<bool> {
        if interest == self.interest {
            return Ok(false);
        }
        self.dir_wd = self.inotify.add_watch(&self.dir, interest.mask())?.as_raw();
        let grew = interest.unlocked_deps && !self.interest.unlocked_deps;
        self.interest = interest;
        Ok(grew)
    }

    /// Reads every queued event without blocking; keeps the names `relevant` accepts.
    pub fn drain(&mut self, relevant: impl Fn(&str) -> bool) -> Changes {
        let mut c = Changes::default();
        loop {
            // SAFETY: the u64 buffer is viewed as bytes, fully initialised, and outlives
            // the slice.
            let bytes: &mut [u8] = unsafe {
                std::slice::from_raw_parts_mut(self.buf.as_mut_ptr().cast(), BUF_WORDS * 8)
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
            parse(&bytes[..n], &relevant, self.dir_wd, &mut c);
            if n < bytes.len() / 2 {
                break; // a short read emptied the queue; ppoll reports anything newer
            }
        }
        c
    }
}

/// Parses a buffer of `struct inotify_event`s into `c`. `dir_wd`: the watch of the
/// graveyard directory; events of any other watch are the own lock file's or record's
/// (earlier directories' watches report nothing but their late removal, which is old news).
fn parse(mut bytes: &[u8], relevant: &impl Fn(&str) -> bool, dir_wd: i32, c: &mut Changes) {
    let word = |b: &[u8], at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    while bytes.len() >= HEADER {
        let wd = word(bytes, 0) as i32;
        let mask = word(bytes, 4);
        let len = word(bytes, 12) as usize;
        let Some(name_bytes) = bytes.get(HEADER..HEADER + len) else {
            break;
        };
        bytes = &bytes[HEADER + len..];
        if mask & OVERFLOW != 0 {
            c.overflow = true;
            continue;
        }
        if wd != dir_wd {
            // the own lock file or record, or an earlier graveyard (removed, or the path now
            // names another directory): either way, look again
            c.own_files = true;
            continue;
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

    /// Whether the watch's descriptor would wake the supervisor's `ppoll` now.
    fn readable(w: &GraveyardWatcher) -> bool {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let mut fds = [PollFd::new(w.fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::ZERO).unwrap() > 0
    }

    #[test]
    fn changes_not_reads() {
        let d = std::env::temp_dir().join(format!("sexton-watch-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("main"), "x\n").unwrap();
        let mut w = watch(&d).unwrap();
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
    fn the_own_record_leaving_counts_other_deletions_do_not() {
        let d = std::env::temp_dir().join(format!("sexton-watch-own-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        for f in ["me", "main", "tmp", "noise"] {
            std::fs::write(d.join(f), "x\n").unwrap();
        }
        let mut w = watch(&d).unwrap();
        w.watch_own_record(&d.join("me")).unwrap();
        let all = |_: &str| true;
        // other files leaving wake nothing: a busy program's deletions cost no wake-up
        // (the kernel queues an event within the unlink or rename, so this is exact)
        std::fs::remove_file(d.join("main")).unwrap();
        std::fs::rename(d.join("noise"), d.join("../sexton-watch-noise")).unwrap();
        assert!(!readable(&w), "other files leaving woke the watch");
        assert_eq!(w.drain(all), Changes::default(), "other files leaving");
        std::fs::remove_file(d.join("../sexton-watch-noise")).unwrap();
        // the container's own write (a rename over its record) replaces the watched file:
        // reported, for the supervisor to find itself in place and watch the new one
        std::fs::rename(d.join("tmp"), d.join("me")).unwrap();
        let c = w.drain(all);
        assert!(c.own_files && c.names == ["me"], "{c:?}");
        w.watch_own_record(&d.join("me")).unwrap();
        std::fs::remove_file(d.join("me")).unwrap();
        assert!(w.drain(all).own_files, "the own record deleted");
        std::fs::write(d.join("me"), "x\n").unwrap();
        w.watch_own_record(&d.join("me")).unwrap();
        let _ = w.drain(all);
        std::fs::rename(d.join("me"), d.join("elsewhere")).unwrap();
        assert!(w.drain(all).own_files, "the own record moved away");
        // put back and watched again: the one moved away is watched no more (its watch
        // would wake the loop, and count, for good)
        std::fs::write(d.join("me"), "x\n").unwrap();
        w.watch_own_record(&d.join("me")).unwrap();
        let _ = w.drain(all);
        std::fs::remove_file(d.join("elsewhere")).unwrap();
        assert!(!readable(&w), "the record moved away still watched");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn parses_many_events_in_one_buffer() {
        let d = std::env::temp_dir().join(format!("sexton-watch-many-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let mut w = watch(&d).unwrap();
        for i in 0..2000 {
            std::fs::write(d.join(format!("noise-{i}")), "").unwrap();
        }
        std::fs::write(d.join("main"), "x\n").unwrap();
        let c = w.drain(|n| n == "main");
        assert_eq!(c.names, ["main"], "{c:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn narrow_interest_ignores_creations_and_in_place_writes() {
        let d = std::env::temp_dir().join(format!("sexton-watch-narrow-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let mut w = watch(&d).unwrap();
        let all = |_: &str| true;
        assert_eq!(
            w.set_interest(Interest {
                unlocked_deps: false
            }),
            Ok(false)
        );
        for i in 0..100 {
            std::fs::write(d.join(format!("noise-{i}")), "x").unwrap();
        }
        std::fs::hard_link(d.join("noise-0"), d.join(".main.lock")).unwrap();
        assert_eq!(
            w.drain(all),
            Changes::default(),
            "nothing but renames counts now"
        );
        std::fs::rename(d.join("noise-1"), d.join("main")).unwrap();
        assert_eq!(w.drain(all).names, ["main"]);
        // widened again: says so (the caller re-reads), and creations count again
        assert_eq!(
            w.set_interest(Interest {
                unlocked_deps: true
            }),
            Ok(true)
        );
        std::fs::write(d.join("side"), "x").unwrap();
        assert_eq!(w.drain(all).names, ["side"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
