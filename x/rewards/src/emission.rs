//! Integer arithmetic of rewards: the emission schedule and the floor of `a·b/c` without
//! overflow. No floats anywhere: every node must reach the same amount to the ngnk.

use crate::params::{RewardsParams, PPB};

/// Fixed-point unit of the decay factor: 10^18 stands for 1.
pub const FACTOR_SCALE: u128 = 1_000_000_000_000_000_000;

/// `⌊a·b/c⌋`, exact for every `u128` input (the product is formed in 256 bits). `None` when
/// `c` is zero or the quotient does not fit in 128 bits.
pub fn mul_div_floor(a: u128, b: u128, c: u128) -> Option<u128> {
    if c == 0 {
        return None;
    }
    let (high, low) = widening_mul(a, b);
    if high == 0 {
        return Some(low / c);
    }
    if high >= c {
        // The quotient is at least 2^128.
        return None;
    }
    // Schoolbook long division of the 256-bit product, one bit at a time; `remainder < c`
    // holds before every step, so it fits in 128 bits once `c` is subtracted again.
    let mut remainder = high;
    let mut quotient = 0u128;
    for bit in (0..128).rev() {
        let carry = remainder >> 127;
        remainder = (remainder << 1) | ((low >> bit) & 1);
        quotient <<= 1;
        if carry == 1 || remainder >= c {
            remainder = remainder.wrapping_sub(c);
            quotient |= 1;
        }
    }
    Some(quotient)
}

/// The 256-bit product `a·b` as `(high, low)` 128-bit halves.
fn widening_mul(a: u128, b: u128) -> (u128, u128) {
    const LOW: u128 = u64::MAX as u128;
    let (a1, a0) = (a >> 64, a & LOW);
    let (b1, b0) = (b >> 64, b & LOW);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    // Sum of the three terms landing on bits 64..192; at most 3·(2^64−1), no overflow.
    let middle = (p00 >> 64) + (p01 & LOW) + (p10 & LOW);
    let low = (p00 & LOW) | (middle << 64);
    let high = p11 + (p01 >> 64) + (p10 >> 64) + (middle >> 64);
    (high, low)
}

/// `(1 − decay)^epoch` scaled by [`FACTOR_SCALE`], by exponentiation by squaring. Every
/// multiplication rounds down, so the factor is never above the exact value (the error is
/// below one part in 10^16 for any epoch a chain reaches) and the schedule never emits more
/// than its exact formula.
pub fn decay_factor(decay_ppb: u64, epoch: u64) -> u128 {
    // (10^9 − d)·10^9 is (1 − d/10^9) in units of 10^-18; a decay ≥ 10^9 (rejected by
    // validation) means nothing is emitted after epoch 0.
    let mut base = u128::from(PPB.saturating_sub(decay_ppb)) * u128::from(PPB);
    let mut factor = FACTOR_SCALE;
    let mut exponent = epoch;
    // Both operands are at most 10^18, so every product fits in u128 (10^36 < 2^128).
    while exponent > 0 {
        if exponent & 1 == 1 {
            factor = factor * base / FACTOR_SCALE;
        }
        exponent >>= 1;
        if exponent > 0 {
            base = base * base / FACTOR_SCALE;
        }
        if factor == 0 {
            break;
        }
    }
    factor
}

/// ngnk minted at the end of `epoch`: `initial_emission × (1 − decay)^epoch`, rounded down
/// (the factor is rounded down, then the product). Epoch 0 emits exactly `initial_emission`;
/// a decay of zero emits it every epoch.
pub fn emission(params: &RewardsParams, epoch: u64) -> u128 {
    let factor = decay_factor(params.decay_ppb, epoch);
    // factor ≤ FACTOR_SCALE, so the quotient is at most `initial_emission` and always fits.
    mul_div_floor(params.initial_emission, factor, FACTOR_SCALE).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::default_params;

    fn defaults() -> RewardsParams {
        RewardsParams::from_proto(&default_params()).unwrap()
    }

    #[test]
    fn mul_div_floor_is_exact_beyond_128_bits() {
        assert_eq!(mul_div_floor(7, 5, 3), Some(11));
        assert_eq!(mul_div_floor(0, 5, 3), Some(0));
        assert_eq!(mul_div_floor(1, 1, 0), None);
        assert_eq!(
            mul_div_floor(u128::MAX, u128::MAX, u128::MAX),
            Some(u128::MAX)
        );
        assert_eq!(mul_div_floor(1 << 127, 4, 8), Some(1 << 126));
        assert_eq!(mul_div_floor(u128::MAX, 2, 1), None);
        assert_eq!(mul_div_floor(u128::MAX, 3, 4), Some(u128::MAX / 4 * 3 + 2));
        // (2^128 − 1)(2^64 + 1) / (2^64 + 3), against a hand-checked split:
        // q·b + ⌊r·b/c⌋ with q = a / c, r = a % c, when r·b fits.
        let (a, b, c) = (u128::MAX, (1u128 << 64) + 1, (1u128 << 64) + 3);
        let (q, r) = (a / c, a % c);
        assert_eq!(mul_div_floor(a, b, c), Some(q * b + r * b / c));
        // A small pseudo-random sweep against plain u128 arithmetic where it cannot overflow.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (a, b, c) = (
                u128::from(x >> 1),
                u128::from(x % 1_000_003),
                u128::from(x % 97 + 1),
            );
            assert_eq!(mul_div_floor(a, b, c), Some(a * b / c));
            // Products up to 2^148, quotients below 2^118: q·b + ⌊r·b/c⌋ cannot overflow.
            let wide = u128::from(x) << 60;
            let (b, c) = (
                u128::from(x >> 40) + 1,
                u128::from(x % (1 << 40)) + (1 << 30),
            );
            let expected = (wide / c) * b + (wide % c) * b / c;
            assert_eq!(mul_div_floor(wide, b, c), Some(expected), "{wide} {b} {c}");
        }
    }

    #[test]
    fn epoch_zero_emits_the_initial_amount_exactly() {
        let params = defaults();
        assert_eq!(emission(&params, 0), 323_000_000_000_000);
        let odd = RewardsParams {
            initial_emission: u128::MAX,
            decay_ppb: 999_999_999,
            validation_share_ppm: 0,
        };
        assert_eq!(emission(&odd, 0), u128::MAX);
    }

    #[test]
    fn default_decay_halves_the_emission_in_1459_epochs() {
        let params = defaults();
        let initial = emission(&params, 0) as f64;
        let at_half_life = emission(&params, 1459) as f64;
        let ratio = at_half_life / initial;
        assert!((ratio - 0.5).abs() < 0.0005, "ratio {ratio}");
        // One epoch of decay: exactly ⌊initial·(10^9 − d)/10^9⌋.
        assert_eq!(
            emission(&params, 1),
            323_000_000_000_000 * (1_000_000_000 - 474_970) / 1_000_000_000
        );
    }

    #[test]
    fn emission_never_increases() {
        let params = defaults();
        // Through the whole tail: the emission reaches single ngnk near epoch 70,000, where
        // rounding errors are largest relative to one epoch's decay.
        let mut previous = emission(&params, 0);
        for epoch in 1..90_000 {
            let current = emission(&params, epoch);
            assert!(current <= previous, "epoch {epoch}: {current} > {previous}");
            previous = current;
        }
        assert_eq!(previous, 0);
        assert_eq!(emission(&params, u64::MAX), 0);
    }

    #[test]
    fn zero_decay_is_constant() {
        let params = RewardsParams {
            decay_ppb: 0,
            ..defaults()
        };
        for epoch in [0, 1, 2, 3, 1459, 1_000_000, u64::MAX] {
            assert_eq!(emission(&params, epoch), 323_000_000_000_000);
        }
    }

    #[test]
    fn decay_factor_rounds_down() {
        // 50% decay: 2^-e exactly representable down to 10^-18 scale.
        assert_eq!(decay_factor(500_000_000, 1), FACTOR_SCALE / 2);
        assert_eq!(decay_factor(500_000_000, 10), FACTOR_SCALE / 1024);
        // (1/3)^2 = 0.111… must not round up.
        let third = decay_factor(666_666_667, 1);
        assert_eq!(third, 333_333_333_000_000_000);
        assert_eq!(decay_factor(666_666_667, 2), third * third / FACTOR_SCALE);
        assert_eq!(decay_factor(1_000_000_000, 1), 0);
        assert_eq!(decay_factor(1_000_000_000, 0), FACTOR_SCALE);
    }
}
