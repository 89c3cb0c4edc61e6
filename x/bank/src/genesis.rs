//! Genesis import and export for bank: every listed balance is minted, so supply equals the
//! sum.

use gonka_auth::validate_address;
use gonka_proto::bank::{Balance, GenesisState};
use gonka_sdk::{Genesis, HookOutput, Result, StateRead, StateWrite};

use crate::{parse_coins, Bank, BankRead, BankWrite, Coin, NAME};

impl Genesis for Bank {
    const NAME: &'static str = NAME;
    type State = GenesisState;

    /// Mints every genesis balance (creating accounts as needed).
    fn init_genesis(
        &self,
        state: &mut dyn StateWrite,
        genesis: GenesisState,
    ) -> Result<HookOutput> {
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
        Ok(HookOutput::default())
    }

    /// Every balance, by address, except those of the accounts whose funds another
    /// module's genesis mints again (see [`Bank::minted_elsewhere`]).
    fn export_genesis(&self, state: &dyn StateRead) -> Result<GenesisState> {
        let mut balances: Vec<Balance> = Vec::new();
        for (address, coin) in state.all_balances()? {
            if self.minted_elsewhere.contains(&address) {
                continue;
            }
            match balances.last_mut() {
                Some(last) if last.address == address => last.coins.push(coin.to_proto()),
                _ => balances.push(Balance {
                    address,
                    coins: vec![Coin::to_proto(&coin)],
                }),
            }
        }
        Ok(GenesisState { balances })
    }
}
