//! Pol events. Amounts carry their denom (`123ngnk`), like bank and stake events.

use gonka_proto::pol::{Checkpoint, TrainingJob};
use gonka_sdk::Event;

fn job_event(kind: &str, job: &TrainingJob) -> Event {
    Event::new(kind)
        .attr("job_id", job.id)
        .attr("creator", &job.creator)
        .attr("round", job.round)
        .attr("round_deadline", job.round_deadline)
        .attr("budget_left", format!("{}ngnk", job.budget_left))
}

/// `training_job_created`, `training_job_started`, `training_round_opened`,
/// `training_job_completed` or `training_job_cancelled`.
pub fn job(kind: &str, job: &TrainingJob) -> Event {
    job_event(kind, job)
}

/// `training_joined`: `host` became worker `index` of `job`.
pub fn joined(job: &TrainingJob, host: &str, index: usize) -> Event {
    job_event("training_joined", job)
        .attr("host", host)
        .attr("index", index)
}

/// `training_worker_dropped`: `host` leaves `job` (a missed round or a wrong checkpoint).
pub fn dropped(job: &TrainingJob, host: &str, reason: &str) -> Event {
    job_event("training_worker_dropped", job)
        .attr("host", host)
        .attr("reason", reason)
}

/// `model_attested`: `worker` attested `sha256` as the job's final weights.
pub fn model_attested(job: &TrainingJob, worker: &str, sha256: &[u8]) -> Event {
    job_event("model_attested", job)
        .attr("worker", worker)
        .attr("weights_sha256", hex::encode(sha256))
}

/// `model_published`: the job's model entered the model table.
pub fn model_published(job: &TrainingJob, sha256: &[u8]) -> Event {
    job_event("model_published", job)
        .attr("model_id", &job.model_id)
        .attr("weights_sha256", hex::encode(sha256))
}

/// `budget_returned`: what a job did not pay out went back to its creator.
pub fn returned(job: &TrainingJob, amount: u128) -> Event {
    job_event("budget_returned", job).attr("amount", format!("{amount}ngnk"))
}

/// A checkpoint event: `checkpoint_submitted`, `checkpoint_sampled`, `checkpoint_verified`,
/// `checkpoint_disputed`, `checkpoint_committee`, `checkpoint_vote`, `checkpoint_decided`.
pub fn checkpoint(kind: &str, c: &Checkpoint) -> Event {
    Event::new(kind)
        .attr("job_id", c.job_id)
        .attr("round", c.round)
        .attr("worker", &c.worker)
        .attr("status", c.status().as_str_name())
        .attr("verifier", &c.verifier)
        .attr("deadline", c.deadline)
        .attr("weights_hash", hex::encode(&c.weights_hash))
        .attr("loss_micro_nats", c.loss_micro_nats)
}

/// `checkpoint_paid`: a checkpoint's worker was paid and credited.
pub fn paid(c: &Checkpoint, credited: bool) -> Event {
    checkpoint("checkpoint_paid", c)
        .attr("paid", format!("{}ngnk", c.paid))
        .attr("work_units", c.work_units)
        .attr("credited", credited)
}

/// `pol_payout`: `to` received `amount` for `reason` (verification fee, dispute share, dust).
pub fn payout(c: &Checkpoint, to: &str, amount: u128, reason: &str) -> Event {
    Event::new("pol_payout")
        .attr("job_id", c.job_id)
        .attr("round", c.round)
        .attr("worker", &c.worker)
        .attr("to", to)
        .attr("amount", format!("{amount}ngnk"))
        .attr("reason", reason)
}
