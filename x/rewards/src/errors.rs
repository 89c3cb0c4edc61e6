//! Stable error codes of codespace `rewards`.

/// Codes of the rewards codespace. Never renumber: clients match on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum RewardsError {
    /// A parameter is out of range.
    InvalidParams = 2,
    /// The rewards of an epoch that has not been settled (it is running or has not started).
    NotSettled = 3,
}

gonka_sdk::impl_error_code!(RewardsError, "rewards");
