//! Block and epoch hooks: jailing takes effect, unbonding is paid, powers are recomputed.

use std::collections::BTreeMap;

use gonka_bank::{transfer, BankRead, Coin, NATIVE_DENOM};
use gonka_proto::stake::Participant;
use gonka_sdk::{HookOutput, Result, StateRead, StateWrite, ValidatorUpdate};

use crate::power::{self, Candidate};
use crate::state::{bonded, unbonding_amount};
use crate::{bonded_pool_address, events, unbonding_pool_address, StakeRead, StakeWrite};

fn validator_update(participant: &Participant, power: i64) -> Option<ValidatorUpdate> {
    let key: [u8; 32] = participant.consensus_pubkey.as_slice().try_into().ok()?;
    Some(ValidatorUpdate {
        ed25519_pub_key: key,
        power,
    })
}

/// Participants jailed during the block leave the validator set at its end, unless that
/// would leave the set empty (CometBFT halts on an empty set): the last validator stays
/// until the next epoch end finds someone eligible to replace it.
pub fn end_block(state: &mut dyn StateWrite) -> Result<HookOutput> {
    let mut output = HookOutput::default();
    let queued = state.take_jail_queue()?;
    if queued.is_empty() {
        return Ok(output);
    }
    let mut validators = state.participants()?.iter().filter(|p| p.power > 0).count();
    for operator in queued {
        let Some(mut participant) = state.participant(&operator)? else {
            continue;
        };
        if participant.power > 0 && validators > 1 {
            validators -= 1;
            output
                .validator_updates
                .extend(validator_update(&participant, 0));
            participant.power = 0;
            state.put_participant(&participant);
            state.emit(events::power(&operator, 0));
        }
    }
    Ok(output)
}

/// At the end of `epoch`: pays the unbonding entries that complete now, then sets the next
/// epoch's powers from this epoch's work.
pub fn end_epoch(epoch: u64, state: &mut dyn StateWrite) -> Result<HookOutput> {
    for entry in state.unbondings_completing(epoch)? {
        let amount = unbonding_amount(&entry)?;
        transfer(
            state,
            &unbonding_pool_address(),
            &entry.operator,
            &Coin::ngnk(amount),
        )?;
        state.delete_unbonding(&entry);
        state.emit(events::unbonding_completed(&entry.operator, amount));
    }
    update_powers(state, Some(epoch))
}

/// Recomputes every participant's power by the Sprint rule (stake only when `work_epoch` is
/// `None`, as at genesis) and returns the changes for CometBFT.
pub fn update_powers(state: &mut dyn StateWrite, work_epoch: Option<u64>) -> Result<HookOutput> {
    let params = state.stake_params()?;
    let min_stake = params.min_stake;
    let participants = state.participants()?;
    let work = match work_epoch {
        Some(epoch) => state.work_credits(epoch)?,
        None => Vec::new(),
    };
    let work_by_operator: BTreeMap<&str, u64> = work
        .iter()
        .map(|record| (record.operator.as_str(), record.units))
        .collect();
    let work_of = |operator: &str| work_by_operator.get(operator).copied().unwrap_or(0);
    // (index into `participants`, inputs) of every eligible participant.
    let mut eligible = Vec::new();
    for (index, participant) in participants.iter().enumerate() {
        let stake = bonded(participant)?;
        if !participant.jailed && stake >= min_stake && participant.consensus_pubkey.len() == 32 {
            eligible.push((
                index,
                Candidate {
                    stake,
                    work: work_of(&participant.operator),
                },
            ));
        }
    }
    if eligible.is_empty() {
        // Never hand CometBFT an empty validator set: keep the current one.
        return Ok(HookOutput::default());
    }
    let candidates: Vec<Candidate> = eligible.iter().map(|(_, c)| *c).collect();
    let powers = power::compute(
        &candidates,
        params.stake_weight_ppm,
        params.max_power_share_ppm,
    )?;

    let mut new_powers = vec![0; participants.len()];
    for ((index, _), power) in eligible.iter().zip(&powers) {
        new_powers[*index] = *power;
    }
    let mut output = HookOutput::default();
    for (participant, new_power) in participants.into_iter().zip(new_powers) {
        if new_power != participant.power {
            output
                .validator_updates
                .extend(validator_update(&participant, new_power));
            state.emit(events::power(&participant.operator, new_power));
            state.put_participant(&Participant {
                power: new_power,
                ..participant
            });
        }
    }
    Ok(output)
}

/// The stake invariants: the bonded pool holds exactly the participants' bonds and the
/// unbonding pool exactly the unbonding entries. Returns a description of the first breach.
pub fn check_invariants(state: &dyn StateRead) -> std::result::Result<(), String> {
    let fail = |e: gonka_sdk::Error| e.to_string();
    let bonded_sum: u128 = state
        .participants()
        .map_err(fail)?
        .iter()
        .map(bonded)
        .sum::<Result<u128>>()
        .map_err(fail)?;
    let unbonding_sum: u128 = state
        .unbonding_entries()
        .map_err(fail)?
        .iter()
        .map(unbonding_amount)
        .sum::<Result<u128>>()
        .map_err(fail)?;
    let bonded_pool = state
        .balance(&bonded_pool_address(), NATIVE_DENOM)
        .map_err(fail)?;
    let unbonding_pool = state
        .balance(&unbonding_pool_address(), NATIVE_DENOM)
        .map_err(fail)?;
    if bonded_pool != bonded_sum {
        return Err(format!(
            "bonded pool holds {bonded_pool} but participants' bonds sum to {bonded_sum}"
        ));
    }
    if unbonding_pool != unbonding_sum {
        return Err(format!(
            "unbonding pool holds {unbonding_pool} but entries sum to {unbonding_sum}"
        ));
    }
    Ok(())
}
