//! `MsgPublishModel`: an active worker of a completed job attests the SHA-256 of the job's
//! final weights; the attestation that gives one hash a majority of the active workers
//! publishes the trained model to x/inference's model table.

use gonka_auth::validate_address;
use gonka_inference::{InferenceRead, InferenceWrite};
use gonka_proto::inference::Model;
use gonka_proto::pol::{JobStatus, MsgPublishModel, TrainingJob};
use gonka_sdk::{decode_as, Any, ErrorCode, Msg, Result, StateWrite, TxContext};

use super::check_hash;
use crate::{events, PolError, PolRead, PolWrite};

/// Model table id of the model job `id` trained (`pol/job-{id}`). x/inference's genesis
/// reserves the prefix, so no priced model can take it.
pub fn trained_model_id(job: u64) -> String {
    format!("{}{job}", gonka_proto::ids::TRAINED_MODEL_PREFIX)
}

struct PublishModel(MsgPublishModel);

/// Decodes and statelessly checks a `MsgPublishModel`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgPublishModel>(any).map(|msg| {
        let msg = msg?;
        validate_address("worker", &msg.worker)?;
        check_hash("weights_sha256", &msg.weights_sha256)?;
        Ok(Box::new(PublishModel(msg)) as Box<dyn Msg>)
    })
}

/// The hash more than half of `job`'s active workers attested, if any.
fn majority_hash(job: &TrainingJob) -> Option<Vec<u8>> {
    let active: Vec<&[u8]> = job
        .workers
        .iter()
        .filter(|w| w.active)
        .map(|w| w.model_sha256.as_slice())
        .collect();
    let needed = active.len() / 2 + 1;
    active
        .iter()
        .filter(|h| !h.is_empty())
        .find(|h| active.iter().filter(|o| o == h).count() >= needed)
        .map(|h| h.to_vec())
}

impl Msg for PublishModel {
    fn signer(&self) -> &str {
        &self.0.worker
    }

    fn execute(&self, _ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let msg = &self.0;
        let mut job = state.existing_job(msg.job_id)?;
        if job.status() != JobStatus::Completed {
            return Err(PolError::NotCompleted.err(format!(
                "training job {} is {}; its model is published after its last round",
                job.id,
                job.status().as_str_name()
            )));
        }
        if !job.model_id.is_empty() {
            return Err(PolError::AlreadyAttested.err(format!(
                "training job {}'s model is already published as {}",
                job.id, job.model_id
            )));
        }
        let Some(worker) = job
            .workers
            .iter_mut()
            .find(|w| w.host == msg.worker && w.active)
        else {
            return Err(PolError::NotWorker.err(format!(
                "{} is not an active worker of training job {}",
                msg.worker, job.id
            )));
        };
        if !worker.model_sha256.is_empty() {
            return Err(PolError::AlreadyAttested.err(format!(
                "{} already attested the weights of training job {}",
                msg.worker, job.id
            )));
        }
        worker.model_sha256 = msg.weights_sha256.clone();
        state.emit(events::model_attested(
            &job,
            &msg.worker,
            &msg.weights_sha256,
        ));
        if let Some(hash) = majority_hash(&job) {
            let model = Model {
                id: trained_model_id(job.id),
                price_per_token: state.pol_params()?.trained_model_price_per_token,
                min_vram_mib: 0,
                weights_sha256: hash,
                trained_by_job: job.id,
                // Served by the bit-exact reference runtime: validated by exact answers, and
                // of the reference architecture, so a token of it is one work unit.
                work_per_token: 1,
                ..Model::default()
            };
            if state.model(&model.id)?.is_some() {
                return Err(PolError::AlreadyAttested
                    .err(format!("the model table already holds {}", model.id)));
            }
            job.model_id = model.id.clone();
            state.emit(events::model_published(&job, &model.weights_sha256));
            state.put_model(&model)?;
        }
        state.put_job(&job);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_proto::pol::Worker;

    fn job(attested: &[(&[u8], bool)]) -> TrainingJob {
        TrainingJob {
            workers: attested
                .iter()
                .map(|(hash, active)| Worker {
                    active: *active,
                    model_sha256: hash.to_vec(),
                    ..Worker::default()
                })
                .collect(),
            ..TrainingJob::default()
        }
    }

    #[test]
    fn a_hash_needs_more_than_half_of_the_active_workers() {
        let (a, b): (&[u8], &[u8]) = (b"a", b"b");
        assert_eq!(
            majority_hash(&job(&[(a, true), (b"", true), (b"", true)])),
            None
        );
        assert_eq!(
            majority_hash(&job(&[(a, true), (a, true), (b"", true)])),
            Some(a.to_vec())
        );
        // Two of four is not more than half.
        assert_eq!(
            majority_hash(&job(&[(a, true), (a, true), (b, true), (b, true)])),
            None
        );
        // A dropped worker's attestation does not count, nor is it counted against.
        assert_eq!(
            majority_hash(&job(&[(a, true), (b, false), (b"", false)])),
            Some(a.to_vec())
        );
        assert_eq!(majority_hash(&job(&[(a, false), (b"", true)])), None);
    }
}
