//! Genesis import for epochs.

use gonka_proto::epochs::{Epoch, GenesisState};
use gonka_sdk::{Result, StateWrite};

use crate::{default_params, validate_params, EpochsWrite};

/// Stores params and opens epoch 0 at height 1 (its start time is set by block 1).
pub fn init(state: &mut dyn StateWrite, genesis: GenesisState) -> Result<()> {
    let params = genesis.params.unwrap_or_else(default_params);
    validate_params(&params)?;
    state.put_epochs_params(&params);
    state.put_current_epoch(&Epoch {
        number: 0,
        start_height: 1,
        ..Default::default()
    });
    Ok(())
}
