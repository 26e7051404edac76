//! Watching the graveyard with inotify, read directly by the supervisor's single event loop
//! (no watcher thread: one wake-up less on the critical path). Events only say "look again
//! at this file": the supervisor re-reads the tombstone, so a lost or merged event costs at
//! most a delay, never a wrong decision.
//!
//! The mask holds changes only. Opens and reads are not subscribed: a watcher that reacts
//! to a read by reading again would feed itself (the `notify` crate subscribes IN_OPEN and
//! did exactly that here once).

use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

pub const MASK: AddWatchFlags = AddWatchFlags::IN_CLOSE_WRITE
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_CREATE)
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF);

pub struct GraveyardWatcher {
    inotify: Inotify,
}

/// What one drain of the inotify queue says.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Names of files that changed, each once, in order of first appearance.
    pub names: Vec<String>,
    /// Events were lost (queue overflow) or the directory itself went away: re-read all.
    pub rescan: bool,
}

pub fn watch(graveyard: &Path) -> nix::Result<GraveyardWatcher> {
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?;
    inotify.add_watch(graveyard, MASK)?;
    Ok(GraveyardWatcher { inotify })
}

impl GraveyardWatcher {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }

    /// Reads every queued event without blocking.
    pub fn drain(&self) -> Changes {
        let mut c = Changes::default();
        loop {
            match self.inotify.read_events() {
                Ok(events) if events.is_empty() => break,
                Ok(events) => {
                    for e in events {
                        if e.mask.intersects(
                            AddWatchFlags::IN_Q_OVERFLOW
                                | AddWatchFlags::IN_DELETE_SELF
                                | AddWatchFlags::IN_MOVE_SELF
                                | AddWatchFlags::IN_IGNORED,
                        ) {
                            c.rescan = true;
                        }
                        if let Some(name) = e.name.as_ref().and_then(|n| n.to_str()) {
                            if !c.names.iter().any(|x| x == name) {
                                c.names.push(name.to_string());
                            }
                        }
                    }
                }
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(_) => {
                    c.rescan = true;
                    break;
                }
            }
        }
        c
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
        assert_eq!(w.drain(), Changes::default());
        // reads raise nothing
        for _ in 0..3 {
            let _ = std::fs::read(d.join("main")).unwrap();
        }
        assert_eq!(w.drain(), Changes::default());
        // a write and a rename do, each name once
        std::fs::write(d.join("main"), "y\n").unwrap();
        std::fs::write(d.join("tmp"), "z\n").unwrap();
        std::fs::rename(d.join("tmp"), d.join("side")).unwrap();
        let c = w.drain();
        assert!(
            c.names.contains(&"main".to_string()) && c.names.contains(&"side".to_string()),
            "{c:?}"
        );
        assert_eq!(c.names.iter().filter(|n| *n == "main").count(), 1);
        std::fs::remove_dir_all(&d).unwrap();
        assert!(w.drain().rescan, "the directory itself went away");
    }
}
