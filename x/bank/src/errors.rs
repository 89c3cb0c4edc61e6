//! Stable error codes of codespace `bank`.

use gonka_sdk::ErrorCode;

/// Codes of the bank codespace. Never renumber: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum BankError {
    /// Coins list is empty, repeats a denom, or has a malformed denom.
    InvalidCoins = 2,
    /// An amount of zero.
    ZeroAmount = 3,
    /// The sender holds less than it tries to move.
    InsufficientFunds = 4,
}

impl ErrorCode for BankError {
    const CODESPACE: &'static str = "bank";
    fn code(self) -> u32 {
        self as u32
    }
}
