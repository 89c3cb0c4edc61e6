//! The runtime's own weight-matrix kernel: f32 activations times 8-bit block weights.
//!
//! Each weight row stays as the file stores it, in blocks of 32: Q4_1 as 16 bytes of nibbles
//! with an f16 scale and minimum, Q8_0 as 32 signed bytes with an f16 scale. The model computes
//! with the file's exact weights (no requantized copy) and streams as few bytes per token as
//! llama.cpp. Activations stay f32 (no int8 rounding of them, which turns last-bit differences
//! into ~0.1 changes of a log-probability).
//!
//! One definition of the arithmetic — per block, 8 lanes of fused multiply-adds in a fixed
//! order, the block scaled into 8 lane accumulators (Q4_1's minimum times the block's lane sums
//! of x added there too), the lanes summed in a fixed tree — is run
//! by an AVX2+FMA+F16C version picked at run time and by a scalar version (`f32::mul_add`)
//! with the same operations in the same order. Both give bit-identical results, whatever the CPU, the
//! thread count, or how many rows are multiplied together: a row computed alone in decode
//! equals the same row of a validator's teacher-forced pass.

use candle_core::quantized::{GgmlDType, QTensor};

use crate::Error;

const BLOCK: usize = 32;
/// Rows of activations multiplied per pass over a weight row (the weights are converted once
/// for all of them).
const ROW_TILE: usize = 4;
/// Columns per work item of the thread pool.
const COLS_PER_ITEM: usize = 8;

/// The quantized weights of a matrix, as the file stores them.
enum Quants {
    /// Q4_1: 16 bytes per block, element j in the low nibble of byte j, element j + 16 in its
    /// high nibble (0..=15).
    Nibbles(Vec<u8>),
    /// Q8_0: 32 signed bytes per block.
    Bytes(Vec<i8>),
}

/// A weight matrix `[n][k]` in blocks of 32: w = d * q (+ m for Q4_1).
pub(crate) struct QMatrix {
    n: usize,
    k: usize,
    qs: Quants,
    /// One f16 scale per block, `n * k / 32` (kept as f16: the file's value, half the bytes
    /// to stream per token).
    d: Vec<u16>,
    /// One f16 minimum per block (Q4_1).
    m: Option<Vec<u16>>,
}

pub(crate) fn f16_bits_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalise.
            let mut e = 127 - 15 + 1;
            let mut f = frac;
            while f & 0x400 == 0 {
                f <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((f & 0x3ff) << 13)
        }
        (31, _) => sign | (0xff << 23) | (frac << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}

impl QMatrix {
    /// Unpacks a 2-D GGUF weight `[n][k]`: Q4_1 and Q8_0 exactly; any other type is
    /// dequantized and quantized to 8-bit blocks (scale max|w|/127).
    pub(crate) fn from_qtensor(t: &QTensor) -> Result<Self, Error> {
        let (n, k) = t.shape().dims2()?;
        if k % BLOCK != 0 {
            return Err(Error::Format(format!(
                "weight of width {k} is not a multiple of {BLOCK}"
            )));
        }
        let blocks = n * k / BLOCK;
        let f16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        let (qs, d, m) = match t.dtype() {
            GgmlDType::Q4_1 => {
                // d: f16, m: f16, then the 16 bytes of nibbles.
                let bytes = t.data()?;
                let mut nibbles = Vec::with_capacity(blocks * 16);
                let mut d = Vec::with_capacity(blocks);
                let mut m = Vec::with_capacity(blocks);
                for blk in bytes.chunks_exact(20) {
                    d.push(f16_at(blk, 0));
                    m.push(f16_at(blk, 2));
                    nibbles.extend_from_slice(&blk[4..20]);
                }
                (Quants::Nibbles(nibbles), d, Some(m))
            }
            GgmlDType::Q8_0 => Self::q8_0_parts(&t.data()?, blocks),
            // Anything else: candle's Q8_0 quantization of the dequantized weights.
            _ => {
                let w = t.dequantize(&candle_core::Device::Cpu)?;
                let q = QTensor::quantize(&w, GgmlDType::Q8_0)?;
                Self::q8_0_parts(&q.data()?, blocks)
            }
        };
        if d.len() != blocks {
            return Err(Error::Format(format!(
                "weight [{n}][{k}] holds {} blocks, expected {blocks}",
                d.len()
            )));
        }
        Ok(Self { n, k, qs, d, m })
    }

    /// Q8_0 blocks: d f16, then 32 signed bytes.
    fn q8_0_parts(bytes: &[u8], blocks: usize) -> (Quants, Vec<u16>, Option<Vec<u16>>) {
        let mut qs = Vec::with_capacity(blocks * BLOCK);
        let mut d = Vec::with_capacity(blocks);
        for blk in bytes.chunks_exact(34) {
            d.push(u16::from_le_bytes([blk[0], blk[1]]));
            qs.extend(blk[2..].iter().map(|b| *b as i8));
        }
        (Quants::Bytes(qs), d, None)
    }

    /// The number of outputs per row.
    pub(crate) fn n(&self) -> usize {
        self.n
    }

    /// `x` (`rows * k`) times the transposed weights: `rows * n` outputs.
    pub(crate) fn forward(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let (n, k) = (self.n, self.k);
        assert_eq!(
            x.len(),
            rows * k,
            "activation of {} for {rows} rows of {k}",
            x.len()
        );
        // Lane sums of x per block, for the minimum term of Q4_1 (sum_i (d q_i + m) x_i).
        let xsum: Vec<f32> = if self.m.is_some() {
            lane_sums(x)
        } else {
            Vec::new()
        };
        let mut out = vec![0f32; rows * n];
        let dst = OutPtr(out.as_mut_ptr());
        let dst = &dst;
        // Work items of 8 columns (all rows), spread over candle's spinning thread pool (sized by
        // `crate::set_threads`): a rayon pool parks between the ~200 matmuls of a token and
        // waking it cost more than the second thread gained.
        let items = n.div_ceil(COLS_PER_ITEM);
        candle_core::utils::barrier_pool().execute_chunked(items, |range| {
            // SAFETY: every (row, column) is written by exactly one work item, and `out`
            // outlives the pool call.
            let put = |r: usize, col: usize, v: f32| unsafe { *dst.0.add(r * n + col) = v };
            for item in range {
                let cols = item * COLS_PER_ITEM..((item + 1) * COLS_PER_ITEM).min(n);
                if rows == 1 {
                    // Decode: 4 columns at a time (independent chains of fused multiply-adds).
                    let mut col = cols.start;
                    while col + 4 <= cols.end {
                        let out = self.tile::<1, 4>(x, &xsum, 0, col);
                        for (c, v) in out[0].iter().enumerate() {
                            put(0, col + c, *v);
                        }
                        col += 4;
                    }
                    for col in col..cols.end {
                        put(0, col, self.tile::<1, 1>(x, &xsum, 0, col)[0][0]);
                    }
                } else {
                    // Prefill: 4 rows at a time against each weight row (converted once).
                    let mut r0 = 0;
                    while r0 + ROW_TILE <= rows {
                        for col in cols.clone() {
                            let out = self.tile::<ROW_TILE, 1>(x, &xsum, r0, col);
                            for (t, v) in out.iter().enumerate() {
                                put(r0 + t, col, v[0]);
                            }
                        }
                        r0 += ROW_TILE;
                    }
                    for r in r0..rows {
                        for col in cols.clone() {
                            put(r, col, self.tile::<1, 1>(x, &xsum, r, col)[0][0]);
                        }
                    }
                }
            }
        });
        out
    }
}

/// The output buffer, shared by the pool's threads (each writes its own columns).
struct OutPtr(*mut f32);
// SAFETY: the threads write disjoint elements (see `QMatrix::forward`).
unsafe impl Sync for OutPtr {}

impl QMatrix {
    fn row(&self, col: usize) -> Weights<'_> {
        let (k, nb) = (self.k, self.k / BLOCK);
        Weights {
            qs: match &self.qs {
                Quants::Nibbles(q) => Row::Nibbles(&q[col * k / 2..(col + 1) * k / 2]),
                Quants::Bytes(q) => Row::Bytes(&q[col * k..(col + 1) * k]),
            },
            d: &self.d[col * nb..(col + 1) * nb],
            m: self.m.as_ref().map(|m| &m[col * nb..(col + 1) * nb]),
        }
    }
}

/// One weight row's quants.
#[derive(Clone, Copy)]
enum Row<'a> {
    Nibbles(&'a [u8]),
    Bytes(&'a [i8]),
}

impl Row<'_> {
    /// Element i of the row.
    fn get(&self, i: usize) -> f32 {
        match self {
            Self::Nibbles(q) => {
                let (b, j) = (i / BLOCK, i % BLOCK);
                let byte = q[b * 16 + j % 16];
                (if j < 16 { byte & 0x0f } else { byte >> 4 }) as f32
            }
            Self::Bytes(q) => q[i] as f32,
        }
    }
}

/// One weight row.
struct Weights<'a> {
    qs: Row<'a>,
    d: &'a [u16],
    m: Option<&'a [u16]>,
}

/// The lanes of an accumulator summed in a fixed tree.
fn hsum(a: &[f32; 8]) -> f32 {
    ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

impl QMatrix {
    /// Rows `r0..r0 + R` of `x` against weight rows `c0..c0 + C`: `out[r][c]`.
    fn tile<const R: usize, const C: usize>(
        &self,
        x: &[f32],
        xsum: &[f32],
        r0: usize,
        c0: usize,
    ) -> [[f32; C]; R] {
        let k = self.k;
        let w: [Weights<'_>; C] = std::array::from_fn(|c| self.row(c0 + c));
        #[cfg(target_arch = "x86_64")]
        if avx2::available() {
            // SAFETY: the CPU has AVX2, FMA and F16C (checked at run time).
            return unsafe { avx2::tile::<R, C>(&w, x, xsum, r0, k) };
        }
        let nb = k / BLOCK;
        std::array::from_fn(|t| {
            let r = r0 + t;
            std::array::from_fn(|c| {
                dot_scalar(
                    &w[c],
                    &x[r * k..(r + 1) * k],
                    xsum.get(r * nb * 8..(r + 1) * nb * 8),
                )
            })
        })
    }
}

/// Per block of 32, the 8 lane sums `x[l] + x[8 + l] + x[16 + l] + x[24 + l]` (in that order).
fn lane_sums(x: &[f32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len() / 4);
    for blk in x.chunks_exact(BLOCK) {
        for l in 0..8 {
            out.push(((blk[l] + blk[8 + l]) + blk[16 + l]) + blk[24 + l]);
        }
    }
    out
}

/// The reference definition of one output (the AVX2 version performs these operations in
/// this order). `xsum`: the row's `lane_sums`, needed with Q4_1 minimums.
fn dot_scalar(w: &Weights<'_>, x: &[f32], xsum: Option<&[f32]>) -> f32 {
    let mut acc = [0f32; 8];
    for (b, d) in w.d.iter().enumerate() {
        let d = f16_bits_to_f32(*d);
        let mut blk = [0f32; 8];
        for j in 0..BLOCK / 8 {
            let off = b * BLOCK + j * 8;
            for l in 0..8 {
                blk[l] = w.qs.get(off + l).mul_add(x[off + l], blk[l]);
            }
        }
        for l in 0..8 {
            acc[l] = d.mul_add(blk[l], acc[l]);
        }
        if let (Some(m), Some(xs)) = (w.m, xsum) {
            let m = f16_bits_to_f32(m[b]);
            for l in 0..8 {
                acc[l] = m.mul_add(xs[b * 8 + l], acc[l]);
            }
        }
    }
    hsum(&acc)
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{hsum, Row, Weights, BLOCK};
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    pub(super) fn available() -> bool {
        static HAS: OnceLock<bool> = OnceLock::new();
        *HAS.get_or_init(|| {
            is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c")
        })
    }

    /// f16 to f32 with F16C (exact, like `f16_bits_to_f32`).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn f16(h: u16) -> f32 {
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
    }

    /// The 32 weights of block `b` as 4 groups of 8 lanes, elements in order.
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn groups(q: Row<'_>, b: usize) -> [__m256; 4] {
        match q {
            Row::Nibbles(q) => {
                let mask = _mm_set1_epi8(0x0f);
                let v = _mm_loadu_si128(q.as_ptr().add(b * 16) as *const __m128i);
                let lo = _mm_and_si128(v, mask);
                let hi = _mm_and_si128(_mm_srli_epi16::<4>(v), mask);
                [
                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)),
                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(lo))),
                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)),
                    _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128::<8>(hi))),
                ]
            }
            Row::Bytes(q) => {
                let p = q.as_ptr().add(b * BLOCK);
                let g = |j: usize| {
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                        p.add(j * 8) as *const __m128i
                    )))
                };
                [g(0), g(1), g(2), g(3)]
            }
        }
    }

    /// `super::dot_scalar` for rows `r0..r0 + R` of `x` and the C weight rows `w`, with the
    /// same operations in the same order (so bit-identical), R x C chains interleaved.
    ///
    /// # Safety
    /// The CPU must support AVX2, FMA and F16C.
    // Index loops over the R x C register tile: constant bounds, fully unrolled.
    #[allow(clippy::needless_range_loop)]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn tile<const R: usize, const C: usize>(
        w: &[Weights<'_>; C],
        x: &[f32],
        xsum: &[f32],
        r0: usize,
        k: usize,
    ) -> [[f32; C]; R] {
        let nb = k / BLOCK;
        assert!(x.len() >= (r0 + R) * k);
        for wc in w {
            assert!(wc.d.len() == nb && wc.m.is_none_or(|m| m.len() == nb));
            match wc.qs {
                Row::Nibbles(q) => assert!(q.len() == k / 2),
                Row::Bytes(q) => assert!(q.len() == k),
            }
            assert!(wc.m.is_none() || xsum.len() >= (r0 + R) * nb * 8);
        }
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let xp = x.as_ptr().add(r0 * k);
        for b in 0..nb {
            let mut blk = [[_mm256_setzero_ps(); C]; R];
            // One column's 4 groups live at a time (x is reloaded from L1 per column), so the
            // R x C accumulators stay in registers.
            for c in 0..C {
                let g = groups(w[c].qs, b);
                for (j, gj) in g.iter().enumerate() {
                    let off = b * BLOCK + j * 8;
                    for t in 0..R {
                        let xv = _mm256_loadu_ps(xp.add(t * k + off));
                        blk[t][c] = _mm256_fmadd_ps(*gj, xv, blk[t][c]);
                    }
                }
            }
            for c in 0..C {
                let dv = _mm256_set1_ps(f16(w[c].d[b]));
                for t in 0..R {
                    acc[t][c] = _mm256_fmadd_ps(dv, blk[t][c], acc[t][c]);
                }
                if let Some(m) = w[c].m {
                    let mv = _mm256_set1_ps(f16(m[b]));
                    for t in 0..R {
                        let xs = _mm256_loadu_ps(xsum.as_ptr().add(((r0 + t) * nb + b) * 8));
                        acc[t][c] = _mm256_fmadd_ps(mv, xs, acc[t][c]);
                    }
                }
            }
        }
        let mut out = [[0f32; C]; R];
        for t in 0..R {
            for c in 0..C {
                let mut lanes = [0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), acc[t][c]);
                out[t][c] = hsum(&lanes);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f16 bits of small positive/negative values (exponent 8..=14).
    fn f16_of(i: usize, negative: bool) -> u16 {
        let bits = ((8 + i % 7) << 10 | (i * 97 % 1024)) as u16;
        if negative {
            bits | 0x8000
        } else {
            bits
        }
    }

    fn matrix(n: usize, k: usize, nibbles: bool) -> QMatrix {
        let blocks = n * k / BLOCK;
        let qs = if nibbles {
            Quants::Nibbles((0..n * k / 2).map(|i| (i * 37 % 256) as u8).collect())
        } else {
            Quants::Bytes(
                (0..n * k)
                    .map(|i| ((i * 37 % 255) as i32 - 127) as i8)
                    .collect(),
            )
        };
        let d = (0..blocks).map(|i| f16_of(i, false)).collect();
        let m = nibbles.then(|| (0..blocks).map(|i| f16_of(i * 3, true)).collect());
        QMatrix { n, k, qs, d, m }
    }

    #[test]
    fn rows_agree_alone_batched_and_with_the_reference() {
        for nibbles in [false, true] {
            let (n, k, rows) = (37, 96, 7);
            let w = matrix(n, k, nibbles);
            let x: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 13 % 17) as f32 - 8.0) * 0.37)
                .collect();
            let batched = w.forward(&x, rows);
            for r in 0..rows {
                let xr = &x[r * k..(r + 1) * k];
                let alone = w.forward(xr, 1);
                assert_eq!(&batched[r * n..(r + 1) * n], &alone[..], "row {r}");
                let xsum = lane_sums(xr);
                for (col, got) in alone.iter().enumerate() {
                    let wr = w.row(col);
                    let reference = dot_scalar(&wr, xr, Some(&xsum));
                    assert_eq!(got.to_bits(), reference.to_bits(), "row {r} col {col}");
                    // And close to the plain f64 product.
                    let exact: f64 = (0..k)
                        .map(|i| {
                            let b = i / BLOCK;
                            let wv = f16_bits_to_f32(wr.d[b]) as f64 * wr.qs.get(i) as f64
                                + wr.m.map_or(0.0, |m| f16_bits_to_f32(m[b]) as f64);
                            wv * xr[i] as f64
                        })
                        .sum();
                    let tol = 1e-5 * (1.0 + exact.abs());
                    assert!(
                        (exact - reference as f64).abs() < tol,
                        "{exact} vs {reference}"
                    );
                }
            }
        }
    }

    #[test]
    fn f16_conversion() {
        assert_eq!(f16_bits_to_f32(0x3c00), 1.0);
        assert_eq!(f16_bits_to_f32(0xc000), -2.0);
        assert_eq!(f16_bits_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_bits_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_bits_to_f32(0x0000), 0.0);
        #[cfg(target_arch = "x86_64")]
        if avx2::available() {
            for h in (0..=u16::MAX).filter(|h| (h >> 10) & 0x1f != 0x1f) {
                // SAFETY: F16C is available.
                let hw = unsafe { avx2::f16(h) };
                assert_eq!(hw.to_bits(), f16_bits_to_f32(h).to_bits(), "{h:#06x}");
            }
        }
    }
}
