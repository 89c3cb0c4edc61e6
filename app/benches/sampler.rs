//! Benchmark: the disputes sampler's per-block work as an epoch fills up. Each block stores
//! 10 new work records; the sampler (x/disputes `begin_block` and `end_block`) must cost the
//! same whether the epoch already holds 100 or 100,000 records, because x/inference queues
//! each record as it stores it and the sampler drains only that queue. Baseline in the same
//! run: storing the block's 10 records (`put_record`), the block's own work. For scale, the
//! last column times reading the epoch's records (`records_of_epoch`), the read the sampler
//! made every block before the queue (a lower bound of its old cost).
//!
//! Run: `cargo bench -p gonka-app --bench sampler`

// A benchmark measures wall-clock time; it is not part of the state machine.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use gonka_inference::{InferenceRead, InferenceWrite};
use gonka_proto::inference::{StoredRecord, WorkRecord};
use gonka_sdk::{BlockContext, Delta, MemoryState, Module};

/// Records the block under test stores.
const NEW_PER_BLOCK: usize = 10;
/// Blocks timed per size.
const BLOCKS: usize = 20;

fn record(n: usize) -> StoredRecord {
    StoredRecord {
        record: Some(WorkRecord {
            inference_id: format!("{n:064x}"),
            executor_node: "node-0".into(),
            model: "gonka/reference-1".into(),
            ..Default::default()
        }),
        transfer_agent: "gonka1ta".into(),
        executor_host: "gonka1host".into(),
        cost: "100".into(),
        epoch: 0,
        height: 1,
        sampled_ppm: 0,
    }
}

/// An epoch already holding `records` sampled records (the queue drained, as after their
/// blocks).
fn epoch_with(records: usize) -> MemoryState {
    let empty = MemoryState::default();
    let mut state = Delta::new(&empty);
    for n in 0..records {
        state.put_record(&record(n));
    }
    state.take_new_records().unwrap();
    MemoryState::from_changes(state.into_parts().0)
}

fn main() {
    let sampler = gonka_disputes::Disputes;
    println!(
        "per block of {NEW_PER_BLOCK} new records, median of {BLOCKS} blocks (µs):\n  records in epoch   store the block's records (baseline)   sampler begin+end_block   read the epoch's records (old sampler)"
    );
    for records in [100, 1_000, 10_000, 100_000] {
        let committed = epoch_with(records);
        let (mut store_us, mut sample_us, mut scan_us) = (Vec::new(), Vec::new(), Vec::new());
        for block in 0..BLOCKS {
            let mut state = Delta::new(&committed);
            let started = Instant::now();
            for n in 0..NEW_PER_BLOCK {
                state.put_record(&record(records + block * NEW_PER_BLOCK + n));
            }
            store_us.push(started.elapsed().as_secs_f64() * 1e6);
            let ctx = BlockContext {
                chain_id: "bench".into(),
                height: 2 + block as u64,
                time_seconds: 0,
                time_nanos: 0,
                block_hash: [block as u8; 32],
                beacon_tx: None,
                ..BlockContext::default()
            };
            let started = Instant::now();
            sampler.end_block(&ctx, &mut state).unwrap();
            gonka_bls::Bls.begin_block(&ctx, &mut state).unwrap();
            sampler.begin_block(&ctx, &mut state).unwrap();
            sample_us.push(started.elapsed().as_secs_f64() * 1e6);
        }
        // Timed apart, so the large reads do not disturb the timings above.
        for _ in 0..5 {
            let started = Instant::now();
            let all = committed.records_of_epoch(0).unwrap();
            scan_us.push(started.elapsed().as_secs_f64() * 1e6);
            assert_eq!(all.len(), records);
        }
        println!(
            "  {records:>16}   {:>37.1}   {:>23.1}   {:>38.1}",
            median(&mut store_us),
            median(&mut sample_us),
            median(&mut scan_us)
        );
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
