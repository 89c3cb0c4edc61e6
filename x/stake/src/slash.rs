//! Punishment API for other modules (disputes): slash a fraction of stake, jail.

use gonka_bank::{transfer, Coin};
use gonka_sdk::{ErrorCode, Result, StateWrite};

use crate::state::{bonded, unbonding_amount};
use crate::{
    bonded_pool_address, events, unbonding_pool_address, StakeError, StakeRead, StakeWrite,
};
use gonka_sdk::PPM;

/// `amount · fraction_ppm / 10^6`, rounded down: a slash never takes more than the fraction.
fn portion(amount: u128, fraction_ppm: u64) -> u128 {
    amount * u128::from(fraction_ppm) / u128::from(PPM)
}

/// Takes `fraction_ppm` (parts per million) of `operator`'s bonded stake and of each of its
/// unbonding entries, pays it to `beneficiary` and returns the amount taken.
pub fn slash(
    state: &mut dyn StateWrite,
    operator: &str,
    fraction_ppm: u64,
    beneficiary: &str,
) -> Result<u128> {
    if fraction_ppm > PPM {
        return Err(StakeError::InvalidFraction.err(format!(
            "slash fraction {fraction_ppm} ppm exceeds {PPM} ppm (100%)"
        )));
    }
    let mut participant = state.existing_participant(operator)?;
    let stake = bonded(&participant)?;
    let from_bonded = portion(stake, fraction_ppm);
    participant.bonded = (stake - from_bonded).to_string();
    state.put_reduced_participant(&participant)?;
    let mut taken = from_bonded;
    if from_bonded > 0 {
        transfer(
            state,
            &bonded_pool_address(),
            beneficiary,
            &Coin::ngnk(from_bonded),
        )?;
    }
    for mut entry in state.operator_unbondings(operator)? {
        let amount = unbonding_amount(&entry)?;
        let cut = portion(amount, fraction_ppm);
        if cut == 0 {
            continue;
        }
        transfer(
            state,
            &unbonding_pool_address(),
            beneficiary,
            &Coin::ngnk(cut),
        )?;
        taken += cut;
        if amount == cut {
            state.delete_unbonding(&entry);
        } else {
            entry.amount = (amount - cut).to_string();
            state.put_unbonding(&entry);
        }
    }
    state.emit(events::slashed(operator, fraction_ppm, taken, beneficiary));
    Ok(taken)
}

/// Jails `operator` for `jail_epochs` epochs: it leaves the validator set at the end of this
/// block, earns no work credit, and may not stake or unstake until it sends MsgUnjail.
pub fn jail(state: &mut dyn StateWrite, operator: &str) -> Result<()> {
    let mut participant = state.existing_participant(operator)?;
    let until = gonka_epochs::current(state)? + state.stake_params()?.jail_epochs;
    participant.jailed = true;
    participant.jailed_until_epoch = until;
    state.put_participant(&participant);
    state.queue_jailing(operator);
    state.emit(events::jailed(operator, true, until));
    Ok(())
}
