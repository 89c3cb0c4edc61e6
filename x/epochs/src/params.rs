//! Epochs parameters.

use gonka_proto::epochs::Params;
use gonka_sdk::{ErrorCode, Result};

use crate::EpochsError;

/// Default: 100 blocks per epoch.
pub fn default_params() -> Params {
    Params { epoch_length: 100 }
}

/// Checks every parameter is in range.
pub fn validate_params(params: &Params) -> Result<()> {
    if params.epoch_length == 0 {
        return Err(EpochsError::InvalidParams
            .err("app_state.epochs.params.epoch_length must be at least 1 block, found 0"));
    }
    Ok(())
}
