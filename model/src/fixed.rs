//! Fixed-point arithmetic of the reference model.
//!
//! Values are `i32` with [`FRAC_BITS`] fractional bits (so [`ONE`] is 1.0). Products are
//! accumulated in `i64`; every rescale rounds to nearest with ties toward +infinity
//! ([`shr_round`]) and every division rounds to nearest with ties toward +infinity
//! ([`div_round`]). Rust defines `>>` on signed integers as an arithmetic shift and
//! `div_euclid` exactly, so these results are the same on every target.
//!
//! Magnitude bounds (why `i64` never overflows and rescaled values fit `i32`):
//! - the residual stream is clamped to `±`[`RESIDUAL_LIMIT`] (2^20), so the sum of squares in
//!   [`rms_norm`] is below 64 · 2^40 = 2^46;
//! - an RMS-normalised vector of width 64 has entries of at most `8 · ONE + 1` (< 2^12);
//! - block (attention and MLP) weights are at most [`MAX_BLOCK_WEIGHT`] (< 2^7), so a projection of a normalised vector (q, k, v, the
//!   MLP hidden layer) has entries below 64 · 2^12 · 2^7 / 2^8 = 2^17; an attention head's output
//!   is a weighted mean of values, so it stays below 2^17 too;
//! - hence every [`matvec`] sums at most 128 products below 2^24: the accumulator stays below
//!   2^31 and the rescaled result below 2^23; a head's `q · k` sums 16 products below 2^34, and
//!   its weighted value sum adds 256 products below 2^16 · 2^17, i.e. below 2^41.

use super::weights::Matrix;

/// Fractional bits of every fixed-point value.
pub const FRAC_BITS: u32 = 8;
/// 1.0 in fixed point.
pub const ONE: i32 = 1 << FRAC_BITS;
/// The residual stream is clamped to this magnitude after each block, bounding every product.
pub const RESIDUAL_LIMIT: i32 = 1 << 20;
/// Largest magnitude of an attention or MLP weight the bounds above hold for (just under 0.5):
/// generated weights stay below it, trained ones are clamped to it, and loaded ones are
/// refused above it ([`crate::weights::Weights::from_bytes`]).
pub const MAX_BLOCK_WEIGHT: i32 = (1 << 7) - 1;

/// `v / 2^bits`, rounded to nearest, ties toward +infinity.
pub fn shr_round(v: i64, bits: u32) -> i64 {
    debug_assert!(bits > 0);
    (v + (1i64 << (bits - 1))) >> bits
}

/// `num / den` for `den > 0`, rounded to nearest, ties toward +infinity.
pub fn div_round(num: i64, den: i64) -> i64 {
    debug_assert!(den > 0);
    (2 * num + den).div_euclid(2 * den)
}

/// `out = x · m`, rescaled back to fixed point. `acc` is scratch space of `m.cols` entries.
pub fn matvec(x: &[i32], m: &Matrix, acc: &mut [i64], out: &mut [i32]) {
    debug_assert_eq!(x.len(), m.rows);
    debug_assert_eq!(out.len(), m.cols);
    acc.fill(0);
    for (&xi, row) in x.iter().zip(m.data.chunks_exact(m.cols)) {
        if xi == 0 {
            continue; // common after ReLU; skipping changes nothing
        }
        let xi = i64::from(xi);
        for (a, &w) in acc.iter_mut().zip(row) {
            *a += xi * i64::from(w);
        }
    }
    for (o, &a) in out.iter_mut().zip(acc.iter()) {
        // |a| < 2^31 (module docs), so the rescaled value fits i32.
        *o = shr_round(a, FRAC_BITS) as i32;
    }
}

/// The dot product of `x` with column `col` of `m`, in fixed point (used for the few logits
/// decoding may pick, instead of the whole unembedding).
pub fn column_dot(x: &[i32], m: &Matrix, col: usize) -> i64 {
    let mut acc = 0i64;
    for (i, &xi) in x.iter().enumerate() {
        acc += i64::from(xi) * i64::from(m.data[i * m.cols + col]);
    }
    shr_round(acc, FRAC_BITS)
}

/// RMS norm without a learned gain: `x * ONE / rms(x)`. The mean square is floored, its square
/// root is the floor integer square root, and each entry is divided with [`div_round`]. An
/// all-zero (or tiny) vector normalises to zeros.
pub fn rms_norm(x: &[i32], out: &mut [i32]) {
    let n = x.len() as i64;
    let sum_sq: i64 = x.iter().map(|&v| i64::from(v) * i64::from(v)).sum();
    let rms = (sum_sq / n).unsigned_abs().isqrt() as i64; // floor of both
    if rms == 0 {
        out.fill(0);
        return;
    }
    for (o, &v) in out.iter_mut().zip(x) {
        *o = div_round(i64::from(v) * i64::from(ONE), rms) as i32;
    }
}

/// 1.0 in the Q16 format of softmax weights.
pub const WEIGHT_ONE: i64 = 1 << 16;

/// Unnormalised softmax weight `exp(-d)` in Q16, for a score distance `d >= 0` (fixed point,
/// [`FRAC_BITS`]).
///
/// The approximation: `exp(-d) = 2^(-d·log2 e)`; `log2 e` is taken as 369/256 (1.44141, true
/// 1.44270), `t = d·369/256` is split into an integer part `n` and a fraction `f ∈ [0, 1)`, and
/// `2^-f` is the quadratic `1 - 0.65625 f + 0.15625 f²`, exact at `f = 0` and `f = 1` and within
/// 0.6% between. The result is `2^-f` in Q16 shifted right by `n` (so it is 0 once `n > 16`).
/// It is monotone non-increasing in `d`, and `d = 0` gives exactly [`WEIGHT_ONE`], so the
/// softmax denominator is never zero.
pub fn exp_neg(d: i64) -> i64 {
    debug_assert!(d >= 0);
    let t = shr_round(d * 369, FRAC_BITS); // d·log2 e, FRAC_BITS fractional bits
    let n = t >> FRAC_BITS;
    if n > 16 {
        return 0;
    }
    let f = t & i64::from(ONE - 1); // 0..=255, meaning f/256
                                    // 2^-f in Q16: 65536 - 43008·f/256 + 10240·f²/65536, each term floored (f >= 0).
    let frac = WEIGHT_ONE - (43008 * f) / 256 + (10240 * f * f) / 65536;
    frac >> n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_to_nearest() {
        assert_eq!(shr_round(384, 8), 2); // 1.5 -> 2 (tie up)
        assert_eq!(shr_round(-384, 8), -1); // -1.5 -> -1 (tie toward +inf)
        assert_eq!(shr_round(-385, 8), -2);
        assert_eq!(div_round(7, 2), 4);
        assert_eq!(div_round(-7, 2), -3);
        assert_eq!(div_round(-8, 3), -3);
    }

    #[test]
    fn exp_neg_is_monotone_and_close() {
        assert_eq!(exp_neg(0), WEIGHT_ONE);
        let mut prev = WEIGHT_ONE;
        for d in 0..(32 * i64::from(ONE)) {
            let w = exp_neg(d);
            assert!(w <= prev, "exp_neg not monotone at {d}");
            prev = w;
        }
        // exp(-1) = 0.36788 -> 24109 in Q16; allow 1%.
        assert!((exp_neg(i64::from(ONE)) - 24109).abs() < 241);
        // exp(-2) = 0.13534 -> 8869.
        assert!((exp_neg(2 * i64::from(ONE)) - 8869).abs() < 89);
        assert_eq!(exp_neg(100 * i64::from(ONE)), 0);
    }

    #[test]
    fn rms_norm_scales_to_unit_rms() {
        let x = [3 * ONE, -3 * ONE, 3 * ONE, -3 * ONE];
        let mut out = [0; 4];
        rms_norm(&x, &mut out);
        assert_eq!(out, [ONE, -ONE, ONE, -ONE]);
        rms_norm(&[0; 4], &mut out);
        assert_eq!(out, [0; 4]);
    }
}
