//! Settlement hooks: the last block's batches sampled, batches whose window closed paid out,
//! released escrows returned.

use gonka_sdk::{BlockContext, Result, StateWrite};

use crate::{ledger, sampling, SettlementWrite};

/// At the start of each block, before its transactions: first the leaf demands whose
/// deadline passed unanswered (their batches fall before they could become final), then the
/// batches that become final at this height, then the escrows released at it (a batch paid
/// out in the same block as its escrow's release has already debited it); last, at most
/// [`ledger::PRUNE_PER_BLOCK`] final or voided batches past `batch_keep_secs`; then the
/// leaves of the batches settled in the last block are sampled for validation
/// ([`sampling`]). Work proportional to them.
pub fn begin_block(ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
    ledger::expire_demands(state, ctx.height)?;
    ledger::finalize_due(state, ctx.height)?;
    let now = u64::try_from(ctx.time_seconds).unwrap_or(0);
    state.prune_batches(now, ledger::PRUNE_PER_BLOCK)?;
    ledger::release_due(state, ctx.height)?;
    sampling::demand_samples(state, ctx.height)
}
