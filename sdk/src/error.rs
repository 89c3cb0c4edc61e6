//! One error type for every rejection: a numeric code, a codespace and a readable log.

/// A rejection with a stable `code` within `codespace` (the module name) and a log line
/// that tells a person what was expected and what was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{codespace} error {code}: {log}")]
pub struct Error {
    /// Module name that owns the code (`auth`, `bank`, `sdk`, ...).
    pub codespace: &'static str,
    /// Stable non-zero code, unique within the codespace.
    pub code: u32,
    /// Human-readable explanation.
    pub log: String,
}

/// Result with the SDK error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A module's table of stable error codes. Implement it on a `#[repr(u32)]` enum so every
/// code of a module is listed in one place.
pub trait ErrorCode: Copy {
    /// Codespace of every code in the table.
    const CODESPACE: &'static str;
    /// The numeric code (non-zero).
    fn code(self) -> u32;
    /// Builds an error with this code and a log line.
    fn err(self, log: impl Into<String>) -> Error {
        Error {
            codespace: Self::CODESPACE,
            code: self.code(),
            log: log.into(),
        }
    }
}

/// Codes shared by every module, in codespace `sdk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum SdkError {
    /// The store failed; the node operator must look at the logs.
    Internal = 1,
    /// A stored or submitted protobuf value could not be decoded.
    Decode = 2,
    /// An amount is not a non-negative decimal integer.
    InvalidAmount = 3,
    /// An amount does not fit in 128 bits, or arithmetic on it overflowed.
    AmountOverflow = 4,
    /// A query path that no module answers.
    UnknownQuery = 5,
    /// A genesis section is malformed.
    InvalidGenesis = 6,
    /// The transaction used more gas than its limit (the Cosmos SDK's `ErrOutOfGas`, same
    /// codespace and number). Its fee and sequence stay paid; its messages change nothing.
    OutOfGas = 11,
    /// A list query's page request cannot be answered: a key the query never hands out, or
    /// an offset (pages go by key only).
    InvalidPage = 7,
}

crate::impl_error_code!(SdkError, "sdk");

/// Implements [`ErrorCode`] for a `#[repr(u32)]` enum of codes in `codespace`:
/// `gonka_sdk::impl_error_code!(BankError, "bank");`.
#[macro_export]
macro_rules! impl_error_code {
    ($codes:ty, $codespace:literal) => {
        impl $crate::ErrorCode for $codes {
            const CODESPACE: &'static str = $codespace;
            fn code(self) -> u32 {
                self as u32
            }
        }
    };
}
