//! BLS costs on this machine, printed as a table (median of several runs each):
//! - verifying one signature (a beacon value or an epoch certificate under the group key):
//!   one pairing check, whatever the number of validators behind the group key;
//! - `fast_aggregate_verify` of a signature aggregated from 4 / 100 / 1,000 signers, for
//!   comparison: it sums the keys first, so it grows with the signers;
//! - combining 4 / 100 / 1,000 partial signatures into the group signature (Lagrange at 0
//!   in the exponent), and verifying one partial;
//! - a vote extension's costs: signing 25 slots' partials (`ExtendVote` of one of four
//!   validators with 100 slots) and batch-verifying them in one pairing check
//!   (`VerifyVoteExtension`), beside checking the 25 one by one; computing a group's public
//!   shares once (100 slots, threshold 67).
//!
//! Run: `cargo bench -p gonka-bls-crypto --bench bls` (release; about fifteen seconds).

// A bench measures wall time; the clock lint guards the state machine.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use gonka_bls_crypto::threshold::{
    combine, sign_all, PartialSignature, Polynomial, PublicShares, SecretShare,
};
use gonka_bls_crypto::{aggregate, fast_aggregate_verify, PublicKey, SecretKey, Signature};

/// The median time of `runs` calls of `f`.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// 32 bytes of key seed for signer `i`.
fn seed(i: usize) -> [u8; 32] {
    let mut seed = [7u8; 32];
    seed[..8].copy_from_slice(&(i as u64).to_be_bytes());
    seed
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let msg = b"gonka-bench chain 1 height 1000";
    println!("| operation | signers / slots | median |");
    println!("|---|---|---|");

    let key = SecretKey::from_seed(&[1; 32]);
    let sig = key.sign(msg);
    let public = key.public_key();
    let t = median(51, || assert!(public.verify(msg, &sig)));
    println!(
        "| verify one signature (one pairing check) | any | {} |",
        ms(t)
    );

    for n in [4usize, 100, 1_000] {
        let keys: Vec<SecretKey> = (0..n).map(|i| SecretKey::from_seed(&seed(i))).collect();
        let publics: Vec<PublicKey> = keys.iter().map(SecretKey::public_key).collect();
        let agg = aggregate(&keys.iter().map(|k| k.sign(msg)).collect::<Vec<Signature>>());
        let t = median(21, || assert!(fast_aggregate_verify(&publics, msg, &agg)));
        println!("| fast_aggregate_verify | {n} | {} |", ms(t));
    }

    for n in [4usize, 100, 1_000] {
        let f = Polynomial::from_seed(n, b"bench dealer");
        let partials: Vec<PartialSignature> =
            (1..=n as u64).map(|i| f.share(i).sign(msg)).collect();
        let group = f.commitments();
        let runs = if n >= 1_000 { 5 } else { 21 };
        let t = median(runs, || {
            std::hint::black_box(combine(&partials).unwrap());
        });
        let combined = combine(&partials).unwrap();
        assert!(group.public_key().verify(msg, &combined));
        println!(
            "| combine partial signatures (threshold = all) | {n} | {} |",
            ms(t)
        );
        if n == 4 {
            let t = median(21, || assert!(partials[0].verify(&group, msg)));
            println!("| verify one partial signature | {n} | {} |", ms(t));
        }
    }

    // One validator of four holding 25 of 100 slots (threshold 67).
    let f = Polynomial::from_seed(67, b"bench group");
    let commitments = f.commitments();
    let t = median(5, || {
        std::hint::black_box(PublicShares::new(&commitments, 100));
    });
    println!(
        "| public shares of a group, once per group | 100 | {} |",
        ms(t)
    );
    let public = PublicShares::new(&commitments, 100);
    let mine: Vec<SecretShare> = (1..=25).map(|i| f.share(i)).collect();
    let t = median(11, || {
        std::hint::black_box(sign_all(&mine, msg));
    });
    println!("| sign a vote extension's partials | 25 | {} |", ms(t));
    let partials = sign_all(&mine, msg);
    let t = median(11, || assert!(public.verify_batch(msg, &partials)));
    println!(
        "| verify a vote extension (batch, one pairing check) | 25 | {} |",
        ms(t)
    );
    let t = median(5, || {
        assert!(partials.iter().all(|p| p.verify(&commitments, msg)));
    });
    println!(
        "| verify the same partials one by one (baseline) | 25 | {} |",
        ms(t)
    );
}
