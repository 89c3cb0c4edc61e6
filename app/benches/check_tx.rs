//! Benchmark: the CheckTx cost of a full committed batch (`MsgSettleBatch` with the chain's
//! most requester lines, `max_batch_lines`) from an account that cannot pay — one that does
//! not exist, and one that holds less than the fee — beside, in the same run, two baselines:
//! what the same batch cost before its lines and signature were left to the message's
//! execution (the message decoded, every line's address checked and the G2 point
//! decompressed and subgroup-checked while decoding, before the fee payer was looked up:
//! measured here as exactly that work), and a funded transfer agent's batch,
//! which pays for the BLS check it causes (here refused for its signature after that check).
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

use gonka_client::settlement::msg_settle_batch;
use gonka_proto::settlement::MsgSettleBatch;
use support::{addr, batch_world, register_bls, settle_tx_by, unverifiable_batch, BATCH_TA};

/// Repetitions of the cheap refusals.
const REFUSALS: usize = 2_000;
/// Rounds of the funded batch's check.
const FUNDED: usize = 10;

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
    let tx = world.tx("p0", vec![register_bls("p0")]);
    assert_eq!(world.block(vec![tx]).result(0).code, 0);
    let lines = gonka_settlement::default_params().max_batch_lines as usize;
    let broke_number = world.account(&addr("broke")).account_number;
    let unfunded = settle_tx_by("mallory", 0, &unverifiable_batch("mallory", 1, lines));
    let broke = settle_tx_by(
        "broke",
        broke_number,
        &unverifiable_batch("broke", 1, lines),
    );
    println!(
        "CheckTx of a committed batch of {lines} requester lines ({} bytes), median per call:",
        unfunded.len()
    );

    // Baseline 1: the work decoding did for the unfunded batch before refusing it, before
    // the lines and the signature were left to the message's execution: the whole message
    // decoded, every line's address checked, the signature's G2 point decompressed.
    let batch = unverifiable_batch("mallory", 1, lines);
    let encoded = prost::Message::encode_to_vec(&batch);
    let old_order = per_call(
        || {
            let msg: MsgSettleBatch = prost::Message::decode(encoded.as_slice()).unwrap();
            for line in &msg.requesters {
                gonka_auth::validate_address("requester", &line.requester).unwrap();
            }
            assert!(gonka_bls_crypto::Signature::from_bytes(&msg.host_signature).is_some());
        },
        200,
    );
    show(
        "before: lines decoded and checked, signature decompressed (baseline)",
        old_order,
    );

    // Baseline 2: a funded transfer agent's batch pays its BLS check (and is refused for it,
    // which leaves its sequence where it was: the same tx is checked every round).
    let funded = world.tx(
        BATCH_TA,
        vec![msg_settle_batch(&unverifiable_batch(BATCH_TA, 1, lines))],
    );
    let funded_time = per_call(
        || {
            let check = world.chain.check_tx(funded.clone());
            assert_eq!(
                (check.codespace.as_str(), check.code),
                ("settlement", 9),
                "{}",
                check.log
            );
        },
        FUNDED,
    );
    show(
        "funded transfer agent: its BLS check paid and run (baseline)",
        funded_time,
    );

    for (what, tx, code) in [
        (
            "now: nonexistent account, refused before the signature",
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
