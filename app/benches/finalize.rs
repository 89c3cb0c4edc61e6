//! Benchmark: in-process FinalizeBlock+Commit throughput of signed sends, next to the raw
//! secp256k1 verification rate on the same machine in the same run (the baseline: every
//! send costs at least one verification): cold (signatures checked in FinalizeBlock), and
//! after the txs went through CheckTx, as on a validator, whose signature cache spares
//! FinalizeBlock the checks.
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

    // Cold: every signature is checked in FinalizeBlock (none was seen in CheckTx).
    gonka_app::sig_cache::clear();
    let (mut chain, txs, _dir) = signed_sends("cold");
    let cold = finalize_all(&mut chain, &txs);
    println!(
        "FinalizeBlock+Commit:     {cold:>10.0} signed sends/s, signatures checked here ({} txs in blocks of {BLOCK_TXS})",
        txs.len()
    );
    println!(
        "ratio to raw verify:      {:>10.1} %",
        100.0 * cold / verify_rate
    );

    // Warm: the node checked every tx in CheckTx first, as a validator's mempool does, so
    // FinalizeBlock finds each signature already verified.
    gonka_app::sig_cache::clear();
    let (mut chain, txs, _dir) = signed_sends("warm");
    let started = Instant::now();
    for tx in &txs {
        let response = chain.check_tx(tx.clone());
        assert_eq!(response.code, 0, "{}", response.log);
    }
    let check = txs.len() as f64 / started.elapsed().as_secs_f64();
    let warm = finalize_all(&mut chain, &txs);
    println!("CheckTx:                  {check:>10.0} txs/s (each signature checked once here)");
    println!(
        "FinalizeBlock+Commit:     {warm:>10.0} signed sends/s after CheckTx ({:.2}x the cold rate)",
        warm / cold
    );
}

/// A fresh chain of `SENDERS` funded accounts and their pre-signed sends (signed up front:
/// the benchmark measures the chain, not the client); `label` makes the txs' bytes differ
/// between runs.
fn signed_sends(label: &str) -> (TestChain, Vec<Vec<u8>>, tempfile::TempDir) {
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
    let recipient = Key::from_mnemonic(&well_known_mnemonic(&format!("bench-recipient-{label}")))
        .unwrap()
        .address()
        .to_string();
    let mut txs = Vec::new();
    for sequence in 0..TXS_PER_SENDER {
        for (number, key) in keys.iter().enumerate() {
            let signer = SignerData {
                chain_id: "bench".into(),
                account_number: number as u64,
                sequence,
            };
            let send = msg_send(key.address(), &recipient, 1);
            txs.push(sign(key, vec![send], &signer, fee, "").unwrap());
        }
    }
    (chain, txs, dir)
}

/// FinalizeBlock+Commit of `txs` in blocks of `BLOCK_TXS`: signed sends per second.
fn finalize_all(chain: &mut TestChain, txs: &[Vec<u8>]) -> f64 {
    let started = Instant::now();
    for block in txs.chunks(BLOCK_TXS) {
        let response = chain.next_block(block.to_vec());
        assert!(
            response.tx_results.iter().all(|r| r.code == 0),
            "a bench tx failed"
        );
    }
    txs.len() as f64 / started.elapsed().as_secs_f64()
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
