//! Deliberately altered models, for measuring how well logprobs validation tells them from the
//! real one (`examples/validation_rates.rs`). Reachable only through the `testing` feature's
//! [`crate::testing::load`]; a plain [`crate::Llm::load`] loads the file's model unchanged.

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QTensor};
use candle_core::Device;

use crate::sampling::Rng;
use crate::Error;

/// Noise on the quantized weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Perturb {
    /// Seed of the noise: equal seeds give equal models.
    pub seed: u64,
    /// Every block scale `d` of every weight matrix (and of the token embedding, which is also
    /// the output head) is multiplied by `1 + strength · u`, `u` uniform in [-1, 1) drawn per
    /// block: 0.01 is ±1 %. The Q4_1 minimums stay as stored.
    pub strength: f32,
}

/// How a loaded model departs from the file's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Variant {
    /// Noise on the weights' block scales.
    pub perturb: Option<Perturb>,
    /// Transformer layers dropped from the end (a cheaper model: the final norm and the output
    /// head read the residual stream of an earlier layer).
    pub skip_last_layers: usize,
}

/// FNV-1a of a tensor name: each tensor draws its own noise.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// f32 to the nearest f16 (ties to even; beyond the range to ±infinity).
pub(crate) fn f32_to_f16_bits(x: f32) -> u16 {
    let sign = ((x.to_bits() >> 16) & 0x8000) as u16;
    let a = x.abs();
    if a.is_nan() {
        return sign | 0x7e00;
    }
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    if a < 2f32.powi(-14) {
        // Subnormal: a multiple of 2^-24 (0x400 is the smallest normal, encoded the same way).
        return sign | (f64::from(a) * 16_777_216.0).round_ties_even() as u16;
    }
    let bits = a.to_bits();
    let exp = (bits >> 23) as i32 - 127;
    let mant = bits & 0x7f_ffff;
    let mut h = (((exp + 15) as u32) << 10) | (mant >> 13);
    let rest = mant & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && h & 1 == 1) {
        // A carry out of the mantissa raises the exponent, which is the right rounding.
        h += 1;
    }
    sign | h as u16
}

/// `t` with every block scale multiplied by its noise factor (Q4_1 and Q8_0; other types are
/// returned unchanged).
pub(crate) fn perturb_tensor(t: QTensor, name: &str, p: Perturb) -> Result<QTensor, Error> {
    let block_bytes = match t.dtype() {
        GgmlDType::Q4_1 => 20,
        GgmlDType::Q8_0 => 34,
        _ => return Ok(t),
    };
    let mut bytes = t.data()?.into_owned();
    let mut rng = Rng::new(p.seed ^ name_hash(name));
    for blk in bytes.chunks_exact_mut(block_bytes) {
        let u = rng.next_f64() as f32 * 2.0 - 1.0;
        let d = crate::kernels::f16_bits_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
        let scaled = f32_to_f16_bits(d * (1.0 + p.strength * u));
        blk[..2].copy_from_slice(&scaled.to_le_bytes());
    }
    let dims = t.shape().dims().to_vec();
    Ok(qtensor_from_ggml(t.dtype(), &bytes, dims, &Device::Cpu)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::f16_bits_to_f32;

    #[test]
    fn f16_rounding() {
        for h in (0..=u16::MAX).filter(|h| (h >> 10) & 0x1f != 0x1f) {
            let x = f16_bits_to_f32(h);
            assert_eq!(f32_to_f16_bits(x), h, "{h:#06x}");
            // Halfway to the next f16 up (in magnitude) rounds to the even one of the two.
            let next = f16_bits_to_f32(h + 1);
            if (h & 0x7fff) < 0x7bff {
                let mid = (f64::from(x) + f64::from(next)) / 2.0;
                let even = if h & 1 == 0 { h } else { h + 1 };
                assert_eq!(f32_to_f16_bits(mid as f32), even, "midpoint above {h:#06x}");
                let above = (mid + (f64::from(next) - mid) / 4.0) as f32;
                assert_eq!(
                    f32_to_f16_bits(above),
                    h + 1,
                    "above the midpoint of {h:#06x}"
                );
            }
        }
        assert_eq!(f32_to_f16_bits(65520.0), 0x7c00);
        assert_eq!(f32_to_f16_bits(65519.0), 0x7bff);
        assert_eq!(f32_to_f16_bits(-1e9), 0xfc00);
    }
}
