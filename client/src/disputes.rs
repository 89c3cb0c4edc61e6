//! Messages of the disputes module: validations, user disputes and committee votes.

use cosmrs::Any;
use gonka_proto::disputes::{MsgOpenDispute, MsgSubmitValidation, MsgVoteDispute};
use prost::{Message, Name};

fn any_of<M: Message + Name>(msg: &M) -> Any {
    Any {
        type_url: format!("/{}", M::full_name()),
        value: msg.encode_to_vec(),
    }
}

/// `/gonka.disputes.v1.MsgSubmitValidation`: assigned `validator` reports `result_hash`
/// (SHA-256 of its own response) for sampled record `inference_id`.
pub fn msg_submit_validation(validator: &str, inference_id: &str, result_hash: &[u8]) -> Any {
    any_of(&MsgSubmitValidation {
        validator: validator.into(),
        inference_id: inference_id.into(),
        result_hash: result_hash.to_vec(),
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

/// `/gonka.disputes.v1.MsgVoteDispute`: committee member `voter` votes `result_hash` on
/// dispute `dispute_id`.
pub fn msg_vote_dispute(voter: &str, dispute_id: u64, result_hash: &[u8]) -> Any {
    any_of(&MsgVoteDispute {
        voter: voter.into(),
        dispute_id,
        result_hash: result_hash.to_vec(),
    })
}
