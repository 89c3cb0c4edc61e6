//! Typed access to balances and supply, and the fund-moving API other modules call.

use gonka_auth::{module_address, AuthWrite};
use gonka_proto::bank as pb;
use gonka_proto::query::page::PageRequest;
use gonka_sdk::{
    paginate_proto, parse_amount, ErrorCode, Page, Result, SdkError, StateRead, StateReadExt,
    StateWrite, StateWriteExt,
};

use crate::{events, keys, BankError, Coin, FEE_COLLECTOR};

/// Address of the fee collector module account.
pub fn fee_collector_address() -> String {
    // Every tx pays its fee here: hash and encode the address once.
    static ADDRESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ADDRESS
        .get_or_init(|| module_address(FEE_COLLECTOR))
        .clone()
}

fn stored_amount(state: &(impl StateRead + ?Sized), key: &[u8]) -> Result<u128> {
    match state.get_proto::<pb::Coin>(key)? {
        Some(coin) => parse_amount("stored amount", &coin.amount),
        None => Ok(0),
    }
}

/// Reads of balances and supply.
pub trait BankRead: StateRead {
    /// Amount of `denom` held by `address` (zero for unknown accounts).
    fn balance(&self, address: &str, denom: &str) -> Result<u128> {
        stored_amount(self, &keys::balance(address, denom))
    }

    /// Every non-zero balance of `address`, sorted by denom.
    fn balances(&self, address: &str) -> Result<Vec<Coin>> {
        self.prefix_proto::<pb::Coin>(&keys::balances_of(address))?
            .into_iter()
            .map(|(_, coin)| {
                Ok(Coin::new(
                    &coin.denom,
                    parse_amount("stored amount", &coin.amount)?,
                ))
            })
            .collect()
    }

    /// One page of the balances of `address`, by denom, as stored.
    fn balances_page(&self, address: &str, page: Option<&PageRequest>) -> Result<Page<pb::Coin>> {
        paginate_proto(self, &keys::balances_of(address), page, |_, coin| {
            Ok(Some(coin))
        })
    }

    /// Every account's balances, ascending by address then denom.
    fn all_balances(&self) -> Result<Vec<(String, Coin)>> {
        self.prefix_proto::<pb::Coin>(&keys::all_balances())?
            .into_iter()
            .filter_map(|(key, coin)| keys::parse_balance_address(&key).map(|a| (a, coin)))
            .map(|(address, coin)| {
                let amount = parse_amount("stored amount", &coin.amount)?;
                Ok((address, Coin::new(&coin.denom, amount)))
            })
            .collect()
    }

    /// Total amount of `denom` in existence.
    fn supply(&self, denom: &str) -> Result<u128> {
        stored_amount(self, &keys::supply(denom))
    }

    /// One page of the total supply, by denom.
    fn supply_page(&self, page: Option<&PageRequest>) -> Result<Page<pb::Coin>> {
        paginate_proto(self, &keys::supplies(), page, |_, coin| Ok(Some(coin)))
    }
}

impl<T: StateRead + ?Sized> BankRead for T {}

/// Raw balance and supply writes; use [`transfer`] and [`BankWrite::mint`] to keep supply whole.
pub trait BankWrite: StateWrite {
    /// Sets the balance of `denom` for `address`; zero removes the entry.
    fn set_balance(&mut self, address: &str, denom: &str, amount: u128) {
        put_amount(self, keys::balance(address, denom), denom, amount);
    }

    /// Creates `coin` in `recipient`'s balance and adds it to the supply.
    fn mint(&mut self, recipient: &str, coin: &Coin) -> Result<()> {
        self.ensure_account(recipient)?;
        let balance = checked_add(
            self.balance(recipient, &coin.denom)?,
            coin.amount,
            "balance",
        )?;
        let supply = checked_add(self.supply(&coin.denom)?, coin.amount, "supply")?;
        self.set_balance(recipient, &coin.denom, balance);
        put_amount(self, keys::supply(&coin.denom), &coin.denom, supply);
        self.emit(events::mint(recipient, coin));
        Ok(())
    }
}

impl<T: StateWrite + ?Sized> BankWrite for T {}

fn put_amount(state: &mut (impl StateWrite + ?Sized), key: Vec<u8>, denom: &str, amount: u128) {
    if amount == 0 {
        state.delete_raw(key);
    } else {
        state.put_proto(key, &Coin::new(denom, amount).to_proto());
    }
}

fn checked_add(a: u128, b: u128, what: &str) -> Result<u128> {
    a.checked_add(b)
        .ok_or_else(|| SdkError::AmountOverflow.err(format!("{what} would exceed 2^128-1")))
}

/// Moves `coin` from `from` to `to`, creating the recipient's account if new.
/// Fails with `InsufficientFunds` (and writes nothing) if `from` holds too little.
pub fn transfer(state: &mut dyn StateWrite, from: &str, to: &str, coin: &Coin) -> Result<()> {
    let available = state.balance(from, &coin.denom)?;
    let remaining = available.checked_sub(coin.amount).ok_or_else(|| {
        BankError::InsufficientFunds.err(format!(
            "{from} holds {available}{denom} but needs {needed}{denom}",
            denom = coin.denom,
            needed = coin.amount
        ))
    })?;
    state.set_balance(from, &coin.denom, remaining);
    state.ensure_account(to)?;
    let received = checked_add(state.balance(to, &coin.denom)?, coin.amount, "balance")?;
    state.set_balance(to, &coin.denom, received);
    state.emit(events::transfer(from, to, coin));
    Ok(())
}
