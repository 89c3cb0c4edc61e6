//! Auth parameters: transaction size limit, minimum fee, messages per transaction.

use gonka_proto::auth::Params;
use gonka_sdk::{parse_amount, ErrorCode, Result};

use crate::AuthError;

/// Defaults used when genesis gives none: 64 KiB txs, a 1,000 ngnk fee, 32 messages.
pub fn default_params() -> Params {
    Params {
        max_tx_bytes: 64 * 1024,
        min_fee: "1000".into(),
        max_msgs_per_tx: 32,
    }
}

/// Parameters as numbers, checked to be in range: what the ante handler reads (the wire
/// form, [`Params`], is parsed once, when it is stored or read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthParams {
    /// Largest accepted TxRaw, in bytes; positive.
    pub max_tx_bytes: u64,
    /// Minimum fee of every transaction, in ngnk.
    pub min_fee: u128,
    /// Most messages one transaction may carry; positive.
    pub max_msgs_per_tx: u64,
}

impl AuthParams {
    /// Parses and validates wire parameters, naming the offending one in the error.
    pub fn from_proto(params: &Params) -> Result<Self> {
        if params.max_tx_bytes == 0 {
            return Err(AuthError::InvalidParams.err("auth max_tx_bytes must be positive"));
        }
        if params.max_msgs_per_tx == 0 {
            return Err(AuthError::InvalidParams.err("auth max_msgs_per_tx must be positive"));
        }
        Ok(Self {
            max_tx_bytes: params.max_tx_bytes,
            min_fee: parse_amount("auth min_fee", &params.min_fee)?,
            max_msgs_per_tx: params.max_msgs_per_tx,
        })
    }

    /// Wire form.
    pub fn to_proto(&self) -> Params {
        Params {
            max_tx_bytes: self.max_tx_bytes,
            min_fee: self.min_fee.to_string(),
            max_msgs_per_tx: self.max_msgs_per_tx,
        }
    }
}
