//! Stable error codes of codespace `bank`.

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
    /// No metadata for this denom (only the native denom has some).
    UnknownDenom = 5,
}

gonka_sdk::impl_error_code!(BankError, "bank");
