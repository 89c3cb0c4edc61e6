//! Between the trainer's `f32` weights and the reference runtime's fixed-point weights.
//!
//! Training starts from the reference model of a seed (its fixed-point weights read as `f32`,
//! exactly), and a trained checkpoint is served by `gonka_model::ReferenceModel` after
//! rounding every weight to the reference's [`FRAC_BITS`] fractional bits.

use gonka_model::fixed::{FRAC_BITS, MAX_BLOCK_WEIGHT, RESIDUAL_LIMIT};
use gonka_model::weights::{LayerWeights, Matrix, Weights};
use gonka_model::ReferenceModel;

use crate::params::{param_specs, ParamSet};

/// Fixed-point scale: `2^FRAC_BITS`.
const SCALE: f32 = (1u32 << FRAC_BITS) as f32;

/// The `f32` weights of the reference model's fixed-point weights (exact: every `i32` weight
/// of the reference is far below 2^24).
pub fn from_reference(weights: &Weights) -> ParamSet {
    let mut by_name: Vec<(String, &Matrix)> = vec![
        ("embedding".into(), &weights.embedding),
        ("unembedding".into(), &weights.unembedding),
    ];
    for (l, layer) in weights.layers.iter().enumerate() {
        by_name.extend([
            (format!("layers.{l}.wq"), &layer.wq),
            (format!("layers.{l}.wk"), &layer.wk),
            (format!("layers.{l}.wv"), &layer.wv),
            (format!("layers.{l}.wo"), &layer.wo),
            (format!("layers.{l}.w_up"), &layer.w_up),
            (format!("layers.{l}.w_down"), &layer.w_down),
        ]);
    }
    let tensors = param_specs()
        .iter()
        .map(|spec| {
            let (_, m) = by_name
                .iter()
                .find(|(name, _)| *name == spec.name)
                .expect("the reference model has every trained tensor");
            m.data.iter().map(|&v| v as f32 / SCALE).collect()
        })
        .collect();
    ParamSet::from_tensors(tensors).expect("reference shapes are the trained shapes")
}

/// The initial weights of a training job: the reference model of `init_seed`.
pub fn initial_weights(init_seed: u64) -> ParamSet {
    from_reference(&Weights::generate(init_seed))
}

/// A checkpoint in the reference runtime's fixed point.
#[derive(Debug, Clone)]
pub struct Export {
    /// The weights, ready for `ReferenceModel::from_weights`.
    pub weights: Weights,
    /// How many weights were clamped (to [`MAX_BLOCK_WEIGHT`] in the blocks, to the residual
    /// limit elsewhere); zero for checkpoints [`crate::inner_round`] produced.
    pub clamped: usize,
}

/// Rounds every weight to the nearest fixed-point value (`f32::round`: ties away from zero),
/// clamped as [`Export::clamped`] says.
pub fn to_reference(weights: &ParamSet) -> Export {
    let mut clamped = 0;
    let mut matrix = |name: &str| -> Matrix {
        let spec = param_specs()
            .into_iter()
            .find(|s| s.name == name)
            .expect("known tensor");
        let bound = if name.starts_with("layers.") {
            MAX_BLOCK_WEIGHT
        } else {
            RESIDUAL_LIMIT
        };
        let data = weights
            .tensor(name)
            .expect("known tensor")
            .iter()
            .map(|&v| {
                // `as` saturates, and the clamp below bounds the result anyway.
                let fixed = (v * SCALE).round() as i32;
                if fixed.abs() > bound {
                    clamped += 1;
                }
                fixed.clamp(-bound, bound)
            })
            .collect();
        Matrix {
            rows: spec.shape[0],
            cols: spec.shape[1],
            data,
        }
    };
    let embedding = matrix("embedding");
    let layers = (0..gonka_model::N_LAYERS)
        .map(|l| LayerWeights {
            wq: matrix(&format!("layers.{l}.wq")),
            wk: matrix(&format!("layers.{l}.wk")),
            wv: matrix(&format!("layers.{l}.wv")),
            wo: matrix(&format!("layers.{l}.wo")),
            w_up: matrix(&format!("layers.{l}.w_up")),
            w_down: matrix(&format!("layers.{l}.w_down")),
        })
        .collect();
    let unembedding = matrix("unembedding");
    Export {
        weights: Weights {
            embedding,
            layers,
            unembedding,
        },
        clamped,
    }
}

/// The reference model serving `weights` (exported with [`to_reference`]); `init_seed` is the
/// seed training started from, what `ReferenceModel::seed` reports.
pub fn reference_model(init_seed: u64, weights: &ParamSet) -> ReferenceModel {
    ReferenceModel::from_weights(init_seed, to_reference(weights).weights)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gonka_model::DEFAULT_SEED;

    #[test]
    fn reference_weights_round_trip_exactly() {
        let reference = Weights::generate(DEFAULT_SEED);
        let set = from_reference(&reference);
        let back = to_reference(&set);
        assert_eq!(back.clamped, 0);
        assert_eq!(back.weights.embedding.data, reference.embedding.data);
        assert_eq!(back.weights.unembedding.data, reference.unembedding.data);
        for (a, b) in back.weights.layers.iter().zip(&reference.layers) {
            assert_eq!(a.wq.data, b.wq.data);
            assert_eq!(a.w_down.data, b.w_down.data);
        }
        // So the exported untrained model is the reference model itself.
        let model = reference_model(DEFAULT_SEED, &set);
        let prompt: Vec<u32> = b"Hello".iter().map(|&b| u32::from(b)).collect();
        assert_eq!(
            model.generate(&prompt, 16),
            ReferenceModel::new(DEFAULT_SEED).generate(&prompt, 16)
        );
    }

    #[test]
    fn large_block_weights_are_clamped() {
        let big = ParamSet::zeros().map(|_| 2.0);
        let export = to_reference(&big);
        let block: usize = param_specs()
            .iter()
            .filter(|s| s.name.starts_with("layers."))
            .map(|s| s.len())
            .sum();
        assert_eq!(export.clamped, block);
        assert!(export.weights.layers[0]
            .wq
            .data
            .iter()
            .all(|&v| v == MAX_BLOCK_WEIGHT));
        assert!(export.weights.embedding.data.iter().all(|&v| v == 512));
    }
}
