//! Scored outputs of inexact models: what "logprobs" validation commits to, reveals and
//! compares, defined once here so the ML node, the transfer agent, the validator and the chain
//! cannot drift apart.
//!
//! A real model on real hardware is not bit-exact across implementations, so a re-execution
//! of a "logprobs" model (`gonka.inference.v1.Model.validation`) is not compared by the hash
//! of its text. Instead the executor commits, per output position, the token, its
//! log-probability and the model's top-k alternatives ([`ScoredOutput`], log-probabilities as
//! `round(ln p · 2^16)`, gonka-llm's `logprob_to_fixed`); the validator receives the prompt and the output tokens (never the
//! log-probabilities), scores those tokens with the model (one teacher-forced pass) and
//! submits its own scores; after the reveal the chain measures the mean absolute difference
//! per compared log-probability ([`compare`]) against the model's threshold, and the worst
//! single position against its position threshold ([`Distance::agrees`]).
//!
//! Commitment (the 32 bytes in the receipt and the record's `output_commitment`):
//!
//! ```text
//! tokens_hash = SHA-256("gonka/output/tokens/v1"   ‖ n (u32) ‖ token (u32) × n)
//! seal        = SHA-256("gonka/output/logprobs/v1" ‖ salt (32) ‖ prompt tokens (u64) ‖ n (u32) ‖
//!                       per position: logprob (i32) ‖ k (u32) ‖ (token (u32) ‖ logprob (i32)) × k)
//! commitment  = SHA-256("gonka/output/scored/v1"   ‖ tokens_hash ‖ seal)
//! ```
//!
//! integers big-endian. The transfer agent gives a validator the tokens and the seal: the
//! validator checks they open the record's commitment before it spends a forward pass, so a
//! transfer agent cannot make an honest validator score tokens the executor never committed,
//! and the salted seal says nothing of the executor's log-probabilities.

use sha2::{Digest, Sha256};

use crate::disputes::{ScoredOutput, ScoredToken};

/// Domain of the hash of a scored output's tokens.
pub const TOKENS_DOMAIN: &[u8] = b"gonka/output/tokens/v1";
/// Domain of the salted seal over a scored output's log-probabilities.
pub const LOGPROBS_DOMAIN: &[u8] = b"gonka/output/logprobs/v1";
/// Domain of the output commitment of a "logprobs" model.
pub const SCORED_OUTPUT_DOMAIN: &[u8] = b"gonka/output/scored/v1";

/// Most alternatives per position a model may ask for (OpenAI's `top_logprobs` bound).
pub const MAX_TOP_K: u32 = 20;
/// Most positions a scored output may carry (a bound on every message that holds one; the
/// record's own token bound is checked against the chain's parameters).
pub const MAX_POSITIONS: usize = 8192;

/// The hash of the output tokens.
pub fn tokens_hash(tokens: impl ExactSizeIterator<Item = u32>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(TOKENS_DOMAIN);
    h.update(len_u32(tokens.len()).to_be_bytes());
    for token in tokens {
        h.update(token.to_be_bytes());
    }
    h.finalize().into()
}

/// The tokens of a scored output, in order.
pub fn tokens_of(output: &ScoredOutput) -> impl ExactSizeIterator<Item = u32> + '_ {
    output.positions.iter().map(|p| p.token)
}

/// The salted seal over the prompt token count and every position's log-probabilities.
pub fn logprobs_seal(salt: &[u8; 32], output: &ScoredOutput) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(LOGPROBS_DOMAIN);
    h.update(salt);
    h.update(output.prompt_tokens.to_be_bytes());
    h.update(len_u32(output.positions.len()).to_be_bytes());
    for p in &output.positions {
        h.update(p.logprob.to_be_bytes());
        h.update(len_u32(p.top_tokens.len()).to_be_bytes());
        for (token, logprob) in p.top_tokens.iter().zip(&p.top_logprobs) {
            h.update(token.to_be_bytes());
            h.update(logprob.to_be_bytes());
        }
    }
    h.finalize().into()
}

/// The output commitment from the tokens' hash and the seal (what a validator checks).
pub fn commitment_of(tokens_hash: &[u8; 32], seal: &[u8; 32]) -> [u8; 32] {
    Sha256::new()
        .chain_update(SCORED_OUTPUT_DOMAIN)
        .chain_update(tokens_hash)
        .chain_update(seal)
        .finalize()
        .into()
}

/// The output commitment of `output` under `salt` (what the executor signs in its receipt and
/// the chain recomputes at the reveal).
pub fn output_commitment(salt: &[u8; 32], output: &ScoredOutput) -> [u8; 32] {
    commitment_of(
        &tokens_hash(tokens_of(output)),
        &logprobs_seal(salt, output),
    )
}

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// Checks what can be checked of a scored output without the chain: 1 to [`MAX_POSITIONS`]
/// positions, each with 1 to [`MAX_TOP_K`] alternatives, as many log-probabilities as
/// tokens, the alternatives distinct and most likely first, every log-probability ≤ 0.
/// `field` names the message field in the error.
pub fn check_shape(field: &str, output: &ScoredOutput) -> Result<(), String> {
    let n = output.positions.len();
    if n == 0 || n > MAX_POSITIONS {
        return Err(format!(
            "{field} must carry 1 to {MAX_POSITIONS} positions, found {n}"
        ));
    }
    for (i, p) in output.positions.iter().enumerate() {
        let k = p.top_tokens.len();
        if k == 0 || k > MAX_TOP_K as usize || p.top_logprobs.len() != k {
            return Err(format!(
                "{field}.positions[{i}] must carry 1 to {MAX_TOP_K} top tokens and as many top logprobs, found {k} and {}",
                p.top_logprobs.len()
            ));
        }
        if p.logprob > 0 || p.top_logprobs.iter().any(|lp| *lp > 0) {
            return Err(format!(
                "{field}.positions[{i}]: log-probabilities are at most 0"
            ));
        }
        if p.top_logprobs.windows(2).any(|w| w[0] < w[1]) {
            return Err(format!(
                "{field}.positions[{i}]: top logprobs must be most likely first"
            ));
        }
        let mut tokens = p.top_tokens.clone();
        tokens.sort_unstable();
        if tokens.windows(2).any(|w| w[0] == w[1]) {
            return Err(format!(
                "{field}.positions[{i}]: top tokens must be distinct"
            ));
        }
    }
    Ok(())
}

/// Checks a shape-checked scored output against what the chain knows of the record and its
/// model: `k` alternatives at every position, and as many positions as completion tokens (one
/// more when the last is the stop token).
pub fn check_against(
    field: &str,
    output: &ScoredOutput,
    top_k: u32,
    completion_tokens: u64,
) -> Result<(), String> {
    let n = output.positions.len() as u64;
    if n != completion_tokens && n != completion_tokens.saturating_add(1) {
        return Err(format!(
            "{field} carries {n} positions for a record of {completion_tokens} completion tokens (expected {completion_tokens}, or one more for the stop token)"
        ));
    }
    if let Some(i) = output
        .positions
        .iter()
        .position(|p| p.top_tokens.len() != top_k as usize)
    {
        return Err(format!(
            "{field}.positions[{i}] carries {} top tokens, the model's logprob_top_k is {top_k}",
            output.positions[i].top_tokens.len()
        ));
    }
    Ok(())
}

/// How far one side's scores are from the other's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Distance {
    /// Sum of the absolute differences, in 2^-16 nats.
    pub total: u128,
    /// Log-probabilities compared.
    pub entries: u64,
    /// The largest sum at one position, in 2^-16 nats.
    pub worst_position: u64,
}

impl Distance {
    /// The mean absolute difference per compared log-probability, in 2^-16 nats (rounded
    /// down).
    pub fn mean(&self) -> u64 {
        if self.entries == 0 {
            0
        } else {
            u64::try_from(self.total / u128::from(self.entries)).unwrap_or(u64::MAX)
        }
    }

    /// Whether the mean is within `threshold` (2^-16 nats), compared without division.
    pub fn within(&self, threshold: u64) -> bool {
        self.total <= u128::from(threshold) * u128::from(self.entries)
    }

    /// Whether both scorings agree under a model's bounds: the mean within `threshold` and,
    /// unless `position_threshold` is 0, no single position's sum above it (2^-16 nats).
    pub fn agrees(&self, threshold: u64, position_threshold: u64) -> bool {
        self.within(threshold)
            && (position_threshold == 0 || self.worst_position <= position_threshold)
    }
}

/// Compares two scorings of the same output: `None` when they are not of the same tokens or
/// prompt (the scorer scored something else: no agreement), else their [`Distance`].
///
/// Per position, with `a` and `b` the two sides: the difference of the token's own
/// log-probabilities, plus, for every alternative either side lists, the difference between
/// its log-probability there and the other side's for the same token. A token the other side
/// does not list counts at that side's least listed log-probability (its true value is at most
/// that). Both directions count, so neither side can hide a likely token by leaving it out.
pub fn compare(a: &ScoredOutput, b: &ScoredOutput) -> Option<Distance> {
    if a.prompt_tokens != b.prompt_tokens || a.positions.len() != b.positions.len() {
        return None;
    }
    let mut distance = Distance::default();
    for (pa, pb) in a.positions.iter().zip(&b.positions) {
        if pa.token != pb.token {
            return None;
        }
        let mut at = diff(pa.logprob, pb.logprob);
        let mut entries = 1u64;
        for (one, other) in [(pa, pb), (pb, pa)] {
            for (token, lp) in one.top_tokens.iter().zip(&one.top_logprobs) {
                at += diff(*lp, lookup(other, *token));
                entries += 1;
            }
        }
        distance.total += u128::from(at);
        distance.entries += entries;
        distance.worst_position = distance.worst_position.max(at);
    }
    Some(distance)
}

/// `side`'s log-probability of `token` at its position: listed, its own token, or at most its
/// least listed one.
fn lookup(side: &ScoredToken, token: u32) -> i32 {
    if let Some(i) = side.top_tokens.iter().position(|t| *t == token) {
        return side.top_logprobs[i];
    }
    if token == side.token {
        return side.logprob;
    }
    side.top_logprobs.last().copied().unwrap_or(side.logprob)
}

fn diff(a: i32, b: i32) -> u64 {
    (i64::from(a) - i64::from(b)).unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn position(token: u32, logprob: i32, top: &[(u32, i32)]) -> ScoredToken {
        ScoredToken {
            token,
            logprob,
            top_tokens: top.iter().map(|t| t.0).collect(),
            top_logprobs: top.iter().map(|t| t.1).collect(),
        }
    }

    fn output(positions: Vec<ScoredToken>) -> ScoredOutput {
        ScoredOutput {
            prompt_tokens: 9,
            positions,
        }
    }

    fn honest() -> ScoredOutput {
        output(vec![
            position(5, -100, &[(5, -100), (7, -3000), (1, -9000)]),
            position(2, -20000, &[(3, -500), (2, -20000), (4, -40000)]),
        ])
    }

    #[test]
    fn the_commitment_binds_salt_tokens_counts_and_every_logprob() {
        let salt = [7; 32];
        let base = honest();
        let c = output_commitment(&salt, &base);
        assert_eq!(
            c,
            commitment_of(&tokens_hash(tokens_of(&base)), &logprobs_seal(&salt, &base))
        );
        assert_ne!(c, output_commitment(&[8; 32], &base), "another salt");
        let mut token = base.clone();
        token.positions[1].token = 3;
        let mut lp = base.clone();
        lp.positions[0].top_logprobs[2] = -9001;
        let mut prompt = base.clone();
        prompt.prompt_tokens = 10;
        let mut shorter = base.clone();
        shorter.positions[1].top_tokens.pop();
        shorter.positions[1].top_logprobs.pop();
        for other in [token, lp, prompt, shorter] {
            assert_ne!(c, output_commitment(&salt, &other), "{other:?}");
        }
        // The seal does not depend on the tokens, the tokens' hash not on the logprobs.
        let mut only_lp = base.clone();
        only_lp.positions[0].logprob = -101;
        assert_eq!(
            tokens_hash(tokens_of(&base)),
            tokens_hash(tokens_of(&only_lp))
        );
    }

    #[test]
    fn identical_scores_are_at_distance_zero_and_counted_per_entry() {
        let d = compare(&honest(), &honest()).unwrap();
        assert_eq!(d.total, 0);
        // Per position: the token's own logprob plus 3 alternatives each way.
        assert_eq!(d.entries, 2 * (1 + 3 + 3));
        assert!(d.within(0));
    }

    #[test]
    fn differences_count_both_ways_and_missing_tokens_at_the_least_listed() {
        let a = honest();
        let mut b = honest();
        // b lists token 8 instead of token 1 at position 0: a's token 1 (-9000) is compared
        // with b's least listed (-8000) and b's token 8 (-8000) with a's least (-9000).
        b.positions[0].top_tokens[2] = 8;
        b.positions[0].top_logprobs[2] = -8000;
        let d = compare(&a, &b).unwrap();
        assert_eq!(d.total, 2000);
        assert_eq!(d.worst_position, 2000);
        assert_eq!(d.mean(), 2000 / 14);
        assert!(d.within(143));
        assert!(!d.within(142));
        // One position's sum is bounded on its own.
        assert!(d.agrees(143, 0) && d.agrees(143, 2000));
        assert!(!d.agrees(143, 1999));
        assert!(!d.agrees(142, 2000));
    }

    #[test]
    fn other_tokens_or_prompt_counts_never_agree() {
        let mut other_token = honest();
        other_token.positions[0].token = 6;
        assert_eq!(compare(&honest(), &other_token), None);
        let mut prompt = honest();
        prompt.prompt_tokens = 8;
        assert_eq!(compare(&honest(), &prompt), None);
        let mut longer = honest();
        longer.positions.push(position(1, 0, &[(1, 0)]));
        assert_eq!(compare(&honest(), &longer), None);
    }

    #[test]
    fn shapes_are_checked_before_anything_is_compared() {
        assert!(check_shape("s", &honest()).is_ok());
        let cases: Vec<(ScoredOutput, &str)> = vec![
            (output(vec![]), "1 to 8192 positions"),
            (output(vec![position(1, 0, &[])]), "1 to 20 top tokens"),
            (output(vec![position(1, 5, &[(1, 0)])]), "at most 0"),
            (
                output(vec![position(1, -5, &[(1, -5), (2, -1)])]),
                "most likely first",
            ),
            (
                output(vec![position(1, -5, &[(1, -5), (1, -5)])]),
                "distinct",
            ),
        ];
        for (bad, why) in cases {
            let err = check_shape("s", &bad).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
        let mut ragged = honest();
        ragged.positions[0].top_logprobs.pop();
        assert!(check_shape("s", &ragged).unwrap_err().contains("as many"));
        assert!(check_against("s", &honest(), 3, 2).is_ok());
        assert!(check_against("s", &honest(), 3, 1).is_ok(), "stop token");
        assert!(check_against("s", &honest(), 3, 3).is_err());
        assert!(check_against("s", &honest(), 4, 2).is_err());
    }
}
