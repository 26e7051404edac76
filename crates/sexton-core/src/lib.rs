//! sexton's pure core, shared by the in-pod binary (`sexton`) and the cluster-side one
//! (`kubectl-sexton`). Nothing here does I/O; the crate's dependencies (serde, chrono
//! without a clock, thiserror) keep it that way.
//!
//! - `settings`: the table of supervisor settings (flag = environment variable);
//! - `config`: parsing and validating them into a `Config`, with `names`, `duration`,
//!   `signal` and `endpoint` for the value syntaxes;
//! - `tombstone`: the graveyard's record format (kubexit's YAML, sexton's JSON);
//! - `machine`: the supervisor's decision machine: observations in, actions out;
//! - `contract`: the sidecar contract's rules (all deps, held stop, restart, preStop),
//!   with `pre_stop` for the hook's syntax.

pub mod config;
pub mod contract;
pub mod duration;
pub mod endpoint;
pub mod machine;
pub mod names;
pub mod pre_stop;
pub mod settings;
pub mod shutdown;
pub mod signal;
pub mod tombstone;

/// The largest graveyard record (tombstone or lock) read; anything longer is unreadable.
/// A tombstone is a few hundred bytes; the cap keeps a hostile file from costing memory.
pub const MAX_RECORD: u64 = 64 * 1024;
