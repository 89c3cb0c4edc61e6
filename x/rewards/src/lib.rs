//! x/rewards: each epoch's emission plus the fees collected in it, paid to participants in
//! proportion to their verified work.
//!
//! In the last block of every epoch ([`Module::end_epoch`], after stake's hook), the module
//! mints [`emission`]`(epoch)` = `initial_emission × (1 − decay)^epoch` (integer fixed point,
//! rounded down) into the rewards pool, gathers the fee collector's balance there, moves
//! `validation_share_ppm` of the total to the validation pool and splits the rest over the
//! epoch's work ledger ([`gonka_stake::StakeRead::work_credits`]) by units, rounding every share down; the
//! dust (everything, in an epoch without work) goes to the community pool. Jailed
//! participants' work earns nothing. Total supply changes only by the emission.
//!
//! Settlements are kept per epoch ([`epoch_rewards`]) and per participant
//! ([`participant_rewards`]) and answered at `/rewards/epoch`, `/rewards/participant` and
//! `/rewards/params`.

mod emission;
mod errors;
mod events;
mod genesis;
mod hooks;
mod keys;
mod params;
mod query;
mod state;

pub use emission::{decay_factor, emission, mul_div_floor, FACTOR_SCALE};
pub use errors::RewardsError;
pub use params::{default_params, validate_params, RewardsParams, MAX_INITIAL_EMISSION, PPB};
pub use state::{
    community_pool_address, rewards_pool_address, validation_pool_address, RewardsRead,
    RewardsWrite,
};

use gonka_sdk::{BlockContext, HookOutput, Module, Result, StateRead, StateWrite};

/// Module name: key namespace, codespace, query prefix and genesis section.
pub const NAME: &str = "rewards";

/// Name of the module account the emission is minted into and fees gathered in.
pub const REWARDS_POOL: &str = "rewards";

/// Name of the module account receiving rounding dust and rewards of epochs without work.
pub const COMMUNITY_POOL: &str = "community_pool";

/// Name of the module account receiving the validation share.
pub const VALIDATION_POOL: &str = "validation_pool";

/// The rewards module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Rewards;

impl Module for Rewards {
    fn end_epoch(
        &self,
        _ctx: &BlockContext,
        epoch: u64,
        state: &mut dyn StateWrite,
    ) -> Result<HookOutput> {
        hooks::end_epoch(epoch, state)?;
        Ok(HookOutput::default())
    }

    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
