//! x/stake: participants and their bonded GNK (the collateral disputes can slash), unbonding,
//! jailing, the work ledger, and the Sprint rule that turns each epoch's verified work into
//! the next epoch's validator power.
//!
//! Bonded stake sits in the `stake_bonded` module account and unbonding stake in
//! `stake_unbonding`, so bank balances always sum to the supply, and the pools equal the sum
//! of participants' bonds and of unbonding entries (see [`check_invariants`]).
//!
//! Other modules use: [`credit_work`] / [`void_work`] / [`void_work_or_owe`] / [`StakeRead::work_credits`] (the work ledger),
//! [`slash`] and [`jail`] (punishment), [`StakeRead`] (participants).
//!
//! ## The Sprint power rule (at the end of every epoch)
//! Eligible: not jailed, bonded ≥ `min_stake`, with a consensus key. With `S` the sum of
//! eligible bonds and `W` the sum of their work in the closing epoch, each eligible
//! participant's weight, in units of 10^-12, is
//! - `stake_i·10^12/S` (floor) when `W = 0` (an epoch without verified work), else
//! - `(w·⌊stake_i·10^12/S⌋ + (10^6−w)·⌊work_i·10^12/W⌋) / 10^6` (floor), `w` = `stake_weight_ppm`.
//!
//! Then the cap: while some weight reaches or exceeds `max_power_share_ppm` of the total, those weights
//! are set to the cap and the rest is re-spread over the uncapped ones in proportion to their
//! weights (floor). The cap is skipped when the set is too small for it to hold
//! (`n · max_power_share_ppm < 10^6`). Power is `⌊weight·10^6/total⌋`; a power of 0 leaves the
//! set. If no participant is eligible, the validator set is left unchanged so the chain can
//! never lose all its validators.
//!
//! ## Liveness and double signing (every block)
//! Validators missing too much of a sliding window of commits are jailed and slashed, and
//! those caught double signing are slashed, jailed and tombstoned: see `liveness.rs`.

mod errors;
mod events;
mod genesis;
mod hooks;
pub mod keys;
mod liveness;
mod msgs;
mod params;
pub mod power;
mod query;
mod slash;
mod state;
mod work;

pub use errors::StakeError;
pub use hooks::check_invariants;
pub use params::{default_params, StakeParams};
pub use slash::{jail, slash};
pub use state::{
    bonded, bonded_pool_address, take_fallen_below_min, unbonding_pool_address, StakeRead,
    StakeWrite,
};
pub use work::{credit_work, void_work, void_work_or_owe};

use gonka_sdk::{Any, BlockContext, HookOutput, Module, Msg, Result, StateRead, StateWrite};

/// Module name: key namespace, codespace and genesis section.
pub const NAME: &str = "stake";

/// Name of the module account holding bonded stake.
pub const BONDED_POOL: &str = "stake_bonded";

/// Name of the module account holding unbonding stake.
pub const UNBONDING_POOL: &str = "stake_unbonding";

/// The stake module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stake;

impl Module for Stake {
    fn decode_msg(&self, msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        msgs::decode(msg)
    }

    fn begin_block(&self, ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
        liveness::begin_block(ctx, state)
    }

    fn end_block(&self, _ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<HookOutput> {
        hooks::end_block(state)
    }

    fn end_epoch(
        &self,
        _ctx: &BlockContext,
        epoch: u64,
        state: &mut dyn StateWrite,
    ) -> Result<HookOutput> {
        hooks::end_epoch(epoch, state)
    }

    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
