//! The trainer's Prometheus metrics, served at `GET /metrics` on its own port beside the
//! round blobs (see [`gonka_client::metrics`]):
//!
//! | name | type | what |
//! |---|---|---|
//! | `gonka_trainer_jobs` | gauge | training jobs this trainer works on |
//! | `gonka_trainer_checkpoints_total{outcome}` | counter | checkpoints it submitted: `committed` or `refused` by the chain |
//! | `gonka_trainer_round_loss_micro_nats` | gauge | mean training loss of its last trained round |
//! | `gonka_trainer_reexecutions_total{verdict}` | counter | re-executions it answered for its validator: `endorsed`, `disputed` (its own hashes), `unavailable`, or `refused` by the chain |

use std::sync::Arc;

use gonka_client::metrics::{register, Counter, Family, Gauge, Labels, Registry};

/// The metrics a trainer updates as it works.
#[derive(Debug)]
pub struct TrainerMetrics {
    registry: Arc<Registry>,
    jobs: Gauge,
    checkpoints: Family<Labels, Counter>,
    loss: Gauge,
    reexecutions: Family<Labels, Counter>,
}

impl Default for TrainerMetrics {
    fn default() -> Self {
        let mut r = Registry::default();
        TrainerMetrics {
            jobs: register(
                &mut r,
                "gonka_trainer_jobs",
                "Training jobs this trainer works on",
                Gauge::default(),
            ),
            checkpoints: register(
                &mut r,
                "gonka_trainer_checkpoints",
                "Checkpoints submitted, by outcome",
                Family::default(),
            ),
            loss: register(
                &mut r,
                "gonka_trainer_round_loss_micro_nats",
                "Mean training loss of the last trained round, in micro-nats",
                Gauge::default(),
            ),
            reexecutions: register(
                &mut r,
                "gonka_trainer_reexecutions",
                "Re-executions answered for the validator, by verdict",
                Family::default(),
            ),
            registry: Arc::new(r),
        }
    }
}

fn label(name: &'static str, value: &'static str) -> Labels {
    vec![(name, value.to_string())]
}

impl TrainerMetrics {
    /// The registry to serve.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// Sets the number of jobs worked on.
    pub fn jobs(&self, count: usize) {
        self.jobs.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Counts a submitted checkpoint and records its round's loss.
    pub fn checkpoint(&self, committed: bool, loss_micro_nats: u64) {
        let outcome = if committed { "committed" } else { "refused" };
        self.checkpoints
            .get_or_create(&label("outcome", outcome))
            .inc();
        self.loss
            .set(i64::try_from(loss_micro_nats).unwrap_or(i64::MAX));
    }

    /// Counts an answered re-execution (`verdict`: `endorsed`, `disputed`, `unavailable`
    /// or `refused`).
    pub fn reexecution(&self, verdict: &'static str) {
        self.reexecutions
            .get_or_create(&label("verdict", verdict))
            .inc();
    }
}
