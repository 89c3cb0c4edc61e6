//! Inference parameters and their validation.

use gonka_proto::inference::Params;
use gonka_sdk::{ErrorCode, Result};

use crate::InferenceError;

/// Defaults: 100 records per batch, 1,000,000 tokens per record.
pub fn default_params() -> Params {
    Params {
        max_records_per_batch: 100,
        max_tokens_per_record: 1_000_000,
    }
}

/// Checks every parameter is in range, naming the offending one.
pub fn validate_params(params: &Params) -> Result<()> {
    if params.max_records_per_batch == 0 {
        return Err(InferenceError::InvalidParams
            .err("app_state.inference.params.max_records_per_batch must be positive, found 0"));
    }
    if params.max_tokens_per_record == 0 {
        return Err(InferenceError::InvalidParams
            .err("app_state.inference.params.max_tokens_per_record must be positive, found 0"));
    }
    Ok(())
}
