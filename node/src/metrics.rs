//! The ML node's Prometheus metrics, served at `GET /metrics` (see
//! [`gonka_client::metrics`]):
//!
//! | name | type | what |
//! |---|---|---|
//! | `gonka_node_requests_total{status}` | counter | chat completion requests answered, by HTTP status |
//! | `gonka_node_response_seconds` | histogram | per answered request, the time to its response headers (a plain answer's whole generation; a stream's first event) |
//! | `gonka_node_score_requests_total{status}` | counter | `POST /gonka/v1/score` requests answered, by HTTP status |
//! | `gonka_node_busy_slots` | gauge | generation slots in use |
//! | `gonka_node_slots` | gauge | generation slots (`--max-concurrency`) |

use std::sync::Arc;
use std::time::Duration;

use gonka_client::metrics::{latency_buckets, register, ByStatus, Gauge, Histogram, Registry};

/// The metrics an ML node updates as it serves.
#[derive(Debug)]
pub(crate) struct NodeMetrics {
    registry: Arc<Registry>,
    requests: ByStatus,
    response: Histogram,
    scores: ByStatus,
    /// Set at scrape time.
    pub busy_slots: Gauge,
    /// Set at scrape time.
    pub slots: Gauge,
}

impl Default for NodeMetrics {
    fn default() -> Self {
        let mut r = Registry::default();
        NodeMetrics {
            requests: ByStatus::register(
                &mut r,
                "gonka_node_requests",
                "Chat completion requests answered, by HTTP status",
            ),
            response: register(
                &mut r,
                "gonka_node_response_seconds",
                "Per answered request, the time to its response headers",
                Histogram::new(latency_buckets()),
            ),
            scores: ByStatus::register(
                &mut r,
                "gonka_node_score_requests",
                "Score requests (POST /gonka/v1/score) answered, by HTTP status",
            ),
            busy_slots: register(
                &mut r,
                "gonka_node_busy_slots",
                "Generation slots in use",
                Gauge::default(),
            ),
            slots: register(
                &mut r,
                "gonka_node_slots",
                "Generation slots",
                Gauge::default(),
            ),
            registry: Arc::new(r),
        }
    }
}

impl NodeMetrics {
    /// The registry to serve.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// Counts a request answered with `status` after `took`.
    pub fn answered(&self, status: u16, took: Duration) {
        self.requests.count(status);
        self.response.observe(took.as_secs_f64());
    }

    /// Counts a score request answered with `status`.
    pub fn scored(&self, status: u16) {
        self.scores.count(status);
    }
}
