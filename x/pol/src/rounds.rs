//! A job's life: it starts when full, opens and closes rounds, drops workers that miss one,
//! pays checkpoints, and returns what it did not pay to its creator once nothing is left to
//! decide.
//!
//! # Money
//! A job's budget is split into one *slot* per (round, worker):
//! `slot = ⌊budget / (outer_rounds · worker_count)⌋` (rounded down; the dust stays in the
//! job and goes back to its creator). A checkpoint that is paid earns its worker
//! `slot − fee`, where `fee = ⌊slot · verification_fee_ppm / 10^6⌋` (rounded down) pays the
//! validator that re-executes it when it is sampled and is returned to the creator when it
//! is not. Slots of missed rounds and of checkpoints found wrong are returned too.

use gonka_bank::{transfer, Coin};
use gonka_proto::pol::{Checkpoint, CheckpointStatus, JobStatus, TrainingConfig, TrainingJob};
use gonka_sdk::{parse_amount, Result, StateWrite, PPM};
use gonka_stake::StakeRead;

use crate::{events, keys, pool_address, PolRead, PolWrite};

/// Work units credited per token trained, on inference's scale: inference credits one unit
/// per token it serves, each one forward pass of the model. A trained token costs a forward
/// pass plus a backward pass, which computes two matrix products per forward product
/// (gradients with respect to activations and to weights), about twice the forward's
/// FLOPs; the optimizer's per-step work (a few operations per parameter, amortised over a
/// step's batch of at least 64 tokens) is under 1% of that. So a trained token is worth three
/// inference tokens of the same model (H = 500, batch 8, 64-byte sequences: 768,000 units a
/// round).
pub const UNITS_PER_TRAINED_TOKEN: u64 = 3;

/// Work units of one checkpoint's round: the tokens it trained
/// ([`crate::params::checkpoint_tokens`]) times [`UNITS_PER_TRAINED_TOKEN`], saturating.
pub fn work_units(config: &TrainingConfig) -> u64 {
    crate::params::checkpoint_tokens(config).saturating_mul(UNITS_PER_TRAINED_TOKEN)
}

/// What a checkpoint credits when it `verified` (re-executed and found right, or upheld by
/// a committee): its round's work divided by the chance it was sampled, so that sampled
/// checkpoints credit the work of the unsampled ones, which credit nothing; a made-up
/// checkpoint is credited only when it is sampled, where it is caught. Saturating.
pub fn credited_units(config: &TrainingConfig, verified: bool, sample_ppm: u64) -> u64 {
    if !verified || sample_ppm == 0 {
        return 0;
    }
    let scaled = u128::from(work_units(config)) * u128::from(PPM) / u128::from(sample_ppm);
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// The job's slot: what one checkpoint is worth, its verification fee included.
pub fn slot(job: &TrainingJob) -> Result<u128> {
    let budget = parse_amount("reward budget", &job.reward_budget)?;
    let slots = u128::from(job.outer_rounds) * u128::from(job.worker_count);
    // Rounded down; creation refuses a budget that leaves a slot empty.
    Ok(budget / slots.max(1))
}

/// The verification fee out of a slot (rounded down).
pub fn fee(slot: u128, fee_ppm: u64) -> u128 {
    slot * u128::from(fee_ppm) / u128::from(PPM)
}

fn budget_left(job: &TrainingJob) -> Result<u128> {
    parse_amount("job budget left", &job.budget_left)
}

/// Pays `amount` of `job`'s budget to `to`.
pub(crate) fn pay_from_job(
    state: &mut dyn StateWrite,
    job: &mut TrainingJob,
    to: &str,
    amount: u128,
) -> Result<()> {
    if amount == 0 {
        return Ok(());
    }
    let left = budget_left(job)?;
    // The slots paid never add up to more than the budget: each (round, worker) is paid
    // once, at most `slot`.
    job.budget_left = left.saturating_sub(amount).to_string();
    transfer(state, &pool_address(), to, &Coin::ngnk(amount.min(left)))
}

/// Pays a checkpoint's worker its slot less the fee and, when it `verified`, credits its
/// work ([`credited_units`]; none when its host is jailed or no longer a participant).
pub(crate) fn pay_worker(
    state: &mut dyn StateWrite,
    job: &mut TrainingJob,
    checkpoint: &mut Checkpoint,
    verified: bool,
) -> Result<()> {
    let params = state.pol_params()?;
    let slot = slot(job)?;
    let amount = slot - fee(slot, params.verification_fee_ppm);
    pay_from_job(state, job, &checkpoint.worker, amount)?;
    if let Some(worker) = job.workers.iter_mut().find(|w| w.host == checkpoint.worker) {
        worker.rounds_paid += 1;
        let earned = parse_amount("worker earnings", &worker.earned).unwrap_or(0);
        worker.earned = (earned + amount).to_string();
    }
    let units = job.config.as_ref().map_or(0, |config| {
        credited_units(config, verified, params.checkpoint_sample_ppm)
    });
    let creditable = units > 0
        && state
            .participant(&checkpoint.worker)?
            .is_some_and(|p| !p.jailed);
    if creditable {
        gonka_stake::credit_work(state, &checkpoint.worker, units)?;
    }
    checkpoint.paid = amount.to_string();
    checkpoint.work_units = if creditable { units } else { 0 };
    state.emit(events::paid(checkpoint, creditable));
    Ok(())
}

/// A checkpoint left review (paid, faulted or undecided): once a job has ended and nothing
/// of it is in review, its remainder goes back to the creator.
pub(crate) fn end_review(state: &mut dyn StateWrite, job: &mut TrainingJob) -> Result<()> {
    job.checkpoints_in_review = job.checkpoints_in_review.saturating_sub(1);
    return_remainder(state, job)
}

fn ended(job: &TrainingJob) -> bool {
    matches!(job.status(), JobStatus::Completed | JobStatus::Cancelled)
}

fn return_remainder(state: &mut dyn StateWrite, job: &mut TrainingJob) -> Result<()> {
    if !ended(job) || job.checkpoints_in_review > 0 {
        return Ok(());
    }
    let left = budget_left(job)?;
    if left > 0 {
        let creator = job.creator.clone();
        pay_from_job(state, job, &creator, left)?;
        state.emit(events::returned(job, left));
    }
    Ok(())
}

fn end_job(state: &mut dyn StateWrite, job: &mut TrainingJob, status: JobStatus) -> Result<()> {
    job.status = status as i32;
    let live = state.live_jobs()?;
    state.put_live_jobs(live.saturating_sub(1));
    let kind = if status == JobStatus::Completed {
        "training_job_completed"
    } else {
        "training_job_cancelled"
    };
    state.emit(events::job(kind, job));
    return_remainder(state, job)
}

/// Opens the job's next round at `height`: checkpoints accepted up to and including
/// `height + round_blocks`, closed in that block's `end_block` (or earlier, once every
/// active worker submitted).
pub(crate) fn open_next_round(state: &mut dyn StateWrite, job: &mut TrainingJob, height: u64) {
    job.round += 1;
    job.round_deadline = height.saturating_add(job.round_blocks);
    state.set_entry(keys::close(job.round_deadline, job.id, job.round), true);
    state.emit(events::job("training_round_opened", job));
}

/// A full job starts: its formation deadline is dropped and round 1 opens.
pub(crate) fn start(state: &mut dyn StateWrite, job: &mut TrainingJob, height: u64) {
    state.set_entry(keys::formation(job.formation_deadline + 1, job.id), false);
    job.status = JobStatus::Running as i32;
    state.emit(events::job("training_job_started", job));
    open_next_round(state, job, height);
}

/// Every active worker submitted the open round: it closes in this block's `end_block`.
pub(crate) fn close_early(state: &mut dyn StateWrite, job: &TrainingJob, height: u64) {
    state.set_entry(keys::close(job.round_deadline, job.id, job.round), false);
    state.set_entry(keys::close(height, job.id, job.round), true);
}

/// Closes round `round` of `job` in `end_block` of `height` (skipping a stale entry): active
/// workers without a checkpoint are dropped and lose the round's slot; the round's
/// checkpoints wait for sampling in the next block (with this height's beacon); then the
/// next round opens, or the job completes after its last round (or is cancelled when no
/// worker is left).
pub(crate) fn close_round(
    state: &mut dyn StateWrite,
    height: u64,
    id: u64,
    round: u64,
) -> Result<()> {
    let Some(mut job) = state.job(id)? else {
        return Ok(());
    };
    if job.status() != JobStatus::Running || job.round != round {
        return Ok(());
    }
    let checkpoints = state.round_checkpoints(id, round)?;
    let mut dropped = Vec::new();
    for worker in job.workers.iter_mut().filter(|w| w.active) {
        if !checkpoints.iter().any(|c| c.worker == worker.host) {
            worker.active = false;
            dropped.push(worker.host.clone());
        }
    }
    for host in dropped {
        state.emit(events::dropped(&job, &host, "missed_round"));
    }
    for mut checkpoint in checkpoints {
        checkpoint.status = CheckpointStatus::Closed as i32;
        state.put_checkpoint(&checkpoint);
        job.checkpoints_in_review += 1;
    }
    state.set_entry(keys::sample(height + 1, id, round), true);
    if round >= job.outer_rounds {
        end_job(state, &mut job, JobStatus::Completed)?;
    } else if !job.workers.iter().any(|w| w.active) {
        end_job(state, &mut job, JobStatus::Cancelled)?;
    } else {
        open_next_round(state, &mut job, height);
    }
    state.put_job(&job);
    Ok(())
}

/// A job still forming past its formation deadline is cancelled and its budget returned.
pub(crate) fn cancel_unformed(state: &mut dyn StateWrite, id: u64) -> Result<()> {
    let Some(mut job) = state.job(id)? else {
        return Ok(());
    };
    if job.status() != JobStatus::Forming {
        return Ok(());
    }
    end_job(state, &mut job, JobStatus::Cancelled)?;
    state.put_job(&job);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_fees_round_down() {
        let job = TrainingJob {
            reward_budget: "1000".into(),
            outer_rounds: 3,
            worker_count: 3,
            ..Default::default()
        };
        assert_eq!(slot(&job).unwrap(), 111, "1000 / 9 rounded down");
        assert_eq!(fee(111, 100_000), 11, "10% of 111 rounded down");
        assert_eq!(fee(111, 0), 0);
    }

    #[test]
    fn work_units_count_trained_tokens_three_times() {
        let config = TrainingConfig {
            seq_len: 64,
            batch_size: 8,
            inner_steps: 5,
            ..Default::default()
        };
        assert_eq!(work_units(&config), 64 * 8 * 5 * 3);
        let huge = TrainingConfig {
            seq_len: u64::MAX,
            batch_size: 2,
            inner_steps: 1,
            ..Default::default()
        };
        assert_eq!(work_units(&huge), u64::MAX, "saturates");
    }
}
