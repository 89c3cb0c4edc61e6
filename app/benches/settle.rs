//! Benchmark: the chain's CPU per settled work record in committed batches (`MsgSettleBatch`,
//! x/settlement), in process (one validator's FinalizeBlock+Commit and CheckTx, no network).
//!
//! Run: `cargo bench -p gonka-app --bench settle` (every host validated at 10%, a new host's
//! rate; `SETTLE_BENCH_SAMPLE_PPM=10000` for hosts with a clean record, at 1%)
//!
//! Setup: a transfer agent, [`HOSTS`] hosts with BLS keys (host 0 also runs the ML node every
//! record names), [`REQUESTERS`] requesters with escrows and liquid funds; every
//! record is a real signed record (requester and executor signatures), signed before any
//! clock starts. For each batch size the bench builds batches of records spread round-robin
//! over requesters and hosts, has every host co-sign, and times:
//! - `finalize µs/record`: FinalizeBlock+Commit of one block holding every batch of that size,
//!   divided by its records (the goal is ≤ 10 µs);
//! - `check µs/record`: CheckTx of each batch tx (a validator runs both);
//! - the split of one batch's FinalizeBlock: `sig` (the hosts' fast-aggregate verification,
//!   timed alone), `decode` (the message's decoding and stateless checks, before and after
//!   the ante, timed alone) and `rest` (ante, escrow debits, batch write, commit: the
//!   remainder);
//! - on the transfer agent's side: building the tree and lines (`build µs/record`) and one
//!   host's co-signature (`cosign ms`);
//! - `sample µs/record`: the next (empty) block, whose `begin_block` draws the leaves to
//!   validate from those batches and demands them (default `leaf_sample_ppm`, 10%), per
//!   record;
//! - after the table, answering the samples: the transfer agent provides every sampled leaf
//!   (`MsgProvideLeaf`, up to 1,000 per block in txs within the size limit), each becoming a work record to
//!   validate: FinalizeBlock µs per leaf and per settled record. With `finalize` and
//!   `sample`, the chain's whole CPU per settled record on the honest path.
//!
//! The per-record path this replaced (`MsgSubmitWorkBatch`, each record's two secp256k1
//! signatures checked in CheckTx and FinalizeBlock) was this bench's baseline row until it
//! was removed; its last figures are in the README's benchmark section.

// A benchmark measures wall-clock time; it is not part of the state machine.
#![allow(clippy::disallowed_methods)]

use std::time::Instant;

use gonka_app::genesis::{GenesisAccount, GenesisConfig};
use gonka_app::harness::TestChain;
use gonka_bls_crypto::{fast_aggregate_verify, SecretKey};
use gonka_client::bls::{account_bls_key, msg_register_bls_key};
use gonka_client::keys::well_known_mnemonic;
use gonka_client::settlement::{
    cosign, msg_challenge_batch, msg_open_escrow, msg_provide_leaf, msg_settle_batch, Batch, Served,
};
use gonka_client::tx::{
    pack, signed_work_record, RequestTerms, WorkRecordInput, TX_MAX_MSGS, TX_MSG_BUDGET,
};
use gonka_client::{
    msg_register_node, msg_register_transfer_agent, msg_stake, node_key_proof, sign, Any, GasFee,
    GasPrice, Key, NodeSpec, SignerData,
};
use gonka_proto::inference::{Model, WorkRecord};
use gonka_proto::settlement::msg_challenge_batch::Kind;
use gonka_proto::signing::batch_sign_bytes;
use gonka_sdk::Module;

const CHAIN: &str = "bench";
const MODEL: &str = "bench/model";
const HOSTS: usize = 4;
const REQUESTERS: usize = 100;
const SIZES: [usize; 3] = [100, 1_000, 10_000];
/// Records per batch size (rounded to whole batches).
const RECORDS_PER_SIZE: usize = 20_000;
const GAS: u64 = 50_000_000;
const FUNDS: u128 = 1_000_000_000_000_000;

struct Party {
    key: Key,
    bls: SecretKey,
}

impl Party {
    fn new(label: &str) -> Party {
        let key = Key::from_mnemonic(&well_known_mnemonic(label)).unwrap();
        let bls = account_bls_key(&key);
        Party { key, bls }
    }

    fn address(&self) -> String {
        self.key.address().to_string()
    }
}

struct Bench {
    chain: TestChain,
    fee: GasFee,
    /// Next sequence per account number.
    sequences: Vec<u64>,
}

impl Bench {
    fn tx(&mut self, account_number: u64, key: &Key, msgs: Vec<Any>) -> Vec<u8> {
        let sequence = &mut self.sequences[account_number as usize];
        let signer = SignerData {
            chain_id: CHAIN.into(),
            account_number,
            sequence: *sequence,
        };
        *sequence += 1;
        sign(key, msgs, &signer, self.fee, "").unwrap()
    }

    fn block(&mut self, txs: Vec<Vec<u8>>) -> f64 {
        let (elapsed, codes) = self.block_codes(txs);
        for (code, log) in codes {
            assert_eq!(code, 0, "a bench tx failed: {log}");
        }
        elapsed
    }

    /// Seconds of FinalizeBlock+Commit, and each tx's (code, log).
    fn block_codes(&mut self, txs: Vec<Vec<u8>>) -> (f64, Vec<(u32, String)>) {
        let started = Instant::now();
        let response = self.chain.next_block(txs);
        let elapsed = started.elapsed().as_secs_f64();
        let codes = response
            .tx_results
            .iter()
            .map(|r| (r.code, r.log.clone()))
            .collect();
        (elapsed, codes)
    }
}

fn node_key() -> k256::ecdsa::SigningKey {
    k256::ecdsa::SigningKey::from_slice(&[10; 32]).unwrap()
}

/// Record `n` for `ta`, by `requester`, executed on node `n0` of `host`.
fn record(ta: &str, requester: &Key, host: &str, n: usize) -> WorkRecord {
    let input = WorkRecordInput {
        terms: RequestTerms {
            chain_id: CHAIN.into(),
            body_hash: gonka_proto::signing::body_hash(format!("prompt {n}").as_bytes()),
            // Near the harness's block times, as a live transfer agent's requests are.
            timestamp: gonka_app::harness::GENESIS_TIME as u64,
            nonce: format!("n{n}"),
            commission: 1,
            transfer_agent: ta.into(),
            model: MODEL.into(),
            max_price_per_token: 1,
            max_completion_tokens: 20,
            max_prompt_tokens: 1 << 20,
        },
        response_hash: [7; 32],
        salt: [9; 32],
        scored: None,
        prompt_tokens: 10,
        completion_tokens: 20,
        executor_node: "n0".into(),
        host: host.into(),
    };
    signed_work_record(requester, &node_key(), &input).unwrap()
}

fn main() {
    let ta = Party::new("bench-ta");
    let hosts: Vec<Party> = (0..HOSTS)
        .map(|i| Party::new(&format!("bench-host-{i}")))
        .collect();
    let requesters: Vec<Party> = (0..REQUESTERS)
        .map(|i| Party::new(&format!("bench-requester-{i}")))
        .collect();
    // Account numbers follow the genesis order: ta, hosts, requesters.
    let everyone: Vec<&Party> = std::iter::once(&ta)
        .chain(&hosts)
        .chain(&requesters)
        .collect();
    let price = GasPrice::parse(&gonka_auth::default_params().min_gas_price).unwrap();
    // Every host's validation rate (x/disputes' min and max): the default 10% is a new
    // host's; hosts with a clean record are checked at 1%.
    let sample_ppm: u64 = std::env::var("SETTLE_BENCH_SAMPLE_PPM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let config = GenesisConfig {
        accounts: everyone
            .iter()
            .map(|p| GenesisAccount {
                address: p.address(),
                ngnk: FUNDS,
            })
            .collect(),
        min_gas_price: Some(price),
        epoch_length: Some(1_000_000),
        models: vec![Model {
            id: MODEL.into(),
            price_per_token: "1".into(),
            ..Model::default()
        }],
        disputes_params: Some(gonka_proto::disputes::Params {
            min_sample_ppm: sample_ppm,
            max_sample_ppm: sample_ppm,
            ..gonka_disputes::default_params()
        }),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let chain = TestChain::new(&dir.path().join("state.redb"), CHAIN, &config.app_state()).unwrap();
    let mut bench = Bench {
        chain,
        fee: GasFee::at_price(GAS, &price).unwrap(),
        sequences: vec![0; everyone.len()],
    };
    let numbers: Vec<u64> = (0..everyone.len() as u64).collect();
    let (ta_address, host_addresses) = (
        ta.address(),
        hosts.iter().map(Party::address).collect::<Vec<_>>(),
    );

    // Stake the transfer agent and the hosts; register them, the node and the BLS keys; open
    // every escrow.
    let mut txs = Vec::new();
    for (i, party) in everyone.iter().enumerate().take(1 + HOSTS) {
        let msg = msg_stake(&party.address(), 1_000_000_000_000, &format!("p{i}"), None);
        txs.push(bench.tx(numbers[i], &party.key, vec![msg]));
    }
    bench.block(txs);
    let mut txs = vec![bench.tx(
        0,
        &ta.key,
        vec![msg_register_transfer_agent(
            &ta_address,
            "https://ta.example",
            &ta.key.public_key().to_bytes(),
        )],
    )];
    for (i, host) in hosts.iter().enumerate() {
        let mut msgs = vec![msg_register_bls_key(&host.address(), CHAIN, &host.bls)];
        if i == 0 {
            let key = node_key();
            msgs.push(msg_register_node(
                &host.address(),
                &NodeSpec {
                    node_id: "n0".into(),
                    models: vec![MODEL.into()],
                    vram_mib: 0,
                    bandwidth_mbps: 1_000,
                    max_concurrency: 4,
                    endpoint: "http://127.0.0.1:9000".into(),
                    pubkey: key
                        .verifying_key()
                        .to_encoded_point(true)
                        .as_bytes()
                        .to_vec(),
                    key_proof: node_key_proof(&key, CHAIN, &host.address(), "n0"),
                },
            ));
        }
        txs.push(bench.tx(numbers[1 + i], &host.key, msgs));
    }
    for (i, requester) in requesters.iter().enumerate() {
        let msg = msg_open_escrow(&requester.address(), &ta_address, FUNDS / 2, 1_000_000);
        txs.push(bench.tx(numbers[1 + HOSTS + i], &requester.key, vec![msg]));
    }
    bench.block(txs);

    println!("chain CPU per settled record, one validator in process ({HOSTS} hosts, {REQUESTERS} requesters, validation rate {sample_ppm} ppm)");
    println!(
        "{:<28} {:>8} {:>8} {:>12} {:>12} {:>9} {:>9} {:>9} {:>12} {:>10} {:>10}",
        "path",
        "batch",
        "records",
        "finalize µs",
        "check µs",
        "sig ms",
        "decode ms",
        "rest ms",
        "build µs/rec",
        "cosign ms",
        "sample µs"
    );

    let mut next_record = 0;
    let mut number = 0;
    let mut built: Vec<Batch> = Vec::new();
    for size in SIZES {
        let count = RECORDS_PER_SIZE.div_ceil(size);
        let mut build_seconds = 0.0;
        let mut cosign_seconds = 0.0;
        let mut txs = Vec::new();
        let mut one_batch = None;
        for _ in 0..count {
            let served: Vec<Served> = (0..size)
                .map(|i| {
                    next_record += 1;
                    let host = &host_addresses[i % HOSTS];
                    let requester = &requesters[next_record % REQUESTERS].key;
                    Served {
                        record: record(&ta_address, requester, host, next_record),
                        host: host.clone(),
                        cost: 30,
                        work_per_token: 0,
                    }
                })
                .collect();
            number += 1;
            let started = Instant::now();
            let batch = Batch::build(&ta_address, number, served).unwrap();
            build_seconds += started.elapsed().as_secs_f64();
            let started = Instant::now();
            let signatures: Vec<_> = hosts
                .iter()
                .map(|h| cosign(&h.bls, CHAIN, &batch.msg))
                .collect();
            cosign_seconds += started.elapsed().as_secs_f64() / HOSTS as f64;
            let msg = batch.signed(&signatures);
            let any = msg_settle_batch(&msg);
            one_batch.get_or_insert((msg, any.clone()));
            built.push(batch);
            txs.push(bench.tx(0, &ta.key, vec![any]));
        }
        let records = count * size;
        let check = check_per_record(&bench, &txs, records);
        let block = bench.block(txs);
        let sample = bench.block(Vec::new());
        let (msg, any) = one_batch.unwrap();
        let sig = time_ms(200, || {
            let keys: Vec<_> = hosts.iter().map(|h| h.bls.public_key()).collect();
            let signature = gonka_bls_crypto::Signature::from_bytes(&msg.host_signature).unwrap();
            assert!(fast_aggregate_verify(
                &keys,
                &batch_sign_bytes(CHAIN, &msg),
                &signature
            ));
        });
        let decode = time_ms(1_000, || {
            let any = gonka_sdk::Any {
                type_url: any.type_url.clone(),
                value: any.value.clone(),
            };
            assert!(gonka_settlement::Settlement
                .decode_msg(&any)
                .unwrap()
                .is_ok());
            assert!(gonka_settlement::check_batch(&any.value).is_ok());
        });
        let per_batch_ms = block / count as f64 * 1e3;
        println!(
            "{:<28} {:>8} {:>8} {:>12.3} {:>12.3} {:>9.3} {:>9.3} {:>9.3} {:>12.2} {:>10.2} {:>10.3}",
            "MsgSettleBatch",
            size,
            records,
            block / records as f64 * 1e6,
            check,
            sig,
            decode,
            per_batch_ms - sig - decode,
            build_seconds / records as f64 * 1e6,
            cosign_seconds / count as f64 * 1e3,
            sample / records as f64 * 1e6,
        );
    }

    // The cost of challenging one leaf of the last (largest) batch: an honest leaf, so the
    // chain does every check (path, requester signature, receipt) and refuses it.
    let batch = built.last().expect("a batch was built");
    let proof = batch.leaf_proof(0).unwrap();
    let depth = proof.siblings.len();
    let challenger = &requesters[0];
    let tx = bench.tx(
        numbers[1 + HOSTS],
        &challenger.key,
        vec![msg_challenge_batch(
            &challenger.address(),
            number,
            Kind::InvalidLeaf(proof),
        )],
    );
    let bytes = tx.len();
    let empty = (0..5).map(|_| bench.block_codes(vec![]).0).sum::<f64>() / 5.0;
    let (with_challenge, codes) = bench.block_codes(vec![tx]);
    assert_eq!(
        codes[0].0, 14,
        "an honest leaf's challenge fails: {}",
        codes[0].1
    );
    println!();
    println!(
        "challenge of one leaf of a {}-record batch (proof depth {depth}): {bytes} tx bytes; block with it {:.3} ms vs empty block {:.3} ms (+{:.3} ms)",
        batch.leaves.len(),
        with_challenge * 1e3,
        empty * 1e3,
        (with_challenge - empty) * 1e3
    );

    // Answering the samples: the transfer agent provides every sampled leaf of every batch
    // (up to 1,000 per block, in txs within the size limit, as its answerer sends them);
    // each becomes a work record.
    let settled_records = SIZES.len() * RECORDS_PER_SIZE;
    let (mut provided, mut provide_seconds) = (0usize, 0.0);
    loop {
        let open = open_demands(&bench, &ta_address, 10 * 100);
        if open.is_empty() {
            break;
        }
        let msgs = open
            .iter()
            .map(|&(id, index)| {
                let proof = built[id as usize - 1].leaf_proof(index).unwrap();
                msg_provide_leaf(&ta_address, id, proof)
            })
            .collect();
        let txs: Vec<Vec<u8>> = pack(msgs, TX_MAX_MSGS, TX_MSG_BUDGET)
            .into_iter()
            .map(|msgs| bench.tx(0, &ta.key, msgs))
            .collect();
        provided += open.len();
        provide_seconds += bench.block(txs);
    }
    println!();
    println!(
        "answering the samples: {provided} sampled leaves of {settled_records} settled records provided: {:.1} µs of FinalizeBlock per leaf, {:.3} µs per settled record",
        provide_seconds / provided.max(1) as f64 * 1e6,
        provide_seconds / settled_records as f64 * 1e6
    );
}

/// Up to `limit` open leaf demands on `agent`'s batches, as (batch id, index), read page by
/// page from `/settlement/demands`.
fn open_demands(bench: &Bench, agent: &str, limit: usize) -> Vec<(u64, u64)> {
    let mut open = Vec::new();
    let mut start = (0, 0);
    while open.len() < limit {
        let request = gonka_proto::settlement::QueryDemandsRequest {
            transfer_agent: agent.to_string(),
            limit: 100,
            start_batch_id: start.0,
            start_index: start.1,
        };
        let response = bench.chain.query(
            "/settlement/demands",
            prost::Message::encode_to_vec(&request),
        );
        let page = <gonka_proto::settlement::QueryDemandsResponse as prost::Message>::decode(
            response.value.as_ref(),
        )
        .unwrap()
        .demands;
        let full = page.len() == 100;
        open.extend(page.iter().map(|d| (d.batch_id, d.index)));
        match page.last() {
            Some(last) if full => start = (last.batch_id, last.index + 1),
            _ => break,
        }
    }
    open
}

/// Mean milliseconds of `f` over `rounds`.
fn time_ms(rounds: u32, mut f: impl FnMut()) -> f64 {
    let started = Instant::now();
    for _ in 0..rounds {
        f();
    }
    started.elapsed().as_secs_f64() * 1e3 / f64::from(rounds)
}

/// CheckTx µs per record over `txs` (run against the check state, which they do not change
/// for the next block).
fn check_per_record(bench: &Bench, txs: &[Vec<u8>], records: usize) -> f64 {
    let started = Instant::now();
    for tx in txs {
        let response = bench.chain.check_tx(tx.clone());
        assert_eq!(
            response.code, 0,
            "CheckTx refused a bench tx: {}",
            response.log
        );
    }
    started.elapsed().as_secs_f64() / records as f64 * 1e6
}
