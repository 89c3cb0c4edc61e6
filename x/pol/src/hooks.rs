//! Pol hooks. Work is proportional to the queue entries due at the block (each put there by
//! one earlier transaction or round), never to the number of jobs or checkpoints stored.

use gonka_sdk::{BlockContext, HookOutput, Result, StateWrite};

use crate::keys::{self, CheckpointId};
use crate::{review, rounds, PolRead};

/// Removes every checkpoint entry under `prefix` and hands each to `handle`, in key order.
fn drain_checkpoints(
    state: &mut dyn StateWrite,
    prefix: &[u8],
    mut handle: impl FnMut(&mut dyn StateWrite, &CheckpointId) -> Result<()>,
) -> Result<()> {
    for (key, _) in state.prefix_raw(prefix)? {
        state.delete_raw(key.clone());
        if let Some(id) = keys::parse_checkpoint_entry(prefix, &key) {
            handle(state, &id)?;
        }
    }
    Ok(())
}

/// Before the block's transactions: jobs that did not fill in time are cancelled; the
/// committees of the disputes opened in the last block are drawn; the checkpoints of the
/// rounds closed in the last block are sampled; reviews whose deadline was the last block
/// are settled.
pub fn begin_block(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
    let height = ctx.height;
    let prefix = keys::formations_at(height);
    for (key, _) in state.prefix_raw(&prefix)? {
        state.delete_raw(key.clone());
        if let Some(job) = keys::parse_formation(&prefix, &key) {
            rounds::cancel_unformed(state, job)?;
        }
    }
    drain_checkpoints(state, &keys::draws_at(height), |s, id| {
        review::draw_committee(s, height, id)
    })?;
    let prefix = keys::samples_at(height);
    for (job, round) in state.round_entries(&prefix)? {
        state.delete_raw(keys::sample(height, job, round));
        review::sample_round(state, height, job, round)?;
    }
    drain_checkpoints(state, &keys::reviews_at(height), |s, id| {
        review::deadline_passed(s, height, id)
    })
}

/// After the block's transactions: the rounds due to close at this height close (their
/// deadline, or every active worker submitted).
pub fn end_block(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<HookOutput> {
    let prefix = keys::closes_at(ctx.height);
    for (job, round) in state.round_entries(&prefix)? {
        state.delete_raw(keys::close(ctx.height, job, round));
        rounds::close_round(state, ctx.height, job, round)?;
    }
    Ok(HookOutput::default())
}
