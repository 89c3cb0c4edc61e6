//! `MsgRevealOutput`: the record's transfer agent (or its executor host) opens the record's
//! output commitment once a re-execution's result is committed and waits for it
//! (`/disputes/reveals_due`). The chain checks the opening, then compares: the committed
//! validation matches or opens a validation dispute; an open dispute's votes are judged and
//! the dispute is decided if a side has its majority.

use gonka_inference::{opens, InferenceRead};
use gonka_proto::disputes::{MsgRevealOutput, OutputReveal};
use gonka_proto::scored;
use gonka_sdk::{Any, ErrorCode, Msg, Result, SdkError, StateWrite, TxContext};

use super::{check_32, check_address, check_inference_id, check_scored};
use crate::compare::{self, Submitted};
use crate::settle::{self, pay_validation_reward, record_cost};
use crate::{events, kind, status, DisputesError, DisputesRead, DisputesWrite};
use gonka_sdk::decode_as;

struct RevealOutput {
    msg: MsgRevealOutput,
    salt: [u8; 32],
    /// The answer's hash (an "exact" model); `None` when the reveal carries scores.
    response_hash: Option<[u8; 32]>,
}

/// Decodes and statelessly checks a `MsgRevealOutput`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgRevealOutput>(any).map(|msg| {
        let msg = msg?;
        check_address("sender", &msg.sender)?;
        check_inference_id(&msg.inference_id)?;
        let salt = check_32("salt", &msg.salt)?;
        let response_hash = match &msg.scored {
            Some(scored) if msg.response_hash.is_empty() => {
                check_scored("scored", scored)?;
                None
            }
            Some(_) => {
                return Err(DisputesError::InvalidMsg
                    .err("a reveal carries response_hash or scored, not both".to_string()))
            }
            None => Some(check_32("response_hash", &msg.response_hash)?),
        };
        Ok(Box::new(RevealOutput {
            msg,
            salt,
            response_hash,
        }) as Box<dyn Msg>)
    })
}

impl Msg for RevealOutput {
    fn signer(&self) -> &str {
        &self.msg.sender
    }

    fn is_duty(&self) -> bool {
        true
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.msg;
        let id = &msg.inference_id;
        let height = ctx.block.height;
        let stored = state.record(id)?.ok_or_else(|| {
            DisputesError::UnknownRecord.err(format!("no work record with inference id {id}"))
        })?;
        if msg.sender != stored.transfer_agent && msg.sender != stored.executor_host {
            return Err(DisputesError::NotRevealer.err(format!(
                "only the record's transfer agent {} or executor host {} reveals its output, not {}",
                stored.transfer_agent, stored.executor_host, msg.sender
            )));
        }
        if let Some(earlier) = state.output_reveal(id)? {
            return Err(DisputesError::AlreadyRevealed.err(format!(
                "the output of {id} was revealed by {} at height {}",
                earlier.revealed_by, earlier.height
            )));
        }
        if state.reveal_due(&stored.transfer_agent, id)?.is_none() {
            return Err(DisputesError::RevealNotDue.err(format!(
                "nothing waits for the output of {id}: it is revealed only after the assigned validator has committed its result (see /disputes/reveals_due)"
            )));
        }
        let record = stored.record.clone().ok_or_else(|| {
            SdkError::Internal.err(format!("stored record {id} carries no record"))
        })?;
        compare::check_result(state, &stored, "scored", msg.scored.as_ref())?;
        let opened = match (&self.response_hash, &msg.scored) {
            (Some(answer), _) => opens(&record, &self.salt, answer),
            (None, Some(output)) => {
                output.prompt_tokens == record.prompt_tokens
                    && scored::output_commitment(&self.salt, output).as_slice()
                        == record.output_commitment
            }
            (None, None) => false,
        };
        if !opened {
            return Err(DisputesError::RevealMismatch.err(format!(
                "the salt and the revealed output do not open the output commitment of {id} (with its {} prompt tokens)",
                record.prompt_tokens
            )));
        }
        let reveal = OutputReveal {
            inference_id: id.clone(),
            salt: self.salt.to_vec(),
            response_hash: self.response_hash.map(|h| h.to_vec()).unwrap_or_default(),
            revealed_by: msg.sender.clone(),
            height,
            scored: msg.scored.clone(),
        };
        state.put_output_reveal(&stored.transfer_agent, &reveal);
        state.emit(events::revealed(&reveal));

        if let Some(mut validation) = state.validation(id)? {
            if validation.status == status::COMMITTED {
                let found = Submitted {
                    author: &validation.validator,
                    commitment: &validation.result_commitment,
                    scored: validation.scored.as_ref(),
                };
                if compare::agrees(state, &record, &reveal, found, ctx.gas)? {
                    let reward = pay_validation_reward(
                        state,
                        height,
                        &validation.validator,
                        record_cost(&stored)?,
                    )?;
                    validation.status = status::MATCHED.into();
                    validation.reward = reward.to_string();
                    let mut stats = state.executor_stats(&validation.executor_host)?;
                    stats.passed += 1;
                    stats.clean_streak += 1;
                    state.put_executor_stats(&stats);
                    state.put_validation(&validation);
                    state.emit(events::submitted(&validation, "match", reward));
                } else {
                    validation.status = status::MISMATCHED.into();
                    state.put_validation(&validation);
                    state.emit(events::submitted(&validation, "mismatch", 0));
                    let commitment = validation.result_commitment.clone();
                    settle::accuse(
                        state,
                        ctx,
                        &stored,
                        kind::VALIDATION,
                        &validation.validator,
                        commitment,
                    )?;
                    // A dispute opened just now already judged the answer; one opened
                    // earlier is judged below.
                }
            }
        }
        if let Some(dispute_id) = state.record_dispute(id)? {
            if let Some(mut dispute) = state.dispute(dispute_id)? {
                if dispute.status == status::OPEN {
                    settle::judge_votes(state, ctx, &mut dispute)?;
                }
            }
        }
        Ok(())
    }
}
