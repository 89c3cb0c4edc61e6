//! Disputes events, every attribute indexed. Amounts carry their denom (`123ngnk`).

use gonka_proto::disputes::{Dispute, OutputReveal, Reputation, Validation};
use gonka_sdk::Event;

/// `validation_sampled`: a record was chosen for re-execution by `validator`.
pub fn sampled(v: &Validation) -> Event {
    Event::new("validation_sampled")
        .attr("inference_id", &v.inference_id)
        .attr("executor_host", &v.executor_host)
        .attr("executor_node", &v.executor_node)
        .attr("validator", &v.validator)
        .attr("rate_ppm", v.rate_ppm)
        .attr("deadline", v.deadline_height)
}

/// `validation_submitted`: the assigned validator committed its result (`committed`) or
/// reported the body unavailable (`payload_unavailable`), or the reveal judged its result
/// (`match` or `mismatch`).
pub fn submitted(v: &Validation, outcome: &str, reward: u128) -> Event {
    Event::new("validation_submitted")
        .attr("inference_id", &v.inference_id)
        .attr("validator", &v.validator)
        .attr("executor_host", &v.executor_host)
        .attr("outcome", outcome)
        .attr("reward", format!("{reward}ngnk"))
}

/// `validation_missed`: the assigned validator did not answer by the deadline.
pub fn validation_missed(v: &Validation) -> Event {
    Event::new("validation_missed")
        .attr("inference_id", &v.inference_id)
        .attr("validator", &v.validator)
        .attr("deadline", v.deadline_height)
}

/// `dispute_opened`.
pub fn opened(d: &Dispute) -> Event {
    Event::new("dispute_opened")
        .attr("dispute_id", d.id)
        .attr("inference_id", &d.inference_id)
        .attr("kind", &d.kind)
        .attr("accuser", &d.accuser)
        .attr("executor_host", &d.executor_host)
        .attr("deadline", d.deadline_height)
        .attr("deposit", format!("{}ngnk", d.deposit))
}

/// `dispute_committee`: a dispute's committee was drawn (the block after its opening).
pub fn committee_drawn(d: &Dispute) -> Event {
    Event::new("dispute_committee")
        .attr("dispute_id", d.id)
        .attr("inference_id", &d.inference_id)
        .attr("committee", d.committee.join(","))
}

/// `dispute_vote`: a committee member voted; `supports` is `executor`, `accuser`,
/// `payload_unavailable` or `pending_reveal` (a committed result, judged once the output is
/// revealed).
pub fn vote(id: u64, voter: &str, supports: &str) -> Event {
    Event::new("dispute_vote")
        .attr("dispute_id", id)
        .attr("voter", voter)
        .attr("supports", supports)
}

/// `output_revealed`: a record's output commitment was opened.
pub fn revealed(r: &OutputReveal) -> Event {
    Event::new("output_revealed")
        .attr("inference_id", &r.inference_id)
        .attr("revealed_by", &r.revealed_by)
}

/// `reveal_requested`: the chain waits for `transfer_agent` to reveal a record's output by
/// `deadline`.
pub fn reveal_requested(transfer_agent: &str, inference_id: &str, deadline: u64) -> Event {
    Event::new("reveal_requested")
        .attr("inference_id", inference_id)
        .attr("transfer_agent", transfer_agent)
        .attr("deadline", deadline)
}

/// `dispute_resolved`.
pub fn resolved(d: &Dispute) -> Event {
    Event::new("dispute_resolved")
        .attr("dispute_id", d.id)
        .attr("inference_id", &d.inference_id)
        .attr("outcome", &d.status)
        .attr("slashed", &d.slashed)
        .attr("slashed_amount", format!("{}ngnk", d.slashed_amount))
}

/// `dispute_slashed`: the loser of a dispute lost `amount` of its stake.
pub fn slashed(id: u64, operator: &str, fraction_ppm: u64, amount: u128) -> Event {
    Event::new("dispute_slashed")
        .attr("dispute_id", id)
        .attr("operator", operator)
        .attr("fraction_ppm", fraction_ppm)
        .attr("amount", format!("{amount}ngnk"))
}

/// `dispute_payout`: one payment made when a dispute was resolved.
pub fn payout(id: u64, to: &str, amount: u128, reason: &str) -> Event {
    Event::new("dispute_payout")
        .attr("dispute_id", id)
        .attr("to", to)
        .attr("amount", format!("{amount}ngnk"))
        .attr("reason", reason)
}

/// `deadline_missed`: a validator missed a validation or vote deadline.
pub fn deadline_missed(r: &Reputation, jailed: bool) -> Event {
    Event::new("deadline_missed")
        .attr("validator", &r.validator)
        .attr("score_ppm", r.score_ppm)
        .attr("missed_in_row", r.missed_in_row)
        .attr("jailed", jailed)
}
