//! The webhook's Prometheus metrics (`sexton_webhook_*`): reviews by result and their
//! duration inside the webhook (from the request body read to the response built).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::shared::metrics;

/// `result="injected"`: injected, repaired, refused, unchanged, skipped (not a Pod
/// creation), error.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: &'static str,
}

pub struct WebhookMetrics {
    registry: Registry,
    reviews: Family<ResultLabel, Counter>,
    duration: Histogram,
}

impl Default for WebhookMetrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("sexton_webhook");
        let reviews = Family::<ResultLabel, Counter>::default();
        // 50 µs .. ~1.6 s
        let duration = Histogram::new(exponential_buckets(0.000_05, 2.0, 16));
        registry.register(
            "reviews",
            "Admission reviews answered, by result",
            reviews.clone(),
        );
        registry.register(
            "review_duration_seconds",
            "Time spent answering one review (registry lookups included)",
            duration.clone(),
        );
        WebhookMetrics {
            registry,
            reviews,
            duration,
        }
    }
}

impl WebhookMetrics {
    pub fn reviewed(&self, result: &'static str, took: Duration) {
        self.reviews.get_or_create(&ResultLabel { result }).inc();
        self.duration.observe(took.as_secs_f64());
    }

    pub fn encode(&self) -> String {
        metrics::text(&self.registry)
    }
}
