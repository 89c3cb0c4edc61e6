//! Typed access to auth state; other crates use these traits, never the keys.

use gonka_proto::auth::Account;
use gonka_sdk::{ErrorCode, Result, StateRead, StateReadExt, StateWrite, StateWriteExt};

use crate::{default_params, keys, AuthError, AuthParams};

/// Reads of auth state.
pub trait AuthRead: StateRead {
    /// Current parameters (defaults if never set).
    fn auth_params(&self) -> Result<AuthParams> {
        let stored = self.get_proto(&keys::params())?;
        AuthParams::from_proto(&stored.unwrap_or_else(default_params))
    }

    /// The account at `address`, if it exists.
    fn account(&self, address: &str) -> Result<Option<Account>> {
        self.get_proto(&keys::account(address))
    }

    /// Every account, ascending by account number.
    fn accounts(&self) -> Result<Vec<Account>> {
        let mut accounts: Vec<Account> = self
            .prefix_proto(&keys::accounts())?
            .into_iter()
            .map(|(_, account)| account)
            .collect();
        accounts.sort_by_key(|account| account.account_number);
        Ok(accounts)
    }

    /// The account at `address`, or an `UnknownAccount` error saying how to create it.
    fn existing_account(&self, address: &str) -> Result<Account> {
        self.account(address)?.ok_or_else(|| {
            AuthError::UnknownAccount.err(format!(
                "account {address} does not exist; send it some ngnk first"
            ))
        })
    }
}

impl<T: StateRead + ?Sized> AuthRead for T {}

/// Writes of auth state.
pub trait AuthWrite: StateWrite {
    /// Replaces the parameters.
    fn put_auth_params(&mut self, params: &AuthParams) {
        self.put_proto(keys::params(), &params.to_proto());
    }

    /// Stores `account` under its address.
    fn put_account(&mut self, account: &Account) {
        self.put_proto(keys::account(&account.address), account);
    }

    /// Returns the account at `address`, creating it with the next account number if new.
    fn ensure_account(&mut self, address: &str) -> Result<Account> {
        if let Some(account) = self.account(address)? {
            return Ok(account);
        }
        let number = self
            .get_proto::<u64>(&keys::next_account_number())?
            .unwrap_or(0);
        let account = Account {
            address: address.to_string(),
            account_number: number,
            sequence: 0,
            pub_key: Vec::new(),
        };
        self.put_proto(keys::next_account_number(), &(number + 1));
        self.put_account(&account);
        Ok(account)
    }
}

impl<T: StateWrite + ?Sized> AuthWrite for T {}
