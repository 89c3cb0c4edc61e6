//! The canonical byte form of everything the chain hashes and peers exchange.
//!
//! The chain stores SHA-256 digests of these bytes (H(weights), H(optimizer state), H(data
//! indices), H(pseudo-gradient)), so this format is consensus-relevant: a change is a new
//! [`VERSION`]. Every integer is little-endian; every `f32` is its IEEE-754 bits, little-endian.
//!
//! ```text
//! header      "GNKT" (4 bytes) | version u8 = 1 | kind u8
//! kind        1 weights, 2 pseudo-gradient, 3 optimizer state, 4 data indices, 5 outer momentum
//!
//! tensor      name_len u32 | name (ASCII) | rank u32 (= 2) | rows u32 | cols u32
//!             | rows·cols values f32, row-major (row = input feature, as gonka-model's Matrix)
//! tensor list count u32 | `count` tensors in ascending byte order of their names
//!
//! kinds 1, 2, 5    header | tensor list of the model's 14 tensors:
//!                  embedding [257, 64], layers.{0,1}.{w_down [128, 64], w_up [64, 128],
//!                  wk, wo, wq, wv [64, 64]}, unembedding [64, 257]
//! kind 3           header | adamw_step u64 | tensor list of 28 tensors: "m/<name>" (first
//!                  moments) for every model tensor, then "v/<name>" (second moments)
//! kind 4           header | steps u32 | batch_size u32 | seq_len u32
//!                  | steps·batch_size offsets u32, step-major (step 0's batch first)
//! ```
//!
//! Decoding accepts only this canonical form (exact length, the model's names and shapes in
//! order, finite values, no trailing bytes), so the hash of any accepted blob is the SHA-256 of
//! the bytes as received.

use crate::TrainerError;

/// The four bytes every blob starts with.
pub const MAGIC: [u8; 4] = *b"GNKT";
/// Version of this format.
pub const VERSION: u8 = 1;
/// Bytes of the header (magic, version, kind).
pub const HEADER_LEN: usize = 6;
/// Kind byte of model weights.
pub const KIND_WEIGHTS: u8 = 1;
/// Kind byte of a pseudo-gradient.
pub const KIND_PSEUDO_GRADIENT: u8 = 2;
/// Kind byte of an inner AdamW state.
pub const KIND_OPTIMIZER_STATE: u8 = 3;
/// Kind byte of a round's data indices.
pub const KIND_DATA_INDICES: u8 = 4;
/// Kind byte of the outer momentum buffer.
pub const KIND_OUTER_MOMENTUM: u8 = 5;
/// No blob of this format is larger (the optimizer state, about 788 KB, is the largest): a
/// bound for HTTP bodies.
pub const MAX_BLOB_BYTES: usize = 1 << 20;

pub(crate) fn write_header(out: &mut Vec<u8>, kind: u8) {
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind);
}

/// Appends `v` as a little-endian `u32`. Every length written here is far below `u32::MAX`.
pub(crate) fn put_u32(out: &mut Vec<u8>, v: usize) {
    let v = u32::try_from(v).expect("lengths of this format fit u32");
    out.extend_from_slice(&v.to_le_bytes());
}

/// A bounds-checked cursor over an untrusted blob.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// The next `n` bytes, or an error if fewer remain.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], TrainerError> {
        let remaining = self.bytes.len() - self.at;
        if n > remaining {
            return Err(TrainerError::Malformed(format!(
                "needed {n} more bytes at offset {}, only {remaining} remain",
                self.at
            )));
        }
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, TrainerError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, TrainerError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Checks magic, version and kind.
    pub(crate) fn header(&mut self, kind: u8) -> Result<(), TrainerError> {
        let h = self.take(HEADER_LEN)?;
        if h[..4] != MAGIC || h[4] != VERSION {
            return Err(TrainerError::Malformed(format!(
                "expected a GNKT version {VERSION} blob, found header {:02x?}",
                &h[..5]
            )));
        }
        if h[5] != kind {
            return Err(TrainerError::Malformed(format!(
                "expected a blob of kind {kind}, found kind {}",
                h[5]
            )));
        }
        Ok(())
    }

    /// Fails if bytes remain.
    pub(crate) fn finish(self) -> Result<(), TrainerError> {
        let extra = self.bytes.len() - self.at;
        if extra > 0 {
            return Err(TrainerError::Malformed(format!(
                "{extra} unexpected bytes after the blob"
            )));
        }
        Ok(())
    }
}
