//! Stable error codes of codespace `epochs`.

use gonka_sdk::ErrorCode;

/// Codes of the epochs codespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum EpochsError {
    /// A parameter is out of range.
    InvalidParams = 2,
    /// The epoch asked for has not started.
    UnknownEpoch = 3,
}

impl ErrorCode for EpochsError {
    const CODESPACE: &'static str = "epochs";
    fn code(self) -> u32 {
        self as u32
    }
}
