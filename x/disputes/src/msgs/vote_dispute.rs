//! `MsgVoteDispute`: a committee member commits its own result of the disputed record
//! (`gonka/result/v1`, like a validation) or reports that it could not get the request body.
//! For a "logprobs" model the vote carries the member's scores of the executor's tokens
//! instead. A vote supports the executor when it agrees with the record's revealed output
//! (`compare::agrees`); until the output is revealed it is not counted for either side.

use gonka_proto::disputes::{MsgVoteDispute, Vote};
use gonka_sdk::{Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::{check_address, check_result_fields};
use crate::compare;
use crate::settle::{add_vote, note_answer};
use crate::{status, DisputesError, DisputesRead};
use gonka_inference::InferenceRead;
use gonka_sdk::decode_as;

struct VoteDispute(MsgVoteDispute);

/// Decodes and statelessly checks a `MsgVoteDispute`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgVoteDispute>(any).map(|msg| {
        let msg = msg?;
        check_address("voter", &msg.voter)?;
        if !msg.payload_unavailable {
            check_result_fields(&msg.result_commitment, msg.scored.as_ref())?;
        }
        Ok(Box::new(VoteDispute(msg)) as Box<dyn Msg>)
    })
}

impl Msg for VoteDispute {
    fn signer(&self) -> &str {
        &self.0.voter
    }

    fn is_duty(&self) -> bool {
        true
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
        if !msg.payload_unavailable {
            let stored = state.record(&dispute.inference_id)?.unwrap_or_default();
            compare::check_result(state, &stored, "scored", msg.scored.as_ref())?;
        }
        note_answer(state, &msg.voter)?;
        let vote = Vote {
            voter: msg.voter.clone(),
            result_commitment: if msg.payload_unavailable {
                Vec::new()
            } else {
                msg.result_commitment.clone()
            },
            supports_executor: false,
            payload_unavailable: msg.payload_unavailable,
            height: ctx.block.height,
            scored: if msg.payload_unavailable {
                None
            } else {
                msg.scored.clone()
            },
        };
        add_vote(state, ctx, &mut dispute, vote)
    }
}
