//! Messages of the disputes module: validations, user disputes and committee votes.

use crate::tx::any_of;
use cosmrs::Any;
use gonka_proto::disputes::{MsgOpenDispute, MsgRevealOutput, MsgSubmitValidation, MsgVoteDispute};
use gonka_proto::signing::result_commitment;

/// What a validator or committee member found when it re-executed a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReExecution {
    /// SHA-256 of its own answer text.
    pub result_hash: [u8; 32],
    /// Prompt tokens it counted.
    pub prompt_tokens: u64,
    /// Completion tokens it counted.
    pub completion_tokens: u64,
}

impl ReExecution {
    /// What `address` commits on chain for this result (`gonka/result/v1`).
    pub fn commitment(&self, address: &str) -> [u8; 32] {
        result_commitment(
            address,
            &self.result_hash,
            self.prompt_tokens,
            self.completion_tokens,
        )
    }
}

/// `/gonka.disputes.v1.MsgSubmitValidation`: assigned `validator` commits what it found for
/// sampled record `inference_id` (compared once the output is revealed).
pub fn msg_submit_validation(validator: &str, inference_id: &str, found: &ReExecution) -> Any {
    any_of(&MsgSubmitValidation {
        validator: validator.into(),
        inference_id: inference_id.into(),
        result_commitment: found.commitment(validator).to_vec(),
        payload_unavailable: false,
        scored: None,
    })
}

/// `/gonka.disputes.v1.MsgSubmitValidation` of assigned `validator` reporting that the
/// transfer agent of record `inference_id` did not serve its request body.
pub fn msg_report_payload_unavailable(validator: &str, inference_id: &str) -> Any {
    any_of(&MsgSubmitValidation {
        validator: validator.into(),
        inference_id: inference_id.into(),
        payload_unavailable: true,
        ..MsgSubmitValidation::default()
    })
}

/// `/gonka.disputes.v1.MsgOpenDispute`: the requester of record `inference_id` disputes it,
/// escrowing `deposit` ngnk.
pub fn msg_open_dispute(requester: &str, inference_id: &str, deposit: u128) -> Any {
    any_of(&MsgOpenDispute {
        requester: requester.into(),
        inference_id: inference_id.into(),
        deposit: deposit.to_string(),
    })
}

/// `/gonka.disputes.v1.MsgVoteDispute`: committee member `voter` commits what it found on
/// dispute `dispute_id`.
pub fn msg_vote_dispute(voter: &str, dispute_id: u64, found: &ReExecution) -> Any {
    any_of(&MsgVoteDispute {
        voter: voter.into(),
        dispute_id,
        result_commitment: found.commitment(voter).to_vec(),
        payload_unavailable: false,
        scored: None,
    })
}

/// `/gonka.disputes.v1.MsgRevealOutput`: `sender` (the record's transfer agent or executor
/// host) opens the output commitment of record `inference_id`.
pub fn msg_reveal_output(
    sender: &str,
    inference_id: &str,
    salt: &[u8; 32],
    response_hash: &[u8; 32],
) -> Any {
    any_of(&MsgRevealOutput {
        sender: sender.into(),
        inference_id: inference_id.into(),
        salt: salt.to_vec(),
        response_hash: response_hash.to_vec(),
        scored: None,
    })
}

/// `/gonka.disputes.v1.MsgVoteDispute` of committee member `voter` on dispute `dispute_id`:
/// the transfer agent did not serve it the request body.
pub fn msg_vote_payload_unavailable(voter: &str, dispute_id: u64) -> Any {
    any_of(&MsgVoteDispute {
        voter: voter.into(),
        dispute_id,
        payload_unavailable: true,
        ..MsgVoteDispute::default()
    })
}
