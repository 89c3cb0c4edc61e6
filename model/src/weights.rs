//! Weights of the reference model, drawn from a seed.

use super::fixed::ONE;
use super::{D_MLP, D_MODEL, N_LAYERS, VOCAB_SIZE};

/// SplitMix64: a tiny, well-known PRNG whose output is fully specified by integer operations.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform integer in `-bound..=bound`. The modulo bias (at most 2^-50 here) is irrelevant
    /// to a reference model and, being deterministic, harmless.
    pub fn symmetric(&mut self, bound: i32) -> i32 {
        let span = 2 * u64::from(bound.unsigned_abs()) + 1;
        (self.next_u64() % span) as i32 - bound
    }
}

/// A row-major matrix of fixed-point weights: `rows` inputs by `cols` outputs.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Number of input features.
    pub rows: usize,
    /// Number of output features.
    pub cols: usize,
    /// `rows * cols` weights; output `j` of input `i` is at `i * cols + j`.
    pub data: Vec<i32>,
}

impl Matrix {
    /// A `rows` by `cols` matrix with weights uniform in `±bound` (fixed point).
    fn random(rng: &mut SplitMix64, rows: usize, cols: usize, bound: i32) -> Self {
        let data = (0..rows * cols).map(|_| rng.symmetric(bound)).collect();
        Self { rows, cols, data }
    }
}

/// Weights of one transformer block.
#[derive(Debug, Clone)]
pub struct LayerWeights {
    /// Query projection, `D_MODEL x D_MODEL`.
    pub wq: Matrix,
    /// Key projection, `D_MODEL x D_MODEL`.
    pub wk: Matrix,
    /// Value projection, `D_MODEL x D_MODEL`.
    pub wv: Matrix,
    /// Attention output projection, `D_MODEL x D_MODEL`.
    pub wo: Matrix,
    /// MLP up projection, `D_MODEL x D_MLP`.
    pub w_up: Matrix,
    /// MLP down projection, `D_MLP x D_MODEL`.
    pub w_down: Matrix,
}

/// All weights of the reference model.
#[derive(Debug, Clone)]
pub struct Weights {
    /// Token embeddings, `VOCAB_SIZE x D_MODEL`.
    pub embedding: Matrix,
    /// The transformer blocks, in order.
    pub layers: Vec<LayerWeights>,
    /// Output projection to logits, `D_MODEL x VOCAB_SIZE`.
    pub unembedding: Matrix,
}

impl Weights {
    /// Draws every weight from `seed`, in a fixed order (embedding, then each layer's
    /// q, k, v, o, up, down, then the unembedding).
    ///
    /// Bounds are about `ONE * sqrt(3 / fan_in)` (uniform with unit-ish output variance), written
    /// as integers so no float is involved: with `ONE = 256`, fan-in 64 gives 55 and fan-in 128
    /// gives 39. Attention's value/output bounds are larger so the prompt visibly steers the
    /// reply instead of the last token alone.
    pub fn generate(seed: u64) -> Self {
        let mut rng = SplitMix64::new(seed);
        let embedding = Matrix::random(&mut rng, VOCAB_SIZE, D_MODEL, ONE);
        let layers = (0..N_LAYERS)
            .map(|_| LayerWeights {
                wq: Matrix::random(&mut rng, D_MODEL, D_MODEL, 55),
                wk: Matrix::random(&mut rng, D_MODEL, D_MODEL, 55),
                wv: Matrix::random(&mut rng, D_MODEL, D_MODEL, 80),
                wo: Matrix::random(&mut rng, D_MODEL, D_MODEL, 80),
                w_up: Matrix::random(&mut rng, D_MODEL, D_MLP, 55),
                w_down: Matrix::random(&mut rng, D_MLP, D_MODEL, 39),
            })
            .collect();
        let unembedding = Matrix::random(&mut rng, D_MODEL, VOCAB_SIZE, 55);
        Self {
            embedding,
            layers,
            unembedding,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_reference_values() {
        // First outputs of SplitMix64 from seed 0, as published with the algorithm.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn symmetric_stays_in_bounds() {
        let mut rng = SplitMix64::new(7);
        for _ in 0..10_000 {
            let v = rng.symmetric(5);
            assert!((-5..=5).contains(&v));
        }
    }
}
