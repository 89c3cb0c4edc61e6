//! `MsgVerifyCheckpoint`: a validator's re-execution of a sampled checkpoint, as its assigned
//! verifier or as a member of its dispute's committee.

use gonka_auth::validate_address;
use gonka_proto::pol::{CheckpointStatus, MsgVerifyCheckpoint, Verdict};
use gonka_sdk::{decode_as, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::check_hash;
use crate::review::{verify, vote};
use crate::{PolError, PolRead, PolWrite};

struct VerifyCheckpoint(MsgVerifyCheckpoint);

/// Decodes and statelessly checks a `MsgVerifyCheckpoint`: two hashes, or none with
/// `unavailable`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgVerifyCheckpoint>(any).map(|msg| {
        let msg = msg?;
        validate_address("validator", &msg.validator)?;
        validate_address("worker", &msg.worker)?;
        if msg.unavailable {
            if !msg.weights_hash.is_empty() || !msg.optimizer_state_hash.is_empty() {
                return Err(PolError::InvalidCheckpoint.err(
                    "an unavailable verdict carries no hashes: the worker served nothing to re-execute",
                ));
            }
        } else {
            check_hash("weights_hash", &msg.weights_hash)?;
            check_hash("optimizer_state_hash", &msg.optimizer_state_hash)?;
        }
        Ok(Box::new(VerifyCheckpoint(msg)) as Box<dyn Msg>)
    })
}

impl Msg for VerifyCheckpoint {
    fn signer(&self) -> &str {
        &self.0.validator
    }

    fn is_duty(&self) -> bool {
        true
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.0;
        let height = ctx.block.height;
        let c = state
            .checkpoint(msg.job_id, msg.round, &msg.worker)?
            .ok_or_else(|| {
                PolError::UnknownCheckpoint.err(format!(
                    "no checkpoint of {} in round {} of training job {}",
                    msg.worker, msg.round, msg.job_id
                ))
            })?;
        let verdict = Verdict {
            validator: msg.validator.clone(),
            weights_hash: msg.weights_hash.clone(),
            optimizer_state_hash: msg.optimizer_state_hash.clone(),
            unavailable: msg.unavailable,
            height,
        };
        let not_assigned = |why: String| {
            Err(PolError::NotAssigned.err(format!(
                "checkpoint of {} in round {} of training job {} {why}",
                msg.worker, msg.round, msg.job_id
            )))
        };
        if c.deadline < height {
            return not_assigned(format!(
                "is not awaiting a re-execution now ({}, deadline {})",
                c.status().as_str_name(),
                c.deadline
            ));
        }
        match c.status() {
            CheckpointStatus::Verifying if c.verifier == msg.validator => {
                let mut job = state.existing_job(c.job_id)?;
                verify(state, height, &mut job, c, verdict)?;
                state.put_job(&job);
                Ok(())
            }
            CheckpointStatus::Disputed
                if c.committee.contains(&msg.validator)
                    && !c.votes.iter().any(|v| v.validator == msg.validator) =>
            {
                vote(state, c, verdict)
            }
            status => not_assigned(format!(
                "awaits no re-execution from {} ({})",
                msg.validator,
                status.as_str_name()
            )),
        }
    }
}
