//! Messages of the disputes module: validations, user disputes and committee votes.

use crate::tx::any_of;
use cosmrs::Any;
use gonka_proto::disputes::{
    MsgOpenDispute, MsgRevealOutput, MsgSubmitValidation, MsgVoteDispute, ScoredOutput,
};
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

/// What a validator or committee member submits for a record: its re-execution of an
/// "exact" model (committed) or its scores of a "logprobs" model's output tokens.
#[derive(Debug, Clone, Copy)]
pub enum Finding<'a> {
    /// A re-executed answer, committed under the author's address.
    Text(&'a ReExecution),
    /// Scores of the executor's tokens, in the clear.
    Scores(&'a ScoredOutput),
}

impl<'a> From<&'a ReExecution> for Finding<'a> {
    fn from(found: &'a ReExecution) -> Self {
        Finding::Text(found)
    }
}

impl<'a> From<&'a ScoredOutput> for Finding<'a> {
    fn from(scores: &'a ScoredOutput) -> Self {
        Finding::Scores(scores)
    }
}

impl Finding<'_> {
    /// The message fields `result_commitment` and `scored` of `author`'s finding.
    fn fields(self, author: &str) -> (Vec<u8>, Option<ScoredOutput>) {
        match self {
            Finding::Text(found) => (found.commitment(author).to_vec(), None),
            Finding::Scores(scores) => (Vec::new(), Some(scores.clone())),
        }
    }
}

/// `/gonka.disputes.v1.MsgSubmitValidation`: assigned `validator` submits what it found for
/// sampled record `inference_id` (compared once the output is revealed).
pub fn msg_submit_validation<'a>(
    validator: &str,
    inference_id: &str,
    found: impl Into<Finding<'a>>,
) -> Any {
    let (result_commitment, scored) = found.into().fields(validator);
    any_of(&MsgSubmitValidation {
        validator: validator.into(),
        inference_id: inference_id.into(),
        result_commitment,
        payload_unavailable: false,
        scored,
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

/// `/gonka.disputes.v1.MsgVoteDispute`: committee member `voter` submits what it found on
/// dispute `dispute_id`.
pub fn msg_vote_dispute<'a>(voter: &str, dispute_id: u64, found: impl Into<Finding<'a>>) -> Any {
    let (result_commitment, scored) = found.into().fields(voter);
    any_of(&MsgVoteDispute {
        voter: voter.into(),
        dispute_id,
        result_commitment,
        payload_unavailable: false,
        scored,
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

/// `/gonka.disputes.v1.MsgRevealOutput` of a "logprobs" model's record: `sender` opens the
/// output commitment of record `inference_id` with the executor's scored output.
pub fn msg_reveal_scored_output(
    sender: &str,
    inference_id: &str,
    salt: &[u8; 32],
    scored: &ScoredOutput,
) -> Any {
    any_of(&MsgRevealOutput {
        sender: sender.into(),
        inference_id: inference_id.into(),
        salt: salt.to_vec(),
        response_hash: Vec::new(),
        scored: Some(scored.clone()),
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
