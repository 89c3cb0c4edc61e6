//! The Sprint power rule as a pure function (see the crate docs for the rule in words).

use gonka_sdk::{ErrorCode, Result};

use crate::StakeError;
use gonka_sdk::PPM;

/// Fixed-point unit of weights: 10^12 parts of the whole.
const WEIGHT_SCALE: u128 = 1_000_000_000_000;

/// Total voting power handed out each epoch.
pub const TOTAL_POWER: u128 = 1_000_000;

/// One eligible participant's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Bonded stake in ngnk (positive).
    pub stake: u128,
    /// Verified work units in the closing epoch.
    pub work: u64,
}

fn share(part: u128, total: u128) -> Result<u128> {
    // Floor; `total` is positive whenever this is called.
    part.checked_mul(WEIGHT_SCALE)
        .map(|scaled| scaled / total)
        .ok_or_else(|| {
            StakeError::InvalidParams.err(format!(
                "stake {part} is too large for the power computation"
            ))
        })
}

/// Powers for `candidates` (same order), summing to at most [`TOTAL_POWER`].
pub fn compute(
    candidates: &[Candidate],
    stake_weight_ppm: u64,
    max_share_ppm: u64,
) -> Result<Vec<i64>> {
    let total_stake: u128 = candidates.iter().map(|c| c.stake).sum();
    let total_work: u128 = candidates.iter().map(|c| u128::from(c.work)).sum();
    if total_stake == 0 {
        return Ok(vec![0; candidates.len()]);
    }
    let (w, ppm) = (u128::from(stake_weight_ppm), u128::from(PPM));
    let mut weights = candidates
        .iter()
        .map(|c| {
            let stake_share = share(c.stake, total_stake)?;
            if total_work == 0 {
                return Ok(stake_share);
            }
            let work_share = share(u128::from(c.work), total_work)?;
            Ok((w * stake_share + (ppm - w) * work_share) / ppm)
        })
        .collect::<Result<Vec<u128>>>()?;
    let total: u128 = weights.iter().sum();
    if total == 0 {
        return Ok(vec![0; candidates.len()]);
    }
    if candidates.len() as u128 * u128::from(max_share_ppm) >= ppm {
        apply_cap(&mut weights, total * u128::from(max_share_ppm) / ppm);
    }
    Ok(weights
        .iter()
        .map(|weight| (weight * TOTAL_POWER / total) as i64)
        .collect())
}

/// Water-filling: weights above `cap` are set to it and the excess re-spread over the
/// uncapped weights in proportion to them (floor), until none exceeds the cap.
fn apply_cap(weights: &mut [u128], cap: u128) {
    let total: u128 = weights.iter().sum();
    let mut capped = vec![false; weights.len()];
    // Each round caps at least one more weight, so this ends within `len` rounds.
    for _ in 0..weights.len() {
        let mut newly_capped = false;
        for (weight, is_capped) in weights.iter_mut().zip(capped.iter_mut()) {
            if !*is_capped && *weight >= cap {
                *weight = cap;
                *is_capped = true;
                newly_capped = true;
            }
        }
        if !newly_capped {
            return;
        }
        let capped_sum: u128 = cap * capped.iter().filter(|c| **c).count() as u128;
        let uncapped_sum: u128 = weights
            .iter()
            .zip(&capped)
            .filter(|(_, c)| !**c)
            .map(|(w, _)| *w)
            .sum();
        if uncapped_sum == 0 {
            return;
        }
        let room = total.saturating_sub(capped_sum);
        for (weight, is_capped) in weights.iter_mut().zip(&capped) {
            if !*is_capped {
                *weight = *weight * room / uncapped_sum;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(stake: u128, work: u64) -> Candidate {
        Candidate { stake, work }
    }

    #[test]
    fn stake_only_when_no_work() {
        let powers = compute(&[c(100, 0), c(300, 0)], 100_000, PPM).unwrap();
        assert_eq!(powers, vec![250_000, 750_000]);
    }

    #[test]
    fn blend_weights_work_over_stake() {
        // Equal stake; all work by the second: 10% * 1/2 = 5%, 10% * 1/2 + 90% = 95%.
        let powers = compute(&[c(100, 0), c(100, 50)], 100_000, PPM).unwrap();
        assert_eq!(powers, vec![50_000, 950_000]);
    }

    #[test]
    fn cap_spreads_the_excess_in_proportion() {
        // Work 60/20/10/5/5 with no stake weight, cap 30%: 60 is capped, the excess goes
        // 20:10:5:5, which pushes 20 over the cap too; the rest goes 10:5:5.
        let work = [60, 20, 10, 5, 5].map(|w| c(1, w));
        let powers = compute(&work, 0, 300_000).unwrap();
        assert_eq!(powers, vec![300_000, 300_000, 200_000, 100_000, 100_000]);
    }

    #[test]
    fn cap_cascades_and_is_skipped_when_it_cannot_hold() {
        let powers = compute(&[c(1, 50), c(1, 40), c(1, 5), c(1, 5)], 0, 300_000).unwrap();
        assert_eq!(&powers[..2], &[300_000, 300_000]);
        assert_eq!(powers[2], powers[3]);
        // Two validators cannot both stay under 30%: the cap is not applied.
        let two = compute(&[c(1, 90), c(1, 10)], 0, 300_000).unwrap();
        assert_eq!(two, vec![900_000, 100_000]);
    }
}
