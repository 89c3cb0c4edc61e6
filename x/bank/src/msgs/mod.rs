//! Bank messages: one file per message.

mod send;

use gonka_sdk::{Any, Msg, Result};

/// Decodes a bank message by type URL; `None` if it is not one.
pub fn decode(msg: &Any) -> Option<Result<Box<dyn Msg>>> {
    send::decode(msg)
}
