//! Disputes messages: one file per message, plus the checks they share.

mod open_dispute;

pub use open_dispute::{open_user_dispute, require_requester};
mod reveal_output;
mod submit_validation;
mod vote_dispute;

use gonka_proto::disputes::ScoredOutput;
use gonka_sdk::{Any, ErrorCode, Msg, Result};

use crate::DisputesError;

/// Decodes a disputes message by type URL; `None` if it is not one.
pub fn decode(msg: &Any) -> Option<Result<Box<dyn Msg>>> {
    submit_validation::decode(msg)
        .or_else(|| open_dispute::decode(msg))
        .or_else(|| vote_dispute::decode(msg))
        .or_else(|| reveal_output::decode(msg))
}

/// An address field, reported under the disputes codespace.
fn check_address(field: &str, address: &str) -> Result<()> {
    gonka_auth::validate_address(field, address).map_err(|e| DisputesError::InvalidMsg.err(e.log))
}

/// An inference id: 64 lowercase hex characters.
fn check_inference_id(id: &str) -> Result<()> {
    if gonka_proto::signing::is_inference_id(id) {
        Ok(())
    } else {
        Err(DisputesError::InvalidMsg.err(format!(
            "inference_id must be 64 lowercase hex characters, found {id:?}"
        )))
    }
}

/// A result of a re-execution: scores of the executor's tokens (checked for their shape; the
/// commitment must then be empty) or else a 32-byte `result_commitment`.
fn check_result_fields(commitment: &[u8], scored: Option<&ScoredOutput>) -> Result<()> {
    match scored {
        Some(scored) => {
            if !commitment.is_empty() {
                return Err(DisputesError::InvalidMsg
                    .err("a result carries scored or result_commitment, not both".to_string()));
            }
            check_scored("scored", scored)
        }
        None => check_32("result_commitment", commitment).map(|_| ()),
    }
}

/// The shape of a scored output ([`gonka_proto::scored::check_shape`]).
fn check_scored(field: &str, scored: &ScoredOutput) -> Result<()> {
    gonka_proto::scored::check_shape(field, scored)
        .map_err(|log| DisputesError::InvalidMsg.err(log))
}

/// A 32-byte hash field (a commitment, a salt or an answer hash).
fn check_32(field: &str, bytes: &[u8]) -> Result<[u8; 32]> {
    <[u8; 32]>::try_from(bytes).map_err(|_| {
        DisputesError::InvalidMsg.err(format!("{field} must be 32 bytes, found {}", bytes.len()))
    })
}
