//! Genesis import and export for stake: genesis participants are bonded (minted into the
//! bonded pool), unbonding entries minted into the unbonding pool, and the participants become
//! the initial validator set by the stake-only rule.

use gonka_auth::validate_address;
use gonka_bank::{BankWrite, Coin};
use gonka_proto::stake::{GenesisParticipant, GenesisState, Participant, UnbondingEntry};
use gonka_sdk::{parse_amount, ErrorCode, Genesis, HookOutput, Result, StateRead, StateWrite};

use crate::msgs::{validate_consensus_key, validate_moniker};
use crate::{
    bonded, bonded_pool_address, default_params, hooks, unbonding_pool_address, Stake, StakeError,
    StakeParams, StakeRead, StakeWrite, NAME,
};

impl Genesis for Stake {
    const NAME: &'static str = NAME;
    type State = GenesisState;

    /// Stores params, genesis participants and unbonding entries; returns the initial
    /// validator set (empty when no participant has a consensus key, so CometBFT keeps its
    /// genesis.json validators).
    fn init_genesis(
        &self,
        state: &mut dyn StateWrite,
        genesis: GenesisState,
    ) -> Result<HookOutput> {
        let params = StakeParams::from_proto(&genesis.params.unwrap_or_else(default_params))?;
        state.put_stake_params(&params);
        for entry in &genesis.participants {
            import_participant(state, entry, params.min_stake)?;
        }
        for entry in &genesis.unbondings {
            validate_address("app_state.stake.unbondings[].operator", &entry.operator)?;
            let amount = parse_amount("app_state.stake.unbondings[].amount", &entry.amount)?;
            state.mint(&unbonding_pool_address(), &Coin::ngnk(amount))?;
            let id = state.next_unbonding_id()?;
            state.put_unbonding(&UnbondingEntry {
                id,
                ..entry.clone()
            });
        }
        hooks::update_powers(state, None)
    }

    /// Params, every participant with its bond and jailing, and every unbonding entry. Epoch
    /// numbers are rebased on the current epoch, which is epoch 0 of the new chain.
    fn export_genesis(&self, state: &dyn StateRead) -> Result<GenesisState> {
        let epoch = gonka_epochs::current(state)?;
        let participants = state
            .participants()?
            .into_iter()
            .map(|p| {
                Ok(GenesisParticipant {
                    amount: bonded(&p)?.to_string(),
                    jailed_until_epoch: if p.jailed {
                        p.jailed_until_epoch.saturating_sub(epoch)
                    } else {
                        0
                    },
                    operator: p.operator,
                    moniker: p.moniker,
                    consensus_pubkey: p.consensus_pubkey,
                    jailed: p.jailed,
                    work_debt: p.work_debt,
                })
            })
            .collect::<Result<_>>()?;
        let unbondings = state
            .unbonding_entries()?
            .into_iter()
            .map(|e| UnbondingEntry {
                created_epoch: e.created_epoch.saturating_sub(epoch),
                completes_epoch: e.completes_epoch.saturating_sub(epoch),
                id: 0,
                ..e
            })
            .collect();
        Ok(GenesisState {
            params: Some(state.stake_params()?.to_proto()),
            participants,
            unbondings,
        })
    }
}

/// Checks and bonds one genesis participant.
fn import_participant(
    state: &mut dyn StateWrite,
    entry: &GenesisParticipant,
    min_stake: u128,
) -> Result<()> {
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
        validate_consensus_key(&entry.consensus_pubkey)?;
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
        jailed: entry.jailed,
        jailed_until_epoch: entry.jailed_until_epoch,
        work_debt: entry.work_debt,
        ..Default::default()
    });
    Ok(())
}
