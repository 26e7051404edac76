//! Watching the graveyard with inotify (through `notify`). Events only say "look again at
//! this file": the supervisor re-reads the tombstone, so a lost or merged event costs at
//! most a delay, never a wrong decision.

use std::path::Path;
use std::sync::mpsc::Sender;

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
