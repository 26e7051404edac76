//! Watching the graveyard with inotify (through `notify`). Events only say "look again at
//! this file": the supervisor re-reads the tombstone, so a lost or merged event costs at
//! most a delay, never a wrong decision.

use std::path::Path;
use std::sync::mpsc::Sender;

use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecursiveMode, Watcher};

use crate::supervisor::Event;

pub struct GraveyardWatcher {
    _inner: notify::INotifyWatcher,
}

/// Starts an inotify watch on the graveyard directory. Each event becomes one
/// `Event::Changed(file name)` per path it names.
pub fn watch(graveyard: &Path, tx: Sender<Event>) -> notify::Result<GraveyardWatcher> {
    let mut w = notify::INotifyWatcher::new(
        move |res: notify::Result<notify::Event>| match res {
            Ok(ev) => {
                if !is_change(&ev.kind) {
                    return;
                }
                for p in &ev.paths {
                    if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
                        let _ = tx.send(Event::Changed(name.to_string()));
                    }
                }
                if ev.need_rescan() {
                    let _ = tx.send(Event::Rescan);
                }
            }
            Err(e) => {
                let _ = tx.send(Event::WatchError(e.to_string()));
            }
        },
        notify::Config::default(),
    )?;
    w.watch(graveyard, RecursiveMode::NonRecursive)?;
    Ok(GraveyardWatcher { _inner: w })
}

/// Only changes count. notify also subscribes to IN_OPEN, so every *read* of a tombstone
/// (ours, or a peer's) raises an event; reacting to those by re-reading would feed itself
/// forever (a busy loop as soon as a dependency's tombstone exists).
fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, ModifyKind, RenameMode};

    #[test]
    fn reads_are_not_changes() {
        assert!(!is_change(&EventKind::Access(AccessKind::Open(AccessMode::Any))));
        assert!(!is_change(&EventKind::Access(AccessKind::Read)));
        assert!(!is_change(&EventKind::Access(AccessKind::Close(AccessMode::Read))));
        assert!(is_change(&EventKind::Access(AccessKind::Close(AccessMode::Write))));
        assert!(is_change(&EventKind::Create(CreateKind::File)));
        assert!(is_change(&EventKind::Modify(ModifyKind::Name(RenameMode::To))));
        assert!(is_change(&EventKind::Any));
    }
}
