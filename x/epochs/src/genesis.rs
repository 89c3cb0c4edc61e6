//! Genesis import and export for epochs.

use gonka_proto::epochs::{Epoch, GenesisState};
use gonka_sdk::{Genesis, HookOutput, Result, StateRead, StateWrite};

use crate::{default_params, validate_params, Epochs, EpochsRead, EpochsWrite, NAME};

impl Genesis for Epochs {
    const NAME: &'static str = NAME;
    type State = GenesisState;

    /// Stores params and opens epoch 0 at height 1 (its start time is set by block 1).
    fn init_genesis(
        &self,
        state: &mut dyn StateWrite,
        genesis: GenesisState,
    ) -> Result<HookOutput> {
        let params = genesis.params.unwrap_or_else(default_params);
        validate_params(&params)?;
        state.put_epochs_params(&params);
        state.put_current_epoch(&Epoch {
            number: 0,
            start_height: 1,
            ..Default::default()
        });
        Ok(HookOutput::default())
    }

    /// The params; the new chain starts again at epoch 0 (other modules rebase the epoch
    /// numbers they export on the current epoch).
    fn export_genesis(&self, state: &dyn StateRead) -> Result<GenesisState> {
        Ok(GenesisState {
            params: Some(state.epochs_params()?),
        })
    }
}
