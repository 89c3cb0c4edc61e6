//! Checkpoints under review: sampled in the block after their round closed, re-executed by
//! an assigned validator, disputed before a committee when it disagrees, and settled.
//!
//! Seeds come from x/bls's beacon ([`gonka_bls::beacon::seed`]) of the block before the
//! draw, which nobody could know when the checkpoints (or the accusation) were sent. When
//! that height has none (no group signature), the draw waits a block, and a verifier whose
//! deadline passed keeps its checkpoint until a seed can choose the next.

use gonka_bank::{transfer, Coin};
use gonka_bls::beacon::{purpose, seed};
use gonka_disputes::sampling::{assign_validator, committee, is_sampled};
use gonka_proto::pol::{Checkpoint, CheckpointStatus, TrainingJob, Verdict};
use gonka_sdk::{Result, StateWrite};
use gonka_stake::StakeRead;
use sha2::{Digest, Sha256};

use crate::keys::{self, CheckpointId};
use crate::rounds::{end_review, fee, pay_from_job, pay_worker, slot};
use crate::{events, pool_address, PolRead, PolWrite};

const SAMPLE_DOMAIN: &[u8] = b"gonka/pol-sample/v1";
const COMMITTEE_DOMAIN: &[u8] = b"gonka/pol-committee/v1";
const REASSIGN_DOMAIN: &[u8] = b"gonka/pol-reassign/v1";

/// Why money moved, as `pol_payout` events name it.
pub mod reason {
    /// The verification fee, to the validator whose re-execution agreed with the decision.
    pub const VERIFICATION_FEE: &str = "verification_fee";
    /// A share of the loser's slash, to a winner of a dispute.
    pub const SLASH_SHARE: &str = "slash_share";
    /// Rounding dust of the shares, to the community pool.
    pub const DUST: &str = "dust";
}

/// The seed of one checkpoint: SHA-256(`domain` ‖ height seed ‖ job (u64 BE) ‖ round (u64
/// BE) ‖ worker).
fn checkpoint_seed(domain: &[u8], height_seed: &[u8; 32], c: &Checkpoint) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(domain);
    hasher.update(height_seed);
    hasher.update(c.job_id.to_be_bytes());
    hasher.update(c.round.to_be_bytes());
    hasher.update(c.worker.as_bytes());
    hasher.finalize().into()
}

/// Whether a re-execution agrees with the checkpoint: the same end weights and inner
/// optimizer state.
pub fn supports(verdict: &Verdict, c: &Checkpoint) -> bool {
    !verdict.unavailable
        && verdict.weights_hash == c.weights_hash
        && verdict.optimizer_state_hash == c.optimizer_state_hash
}

fn set_duty(state: &mut dyn StateWrite, validator: &str, c: &Checkpoint, present: bool) {
    state.set_entry(keys::duty(validator, c.job_id, c.round, &c.worker), present);
}

/// Hands checkpoint `c` to `verifier` until `height + verification_deadline_blocks`.
fn assign(
    state: &mut dyn StateWrite,
    c: &mut Checkpoint,
    verifier: String,
    height: u64,
) -> Result<()> {
    c.status = CheckpointStatus::Verifying as i32;
    c.deadline = height + state.pol_params()?.verification_deadline_blocks;
    set_duty(state, &verifier, c, true);
    c.verifier = verifier;
    state.set_entry(
        keys::review(c.deadline + 1, c.job_id, c.round, &c.worker),
        true,
    );
    Ok(())
}

/// Samples the checkpoints of round `round` of `job` in `begin_block` of `height` (their
/// round closed at `height − 1`): each with chance `checkpoint_sample_ppm` by the seed's
/// first 8 bytes, assigned by power (bytes 8..16) to a validator other than its worker.
/// Unsampled checkpoints (and sampled ones with no validator to assign) are paid now, and
/// credit no work: the sampled ones that verify credit for them.
pub(crate) fn sample_round(
    state: &mut dyn StateWrite,
    height: u64,
    job: u64,
    round: u64,
) -> Result<()> {
    let Some(mut job) = state.job(job)? else {
        return Ok(());
    };
    let params = state.pol_params()?;
    let Some(height_seed) = seed(state, purpose::CHECKPOINT_SAMPLING, height - 1)? else {
        // The last height has no seed: the round is sampled a block later.
        state.set_entry(keys::sample(height + 1, job.id, round), true);
        return Ok(());
    };
    for mut c in state.round_checkpoints(job.id, round)? {
        if c.status() != CheckpointStatus::Closed {
            continue;
        }
        let s = checkpoint_seed(SAMPLE_DOMAIN, &height_seed, &c);
        let verifier = if is_sampled(&s, params.checkpoint_sample_ppm) {
            let candidates = gonka_disputes::active_validators(state, &[c.worker.as_str()])?;
            assign_validator(&s, &candidates)
        } else {
            None
        };
        match verifier {
            Some(verifier) => {
                assign(state, &mut c, verifier, height)?;
                state.emit(events::checkpoint("checkpoint_sampled", &c));
            }
            None => {
                c.status = CheckpointStatus::Accepted as i32;
                pay_worker(state, &mut job, &mut c, false)?;
                end_review(state, &mut job)?;
            }
        }
        state.put_checkpoint(&c);
    }
    state.put_job(&job);
    Ok(())
}

/// The assigned validator's re-execution of a sampled checkpoint: agreement pays the worker
/// and the validator's fee; disagreement opens a dispute whose committee is drawn in the
/// next block.
pub(crate) fn verify(
    state: &mut dyn StateWrite,
    height: u64,
    job: &mut TrainingJob,
    mut c: Checkpoint,
    verdict: Verdict,
) -> Result<()> {
    set_duty(state, &verdict.validator, &c, false);
    state.set_entry(
        keys::review(c.deadline + 1, c.job_id, c.round, &c.worker),
        false,
    );
    let agrees = supports(&verdict, &c);
    c.verification = Some(verdict);
    if agrees {
        c.status = CheckpointStatus::Verified as i32;
        pay_worker(state, job, &mut c, true)?;
        pay_fee(state, job, &c)?;
        end_review(state, job)?;
        state.emit(events::checkpoint("checkpoint_verified", &c));
    } else {
        c.status = CheckpointStatus::Disputed as i32;
        c.deadline = 0;
        state.set_entry(keys::draw(height + 1, c.job_id, c.round, &c.worker), true);
        state.emit(events::checkpoint("checkpoint_disputed", &c));
    }
    state.put_checkpoint(&c);
    Ok(())
}

fn pay_fee(state: &mut dyn StateWrite, job: &mut TrainingJob, c: &Checkpoint) -> Result<()> {
    let amount = fee(slot(job)?, state.pol_params()?.verification_fee_ppm);
    pay_from_job(state, job, &c.verifier, amount)?;
    if amount > 0 {
        state.emit(events::payout(
            c,
            &c.verifier,
            amount,
            reason::VERIFICATION_FEE,
        ));
    }
    Ok(())
}

/// Draws the committee of a disputed checkpoint in `begin_block` of `height` (the dispute
/// opened at `height − 1`), by power without replacement from the validators other than
/// the worker and the accuser. With none, the dispute is undecided at once.
pub(crate) fn draw_committee(
    state: &mut dyn StateWrite,
    height: u64,
    id: &CheckpointId,
) -> Result<()> {
    let mut c = state.queued_checkpoint(id)?;
    if c.status() != CheckpointStatus::Disputed || !c.committee.is_empty() {
        return Ok(());
    }
    let params = state.pol_params()?;
    let Some(height_seed) = seed(state, purpose::DISPUTE_COMMITTEE, height - 1)? else {
        // The last height has no seed: the committee is drawn a block later.
        state.set_entry(keys::draw(height + 1, c.job_id, c.round, &c.worker), true);
        return Ok(());
    };
    let s = checkpoint_seed(COMMITTEE_DOMAIN, &height_seed, &c);
    let candidates =
        gonka_disputes::active_validators(state, &[c.worker.as_str(), c.verifier.as_str()])?;
    c.committee = committee(&s, candidates, params.committee_size);
    if c.committee.is_empty() {
        return decide(state, c, CheckpointStatus::Undecided);
    }
    c.deadline = height + params.dispute_deadline_blocks;
    for member in c.committee.clone() {
        set_duty(state, &member, &c, true);
    }
    state.set_entry(
        keys::review(c.deadline + 1, c.job_id, c.round, &c.worker),
        true,
    );
    state.emit(events::checkpoint("checkpoint_committee", &c));
    state.put_checkpoint(&c);
    Ok(())
}

/// A committee member's vote; the dispute is decided as soon as one side holds a majority
/// of the committee (⌊n/2⌋ + 1).
pub(crate) fn vote(state: &mut dyn StateWrite, mut c: Checkpoint, verdict: Verdict) -> Result<()> {
    set_duty(state, &verdict.validator, &c, false);
    c.votes.push(verdict);
    state.emit(events::checkpoint("checkpoint_vote", &c));
    let majority = c.committee.len() / 2 + 1;
    let (upheld, faulted) = tally(&c);
    if upheld >= majority || faulted >= majority {
        state.set_entry(
            keys::review(c.deadline + 1, c.job_id, c.round, &c.worker),
            false,
        );
        let outcome = if upheld >= majority {
            CheckpointStatus::Upheld
        } else {
            CheckpointStatus::Faulted
        };
        return decide(state, c, outcome);
    }
    state.put_checkpoint(&c);
    Ok(())
}

/// Votes for the checkpoint and against it.
fn tally(c: &Checkpoint) -> (usize, usize) {
    let upheld = c.votes.iter().filter(|v| supports(v, c)).count();
    (upheld, c.votes.len() - upheld)
}

/// A review whose deadline passed, in `begin_block` of `height` (the block after it). An
/// unanswered verification never pays: the checkpoint goes to another validator (by power,
/// neither its worker nor one that already missed it), at most `max_reassignments` times;
/// then, or with nobody left to ask, it is unverified — its worker is not paid and
/// credited nothing, and its slot returns to the job's creator. A dispute is decided by
/// the majority of the votes cast, a tie (or no vote) being undecided.
pub(crate) fn deadline_passed(
    state: &mut dyn StateWrite,
    height: u64,
    id: &CheckpointId,
) -> Result<()> {
    let mut c = state.queued_checkpoint(id)?;
    match c.status() {
        CheckpointStatus::Verifying => {
            let params = state.pol_params()?;
            let reassigned = (c.missed_by.len() as u64) < params.max_reassignments;
            let height_seed = seed(state, purpose::CHECKPOINT_SAMPLING, height - 1)?;
            if reassigned && height_seed.is_none() {
                // No seed to choose the next verifier by: the verifier keeps the checkpoint a
                // block more.
                c.deadline = height;
                state.set_entry(keys::review(height + 1, c.job_id, c.round, &c.worker), true);
                state.put_checkpoint(&c);
                return Ok(());
            }
            set_duty(state, &c.verifier, &c, false);
            state.emit(events::checkpoint("checkpoint_verification_missed", &c));
            c.missed_by.push(std::mem::take(&mut c.verifier));
            let mut next = None;
            if let Some(height_seed) = height_seed.filter(|_| reassigned) {
                let mut excluded: Vec<&str> = vec![c.worker.as_str()];
                excluded.extend(c.missed_by.iter().map(String::as_str));
                let candidates = gonka_disputes::active_validators(state, &excluded)?;
                next = assign_validator(
                    &checkpoint_seed(REASSIGN_DOMAIN, &height_seed, &c),
                    &candidates,
                );
            }
            match next {
                Some(verifier) => {
                    assign(state, &mut c, verifier, height)?;
                    state.emit(events::checkpoint("checkpoint_reassigned", &c));
                }
                None => {
                    let mut job = state.existing_job(c.job_id)?;
                    c.status = CheckpointStatus::Unverified as i32;
                    c.deadline = 0;
                    end_review(state, &mut job)?;
                    state.emit(events::checkpoint("checkpoint_unverified", &c));
                    state.put_job(&job);
                }
            }
            state.put_checkpoint(&c);
            Ok(())
        }
        CheckpointStatus::Disputed => {
            let (upheld, faulted) = tally(&c);
            let outcome = match upheld.cmp(&faulted) {
                std::cmp::Ordering::Greater => CheckpointStatus::Upheld,
                std::cmp::Ordering::Less => CheckpointStatus::Faulted,
                std::cmp::Ordering::Equal => CheckpointStatus::Undecided,
            };
            decide(state, c, outcome)
        }
        _ => Ok(()),
    }
}

/// Settles a dispute:
/// - **Faulted**: the worker's host is slashed `slash_fraction_ppm`, shared equally by the
///   accuser and the members who voted against the checkpoint; the worker is dropped from
///   the job and not paid; the accuser gets the verification fee.
/// - **Upheld**: the accuser is slashed the same way, shared by the worker and the members
///   who voted for it; the worker is paid and its work credited.
/// - **Undecided**: nobody is slashed; the worker is paid, its work not credited.
///
/// Shares are rounded down, the dust goes to the community pool. Members that never voted
/// lose their duty.
fn decide(state: &mut dyn StateWrite, mut c: Checkpoint, outcome: CheckpointStatus) -> Result<()> {
    let mut job = state.existing_job(c.job_id)?;
    for member in c.committee.clone() {
        set_duty(state, &member, &c, false);
    }
    c.status = outcome as i32;
    let voters = |side: bool| -> Vec<String> {
        c.votes
            .iter()
            .filter(|v| supports(v, &c) == side)
            .map(|v| v.validator.clone())
            .collect()
    };
    match outcome {
        CheckpointStatus::Faulted => {
            let mut winners = vec![c.verifier.clone()];
            winners.extend(voters(false));
            slash_to(state, &c, &c.worker.clone(), &winners)?;
            pay_fee(state, &mut job, &c)?;
            let mut dropped = false;
            if let Some(w) = job
                .workers
                .iter_mut()
                .find(|w| w.host == c.worker && w.active)
            {
                w.active = false;
                dropped = true;
            }
            if dropped {
                state.emit(events::dropped(&job, &c.worker, "checkpoint_faulted"));
            }
        }
        CheckpointStatus::Upheld => {
            let mut winners = vec![c.worker.clone()];
            winners.extend(voters(true));
            slash_to(state, &c, &c.verifier.clone(), &winners)?;
            pay_worker(state, &mut job, &mut c, true)?;
        }
        _ => pay_worker(state, &mut job, &mut c, false)?,
    }
    end_review(state, &mut job)?;
    state.emit(events::checkpoint("checkpoint_decided", &c));
    state.put_checkpoint(&c);
    state.put_job(&job);
    Ok(())
}

/// Slashes `loser` `slash_fraction_ppm` of its stake and shares it equally over `winners`
/// (rounded down; the dust to the community pool). A loser that is no longer a participant
/// has nothing to slash.
fn slash_to(
    state: &mut dyn StateWrite,
    c: &Checkpoint,
    loser: &str,
    winners: &[String],
) -> Result<()> {
    if state.participant(loser)?.is_none() {
        return Ok(());
    }
    let fraction = state.pol_params()?.slash_fraction_ppm;
    let pool = pool_address();
    let taken = gonka_stake::slash(state, loser, fraction, &pool)?;
    let share = taken / winners.len().max(1) as u128;
    for winner in winners {
        if share > 0 {
            transfer(state, &pool, winner, &Coin::ngnk(share))?;
            state.emit(events::payout(c, winner, share, reason::SLASH_SHARE));
        }
    }
    let dust = taken - share * winners.len() as u128;
    if dust > 0 {
        let community = gonka_rewards::community_pool_address();
        transfer(state, &pool, &community, &Coin::ngnk(dust))?;
        state.emit(events::payout(c, &community, dust, reason::DUST));
    }
    Ok(())
}
