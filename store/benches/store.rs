//! Store throughput: committed writes per second and verified proof reads per second.
//!
//! Run with `cargo bench -p gonka-store`. Plain `std::time`, no harness; figures go to stdout.

// Wall-clock timing is the point of a benchmark; the workspace's ban on `Instant::now` is for
// state-machine code.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use gonka_store::{verify_membership, verify_non_membership, ChangeSet, Store};

const VERSIONS: u64 = 100;
const KEYS_PER_VERSION: u64 = 1_000;
/// Distinct keys; later versions mostly update existing keys, like balances do.
const KEY_SPACE: u64 = 20_000;
const PROOF_READS: u64 = 5_000;

/// Deterministic pseudo-random numbers (a 64-bit LCG), so runs are comparable.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("bank/balance/gonka1{i:038}/ngnk").into_bytes()
}

fn per_second(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(&dir.path().join("bench.redb"))?;
    let mut rng = Lcg(42);

    let change_sets: Vec<ChangeSet> = (0..VERSIONS)
        .map(|_| {
            (0..KEYS_PER_VERSION)
                .map(|_| {
                    let k = key(rng.next() % KEY_SPACE);
                    (k, Some(rng.next().to_be_bytes().to_vec()))
                })
                .collect()
        })
        .collect();
    let writes: u64 = change_sets.iter().map(|cs| cs.len() as u64).sum();

    let mut prepare_time = Duration::ZERO;
    let mut commit_time = Duration::ZERO;
    for (version, change_set) in change_sets.into_iter().enumerate() {
        let start = Instant::now();
        let prepared = store.prepare(version as u64, vec![change_set])?;
        let prepared_at = Instant::now();
        store.commit(prepared)?;
        prepare_time += prepared_at - start;
        commit_time += prepared_at.elapsed();
    }
    let total = prepare_time + commit_time;
    println!(
        "commit: {VERSIONS} versions x {KEYS_PER_VERSION} writes ({writes} writes after de-duplicating \
         keys within a version) in {:.2} s: {:.0} writes/s, {:.1} versions/s \
         (prepare {:.2} s, commit {:.2} s)",
        total.as_secs_f64(),
        per_second(writes, total),
        per_second(VERSIONS, total),
        prepare_time.as_secs_f64(),
        commit_time.as_secs_f64(),
    );

    let latest = store.latest_version()?.expect("committed above");
    let root = store.root_at(latest)?;
    let mut present = 0u64;
    let start = Instant::now();
    for _ in 0..PROOF_READS {
        // Mostly present keys, some absent ones (non-existence proofs).
        let k = key(rng.next() % (KEY_SPACE + KEY_SPACE / 10));
        let (value, proof) = store.get_with_proof(&k, latest)?;
        let ok = match &value {
            Some(v) => {
                present += 1;
                verify_membership(&root, &k, v, &proof)
            }
            None => verify_non_membership(&root, &k, &proof),
        };
        assert!(ok, "proof for key {} failed to verify", hex::encode(&k));
    }
    let elapsed = start.elapsed();
    println!(
        "proofs: {PROOF_READS} get_with_proof + verify ({present} existence, {} non-existence) \
         in {:.2} s: {:.0} proof reads/s",
        PROOF_READS - present,
        elapsed.as_secs_f64(),
        per_second(PROOF_READS, elapsed),
    );

    let start = Instant::now();
    let mut found = 0u64;
    for _ in 0..PROOF_READS * 10 {
        if store.get(&key(rng.next() % KEY_SPACE))?.is_some() {
            found += 1;
        }
    }
    let elapsed = start.elapsed();
    println!(
        "index: {} latest-version gets ({found} found) in {:.2} s: {:.0} gets/s",
        PROOF_READS * 10,
        elapsed.as_secs_f64(),
        per_second(PROOF_READS * 10, elapsed),
    );
    Ok(())
}
