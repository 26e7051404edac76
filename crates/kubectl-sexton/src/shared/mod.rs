//! The shared floor: what every subcommand builds on. Subcommands (`controller`, `webhook`,
//! `inject`, `doctor`, `version`, `results`) import these modules and the pure crates, never
//! each other; nothing here imports a subcommand (`tests/layers.rs` checks both).

pub mod api_error;
pub mod catalogue;
pub mod certs;
pub mod cli;
pub mod components;
pub mod ephemeraljob;
pub mod exit;
pub mod http;
pub mod kube_client;
pub mod leader;
pub mod logging;
pub mod manifest;
pub mod metrics;
pub mod pod;
pub mod registry;
pub mod runtime;
pub mod safety_net;
pub mod service;
pub mod signals;
pub mod stuck;
pub mod values;
pub mod webhook_scope;
