//! Typed access to pol state; other crates use these traits, never the keys.

use gonka_auth::module_address;
use gonka_proto::pol::{Checkpoint, Params, TrainingJob};
use gonka_sdk::{ErrorCode, Result, StateRead, StateReadExt, StateWrite, StateWriteExt};

use crate::keys::{self, CheckpointId};
use crate::{default_params, PolError, POOL};

/// Address of the module account holding the jobs' reward budgets.
pub fn pool_address() -> String {
    module_address(POOL)
}

fn read_u64<S: StateRead + ?Sized>(state: &S, key: &[u8]) -> Result<u64> {
    Ok(state
        .get_raw(key)?
        .and_then(|bytes| <[u8; 8]>::try_from(bytes.as_slice()).ok())
        .map_or(0, u64::from_be_bytes))
}

/// Reads of pol state.
pub trait PolRead: StateRead {
    /// Current parameters (the defaults if genesis stored none).
    fn pol_params(&self) -> Result<Params> {
        Ok(self
            .get_proto(&keys::params())?
            .unwrap_or_else(default_params))
    }

    /// A job, by id.
    fn job(&self, id: u64) -> Result<Option<TrainingJob>> {
        self.get_proto(&keys::job(id))
    }

    /// A job that must exist.
    fn existing_job(&self, id: u64) -> Result<TrainingJob> {
        self.job(id)?.ok_or_else(|| {
            PolError::UnknownJob.err(format!("no training job with id {id}; see /pol/jobs"))
        })
    }

    /// Every job, by id (genesis export).
    fn jobs(&self) -> Result<Vec<TrainingJob>> {
        Ok(self
            .prefix_proto(&keys::jobs())?
            .into_iter()
            .map(|(_, j)| j)
            .collect())
    }

    /// The id the next job gets (1 before the first).
    fn next_job_id(&self) -> Result<u64> {
        Ok(read_u64(self, &keys::next_job_id())?.max(1))
    }

    /// How many jobs are forming or running.
    fn live_jobs(&self) -> Result<u64> {
        read_u64(self, &keys::live_jobs())
    }

    /// The checkpoint of `worker` in `round` of `job`.
    fn checkpoint(&self, job: u64, round: u64, worker: &str) -> Result<Option<Checkpoint>> {
        self.get_proto(&keys::checkpoint(job, round, worker))
    }

    /// A checkpoint named by a queue entry, which must exist.
    fn queued_checkpoint(&self, id: &CheckpointId) -> Result<Checkpoint> {
        self.checkpoint(id.job, id.round, &id.worker)?
            .ok_or_else(|| {
                PolError::UnknownCheckpoint.err(format!(
                    "no checkpoint of {} in round {} of job {}",
                    id.worker, id.round, id.job
                ))
            })
    }

    /// The checkpoints of one round, by worker address.
    fn round_checkpoints(&self, job: u64, round: u64) -> Result<Vec<Checkpoint>> {
        Ok(self
            .prefix_proto(&keys::round_checkpoints(job, round))?
            .into_iter()
            .map(|(_, c)| c)
            .collect())
    }

    /// Every checkpoint, by job, round and worker (genesis export).
    fn all_checkpoints(&self) -> Result<Vec<Checkpoint>> {
        Ok(self
            .prefix_proto(&keys::checkpoints())?
            .into_iter()
            .map(|(_, c)| c)
            .collect())
    }

    /// The rounds queued under `prefix` ([`keys::closes_at`], [`keys::samples_at`]).
    fn round_entries(&self, prefix: &[u8]) -> Result<Vec<(u64, u64)>> {
        Ok(self
            .prefix_raw(prefix)?
            .into_iter()
            .filter_map(|(key, _)| keys::parse_round_entry(prefix, &key))
            .collect())
    }

    /// The first `limit` re-executions `validator` owes, by job, round and worker.
    fn duties(&self, validator: &str, limit: usize) -> Result<Vec<CheckpointId>> {
        let prefix = keys::duties_of(validator);
        let mut ids = Vec::new();
        for (key, _) in self.range_raw(&prefix, &prefix, limit)? {
            ids.extend(keys::parse_duty(&prefix, &key));
        }
        Ok(ids)
    }
}

impl<S: StateRead + ?Sized> PolRead for S {}

/// Writes of pol state.
pub trait PolWrite: StateWrite {
    /// Stores the parameters.
    fn put_pol_params(&mut self, params: &Params) {
        self.put_proto(keys::params(), params);
    }

    /// Stores a job.
    fn put_job(&mut self, job: &TrainingJob) {
        self.put_proto(keys::job(job.id), job);
    }

    /// Sets the id the next job gets.
    fn put_next_job_id(&mut self, id: u64) {
        self.put_raw(keys::next_job_id(), id.to_be_bytes().to_vec());
    }

    /// Sets how many jobs are forming or running.
    fn put_live_jobs(&mut self, count: u64) {
        self.put_raw(keys::live_jobs(), count.to_be_bytes().to_vec());
    }

    /// Stores a checkpoint.
    fn put_checkpoint(&mut self, checkpoint: &Checkpoint) {
        self.put_proto(
            keys::checkpoint(checkpoint.job_id, checkpoint.round, &checkpoint.worker),
            checkpoint,
        );
    }

    /// Adds or removes a queue or index entry (empty value).
    fn set_entry(&mut self, key: Vec<u8>, present: bool) {
        if present {
            self.put_raw(key, Vec::new());
        } else {
            self.delete_raw(key);
        }
    }
}

impl<S: StateWrite + ?Sized> PolWrite for S {}
