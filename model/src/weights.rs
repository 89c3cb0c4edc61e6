//! Weights of the reference model, drawn from a seed.

use super::fixed::{MAX_BLOCK_WEIGHT, ONE, RESIDUAL_LIMIT};
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

/// First bytes of a serialized [`Weights`] file: magic and format version 1.
pub const WEIGHTS_MAGIC: &[u8; 8] = b"GNKW\x00\x00\x00\x01";

/// Length in bytes of every serialized [`Weights`] (the architecture is fixed).
pub const WEIGHTS_BYTES: usize = WEIGHTS_MAGIC.len() + 4 * weight_count();

/// How many weights the architecture has.
pub const fn weight_count() -> usize {
    2 * VOCAB_SIZE * D_MODEL + N_LAYERS * (4 * D_MODEL * D_MODEL + 2 * D_MODEL * D_MLP)
}

/// Why bytes are not a [`Weights`] file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WeightsError {
    /// Not [`WEIGHTS_BYTES`] long, or not starting with [`WEIGHTS_MAGIC`].
    Format(String),
    /// A weight beyond what the fixed-point arithmetic is proven safe for.
    OutOfRange(String),
}

impl std::fmt::Display for WeightsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Format(why) | Self::OutOfRange(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for WeightsError {}

impl Weights {
    /// The matrices in their fixed order (embedding, each layer's q, k, v, o, up, down, the
    /// unembedding), each with its name and the largest magnitude its weights may have.
    fn matrices(&self) -> Vec<(String, &Matrix, i32)> {
        let mut all = vec![("embedding".to_string(), &self.embedding, RESIDUAL_LIMIT)];
        for (l, layer) in self.layers.iter().enumerate() {
            for (name, m) in [
                ("wq", &layer.wq),
                ("wk", &layer.wk),
                ("wv", &layer.wv),
                ("wo", &layer.wo),
                ("w_up", &layer.w_up),
                ("w_down", &layer.w_down),
            ] {
                all.push((format!("layers.{l}.{name}"), m, MAX_BLOCK_WEIGHT));
            }
        }
        all.push(("unembedding".to_string(), &self.unembedding, RESIDUAL_LIMIT));
        all
    }

    /// The canonical serialization: [`WEIGHTS_MAGIC`], then every weight as `i32` little-endian,
    /// matrix by matrix in the order of [`Weights::generate`], row-major. What a trained model's
    /// SHA-256 in the chain's model table is taken over.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(WEIGHTS_BYTES);
        out.extend_from_slice(WEIGHTS_MAGIC);
        for (_, m, _) in self.matrices() {
            for v in &m.data {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        out
    }

    /// Reads [`Weights::to_bytes`]'s format, refusing any other length and any weight beyond
    /// the bounds the fixed-point arithmetic is proven safe for (so untrusted weights cannot
    /// overflow a forward pass).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WeightsError> {
        if bytes.len() != WEIGHTS_BYTES || !bytes.starts_with(WEIGHTS_MAGIC) {
            return Err(WeightsError::Format(format!(
                "a weights file is {WEIGHTS_BYTES} bytes starting with {:?}; found {} bytes",
                String::from_utf8_lossy(&WEIGHTS_MAGIC[..4]),
                bytes.len()
            )));
        }
        let mut values = bytes[WEIGHTS_MAGIC.len()..]
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        let mut next = |rows: usize, cols: usize| Matrix {
            rows,
            cols,
            data: values.by_ref().take(rows * cols).collect(),
        };
        let embedding = next(VOCAB_SIZE, D_MODEL);
        let layers = (0..N_LAYERS)
            .map(|_| LayerWeights {
                wq: next(D_MODEL, D_MODEL),
                wk: next(D_MODEL, D_MODEL),
                wv: next(D_MODEL, D_MODEL),
                wo: next(D_MODEL, D_MODEL),
                w_up: next(D_MODEL, D_MLP),
                w_down: next(D_MLP, D_MODEL),
            })
            .collect();
        let unembedding = next(D_MODEL, VOCAB_SIZE);
        let weights = Self {
            embedding,
            layers,
            unembedding,
        };
        for (name, m, bound) in weights.matrices() {
            if let Some(v) = m
                .data
                .iter()
                .find(|v| v.unsigned_abs() > bound.unsigned_abs())
            {
                return Err(WeightsError::OutOfRange(format!(
                    "{name} holds {v}, beyond the ±{bound} its arithmetic is safe for"
                )));
            }
        }
        Ok(weights)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_weights_read_back_identical_and_bad_files_are_refused() {
        let weights = Weights::generate(crate::DEFAULT_SEED);
        let bytes = weights.to_bytes();
        assert_eq!(bytes.len(), WEIGHTS_BYTES);
        let back = Weights::from_bytes(&bytes).unwrap();
        assert_eq!(back.to_bytes(), bytes);
        assert_eq!(back.layers[1].w_down.data, weights.layers[1].w_down.data);

        assert!(matches!(
            Weights::from_bytes(&bytes[..bytes.len() - 1]),
            Err(WeightsError::Format(_))
        ));
        let mut wrong_magic = bytes.clone();
        wrong_magic[0] = b'X';
        assert!(matches!(
            Weights::from_bytes(&wrong_magic),
            Err(WeightsError::Format(_))
        ));
        // The first weight of layer 0's wq set to MAX_BLOCK_WEIGHT + 1.
        let offset = WEIGHTS_MAGIC.len() + 4 * VOCAB_SIZE * D_MODEL;
        let mut too_big = bytes.clone();
        too_big[offset..offset + 4].copy_from_slice(&(MAX_BLOCK_WEIGHT + 1).to_le_bytes());
        let err = Weights::from_bytes(&too_big).unwrap_err();
        assert!(
            matches!(&err, WeightsError::OutOfRange(why) if why.contains("layers.0.wq")),
            "{err}"
        );
        let mut at_bound = bytes;
        at_bound[offset..offset + 4].copy_from_slice(&(-MAX_BLOCK_WEIGHT).to_le_bytes());
        assert_eq!(
            Weights::from_bytes(&at_bound).unwrap().layers[0].wq.data[0],
            -MAX_BLOCK_WEIGHT
        );
    }

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
