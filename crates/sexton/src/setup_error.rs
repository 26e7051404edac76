//! Why sexton could not start supervising: each is one line for the container's log,
//! naming the variable to fix where there is one, and means exit 2 with nothing started.

use std::io;
use std::path::PathBuf;

use nix::errno::Errno;

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("cannot block signals: {0}")]
    BlockSignals(io::Error),
    #[error("cannot create a signalfd: {0}")]
    SignalFd(Errno),
    #[error("cannot create an eventfd: {0}")]
    EventFd(Errno),
    #[error("invalid KUBEXIT_GRAVEYARD={dir:?}: cannot create the directory: {source}")]
    CreateGraveyard { dir: PathBuf, source: io::Error },
    #[error(
        "invalid KUBEXIT_NAME={name:?}: the lock {} is held by another live container; each container of a pod needs its own name",
        .lock.display()
    )]
    NameInUse { name: String, lock: PathBuf },
    #[error("invalid KUBEXIT_GRAVEYARD={dir:?}: cannot take the lock {}: {source}", .lock.display())]
    Lock {
        dir: PathBuf,
        lock: PathBuf,
        source: io::Error,
    },
    #[error(
        "cannot reserve space for this container's records in KUBEXIT_GRAVEYARD={dir:?}: {source}; not starting the child (peers could never learn of its death)"
    )]
    Reserve { dir: PathBuf, source: io::Error },
    #[error(
        "KUBEXIT_WATCH=inotify: cannot watch {} with inotify: {source} (use KUBEXIT_WATCH=auto or poll)",
        .dir.display()
    )]
    Inotify { dir: PathBuf, source: Errno },
    #[error("cannot start the API watch thread: {0}")]
    ApiThread(io::Error),
    #[error(
        "invalid KUBEXIT_POD_NAME: this sexton was built without the `api` feature, so birth dependencies cannot be read from the Kubernetes API; unset KUBEXIT_POD_NAME/KUBEXIT_NAMESPACE to use tombstones"
    )]
    NoApiFeature,
}
