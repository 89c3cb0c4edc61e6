//! x/pol: training jobs that staked hosts run together with DiLoCo, and the
//! proof-of-learning checkpoints that make every round of them checkable and payable.
//!
//! # Jobs
//! A creator sends `MsgCreateTrainingJob` (the model and optimizer configuration, the
//! dataset's Merkle root, the seed, inner steps H, outer rounds, worker count, round length
//! in blocks) and escrows the reward budget in the module's pool ([`pool_address`]). Staked
//! hosts join with `MsgJoinTraining` until the job is full (workers are numbered in join
//! order); a job not full within `formation_blocks` is cancelled and its budget returned.
//! When the last worker joins, round 1 opens.
//!
//! # Rounds and checkpoints
//! Each worker runs H inner AdamW steps from the round's start weights on its data shard,
//! then commits its proof-of-learning record with `MsgSubmitCheckpoint`: SHA-256 hashes of
//! the start weights, end weights, inner optimizer state, data indices and pseudo-gradient
//! (over gonka-trainer's canonical serializations) and its mean loss in micro-nats. Workers
//! exchange pseudo-gradients directly and accept only those whose hash their worker
//! committed here. A round closes in `end_block` of the block its last active worker's
//! checkpoint lands in, or of its deadline: a worker without a checkpoint is dropped from
//! the job and loses the round's slot. Then the next round opens (or the job completes
//! after its last round, or is cancelled when nobody is left) ([`rounds`]).
//!
//! # Verification
//! In the block after a round closed, each checkpoint is sampled with chance
//! `checkpoint_sample_ppm` by the beacon seed of the closing block (x/bls purpose
//! `checkpoint-sampling`) and assigned by power to a validator other than its worker.
//! The validator re-executes the round from the agreed start weights on the committed data
//! indices and sends `MsgVerifyCheckpoint` with the end weights' and optimizer state's
//! hashes it got (training is bit-exact on the CPU, see gonka-trainer), or `unavailable`
//! when the worker did not serve what re-execution needs. Agreement pays; disagreement is a
//! dispute decided by a committee drawn in the next block, whose members re-execute and
//! vote the same message; the loser is slashed `slash_fraction_ppm` (20%) to the winners
//! ([`review`]). Unsampled checkpoints are paid at once. An unanswered verification never
//! pays: it goes to another validator, up to `max_reassignments` times, and then the
//! checkpoint is unverified (not paid, nothing credited, its slot back to the creator).
//! A job is refused when one checkpoint (`seq_len · batch_size · inner_steps` tokens) could
//! not be re-executed within `verification_deadline_blocks` at `verifier_tokens_per_block`,
//! so a sampled checkpoint can always be checked in time; joining needs `min_stake` bonded,
//! the stake a faulted checkpoint slashes.
//!
//! # Pay and work
//! A paid checkpoint earns its worker `slot − fee` from the job's budget (the creator's
//! money, paid for what the creator asked). Work is credited only for re-executed work: a
//! verified (or upheld) checkpoint credits [`rounds::credited_units`] — its round's
//! [`rounds::work_units`] divided by the sampling rate — to its host in the same work ledger
//! as inference ([`gonka_stake::credit_work`]), so training counts for rewards and validator
//! power in expectation while a made-up checkpoint credits only when sampled, where it is
//! caught and slashed. The fee pays the re-execution when the checkpoint is sampled. What a
//! job does not pay goes back to its creator once it ended and nothing of it is in review.
//!
//! # The trained model
//! After the last round, each active worker computes the final weights (the last round's
//! start after one outer step on the average of its committed pseudo-gradients, the same
//! rule every round starts by), exports them to the reference runtime's fixed point and
//! attests their SHA-256 with `MsgPublishModel`. The attestation that gives one hash more than
//! half of the active workers publishes the model to x/inference's model table as
//! [`trained_model_id`] (`pol/job-{id}`), priced at `trained_model_price_per_token`, with the
//! hash every ML node serving it must load; inference on it is validated `exact` like the
//! reference model's, since it runs in the same integer runtime. Workers are staked and any
//! holder of the last round's pseudo-gradients can recompute the hash, so a wrong model needs
//! a colluding majority of the job's workers; a minority's other hash is simply outvoted.
//!
//! # Known limits
//! The claimed hashes are public, so a validator could agree without re-executing; the
//! verification fee is its only reward for work, and a committee of re-executing members
//! stands behind every disagreement. A commit-then-reveal of the re-executed optimizer
//! state (as inference validations commit their results) would close that; it is not built.
//! Re-execution on another kind of CPU is not bit-exact (SIMD kernels differ), so verifiers
//! accept a small relative distance; float noise grows with the round's length and, past
//! about 100 inner steps, reaches what skipping a tenth of the steps gives (measured in
//! gonka-trainer). Rounds longer than that are verifiable bit-exactly on the same kind of
//! CPU only, until workers commit intermediate checkpoints within a round.
//! A worker that commits its pseudo-gradient and then withholds it from its peers is left out
//! of their average (they go on after a few polls) but paid unless its checkpoint is sampled:
//! the economics of any lazy checkpoint (a 10% sample against a 20% slash); peers do not
//! report withholding on chain.
//!
//! Queries: `/pol/job`, `/pol/jobs`, `/pol/checkpoints`, `/pol/duties`, `/pol/params`.
//! Error codes: [`PolError`].

mod errors;
mod events;
mod genesis;
mod hooks;
mod keys;
mod msgs;
mod params;
mod query;
pub mod review;
pub mod rounds;
mod state;

pub use errors::PolError;
pub use msgs::trained_model_id;
pub use params::{default_params, validate_params};
pub use state::{pool_address, PolRead, PolWrite};

use gonka_sdk::{Any, BlockContext, HookOutput, Module, Msg, Result, StateRead, StateWrite};

/// Module name: key namespace, codespace, query prefix and genesis section.
pub const NAME: &str = "pol";

/// Name of the module account holding the jobs' reward budgets.
pub const POOL: &str = "pol_pool";

/// The pol module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Pol;

impl Module for Pol {
    fn decode_msg(&self, msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        msgs::decode(msg)
    }

    fn begin_block(&self, ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
        hooks::begin_block(ctx, state)
    }

    fn end_block(&self, ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<HookOutput> {
        hooks::end_block(ctx, state)
    }

    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
