//! Log-probabilities, top-k selection and the seeded sampler.

/// SplitMix64: a small seeded PRNG (no OS randomness), so equal seeds sample equal outputs.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The log-softmax of `logits` (the sum of exponentials accumulated in f64).
pub(crate) fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| ((l - max) as f64).exp()).sum();
    let log_sum = sum.ln() as f32;
    logits.iter().map(|&l| (l - max) - log_sum).collect()
}

/// Whether (id a, value a) ranks before (id b, value b): larger value first, lower id on ties.
fn ranks_before(a: (u32, f32), b: (u32, f32)) -> bool {
    a.1 > b.1 || (a.1 == b.1 && a.0 < b.0)
}

/// The `k` largest values with their indices, largest first, lower index first on ties.
pub(crate) fn top_k(values: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
    if k == 0 {
        return best;
    }
    for (i, &v) in values.iter().enumerate() {
        let item = (i as u32, v);
        if best.len() == k && !ranks_before(item, best[k - 1]) {
            continue;
        }
        let at = best.partition_point(|b| ranks_before(*b, item));
        best.insert(at, item);
        best.truncate(k);
    }
    best
}

/// Samples a token from softmax(logits / temperature), restricted to the smallest set of most
/// likely tokens whose probability reaches `top_p`.
pub(crate) fn sample(logits: &[f32], temperature: f32, top_p: f32, rng: &mut Rng) -> u32 {
    let t = temperature as f64;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let mut probs: Vec<(u32, f64)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (i as u32, ((l as f64 - max) / t).exp()))
        .collect();
    let total: f64 = probs.iter().map(|p| p.1).sum();
    // Most likely first, lower id on ties: a total order, so the cut is deterministic.
    probs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut kept = 0;
    let mut mass = 0.0;
    for p in &probs {
        mass += p.1 / total;
        kept += 1;
        if mass >= top_p as f64 {
            break;
        }
    }
    let probs = &probs[..kept];
    let kept_mass: f64 = probs.iter().map(|p| p.1).sum();
    let mut u = rng.next_f64() * kept_mass;
    for p in probs {
        if u < p.1 {
            return p.0;
        }
        u -= p.1;
    }
    probs[kept - 1].0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_is_sorted_with_ties_by_id() {
        let v = [0.5, 2.0, 2.0, -1.0, 3.0];
        assert_eq!(top_k(&v, 3), vec![(4, 3.0), (1, 2.0), (2, 2.0)]);
        assert_eq!(top_k(&v, 0), vec![]);
        assert_eq!(top_k(&v, 10).len(), 5);
    }

    #[test]
    fn log_softmax_normalises() {
        let lp = log_softmax(&[1.0, 2.0, 3.0, 1000.0]);
        let s: f64 = lp.iter().map(|x| (*x as f64).exp()).sum();
        assert!((s - 1.0).abs() < 1e-6);
        assert!(lp.iter().all(|x| *x <= 0.0));
    }

    #[test]
    fn sampling_is_seeded() {
        let logits: Vec<f32> = (0..100).map(|i| (i % 7) as f32 * 0.3).collect();
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..20)
                .map(|_| sample(&logits, 1.0, 0.9, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        // A tiny nucleus keeps only the most likely token (ties: the lowest id).
        let mut rng = Rng::new(1);
        assert_eq!(sample(&logits, 1.0, 1e-6, &mut rng), 6);
    }
}
