//! Epoch settlement: the closing epoch's emission and fees, paid in proportion to work.

use gonka_bank::{fee_collector_address, transfer, BankRead, BankWrite, Coin, NATIVE_DENOM};
use gonka_proto::rewards::{EpochRewards, ParticipantReward};
use gonka_sdk::{ErrorCode, Result, SdkError, StateWrite};
use gonka_stake::StakeRead;

use crate::{
    community_pool_address, emission, events, mul_div_floor, rewards_pool_address,
    validation_pool_address, RewardsRead, RewardsWrite,
};
use gonka_sdk::PPM;

/// Moves `amount` out of the rewards pool unless it is zero.
fn pay(state: &mut dyn StateWrite, to: &str, amount: u128) -> Result<()> {
    if amount == 0 {
        return Ok(());
    }
    transfer(state, &rewards_pool_address(), to, &Coin::ngnk(amount))
}

/// Settles `epoch` in its last block (after stake's `end_epoch`, before the epoch advances):
/// 1. mints `emission(epoch)` into the rewards pool and moves the whole fee collector balance
///    there (the epoch's fees): `total = emission + fees`;
/// 2. `validation = ⌊total·validation_share_ppm/10^6⌋` goes to the validation pool;
/// 3. the rest `R` is split over the epoch's work credits whose participant exists and is
///    not jailed: each gets `⌊R·units/W⌋` (`W` = the counted units), rounded down so the
///    sum never exceeds `R`;
/// 4. the dust `R − Σpaid` (all of `R` when `W = 0`) goes to the community pool.
///
/// Only `total` leaves the rewards pool, so anything sent to it by hand stays there.
/// Supply grows by exactly the emission; everything else is a transfer. Records an
/// [`EpochRewards`] and one [`ParticipantReward`] per counted operator (even when its
/// share rounds to zero), with a `reward` event each and one `rewards_settled` event.
pub fn end_epoch(epoch: u64, state: &mut dyn StateWrite) -> Result<()> {
    let params = state.rewards_params()?;
    let pool = rewards_pool_address();

    let emitted = emission(&params, epoch);
    if emitted > 0 {
        state.mint(&pool, &Coin::ngnk(emitted))?;
    }
    let collector = fee_collector_address();
    let fees = state.balance(&collector, NATIVE_DENOM)?;
    if fees > 0 {
        transfer(state, &collector, &pool, &Coin::ngnk(fees))?;
    }
    let total = emitted.checked_add(fees).ok_or_else(|| {
        SdkError::AmountOverflow.err(format!(
            "epoch {epoch} rewards: emission {emitted} plus fees {fees} exceed 2^128-1"
        ))
    })?;

    // Floor: the validation pool never gets more than its share; the remainder is paid out.
    let validation =
        mul_div_floor(total, params.validation_share_ppm.into(), PPM.into()).unwrap_or_default();
    pay(state, &validation_pool_address(), validation)?;
    let to_distribute = total - validation;

    // Work of jailed (or unknown) participants earns nothing; the others share all of R.
    let mut counted = Vec::new();
    for credit in state.work_credits(epoch)? {
        if credit.units == 0 {
            continue;
        }
        match state.participant(&credit.operator)? {
            Some(participant) if !participant.jailed => counted.push(credit),
            _ => {}
        }
    }
    let total_work: u128 = counted.iter().map(|r| u128::from(r.units)).sum();

    let mut distributed = 0u128;
    if total_work > 0 {
        for credit in &counted {
            // Floor: units ≤ W, so the share is at most R and always fits.
            let amount =
                mul_div_floor(to_distribute, credit.units.into(), total_work).unwrap_or_default();
            pay(state, &credit.operator, amount)?;
            distributed += amount;
            let reward = ParticipantReward {
                epoch,
                operator: credit.operator.clone(),
                work: credit.units,
                amount: amount.to_string(),
            };
            state.put_participant_reward(&reward);
            state.emit(events::reward(&reward));
        }
    }
    // The rounding dust (or, without work, everything) has one named destination.
    let community = to_distribute - distributed;
    pay(state, &community_pool_address(), community)?;

    let settled = EpochRewards {
        epoch,
        emission: emitted.to_string(),
        fees: fees.to_string(),
        validation_share: validation.to_string(),
        distributed: distributed.to_string(),
        community: community.to_string(),
        // The record's field is 64-bit; a sum of many u64 credits could exceed it, in which
        // case the record shows u64::MAX (the payout above used the exact 128-bit sum).
        total_work: u64::try_from(total_work).unwrap_or(u64::MAX),
    };
    state.put_epoch_rewards(&settled);
    tracing::info!(
        epoch,
        emission = %settled.emission,
        distributed = %settled.distributed,
        "epoch rewards settled"
    );
    state.emit(events::settled(&settled));
    Ok(())
}

#[cfg(test)]
mod tests {
    use gonka_auth::module_address;
    use gonka_sdk::{Delta, GenesisJson, MemoryState};
    use serde_json::json;

    use super::*;
    use crate::Rewards;

    fn operator(i: u8) -> String {
        module_address(&format!("operator-{i}"))
    }

    /// Three participants, rewards of 1,000 ngnk per epoch without decay.
    fn genesis(state: &mut Delta<'_>, validation_share_ppm: u64) {
        let participants: Vec<_> = (0..3)
            .map(|i| json!({"operator": operator(i), "amount": "1000", "consensus_pubkey": vec![i; 32]}))
            .collect();
        gonka_stake::Stake
            .init_genesis_json(
                state,
                Some(&json!({"params": {"min_stake": "1", "unbonding_epochs": 2,
                    "stake_weight_ppm": 100000, "max_power_share_ppm": 1000000, "jail_epochs": 2,
                    "min_unstake": "1", "max_unbonding_entries": 7},
                    "participants": participants})),
            )
            .unwrap();
        Rewards
            .init_genesis_json(
                state,
                Some(
                    &json!({"params": {"initial_emission": "1000", "decay_ppb": 0,
                    "validation_share_ppm": validation_share_ppm}}),
                ),
            )
            .unwrap();
    }

    fn balance(state: &Delta<'_>, address: &str) -> u128 {
        state.balance(address, NATIVE_DENOM).unwrap()
    }

    #[test]
    fn splits_by_work_rounding_down_with_dust_fees_and_validation_share() {
        let base = MemoryState::default();
        let mut state = Delta::new(&base);
        genesis(&mut state, 100_000);
        state
            .mint(&fee_collector_address(), &Coin::ngnk(101))
            .unwrap();
        gonka_stake::credit_work(&mut state, &operator(0), 1).unwrap();
        gonka_stake::credit_work(&mut state, &operator(1), 2).unwrap();
        gonka_stake::credit_work(&mut state, &operator(2), 4).unwrap();
        gonka_stake::jail(&mut state, &operator(2)).unwrap();
        let supply = state.supply(NATIVE_DENOM).unwrap();

        end_epoch(0, &mut state).unwrap();

        // total 1101, validation ⌊1101·0.1⌋ = 110, R = 991 over W = 3 (operator 2 is jailed):
        // ⌊991/3⌋ = 330 and ⌊991·2/3⌋ = 660, dust 1.
        assert_eq!(state.supply(NATIVE_DENOM).unwrap(), supply + 1000);
        assert_eq!(balance(&state, &validation_pool_address()), 110);
        assert_eq!(balance(&state, &operator(0)), 330);
        assert_eq!(balance(&state, &operator(1)), 660);
        assert_eq!(balance(&state, &operator(2)), 0);
        assert_eq!(balance(&state, &community_pool_address()), 1);
        assert_eq!(balance(&state, &rewards_pool_address()), 0);
        assert_eq!(balance(&state, &fee_collector_address()), 0);
        let settled = state.epoch_rewards(0).unwrap().unwrap();
        assert_eq!(
            settled,
            EpochRewards {
                epoch: 0,
                emission: "1000".into(),
                fees: "101".into(),
                validation_share: "110".into(),
                distributed: "990".into(),
                community: "1".into(),
                total_work: 3,
            }
        );
        let paid = state.epoch_participant_rewards(0).unwrap();
        let amounts: Vec<_> = paid
            .iter()
            .map(|r| (r.operator.clone(), r.amount.clone(), r.work))
            .collect();
        let mut expected = vec![
            (operator(0), "330".to_string(), 1),
            (operator(1), "660".to_string(), 2),
        ];
        expected.sort();
        assert_eq!(amounts, expected);
        assert_eq!(state.participant_rewards(&operator(1)).unwrap().len(), 1);
        let (_, events) = state.into_parts();
        let kinds: Vec<_> = events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds.iter().filter(|k| **k == "reward").count(), 2);
        assert_eq!(kinds.last(), Some(&"rewards_settled"));
    }

    #[test]
    fn an_epoch_without_work_pays_the_community_pool() {
        let base = MemoryState::default();
        let mut state = Delta::new(&base);
        genesis(&mut state, 0);
        end_epoch(0, &mut state).unwrap();
        assert_eq!(balance(&state, &community_pool_address()), 1000);
        let settled = state.epoch_rewards(0).unwrap().unwrap();
        assert_eq!((settled.distributed.as_str(), settled.total_work), ("0", 0));
        assert!(state.epoch_participant_rewards(0).unwrap().is_empty());
    }

    #[test]
    fn unsettled_epoch_query_is_a_readable_error() {
        let base = MemoryState::default();
        let mut state = Delta::new(&base);
        genesis(&mut state, 0);
        let request = gonka_proto::rewards::QueryEpochRewardsRequest {
            epoch: 4,
            ..Default::default()
        };
        let err = crate::query::route(
            "/rewards/epoch",
            &prost::Message::encode_to_vec(&request),
            &state,
        )
        .unwrap()
        .unwrap_err();
        assert_eq!((err.codespace, err.code), ("rewards", 3));
        assert!(err.log.contains("epoch 4 are not settled"), "{}", err.log);
        assert!(err.log.contains("current epoch is 0"), "{}", err.log);
    }
}
