//! Stable error codes of codespace `rewards`.

use gonka_sdk::ErrorCode;

/// Codes of the rewards codespace. Never renumber: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum RewardsError {
    /// A parameter is out of range.
    InvalidParams = 2,
    /// The rewards of an epoch that has not been settled (it is running or has not started).
    NotSettled = 3,
}

impl ErrorCode for RewardsError {
    const CODESPACE: &'static str = "rewards";
    fn code(self) -> u32 {
        self as u32
    }
}
