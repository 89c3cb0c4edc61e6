//! Stable error codes of codespace `epochs`.

/// Codes of the epochs codespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum EpochsError {
    /// A parameter is out of range.
    InvalidParams = 2,
    /// The epoch asked for has not started.
    UnknownEpoch = 3,
}

gonka_sdk::impl_error_code!(EpochsError, "epochs");
