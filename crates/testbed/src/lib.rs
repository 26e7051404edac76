//! Test support shared by the crates' integration tests. Nothing here is a mock: the test
//! control plane is real (`scripts/testenv.sh`), and processes are real processes.
//!
//! - `cluster`: the test API server, an admin client, fresh namespaces, kubectl.
//! - `scratch`: a scratch directory per test and the processes a test starts in it.
//! - `proxy`: `kubectl proxy` and a relay that holds one request, to make the real API
//!   server answer at the moment a test chooses.
//! - `registry`: the test container registries (`scripts/registry.sh`).
//! - `http`: a GET of a process's health or metrics endpoint, and the metrics parsed.
//! - `local`: a free loopback port, `openssl`, a command fed its input.
//! - `services`: where the services come from (`scripts/`), and the end of a test process
//!   that finds one missing.
//! - `wait`: bounded waits (`wait_until`, `TIMEOUT`, `slowdown`).
//! - `vendor`: stand-ins of the vendors' sidecar injectors (Istio, Vault, Datadog, ...) on
//!   the test API server, under their real configuration names (`testenv/vendor-webhook`).

mod cluster;
mod http;
mod local;
mod proxy;
mod registry;
mod scratch;
mod services;
mod vendor;
mod wait;

pub use cluster::*;
pub use http::*;
pub use local::*;
pub use proxy::*;
pub use registry::*;
pub use scratch::*;
pub use services::*;
pub use vendor::*;
pub use wait::*;
