//! x/auth: accounts (number, sequence, public key) and the parameters of the transaction
//! pipeline (size limits, minimum gas price, gas costs).
//!
//! Accounts are created at genesis or when they first receive funds; the first transaction
//! an account signs records its public key. The ante step in `gonka-app` reads and updates
//! accounts only through [`AuthRead`] / [`AuthWrite`].

mod address;
mod errors;
mod genesis;
pub mod keys;
mod params;
mod query;
mod state;

pub use address::{
    address_of_compressed_key, address_of_key, address_of_pubkey, module_address, validate_address,
    ADDRESS_PREFIX,
};
pub use errors::AuthError;
pub use params::{default_params, AuthParams};
pub use state::{AuthRead, AuthWrite};

use gonka_sdk::{Module, Result, StateRead};

/// The auth module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Auth;

/// Module name: key namespace, codespace and genesis section.
pub const NAME: &str = "auth";

impl Module for Auth {
    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
