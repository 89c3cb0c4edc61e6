//! The trained parameters as plain `f32` data, their canonical byte form and hashes.
//!
//! Weights, pseudo-gradients, the outer momentum buffer and each AdamW moment are all one
//! [`ParamSet`]: one `f32` per model parameter, held as the model's named tensors in canonical
//! (name) order. Everything the chain hashes and peers exchange goes through [`ParamSet::to_bytes`],
//! whose format is documented on [`crate::format`].

use gonka_model::{D_MLP, D_MODEL, N_LAYERS, VOCAB_SIZE};
use sha2::{Digest, Sha256};

use crate::format::{self, Reader};
use crate::{Hash, TrainerError};

/// Name and shape (`[rows, cols]`, row-major, rows are inputs) of one parameter tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSpec {
    /// `embedding`, `layers.{i}.{wq,wk,wv,wo,w_up,w_down}` or `unembedding`.
    pub name: String,
    /// `[rows, cols]`, the layout of [`gonka_model::weights::Matrix`].
    pub shape: [usize; 2],
}

impl ParamSpec {
    /// Number of values in the tensor.
    pub fn len(&self) -> usize {
        self.shape[0] * self.shape[1]
    }

    /// Whether the tensor holds no values (never, for this model).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The model's parameter tensors in canonical order: ascending by the bytes of their names.
pub fn param_specs() -> Vec<ParamSpec> {
    let spec = |name: String, rows, cols| ParamSpec {
        name,
        shape: [rows, cols],
    };
    let mut specs = vec![
        spec("embedding".into(), VOCAB_SIZE, D_MODEL),
        spec("unembedding".into(), D_MODEL, VOCAB_SIZE),
    ];
    for layer in 0..N_LAYERS {
        for (name, rows, cols) in [
            ("wq", D_MODEL, D_MODEL),
            ("wk", D_MODEL, D_MODEL),
            ("wv", D_MODEL, D_MODEL),
            ("wo", D_MODEL, D_MODEL),
            ("w_up", D_MODEL, D_MLP),
            ("w_down", D_MLP, D_MODEL),
        ] {
            specs.push(spec(format!("layers.{layer}.{name}"), rows, cols));
        }
    }
    specs.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    specs
}

/// Total number of trained parameters (98,432).
pub fn param_count() -> usize {
    param_specs().iter().map(ParamSpec::len).sum()
}

/// What a [`ParamSet`] blob holds; the kind byte of its header, so a hash of weights can never
/// equal a hash of a pseudo-gradient with the same values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// Model weights (a worker's end-of-round weights, or the agreed global weights).
    Weights,
    /// A pseudo-gradient `start - end` of one round, or the average of several.
    PseudoGradient,
    /// The outer Nesterov momentum buffer.
    OuterMomentum,
}

impl ParamKind {
    /// The kind byte in the blob header (see [`crate::format`]).
    pub fn byte(self) -> u8 {
        match self {
            Self::Weights => format::KIND_WEIGHTS,
            Self::PseudoGradient => format::KIND_PSEUDO_GRADIENT,
            Self::OuterMomentum => format::KIND_OUTER_MOMENTUM,
        }
    }
}

/// One `f32` per model parameter, grouped as the tensors of [`param_specs`] in that order.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamSet {
    tensors: Vec<Vec<f32>>,
}

impl ParamSet {
    /// All zeros (the initial AdamW moments and outer momentum).
    pub fn zeros() -> Self {
        Self {
            tensors: param_specs().iter().map(|s| vec![0.0; s.len()]).collect(),
        }
    }

    /// A set from tensors given in [`param_specs`] order; each must have its spec's length.
    pub fn from_tensors(tensors: Vec<Vec<f32>>) -> Result<Self, TrainerError> {
        let specs = param_specs();
        if tensors.len() != specs.len() {
            return Err(TrainerError::Shape(format!(
                "expected {} tensors, found {}",
                specs.len(),
                tensors.len()
            )));
        }
        for (spec, t) in specs.iter().zip(&tensors) {
            if t.len() != spec.len() {
                return Err(TrainerError::Shape(format!(
                    "tensor {} must hold {} values, found {}",
                    spec.name,
                    spec.len(),
                    t.len()
                )));
            }
        }
        Ok(Self { tensors })
    }

    /// The tensors in [`param_specs`] order.
    pub fn tensors(&self) -> &[Vec<f32>] {
        &self.tensors
    }

    /// The tensor called `name`, if the model has one.
    pub fn tensor(&self, name: &str) -> Option<&[f32]> {
        let index = param_specs().iter().position(|s| s.name == name)?;
        Some(&self.tensors[index])
    }

    /// All values, tensor after tensor.
    pub fn values(&self) -> impl Iterator<Item = f32> + '_ {
        self.tensors.iter().flatten().copied()
    }

    /// Elementwise `self - other` (a pseudo-gradient is `start - end`). IEEE `f32` subtraction,
    /// so the result is the same bits on every machine.
    pub fn sub(&self, other: &Self) -> Self {
        self.zip_map(other, |a, b| a - b)
    }

    /// Elementwise `f(value)`.
    pub fn map(&self, f: impl Fn(f32) -> f32) -> Self {
        let tensors = self
            .tensors
            .iter()
            .map(|t| t.iter().map(|&v| f(v)).collect())
            .collect();
        Self { tensors }
    }

    /// Elementwise `f(self, other)`.
    pub(crate) fn zip_map(&self, other: &Self, f: impl Fn(f32, f32) -> f32) -> Self {
        let tensors = self
            .tensors
            .iter()
            .zip(&other.tensors)
            .map(|(a, b)| a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect())
            .collect();
        Self { tensors }
    }

    /// Euclidean norm of all values, accumulated in `f64`.
    pub fn l2_norm(&self) -> f64 {
        self.values()
            .map(|v| f64::from(v) * f64::from(v))
            .sum::<f64>()
            .sqrt()
    }

    /// Whether every value is finite.
    pub fn is_finite(&self) -> bool {
        self.values().all(f32::is_finite)
    }

    /// The canonical bytes of this set as a blob of `kind` (format on [`crate::format`]).
    pub fn to_bytes(&self, kind: ParamKind) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::blob_len());
        format::write_header(&mut out, kind.byte());
        self.write_body(&mut out, "");
        out
    }

    /// SHA-256 of [`Self::to_bytes`]: what the chain stores as H(weights) or H(pseudo-gradient).
    pub fn hash(&self, kind: ParamKind) -> Hash {
        Sha256::digest(self.to_bytes(kind)).into()
    }

    /// Parses a blob received from a peer. It must be exactly [`Self::blob_len`] bytes of the
    /// canonical form of `kind`: the model's tensors with their names and shapes in canonical
    /// order, finite values, nothing after. So `hash(from_bytes(b)) == sha256(b)` for every
    /// accepted `b`, and a peer cannot make the reader allocate more than one model's worth.
    pub fn from_bytes(kind: ParamKind, bytes: &[u8]) -> Result<Self, TrainerError> {
        if bytes.len() != Self::blob_len() {
            return Err(TrainerError::Malformed(format!(
                "a parameter blob is {} bytes, found {}",
                Self::blob_len(),
                bytes.len()
            )));
        }
        let mut reader = Reader::new(bytes);
        reader.header(kind.byte())?;
        let set = Self::read_body(&mut reader, "")?;
        reader.finish()?;
        Ok(set)
    }

    /// Length of every parameter blob (header, names, shapes and 4 bytes per parameter).
    pub fn blob_len() -> usize {
        format::HEADER_LEN + Self::body_len("")
    }

    /// Bytes of the tensor list with names prefixed by `prefix`.
    pub(crate) fn body_len(prefix: &str) -> usize {
        4 + param_specs()
            .iter()
            .map(|s| 4 + prefix.len() + s.name.len() + 4 + 2 * 4 + 4 * s.len())
            .sum::<usize>()
    }

    /// Writes the tensor list (count, then each tensor) with names prefixed by `prefix`.
    pub(crate) fn write_body(&self, out: &mut Vec<u8>, prefix: &str) {
        let specs = param_specs();
        format::put_u32(out, specs.len());
        for (spec, values) in specs.iter().zip(&self.tensors) {
            write_tensor(out, prefix, spec, values);
        }
    }

    /// Appends only the tensors of this set to a list another writer counted (AdamW moments).
    pub(crate) fn write_tensors(&self, out: &mut Vec<u8>, prefix: &str) {
        for (spec, values) in param_specs().iter().zip(&self.tensors) {
            write_tensor(out, prefix, spec, values);
        }
    }

    /// Reads a tensor list written by [`Self::write_body`].
    pub(crate) fn read_body(reader: &mut Reader<'_>, prefix: &str) -> Result<Self, TrainerError> {
        let count = reader.u32()? as usize;
        let expected = param_specs().len();
        if count != expected {
            return Err(TrainerError::Malformed(format!(
                "expected {expected} tensors, found {count}"
            )));
        }
        Self::read_tensors(reader, prefix)
    }

    /// Reads the tensors written by [`Self::write_tensors`].
    pub(crate) fn read_tensors(
        reader: &mut Reader<'_>,
        prefix: &str,
    ) -> Result<Self, TrainerError> {
        let mut tensors = Vec::new();
        for spec in param_specs() {
            let name_len = reader.u32()? as usize;
            let name = reader.take(name_len)?;
            let expected = format!("{prefix}{}", spec.name);
            if name != expected.as_bytes() {
                return Err(TrainerError::Malformed(format!(
                    "expected tensor {expected}, found {}",
                    String::from_utf8_lossy(name)
                )));
            }
            let rank = reader.u32()?;
            let dims = [reader.u32()? as usize, reader.u32()? as usize];
            if rank != 2 || dims != spec.shape {
                return Err(TrainerError::Malformed(format!(
                    "tensor {expected} must have shape {:?}, found rank {rank} starting {dims:?}",
                    spec.shape
                )));
            }
            let data = reader.take(4 * spec.len())?;
            let values: Vec<f32> = data
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            if let Some(bad) = values.iter().position(|v| !v.is_finite()) {
                return Err(TrainerError::Malformed(format!(
                    "tensor {expected} holds a non-finite value at index {bad}"
                )));
            }
            tensors.push(values);
        }
        Ok(Self { tensors })
    }
}

fn write_tensor(out: &mut Vec<u8>, prefix: &str, spec: &ParamSpec, values: &[f32]) {
    format::put_u32(out, prefix.len() + spec.name.len());
    out.extend_from_slice(prefix.as_bytes());
    out.extend_from_slice(spec.name.as_bytes());
    format::put_u32(out, 2);
    format::put_u32(out, spec.shape[0]);
    format::put_u32(out, spec.shape[1]);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ParamSet {
        let tensors = param_specs()
            .iter()
            .enumerate()
            .map(|(t, s)| (0..s.len()).map(|i| (t * 7 + i) as f32 * 1e-3).collect())
            .collect();
        ParamSet::from_tensors(tensors).unwrap()
    }

    #[test]
    fn specs_are_sorted_and_counted() {
        let specs = param_specs();
        assert!(specs.windows(2).all(|w| w[0].name < w[1].name));
        assert_eq!(specs[0].name, "embedding");
        assert_eq!(specs.last().unwrap().name, "unembedding");
        assert_eq!(param_count(), 98_432);
        assert!(param_count() <= 1_000_000);
    }

    #[test]
    fn round_trip_and_hash_of_raw_bytes() {
        let set = sample();
        let bytes = set.to_bytes(ParamKind::Weights);
        assert_eq!(bytes.len(), ParamSet::blob_len());
        assert_eq!(&bytes[..6], b"GNKT\x01\x01");
        let back = ParamSet::from_bytes(ParamKind::Weights, &bytes).unwrap();
        assert_eq!(back, set);
        let raw: Hash = Sha256::digest(&bytes).into();
        assert_eq!(raw, set.hash(ParamKind::Weights));
        assert_ne!(
            set.hash(ParamKind::Weights),
            set.hash(ParamKind::PseudoGradient)
        );
    }

    #[test]
    fn malformed_blobs_are_rejected() {
        let set = sample();
        let bytes = set.to_bytes(ParamKind::PseudoGradient);
        // Wrong kind, truncated, extended, bad magic, bad shape, renamed tensor, NaN.
        assert!(ParamSet::from_bytes(ParamKind::Weights, &bytes).is_err());
        assert!(
            ParamSet::from_bytes(ParamKind::PseudoGradient, &bytes[..bytes.len() - 1]).is_err()
        );
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(ParamSet::from_bytes(ParamKind::PseudoGradient, &longer).is_err());
        let mut magic = bytes.clone();
        magic[0] = b'X';
        assert!(ParamSet::from_bytes(ParamKind::PseudoGradient, &magic).is_err());
        let name_at = format::HEADER_LEN + 4 + 4;
        let mut renamed = bytes.clone();
        renamed[name_at] = b'E';
        assert!(ParamSet::from_bytes(ParamKind::PseudoGradient, &renamed).is_err());
        let rows_at = name_at + "embedding".len() + 4;
        let mut reshaped = bytes.clone();
        reshaped[rows_at] ^= 1;
        assert!(ParamSet::from_bytes(ParamKind::PseudoGradient, &reshaped).is_err());
        let data_at = rows_at + 8;
        let mut nan = bytes.clone();
        nan[data_at..data_at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
        let err = ParamSet::from_bytes(ParamKind::PseudoGradient, &nan).unwrap_err();
        assert!(err.to_string().contains("non-finite"), "{err}");
        // A huge declared name length is an error, not an allocation.
        let mut huge = bytes;
        huge[name_at - 4..name_at].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(ParamSet::from_bytes(ParamKind::PseudoGradient, &huge).is_err());
    }

    #[test]
    fn wrong_lengths_are_rejected() {
        assert!(ParamSet::from_tensors(vec![]).is_err());
        let mut tensors = ParamSet::zeros().tensors().to_vec();
        tensors[3].pop();
        assert!(ParamSet::from_tensors(tensors).is_err());
    }
}
