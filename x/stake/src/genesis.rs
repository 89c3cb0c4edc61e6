//! Genesis import for stake: genesis participants are bonded (minted into the bonded pool)
//! and become the initial validator set by the stake-only rule.

use gonka_auth::validate_address;
use gonka_bank::{BankWrite, Coin};
use gonka_proto::stake::{GenesisState, Participant};
use gonka_sdk::{parse_amount, ErrorCode, HookOutput, Result, StateWrite};

use crate::msgs::validate_moniker;
use crate::{
    bonded_pool_address, default_params, hooks, validate_params, StakeError, StakeRead, StakeWrite,
};

/// Stores params and genesis participants; returns the initial validator set (empty when no
/// participant has a consensus key, so CometBFT keeps its genesis.json validators).
pub fn init(state: &mut dyn StateWrite, genesis: GenesisState) -> Result<HookOutput> {
    let params = genesis.params.unwrap_or_else(default_params);
    validate_params(&params)?;
    state.put_stake_params(&params);
    let min_stake = parse_amount("min_stake", &params.min_stake)?;
    for entry in &genesis.participants {
        validate_address("app_state.stake.participants[].operator", &entry.operator)?;
        validate_moniker(&entry.moniker)?;
        let amount = parse_amount("app_state.stake.participants[].amount", &entry.amount)?;
        if amount < min_stake {
            return Err(StakeError::BelowMinStake.err(format!(
                "genesis participant {} bonds {amount}ngnk, below min_stake {min_stake}ngnk",
                entry.operator
            )));
        }
        if state.participant(&entry.operator)?.is_some() {
            return Err(StakeError::InvalidParams.err(format!(
                "genesis lists participant {} twice",
                entry.operator
            )));
        }
        if !entry.consensus_pubkey.is_empty() {
            crate::msgs::validate_consensus_key(&entry.consensus_pubkey)?;
            if let Some(owner) = state.consensus_key_owner(&entry.consensus_pubkey)? {
                return Err(StakeError::ConsensusKeyInUse.err(format!(
                    "genesis participants {owner} and {} share a consensus key",
                    entry.operator
                )));
            }
        }
        state.mint(&bonded_pool_address(), &Coin::ngnk(amount))?;
        state.put_participant(&Participant {
            operator: entry.operator.clone(),
            moniker: entry.moniker.clone(),
            consensus_pubkey: entry.consensus_pubkey.clone(),
            bonded: amount.to_string(),
            ..Default::default()
        });
    }
    hooks::update_powers(state, None)
}
