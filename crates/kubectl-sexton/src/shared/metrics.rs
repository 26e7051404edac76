//! Metrics primitives of the long-running subcommands (`controller`, `webhook`): what
//! `/metrics` serves of a registry, and an API error's class as a label value. Each
//! subcommand's own metrics (names, label sets, buckets) are its `metrics.rs`.

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use prometheus_client::registry::Registry;

use crate::shared::api_error::Kind;

/// The OpenMetrics text of every metric in `registry`.
pub fn text(registry: &Registry) -> String {
    let mut out = String::new();
    encode(&mut out, registry).expect("writing to a String cannot fail");
    out
}

/// `kind="conflict"`: the class that decided a failure's retry.
impl EncodeLabelValue for Kind {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        encoder.write_str(match self {
            Kind::Conflict => "conflict",
            Kind::Forbidden => "forbidden",
            Kind::Invalid => "invalid",
            Kind::Unavailable => "unavailable",
            Kind::Other => "other",
        })
    }
}
