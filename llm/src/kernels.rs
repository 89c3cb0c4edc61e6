//! The runtime's own weight-matrix kernel: 4- and 8-bit block weights times activations
//! quantized to int8 per block, with exact integer block sums.
//!
//! Weights keep the file's values, in blocks of 32: Q4_1 as nibbles with an f16 scale and
//! minimum per block, Q8_0 as signed bytes with an f16 scale; a token streams as few weight bytes
//! as llama.cpp. At load they are regrouped into panels of [`PANEL`] output columns, each
//! block of a panel stored as 8 groups of 4 consecutive elements of the 8 columns
//! (`[group][column][4]`), so that one 32-byte vector times 4 activation bytes broadcast gives
//! the 8 columns' sums in its 8 lanes (`vpdpbusd`), with no horizontal additions. Each activation
//! row is quantized per block of 32 as llama.cpp quantizes its activations for these weights:
//! `dx = max|x| / 127`, `xq = round(x / dx)` (half to even), and (Q4_1) the block's sum
//! `Σx = dx · Σxq` (an exact integer sum, then one f32 product): each output is the dot product of
//! the file's weights with the quantized activations, up to the f32 rounding of its block steps.
//!
//! One output is defined as: `acc = 0`; per block `b` in order, `s = Σ q·xq` (an exact i32),
//! `acc = fma(d_b · dx_b, s, acc)`, then for Q4_1 `acc = fma(m_b, Σx_b, acc)`. Integer sums are
//! exact in whatever order SIMD lanes add them, and every f32 step is the same operation per
//! output, so the AVX-VNNI and AVX2 versions picked at run time and the scalar version give
//! bit-identical results, whatever the CPU, the thread count or how many rows are multiplied
//! together: a row computed alone in decode equals the same row of a validator's teacher-forced
//! pass.

use candle_core::quantized::{GgmlDType, QTensor};

use crate::Error;

const BLOCK: usize = 32;
/// Output columns per panel: one AVX2 vector of f32 results.
const PANEL: usize = 8;
/// Activation rows multiplied per pass over a panel's weights (unpacked once for all of them).
const ROW_TILE: usize = 8;

/// A weight matrix `[n][k]` in blocks of 32: `w = d * q (+ m for Q4_1)`. Columns past `n` in
/// the last panel are zero.
pub(crate) struct QMatrix {
    n: usize,
    k: usize,
    /// Q4_1 (4-bit quants 0..=15, a minimum per block) rather than Q8_0 (signed bytes).
    nibbles: bool,
    /// The quants, `[panel][block]`, each [`QMatrix::block_bytes`] long: `[group][column][4]`
    /// as signed bytes (Q8_0), or as nibbles (Q4_1) with groups 4..8 in the high nibbles of
    /// groups 0..4.
    qs: Vec<u8>,
    /// One f16 scale per block, `[panel][block][column]` (kept as f16: the file's value, half
    /// the bytes to stream per token).
    d: Vec<u16>,
    /// One f16 minimum per block (Q4_1), laid out as `d`.
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

/// Added and subtracted to round an f32 below 2^22 in magnitude to an integer (half to even).
const ROUNDER: f32 = 12_582_912.0;

/// Activation rows quantized per block of 32.
struct Acts {
    /// `round(x / dx)`, `rows * k`.
    q: Vec<i8>,
    /// The scale of each block, `rows * k / 32`.
    dx: Vec<f32>,
    /// Each block's `dx · Σxq` (for Q4_1 minimums; empty otherwise).
    sum: Vec<f32>,
}

impl Acts {
    fn quantize(x: &[f32], with_sums: bool) -> Self {
        let blocks = x.len() / BLOCK;
        let mut acts = Self {
            q: Vec::with_capacity(x.len()),
            dx: Vec::with_capacity(blocks),
            sum: Vec::with_capacity(if with_sums { blocks } else { 0 }),
        };
        for blk in x.chunks_exact(BLOCK) {
            let amax = blk.iter().fold(0f32, |a, v| a.max(v.abs()));
            let dx = amax / 127.0;
            let inv = if dx > 0.0 { 1.0 / dx } else { 0.0 };
            // Rounded half to even by adding and subtracting 1.5 * 2^23 (exact IEEE steps, no
            // libm call); `as` saturates: x * inv is at most 127 plus a rounding error.
            let start = acts.q.len();
            acts.q
                .extend(blk.iter().map(|v| ((v * inv + ROUNDER) - ROUNDER) as i8));
            acts.dx.push(dx);
            if with_sums {
                let qsum: i32 = acts.q[start..].iter().map(|q| *q as i32).sum();
                acts.sum.push(dx * qsum as f32);
            }
        }
        acts
    }
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
        let bytes = match t.dtype() {
            GgmlDType::Q4_1 | GgmlDType::Q8_0 => t.data()?.into_owned(),
            // Anything else: candle's Q8_0 quantization of the dequantized weights.
            _ => {
                let w = t.dequantize(&candle_core::Device::Cpu)?;
                QTensor::quantize(&w, GgmlDType::Q8_0)?.data()?.into_owned()
            }
        };
        Self::from_blocks(n, k, t.dtype() == GgmlDType::Q4_1, &bytes)
    }

    /// A matrix from its blocks as GGUF stores them, row after row: Q4_1 (`nibbles`) blocks
    /// are d f16, m f16 and 16 bytes of nibbles; Q8_0 blocks d f16 and 32 signed bytes.
    fn from_blocks(n: usize, k: usize, nibbles: bool, bytes: &[u8]) -> Result<Self, Error> {
        let (block_bytes, quant_bytes) = if nibbles { (20, 16) } else { (34, 32) };
        let nb = k / BLOCK;
        if bytes.len() != n * nb * block_bytes {
            return Err(Error::Format(format!(
                "weight [{n}][{k}] holds {} bytes, expected {}",
                bytes.len(),
                n * nb * block_bytes
            )));
        }
        let slots = n.div_ceil(PANEL) * PANEL * nb;
        let block_bytes_out = Self::block_bytes(nibbles);
        let mut qs = vec![0u8; slots / PANEL * block_bytes_out];
        let mut d = vec![0u16; slots];
        let mut m = nibbles.then(|| vec![0u16; slots]);
        let f16_at = |b: &[u8], at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        for (i, blk) in bytes.chunks_exact(block_bytes).enumerate() {
            let (col, b) = (i / nb, i % nb);
            let slot = ((col / PANEL) * nb + b) * PANEL + col % PANEL;
            d[slot] = f16_at(blk, 0);
            if let Some(m) = &mut m {
                m[slot] = f16_at(blk, 2);
            }
            let quants = &blk[block_bytes - quant_bytes..];
            let out = &mut qs[slot / PANEL * block_bytes_out..][..block_bytes_out];
            for e in 0..BLOCK {
                let (at, high) = Self::position(col % PANEL, e, nibbles);
                out[at] |= if nibbles {
                    // The file: element j in the low nibble of byte j, j + 16 in its high one.
                    let q = quants[e % 16];
                    let q = if e < 16 { q & 0x0f } else { q >> 4 };
                    if high {
                        q << 4
                    } else {
                        q
                    }
                } else {
                    quants[e]
                };
            }
        }
        Ok(Self {
            n,
            k,
            nibbles,
            qs,
            d,
            m,
        })
    }

    /// Bytes of one block of a panel.
    fn block_bytes(nibbles: bool) -> usize {
        if nibbles {
            PANEL * BLOCK / 2
        } else {
            PANEL * BLOCK
        }
    }

    /// Where element `e` of column `c` (of a panel) is in a panel's block: the byte, and (Q4_1)
    /// whether in its high nibble.
    fn position(c: usize, e: usize, nibbles: bool) -> (usize, bool) {
        let (group, lane) = (e / 4, c * 4 + e % 4);
        if nibbles {
            ((group % 4) * 32 + lane, group >= 4)
        } else {
            (group * 32 + lane, false)
        }
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
        let acts = Acts::quantize(x, self.m.is_some());
        let mut out = vec![0f32; rows * n];
        let dst = OutPtr(out.as_mut_ptr());
        let dst = &dst;
        // One work item per panel (all rows), spread over candle's spinning thread pool (sized
        // by `crate::set_threads`): a rayon pool parks between the ~200 matmuls of a token and
        // waking it cost more than the second thread gained.
        candle_core::utils::barrier_pool().execute_chunked(n.div_ceil(PANEL), |panels| {
            for p in panels {
                let cols = p * PANEL..((p + 1) * PANEL).min(n);
                // SAFETY: every (row, column) is written by exactly one work item, and `out`
                // outlives the pool call.
                let put = |r: usize, tile: &[f32; PANEL]| {
                    for (c, col) in cols.clone().enumerate() {
                        unsafe { *dst.0.add(r * n + col) = tile[c] }
                    }
                };
                let mut r0 = 0;
                while r0 + ROW_TILE <= rows {
                    for (t, tile) in self.tile::<ROW_TILE>(&acts, p, r0).iter().enumerate() {
                        put(r0 + t, tile);
                    }
                    r0 += ROW_TILE;
                }
                for r in r0..rows {
                    put(r, &self.tile::<1>(&acts, p, r)[0]);
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

/// One panel's weights: `nb` blocks of [`PANEL`] columns.
struct Panel<'a> {
    /// `nb` blocks of [`QMatrix::block_bytes`].
    qs: &'a [u8],
    nibbles: bool,
    d: &'a [u16],
    m: Option<&'a [u16]>,
}

impl Panel<'_> {
    /// Element `e` of column `c` in block `b`.
    fn quant(&self, b: usize, c: usize, e: usize) -> i32 {
        let (at, high) = QMatrix::position(c, e, self.nibbles);
        let byte = self.qs[b * QMatrix::block_bytes(self.nibbles) + at];
        match (self.nibbles, high) {
            (false, _) => byte as i8 as i32,
            (true, false) => (byte & 0x0f) as i32,
            (true, true) => (byte >> 4) as i32,
        }
    }
}

impl QMatrix {
    fn panel(&self, p: usize) -> Panel<'_> {
        let nb = self.k / BLOCK;
        let slots = p * nb * PANEL..(p + 1) * nb * PANEL;
        let bytes = Self::block_bytes(self.nibbles);
        Panel {
            qs: &self.qs[p * nb * bytes..(p + 1) * nb * bytes],
            nibbles: self.nibbles,
            d: &self.d[slots.clone()],
            m: self.m.as_ref().map(|m| &m[slots]),
        }
    }

    /// Rows `r0..r0 + R` of the activations against panel `p`: `out[row][column in panel]`.
    fn tile<const R: usize>(&self, a: &Acts, p: usize, r0: usize) -> [[f32; PANEL]; R] {
        let w = self.panel(p);
        let nb = self.k / BLOCK;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has the features each version needs (checked at run time).
        unsafe {
            use simd::Level;
            match (simd::level(), self.nibbles) {
                (Level::Vnni, true) => return simd::tile_vnni::<R, true>(&w, a, nb, r0),
                (Level::Vnni, false) => return simd::tile_vnni::<R, false>(&w, a, nb, r0),
                (Level::Avx2, true) => return simd::tile_avx2::<R, true>(&w, a, nb, r0),
                (Level::Avx2, false) => return simd::tile_avx2::<R, false>(&w, a, nb, r0),
                (Level::None, _) => {}
            }
        }
        tile_scalar::<R>(&w, a, nb, r0)
    }
}

/// The reference definition of a tile's outputs (the SIMD versions perform these operations).
fn tile_scalar<const R: usize>(w: &Panel<'_>, a: &Acts, nb: usize, r0: usize) -> [[f32; PANEL]; R] {
    let mut acc = [[0f32; PANEL]; R];
    for b in 0..nb {
        for c in 0..PANEL {
            let slot = b * PANEL + c;
            let d = f16_bits_to_f32(w.d[slot]);
            for (t, acc) in acc.iter_mut().enumerate() {
                let xb = (r0 + t) * nb + b;
                let xq = &a.q[xb * BLOCK..(xb + 1) * BLOCK];
                let s: i32 = (0..BLOCK).map(|e| w.quant(b, c, e) * xq[e] as i32).sum();
                acc[c] = (d * a.dx[xb]).mul_add(s as f32, acc[c]);
                if let Some(m) = w.m {
                    acc[c] = f16_bits_to_f32(m[slot]).mul_add(a.sum[xb], acc[c]);
                }
            }
        }
    }
    acc
}

#[cfg(target_arch = "x86_64")]
mod simd {
    use super::{Acts, Panel, BLOCK, PANEL};
    use std::arch::x86_64::*;
    use std::sync::OnceLock;

    /// The SIMD version this CPU runs.
    #[derive(Clone, Copy)]
    pub(super) enum Level {
        /// AVX2, FMA, F16C and AVX-VNNI (`vpdpbusd`).
        Vnni,
        /// AVX2, FMA and F16C (`vpmaddubsw` and `vpmaddwd`).
        Avx2,
        /// Neither: the scalar version.
        None,
    }

    pub(super) fn level() -> Level {
        static LEVEL: OnceLock<Level> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            let avx2 = is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("fma")
                && is_x86_feature_detected!("f16c");
            match (avx2, is_x86_feature_detected!("avxvnni")) {
                (true, true) => Level::Vnni,
                (true, false) => Level::Avx2,
                (false, _) => Level::None,
            }
        })
    }

    /// f16 to f32 with F16C (exact, like `f16_bits_to_f32`).
    #[cfg(test)]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn f16(h: u16) -> f32 {
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32)))
    }

    /// `acc + Σ u·s` per i32 lane over its 4 bytes (u unsigned, s signed): AVX-VNNI.
    #[target_feature(enable = "avx2,avxvnni")]
    fn dot_vnni(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        _mm256_dpbusd_avx_epi32(acc, u, s)
    }

    /// The same with AVX2 (exact: a pair of products is at most 2·128·127 in an i16).
    #[target_feature(enable = "avx2")]
    fn dot_avx2(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        let pairs = _mm256_maddubs_epi16(u, s);
        _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
    }

    /// `super::tile_scalar` with a panel's 8 columns in the lanes of one vector per row, for one
    /// `dot` instruction set.
    macro_rules! tile {
        ($name:ident, $features:literal, $dot:ident) => {
            /// `super::tile_scalar`, bit for bit.
            ///
            /// # Safety
            /// The CPU must support the features enabled.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<const R: usize, const NIBBLES: bool>(
                w: &Panel<'_>,
                a: &Acts,
                nb: usize,
                r0: usize,
            ) -> [[f32; PANEL]; R] {
                let block_bytes = super::QMatrix::block_bytes(NIBBLES);
                assert!(w.nibbles == NIBBLES && w.m.is_some() == NIBBLES);
                assert!(w.qs.len() == nb * block_bytes && w.d.len() == nb * PANEL);
                assert!(w.m.is_none_or(|m| m.len() == nb * PANEL));
                assert!(a.q.len() >= (r0 + R) * nb * BLOCK && a.dx.len() >= (r0 + R) * nb);
                assert!(w.m.is_none() || a.sum.len() >= (r0 + R) * nb);
                let mask = _mm256_set1_epi8(0x0f);
                let mut acc = [_mm256_setzero_ps(); R];
                for b in 0..nb {
                    let qp = w.qs.as_ptr().add(b * block_bytes);
                    // The 8 groups of 4 elements of the 8 columns, as unsigned bytes (Q8_0:
                    // their magnitudes; the signs go to the activations).
                    let q: [__m256i; 8] = if NIBBLES {
                        std::array::from_fn(|g| {
                            let v = _mm256_loadu_si256(qp.add(g % 4 * 32) as *const __m256i);
                            if g < 4 {
                                _mm256_and_si256(v, mask)
                            } else {
                                _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask)
                            }
                        })
                    } else {
                        std::array::from_fn(
                            |g| _mm256_loadu_si256(qp.add(g * 32) as *const __m256i),
                        )
                    };
                    let u = if NIBBLES {
                        q
                    } else {
                        q.map(|v| _mm256_abs_epi8(v))
                    };
                    let d = _mm256_cvtph_ps(_mm_loadu_si128(
                        w.d.as_ptr().add(b * PANEL) as *const __m128i
                    ));
                    let m = w.m.map(|m| {
                        _mm256_cvtph_ps(
                            _mm_loadu_si128(m.as_ptr().add(b * PANEL) as *const __m128i),
                        )
                    });
                    for (t, acc) in acc.iter_mut().enumerate() {
                        let xb = (r0 + t) * nb + b;
                        let xp = a.q.as_ptr().add(xb * BLOCK) as *const i32;
                        // Two chains of integer sums (exact, so their order is free).
                        let mut s = [_mm256_setzero_si256(); 2];
                        for g in 0..8 {
                            // Elements 4g..4g + 4 of the row, in every lane.
                            let x = _mm256_set1_epi32(xp.add(g).read_unaligned());
                            let x = if NIBBLES {
                                x
                            } else {
                                _mm256_sign_epi8(x, q[g])
                            };
                            s[g % 2] = $dot(s[g % 2], u[g], x);
                        }
                        let s = _mm256_add_epi32(s[0], s[1]);
                        let scale = _mm256_mul_ps(d, _mm256_set1_ps(*a.dx.get_unchecked(xb)));
                        *acc = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(s), *acc);
                        if let Some(m) = m {
                            let sum = _mm256_set1_ps(*a.sum.get_unchecked(xb));
                            *acc = _mm256_fmadd_ps(m, sum, *acc);
                        }
                    }
                }
                acc.map(|v| {
                    let mut out = [0f32; PANEL];
                    _mm256_storeu_ps(out.as_mut_ptr(), v);
                    out
                })
            }
        };
    }

    tile!(tile_vnni, "avx2,fma,f16c,avxvnni", dot_vnni);
    tile!(tile_avx2, "avx2,fma,f16c", dot_avx2);
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

    /// A `[n][k]` matrix of made-up blocks in the file's layout.
    fn matrix(n: usize, k: usize, nibbles: bool) -> QMatrix {
        let mut bytes = Vec::new();
        for i in 0..n * k / BLOCK {
            bytes.extend(f16_of(i, false).to_le_bytes());
            if nibbles {
                bytes.extend(f16_of(i * 3, true).to_le_bytes());
                bytes.extend((0..16).map(|j| ((i * 16 + j) * 37 % 256) as u8));
            } else {
                // -128..=127, all of them.
                bytes.extend((0..32).map(|j| ((i * 32 + j) * 37 % 256) as u8));
            }
        }
        QMatrix::from_blocks(n, k, nibbles, &bytes).unwrap()
    }

    /// Weight `i` of column `col`, and the block's scale and minimum.
    fn weight(w: &QMatrix, col: usize, i: usize) -> (f64, f64, f64) {
        let p = w.panel(col / PANEL);
        let (b, c) = (i / BLOCK, col % PANEL);
        let q = p.quant(b, c, i % BLOCK) as f64;
        let d = f16_bits_to_f32(p.d[b * PANEL + c]) as f64;
        let m =
            p.m.map_or(0.0, |m| f16_bits_to_f32(m[b * PANEL + c]) as f64);
        (q, d, m)
    }

    #[test]
    fn every_simd_version_equals_the_scalar_one() {
        #[cfg(target_arch = "x86_64")]
        for nibbles in [false, true] {
            let (n, k, rows) = (16, 128, 4);
            let nb = k / BLOCK;
            let w = matrix(n, k, nibbles);
            let x: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 29 % 31) as f32 - 15.0) * 0.11)
                .collect();
            let acts = Acts::quantize(&x, nibbles);
            let has = |f: &str| {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                    && std::arch::is_x86_feature_detected!("f16c")
                    && (f.is_empty() || std::arch::is_x86_feature_detected!("avxvnni"))
            };
            for p in 0..n / PANEL {
                let panel = w.panel(p);
                let reference = tile_scalar::<4>(&panel, &acts, nb, 0);
                type Tile = unsafe fn(&Panel<'_>, &Acts, usize, usize) -> [[f32; PANEL]; 4];
                let versions: [(&str, bool, [Tile; 2]); 2] = [
                    (
                        "avx2",
                        has(""),
                        [simd::tile_avx2::<4, false>, simd::tile_avx2::<4, true>],
                    ),
                    (
                        "avx-vnni",
                        has("avxvnni"),
                        [simd::tile_vnni::<4, false>, simd::tile_vnni::<4, true>],
                    ),
                ];
                for (name, available, tiles) in versions {
                    if available {
                        // SAFETY: the CPU has the features (checked by `has`).
                        let got = unsafe { tiles[nibbles as usize](&panel, &acts, nb, 0) };
                        assert_eq!(
                            got.map(|r| r.map(f32::to_bits)),
                            reference.map(|r| r.map(f32::to_bits)),
                            "{name}, nibbles {nibbles}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn rows_agree_alone_batched_and_with_the_definition() {
        for nibbles in [false, true] {
            // 37 columns: a part-filled last panel; 7 rows: a tile of 4 and 3 single rows.
            let (n, k, rows) = (37, 96, 7);
            let nb = k / BLOCK;
            let w = matrix(n, k, nibbles);
            let mut x: Vec<f32> = (0..rows * k)
                .map(|i| ((i * 13 % 17) as f32 - 8.0) * 0.37)
                .collect();
            // An all-zero block (scale 0) in row 2.
            x[2 * k..2 * k + BLOCK].fill(0.0);
            let batched = w.forward(&x, rows);
            for r in 0..rows {
                let xr = &x[r * k..(r + 1) * k];
                let alone = w.forward(xr, 1);
                assert_eq!(&batched[r * n..(r + 1) * n], &alone[..], "row {r}");
                let acts = Acts::quantize(xr, nibbles);
                for (col, got) in alone.iter().enumerate() {
                    // The scalar reference, bit for bit.
                    let in_panel = col % PANEL;
                    let reference = tile_scalar::<1>(&w.panel(col / PANEL), &acts, nb, 0)[0];
                    assert_eq!(
                        got.to_bits(),
                        reference[in_panel].to_bits(),
                        "row {r} col {col}"
                    );
                    // The definition in f64: close.
                    let (mut defined, mut exact, mut bound) = (0f64, 0f64, 0f64);
                    for b in 0..nb {
                        let mut s = 0f64;
                        let block = b * BLOCK..(b + 1) * BLOCK;
                        for (i, (xq, x)) in block
                            .clone()
                            .zip(acts.q[block.clone()].iter().zip(&xr[block]))
                        {
                            let (q, d, m) = weight(&w, col, i);
                            s += q * *xq as f64;
                            exact += (d * q + m) * *x as f64;
                            // Quantizing x moves it by at most dx / 2.
                            bound += (d * q + m).abs() * acts.dx[b] as f64 / 2.0;
                        }
                        let (_, d, m) = weight(&w, col, b * BLOCK);
                        defined += d * acts.dx[b] as f64 * s;
                        if nibbles {
                            defined += m * acts.sum[b] as f64;
                        }
                    }
                    let tol = 1e-5 * (1.0 + defined.abs());
                    assert!((defined - *got as f64).abs() < tol, "{defined} vs {got}");
                    assert!(
                        (exact - *got as f64).abs() <= bound * 1.001 + tol,
                        "{exact} vs {got}: beyond the quantization bound {bound}"
                    );
                }
            }
        }
    }

    #[test]
    fn activations_quantize_per_block() {
        let mut x = vec![0f32; 2 * BLOCK];
        x[3] = -2.54;
        x[7] = 1.27;
        x[BLOCK + 1] = 0.5;
        let a = Acts::quantize(&x, true);
        assert_eq!(a.dx, vec![2.54 / 127.0, 0.5 / 127.0]);
        assert_eq!((a.q[3], a.q[7], a.q[0], a.q[BLOCK + 1]), (-127, 64, 0, 127));
        assert_eq!(a.sum, vec![a.dx[0] * (64 - 127) as f32, a.dx[1] * 127.0]);
        let zero = Acts::quantize(&[0.0; BLOCK], false);
        assert_eq!((zero.dx[0], zero.q[5], zero.sum.len()), (0.0, 0, 0));
    }

    #[test]
    fn f16_conversion() {
        assert_eq!(f16_bits_to_f32(0x3c00), 1.0);
        assert_eq!(f16_bits_to_f32(0xc000), -2.0);
        assert_eq!(f16_bits_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_bits_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_bits_to_f32(0x0000), 0.0);
        #[cfg(target_arch = "x86_64")]
        if !matches!(simd::level(), simd::Level::None) {
            for h in (0..=u16::MAX).filter(|h| (h >> 10) & 0x1f != 0x1f) {
                // SAFETY: F16C is available.
                let hw = unsafe { simd::f16(h) };
                assert_eq!(hw.to_bits(), f16_bits_to_f32(h).to_bits(), "{h:#06x}");
            }
        }
    }
}
