//! Benchmark: in-process FinalizeBlock+Commit throughput of signed sends, next to the raw
//! secp256k1 verification rate on the same machine in the same run (the baseline: every
//! send costs at least one verification).
//!
//! Run: `cargo bench -p gonka-app --bench finalize`

// A benchmark measures wall-clock time; it is not part of the state machine.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use gonka_app::genesis::{app_state, GenesisAccount};
use gonka_app::harness::TestChain;
use gonka_client::keys::well_known_mnemonic;
use gonka_client::{msg_send, sign, GasFee, GasPrice, Key, SignerData};
use k256::ecdsa::signature::{Signer, Verifier};
use k256::ecdsa::{Signature, SigningKey};

const SENDERS: usize = 20;
const TXS_PER_SENDER: u64 = 100;
const BLOCK_TXS: usize = 500;
/// Gas limit of each send (one uses about 36,000).
const SEND_GAS: u64 = 100_000;

fn main() {
    let verify_rate = k256_verify_rate();
    println!("k256 verify:              {verify_rate:>10.0} verifications/s (baseline)");

    let keys: Vec<Key> = (0..SENDERS)
        .map(|i| Key::from_mnemonic(&well_known_mnemonic(&format!("bench-{i}"))).unwrap())
        .collect();
    let accounts: Vec<GenesisAccount> = keys
        .iter()
        .map(|k| GenesisAccount {
            address: k.address().into(),
            ngnk: 1_000_000_000_000,
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let price = GasPrice::parse(&gonka_auth::default_params().min_gas_price).unwrap();
    let fee = GasFee::at_price(SEND_GAS, &price).unwrap();
    let mut chain = TestChain::new(
        &dir.path().join("state.redb"),
        "bench",
        &app_state(&accounts, price),
    )
    .unwrap();
    chain.next_block(vec![]);

    // Sign everything up front: the benchmark measures the chain, not the client.
    let recipient = keys[0].address().to_string();
    let mut txs = Vec::new();
    for sequence in 0..TXS_PER_SENDER {
        for (number, key) in keys.iter().enumerate() {
            let signer = SignerData {
                chain_id: "bench".into(),
                account_number: number as u64,
                sequence,
            };
            txs.push(
                sign(
                    key,
                    vec![msg_send(key.address(), &recipient, 1)],
                    &signer,
                    fee,
                    "",
                )
                .unwrap(),
            );
        }
    }

    let started = Instant::now();
    let mut included = 0;
    for block in txs.chunks(BLOCK_TXS) {
        let response = chain.next_block(block.to_vec());
        assert!(
            response.tx_results.iter().all(|r| r.code == 0),
            "a bench tx failed"
        );
        included += block.len();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let tx_rate = included as f64 / elapsed;
    println!(
        "FinalizeBlock+Commit:     {tx_rate:>10.0} signed sends/s ({included} txs in {} blocks of {BLOCK_TXS}, {elapsed:.2} s)",
        included.div_ceil(BLOCK_TXS)
    );
    println!(
        "ratio to raw verify:      {:>10.1} %",
        100.0 * tx_rate / verify_rate
    );
}

fn k256_verify_rate() -> f64 {
    let key = SigningKey::from_slice(&[7u8; 32]).unwrap();
    let message = [42u8; 200];
    let signature: Signature = key.sign(&message);
    let verifying = *key.verifying_key();
    let rounds = 5_000;
    let started = Instant::now();
    for _ in 0..rounds {
        verifying
            .verify(std::hint::black_box(&message), &signature)
            .unwrap();
    }
    rounds as f64 / started.elapsed().as_secs_f64()
}
