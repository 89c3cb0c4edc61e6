//! Benchmark: the on-chain cost of one key generation round for 4, 20 and 100 validators
//! (equal power, 100 slots, every validator deals honestly): the bytes of the dealings on
//! chain, the FinalizeBlock+Commit time of the block carrying them and of the block that
//! finalizes the round (summing the qualified dealers' commitments), beside an empty block
//! of the same chain. Runs the real modules in the in-process harness, in memory where
//! `/dev/shm` exists.
//!
//! Run: `cargo bench -p gonka-app --bench dkg`

// A benchmark measures wall-clock time; it is not part of the state machine.
#![allow(clippy::disallowed_methods)]

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use gonka_bls_crypto::threshold::Polynomial;
use gonka_bls_crypto::SecretKey;
use gonka_client::bls::msg_register_bls_key;
use gonka_proto::bls as pb;
use gonka_proto::query::bls as q;
use support::{addr, dkg_dealing, Setup, World, CHAIN_ID};

/// Times one block of `txs`.
fn timed(w: &mut World, txs: Vec<Vec<u8>>) -> (Duration, support::Block) {
    let start = Instant::now();
    let block = w.block(txs);
    (start.elapsed(), block)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    println!("| validators | slots / threshold | dealing bytes (one / all) | block of the dealings | finalizing block | empty block |");
    println!("|---|---|---|---|---|---|");
    for n in [4usize, 20, 100] {
        let mut setup = Setup::new(n, 1_000_000);
        setup.epoch_length = 100;
        let mut w = World::with_genesis(setup, |state| {
            state["bls"] = serde_json::json!({"params": {"dkg_slots": 100, "dkg_deal_blocks": 2,
                "dkg_complaint_blocks": 1, "dkg_reveal_blocks": 1, "beacon_keep_blocks": 1000}});
        });
        let labels: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
        for chunk in labels.chunks(50) {
            let txs: Vec<Vec<u8>> = chunk
                .iter()
                .map(|l| {
                    let key = SecretKey::from_seed(&support::digest(&format!("bls {l}")));
                    w.tx(l, vec![msg_register_bls_key(&addr(l), CHAIN_ID, &key)])
                })
                .collect();
            assert!(w.block(txs).response.tx_results.iter().all(|r| r.code == 0));
        }
        // Until the epoch's end starts the round.
        while w.block(vec![]).events("dkg_started").is_empty() {}
        let round = w
            .query::<q::Dkg>(pb::QueryDkgRequest { round: 0 })
            .round
            .unwrap();
        let (empty, _) = timed(&mut w, vec![]);
        let txs: Vec<Vec<u8>> = round
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let poly =
                    Polynomial::from_seed(round.threshold as usize, &(i as u64).to_be_bytes());
                let label = labels.iter().find(|l| addr(l) == m.address).unwrap();
                w.tx(label, vec![dkg_dealing(&round, &m.address, &poly, None)])
            })
            .collect();
        let bytes: usize = txs.iter().map(Vec::len).sum();
        let (dealt, block) = timed(&mut w, txs);
        assert!(block.response.tx_results.iter().all(|r| r.code == 0));
        while w.chain.height() < round.reveal_deadline {
            w.block(vec![]);
        }
        let (finalized, block) = timed(&mut w, vec![]);
        assert_eq!(block.events("dkg_completed").len(), 1);
        println!(
            "| {n} | {} / {} | {} B / {} KiB | {} | {} | {} |",
            round.total_slots,
            round.threshold,
            bytes / n,
            bytes / 1024,
            ms(dealt),
            ms(finalized),
            ms(empty)
        );
    }
}
