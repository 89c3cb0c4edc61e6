//! Genesis import for rewards: only parameters.

use gonka_proto::rewards::GenesisState;
use gonka_sdk::{Result, StateWrite};

use crate::{default_params, validate_params, RewardsWrite};

/// Validates and stores the parameters (the defaults when genesis gives none).
pub fn init(state: &mut dyn StateWrite, genesis: GenesisState) -> Result<()> {
    let params = genesis.params.unwrap_or_else(default_params);
    validate_params(&params)?;
    state.put_rewards_params(&params);
    Ok(())
}
