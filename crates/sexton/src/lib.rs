//! The in-pod binary `sexton`: the I/O around sexton-core's decision machine. It wraps a
//! container's entrypoint as PID 1 (or a subreaper), records the container's life in the
//! shared graveyard, watches the records of its dependencies, and signals its child.
//! docs/architecture.md names the path of a death from the graveyard to the signal.

#[cfg(feature = "api")]
pub mod api;
pub mod cli;
pub mod events;
pub mod files;
pub mod install;
pub mod locks;
pub mod logging;
pub mod net;
pub mod observe;
pub mod probe;
pub mod process;
pub mod record;
pub mod setup_error;
pub mod sigfd;
pub mod supervisor;
pub mod watch;
