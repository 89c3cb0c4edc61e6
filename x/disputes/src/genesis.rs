//! Genesis import for disputes: only parameters.

use gonka_proto::disputes::GenesisState;
use gonka_sdk::{Result, StateWrite};

use crate::{default_params, validate_params, DisputesWrite};

/// Validates and stores the parameters (the defaults when genesis gives none).
pub fn init(state: &mut dyn StateWrite, genesis: GenesisState) -> Result<()> {
    let params = genesis.params.unwrap_or_else(default_params);
    validate_params(&params)?;
    state.put_disputes_params(&params);
    Ok(())
}
