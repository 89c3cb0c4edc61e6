//! Validation sampling of committed work. A batch settled at height `H` is sampled in the
//! `begin_block` of `H + 1`, with x/bls's `seed(validation-sampling, H)`: the group's
//! signature of `H`, released only in the precommits of `H`, after the batch was fixed, so
//! its transfer agent cannot know which leaves will be drawn. The batch's rate `r` is the
//! highest x/disputes sampling rate among its hosts (each host's, from its clean streak:
//! 10% for a new or recently faulty host, down to 1%), capped by `leaf_sample_ppm`; leaf `i`
//! of batch `b` is sampled when
//!
//! `u64_be(SHA-256(gonka/leaf-sample/v1 ‖ seed ‖ b ‖ ⌊i/4⌋)[8·(i mod 4)..][..8]) mod 10^6 < r`
//!
//! (one hash serves four leaves). Each sampled leaf is demanded from the transfer agent like
//! a `MsgDemandLeaf` — deadline `leaf_answer_blocks` later (and before the batch is final),
//! no deposit, the community pool as challenger, `sampled_ppm = r` — so an unanswered sample
//! voids the batch and slashes the transfer agent to the pool. A provided leaf is stored as a
//! work record of x/inference with `sampled_ppm = r`, which x/disputes samples for
//! re-execution at its executor's rate divided by `r` (at most certainty, since `r` is at
//! least that rate): the overall rate is each executor's, as for records settled one by one,
//! while a batch of hosts with clean records costs the chain only their low rate.
//!
//! A settled batch waits in a queue for its sampling. When `H` has no seed (a group signs it,
//! but the block after it carried no signature: its proposer may have trimmed the last
//! commit to choose that), the batches wait for the next signed height and stay pending
//! meanwhile. The work is one hash per four records of the last block's batches plus one
//! demand per sampled leaf: proportional to the block, and paid for by the batches. A batch's claimed
//! `record_count` is what the sampler loops over, so `MsgSettleBatch` charges
//! [`sampling_gas`] for it before anything else is checked against state, and the records of
//! one block's batches are capped by `max_block_records`: a block's sampling hashes at most
//! that many records and writes at most that many times `leaf_sample_ppm` demands.

use gonka_proto::settlement::{BatchStatus, LeafDemand, MsgSettleBatch, Params};
use gonka_sdk::{GasCosts, Result, StateRead, StateWrite, PPM};
use sha2::{Digest, Sha256};

use gonka_disputes::sampling::sample_rate_ppm;
use gonka_disputes::DisputesRead;

use crate::challenge::GAS_PER_HASH;
use crate::ledger::settled;
use crate::{events, SettlementRead, SettlementWrite};

/// Domain separator of leaf sampling.
pub const LEAF_SAMPLE_DOMAIN: &[u8] = b"gonka/leaf-sample/v1";

/// Batches one block looks at for sampling: more wait for the next (a block settles at most
/// `max_block_records` records, so on time this is never reached).
const MAX_SAMPLED_BATCHES: usize = 1_024;

/// A bound on the bytes one sample demand writes: its queue and index keys and the demand.
const DEMAND_BYTES: u64 = 320;

/// The rate (ppm) `msg`'s leaves are sampled at: the highest x/disputes rate among its
/// hosts, capped by `leaf_sample_ppm`.
pub fn batch_sample_rate<S: StateRead + ?Sized>(
    state: &S,
    params: &Params,
    msg: &MsgSettleBatch,
) -> Result<u64> {
    if params.leaf_sample_ppm == 0 {
        return Ok(0);
    }
    let rates = state.disputes_params()?;
    let mut rate = 0;
    for line in &msg.hosts {
        let streak = state.executor_stats(&line.host)?.clean_streak;
        rate = rate.max(sample_rate_ppm(&rates, streak));
    }
    Ok(rate.min(params.leaf_sample_ppm))
}

/// The gas a batch of `record_count` records sampled at `rate_ppm` pays for its sampling in
/// the next block: a hash per four records, and per expected demand its three writes and
/// the three deletes that end it (when answered or expired).
pub fn sampling_gas(costs: &GasCosts, record_count: u64, rate_ppm: u64) -> u64 {
    let hashes = record_count.div_ceil(4);
    let demands =
        u64::try_from((u128::from(record_count) * u128::from(rate_ppm)).div_ceil(u128::from(PPM)))
            .unwrap_or(u64::MAX);
    let per_demand = costs
        .write_flat
        .saturating_mul(6)
        .saturating_add(costs.write_per_byte.saturating_mul(DEMAND_BYTES));
    GAS_PER_HASH
        .saturating_mul(hashes)
        .saturating_add(demands.saturating_mul(per_demand))
}

/// The indexes of a batch of `count` leaves with id `batch_id` sampled at `rate_ppm` under
/// `height_seed`, ascending.
pub fn sampled_leaves(
    height_seed: &[u8; 32],
    batch_id: u64,
    count: u64,
    rate_ppm: u64,
) -> Vec<u64> {
    let mut sampled = Vec::new();
    if rate_ppm == 0 {
        return sampled;
    }
    let mut block = [0u8; 32];
    for index in 0..count {
        if index % 4 == 0 {
            block = Sha256::new()
                .chain_update(LEAF_SAMPLE_DOMAIN)
                .chain_update(height_seed)
                .chain_update(batch_id.to_be_bytes())
                .chain_update((index / 4).to_be_bytes())
                .finalize()
                .into();
        }
        let at = 8 * (index % 4) as usize;
        let draw = u64::from_be_bytes(block[at..at + 8].try_into().expect("8 bytes"));
        if draw % PPM < rate_ppm {
            sampled.push(index);
        }
    }
    sampled
}

/// Demands the sampled leaves of the batches waiting for their sampling (those settled in
/// the blocks before `height`), in settling order, with the last height's seed. While the
/// last height has no seed (no group signature), they wait, and [`finalize_due`] holds them
/// back from finality; catching up, a block samples batches of at most `max_block_records`
/// records (always one), and a batch sampled late keeps `leaf_answer_blocks` to answer, its
/// window extended past the deadline.
///
/// [`finalize_due`]: crate::ledger::finalize_due
pub fn demand_samples(state: &mut dyn StateWrite, height: u64) -> Result<()> {
    let params = state.settlement_params()?;
    if params.leaf_sample_ppm == 0 || height < 2 {
        return Ok(());
    }
    let waiting = state.unsampled_batches(MAX_SAMPLED_BATCHES)?;
    if waiting.is_empty() {
        return Ok(());
    }
    let Some(seed) = gonka_bls::beacon::seed(
        state,
        gonka_bls::beacon::purpose::VALIDATION_SAMPLING,
        height - 1,
    )?
    else {
        return Ok(());
    };
    let pool = gonka_rewards::community_pool_address();
    let mut records = 0u64;
    for id in waiting {
        let Some(mut batch) = state.batch(id)? else {
            state.set_unsampled(id, false);
            continue;
        };
        let msg = settled(&batch).clone();
        if records > 0 && records.saturating_add(msg.record_count) > params.max_block_records {
            break;
        }
        records = records.saturating_add(msg.record_count);
        state.set_unsampled(id, false);
        if batch.status != BatchStatus::Pending as i32 {
            continue;
        }
        let rate = batch_sample_rate(state, &params, &msg)?;
        let deadline = if batch.height + 1 == height {
            (height + params.leaf_answer_blocks).min(batch.final_at - 1)
        } else {
            let deadline = height + params.leaf_answer_blocks;
            if batch.final_at <= deadline {
                state.move_final(&mut batch, deadline + 1);
            }
            deadline
        };
        let indexes = sampled_leaves(&seed, batch.id, msg.record_count, rate);
        for &index in &indexes {
            if state.leaf_demand(batch.id, index)?.is_some() {
                continue;
            }
            let demand = LeafDemand {
                batch_id: batch.id,
                index,
                challenger: pool.clone(),
                deposit: "0".into(),
                deadline,
                sampled_ppm: rate,
            };
            state.put_leaf_demand(&demand, Some(&msg.transfer_agent));
        }
        state.emit(events::sampled(
            &batch,
            rate,
            indexes.len() as u64,
            deadline,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_hits_about_the_rate_and_depends_on_seed_batch_and_index() {
        let seed = [7u8; 32];
        let all = sampled_leaves(&seed, 1, 10_000, PPM);
        assert_eq!(all.len(), 10_000, "a rate of 100% samples every leaf");
        assert!(sampled_leaves(&seed, 1, 10_000, 0).is_empty());
        let tenth = sampled_leaves(&seed, 1, 10_000, 100_000);
        assert!((900..1_100).contains(&tenth.len()), "{}", tenth.len());
        assert!(tenth.windows(2).all(|w| w[0] < w[1]));
        assert_ne!(tenth, sampled_leaves(&seed, 2, 10_000, 100_000));
        assert_ne!(tenth, sampled_leaves(&[8u8; 32], 1, 10_000, 100_000));
        // A leaf's draw does not depend on the batch's size.
        let short = sampled_leaves(&seed, 1, 5_000, 100_000);
        assert_eq!(
            short,
            tenth
                .iter()
                .copied()
                .filter(|&i| i < 5_000)
                .collect::<Vec<_>>()
        );
    }
}
