//! Stake events.

use gonka_sdk::Event;

/// `stake`: `amount` bonded by `operator`.
pub fn staked(operator: &str, amount: u128, bonded: u128) -> Event {
    Event::new("stake")
        .attr("operator", operator)
        .attr("amount", format!("{amount}ngnk"))
        .attr("bonded", format!("{bonded}ngnk"))
}

/// `unstake`: `amount` moved to unbonding until the end of `completes_epoch`.
pub fn unstaked(operator: &str, amount: u128, completes_epoch: u64) -> Event {
    Event::new("unstake")
        .attr("operator", operator)
        .attr("amount", format!("{amount}ngnk"))
        .attr("completes_epoch", completes_epoch)
}

/// `unbonding_completed`: `amount` paid back to `operator`.
pub fn unbonding_completed(operator: &str, amount: u128) -> Event {
    Event::new("unbonding_completed")
        .attr("operator", operator)
        .attr("amount", format!("{amount}ngnk"))
}

/// `slash`: `amount` taken from `operator` and paid to `beneficiary`.
pub fn slashed(operator: &str, fraction_ppm: u64, amount: u128, beneficiary: &str) -> Event {
    Event::new("slash")
        .attr("operator", operator)
        .attr("fraction_ppm", fraction_ppm)
        .attr("amount", format!("{amount}ngnk"))
        .attr("beneficiary", beneficiary)
}

/// `jail` / `unjail`.
pub fn jailed(operator: &str, jailed: bool, until_epoch: u64) -> Event {
    Event::new(if jailed { "jail" } else { "unjail" })
        .attr("operator", operator)
        .attr("until_epoch", until_epoch)
}

/// `validator_power`: the power `operator` holds from the next block on.
pub fn power(operator: &str, power: i64) -> Event {
    Event::new("validator_power")
        .attr("operator", operator)
        .attr("power", power)
}
