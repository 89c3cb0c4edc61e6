//! Messages of x/pol: training jobs and their proof-of-learning checkpoints.

use gonka_proto::pol::{
    MsgJoinTraining, MsgPublishModel, MsgSubmitCheckpoint, MsgVerifyCheckpoint,
};

use crate::tx::any_of;
use crate::Any;

/// The five hashes of a checkpoint (SHA-256 over gonka-trainer's canonical serializations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointHashes {
    /// The weights the round started from.
    pub start_weights: [u8; 32],
    /// The weights after the worker's inner steps.
    pub weights: [u8; 32],
    /// The inner optimizer's state after them.
    pub optimizer_state: [u8; 32],
    /// The data indices trained on.
    pub data_indices: [u8; 32],
    /// The pseudo-gradient (start − end weights).
    pub pseudo_gradient: [u8; 32],
}

/// `/gonka.pol.v1.MsgJoinTraining`: `host` joins job `job_id`, serving its round outputs at
/// `endpoint`.
pub fn msg_join_training(host: &str, job_id: u64, endpoint: &str) -> Any {
    any_of(&MsgJoinTraining {
        host: host.into(),
        job_id,
        endpoint: endpoint.into(),
    })
}

/// `/gonka.pol.v1.MsgPublishModel`: `worker` attests `weights_sha256` as the SHA-256 of
/// completed job `job_id`'s final weights in the reference runtime's serialization.
pub fn msg_publish_model(worker: &str, job_id: u64, weights_sha256: &[u8; 32]) -> Any {
    any_of(&MsgPublishModel {
        worker: worker.into(),
        job_id,
        weights_sha256: weights_sha256.to_vec(),
    })
}

/// `/gonka.pol.v1.MsgSubmitCheckpoint`: `worker`'s checkpoint of `round` of `job_id`, with
/// its mean loss in micro-nats.
pub fn msg_submit_checkpoint(
    worker: &str,
    job_id: u64,
    round: u64,
    hashes: &CheckpointHashes,
    loss_micro_nats: u64,
) -> Any {
    any_of(&MsgSubmitCheckpoint {
        worker: worker.into(),
        job_id,
        round,
        start_weights_hash: hashes.start_weights.to_vec(),
        weights_hash: hashes.weights.to_vec(),
        optimizer_state_hash: hashes.optimizer_state.to_vec(),
        data_indices_hash: hashes.data_indices.to_vec(),
        pseudo_gradient_hash: hashes.pseudo_gradient.to_vec(),
        loss_micro_nats,
    })
}

/// What a validator's re-execution of a checkpoint found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReExecuted {
    /// The end weights' and optimizer state's hashes it computed.
    Hashes {
        /// Hash of the end weights.
        weights: [u8; 32],
        /// Hash of the inner optimizer state.
        optimizer_state: [u8; 32],
    },
    /// The worker did not serve what re-execution needs.
    Unavailable,
}

/// `/gonka.pol.v1.MsgVerifyCheckpoint`: `validator`'s re-execution of `worker`'s checkpoint
/// of `round` of `job_id` (as its verifier or a committee member).
pub fn msg_verify_checkpoint(
    validator: &str,
    job_id: u64,
    round: u64,
    worker: &str,
    found: ReExecuted,
) -> Any {
    let (weights_hash, optimizer_state_hash, unavailable) = match found {
        ReExecuted::Hashes {
            weights,
            optimizer_state,
        } => (weights.to_vec(), optimizer_state.to_vec(), false),
        ReExecuted::Unavailable => (Vec::new(), Vec::new(), true),
    };
    any_of(&MsgVerifyCheckpoint {
        validator: validator.into(),
        job_id,
        round,
        worker: worker.into(),
        weights_hash,
        optimizer_state_hash,
        unavailable,
    })
}
