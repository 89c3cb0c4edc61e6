//! State-sync snapshots: export and restore time and size for a state of many keys, and the
//! root and reads of the restored store checked against the original.
//!
//! Run with `cargo bench -p gonka-store --bench snapshot` (`SNAPSHOT_BENCH_KEYS` sets the key
//! count, 200,000 by default). Plain `std::time`, no harness; figures go to stdout.

// Wall-clock timing is the point of a benchmark; the workspace's bans on `Instant::now` and
// environment variables are for state-machine code.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use gonka_store::{ChangeSet, Store, DEFAULT_CHUNK_BYTES};

/// Keys written per version while building the state.
const KEYS_PER_VERSION: u64 = 10_000;

fn key(i: u64) -> Vec<u8> {
    format!("bank/balance/gonka1{i:038}/ngnk").into_bytes()
}

fn main() -> anyhow::Result<()> {
    let keys: u64 = std::env::var("SNAPSHOT_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let dir = tempfile::tempdir()?;
    let original = Store::open(&dir.path().join("original.redb"))?;
    let versions = keys.div_ceil(KEYS_PER_VERSION);
    for version in 0..versions {
        let change_set: ChangeSet = (version * KEYS_PER_VERSION
            ..keys.min((version + 1) * KEYS_PER_VERSION))
            .map(|i| (key(i), Some(i.to_be_bytes().repeat(4))))
            .collect();
        original.commit(original.prepare(version, vec![change_set])?)?;
    }
    let version = versions - 1;
    let root = original.root_at(version)?;

    let started = Instant::now();
    let chunks: Vec<Vec<u8>> = original
        .export(version, DEFAULT_CHUNK_BYTES)?
        .collect::<anyhow::Result<_>>()?;
    let export_time = started.elapsed();
    let bytes: usize = chunks.iter().map(Vec::len).sum();
    let largest = chunks.iter().map(Vec::len).max().unwrap_or(0);

    let restored = Store::open(&dir.path().join("restored.redb"))?;
    let started = Instant::now();
    let mut restore = restored.begin_restore(version, root)?;
    for chunk in &chunks {
        restore.add_chunk(chunk)?;
    }
    restore.finish()?;
    let restore_time = started.elapsed();
    anyhow::ensure!(restored.latest_commit()? == Some((version, root)));
    for i in (0..keys).step_by(997) {
        anyhow::ensure!(restored.get(&key(i))? == original.get(&key(i))?);
    }

    println!(
        "{keys} keys: {} chunks ({:.1} MiB, largest {:.2} MiB); export {export_time:.2?} \
         ({:.0} keys/s), restore with every chunk proved {restore_time:.2?} ({:.0} keys/s)",
        chunks.len(),
        bytes as f64 / (1024.0 * 1024.0),
        largest as f64 / (1024.0 * 1024.0),
        keys as f64 / export_time.as_secs_f64(),
        keys as f64 / restore_time.as_secs_f64(),
    );
    Ok(())
}
