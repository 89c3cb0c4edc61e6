//! Genesis import and export for rewards: only parameters (the settlement history stays
//! with the old chain).

use gonka_proto::rewards::GenesisState;
use gonka_sdk::{Genesis, HookOutput, Result, StateRead, StateWrite};

use crate::{default_params, validate_params, Rewards, RewardsRead, RewardsWrite, NAME};

impl Genesis for Rewards {
    const NAME: &'static str = NAME;
    type State = GenesisState;

    /// Validates and stores the parameters (the defaults when genesis gives none).
    fn init_genesis(
        &self,
        state: &mut dyn StateWrite,
        genesis: GenesisState,
    ) -> Result<HookOutput> {
        let params = genesis.params.unwrap_or_else(default_params);
        validate_params(&params)?;
        state.put_rewards_params(&params);
        Ok(HookOutput::default())
    }

    fn export_genesis(&self, state: &dyn StateRead) -> Result<GenesisState> {
        Ok(GenesisState {
            params: Some(state.rewards_params_proto()?),
        })
    }
}
