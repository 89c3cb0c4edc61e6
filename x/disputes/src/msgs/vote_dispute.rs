//! `MsgVoteDispute`: a committee member reports its own result of the disputed record (the
//! hash of its answer and the token counts it found); it supports the executor when that
//! result is what the executor committed to ([`gonka_inference::result_matches`]).

use gonka_inference::{result_matches, InferenceRead};
use gonka_proto::disputes::{MsgVoteDispute, Vote};
use gonka_sdk::{Any, ErrorCode, Msg, Result, SdkError, StateWrite, TxContext};

use super::{check_address, check_result_hash};
use crate::settle::{add_vote, note_answer};
use crate::{status, DisputesError, DisputesRead};
use gonka_sdk::decode_as;

struct VoteDispute(MsgVoteDispute);

/// Decodes and statelessly checks a `MsgVoteDispute`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgVoteDispute>(any).map(|msg| {
        let msg = msg?;
        check_address("voter", &msg.voter)?;
        if !msg.payload_unavailable {
            check_result_hash(&msg.result_hash)?;
        }
        Ok(Box::new(VoteDispute(msg)) as Box<dyn Msg>)
    })
}

impl Msg for VoteDispute {
    fn signer(&self) -> &str {
        &self.0.voter
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.0;
        let id = msg.dispute_id;
        let mut dispute = state
            .dispute(id)?
            .ok_or_else(|| DisputesError::UnknownDispute.err(format!("no dispute with id {id}")))?;
        if dispute.status != status::OPEN {
            return Err(DisputesError::DisputeClosed.err(format!(
                "dispute {id} was resolved ({}) at height {}; expected an open dispute",
                dispute.status, dispute.resolved_height
            )));
        }
        if !dispute.committee.contains(&msg.voter) {
            return Err(DisputesError::NotCommitteeMember.err(format!(
                "{} is not on the committee of dispute {id}; its members are {}",
                msg.voter,
                dispute.committee.join(", ")
            )));
        }
        if let Some(earlier) = dispute.votes.iter().find(|v| v.voter == msg.voter) {
            return Err(DisputesError::AlreadyVoted.err(format!(
                "{} already voted on dispute {id} at height {}",
                msg.voter, earlier.height
            )));
        }
        let stored = state.record(&dispute.inference_id)?.ok_or_else(|| {
            SdkError::Internal.err(format!(
                "dispute {id} names record {}, which is not stored",
                dispute.inference_id
            ))
        })?;
        let record = stored.record.unwrap_or_default();
        note_answer(state, &msg.voter)?;
        let vote = Vote {
            voter: msg.voter.clone(),
            result_hash: msg.result_hash.clone(),
            supports_executor: !msg.payload_unavailable
                && result_matches(
                    &record,
                    &msg.result_hash,
                    msg.prompt_tokens,
                    msg.completion_tokens,
                ),
            payload_unavailable: msg.payload_unavailable,
            height: ctx.block.height,
        };
        add_vote(state, ctx.block.height, &mut dispute, vote)
    }
}
