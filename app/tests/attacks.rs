//! The red-team suite: one test per known attack on work integrity, each running the attack
//! and asserting that it fails. (The work-integrity issue adds the rest; each test names the
//! hole it closes.)

mod common;
mod support;

use common::{key, min_gas_price, tx_fee};
use gonka_client::tx::msg_submit_work_batch;
use gonka_client::{msg_send, sign, GasFee, SignerData};
use gonka_inference::InferenceWrite;
use gonka_proto::inference::{StoredRecord, WorkRecord};
use gonka_proto::query::{cosmos::Simulate, Query};
use gonka_sdk::{BlockContext, Delta, MemoryState, Module};
use prost::Message;
use support::{addr, node_spec, register_ta, tx_events, work_record, Setup, World};
use tendermint_proto::v0_38::abci::ResponseCheckTx;

fn record(n: usize) -> StoredRecord {
    StoredRecord {
        record: Some(WorkRecord {
            inference_id: format!("{n:064x}"),
            executor_node: "node-0".into(),
            ..Default::default()
        }),
        executor_host: "gonka1host".into(),
        cost: "1".into(),
        ..Default::default()
    }
}

/// Rows the disputes sampler reads from committed state in a block that stores 3 records,
/// when the epoch already holds `stored` records sampled in earlier blocks.
fn rows_read_by_the_sampler(stored: usize) -> usize {
    let empty = MemoryState::default();
    let mut earlier = Delta::new(&empty);
    for n in 0..stored {
        earlier.put_record(&record(n));
    }
    earlier.take_new_records().unwrap();
    let committed = MemoryState::from_changes(earlier.into_parts().0);
    let mut block = Delta::new(&committed);
    for n in stored..stored + 3 {
        block.put_record(&record(n));
    }
    let ctx = BlockContext {
        chain_id: "attacks".into(),
        height: 7,
        time_seconds: 0,
        time_nanos: 0,
        block_hash: [7; 32],
    };
    committed.reset_reads();
    let sampler = gonka_disputes::Disputes;
    sampler.end_block(&ctx, &mut block).unwrap();
    sampler.begin_block(&ctx, &mut block).unwrap();
    committed.rows_read()
}

/// Attack: fill an epoch with work records so that every later block's FinalizeBlock does
/// more work (the sampler used to reload every record of the epoch in each `end_block`,
/// quadratic over an epoch). The sampler now drains x/inference's queue of the block's own
/// records: what it reads does not grow with the epoch.
#[test]
fn filling_an_epoch_with_records_does_not_make_later_blocks_read_more() {
    let small = rows_read_by_the_sampler(10);
    let full = rows_read_by_the_sampler(2_000);
    assert_eq!(
        full, small,
        "the sampler read {small} committed rows with 10 records in the epoch and {full} with 2,000"
    );
}

// ---------------------------------------------------------------------------------------
// Unpriced CheckTx work (issue 10, hole 9): every tx pays gas for its bytes, signature
// checks and state access, and cheap checks run before expensive ones.

const MODEL: &str = "bench/model";
/// The transfer agent of the gas tests; p0 hosts node n0 (key seed 10).
const TA: &str = "p2";

/// Three participants, alice funded, carol holding less than one fee, one priced model, the
/// default 100 records per batch; p2 registered as a transfer agent and p0's node n0.
fn gas_world() -> World {
    let mut setup = Setup::new(3, 1_000_000);
    setup.epoch_length = 1_000;
    setup.accounts.push(("carol".into(), common::MIN_FEE / 2));
    let mut world = World::with_genesis(setup, |state| {
        state["inference"] = serde_json::json!({
            "models": [{"id": MODEL, "price_per_token": "1", "min_vram_mib": 0}],
        });
    });
    let txs = vec![
        world.tx(TA, vec![register_ta(TA, "https://ta.example")]),
        world.tx(
            "p0",
            vec![gonka_client::msg_register_node(
                &addr("p0"),
                &node_spec("n0", &[MODEL], 0, 10),
            )],
        ),
    ];
    let block = world.block(txs);
    assert!(block.response.tx_results.iter().all(|r| r.code == 0));
    world
}

/// `count` records of alice's requests on n0 whose requester and executor signatures are
/// garbage: any node that checked them would refuse the batch for its signatures.
fn garbage_records(count: usize) -> Vec<WorkRecord> {
    (0..count)
        .map(|i| {
            let mut record = work_record("alice", &format!("g{i}"), MODEL, "n0", 10, (1, 1), 0);
            record.requester_signature = vec![0x5a; 64];
            record.executor_signature = vec![0xa5; 64];
            record
        })
        .collect()
}

/// A batch of `records` signed by `label` as if it were a transfer agent, at `sequence`
/// with account number `account_number`, paying the test fee.
fn batch_by(label: &str, account_number: u64, records: Vec<WorkRecord>) -> Vec<u8> {
    let signer = SignerData {
        chain_id: support::CHAIN_ID.into(),
        account_number,
        sequence: 0,
    };
    sign(
        key(label),
        vec![msg_submit_work_batch(&addr(label), records)],
        &signer,
        tx_fee(),
        "",
    )
    .unwrap()
}

/// Gas a CheckTx charged beyond the bytes of `tx`.
fn gas_beyond_bytes(check: &ResponseCheckTx, tx: &[u8]) -> u64 {
    let per_byte = gonka_auth::default_params().tx_size_cost_per_byte;
    u64::try_from(check.gas_used).unwrap() - tx.len() as u64 * per_byte
}

/// Attack: flood the mempool with full work batches from accounts that cannot pay, so every
/// node verifies ~200 ECDSA signatures per tx for nothing (record signatures used to be
/// verified while decoding, before the fee payer was even looked up). Now the ante finds
/// the account, sequence and fee first, and records are checked only after it, each
/// signature check charged as gas: a batch from a nonexistent account, or from one that
/// cannot pay its fee, is refused with the account's error, and what it cost beyond its
/// bytes is the same one or two state reads whether it carries 1 record or 100 — no record
/// signature was verified. The same garbage batch from the real transfer agent is refused
/// for its signatures, so the records would have failed had anyone checked them.
#[test]
fn a_batch_from_an_account_that_cannot_pay_is_refused_before_any_record_signature_check() {
    let mut world = gas_world();
    let max = gonka_inference::default_params().max_records_per_batch as usize;
    let carol_number = world.account(&addr("carol")).account_number;
    let sig_cost = gonka_auth::default_params().sig_verify_cost_secp256k1;
    let read_cost = gonka_auth::default_params().read_cost_flat;
    let state_before = world.raw_prefix(b"inference/");
    let carol_before = world.balance_of("carol");

    let mut refused = Vec::new();
    for (label, number, codespace, code) in [
        ("mallory", 0, "auth", 11),         // never funded: no account
        ("carol", carol_number, "bank", 4), // holds half a fee
    ] {
        let small = batch_by(label, number, garbage_records(1));
        let full = batch_by(label, number, garbage_records(max));
        let (small_check, full_check) = (
            world.chain.check_tx(small.clone()),
            world.chain.check_tx(full.clone()),
        );
        for check in [&small_check, &full_check] {
            assert_eq!(
                (check.codespace.as_str(), check.code),
                (codespace, code),
                "{label}: {}",
                check.log
            );
        }
        assert_eq!(
            gas_beyond_bytes(&full_check, &full),
            gas_beyond_bytes(&small_check, &small),
            "{label}: a batch of {max} records cost more than its bytes over a batch of 1"
        );
        assert!(
            gas_beyond_bytes(&full_check, &full) < 3 * read_cost,
            "{label}: {} gas beyond the bytes is more than two state reads",
            gas_beyond_bytes(&full_check, &full),
        );
        refused.push((full, codespace, code));
    }
    assert!(refused[0].0.len() > 30_000, "the batch is full-sized");

    // The same records from the registered transfer agent are checked, and fail.
    let from_ta = world.tx(
        TA,
        vec![msg_submit_work_batch(&addr(TA), garbage_records(max))],
    );
    let check = world.chain.check_tx(from_ta.clone());
    assert_eq!(
        (check.codespace.as_str(), check.code),
        ("inference", 16),
        "{}",
        check.log
    );
    assert!(gas_beyond_bytes(&check, &from_ta) > sig_cost);

    // In a block they change nothing either (the TA's refused batch pays its fee).
    let mut txs: Vec<Vec<u8>> = refused.iter().map(|(tx, _, _)| tx.clone()).collect();
    txs.push(from_ta);
    let block = world.block(txs);
    for (index, (_, codespace, code)) in refused.iter().enumerate() {
        let result = block.result(index);
        assert_eq!(
            (result.codespace.as_str(), result.code),
            (*codespace, *code)
        );
    }
    assert_eq!(block.result(2).code, 16);
    assert_eq!(world.raw_prefix(b"inference/"), state_before);
    assert_eq!(world.balance_of("carol"), carol_before);
    let mallory = world.chain.query(
        "/auth/account",
        gonka_proto::auth::QueryAccountRequest {
            address: addr("mallory"),
        }
        .encode_to_vec(),
    );
    assert_eq!(mallory.code, 11, "no account was created: {}", mallory.log);
}

/// The gas `tx` uses, by the `Simulate` query through the ABCI query path.
fn simulate(world: &World, tx: Vec<u8>) -> u64 {
    let request = cosmrs::proto::cosmos::tx::v1beta1::SimulateRequest {
        tx_bytes: tx,
        ..Default::default()
    };
    let response = world.chain.query(Simulate::PATH, request.encode_to_vec());
    assert_eq!(response.code, 0, "{}", response.log);
    <Simulate as Query>::Response::decode(response.value.as_ref())
        .unwrap()
        .gas_info
        .unwrap()
        .gas_used
}

/// Attack: do unlimited work on every node for one fee by sending a tx whose messages cost
/// far more than its gas limit pays for. The tx runs out of gas: it fails with the Cosmos
/// SDK's out-of-gas code (`sdk` 11), its fee and sequence stay paid, and its message changes
/// nothing.
#[test]
fn a_tx_out_of_gas_fails_with_sdk_11_pays_its_fee_and_changes_nothing_else() {
    let mut world = gas_world();
    let (alice, bob) = (addr("alice"), addr("bob"));
    let account = world.account(&alice);
    let signer = SignerData {
        chain_id: support::CHAIN_ID.into(),
        account_number: account.account_number,
        sequence: account.sequence,
    };
    let msgs = || vec![msg_send(&alice, &bob, 10)];
    let probe = sign(key("alice"), msgs(), &signer, GasFee::SIMULATION, "").unwrap();
    // The ante (bytes, account, fee, signature) fits; the send's own two balance writes
    // (over 4,000 gas) do not.
    let limit = simulate(&world, probe) - 2_000;
    let fee = GasFee::at_price(limit, &min_gas_price()).unwrap();
    let tx = sign(key("alice"), msgs(), &signer, fee, "").unwrap();
    let check = world.chain.check_tx(tx.clone());
    assert_eq!(
        (check.codespace.as_str(), check.code),
        ("sdk", 11),
        "{}",
        check.log
    );

    let before = [world.balance(&alice), world.balance(&bob)];
    let collector = gonka_bank::fee_collector_address();
    let collected = world.balance(&collector);
    let block = world.block(vec![tx]);
    let result = block.result(0);
    assert_eq!(
        (result.codespace.as_str(), result.code),
        ("sdk", 11),
        "{}",
        result.log
    );
    assert!(result.log.contains("out of gas"), "{}", result.log);
    assert_eq!(result.gas_wanted, limit as i64);
    assert!(result.gas_used > result.gas_wanted);
    assert_eq!(
        world.balance(&alice),
        before[0] - fee.amount,
        "the fee is paid"
    );
    assert_eq!(world.balance(&bob), before[1], "the send is dropped");
    assert_eq!(world.balance(&collector), collected + fee.amount);
    assert_eq!(world.account(&alice).sequence, account.sequence + 1);
    let transfers = tx_events(result, "transfer");
    assert_eq!(transfers.len(), 1, "only the fee moved: {transfers:?}");
    assert_eq!(transfers[0]["recipient"], collector);
}

/// Attack: get work done for less than it costs by paying a fee below gas limit × the
/// minimum gas price. The tx is refused (`auth` 9) in CheckTx and in a block, with a log
/// that names the fee, the limit, the price and the fee required, and it changes nothing.
#[test]
fn a_fee_below_gas_limit_times_min_gas_price_is_refused_with_the_required_fee() {
    let mut world = gas_world();
    let alice = addr("alice");
    let account = world.account(&alice);
    let limit = 300_000;
    let required = min_gas_price().fee_for(limit).unwrap();
    let signer = SignerData {
        chain_id: support::CHAIN_ID.into(),
        account_number: account.account_number,
        sequence: account.sequence,
    };
    let fee = GasFee {
        gas_limit: limit,
        amount: required - 1,
    };
    let tx = sign(
        key("alice"),
        vec![msg_send(&alice, &addr("bob"), 10)],
        &signer,
        fee,
        "",
    )
    .unwrap();
    let balance = world.balance(&alice);
    let check = world.chain.check_tx(tx.clone());
    let block = world.block(vec![tx]);
    for (codespace, code, log) in [
        (check.codespace.as_str(), check.code, &check.log),
        (
            block.result(0).codespace.as_str(),
            block.result(0).code,
            &block.result(0).log,
        ),
    ] {
        assert_eq!((codespace, code), ("auth", 9), "{log}");
        for part in [
            format!("fee {}ngnk", required - 1),
            format!("{required}ngnk"),
            format!("gas limit {limit}"),
            format!("minimum gas price {}ngnk", common::MIN_GAS_PRICE),
        ] {
            assert!(log.contains(&part), "{log:?} lacks {part:?}");
        }
    }
    assert_eq!(world.balance(&alice), balance);
    assert_eq!(world.account(&alice).sequence, account.sequence);
}
