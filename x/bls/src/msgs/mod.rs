//! Bls messages: one file per message.

mod dkg_complain;
mod dkg_deal;
mod dkg_reveal;
mod register_bls_key;

pub use dkg_reveal::outcome;

use gonka_sdk::{Any, Msg, Result};

/// Decodes a bls message by type URL; `None` if it is not one.
pub fn decode(msg: &Any) -> Option<Result<Box<dyn Msg>>> {
    register_bls_key::decode(msg)
        .or_else(|| dkg_deal::decode(msg))
        .or_else(|| dkg_complain::decode(msg))
        .or_else(|| dkg_reveal::decode(msg))
}
