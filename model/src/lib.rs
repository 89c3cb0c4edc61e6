//! gonka-model: the deterministic reference model and its tokenizer.
//!
//! A small decoder-only transformer that runs on the CPU, needs no downloads, and produces the
//! same tokens for the same prompt on every machine. It is what tests and the localnet serve
//! behind the ML node's OpenAI-compatible API (`gonka-node`'s built-in backend), and what
//! training will share; it says nothing sensible, but it says it reproducibly, which is what
//! validation of inference needs. It depends on nothing but `std`.
//!
//! # Architecture
//! - Byte-level tokenizer ([`tokenizer`]): tokens `0..=255` are bytes, [`END_TOKEN`] (256) ends a
//!   completion. Prompt tokens are the bytes of the chat-formatted prompt.
//! - [`N_LAYERS`] pre-norm blocks of width [`D_MODEL`], each with [`N_HEADS`]-head causal
//!   self-attention and a ReLU MLP of width [`D_MLP`]; RMS norm before each sub-block and before
//!   the output projection.
//! - Positions enter through an ALiBi-style linear distance penalty on the attention scores (no
//!   position table), so attention over the last [`CONTEXT`] positions slides naturally with a
//!   key/value cache of fixed size. Only the last [`CONTEXT`] prompt tokens are read.
//! - Weights are drawn from a fixed seed by SplitMix64 ([`weights`]).
//! - Greedy decoding: the highest logit among the *allowed* output tokens (printable ASCII
//!   `0x20..=0x7E`, `\n`, and [`END_TOKEN`]) wins; ties go to the lowest token id. Restricting
//!   the output alphabet this way means every completion is valid UTF-8 (it is ASCII), and any
//!   split of it into streamed chunks concatenates back to exactly the batch text.
//!
//! # Determinism
//! The forward pass uses only integer arithmetic ([`fixed`]): activations and weights are
//! fixed-point `i32` with [`fixed::FRAC_BITS`] fractional bits, products are accumulated in
//! `i64`, and every rescale and division rounds in a stated direction. There is no `f32`/`f64`,
//! no hash-ordered iteration, no threading inside a forward pass, and no platform-dependent
//! intrinsic, so the same prompt yields bit-identical logits, hence identical tokens, on every
//! CPU, compiler and optimisation level. (Integer overflow would differ between debug and
//! release builds, which is why every accumulator is `i64` with bounds argued in [`fixed`].)
//! The crate keeps the workspace's state-machine lints (`clippy.toml`: no hash-ordered
//! collections, no wall clock).

pub mod fixed;
pub mod model;
pub mod tokenizer;
pub mod weights;

pub use model::{Generation, ReferenceModel};
pub use tokenizer::{decode, encode_chat, ChatTurn, END_TOKEN, VOCAB_SIZE};

/// Width of the residual stream.
pub const D_MODEL: usize = 64;
/// Attention heads per layer.
pub const N_HEADS: usize = 4;
/// Width of one attention head.
pub const HEAD_DIM: usize = D_MODEL / N_HEADS;
/// Hidden width of each MLP.
pub const D_MLP: usize = 128;
/// Number of transformer blocks.
pub const N_LAYERS: usize = 2;
/// Attention window: how many past positions (including the current one) each token sees.
pub const CONTEXT: usize = 256;
/// The seed of the weights the localnet and the tests use.
pub const DEFAULT_SEED: u64 = 0x676f_6e6b_6172_6566; // "gonkaref"
