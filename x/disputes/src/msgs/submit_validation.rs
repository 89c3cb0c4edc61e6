//! `MsgSubmitValidation`: the assigned validator reports its result hash of a sampled
//! record. A match pays the validator and counts for the executor; a mismatch opens a
//! validation dispute (unless the record already has a dispute).

use gonka_inference::{result_matches, InferenceRead};
use gonka_proto::disputes::MsgSubmitValidation;
use gonka_proto::inference::StoredRecord;
use gonka_sdk::{Any, ErrorCode, Msg, Result, SdkError, StateWrite, TxContext};

use super::{check_address, check_inference_id, check_result_hash};
use crate::settle::{self, note_answer, pay_validation_reward, record_cost, Opening};
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
            check_result_hash(&msg.result_hash)?;
        }
        Ok(Box::new(SubmitValidation(msg)) as Box<dyn Msg>)
    })
}

impl Msg for SubmitValidation {
    fn signer(&self) -> &str {
        &self.0.validator
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
        if validation.status == status::MATCHED || validation.status == status::MISMATCHED {
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
        let record = stored.record.as_ref().ok_or_else(|| {
            SdkError::Internal.err(format!("stored record {id} carries no record"))
        })?;
        note_answer(state, &msg.validator)?;
        validation.result_hash = msg.result_hash.clone();
        if msg.payload_unavailable {
            // Not the validator's fault and not evidence against the executor: a committee
            // tries the transfer agent too and decides whether it withheld the body.
            validation.status = status::PAYLOAD_UNAVAILABLE.into();
            state.put_validation(&validation);
            state.emit(events::submitted(&validation, "payload_unavailable", 0));
            accuse(
                state,
                ctx,
                &stored,
                kind::PAYLOAD,
                &msg.validator,
                Vec::new(),
            )?;
        } else if result_matches(
            record,
            &msg.result_hash,
            msg.prompt_tokens,
            msg.completion_tokens,
        ) {
            let reward = pay_validation_reward(state, &msg.validator, record_cost(&stored)?)?;
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
            accuse(
                state,
                ctx,
                &stored,
                kind::VALIDATION,
                &msg.validator,
                msg.result_hash.clone(),
            )?;
        }
        Ok(())
    }
}

/// Opens a dispute of `kind` by validator `accuser` on `stored`, unless the record is under
/// dispute already (which then decides alone; this accusation is only noted).
fn accuse(
    state: &mut dyn StateWrite,
    ctx: &TxContext<'_>,
    stored: &StoredRecord,
    kind: &str,
    accuser: &str,
    accuser_hash: Vec<u8>,
) -> Result<()> {
    let id = stored
        .record
        .as_ref()
        .map(|r| r.inference_id.as_str())
        .unwrap_or_default();
    if state.record_dispute(id)?.is_none() {
        settle::open(
            state,
            ctx.block.height,
            &ctx.block.block_hash,
            stored,
            Opening {
                kind,
                accuser,
                accuser_hash,
                deposit: 0,
            },
        )?;
    }
    Ok(())
}
