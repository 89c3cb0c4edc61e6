//! gonka-trainer: DiLoCo training of the reference model's architecture, with the hashes and
//! checks of proof of learning.
//!
//! The compute core of training jobs (x/pol): a worker runs [`inner_round`]s of AdamW on its
//! [`JobSpec::data_indices`], commits the [`RoundCommitment`] of each ([`RoundOutput::commitment`]:
//! H(weights), H(optimizer state), H(data indices), H(pseudo-gradient), loss), exchanges
//! pseudo-gradients with its peers as [`ParamSet::to_bytes`] blobs, and applies
//! [`outer_step`] to their [`average`]. A verifier re-executes a sampled round with
//! [`verify_round`]. A trained checkpoint is served by the reference runtime through
//! [`to_reference`] / [`reference_model`].
//!
//! # The model
//! The architecture of `gonka_model::ReferenceModel` (byte vocabulary of 257, width 64, 4
//! heads, MLP width 128, 2 blocks, no biases, RMS norms without gain, ALiBi distances), built
//! in candle (`f32`, CPU) with candle-nn's `VarMap`/`VarBuilder` and autograd; 98,432
//! parameters; trained on sequences of [`SEQ_LEN`] bytes of a generated [`Corpus`].
//!
//! # Determinism (measured with candle 0.11.1 on x86-64: `tests/determinism.rs`, bench `diloco`)
//! - Everything but the inner steps is plain integer or `f32` code in a fixed order: data
//!   indices, hashes, [`average`] and [`outer_step`] give the same bits on every machine.
//! - An inner round is bit-exact across runs and across candle's thread counts
//!   (`RAYON_NUM_THREADS=1` or `2`, which candle reads at every matmul) on one machine:
//!   candle's CPU matmul (the `gemm` crate) splits work across threads by output blocks and
//!   never splits a dot product, and its row-wise softmax and reductions are per row.
//! - It is *not* promised bit-exact across CPUs: `gemm` picks its SIMD kernel (AVX2, AVX-512,
//!   FMA or not) and its depth blocking from the CPU and its cache sizes at run time, which
//!   changes the order and fusion of float sums. [`verify_round`] therefore compares hashes
//!   first and otherwise accepts a relative L2 distance of the end weights below
//!   [`Tolerance::max_relative_distance`] (the Proof-of-Learning rule). Training amplifies
//!   float noise: a one-ulp difference of the start grows to a relative distance of about 3e-6
//!   after 50 inner steps, 3e-3 after 100 and 0.27 after 500, when skipping 10% of the steps
//!   gives 0.14 to 0.29. So the distance rule is conclusive for rounds of up to ~100 steps;
//!   longer rounds need a bit-exact verifier (same CPU kind) or intermediate checkpoints
//!   every ≤ 50 steps (not implemented; see [`Tolerance`]).
//!
//! # Inner optimizer state
//! DiLoCo keeps each worker's inner AdamW state across rounds; so does this crate
//! ([`OptimizerState`] is an input and output of every round, and its hash is committed).
//! `candle_nn::AdamW` hides its state, so the rounds use [`optim`]'s copy of its update, which
//! a test keeps bit-identical to it.

#[cfg(feature = "testing")]
pub mod cheat;
pub mod data;
pub mod diloco;
pub mod export;
pub mod format;
mod net;
pub mod optim;
pub mod params;
pub mod role;
pub mod verify;

pub use candle_nn::ParamsAdamW;
pub use data::{Corpus, DataIndices, Shard, SEQ_LEN};
pub use diloco::{
    average, default_inner_params, evaluate_loss, inner_round, logits, outer_step, DataParallel,
    JobSpec, OuterParams, RoundOutput, RoundTask,
};
pub use export::{initial_weights, reference_model, to_reference, Export};
pub use optim::OptimizerState;
pub use params::{param_count, ParamKind, ParamSet};
pub use verify::{verify_round, RoundCommitment, Tolerance, Verdict};

/// A SHA-256 digest.
pub type Hash = [u8; 32];

/// The seed of the weights training starts from unless a job says otherwise: the reference
/// model the localnet serves.
pub const DEFAULT_INIT_SEED: u64 = gonka_model::DEFAULT_SEED;

/// Errors of training, verification and decoding.
#[derive(Debug, thiserror::Error)]
pub enum TrainerError {
    /// A candle operation failed (a shape bug, never data-dependent).
    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),
    /// A blob from a peer is not in canonical form.
    #[error("malformed blob: {0}")]
    Malformed(String),
    /// Tensors or indices of the wrong size.
    #[error("shape: {0}")]
    Shape(String),
    /// A job's parameters are out of range.
    #[error("invalid job: {0}")]
    InvalidJob(String),
    /// Training produced a non-finite loss or weight.
    #[error("training diverged: {0}")]
    Diverged(String),
}
