//! `MsgSubmitCheckpoint`: a worker's proof-of-learning record of the open round.

use gonka_auth::validate_address;
use gonka_proto::pol::{Checkpoint, CheckpointStatus, JobStatus, MsgSubmitCheckpoint};
use gonka_sdk::{decode_as, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::check_hash;
use crate::rounds::close_early;
use crate::{events, PolError, PolRead, PolWrite};

struct SubmitCheckpoint(MsgSubmitCheckpoint);

/// Decodes and statelessly checks a `MsgSubmitCheckpoint`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgSubmitCheckpoint>(any).map(|msg| {
        let msg = msg?;
        validate_address("worker", &msg.worker)?;
        check_hash("start_weights_hash", &msg.start_weights_hash)?;
        check_hash("weights_hash", &msg.weights_hash)?;
        check_hash("optimizer_state_hash", &msg.optimizer_state_hash)?;
        check_hash("data_indices_hash", &msg.data_indices_hash)?;
        check_hash("pseudo_gradient_hash", &msg.pseudo_gradient_hash)?;
        Ok(Box::new(SubmitCheckpoint(msg)) as Box<dyn Msg>)
    })
}

impl Msg for SubmitCheckpoint {
    fn signer(&self) -> &str {
        &self.0.worker
    }

    fn is_duty(&self) -> bool {
        true
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.0;
        let job = state.existing_job(msg.job_id)?;
        if job.status() != JobStatus::Running || job.round != msg.round {
            let open = if job.status() == JobStatus::Running {
                format!("round {} is open", job.round)
            } else {
                format!("no round is open ({})", job.status().as_str_name())
            };
            return Err(PolError::RoundNotOpen.err(format!(
                "checkpoint for round {} of training job {}, but {open}",
                msg.round, job.id
            )));
        }
        if !job.workers.iter().any(|w| w.host == msg.worker && w.active) {
            return Err(PolError::NotWorker.err(format!(
                "{} is not an active worker of training job {}",
                msg.worker, job.id
            )));
        }
        if state.checkpoint(job.id, msg.round, &msg.worker)?.is_some() {
            return Err(PolError::DuplicateCheckpoint.err(format!(
                "{} already submitted its checkpoint of round {} of training job {}",
                msg.worker, msg.round, job.id
            )));
        }
        let checkpoint = Checkpoint {
            job_id: job.id,
            round: msg.round,
            worker: msg.worker.clone(),
            start_weights_hash: msg.start_weights_hash.clone(),
            weights_hash: msg.weights_hash.clone(),
            optimizer_state_hash: msg.optimizer_state_hash.clone(),
            data_indices_hash: msg.data_indices_hash.clone(),
            pseudo_gradient_hash: msg.pseudo_gradient_hash.clone(),
            loss_micro_nats: msg.loss_micro_nats,
            height: ctx.block.height,
            status: CheckpointStatus::Submitted as i32,
            paid: "0".into(),
            ..Default::default()
        };
        state.put_checkpoint(&checkpoint);
        state.emit(events::checkpoint("checkpoint_submitted", &checkpoint));
        // Bounded by the job's size (at most max_workers). Only active workers count: one
        // dropped after committing this round (its previous checkpoint faulted) must not
        // close the round on a worker still training.
        let submitted = state.round_checkpoints(job.id, msg.round)?;
        let all_in = job
            .workers
            .iter()
            .filter(|w| w.active)
            .all(|w| submitted.iter().any(|c| c.worker == w.host));
        if all_in {
            close_early(state, &job, ctx.block.height);
        }
        Ok(())
    }
}
