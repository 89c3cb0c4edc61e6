//! `MsgCreateTrainingJob`: a creator describes a training job and escrows its reward budget.

use gonka_auth::validate_address;
use gonka_bank::{transfer, Coin};
use gonka_proto::pol::{JobStatus, MsgCreateTrainingJob, TrainingConfig, TrainingJob};
use gonka_sdk::{decode_as, parse_amount, Any, ErrorCode, Msg, Result, StateWrite, TxContext, PPM};

use crate::{events, keys, pool_address, PolError, PolRead, PolWrite};

/// Longest architecture id.
const MAX_MODEL_LEN: usize = 64;
/// Longest training sequence, in tokens (bytes).
const MAX_SEQ_LEN: u64 = 4_096;
/// Most sequences per inner step.
const MAX_BATCH_SIZE: u64 = 1_024;

struct CreateJob {
    msg: MsgCreateTrainingJob,
    config: TrainingConfig,
    budget: u128,
}

fn invalid(log: String) -> gonka_sdk::Error {
    PolError::InvalidJob.err(log)
}

/// Stateless checks of a training configuration.
fn check_config(config: &TrainingConfig) -> Result<()> {
    if config.model.is_empty() || config.model.len() > MAX_MODEL_LEN {
        return Err(invalid(format!(
            "config.model must name an architecture in 1 to {MAX_MODEL_LEN} bytes, found {} bytes",
            config.model.len()
        )));
    }
    for (name, value, max) in [
        ("config.seq_len", config.seq_len, MAX_SEQ_LEN),
        ("config.batch_size", config.batch_size, MAX_BATCH_SIZE),
    ] {
        if value == 0 || value > max {
            return Err(invalid(format!("{name} must be 1 to {max}, found {value}")));
        }
    }
    for (name, value) in [
        ("config.inner_steps", config.inner_steps),
        ("config.inner_lr_ppm", config.inner_lr_ppm),
        ("config.outer_lr_ppm", config.outer_lr_ppm),
    ] {
        if value == 0 {
            return Err(invalid(format!("{name} must be positive, found 0")));
        }
    }
    if config.outer_momentum_ppm >= PPM {
        return Err(invalid(format!(
            "config.outer_momentum_ppm must be below {PPM} (a momentum below 1), found {}",
            config.outer_momentum_ppm
        )));
    }
    Ok(())
}

/// Decodes and statelessly checks a `MsgCreateTrainingJob`.
pub fn decode(any: &Any) -> Option<Result<Box<dyn Msg>>> {
    decode_as::<MsgCreateTrainingJob>(any).map(|msg| {
        let msg = msg?;
        validate_address("creator", &msg.creator)?;
        let config = msg
            .config
            .clone()
            .ok_or_else(|| invalid("config is required".into()))?;
        check_config(&config)?;
        if msg.dataset_root.len() != 32 {
            return Err(invalid(format!(
                "dataset_root must be the 32-byte Merkle root of the shards, found {} bytes",
                msg.dataset_root.len()
            )));
        }
        for (name, value) in [
            ("outer_rounds", msg.outer_rounds),
            ("worker_count", msg.worker_count),
            ("round_blocks", msg.round_blocks),
        ] {
            if value == 0 {
                return Err(invalid(format!("{name} must be positive, found 0")));
            }
        }
        let budget = parse_amount("reward_budget", &msg.reward_budget)
            .map_err(|e| invalid(e.log))?;
        // One slot per (round, worker) must hold at least 1 ngnk.
        let slots = u128::from(msg.outer_rounds) * u128::from(msg.worker_count);
        if budget < slots {
            return Err(invalid(format!(
                "reward_budget {budget}ngnk cannot pay {slots} checkpoints ({} rounds × {} workers) at least 1ngnk each",
                msg.outer_rounds, msg.worker_count
            )));
        }
        Ok(Box::new(CreateJob {
            msg,
            config,
            budget,
        }) as Box<dyn Msg>)
    })
}

impl Msg for CreateJob {
    fn signer(&self) -> &str {
        &self.msg.creator
    }

    fn execute(&self, ctx: &TxContext<'_>, state: &mut dyn StateWrite) -> Result<()> {
        let params = state.pol_params()?;
        let msg = &self.msg;
        let bound = |name: &str, value: u64, min: u64, max: u64| {
            if value < min || value > max {
                return Err(invalid(format!(
                    "{name} must be {min} to {max} (see /pol/params), found {value}"
                )));
            }
            Ok(())
        };
        bound("worker_count", msg.worker_count, 1, params.max_workers)?;
        bound("outer_rounds", msg.outer_rounds, 1, params.max_outer_rounds)?;
        bound(
            "config.inner_steps",
            self.config.inner_steps,
            1,
            params.max_inner_steps,
        )?;
        let tokens = crate::params::checkpoint_tokens(&self.config);
        let verifiable = params
            .verifier_tokens_per_block
            .saturating_mul(params.verification_deadline_blocks);
        if tokens > verifiable {
            return Err(invalid(format!(
                "a checkpoint of this job trains {tokens} tokens (seq_len × batch_size × inner_steps), more than a verifier re-executes in verification_deadline_blocks ({}) at verifier_tokens_per_block ({}): {verifiable}; use fewer inner steps or smaller batches (see /pol/params)",
                params.verification_deadline_blocks, params.verifier_tokens_per_block
            )));
        }
        bound(
            "round_blocks",
            msg.round_blocks,
            params.min_round_blocks,
            params.max_round_blocks,
        )?;
        let min_budget = parse_amount("min_reward_budget", &params.min_reward_budget)?;
        if self.budget < min_budget {
            return Err(invalid(format!(
                "reward_budget must be at least {min_budget}ngnk (see /pol/params), found {}ngnk",
                self.budget
            )));
        }
        let live = state.live_jobs()?;
        if live >= params.max_live_jobs {
            return Err(PolError::TooManyJobs.err(format!(
                "{live} training jobs are forming or running, the most the chain allows; try again when one ends"
            )));
        }
        transfer(
            state,
            &msg.creator,
            &pool_address(),
            &Coin::ngnk(self.budget),
        )?;
        let id = state.next_job_id()?;
        let height = ctx.block.height;
        let job = TrainingJob {
            id,
            creator: msg.creator.clone(),
            config: Some(self.config.clone()),
            dataset_root: msg.dataset_root.clone(),
            seed: msg.seed,
            outer_rounds: msg.outer_rounds,
            worker_count: msg.worker_count,
            round_blocks: msg.round_blocks,
            reward_budget: self.budget.to_string(),
            budget_left: self.budget.to_string(),
            status: JobStatus::Forming as i32,
            workers: Vec::new(),
            round: 0,
            round_deadline: 0,
            created_height: height,
            formation_deadline: height + params.formation_blocks,
            checkpoints_in_review: 0,
            model_id: String::new(),
        };
        state.put_next_job_id(id + 1);
        state.put_live_jobs(live + 1);
        state.set_entry(keys::formation(job.formation_deadline + 1, id), true);
        state.emit(events::job("training_job_created", &job));
        state.put_job(&job);
        Ok(())
    }
}
