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

/// Checks every parameter is in range.
pub fn validate_params(params: &Params) -> Result<()> {
    if params.max_tx_bytes == 0 {
        return Err(AuthError::InvalidParams.err("auth max_tx_bytes must be positive"));
    }
    if params.max_msgs_per_tx == 0 {
        return Err(AuthError::InvalidParams.err("auth max_msgs_per_tx must be positive"));
    }
    parse_amount("auth min_fee", &params.min_fee)?;
    Ok(())
}
