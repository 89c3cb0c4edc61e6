//! x/disputes: cross-validation of work records, disputes decided by committees of
//! validators, and 20% slashing of whoever lied — the executor's host who faked work, or
//! the validator (or requester) who falsely accused it.
//!
//! ## Sampling (in `begin_block`)
//! A record stored at height `H` is queued by x/inference as it is stored and sampled in
//! `begin_block` of `H + 1` (which drains the queue, so the work follows the block's records,
//! never the epoch's) with the seed `SHA-256(seed(validation-sampling, H) ‖ inference_id)`,
//! where `seed` is x/bls's ([`gonka_bls::beacon::seed`]): the beacon of `H` is the group's
//! threshold signature of height `H`, released only in the precommits of block `H` (after
//! its records were fixed), unique (no proposer can choose among outcomes), and the same on
//! every node. When `H` has no group signature, the queue waits, and the first block after a
//! signed height `H'` samples it with `H'`'s seed (committee draws likewise). The record is
//! sampled when the seed's first 8 bytes (u64 BE)
//! modulo 10^6 are below the executor's rate (for a leaf of a committed batch, which reached
//! the chain only because x/settlement sampled it with chance `sampled_ppm`, below
//! `rate / sampled_ppm`, so the overall rate is the same). The executor is the record's
//! `executor_host` (the participant paid and credited for it); its rate, in ppm, is
//!
//! `rate = max − ⌊(max − min) · min(c, D) / D⌋`
//!
//! with `min`/`max` = `min_sample_ppm`/`max_sample_ppm` (1% / 10%), `D` =
//! `decay_validations` (20) and `c` its clean streak: the validations (and disputes) that
//! found its work correct since its last fault. A new executor (`c = 0`) and one that just
//! lost a dispute (`c` resets to 0) are checked at the maximum; each passed validation
//! lowers the rate linearly until, after `D` of them, it stays at the minimum. Flooring the
//! decrease rounds the rate up.
//!
//! ## Assignment
//! A sampled record goes to one validator: a participant with power > 0, not jailed, other
//! than the executor's host and the record's transfer agent (which holds the answer), drawn with probability proportional to power by the seed's
//! bytes 8..16 (u64 BE) modulo the total power over the candidates in address order. The
//! candidates are those hosting a registered ML node that serves the record's model, when
//! any does (so a validator is not assigned a model it cannot run, e.g. one trained on chain
//! that few serve); otherwise every such participant, who must then run the model to
//! validate it (`ModelValidators`). With no candidate the record is not sampled. The validator has
//! `validation_deadline_blocks` (20) blocks: it answers with `MsgSubmitValidation` in blocks
//! up to and including the deadline.
//!
//! ## Commit, then reveal
//! The record carries only the executor's salted output commitment; the salt is known to
//! the executing node and the transfer agent alone. The validator re-executes the prompt
//! (fetched from the transfer agent, never the response) and commits its result:
//! `gonka/result/v1` = SHA-256 over its address, its answer's hash and the token counts it
//! found ([`gonka_inference::result_commitment`]). Only then does the chain ask the record's
//! transfer agent for the output (`reveal_requested`, `/disputes/reveals_due`): it sends
//! `MsgRevealOutput` (salt and answer hash; the executor host may send it too) within
//! `reveal_deadline_blocks` (10); the chain checks that they open the record's commitment
//! and recomputes the validator's commitment from the revealed answer and the record's
//! counts. Before the commit nothing about the answer is public, so a validator that does
//! not re-execute cannot match, and a commitment names its author, so nobody can submit
//! another's. A reveal before anything waits for it is refused (disputes 18). An output
//! never revealed by its deadline makes the record unverifiable: the validation becomes
//! `output_withheld` and a `reveal` dispute is settled at once as `payload_withheld`.
//!
//! **Inexact models** (`Model.validation = "logprobs"`, [`gonka_proto::scored`]): the record
//! commits to the executor's output tokens and their integer top-k log-probabilities; the
//! transfer agent serves the validator the prompt and the tokens (with the salted seal that
//! proves them committed), never the log-probabilities; the validator scores the tokens with
//! the model and submits its scores in the clear (`MsgSubmitValidation.scored`: nothing can
//! be copied from them, the executor's are fixed in the settled record and hidden until the
//! reveal); the reveal carries the executor's scores, which must open the commitment; a
//! result agrees when the mean absolute difference per compared log-probability is within
//! the model's `logprob_threshold`. Committee votes on such records carry scores the same
//! way. A result of the wrong kind for the model is refused (disputes 21).
//!
//! ## Validation
//! - **Match** (the validator's commitment is the revealed answer with the record's prompt
//!   and completion token counts, see [`gonka_inference::result_matches`]; a wrong count is
//!   a fault like a wrong answer): the validator earns the
//!   *validation reward*, the executor keeps its payment and work credit and its clean
//!   streak grows.
//! - **Mismatch**: a validation dispute opens, the validator being the accuser (unless the
//!   record already has a dispute, which then decides alone).
//!
//! The validation reward, paid to every re-execution that agrees with the final decision
//! (a matching validator, a vindicated accusing validator, committee members in the
//! majority), is `⌊cost · validation_reward_ppm / 10^6⌋` (default: the record's whole cost,
//! what the executor earned for the same compute), taken from the rewards module's
//! validation pool ([`gonka_rewards::VALIDATION_POOL`], fed by `validation_share_ppm` of
//! every epoch) and capped by what the pool holds: an empty pool pays nothing and never
//! mints. A validator that sits out its epoch's key generation (a member of the round that
//! was disqualified, or had not dealt by the dealing deadline) is not paid validation
//! rewards for the rest of that epoch (`validation_reward_forfeited`; the reward stays in
//! the pool): the beacon and the certificates are part of a validator's work.
//!
//! ## Disputes
//! Opened by a mismatching validator (`kind = validation`), by a validator the transfer
//! agent did not serve the request body (`MsgSubmitValidation` with `payload_unavailable`,
//! `kind = payload`; the validator is not blamed), or by the record's requester with
//! `MsgOpenDispute` and a deposit ≥ `min_deposit` held in this module's escrow account
//! (`kind = user`) within `dispute_window_blocks` of the record's block. A record is
//! disputed at most once. Genesis checks that transfer agents keep payloads
//! (`payload_retention_blocks` of x/inference) for the whole challenge window
//! ([`challenge_window_blocks`]), so nobody is ever assigned a body that may be gone. A committee of
//! `committee_size` (3) is drawn in the block after the dispute opened at `H`, by power
//! without replacement from the same candidates as validators (by the record's model),
//! excluding the executor's
//! host, the record's transfer agent and the accuser, with seed
//! `SHA-256("gonka/dispute-committee/v1" ‖ seed(dispute-committee, H) ‖ id ‖ inference_id)`:
//! whoever opens a dispute cannot know its committee when sending the transaction. With fewer
//! candidates than seats every candidate sits, minus one if that is even (so 2 candidates
//! make a committee of 1); with none, the dispute is resolved at once as `undecided`.
//! Members vote their committed result (as a validation commits it) with `MsgVoteDispute`
//! by `dispute_deadline_blocks` (30); once the output is revealed (a validation dispute opens
//! at the reveal; a user or payload dispute asks for it) a vote supports the executor when
//! it matches the record as a validation does, and before that it counts for neither side.
//! A member that votes against a decided outcome loses reputation as for a missed deadline,
//! so noise and blind copies of the revealed answer cost. An output asked for and still
//! unrevealed at the deadline settles the dispute as `payload_withheld`. The dispute
//! is decided as soon as one side has `⌊n/2⌋ + 1` votes; otherwise, in the first block
//! after the deadline, by the majority of the votes cast, a tie (or no vote) being
//! `undecided`.
//! Every vote, and the reveal of a disputed record, pays the flat price of judging and
//! deciding the dispute (`DECIDE_GAS`, 500,000, and the worst-case score comparisons),
//! whether or not it is the one that decides: which lands last is the block's order, so
//! the gas its sender simulated must not depend on it.
//!
//! ## Settlement
//! - **Executor faulted**: its host is slashed `slash_fraction_ppm` (20%) of bonded and
//!   unbonding stake ([`gonka_stake::slash`]) into escrow, the record's work units are
//!   voided ([`gonka_stake::void_work_or_owe`]: what its epoch credited, the rest taken
//!   from the host's next credits, as for a committed batch not final yet), and the requester
//!   is refunded the record's cost (not the transfer agent's commission: that service was
//!   given) from the host's liquid balance first, the rest from the slashed amount (if
//!   both fall short, the refund is what they cover). A user's deposit is returned. The
//!   rest of the slashed amount is split equally over the honest parties — the accuser,
//!   then the majority voters in committee order — each share rounded down, the dust to
//!   the community pool. The executor's clean streak resets to 0.
//! - **Executor upheld**: a validation accuser is slashed the same way and its slash is
//!   split equally over the executor's host and the majority voters (dust to the community
//!   pool); a user's deposit goes to the executor's host. The executor's clean streak
//!   grows.
//!   A payload accuser that the committee contradicts (it fetched the body) gets a missed
//!   deadline instead of a slash.
//! - **Payload withheld** (a majority of the votes could not get the body either): the
//!   record's transfer agent is slashed the same way, the requester is refunded the cost
//!   from that slash, the record's work units are voided (unverifiable work earns nothing),
//!   and the rest is split over the accuser and the majority. The executor keeps its stake.
//!   A payload dispute's committee excludes the accused transfer agent.
//! - **Undecided**: nobody is slashed; half a user's deposit goes to the executor's host and
//!   half is returned, so a frivolous dispute is not free.
//!
//! Money only moves between accounts (the slash moves stake out of stake's pools), so the
//! supply and stake's invariants hold.
//!
//! ## Deadlines and reputation
//! An assigned validator that does not answer by its deadline, and a committee member that
//! has not voted when a dispute is decided at its deadline, miss a deadline: its
//! reputation (out of 10^6) drops by `miss_penalty_ppm` and, at `jail_after_misses` (3)
//! misses in a row, it is jailed ([`gonka_stake::jail`]). Every answer in time clears the
//! run and restores a tenth of a penalty.
//!
//! Queries: `/disputes/dispute`, `/disputes/list`, `/disputes/participant`,
//! `/disputes/pending`, `/disputes/reveals_due`, `/disputes/validation`, `/disputes/stats`, `/disputes/params`.
//! Error codes: [`DisputesError`].

mod compare;
mod errors;
mod events;
mod genesis;
mod hooks;
mod keys;
mod msgs;
mod params;
mod query;
pub mod sampling;
mod settle;
mod state;

pub use errors::DisputesError;
pub use msgs::{open_user_dispute, require_requester};
pub use params::{challenge_window_blocks, default_params, min_deposit, validate_params};
pub use settle::{active_validators, reason};
pub use state::{escrow_address, DisputesRead, DisputesWrite};

use gonka_sdk::{Any, BlockContext, Module, Msg, Result, StateRead, StateWrite};

/// Module name: key namespace, codespace, query prefix and genesis section.
pub const NAME: &str = "disputes";

/// Name of the module account holding deposits and slashed stake of disputes.
pub const ESCROW: &str = "disputes_escrow";

/// Statuses of validations and disputes, as stored and queried.
pub mod status {
    /// A validation awaiting its validator.
    pub const PENDING: &str = "pending";
    /// The validator committed its result; the output reveal is awaited.
    pub const COMMITTED: &str = "committed";
    /// The output was never revealed: the transfer agent withheld it (settled against it).
    pub const OUTPUT_WITHHELD: &str = "output_withheld";
    /// The validator's result matched.
    pub const MATCHED: &str = "matched";
    /// The validator's result differed (a dispute decides).
    pub const MISMATCHED: &str = "mismatched";
    /// The validator did not answer in time.
    pub const MISSED: &str = "missed";
    /// The validator could not get the request body from the transfer agent (a dispute
    /// decides whether the transfer agent withheld it).
    pub const PAYLOAD_UNAVAILABLE: &str = "payload_unavailable";
    /// A dispute awaiting its committee.
    pub const OPEN: &str = "open";
    /// The committee found the executor's result wrong.
    pub const EXECUTOR_FAULTED: &str = "executor_faulted";
    /// The committee found the executor's result right.
    pub const EXECUTOR_UPHELD: &str = "executor_upheld";
    /// No majority (or no committee).
    pub const UNDECIDED: &str = "undecided";
    /// The committee could not get the request body either: the transfer agent withheld it.
    pub const PAYLOAD_WITHHELD: &str = "payload_withheld";
    /// Every dispute status.
    pub const DISPUTE_ALL: [&str; 5] = [
        OPEN,
        EXECUTOR_FAULTED,
        EXECUTOR_UPHELD,
        UNDECIDED,
        PAYLOAD_WITHHELD,
    ];
}

/// Kinds of disputes.
pub mod kind {
    /// Opened by a validator whose result differed.
    pub const VALIDATION: &str = "validation";
    /// Opened by the record's requester with a deposit.
    pub const USER: &str = "user";
    /// Opened by a validator the transfer agent did not serve the request body.
    pub const PAYLOAD: &str = "payload";
    /// The output of a record with a committed validation was never revealed: settled at
    /// once against the transfer agent (no committee: the chain saw it).
    pub const REVEAL: &str = "reveal";
}

/// The disputes module.
#[derive(Debug, Default, Clone, Copy)]
pub struct Disputes;

impl Module for Disputes {
    fn decode_msg(&self, msg: &Any) -> Option<Result<Box<dyn Msg>>> {
        msgs::decode(msg)
    }

    fn begin_block(&self, ctx: &BlockContext, state: &mut dyn StateWrite) -> Result<()> {
        hooks::begin_block(ctx, state)
    }

    fn query(&self, path: &str, data: &[u8], state: &dyn StateRead) -> Option<Result<Vec<u8>>> {
        query::route(path, data, state)
    }
}
