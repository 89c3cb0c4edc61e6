//! Proof of learning: re-executing a committed round and comparing.

use crate::diloco::{inner_round, RoundTask};
use crate::params::{ParamKind, ParamSet};
use crate::{Hash, TrainerError};

/// What a worker commits on chain for one round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundCommitment {
    /// H(weights): the worker's end-of-round weights ([`ParamKind::Weights`]).
    pub weights_hash: Hash,
    /// H(optimizer state): the worker's end-of-round inner AdamW state.
    pub optimizer_state_hash: Hash,
    /// H(data indices) of the round.
    pub data_indices_hash: Hash,
    /// H(pseudo-gradient): `start - end` ([`ParamKind::PseudoGradient`]).
    pub pseudo_gradient_hash: Hash,
    /// Mean training loss of the round in micro-nats.
    pub loss_micro_nats: u64,
}

/// How far a re-execution may land from the claim and still count as honest, for when the
/// verifier's machine does not reproduce the worker's bits (another CPU or SIMD width).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// Largest accepted `|claimed_end − reexecuted_end| / |reexecuted_end − start|` (L2 norms
    /// over all parameters).
    pub max_relative_distance: f64,
    /// Largest accepted difference of the round's mean loss.
    pub max_loss_difference_micro_nats: u64,
}

impl Default for Tolerance {
    /// 0.01 relative distance and 0.01 nats.
    ///
    /// Measured (bench `diloco`, from a half-trained start, one-ulp nudge of every start
    /// weight as a stand-in for another CPU's float kernels): honest distance 7e-6 after 10
    /// inner steps, 3e-6 after 50, 3e-3 after 100, but 0.18 after 250 and 0.27 after 500, as
    /// training amplifies tiny differences; skipping the last 10% of the steps gives 0.14 to
    /// 0.29 at every length, stale weights 1.0. So a distance verdict separates honest from
    /// cheating rounds only for rounds of up to about 100 inner steps. For longer rounds only
    /// a bit-exact re-execution ([`Verdict::bit_exact`], a verifier on the same kind of CPU)
    /// is conclusive; a non-bit-exact one beyond that length says nothing either way.
    fn default() -> Self {
        Self {
            max_relative_distance: 0.01,
            max_loss_difference_micro_nats: 10_000,
        }
    }
}

/// The outcome of [`verify_round`], with the reason for a rejection readable from its fields.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// The committed data indices are the ones the job assigns (the verifier's task).
    pub data_indices_match: bool,
    /// The end weights the worker handed over hash to the committed H(weights).
    pub claimed_weights_match_commitment: bool,
    /// `start − claimed end` hashes to the committed H(pseudo-gradient): the pseudo-gradient
    /// the worker sent its peers is the one its weights imply.
    pub pseudo_gradient_consistent: bool,
    /// The re-execution reproduced every committed hash and the loss exactly.
    pub bit_exact: bool,
    /// `|claimed_end − reexecuted_end| / |reexecuted_end − start|` (0 when bit-exact).
    pub relative_distance: f64,
    /// `|claimed loss − re-executed loss|`.
    pub loss_difference_micro_nats: u64,
    /// Whether the round is accepted: the three consistency checks hold, and the
    /// re-execution is bit-exact or within the tolerance.
    pub accepted: bool,
    /// What the re-execution itself commits to (the verifier's own hashes).
    pub reexecuted: RoundCommitment,
}

/// Re-executes a claimed round from the agreed start weights and the worker's start optimizer
/// state (the caller checks that its hash is the worker's previous commitment) on the data
/// indices the job assigns, and compares with the commitment and with the end weights the
/// worker handed over.
pub fn verify_round(
    task: &RoundTask<'_>,
    commitment: &RoundCommitment,
    claimed_end_weights: &ParamSet,
    tolerance: &Tolerance,
) -> Result<Verdict, TrainerError> {
    let redone = inner_round(task)?;
    let data_indices_match = task.indices.hash() == commitment.data_indices_hash;
    let claimed_weights_match_commitment =
        claimed_end_weights.hash(ParamKind::Weights) == commitment.weights_hash;
    let pseudo_gradient_consistent = task
        .weights
        .sub(claimed_end_weights)
        .hash(ParamKind::PseudoGradient)
        == commitment.pseudo_gradient_hash;
    let bit_exact = redone.commitment() == *commitment;
    let relative_distance = relative_distance(
        claimed_end_weights,
        &redone.end_weights,
        &redone.pseudo_gradient,
    );
    let loss_difference_micro_nats = redone.loss_micro_nats.abs_diff(commitment.loss_micro_nats);
    let close = relative_distance <= tolerance.max_relative_distance
        && loss_difference_micro_nats <= tolerance.max_loss_difference_micro_nats;
    Ok(Verdict {
        data_indices_match,
        claimed_weights_match_commitment,
        pseudo_gradient_consistent,
        bit_exact,
        relative_distance,
        loss_difference_micro_nats,
        accepted: data_indices_match
            && claimed_weights_match_commitment
            && pseudo_gradient_consistent
            && (bit_exact || close),
        reexecuted: redone.commitment(),
    })
}

/// `|claimed − reference| / |update|` in `f64`; 0 when both are zero, infinite when only the
/// update is.
pub fn relative_distance(claimed: &ParamSet, reference: &ParamSet, update: &ParamSet) -> f64 {
    let diff = claimed.sub(reference).l2_norm();
    let scale = update.l2_norm();
    if diff == 0.0 {
        0.0
    } else if scale == 0.0 {
        f64::INFINITY
    } else {
        diff / scale
    }
}
