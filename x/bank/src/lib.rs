//! x/bank: balances in `ngnk` (and any other denom), transfers, supply and the fee
//! collector.
//!
//! Accepts both `/gonka.bank.v1.MsgSend` and the standard `/cosmos.bank.v1beta1.MsgSend`,
//! and answers the standard `/cosmos.bank.v1beta1.Query/Balance`, `AllBalances`, `SupplyOf`,
//! `TotalSupply`, `DenomMetadata` and `DenomsMetadata` paths ([`native_metadata`]), so stock
//! Cosmos clients can send GNK, read balances and supply, and display amounts. Other modules move funds
//! through [`transfer`] and read them through [`BankRead`].

mod coin;
mod errors;
mod events;
mod genesis;
pub mod keys;
mod msgs;
mod query;
mod state;

pub use coin::{parse_coins, Coin};
pub use errors::BankError;
pub use query::native_metadata;
pub use state::{fee_collector_address, transfer, BankRead, BankWrite};

use gonka_sdk::{Any, Module, Msg, Result, StateRead};

/// Module name: key namespace, codespace and genesis section.
pub const NAME: &str = "bank";

/// The native denom: 1 GNK = 10^9 ngnk. Fees are paid in it.
pub const NATIVE_DENOM: &str = "ngnk";

/// The unit wallets display: 1 GNK = 10^[`DISPLAY_EXPONENT`] ngnk.
pub const DISPLAY_DENOM: &str = "gnk";

/// Decimal places between [`NATIVE_DENOM`] and [`DISPLAY_DENOM`].
pub const DISPLAY_EXPONENT: u32 = 9;

/// Name of the module account that collects transaction fees.
pub const FEE_COLLECTOR: &str = "fee_collector";

/// The bank module.
#[derive(Debug, Default, Clone)]
pub struct Bank {
    /// Module accounts whose balance another module's genesis mints (the stake pools, minted
    /// from the participants' bonds): left out of the export so supply is not doubled.
    pub minted_elsewhere: Vec<String>,
}

impl Module for Bank {
    fn decode_msg(&self, msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        msgs::decode(msg)
    }

    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
