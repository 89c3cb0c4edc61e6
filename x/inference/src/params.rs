//! Inference parameters and their validation.

use gonka_proto::inference::Params;
use gonka_sdk::{ErrorCode, Result};

use crate::InferenceError;

/// Defaults: 1,000,000 tokens per record, payloads kept 720 blocks
/// (the default 600-block dispute window plus its 30-block deadline, with room to spare).
pub fn default_params() -> Params {
    Params {
        max_tokens_per_record: 1_000_000,
        payload_retention_blocks: 720,
    }
}

/// Checks every parameter is in range, naming the offending one.
pub fn validate_params(params: &Params) -> Result<()> {
    if params.max_tokens_per_record == 0 {
        return Err(InferenceError::InvalidParams
            .err("app_state.inference.params.max_tokens_per_record must be positive, found 0"));
    }
    if params.payload_retention_blocks == 0 {
        return Err(InferenceError::InvalidParams
            .err("app_state.inference.params.payload_retention_blocks must be positive, found 0"));
    }
    Ok(())
}
