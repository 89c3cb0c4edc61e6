//! `MsgJoinTraining`: a staked host becomes the next worker of a forming job.

use gonka_auth::validate_address;
use gonka_proto::pol::{JobStatus, MsgJoinTraining, Worker};
use gonka_sdk::{decode_as, Any, ErrorCode, Msg, Result, StateWrite, TxContext};
use gonka_stake::StakeRead;

use crate::rounds::start;
use crate::{events, PolError, PolRead, PolWrite};

struct JoinTraining(MsgJoinTraining);

/// Decodes and statelessly checks a `MsgJoinTraining`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgJoinTraining>(any).map(|msg| {
        let msg = msg?;
        validate_address("host", &msg.host)?;
        gonka_sdk::validate_url("endpoint", &msg.endpoint)
            .map_err(|log| PolError::InvalidJob.err(log))?;
        Ok(Box::new(JoinTraining(msg)) as Box<dyn Msg>)
    })
}

impl Msg for JoinTraining {
    fn signer(&self) -> &str {
        &self.0.host
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let host = &self.0.host;
        let mut job = state.existing_job(self.0.job_id)?;
        match job.status() {
            JobStatus::Forming => {}
            JobStatus::Running => {
                return Err(PolError::JobFull.err(format!(
                    "training job {} already has all its {} workers",
                    job.id, job.worker_count
                )))
            }
            status => {
                return Err(PolError::JobEnded.err(format!(
                    "training job {} has ended ({})",
                    job.id,
                    status.as_str_name()
                )))
            }
        }
        if job.workers.iter().any(|w| &w.host == host) {
            return Err(PolError::AlreadyJoined
                .err(format!("{host} already works on training job {}", job.id)));
        }
        let min_stake = state.stake_params()?.min_stake;
        let bonded = match state.participant(host)? {
            Some(p) if !p.jailed => gonka_stake::bonded(&p)?,
            _ => 0,
        };
        if bonded < min_stake {
            return Err(PolError::NotStaked.err(format!(
                "{host} bonds {bonded}ngnk (or is jailed), less than min_stake ({min_stake}ngnk): a worker's stake is what a faulted checkpoint slashes; stake with `gonkad tx stake create` first"
            )));
        }
        job.workers.push(Worker {
            host: host.clone(),
            active: true,
            rounds_paid: 0,
            earned: "0".into(),
            endpoint: self.0.endpoint.clone(),
            model_sha256: Vec::new(),
        });
        state.emit(events::joined(&job, host, job.workers.len() - 1));
        if job.workers.len() as u64 == job.worker_count {
            start(state, &mut job, ctx.block.height);
        }
        state.put_job(&job);
        Ok(())
    }
}
