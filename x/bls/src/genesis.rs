//! Genesis import and export for bls: the registered keys (their proofs were checked when
//! they were registered on the exporting chain; genesis checks encoding and uniqueness).

use gonka_bls_crypto::PublicKey;
use gonka_proto::bls::GenesisState;
use gonka_sdk::{ErrorCode, Genesis, HookOutput, Result, StateRead, StateWrite};

use gonka_stake::StakeRead;

use crate::{
    default_params, validate_params, Bls, BlsError, BlsRead, BlsWrite, DkgWrite, SignWrite, NAME,
};

impl Genesis for Bls {
    const NAME: &'static str = NAME;
    type State = GenesisState;

    fn init_genesis(
        &self,
        state: &mut dyn StateWrite,
        genesis: GenesisState,
    ) -> Result<HookOutput> {
        let params = genesis.params.unwrap_or_else(default_params);
        validate_params(&params)?;
        state.put_bls_params(&params);
        for (i, key) in genesis.keys.iter().enumerate() {
            let field = format!("app_state.bls.keys[{i}]");
            gonka_auth::validate_address(&format!("{field}.address"), &key.address)
                .map_err(|e| BlsError::InvalidMsg.err(e.log))?;
            if PublicKey::from_bytes(&key.pubkey).is_none() {
                return Err(BlsError::InvalidMsg.err(format!(
                    "{field}.pubkey is not a 48-byte compressed BLS12-381 G1 point"
                )));
            }
            if state.bls_key(&key.address)?.is_some() || state.bls_key_owner(&key.pubkey)?.is_some()
            {
                return Err(BlsError::DuplicateKey.err(format!(
                    "{field} repeats an address or a public key of an earlier entry"
                )));
            }
            state.put_bls_key(key)?;
            // The genesis validators' keys sign for the chain until its first group does.
            let validator = state
                .participant(&key.address)?
                .is_some_and(|p| p.consensus_pubkey.len() == 32);
            if validator {
                state.put_genesis_signer(key);
            }
        }
        Ok(HookOutput::default())
    }

    fn export_genesis(&self, state: &dyn StateRead) -> Result<GenesisState> {
        Ok(GenesisState {
            keys: state.bls_keys()?,
            params: Some(state.bls_params()?),
        })
    }
}
