//! The pure rules of sampling, assignment and committee selection (see the crate docs for
//! them in words). Everything here is integer arithmetic over chain data, so every node
//! computes the same answer.

use gonka_proto::disputes::Params;
use sha2::{Digest, Sha256};

use gonka_sdk::PPM;

/// Domain separator of committee seeds.
pub const COMMITTEE_DOMAIN: &[u8] = b"gonka/dispute-committee/v1";

/// The sampling rate, in ppm, of an executor with `clean_streak` passed validations since
/// its last fault: `max − ⌊(max − min)·min(clean_streak, decay_validations)/decay_validations⌋`.
/// Flooring the decrease rounds the rate up, so it never falls below the linear rule.
pub fn sample_rate_ppm(params: &Params, clean_streak: u64) -> u64 {
    let span = u128::from(params.max_sample_ppm.saturating_sub(params.min_sample_ppm));
    let decay = params.decay_validations.max(1);
    let steps = u128::from(clean_streak.min(decay));
    // Floor; the quotient is at most `span`, which fits in u64.
    let decrease = (span * steps / u128::from(decay)) as u64;
    params.max_sample_ppm - decrease
}

/// The seed of a record's sampling: SHA-256(the validation-sampling seed of the height that
/// stored it (x/bls) ‖ the inference id as ASCII).
pub fn record_seed(height_seed: &[u8; 32], inference_id: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(height_seed);
    hasher.update(inference_id.as_bytes());
    hasher.finalize().into()
}

/// The chance (ppm) to sample a record at `rate_ppm` overall when it reached the chain only
/// with chance `sampled_ppm` (a sampled leaf of a committed batch; 0: every record reaches
/// it): `rate / sampled`, capped at certainty. A leaf x/settlement sampled at 10% of an
/// executor whose rate is 1% is validated with chance 10%, so 1% of its work overall.
pub fn given_sampled(rate_ppm: u64, sampled_ppm: u64) -> u64 {
    if sampled_ppm == 0 {
        return rate_ppm;
    }
    let chance = u128::from(rate_ppm) * u128::from(PPM) / u128::from(sampled_ppm);
    u64::try_from(chance).unwrap_or(PPM).min(PPM)
}

/// Whether a record with `seed` is sampled at `rate_ppm`: the seed's first 8 bytes (u64
/// big-endian) modulo 10^6 fall below the rate. (The modulo bias is below 10^-13.)
pub fn is_sampled(seed: &[u8; 32], rate_ppm: u64) -> bool {
    draw(seed, 0) % PPM < rate_ppm
}

/// The 8 bytes at `offset` of `seed` as a u64, big-endian.
fn draw(seed: &[u8; 32], offset: usize) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&seed[offset..offset + 8]);
    u64::from_be_bytes(bytes)
}

/// Index into `candidates` (`(address, weight)`, weights positive) chosen with probability
/// proportional to weight by `value`: `value mod Σweights` falls into the candidate's slice
/// of the cumulative sum, in list order. `None` if the list is empty.
pub fn pick_weighted(value: u64, candidates: &[(String, u64)]) -> Option<usize> {
    let total: u128 = candidates.iter().map(|(_, w)| u128::from(*w)).sum();
    if total == 0 {
        return None;
    }
    let mut point = u128::from(value) % total;
    for (index, (_, weight)) in candidates.iter().enumerate() {
        let weight = u128::from(*weight);
        if point < weight {
            return Some(index);
        }
        point -= weight;
    }
    None
}

/// The validator assigned to re-execute a sampled record: drawn by power from
/// `candidates` (ascending by address) with the seed's bytes 8..16.
pub fn assign_validator(seed: &[u8; 32], candidates: &[(String, u64)]) -> Option<String> {
    pick_weighted(draw(seed, 8), candidates).map(|i| candidates[i].0.clone())
}

/// The committee seed of dispute `id`: SHA-256(domain ‖ the dispute-committee seed of the
/// height it was opened at (x/bls) ‖ id (u64 BE) ‖ inference id).
pub fn committee_seed(height_seed: &[u8; 32], id: u64, inference_id: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(COMMITTEE_DOMAIN);
    hasher.update(height_seed);
    hasher.update(id.to_be_bytes());
    hasher.update(inference_id.as_bytes());
    hasher.finalize().into()
}

/// A committee of at most `size` members drawn by power without replacement: draw `i` uses
/// the first 8 bytes of SHA-256(seed ‖ i (u64 BE)) over the members not yet drawn. With
/// fewer candidates than `size`, every candidate is drawn and, if that is an even number,
/// the last one drawn is dropped, so the committee is always odd (or empty).
pub fn committee(seed: &[u8; 32], mut candidates: Vec<(String, u64)>, size: u64) -> Vec<String> {
    let mut members = Vec::new();
    for i in 0..size {
        let mut hasher = Sha256::new();
        hasher.update(seed);
        hasher.update(i.to_be_bytes());
        let round: [u8; 32] = hasher.finalize().into();
        let Some(index) = pick_weighted(draw(&round, 0), &candidates) else {
            break;
        };
        members.push(candidates.remove(index).0);
    }
    if members.len() % 2 == 0 {
        members.pop();
    }
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_presampled_record_is_sampled_so_the_overall_rate_is_the_executors() {
        assert_eq!(
            given_sampled(10_000, 0),
            10_000,
            "records settled alone: the rate"
        );
        assert_eq!(
            given_sampled(10_000, 100_000),
            100_000,
            "1% of work = 10% of a 10% sample"
        );
        assert_eq!(
            given_sampled(100_000, 100_000),
            PPM,
            "every sampled leaf at the ceiling"
        );
        assert_eq!(given_sampled(100_000, 50_000), PPM, "capped at certainty");
        assert_eq!(given_sampled(3, 7), 428_571, "floored");
    }
    use crate::default_params;

    fn named(weights: &[u64]) -> Vec<(String, u64)> {
        weights
            .iter()
            .enumerate()
            .map(|(i, w)| (format!("v{i}"), *w))
            .collect()
    }

    #[test]
    fn rate_decays_linearly_from_max_to_min_and_stays() {
        let params = default_params(); // 10% → 1% over 20 clean validations
        assert_eq!(sample_rate_ppm(&params, 0), 100_000);
        assert_eq!(sample_rate_ppm(&params, 1), 95_500);
        assert_eq!(sample_rate_ppm(&params, 10), 55_000);
        assert_eq!(sample_rate_ppm(&params, 20), 10_000);
        assert_eq!(sample_rate_ppm(&params, 1_000), 10_000);
        let odd = Params {
            decay_validations: 3,
            min_sample_ppm: 0,
            max_sample_ppm: 100,
            ..params
        };
        // 100 − ⌊100·1/3⌋ = 67: the decrease is floored, so the rate rounds up.
        assert_eq!(sample_rate_ppm(&odd, 1), 67);
    }

    #[test]
    fn sampling_follows_the_rate_and_the_seed() {
        let hash = [7; 32];
        let sampled = (0..20_000)
            .filter(|i| is_sampled(&record_seed(&hash, &format!("{i:064x}")), 100_000))
            .count();
        // Binomial(20,000, 0.1): mean 2,000, σ ≈ 42; allow 4σ.
        assert!((1_832..=2_168).contains(&sampled), "{sampled}");
        let seed = record_seed(&hash, "ab");
        assert!(is_sampled(&seed, PPM));
        assert!(!is_sampled(&seed, 0));
        assert_ne!(record_seed(&[8; 32], "ab"), seed);
    }

    #[test]
    fn weighted_pick_walks_the_cumulative_sum() {
        let candidates = named(&[1, 3, 6]);
        let picks: Vec<_> = (0..10)
            .map(|v| pick_weighted(v, &candidates).unwrap())
            .collect();
        assert_eq!(picks, [0, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
        assert_eq!(pick_weighted(10, &candidates), Some(0));
        assert_eq!(pick_weighted(5, &[]), None);
    }

    #[test]
    fn committee_is_odd_distinct_and_reproducible() {
        let seed = committee_seed(&[1; 32], 4, "ab");
        let five = committee(&seed, named(&[5, 5, 5, 5, 5]), 3);
        assert_eq!(five.len(), 3);
        let mut distinct = five.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 3);
        assert_eq!(five, committee(&seed, named(&[5, 5, 5, 5, 5]), 3));
        // Fewer candidates than seats: all of them, minus one if that is even.
        assert_eq!(committee(&seed, named(&[1, 1]), 3).len(), 1);
        assert_eq!(committee(&seed, named(&[1, 1, 1]), 5).len(), 3);
        assert!(committee(&seed, Vec::new(), 3).is_empty());
    }
}
