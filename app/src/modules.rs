//! The chain's modules, in the fixed order every hook runs in.
//!
//! Order: `auth`, `bank`. Genesis, `begin_block`, `end_block` and `end_epoch` all walk
//! this list front to back; messages and queries go to the one module that claims them.
//! A new module is added here, at the position its dependencies require.

use gonka_sdk::Module;

/// Every module, in hook order.
pub fn all() -> Vec<Box<dyn Module>> {
    vec![Box::new(gonka_auth::Auth), Box::new(gonka_bank::Bank)]
}
