//! Genesis import and export for auth.

use gonka_proto::auth::GenesisState;
use gonka_sdk::{Genesis, HookOutput, Result, StateRead, StateWrite};

use crate::{default_params, validate_address, Auth, AuthParams, AuthRead, AuthWrite, NAME};

impl Genesis for Auth {
    const NAME: &'static str = NAME;
    type State = GenesisState;

    /// Stores params (defaults when absent) and creates the listed accounts in order.
    fn init_genesis(
        &self,
        state: &mut dyn StateWrite,
        genesis: GenesisState,
    ) -> Result<HookOutput> {
        let params = AuthParams::from_proto(&genesis.params.unwrap_or_else(default_params))?;
        state.put_auth_params(&params);
        for address in &genesis.addresses {
            validate_address("app_state.auth.addresses[]", address)?;
            state.ensure_account(address)?;
        }
        Ok(HookOutput::default())
    }

    /// Params and every account in account-number order, so the new chain numbers them the
    /// same. Sequences and public keys are not carried: the new chain has a new chain id, so
    /// no old signature replays there, and each key is learned again from its first tx.
    fn export_genesis(&self, state: &dyn StateRead) -> Result<GenesisState> {
        Ok(GenesisState {
            params: Some(state.auth_params()?.to_proto()),
            addresses: state.accounts()?.into_iter().map(|a| a.address).collect(),
        })
    }
}
