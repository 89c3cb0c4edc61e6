//! Work units of a verified training round, on the same scale as inference's.
//!
//! Inference credits one work unit per token it serves (prompt plus completion tokens of a
//! record), and each such token costs one forward pass of the served model. One trained token
//! costs a forward pass plus a backward pass; the backward pass computes two matrix products
//! per forward product (gradients with respect to activations and to weights), about twice
//! the forward's FLOPs. For this model a forward pass is about 0.2 MFLOP per token (2 FLOPs
//! per multiply-add over ~82k matrix weights, plus attention over a 64-byte sequence), and
//! the optimizer's per-step work (a few operations per parameter, amortised over the
//! step's batch of at least 64 tokens) is under 1% of that. So a trained token is worth
//! [`UNITS_PER_TRAINED_TOKEN`] inference tokens of the same model.

use crate::data::SEQ_LEN;

/// Work units per trained token: forward (1) plus backward (2).
pub const UNITS_PER_TRAINED_TOKEN: u64 = 3;

/// Work units of one verified round of a worker: tokens trained (`inner_steps · batch_size ·
/// SEQ_LEN`) times [`UNITS_PER_TRAINED_TOKEN`]. Only the job's parameters enter, so the chain
/// computes it without the round's data. (H = 500, batch 8: 768,000 units.)
pub fn round_work_units(inner_steps: u32, batch_size: u32) -> u64 {
    // Saturates rather than wraps for absurd parameters (a job validates far below that).
    (u64::from(inner_steps) * u64::from(batch_size))
        .saturating_mul(SEQ_LEN as u64 * UNITS_PER_TRAINED_TOKEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_count_tokens_three_times() {
        assert_eq!(round_work_units(500, 8), 768_000);
        assert_eq!(round_work_units(u32::MAX, u32::MAX), u64::MAX);
    }
}
