//! Genesis import and export for disputes: only parameters. Validations and disputes stay
//! with the old chain; export a chain with no dispute open, or their deposits stay in the
//! escrow account.

use gonka_proto::disputes::GenesisState;
use gonka_sdk::{Genesis, HookOutput, Result, StateRead, StateWrite};

use gonka_epochs::EpochsRead;
use gonka_inference::InferenceRead;
use gonka_stake::StakeRead;

use crate::params::validate_windows;
use crate::{default_params, validate_params, Disputes, DisputesRead, DisputesWrite, NAME};

impl Genesis for Disputes {
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
        // x/epochs', x/stake's and x/inference's genesis ran before this one
        // (app/src/modules.rs).
        validate_windows(
            &params,
            state.inference_params()?.payload_retention_blocks,
            state.stake_params()?.unbonding_epochs,
            state.epochs_params()?.epoch_length,
        )?;
        state.put_disputes_params(&params);
        Ok(HookOutput::default())
    }

    fn export_genesis(&self, state: &dyn StateRead) -> Result<GenesisState> {
        Ok(GenesisState {
            params: Some(state.disputes_params()?),
        })
    }
}
