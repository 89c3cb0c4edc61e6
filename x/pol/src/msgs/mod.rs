//! Pol messages: one file per message.

mod create_job;
mod join_training;
mod publish_model;
mod submit_checkpoint;
mod verify_checkpoint;

pub use publish_model::trained_model_id;

use gonka_sdk::{Any, ErrorCode, Msg, Result};

use crate::PolError;

/// Decodes a pol message by type URL; `None` if it is not one.
pub fn decode(msg: &Any) -> Option<Result<Box<dyn Msg>>> {
    create_job::decode(msg)
        .or_else(|| join_training::decode(msg))
        .or_else(|| submit_checkpoint::decode(msg))
        .or_else(|| verify_checkpoint::decode(msg))
        .or_else(|| publish_model::decode(msg))
}

/// Length of every hash a checkpoint or verdict carries (SHA-256).
const HASH_LEN: usize = 32;

/// `bytes` is a 32-byte hash.
fn check_hash(field: &str, bytes: &[u8]) -> Result<()> {
    if bytes.len() != HASH_LEN {
        return Err(PolError::InvalidCheckpoint.err(format!(
            "{field} must be a {HASH_LEN}-byte SHA-256 hash, found {} bytes",
            bytes.len()
        )));
    }
    Ok(())
}
