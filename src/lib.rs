//! sexton: a kubexit-compatible supervisor that ends sidecars when the containers they
//! depend on exit. Layers: a pure core (`config`, `tombstone`, `core`), OS glue
//! (`fsutil`, `process`, `watch`, `supervisor`) and the CLI (`cli`).

#[cfg(feature = "api")]
pub mod api;
pub mod cli;
pub mod config;
#[cfg(feature = "controller")]
pub mod controller;
pub mod core;
pub mod fsutil;
pub mod logging;
pub mod probe;
pub mod process;
pub mod supervisor;
pub mod tombstone;
pub mod watch;
