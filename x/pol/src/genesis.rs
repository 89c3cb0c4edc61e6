//! Genesis import and export for pol: parameters, jobs and their checkpoints. Budgets sit in
//! the module's pool, whose balance bank's genesis carries; import checks the two agree and
//! rebuilds the queues from the stored deadlines.

use gonka_bank::{BankRead, NATIVE_DENOM};
use gonka_epochs::EpochsRead;
use gonka_proto::pol::{CheckpointStatus, GenesisState, JobStatus};
use gonka_sdk::{parse_amount, ErrorCode, Genesis, HookOutput, Result, StateRead, StateWrite};

use crate::{
    default_params, keys, pool_address, validate_params, Pol, PolError, PolRead, PolWrite, NAME,
};

fn invalid(log: String) -> gonka_sdk::Error {
    PolError::InvalidParams.err(log)
}

impl Genesis for Pol {
    const NAME: &'static str = NAME;
    type State = GenesisState;

    /// Validates the parameters, stores every job and checkpoint, re-queues what waits for a
    /// height (formation and round deadlines, sampling, committee draws, reviews, duties),
    /// and checks the pool holds exactly the jobs' budgets left.
    fn init_genesis(
        &self,
        state: &mut dyn StateWrite,
        genesis: GenesisState,
    ) -> Result<HookOutput> {
        let params = genesis.params.unwrap_or_else(default_params);
        validate_params(&params)?;
        state.put_pol_params(&params);
        let mut held = 0u128;
        let mut live = 0u64;
        for job in &genesis.jobs {
            held += parse_amount("job budget left", &job.budget_left)?;
            match job.status() {
                JobStatus::Forming => {
                    live += 1;
                    state.set_entry(keys::formation(job.formation_deadline + 1, job.id), true);
                }
                JobStatus::Running => {
                    live += 1;
                    state.set_entry(keys::close(job.round_deadline, job.id, job.round), true);
                }
                _ => {}
            }
            state.put_job(job);
        }
        for c in &genesis.checkpoints {
            if state.job(c.job_id)?.is_none() {
                return Err(invalid(format!(
                    "app_state.pol.checkpoints[] holds a checkpoint of job {}, which is not in app_state.pol.jobs",
                    c.job_id
                )));
            }
            match c.status() {
                // Its round closed in the old chain's last block: sampled in block 2, with
                // the beacon of block 1.
                CheckpointStatus::Closed => {
                    state.set_entry(keys::sample(2, c.job_id, c.round), true)
                }
                CheckpointStatus::Verifying => {
                    state.set_entry(keys::duty(&c.verifier, c.job_id, c.round, &c.worker), true);
                    state.set_entry(
                        keys::review(c.deadline + 1, c.job_id, c.round, &c.worker),
                        true,
                    );
                }
                CheckpointStatus::Disputed if c.committee.is_empty() => {
                    state.set_entry(keys::draw(2, c.job_id, c.round, &c.worker), true)
                }
                CheckpointStatus::Disputed => {
                    for member in &c.committee {
                        if !c.votes.iter().any(|v| &v.validator == member) {
                            state.set_entry(keys::duty(member, c.job_id, c.round, &c.worker), true);
                        }
                    }
                    state.set_entry(
                        keys::review(c.deadline + 1, c.job_id, c.round, &c.worker),
                        true,
                    );
                }
                _ => {}
            }
            state.put_checkpoint(c);
        }
        let pool = state.balance(&pool_address(), NATIVE_DENOM)?;
        if pool != held {
            return Err(invalid(format!(
                "the pol pool {} holds {pool}ngnk but its jobs' budgets left add up to {held}ngnk",
                pool_address()
            )));
        }
        state.put_live_jobs(live);
        state.put_next_job_id(genesis.next_job_id.max(1));
        Ok(HookOutput::default())
    }

    /// Heights restart like epochs: the new chain's block 1 stands for the first block of the
    /// current epoch, so every deadline moves down by the heights before it (at least to
    /// block 1; windows only grow).
    fn export_genesis(&self, state: &dyn StateRead) -> Result<GenesisState> {
        let now = state.current_epoch()?.start_height.saturating_sub(1);
        let shift = |h: u64| {
            if h == 0 {
                0
            } else {
                h.saturating_sub(now).max(1)
            }
        };
        Ok(GenesisState {
            params: Some(state.pol_params()?),
            jobs: state
                .jobs()?
                .into_iter()
                .map(|mut job| {
                    job.round_deadline = shift(job.round_deadline);
                    job.formation_deadline = shift(job.formation_deadline);
                    job.created_height = shift(job.created_height);
                    job
                })
                .collect(),
            checkpoints: state
                .all_checkpoints()?
                .into_iter()
                .map(|mut c| {
                    c.deadline = shift(c.deadline);
                    c.height = shift(c.height);
                    c
                })
                .collect(),
            next_job_id: state.next_job_id()?,
        })
    }
}
