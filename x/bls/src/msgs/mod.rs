//! Bls messages: one file per message.

mod register_bls_key;

use gonka_sdk::{Any, Msg, Result};

/// Decodes a bls message by type URL; `None` if it is not one.
pub fn decode(msg: &Any) -> Option<Result<Box<dyn Msg>>> {
    register_bls_key::decode(msg)
}
