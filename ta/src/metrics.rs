//! The transfer agent's Prometheus metrics, served at `GET /metrics` (see
//! [`gonka_client::metrics`]):
//!
//! | name | type | what |
//! |---|---|---|
//! | `gonka_ta_requests_total{status}` | counter | chat completion requests answered, by HTTP status |
//! | `gonka_ta_added_seconds` | histogram | per plain answer, the TA's time minus the ML node's: what the TA adds |
//! | `gonka_ta_queued_requests` | gauge | requests waiting for a free ML node |
//! | `gonka_ta_node_in_flight{node}` | gauge | requests in flight on each registered ML node |
//! | `gonka_ta_unsettled_records` | gauge | served records not yet in a committed batch (chain mode) |

use std::sync::Arc;
use std::time::Duration;

use gonka_client::metrics::{
    latency_buckets, register, ByStatus, Family, Gauge, Histogram, Labels, Registry,
};

/// The metrics a transfer agent updates as it serves.
#[derive(Debug)]
pub struct TaMetrics {
    registry: Arc<Registry>,
    requests: ByStatus,
    added: Histogram,
    /// Set at scrape time.
    pub queued: Gauge,
    /// Set at scrape time.
    pub node_in_flight: Family<Labels, Gauge>,
    /// Set at scrape time.
    pub unsettled: Gauge,
}

impl Default for TaMetrics {
    fn default() -> Self {
        let mut r = Registry::default();
        TaMetrics {
            requests: ByStatus::register(
                &mut r,
                "gonka_ta_requests",
                "Chat completion requests answered, by HTTP status",
            ),
            added: register(
                &mut r,
                "gonka_ta_added_seconds",
                "Per plain answer, the transfer agent's time minus the ML node's",
                Histogram::new(latency_buckets()),
            ),
            queued: register(
                &mut r,
                "gonka_ta_queued_requests",
                "Requests waiting for a free ML node",
                Gauge::default(),
            ),
            node_in_flight: register(
                &mut r,
                "gonka_ta_node_in_flight",
                "Requests in flight on each registered ML node",
                Family::default(),
            ),
            unsettled: register(
                &mut r,
                "gonka_ta_unsettled_records",
                "Served records not yet in a committed batch",
                Gauge::default(),
            ),
            registry: Arc::new(r),
        }
    }
}

impl TaMetrics {
    /// The registry to serve.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// Counts a request answered with `status`.
    pub fn answered(&self, status: u16) {
        self.requests.count(status);
    }

    /// Records what the TA added to one plain answer.
    pub fn added(&self, added: Duration) {
        self.added.observe(added.as_secs_f64());
    }
}
