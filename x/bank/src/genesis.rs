//! Genesis import for bank: every listed balance is minted, so supply equals the sum.

use gonka_auth::validate_address;
use gonka_proto::bank::GenesisState;
use gonka_sdk::{Result, StateWrite};

use crate::{parse_coins, BankWrite};

/// Mints every genesis balance (creating accounts as needed).
pub fn init(state: &mut dyn StateWrite, genesis: GenesisState) -> Result<()> {
    for balance in &genesis.balances {
        validate_address("app_state.bank.balances[].address", &balance.address)?;
        let coins = parse_coins(
            "app_state.bank.balances[].coins",
            balance
                .coins
                .iter()
                .map(|c| (c.denom.as_str(), c.amount.as_str())),
        )?;
        for coin in &coins {
            state.mint(&balance.address, coin)?;
        }
    }
    Ok(())
}
