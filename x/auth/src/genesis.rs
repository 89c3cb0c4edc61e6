//! Genesis import for auth.

use gonka_proto::auth::GenesisState;
use gonka_sdk::{Result, StateWrite};

use crate::{default_params, validate_address, validate_params, AuthWrite};

/// Stores params (defaults when absent) and creates the listed accounts in order.
pub fn init(state: &mut dyn StateWrite, genesis: GenesisState) -> Result<()> {
    let params = genesis.params.unwrap_or_else(default_params);
    validate_params(&params)?;
    state.put_auth_params(&params);
    for address in &genesis.addresses {
        validate_address("app_state.auth.addresses[]", address)?;
        state.ensure_account(address)?;
    }
    Ok(())
}
