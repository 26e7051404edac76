//! sexton: a kubexit-compatible supervisor that ends sidecars when the containers they
//! depend on exit. Layers: a pure core (`config`, `signal`, `tombstone`, `core`), OS glue
//! (`fsutil`, `record`, `observe`, `process`, `sigfd`, `watch`, `events`, `supervisor`)
//! and the CLI (`cli`).

#[cfg(feature = "api")]
pub mod api;
pub mod cli;
pub mod config;
#[cfg(feature = "controller")]
pub mod controller;
pub mod core;
pub mod events;
pub mod fsutil;
pub mod logging;
pub mod observe;
pub mod probe;
pub mod process;
pub mod record;
pub mod sigfd;
pub mod signal;
pub mod supervisor;
pub mod tombstone;
pub mod watch;
