//! Benchmark: the CheckTx cost of a full work batch (the chain's maximum, 100 records) from
//! an account that cannot pay — one that does not exist, and one that holds less than the
//! fee — beside, in the same run, two baselines: what the same batch cost before the ante
//! was reordered (every requester signature verified while decoding, before the fee payer
//! was looked up: measured here as exactly those verifications), and a funded transfer
//! agent's batch of valid records, which pays for every check it causes.
//!
//! Run: `cargo bench -p gonka-app --bench check_tx`

// A benchmark measures wall-clock time; it is not part of the state machine.
#![allow(clippy::disallowed_methods)]
#![allow(dead_code)] // the shared test support has more than this bench uses

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use common::{key, tx_fee};
use gonka_client::tx::msg_submit_work_batch;
use gonka_client::{sign, SignerData};
use gonka_proto::inference::WorkRecord;
use support::{addr, batch_world, exec, work_record, BATCH_MODEL, BATCH_TA};

const MODEL: &str = BATCH_MODEL;
const TA: &str = BATCH_TA;
/// Repetitions of the cheap refusals.
const REFUSALS: usize = 2_000;
/// Funded batches checked (each one accepted, with its own records and sequence).
const FUNDED: usize = 10;

fn records(tag: &str, count: usize) -> Vec<WorkRecord> {
    (0..count)
        .map(|i| {
            let on = exec("p0", "n0", 10);
            work_record("alice", TA, &format!("{tag}-{i}"), MODEL, on, (1, 1), 0)
        })
        .collect()
}

fn batch_by(label: &str, account_number: u64, records: Vec<WorkRecord>) -> Vec<u8> {
    let signer = SignerData {
        chain_id: support::CHAIN_ID.into(),
        account_number,
        sequence: 0,
    };
    let msg = msg_submit_work_batch(&addr(label), records);
    sign(key(label), vec![msg], &signer, tx_fee(), "").unwrap()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn per_call(mut call: impl FnMut(), rounds: usize) -> Duration {
    median(
        (0..rounds)
            .map(|_| {
                let started = Instant::now();
                call();
                started.elapsed()
            })
            .collect(),
    )
}

fn show(what: &str, time: Duration) {
    let micros = time.as_secs_f64() * 1e6;
    println!("  {what:<66} {micros:>10.1} us");
}

fn main() {
    let mut world = batch_world(("broke", 1));
    let max = gonka_inference::default_params().max_records_per_batch as usize;
    let broke_number = world.account(&addr("broke")).account_number;
    let unfunded = batch_by("mallory", 0, records("u", max));
    let broke = batch_by("broke", broke_number, records("b", max));
    println!(
        "CheckTx of a {max}-record work batch ({} bytes), median per call:",
        unfunded.len()
    );

    // Baseline 1: the work the old order did for the unfunded batch before refusing it.
    let batch = records("u", max);
    let old_order = per_call(
        || {
            for record in &batch {
                assert!(gonka_inference::signature_ok(
                    &record.requester_pubkey,
                    &record.request_hash,
                    &record.requester_signature,
                ));
            }
        },
        20,
    );
    show(
        &format!("before: {max} requester signatures verified, then refused (baseline)"),
        old_order,
    );

    // Baseline 2: a funded transfer agent's valid batch, every record checked and stored.
    let funded: Vec<Vec<u8>> = (0..FUNDED)
        .map(|i| {
            world.tx(
                TA,
                vec![msg_submit_work_batch(
                    &addr(TA),
                    records(&format!("f{i}"), max),
                )],
            )
        })
        .collect();
    let mut funded = funded.into_iter();
    let funded_time = per_call(
        || {
            let check = world.chain.check_tx(funded.next().unwrap());
            assert_eq!(check.code, 0, "{}", check.log);
        },
        FUNDED,
    );
    show(
        "funded transfer agent: every record checked (baseline)",
        funded_time,
    );

    for (what, tx, code) in [
        (
            "now: nonexistent account, refused before any record",
            &unfunded,
            11,
        ),
        (
            "now: account holding less than the fee, refused likewise",
            &broke,
            4,
        ),
    ] {
        let time = per_call(
            || {
                let check = world.chain.check_tx(tx.clone());
                assert_eq!(check.code, code, "{}", check.log);
            },
            REFUSALS,
        );
        show(what, time);
    }
}
