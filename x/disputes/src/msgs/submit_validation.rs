//! `MsgSubmitValidation`: the assigned validator commits its result of a sampled record
//! (`gonka/result/v1`, bound to its address), or reports that the transfer agent did not
//! serve the request body. A committed result is compared once the record's output is
//! revealed ([`super::reveal_output`]); nobody can copy an answer that is not public yet.

use gonka_inference::InferenceRead;
use gonka_proto::disputes::MsgSubmitValidation;
use gonka_sdk::{Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::{check_address, check_inference_id, check_result_fields};
use crate::compare;
use crate::settle::{self, note_answer};
use crate::{events, kind, status, DisputesError, DisputesRead, DisputesWrite};
use gonka_sdk::decode_as;

struct SubmitValidation(MsgSubmitValidation);

/// Decodes and statelessly checks a `MsgSubmitValidation`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgSubmitValidation>(any).map(|msg| {
        let msg = msg?;
        check_address("validator", &msg.validator)?;
        check_inference_id(&msg.inference_id)?;
        if !msg.payload_unavailable {
            check_result_fields(&msg.result_commitment, msg.scored.as_ref())?;
        }
        Ok(Box::new(SubmitValidation(msg)) as Box<dyn Msg>)
    })
}

impl Msg for SubmitValidation {
    fn signer(&self) -> &str {
        &self.0.validator
    }

    fn is_duty(&self) -> bool {
        true
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.0;
        let id = &msg.inference_id;
        let height = ctx.block.height;
        let stored = state.record(id)?.ok_or_else(|| {
            DisputesError::UnknownRecord.err(format!("no work record with inference id {id}"))
        })?;
        let mut validation = state.validation(id)?.ok_or_else(|| {
            DisputesError::NotSampled.err(format!(
                "work record {id} was not sampled for validation; see /disputes/pending for the validations assigned to {}",
                msg.validator
            ))
        })?;
        if validation.validator != msg.validator {
            return Err(DisputesError::NotAssigned.err(format!(
                "the validation of {id} is assigned to {}, not to {}",
                validation.validator, msg.validator
            )));
        }
        if [status::COMMITTED, status::MATCHED, status::MISMATCHED]
            .contains(&validation.status.as_str())
        {
            return Err(DisputesError::AlreadyValidated.err(format!(
                "the validation of {id} was already submitted ({}); expected status pending",
                validation.status
            )));
        }
        if validation.status != status::PENDING || height > validation.deadline_height {
            return Err(DisputesError::DeadlinePassed.err(format!(
                "the validation of {id} was due by height {} but this is height {height}",
                validation.deadline_height
            )));
        }
        if !msg.payload_unavailable {
            compare::check_result(state, &stored, "scored", msg.scored.as_ref())?;
        }
        note_answer(state, &msg.validator)?;
        if msg.payload_unavailable {
            // Not the validator's fault and not evidence against the executor: a committee
            // tries the transfer agent too and decides whether it withheld the body.
            validation.status = status::PAYLOAD_UNAVAILABLE.into();
            state.put_validation(&validation);
            state.emit(events::submitted(&validation, "payload_unavailable", 0));
            settle::accuse(
                state,
                ctx,
                &stored,
                kind::PAYLOAD,
                &msg.validator,
                Vec::new(),
            )?;
        } else {
            let params = state.disputes_params()?;
            validation.status = status::COMMITTED.into();
            validation.result_commitment = msg.result_commitment.clone();
            validation.scored = msg.scored.clone();
            validation.reveal_deadline_height =
                height.saturating_add(params.reveal_deadline_blocks);
            state.put_validation(&validation);
            state.emit(events::submitted(&validation, "committed", 0));
            settle::ask_reveal(
                state,
                id,
                &stored.transfer_agent,
                validation.reveal_deadline_height,
            )?;
        }
        Ok(())
    }
}
