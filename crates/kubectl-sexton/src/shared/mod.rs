//! The shared floor: what every subcommand builds on. Subcommands (`controller`, `webhook`,
//! `inject`, `doctor`, `version`, `results`) import these modules and the pure crates, never
//! each other; nothing here imports a subcommand (`tests/layers.rs` checks both).

pub mod api_error;
pub mod certs;
pub mod ephemeraljob;
pub mod http;
pub mod kube_client;
pub mod logging;
pub mod manifest;
pub mod metrics;
pub mod pod;
pub mod registry;
pub mod service;
pub mod stuck;
pub mod values;
