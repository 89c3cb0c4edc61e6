//! Stake messages: one file per message.

mod stake;
mod unjail;
mod unstake;

use gonka_sdk::{Any, ErrorCode, Msg, Result};

use crate::StakeError;

/// Decodes a stake message by type URL; `None` if it is not one.
pub fn decode(msg: &Any) -> Option<Result<Box<dyn Msg>>> {
    stake::decode(msg)
        .or_else(|| unstake::decode(msg))
        .or_else(|| unjail::decode(msg))
}

/// A consensus key must be a 32-byte ed25519 public key.
pub fn validate_consensus_key(key: &[u8]) -> Result<()> {
    if key.len() != 32 {
        return Err(StakeError::InvalidConsensusKey.err(format!(
            "consensus_pubkey must be a 32-byte ed25519 key, found {} bytes",
            key.len()
        )));
    }
    Ok(())
}

/// Monikers are at most 64 printable characters.
pub fn validate_moniker(moniker: &str) -> Result<()> {
    if moniker.chars().count() > 64 || moniker.chars().any(char::is_control) {
        return Err(StakeError::InvalidMoniker.err(format!(
            "moniker {moniker:?} must be at most 64 characters without control characters"
        )));
    }
    Ok(())
}

/// Parses a positive amount of ngnk.
fn positive_amount(field: &str, text: &str) -> Result<u128> {
    let amount = gonka_sdk::parse_amount(field, text)?;
    if amount == 0 {
        return Err(
            gonka_bank::BankError::ZeroAmount.err(format!("{field} must be positive, found 0"))
        );
    }
    Ok(amount)
}
