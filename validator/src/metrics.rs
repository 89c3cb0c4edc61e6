//! The validation worker's Prometheus metrics, served at `GET /metrics` on
//! `--metrics-listen` (see [`gonka_client::metrics`]):
//!
//! | name | type | what |
//! |---|---|---|
//! | `gonka_validator_answers_total{kind,outcome}` | counter | answers to pending work (`kind` validation or dispute) by outcome: `included` in a block, `refused` by the chain, `retry` (not answered yet: the TA, the ML node or the chain could not be reached, or inclusion timed out) |
//! | `gonka_validator_pending_items` | gauge | work the chain lists for this validator at the last poll |
//! | `gonka_validator_answered_in_time` | gauge | answers the chain counted in time (its reputation record) |
//! | `gonka_validator_missed_deadlines` | gauge | deadlines the chain counted missed |
//! | `gonka_validator_reputation_ppm` | gauge | the chain's punctuality score, out of 1,000,000 |
//!
//! Done and missed come from the chain, not from the worker's own count: a worker that
//! stopped waiting for its answer's inclusion cannot tell whether it landed, the chain can.

use std::sync::Arc;

use gonka_client::metrics::{register, Counter, Family, Gauge, Labels, Registry};
use gonka_proto::disputes::Reputation;

/// The metrics a validation worker updates as it polls.
#[derive(Debug)]
pub struct ValidatorMetrics {
    registry: Arc<Registry>,
    answers: Family<Labels, Counter>,
    pending: Gauge,
    answered_in_time: Gauge,
    missed: Gauge,
    reputation: Gauge,
}

/// What became of one answer.
#[derive(Debug, Clone, Copy)]
pub enum Outcome {
    /// Included in a block.
    Included,
    /// Refused by the chain (not retried).
    Refused,
    /// Not answered yet; retried at the next poll.
    Retry,
}

impl Default for ValidatorMetrics {
    fn default() -> Self {
        let mut r = Registry::default();
        let gauge =
            |r: &mut Registry, name: &str, help: &str| register(r, name, help, Gauge::default());
        ValidatorMetrics {
            answers: register(
                &mut r,
                "gonka_validator_answers",
                "Answers to pending work, by kind and outcome",
                Family::default(),
            ),
            pending: gauge(
                &mut r,
                "gonka_validator_pending_items",
                "Work the chain listed for this validator at the last poll",
            ),
            answered_in_time: gauge(
                &mut r,
                "gonka_validator_answered_in_time",
                "Answers the chain counted in time",
            ),
            missed: gauge(
                &mut r,
                "gonka_validator_missed_deadlines",
                "Deadlines the chain counted missed",
            ),
            reputation: gauge(
                &mut r,
                "gonka_validator_reputation_ppm",
                "The chain's punctuality score, out of 1,000,000",
            ),
            registry: Arc::new(r),
        }
    }
}

impl ValidatorMetrics {
    /// The registry to serve.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    /// Counts an answer to a `kind` item.
    pub fn answer(&self, kind: &str, outcome: Outcome) {
        let outcome = match outcome {
            Outcome::Included => "included",
            Outcome::Refused => "refused",
            Outcome::Retry => "retry",
        };
        // Bounded labels: the chain's two kinds, anything else folded.
        let kind = match kind {
            crate::KIND_VALIDATION | crate::KIND_DISPUTE => kind,
            _ => "other",
        };
        self.answers
            .get_or_create(&vec![
                ("kind", kind.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
    }

    /// Sets the pending-work gauge.
    pub fn pending(&self, items: usize) {
        self.pending.set(i64::try_from(items).unwrap_or(i64::MAX));
    }

    /// Sets the gauges the chain's reputation record of this validator gives.
    pub fn reputation(&self, reputation: &Reputation) {
        let set = |gauge: &Gauge, value: u64| gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
        set(&self.answered_in_time, reputation.answered);
        set(&self.missed, reputation.missed);
        set(&self.reputation, reputation.score_ppm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_client::metrics::{parse, render};

    #[test]
    fn answers_and_the_chains_record_show_up_by_name() {
        let metrics = ValidatorMetrics::default();
        metrics.answer(crate::KIND_VALIDATION, Outcome::Included);
        metrics.answer(crate::KIND_VALIDATION, Outcome::Included);
        metrics.answer(crate::KIND_DISPUTE, Outcome::Retry);
        metrics.answer("made-up", Outcome::Refused);
        metrics.pending(3);
        metrics.reputation(&Reputation {
            answered: 7,
            missed: 2,
            score_ppm: 980_000,
            ..Default::default()
        });
        let samples = parse(&render(&metrics.registry()));
        let value = |name: &str| {
            samples
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| *v)
                .unwrap_or_else(|| panic!("{name} missing from {samples:?}"))
        };
        assert_eq!(
            value("gonka_validator_answers_total{kind=\"validation\",outcome=\"included\"}"),
            2.0
        );
        assert_eq!(
            value("gonka_validator_answers_total{kind=\"dispute\",outcome=\"retry\"}"),
            1.0
        );
        assert_eq!(
            value("gonka_validator_answers_total{kind=\"other\",outcome=\"refused\"}"),
            1.0
        );
        assert_eq!(value("gonka_validator_pending_items"), 3.0);
        assert_eq!(value("gonka_validator_answered_in_time"), 7.0);
        assert_eq!(value("gonka_validator_missed_deadlines"), 2.0);
        assert_eq!(value("gonka_validator_reputation_ppm"), 980_000.0);
    }
}
